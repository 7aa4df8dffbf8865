# The shell tests of the CLI, the study and the tools, one target each, so
# that `make check` and `make sanitize` run them side by side with the gate
# (make -k -j$(SCRIPT_JOBS) --output-sync=target test-cli test-rules ...).
# Each script works in a scratch directory of its own (verify/lib.sh) and
# only reads the build, so they do not meet; -k runs every one even after a
# failure, and --output-sync prints each one's lines together when it ends.
# Three at once on two cores: the signal tests spend seconds waiting on the
# runs they hold (the times: docs/performance.md, "Measurements behind the
# tools").
#
# test-bench runs alone (make check): it compares the timings of one call.
# The targets build nothing: the callers build first (a build in the same
# directory beside a running test would replace files under it). The
# environment passes what a caller changes: ASAN_OPTIONS and UBSAN_OPTIONS,
# STREAM_NO_LIMIT, STUDY_TMAX (mk/sanitize.mk), and TEST_STUDY_MPI, the
# launcher test_study.sh runs (the MPI build, or "none:why").
SCRIPT_JOBS ?= 3
TEST_STUDY_MPI ?= $(if $(STUDY_MPI),$(STUDY_MPI),none)

# The tests of the falcon command: verify/test_<name>.sh BUILD/falcon.
FALCON_SCRIPT_TESTS := cli usage rules stream outputs python twins readme grad

.PHONY: $(FALCON_SCRIPT_TESTS:%=test-%) test-check test-plots test-bench test-study test-scaling test-report-plan \
        test-grad-study
$(FALCON_SCRIPT_TESTS:%=test-%): test-%:
	bash verify/test_$*.sh $(BUILD)/falcon
# The grading tests: four scripts, each on a set of its own, every one run
# even after a failure.
CHECK_SCRIPTS := verify/test_check.sh verify/test_check_results.sh verify/test_check_verdicts.sh \
                 verify/test_check_grad.sh
test-check:
	@rc=0; for t in $(CHECK_SCRIPTS); do echo "== $$t"; bash $$t $(BUILD)/falcon || rc=1; done; exit $$rc
test-plots:
	bash verify/test_plots.sh
test-bench:
	@if [ -n "$(BENCH_OBJ)" ]; then bash verify/test_bench.sh $(BUILD); \
	else echo "test_bench: skipped (no Google Benchmark, $(BENCH_HEADER))"; fi
test-study:
	bash study/test_study.sh $(BUILD) $(TEST_STUDY_MPI)
# The quick report's planned work against its budget (no report is run).
test-report-plan:
	bash verify/test_report_plan.sh $(BUILD)
# falcon stability --grad in miniature, and its stand-in check refusing.
test-grad-study:
	bash study/test_grad_study.sh $(BUILD)
test-scaling:
	$(BUILD)/falcon-scaling --rounds 1 --calls 1 --T 64 --heads 2 --n 8 | grep -q '^median: speed-up'
