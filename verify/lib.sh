# Shared by the shell tests (sourced): an absolute path to the falcon binary,
# a scratch directory removed at exit, the npygen tool built there, the
# pass/fail counters and the closing line. Usage, after `set -eu`:
#   . "$(dirname "$0")/lib.sh"; test_begin "$1" "usage text"
#   ... ok NAME / bad NAME WHY ...
#   test_end
test_begin() {
    FALCON=${1:?usage: $2}
    FALCON=$(cd "$(dirname "$FALCON")" && pwd)/$(basename "$FALCON")
    HERE=$(cd "$(dirname "$0")" && pwd)
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    cd "$WORK"
    ${CC:-cc} -std=c11 -O2 -o npygen "$HERE/tools/npygen.c" -lm
    G=./npygen
    passed=0
    failed=0
}

ok() { passed=$((passed + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1: $2"; }

# Outputs are named out*, state*, ck*; none may survive a failed run, nor
# may a temporary file of an atomic write.
leftovers() { ls -d out* state* ck* ./*.tmp-* 2>/dev/null || true; }

test_end() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
