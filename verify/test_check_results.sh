#!/bin/bash
# Grading outside implementations, end to end (verify/test_check.sh has the
# whole list): the round trip with the
# CLI's own results, wrong results and where they went wrong, coverage,
# optional states, skipped cases, bad input.
#
#   verify/test_check_results.sh build/falcon
#
# Needs python3 with numpy (to drive the CLI and to edit results) and xmllint.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_check_results.sh path/to/falcon"
check_begin
check_set

# ---- the round trip with the project's own CLI as the implementation ----
"$PY" "$RUN_CLI" "$FALCON" cs r32 --precision fp32
expect "CLI fp32 results pass in fp32 units" 0 "0 failed, 0 skipped: passed" \
    "$FALCON" check cs --results r32 --json r32.json --junit r32.xml
cp stdout.txt table32.txt
expect "the same fail in fp64 units" 1 "FAILED" "$FALCON" check cs --results r32 --precision fp64
"$FALCON" cases export cs64 --precision fp64 --quiet
"$PY" "$RUN_CLI" "$FALCON" cs64 r64 --precision fp64
expect "CLI fp64 results pass in fp64 units" 0 "0 failed, 0 skipped: passed" "$FALCON" check cs64 --results r64

# Batch invariance: the CLI gives a sequence the same bits alone, between
# neighbours and packed; a numpy kernel that sums its reads in another order
# when the batch holds several sequences passes every threshold but is
# reported BATCH-VARIANT, and fails with --require-batch-invariance.
if grep -q "^batch invariance: \([0-9]*\) of \1 groups compared.*every one invariant bit for bit" table32.txt
then ok "the CLI's results are batch invariant: $(grep '^batch invariance' table32.txt | cut -c1-60)"
else bad "batch invariance of the CLI's results" "$(grep -i 'batch' table32.txt | head -3)"; fi
"$PY" "$HERE/../examples/numpy_falcon.py" cs rvar --dtype float32 --bug batch-variant-reads >/dev/null
expect "a batch-variant kernel within its thresholds passes, reported BATCH-VARIANT" 0 "BATCH-VARIANT" \
    "$FALCON" check cs --results rvar --json rvar.json
expect "--require-batch-invariance fails it" 1 "BATCH-VARIANT" "$FALCON" check cs --results rvar \
    --require-batch-invariance
if "$PY" - rvar.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
inv = j["batch_invariance"]
assert j["passed"] is True and inv and any(g["batch_variant"] for g in inv), inv
assert all(g["compared"] == g["members"] for g in inv), inv  # every member with results compared
EOF
then ok "JSON: batch_invariance lists the variant groups, the run passed"; else bad "JSON batch_invariance" "see above"; fi

# JSON and JUnit are well formed and say the same as the table.
if "$PY" - r32.json "$ncase" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert j["format"] == "falcon-check" and j["passed"] is True, j["passed"]
assert j["counts"] == {"pass": n, "fail": 0, "skip": 0, "unjudgeable": 0, "state_not_given": 0}, j["counts"]
assert j["judged"] == n and j["identical_groups"] == 0 and j["max_skipped"] is None, j
assert len(j["cases"]) == n and all(c["ratio"] <= 1 and c["state_given"] for c in j["cases"])
assert sum(g["cases"] for g in j["groups"]) == n
EOF
then ok "JSON report"; else bad "JSON report" "see above"; fi
if xmllint --noout r32.xml && [ "$(grep -c '<testcase ' r32.xml)" -eq "$ncase" ] && ! grep -q '<failure' r32.xml; then
    ok "JUnit XML is well formed, one testcase per case"
else bad "JUnit XML" "malformed or wrong count"; fi

# ---- a wrong result fails, named; the rest still pass ----
victim=$(ls r32 | grep -- '-falcon3-prefix-' | head -1)
cp -r r32 rbad
edit "rbad/$victim/out.npy" "a * np.float32(1 + 1e-4)"
expect "a result off by 1e-4 fails" 1 "FAIL $victim" "$FALCON" check cs --results rbad --json bad.json --junit bad.xml
if [ "$(grep -c '^FAIL ' stdout.txt)" -eq 1 ]; then ok "only that case fails"; else bad "failing cases" "$(grep '^FAIL' stdout.txt)"; fi
if xmllint --noout bad.xml && [ "$(grep -c '<failure' bad.xml)" -eq 1 ]; then ok "JUnit lists the failure"
else bad "JUnit failure" "$(grep -c '<failure' bad.xml)"; fi
"$PY" -c "import json; j = json.load(open('bad.json')); assert not j['passed'] and j['counts']['fail'] == 1" &&
    ok "JSON says failed" || bad "JSON failure" "passed or wrong count"
cp r32/"$victim"/out.npy rbad/"$victim"/out.npy
edit "rbad/$victim/state.npy" "a * np.float32(1 + 1e-3)"
expect "a wrong final state alone fails" 1 "FAIL $victim" "$FALCON" check cs --results rbad
cp r32/"$victim"/state.npy rbad/"$victim"/state.npy

# ---- where a failing case went wrong: its first bad step, batch row and head ----
# A case with more than 17 steps, more than one head (and batch row, where
# the set has one), its outputs 1% off
# from step T0 of one batch row and head on: the first bad step is T0 there,
# in the table, the lines, the JSON and JUnit.
wcase=$("$PY" -c "import json, sys; d = sys.argv[1]
cs = [(r['name'], json.load(open(d + '/' + r['dir'] + '/case.json'))) for r in json.load(open(d + '/index.json'))['cases']]
name, c = max([(n, c) for n, c in cs if c['T'] > 17 and c['H'] > 1], key=lambda x: x[1]['B'] > 1)  # B > 1 if any
print(name, c['B'] - 1)" cs)
wlast=${wcase#* } wcase=${wcase% *}
for spec in "17 0 1" "5 $wlast 0"; do
    read -r t0 b0 h0 <<<"$spec"
    rm -rf rw && cp -r r32 rw
    edit "rw/$wcase/out.npy" "a.__setitem__(($b0, slice($t0, None), $h0), a[$b0, $t0:, $h0] * np.float32(1.01)) or a"
    expect "outputs 1% off from step $t0 (batch $b0, head $h0) on" 1 \
        "FAIL $wcase: out" "$FALCON" check cs --results rw --json where.json --junit where.xml
    grep -q "^FAIL $wcase: out .*, S .* ; first bad step t = $t0 (batch $b0, head $h0)\$" stdout.txt &&
        ok "... the table's FAIL line names step $t0, batch $b0, head $h0" || bad "first bad step in the table" "$(grep '^FAIL' stdout.txt)"
    "$PY" - where.json "$wcase" "$t0" "$b0" "$h0" <<'PYEOF' && ok "... and the JSON" || bad "first bad step in the JSON" "see above"
import json, sys
j = json.load(open(sys.argv[1]))
name, t0, b0, h0 = sys.argv[2], *map(int, sys.argv[3:])
for c in j["cases"]:
    want = (t0, b0, h0, False) if c["name"] == name else (None, None, None, False)
    got = (c["first_bad_step"], c["first_bad_batch"], c["first_bad_head"], c["state_only"])
    assert got == want, (c["name"], got, want)
PYEOF
    grep -qF "message=\"error above threshold (fp32 units): first bad step t = $t0 (batch $b0, head $h0)\"" where.xml &&
        ok "... and JUnit's failure message" || bad "first bad step in JUnit" "$(grep -o '<failure[^>]*>' where.xml)"
    expect "--format lines" 1 "" "$FALCON" check cs --results rw --format lines
    grep -qx "$wcase: FAIL out [0-9.e+]* u / [0-9.e+]* u at t = $t0, batch $b0, head $h0, S [0-9.e+]* u / [0-9.e+]* u" stdout.txt &&
        ok "... and its line" || bad "first bad step in --format lines" "$(grep FAIL stdout.txt)"
done
# A wrong state with right outputs: the state alone failed, and it says so.
rm -rf rw && cp -r r32 rw && edit "rw/$wcase/state.npy" "a * np.float32(1 + 1e-3)"
expect "a wrong state alone" 1 "FAIL $wcase" "$FALCON" check cs --results rw --json where.json --junit where.xml
grep -q "^FAIL $wcase: .* ; state only (the outputs are within their threshold)\$" stdout.txt &&
    grep -qF "(fp32 units): state only (the outputs are within their threshold)" where.xml &&
    "$PY" -c "import json, sys; c = [c for c in json.load(open('where.json'))['cases'] if c['name'] == sys.argv[1]][0]
sys.exit(not (c['state_only'] is True and c['first_bad_step'] is None))" "$wcase" &&
    ok "... is 'state only' in the table, JUnit and the JSON" || bad "state only" "$(grep '^FAIL' stdout.txt)"
expect "--format lines, a wrong state alone" 1 "" "$FALCON" check cs --results rw --format lines
grep -qx "$wcase: FAIL out .* u / .* u, S .* u / .* u: state only" stdout.txt && ok "... its line says state only" ||
    bad "state only in --format lines" "$(grep FAIL stdout.txt)"
# --format lines: one line per case, in the index's order, then the summary line; nothing else.
expect "--format lines on passing results" 0 "" "$FALCON" check cs --results r32 --format lines
if "$PY" - cs stdout.txt <<'PYEOF'
import json, re, sys
names = [r["name"] for r in json.load(open(sys.argv[1] + "/index.json"))["cases"]]
lines = open(sys.argv[2]).read().split("\n")
assert lines[-1] == "" and len(lines) == len(names) + 2, len(lines)
for name, line in zip(names, lines):
    assert re.fullmatch(re.escape(name) + r": OK (out \S+ u / \S+ u, )?S \S+ u / \S+ u", line), line
assert lines[-2].startswith("check (fp32 units") and lines[-2].endswith(": passed"), lines[-2]
PYEOF
then ok "... one line per case and the summary line, nothing else"; else bad "--format lines" "$(head -3 stdout.txt)"; fi
expect "--format table is the default table" 0 "set cs: verified" "$FALCON" check cs --results r32 --format table
cmp -s stdout.txt table32.txt && ok "... the same as without --format" || bad "--format table" "$(diff stdout.txt table32.txt | head -3)"
expect "an unknown --format" 2 "--format xml: must be table or lines" "$FALCON" check cs --results r32 --format xml
rm -rf rw

# ---- a result filed under another form's copy fails: each copy's values
# (v, the initial memory and the value history) are 2^form times the
# configuration's, and so is its reference ----
if "$PY" - cs <<'EOF'
import json, os, sys
import numpy as np
root = sys.argv[1]
by = {}
for c in json.load(open(os.path.join(root, "index.json")))["cases"]:
    j = json.load(open(os.path.join(root, c["dir"], "case.json")))
    config = c["name"].replace("-" + c["form"], "", 1)
    by.setdefault(config, {})[c["form"]] = c["dir"], j["value_scale"]
load = lambda d, f: np.load(os.path.join(root, d, f))
for config, forms in by.items():
    assert sorted(forms) == ["chunk", "parallel", "recurrent"], config
    rd = forms["recurrent"][0]
    for form, (d, s) in forms.items():
        assert s == {"recurrent": 1, "chunk": 2, "parallel": 4}[form], (config, form, s)
        for f in ("ref_out.npy", "ref_state.npy", "v.npy", "state0.npy"):
            assert np.array_equal(load(d, f), s * load(rd, f)), (config, form, f)
        for f in ("q.npy", "k.npy", "beta.npy"):
            assert np.array_equal(load(d, f), load(rd, f)), (config, form, f)
EOF
then ok "each form's copy: values, memory and reference times 2^form; keys and queries the same"
else bad "value scale" "see above"; fi
twin=$(ls r32 | grep -- '-falcon1-prefix-.*-recurrent$' | head -1)
if [ -n "$twin" ]; then
    chunk_twin=${twin%-recurrent}-chunk
    cp -r r32 rcopy
    cp "r32/$twin/out.npy" "r32/$twin/state.npy" "rcopy/$chunk_twin/"
    expect "a recurrent result filed as the chunk form's fails" 1 "FAIL $chunk_twin" "$FALCON" check cs --results rcopy
else bad "value scale" "no falcon1 prefix recurrent case"; fi

# ---- coverage: every feature a wrong kernel could hide behind is in the quick set, in every layout ----
"$FALCON" cases export cs-ggml --layout ggml --quiet
if "$PY" "$HERE/tools/coverage.py" cs cs-ggml --require >cov.txt 2>&1; then ok "$(cat cov.txt)"
else bad "coverage" "$(cat cov.txt)"; fi

# ---- the state is optional; float16 results are read ----
rm rbad/"$victim"/state.npy
expect "no state.npy: judged on the outputs" 0 "passed" "$FALCON" check cs --results rbad
edit "rbad/$victim/out.npy" "a.astype(np.float16)"
expect "float16 results are read, judged in fp16 units" 0 "passed" "$FALCON" check cs --results rbad --precision fp16
expect "... and fail in fp32 units, with a hint naming the dtype" 1 \
    "the result is float16: judge it with --precision fp16" "$FALCON" check cs --results rbad
grep -q "^FAIL $victim: .*(the result is float16: judge it with --precision fp16)" stdout.txt &&
    ok "the hint is on the failing case's line" || bad "float16 hint" "$(grep "^FAIL" stdout.txt)"
rm -rf rbad && cp -r r32 rbad

# ---- skipped cases: declared in the manifest, shown as skipped, never passed ----
skipped=$(ls r32 | grep -- '-falcon2-' | tr '\n' ' ')
"$PY" - rbad $skipped <<'EOF'
import json, os, shutil, sys
d = sys.argv[1]
for name in sys.argv[2:]:
    shutil.rmtree(os.path.join(d, name))
json.dump({"skip": {n: "falcon2 not implemented" for n in sys.argv[2:]}}, open(os.path.join(d, "manifest.json"), "w"))
EOF
nskip=$(echo $skipped | wc -w)
expect "skipped cases" 0 "$nskip skipped" "$FALCON" check cs --results rbad --json skip.json --junit skip.xml
grep -qF "judged $((ncase - nskip)) of $ncase:" stdout.txt && ok "the summary says how many were judged" ||
    bad "judged N of M" "$(tail -n 1 stdout.txt)"
if "$PY" - skip.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
skipped = [g for g in j["groups"] if g["variant"] == "falcon2"]
assert skipped and all(g["skipped"] == g["cases"] for g in skipped), skipped
for g in skipped:  # nothing was read: no maxima, not 0
    assert g["max_out_u"] is None and g["max_state_u"] is None and g["worst_ratio"] is None, g
assert all(g["max_out_u"] is not None for g in j["groups"] if g["variant"] != "falcon2")
EOF
then ok "fully skipped groups report no maxima (null, not 0)"; else bad "skipped groups' maxima" "see above"; fi
"$FALCON" check cs --results rbad --format lines >lines.txt || true
first_skip=${skipped%% *}
grep -qx "$first_skip: SKIP falcon2 not implemented" lines.txt && [ "$(grep -c ': SKIP ' lines.txt)" -eq "$nskip" ] &&
    ok "--format lines: a skipped case's line is SKIP and its reason" || bad "SKIP in --format lines" "$(grep SKIP lines.txt | head -2)"
grep -q '^falcon2   recurrent .* skipped$' stdout.txt && ok "table shows falcon2 skipped" || bad "skip row" "$(grep falcon2 stdout.txt)"
if xmllint --noout skip.xml && [ "$(grep -c '<skipped ' skip.xml)" -eq "$nskip" ]; then ok "JUnit marks them skipped"
else bad "JUnit skipped" "$(grep -c '<skipped' skip.xml)"; fi
# --max-skipped: more skips than the fraction fail the run (exit 1); as many pass.
frac=$("$PY" -c "print(($nskip + 0.5) / $ncase)")
expect "--max-skipped below the fraction skipped fails" 1 "more than --max-skipped 0.1 allows" \
    "$FALCON" check cs --results rbad --max-skipped 0.1 --json maxskip.json
grep -q ': FAILED$' stdout.txt && "$PY" -c "import json, sys; j = json.load(open('maxskip.json'))
sys.exit(not (j['passed'] is False and j['too_many_skipped'] is True and j['counts']['fail'] == 0))" &&
    ok "... the summary and the JSON say failed" || bad "--max-skipped report" "$(tail -n 2 stdout.txt)"
expect "--max-skipped above the fraction skipped passes" 0 "$nskip skipped: passed" \
    "$FALCON" check cs --results rbad --max-skipped "$frac"
expect "--max-skipped 0 with nothing skipped passes" 0 "0 skipped: passed" "$FALCON" check cs --results r32 --max-skipped 0
for v in 1.5 -0.1 x nan; do
    expect "--max-skipped $v is refused" 2 "--max-skipped $v" "$FALCON" check cs --results rbad --max-skipped "$v"
done

# ---- bad input: status 2, one line naming the case and the file ----
one=$(ls r32 | head -1)
rm -rf rb && cp -r r32 rb && rm rb/"$one"/out.npy
expect "missing result" 2 "$one: 'rb/$one/out.npy': missing result" "$FALCON" check cs --results rb
rm -rf rb && cp -r r32 rb && mkdir rb/not-a-case && cp rb/"$one"/out.npy rb/not-a-case/
expect "extra result (a folder with an out.npy)" 2 "not-a-case" "$FALCON" check cs --results rb
rm -rf rb && cp -r r32 rb && mkdir rb/not-a-case2 && cp rb/"$one"/state.npy rb/not-a-case2/
expect "extra result (a folder with a state.npy)" 2 "not-a-case2" "$FALCON" check cs --results rb
expect "--results given twice" 2 "--results given twice" "$FALCON" check cs --results r32 --results rb
# Folders beside the cases that hold no result (logs, a git checkout) are not read.
rm -rf rb && cp -r r32 rb && mkdir -p rb/logs rb/.git/objects && echo log >rb/logs/run.log && echo x >rb/.git/HEAD
expect "folders beside the cases (logs/, .git/) are not read" 0 "0 failed, 0 skipped: passed" \
    "$FALCON" check cs --results rb --precision fp32
rm -rf rb && cp -r r32 rb && edit "rb/$one/out.npy" "a[..., :-1]"
expect "wrong shape" 2 "$one: rb/$one/out.npy: shape" "$FALCON" check cs --results rb
rm -rf rb && cp -r r32 rb && edit "rb/$one/state.npy" "a.reshape(-1)"
expect "wrong state shape" 2 "rb/$one/state.npy: shape" "$FALCON" check cs --results rb
rm -rf rb && cp -r r32 rb && edit "rb/$one/out.npy" "np.where(np.arange(a.size).reshape(a.shape) == 7, np.nan, a).astype(a.dtype)"
at=$("$PY" -c "import numpy as np, sys; a = np.load(sys.argv[1]); print(','.join(map(str, np.unravel_index(7, a.shape))))" rb/$one/out.npy)
expect "NaN in a result, named by its index in the array's shape" 2 "$one: rb/$one/out.npy: element 7 [$at] is nan" \
    "$FALCON" check cs --results rb
rm -rf rb && cp -r r32 rb && echo '{"skip": {"no-such-case": "x"}}' >rb/manifest.json
expect "manifest names an unknown case" 2 "no-such-case" "$FALCON" check cs --results rb
echo '{"skip": {"'"$one"'": ""}}' >rb/manifest.json
expect "manifest skip without a reason" 2 "needs its reason" "$FALCON" check cs --results rb
echo '{"skip": ' >rb/manifest.json
expect "malformed manifest" 2 "manifest" "$FALCON" check cs --results rb
# A set that lists no case, a case twice, a count that disagrees, a name
# that leaves the folder, a case folder it does not list (a case taken out
# of the index rather than skipped in the manifest), or a row that
# disagrees with its case.json: refused, never a vacuous, doubled or
# mislabelled pass.
cp cs/index.json index.orig
for how in empty twice count slash dotdot dropped relabel; do
    "$PY" - cs/index.json "$how" <<'EOF'
import json, sys
path, how = sys.argv[1], sys.argv[2]
j = json.load(open(path))
c = j["cases"]
if how == "empty": j["cases"], j["count"] = [], 0
if how == "twice": j["cases"], j["count"] = c + c[:1], len(c) + 1
if how == "count": j["count"] = len(c) + 1
if how == "slash": c[0]["name"] = "../" + c[0]["name"]
if how == "dotdot": c[0]["dir"] = ".."
if how == "dropped": j["cases"], j["count"] = c[1:], len(c) - 1  # its folder stays: not listed
if how == "relabel": c[0]["form"] = "parallel" if c[0]["form"] != "parallel" else "chunk"
json.dump(j, open(path, "w"))
EOF
    text=$(case $how in empty) echo "lists no cases";; twice) echo "share a name";; count) echo '"count" says';;
           dropped) echo "does not list";; relabel) echo "disagree on \"form\"";; *) echo "one folder name";; esac)
    expect "index with $how cases is refused" 2 "" "$FALCON" check cs --results r32
    expect "... and with --trust-set, by its own rule" 2 "$text" "$FALCON" check cs --results r32 --trust-set
    cp index.orig cs/index.json
done
expect "not a case set" 2 "not a directory" "$FALCON" check nowhere --results r32
expect "no --results" 2 "--results RDIR is required" "$FALCON" check cs
expect "unknown precision" 2 "--precision fp8" "$FALCON" check cs --results r32 --precision fp8
# The reports never replace what is not theirs, and are checked before any
# case is read.
mkdir adir
expect "--json onto a directory is refused" 2 "--json" "$FALCON" check cs --results r32 --json adir
ln -s /dev/null devlink
expect "--junit onto a symlink to a device is refused" 2 "--junit" "$FALCON" check cs --results r32 --junit devlink
[ -L devlink ] && ok "the symlink is still a symlink" || bad "symlink" "replaced"
cp cs/index.json index.keep
expect "--json onto the case set's index is refused" 2 "--json" "$FALCON" check cs --results r32 --json cs/index.json
expect "--junit inside the results is refused" 2 "--junit" "$FALCON" check cs --results r32 --junit "r32/$one/out.npy"
expect "--json and --junit on one file is refused" 2 "same" "$FALCON" check cs --results r32 --json same.x --junit same.x
cmp -s index.keep cs/index.json && [ ! -e same.x ] && ok "the index is unchanged, no report written" ||
    bad "refused reports" "a file changed"
echo old >rep.json && ln -s rep.json replink
expect "--json through a symlink to a file: the file is updated" 0 "passed" "$FALCON" check cs --results r32 --json replink
[ -L replink ] && "$PY" -c "import json; json.load(open('rep.json'))" && ok "the link stays, its target holds the report" ||
    bad "symlink followed" "link replaced or target not written"

# ---- never a pass on nothing, nor on the reference itself ----
# A case with no steps (T = 0) has empty outputs: its only result is the
# final state, which must then be given.
"$FALCON" cases export cz --profile full --variant falcon1 --form recurrent --align prefix --decay none \
    --phi identity --quiet
"$PY" "$RUN_CLI" "$FALCON" cz rz --precision fp32
expect "T = 0 with its state passes" 0 "0 failed" "$FALCON" check cz --results rz
if ls cz | grep -v '^index.json$' | grep -qv '^f[0-9]\{4\}-'; then bad "full names" "$(ls cz | grep -v '^f' | head -3)"
else ok "the full profile's cases are named f0001-...: no name is a quick case's"; fi
zero=$("$PY" -c "import json; print(*[r['name'] for r in json.load(open('cz/index.json'))['cases']
    if json.load(open('cz/' + r['dir'] + '/case.json'))['T'] == 0])")
cp rz/"$zero"/state.npy zero-state.npy && edit "rz/$zero/state.npy" "a * (1 + 1e-3)"
expect "T = 0 with a wrong state fails" 1 "FAIL $zero" "$FALCON" check cz --results rz --json zero.json
grep -q "^FAIL $zero: .* ; state only (the case has no steps)\$" stdout.txt && "$PY" -c "import json, sys
c = [c for c in json.load(open('zero.json'))['cases'] if c['name'] == sys.argv[1]][0]
sys.exit(not (c['state_only'] is True and c['first_bad_step'] is None))" "$zero" &&
    ok "... state only: the case has no steps" || bad "T = 0 state only" "$(grep '^FAIL' stdout.txt)"
expect "--format lines, T = 0 with a wrong state" 1 "" "$FALCON" check cz --results rz --format lines
grep -qx "$zero: FAIL S .* u / .* u: state only" stdout.txt && ok "... its line: no out, S, state only" ||
    bad "T = 0 in --format lines" "$(grep "^$zero" stdout.txt)"
rm rz/"$zero"/state.npy zero-state.npy
expect "T = 0 without state.npy is refused" 2 "$zero: 'rz/$zero/state.npy': missing result" \
    "$FALCON" check cz --results rz
# A manifest that skips every case leaves nothing judged.
rm -rf rb && mkdir rb
"$PY" -c "import json, sys; json.dump({'skip': {r['name']: 'not done' for r in json.load(open('cs/index.json'))['cases']}},
    open('rb/manifest.json', 'w'))"
expect "every case skipped is refused" 2 "nothing was judged" "$FALCON" check cs --results rb
# A case declared skipped that also has a result: which one is meant?
rm -rf rb && cp -r r32 rb && echo '{"skip": {"'"$one"'": "not done"}}' >rb/manifest.json
expect "a skipped case with a result is refused" 2 "$one: 'rb/$one': declared skipped" "$FALCON" check cs --results rb
# A skip reason is one line of the table, whatever it holds: a newline in
# it must not add a line that reads as a result.
rm -rf rb && cp -r r32 rb && rm -r "rb/$one" &&
    "$PY" -c "import json, sys; json.dump({'skip': {sys.argv[1]: 'later\npass fake-case: out 0 u'}}, open('rb/manifest.json', 'w'))" "$one"
rc=0; "$FALCON" check cs --results rb --verbose >skip.txt 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && grep -qF "skip $one: later\x0apass fake-case" skip.txt && ! grep -q '^pass fake-case' skip.txt; then
    ok "a skip reason with a newline stays on its line (escaped)"
else bad "skip reason with a newline" "status $rc: $(grep -A1 "skip $one" skip.txt)"; fi
# A result that is the reference file (a symbolic or hard link) computed nothing.
rm -rf rb && cp -r r32 rb && ln -sf "$PWD/cs/$one/ref_out.npy" "rb/$one/out.npy"
expect "out.npy linked to the reference is refused" 2 "$one: 'rb/$one/out.npy': is the reference" \
    "$FALCON" check cs --results rb
rm "rb/$one/out.npy" && cp r32/"$one"/out.npy rb/"$one"/ && rm "rb/$one/state.npy" && ln "cs/$one/ref_state.npy" "rb/$one/state.npy"
expect "state.npy hard-linked to the reference is refused" 2 "$one: 'rb/$one/state.npy': is the reference" \
    "$FALCON" check cs --results rb
# A file in a case's results that is not out.npy or state.npy is a result
# under another name (np.save adds ".npy": "state.npy.npy"), never ignored.
rm -rf rb && cp -r r32 rb && mv "rb/$one/state.npy" "rb/$one/state.npy.npy"
expect "a misnamed state is refused" 2 "$one: 'rb/$one/state.npy.npy': not a result file" \
    "$FALCON" check cs --results rb
rm -rf rb
# A result is a regular file: a FIFO there would block the gate forever.
rm -rf rb && cp -r r32 rb && rm "rb/$one/out.npy" && mkfifo "rb/$one/out.npy"
expect "a FIFO as a result is refused" 2 "$one: 'rb/$one/out.npy': not a regular file" \
    timeout 20 "$FALCON" check cs --results rb
rm -rf rb
# The precision of the set chooses the unit: one the checker does not know
# is refused, not read as fp32.
cp cs/index.json index.orig
"$PY" -c "import json; j = json.load(open('cs/index.json')); j['precision'] = 'fp8'; json.dump(j, open('cs/index.json', 'w'))"
expect "an index of unknown precision is refused" 2 "\"precision\" 'fp8'" "$FALCON" check cs --results r32
cp index.orig cs/index.json

test_end
