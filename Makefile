# libfalcon: kernels, MPFR reference, Criterion gate, CLI, benchmarks.
# `make` builds the library and the CLI; `make test` runs the gate.

CC      ?= cc
CXX     ?= c++
BUILD   ?= build
OPT     ?= -O2
# Parallel jobs of the builds that check, sanitize and fuzz start (their
# tests run one after another): every core by default, JOBS=1 for serial.
JOBS    ?= $(shell nproc 2>/dev/null || echo 1)
WARN    := -Wall -Wextra -Werror
# -fPIC everywhere: the library's objects go into libfalcon.so as well as
# libfalcon.a (one set of objects for both).
CFLAGS  += -std=c11 $(OPT) $(WARN) -fPIC -fopenmp -D_GNU_SOURCE -Iinclude $(SANITIZE)
LDLIBS  := -lmpfr -lgmp -lm
LDFLAGS += -fopenmp $(SANITIZE)
# Executables built with the sanitizers are linked without PIE: their
# instrumentation's static data takes hundreds of thousands of relative
# relocations, applied at every start, and `make sanitize` starts the CLI
# over a thousand times (the cost: docs/performance.md, "Measurements behind
# the tools"). Not for shared libraries (-no-pie makes an executable of them).
EXE_LDFLAGS ?= $(if $(SANITIZE),-no-pie)

LIB_SRC := $(filter-out %.inc.c,$(wildcard src/*.c)) \
           kernels/framework/framework-f32.c kernels/framework/framework-f64.c \
           kernels/framework/recurrent-f32.c kernels/framework/recurrent-f64.c kernels/framework/phase-clock.c \
           kernels/scalar/f32-scalar.c kernels/scalar/f64-scalar.c \
           util/paths.c util/signals.c util/files.c src/stubs/cuda.c
# util/paths.c, signals.c and files.c: plain POSIX helpers the library
# shares with the grading layer (which links them from libfalcon.a).
# src/stubs/ stands in for a backend the build leaves out (it reports it
# unavailable): cuda's unless mk/cuda.mk finds nvcc.
# The MPFR reference (reference/) is a library of its own, libfalcon-ref, so
# that libfalcon carries neither a reference nor MPFR: the programs that
# check against it (the gate, the CLI, the study, the benchmark, the
# fuzzers) link it ahead of libfalcon, with reference/attach-at-start.o,
# which attaches it as the mpfr backend (include/falcon_advanced.h).
# MPFR=0 builds no reference (kernels/cuda/device-check.sh on a GPU machine
# without libmpfr-dev: only libfalcon and cuda-check; the gate and the CLI
# need MPFR).
MPFR ?= 1
REF_SRC := $(filter-out reference/attach-at-start.c,$(wildcard reference/*.c))
ifeq ($(MPFR),0)
REF_SRC :=
LDLIBS  := -lm
endif
REF_OBJ := $(REF_SRC:%.c=$(BUILD)/obj/%.o)
# What every tool links, above the library and below the CLI (util/): the
# option scanner and error line of every command, and the JSON reader of
# benchmark files (`falcon compare`, `falcon-study bench-dat`). Set before
# the includes, which name it in their rules.
UTIL_SRC := util/opts.c util/json.c
UTIL_OBJ := $(UTIL_SRC:%.c=$(BUILD)/obj/%.o)
# Set before the includes: a rule in mk/*.mk never becomes the default goal.
.DEFAULT_GOAL := all
LIB     := $(BUILD)/libfalcon.a
REF_LIB := $(if $(REF_SRC),$(BUILD)/libfalcon-ref.a)
REF_SHLIB := $(if $(REF_SRC),$(BUILD)/libfalcon-ref.so)
# What a program linking the reference and libfalcon statically names.
LIB_LINK := $(if $(REF_SRC),$(BUILD)/obj/reference/attach-at-start.o $(REF_LIB)) $(LIB)
# libfalcon.so's own libraries: not MPFR's (mk/cuda.mk adds CUDA's to LDLIBS).
LIB_LDLIBS = $(filter-out -lmpfr -lgmp,$(LDLIBS))

# The shared library: libfalcon.so.$(FALCON_VERSION), soname
# libfalcon.so.<major>, and the libfalcon.so link for -lfalcon. The version is
# the header's FALCON_VERSION.
FALCON_VERSION := $(shell sed -n 's/^\#define FALCON_VERSION "\(.*\)"/\1/p' include/falcon.h)
SO_MAJOR := $(firstword $(subst ., ,$(FALCON_VERSION)))
SONAME   := libfalcon.so.$(SO_MAJOR)
SHLIB    := $(BUILD)/libfalcon.so.$(FALCON_VERSION)

# Optional parts (SIMD backends, CUDA, benchmarks) add to these from mk/*.mk,
# then each backend folder's build rules from kernels/<isa>/backend.mk.
EXTRA_LIB_OBJ :=
# What a program linking libfalcon.a needs besides MPFR and GMP (falcon.pc's
# Libs.private; mk/cuda.mk adds the CUDA runtime).
PC_LIBS_PRIVATE := -fopenmp -lm
-include $(sort $(wildcard mk/*.mk))
-include $(sort $(wildcard kernels/*/backend.mk))

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(EXTRA_LIB_OBJ)

CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

# The gate's engine (case table, reference runs, thresholds; gate/) is shared
# by the Criterion tests and `falcon verify`; the tests are verify/test-*.c.
GATE_SRC := gate/gate.c gate/gate-cases.c gate/gate-thresholds.c gate/gate-main.c gate/grad-gate.c gate/grad-cases.c
GATE_OBJ := $(GATE_SRC:%.c=$(BUILD)/obj/%.o)
# gate/ is on the include path of what runs the gate only (the engine, the
# grading layer, the CLI, the tests; mk/study.mk and mk/cuda.mk add their
# own): the library's objects cannot reach it, nor the reference (whose
# header the gate's includes).
REF_INC  := -Ireference
GATE_INC := -Igate $(REF_INC)
# The grading layer (`falcon cases export`, `falcon check`): above the gate's
# engine, beside the CLI.
GRADE_SRC := $(wildcard grade/*.c)
GRADE_OBJ := $(GRADE_SRC:%.c=$(BUILD)/obj/%.o)
GRADE_SHLIB := $(BUILD)/libfalcon-grade.so
TEST_SRC := $(wildcard verify/test-*.c) verify/golden-data.c verify/golden-grad-data.c
# bench/flops.c: the benchmark's count of a call, tested beside the kernels.
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/obj/%.o) $(GATE_OBJ) $(BUILD)/obj/bench/flops.o
$(GATE_OBJ) $(GRADE_OBJ) $(CLI_OBJ) $(TEST_SRC:%.c=$(BUILD)/obj/%.o): CFLAGS += $(GATE_INC)
$(REF_OBJ) $(BUILD)/obj/reference/attach-at-start.o: CFLAGS += $(REF_INC)

.PHONY: all lib cli test check report mutants clean deps install uninstall help golden golden-check
all: $(LIB) $(BUILD)/libfalcon.so $(REF_LIB) $(REF_SHLIB) $(BUILD)/falcon $(GRADE_SHLIB)

lib: $(LIB) $(BUILD)/libfalcon.so

# Objects are rebuilt when the global compile flags change (the stamp holds
# them), so a build made before a flag such as -fPIC was added is not linked
# into the shared library as it is.
FLAGS_STAMP_TEXT := $(CFLAGS) | $(NVCC) $(NVCCFLAGS)
$(BUILD)/obj/flags.stamp: flags-stamp-force
	@mkdir -p $(dir $@)
	@echo '$(subst ',,$(FLAGS_STAMP_TEXT))' | cmp -s - $@ || echo '$(subst ',,$(FLAGS_STAMP_TEXT))' > $@
.PHONY: flags-stamp-force
flags-stamp-force:
$(LIB_OBJ) $(REF_OBJ) $(GRADE_OBJ) $(GATE_OBJ) $(UTIL_OBJ): $(BUILD)/obj/flags.stamp

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(REF_LIB): $(REF_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Exported: the functions of the public headers, listed in mk/libfalcon.map
# (verify/test_shlib.sh compares the two); the static libraries linked in
# (the CUDA runtime) stay hidden. -z defs: every reference is resolved here
# (not with sanitizers, whose runtime clang leaves to the program).
$(SHLIB): $(LIB_OBJ) mk/libfalcon.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=mk/libfalcon.map \
	  -Wl,--exclude-libs,ALL $(if $(SANITIZE),,-Wl,-z,defs) -o $@ $(LIB_OBJ) $(LIB_LDLIBS)

# The reference as a shared library over libfalcon.so (found beside it):
# loading it attaches the mpfr backend (attach-at-start.o). Exports
# falcon_ref_* and falcon_reference_attach (reference/falcon_ref.h).
$(REF_SHLIB): $(REF_OBJ) $(BUILD)/obj/reference/attach-at-start.o $(BUILD)/libfalcon.so mk/libfalcon-ref.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=mk/libfalcon-ref.map $(if $(SANITIZE),,-Wl,-z,defs) \
	  -o $@ $(REF_OBJ) $(BUILD)/obj/reference/attach-at-start.o -L$(BUILD) -lfalcon -Wl,-rpath,'$$ORIGIN' \
	  -lmpfr -lgmp -lm

$(BUILD)/$(SONAME): $(SHLIB)
	ln -sf $(notdir $<) $@

$(BUILD)/libfalcon.so: $(BUILD)/$(SONAME)
	ln -sf $(notdir $<) $@

# The grading layer for other languages (python/falcon_suite loads it): `falcon
# cases export` and `falcon check` as functions. The gate's engine inside
# uses the library's internals, which libfalcon.so does not export, so it
# links libfalcon and the reference statically, hidden: exports
# falcon_grade_* only.
$(GRADE_SHLIB): $(GRADE_OBJ) $(GATE_OBJ) $(UTIL_OBJ) $(LIB_LINK) mk/libfalcon-grade.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=mk/libfalcon-grade.map -Wl,--exclude-libs,ALL \
	  $(if $(SANITIZE),,-Wl,-z,defs) -o $@ $(GRADE_OBJ) $(GATE_OBJ) $(UTIL_OBJ) $(LIB_LINK) -ljansson $(LDLIBS)

$(BUILD)/falcon: $(CLI_OBJ) $(GATE_OBJ) $(GRADE_OBJ) $(CLI_EXTRA_OBJ) $(STUDY_OBJ) $(UTIL_OBJ) $(LIB_LINK)
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(CLI_OBJ) $(GATE_OBJ) $(GRADE_OBJ) $(CLI_EXTRA_OBJ) $(STUDY_OBJ) $(UTIL_OBJ) $(LIB_LINK) -ljansson $(LDLIBS)

$(BUILD)/falcon-verify: $(TEST_OBJ) $(UTIL_OBJ) $(LIB_LINK)
	$(CC) $(LDFLAGS) $(EXE_LDFLAGS) -o $@ $(TEST_OBJ) $(UTIL_OBJ) $(LIB_LINK) -lcriterion $(LDLIBS)

# The gate. Criterion runs its tests in parallel on every core.
test: $(BUILD)/falcon-verify $(BUILD)/falcon
	$(BUILD)/falcon-verify --jobs=$$(nproc) $(VERIFY_ARGS)

# The README's test command: packages, build, the whole gate, the CLI tests.
# Everything is built first; then the gate and the shell tests run side by
# side (mk/scripts.mk), after the two tests that call make themselves and
# before the benchmark's, which compares timings of one call (its phases'
# medians against the call's shares) that other processes would skew.
CHECK_BUILD := all $(BUILD)/falcon-verify $(BUILD)/falcon-study $(STUDY_MPI) $(BUILD)/falcon-scaling \
               fuzz-replay-build $(if $(BENCH_OBJ),$(BUILD)/falcon-bench)
check: deps
	$(MAKE) golden-check
	bash verify/mutants.sh --edits-only
	$(MAKE) -j$(JOBS) $(CHECK_BUILD)
	bash verify/test_shlib.sh $(BUILD)
	bash verify/test_structure.sh $(BUILD)
	MAKE="$(MAKE)" bash verify/test_install.sh $(BUILD)
	$(MAKE) -k -j$(SCRIPT_JOBS) --output-sync=target --no-print-directory test test-cli test-usage test-rules test-stream \
	  test-outputs test-check test-plots test-python test-twins test-readme test-study fuzz-replay test-scaling \
	  test-grad test-report-plan test-grad-study
	$(MAKE) test-bench
	@if [ -n "$(CUDA_OBJ)" ]; then $(MAKE) cuda-report cuda-test; fi

# verify/golden-data.c is generated from verify/data/falcon-golden.json and
# committed, so a build needs no Python: `make golden` writes it again after
# the JSON (or the script) changed; `make golden-check` fails when the
# committed file is not what the script writes. The same for the gradients'
# verify/golden-grad-data.c from verify/data/falcon-grad-golden.json.
GOLDEN_GEN := verify/tools/golden_to_c.py
GOLDEN_GRAD_GEN := verify/tools/golden_grad_to_c.py
golden:
	python3 $(GOLDEN_GEN)
	python3 $(GOLDEN_GRAD_GEN)

golden-check:
	@if ! command -v python3 >/dev/null 2>&1; then echo "golden-check: skipped (no python3)"; exit 0; fi; \
	for pair in $(GOLDEN_GEN):verify/golden-data.c $(GOLDEN_GRAD_GEN):verify/golden-grad-data.c; do \
	gen=$${pair%%:*}; out=$${pair#*:}; \
	tmp=$$(mktemp); python3 $$gen $$tmp >/dev/null || { rm -f $$tmp; exit 1; }; \
	if cmp -s $$tmp $$out; then rm -f $$tmp; echo "golden-check: $$out is up to date"; \
	else diff $$tmp $$out | head -5; rm -f $$tmp; \
	  echo "golden-check: $$out differs from what $$gen writes (make golden)" >&2; exit 1; fi; done

# Seeded bugs that the gate must catch (a few minutes; see verify/mutants.sh).
mutants: deps
	bash verify/mutants.sh

# The README's main command: the gate's quick profile, the quick benchmark, the
# stability study, the learning curves and every plot into report/ (the steps
# are in mk/study.mk; PROFILE=full runs the full profiles).
report: deps
	$(MAKE) report-all

# Debian packages the build, the gate, the benchmarks and the plots need.
DEB_PACKAGES := build-essential libmpfr-dev libgmp-dev libcriterion-dev libsimde-dev \
                libbenchmark-dev gnuplot-nox libomp-dev clang libclang-rt-14-dev libjansson-dev \
                pkg-config python3-numpy libxml2-utils strace libopenblas-dev \
                python3-pytest python3-torch libopenmpi-dev openmpi-bin
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# make install [PREFIX=/usr/local] [DESTDIR=staging-dir]: the tools, both
# libraries, the header and falcon.pc (whose prefix is PREFIX, not DESTDIR).
# The public headers: the compute API, files, and tuning/attachment.
PUBLIC_HEADERS := include/falcon.h include/falcon_io.h include/falcon_advanced.h
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
INSTALL_BIN := $(BUILD)/falcon $(BUILD)/falcon-study $(STUDY_MPI) $(BUILD)/falcon-scaling $(BENCH_INSTALL)

install: all $(INSTALL_BIN) mk/falcon.pc.in mk/falcon-ref.pc.in
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR)
	install -m 755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libfalcon.so
	install -m 755 $(GRADE_SHLIB) $(REF_SHLIB) $(DESTDIR)$(LIBDIR)/
	$(if $(REF_LIB),install -m 644 $(REF_LIB) $(DESTDIR)$(LIBDIR)/)
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	for pc in falcon $(if $(REF_LIB),falcon-ref); do \
	  sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	      -e 's|@VERSION@|$(FALCON_VERSION)|g' -e 's|@LIBS_PRIVATE@|$(strip $(PC_LIBS_PRIVATE))|g' \
	      mk/$$pc.pc.in > $(DESTDIR)$(PCDIR)/$$pc.pc || exit 1; \
	done

# make uninstall [PREFIX=...] [DESTDIR=...]: removes exactly the files that
# `make install` with the same PREFIX and DESTDIR installed (the directories
# stay: others may share them).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(INSTALL_BIN)))
	rm -f $(addprefix $(DESTDIR)$(LIBDIR)/,$(notdir $(LIB) $(SHLIB) $(GRADE_SHLIB) $(REF_SHLIB) $(REF_LIB)) $(SONAME) libfalcon.so)
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/,$(notdir $(PUBLIC_HEADERS))) $(DESTDIR)$(PCDIR)/falcon.pc $(DESTDIR)$(PCDIR)/falcon-ref.pc

# One line per main target (verify/test_install.sh checks that it lists them).
help:
	@echo 'make [all]        the library (static and shared), the falcon command and libfalcon-grade.so'
	@echo 'make test         the Criterion gate (build/falcon-verify)'
	@echo 'make check        packages, build, the whole gate and every shell test (the README test command)'
	@echo 'make report       the quick gate, benchmark, stability study and plots into report/ (PROFILE=full)'
	@echo 'make bench        the benchmark (Google Benchmark, where installed)'
	@echo 'make mutants      seeded bugs the gate must catch (a few minutes)'
	@echo 'make sanitize     the CLI and the gate built and run with the sanitizers'
	@echo 'make fuzz         libFuzzer on the .npy reader, run arguments, the API and checkpoints (clang)'
	@echo 'make install      tools, libraries, header, falcon.pc into PREFIX (default /usr/local) [DESTDIR=dir]'
	@echo 'make uninstall    removes what make install put there (same PREFIX and DESTDIR)'
	@echo 'make deps         the Debian packages the build and the tests need'
	@echo 'make golden       regenerate verify/golden-data.c from its JSON (golden-check: compare)'
	@echo 'make clean        removes $(BUILD)/'
	@echo 'make help         this list'

clean:
	rm -rf $(BUILD)

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(GRADE_OBJ:.o=.d) $(UTIL_OBJ:.o=.d)
