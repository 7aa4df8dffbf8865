#!/bin/bash
# End-to-end tests of the `falcon` command on small .npy files made here by
# verify/tools/npygen.c (its own .npy code, so numpy is not needed and the
# CLI's files are checked by code that is not libfalcon's).
#
#   verify/test_cli.sh build/falcon
#
# Covers: one sequence and a batch (a head of the batch equals the same data
# run alone, bit for bit), checkpoint round trips (one run of T equals two
# halves through --checkpoint-out/--checkpoint-in), and the bad inputs of
# docs/math.md section 10: each must exit with status 2, print one line
# "falcon: error: ..." naming the file or tensor, and leave no output behind.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu

. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_cli.sh path/to/falcon"

# ---- data: T = 24 steps, n = 5, m = 3; a batch of B = 2, H = 3 ----
T=24 N=5 M=3 B=2 H=3
make_set() { # make_set PREFIX DTYPE LEAD...: q k gain [LEAD,n], v [LEAD,m], beta alpha [LEAD]
    local p=$1 dt=$2 lead=$3
    $G rand "${p}q.npy" "$dt" "$lead,$N" 11
    $G rand "${p}k.npy" "$dt" "$lead,$N" 12
    $G rand "${p}v.npy" "$dt" "$lead,$M" 13
    $G rand "${p}gain.npy" "$dt" "$lead,$N" 14 --range 0.5 1.5
    $G rand "${p}beta.npy" "$dt" "$lead" 15 --range 0.2 1.2
    $G rand "${p}alpha.npy" "$dt" "$lead" 16 --range 0.7 1
}
make_set "" f8 "$T"          # q.npy ... one sequence
make_set "b_" f8 "$B,$T,$H"  # b_q.npy ... a batch
make_set "s_" f4 "$T"        # float32 files, run in fp64 below


# expect_ok NAME ARGS...: status 0, nothing on stdout or stderr.
expect_ok() {
    local name=$1 rc=0
    shift
    "$FALCON" "$@" >stdout.txt 2>stderr.txt || rc=$?
    if [ $rc -ne 0 ]; then bad "$name" "status $rc: $(cat stderr.txt)"; return 1; fi
    if [ -s stdout.txt ] || [ -s stderr.txt ]; then bad "$name" "printed: $(cat stdout.txt stderr.txt)"; return 1; fi
    ok "$name"
}

# expect_fail NAME TEXT ARGS...: status 2, one stderr line "falcon: error: ..."
# containing TEXT, nothing on stdout, no output left.
expect_fail() {
    local name=$1 want=$2 rc=0
    shift 2
    rm -rf out* state* ck*
    "$FALCON" "$@" >stdout.txt 2>stderr.txt || rc=$?
    local lines left
    lines=$(wc -l <stderr.txt)
    left=$(leftovers)
    if [ $rc -ne 2 ]; then bad "$name" "status $rc, expected 2 ($(cat stderr.txt))"
    elif [ "$lines" -ne 1 ] || ! grep -q '^falcon: error: ' stderr.txt; then
        bad "$name" "expected one 'falcon: error:' line, got: $(cat stderr.txt)"
    elif ! grep -qF -- "$want" stderr.txt; then bad "$name" "message lacks '$want': $(cat stderr.txt)"
    elif [ -s stdout.txt ]; then bad "$name" "printed on stdout: $(cat stdout.txt)"
    elif [ -n "$left" ]; then bad "$name" "left behind: $left"
    else ok "$name -> $(cat stderr.txt)"
    fi
}

# same_data NAME A B BYTES: the last BYTES (the data) of two files are equal.
same_data() {
    if cmp -s <(tail -c "$4" "$2") <(tail -c "$4" "$3"); then ok "$1"; else bad "$1" "$2 and $3 differ"; fi
}

# close NAME A B TOL: normwise relative difference at most TOL.
close() {
    local msg
    if msg=$($G cmp "$2" "$3" "$4"); then ok "$1 ($msg)"; else bad "$1" "$msg"; fi
}

shape_is() { # shape_is NAME FILE "f8 24,3"
    local got
    got=$($G shape "$2")
    if [ "$got" = "$3" ]; then ok "$1"; else bad "$1" "$2 is '$got', expected '$3'"; fi
}

# ---- commands that only print ----
if "$FALCON" --version | grep -q '^falcon [0-9]'; then ok "--version"; else bad "--version" "no version line"; fi
if "$FALCON" run --help | grep -q -- '--checkpoint-in'; then ok "run --help"; else bad "run --help" "no option list"; fi

# ---- one sequence ----
run_args --state-out state.npy
if expect_ok "single run" "${ARGS[@]}"; then
    shape_is "single out [T,m] f8" out.npy "f8 $T,$M"
    shape_is "single state [m,n] f8" state.npy "f8 $M,$N"
fi
F32=(q=s_q.npy k=s_k.npy v=s_v.npy beta=s_beta.npy alpha=s_alpha.npy)
run_args "${F32[@]}" precision=fp32
if expect_ok "float32 files, fp32 run" "${ARGS[@]}"; then shape_is "fp32 out dtype" out.npy "f4 $T,$M"; fi
run_args "${F32[@]}"
if expect_ok "float32 files, fp64 run" "${ARGS[@]}"; then shape_is "fp64 out dtype" out.npy "f8 $T,$M"; fi
run_args out=out_ref.npy
expect_ok "recurrent reference" "${ARGS[@]}" || true
for form in chunk parallel; do
    run_args form=$form --chunk 5
    if expect_ok "form $form" "${ARGS[@]}"; then close "form $form equals recurrent" out.npy out_ref.npy 1e-12; fi
done
# --chunk auto (the default) is the model's C: here n, m small, so 8 (falcon_chunk_auto)
run_args form=chunk out=out_auto.npy --chunk auto
if expect_ok "chunk auto" "${ARGS[@]}"; then
    run_args form=chunk out=out_8.npy --chunk 8
    expect_ok "chunk 8" "${ARGS[@]}" && same_data "--chunk auto is --chunk 8 at n = $N, m = $M" out_auto.npy out_8.npy $((T * M * 8))
    run_args form=chunk out=out_default.npy
    expect_ok "chunk default" "${ARGS[@]}" && same_data "the default chunk is auto" out_default.npy out_auto.npy $((T * M * 8))
fi
$G rand e_q.npy f8 "0,$N" 1; $G rand e_v.npy f8 "0,$M" 1; $G rand e_b.npy f8 0 1
run_args q=e_q.npy k=e_q.npy v=e_v.npy beta=e_b.npy alpha=e_b.npy
if expect_ok "T = 0" "${ARGS[@]}"; then shape_is "T = 0 out [0,m]" out.npy "f8 0,$M"; fi

# ---- a batch: head (b, h) equals the same data run alone, bit for bit ----
head_of() { # head_of FILE H_AXIS b h OUT: [B,...,H,...] -> the (b, h) slice
    $G pick "$1" tmp.npy "$2" "$4" && $G pick tmp.npy "$5" 0 "$3"
}
batch_vs_single() { # batch_vs_single VARIANT b h EXTRA...
    local variant=$1 b=$2 h=$3 f
    shift 3
    rm -f out* state* h_*
    local gain=()
    if [ "$variant" = falcon2 ]; then gain=(--gain b_gain.npy); fi
    expect_ok "batch $variant" run --variant "$variant" --form recurrent --precision fp64 --q b_q.npy \
        --k b_k.npy --v b_v.npy --beta b_beta.npy --alpha b_alpha.npy --out out_b.npy --state-out state_b.npy \
        "${gain[@]}" "$@" || return 0
    shape_is "batch out [B,T,H,m]" out_b.npy "f8 $B,$T,$H,$M"
    shape_is "batch state [B,H,m,n]" state_b.npy "f8 $B,$H,$M,$N"
    for f in b_q b_k b_v b_beta b_alpha b_gain out_b; do head_of "$f.npy" 2 "$b" "$h" "h_$f.npy"; done
    head_of state_b.npy 1 "$b" "$h" h_state_b.npy
    if [ "$variant" = falcon2 ]; then gain=(--gain h_b_gain.npy); fi
    expect_ok "head b=$b h=$h alone" run --variant "$variant" --form recurrent --precision fp64 --q h_b_q.npy \
        --k h_b_k.npy --v h_b_v.npy --beta h_b_beta.npy --alpha h_b_alpha.npy --out out_h.npy \
        --state-out state_h.npy "${gain[@]}" "$@" || return 0
    same_data "batch head b=$b h=$h out == single ($variant)" h_out_b.npy out_h.npy $((T * M * 8))
    same_data "batch head b=$b h=$h state == single ($variant)" h_state_b.npy state_h.npy $((M * N * 8))
}
batch_vs_single falcon1 1 2
batch_vs_single falcon3 0 1 --window 3
batch_vs_single falcon2 1 0 --align same

# ---- --layout: bhtd (head-first files) and fla (state transposed, reads scaled) ----
# The same batch as b_* written head-first: the run equals the [B,T,H,D] one
# bit for bit, its reads written head-first.
for f in b_q b_k b_v b_beta b_alpha; do $G swap "$f.npy" "hf_$f.npy"; done
LB=(run --variant falcon1 --form chunk --chunk 4 --precision fp64)
rm -f out* state*
if expect_ok "layout falcon reference" "${LB[@]}" --q b_q.npy --k b_k.npy --v b_v.npy --beta b_beta.npy \
       --alpha b_alpha.npy --out out_l.npy --state-out state_l.npy \
   && expect_ok "--layout bhtd" "${LB[@]}" --layout bhtd --q hf_b_q.npy --k hf_b_k.npy --v hf_b_v.npy \
       --beta hf_b_beta.npy --alpha hf_b_alpha.npy --out out_hf.npy --state-out state_hf.npy; then
    shape_is "bhtd out [B,H,T,m]" out_hf.npy "f8 $B,$H,$T,$M"
    shape_is "bhtd state [B,H,m,n] as falcon" state_hf.npy "f8 $B,$H,$M,$N"
    $G swap out_hf.npy out_hf_back.npy
    same_data "bhtd reads == falcon reads, transposed back" out_hf_back.npy out_l.npy $((B * T * H * M * 8))
    same_data "bhtd state == falcon state" state_hf.npy state_l.npy $((B * H * M * N * 8))
fi
if expect_ok "--layout fla, default scale" "${LB[@]}" --layout fla --q b_q.npy --k b_k.npy --v b_v.npy \
       --beta b_beta.npy --alpha b_alpha.npy --out out_fla.npy --state-out state_fla.npy; then
    shape_is "fla state [B,H,K,V]" state_fla.npy "f8 $B,$H,$N,$M"
    $G swap state_fla.npy state_fla_back.npy 2
    same_data "fla state is the transpose of falcon's" state_fla_back.npy state_l.npy $((B * H * M * N * 8))
    $G scale out_l.npy out_l_scaled.npy "$(awk -v n=$N 'BEGIN { printf "%.17g", 1 / sqrt(n) }')"
    close "fla reads are falcon's times 1/sqrt(K)" out_fla.npy out_l_scaled.npy 1e-15
fi
if expect_ok "--layout fla --scale 0.25" "${LB[@]}" --layout fla --scale 0.25 --q b_q.npy --k b_k.npy \
       --v b_v.npy --beta b_beta.npy --alpha b_alpha.npy --out out_fla.npy; then
    $G scale out_l.npy out_l_scaled.npy 0.25
    same_data "fla --scale 0.25: the reads times 0.25 exactly" out_fla.npy out_l_scaled.npy $((B * T * H * M * 8))
fi
run_args --scale 0.5;   expect_fail "--scale without fla" "--scale applies to --layout fla only" "${ARGS[@]}"
run_args --layout fla --scale -1; expect_fail "--scale <= 0" "--scale = -1" "${ARGS[@]}"
run_args --layout bthd; expect_fail "unknown layout" "--layout: unknown value 'bthd'" "${ARGS[@]}"
expect_fail "bhtd: a file in the other layout" "v (b_v.npy): shape [$B,$T,$H,$M] but q says B=$B, H=$H, T=$T" \
    "${LB[@]}" --layout bhtd --q hf_b_q.npy --k hf_b_k.npy --v b_v.npy --beta hf_b_beta.npy --out out.npy

# A head-first batch (H = 24 > T = 3 as read) given without --layout: status
# 0, one warning line that names the fix; none with --layout bhtd, none for
# T >= H.
$G rand w_q.npy f8 2,3,24,5 11; $G rand w_k.npy f8 2,3,24,5 12; $G rand w_v.npy f8 2,3,24,3 13
$G rand w_beta.npy f8 2,3,24 15 --range 0.2 1
rc=0; "$FALCON" "${LB[@]}" --q w_q.npy --k w_k.npy --v w_v.npy --beta w_beta.npy --out out_w.npy \
    >stdout.txt 2>stderr.txt || rc=$?
want="falcon: warning: w_q.npy has shape [2,3,24,5]: read as [B,T,H,D] that is T = 3, H = 24; if it is head-first [B,H,T,D], pass --layout bhtd"
if [ $rc -eq 0 ] && [ "$(cat stderr.txt)" = "$want" ] && [ ! -s stdout.txt ] && [ -f out_w.npy ]; then
    ok "head-first shape read as [B,T,H,D]: status 0, one warning -> $(cat stderr.txt)"
else
    bad "head-first warning" "status $rc, stderr: $(cat stderr.txt)"
fi
expect_ok "no warning with --layout bhtd" "${LB[@]}" --layout bhtd --q w_q.npy --k w_k.npy --v w_v.npy \
    --beta w_beta.npy --out out_w.npy || true

# ---- --progress splits the run at the form's block: same bits ----
# (the CPU backends; the mpfr backend's to rounding: verify/test_usage.sh)
for form in recurrent chunk; do
    PB=(run --variant falcon3 --window 3 --form $form --chunk 4 --precision fp64 --q b_q.npy --k b_k.npy
        --v b_v.npy --beta b_beta.npy --alpha b_alpha.npy --state-out state_p.npy --verbose)
    rm -f out_p*.npy state_p*.npy
    "$FALCON" "${PB[@]}" --out out_p0.npy >/dev/null 2>&1 && cp state_p.npy state_p0.npy
    rc=0; "$FALCON" "${PB[@]}" --out out_p1.npy --progress >stdout.txt 2>stderr.txt || rc=$?
    if [ $rc -ne 0 ] || ! grep -qE ', [2-9][0-9]* segments of up to [0-9]+ steps' stdout.txt; then
        bad "--progress $form: split" "status $rc: $(cat stdout.txt stderr.txt)"
    elif cmp -s out_p0.npy out_p1.npy && cmp -s state_p0.npy state_p.npy; then
        ok "--progress $form: $(grep -oE '[0-9]+ segments of up to [0-9]+ steps' stdout.txt), reads and state bit for bit"
    else
        bad "--progress $form" "results differ from the run without --progress"
    fi
done

# ---- checkpoints: T in one run == two halves carried through a checkpoint ----
halves() { # halves FORM AXIS PREFIX EXTRA...: inputs PREFIX*, split on AXIS (the T axis)
    local form=$1 axis=$2 p=$3 f
    shift 3
    rm -rf out* state* ck* p1_* p2_*
    for f in q k v beta alpha; do
        $G slice "${p}$f.npy" "p1_$f.npy" "$axis" 0 $((T / 2))
        $G slice "${p}$f.npy" "p2_$f.npy" "$axis" $((T / 2)) "$T"
    done
    local base=(run --variant falcon3 --window 4 --form "$form" --chunk 5 --precision fp64 "$@")
    expect_ok "ckpt $form full" "${base[@]}" --q "${p}q.npy" --k "${p}k.npy" --v "${p}v.npy" \
        --beta "${p}beta.npy" --alpha "${p}alpha.npy" --out out_full.npy --state-out state_full.npy || return 0
    expect_ok "ckpt $form half 1" "${base[@]}" --q p1_q.npy --k p1_k.npy --v p1_v.npy --beta p1_beta.npy \
        --alpha p1_alpha.npy --out out_1.npy --checkpoint-out ck1 || return 0
    expect_ok "ckpt $form half 2" "${base[@]}" --q p2_q.npy --k p2_k.npy --v p2_v.npy --beta p2_beta.npy \
        --alpha p2_alpha.npy --out out_2.npy --checkpoint-in ck1 --checkpoint-out ck2 --state-out state_2.npy \
        || return 0
    $G slice out_full.npy out_f1.npy "$axis" 0 $((T / 2))
    $G slice out_full.npy out_f2.npy "$axis" $((T / 2)) "$T"
    local what="single"
    if [ -n "$p" ]; then what="batch"; fi
    close "ckpt $form $what: first half" out_1.npy out_f1.npy 1e-12
    close "ckpt $form $what: second half" out_2.npy out_f2.npy 1e-12
    close "ckpt $form $what: final state" state_2.npy state_full.npy 1e-12
}
halves recurrent 0 ""
halves chunk 0 ""
halves parallel 0 "" --align same
halves recurrent 1 "b_"

# ---- bad input: status 2, one line naming the file or tensor, no output ----
# (Every input rule, hostile files included, is also a row of the table in
# docs/rules.md, which verify/test_rules.sh runs row by row.)
mkdir -p adir
head -c -3 q.npy >trunc_q.npy
$G rand be_v.npy f8 "$T,$M" 13 --descr '>f8'
$G rand f2_beta.npy f8 "$T" 15 --range 0.2 1.2 --descr '<f2'
$G rand i4_beta.npy f8 "$T" 15 --descr '<i4'
$G rand fo_q.npy f8 "$T,$N" 11 --fortran
$G rand short_v.npy f8 "$((T - 1)),$M" 13
$G rand nan_q.npy f8 "$T,$N" 11 --set 7=nan
$G rand big_beta.npy f8 "$T" 15 --range 0.2 1.2 --set 4=3
$G rand zero_alpha.npy f8 "$T" 16 --range 0.7 1 --set 5=0
$G rand q3.npy f8 "$T,$N,1" 11

run_args q=missing.npy;   expect_fail "missing file" "q: 'missing.npy': cannot open it" "${ARGS[@]}"
run_args k=adir;          expect_fail "directory as file" "k: 'adir'" "${ARGS[@]}"
run_args q=trunc_q.npy;   expect_fail "truncated file" "'trunc_q.npy': truncated" "${ARGS[@]}"
run_args v=be_v.npy;      expect_fail "big-endian dtype" "'be_v.npy': dtype '>f8'" "${ARGS[@]}"
run_args beta=f2_beta.npy; expect_ok "float16 beta is read (widened exactly)" "${ARGS[@]}"
run_args beta=i4_beta.npy; expect_fail "integer dtype" "'i4_beta.npy': dtype '<i4'" "${ARGS[@]}"
run_args q=fo_q.npy;      expect_fail "fortran order" "'fo_q.npy': fortran_order" "${ARGS[@]}"
run_args v=short_v.npy;   expect_fail "shape mismatch" "v (short_v.npy): shape [$((T - 1)),$M] but q says T=$T" "${ARGS[@]}"
run_args q=q3.npy;        expect_fail "q with 3 dims" "q (q3.npy): shape [$T,$N,1]" "${ARGS[@]}"
run_args q=nan_q.npy;     expect_fail "NaN in q" "q[t=1,i=2] = nan" "${ARGS[@]}"
run_args beta=big_beta.npy; expect_fail "beta out of range" "beta[t=4] = 3" "${ARGS[@]}"
run_args alpha=zero_alpha.npy; expect_fail "alpha = 0" "alpha[t=5] = 0" "${ARGS[@]}"
run_args --window abc;    expect_fail "bad --window value" "--window: 'abc' is not an integer" "${ARGS[@]}"
run_args --chunk 12x;     expect_fail "trailing junk in a number" "--chunk: '12x'" "${ARGS[@]}"
run_args --window 3;      expect_fail "window for falcon1" "window = 3" "${ARGS[@]}"
run_args --eps -1;        expect_fail "negative eps" "eps = -1" "${ARGS[@]}"
run_args --backend foo;   expect_fail "unknown backend" "--backend: unknown value 'foo'" "${ARGS[@]}"
# A backend this machine lacks (cuda without a GPU) is the library's refusal.
run_args precision=fp32 --backend cuda
rc=0; "$FALCON" "${ARGS[@]}" >/dev/null 2>stderr.txt || rc=$?
if [ $rc -eq 0 ]; then ok "cuda backend (available here)"; rm -f out.npy
else expect_fail "unavailable backend" "backend cuda is not available" "${ARGS[@]}"; fi
run_args --frobnicate 1;  expect_fail "unknown option" "unknown option '--frobnicate'" "${ARGS[@]}"
run_args --frobnicate 1;  expect_fail "no guess for a name far from every option" "'--frobnicate' (see" "${ARGS[@]}"
run_args --alhpa 0.5;     expect_fail "a typo names the closest option" "unknown option '--alhpa': did you mean --alpha?" "${ARGS[@]}"
run_args --chunck 8;      expect_fail "... one letter more" "did you mean --chunk?" "${ARGS[@]}"
run_args --eps;           expect_fail "missing value" "--eps needs a value" "${ARGS[@]}"
run_args --q q.npy;       expect_fail "repeated option" "--q given twice" "${ARGS[@]}"
expect_fail "missing --q" "missing required option --q" run --variant falcon1 --form recurrent \
    --k k.npy --v v.npy --beta beta.npy --out out.npy
run_args variant=falcon2; expect_fail "falcon2 without gains" "--gain is required by falcon2" "${ARGS[@]}"
run_args --gain gain.npy; expect_fail "gains for falcon1" "falcon1 takes no gains" "${ARGS[@]}"
run_args out=adir/nodir/out.npy; expect_fail "unwritable --out" "adir/nodir/out.npy" "${ARGS[@]}"
run_args --checkpoint-in nock; expect_fail "missing checkpoint" "--checkpoint-in: checkpoint 'nock'" "${ARGS[@]}"
rm -rf keep_ck && run_args q=b_q.npy k=b_k.npy v=b_v.npy beta=b_beta.npy alpha=b_alpha.npy --checkpoint-out keep_ck
"$FALCON" "${ARGS[@]}" && rm -f out.npy
run_args --checkpoint-in keep_ck; expect_fail "checkpoint of other heads" "--checkpoint-in 'keep_ck': the checkpoint has heads=6" "${ARGS[@]}"
printf 'format falcon-checkpoint 2\n' >keep_ck/falcon-checkpoint.txt
run_args --checkpoint-in keep_ck; expect_fail "checkpoint of another version" "falcon-checkpoint.txt" "${ARGS[@]}"
# A later output that fails removes the earlier ones of the same invocation.
touch ck_file
run_args --state-out state.npy --checkpoint-out ck_file
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
if [ $rc -eq 2 ] && [ ! -e out.npy ] && [ ! -e state.npy ] && grep -qF "ck_file" stderr.txt; then
    ok "failed --checkpoint-out removes --out and --state-out"
else
    bad "failed --checkpoint-out removes --out and --state-out" "status $rc, left: $(leftovers)"
fi
rm -f ck_file

test_end
