#!/bin/bash
# `falcon stability --grad` in miniature (make check runs it, in seconds):
#   1. a run to T = 300 with MPFR to 100 (n = m = 4, Falcon-1 and Falcon-1A
#      in the mix regime): its report set, a curve per stream with an MPFR
#      point then a stand-in point, the stand-in accepted, every error
#      within the gradient gate's fp32 threshold at the MPFR point (the
#      bound of gate/THRESHOLDS.md: 6 (2 + sqrt(n)) kappa_X u, recomputed
#      here from the curve's kappa), a fit per form and tensor;
#   2. a wrong stand-in, fp32 (--standin fp32: its gradients are off MPFR by
#      about fp32's u, 2^29 of fp64's), is refused: the run fails and says
#      so, no point is measured against it, the verdict says refused;
#   3. a stand-in no MPFR length checked (--tmpfr 0) is refused too;
#   4. the quick profile's plan: its 21 streams and at most 40 CPU seconds.
#
#   bash study/test_grad_study.sh BUILD_DIR
set -eu
BUILD=$(cd "${1:?usage: study/test_grad_study.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/../verify/lib.sh"
test_workdir
STUDY=$BUILD/falcon-study
SMALL=(stability --grad --tmax 300 --tmpfr 100 --n 4 --decay mix --threads 1)

# ---- 1. a small run ----
for v in falcon1 falcon1a; do
    if "$STUDY" "${SMALL[@]}" --variant "$v" --out "run-$v" > "run-$v.txt" 2> "run-$v.err"; then
        ok "$v: a small run succeeds"
    else
        bad "$v run" "exit status $?: $(tail -n 3 "run-$v.err" "run-$v.txt" | tr '\n' ';')"
        continue
    fi
    d=run-$v
    for f in grad.json fits.dat standin.dat "curves/${v}_mix.dat"; do
        [ -s "$d/$f" ] && ok "$v: $f written" || bad "$v files" "no $d/$f"
    done
    # T ref, then recurrent and chunk errors (6 tensors each), kappa, rms.
    awk '!/^#/ { n++; ref[n] = $2; T[n] = $1; if (NF != 26) bad = 1 }
         END { exit !(n == 2 && T[1] == 100 && ref[1] == 0 && T[2] == 300 && ref[2] == 1 && !bad) }' \
        "$d/curves/${v}_mix.dat" && ok "$v: MPFR at T = 100, the stand-in at T = 300" ||
        bad "$v curve" "$(grep -v '^#' "$d/curves/${v}_mix.dat" | cut -c1-60 | tr '\n' ';')"
    grep -q "^verdict $v mix accepted" "$d/standin.dat" && ok "$v: the fp64 stand-in accepted" ||
        bad "$v verdict" "$(grep verdict "$d/standin.dat")"
    # Within the gradient gate's recurrent threshold and a fit per form and tensor.
    awk 'NR > 0 && !/^#/ && $2 == 0 { n = 4; thr = 6 * (2 + sqrt(n))
             for (t = 0; t < 6; t++) { k = $(15 + t); if (k == "nan") continue; if (k < 1) k = 1
                 if (!($(3 + t) <= thr * k) || !($(9 + t) > 0)) bad = 1; seen++ } }
         END { exit bad || seen < 5 }' "$d/curves/${v}_mix.dat" &&
        ok "$v: the MPFR point's errors within the gate's threshold" || bad "$v errors" "over 6 (2 + sqrt n) kappa u"
    rows=$(grep -c -v '^#' "$d/fits.dat")
    [ "$rows" = 12 ] && ok "$v: a fit per form and tensor" || bad "$v fits" "$rows rows, not 12"
done

# ---- 2. and 3. stand-ins the check must refuse ----
refused() { # NAME WANT_VERDICT WANT_POINTS ARGS...: the run fails, says why, measures nothing past MPFR
    local name=$1 verdict=$2 points=$3
    shift 3
    local rc=0
    "$STUDY" "${SMALL[@]}" --variant falcon1 --out "$name" "$@" > "$name.txt" 2> "$name.err" || rc=$?
    [ "$rc" = 1 ] && ok "$name: the run fails (status 1)" || bad "$name status" "exit status $rc, not 1"
    grep -q 'refused' "$name.txt" && ok "$name: the output says the stand-in was refused" ||
        bad "$name message" "$(tail -n 2 "$name.txt" | tr '\n' ';')"
    grep -q "^verdict falcon1 mix $verdict" "$name/standin.dat" 2>/dev/null && ok "$name: verdict $verdict" ||
        bad "$name verdict" "$(grep verdict "$name/standin.dat" 2>/dev/null || echo none)"
    local n
    n=$(grep -v '^#' "$name/curves/falcon1_mix.dat" 2>/dev/null | awk '$2 == 1 { s++ } END { print NR " " s + 0 }')
    [ "$n" = "$points 0" ] && ok "$name: $points MPFR point(s), none against the stand-in" ||
        bad "$name points" "rows, stand-in rows: ${n:-no curve}"
}
refused wrong-standin refused 1 --standin fp32
refused unchecked unchecked 0 --tmpfr 0

# ---- 4. the quick profile's plan ----
plan=$("$STUDY" stability --grad --plan)
streams=$(echo "$plan" | grep -c '^plan: grad falcon')
[ "$streams" = 21 ] && ok "the quick plan has 21 streams (3 variants x 7 regimes)" || bad plan "$streams streams"
cpu=$(echo "$plan" | sed -n 's/^plan: grad total .* MPFR steps, \([0-9]*\) CPU s$/\1/p')
[ -n "$cpu" ] && [ "$cpu" -le 40 ] && ok "the quick plan's estimate, $cpu CPU s, within 40" ||
    bad "plan cost" "${cpu:-no} CPU s"
test_end
