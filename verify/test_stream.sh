#!/bin/bash
# Sequences longer than memory: `falcon run` reads its inputs and writes its
# output in segments, the state carried, so its memory is bounded whatever T
# is. Checked here by running, under an address-space limit (prlimit --as),
# a sequence whose inputs are several times larger than that limit, and
# comparing the result, bit for bit (recurrent form), with one made in pieces
# through --checkpoint-out/--checkpoint-in without any limit; then a batch
# [B,T,H,D] in short segments (strided reads and writes) against one segment,
# for every form.
#
#   verify/test_stream.sh build/falcon
#
# Environment: STREAM_T (steps of the long run, default 2^20: inputs of
# 200 MiB, output 64 MiB, about 350 MB of disk at the peak, in $TMPDIR),
# STREAM_LIMIT_MIB (default 56), STREAM_NO_LIMIT=1 (no limit and no memory
# checks: for sanitizers, whose shadow memory needs terabytes of address
# space). About 10 s, 25 s under ASan.
#
# Why an address-space limit works: a single sequence is one head, and the
# CLI starts no more threads than heads (every OpenMP thread reserves a
# stack, 8 MiB by default); the default backend is a CPU one (the CUDA
# runtime, which reserves a lot of address space, only starts for --backend
# cuda). Measured on x86-64 Debian 12 (2 cores): the run needs 42 MiB of
# address space (32 MiB of it segment buffers), peaks at 36 MiB resident,
# and fails cleanly (status 2, nothing left) under 40 MiB; with --segment
# 16384 it runs under 16 MiB at 8 MiB resident.
set -eu

T=${STREAM_T:-1048576}
LIMIT_MIB=${STREAM_LIMIT_MIB:-56}
NO_LIMIT=${STREAM_NO_LIMIT:-}
N=16 M=16
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_stream.sh path/to/falcon"

# Bytes before the data of a .npy file (version 1.0 header).
data_offset() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }

# limited CMD...: run under the address-space limit (unless STREAM_NO_LIMIT).
limited() {
    if [ -n "$NO_LIMIT" ]; then "$@"; else prlimit --as=$((LIMIT_MIB * 1048576)) "$@"; fi
}

# The inputs of steps [t0, t0 + len) of the long sequence, PREFIX*.npy
# (the whole sequence is t0 = 0, len = T): the same generator stream.
make_inputs() {
    local p=$1 t0=$2 len=$3
    $G rand "${p}q.npy" f4 "$len,$N" 1 --skip $((t0 * N))
    $G rand "${p}k.npy" f4 "$len,$N" 2 --skip $((t0 * N))
    $G rand "${p}v.npy" f4 "$len,$M" 3 --skip $((t0 * M))
    $G rand "${p}beta.npy" f4 "$len" 4 --range 0.1 1.5 --skip "$t0"
    $G rand "${p}alpha.npy" f4 "$len" 5 --range 0.95 1 --skip "$t0"
}
run_on() { # run_on PREFIX OUT EXTRA...: falcon1, recurrent, fp32
    local p=$1 out=$2
    shift 2
    ARGS=(run --variant falcon1 --form recurrent --precision fp32 --q "${p}q.npy" --k "${p}k.npy"
          --v "${p}v.npy" --beta "${p}beta.npy" --alpha "${p}alpha.npy" --out "$out" "$@")
}

# ---- the long sequence under the limit ----
make_inputs L_ 0 "$T"
in_bytes=$(cat L_q.npy L_k.npy L_v.npy L_beta.npy L_alpha.npy | wc -c)
in_mib=$((in_bytes / 1048576))
echo "long run: T = $T, n = m = $N, fp32: inputs $in_mib MiB, output $((T * M * 4 / 1048576)) MiB," \
     "limit ${NO_LIMIT:+none (STREAM_NO_LIMIT)}${NO_LIMIT:-$LIMIT_MIB MiB of address space}"
if [ -z "$NO_LIMIT" ]; then
    if [ "$in_bytes" -ge $((3 * LIMIT_MIB * 1048576)) ]; then ok "inputs ($in_mib MiB) are over 3x the limit"
    else bad "inputs over 3x the limit" "$in_mib MiB of inputs, limit $LIMIT_MIB MiB: raise STREAM_T"; fi
fi

TIME=$(command -v /usr/bin/time || true)
run_measured() { # run_measured NAME ARGS...: status in $rc, peak RSS (KiB) in $rss_kib
    local name=$1
    shift
    rc=0
    if [ -n "$TIME" ]; then
        limited "$TIME" -f '%M' -o rss.txt "$FALCON" "$@" >stdout.txt 2>stderr.txt || rc=$?
        rss_kib=$(tail -1 rss.txt)
    else
        limited "$FALCON" "$@" --verbose >stdout.txt 2>stderr.txt || rc=$?
        rss_kib=$(sed -n 's/.*max RSS \([0-9.]*\) MiB.*/\1/p' stdout.txt | awk '{ printf "%d", $1 * 1024 }')
    fi
}

run_on L_ out_long.npy --state-out state_long.npy
run_measured long "${ARGS[@]}"
if [ $rc -eq 0 ]; then
    ok "long run: default segments, status 0, peak RSS $((rss_kib / 1024)) MiB for $in_mib MiB of inputs"
    if [ -z "$NO_LIMIT" ] && [ "$rss_kib" -gt $((LIMIT_MIB * 1024)) ]; then
        bad "long run RSS" "peak RSS $rss_kib KiB over the limit"
    fi
else
    bad "long run" "status $rc: $(cat stderr.txt)"
fi

# Short segments need even less: 16384 steps (about 4 MiB of buffers) under
# half the limit.
if [ -z "$NO_LIMIT" ]; then
    half=$((LIMIT_MIB / 2))
    run_on L_ out_short.npy --segment 16384
    rc=0
    prlimit --as=$((half * 1048576)) "$FALCON" "${ARGS[@]}" >/dev/null 2>stderr.txt || rc=$?
    if [ $rc -eq 0 ] && cmp -s out_short.npy out_long.npy; then
        ok "--segment 16384 under $half MiB: the same output, bit for bit"
    else
        bad "--segment 16384 under $half MiB" "status $rc $(cat stderr.txt), or a different output"
    fi
    rm -f out_short.npy
    # The limit bites: the whole sequence as one segment does not fit, and
    # fails cleanly (status 2, no output, no temporary file).
    run_on L_ out_whole.npy --segment "$T"
    rc=0
    limited "$FALCON" "${ARGS[@]}" >/dev/null 2>stderr.txt || rc=$?
    if [ $rc -eq 2 ] && [ ! -e out_whole.npy ] && ! ls ./*.tmp-* >/dev/null 2>&1; then
        ok "one segment of T steps does not fit under the limit: $(cat stderr.txt)"
    else
        bad "one segment under the limit" "status $rc, $(ls) $(cat stderr.txt)"
    fi
fi
rm -f L_*.npy

# ---- the reference: the same sequence in 4 pieces through checkpoints ----
pieces=4
t0=0
prev=()
for p in $(seq 1 $pieces); do
    len=$(((T - t0) / (pieces - p + 1)))
    make_inputs P_ "$t0" "$len"
    extra=(--checkpoint-out "ck$p")
    if [ $p -eq $pieces ]; then extra+=(--state-out state_pieces.npy); fi
    run_on P_ out_piece.npy "${prev[@]}" "${extra[@]}"
    rc=0
    "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
    if [ $rc -ne 0 ]; then bad "piece $p" "status $rc: $(cat stderr.txt)"; break; fi
    # Piece p's reads are bytes [t0 m 4, (t0 + len) m 4) of the long run's data.
    if cmp -s -n $((len * M * 4)) -i "$(($(data_offset out_long.npy) + t0 * M * 4)):$(data_offset out_piece.npy)" \
        out_long.npy out_piece.npy; then
        ok "piece $p (steps $t0..$((t0 + len - 1))) equals the long run, bit for bit"
    else
        bad "piece $p" "steps $t0..$((t0 + len - 1)) differ from the long run"
    fi
    rm -rf "ck$((p - 1))" out_piece.npy P_*.npy
    prev=(--checkpoint-in "ck$p")
    t0=$((t0 + len))
done
if cmp -s state_long.npy state_pieces.npy; then ok "final state equals the pieces', bit for bit"
else bad "final state" "state_long.npy and state_pieces.npy differ"; fi
rm -rf out_long.npy ck* state_*.npy

# ---- a batch in short segments: strided reads and writes, every form ----
Bb=3 Tb=1000 Hb=2
$G rand b_q.npy f8 "$Bb,$Tb,$Hb,$N" 4
$G rand b_k.npy f8 "$Bb,$Tb,$Hb,$N" 5
$G rand b_gain.npy f8 "$Bb,$Tb,$Hb,$N" 6 --range 0.5 1.5
$G rand b_v.npy f8 "$Bb,$Tb,$Hb,$M" 7
$G rand b_beta.npy f8 "$Bb,$Tb,$Hb" 8 --range 0.1 1.5
$G rand b_alpha.npy f8 "$Bb,$Tb,$Hb" 9 --range 0.9 1
batch() { # batch FORM PRECISION SEGMENT OUT EXTRA...: falcon2 (gains)
    local form=$1 prec=$2 seg=$3 out=$4
    shift 4
    "$FALCON" run --variant falcon2 --form "$form" --precision "$prec" --q b_q.npy --k b_k.npy --v b_v.npy \
        --beta b_beta.npy --alpha b_alpha.npy --gain b_gain.npy --out "$out" --segment "$seg" "$@"
}
batch3() { # batch3 FORM PRECISION SEGMENT OUT: falcon3, W = 8, C = 8: the chunk (8) and the
    # masked-parallel block (4096 / W = 512 steps) both divide 512
    local form=$1 prec=$2 seg=$3 out=$4
    "$FALCON" run --variant falcon3 --window 8 --chunk 8 --form "$form" --precision "$prec" --q b_q.npy \
        --k b_k.npy --v b_v.npy --beta b_beta.npy --alpha b_alpha.npy --out "$out" --segment "$seg"
}
for form in recurrent chunk parallel; do
    for prec in fp32 fp64; do
        name="batch $form $prec"
        if ! batch "$form" "$prec" "$Tb" one.npy --state-out one_s.npy --checkpoint-out ck_one 2>stderr.txt; then
            bad "$name" "one segment: $(cat stderr.txt)"; continue
        fi
        # Segments of 512 steps, a multiple of the chunk and of the parallel
        # block: every form splits where it would anyway, so bit for bit.
        if ! batch3 "$form" "$prec" 512 seg.npy 2>stderr.txt || ! batch3 "$form" "$prec" "$Tb" one3.npy 2>>stderr.txt; then
            bad "$name" "falcon3 W=8: $(cat stderr.txt)"; continue
        fi
        if cmp -s seg.npy one3.npy; then ok "$name: falcon3 W=8 C=8 in segments of 512 steps == one segment, bit for bit"
        else bad "$name" "falcon3 W=8 C=8: segments of 512 differ from one segment"; fi
        # 37 steps: strided blocks that cut chunks; recurrent stays bitwise, the others to rounding.
        batch "$form" "$prec" 37 seg37.npy --state-out seg37_s.npy --checkpoint-out ck_seg 2>stderr.txt ||
            { bad "$name" "segments of 37: $(cat stderr.txt)"; continue; }
        if [ "$form" = recurrent ]; then
            if cmp -s seg37.npy one.npy && cmp -s seg37_s.npy one_s.npy && diff -r ck_seg ck_one >/dev/null; then
                ok "$name: segments of 37 steps == one segment, bit for bit (output, state, checkpoint)"
            else bad "$name" "segments of 37 differ from one segment"; fi
        else
            tol=1e-12
            if [ "$prec" = fp32 ]; then tol=1e-5; fi
            if msg=$($G cmp seg37.npy one.npy $tol) && msg2=$($G cmp seg37_s.npy one_s.npy $tol); then
                ok "$name: segments of 37 steps == one segment to rounding ($msg; state $msg2)"
            else bad "$name" "segments of 37: $msg ${msg2:-}"; fi
        fi
        rm -rf one*.npy seg*.npy ck_one ck_seg
    done
done

test_end
