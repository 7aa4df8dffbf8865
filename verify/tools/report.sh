#!/bin/sh
# Writes report/report.md from the pieces the main job produced.
# Usage: report.sh DIR GATE_STATUS
dir=$1
status=$2
{
    echo "# Falcon suite report"
    echo
    echo "Generated $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(nproc) cores, revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
    echo
    echo "## Correctness gate (quick profile)"
    echo
    if [ "$status" -eq 0 ]; then echo "Result: **pass**"; else echo "Result: **FAIL** (exit status $status)"; fi
    echo
    echo "Errors are normwise relative errors in units of roundoff u of each precision; max/thr is the largest"
    echo "ratio of an error to its threshold (below 1 passes)."
    echo
    echo '```'
    sed -n '/^backend/,$p' "$dir/verify.txt"
    echo '```'
} > "$dir/report.md"
echo "wrote $dir/report.md"
