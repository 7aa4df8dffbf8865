#!/bin/bash
# Grading outside implementations, end to end (verify/test_check.sh has the
# whole list): verdicts that cannot be
# vacuous, a trusted set, the fla layout.
#
#   verify/test_check_verdicts.sh build/falcon
#
# Needs python3 with numpy (to drive the CLI and to edit results) and xmllint.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_check_verdicts.sh path/to/falcon"
check_begin
check_set
"$PY" "$RUN_CLI" "$FALCON" cs r32 --precision fp32
one=$(ls r32 | head -1)

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
