#!/bin/bash
# Grading outside implementations, end to end: `falcon cases export`, an
# implementation (the falcon CLI itself, driven by verify/check_run_cli.py),
# then `falcon check` -- its table, exit status, JSON and JUnit XML, and
# every kind of bad input it must refuse with exit 2. Four scripts, each on
# a set of its own (`make test-check` runs them; helpers in verify/lib.sh):
#   verify/test_check.sh          the export: the set, its determinism, its
#                                 syncs, signals during it, its filters;
#   verify/test_check_results.sh  the round trip with the CLI's results, wrong
#                                 results, where a case went wrong, coverage,
#                                 skipped cases, bad input;
#   verify/test_check_verdicts.sh verdicts that cannot be vacuous, a trusted
#                                 set, the fla layout;
#   verify/test_check_grad.sh     gradients: export --grad, the project's
#                                 kernels passing, wrong gradient twins failing.
#
#   verify/test_check.sh build/falcon
#
# Needs python3 with numpy (to drive the CLI and to edit results) and xmllint.
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_check.sh path/to/falcon"
check_begin

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
# On a terminal the export says how far it is (the full set takes minutes);
# into a pipe or file, nothing but its closing line. (script: util-linux.)
if command -v script >/dev/null; then
    script -qfec "'$FALCON' cases export cs-tty" /dev/null 2>&1 | tr '\r' '\n' > tty.txt || true
    "$FALCON" cases export cs-pipe > pipe.txt 2>&1 || true
    if grep -q 'configuration \([0-9]*\) of \1, [0-9]* cases written' tty.txt && ! grep -q 'configuration' pipe.txt &&
       [ "$(wc -l < pipe.txt)" -eq 1 ]; then ok "export shows its progress on a terminal only"
    else bad "export progress" "tty: $(grep -c configuration tty.txt) lines; pipe: $(head -c 200 pipe.txt)"; fi
    rm -rf cs-tty cs-pipe tty.txt pipe.txt
else echo "     export progress not checked: no script"; fi
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
    rows = c.get("seqs", c["B"])  # a packed case's state has a row per sequence
    S = np.load(os.path.join(d, "state0", "S.npy")).reshape(rows, c["H"], c["m"], c["n"])
    assert np.array_equal(np.load(os.path.join(d, "state0.npy")), S), c["name"]
    assert (np.abs(S).max() > 0) == c["carried_state"] or c["T"] == 0, c["name"]
    carried += c["carried_state"]
assert carried >= 30, carried
EOF
then ok "state0.npy equals the checkpoint's memory; carried cases start non-zero"
else bad "state0.npy" "differs from the checkpoint"; fi


test_end
