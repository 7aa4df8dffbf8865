#!/bin/bash
# The grader must never pass a wrong kernel: every wrong twin of
# examples/numpy_falcon.py (examples/falcon_twins.py) must fail `falcon
# check` on the quick case set, in every layout that can express it.
#
#   verify/test_twins.sh build/falcon [test_twins.py options: --twins a,b --layouts fla]
#
# verify/test_twins.py does the work (its docstring has the details): the
# quick set exported in the falcon, fla and ggml layouts; the correct example
# passing in float64, float32 and float16 (fp64, fp32, fp16 units); then one
# line per twin x layout, "FAIL as it should (k of N cases)" or "PASSES: no
# case exercises <feature>", the latter a failed test. Ends with
# "N passed, M failed"; exits non-zero if any failed.
# Environment: PYTHON (default /usr/bin/python3; it needs numpy). The
# scratch directory is on /dev/shm when there is one (thousands of small
# result files: a loaded disk made the run five times slower), else in TMPDIR.
set -eu
FALCON=${1:?usage: verify/test_twins.sh path/to/falcon [options]}
shift
FALCON=$(cd "$(dirname "$FALCON")" && pwd)/$(basename "$FALCON")
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
if [ -d /dev/shm ] && [ -w /dev/shm ]; then WORK=$(mktemp -d -p /dev/shm); else WORK=$(mktemp -d); fi
trap 'rm -rf "$WORK"' EXIT
export PYTHONDONTWRITEBYTECODE=1   # leave nothing in the source tree
if ! "$PYTHON" -c 'import numpy' 2>/dev/null; then
    echo "FAIL python: $PYTHON cannot import numpy (set PYTHON to an interpreter that has it)"
    echo "0 passed, 1 failed"
    exit 1
fi
"$PYTHON" "$HERE/test_twins.py" "$FALCON" "$WORK" "$@"
