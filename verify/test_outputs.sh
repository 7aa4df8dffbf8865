#!/bin/bash
# What a run guarantees about the files it writes (docs/files.md), tried
# the way a careless user, an attacker or a crashing machine would: symlinks and devices at an output path,
# outputs that alias each other or an input, later outputs that cannot be
# written, a full disk, signals at every step of the final writes, and two
# runs saving to one checkpoint at once. After each, every file the run did
# not finish must be byte-identical to what it was, and no temporary file may
# be left.
#
#   verify/test_outputs.sh build/falcon
#
# Some cases need root (mount a small tmpfs for a full disk, mknod) and strace
# (an injected delay holds the run at one system call while a signal or a
# second run arrives); without them they are skipped with the reason.
# STREAM_NO_LIMIT=1: no address-space limit (sanitizers; LeakSanitizer is
# turned off under strace, where it cannot work). About 60 s.
set -eu

. "$(dirname "$0")/lib.sh"
test_begin "${1:-}" "verify/test_outputs.sh path/to/falcon"

T=24 N=5 M=3
make_set() { # make_set PREFIX SEED_OFFSET T N M
    local p=$1 s=$2 t=$3 n=$4 m=$5
    $G rand "${p}q.npy" f8 "$t,$n" $((11 + s))
    $G rand "${p}k.npy" f8 "$t,$n" $((12 + s))
    $G rand "${p}v.npy" f8 "$t,$m" $((13 + s))
    $G rand "${p}beta.npy" f8 "$t" $((15 + s)) --range 0.2 1.2
    $G rand "${p}alpha.npy" f8 "$t" $((16 + s)) --range 0.7 1
}
make_set "" 0 $T $N $M      # the run's inputs (new results)
make_set "o_" 100 $T $N $M  # other inputs: the files a run starts from (old results)
$G rand nan_q.npy f8 "$T,$N" 11 --set 7=nan

SKIP() { echo "skip $1: $2"; }
ROOT_OK=""
if [ "$(id -u)" = 0 ]; then ROOT_OK=1; fi
STRACE=$(command -v strace || true)

# fp PATH...: type and contents of each path (a directory: its files).
fp() {
    local f
    for f in "$@"; do
        if [ -L "$f" ]; then echo "$f: symlink -> $(readlink "$f")"
        elif [ -d "$f" ]; then echo "$f: dir"; (cd "$f" && for x in $(ls -A); do echo "  $x $(sha256sum <"$x")"; done)
        elif [ -f "$f" ]; then echo "$f: file $(sha256sum <"$f")"
        elif [ -e "$f" ]; then echo "$f: $(stat -c %F "$f")"
        else echo "$f: absent"; fi
    done
}
temps() { find . -name '*.tmp-*' -o -name '*.old-*' -o -name '*.swap' | sort; }

# old_files: out.npy, state.npy and the checkpoint ck from the other inputs.
old_files() {
    rm -rf out.npy state.npy ck
    run_args q=o_q.npy k=o_k.npy v=o_v.npy beta=o_beta.npy alpha=o_alpha.npy --state-out state.npy --checkpoint-out ck
    "$FALCON" "${ARGS[@]}"
}
# new_files: what the run of this script's inputs writes, under other names.
rm -rf n_out.npy n_state.npy n_ck
run_args out=n_out.npy --state-out n_state.npy --checkpoint-out n_ck
"$FALCON" "${ARGS[@]}"
fp_new() { fp n_out.npy n_state.npy n_ck | sed 's/^n_//'; }

# refused NAME TEXT ARGS...: status 2, one error line with TEXT, the files in
# $KEEP byte-identical, no temporary left.
refused() {
    local name=$1 want=$2 rc=0 before after
    shift 2
    before=$(fp $KEEP)
    "$FALCON" "$@" >stdout.txt 2>stderr.txt </dev/null || rc=$?
    after=$(fp $KEEP)
    if [ $rc -ne 2 ]; then bad "$name" "status $rc, expected 2 ($(cat stderr.txt))"
    elif [ "$(wc -l <stderr.txt)" -ne 1 ] || ! grep -qF -- "$want" stderr.txt; then
        bad "$name" "expected one error line with '$want', got: $(cat stderr.txt)"
    elif [ "$before" != "$after" ]; then bad "$name" "changed: $(diff <(echo "$before") <(echo "$after") | tr '\n' ' ')"
    elif [ -n "$(temps)" ]; then bad "$name" "left: $(temps)"
    else ok "$name -> $(cat stderr.txt)"; fi
}

# ---- 1. a symlink at an output is followed to its file, or refused; never replaced ----
old_files
ln -sfn out.npy link.npy
run_args out=link.npy
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
if [ $rc -eq 0 ] && [ -L link.npy ] && [ "$(readlink link.npy)" = out.npy ] && cmp -s out.npy n_out.npy; then
    ok "1. --out a symlink to a file: the file gets the result, the link stays"
else bad "1. --out symlink to a file" "status $rc $(cat stderr.txt); $(fp link.npy out.npy)"; fi
ln -sfn /proc/self/fd/1 mystdout
# stdout a regular file: the link names that file, which gets the result.
rm -f captured.npy
rc=0; "$FALCON" "${ARGS[@]/link.npy/mystdout}" >captured.npy 2>stderr.txt || rc=$?
if [ $rc -eq 0 ] && [ -L mystdout ] && cmp -s captured.npy n_out.npy && [ -z "$(temps)" ]; then
    ok "1. --out a symlink to /proc/self/fd/1 (stdout a file): the file gets the result, the link stays"
else bad "1. --out symlink to /proc/self/fd/1, stdout a file" "status $rc $(cat stderr.txt); $(fp mystdout captured.npy)"; fi
KEEP="mystdout out.npy"
run_args out=mystdout
# stdout is a pipe here: the link names no file.
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt | cat >/dev/null || rc=$?
if [ -L mystdout ] && grep -qF "mystdout" stderr.txt && [ -z "$(temps)" ]; then
    ok "1. --out a symlink to /proc/self/fd/1 (a pipe) is refused and stays a symlink -> $(cat stderr.txt)"
else bad "1. --out symlink to /proc/self/fd/1" "$(fp mystdout) $(cat stderr.txt)"; fi
ln -sfn /dev/null nulllink
KEEP="nulllink /dev/null"
run_args out=nulllink; refused "1. --out a symlink to /dev/null" "'nulllink': is a symlink to something that is not a regular file" "${ARGS[@]}"
run_args --state-out nulllink; refused "1. --state-out a symlink to /dev/null" "--state-out: 'nulllink'" "${ARGS[@]}"
ln -sfn nowhere.npy dangling_out.npy
KEEP="dangling_out.npy"
run_args out=dangling_out.npy; refused "1. --out a dangling symlink" "is a symlink to nothing" "${ARGS[@]}"
mkdir -p realck && ln -sfn realck cklink
rm -rf realck && mkdir realck
run_args out=o1.npy --checkpoint-out cklink
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
if [ $rc -eq 0 ] && [ -L cklink ] && [ -f realck/falcon-checkpoint.txt ] && [ -z "$(temps)" ]; then
    ok "1. --checkpoint-out a symlink to a directory: the checkpoint goes there, the link stays"
else bad "1. --checkpoint-out symlink" "status $rc $(cat stderr.txt); $(fp cklink realck)"; fi
rm -rf o1.npy realck cklink
# A replaced file keeps its permission bits (a private one stays private);
# a new one gets 0666 less the umask.
old_files
chmod 600 out.npy; chmod 640 state.npy
rm -f fresh_state.npy
run_args --state-out state.npy
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
run_args out=fresh_out.npy --state-out fresh_state.npy
(umask 027; "$FALCON" "${ARGS[@]}" 2>>stderr.txt) || rc=$?
if [ $rc -eq 0 ] && cmp -s out.npy n_out.npy && [ "$(stat -c %a out.npy state.npy fresh_out.npy | tr '\n' ' ')" = "600 640 640 " ]; then
    ok "1. a replaced output keeps its mode (600, 640); a new one follows the umask (027: 640)"
else bad "1. output modes" "status $rc $(cat stderr.txt); $(stat -c '%n %a' out.npy state.npy fresh_out.npy | tr '\n' ' ')"; fi
rm -f fresh_out.npy fresh_state.npy

# ---- 2. falcon compare --out never replaces a device or a FIFO ----
cat >A.json <<'EOF'
{"context": {}, "benchmarks": [{"name": "case/1", "run_type": "iteration", "tokens_per_second": 100,
 "GFLOPS": 1, "peak_fraction": 0.1, "cpu_time": 5, "time_unit": "ms"}]}
EOF
mkfifo fake_fifo
KEEP="fake_fifo"
refused "2. compare --out a FIFO" "'fake_fifo': is not a regular file" compare A.json A.json --out fake_fifo
if [ -n "$ROOT_OK" ] && mknod fake_null c 1 3 2>/dev/null; then
    KEEP="fake_null"
    refused "2. compare --out a character device" "'fake_null': is not a regular file" compare A.json A.json --out fake_null
    [ -c fake_null ] || bad "2. compare --out a device" "fake_null is no longer a device"
else SKIP "2. compare --out a character device" "mknod needs root"; fi
ln -sfn A.json A_link.json
rc=0; "$FALCON" compare A.json A.json --out cmp.dat >/dev/null 2>stderr.txt || rc=$?
if [ $rc -eq 0 ] && grep -q '^0 case/1 ' cmp.dat; then ok "2. compare --out a new file"; else bad "2. compare --out" "status $rc $(cat stderr.txt)"; fi
KEEP="A.json"
refused "2. compare --out one of its inputs" "is also the input" compare A.json A_link.json --out A.json
rm -f cmp.dat

# ---- 3. outputs never overwrite each other or an input ----
old_files
KEEP="out.npy state.npy ck q.npy"
run_args --state-out out.npy; refused "3. --out and --state-out the same file" "is also the output --out" "${ARGS[@]}"
run_args out=ck/S.npy --checkpoint-out ck; refused "3. --out inside --checkpoint-out" "checkpoint 'ck': holds the output --out" "${ARGS[@]}"
run_args --state-out ck/S.npy --checkpoint-in ck; refused "3. --state-out inside --checkpoint-in" "is inside the directory of the input --checkpoint-in" "${ARGS[@]}"
# (on copies of the inputs: a run that overwrote one must not spoil the rest)
cp q.npy a_q.npy; cp k.npy a_k.npy
KEEP="a_q.npy a_k.npy"
run_args q=a_q.npy k=a_k.npy out=a_q.npy; refused "3. --out is the input --q" "'a_q.npy': is also the input --q" "${ARGS[@]}"
ln -f a_q.npy q_hard.npy
run_args q=a_q.npy k=a_k.npy out=q_hard.npy; refused "3. --out a hard link of the input --q" "is also the input --q" "${ARGS[@]}"
ln -sfn a_k.npy k_link.npy
run_args q=a_q.npy k=a_k.npy --state-out k_link.npy; refused "3. --state-out a symlink to the input --k" "is also the input --k" "${ARGS[@]}"
rm -f q_hard.npy k_link.npy a_q.npy a_k.npy
# Names up to NAME_MAX get their temporaries and backups beside them (the
# suffixes cut the name, not the run).
long=$(printf 'x%.0s' $(seq 251)).npy
run_args out="$long"
if "$FALCON" "${ARGS[@]}" 2>stderr.txt && "$FALCON" "${ARGS[@]}" 2>>stderr.txt && [ -f "$long" ] && [ -z "$(temps)" ]; then
    ok "3. a 255-byte output name, written and replaced"
else bad "3. a 255-byte output name" "$(cat stderr.txt) $(temps)"; fi
rm -f "$long"
# An input inside --checkpoint-out would go with the old checkpoint.
old_files
cp q.npy ck/extra_q.npy
KEEP="out.npy state.npy ck"
run_args q=ck/extra_q.npy --checkpoint-out ck; refused "3. the input --q inside --checkpoint-out" "holds the input --q" "${ARGS[@]}"
rm -f ck/extra_q.npy
# "dir/" is the directory; ".", ".." and "/" name none of their own.
run_args --checkpoint-out ck/; before=$(fp n_ck | sed 's/^n_//')
if "$FALCON" "${ARGS[@]}" 2>stderr.txt && [ "$(fp ck)" = "$before" ] && [ -z "$(temps)" ]; then ok "3. --checkpoint-out ck/ saves ck"
else bad "3. --checkpoint-out ck/" "$(cat stderr.txt) $(temps)"; fi
old_files
run_args --checkpoint-out .; refused "3. --checkpoint-out ." "must end in its own name" "${ARGS[@]}"
run_args --checkpoint-out ck/..; refused "3. --checkpoint-out ck/.." "must end in its own name" "${ARGS[@]}"
run_args out=out.npy/; refused "3. --out ending in /" "a file output needs a file name" "${ARGS[@]}"
# A bind mount shows one directory under two names: outputs that do not
# exist yet are still the same file, and a checkpoint read through one name
# is still an input through the other.
mkdir -p bind_a bind_b
if [ -n "$ROOT_OK" ] && mount --bind bind_a bind_b 2>/dev/null; then
    KEEP="out.npy state.npy ck bind_a"
    run_args out=bind_a/x.npy --state-out bind_b/x.npy; refused "3. two outputs, one file through a bind mount" "is also the output --out" "${ARGS[@]}"
    cp -r ck bind_a/ck
    KEEP="out.npy state.npy ck bind_a/ck"
    run_args out=o.npy --checkpoint-in bind_a/ck --state-out bind_b/ck/S.npy
    refused "3. --state-out inside --checkpoint-in through a bind mount" "is inside the directory of the input --checkpoint-in" "${ARGS[@]}"
    umount bind_b
else SKIP "3. bind mounts" "mount --bind needs root"; fi
rm -rf bind_a bind_b

# ---- 4. an output that cannot be written fails the run before it starts, and nothing changes ----
old_files
mkdir -p adir
KEEP="out.npy state.npy ck"
# q holds a NaN: a run that computed first would report it instead.
run_args q=nan_q.npy --state-out adir; refused "4. --state-out a directory (before any value is read)" "--state-out: 'adir': is a directory" "${ARGS[@]}"
run_args q=nan_q.npy --state-out /dev/null; refused "4. --state-out /dev/null" "--state-out: '/dev/null': is not a regular file" "${ARGS[@]}"
run_args q=nan_q.npy --checkpoint-out a/b/c; refused "4. --checkpoint-out a/b/c" "--checkpoint-out: checkpoint 'a/b/c': cannot create the directory" "${ARGS[@]}"
mkdir -p notck && echo mine >notck/notes.txt
KEEP="out.npy state.npy ck notck"
run_args --checkpoint-out notck; refused "4. --checkpoint-out a directory that holds other files" "holds 'notes.txt'" "${ARGS[@]}"
mkdir -p rodir
if [ -n "$ROOT_OK" ] && mount -t tmpfs -o ro,size=64k tmpfs rodir 2>/dev/null; then
    KEEP="out.npy state.npy ck"
    run_args q=nan_q.npy --state-out rodir/state.npy
    refused "4. --state-out in a read-only directory" "Read-only file system" "${ARGS[@]}"
    umount rodir
elif [ -z "$ROOT_OK" ]; then
    chmod a-w rodir
    run_args q=nan_q.npy --state-out rodir/state.npy
    refused "4. --state-out in a read-only directory" "Permission denied" "${ARGS[@]}"
    chmod u+w rodir
else SKIP "4. read-only directory" "cannot mount a read-only tmpfs"; fi

# ---- 5. a full disk while saving: the checkpoint it started from and --out stay ----
mkdir -p small
if [ -n "$ROOT_OK" ] && mount -t tmpfs -o size=100k tmpfs small 2>/dev/null; then
    make_set "w_" 0 $T 64 64
    big=(run --variant falcon1 --form recurrent --precision fp64 --q w_q.npy --k w_k.npy --v w_v.npy
         --beta w_beta.npy --alpha w_alpha.npy)
    if "$FALCON" "${big[@]}" --out small/out.npy --checkpoint-out small/ck 2>stderr.txt; then
        KEEP="small/out.npy small/ck"
        before=$(fp $KEEP)
        refused "5. --checkpoint-in ck --checkpoint-out ck on a full disk" "No space left on device" \
            "${big[@]}" --out small/out.npy --checkpoint-in small/ck --checkpoint-out small/ck
        if "$FALCON" "${big[@]}" --out small/out2.npy --checkpoint-in small/ck 2>stderr.txt; then
            ok "5. the checkpoint still loads"
        else bad "5. the checkpoint still loads" "$(cat stderr.txt)"; fi
        left=$(find small -name '*.tmp-*' -o -name '*.old-*')
        if [ -z "$left" ]; then ok "5. no temporary left on the full disk"; else bad "5. temporaries" "$left"; fi
    else SKIP "5. full disk" "the first checkpoint did not fit in 100k: $(cat stderr.txt)"; fi
    umount small
else SKIP "5. full disk" "mounting a tmpfs needs root"; fi

# ---- 6, 7. a signal at any step leaves the old files or the new ones, never a mixture ----
# run_traced PIDFILE STRACE_OPTIONS -- ARGS...: falcon under strace in the
# background; its own pid (not strace's) goes to PIDFILE.
run_traced() {
    local pidfile=$1 opts=()
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    rm -f "$pidfile"
    env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
        "$STRACE" -f -o /dev/null "${opts[@]}" sh -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$FALCON" "$@" \
        >/dev/null 2>stderr.txt &
    TRACED=$!
    local i=0
    while [ ! -s "$pidfile" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}
# whole NAME: out.npy, state.npy and ck are all the old files or all the new
# ones, and no temporary is left.
whole() {
    local now
    now=$(fp out.npy state.npy ck)
    if [ -n "$(temps)" ]; then bad "$1" "left: $(temps)"
    elif [ "$now" = "$OLD" ]; then ok "$1: all old"
    elif [ "$now" = "$(fp_new)" ]; then ok "$1: all new"
    else bad "$1" "a mixture: $(diff <(echo "$OLD") <(echo "$now") | tr '\n' ' ')"; fi
}
if [ -z "$STRACE" ]; then
    SKIP "6, 7. signals during the run" "no strace (apt-get install strace)"
else
    old_files
    cp -a out.npy o_out.keep; cp -a state.npy o_state.keep; cp -a ck o_ck.keep
    OLD=$(fp out.npy state.npy ck)
    restore() { rm -rf out.npy state.npy ck; cp -a o_out.keep out.npy; cp -a o_state.keep state.npy; cp -a o_ck.keep ck; }
    run_args --state-out state.npy --checkpoint-out ck
    # Points where a run is held: its first write, each temporary's creation
    # and sync, every rename of the commit, the removal of the replaced checkpoint.
    for point in pwrite64:1 fchmod:2 fchmod:3 fsync:1 fsync:4 flock:1 rename:1 rename:2 rename:3 renameat2:1 \
                 unlink:4; do
        for sig in TERM; do
            restore
            run_traced pid.txt -e "inject=${point%%:*}:delay_enter=1500000:when=${point##*:}" -- "${ARGS[@]}"
            sleep 0.7
            kill -$sig "$(cat pid.txt)" 2>/dev/null || true
            { wait $TRACED; } 2>/dev/null || true
            whole "6. SIG$sig held at ${point%%:*} #${point##*:}"
        done
    done
    # 4, 5. a failure at any step (an injected EIO): status 2, every file as it
    # was; a rename that fails after others undoes them.
    for point in mkdir:1 pwrite64:2 fsync:1 fsync:5 flock:1 rename:1 rename:2 renameat2:1; do
        restore
        rc=0
        env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
            "$STRACE" -f -o /dev/null -e "inject=${point%%:*}:error=EIO:when=${point##*:}" "$FALCON" "${ARGS[@]}" \
            >/dev/null 2>stderr.txt || rc=$?
        now=$(fp out.npy state.npy ck)
        if [ $rc -eq 2 ] && [ "$now" = "$OLD" ] && [ -z "$(temps)" ]; then
            ok "4. EIO at ${point%%:*} #${point##*:}: status 2, all old -> $(cat stderr.txt)"
        else bad "4. EIO at ${point%%:*} #${point##*:}" "status $rc $(cat stderr.txt); left: $(temps); $(diff <(echo "$OLD") <(echo "$now") | tr '\n' ' ')"; fi
    done
    # 7. the other terminating signals, during the run.
    for sig in HUP USR1 USR2 PIPE ALRM XCPU VTALRM; do
        restore
        run_traced pid.txt -e "inject=pwrite64:delay_enter=1500000:when=1" -- "${ARGS[@]}"
        sleep 0.7
        kill -$sig "$(cat pid.txt)" 2>/dev/null || true
        { wait $TRACED; } 2>/dev/null || true
        whole "7. SIG$sig during the run"
    done
fi
# 7. a file-size limit (SIGXFSZ): an error message and status 2, not a silent death.
make_set "l_" 0 4096 $N $M
old_files
KEEP="out.npy state.npy ck"
run_args q=l_q.npy k=l_k.npy v=l_v.npy beta=l_beta.npy alpha=l_alpha.npy --state-out state.npy --checkpoint-out ck
before=$(fp $KEEP)
rc=0; (ulimit -f 16; exec "$FALCON" "${ARGS[@]}") >/dev/null 2>stderr.txt || rc=$?
if [ $rc -eq 2 ] && grep -qF "File too large" stderr.txt && [ "$before" = "$(fp $KEEP)" ] && [ -z "$(temps)" ]; then
    ok "7. over the file-size limit (ulimit -f) -> $(cat stderr.txt)"
else bad "7. over the file-size limit" "status $rc: $(cat stderr.txt); left: $(temps)"; fi
rm -f l_*.npy

# ---- 8. two runs saving one checkpoint: the result is one run's, never a mixture ----
if [ -z "$STRACE" ]; then
    SKIP "8. two runs saving one checkpoint" "no strace"
else
    rm -rf ckA ckB ck outA.npy outB.npy
    runA=(run --variant falcon3 --window 3 --form recurrent --precision fp64 --q q.npy --k k.npy --v v.npy
          --beta beta.npy --alpha alpha.npy)
    runB=(run --variant falcon3 --window 3 --form recurrent --precision fp64 --q o_q.npy --k o_k.npy --v o_v.npy
          --beta o_beta.npy --alpha o_alpha.npy)
    "$FALCON" "${runA[@]}" --out refA.npy --checkpoint-out ckA
    "$FALCON" "${runB[@]}" --out refB.npy --checkpoint-out ckB
    cp -a ckB ck
    # A is held in the middle of its save (a rename of a checkpoint file, or
    # the swap of the directory); B runs whole meanwhile.
    run_traced pidA.txt -e inject=rename:delay_enter=3000000:when=4 -e inject=renameat2:delay_enter=3000000:when=1 \
        -- "${runA[@]}" --out outA.npy --checkpoint-out ck
    i=0; while [ ! -e outA.npy ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    sleep 0.5
    "$FALCON" "${runB[@]}" --out outB.npy --checkpoint-out ck 2>stderrB.txt || bad "8. run B" "$(cat stderrB.txt)"
    wait $TRACED || true
    if diff -r ck ckA >/dev/null || diff -r ck ckB >/dev/null; then
        ok "8. the checkpoint is run $(diff -r ck ckA >/dev/null && echo A || echo B)'s, whole"
    else bad "8. two runs saving one checkpoint" "a mixture: $(diff -rq ck ckA | tr '\n' ' ')"; fi
    [ -z "$(temps)" ] || bad "8. temporaries" "$(temps)"
fi

# ---- 8b. two runs writing the same --out and --state-out: one run's pair, never a mixture ----
if [ -z "$STRACE" ]; then
    SKIP "8b. two runs writing the same files" "no strace"
else
    rm -f o8.npy s8.npy
    "$FALCON" "${runA[@]}" --out refA_o.npy --state-out refA_s.npy
    "$FALCON" "${runB[@]}" --out refB_o.npy --state-out refB_s.npy
    # A is held right after its first rename (--out in place, --state-out
    # not yet); B runs whole meanwhile, and must wait for A's commit.
    run_traced pidA.txt -e inject=rename:delay_exit=2000000:when=1 -- "${runA[@]}" --out o8.npy --state-out s8.npy
    i=0; while [ ! -e o8.npy ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    "$FALCON" "${runB[@]}" --out o8.npy --state-out s8.npy 2>stderrB.txt || bad "8b. run B" "$(cat stderrB.txt)"
    wait $TRACED || true
    if { cmp -s o8.npy refA_o.npy && cmp -s s8.npy refA_s.npy; } || { cmp -s o8.npy refB_o.npy && cmp -s s8.npy refB_s.npy; }; then
        ok "8b. --out and --state-out are run $(cmp -s o8.npy refA_o.npy && echo A || echo B)'s, both"
    else bad "8b. two runs writing the same files" "a mixture: out $(cmp -s o8.npy refA_o.npy && echo A || echo B)'s, state $(cmp -s s8.npy refA_s.npy && echo A || echo B)'s"; fi
    [ -z "$(temps)" ] || bad "8b. temporaries" "$(temps)"
    rm -f o8.npy s8.npy refA_o.npy refA_s.npy refB_o.npy refB_s.npy
fi

# ---- 9. checkpoint values must fit the run's precision (fp32) ----
rm -rf ck9 && run_args out=o9.npy --checkpoint-out ck9 && "$FALCON" "${ARGS[@]}"
$G rand ck9/S.npy f8 "1,$M,$N" 1 --set 0=1e300
$G rand e_q.npy f8 "0,$N" 1; $G rand e_v.npy f8 "0,$M" 1; $G rand e_b.npy f8 0 1
KEEP="ck9"
run_args precision=fp32 q=e_q.npy k=e_q.npy v=e_v.npy beta=e_b.npy alpha=e_b.npy out=out9.npy --state-out state9.npy --checkpoint-in ck9
refused "9. a checkpoint value too large for fp32, T = 0" "checkpoint 'ck9': state S: element 0 (head 0) = 1e+300 does not fit in float32" "${ARGS[@]}"
[ ! -e state9.npy ] || bad "9. T = 0" "state9.npy written"
run_args precision=fp32 out=out9.npy --checkpoint-in ck9
refused "9. a checkpoint value too large for fp32, T > 0" "checkpoint 'ck9': state S: element 0 (head 0) = 1e+300 does not fit in float32" "${ARGS[@]}"
rm -rf ck9 o9.npy

# ---- 10. a checkpoint array's shape is checked before its data is read ----
# refused_ck10 NAME TEXT: the run from --checkpoint-in ck10 is refused with
# TEXT under a 512 MiB address-space limit, the manifest unchanged.
refused_ck10() {
    KEEP="ck10/falcon-checkpoint.txt" # (not S.npy: hashing 4 GiB of holes takes long)
    run_args out=out10.npy --checkpoint-in ck10
    if [ -z "${STREAM_NO_LIMIT:-}" ]; then ARGS=(--as=$((512 << 20)) "$FALCON" "${ARGS[@]}"); SAVED=$FALCON; FALCON=prlimit; fi
    refused "$1" "$2" "${ARGS[@]}"
    if [ -z "${STREAM_NO_LIMIT:-}" ]; then FALCON=$SAVED; fi
    rm -rf ck10 o10.npy
}
rm -rf ck10 && run_args out=o10.npy --checkpoint-out ck10 && "$FALCON" "${ARGS[@]}"
raw_npy ck10/S.npy 1 "{'descr': '<f8', 'fortran_order': False, 'shape': (536870912,), }"
truncate -s $(($(stat -c %s ck10/S.npy) + 536870912 * 8)) ck10/S.npy # sparse: 4 GiB claimed, nothing stored
refused_ck10 "10. a 4 GiB sparse S.npy against a 1x3x5 manifest (under 512 MiB)" \
    "checkpoint 'ck10/S.npy': shape (536870912,) but the manifest"
# A manifest of another shape, too large to allocate, is named as such
# before anything of its size is allocated.
rm -rf ck10 && run_args out=o10.npy --checkpoint-out ck10 && "$FALCON" "${ARGS[@]}"
printf 'format falcon-checkpoint 1\nheads 1\nn 16384\nm 16384\nwindow 4096\n' >ck10/falcon-checkpoint.txt
refused_ck10 "10. a manifest of n = m = 16384, W = 4096 against a 1x3x5 run (under 512 MiB)" \
    "the checkpoint has heads=1, n=16384, m=16384, window=4096 but the run has heads=1 (B*H), n=5, m=3"

# ---- 11. the chunk form's work memory is bounded whatever C, W and T are ----
if [ -z "${STREAM_NO_LIMIT:-}" ]; then
    make_set "c_" 0 4096 $N $M
    lim=(prlimit --as=$((1024 << 20)))
    run_args out=c_rec.npy variant=falcon3 --window 4096
    "$FALCON" "${ARGS[@]}"
    run_args out=c_chunk.npy variant=falcon3 form=chunk --window 4096
    rc=0; "${lim[@]}" "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
    if [ $rc -eq 0 ] && msg=$($G cmp c_chunk.npy c_rec.npy 1e-12); then
        ok "11. --form chunk --window 4096, T = 24, under 1 GiB ($msg)"
    else bad "11. --form chunk --window 4096" "status $rc: $(cat stderr.txt)"; fi
    run_args q=c_q.npy k=c_k.npy v=c_v.npy beta=c_beta.npy alpha=c_alpha.npy out=c_rec.npy variant=falcon3 --window 8
    "$FALCON" "${ARGS[@]}"
    run_args q=c_q.npy k=c_k.npy v=c_v.npy beta=c_beta.npy alpha=c_alpha.npy out=c_chunk.npy variant=falcon3 \
        form=chunk --window 8 --chunk 4096
    rc=0; "${lim[@]}" "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
    if [ $rc -eq 0 ] && msg=$($G cmp c_chunk.npy c_rec.npy 1e-12); then
        ok "11. --chunk 4096 --window 8, T = 4096, under 1 GiB ($msg)"
    else bad "11. --chunk 4096 --window 8" "status $rc: $(cat stderr.txt)"; fi
    rm -f c_*.npy
else SKIP "11. chunk memory" "no address-space limit (STREAM_NO_LIMIT)"; fi

# ---- 12. the tools' own edges ----
# expect2 NAME TEXT CMD...: status 2 and TEXT in stderr (within 60 s).
expect2() {
    local name=$1 want=$2 rc=0
    shift 2
    timeout 60 "$@" >stdout.txt 2>stderr.txt </dev/null || rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "$want" stderr.txt; then ok "$name -> $(head -c 300 stderr.txt)"
    else bad "$name" "status $rc, expected 2 with '$want': $(head -c 300 stderr.txt)"; fi
}
if nvidia-smi -L >/dev/null 2>&1; then SKIP "12. --backend cuda without a GPU" "a GPU is here"
else
    expect2 "12. falcon verify --backend cuda without a GPU" "--backend cuda: is not available here" \
        "$FALCON" verify --backend cuda
    expect2 "12. falcon stability --backend cuda without a GPU" "--backend cuda: is not available here" \
        "$FALCON" stability --backend cuda --out st_out
fi
expect2 "12. falcon verify --shape 100000000,16384,16384" "falcon: error: " \
    env ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1" "$FALCON" verify --shape 100000000,16384,16384
expect2 "12. falcon stability --out ''" "--out: the path is empty" "$FALCON" stability --out ""
: >plain_file
expect2 "12. falcon stability --out a regular file fails before the study" "plain_file: it exists and is not a directory" \
    "$FALCON" stability --out plain_file
if [ -z "${STREAM_NO_LIMIT:-}" ]; then
    expect2 "12. falcon compare /dev/zero is bounded (under 1 GiB)" "larger than 256 MiB" \
        prlimit --as=$((1024 << 20)) "$FALCON" compare /dev/zero A.json
fi
awk 'BEGIN { printf "{\"benchmarks\": [";
    for (i = 1; i <= 40000; i++)
        printf "%s{\"name\": \"c/%d\", \"run_type\": \"iteration\", \"tokens_per_second\": %d, \"cpu_time\": 1, \"time_unit\": \"s\"}", (i > 1 ? "," : ""), i, i;
    print "]}" }' >big.json
rc=0; prlimit --cpu=10 "$FALCON" compare big.json big.json --out big.dat >stdout.txt 2>stderr.txt || rc=$?
if [ $rc -eq 0 ] && grep -q 'over 40000 cases: 1.000' stdout.txt; then ok "12. compare of 40000 cases within 10 s of CPU"
else bad "12. compare of 40000 cases" "status $rc: $(head -c 300 stderr.txt)"; fi
rm -f big.json big.dat
# The study's reports are one set: a report that cannot be written (a
# directory in its place, a file-size limit, a symlink to a device) fails
# the command with an error line and leaves the earlier set byte-identical.
STUDY=(stability --out S --tmax 200 --tmpfr 100 --tmax-parallel 100 --n 4 --backend scalar)
rm -rf S && "$FALCON" "${STUDY[@]}" >/dev/null 2>&1
for how in dir fsize devlink streamdir curvedir; do
    before=$(fp S/stability.json S/fits.dat S/refcheck.dat S/thresholds.dat S/curves)
    case $how in
    dir) rm S/fits.dat && mkdir S/fits.dat ;;
    devlink) ln -sfn /dev/null S/refcheck.dat ;;
    # a stream's result or a curve's file that can never be written: found
    # before any stream runs (nothing on stdout), not after all have
    streamdir) rm S/streams/005.res && mkdir S/streams/005.res ;;
    curvedir) rm S/curves/fp32_falcon1_none_scalar_recurrent.dat && mkdir S/curves/fp32_falcon1_none_scalar_recurrent.dat ;;
    esac
    [ $how != fsize ] && before=$(fp S/stability.json S/fits.dat S/refcheck.dat S/thresholds.dat S/curves)
    rc=0
    # (a longer study than the set's: every report it would write differs)
    if [ $how = fsize ]; then (ulimit -f 8; "$FALCON" "${STUDY[@]}" --tmax 300) >stdout.txt 2>stderr.txt || rc=$?
    else "$FALCON" "${STUDY[@]}" --tmax 300 >stdout.txt 2>stderr.txt || rc=$?; fi
    after=$(fp S/stability.json S/fits.dat S/refcheck.dat S/thresholds.dat S/curves)
    if [ $rc -eq 2 ] && grep -q '^falcon: error: ' stderr.txt && [ "$before" = "$after" ] && [ -z "$(temps)" ] &&
       { [ "${how%dir}" = "$how" ] || [ $how = dir ] || [ ! -s stdout.txt ]; }; then
        ok "12. stability reports, $how: status 2, $(head -1 stderr.txt | cut -c1-90), the earlier set kept"
    else bad "12. stability reports, $how" "status $rc: $(head -2 stderr.txt) $(head -1 stdout.txt) $(diff <(echo "$before") <(echo "$after") | head -3) $(temps)"; fi
    rm -rf S/fits.dat S/refcheck.dat S/streams/005.res S/curves/fp32_falcon1_none_scalar_recurrent.dat
    "$FALCON" "${STUDY[@]}" >/dev/null 2>&1
done
rm -rf S
# A new set removes the curves of the last set that it does not write
# itself (they would be drawn with the new ones), and nothing else.
rm -rf S && "$FALCON" "${STUDY[@]}" >/dev/null 2>&1 && echo mine >S/curves/NOTES.txt
if "$FALCON" stability --out S --tmax 200 --tmpfr 100 --tmax-parallel 100 --n 4 --backend avx2 >/dev/null 2>&1; then
    if [ "$(ls S/curves | grep -c _scalar_)" = 0 ] && [ "$(ls S/curves | grep -c _avx2_)" -gt 0 ] && [ -f S/curves/NOTES.txt ]; then
        ok "12. stability reports: the last set's curves it does not write again are gone, a user's file stays"
    else bad "12. stale curves" "$(ls S/curves | head -5)"; fi
else SKIP "12. stale curves" "no avx2 backend here"; fi
rm -rf S
# A report path that can never be written fails before any computing, and
# a table never replaces the benchmark JSON it is made from.
mkdir -p L1/learning.json
rc=0; start=$SECONDS; "$FALCON" stability --learning --t0 64 --factor 4 --seeds 1 --n 4 --out L1 >stdout.txt 2>stderr.txt || rc=$?
if [ $rc -eq 2 ] && grep -q "learning.json': is a directory" stderr.txt && [ ! -s stdout.txt ]; then
    ok "12. stability --learning: a report path that is a directory fails before the runs"
else bad "12. learning report path" "status $rc: $(head -2 stderr.txt) $(head -2 stdout.txt)"; fi
rm -rf L1
STUDYBIN=$(dirname "$FALCON")/falcon-study
if [ -x "$STUDYBIN" ]; then
    mkdir -p BD && printf '{"benchmarks": []}\n' >BD/cases.dat && cp BD/cases.dat bd.keep
    rc=0; "$STUDYBIN" bench-dat BD/cases.dat --out BD >/dev/null 2>stderr.txt || rc=$?
    if [ $rc -eq 2 ] && grep -q "is also the input" stderr.txt && cmp -s bd.keep BD/cases.dat; then
        ok "12. bench-dat: its input as one of its tables is refused, the input kept"
    else bad "12. bench-dat input alias" "status $rc: $(cat stderr.txt)"; fi
    rm -rf BD bd.keep
else SKIP "12. bench-dat" "no falcon-study beside falcon"; fi
# A signal during `falcon verify --json` removes the report's temporary.
"$FALCON" verify --profile full --json rep.json >/dev/null 2>&1 &
pid=$!
for _ in $(seq 50); do ls rep.json.tmp-* >/dev/null 2>&1 && break; sleep 0.1; done
kill -TERM $pid; rc=0; wait $pid || rc=$?
if [ $rc -eq 143 ] && [ ! -e rep.json ] && ! ls rep.json.tmp-* >/dev/null 2>&1; then ok "12. SIGTERM during verify --json: nothing left"
else bad "12. SIGTERM during verify --json" "status $rc, left: $(ls rep.json* 2>/dev/null | tr '\n' ' ')"; rm -f rep.json*; fi
run_args --eps 1e-320
rc=0; "$FALCON" "${ARGS[@]}" 2>stderr.txt || rc=$?
if [ $rc -eq 0 ]; then ok "12. --eps 1e-320 is > 0 in fp64: accepted"; else bad "12. --eps 1e-320 in fp64" "$(cat stderr.txt)"; fi

test_end
