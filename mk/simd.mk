# SIMD micro-kernels (kernels/avx2, kernels/avx512), x86-64 only.
#
# Only these objects get ISA flags; everything else stays baseline x86-64,
# so the library runs on any x86-64 CPU and src/backends.c picks a table at
# run time (__builtin_cpu_supports). Tables:
#   falcon_uk_avx2_{f32,f64}       -mavx2 -mfma                 FALCON_BACKEND_AVX2
#   falcon_uk_avx512_{f32,f64}     -mavx512f -mavx2 -mfma       FALCON_BACKEND_AVX512
#   falcon_uk_avx512emu_{f32,f64}  the AVX-512 sources against SIMDe, -mavx2
#                                  -mfma (kernels/avx512/avx512-emu.h; tests)
# and the framework's drivers for the native ones (falcon_fw_avx2_*,
# falcon_fw_avx512_*, below).
# `make SIMD=0` leaves them all out (scalar only).

SIMD ?= 1
SIMD_X86 := $(if $(findstring x86_64,$(shell $(CC) -dumpmachine 2>/dev/null)),1,)
# The emulated AVX-512 table needs SIMDe's headers (Debian: libsimde-dev).
SIMDE_HEADER ?= /usr/include/simde/x86/avx512.h
SIMD_SIMDE := $(if $(wildcard $(SIMDE_HEADER)),1,)

ifeq ($(SIMD)$(SIMD_X86),11)

SIMD_AVX2_OBJ   := $(BUILD)/obj/kernels/avx2/f32-avx2.o $(BUILD)/obj/kernels/avx2/f64-avx2.o
SIMD_AVX512_OBJ := $(BUILD)/obj/kernels/avx512/f32-avx512.o $(BUILD)/obj/kernels/avx512/f64-avx512.o
SIMD_EMU_OBJ    := $(if $(SIMD_SIMDE),$(BUILD)/obj/kernels/avx512/f32-avx512-simde.o \
                                      $(BUILD)/obj/kernels/avx512/f64-avx512-simde.o)
# The framework (kernels/framework, the variant logic) compiled again for each
# native backend's ISA, so its own O(m), O(n) loops vectorize; same sources,
# driver tables falcon_fw_{avx2,avx512}_{f32,f64}, paired with the kernels in src/backends.c
# (reached, like the kernel tables, only after the CPU check). -O3 (unless OPT was changed): GCC's -O2 vectorizer
# leaves loops that need a remainder or an alias check scalar.
SIMD_FW_AVX2_OBJ   := $(BUILD)/obj/kernels/framework/framework-f32-avx2.o \
                      $(BUILD)/obj/kernels/framework/framework-f64-avx2.o
SIMD_FW_AVX512_OBJ := $(BUILD)/obj/kernels/framework/framework-f32-avx512.o \
                      $(BUILD)/obj/kernels/framework/framework-f64-avx512.o
# -ffp-contract=off: no FMA contraction either (GCC's default under -std=c11,
# not clang's), so these builds round exactly as the baseline one does.
SIMD_FW_OPT := $(if $(filter -O2,$(OPT)),-O3) -ffp-contract=off

# Per-object ISA flags (target-specific; the generic %.o rule compiles them).
$(SIMD_AVX2_OBJ):   CFLAGS += -mavx2 -mfma
$(SIMD_AVX512_OBJ): CFLAGS += -mavx512f -mavx2 -mfma
# -Wno-psabi: GCC notes the (unchanged since GCC 4.6) ABI of SIMDe's 64-byte
# structs passed by value.
$(SIMD_EMU_OBJ):    CFLAGS += -mavx2 -mfma -Wno-psabi
$(SIMD_FW_AVX2_OBJ):   CFLAGS += -mavx2 -mfma $(SIMD_FW_OPT)
$(SIMD_FW_AVX512_OBJ): CFLAGS += -mavx512f -mavx2 -mfma $(SIMD_FW_OPT)

# The registry (src/backends.c) refers to the tables this build has; it
# checks the CPU before use. It is rebuilt when this file changes, so an
# existing build picks the flags up.
CFLAGS += -DFALCON_HAVE_AVX2 -DFALCON_HAVE_AVX512 $(if $(SIMD_SIMDE),-DFALCON_HAVE_AVX512_SIMDE)
$(BUILD)/obj/src/backends.o: mk/simd.mk
EXTRA_LIB_OBJ += $(SIMD_AVX2_OBJ) $(SIMD_AVX512_OBJ) $(SIMD_EMU_OBJ) $(SIMD_FW_AVX2_OBJ) $(SIMD_FW_AVX512_OBJ)

endif
