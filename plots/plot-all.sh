#!/bin/sh
# Draws every plot whose data exists under DIR into DIR (PNG and SVG), and
# says which it skipped and why. Run from the repository root.
# Usage: plots/plot-all.sh DIR [FALCON_STUDY]
#   DIR/stability/   `falcon stability` output     -> stability-*.png
#   DIR/learning/    `falcon stability --learning` -> learning-*.png
#   DIR/stability-grad/  `falcon stability --grad`   -> stability-grad-*.png
#   DIR/bench.json   build/falcon-bench JSON        -> bench-*.png (converted to
#                    DIR/bench/ by FALCON_STUDY bench-dat, default build/falcon-study);
#                    its backward/ entries -> bench-backward.png (DIR/bench/backward.dat)
#   DIR/compare.dat  `falcon compare A.json B.json --out DIR/compare.dat`
#                    -> bench-compare.png; with COMPARE=OTHER.json in the
#                    environment and FALCON (default build/falcon) supporting
#                    `compare`, this script writes it first (A = OTHER, B = this run).
#                    COMPARE with several files: DIR/compare-machines.dat, the
#                    N-machine comparison (A, B, ... = those files, the last = this
#                    run) -> bench-machines.png
# Exit status: 0, or 1 if gnuplot failed on a figure whose data exists.
dir=${1:?usage: plot-all.sh DIR [FALCON_STUDY]}
study=${2:-build/falcon-study}
falcon=${FALCON:-build/falcon}
status=0
drawn=0

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot-all: gnuplot not found (Debian: gnuplot-nox, 'make deps'); no plots" >&2
    exit 1
fi

# Pictures (and the comparison's table and summary) are written into a
# temporary folder beside them and renamed into place once complete: a
# gnuplot or a compare that fails or is killed half-way leaves the earlier
# files as they were, never a truncated one, and no temporary behind.
tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# make_tmp WHAT: the temporary folder, made once.
make_tmp() {
    [ -z "$tmp" ] || return 0
    if ! tmp=$(mktemp -d "$dir/.plot-all.XXXXXX"); then
        echo "plot-all: $1: cannot create a temporary folder in $dir" >&2
        tmp='' status=1
        return 1
    fi
}

# writable PATH: may a new file be renamed onto PATH? Absent, or a regular
# file; a symlink is refused rather than replaced (or written through: a
# link to a folder would put the file inside it), and so is anything else.
writable() {
    if [ -L "$1" ]; then
        echo "plot-all: $1 is a symlink: refused (the outputs here are written as regular files; remove the" \
             "link or point the folder elsewhere)" >&2
    elif [ -e "$1" ] && [ ! -f "$1" ]; then
        echo "plot-all: $1 exists and is not a regular file: refused" >&2
    else
        return 0
    fi
    status=1
    return 1
}

# place SRC1 DEST1 [SRC2 DEST2]: rename the files into place together. A
# signal that comes between the renames is acted on after both, so the
# pair is never left half old, half new.
place() {
    got=
    trap 'got=1' HUP INT TERM
    mv -fT "$1" "$2" && { [ $# -lt 4 ] || mv -fT "$3" "$4"; }
    rc=$?
    trap 'exit 1' HUP INT TERM
    [ -z "$got" ] || exit 1
    [ $rc -eq 0 ] || status=1
    return $rc
}

# draw SCRIPT NAME VARS: one figure in both formats; VARS are gnuplot -e assignments.
draw() {
    script=$1 name=$2 vars=$3
    writable "$dir/$name.png" && writable "$dir/$name.svg" && make_tmp "$name" || return
    for fmt in png svg; do
        if ! gnuplot -e "out='$tmp'; fmt='$fmt'; $vars" "plots/$script" 2> "$tmp/gnuplot.err" ||
           [ ! -s "$tmp/$name.$fmt" ]; then
            echo "plot-all: $name.$fmt: gnuplot failed:" >&2
            cat "$tmp/gnuplot.err" >&2
            rm -f "$tmp/$name.png" "$tmp/$name.svg"
            status=1
            return
        fi
        # gnuplot reports missing data files as warnings and still exits 0.
        if grep -v '^$' "$tmp/gnuplot.err" | grep -q .; then
            echo "plot-all: $name.$fmt: gnuplot warnings:" >&2
            cat "$tmp/gnuplot.err" >&2
        fi
    done
    place "$tmp/$name.png" "$dir/$name.png" "$tmp/$name.svg" "$dir/$name.svg" || return
    drawn=$((drawn + 1))
    echo "plot-all: $dir/$name.png (.svg)"
}

skip() { echo "plot-all: skipped $1: $2"; }

# ---- the stability study ----
st=$dir/stability
if [ -f "$st/fits.dat" ]; then
    for prec in fp32 fp64; do
        # The backends of this precision, in the study's order; the last one
        # measured (the most capable here) is the one the detailed plots show.
        backends=$(awk -v p="$prec" '$1 == p && !seen[$4]++ { printf "%s ", $4 }' "$st/fits.dat")
        if [ -z "$backends" ]; then skip "stability $prec" "no curves in $st/fits.dat"; continue; fi
        be=$(for b in $backends; do case $b in *simde) ;; *) echo "$b" ;; esac; done | tail -1)
        [ -n "$be" ] || be=$(echo "$backends" | awk '{ print $1 }')
        if [ -f "$st/curves/${prec}_falcon1_none_${be}_recurrent.dat" ] &&
           [ -f "$st/curves/${prec}_falcon1a_mix_${be}_chunk.dat" ]; then
            draw stability.gp "stability-$prec" "dir='$st'; prec='$prec'; be='$be'"
            draw stability-backends.gp "stability-backends-$prec" "dir='$st'; prec='$prec'; backends='$backends'"
        else
            skip "stability-$prec" "Falcon-1/1A curves missing in $st/curves"
        fi
        if [ -f "$st/curves/${prec}_falcon3_extreme_${be}_recurrent.dat" ]; then
            draw stability-decay.gp "stability-decay-$prec" "dir='$st'; prec='$prec'; be='$be'"
        else
            skip "stability-decay-$prec" "Falcon-3 curves missing in $st/curves"
        fi
    done
    # The precisions' ladder: fp64, fp32, tf32, bf16 (chunk form), on the
    # backend the operand formats ran on.
    be=$(awk '$1 == "tf32" { print $4; exit }' "$st/fits.dat")
    if [ -n "$be" ] && [ -f "$st/curves/fp32_falcon3_mix_${be}_chunk.dat" ]; then
        draw stability-formats.gp stability-formats "dir='$st'; be='$be'"
    else
        skip stability-formats "no tf32/bf16 curves with fp32 ones beside them in $st"
    fi
else
    skip "stability plots" "no $st/fits.dat (run 'make stability')"
fi

# ---- the gradients' stability (falcon stability --grad) ----
sg=$dir/stability-grad
if [ -f "$sg/fits.dat" ]; then
    tmpfr=$(awk '/^# tmpfr/ { print $3 }' "$sg/fits.dat")
    for v in falcon1 falcon3 falcon1a; do
        if ls "$sg/curves/${v}_"*.dat >/dev/null 2>&1; then
            draw stability-grad.gp "stability-grad-$v" "dir='$sg'; v='$v'; tmpfr=${tmpfr:-0}"
        else
            skip "stability-grad-$v" "no $sg/curves/${v}_*.dat"
        fi
    done
else
    skip "gradient stability plots" "no $sg/fits.dat (run 'make stability-grad')"
fi

# ---- past the fit's range (a study with beyond.dat: profiles deep, huge) ----
for sd in "$st" "$dir/deep"; do
    if [ -f "$sd/beyond.dat" ] && grep -qv '^#' "$sd/beyond.dat"; then
        name=$(basename "$sd")-beyond
        draw stability-beyond.gp "$name" "dir='$sd'; name='$name'"
    fi
done

# ---- the learning curves ----
le=$dir/learning
if [ -f "$le/tuned.dat" ]; then
    t0=$(awk '/^# t0/ { print $3 }' "$le/tuned.dat")
    floor=$(awk '/^# t0/ { print $5 }' "$le/tuned.dat")
    for fam in tuned alignment plasticity forgetting rehearsal; do
        if ls "$le/curves/${fam}_"*.dat >/dev/null 2>&1; then
            draw learning.gp "learning-$fam" "dir='$le'; family='$fam'; t0=$t0; floor=$floor"
        else
            skip "learning-$fam" "no $le/curves/${fam}_*.dat"
        fi
    done
else
    skip "learning plots" "no $le/tuned.dat (run 'make learning')"
fi

# ---- the benchmark ----
if [ -f "$dir/bench.json" ]; then
    if [ -x "$study" ] && "$study" bench-dat "$dir/bench.json" --out "$dir/bench"; then
        draw bench.gp bench-throughput-T "dir='$dir/bench'; which='T'"
        draw bench.gp bench-peak-n "dir='$dir/bench'; which='n'"
        if ls "$dir/bench/C/"*.dat >/dev/null 2>&1; then
            draw bench.gp bench-chunk "dir='$dir/bench'; which='C'"
        else
            skip bench-chunk "no chunk-size sweep in $dir/bench.json"
        fi
    else
        echo "plot-all: $study bench-dat failed on $dir/bench.json" >&2
        status=1
    fi
else
    skip "benchmark plots" "no $dir/bench.json (run 'make bench BENCH_OUT=$dir/bench.json')"
fi
# ---- the backward pass: the backward/ entries of bench.json ----
# backward.dat: one row a case, "form/backend/n backward_tok/s forward_tok/s
# backward_over_forward", from the median aggregate (or the one run).
backward_dat() {
    awk 'index($0, "\"name\": \"backward/") { n = $0; sub(/.*"name": "backward\//, "", n); sub(/".*/, "", n)
                                          use = n ~ /\/real_time(_median)?$/; sub(/\/real_time(_median)?$/, "", n)
                                          if (use && !(n in seen)) { seen[n] = 1; order[m++] = n }; next }
         use && /"(tokens_per_second|forward_tokens_per_second|backward_over_forward)":/ {
             k = $1; gsub(/[":]/, "", k); v = $2; sub(/,$/, "", v); val[n, k] = v }
         /^ *}/ { use = 0 }
         END { for (j = 0; j < m; j++) { c = order[j]; split(c, f, "/"); nn = c; sub(/.*\/n:/, "", nn); sub(/\/.*/, "", nn)
                 if ((c, "backward_over_forward") in val)
                     print f[1] "/" f[3] "/n=" nn, val[c, "tokens_per_second"], val[c, "forward_tokens_per_second"],
                           val[c, "backward_over_forward"] } }' "$1"
}
if [ -f "$dir/bench.json" ] && grep -q '"name": "backward/' "$dir/bench.json"; then
    mkdir -p "$dir/bench" && backward_dat "$dir/bench.json" > "$dir/bench/.backward.dat.tmp" &&
        mv -f "$dir/bench/.backward.dat.tmp" "$dir/bench/backward.dat"
    if [ -s "$dir/bench/backward.dat" ]; then draw backward.gp bench-backward "file='$dir/bench/backward.dat'"
    else skip bench-backward "no backward/ entry with backward_over_forward in $dir/bench.json"; fi
else
    skip bench-backward "no backward/ entries in $dir/bench.json"
fi
# compare NAME FILES...: `falcon compare FILES --out DIR/NAME.dat`, its
# summary DIR/NAME.txt; the table and the summary change together or not
# at all.
compare() {
    name=$1
    shift
    writable "$dir/$name.dat" && writable "$dir/$name.txt" && make_tmp "$name" || return 1
    if ! "$falcon" compare "$@" --out "$tmp/$name.dat" > "$tmp/$name.txt"; then
        rm -f "$tmp/$name.dat" "$tmp/$name.txt"
        status=1
        return 1
    fi
    place "$tmp/$name.dat" "$dir/$name.dat" "$tmp/$name.txt" "$dir/$name.txt"
}
ncompare=$(echo $COMPARE | wc -w)
if [ "$ncompare" -eq 1 ] && [ -f "$dir/bench.json" ]; then
    if compare compare "$COMPARE" "$dir/bench.json"; then
        echo "plot-all: $dir/compare.dat: $COMPARE (A) vs $dir/bench.json (B)"
    else
        echo "plot-all: '$falcon compare' of $COMPARE and $dir/bench.json failed; compare.dat and compare.txt are" \
             "an earlier comparison's, and not drawn" >&2
        nocompare=1
    fi
elif [ "$ncompare" -gt 1 ] && [ -f "$dir/bench.json" ]; then
    # shellcheck disable=SC2086
    if compare compare-machines $COMPARE "$dir/bench.json"; then
        echo "plot-all: $dir/compare-machines.dat: $COMPARE and $dir/bench.json"
    else
        echo "plot-all: '$falcon compare' of $ncompare files and this run failed; the earlier comparison is not drawn" >&2
        nocompare=1
    fi
fi
if [ -f "$dir/compare-machines.dat" ] && [ -z "${nocompare:-}" ]; then
    draw bench-machines.gp bench-machines "file='$dir/compare-machines.dat'"
fi
if [ -f "$dir/compare.dat" ] && [ -z "${nocompare:-}" ]; then
    draw bench-compare.gp bench-compare "file='$dir/compare.dat'"
else
    skip bench-compare "no $dir/compare.dat (make report COMPARE=OTHER.json, or falcon compare A B --out $dir/compare.dat)"
fi
echo "plot-all: $drawn figures in $dir"
exit $status
