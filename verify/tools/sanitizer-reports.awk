# The sanitizer findings of a log (make sanitize's gate run): prints each
# one's first line with its line number and exits 1 if there is any.
#
#   awk -f verify/tools/sanitizer-reports.awk LOG
#
# Findings: every AddressSanitizer or UndefinedBehaviorSanitizer report
# ("ERROR: AddressSanitizer", "runtime error:"), and every leak of a
# LeakSanitizer report but one whose stack holds only the allocator's
# interceptor and Criterion's own library: Criterion's runner (the parent
# process, after every test has passed) leaks one 48-byte calloc of its own
# when two timed tests end together under --jobs=2; a leak with a frame of
# this project (a test body runs under Criterion's frames) still counts.
function flush_leak() {
    if (in_leak && !harness) { print leak_line; found = 1 }
    in_leak = 0
}
/ERROR: AddressSanitizer|runtime error:|SUMMARY: UndefinedBehaviorSanitizer|LeakSanitizer has encountered/ { flush_leak(); print NR ": " $0; found = 1; next }
/^(Direct|Indirect) leak of / { flush_leak(); in_leak = 1; harness = 1; leak_line = NR ": " $0; next }
in_leak && /^ *#[0-9]+ / { if ($0 !~ /asan_malloc_linux|libcriterion\.so/) harness = 0; next }
in_leak && /^ *$/ { flush_leak(); next }
END { flush_leak(); exit found }
