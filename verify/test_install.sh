#!/bin/bash
# `make install` and pkg-config, as a user of an installed falcon sees them:
#
#   verify/test_install.sh BUILD_DIR      (MAKE: the make to call; default make)
#
# - make install PREFIX=/opt/x DESTDIR=D puts every file under D/opt/x, and
#   falcon.pc there names /opt/x (not D);
# - make install PREFIX=P (P a temporary directory): bin/ (the tools),
#   lib/libfalcon.so.<major> (soname) with its links, lib/libfalcon.a,
#   include/falcon.h, lib/pkgconfig/falcon.pc;
# - the README's example program (the ```c block after its "example.c"
#   marker) compiled against P with `pkg-config --cflags --libs falcon-ref`
#   (shared) and with `-static` and `pkg-config --static ...` (static); both
#   run and print the same error, the shared one through P's libfalcon.so;
# - the README's link lines (the ```sh block after its "link lines:" marker),
#   each as written (app.c being the example), against the DESTDIR staging
#   directory (PKG_CONFIG_SYSROOT_DIR): they compile and the programs run,
#   the shared ones loading the staged libfalcon.so; the rpath line also
#   against the real prefix, run without LD_LIBRARY_PATH;
# - make uninstall with the same PREFIX and DESTDIR leaves the staging tree
#   without the files install put there, and with every other file;
# - make help lists the main targets;
# - the installed falcon runs.
# (The README's quick start is verify/test_readme.sh's.)
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
BUILD=$(cd "${1:?usage: verify/test_install.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MAKE=${MAKE:-make}
. "$(dirname "$0")/lib.sh"
test_workdir
falcon_version
# block MARKER LANG: the fenced block of README.md after the line holding MARKER.
block() {
    awk -v marker="$1" -v fence='```'"$2" '
        index($0, marker) { armed = 1; next }
        armed && $0 == fence { inside = 1; next }
        inside && $0 == "```" { exit }
        inside { print }' "$ROOT/README.md"
}

# ---- DESTDIR staging ----
if $MAKE -s -C "$ROOT" install BUILD="$BUILD" PREFIX=/opt/falcon-test DESTDIR="$WORK/stage" > stage.log 2>&1 \
   || { cat stage.log; false; }; then
    stray=$(cd "$WORK/stage" && find . -mindepth 1 -maxdepth 2 ! -path ./opt ! -path ./opt/falcon-test)
    pcprefix=$(sed -n 's/^prefix=//p' "$WORK/stage/opt/falcon-test/lib/pkgconfig/falcon.pc")
    if [ -z "$stray" ] && [ "$pcprefix" = /opt/falcon-test ]; then
        ok "DESTDIR: files under DESTDIR/PREFIX, falcon.pc names PREFIX"
    else
        bad destdir "outside the prefix: '$stray'; prefix= '$pcprefix'"
    fi
else
    bad destdir "make install DESTDIR=... failed"
fi

# ---- the README's link lines, as written, against the staging dir ----
S=$WORK/stage/opt/falcon-test
block 'example.c:' c > example.c
block 'link lines:' sh | grep '^cc ' > link-lines.txt || true
# link_line N LINE: compile the README's line N (app.c: the example) into ex-link-N.
link_line() {
    local cmd=${2//app.c/example.c -o ex-link-$1}
    eval "$cmd" > "cc-link-$1.log" 2>&1
}
if [ "$(wc -l < link-lines.txt)" -lt 2 ] || ! grep -q -- '-static' link-lines.txt; then
    bad link-lines "no link lines (a shared and a -static one) after a 'link lines:' marker in README.md"
elif [ ! -f "$S/lib/pkgconfig/falcon.pc" ]; then
    bad link-lines "no staged falcon.pc"
else
    i=0
    while IFS= read -r line; do
        i=$((i + 1))
        if ! PKG_CONFIG_PATH="$S/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$WORK/stage" link_line "$i" "$line"; then
            bad "link line $i" "'$line': $(grep -v 'warning: Using .dl' "cc-link-$i.log" | head -5 | tr '\n' ' ')"
            continue
        fi
        lib=$(LD_LIBRARY_PATH="$S/lib" ldd "./ex-link-$i" 2>/dev/null | awk '$1 == "libfalcon.so.'"$major"'" { print $3 }')
        if [[ $line == *-static* ]]; then [ -z "$lib" ] || { bad "link line $i" "the static program loads $lib"; continue; }
        elif [ -z "$lib" ] || ! [ "$lib" -ef "$S/lib/libfalcon.so.$version" ]; then
            bad "link line $i" "libfalcon.so.$major resolved to '$lib', not the staged one"; continue
        fi
        if LD_LIBRARY_PATH="$S/lib" "./ex-link-$i" > "link-$i.out" 2>&1 && grep -q 'error [0-9.]* u' "link-$i.out"; then
            ok "README link line $i as written, staged: $(cat "link-$i.out")"
        else
            bad "link line $i" "the program failed: $(tr '\n' ' ' < "link-$i.out")"
        fi
    done < link-lines.txt
fi

# ---- make uninstall: exactly what install put there ----
if [ -d "$S/lib" ] && [ -d "$S/bin" ]; then
    touch "$S/lib/libother.so.1" "$S/bin/other-tool"
    if $MAKE -s -C "$ROOT" uninstall BUILD="$BUILD" PREFIX=/opt/falcon-test DESTDIR="$WORK/stage" > uninstall.log 2>&1; then
        left=$(cd "$WORK/stage" && find . ! -type d | sort | tr '\n' ' ')
        if [ "$left" = "./opt/falcon-test/bin/other-tool ./opt/falcon-test/lib/libother.so.1 " ]; then
            ok "make uninstall (same PREFIX, DESTDIR) removes every installed file and nothing else"
        else
            bad uninstall "files left (only bin/other-tool and lib/libother.so.1 should be): $left"
        fi
    else
        bad uninstall "$(tail -5 uninstall.log | tr '\n' ' ')"
    fi
fi

# ---- make help: one line per main target ----
if $MAKE -s -C "$ROOT" help > help.txt 2>&1; then
    missing=
    for t in all test check report install uninstall bench mutants sanitize fuzz clean help; do
        grep -qE "^make (\[$t\]|$t) " help.txt || missing="$missing $t"
    done
    [ -z "$missing" ] && ok "make help lists the main targets ($(wc -l < help.txt) lines)" \
        || bad help "make help lacks:$missing"
else
    bad help "$(tail -3 help.txt | tr '\n' ' ')"
fi

# ---- install into a temporary prefix ----
P=$WORK/prefix
if ! $MAKE -s -C "$ROOT" install BUILD="$BUILD" PREFIX="$P" > install.log 2>&1; then
    bad install "$(tail -5 install.log | tr '\n' ' ')"
    test_end
    exit 1
fi
missing=
for f in bin/falcon bin/falcon-study lib/libfalcon.a "lib/libfalcon.so.$version" \
         include/falcon.h include/falcon_io.h include/falcon_advanced.h lib/libfalcon-ref.so lib/pkgconfig/falcon.pc; do
    [ -f "$P/$f" ] || missing="$missing $f"
done
[ "$(readlink "$P/lib/libfalcon.so.$major")" = "libfalcon.so.$version" ] || missing="$missing lib/libfalcon.so.$major"
[ "$(readlink "$P/lib/libfalcon.so")" = "libfalcon.so.$major" ] || missing="$missing lib/libfalcon.so"
[ -z "$missing" ] && ok "installed: bin, lib (.so.$version, .so.$major, .so, .a), include, pkgconfig" \
    || bad files "missing:$missing"

"$P/bin/falcon" --version | grep -qx "falcon $version" && ok "installed falcon --version" \
    || bad version "$("$P/bin/falcon" --version 2>&1)"

export PKG_CONFIG_PATH="$P/lib/pkgconfig"
pkgv=$(pkg-config --modversion falcon 2>&1) || true
[ "$pkgv" = "$version" ] && ok "pkg-config --modversion falcon = $pkgv" || bad modversion "$pkgv"

# ---- the README's example, shared and static ----
block 'example.c:' c > example.c
if [ "$(wc -l < example.c)" -lt 10 ]; then
    bad example "no example.c block found in README.md"
else
    # shellcheck disable=SC2046
    if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -o ex-shared example.c $(pkg-config --cflags --libs falcon-ref) -lm \
        2> cc-shared.log; then
        lib=$(LD_LIBRARY_PATH="$P/lib" ldd ./ex-shared | awk '$1 == "libfalcon.so.'"$major"'" { print $3 }')
        if [ -n "$lib" ] && [ "$lib" -ef "$P/lib/libfalcon.so.$version" ]; then
            ok "shared: linked with pkg-config --libs, loads $P/lib/libfalcon.so.$major"
        else
            bad shared-ldd "libfalcon.so.$major resolved to '$lib'"
        fi
        if LD_LIBRARY_PATH="$P/lib" ./ex-shared > shared.out 2>&1 && grep -q 'error [0-9.]* u' shared.out; then
            ok "shared: runs: $(cat shared.out)"
        else
            bad shared-run "$(tr '\n' ' ' < shared.out)"
        fi
    else
        bad shared-link "$(head -5 cc-shared.log | tr '\n' ' ')"
    fi
    # The dlopen warnings of the static CUDA runtime are expected: kept in the log.
    # shellcheck disable=SC2046
    if ${CC:-cc} -static -std=c11 -Wall -Wextra -Werror -o ex-static example.c \
        $(pkg-config --static --cflags --libs falcon-ref) 2> cc-static.log; then
        if ldd ./ex-static 2>&1 | grep -q libfalcon; then
            bad static-ldd "the static program still needs libfalcon.so"
        else
            ok "static: linked with -static and pkg-config --static --libs"
        fi
        if ./ex-static > static.out 2>&1 && grep -q 'error [0-9.]* u' static.out; then
            if cmp -s shared.out static.out; then
                ok "static: runs, same output as shared: $(cat static.out)"
            else
                bad static-run "differs from the shared run: '$(cat static.out)' vs '$(cat shared.out)'"
            fi
        else
            bad static-run "$(tr '\n' ' ' < static.out)"
        fi
    else
        bad static-link "$(grep -v 'warning: Using .dl' cc-static.log | head -5 | tr '\n' ' ')"
    fi
fi

# ---- the README's rpath line against the real prefix: runs without LD_LIBRARY_PATH ----
rline=$(grep -- '-rpath' link-lines.txt | head -1)
if [ -z "$rline" ]; then
    bad rpath "no link line with -rpath in README.md"
elif link_line rpath "$rline"; then
    lib=$(env -u LD_LIBRARY_PATH ldd ./ex-link-rpath | awk '$1 == "libfalcon.so.'"$major"'" { print $3 }')
    if [ -n "$lib" ] && [ "$lib" -ef "$P/lib/libfalcon.so.$version" ] && env -u LD_LIBRARY_PATH ./ex-link-rpath > rpath.out 2>&1 \
       && grep -q 'error [0-9.]* u' rpath.out; then
        ok "README rpath line: runs from $P without LD_LIBRARY_PATH"
    else
        bad rpath "libfalcon.so.$major resolved to '$lib'; $(tr '\n' ' ' < rpath.out 2>/dev/null)"
    fi
else
    bad rpath "$(head -5 cc-link-rpath.log | tr '\n' ' ')"
fi

test_end
