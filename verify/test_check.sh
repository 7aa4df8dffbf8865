#!/bin/bash
# Grading outside implementations, end to end: `falcon cases export`, an
# implementation (the falcon CLI itself, driven by verify/check_run_cli.py),
# then `falcon check` -- its table, exit status, JSON and JUnit XML, and
# every kind of bad input it must refuse with exit 2.
#
#   verify/test_check.sh build/falcon
#
# Needs python3 with numpy (to drive the CLI and to edit results) and xmllint.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_check.sh path/to/falcon"
PY=${PYTHON:-/usr/bin/python3}
RUN_CLI="$HERE/check_run_cli.py"

# expect NAME STATUS TEXT CMD...: exit STATUS and TEXT in stdout or stderr;
# for status 2, exactly one stderr line "falcon: error: ..." containing TEXT.
expect() {
    local name=$1 want=$2 text=$3 rc=0
    shift 3
    "$@" >stdout.txt 2>stderr.txt || rc=$?
    if [ "$rc" -ne "$want" ]; then bad "$name" "status $rc, expected $want: $(tail -n 3 stderr.txt stdout.txt)"
    elif [ "$want" -eq 2 ] && { [ "$(wc -l <stderr.txt)" -ne 1 ] || ! grep -q '^falcon: error: ' stderr.txt; }; then
        bad "$name" "expected one 'falcon: error:' line, got: $(cat stderr.txt)"
    elif [ -n "$text" ] && ! grep -qF -- "$text" stdout.txt stderr.txt; then bad "$name" "output lacks '$text': $(tail -n 3 stderr.txt stdout.txt)"
    else ok "$name${want:+ (status $want)}"
    fi
}

# group_names SET VARIANT FORM: the names of that group's cases, one line.
group_names() {
    "$PY" -c "import json, sys; print(*[r['name'] for r in json.load(open(sys.argv[1] + '/index.json'))['cases']
        if (r['variant'], r['form']) == tuple(sys.argv[2:])])" "$@"
}

# stepped_names SET VARIANT FORM: the same, only the cases with steps (T > 0:
# a case without steps needs its state.npy, its only result).
stepped_names() {
    "$PY" -c "import json, sys; d = sys.argv[1]; print(*[r['name'] for r in json.load(open(d + '/index.json'))['cases']
        if (r['variant'], r['form']) == tuple(sys.argv[2:])
        and json.load(open(d + '/' + r['dir'] + '/case.json'))['T'] > 0])" "$@"
}

# numpy edit of a result: edit FILE PYTHON-EXPRESSION-OF-a (the array)
edit() {
    "$PY" -c "import numpy as np, sys; a = np.load(sys.argv[1]); a = $2; np.save(sys.argv[1], a)" "$1"
}

# ---- export: the quick profile, timed; an existing directory is refused ----
start=$(date +%s%N)
expect "export quick" 0 "exported" "$FALCON" cases export cs
elapsed=$((($(date +%s%N) - start) / 1000000))
ncase=$("$PY" -c "import json; print(json.load(open('cs/index.json'))['count'])")
echo "     quick export: $ncase cases in $elapsed ms"
if [ "$ncase" -ge 150 ]; then ok "quick set has $ncase cases"; else bad "quick set size" "$ncase cases"; fi
# The same arguments write the same bytes (what `falcon check` re-derives a
# set by), and index.json records them: the export can be repeated from it.
"$FALCON" cases export cs-again --quiet
if diff -r cs cs-again >/dev/null && "$PY" -c "import json, sys; sys.exit(json.load(open('cs/index.json')).get('export') != {
        'profile': 'quick', 'layout': 'falcon', 'precision': 'fp32', 'scale': None,
        'variant': None, 'form': None, 'align': None, 'phi': None, 'decay': None})"; then
    ok "the same export twice is byte-identical; index.json records its arguments"
else bad "deterministic export" "$(diff -rq cs cs-again | head -3; grep -A3 '"export"' cs/index.json)"; fi
rm -rf cs-again
# The set is synced to disk once (syncfs), not file by file: 7,000 fsyncs
# took 25 s on a disk. Needs strace (a package of the project's).
if command -v strace >/dev/null; then
    # (LeakSanitizer cannot run under ptrace: leaks are looked for elsewhere)
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        strace -f -c -e trace=fsync,fdatasync,syncfs -o syncs.txt "$FALCON" cases export cs-sync --quiet || true
    nsync=$(awk '$NF == "fsync" || $NF == "fdatasync" {n += $4} END {print n + 0}' syncs.txt 2>/dev/null || echo -1)
    nsyncfs=$(awk '$NF == "syncfs" {print $4}' syncs.txt 2>/dev/null)
    if [ "$nsync" -eq 0 ] && [ "${nsyncfs:-0}" -eq 1 ]; then ok "export syncs the set once (syncfs), no file-by-file fsync"
    else bad "export syncs" "fsync $nsync, syncfs ${nsyncfs:-0}: $(cat syncs.txt 2>/dev/null)"; fi
    rm -rf cs-sync syncs.txt
else echo "     export syncs not counted: no strace"; fi
# Case names carry the profile: a name means one case in every set.
if ls cs | grep -v '^index.json$' | grep -qv '^q[0-9]\{4\}-'; then bad "quick names" "$(ls cs | grep -v '^q' | head -3)"
else ok "the quick profile's cases are named q0001-..."; fi
mkdir keep && echo mine >keep/file
expect "export refuses a non-empty directory" 2 "is not empty" "$FALCON" cases export keep
if [ "$(cat keep/file)" = mine ] && [ "$(ls keep)" = file ]; then ok "the existing directory is untouched"
else bad "existing directory" "changed: $(ls keep)"; fi
if ls -d cs.tmp-* keep.tmp-* 2>/dev/null; then bad "temporaries" "left behind"; else ok "no temporary directory left"; fi
# A killed export leaves neither the set nor its temporary directory; an
# empty directory given as DIR stays as it was. (Job control on: a script's
# background jobs would otherwise start with SIGINT ignored, which the
# export, like every command here, leaves ignored. And the signal's default
# action restored for the export: under nohup, or a CI runner started in
# the background, SIGHUP or SIGINT arrive here ignored, and a shell cannot
# undo that itself.)
set -m
for sig in TERM INT HUP PROF RTMIN; do
    env --default-signal="$sig" "$FALCON" cases export killed --profile full --quiet 2>/dev/null &
    pid=$!
    sleep 1
    kill -"$sig" "$pid"
    rc=0
    wait "$pid" || rc=$?
    if [ ! -e killed ] && ! ls -d killed.tmp-* >/dev/null 2>&1 && [ "$rc" -gt 128 ]; then
        ok "SIG$sig during an export: nothing left, status $rc"
    else bad "SIG$sig during an export" "status $rc, left: $(ls -d killed* 2>/dev/null)"; rm -rf killed killed.tmp-*; fi
done
mkdir -m 700 emptyd
"$FALCON" cases export emptyd --profile full --quiet 2>/dev/null &
pid=$!
sleep 1
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
if [ -d emptyd ] && [ -z "$(ls -A emptyd)" ] && [ "$(stat -c %a emptyd)" = 700 ] && ! ls -d emptyd.tmp-* >/dev/null 2>&1; then
    ok "SIGTERM during an export into an empty directory: the directory stays, mode 700"
else bad "export into an empty directory, killed" "status $rc: $(ls -ld emptyd* 2>&1)"; fi
if "$FALCON" cases export emptyd --variant falcon1 --quiet && [ -f emptyd/index.json ] && [ "$(stat -c %a emptyd)" = 700 ]; then
    ok "an export into an empty directory fills it and keeps its mode"
else bad "export into an empty directory" "$(ls -ld emptyd)"; fi
rm -rf emptyd
set +m
# An ignored signal stays ignored (nohup, a background job): the export ends normally.
(trap '' HUP; exec "$FALCON" cases export hupd --profile full --variant falcon1 --quiet) &
pid=$!
sleep 1
kill -HUP "$pid" 2>/dev/null || true
rc=0
wait "$pid" || rc=$?
if [ $rc -eq 0 ] && [ -f hupd/index.json ]; then ok "an ignored SIGHUP stays ignored: the export completes"
else bad "ignored SIGHUP" "status $rc"; fi
rm -rf hupd
expect "export filters" 0 "" "$FALCON" cases export f1 --variant falcon3 --form chunk --quiet --align prefix
[ ! -s stdout.txt ] || bad "--quiet" "printed $(cat stdout.txt)"
if "$PY" -c "import json, sys; c = json.load(open('f1/index.json'))['cases']; sys.exit(not (c and all(
        (r['variant'], r['form'], r['align']) == ('falcon3', 'chunk', 'prefix') for r in c)))"; then
    ok "filters keep only falcon3 chunk prefix ($(ls f1 | grep -c falcon3) cases)"
else bad "filters" "$(ls f1 | head -3)"; fi
if "$PY" -c "import json, sys; e = json.load(open('f1/index.json'))['export']; sys.exit(e != {
        'profile': 'quick', 'layout': 'falcon', 'precision': 'fp32', 'scale': None,
        'variant': 'falcon3', 'form': 'chunk', 'align': 'prefix', 'phi': None, 'decay': None})"; then
    ok "index.json records the filters (null when absent)"
else bad "recorded filters" "$(grep -A10 '"export"' f1/index.json)"; fi
# The temporary directory beside DIR is cut to NAME_MAX like every output's
# temporary: a 250-byte name exports; so does a DIR written with slashes.
long=$(printf 'd%.0s' $(seq 250))
for dir in "$long" "slashes//"; do
    expect "export into '${dir:0:20}...' (${#dir} bytes)" 0 "" "$FALCON" cases export "$dir" --variant falcon1 \
        --form recurrent --align prefix --quiet
    d=${dir%%/*}
    [ -f "$d/index.json" ] && ! ls -d ./*.tmp-* >/dev/null 2>&1 && ok "'${d:0:20}...' holds the set, no temporary left" ||
        bad "export into '${d:0:20}...'" "$(ls -d ./*.tmp-* "$d" 2>&1 | head -3)"
    rm -rf "$d"
done
expect "export: unknown variant" 2 "--variant falcon9" "$FALCON" cases export f2 --variant falcon9
expect "export: no directory" 2 "no directory given" "$FALCON" cases export

# state0.npy is the checkpoint's memory (in the set's layout); carried cases
# start from a non-zero one, fresh cases from zero.
if "$PY" - cs <<'EOF'
import json, os, sys, numpy as np
cs = sys.argv[1]
carried = 0
for row in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    d = os.path.join(cs, row["dir"])
    c = json.load(open(os.path.join(d, "case.json")))
    S = np.load(os.path.join(d, "state0", "S.npy")).reshape(c["B"], c["H"], c["m"], c["n"])
    assert np.array_equal(np.load(os.path.join(d, "state0.npy")), S), c["name"]
    assert (np.abs(S).max() > 0) == c["carried_state"] or c["T"] == 0, c["name"]
    carried += c["carried_state"]
assert carried >= 30, carried
EOF
then ok "state0.npy equals the checkpoint's memory; carried cases start non-zero"
else bad "state0.npy" "differs from the checkpoint"; fi

# ---- the round trip with the project's own CLI as the implementation ----
"$PY" "$RUN_CLI" "$FALCON" cs r32 --precision fp32
expect "CLI fp32 results pass in fp32 units" 0 "0 failed, 0 skipped: passed" \
    "$FALCON" check cs --results r32 --json r32.json --junit r32.xml
cp stdout.txt table32.txt
expect "the same fail in fp64 units" 1 "FAILED" "$FALCON" check cs --results r32 --precision fp64
"$FALCON" cases export cs64 --precision fp64 --quiet
"$PY" "$RUN_CLI" "$FALCON" cs64 r64 --precision fp64
expect "CLI fp64 results pass in fp64 units" 0 "0 failed, 0 skipped: passed" "$FALCON" check cs64 --results r64

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

# ---- verdicts that cannot be vacuous ----
# No threshold may allow more than 2^-4 relative error: a case whose
# threshold in the judged unit is larger is "not judgeable", neither passed
# nor failed. In fp16 units (u = 2^-11) the quick set's loosest cases are;
# in bf16 units (u = 2^-8) every case is, and a run that judged nothing is
# bad input.
loose=$("$PY" - cs <<'EOF'
import json, os, sys
cs = sys.argv[1]
loose = []
for r in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    t = json.load(open(os.path.join(cs, r["dir"], "case.json")))["thresholds"]
    if max(t["out_u"], t["state_u"]) * 2.0**-11 > 2.0**-4:
        loose.append((t["out_u"], r["name"]))
print(len(loose), max(loose)[1])
EOF
)
nloose=${loose% *} loosest=${loose#* }
expect "fp16 units: the cases with a threshold above 2^-4 are not judgeable" 0 \
    "judged $((ncase - nloose)) of $ncase ($nloose not judgeable)" \
    "$FALCON" check cs --results r32 --precision fp16 --json u16.json --junit u16.xml --verbose
grep -qF "not judgeable $loosest: " stdout.txt && grep -qF "not judgeable in fp16: $nloose cases" stdout.txt &&
    ok "... each named, and counted before the summary" || bad "not judgeable lines" "$(grep -i judgeable stdout.txt | head -3)"
if "$PY" - u16.json "$nloose" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
st = [c["status"] for c in j["cases"]]
assert j["counts"]["unjudgeable"] == n == st.count("unjudgeable") and j["counts"]["pass"] == len(st) - n, j["counts"]
assert j["judged"] == len(st) - n and j["max_relerr"] == 0.0625, j["judged"]
for c in j["cases"]:
    loose = max(c["thr_out_u"], c["thr_state_u"]) * j["u"] > 2.0**-4
    assert (c["status"] == "unjudgeable") == loose, c
    assert not loose or c["reason"].startswith("not judgeable in fp16"), c
assert sum(g["unjudgeable"] for g in j["groups"]) == n
EOF
then ok "JSON: counts.unjudgeable and each case's status"; else bad "JSON unjudgeable" "see above"; fi
if xmllint --noout u16.xml && [ "$(grep -c '<skipped message="not judgeable in fp16: ' u16.xml)" -eq "$nloose" ] &&
    grep -q "<testsuites [^>]* skipped=\"$nloose\"" u16.xml; then ok "JUnit: not judgeable cases are <skipped>, counted"
else bad "JUnit unjudgeable" "$(grep -c 'not judgeable' u16.xml)"; fi
"$FALCON" check cs --results r32 --precision fp16 --format lines >lines.txt
grep -q "^$loosest: NOT JUDGEABLE in fp16 (its threshold .* above 2^-4 (judge it in a smaller unit))\$" lines.txt &&
    [ "$(grep -c ': NOT JUDGEABLE in fp16 (' lines.txt)" -eq "$nloose" ] &&
    ok "--format lines: a case not judgeable says so, with its threshold" || bad "NOT JUDGEABLE line" "$(grep -m2 JUDGEABLE lines.txt)"
expect "bf16 units on the quick set: no case judgeable, nothing judged" 2 "no case is judgeable in bf16 units" \
    "$FALCON" check cs --results r32 --precision bf16
# A result 10% off is within the loosest case's threshold in fp16 units
# (246 u = 0.12): not judgeable there, never passed.
rm -rf rb && cp -r r32 rb && edit "rb/$loosest/out.npy" "a * np.float32(0.9)"
expect "a result 10% off within a threshold above 2^-4" 0 "" "$FALCON" check cs --results rb --precision fp16 --json u.json
"$PY" -c "import json, sys; j = json.load(open('u.json'))
sys.exit(not [c for c in j['cases'] if c['name'] == sys.argv[1] and c['status'] == 'unjudgeable'])" "$loosest" &&
    ok "... is reported not judgeable, not passed" || bad "10% off" "$(grep -F "$loosest" stdout.txt)"
# All-zero results never pass, in any unit: with a long case (T = 10^4,
# threshold 617 u) an all-zero result was within its threshold in bf16
# units (relative error 1 = 256 u).
"$FALCON" cases export cl --profile full --form parallel --variant falcon1 --align prefix --phi identity \
    --decay mild --quiet
mkdir rzero
"$PY" - cl rzero <<'EOF'
import json, os, sys, numpy as np
cs, rd = sys.argv[1], sys.argv[2]
for r in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    c = json.load(open(os.path.join(cs, r["dir"], "case.json")))
    os.mkdir(os.path.join(rd, r["name"]))
    for f in ("out", "state"):
        np.save(os.path.join(rd, r["name"], f + ".npy"), np.zeros(c["expected"][f], np.float32))
EOF
for unit in fp64 fp32 tf32 bf16 fp16; do
    rc=0; "$FALCON" check cl --results rzero --precision "$unit" --json zero.json >stdout.txt 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && "$PY" -c "import json, sys; j = json.load(open('zero.json'))
sys.exit(any(c['status'] == 'pass' for c in j['cases']))"; then ok "all-zero results pass no case in $unit units (status $rc)"
    else bad "all-zero results in $unit units" "status $rc: $(grep -E '^(pass|check)' stdout.txt)"; fi
    rm -f zero.json
done

# A missing state.npy is shown as not given (not 0), counted, and with
# --require-state is bad input.
rm -rf rb && cp -r r32 rb
# Every case of one group lacks its state: those without steps (whose only
# result is the state) are declared skipped instead.
ns_variant=falcon1 ns_form=recurrent
nostate=$(stepped_names cs "$ns_variant" "$ns_form")
"$PY" - cs rb "$ns_variant" "$ns_form" <<'EOF'
import json, os, shutil, sys
cs, rb, group = sys.argv[1], sys.argv[2], tuple(sys.argv[3:5])
skip = {}
for r in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    if (r["variant"], r["form"]) == group and json.load(open(os.path.join(cs, r["dir"], "case.json")))["T"] == 0:
        shutil.rmtree(os.path.join(rb, r["name"]))
        skip[r["name"]] = "no steps: its only result is the state, which this test leaves out"
json.dump({"skip": skip}, open(os.path.join(rb, "manifest.json"), "w"))
EOF
for d in $nostate; do rm "rb/$d/state.npy"; done
nns=$(echo $nostate | wc -w)
expect "states not given: counted in the summary" 0 "($nns without state.npy)" \
    "$FALCON" check cs --results rb --json ns.json --junit ns.xml
grep -q "^$ns_variant *$ns_form .* not given .* pass\$" stdout.txt && grep -qF "state not given: $nns cases" stdout.txt &&
    ok "the table shows the group's state as not given" || bad "state not given in the table" "$(grep "^$ns_variant " stdout.txt)"
if "$PY" - ns.json "$nns" "$ns_variant" "$ns_form" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
group = tuple(sys.argv[3:5])
assert j["counts"]["state_not_given"] == n, j["counts"]
missing = [c for c in j["cases"] if not c["state_given"] and c["status"] != "skip"]
assert len(missing) == n and all(c["state_u"] is None for c in missing), missing[:1]
g = [g for g in j["groups"] if (g["variant"], g["form"]) == group][0]
assert g["max_state_u"] is None and g["state_not_given"] == n and g["max_out_u"] > 0, g
EOF
then ok "JSON: state_given false, state_u and the group's max_state_u null"; else bad "JSON state not given" "see above"; fi
[ "$(grep -c 'S not given (no state.npy)' ns.xml)" -eq "$nns" ] && xmllint --noout ns.xml &&
    ok "JUnit: each case without its state says so" || bad "JUnit state not given" "$(grep -c 'not given' ns.xml)"
first=$(echo $nostate | tr ' ' '\n' | sort | head -1)
expect "--require-state: a missing state.npy is bad input, naming the case" 2 \
    "$first: 'rb/$first/state.npy': missing result (--require-state" "$FALCON" check cs --results rb --require-state
expect "--require-state with every state given passes" 0 "0 failed" "$FALCON" check cs --results r32 --require-state

# Results identical to the reference across a group: a warning, not a failure.
rm -rf rb && cp -r r32 rb
for d in $(group_names cs falcon3 chunk); do
    cp "cs/$d/ref_out.npy" "rb/$d/out.npy" && cp "cs/$d/ref_state.npy" "rb/$d/state.npy"
done
expect "a group identical to the reference: a warning" 0 \
    "warning: falcon3 chunk: every result is identical to the reference bit for bit" \
    "$FALCON" check cs --results rb --json same.json
[ "$(grep -c '^warning: ' stdout.txt)" -eq 1 ] && "$PY" -c "import json; j = json.load(open('same.json'))
assert j['identical_groups'] == 1 and [(g['variant'], g['form']) for g in j['groups'] if g['identical']] == [('falcon3', 'chunk')]" &&
    ok "... for that group only" || bad "identical group" "$(grep '^warning' stdout.txt)"

# A skip reason is kept whole, never cut inside a UTF-8 character: the
# JUnit file stays well-formed and the JSON keeps the reason.
rm -rf rb && cp -r r32 rb && rm -r "rb/$one"
"$PY" -c "import json, sys; json.dump({'skip': {sys.argv[1]: 'x' + '\u00e9' * 200}}, open('rb/manifest.json', 'w'))" "$one"
expect "a 401-byte UTF-8 skip reason" 0 "1 skipped" "$FALCON" check cs --results rb --json utf.json --junit utf.xml
if xmllint --noout utf.xml && "$PY" -c "import json, sys; j = json.load(open('utf.json'))
sys.exit(not [c for c in j['cases'] if c['name'] == sys.argv[1] and c.get('reason') == 'x' + '\u00e9' * 200])" "$one"
then ok "... JUnit is well-formed and JSON keeps the whole reason"; else bad "UTF-8 skip reason" "$(xmllint --noout utf.xml 2>&1 | head -2)"; fi
# A reason of white space alone is no reason.
for blank in '   ' '\t\n' '\u00a0\u3000'; do
    "$PY" -c "import json, sys; json.dump({'skip': {sys.argv[1]: '$blank'}}, open('rb/manifest.json', 'w'))" "$one"
    expect "a skip reason of white space ('$blank') is refused" 2 "needs its reason" "$FALCON" check cs --results rb
done

# Each way a case's results cannot be read is named for what it is, not
# as a missing result.
rm -rf rb && cp -r r32 rb && rm -r "rb/$one" && echo not-a-folder >"rb/$one"
expect "a case's results that are a file" 2 "$one: 'rb/$one': not a directory" "$FALCON" check cs --results rb
rm "rb/$one" && ln -s "$one" "rb/$one"
expect "a case's results that are a symbolic link to itself" 2 "$one: 'rb/$one': a symbolic link loop" \
    "$FALCON" check cs --results rb
rm "rb/$one" && ln -s "$PWD/cs/$one" "rb/$one"
expect "a case's results that are the case's own folder" 2 "$one: 'rb/$one' is the case's own folder" \
    "$FALCON" check cs --results rb
expect "--results that is the case set itself" 2 "--results 'cs' is the case set 'cs' itself" \
    "$FALCON" check cs --results cs
ln -s cs cs-again
expect "--results that is the case set through a link" 2 "is the case set 'cs' itself" \
    "$FALCON" check cs --results cs-again
rm -rf rb && cp -r r32 rb && mkdir rb/manifest.json
expect "a manifest.json that is a directory" 2 "'rb/manifest.json' is a directory, not a JSON file" \
    "$FALCON" check cs --results rb
grep -q 'line -1' stderr.txt && bad "manifest directory" "$(cat stderr.txt)"
rmdir rb/manifest.json
# An unreadable folder or file: permissions do not stop root, so as root
# these run as nobody (setpriv); without it they are not checked, said so.
as_user=()
if [ "$(id -u)" -eq 0 ]; then
    if command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
        chmod 755 "$WORK" cs # mkdtemp made them 700
    else as_user=(none); fi
fi
if [ "${as_user[*]}" = none ]; then
    echo "     unreadable results not checked: running as root without setpriv"
else
    chmod 000 "rb/$one"
    expect "an unreadable result folder" 2 "$one: 'rb/$one': cannot read it: Permission denied" \
        "${as_user[@]}" "$FALCON" check cs --results rb
    chmod 755 "rb/$one"
    echo '{"skip": {}}' >rb/manifest.json && chmod 000 rb/manifest.json
    expect "an unreadable manifest.json" 2 "'rb/manifest.json': cannot read it: Permission denied" \
        "${as_user[@]}" "$FALCON" check cs --results rb
    grep -q 'line -1' stderr.txt && bad "unreadable manifest" "$(cat stderr.txt)"
    rm -f rb/manifest.json
fi

# Checking the index is linear: a 40,000-row index reaches its first error
# in seconds (comparing every pair took minutes).
mkdir big big-r
"$PY" - big big-r <<'EOF'
import json, os, sys
n = 40000
rows = [{"name": "c%05d" % i, "dir": "c%05d" % i, "variant": "falcon1", "form": "recurrent"} for i in range(n)]
index = {"format": "falcon-cases", "version": 1, "precision": "fp32", "count": n, "cases": rows}
json.dump(index, open(os.path.join(sys.argv[1], "index.json"), "w"))
json.dump({"skip": {r["name"]: "not done" for r in rows}}, open(os.path.join(sys.argv[2], "manifest.json"), "w"))
index["cases"], index["count"] = rows + rows[:1], n + 1
json.dump(index, open(os.path.join(sys.argv[1], "index-twice.json"), "w"))
EOF
for how in skipped twice; do
    [ $how = twice ] && mv big/index-twice.json big/index.json
    text=$([ $how = twice ] && echo "cases 0 and 40000 share a name" || echo "every case of the set is declared skipped")
    start=$(date +%s%N)
    expect "a 40,000-row index ($how): its error" 2 "$text" timeout 120 "$FALCON" check big --results big-r --trust-set
    ms=$((($(date +%s%N) - start) / 1000000))
    [ "$ms" -lt 10000 ] && ok "... within seconds ($ms ms)" || bad "40,000-row index ($how)" "$ms ms"
done
rm -rf rb

# ---- a trusted set: check re-derives the set and refuses any other ----
# The set's thresholds and references decide the verdict, so an edited set
# (a raised threshold, a wrong result copied over the reference, another
# precision in the index) would pass a wrong kernel. `falcon check`
# re-derives every file of the set from the export its index records and
# refuses one that differs; --trust-set judges the set as it is, and says so.
expect "a fresh set is verified" 0 "set cs: verified" "$FALCON" check cs --results r32
# a configuration with steps and decay (its alpha.npy is deleted below), not a carried one
cfg=$("$PY" -c "import json, sys; d = sys.argv[1]
for r in json.load(open(d + '/index.json'))['cases']:
    c = json.load(open(d + '/' + r['dir'] + '/case.json'))
    if r['name'].endswith('-recurrent') and c['T'] > 0 and c['inputs']['alpha'] and c['variant'] == 'falcon1':
        print(r['name'][:-len('-recurrent')]); break" cs)
tamper() { # tamper NAME TEXT SHELL-EDIT: the edit on a copy of cs is refused, naming TEXT
    rm -rf ce && cp -r cs ce && (eval "$3")
    expect "$1 is refused" 2 "$2" "$FALCON" check ce --results r32
}
thr_edit='import json, sys; p = sys.argv[1]; j = json.load(open(p)); j["thresholds"]["out_u"] *= 1e6
j["thresholds"]["state_u"] *= 1e6; open(p, "w").write(json.dumps(j, indent=1) + "\n")'
tamper "a raised threshold" "$cfg-chunk: 'ce/$cfg-chunk/case.json': differs from what \`falcon cases export DIR --profile quick" \
    '"$PY" -c "$thr_edit" ce/$cfg-chunk/case.json'
# The threshold raised and a result 1000 times off: --trust-set takes the
# set as it is and passes it (what the verification is there to stop).
cp -r r32 rwrong && edit "rwrong/$cfg-chunk/out.npy" "a * np.float32(1 + 1e-3)"
expect "... and --trust-set judges the edited set as it is" 0 "NOT verified (--trust-set)" \
    "$FALCON" check ce --results rwrong --trust-set
expect "... while the original set fails that result" 1 "FAIL $cfg-chunk" "$FALCON" check cs --results rwrong --trust-set
tamper "ref_out.npy replaced by another case's" "$cfg-chunk: 'ce/$cfg-chunk/ref_out.npy': differs" \
    'cp ce/$cfg-recurrent/ref_out.npy ce/$cfg-chunk/ref_out.npy'
expect "... which --trust-set judges: the right result fails against it" 1 "FAIL $cfg-chunk" \
    "$FALCON" check ce --results r32 --trust-set
tamper "ref_state.npy replaced" "'ce/$cfg-chunk/ref_state.npy': differs" \
    'cp ce/$cfg-recurrent/ref_state.npy ce/$cfg-chunk/ref_state.npy'
tamper "the index's precision edited" "check: 'ce/index.json': differs" \
    "sed -i '0,/\"precision\": \"fp32\"/s//\"precision\": \"bf16\"/' ce/index.json"
tamper "the index's precision and its export record edited" "--precision bf16" \
    "sed -i 's/\"precision\": \"fp32\"/\"precision\": \"bf16\"/' ce/index.json"
tamper "a case.json edited (its description)" "'ce/$cfg-chunk/case.json': differs" \
    "sed -i 's/\"stresses\": \"/\"stresses\": \"x/' ce/$cfg-chunk/case.json"
tamper "a file deleted from a case" "'ce/$cfg-chunk/alpha.npy': missing" 'rm ce/$cfg-chunk/alpha.npy'
tamper "a file deleted from a case's state0/" "'ce/$cfg-chunk/state0/hist_v.npy': missing" 'rm ce/$cfg-chunk/state0/hist_v.npy'
tamper "a file added to a case" "'ce/$cfg-chunk/gain.npy': an extra file" 'cp ce/$cfg-chunk/beta.npy ce/$cfg-chunk/gain.npy'
tamper "a folder added beside the cases" "'ce/notes': an extra file" 'mkdir ce/notes'
tamper "a set of another falcon_version" "a set written by falcon 0.0.0-old" \
    "sed -i 's/\"falcon_version\": \"[^\"]*\"/\"falcon_version\": \"0.0.0-old\"/' ce/index.json"
tamper "a set whose index records no export" "does not record the arguments" \
    '"$PY" -c "import json; j = json.load(open(\"ce/index.json\")); del j[\"export\"]; json.dump(j, open(\"ce/index.json\", \"w\"))"'
# A ggml set with a filter verifies too (its results here are in the
# library's layout, unscaled, so they fail: judged after the verification).
"$FALCON" cases export csg --layout ggml --variant falcon1 --quiet
"$PY" "$RUN_CLI" "$FALCON" csg rg --precision fp32
expect "a filtered ggml set is verified, then judged" 1 "set csg: verified" "$FALCON" check csg --results rg
# So does an fla set with its own --scale (recorded, and re-derived with it).
"$FALCON" cases export css --layout fla --scale 0.3 --variant falcon2 --form chunk --quiet
"$PY" "$RUN_CLI" "$FALCON" css rs --precision fp32 && rm rs/*/state.npy # the library's layout: not judged
"$PY" - css rs <<'EOF' # ... and the cases without steps, whose only result is the state, skipped
import json, os, shutil, sys
cs, rd = sys.argv[1:3]
skip = {}
for r in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    if json.load(open(os.path.join(cs, r["dir"], "case.json")))["T"] == 0:
        shutil.rmtree(os.path.join(rd, r["name"]))
        skip[r["name"]] = "no steps, and the state is not judged here"
json.dump({"skip": skip}, open(os.path.join(rd, "manifest.json"), "w"))
EOF
expect "an fla set with --scale 0.3 is verified, then judged" 1 "set css: verified" "$FALCON" check css --results rs
rm -rf ce rwrong

# ---- the fla layout: state [B,H,K,V], reads scaled ----
"$FALCON" cases export csf --layout fla --variant falcon1 --quiet
"$PY" "$RUN_CLI" "$FALCON" csf rf --precision fp32
"$PY" - csf rf <<'EOF'
import json, os, sys, numpy as np
cs, rd = sys.argv[1], sys.argv[2]
for row in json.load(open(os.path.join(cs, "index.json")))["cases"]:
    c = json.load(open(os.path.join(cs, row["dir"], "case.json")))
    d = os.path.join(rd, c["name"])
    # The CLI runs from the checkpoint (the library's layout) and writes its
    # own layout: scale the reads, transpose the state to [B,H,K,V].
    np.save(os.path.join(d, "out.npy"), np.load(os.path.join(d, "out.npy")) * np.float32(c["scale"]))
    np.save(os.path.join(d, "state.npy"), np.load(os.path.join(d, "state.npy")).transpose(0, 1, 3, 2).copy())
EOF
expect "fla layout: scaled reads and [B,H,K,V] state pass" 0 "0 failed" "$FALCON" check csf --results rf
rm -rf ce && cp -r csf ce && g=$(ls csf | grep -v index.json | head -1) && "$PY" -c "$thr_edit" "ce/$g/case.json"
expect "fla layout: a raised threshold is refused" 2 "'ce/$g/case.json': differs from what \`falcon cases export DIR --profile quick --precision fp32 --layout fla --variant falcon1\`" \
    "$FALCON" check ce --results rf
"$PY" - rf <<'EOF2'
import glob, numpy as np, sys
for f in glob.glob(sys.argv[1] + "/*/state.npy"):  # square states back to the library's layout
    a = np.load(f)
    if a.shape[2] == a.shape[3]:
        np.save(f, a.transpose(0, 1, 3, 2).copy())
EOF2
expect "fla layout: a state in the library's layout fails" 1 "FAIL" "$FALCON" check csf --results rf

test_end
