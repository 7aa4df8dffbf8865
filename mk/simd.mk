# What the SIMD backends share; each one's own rules are in its folder,
# kernels/<isa>/backend.mk, which the Makefile includes after this file.
#
# Only a backend's objects get its ISA flags; everything else stays baseline,
# so the library runs on any CPU of the architecture and the registry
# (src/backends.c) picks a backend's tables only after its CPU check.
# `make SIMD=0` leaves every SIMD backend out (scalar only).

SIMD ?= 1
SIMD_X86 := $(if $(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null)),1,)
# The SIMDe-emulated AVX-512 table needs SIMDe's headers (Debian: libsimde-dev).
SIMDE_HEADER ?= /usr/include/simde/x86/avx512.h
SIMD_SIMDE := $(if $(wildcard $(SIMDE_HEADER)),1,)

# The framework (kernels/framework, the variant logic) is compiled again for
# each native backend's ISA (kernels/<isa>/framework-<prec>-<isa>.c), so its
# own O(m), O(n) loops vectorize; same sources, driver tables
# falcon_fw_<isa>_<prec>, paired with the kernels in the registry. -O3 (unless
# OPT was changed): GCC's -O2 vectorizer leaves loops that need a remainder or
# an alias check scalar. -ffp-contract=off: no FMA contraction either (GCC's
# default under -std=c11, not clang's), so these builds round exactly as the
# baseline one does.
SIMD_FW_OPT := $(if $(filter -O2,$(OPT)),-O3) -ffp-contract=off
# Extra flags for the SIMD micro-kernel tables alone (empty: OPT); the fuzz
# build sets -O0 (why: mk/fuzz.mk).
SIMD_UK_OPT ?=
