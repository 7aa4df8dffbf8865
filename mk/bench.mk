# Throughput benchmarks (bench/) and `falcon compare`.
#   make bench                 build $(BUILD)/falcon-bench, run the default sweep
#                              (about 5 min on 2 cores) into $(BENCH_OUT)
#   make bench BENCH_ARGS=...  more flags: --sweep=full, --simde,
#                              --benchmark_filter=REGEX, ... (falcon-bench --help)
#   make goals                 only the cases of the performance goals (a few
#                              minutes) and the peers, into $(GOALS_DIR), and
#                              their tables
#   make scaling               P threads against 1, next to what the host gives
#                              P processes (SCALING_ARGS: falcon-scaling --help)
#   make peers                 libfalcon against PyTorch chunk-form code and,
#                              after `make ggml-peer`, ggml's op, on the same
#                              inputs (bench/peers.py) into $(PEERS_OUT)
# Needs Google Benchmark (Debian libbenchmark-dev, `make deps`); without it
# only the compare objects are built. The yardstick next to the peak, the tuned
# BLAS on the chunk block's GEMM shapes (bench/blas.c), needs OpenBLAS
# (Debian libopenblas-dev, found with pkg-config); without it, or with
# OPENBLAS=0, the benchmark is built without it and says so in its context.

# `falcon compare` needs no Google Benchmark: the CLI links it (and the JSON
# reader, util/json.c, with every tool's $(UTIL_OBJ)).
CLI_EXTRA_OBJ := $(BUILD)/obj/bench/compare.o

BENCH_HEADER ?= /usr/include/benchmark/benchmark.h
BENCH_OUT    ?= report/bench.json
BENCH_REPS   ?= 3
# Short minimum time per repetition: the sweep covers more cases, and 3
# repetitions (medians) absorb a noisy machine better than longer single runs.
BENCH_MIN_TIME ?= 0.3
# Each case's repetitions spread at random among the other cases' (Google
# Benchmark's random interleaving), so that a slow spell of a shared host
# falls on many cases a little instead of on a few whole ones: the report
# compares cases with each other (decay regimes, chunk sizes, threads).
# BENCH_INTERLEAVE=false runs one case after another.
BENCH_INTERLEAVE ?= true
BENCH_ARGS   ?=
# make goals: its folder (bench.json, the converted bench/ and goals.md), and
# 5 repetitions a case (3 in `make bench`): a verdict rests on one run's
# medians, the decay goal on a ratio of two cases, which a shared host's slow
# spells move far more with 3 repetitions than with 5 (docs/performance.md,
# "Measurements behind the tools").
GOALS_DIR    ?= report/goals
GOALS_REPS   ?= 5
# The peers (bench/peers.py, `make peers` below) also run in `make goals`,
# into $(GOALS_DIR)/peers.json, where torch is installed; ggml's op among
# them once `make ggml-peer` has unpacked a prebuilt ggml (below).
PEERS_ARGS   ?=
PEERS_PYTHON ?= /usr/bin/python3
GGML_PEER_PKG ?= @node-llama-cpp/linux-x64@3.22.1
GGML_PEER_DIR ?= $(BUILD)/ggml-peer
PEERS_GGML = $(if $(wildcard $(GGML_PEER_DIR)/libggml-base.so),--ggml $(GGML_PEER_DIR))

# Build facts, as string macros: the benchmark report's context, and the
# build identity the study's stream results carry (mk/study.mk links
# buildinfo.o too, so it is built with or without Google Benchmark). The
# stamp changes only when they do, so buildinfo.o (and the links) are redone
# only then.
BENCH_CXXFLAGS := -std=c++17 -O2 -Wall -Wextra -Werror
# A tree with uncommitted changes is "-dirty." plus a hash of the changes
# (tracked files), so that two different edits of one revision do not name
# the same build.
bench_git_rev = $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)$(if \
                $(shell git status --porcelain --untracked-files=no 2>/dev/null | head -1),-dirty.$(shell \
                git diff HEAD --binary 2>/dev/null | sha1sum | cut -c1-8))
bench_clean = $(subst ',,$(subst ",,$(subst \,,$(1))))
bench_info = -DFB_GIT_REVISION='"$(call bench_clean,$(bench_git_rev))"' \
             -DFB_CC='"$(call bench_clean,$(CC))"' \
             -DFB_CFLAGS='"$(call bench_clean,$(CFLAGS))"' \
             -DFB_CXXFLAGS='"$(call bench_clean,$(BENCH_CXXFLAGS) $(SANITIZE))"'

$(BUILD)/obj/bench/buildinfo.stamp: bench-stamp-force
	@mkdir -p $(dir $@)
	@echo '$(subst ',,$(bench_info))' | cmp -s - $@ || echo '$(subst ',,$(bench_info))' > $@
.PHONY: bench-stamp-force
bench-stamp-force:

$(BUILD)/obj/bench/buildinfo.o: bench/buildinfo.c $(BUILD)/obj/bench/buildinfo.stamp
	$(CC) $(CFLAGS) $(bench_info) -c $< -o $@

.PHONY: bench bench-build goals
ifneq ($(wildcard $(BENCH_HEADER)),)
BENCH_OBJ := $(addprefix $(BUILD)/obj/bench/,cases.o phases.o input-cache.o context.o inputs.o probe.o flops.o buildinfo.o gbench-shim.o blas.o output.o ukernels.o backward.o)
# The decay entries take their regimes from the gate (gate_decay_alpha).
BENCH_GATE_OBJ := $(BUILD)/obj/gate/gate.o

$(BUILD)/obj/bench/gbench-shim.o: bench/gbench-shim.cc
	@mkdir -p $(dir $@)
	$(CXX) $(BENCH_CXXFLAGS) $(SANITIZE) -MMD -MP -c $< -o $@

# OpenBLAS where pkg-config knows it (its -I and -L name the threading
# flavour Debian installed; the benchmark sets it to one thread). The stamp
# holds the choice, so switching OPENBLAS rebuilds blas.o.
OPENBLAS ?= 1
ifeq ($(OPENBLAS),1)
BLAS_LIBS   := $(shell pkg-config --libs openblas 2>/dev/null)
endif
ifneq ($(BLAS_LIBS),)
BLAS_CFLAGS := -DFB_HAVE_OPENBLAS $(shell pkg-config --cflags openblas 2>/dev/null)
else
BLAS_CFLAGS :=
endif

$(BUILD)/obj/bench/blas.stamp: bench-stamp-force
	@mkdir -p $(dir $@)
	@echo '$(BLAS_CFLAGS) $(BLAS_LIBS)' | cmp -s - $@ || echo '$(BLAS_CFLAGS) $(BLAS_LIBS)' > $@

$(BUILD)/obj/bench/blas.o: bench/blas.c $(BUILD)/obj/bench/blas.stamp $(BUILD)/obj/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/falcon-bench: $(BENCH_OBJ) $(BENCH_GATE_OBJ) $(LIB_LINK)
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(BENCH_OBJ) $(BENCH_GATE_OBJ) $(LIB_LINK) $(BLAS_LIBS) $(LDLIBS) -lbenchmark -lpthread -lstdc++

bench-build: $(BUILD)/falcon-bench
BENCH_INSTALL := $(BUILD)/falcon-bench

# --out: BENCH_OUT checked first, a temporary beside it, replaced only by a
# run that measured something (bench/output.c). The protocol both targets share:
BENCH_PROTOCOL = --benchmark_min_time=$(BENCH_MIN_TIME) --benchmark_enable_random_interleaving=$(BENCH_INTERLEAVE) \
                 --benchmark_display_aggregates_only=true
bench: $(BUILD)/falcon-bench
	$(BUILD)/falcon-bench --out=$(BENCH_OUT) --benchmark_repetitions=$(BENCH_REPS) $(BENCH_PROTOCOL) $(BENCH_ARGS)

# The performance goals on this machine (docs/performance.md, "Performance goals"): their
# cases only (--sweep=goals), repetitions interleaved as in `make bench`, then
# the peers, then the report's goals, time, phase, chunk-size, decay and
# peers tables, printed and in $(GOALS_DIR)/goals.md.
goals: $(BUILD)/falcon-bench $(BUILD)/falcon-study $(BUILD)/libfalcon.so
	@mkdir -p $(GOALS_DIR)
	$(BUILD)/falcon-bench --sweep=goals --out=$(GOALS_DIR)/bench.json --benchmark_repetitions=$(GOALS_REPS) \
	  $(BENCH_PROTOCOL) $(BENCH_ARGS)
	$(BUILD)/falcon-study bench-dat $(GOALS_DIR)/bench.json --out $(GOALS_DIR)/bench
	@rc=0; FALCON_LIB=$(abspath $(BUILD))/libfalcon.so $(PEERS_PYTHON) bench/peers.py \
	  --json $(GOALS_DIR)/peers.json $(PEERS_GGML) $(PEERS_ARGS) || rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]
	PEERS_PYTHON=$(PEERS_PYTHON) sh verify/tools/report.sh --goals $(GOALS_DIR)
else
bench bench-build goals:
	@echo "make bench: Google Benchmark not found ($(BENCH_HEADER)); run 'make deps'" >&2; exit 1
endif

# Peers: libfalcon against chunk-form code run by PyTorch on the same inputs
# (bench/peers.py; needs torch, `make deps`), 1 and 2 threads, into
# $(PEERS_OUT) (PEERS_ARGS: bench/peers.py --help).
# Then the backward peer (bench/peers.py --backward: falcon_backward
# against torch's autograd, one head) into $(PEERS_BW_OUT), with
# PEERS_BW_ARGS.
PEERS_OUT  ?= report/peers.json
PEERS_BW_OUT ?= $(dir $(PEERS_OUT))peers-backward.json
.PHONY: peers ggml-peer
peers: $(BUILD)/libfalcon.so
	@mkdir -p $(dir $(PEERS_OUT))
	@rc=0; FALCON_LIB=$(abspath $(BUILD))/libfalcon.so $(PEERS_PYTHON) bench/peers.py --json $(PEERS_OUT) \
	  $(PEERS_GGML) $(PEERS_ARGS) || rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]
	@rc=0; FALCON_LIB=$(abspath $(BUILD))/libfalcon.so $(PEERS_PYTHON) bench/peers.py --backward \
	  --json $(PEERS_BW_OUT) $(PEERS_BW_ARGS) || rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]

# ggml's CPU op for the peers: the prebuilt ggml (libggml-base.so and the
# per-CPU libggml-cpu-*.so) that the npm package $(GGML_PEER_PKG) ships
# for x86-64 Linux, unpacked into $(GGML_PEER_DIR) (npm from the registry;
# the project itself never needs it). Unpacked beside it first, so that a
# failed fetch leaves an earlier copy as it was.
ggml-peer:
	@rm -rf $(GGML_PEER_DIR).tmp && mkdir -p $(GGML_PEER_DIR).tmp
	cd $(GGML_PEER_DIR).tmp && npm pack --silent $(GGML_PEER_PKG) >/dev/null && tar xzf ./*.tgz
	test -f $(GGML_PEER_DIR).tmp/package/bins/linux-x64/libggml-base.so
	rm -rf $(GGML_PEER_DIR) && mv $(GGML_PEER_DIR).tmp/package/bins/linux-x64 $(GGML_PEER_DIR)
	rm -rf $(GGML_PEER_DIR).tmp
	@echo "ggml for the peers in $(GGML_PEER_DIR): make peers / make goals measure it"

# Thread scaling next to the host's own ceiling (bench/scaling.c; plain C,
# no Google Benchmark): `make scaling SCALING_ARGS="--form chunk"`.
SCALING_ARGS ?=
$(BUILD)/falcon-scaling: $(BUILD)/obj/bench/scaling.o $(BUILD)/obj/bench/inputs.o $(BUILD)/libfalcon.a
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libfalcon.a $(LDLIBS)

.PHONY: scaling
scaling: $(BUILD)/falcon-scaling
	$(BUILD)/falcon-scaling $(SCALING_ARGS)

# One decode call (T = 1) against its step (bench/decode.c; plain C):
# `make decode DECODE_ARGS="--backend avx2"`.
DECODE_ARGS ?=
$(BUILD)/falcon-decode: $(BUILD)/obj/bench/decode.o $(BUILD)/obj/bench/inputs.o $(BUILD)/libfalcon.a
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libfalcon.a $(LDLIBS)

.PHONY: decode
decode: $(BUILD)/falcon-decode
	$(BUILD)/falcon-decode $(DECODE_ARGS)

-include $(CLI_EXTRA_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(BUILD)/obj/bench/scaling.d $(BUILD)/obj/bench/inputs.d \
         $(BUILD)/obj/bench/decode.d
