#!/bin/bash
# The boundaries the project states, checked on the tree and the build:
#
#   verify/test_structure.sh BUILD_DIR
#
# - no source file (C, C++, CUDA, shell, Python, make) over 800 lines, and no
#   C/C++/CUDA function over 120 lines (verify/tools/function_lengths.py);
# - folders tied one way only: the library (src/, kernels/) includes nothing
#   of the gate, the tests or the reference, and kernels/ and grade/ include
#   nothing from src/; the kernels' objects call nothing of src/ (their
#   undefined falcon_* symbols are the public API or defined in kernels/);
# - the library's objects compile without -Iverify, -Igate or -Ireference;
# - no caller parses an error message: cli/, grade/, study/ and bench/ read
#   falcon_error_info, never strstr/strncmp over a message.
# (The exports against the headers: verify/test_shlib.sh.)
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
BUILD=$(cd "${1:?usage: verify/test_structure.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh"
test_workdir
cd "$ROOT"

# ---- lengths ----
long=$(git ls-files '*.c' '*.h' '*.cc' '*.cu' '*.sh' '*.py' '*.mk' Makefile | grep -v '^verify/golden-data\.c$' |
       while read -r f; do n=$(wc -l < "$f"); [ "$n" -le 800 ] || echo "$f:$n"; done)
[ -z "$long" ] && ok "no source file over 800 lines" || bad files "over 800 lines: $(echo $long)"
if out=$(python3 verify/tools/function_lengths.py -n 120 2>&1); then
    ok "no function over 120 lines"
else
    bad functions "$(echo "$out" | head -5 | tr '\n' ';')"
fi

# ---- includes: which folder may include which ----
inc=$(grep -rnE '#include "[^"]*(gate\.h|falcon_ref\.h|verify/|gate/|reference/|criterion)' src kernels || true)
[ -z "$inc" ] && ok "src/ and kernels/ include nothing of the gate, tests or reference" \
    || bad includes "$(echo "$inc" | head -3 | tr '\n' ';')"
inc=$(grep -rnE '#include "[^"]*src/' kernels grade util || true)
[ -z "$inc" ] && ok "kernels/, grade/ and util/ include nothing from src/" \
    || bad includes "$(echo "$inc" | head -3 | tr '\n' ';')"

# ---- the kernels' objects call nothing of src/ ----
public=$(for h in falcon.h falcon_io.h falcon_advanced.h; do ${CC:-cc} -fpreprocessed -dD -E -P "include/$h"; done |
         grep -oP '\bfalcon_\w+\s*\((?!\*)' | tr -d ' (' | sort -u)
objs=$(find "$BUILD/obj/kernels" -name '*.o' | sort)
if [ -z "$objs" ]; then
    bad kernels "no kernel objects under $BUILD/obj/kernels (build first)"
else
    defined=$(nm --defined-only $objs 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u)
    calls=$(nm -u $objs 2>/dev/null | awk '{ print $NF }' | grep '^falcon_' | sort -u |
            comm -23 - <(printf '%s\n' "$defined" "$public" | sort -u) | tr '\n' ' ')
    [ -z "$calls" ] && ok "kernels/ objects call only the public API and each other" \
        || bad kernels "kernels/ objects call into the library: $calls"
fi

# ---- the library compiles without the test and reference include paths ----
flags=$(make -s -n -B -C "$ROOT" BUILD="$WORK/b" "$WORK/b/obj/src/run.o" "$WORK/b/obj/kernels/framework/framework-f32.o" 2>/dev/null |
        grep -E ' -c (src|kernels)/' || true)
if [ -z "$flags" ]; then
    bad flags "make -n printed no compile line for src/run.c"
elif echo "$flags" | grep -qE -- '-I ?(verify|gate|reference)\b'; then
    bad flags "library objects compile with $(echo "$flags" | grep -oE -- '-I ?(verify|gate|reference)\b' | sort -u | tr '\n' ' ')"
else
    ok "library objects compile without -Iverify, -Igate, -Ireference"
fi

# ---- no caller parses an error message ----
parse=$(grep -rnE '(strstr|strncmp|strcmp|memcmp)\([^;]*\b(why|msg|message|falcon_last_error|err|error)\b' \
            cli grade study bench util --include='*.c' || true)
[ -z "$parse" ] && ok "no caller parses an error message" \
    || bad parse "$(echo "$parse" | head -3 | tr '\n' ';')"

test_end
