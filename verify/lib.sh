# Shared by the shell tests (sourced): an absolute path to the falcon binary,
# a scratch directory removed at exit, the npygen tool built there, the
# pass/fail counters and the closing line. Usage, after `set -eu`:
#   . "$(dirname "$0")/lib.sh"; test_begin "$1" "usage text"
#   ... ok NAME / bad NAME WHY ...
#   test_end
# A test of the build directory rather than of the falcon binary
# (test_shlib.sh, test_install.sh) calls test_workdir instead of test_begin.
test_workdir() { # HERE: verify/; WORK: the scratch directory, made current; the counters
    HERE=$(cd "$(dirname "$0")" && pwd)
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    cd "$WORK"
    passed=0
    failed=0
}

test_begin() {
    FALCON=${1:?usage: $2}
    FALCON=$(cd "$(dirname "$FALCON")" && pwd)/$(basename "$FALCON")
    test_workdir
    ${CC:-cc} -std=c11 -O2 -o npygen "$HERE/tools/npygen.c" -lm
    G=./npygen
}

# version and major: the header's FALCON_VERSION and its first number.
falcon_version() {
    version=$(sed -n 's/^#define FALCON_VERSION "\(.*\)"/\1/p' "$HERE/../include/falcon.h")
    major=${version%%.*}
}

ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1: $2"; }

# Outputs are named out*, state*, ck*; none may survive a failed run, nor
# may a temporary file of an atomic write.
leftovers() { ls -d out* state* ck* ./*.tmp-* 2>/dev/null || true; }

# ARGS = `falcon run` on the single-sequence inputs q.npy k.npy v.npy
# beta.npy alpha.npy, fp64, into out.npy; SLOT=VALUE arguments first replace
# an input, the output, the variant, form or precision; the rest is appended.
run_args() {
    local q=q.npy k=k.npy v=v.npy beta=beta.npy alpha=alpha.npy out=out.npy
    local variant=falcon1 form=recurrent precision=fp64
    while [ $# -gt 0 ] && [[ $1 == [a-z]*=* ]]; do
        case ${1%%=*} in
        q) q=${1#*=} ;; k) k=${1#*=} ;; v) v=${1#*=} ;; beta) beta=${1#*=} ;; alpha) alpha=${1#*=} ;;
        out) out=${1#*=} ;; variant) variant=${1#*=} ;; form) form=${1#*=} ;; precision) precision=${1#*=} ;;
        *) echo "run_args: unknown slot $1" >&2; exit 2 ;;
        esac
        shift
    done
    ARGS=(run --variant "$variant" --form "$form" --precision "$precision" --q "$q" --k "$k" --v "$v"
          --beta "$beta" --alpha "$alpha" --out "$out" "$@")
}

# raw_npy FILE VERSION HEADER [DATA_BYTES]: a .npy file with this header text
# (padded as numpy pads it) and DATA_BYTES zero bytes of data.
raw_npy() {
    local file=$1 version=$2 header=$3 data=${4:-0} pre=10 len
    if [ "$version" -ne 1 ]; then pre=12; fi
    while [ $(((pre + ${#header} + 1) % 64)) -ne 0 ]; do header+=" "; done
    header+=$'\n'
    len=${#header}
    {
        printf '\x93NUMPY'
        printf "\\x$(printf %02x "$version")\\x00"
        printf "\\x$(printf %02x $((len & 255)))\\x$(printf %02x $((len >> 8 & 255)))"
        if [ "$pre" -eq 12 ]; then printf '\x00\x00'; fi
        printf '%s' "$header"
        head -c "$data" /dev/zero
    } >"$file"
}

test_end() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# ---- the grading tests (verify/test_check*.sh) ----
# check_begin: PY, a python3 with numpy (to drive the CLI and edit
# results), and RUN_CLI, the falcon CLI run as an outside implementation.
check_begin() {
    PY=${PYTHON:-/usr/bin/python3}
    RUN_CLI="$HERE/check_run_cli.py"
}

# check_set: the quick set exported into cs, its case count in ncase.
check_set() {
    "$FALCON" cases export cs --quiet
    ncase=$("$PY" -c "import json; print(json.load(open('cs/index.json'))['count'])")
}

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

