#!/bin/bash
# plots/plot-all.sh replaces a picture only with a complete one (make check).
# A stand-in gnuplot on PATH plays each failure: it writes half a picture and
# fails, it is killed half-way, it exits 0 having written nothing. The
# earlier picture must stay byte for byte, no temporary may be left, and the
# script must say it failed; a good run replaces both formats.
#
#   verify/test_plots.sh
set -eu
. "$(dirname "$0")/lib.sh"
test_workdir
ROOT=$(cd "$HERE/.." && pwd)

mkdir bin d
# The stand-in: reads out= and fmt= from its -e argument and acts on $MODE.
cat > bin/gnuplot <<'SH'
#!/bin/sh
out=$(printf '%s\n' "$2" | sed -n "s/.*out='\([^']*\)'.*/\1/p")
fmt=$(printf '%s\n' "$2" | sed -n "s/.*fmt='\([^']*\)'.*/\1/p")
f=$out/bench-compare.$fmt
case $MODE in
good) echo "new $fmt" > "$f" ;;
fail) echo "half" > "$f"; echo "gnuplot: error" >&2; exit 1 ;;
killed) echo "half" > "$f"; kill -9 $$ ;;
empty) : ;;
svgfail) if [ "$fmt" = svg ]; then exit 1; fi; echo "new $fmt" > "$f" ;;
esac
SH
chmod +x bin/gnuplot
printf '# a b\n' > d/compare.dat
plot() { (cd "$ROOT" && MODE=$1 PATH="$WORK/bin:$PATH" FALCON=/nonexistent sh plots/plot-all.sh "$WORK/d" /nonexistent) \
         > "$1.out" 2>&1; }
# only_left NAME PATTERN: d holds nothing but the names grep -v PATTERN drops.
only_left() {
    local left
    left=$(ls -A d | grep -v "$2" || true)
    [ -z "$left" ] && ok "$1" || bad "$1" "left: $left"
}

for mode in fail killed empty svgfail; do
    echo "old png" > d/bench-compare.png
    echo "old svg" > d/bench-compare.svg
    rc=0; plot $mode || rc=$?
    if [ $rc -ne 0 ] && [ "$(cat d/bench-compare.png)" = "old png" ] && [ "$(cat d/bench-compare.svg)" = "old svg" ]; then
        ok "gnuplot $mode: the earlier pictures stay (status $rc)"
    else bad "gnuplot $mode" "status $rc, png '$(cat d/bench-compare.png)', svg '$(cat d/bench-compare.svg)'"; fi
    only_left "gnuplot $mode: nothing else left in the folder" '^compare.dat$\|^bench-compare.png$\|^bench-compare.svg$'
done
rc=0; plot good || rc=$?
if [ $rc -eq 0 ] && [ "$(cat d/bench-compare.png)" = "new png" ] && [ "$(cat d/bench-compare.svg)" = "new svg" ]; then
    ok "gnuplot good: both formats replaced"
else bad "gnuplot good" "status $rc, png '$(cat d/bench-compare.png)'; $(tail -3 good.out)"; fi
only_left "good run: no temporary left" '^compare.dat$\|^bench-compare.png$\|^bench-compare.svg$'

# A symlink or a folder where a picture goes is refused, never replaced
# or written through; the link, its target and the folder stay as they were.
mkdir elsewhere
echo mine > elsewhere/bench-compare.png
echo "old svg" > d/bench-compare.svg
for kind in file-link dir-link dir; do
    rm -rf d/bench-compare.png
    case $kind in
    file-link) ln -s ../elsewhere/bench-compare.png d/bench-compare.png ;;
    dir-link) ln -s ../elsewhere d/bench-compare.png ;;
    dir) mkdir d/bench-compare.png ;;
    esac
    rc=0; plot good || rc=$?
    if [ $rc -ne 0 ] && [ "$(cat elsewhere/bench-compare.png)" = mine ] && [ "$(ls elsewhere)" = bench-compare.png ] &&
       [ "$(cat d/bench-compare.svg)" = "old svg" ] &&
       { [ $kind = dir ] && [ -d d/bench-compare.png ] && [ -z "$(ls -A d/bench-compare.png)" ] ||
         [ -L d/bench-compare.png ]; } && grep -q refused good.out; then
        ok "picture path a $kind: refused (status $rc), nothing changed"
    else bad "picture path a $kind" "status $rc; $(ls -l d elsewhere | tr '\n' ' '); $(tail -2 good.out)"; fi
    only_left "picture path a $kind: no temporary left" '^compare.dat$\|^bench-compare.png$\|^bench-compare.svg$'
done
rm -rf d/bench-compare.png

# The comparison's table and summary change together. A stand-in falcon
# writes both after a pause; the script, signalled while it runs, keeps
# the earlier pair and leaves no temporary; left alone, it replaces both.
cat > bin/falcon <<'SH'
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
sleep "${PAUSE:-0}"
echo "new dat" > "$out"
echo "new txt"
SH
chmod +x bin/falcon
echo '{}' > d/bench.json
echo '{}' > other.json
# compare_plot PAUSE: plot-all.sh with the stand-in falcon, exec'd, so that
# in a subshell run in the background $! is the script's own process.
compare_plot() {
    cd "$ROOT" && exec env MODE=good PAUSE="$1" PATH="$WORK/bin:$PATH" FALCON="$WORK/bin/falcon" \
        COMPARE="$WORK/other.json" sh plots/plot-all.sh "$WORK/d" /nonexistent
}
compare_run() { (compare_plot "$1") > compare.out 2>&1; }
echo "old dat" > d/compare.dat
echo "old txt" > d/compare.txt
(compare_plot 2) > compare.out 2>&1 & pid=$!
sleep 0.5
kill -TERM $pid
rc=0; wait $pid || rc=$?
if [ $rc -ne 0 ] && [ "$(cat d/compare.dat)" = "old dat" ] && [ "$(cat d/compare.txt)" = "old txt" ]; then
    ok "compare signalled: the earlier table and summary stay (status $rc)"
else bad "compare signalled" "status $rc, dat '$(cat d/compare.dat)', txt '$(cat d/compare.txt)'"; fi
only_left "compare signalled: no temporary left" '^compare.dat$\|^compare.txt$\|^bench'
rc=0; compare_run 0 || rc=$?
if [ "$(cat d/compare.dat)" = "new dat" ] && [ "$(cat d/compare.txt)" = "new txt" ]; then
    ok "compare: table and summary replaced"
else bad "compare" "status $rc, dat '$(cat d/compare.dat)', txt '$(cat d/compare.txt)'; $(tail -3 compare.out)"; fi
ln -sf ../elsewhere/bench-compare.png d/compare.txt
rc=0; compare_run 0 || rc=$?
if [ $rc -ne 0 ] && [ -L d/compare.txt ] && [ "$(cat elsewhere/bench-compare.png)" = mine ] &&
   [ "$(cat d/compare.dat)" = "new dat" ]; then
    ok "compare summary path a symlink: refused (status $rc), nothing changed"
else bad "compare summary path a symlink" "status $rc; $(tail -2 compare.out)"; fi
test_end
