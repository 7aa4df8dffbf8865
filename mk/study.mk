# The long-sequence stability study, the learning curves, the plots and the
# one-command report (study/, plots/, verify/tools/report.sh).
#   make stability [PROFILE=full]   $(BUILD)/falcon-study stability -> $(REPORT_DIR)/stability
#   make learning  [PROFILE=full]   learning curves                 -> $(REPORT_DIR)/learning
#   make stability-grad [PROFILE=full] the gradients' errors vs T      -> $(REPORT_DIR)/stability-grad
#   make plots                      every plot whose data exists     -> $(REPORT_DIR)/*.png, *.svg
#   make report-all [PROFILE=full] [COMPARE=OTHER.json]
#                                   gate + benchmark + study + plots + report.md: what
#                                   `make report` runs (full: T to 1e7; how long
#                                   each takes: docs/performance.md, "Measurements
#                                   behind the tools")
# COMPARE: a bench.json from another machine, drawn against this run's; by
# default the reference machine's result committed in bench/baselines/
# (COMPARE= leaves the comparison out). Several files (COMPARE="a.json
# b.json"): the N-machine table and plot of those and this run instead.
COMPARE ?= bench/baselines/amd-epyc-zen4-2vcpu.json
# The CLI links $(STUDY_OBJ) (with the gate's objects and util/, which it
# links anyway) for `falcon stability`, the study's one implementation;
# build/falcon-study is the study without the CLI: `falcon-study stability`
# is the same command (the same function, options and outputs), beside
# `falcon-study merge` and `falcon-study bench-dat` (the benchmark plots'
# data, plots/plot-all.sh).

PROFILE    ?= quick
REPORT_DIR ?= report

STUDY_SRC := study/stability.c study/stab-stream.c study/stab-resume.c study/stab-report.c study/learning.c study/stab-grad.c study/stab-grad-report.c study/ldref.c study/util.c study/benchdat.c
STUDY_OBJ := $(STUDY_SRC:%.c=$(BUILD)/obj/%.o)
# The build facts (mk/bench.mk): each stream result names the build that
# wrote it, and --resume and merge take no result of another build.
STUDY_OBJ += $(BUILD)/obj/bench/buildinfo.o
# The stability study runs the gate's cases and thresholds (gate/).
$(STUDY_SRC:%.c=$(BUILD)/obj/%.o): CFLAGS += $(GATE_INC)
# (GATE_OBJ is defined after this file is read: name what the study needs.)
STUDY_DEP_OBJ := $(BUILD)/obj/gate/gate.o $(BUILD)/obj/gate/gate-thresholds.o $(BUILD)/obj/gate/grad-gate.o $(UTIL_OBJ)

$(BUILD)/falcon-study: $(BUILD)/obj/study/study-main.o $(STUDY_OBJ) $(STUDY_DEP_OBJ) $(LIB_LINK)
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS)

# The MPI launcher (study/study-mpi.c), built where mpicc exists (Debian:
# libopenmpi-dev, openmpi-bin): mpirun -np P $(BUILD)/falcon-study-mpi
# stability ... mpicc compiles with $(CC) (OMPI_CC) and links the study's
# objects as they are.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
STUDY_MPI := $(BUILD)/falcon-study-mpi
$(BUILD)/obj/study/study-mpi.o: study/study-mpi.c $(BUILD)/obj/flags.stamp
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/falcon-study-mpi: $(BUILD)/obj/study/study-mpi.o $(STUDY_OBJ) $(STUDY_DEP_OBJ) $(LIB_LINK)
	OMPI_CC=$(CC) $(MPICC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $^ $(LDLIBS)
else
STUDY_MPI :=
endif

# The study's own tests (make check runs them): shards and merge, the MPI
# launcher (where it was built; else a line says it was skipped), and a
# study killed with SIGKILL then resumed, each compared with one
# uninterrupted process (study/test_study.sh).
.PHONY: study-check
study-check: $(BUILD)/falcon-study $(STUDY_MPI)
	$(MAKE) test-study

.PHONY: stability learning plots report-all deep stability-grad
stability: $(BUILD)/falcon-study
	$(BUILD)/falcon-study stability --profile $(PROFILE) --out $(REPORT_DIR)/stability

# The backward pass's errors against T (quick: T to 1e5, about 25 CPU
# seconds; full: 1e6, about 300), MPFR then the checked fp64 stand-in.
stability-grad: $(BUILD)/falcon-study
	$(BUILD)/falcon-study stability --grad --profile $(PROFILE) --out $(REPORT_DIR)/stability-grad

# The deep profile (3 streams to 10^8 tokens, fitted on T <= 10^6 and tested
# beyond) into $(REPORT_DIR)/deep, on DEEP_RANKS MPI ranks where the MPI
# launcher was built and mpirun exists, else one process with as many
# threads; `make plots` / `make report` then draw and tabulate it.
DEEP_RANKS ?= 2
deep: $(BUILD)/falcon-study $(STUDY_MPI)
	@if [ -n "$(STUDY_MPI)" ] && command -v mpirun >/dev/null; then \
	  root=$$([ "$$(id -u)" = 0 ] && echo --allow-run-as-root); \
	  set -x; mpirun --oversubscribe $$root -np $(DEEP_RANKS) $(STUDY_MPI) stability --profile deep --out $(REPORT_DIR)/deep; \
	else set -x; $(BUILD)/falcon-study stability --profile deep --threads $(DEEP_RANKS) --out $(REPORT_DIR)/deep; fi

learning: $(BUILD)/falcon-study
	$(BUILD)/falcon-study stability --learning --profile $(PROFILE) --out $(REPORT_DIR)/learning

plots: $(BUILD)/falcon-study
	FALCON=$(BUILD)/falcon COMPARE="$(COMPARE)" sh plots/plot-all.sh $(REPORT_DIR) $(BUILD)/falcon-study

# The benchmark step of the report: the default sweep. The quick profile
# takes 3 short repetitions per case (so that its figures are medians, as
# make bench's are, only of shorter runs), measures the side checks once a
# case (falcon-bench --checks-once), and the scalar backend's cases, half
# of the benchmark's timed calls, once (--scalar-reps=1: single samples,
# without a median); the full profile takes make
# bench's defaults. `falcon compare` prints each file's protocol and warns
# when they differ. Set REPORT_BENCH= to leave the benchmark out (a
# bench.json already in $(REPORT_DIR) is still drawn).
REPORT_BENCH_quick := BENCH_REPS=3 BENCH_MIN_TIME=0.05 BENCH_ARGS='--checks-once --scalar-reps=1 $(BENCH_ARGS)'
REPORT_BENCH_full  :=
REPORT_BENCH ?= bench BENCH_OUT=$(REPORT_DIR)/bench.json $(REPORT_BENCH_$(PROFILE))
# Then the peers (bench/peers.py, after the benchmark so that the report
# takes them as this run's; a skip where torch is missing); 3 rounds in the
# quick profile, and the backward peer at one thread only (its torch
# autograd calls take most of a second each). REPORT_PEERS= leaves them out.
REPORT_PEERS_quick := PEERS_ARGS=--repeats=3 PEERS_BW_ARGS='--repeats=3 --threads=1'
REPORT_PEERS_full  :=
REPORT_PEERS ?= peers PEERS_OUT=$(REPORT_DIR)/peers.json $(REPORT_PEERS_$(PROFILE))

# Every step runs even if an earlier one fails; each status and time goes to
# $(REPORT_DIR)/status for report.sh, which marks failed steps in report.md;
# the target fails if any step failed. Nothing of an earlier report is
# removed first: each step replaces its own outputs when it succeeds (the
# studies' report sets as a whole, each log through a temporary), so a
# step that fails or is stopped leaves the earlier ones, and files that are
# not the report's stay.
LOG_TO = sh -c 'log=$$1; shift; "$$@" > "$$log.tmp-$$$$"; rc=$$?; \
  if [ $$rc -eq 0 ]; then mv -f "$$log.tmp-$$$$" "$$log"; \
  else tail -n 5 "$$log.tmp-$$$$" >&2; rm -f "$$log.tmp-$$$$"; echo "($$log kept as it was)" >&2; fi; \
  exit $$rc' log-to
report-all: $(BUILD)/falcon $(BUILD)/falcon-study
	@mkdir -p $(REPORT_DIR)
	@rm -f $(REPORT_DIR)/status
	@start=$$(date +%s); \
	step() { name=$$1; shift; t0=$$(date +%s); echo "== $$name: $$*"; "$$@"; rc=$$?; \
	  echo "$$name $$rc $$(( $$(date +%s) - t0 ))" >> $(REPORT_DIR)/status; return 0; }; \
	step gate $(LOG_TO) $(REPORT_DIR)/verify.txt $(BUILD)/falcon verify --profile $(PROFILE); \
	$(if $(strip $(REPORT_BENCH)),step bench $(MAKE) --no-print-directory $(REPORT_BENCH), \
	  echo "bench - 0" >> $(REPORT_DIR)/status); \
	$(if $(strip $(REPORT_PEERS)),step peers $(MAKE) --no-print-directory $(REPORT_PEERS), \
	  echo "peers - 0" >> $(REPORT_DIR)/status); \
	step stability $(LOG_TO) $(REPORT_DIR)/stability.txt $(BUILD)/falcon-study stability --profile $(PROFILE) \
	  --out $(REPORT_DIR)/stability; \
	step stability-grad $(LOG_TO) $(REPORT_DIR)/stability-grad.txt $(BUILD)/falcon-study stability --grad \
	  --profile $(PROFILE) --out $(REPORT_DIR)/stability-grad; \
	step learning $(LOG_TO) $(REPORT_DIR)/learning.txt $(BUILD)/falcon-study stability --learning \
	  --profile $(PROFILE) --out $(REPORT_DIR)/learning; \
	step plots env FALCON=$(BUILD)/falcon COMPARE="$(COMPARE)" sh plots/plot-all.sh $(REPORT_DIR) $(BUILD)/falcon-study; \
	echo "total - $$(( $$(date +%s) - start ))" >> $(REPORT_DIR)/status; \
	sh verify/tools/report.sh $(REPORT_DIR) $$(awk '$$1 == "gate" { print $$2 }' $(REPORT_DIR)/status); \
	! awk '$$2 != "-" && $$2 != 0 { bad = 1 } END { exit !bad }' $(REPORT_DIR)/status

-include $(STUDY_OBJ:.o=.d) $(BUILD)/obj/study/study-main.d $(BUILD)/obj/study/study-mpi.d
