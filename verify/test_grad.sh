#!/bin/bash
# `falcon grad` (cli/grad_cmd.c): the gradients of one call from .npy files.
#   - fp64 on the scalar backend against --backend mpfr, every gradient
#     file, for a decayed Falcon-1 call and a Falcon-2 batch with gains;
#   - with --checkpoint-in (a first segment's state: previous key and window
#     history), the carried state's gradients are there, shaped [heads, ...];
#   - the directory is written whole or not at all: a bad cotangent (NaN in
#     dO, a dS of the wrong shape) exits 2 naming the file and leaves no
#     directory, and an existing one unchanged.
#
#   verify/test_grad.sh build/falcon
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_grad.sh path/to/falcon"
check_begin

"$PY" - <<'PYEOF'
import numpy as np
r = np.random.default_rng(7)
def save(prefix, lead, n, m, gain=False):
    np.save(prefix + "q.npy", r.standard_normal(lead + (n,)))
    np.save(prefix + "k.npy", r.standard_normal(lead + (n,)))
    np.save(prefix + "v.npy", r.standard_normal(lead + (m,)))
    np.save(prefix + "beta.npy", r.uniform(0.2, 1.5, lead))
    np.save(prefix + "alpha.npy", r.uniform(0.6, 1.0, lead))
    np.save(prefix + "dO.npy", r.standard_normal(lead + (m,)))
    if gain:
        np.save(prefix + "gain.npy", r.uniform(0.5, 1.5, lead + (n,)))
    state = (lead[0], lead[2], m, n) if len(lead) == 3 else (m, n)
    np.save(prefix + "dS.npy", r.standard_normal(state))
save("a_", (11,), 4, 3)
save("b_", (2, 7, 3), 5, 4, gain=True)
bad = np.load("a_dO.npy"); bad[4, 1] = np.nan; np.save("a_dO_nan.npy", bad)
PYEOF

# grad PREFIX OUT BACKEND [extra...]
grad() {
    local p=$1 out=$2 be=$3
    shift 3
    "$FALCON" grad --precision fp64 --backend "$be" --q "${p}q.npy" --k "${p}k.npy" --v "${p}v.npy" \
        --beta "${p}beta.npy" --alpha "${p}alpha.npy" --dO "${p}dO.npy" --dS "${p}dS.npy" --out "$out" "$@"
}

# same DIR_A DIR_B FILES...: every file in both, equal to 1e-13 relative (fp64 kernels vs MPFR)
same() {
    "$PY" - "$@" <<'PYEOF'
import sys, numpy as np
a, b = sys.argv[1:3]
for f in sys.argv[3:]:
    x, y = np.load(a + "/" + f), np.load(b + "/" + f)
    assert x.shape == y.shape and x.dtype == y.dtype, (f, x.shape, y.shape)
    err = np.abs(x - y).max() / max(np.abs(y).max(), 1e-300)
    assert err < 1e-13, (f, err)
PYEOF
}

grad a_ out_s scalar --variant falcon1 --form recurrent
grad a_ out_m mpfr --variant falcon1 --form recurrent
if same out_s out_m dq.npy dk.npy dv.npy dbeta.npy dalpha.npy dS0.npy; then ok "falcon1 fp64: scalar equals mpfr"
else bad "falcon1 fp64" "scalar and mpfr gradients differ"; fi

grad b_ out_bc scalar --variant falcon2 --form chunk --chunk 3 --gain b_gain.npy --align same
grad b_ out_bm mpfr --variant falcon2 --form recurrent --gain b_gain.npy --align same
if same out_bc out_bm dq.npy dk.npy dv.npy dbeta.npy dalpha.npy dgain.npy dS0.npy; then
    ok "falcon2 batch, chunk form: equals mpfr"
else bad "falcon2 batch" "chunk and mpfr gradients differ"; fi

"$FALCON" run --variant falcon3 --form recurrent --window 3 --precision fp64 --q a_q.npy --k a_k.npy --v a_v.npy \
    --beta a_beta.npy --out out_first.npy --checkpoint-out ck
grad a_ out_ck scalar --variant falcon3 --window 3 --form recurrent --checkpoint-in ck
grad a_ out_ckm mpfr --variant falcon3 --window 3 --form recurrent --checkpoint-in ck
if same out_ck out_ckm dq.npy dk.npy dS0.npy dprev_key.npy dhist_k.npy dhist_v.npy &&
   "$PY" -c "import numpy as np; assert np.load('out_ck/dhist_k.npy').shape == (2, 4) and np.load('out_ck/dprev_key.npy').shape == (4,)"; then
    ok "carried state: dprev_key, dhist_k, dhist_v equal mpfr's"
else bad "carried state" "the state's gradients are missing or differ"; fi

expect "NaN in dO" 2 "a_dO_nan.npy" "$FALCON" grad --variant falcon1 --form recurrent --q a_q.npy --k a_k.npy \
    --v a_v.npy --beta a_beta.npy --dO a_dO_nan.npy --out out_nan
[ ! -e out_nan ] && ok "a refused call leaves no directory" || bad "refused call" "out_nan exists"
cp -r out_s out_keep
expect "dS of the wrong shape" 2 "dS (b_dS.npy)" "$FALCON" grad --variant falcon1 --form recurrent --q a_q.npy \
    --k a_k.npy --v a_v.npy --beta a_beta.npy --dO a_dO.npy --dS b_dS.npy --out out_keep
diff -r out_s out_keep >/dev/null && ok "a failed call leaves the earlier directory as it was" \
    || bad "failed call" "out_keep changed"

test_end
