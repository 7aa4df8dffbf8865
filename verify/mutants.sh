#!/usr/bin/env bash
# Seeded bugs: each mutant below is applied alone to a scratch copy of the
# tree, the gate is rebuilt and run, and the mutant must make it fail. Prints
# which tests caught each one. Usage: verify/mutants.sh [mutant-name ...]
# The copy is built once; each mutant then rebuilds only what its file
# reaches and is undone before the next. The CUDA objects are left out
# (NVCC=/nonexistent): nothing here can run them, and nvcc would rebuild
# them for every mutant of the shared math. MUTANTS_FAIL_FAST=1 stops each
# gate run at its first failure (CI: a caught mutant costs seconds, and the
# line names one catcher instead of all).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
tree=$scratch/tree
mk() { make -C "$tree" -s BUILD=build NVCC=/nonexistent "$@"; }
mkdir -p "$tree"
(cd "$root" && tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - .) | tar -C "$tree" -xf -
if ! mk build/falcon-verify >"$scratch/build.log" 2>&1; then
    echo "mutants: the unmutated tree does not build"; tail -20 "$scratch/build.log"; exit 1
fi

# name | file | sed expression (must change the file)
mutants=(
"prefix-as-same|src/run_cpu.inc.c|s/\.prefix = cfg->align == FALCON_ALIGN_PREFIX,/.prefix = 0,/"
"decay-skipped-recurrent|kernels/framework/recurrent.inc.c|s/const REAL a = h->alpha ? h->alpha\[t \* h->lds\] : (REAL)1;/const REAL a = (h->alpha \&\& t != 3) ? h->alpha[t * h->lds] : (REAL)1;/"
"decay-skipped-blocked|kernels/framework/blocked.inc.c|s/falcon_decay_row_advance(row, i, h->alpha ? /falcon_decay_row_advance(row, i, h->alpha \&\& c0 + j != 3 ? /"
"eta-without-eps|kernels/common/falcon_math.h|s/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + (xz_sum)))/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ (xz_sum))/"
"eta-with-norm-not-square|kernels/common/falcon_math.h|s/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + (xz_sum)))/#define FALCON_ETA(beta, eps, xz_sum) ((beta) \/ ((eps) + sqrt(xz_sum)))/"
"window-one-short|kernels/common/falcon_math.h|s/int64_t f = e - ex->window + 1;/int64_t f = e - ex->window + 2;/"
"chunk-boundary-off-by-one|kernels/framework/blocked.inc.c|s/g_lo = falcon_window_first(\&src.ex, e_first);/g_lo = falcon_window_first(\&src.ex, e_first) + (c0 > 0);/"
"chunk-decay-boundary|kernels/framework/blocked.inc.c|s/h->alpha\[(c0 + j) \* h->lds\] : 1.0);/h->alpha[(c0 + j - (c0 > 0 \&\& j == 0)) * h->lds] : 1.0);/"
)

want=("$@")
caught=0; missed=0
for entry in "${mutants[@]}"; do
    IFS='|' read -r name file expr <<<"$entry"
    if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
    cp -p "$tree/$file" "$scratch/original"
    sed -i "$expr" "$tree/$file"
    if cmp -s "$scratch/original" "$tree/$file"; then
        echo "mutant $name: the edit did not apply to $file"; missed=$((missed + 1)); continue
    fi
    built=1
    mk build/falcon-verify >"$scratch/build.log" 2>&1 || built=0
    out=
    [ $built -eq 1 ] && out=$("$tree/build/falcon-verify" --jobs="$(nproc)" ${MUTANTS_FAIL_FAST:+--fail-fast} 2>&1)
    # Undo it: the original back, newer than every object built from the mutant.
    cp "$scratch/original" "$tree/$file" && touch "$tree/$file"
    if [ $built -eq 0 ]; then
        echo "mutant $name: does not build"; tail -5 "$scratch/build.log"; missed=$((missed + 1)); continue
    fi
    failing=$(printf '%s\n' "$out" | sed -n 's/.*\[FAIL\] \([^ :]*::[^: ]*\).*/\1/p' | sort -u | tr '\n' ' ')
    if [ -n "$failing" ]; then
        echo "mutant $name: caught by $failing"; caught=$((caught + 1))
    else
        echo "mutant $name: NOT caught"; missed=$((missed + 1))
    fi
done
echo "$caught passed, $missed failed"
[ "$missed" -eq 0 ]
