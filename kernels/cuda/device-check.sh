#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine, as one command (about 2-4 minutes):
#   kernels/cuda/device-check.sh
# 1. builds the library with the cuda backend and kernels/cuda/cuda-check
#    (only what that needs: no Criterion). The check's reference is the MPFR
#    recurrence, so libmpfr-dev and libgmp-dev are required: on a machine
#    without them and without a network, bring the Debian packages along
#    (`apt-get download libmpfr-dev libmpfr6 libgmp-dev libgmp10 libgmpxx4ldbl`
#    here, then `dpkg -x` each into a folder there and point CPATH/LIBRARY_PATH
#    at it); the script says so and stops when MPFR is missing;
# 2. prints registers / spills per kernel (make cuda-report);
# 3. correctness: the gate's case table in every form (and larger shapes) on
#    the GPU against the MPFR reference, with the gate's thresholds in units
#    of 2^-24 (cuda-check device), then the backward: the gradient gate's
#    quick table in every form through falcon_backward on the GPU, against
#    the MPFR reverse sweep with the gate's per-tensor thresholds;
# 4. benchmark: tokens/s and fraction of the measured fp32 FMA peak, heads 16
#    and 64, n = m = 64 and 128, recurrent and chunk (C = 64), T = 65536
#    (T_BENCH=... to change);
# 5. compute-sanitizer racecheck + memcheck on one small case per variant and
#    form, and one backward case per variant, when compute-sanitizer
#    exists, with the time that is left;
# then a short summary table last. Logs go to $OUT (if set) or
# /tmp/falcon-devcheck. Environment: BUILD (build dir, default
# build-devcheck), NVCC, T_BENCH, BUDGET (seconds, default 285), SKIP_SANITIZER=1.
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${BUILD:-build-devcheck}
LOG=${OUT:-/tmp/falcon-devcheck}
T_BENCH=${T_BENCH:-65536}
mkdir -p "$LOG"
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
BUDGET=${BUDGET:-285} # seconds for the whole script
elapsed() { echo $(( $(date +%s) - START )); }
# timeout for a stage: at most $1 s, and leave $2 s for the stages after it
limit() { local l=$(( BUDGET - $(elapsed) - $2 )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 5 ] && l=5; echo "$l"; }
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then echo "device-check: nvcc not found (set NVCC)"; exit 2; fi

{
  echo "== machine"
  nvidia-smi -L 2>&1 | head -4
  "$NVCC" --version | tail -2
  gcc --version | head -1
} | tee "$LOG/machine.txt"

# ---- 1. build ----
if echo '#include <mpfr.h>' | gcc -E -x c - >/dev/null 2>&1 && \
   echo 'int main(void){return 0;}' | gcc -x c - -lmpfr -lgmp -o /tmp/falcon-mpfr-probe >/dev/null 2>&1; then
  MPFR=yes
  make BUILD="$B" NVCC="$NVCC" -j"$JOBS" lib "$B/cuda-check" >"$LOG/build.log" 2>&1
  BUILD_RC=$?
else
  MPFR=no
  echo "== MPFR is missing (libmpfr-dev, libgmp-dev): the check's reference needs it; bring the packages" \
       "(see the top of this script)"
  BUILD_RC=2
  echo "MPFR missing" >"$LOG/build.log"
fi
echo "== build: rc=$BUILD_RC, MPFR: $MPFR ($(elapsed) s)"
if [ $BUILD_RC -ne 0 ]; then tail -40 "$LOG/build.log"; exit 1; fi
make BUILD="$B" NVCC="$NVCC" cuda-report >"$LOG/cuda-report.txt" 2>&1

# ---- 2. correctness on the GPU ----
timeout "$(limit 130 100)" "$B/cuda-check" device >"$LOG/device.txt" 2>&1
DEV_RC=$?
echo "== device check: rc=$DEV_RC ($(elapsed) s)"

# ---- 3. benchmark ----
timeout "$(limit 100 10)" "$B/cuda-check" bench "$T_BENCH" >"$LOG/bench.txt" 2>&1
BENCH_RC=$?
echo "== bench: rc=$BENCH_RC ($(elapsed) s)"

# ---- 4. sanitizers (small cases), with the time that is left ----
SAN="skipped"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -z "${SKIP_SANITIZER:-}" ] && [ -n "$CS" ] && [ "$(limit 60 30)" -gt 20 ]; then
  timeout "$(limit 60 30)" "$CS" --tool racecheck --racecheck-report all --error-exitcode 9 "$B/cuda-check" device quick \
      >"$LOG/racecheck.txt" 2>&1
  RC1=$?
  timeout "$(limit 45 5)" "$CS" --tool memcheck --error-exitcode 9 "$B/cuda-check" device quick >"$LOG/memcheck.txt" 2>&1
  RC2=$?
  SAN="racecheck rc=$RC1, memcheck rc=$RC2 (0 = clean, 9 = errors found, 124 = timed out)"
elif [ -z "$CS" ]; then
  SAN="compute-sanitizer not found"
else
  SAN="skipped (SKIP_SANITIZER set, or too little time left)"
fi
echo "== sanitizers: $SAN ($(elapsed) s)"

# ---- summary, last ----
echo
echo "================ CUDA device check summary ($(elapsed) s) ================"
head -2 "$LOG/machine.txt" | tail -1
echo "build: ok, MPFR reference: $MPFR; logs in $LOG"
echo "-- registers / spills (ptxas)"
grep -E 'fc_k_(recurrent|blocked|backward|prep)' "$LOG/cuda-report.txt"
echo "-- correctness (GPU vs fp64 reference, units of 2^-24)"
grep -E '^(reference|device:)' "$LOG/device.txt" | head -2
sed -n '/^variant /,/^$/p' "$LOG/device.txt"
grep -E '^FAIL' "$LOG/device.txt" | head -10
grep -E '^(largest excess|gate:|device check:)' "$LOG/device.txt"
echo "-- backward (gradient gate, quick table; max/thr per form)"
sed -n '/^backward (/,/^backward device check/p' "$LOG/device.txt"
[ $DEV_RC -eq 124 ] && echo "device check TIMED OUT"
echo "-- sanitizers: $SAN"
for f in racecheck memcheck; do
  [ -f "$LOG/$f.txt" ] && grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Error|hazard' "$LOG/$f.txt" | head -4
done
echo "-- benchmark"
grep -E 'measured fp32' "$LOG/bench.txt"
sed -n '/^form /,$p' "$LOG/bench.txt"
[ $BENCH_RC -ne 0 ] && echo "bench rc=$BENCH_RC" && tail -5 "$LOG/bench.txt"
if [ $DEV_RC -eq 0 ]; then echo "RESULT: PASS"; exit 0; else echo "RESULT: FAIL (device check rc=$DEV_RC)"; exit 1; fi
