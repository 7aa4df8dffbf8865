#!/usr/bin/env bash
# Seeded bugs: each verify/mutants/NAME.patch is applied alone to a scratch
# copy of the tree, the gate is rebuilt and run, and the mutant must make it
# fail. Prints which tests caught each one.
# Usage: verify/mutants.sh [--edits-only] [mutant-name ...]
# The copy is built once; each mutant then rebuilds only what its files
# reach and is undone (sources and build) before the next. The CUDA
# objects are left out (NVCC=/nonexistent): nothing here can run them, and
# nvcc would rebuild them for every mutant of the shared math.
# MUTANTS_FAIL_FAST=1 stops each gate run at its first failure (CI: the
# line names one catcher instead of all), and runs the test named in the
# patch's '# catcher: suite::test' line before the rest:
# a caught mutant then costs about a second of gate instead of the whole
# gate's run (docs/performance.md, "Mutants"). Where that test passes, the
# whole gate runs as before, and the line says the named test no longer
# catches it.
#
# A patch is a unified diff (`git diff` of the bug written into the source)
# after '# ' header lines: what the bug is, and '# catcher: suite::test'.
# It is applied with GNU patch at fuzz 2: a hunk is found at any offset,
# with its full context first (which places it among look-alike lines),
# and only where the source changed around it with the outer two of its
# three context lines ignored. A patch that does not apply so is tried
# again with all its outer context and white space ignored: a refactor
# that moves a line into a new function re-indents it and changes its
# neighbours, and the bug is still that line's. Either way the changed
# lines must be found, so a patch whose lines were rewritten fails
# instead of seeding some other bug; --edits-only names the patches that
# needed fuzz or the second try (their diffs are due a refresh). (git
# apply -C1, then -C0 --ignore-whitespace, would do as much; patch says
# for each hunk where it went and with how much fuzz, which that shows.)
set -u
LC_COLLATE=C # the mutants run in the order of their names
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$root/verify/mutants

# apply PATCH DIR: seeds PATCH into the tree at DIR, at fuzz 2
# (applied_as=exact, or fuzz where it took some), else ignoring its outer
# context and white space (applied_as=loose); 1 if neither applies (DIR
# untouched). patch's messages are left in $scratch/patch.log.
apply() {
    local opts=(-d "$2" -p1 --forward --batch --no-backup-if-mismatch --reject-file=- -i "$1")
    local log=$scratch/patch.log
    if patch "${opts[@]}" --fuzz=2 --dry-run >"$log" 2>&1; then
        applied_as=exact; if grep -q 'with fuzz' "$log"; then applied_as=fuzz; fi
        patch "${opts[@]}" --fuzz=2 >"$log" 2>&1
    elif patch "${opts[@]}" --fuzz=3 --ignore-whitespace --dry-run >"$log" 2>&1; then
        applied_as=loose
        patch "${opts[@]}" --fuzz=3 --ignore-whitespace >"$log" 2>&1
    else
        patch "${opts[@]}" --fuzz=2 --dry-run >"$log" 2>&1 # the first try's reasons
        return 1
    fi
}
# as_applied: how a patch not applied exactly went in, for the report.
as_applied() {
    case $applied_as in
        fuzz) echo "with fuzz" ;;
        loose) echo "with its outer context and white space ignored" ;;
    esac
}
# patch_files PATCH: the files PATCH changes, one a line.
patch_files() { sed -n 's|^+++ b/\([^\t]*\).*|\1|p' "$1"; }
# catcher_of PATCH: its '# catcher: suite::test' (empty if none).
catcher_of() { sed -n 's/^# catcher: *\([^ ]*\).*/\1/p' "$1" | head -1; }

# failed_tests OUTPUT: the suite::test names of the gate's [FAIL] lines in OUTPUT.
failed_tests() { printf '%s\n' "$1" | sed -n 's/.*\[FAIL\] \([^ :]*::[^: ]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# check_patch NAME: 0 if verify/mutants/NAME.patch names its catcher and
# changes its files in a copy of the sources; else says why, naming it.
check_patch() {
    local name=$1 p=$dir/$1.patch rel=verify/mutants/$1.patch f changed=0
    local files; files=$(patch_files "$p")
    if [ -z "$files" ]; then echo "mutant $name: $rel changes no file"; return 1; fi
    if [ -z "$(catcher_of "$p")" ]; then
        echo "mutant $name: $rel has no '# catcher: suite::test' line"; return 1
    fi
    local copy=$scratch/check/$name
    while read -r f; do
        mkdir -p "$copy/$(dirname "$f")"
        if [ -f "$root/$f" ]; then cp "$root/$f" "$copy/$f"; fi
    done <<<"$files"
    if ! apply "$p" "$copy"; then
        echo "mutant $name: $rel NO LONGER APPLIES (rewrite the bug and its diff):"
        sed 's/^/    /' "$scratch/patch.log"; rm -rf "$copy"; return 1
    fi
    while read -r f; do cmp -s "$root/$f" "$copy/$f" || changed=1; done <<<"$files"
    if [ $changed -eq 0 ]; then echo "mutant $name: $rel applies but changes nothing"; return 1; fi
    if [ "$applied_as" != exact ]; then
        echo "mutant $name: $rel applies only $(as_applied) (refresh its diff):"
        grep -i 'hunk' "$scratch/patch.log" | sed 's/^/    /'
    fi
    rm -rf "$copy"
}

# The mutants to run: those named, or every patch.
edits_only=0
if [ "${1:-}" = --edits-only ]; then edits_only=1; shift; fi
names=()
if [ $# -gt 0 ]; then names=("$@"); else
    for p in "$dir"/*.patch; do [ -e "$p" ] && names+=("$(basename "$p" .patch)"); done
fi
if [ ${#names[@]} -eq 0 ]; then echo "mutants: no patch in verify/mutants"; exit 1; fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Every patch must still apply: a mutant whose lines were rewritten would
# otherwise be found only after the copy is built and every mutant before
# it has run. Checked first, on the sources alone;
# `verify/mutants.sh --edits-only` stops here (make check runs it).
stale=0
for name in "${names[@]}"; do
    if [ ! -f "$dir/$name.patch" ]; then
        echo "mutant $name: no verify/mutants/$name.patch"; stale=$((stale + 1)); continue
    fi
    check_patch "$name" || stale=$((stale + 1))
done
if [ $stale -gt 0 ] || [ $edits_only -eq 1 ]; then
    if [ $stale -eq 0 ]; then echo "mutants: all ${#names[@]} patches apply"
    else echo "mutants: $stale of ${#names[@]} patches fail this check (named above)"; fi
    exit $((stale > 0))
fi
tree=$scratch/tree
# -O1, as the sanitizers' gate (mk/sanitize.mk): the sources mean the same at
# either level (ISO C: no contraction; no undefined behaviour, which the
# sanitizers watch for), and a mutant's rebuild is most of its time.
# Where the CPU runs AVX-512 the gate runs the AVX-512 tables natively, so the
# SIMDe-emulated copies of the same sources (which stand in for them on AVX2
# machines) are left out. The figures: docs/performance.md, "Mutants".
no_simde=
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then no_simde=SIMDE_HEADER=/nonexistent; fi
mk() { make -C "$tree" -s -j"$(nproc)" BUILD=build OPT=-O1 NVCC=/nonexistent $no_simde "$@"; }
mkdir -p "$tree"
(cd "$root" && tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - .) | tar -C "$tree" -xf -
if ! mk build/falcon-verify >"$scratch/build.log" 2>&1; then
    echo "mutants: the unmutated tree does not build"; tail -20 "$scratch/build.log"; exit 1
fi
# The unmutated build, put back after each mutant with the source's own
# time, so that the next mutant rebuilds only what its own file reaches
# (touching the restored source made every mutant rebuild its predecessor's
# objects too: about half of a mutant's time).
cp -a "$tree/build" "$scratch/build.clean"
# seed NAME: keeps the originals of the files its patch changes (with their
# times) under $scratch/original, then applies it to the copy.
seed() {
    local f
    rm -rf "$scratch/original"
    while read -r f; do
        mkdir -p "$scratch/original/$(dirname "$f")"
        if [ -f "$tree/$f" ]; then cp -p "$tree/$f" "$scratch/original/$f"; fi
    done < <(patch_files "$dir/$1.patch")
    apply "$dir/$1.patch" "$tree"
}
# undo NAME: the originals back with their times (a file the patch made removed).
undo() {
    local f
    while read -r f; do
        if [ -f "$scratch/original/$f" ]; then cp -p "$scratch/original/$f" "$tree/$f"; else rm -f "$tree/$f"; fi
    done < <(patch_files "$dir/$1.patch")
}
caught=0; missed=0
for name in "${names[@]}"; do
    catcher=$(catcher_of "$dir/$name.patch")
    # native AVX-512 code (not the SIMDe build) runs only where the CPU has it
    if [[ $name == scan-avx512-* ]] && ! grep -qw avx512f /proc/cpuinfo; then
        echo "mutant $name: skipped (no AVX-512 on this CPU)"; continue
    fi
    if ! seed "$name"; then # it applied to the sources: checked above
        undo "$name"; echo "mutant $name: does not apply to the copy"; cat "$scratch/patch.log"
        missed=$((missed + 1)); continue
    fi
    built=1; t0=$SECONDS
    mk build/falcon-verify >"$scratch/build.log" 2>&1 || built=0
    t1=$SECONDS
    failing=; note=
    if [ "$applied_as" != exact ]; then note=" (its patch applied $(as_applied))"; fi
    if [ $built -eq 1 ] && [ -n "${MUTANTS_FAIL_FAST:-}" ] && [ -n "$catcher" ]; then
        failing=$(failed_tests "$("$tree/build/falcon-verify" --fail-fast --filter="${catcher/::/\/}" 2>&1)")
        [ -n "$failing" ] || note="$note (its named catcher $catcher passed)"
    fi
    if [ $built -eq 1 ] && [ -z "$failing" ]; then
        failing=$(failed_tests "$("$tree/build/falcon-verify" --jobs="$(nproc)" ${MUTANTS_FAIL_FAST:+--fail-fast} 2>&1)")
    fi
    took="build $((t1 - t0)) s, gate $((SECONDS - t1)) s"
    # Undo it: the originals back with their times, and the unmutated build.
    undo "$name"
    rm -rf "$tree/build" && cp -a "$scratch/build.clean" "$tree/build"
    if [ $built -eq 0 ]; then
        echo "mutant $name: does not build"; tail -5 "$scratch/build.log"; missed=$((missed + 1)); continue
    fi
    if [ -n "$failing" ]; then
        echo "mutant $name: caught by $failing$note ($took)"; caught=$((caught + 1))
    else
        echo "mutant $name: NOT caught$note ($took)"; missed=$((missed + 1))
    fi
done
echo "$caught passed, $missed failed"
[ "$missed" -eq 0 ]
