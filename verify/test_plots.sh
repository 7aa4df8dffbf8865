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

for mode in fail killed empty svgfail; do
    echo "old png" > d/bench-compare.png
    echo "old svg" > d/bench-compare.svg
    rc=0; plot $mode || rc=$?
    if [ $rc -ne 0 ] && [ "$(cat d/bench-compare.png)" = "old png" ] && [ "$(cat d/bench-compare.svg)" = "old svg" ]; then
        ok "gnuplot $mode: the earlier pictures stay (status $rc)"
    else bad "gnuplot $mode" "status $rc, png '$(cat d/bench-compare.png)', svg '$(cat d/bench-compare.svg)'"; fi
    left=$(ls -A d | grep -v '^compare.dat$\|^bench-compare.png$\|^bench-compare.svg$' || true)
    [ -z "$left" ] && ok "gnuplot $mode: nothing else left in the folder" || bad "gnuplot $mode" "left: $left"
done
rc=0; plot good || rc=$?
if [ $rc -eq 0 ] && [ "$(cat d/bench-compare.png)" = "new png" ] && [ "$(cat d/bench-compare.svg)" = "new svg" ]; then
    ok "gnuplot good: both formats replaced"
else bad "gnuplot good" "status $rc, png '$(cat d/bench-compare.png)'; $(tail -3 good.out)"; fi
[ -z "$(ls -A d | grep plot-all || true)" ] && ok "good run: no temporary left" || bad "good run" "$(ls -A d)"
test_end
