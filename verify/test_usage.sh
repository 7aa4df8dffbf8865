#!/bin/bash
# What a new user meets around the computation: help texts, `falcon verify`'s
# filters and --json, progress and --verbose of `falcon run`, `falcon compare`
# (two files, N machines, protocols, errors) and falcon-study's usage.
#
#   verify/test_usage.sh build/falcon      (falcon-study is taken from the same directory)
#
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu

. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_usage.sh path/to/falcon"
STUDY=$(dirname "$FALCON")/falcon-study
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import json' 2>/dev/null; then PY=$p; break; fi
done

# one_error NAME TEXT CMD...: status 2, nothing on stdout, one stderr line
# "falcon: error: ..." containing TEXT.
one_error() {
    local name=$1 want=$2 rc=0
    shift 2
    "$@" >stdout.txt 2>stderr.txt || rc=$?
    if [ $rc -ne 2 ]; then bad "$name" "status $rc, expected 2 ($(cat stderr.txt))"
    elif [ "$(wc -l <stderr.txt)" -ne 1 ] || ! grep -q '^falcon: error: ' stderr.txt; then
        bad "$name" "expected one 'falcon: error:' line, got: $(cat stderr.txt)"
    elif ! grep -qF -- "$want" stderr.txt; then bad "$name" "message lacks '$want': $(cat stderr.txt)"
    elif [ -s stdout.txt ]; then bad "$name" "printed on stdout: $(head -3 stdout.txt)"
    else ok "$name -> $(cat stderr.txt)"
    fi
}

# ---- help texts: within 80 columns, exit 0 ----
for cmd in "--help" "run --help" "verify --help" "compare --help"; do
    # shellcheck disable=SC2086
    if "$FALCON" $cmd > help.txt 2>&1; then
        wide=$(awk 'length($0) > 80' help.txt | head -1)
        [ -z "$wide" ] && ok "falcon $cmd: $(wc -l < help.txt) lines within 80 columns" \
            || bad "falcon $cmd" "a line over 80 columns: '$wide'"
    else
        bad "falcon $cmd" "status $?"
    fi
done
grep -q -- '--progress' <("$FALCON" run --help) && ok "run --help lists --progress" || bad "run --help" "no --progress"
grep -q -- '--layout {falcon,fla,bhtd}' <("$FALCON" run --help) && ok "run --help lists --layout {falcon,fla,bhtd}" \
    || bad "run --help" "no --layout"
grep -q 'quick-only\|quick profile and print' <("$FALCON" --help) && bad "falcon --help" "verify described as quick-only" \
    || ok "falcon --help: verify is not described as quick-only"

if "$STUDY" --help > study.txt 2>&1 && grep -q 'bench-dat' study.txt; then ok "falcon-study --help exits 0"
else bad "falcon-study --help" "$(cat study.txt)"; fi
rc=0; "$STUDY" > study.txt 2>&1 || rc=$?
[ $rc -eq 2 ] && ok "falcon-study with no command exits 2" || bad "falcon-study" "status $rc"
if "$STUDY" bench-dat --help > study.txt 2>&1 && grep -q '^usage: falcon-study bench-dat' study.txt; then
    ok "bench-dat is documented as falcon-study bench-dat"
else
    bad "bench-dat --help" "$(cat study.txt)"
fi

# ---- every tool says its version: the header's, read at run time from the library ----
ROOT=$(cd "$HERE/.." && pwd)
want=$(sed -n 's/^#define FALCON_VERSION "\(.*\)"/\1/p' "$ROOT/include/falcon.h")
BIN=$(dirname "$FALCON")
for tool in falcon falcon-study falcon-scaling falcon-bench falcon-study-mpi; do
    [ -x "$BIN/$tool" ] || continue
    got=$("$BIN/$tool" --version 2>&1) || true
    if [ "$got" = "$tool $want" ]; then ok "$tool --version -> $got"; else bad "$tool --version" "'$got', expected '$tool $want'"; fi
done

# ---- the README's package list is the Makefile's ----
ROOT=$(cd "$HERE/.." && pwd)
mk_pkgs=$(awk '/^DEB_PACKAGES :=/ { on = 1; sub(/^DEB_PACKAGES :=/, "") } on { line = $0; sub(/\\$/, "", line); printf "%s ", line; if ($0 !~ /\\$/) exit }' \
          "$ROOT/Makefile" | tr -s ' \n' '\n\n' | sed '/^$/d' | sort | tr '\n' ' ')
readme_pkgs=$(awk '/<!-- packages:/ { on = 1; next } on && /^$/ { exit } on { print }' "$ROOT/README.md" |
              tr '\n' ' ' | sed 's/^[^`]*`//; s/`.*//' | tr -s ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ')
if [ -n "$mk_pkgs" ] && [ "$mk_pkgs" = "$readme_pkgs" ]; then ok "README's package list = DEB_PACKAGES ($mk_pkgs)"
else bad "package list" "Makefile: '$mk_pkgs'; README: '$readme_pkgs'"; fi

# ---- falcon verify: choices, filters, --json ----
backends=$(sed -n 's/.*--backend \({[^}]*}\).*/\1/p' <("$FALCON" verify --help) | head -1)
one_error "verify --backend unknown" "--backend: unknown value 'foo' (choose one of $backends)" "$FALCON" verify --backend foo
one_error "verify --backend mpfr" "is not a kernel backend (choose one of $backends)" "$FALCON" verify --backend mpfr
case $backends in {scalar,*avx2*) ok "verify lists the kernel backends $backends" ;; *) bad "verify --help" "backends '$backends'" ;; esac
one_error "verify --variant unknown" "--variant: unknown value 'x' (choose one of {falcon1," "$FALCON" verify --variant x
one_error "verify --form without value" "--form needs a value" "$FALCON" verify --form
one_error "verify --json into a missing directory" "--json: 'nodir/v.json'" "$FALCON" verify --variant falcon1 \
    --form recurrent --precision fp64 --backend scalar --json nodir/v.json
ln -s /dev/null vnull
one_error "verify --json onto a symlink to a device is refused before any case runs" "--json: 'vnull'" \
    "$FALCON" verify --json vnull
[ -L vnull ] && ok "the symlink to /dev/null is still a symlink" || bad "verify --json" "replaced vnull"

rc=0
"$FALCON" verify --variant falcon1 --form recurrent --precision fp64 --backend scalar --json v.json > verify.txt 2>&1 || rc=$?
rows=$(grep -cE ' (pass|FAIL)$' verify.txt || true)
mine=$(grep -cE '^scalar +fp64 +recurrent +falcon1 .* (pass|FAIL)$' verify.txt || true)
if [ "$rows" -eq 1 ] && [ "$mine" -eq 1 ]; then ok "verify filters keep one row (scalar fp64 recurrent falcon1)"
else bad "verify filters" "$rows rows, $mine of them the filtered one: $(tail -5 verify.txt)"; fi
if [ -n "$PY" ]; then
    if msg=$("$PY" - v.json "$rc" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert len(rows) == 1, rows
r = rows[0]
assert (r["backend"], r["precision"], r["form"], r["variant"]) == ("scalar", "fp64", "recurrent", "falcon1"), r
assert r["cases"] > 0 and r["max_out_u"] is not None and r["max_ratio"] is not None, r
assert d["filters"] == {"backend": "scalar", "variant": "falcon1", "form": "recurrent", "precision": "fp64"}, d["filters"]
assert d["passed"] == (sys.argv[2] == "0"), (d["passed"], sys.argv[2])
print("%d cases, max out %.3g u, max/thr %.3g" % (r["cases"], r["max_out_u"], r["max_ratio"]))
EOF
    2>&1); then ok "verify --json: $msg"; else bad "verify --json" "$msg"; fi
else
    grep -q '"rows"' v.json && ok "verify --json wrote rows (no python to parse it)" || bad "verify --json" "no rows"
fi

# ---- falcon run: --verbose grammar, progress ----
$G rand q.npy f4 24,5 1; $G rand k.npy f4 24,5 2; $G rand v.npy f4 24,3 3
$G rand beta.npy f4 24 4 --range 0.2 1; $G rand alpha.npy f4 24 5 --range 0.8 1
run_args
"$FALCON" "${ARGS[@]}" --verbose > verbose.txt 2>&1 || true
grep -q ', 1 segment of 24 steps' verbose.txt && ok "--verbose: '1 segment'" || bad "--verbose, one segment" "$(cat verbose.txt)"
"$FALCON" "${ARGS[@]}" --verbose --segment 10 > verbose.txt 2>&1 || true
grep -q ', 3 segments of 10 steps' verbose.txt && ok "--verbose: '3 segments'" || bad "--verbose, 3 segments" "$(cat verbose.txt)"

# A run of a few seconds (the mpfr backend, in one segment by default;
# progress starts after a second): progress only when asked (stderr is not
# a terminal here), or on a terminal. --progress reports within what would
# be one segment (it splits the run at the form's block), the results equal
# to rounding for mpfr (its state carried in double between segments).
$G rand Lq.npy f4 3000,64 6; $G rand Lk.npy f4 3000,64 7; $G rand Lv.npy f4 3000,32 8
$G rand Lbeta.npy f4 3000 9 --range 0.2 1
long=(run --variant falcon1 --form recurrent --backend mpfr --q Lq.npy --k Lk.npy --v Lv.npy --beta Lbeta.npy)
rc=0; "$FALCON" "${long[@]}" --out out_whole.npy > stdout.txt 2> stderr.txt || rc=$?
if [ $rc -eq 0 ] && [ ! -s stderr.txt ] && [ ! -s stdout.txt ]; then ok "a long run is silent when stderr is not a terminal"
else bad "silent run" "status $rc: $(head -3 stderr.txt)"; fi
rc=0; "$FALCON" "${long[@]}" --out out.npy --progress > stdout.txt 2> stderr.txt || rc=$?
if [ $rc -eq 0 ] && grep -qE '^falcon run: +[0-9.]+% \([0-9]+ of 3000 steps\)' stderr.txt && [ ! -s stdout.txt ]; then
    ok "--progress within one segment: $(wc -l < stderr.txt) progress lines on stderr ($(tail -1 stderr.txt))"
else
    bad "--progress" "status $rc, stderr: $(head -3 stderr.txt)"
fi
if msg=$($G cmp out.npy out_whole.npy 1e-6); then ok "--progress with mpfr: the reads equal to rounding ($msg)"
else bad "--progress with mpfr" "$msg"; fi
if command -v script >/dev/null; then
    # script(1) runs it with a terminal as stdout and stderr: progress after
    # each segment (a terminal alone does not split the run).
    script -qec "$(printf '%q ' "$FALCON" "${long[@]}" --segment 100 --out out.npy)" /dev/null > tty.txt 2>&1 || true
    if grep -q $'\r.*falcon run: .*of 3000 steps' tty.txt; then ok "progress on a terminal, rewritten in place"
    else bad "progress on a terminal" "$(tr '\r' '|' < tty.txt | head -c 300)"; fi
fi

# ---- falcon compare ----
# bench FILE REPS MIN_TIME TOK1 TOK2 [INTERLEAVED]: a Google Benchmark result
# of two cases (medians TOK1, TOK2 tokens/s), its protocol in the context
# (falcon_interleaved only where INTERLEAVED is given, as in older files).
bench() {
    local il=""
    [ -z "${6:-}" ] || il="\"falcon_interleaved\": \"$6\","
    cat > "$1" <<EOF
{"context": {"falcon_repetitions": "$2", "falcon_min_time": "$3", "falcon_sweep": "default",
             $il "falcon_cpu_model": "cpu of $1"},
 "benchmarks": [
  {"name": "x/one_median", "run_name": "x/one", "run_type": "aggregate", "aggregate_name": "median",
   "repetitions": $2, "tokens_per_second": $4, "cpu_time": 1, "time_unit": "ms"},
  {"name": "x/two_median", "run_name": "x/two", "run_type": "aggregate", "aggregate_name": "median",
   "repetitions": $2, "tokens_per_second": $5, "cpu_time": 1, "time_unit": "ms"}]}
EOF
}
bench a.json 3 0.3 1000 4000
bench b.json 3 0.3 1500 2000
bench c.json 1 0.05 3000 6000
"$FALCON" compare a.json b.json > cmp.txt 2> cmp.err
if [ ! -s cmp.err ] && ! grep -q '^warning' cmp.txt && grep -q '^A: a.json (cpu of a.json; 3 repetitions x 0.3 s, sweep default)' cmp.txt; then
    ok "compare, same protocol: no warning, the protocol printed"
else
    bad "compare, same protocol" "$(cat cmp.err cmp.txt | head -5)"
fi
"$FALCON" compare a.json c.json > cmp.txt 2> cmp.err
if grep -q '^falcon: warning: the files were measured with different protocols (A: 3 repetitions x 0.3 s, sweep default; B: 1 repetition x 0.05 s' cmp.err &&
   grep -q '^warning: ' cmp.txt; then
    ok "compare, different protocols: warns on stderr and in the table"
else
    bad "compare, different protocols" "$(cat cmp.err cmp.txt | head -5)"
fi
# Interleaved repetitions are another protocol; "false" reads as a file
# that does not say.
bench d.json 3 0.3 1000 4000 true
bench e.json 3 0.3 1000 4000 false
"$FALCON" compare a.json d.json > cmp.txt 2> cmp.err
"$FALCON" compare a.json e.json > cmp2.txt 2> cmp2.err
if grep -q '^falcon: warning: .*(A: 3 repetitions x 0.3 s, sweep default; B: 3 repetitions x 0.3 s, interleaved, sweep default)' cmp.err &&
   [ ! -s cmp2.err ]; then
    ok "compare, interleaved against one case after another: warns; false is the same protocol as unrecorded"
else
    bad "compare, interleaved" "$(cat cmp.err cmp2.err | head -5)"
fi

rc=0; "$FALCON" compare a.json b.json c.json --out machines.dat > cmp.txt 2> cmp.err || rc=$?
# The expected geometric means, from the numbers above.
want=$(awk 'BEGIN { printf "B/A %.3f C/A %.3f", sqrt(1500/1000 * 2000/4000), sqrt(3000/1000 * 6000/4000) }')
got=$(sed -n 's/^geometric mean of \([BC]\/A\) over 2 cases: \([0-9.]*\)$/\1 \2/p' cmp.txt | tr '\n' ' ' | sed 's/ $//')
if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok "compare of 3 files: geometric means $got"
else bad "compare of 3 files" "status $rc, got '$got', expected '$want': $(head -12 cmp.txt)"; fi
if grep -q '^# machines 3$' machines.dat && [ "$(grep -vc '^#' machines.dat)" -eq 2 ] &&
   awk '!/^#/ { if (NF != 2 + 3 + 2 + 1) bad = 1 } END { exit bad }' machines.dat; then
    ok "compare of 3 files --out: 2 cases x (index, name, 3 tokens/s, 2 ratios, position)"
else
    bad "compare --out, 3 files" "$(cat machines.dat)"
fi

# A file without Google Benchmark's median aggregates (its repetitions
# only, out of order): compare takes the median of the repetitions itself,
# the mean of the middle two for an even count: 100, 200, 300, 400 -> 250.
{ echo '{"context": {"falcon_repetitions": "3", "falcon_min_time": "0.3", "falcon_sweep": "default"}, "benchmarks": ['
  sep=""
  for tok in 400 100 300 200; do
      printf '%s{"name": "x/one", "run_name": "x/one", "run_type": "iteration", "repetitions": 4, "tokens_per_second": %s, "cpu_time": 1, "time_unit": "ms"}\n' "$sep" "$tok"
      sep=,
  done
  echo ']}'; } > reps.json
"$FALCON" compare a.json reps.json > cmp.txt 2> cmp.err || true
if grep -q '^x/one  *1000  *250  *0\.250 ' cmp.txt; then ok "compare: the median of a file's repetitions where it has no median aggregate"
else bad "compare, repetitions only" "$(cat cmp.err cmp.txt | head -6)"; fi

one_error "compare, one file" "compare needs two result files or more, got 1" "$FALCON" compare a.json
one_error "compare, a missing file" "missing.json" "$FALCON" compare a.json missing.json
echo '{"benchmarks": [' > broken.json
one_error "compare, malformed JSON" "broken.json" "$FALCON" compare a.json broken.json
echo '{"context": {}}' > nolist.json
one_error "compare, not benchmark output" "no \"benchmarks\" array" "$FALCON" compare a.json nolist.json
one_error "compare, unknown option" "unknown option '--frobnicate'" "$FALCON" compare a.json b.json --frobnicate
one_error "compare, --out without value" "--out needs a value" "$FALCON" compare a.json b.json --out
# A case name is one column of --out's data file (gnuplot splits rows at
# white space, reads '"' as a quote and '#' as a comment): a name that would
# shift or hide columns is refused, and the earlier data file stays.
echo keep >names.dat
for name in "" "x y" $'x\ty' $'x\ny' "x#y" 'x"y'; do
    "$PY" -c 'import json, sys; json.dump({"benchmarks": [{"name": sys.argv[1], "real_time": 1,
        "tokens_per_second": 1000}]}, open("names.json", "w"))' "$name"
    one_error "compare --out, case name '$name'" "names.json: case name" \
        "$FALCON" compare a.json names.json --out names.dat
done
[ "$(cat names.dat)" = keep ] && ok "compare --out: a refused name leaves the data file as it was" ||
    bad "compare --out, refused names" "names.dat changed: $(head -3 names.dat)"

test_end
