#!/bin/bash
# plots/plot-all.sh replaces a picture only with a complete one (make check),
# and the comparison's figure draws the cases both files measured.
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
# The comparison's figure (plots/bench-compare.gp, real gnuplot) draws only
# the cases both files measured: a table of 3 such cases and 5 that are
# absent, failed or without tokens/s in one file ("nan", "-nan", 0) gives a
# picture as tall as 3 rows (top 720 + 160 + 15 a row, read from the PNG's
# IHDR) labelled by those 3 alone, and the geometric mean over them.
if command -v gnuplot >/dev/null 2>&1; then
    mkdir g
    cat > g/compare.dat <<'DAT'
# falcon compare: A = a.json, B = b.json (medians; NaN = absent or failed)
# 1:index 2:case 3:tok_per_s_A 4:tok_per_s_B 5:ratio_B_over_A 6:GFLOPS_A 7:GFLOPS_B 8:peak_fraction_A 9:peak_fraction_B 10:cpu_ratio_B_over_A
0 recurrent/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1/real_time 1000 2000 2 1 2 0.1 0.2 2
1 chunk/falcon1/scalar/fp32/T:64/n:16/m:16/C:16/heads:1/threads:1/only_in_A 1000 nan nan 1 nan 0.1 nan nan
2 chunk/falcon1/avx2/fp32/T:64/n:16/m:16/C:16/heads:1/threads:1/real_time 500 250 0.5 1 0.5 0.1 0.05 0.5
3 parallel/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1/failed_in_B 300 -nan -nan 1 -nan 0.1 -nan -nan
4 recurrent/falcon1/avx2/fp32/T:64/n:16/m:16/heads:1/threads:1/zero_in_A 0 100 nan 0 1 0 0.1 nan
5 blas/sgemm/square/n:1024/threads:1/no_tokens nan nan nan 50 60 0.5 0.6 1.2
6 parallel/falcon1/avx2/fp32/T:64/n:16/m:16/heads:1/threads:1/real_time 1e+06 1.5e+06 1.5 1 1.5 0.1 0.15 1.5
7 ukernel/gemm_nn/avx2/fp32/M:128/N:128/K:128/only_in_B nan 5e+06 nan nan 40 nan 0.4 nan
DAT
    # draw_compare FMT: the figure of g/compare.dat in FMT; its stderr in g/FMT.err
    draw_compare() { (cd "$ROOT" && gnuplot -e "out='$WORK/g'; fmt='$1'; file='$WORK/g/compare.dat'" plots/bench-compare.gp) \
                         2> "g/$1.err"; }
    if draw_compare png && draw_compare svg && [ ! -s g/png.err ] && [ ! -s g/svg.err ]; then
        ok "compare figure: drawn in both formats, no gnuplot warning"
    else bad "compare figure" "$(cat g/png.err g/svg.err 2>/dev/null | head -5)"; fi
    # the PNG's height: bytes 20-23, big-endian
    h=$(od -An -tu1 -j20 -N4 g/bench-compare.png 2>/dev/null | awk '{ print $1 * 16777216 + $2 * 65536 + $3 * 256 + $4 }')
    [ "$h" = $((720 + 160 + 15 * 3)) ] && ok "compare figure: as tall as its 3 common cases ($h pixels)" ||
        bad "compare figure's height" "$h pixels, not $((720 + 160 + 15 * 3)) (3 rows)"
    if grep -qF '>recurrent/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1<' g/bench-compare.svg &&
       grep -qF '>chunk/falcon1/avx2/fp32/T:64/n:16/m:16/C:16/heads:1/threads:1<' g/bench-compare.svg &&
       grep -qF '>parallel/falcon1/avx2/fp32/T:64/n:16/m:16/heads:1/threads:1<' g/bench-compare.svg &&
       ! grep -q 'only_in_\|failed_in_B\|zero_in_A\|no_tokens' g/bench-compare.svg &&
       grep -qF 'geometric mean over the 3 cases: 1.14' g/bench-compare.svg &&
       grep -qF '5 other cases not drawn: absent, failed or without tokens/s in a file' g/bench-compare.svg
    then ok "compare figure: labelled by the 3 common cases alone, geometric mean over them"
    else bad "compare figure's labels" "$(grep -o '>[a-z]*/[^<]*<\|geometric mean over[^<]*\|[0-9]* other cases[^<]*' g/bench-compare.svg | tr '\n' ' ')"; fi
    # no case in both files: a short picture that says so, not a gnuplot error
    awk '/^#/ || $3 == "nan" || $4 == "nan"' g/compare.dat > g/none.dat && mv g/none.dat g/compare.dat
    rm -f g/bench-compare.png
    if draw_compare png && [ -s g/bench-compare.png ] && [ ! -s g/png.err ]; then
        ok "compare figure without a common case: drawn, saying so"
    else bad "compare figure without a common case" "$(head -5 g/png.err)"; fi
    # The N-machine figure (plots/bench-machines.gp): the rows that every
    # file has, each labelled by its own name; a row absent from a file has
    # no position (nan), and its label must not land on another row.
    cat > g/machines.dat <<'DAT'
# falcon compare: 3 machines (medians of tokens/s; NaN = absent or failed)
# machines 3
# machine 1 A: cpu a (a.json)
# machine 2 B: cpu b (b.json)
# machine 3 C: cpu c (c.json)
# 1:index 2:case 3..5:tok_per_s of each machine 6..7:ratio to A of B.. 8:index among the cases every file has (nan: not in every file)
0 recurrent/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1/real_time 1000 2000 500 2 0.5 0
1 ukernel/update_read/avx2/fp32/m:64/n:64/k:1/r:2/only_in_A 1000 nan nan nan nan nan
2 chunk/falcon1/avx2/fp32/T:64/n:16/m:16/C:16/heads:1/threads:1/real_time 500 250 1000 0.5 2 1
3 parallel/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1/not_in_C 300 600 nan 2 nan nan
# geomean_cases 2
# geomean 2 1
# geomean 3 1
DAT
    if (cd "$ROOT" && gnuplot -e "out='$WORK/g'; fmt='svg'; file='$WORK/g/machines.dat'" plots/bench-machines.gp) 2> g/m.err &&
       [ ! -s g/m.err ] &&
       grep -qF '>recurrent/falcon1/scalar/fp32/T:64/n:16/m:16/heads:1/threads:1<' g/bench-machines.svg &&
       grep -qF '>chunk/falcon1/avx2/fp32/T:64/n:16/m:16/C:16/heads:1/threads:1<' g/bench-machines.svg &&
       ! grep -q 'only_in_A\|not_in_C' g/bench-machines.svg
    then ok "N-machine figure: labelled by the cases every file has alone, no gnuplot warning"
    else bad "N-machine figure" "$(head -3 g/m.err) $(grep -o '>[a-z]*/[^<]*<' g/bench-machines.svg 2>/dev/null | tr '\n' ' ')"; fi
else
    echo "skip compare figure: no gnuplot (Debian: gnuplot-nox)"
fi
# Every picture of the report (verify/tools/report.sh) has a line under it
# that says what to look for. A fixture folder holds every figure (empty
# files) and the least data that lets each section reach its pictures.
mkdir -p rep/bench rep/stability rep/learning
echo '# cases' > rep/bench/cases.dat
echo 'tf32 falcon1 none avx2 chunk 1000 1 0 1 1 0 1' > rep/stability/fits.dat
echo 'fp32 falcon1 mild avx2 chunk 1000 2000 1 1 1 0 0 yes' > rep/stability/beyond.dat
: > rep/stability/refcheck.dat
echo '# tuned' > rep/learning/tuned.dat
: > rep/compare.dat
: > rep/compare-machines.dat
figures="bench-throughput-T bench-peak-n bench-chunk bench-compare bench-machines stability-beyond stability-formats
         learning-tuned learning-alignment learning-plasticity learning-forgetting learning-rehearsal"
for p in fp32 fp64; do figures="$figures stability-$p stability-decay-$p stability-backends-$p"; done
for f in $figures; do : > "rep/$f.png"; done
nfig=$(echo $figures | wc -w)
# captions: "images captioned uncaptioned", an image's caption being the
# next non-empty line, starting "*Look for:*" and saying something
rc=0; sh "$ROOT/verify/tools/report.sh" rep 0 > report.out 2>&1 || rc=$?
captions=$(awk '/^!\[/ { if (want) bad++; want = 1; n++; next }
                want && NF { if (/^\*Look for:\* [^ ]/) ok++; else bad++; want = 0 }
                END { if (want) bad++; print n + 0, ok + 0, bad + 0 }' rep/report.md 2>/dev/null)
if [ $rc -eq 0 ] && [ "$captions" = "$nfig $nfig 0" ] && ! grep -qv '^wrote ' report.out; then
    ok "report: each of its $nfig pictures has a 'Look for:' line under it"
else bad "report captions" "status $rc; images, captioned, not: $captions (of $nfig figures); $(head -3 report.out)"; fi
test_end
