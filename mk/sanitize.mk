# Sanitizers: the library, the CLI and the gate built with AddressSanitizer
# and UndefinedBehaviorSanitizer (-O1, every finding fatal) into
# $(ASAN_BUILD)/, then run side by side (mk/scripts.mk):
#   the gate (falcon-verify) minus $(SANITIZE_SKIP): the 10^6-step decay test
#     takes most of the time under ASan and adds no code path the 3000-step
#     decay tests do not take;
#   verify/test_cli.sh, verify/test_rules.sh, verify/test_stream.sh,
#     verify/test_outputs.sh and verify/test_check*.sh on the sanitized CLI (the stream and output tests
#     without their address-space limits, which ASan's shadow memory cannot
#     live under);
#   the fuzzing corpora and regressions replayed through the sanitized harnesses;
#   study/test_study.sh on the sanitized falcon-study (shards and merge, kill
#   and resume; not the MPI launcher), T = 5000.
#
#   make sanitize                         the build, then the tests (times: docs/performance.md)
#   make sanitize SANITIZE_SKIP=          the whole gate (a few minutes more)
#   make sanitize SANITIZE_SKIP='a/x|b/*' other tests left out (Criterion globs)
#
# The CUDA objects are left out (NVCC=/nonexistent: src/stubs/cuda.c), as nvcc
# does not take the sanitizer flags and the CUDA runtime trips ASan.

ASAN_BUILD     ?= build-asan
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SANITIZE_SKIP  ?= decay/million_steps
# Leaks are errors too; a report stops the process with a non-zero status.
SANITIZE_ENV   := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1 \
                  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87

# The sanitized build's settings, for every make that uses $(ASAN_BUILD): a
# make that left one out (OPT) would see other flags in the stamp and build
# everything again, one file at a time.
ASAN_MAKE_VARS := BUILD=$(ASAN_BUILD) OPT=-O1 NVCC=/nonexistent SANITIZE="$(SANITIZE_FLAGS)"

.PHONY: sanitize sanitize-build
sanitize-build: deps
	$(MAKE) -j$(JOBS) $(ASAN_MAKE_VARS) \
	  all $(ASAN_BUILD)/falcon-verify $(ASAN_BUILD)/falcon-study fuzz-replay-build

# The gate and the shell tests side by side (mk/scripts.mk), with the
# sanitizers' options in the environment.
sanitize: sanitize-build
	$(SANITIZE_ENV) STREAM_NO_LIMIT=1 STUDY_TMAX=5000 TEST_STUDY_MPI="none:the sanitized build has no MPI launcher" \
	  $(MAKE) -k -j$(SCRIPT_JOBS) --output-sync=target --no-print-directory $(ASAN_MAKE_VARS) \
	  sanitize-gate test-cli test-rules test-stream test-outputs test-check test-study fuzz-replay test-grad
	@echo "sanitize: clean (ASan + UBSan)"

# The gate (run by sanitize, with its settings). Criterion reports a leak
# found when a test's process exits after it passed without failing the
# test: the log is searched for every sanitizer report
# (verify/tools/sanitizer-reports.awk, which leaves out the one leak of
# Criterion's own runner, whose stack holds no frame of ours); the
# sanitizers' exit code 86 with no finding in the log is that leak.
.PHONY: sanitize-gate
sanitize-gate:
	@echo "$(BUILD)/falcon-verify --jobs=$$(nproc) (log: $(BUILD)/gate.log)"; \
	$(BUILD)/falcon-verify --jobs=$$(nproc) \
	  $(if $(SANITIZE_SKIP),--filter='!($(SANITIZE_SKIP))') >$(BUILD)/gate.log 2>&1; status=$$?; \
	grep -E '^\[====\] Synthesis' $(BUILD)/gate.log; \
	if ! awk -f verify/tools/sanitizer-reports.awk $(BUILD)/gate.log; then \
	  echo "sanitize: the gate has sanitizer reports" >&2; exit 1; fi; \
	if [ $$status = 86 ]; then echo "sanitize: Criterion's runner leaked its own (not a finding)"; status=0; fi; \
	exit $$status
