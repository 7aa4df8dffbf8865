#!/bin/bash
# Gradients in case sets: `falcon cases export --grad` and `falcon check`
# judging the gradients an implementation writes (docs/cases.md,
# "Gradients"). On the quick set's cases of one decay regime (mix: several
# heads, carried states, decays; 21 cases, every form):
#   - without --grad the set is what it was: the same files, case.json
#     without the gradients' keys; --grad with another layout is refused;
#   - the project's own kernels (falcon run and falcon grad, driven by
#     verify/check_run_cli.py --grad) pass, in every form;
#   - wrong gradient twins fail, with the gradient named: dq scaled by
#     (1 + 1e-3), dalpha without the first step's term, dS0 all zeros,
#     every gradient of the last head left zero, a NaN in dv;
#   - results without gradients are judged on the forward alone and say so;
#     a gradient of the wrong shape, one the case has no reference for, and
#     an edited reference gradient or threshold are refused (status 2).
#
#   verify/test_check_grad.sh build/falcon
#
# Needs python3 with numpy. Ends with "N passed, M failed".
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_check_grad.sh path/to/falcon"
check_begin

start=$(date +%s%N)
"$FALCON" cases export gs --grad --decay mix --quiet
"$FALCON" cases export plain --decay mix --quiet
echo "     --grad export (decay mix): $((($(date +%s%N) - start) / 1000000)) ms for both sets"

# ---- without --grad nothing changes; --grad adds files and keys only ----
if "$PY" - gs plain <<'EOF'; then ok "without --grad the set is unchanged; --grad adds its files and keys only"
import json, os, sys
g, p = sys.argv[1:]
extra = {"dO.npy", "dS_T.npy"}
def same(a, b):
    return open(a, "rb").read() == open(b, "rb").read()
ig, ip = json.load(open(g + "/index.json")), json.load(open(p + "/index.json"))
assert ig["export"].pop("grad") is True and "grad" not in ip["export"], "export record"
assert ig == ip, "index"
for row in ip["cases"]:
    d = row["dir"]
    fg, fp = set(os.listdir(os.path.join(g, d))), set(os.listdir(os.path.join(p, d)))
    assert fp <= fg and all(f in extra or f.startswith("ref_d") for f in fg - fp), (d, fg - fp)
    for f in fp - {"case.json", "state0"}:
        assert same(os.path.join(g, d, f), os.path.join(p, d, f)), (d, f)
    cg, cp = json.load(open(os.path.join(g, d, "case.json"))), json.load(open(os.path.join(p, d, "case.json")))
    assert set(cg) - set(cp) == {"gradients", "cotangents"}, d
    del cg["gradients"], cg["cotangents"]
    assert cg == cp, d
EOF
else bad "--grad adds only" "see above"; fi
expect "--grad with the fla layout: not yet" 2 "not yet" "$FALCON" cases export gfla --grad --layout fla --quiet

# ---- the project's kernels pass, every form, every gradient judged ----
start=$(date +%s%N)
"$PY" "$RUN_CLI" "$FALCON" gs res --grad
echo "     falcon run + falcon grad over the set: $((($(date +%s%N) - start) / 1000000)) ms"
expect "the project's kernels pass the --grad set" 0 "21 passed, 0 failed" "$FALCON" check gs --results res \
    --json res.json --junit res.xml
if "$PY" - res.json <<'EOF'; then ok "every form judged; every gradient given, within its threshold"
import json, sys
j = json.load(open(sys.argv[1]))
forms = {c["form"] for c in j["cases"]}
grads = [g for c in j["cases"] for g in c["gradients"].values()]
assert forms == {"recurrent", "chunk", "parallel"}, forms
assert grads and all(g["status"] == "pass" and g["err_u"] <= g["thr_u"] for g in grads)
names = {r["gradient"] for r in j["gradients"]}
assert {"dq", "dk", "dv", "dbeta", "dalpha", "dS0", "dprev_key"} <= names, names
assert j["counts"]["gradients_not_given"] == 0
EOF
else bad "kernels' gradients" "$(head -c 400 res.json)"; fi
if xmllint --noout res.xml && grep -q 'classname="falcon\.[a-z0-9]*\.parallel\.gradients" name="[^"]* dS0"' res.xml
then ok "JUnit: one test per gradient"; else bad "JUnit gradients" "$(grep -m2 gradients res.xml)"; fi

# ---- wrong twins fail, the gradient named ----
# twin NAME GRADIENT PYTHON: the correct results edited by PYTHON (numpy
# as np, x the gradient's array of a case, c its case.json; it returns the
# new array) for every case that has GRADIENT; the check must exit 1 with
# a failing line for that gradient.
twin() {
    local name=$1 grad=$2 edit=$3 rc=0
    rm -rf twin && cp -r res twin
    "$PY" - gs twin "$grad" "$edit" <<'EOF'
import json, os, sys
import numpy as np
cs, rd, grad, edit = sys.argv[1:]
for d in os.listdir(rd):
    if not os.path.exists(os.path.join(cs, d, "case.json")):
        continue
    c = json.load(open(os.path.join(cs, d, "case.json")))
    if grad not in c["gradients"]:
        continue
    f = os.path.join(rd, d, c["gradients"][grad]["result"])
    x = np.load(f)
    np.save(f, eval(edit, {"np": np, "x": x.copy(), "c": c}).astype(x.dtype))
EOF
    "$FALCON" check gs --results twin --trust-set --format lines >twin.txt 2>&1 || rc=$?
    local k
    k=$(grep -c " $grad: FAIL" twin.txt || true)
    if [ "$rc" -eq 1 ] && [ "$k" -gt 0 ]; then ok "twin $name: FAIL as it should ($k cases name $grad)"
    else bad "twin $name" "status $rc, $k failing $grad lines: $(tail -n 2 twin.txt)"; fi
}
twin "dq scaled by (1 + 1e-3)" dq 'x * (1 + 1e-3)'
twin "dalpha without the first step's term" dalpha 'np.concatenate([0 * x[:, :1], x[:, 1:]], axis=1)'
twin "dS0 all zeros" dS0 '0 * x'
# every gradient of the last head left zero: the step tensors [B,T,H,...]
# and the state's [B,H,...]
for g in dq dk dv dbeta dS0; do
    if [ "$g" = dS0 ]; then e='np.concatenate([x[:, :-1], 0 * x[:, -1:]], axis=1) if c["H"] > 1 else x'
    else e='np.concatenate([x[:, :, :-1], 0 * x[:, :, -1:]], axis=2) if c["H"] > 1 else x'; fi
    twin "$g of the last head left zero" "$g" "$e"
done
twin "a NaN in dv" dv 'np.where(np.arange(x.size).reshape(x.shape) == 0, np.nan, x)'
if grep -q "dv: FAIL not finite" twin.txt; then ok "a NaN in a gradient fails as not finite"
else bad "NaN gradient" "$(grep ' dv: ' twin.txt | head -2)"; fi

# ---- Python: load_case has the cotangents and reference gradients,
# write_result writes gradients (the CLI's, rewritten through it) ----
rm -rf pyres && cp -r res pyres && rm -f pyres/*/d*.npy
if PYTHONPATH="$HERE/../python" "$PY" - gs pyres res <<'EOF' &&
import os, sys
import numpy as np
import falcon_suite
cs, rd, cli = sys.argv[1:4]
for name in sorted(os.listdir(rd)):
    c = falcon_suite.load_case(os.path.join(cs, name))
    assert c.dO.shape == (c.B, c.T, c.H, c.m) and c.dS_T.shape == (c.B, c.H, c.m, c.n), name
    assert set(c.ref_grads) == set(c.gradients) and "dS0" in c.ref_grads, name
    got = {g: np.load(os.path.join(cli, name, g + ".npy")) for g in c.ref_grads}
    falcon_suite.write_result(rd, name, np.load(os.path.join(rd, name, "out.npy")),
                              np.load(os.path.join(rd, name, "state.npy")), grads=got)
try:
    falcon_suite.write_result(rd, name, got["dS0"], grads={"dS": got["dS0"]})
    sys.exit("an unknown gradient name was written")
except ValueError:
    pass
EOF
    "$FALCON" check gs --results pyres --trust-set >stdout.txt && ! grep -q "without gradients" stdout.txt; then
    ok "python: load_case reads the cotangents and reference gradients; write_result writes gradients"
else bad "python gradients" "load_case or write_result"; fi

# ---- results without gradients: judged on the forward alone, and said ----
rm -rf fwd && cp -r res fwd && rm -f fwd/*/d*.npy
expect "results without gradients: not graded for gradients, said" 0 "21 without gradients" \
    "$FALCON" check gs --results fwd --trust-set
if grep -q "gradients not given: 21 of 21 cases" stdout.txt; then ok "the table names the cases without gradients"
else bad "gradients not given" "$(tail -n 4 stdout.txt)"; fi
expect "--require-grad: results without gradients are bad input" 2 "missing gradient dq" \
    "$FALCON" check gs --results fwd --trust-set --require-grad
expect "--require-grad: a set without gradients is bad input" 2 "has no reference gradients" \
    "$FALCON" check plain --results fwd --trust-set --require-grad
expect "--require-grad: the kernels' full results pass" 0 "21 passed" "$FALCON" check gs --results res --trust-set \
    --require-grad

# ---- bad input ----
one=$(ls res | grep -- '-recurrent' | head -1)
rm -rf shp && cp -r res shp
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.zeros((1, 2, 3), np.float32))" "shp/$one/dq.npy"
expect "a gradient of the wrong shape is refused" 2 "dq.npy: shape [1,2,3], expected" \
    "$FALCON" check gs --results shp --trust-set
rm -rf xtra && cp -r fwd xtra && cp "res/$one/dq.npy" "xtra/$one/dq.npy"
expect "a gradient for a set exported without --grad is refused" 2 "exported without --grad" \
    "$FALCON" check plain --results xtra --trust-set
fresh=$("$PY" -c "
import json, sys
for r in json.load(open('gs/index.json'))['cases']:
    if 'dprev_key' not in json.load(open('gs/' + r['dir'] + '/case.json'))['gradients']: print(r['dir']); break")
cp "res/$one/dS0.npy" "fwd/$fresh/dprev_key.npy"
expect "a gradient the case has no reference for is refused" 2 "has no reference for" \
    "$FALCON" check gs --results fwd --trust-set
rm "fwd/$fresh/dprev_key.npy"
cp "gs/$one/ref_dq.npy" keep.npy
"$PY" -c "import numpy as np, sys; x = np.load(sys.argv[1]); np.save(sys.argv[1], x * 1.5)" "gs/$one/ref_dq.npy"
expect "an edited reference gradient is refused" 2 "ref_dq.npy': differs" "$FALCON" check gs --results res
cp keep.npy "gs/$one/ref_dq.npy"
sed -i 's/"threshold_u": \([0-9]\)/"threshold_u": 9\1/' "gs/$one/case.json"
expect "an edited gradient threshold is refused" 2 "case.json': differs" "$FALCON" check gs --results res

test_end
