#!/bin/bash
# The python side of case grading, end to end: `falcon cases export`, the
# worked examples in examples/ as outside implementations, `falcon check`
# on them, and the python module (python/falcon_suite) over libfalcon.
#
#   verify/test_python.sh build/falcon
#
# Checks, in order:
#   - the quick case set exports, and its index.json is well formed;
#   - examples/numpy_falcon.py computed in float64 passes `falcon check
#     --precision fp64`, computed in float32 passes `--precision fp32`
#     (exit 0), with a valid --json report (json.load) and --junit XML
#     (xmllint --noout, one testcase per case);
#   - each wrong twin of it fails (exit 1) and fails the right cases:
#       --bug same-step          every failing case has prefix alignment, and
#                                every prefix case with a step (T > 0) fails;
#       --bug decay-after-write  every failing case has a decay, and some fails;
#     and the report's text names every failing case;
#   - a results directory with a case missing is bad input (exit 2, one line
#     "falcon: error: ..." naming the case);
#   - python/tests/test_falcon.py and test_layouts.py (with pytest when it
#     is installed, else each as a plain script): falcon_suite.run against
#     the command, falcon_suite.reference against the numpy example,
#     `assert falcon_suite.check(...).passed`, torch tensors in and out,
#     falcon_suite.testing's ids and assert_case; packed batches and grouped
#     heads against the plain calls they equal;
#   - examples/test_my_kernel.py under pytest (falcon_suite.testing): one
#     test per case of the quick set, each passing;
#   - pip install --no-build-isolation of a copy of python/ into a venv
#     (FALCON_BUILD_DIR: the libraries beside the falcon binary): run from
#     outside the tree with no FALCON_* variable, falcon_suite loads the
#     copies in its wheel, runs, exports; FALCON_LIB still overrides them;
#     with FALCON_TEST_PIP_ISOLATED=1 also `pip install ./python` into a
#     plain venv, with build isolation (needs the package index);
#   - the Python blocks of the README ("## Python") and of docs/check.md
#     ("## From Python and pytest") with the first python3 on PATH: without numpy, one line says falcon_suite needs
#     it; with it, every block runs (a test_* block under pytest); then
#     with $PYTHON when that is another interpreter;
#   - examples/torch_falcon_chunk.py on the case set exported with --layout
#     fla, graded in fp32; "skipped: torch not installed" without torch;
#     its autograd gradients on a --grad set pass --require-grad, and its
#     two wrong twins of the backward pass fail naming the gradient;
#   - bench/peers.py --quick: every peer agrees with libfalcon and the JSON
#     says so; a peer with a seeded bug (no decay, no normaliser) fails the
#     run (exit 1) and leaves the earlier --json file as it was; --ggml
#     naming a folder without ggml measures the rest and says so; a thread
#     count of 0 is bad usage (exit 2).
# Environment: PYTHON, the interpreter (default /usr/bin/python3; it needs
# numpy; pytest and torch are optional, setuptools and wheel for the
# install). The libraries are taken next to the
# falcon binary (libfalcon.so, libfalcon-grade.so) unless FALCON_LIB /
# FALCON_GRADE_LIB are set.
# Ends with "N passed, M failed" (", K skipped" when some were); exits
# non-zero if any failed.
set -eu

. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_python.sh path/to/falcon"
ROOT=$(cd "$HERE/.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
BIN_DIR=$(dirname "$FALCON")
export FALCON_BIN=$FALCON
export FALCON_LIB=${FALCON_LIB:-$BIN_DIR/libfalcon.so}
export FALCON_GRADE_LIB=${FALCON_GRADE_LIB:-$BIN_DIR/libfalcon-grade.so}
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1   # leave nothing in the source tree
skipped=0
skip() { skipped=$((skipped + 1)); echo "skip $1: $2"; }

finish() {
    if [ "$skipped" -gt 0 ]; then
        echo "$passed passed, $failed failed, $skipped skipped"
    else
        echo "$passed passed, $failed failed"
    fi
    [ "$failed" -eq 0 ]
}

if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
    bad "python" "$PYTHON cannot import numpy (set PYTHON to an interpreter that has it)"
    finish
    exit 1
fi

# indent FILE: a command's report, shifted right under the test's line.
indent() { sed 's/^/     | /' "$1"; }

# ---- export ----
rc=0
"$FALCON" cases export cases --profile quick >export.txt 2>&1 || rc=$?
if [ $rc -ne 0 ]; then
    bad "cases export --profile quick" "status $rc: $(cat export.txt)"
    finish
    exit 1
fi
if msg=$("$PYTHON" - cases <<'EOF'
import json, os, sys
d = sys.argv[1]
ix = json.load(open(os.path.join(d, "index.json")))
assert ix["format"] == "falcon-cases" and ix["version"] == 1, "format/version"
assert ix["count"] == len(ix["cases"]) > 0, "count"
for c in ix["cases"]:
    cj = json.load(open(os.path.join(d, c.get("dir", c["name"]), "case.json")))
    assert cj["name"] == c["name"], c["name"]
print("%d cases, layout %s" % (ix["count"], ix["layout"]))
EOF
); then ok "cases export: $msg"; else bad "cases export" "index.json: $msg"; fi

# numpy_run RDIR ARGS...: the numpy example on the case set into RDIR.
numpy_run() {
    local rdir=$1
    shift
    "$PYTHON" "$ROOT/examples/numpy_falcon.py" cases "$rdir" "$@" >np.txt 2>&1
}

# check_json FILE: the --json report is well formed; prints "P pass, F fail, S skip".
check_json() {
    "$PYTHON" - "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["format"] == "falcon-check" and j["version"] == 1, "format/version"
c = j["counts"]
st = [x["status"] for x in j["cases"]]
assert (c["pass"], c["fail"], c["skip"]) == (st.count("pass"), st.count("fail"), st.count("skip")), "counts"
assert j["passed"] == (c["fail"] == 0), "passed flag"
for x in j["cases"]:
    if x["status"] == "skip":
        assert x.get("reason"), "skip without reason: " + x["name"]
print("%d pass, %d fail, %d skip" % (c["pass"], c["fail"], c["skip"]))
EOF
}

# check_junit FILE JSON: valid XML (xmllint), one testcase per case, as many
# failures and skips (skipped or not judgeable) as the JSON report says.
check_junit() {
    if ! command -v xmllint >/dev/null; then echo "xmllint not installed"; return 1; fi
    xmllint --noout "$1" 2>&1 || return 1
    "$PYTHON" - "$1" "$2" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
j = json.load(open(sys.argv[2]))
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
fails = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
skips = [c for c in cases if c.find("skipped") is not None]
assert len(cases) == len(j["cases"]), "%d testcases for %d cases" % (len(cases), len(j["cases"]))
assert len(fails) == j["counts"]["fail"], "%d failures, the JSON says %d" % (len(fails), j["counts"]["fail"])
# <skipped>: the cases skipped and those not judgeable in the unit
nskip = j["counts"]["skip"] + j["counts"]["unjudgeable"]
assert len(skips) == nskip, "%d skipped, the JSON says %d" % (len(skips), nskip)
print("%d testcases" % len(cases))
EOF
}

# ---- the numpy example passes, in fp64 and in fp32 units ----
for pair in float64:fp64 float32:fp32; do
    dtype=${pair%%:*} prec=${pair#*:}
    name="numpy example ($dtype) passes check --precision $prec"
    if ! numpy_run "r_$dtype" --dtype "$dtype"; then bad "$name" "the example failed: $(cat np.txt)"; continue; fi
    rc=0
    "$FALCON" check cases --results "r_$dtype" --precision "$prec" --json "c_$prec.json" \
        --junit "c_$prec.xml" >check.txt 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then ok "$name"; else bad "$name" "status $rc"; fi
    indent check.txt
    if msg=$(check_json "c_$prec.json" 2>&1); then ok "check --json ($prec) is valid: $msg"
    else bad "check --json ($prec)" "$msg"; fi
    if msg=$(check_junit "c_$prec.xml" "c_$prec.json" 2>&1); then ok "check --junit ($prec) is valid: $msg"
    else bad "check --junit ($prec)" "$msg"; fi
done

# ---- the wrong twins fail, on the right cases ----
# twin_cases BUG JSON: the failing cases are the ones this bug must break.
twin_cases() {
    "$PYTHON" - "$@" <<'EOF'
import json, os, sys
import numpy as np
bug, jpath, cases, report = sys.argv[1:5]
j = json.load(open(jpath))
text = open(report).read()
failed = [c for c in j["cases"] if c["status"] == "fail"]
graded = [c for c in j["cases"] if c["status"] != "skip"]
names = sorted(c["name"] for c in failed)
assert failed, "no case failed"
unnamed = [n for n in names if n not in text]
assert not unnamed, "the report does not name %s" % unnamed

dirs = {c["name"]: c.get("dir", c["name"]) for c in json.load(open(os.path.join(cases, "index.json")))["cases"]}

def meta(name):
    return json.load(open(os.path.join(cases, dirs[name], "case.json")))

if bug == "same-step":
    wrong = [c["name"] for c in failed if c["align"] != "prefix"]
    assert not wrong, "cases without prefix alignment failed: %s" % wrong
    missed = [c["name"] for c in graded if c["align"] == "prefix" and c["status"] != "fail"
              and meta(c["name"])["T"] > 0]
    assert not missed, "prefix cases passed: %s" % missed
elif bug == "decay-after-write":
    wrong = [c["name"] for c in failed if c["decay"] == "none"]
    assert not wrong, "cases without decay failed: %s" % wrong
def tally(key, label):
    return label + " " + ", ".join(
        "%s %d/%d" % (k, sum(c["status"] == "fail" for c in graded if key(c) == k), sum(key(c) == k for c in graded))
        for k in sorted(set(key(c) for c in graded)))
print("%d of %d fail (%s; %s)" % (len(failed), len(graded), tally(lambda c: c["align"], "align"),
                                  tally(lambda c: "none" if c["decay"] == "none" else "decayed", "decay")))
EOF
}
# (state-fp16 overflows half on the large carried memory, which check refuses
# as non-finite: verify/test_twins.sh runs it, with every other twin.)
for bug in same-step decay-after-write; do
    name="wrong twin --bug $bug fails check --precision fp32"
    if ! numpy_run "r_$bug" --dtype float32 --bug "$bug"; then bad "$name" "the example failed: $(cat np.txt)"; continue; fi
    rc=0
    "$FALCON" check cases --results "r_$bug" --precision fp32 --json "c_$bug.json" \
        --junit "c_$bug.xml" >check.txt 2>&1 || rc=$?
    if [ $rc -ne 1 ]; then bad "$name" "status $rc, expected 1: $(tail -n 3 check.txt)"; continue; fi
    if msg=$(twin_cases "$bug" "c_$bug.json" cases check.txt 2>&1); then ok "$name: $msg"
    else bad "$name" "$msg"; fi
    if msg=$(check_junit "c_$bug.xml" "c_$bug.json" 2>&1); then ok "check --junit ($bug) is valid: $msg"
    else bad "check --junit ($bug)" "$msg"; fi
done

# ---- bad input: a result missing ----
cp -r r_float32 r_missing
victim=$(cd r_missing && ls -d */ | head -n 1)
victim=${victim%/}
rm -rf "r_missing/$victim"
rc=0
"$FALCON" check cases --results r_missing >stdout.txt 2>stderr.txt || rc=$?
if [ $rc -ne 2 ]; then bad "missing result is bad input" "status $rc, expected 2"
elif [ "$(wc -l <stderr.txt)" -ne 1 ] || ! grep -q "^falcon: error: .*$victim" stderr.txt; then
    bad "missing result is bad input" "expected one 'falcon: error:' line naming $victim: $(cat stderr.txt)"
else ok "missing result is bad input -> $(cat stderr.txt)"
fi

# ---- the python module's tests ----
py_tests=("$ROOT/python/tests/test_falcon.py" "$ROOT/python/tests/test_layouts.py")
rc=0
if "$PYTHON" -c 'import pytest' 2>/dev/null; then
    how=pytest
    FALCON_CASES=$WORK/cases "$PYTHON" -m pytest -q -rs -p no:cacheprovider "${py_tests[@]}" >pytest.txt 2>&1 || rc=$?
else
    how="plain python (pytest not installed)"
    : >pytest.txt
    for t in "${py_tests[@]}"; do
        FALCON_CASES=$WORK/cases "$PYTHON" "$t" >>pytest.txt 2>&1 || rc=$?
    done
fi
indent pytest.txt
if [ $rc -eq 0 ]; then ok "python module tests ($how)"; else bad "python module tests ($how)" "status $rc"; fi

# ---- the pytest example: a test per case through falcon_suite.testing ----
if ! "$PYTHON" -c 'import pytest' 2>/dev/null; then
    skip "examples/test_my_kernel.py" "pytest not installed"
else
    count=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["count"])' cases/index.json)
    rc=0
    FALCON_CASES=$WORK/cases "$PYTHON" -m pytest -q -p no:cacheprovider "$ROOT/examples/test_my_kernel.py" \
        >example.txt 2>&1 || rc=$?
    tail -n 2 example.txt >example-tail.txt
    indent example-tail.txt
    if [ $rc -eq 0 ] && grep -q "^$count passed" example.txt; then
        ok "examples/test_my_kernel.py under pytest: $count cases, each its own test"
    else bad "examples/test_my_kernel.py under pytest" "status $rc, want $count passed: $(tail -n 5 example.txt)"; fi
fi

# ---- pip install: the wheel carries the libraries ----
# pip_check VENV WANT_DIR: the installed package, run from outside the source
# tree with no FALCON_* variable, loads every library built beside the falcon
# binary from WANT_DIR, runs (the reference too, where built), exports a case
# set; FALCON_LIB still overrides it.
pip_check() {
    (cd "$WORK" && env -u FALCON_LIB -u FALCON_GRADE_LIB -u FALCON_REF_LIB -u PYTHONPATH "$1/bin/python" - \
        "$2" "$FALCON_LIB" "$BIN_DIR" <<'EOF'
import os, sys, subprocess, tempfile
import numpy as np
import falcon_suite
want, override, built = sys.argv[1:4]
assert os.path.dirname(falcon_suite.lib_path()) == want, (falcon_suite.lib_path(), want)
args = np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), np.full(3, 0.5)
out, S = falcon_suite.run(*args)
if os.path.exists(os.path.join(built, "libfalcon-ref.so")):  # the MPFR reference, where built
    ref, _ = falcon_suite.reference(*args)
    assert np.allclose(out, ref, rtol=1e-6), (out, ref)
ix = falcon_suite.export_cases(os.path.join(tempfile.mkdtemp(dir="."), "cases"), quiet=True,
                               variant="falcon1", form="recurrent")
paths = falcon_suite.library_paths()
wheel = sorted(f for f in os.listdir(built) if f in ("libfalcon.so", "libfalcon-grade.so", "libfalcon-ref.so"))
assert sorted(paths) == wheel and all(os.path.dirname(p) == want for p in paths.values()), (paths, wheel)
env = dict(os.environ, FALCON_LIB=override)
got = subprocess.run([sys.executable, "-c", "import falcon_suite; print(falcon_suite.lib_path())"],
                     env=env, check=True, capture_output=True, text=True).stdout.strip()
assert got == override, (got, override)
print("%s from %s; %d cases exported" % (", ".join(sorted(paths)), os.path.relpath(want, sys.prefix), ix["count"]))
EOF
    )
}

if ! "$PYTHON" -c 'import setuptools, wheel, venv' 2>/dev/null; then
    skip "pip install --no-build-isolation" "$PYTHON lacks setuptools, wheel or venv"
else
    # from a copy of python/ (the source tree stays clean), the libraries of $BIN_DIR
    mkdir -p pysrc && cp -r "$ROOT/python" pysrc/python
    rm -rf pysrc/python/build pysrc/python/*.egg-info
    rc=0
    { "$PYTHON" -m venv --system-site-packages venv &&
      FALCON_BUILD_DIR=$BIN_DIR venv/bin/pip install -q --no-build-isolation pysrc/python; } >pip.txt 2>&1 || rc=$?
    site=$(venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
    if [ $rc -ne 0 ]; then bad "pip install --no-build-isolation ./python" "status $rc: $(tail -n 5 pip.txt)"
    elif msg=$(pip_check "$WORK/venv" "$site/falcon_suite/_libs" 2>&1); then
        ok "pip install --no-build-isolation ./python: import falcon_suite with no FALCON_LIB: $msg"
    else bad "pip install --no-build-isolation ./python, then import falcon_suite" "$msg"; fi
fi
# With build isolation the build fetches setuptools from the package index
# and runs make in the source tree: only on request (network, a build).
if [ "${FALCON_TEST_PIP_ISOLATED:-0}" = 1 ]; then
    rc=0
    start=$(date +%s)
    { "$PYTHON" -m venv venv-iso && venv-iso/bin/pip install -q "$ROOT/python"; } >pip.txt 2>&1 || rc=$?
    secs=$(( $(date +%s) - start ))
    site=$(venv-iso/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
    if [ $rc -ne 0 ]; then bad "pip install ./python (build isolation)" "status $rc: $(tail -n 5 pip.txt)"
    elif msg=$(pip_check "$WORK/venv-iso" "$site/falcon_suite/_libs" 2>&1); then
        ok "pip install ./python in a plain venv, build isolation (${secs}s): $msg"
    else bad "pip install ./python (build isolation), then import falcon_suite" "$msg"; fi
fi

# ---- the README's Python blocks ----
# Each ```python block of the README's "## Python" and of docs/check.md's
# "## From Python and pytest", as a file: one defining test_* functions
# runs under pytest, the others as scripts. They run with the first python3
# on PATH, which without numpy must say so in one line, and with $PYTHON
# when that is another interpreter.
nblocks=$("$PYTHON" - "$ROOT/README.md" "$ROOT/docs/check.md" <<'EOF'
import re, sys
blocks = []
for path, head in zip(sys.argv[1:], ("## Python\n", "## From Python and pytest\n")):
    text = open(path).read()
    sec = text[text.index(head):]
    sec = sec[:sec.index("\n## ", 1)]
    blocks += re.findall(r"^```python\n(.*?)^```$", sec, re.S | re.M)
for i, b in enumerate(blocks, 1):
    name = "test_readme_%d.py" % i if re.search(r"^def test_", b, re.M) else "readme_%d.py" % i
    open(name, "w").write(b)
print(len(blocks))
EOF
)
# readme_blocks PY: run every block with PY; a block needing torch or pytest
# that PY lacks is skipped. Prints what ran; fails with the first failure.
readme_blocks() {
    local py=$1 f rc ran=0 skipped_blocks=""
    for f in readme_*.py test_readme_*.py; do
        [ -e "$f" ] || continue
        if grep -q '^import torch' "$f" && ! "$py" -c 'import torch' 2>/dev/null; then
            skipped_blocks+=" $f (no torch)"; continue; fi
        rc=0
        if [[ $f == test_* ]]; then
            if ! "$py" -c 'import pytest' 2>/dev/null; then skipped_blocks+=" $f (no pytest)"; continue; fi
            FALCON_CASES= PYTHONPATH=$PYTHONPATH:$ROOT/examples "$py" -m pytest -q -p no:cacheprovider "$f" >block.txt 2>&1 || rc=$?
        else
            PYTHONPATH=$PYTHONPATH:$ROOT/examples "$py" "$f" >block.txt 2>&1 || rc=$?
        fi
        if [ $rc -ne 0 ]; then echo "$f: status $rc: $(tail -n 5 block.txt)"; return 1; fi
        ran=$((ran + 1))
    done
    echo "$ran of $nblocks blocks ran${skipped_blocks:+, skipped:$skipped_blocks}"
}
first_py=$(command -v python3 || true)
if [ "$nblocks" -lt 2 ]; then bad "README Python blocks" "found $nblocks"
elif [ -z "$first_py" ]; then skip "README Python blocks, first python3 on PATH" "no python3 on PATH"
elif ! "$first_py" -c 'import numpy' 2>/dev/null; then
    rc=0
    "$first_py" "$(ls readme_*.py test_readme_*.py | head -n 1)" >hint.txt 2>&1 || rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -c '^Traceback' hint.txt)" -eq 1 ] &&
       tail -n 1 hint.txt | grep -q '^ImportError: falcon_suite needs numpy: pip install numpy'; then
        ok "README Python blocks with $first_py (no numpy): $(tail -n 1 hint.txt)"
    else bad "README Python blocks with $first_py (no numpy)" "status $rc, want one ImportError line: $(cat hint.txt)"; fi
elif msg=$(readme_blocks "$first_py"); then ok "README Python blocks with $first_py: $msg"
else bad "README Python blocks with $first_py" "$msg"; fi
if [ "$(readlink -f "$first_py" 2>/dev/null)" != "$(readlink -f "$(command -v "$PYTHON")")" ]; then
    if msg=$(readme_blocks "$PYTHON"); then ok "README Python blocks with $PYTHON: $msg"
    else bad "README Python blocks with $PYTHON" "$msg"; fi
fi

# ---- the torch example, in the fla layout ----
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    skip "torch chunk example" "torch not installed"
    echo "skipped: torch not installed"
else
    rc=0
    "$FALCON" cases export cases-fla --profile quick --layout fla >export.txt 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then bad "cases export --layout fla" "status $rc: $(cat export.txt)"
    else
        rc=0
        "$PYTHON" "$ROOT/examples/torch_falcon_chunk.py" cases-fla r_torch >torch.txt 2>&1 || rc=$?
        if [ $rc -eq 77 ]; then skip "torch chunk example" "$(cat torch.txt)"
        elif [ $rc -ne 0 ]; then bad "torch chunk example" "status $rc: $(tail -n 5 torch.txt)"
        else
            rc=0
            "$FALCON" check cases-fla --results r_torch --precision fp32 --json c_torch.json \
                >check.txt 2>&1 || rc=$?
            indent check.txt
            if [ $rc -eq 0 ] && msg=$(check_json c_torch.json 2>&1); then
                ok "torch chunk example (fla layout) passes check --precision fp32: $msg"
            else bad "torch chunk example (fla layout) passes check --precision fp32" "status $rc"; fi
        fi
    fi
    # Its gradients by autograd on a --grad set (falcon layout, packed and
    # grouped cases included) pass; its two wrong twins of the backward
    # pass fail, naming the gradient.
    rc=0
    "$FALCON" cases export cases-grad --profile quick --grad --quiet >export.txt 2>&1 || rc=$?
    "$PYTHON" "$ROOT/examples/torch_falcon_chunk.py" cases-grad r_tgrad >torch.txt 2>&1 || rc=$?
    if [ $rc -eq 0 ]; then
        "$FALCON" check cases-grad --results r_tgrad --require-grad --precision fp32 >check.txt 2>&1 || rc=$?
        if [ $rc -eq 0 ] && grep -q "^dalpha .* pass" check.txt; then
            ok "torch chunk example's autograd gradients pass check --require-grad: $(tail -n 1 check.txt)"
        else bad "torch chunk example's gradients" "status $rc: $(tail -n 12 check.txt)"; fi
    elif [ $rc -ne 77 ]; then bad "torch chunk example on a --grad set" "status $rc: $(tail -n 5 torch.txt)"; fi
    for bug in dg-first-step:dalpha grads-unwritten-last-sequence:dq; do
        rc=0
        "$PYTHON" "$ROOT/examples/torch_falcon_chunk.py" cases-grad "r_${bug%%:*}" --bug "${bug%%:*}" >torch.txt 2>&1 ||
            rc=$?
        "$FALCON" check cases-grad --results "r_${bug%%:*}" --require-grad --format lines >check.txt 2>&1 || rc=$?
        if [ $rc -eq 1 ] && grep -q " ${bug##*:}: FAIL" check.txt; then
            ok "torch gradient twin ${bug%%:*} fails, naming ${bug##*:}: $(grep -c " ${bug##*:}: FAIL" check.txt) cases"
        else bad "torch gradient twin ${bug%%:*}" "status $rc (want 1 and a ${bug##*:} FAIL): $(tail -n 3 check.txt)"; fi
    done
    # bench/peers.py: the peers agree with libfalcon or the run fails, and
    # a failed run leaves an earlier --json file as it was.
    rc=0
    "$PYTHON" "$ROOT/bench/peers.py" --quick --json peers.json >peers.txt 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then bad "bench/peers.py --quick" "status $rc: $(tail -n 5 peers.txt)"
    elif msg=$("$PYTHON" - peers.json 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
(r,) = j["runs"]
impl = r["implementations"]
want = {"falcon-chunk-auto", "falcon-chunk-64", "falcon-recurrent", "naive-chunk", "torch-chunk"}
assert set(impl) == want, sorted(impl)
assert all(0 <= x["max_rel_diff"] <= j["tolerance"] for x in impl.values()), impl
assert all(x["tokens_per_second"] > 0 for x in impl.values())
assert len(r["speedups"]) == 6 and all(s > 0 for s in r["speedups"].values()), r["speedups"]
print("%d implementations agree to %.1e" % (len(impl), max(x["max_rel_diff"] for x in impl.values())))
PY
    ); then ok "bench/peers.py --quick: $msg"
    else bad "bench/peers.py --quick writes its JSON" "$msg"; fi
    for bug in no-decay no-normaliser; do
        cp peers.json before.json 2>/dev/null || echo '{}' >before.json
        cp before.json peers.json
        rc=0
        "$PYTHON" "$ROOT/bench/peers.py" --quick --bug $bug --json peers.json >peers.txt 2>&1 || rc=$?
        if [ $rc -eq 1 ] && grep -q DISAGREES peers.txt && cmp -s before.json peers.json; then
            ok "bench/peers.py with a wrong peer (--bug $bug) fails, its --json file kept"
        else bad "bench/peers.py --bug $bug" "status $rc (want 1, the file kept): $(tail -n 3 peers.txt)"; fi
    done
    rc=0
    "$PYTHON" "$ROOT/bench/peers.py" --quick --ggml "$WORK/no-ggml-here" >peers.txt 2>&1 || rc=$?
    if [ $rc -eq 0 ] && grep -q 'ggml: not measured' peers.txt && ! grep -q 'ggml-recurrent' peers.txt; then
        ok "bench/peers.py --ggml with no ggml there: measured without it, and says so"
    else bad "bench/peers.py --ggml DIR without ggml" "status $rc: $(tail -n 3 peers.txt)"; fi
    # OPENBLAS_CORETYPE as falcon-bench sets it: only over a core without
    # AVX2 that OpenBLAS picked by itself, never over the environment's.
    if msg=$("$PYTHON" - "$ROOT/bench" 2>&1 <<'PY'
import os, sys
sys.path.insert(0, sys.argv[1])
import peers
os.environ.pop("OPENBLAS_CORETYPE", None)
peers.blas_core = lambda: "Prescott"
peers.cpu_flags = lambda: {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"}
assert peers.blas_env() == {"OPENBLAS_CORETYPE": "SkylakeX"}, peers.blas_env()
peers.cpu_flags = lambda: {"avx2", "fma"}
assert peers.blas_env() == {"OPENBLAS_CORETYPE": "Haswell"}, peers.blas_env()
peers.cpu_flags = lambda: {"sse3"}
assert peers.blas_env() == {}, peers.blas_env()
peers.cpu_flags = lambda: {"avx2", "fma"}
peers.blas_core = lambda: "Zen"
assert peers.blas_env() == {}, peers.blas_env()
peers.blas_core = lambda: None
assert peers.blas_env() == {}, peers.blas_env()
peers.blas_core = lambda: "Prescott"
os.environ["OPENBLAS_CORETYPE"] = "Haswell"
assert peers.blas_env() == {}, peers.blas_env()
print("6 cases")
PY
    ); then ok "bench/peers.py sets OPENBLAS_CORETYPE only over OpenBLAS's own pre-AVX2 pick: $msg"
    else bad "bench/peers.py, OPENBLAS_CORETYPE" "$msg"; fi
    rc=0
    "$PYTHON" "$ROOT/bench/peers.py" --quick --threads 0 >peers.txt 2>&1 || rc=$?
    if [ $rc -eq 2 ]; then ok "bench/peers.py --threads 0 is bad usage (exit 2)"
    else bad "bench/peers.py --threads 0" "status $rc, want 2"; fi
fi

finish
