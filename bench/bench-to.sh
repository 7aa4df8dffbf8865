#!/bin/sh
# bench/bench-to.sh OUT FALCON_BENCH [ARGS...]: run the benchmark with its
# JSON going to OUT the way the library writes its outputs (README, "What a
# run guarantees about your files"): OUT is checked first (a directory, a
# device or a symlink to one is refused; a symlink to a file is followed,
# never replaced); the JSON goes to a temporary beside it, removed if the
# run fails or is stopped; OUT is replaced only by a run that measured at
# least one case (a filter that matches nothing keeps the earlier file).
set -u
out=$1
shift
target=$out
if [ -L "$out" ]; then
    target=$(readlink -f -- "$out") && [ -e "$target" ] || { echo "make bench: '$out': is a symlink to nothing that exists" >&2; exit 2; }
fi
if [ -e "$target" ] && [ ! -f "$target" ]; then
    echo "make bench: '$out': exists and is not a regular file (a directory, device or pipe): it is never replaced" >&2
    exit 2
fi
mkdir -p -- "$(dirname -- "$target")" || exit 2
tmp=$(mktemp -- "$target.tmp-XXXXXX") || { echo "make bench: cannot create a temporary beside '$out'" >&2; exit 2; }
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
"$@" --benchmark_out_format=json --benchmark_out="$tmp" || exit $?
if ! grep -q '"run_type"' "$tmp"; then
    echo "make bench: no case ran (does --benchmark_filter match any?): '$out' kept as it was" >&2
    exit 1
fi
chmod 0644 "$tmp" && mv -f -- "$tmp" "$target" && echo "wrote $out"
