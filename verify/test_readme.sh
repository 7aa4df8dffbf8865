#!/bin/bash
# The README as its reader takes it:
#
#   verify/test_readme.sh build/falcon      (PYTHON: a python3 with numpy;
#                                            default /usr/bin/python3)
#
# - at most 350 lines, with its sections in this order: Quick start, Check
#   your own kernel, Reading the results, The command-line tool, The
#   library, Python, Build and test (one sitting; the long forms live in
#   docs/ and CONTRIBUTING.md);
# - every relative link of the README, CONTRIBUTING.md and docs/*.md names
#   a file of the tree;
# - the quick start (the ```sh block after its "quick start" marker) runs
#   as written, its `make` line excepted, in an empty directory whose
#   build/ is the build and examples/ the tree's. First with a python3
#   without numpy (PYTHON run isolated, -I -S, which leaves out the
#   packages' folders), first in PATH: the chain must stop at the example's
#   one-line hint, with no traceback and before falcon runs. Then with
#   PYTHON first in PATH: it must print "error: X u" with X < 100.
# This test picks its python3s itself on purpose: the quick start must work
# with whatever python3 a reader's PATH gives, and say so when it cannot.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_readme.sh path/to/falcon"
ROOT=$(cd "$HERE/.." && pwd)
README=$ROOT/README.md
PYTHON=${PYTHON:-/usr/bin/python3}

# ---- length and sections ----
lines=$(wc -l < "$README")
if [ "$lines" -le 350 ]; then ok "README: $lines lines (at most 350)"
else bad length "README has $lines lines, more than 350: move the long forms to docs/"; fi

want=("Quick start" "Check your own kernel" "Reading the results" "The command-line tool"
      "The library" "Python" "Build and test")
mapfile -t have < <(sed -n 's/^## //p' "$README")
i=0
for h in "${have[@]}"; do
    if [ "$i" -lt "${#want[@]}" ] && [ "$h" = "${want[$i]}" ]; then i=$((i + 1)); fi
done
if [ "$i" -eq "${#want[@]}" ]; then ok "README: sections in order (${want[*]})"
else bad sections "'${want[$i]}' missing or out of order; the README has: ${have[*]}"; fi

# ---- relative links ----
nlinks=0 nbroken=0
for f in "$README" "$ROOT/CONTRIBUTING.md" "$ROOT"/docs/*.md; do
    dir=$(dirname "$f")
    while IFS= read -r target; do
        nlinks=$((nlinks + 1))
        [ -e "$dir/${target%%#*}" ] || { nbroken=$((nbroken + 1)); bad link "${f#"$ROOT"/}: ($target) names no file"; }
    done < <(grep -o '](\([^)]*\))' "$f" | sed 's/^](//; s/)$//' | grep -v '^[a-z]*:\|^#' || true)
done
if [ "$nbroken" -eq 0 ]; then ok "$nlinks relative links name files of the tree"; fi

# ---- the quick start ----
awk 'index($0, "quick start:") { armed = 1; next }
     armed && $0 == "```sh" { inside = 1; next }
     inside && $0 == "```" { exit }
     inside { print }' "$README" | grep -v '^make' > quickstart.sh || true
# qs_dir NAME: an empty folder with the build and the examples in place.
qs_dir() { mkdir "$1" && ln -s "$(dirname "$FALCON")" "$1/build" && ln -s "$ROOT/examples" "$1/examples"; }

if [ "$(wc -l < quickstart.sh)" -lt 4 ]; then
    bad quickstart "no quick start block (a \`\`\`sh block after a 'quick start:' marker) in README.md"
fi

mkdir nonumpy && printf '#!/bin/sh\nexec %s -I -S "$@"\n' "$PYTHON" > nonumpy/python3 && chmod +x nonumpy/python3
if nonumpy/python3 -c 'import numpy' 2>/dev/null; then
    echo "skip quick start without numpy: $PYTHON -I -S still imports numpy"
else
    qs_dir qs-nonumpy
    st=0; (cd qs-nonumpy && PATH="$WORK/nonumpy:$PATH" bash ../quickstart.sh > out.txt 2>&1) || st=$?
    out=$(cat qs-nonumpy/out.txt)
    if [ "$st" -ne 0 ] && grep -q '^numpy is missing for .*: pip install numpy' <<<"$out" &&
       ! grep -q Traceback <<<"$out" && [ "$(wc -l <<<"$out")" -eq 1 ] && [ ! -e qs-nonumpy/out.npy ]; then
        ok "quick start without numpy: status $st, one line: $out"
    else
        bad quickstart-nonumpy "status $st, falcon ran: $([ -e qs-nonumpy/out.npy ] && echo yes || echo no); output: $(head -5 <<<"$out" | tr '\n' ' ')"
    fi
fi

if "$PYTHON" -c 'import numpy' 2>/dev/null; then
    qs_dir qs && mkdir pybin && ln -s "$PYTHON" pybin/python3
    st=0; (cd qs && PATH="$WORK/pybin:$PATH" bash ../quickstart.sh > out.txt 2>&1) || st=$?
    err=$(sed -n 's/^error: \([0-9.]*\) u$/\1/p' qs/out.txt)
    if [ "$st" -eq 0 ] && [ -n "$err" ] && awk -v e="$err" 'BEGIN { exit !(e < 100) }'; then
        ok "quick start runs as written: error $err u"
    else
        bad quickstart "status $st; no 'error: X u' line with X < 100: $(tail -5 qs/out.txt | tr '\n' ' ')"
    fi
else
    echo "skip quick start with numpy: $PYTHON has no numpy (make deps installs python3-numpy)"
fi

test_end
