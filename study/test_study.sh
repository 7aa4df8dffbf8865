#!/bin/bash
# The stability study past one process (make study-check; make check runs it):
#   0. bench-dat (first: it needs no study): a benchmark file of 2872 cases in
#      shuffled order to every table, each as its rules give it (Python
#      writes them beside it), in a second or so;
#   1. shards: `stability --shard K/3` three times, then `merge`, equal to one
#      process; merge refuses a missing shard and a shard given twice;
#   2. MPI: `mpirun -np 2 falcon-study-mpi stability`, equal to one process,
#      with streams run by both ranks ("skipped: ..." when the launcher was not
#      built or mpirun cannot start here: never counted as passed);
#   3. resume: a study killed with SIGKILL while a stream is midway, then
#      `--resume`, equal to one uninterrupted process, with at least one
#      stream continued from its saved state (not rerun from step 0);
#      a result written by another build (or before results named their
#      build) is run again by --resume, and merge refuses it;
#   4. the precisions' ladder: tf32 and bf16 streams with chunk curves only;
#      the fit's range (--tfit): fits on T <= tfit only, recomputed here from
#      the curve files, and beyond.dat's measured-vs-extrapolated verdicts.
# "Equal": stability.json with its timing field stripped, fits.dat,
# refcheck.dat and every curve file byte for byte.
#
#   bash study/test_study.sh BUILD_DIR MPI_LAUNCHER|none|none:WHY
# STUDY_TMAX (default 10000): the streams' length; the quick profile on the
# scalar backend, MPFR to T = 200 (a few seconds per run on 2 cores).
set -u
BUILD=${1:?usage: test_study.sh BUILD_DIR MPI_LAUNCHER|none}
MPI=${2:-none}
STUDY=$(cd "$BUILD" && pwd)/falcon-study
NO_MPI="no mpicc (the MPI launcher was not built)"
case $MPI in
none:*) NO_MPI=${MPI#none:}; MPI=none ;;
none) ;;
*) MPI=$(cd "$(dirname "$MPI")" && pwd)/$(basename "$MPI") ;;
esac
TMAX=${STUDY_TMAX:-10000}
OPTS=(--tmax "$TMAX" --tmpfr 200 --tmax-parallel 200 --backend scalar)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0 fail=0 skip=0
ok() { echo "PASS: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1${2:+: $2}"; fail=$((fail + 1)); }
skipped() { echo "SKIP: $1: skipped: $2"; skip=$((skip + 1)); }

# same A B: the outputs of two studies are equal, timings aside.
same() {
    local a=$1 b=$2
    [ -f "$a/stability.json" ] && [ -f "$b/stability.json" ] || { echo "no stability.json in $a or $b"; return 1; }
    cmp <(sed 's/"seconds": [0-9.]*/"seconds": -/' "$a/stability.json") \
        <(sed 's/"seconds": [0-9.]*/"seconds": -/' "$b/stability.json") || return 1
    diff -r -x streams -x resume -x stability.json "$a" "$b" | head -5
    [ "${PIPESTATUS[0]}" -eq 0 ]
}

# other_build FILE: FILE's build identity, with its revision replaced by
# X's (as a build of another revision would write it, the layout the same).
# old_format FILE: FILE's format number set to 1, as written before results
# named their build.
other_build() {
    python3 - "$1" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
at = b.index(b", revision ") + len(b", revision ")
end = b.index(b",", at)
open(sys.argv[1], "r+b").write(b[:at] + b"X" * (end - at) + b[end:])
PY
}
old_format() {
    python3 -c "import sys; f=open(sys.argv[1],'r+b'); assert f.read(18) == b'falcon stability 2'; f.seek(0); f.write(b'falcon stability 1')" "$1"
}

# ---- 0. bench-dat on a few thousand cases: every table as its rules say ----
# A Google Benchmark file of 2872 cases in shuffled order: 432 kernel cases
# (median aggregates, bare iterations, failed runs) and 2440 BLAS entries,
# and an entry of neither; the tables its rules give are written beside it
# by Python. (Few sweeps: each file of the set is open until the commit.)
t0=$SECONDS
python3 - <<'PY'
import itertools, json, math, os, random
random.seed(7)
keys = ["tokens_per_second", "GFLOPS", "peak_fraction"]
g = lambda x: "%.6g" % x
def med(v):
    v = sorted(x for x in v if not math.isnan(x)); k = len(v)
    return math.nan if not k else v[k // 2] if k % 2 else 0.5 * (v[k // 2 - 1] + v[k // 2])
def runs(name):  # a case's entries and its medians: aggregates, iterations or a failure
    kind = random.random()
    if kind < 0.05:
        return [{"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True}], None
    if kind < 0.5:
        es = [dict(name=name + "_" + a, run_name=name, run_type="aggregate", aggregate_name=a,
                   **{k: round(random.uniform(1, 1e6), 3) for k in keys}) for a in ["mean", "median", "stddev"]]
        return es, [es[1][k] for k in keys]
    es = [dict(name=name, run_name=name, run_type="iteration", **{k: round(random.uniform(1, 1e6), 3) for k in keys})
          for _ in range(random.randint(1, 4))]
    return es, [med([e[k] for e in es]) for k in keys]
cases = []
for form, pr, T, n, C, th in itertools.product(["chunk", "recurrent"], ["fp32", "fp64"],
                                              [256, 512, 1024, 2048, 4096, 8192], [32, 64, 128], [0, 16, 32, 64], [1, 2, 4]):
    if (form == "chunk") == (C > 0):
        cases.append(dict(form=form, var="falcon1", be="avx2", pr=pr, T=T, n=n, m=n, C=C, W=0, h=8, th=th))
for v, n, m, C in itertools.product(["sgemm", "dgemm"], range(16, 336, 16), range(16, 336, 16), [16, 32, 64]):
    cases.append(dict(form="blas", var=v, be="chunk-shapes", pr="fp64" if v == "dgemm" else "fp32", n=n, m=m, C=C))
for v, n in itertools.product(["sgemm", "dgemm"], range(64, 1344, 64)):
    cases.append(dict(form="blas", var=v, be="square", pr="fp64" if v == "dgemm" else "fp32", n=n, m=n, C=0))
random.shuffle(cases)
entries, rows, blas = [], [], []
for c in cases:
    if c["form"] == "blas":
        name = "blas/%s/%s/n:%d%s/threads:1" % (c["var"], c["be"], c["n"], "/m:%d/C:%d" % (c["m"], c["C"]) if c["C"] else "")
    else:
        name = "%s/%s/%s/%s/T:%d/n:%d/m:%d%s/heads:%d/threads:%d/real_time" % (
            c["form"], c["var"], c["be"], c["pr"], c["T"], c["n"], c["m"], "/C:%d" % c["C"] if c["C"] else "", c["h"], c["th"])
    es, c["med"] = runs(name)
    entries += es
    m = c["med"] or [math.nan] * 3
    if c["form"] == "blas":
        blas.append("%s %d %d %d %s %s\n" % (c["pr"], c["n"], c["m"], c["C"], g(m[1]), g(m[2])))
    else:
        rows.append("%s %s %s %s %d %d %d %d %d %d %d %s\n" % (c["form"], c["var"], c["be"], c["pr"], c["T"], c["n"],
                                                              c["m"], c["C"], c["W"], c["h"], c["th"], " ".join(map(g, m))))
entries.insert(len(entries) // 2, {"name": "junk", "run_type": "iteration"})
json.dump({"context": {}, "benchmarks": entries}, open("bench.json", "w"), indent=1)
os.makedirs("want")
with open("want/cases.dat", "w") as f:
    f.write("# from bench.json (medians; NaN: absent or failed)\n# form variant backend precision T n m C W heads "
            "threads tokens_per_second GFLOPS peak_fraction\n" + "".join(rows))
with open("want/blas.dat", "w") as f:
    f.write("# from bench.json: OpenBLAS, 1 thread, on the GEMMs of one chunk block (C > 0) or a square product "
            "(C = 0)\n# precision n m C GFLOPS peak_fraction (medians; NaN: absent or failed)\n" + "".join(blas))
tags = [("T", "T"), ("n", "n"), ("C", "C"), ("h", "h"), ("th", "p")]
for axis, d in [("T", "T"), ("n", "n"), ("C", "C"), ("th", "threads")]:
    os.makedirs("want/" + d)
    sweeps = {}
    for c in cases:
        if c["form"] == "blas" or not c["med"] or (axis == "C" and not c["C"]): continue
        key = "_".join([c["form"], c["var"], c["be"], c["pr"]] + ["%s%d" % (t, c[k]) for k, t in tags if k != axis and c[k]])
        sweeps.setdefault(key, []).append(c)
    for key, cs in sweeps.items():
        if len(cs) < 2 and axis != "T": continue
        with open("want/%s/%s.dat" % (d, key), "w") as f:
            f.write("# %s: %s tokens_per_second GFLOPS peak_fraction (medians)\n" % (key, d))
            if axis == "C":  # the library's default for the shape: sqrt(7 n m / (W (2n + m))) to a power of 2 in [8, 256]
                c0, W = cs[0], cs[0]["W"] or 1
                x, p = math.sqrt(7 * c0["n"] * c0["m"] / (W * (2 * c0["n"] + c0["m"]))), 8
                while p < 256 and p * math.sqrt(2) <= x: p *= 2
                f.write("# auto_C %d (falcon_chunk_auto of n, m, W: the default chunk size)\n" % p)
            for c in sorted(cs, key=lambda c: c[axis]): f.write("%d %s\n" % (c[axis], " ".join(map(g, c["med"]))))
PY
# under a limit of 64 descriptors: the 470 tables are closed as written
if ! (ulimit -n 64; "$STUDY" bench-dat bench.json --out bd) >bd.txt 2>&1; then
    bad "bench-dat on 2872 cases" "$(tail -3 bd.txt)"
elif ! grep -q '^bench-dat: 432 cases and 2440 BLAS yardstick entries from bench.json into bd (1 entries neither)$' bd.txt; then
    bad "bench-dat on 2872 cases" "$(tail -1 bd.txt)"
elif ! out=$(diff -r -x .falcon-reports want bd | head -5) || [ -n "$out" ]; then
    bad "bench-dat on 2872 cases: the tables" "$out"
elif grep -qv '^bench-dat:' bd/.falcon-reports ||
     ! cmp -s <(sed 's/^bench-dat://' bd/.falcon-reports | sort) <(cd bd && find . -type f | sed 's|^\./||' | sort); then
    bad "bench-dat on 2872 cases" "its record does not list the tables it wrote, each as bench-dat's"
else
    ok "bench-dat on 2872 cases: cases.dat, blas.dat and $(find bd -mindepth 2 -name '*.dat' | wc -l) sweep files as the rules give"
fi
echo "   (bench-dat: $((SECONDS - t0)) s)"

# ---- 0b. two kinds of report set in one folder ----
# A set removes the files the folder's record gives to its own kind that it
# no longer writes, and nothing else: not the other kind's set, not a file
# both kinds' lines name, not one named by a line without a kind (a record
# written before kinds were), not one the record does not name.
t0=$SECONDS
tiny=(--tmax 200 --tmpfr 100 --tmax-parallel 100 --n 4 --backend scalar)
sums() { (cd kinds && find . -type f ! -name .falcon-reports ! -name 'zz_*' ! -path './streams/*' ! -path './resume/*' \
          -print0 | sort -z | xargs -0 sha1sum); }
if ! "$STUDY" stability "${tiny[@]}" --out kinds >kinds1.txt 2>&1; then
    bad "two kinds in one folder: the stability set" "$(tail -2 kinds1.txt)"
else
    sums > stab.sum
    if ! "$STUDY" stability --learning --t0 64 --factor 4 --seeds 1 --n 4 --out kinds >kinds2.txt 2>&1; then
        bad "two kinds in one folder: the learning set" "$(tail -2 kinds2.txt)"
    elif ! (cd kinds && sha1sum --quiet -c ../stab.sum) >kinds3.txt 2>&1; then
        bad "two kinds in one folder" "the learning set changed or removed the stability set's files: $(head -3 kinds3.txt)"
    else
        ok "two kinds in one folder: the learning set leaves the stability set's $(wc -l < stab.sum) files as they were"
        sums | awk 'NR == FNR { s[$2] = 1; next } !($2 in s)' stab.sum - > learn.sum
        for z in stale learn shared legacy unlisted; do echo "$z" > "kinds/curves/zz_$z.dat"; done
        printf 'stability:curves/zz_stale.dat\nlearning:curves/zz_learn.dat\nstability:curves/zz_shared.dat\n'`
              `'learning:curves/zz_shared.dat\ncurves/zz_legacy.dat\n' >> kinds/.falcon-reports
        if ! "$STUDY" stability "${tiny[@]}" --out kinds >kinds4.txt 2>&1; then
            bad "two kinds in one folder: the stability set again" "$(tail -2 kinds4.txt)"
        elif [ -e kinds/curves/zz_stale.dat ] || [ "$(cd kinds/curves && ls zz_* | tr '\n' ' ')" != \
             "zz_learn.dat zz_legacy.dat zz_shared.dat zz_unlisted.dat " ]; then
            bad "two kinds in one folder: stale files" "left: $(cd kinds/curves && ls zz_* | tr '\n' ' ')"
        elif ! (cd kinds && sha1sum --quiet -c ../learn.sum) >kinds5.txt 2>&1 ||
             ! grep -qx 'learning:curves/zz_learn.dat' kinds/.falcon-reports ||
             grep -q '^stability:curves/zz_stale.dat$' kinds/.falcon-reports; then
            bad "two kinds in one folder: the second stability set" "$(head -3 kinds5.txt)"
        else
            ok "two kinds in one folder: a set removes only its own kind's stale file; the other kind's, shared, unkinded and unlisted files stay"
        fi
    fi
fi
echo "   (two kinds: $((SECONDS - t0)) s)"

t0=$SECONDS
if "$STUDY" stability "${OPTS[@]}" --out one >one.txt 2>&1; then
    ok "one process: $(tail -1 one.txt)"
else
    bad "one process" "$(tail -3 one.txt)"
    echo "study tests: $pass passed, $fail failed"
    exit 1
fi
echo "   (one process: $((SECONDS - t0)) s)"

# ---- 4a. tf32 and bf16: chunk curves only, Falcon-1 and Falcon-3 ----
nf=$(ls one/curves | grep -c '^\(tf32\|bf16\)_falcon[13]_[a-z]*_scalar_chunk\.dat$')
nother=$(ls one/curves | grep '^\(tf32\|bf16\)_' | grep -vc '_chunk\.dat$')
if [ "$nf" -eq 20 ] && [ "$nother" -eq 0 ] && grep -q '^tf32 falcon3 mix scalar chunk' one/fits.dat; then
    ok "tf32/bf16 streams: 20 chunk curves (falcon1, falcon3 x 5 decays x 2 formats), no other form"
else
    bad "tf32/bf16 streams" "$nf chunk curves, $nother of other forms"
fi

# ---- 1. shards and merge ----
t0=$SECONDS
rc=0
for k in 0 1 2; do
    "$STUDY" stability "${OPTS[@]}" --shard $k/3 --out shard$k >shard$k.txt 2>&1 || rc=1
done
n=$(ls shard0/streams shard1/streams shard2/streams 2>/dev/null | grep -c '\.res$')
if [ $rc -ne 0 ]; then bad "shards" "$(tail -2 shard*.txt)"
elif [ "$n" -ne "$(ls one/streams | grep -c '\.res$')" ]; then bad "shards" "$n streams in the three shards"
elif ! "$STUDY" merge --out merged shard0 shard1 shard2 >merge.txt 2>&1; then bad "merge" "$(tail -3 merge.txt)"
elif ! out=$(same one merged); then bad "3 shards merged = one process" "$out"
else ok "3 shards ($(grep -ho '[0-9]* of the [0-9]* streams' shard?.txt | cut -d' ' -f1 | paste -sd+)) merged = one process"
fi
if "$STUDY" merge --out m2 shard0 shard2 >m2.txt 2>&1 || ! grep -q 'streams missing' m2.txt; then
    bad "merge without shard 1" "$(tail -2 m2.txt)"
else ok "merge without a shard fails: $(tail -1 m2.txt)"; fi
if "$STUDY" merge --out m3 shard0 shard1 shard2 shard1 >m3.txt 2>&1 || ! grep -q 'in two shards' m3.txt; then
    bad "merge with shard 1 twice" "$(tail -2 m3.txt)"
else ok "merge with a shard twice fails: $(tail -1 m3.txt)"; fi
if "$STUDY" merge --out m4 shard0 one >m4.txt 2>&1 || ! grep -q 'in two shards' m4.txt; then
    bad "merge of overlapping directories" "$(tail -2 m4.txt)"
else ok "merge of overlapping directories fails"; fi
# a shard of another build, or written before results named their build:
# refused, nothing written, the two builds named
rm -rf shard1x && cp -r shard1 shard1x
other_build "shard1x/streams/$(ls shard1x/streams | grep '\.res$' | head -1)"
if "$STUDY" merge --out mx shard0 shard1x shard2 >mx.txt 2>&1 || [ -e mx ] || ! grep -q 'results of two builds are never merged' mx.txt ||
   [ "$(grep -o 'revision [^,]*' mx.txt | sort -u | wc -l)" -ne 2 ] || ! grep -q 'revision XXXX' mx.txt; then
    bad "merge of two builds" "$(tail -2 mx.txt)"
else ok "merge of two builds fails, nothing written, both builds named"; fi
rm -rf shard1x && cp -r shard1 shard1x
old_format "shard1x/streams/$(ls shard1x/streams | grep '\.res$' | head -1)"
if "$STUDY" merge --out mx shard0 shard1x shard2 >mx.txt 2>&1 || [ -e mx ] || ! grep -q 'written by an earlier build' mx.txt; then
    bad "merge with a result of an earlier build" "$(tail -2 mx.txt)"
else ok "merge with a result that names no build fails, nothing written"; fi
# the report names the build of its curves: this one's, or the shards' when
# they all came from another
rm -rf sx && mkdir sx && cp -r shard0 shard1 shard2 sx/
for f in sx/shard*/streams/*.res; do other_build "$f"; done
this=$(sed -n 's/^  "build": "\(.*\)",$/\1/p' one/stability.json)
if [[ $this != "falcon "*", revision "* ]] || [[ $this == *XXXX* ]]; then bad "stability.json's build" "'$this'"
elif ! "$STUDY" merge --out mo sx/shard0 sx/shard1 sx/shard2 >mo.txt 2>&1; then bad "merge of one other build" "$(tail -2 mo.txt)"
elif ! grep -q '^  "build": "falcon [^"]*, revision XXXX' mo/stability.json; then
    bad "merge of one other build" "its report does not name the shards' build: $(grep '"build"' mo/stability.json)"
else ok "stability.json names the build of its curves (this one; the shards' when merged from another)"; fi
echo "   (shards and merge: $((SECONDS - t0)) s)"

# ---- 2. MPI ----
t0=$SECONDS
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --oversubscribe --allow-run-as-root -np 2)
if [ "$MPI" = none ]; then
    skipped "MPI run = one process" "$NO_MPI"
elif ! command -v mpirun >/dev/null; then
    skipped "MPI run = one process" "no mpirun"
elif ! timeout 60 "${MPIRUN[@]}" true >mpitrue.txt 2>&1; then
    skipped "MPI run = one process" "mpirun cannot start here: $(grep -v '^[-* ]*$' mpitrue.txt | head -2 | tr '\n' ' ')"
elif ! timeout 600 "${MPIRUN[@]}" "$MPI" stability "${OPTS[@]}" --out mpi >mpi.txt 2>&1; then
    bad "MPI run" "$(grep -m3 error mpi.txt || tail -5 mpi.txt)"
elif ! out=$(same one mpi); then
    bad "MPI run (2 ranks) = one process" "$out"
elif ! grep -qE '^MPI: [1-9][0-9]* streams run by the other ranks, [1-9]' mpi.txt; then
    bad "MPI run" "the streams were not spread over both ranks: $(grep '^MPI:' mpi.txt)"
else
    ok "MPI run (2 ranks) = one process; $(grep '^MPI: .* by the other' mpi.txt)"
fi
echo "   (MPI: $((SECONDS - t0)) s)"

# ---- 3. SIGKILL midway, then --resume ----
t0=$SECONDS
"$STUDY" stability "${OPTS[@]}" --checkpoint-every 0 --out killed >killed.txt 2>&1 &
pid=$!
# Killed once three streams are done and another one's state is saved
# (that stream is midway), before the study ends. The study is stopped
# while its files are looked at, so that the stream seen midway cannot
# finish (and drop its state) between the look and the kill: streams of a
# tenth of a second made that race likely.
saved=
for _ in $(seq 1 2400); do
    kill -STOP $pid 2>/dev/null || break
    # a state whose stream has no result yet (a kill between a stream's
    # save and the removal of its state leaves both)
    saved=$(ls killed/resume 2>/dev/null | grep '^[0-9]*\.state$' |
        while read -r f; do [ -f "killed/streams/${f%.state}.res" ] || echo "$f"; done | head -1)
    [ -n "$saved" ] && [ "$(ls killed/streams 2>/dev/null | grep -c '\.res$')" -ge 3 ] && break
    kill -CONT $pid 2>/dev/null
    sleep 0.05
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
done_before=$(ls killed/streams 2>/dev/null | grep -c '\.res$')
# the same, with the midway stream's state as another build would save it
rm -rf killedx && cp -r killed killedx
[ -n "$saved" ] && other_build "killedx/resume/$saved"
total=$(ls one/streams | grep -c '\.res$')
if [ -z "$saved" ] || [ "$done_before" -lt 3 ] || [ -f killed/stability.json ]; then
    bad "kill midway" "no stream midway after 3 finished before the study ended (raise STUDY_TMAX)"
elif ! { idx=${saved%.state}   # and what a kill inside a save leaves (temporaries), planted
          : >"killed/resume/$idx.state.tmp-planted"; mkdir -p "killed/resume/c00/$idx.tmp-planted"
          # and the state a kill right after a stream's save leaves beside its result
          fin=$(ls killed/streams | grep -m1 '^[0-9]*\.res$'); cp "killed/resume/$saved" "killed/resume/${fin%.res}.state"
          "$STUDY" stability "${OPTS[@]}" --checkpoint-every 0 --resume --out killed >resumed.txt 2>&1; }; then
    bad "--resume" "$(tail -3 resumed.txt)"
elif ! grep -q 'resumed at T = [1-9]' resumed.txt; then
    bad "--resume" "no stream continued from its saved state: $(grep -i 'stream' resumed.txt | head -3)"
elif ! out=$(same one killed); then
    bad "killed + resumed = one process" "$out"
else
    ok "SIGKILL with $done_before of $total streams done, --resume: = one process; $(grep -c 'resumed at' resumed.txt) stream(s) continued ($(grep -m1 -o 'stream [0-9]* (.*) resumed at T = [0-9]*' resumed.txt))"
fi
if ls killed/resume | grep -q '^[0-9]*\.state$'; then bad "after --resume" "stream states are left in resume/ (one planted beside a finished result counts)"; fi
left=$(find killed -name '*.tmp-*' | head -3)
[ -z "$left" ] || bad "after --resume" "temporaries of the killed run are left: $left"
if [ -n "$saved" ]; then
    sx=$((10#${saved%.state}))
    if "$STUDY" stability "${OPTS[@]}" --checkpoint-every 0 --resume --out killedx >resumedx.txt 2>&1 &&
        grep -q "stream $sx: saved state .* not used (written by another build, falcon [^;]*revision XXXX" resumedx.txt &&
        ! grep -q "stream $sx (.*) resumed at" resumedx.txt && out=$(same one killedx); then
        ok "--resume: a saved state of another build is not used (stream $sx starts from step 0), = one process"
    else bad "--resume with a state of another build" "$(grep -m3 "stream ${saved%.state}\|error" resumedx.txt) ${out:-}"; fi
fi
echo "   (kill and resume: $((SECONDS - t0)) s)"

# ---- 3b. a damaged result is not trusted; a run stopped early keeps the earlier results ----
# (curve 0's point count of stream 0 sits at byte 1536 of its result file:
# sizeof(run_key) + offsetof(stream, c[0].npts), study/stab.h)
rm -rf dmg && cp -r one dmg
python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.seek(1536); f.write(struct.pack('<i',100000))" dmg/streams/000.res
if "$STUDY" stability "${OPTS[@]}" --resume --out dmg >dmg.txt 2>&1 && grep -q 'counts are out of range' dmg.txt &&
    out=$(same one dmg); then
    ok "--resume: a result with a point count of 100000 is not used (it runs again), the report = one process"
else bad "--resume with a damaged result" "$(grep -m2 'stream 0\|error' dmg.txt) ${out:-}"; fi
# a result of another build, or of an earlier format, is not used either:
# those two streams run again (and only they), the report = one process
rm -rf ob && cp -r one ob
other_build ob/streams/001.res
old_format ob/streams/002.res
if "$STUDY" stability "${OPTS[@]}" --resume --out ob >ob.txt 2>&1 &&
    grep -q 'stream 1: .* not used (written by another build, falcon [^;]*revision XXXX[^;]*; this one is falcon ' ob.txt &&
    grep -q 'stream 2: .* not used (written by an earlier build, before results named their build' ob.txt &&
    [ "$(grep -c 'not used' ob.txt)" -eq 2 ] && out=$(same one ob); then
    ok "--resume: results of another build and of the earlier format run again (2 streams), the report = one process"
else bad "--resume with results of other builds" "$(grep -m3 'not used\|error' ob.txt) ${out:-}"; fi
# A stream that finishes before the signal replaces its result with a whole
# new one (its "seconds" differ), so the check is not on bytes: the same
# results are there, none partial, and a --resume from them runs no stream
# again and reports what one process does.
rm -rf keep && cp -r one keep
before=$(ls keep/streams)
"$STUDY" stability "${OPTS[@]}" --out keep >keep.txt 2>&1 &
pid=$!
sleep 0.5
kill -TERM $pid 2>/dev/null
wait $pid 2>/dev/null
if [ "$before" = "$(ls keep/streams)" ] && [ -z "$(find keep -name '*.tmp-*')" ] &&
    "$STUDY" stability "${OPTS[@]}" --resume --out keep >keep2.txt 2>&1 &&
    ! grep -q 'not used\|resumed at' keep2.txt && out=$(same one keep); then
    ok "a run stopped early (SIGTERM) leaves the earlier stream results whole: --resume runs none again, = one process"
else bad "a run stopped early" "results changed, partial or temporaries left: $(grep -m2 'not used\|error' keep2.txt) ${out:-}"; fi

# ---- 4b. the fit's range: fitted on T <= 2000, tested on the points beyond ----
t0=$SECONDS
if ! "$STUDY" stability --profile deep --tmax 20000 --tfit 2000 --tmpfr 200 --tmax-parallel 200 --backend scalar \
        --out deep >deep.txt 2>&1; then
    bad "deep profile, --tfit" "$(tail -3 deep.txt)"
else
    # p of each curve refitted here (least squares of log err on log T over
    # T <= 2000: 100, 200, 500, 1000, 2000) against fits.dat; held in beyond.dat
    # against its own ratio
    why=$(awk 'FNR == 1 { f++ }
        f == 1 && !/^#/ { p[$1 "_" $2 "_" $3 "_" $4 "_" $5] = $8; next }
        f == 2 && !/^#/ { n++; r = $8 / $9; want = (r >= 0.5 && r <= 2) ? "yes" : "no"
                          if ($13 != want || $6 != 2000 || $7 != 20000) { print "beyond.dat row: " $0; exit } }
        END { if (n != 6) print n " rows in beyond.dat, not 6 (3 streams x recurrent, chunk)" }' deep/fits.dat deep/beyond.dat)
    for c in deep/curves/*_recurrent.dat deep/curves/*_chunk.dat; do
        [ -n "$why" ] && break
        name=$(basename "$c" .dat)
        why=$(awk -v name="$name" -v want="$(awk -v k="$name" '!/^#/ && $1 "_" $2 "_" $3 "_" $4 "_" $5 == k { print $8 }' deep/fits.dat)" '
            /^$/ { exit } /^#/ { next }
            $1 <= 2000 && $2 > 0 { x = log($1); y = log($2); sx += x; sy += y; sxx += x * x; sxy += x * y; k++ }
            END { p = (k * sxy - sx * sy) / (k * sxx - sx * sx)
                  if (k != 5 || (p - want) ^ 2 > 1e-6) printf "%s: p over T <= 2000 is %.4f from %d points, fits.dat says %s\n", name, p, k, want }' "$c")
        grep -q "^# measured past the fit's range (T > 2000)" "$c" || why="$name: no points past the range (index 2)"
    done
    if [ -z "$why" ] && grep -q '"fit_tmax": 2000' deep/stability.json && grep -q '"beyond_fit_out": {"points": 3,' deep/stability.json; then
        ok "--tfit 2000: fits over T <= 2000 only (p recomputed), beyond.dat and stability.json test them at T = 20000"
    else
        bad "--tfit" "${why:-stability.json lacks fit_tmax or beyond_fit_out}"
    fi
fi
echo "   (fit range: $((SECONDS - t0)) s)"

echo "study tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
