# Two backends from the same sources (their rows in src/backends.c):
#   avx512        the tables falcon_uk_avx512_{f32,f64} and the framework's
#                 drivers falcon_fw_avx512_{f32,f64}, -mavx512f -mavx2 -mfma;
#   avx512-simde  the tables falcon_uk_avx512emu_{f32,f64}: the same kernels
#                 against SIMDe, -mavx2 -mfma (tests the AVX-512 logic on AVX2
#                 machines), where SIMDe's headers exist.
# x86-64 only; SIMD=0 leaves them out (mk/simd.mk).
ifeq ($(SIMD)$(SIMD_X86),11)
AVX512_UK_OBJ  := $(BUILD)/obj/kernels/avx512/f32-avx512.o $(BUILD)/obj/kernels/avx512/f64-avx512.o \
                  $(BUILD)/obj/kernels/avx512/f32-avx512-update-read.o \
                  $(BUILD)/obj/kernels/avx512/f64-avx512-update-read.o
AVX512_FW_OBJ  := $(BUILD)/obj/kernels/avx512/framework-f32-avx512.o \
                  $(BUILD)/obj/kernels/avx512/framework-f64-avx512.o \
                  $(BUILD)/obj/kernels/avx512/recurrent-f32-avx512.o \
                  $(BUILD)/obj/kernels/avx512/recurrent-f64-avx512.o
AVX512_EMU_OBJ := $(if $(SIMD_SIMDE),$(BUILD)/obj/kernels/avx512/f32-avx512-simde.o \
                                     $(BUILD)/obj/kernels/avx512/f64-avx512-simde.o \
                                     $(BUILD)/obj/kernels/avx512/f32-avx512-simde-update-read.o \
                                     $(BUILD)/obj/kernels/avx512/f64-avx512-simde-update-read.o)
$(AVX512_UK_OBJ): CFLAGS += -mavx512f -mavx2 -mfma $(SIMD_UK_OPT)
$(AVX512_FW_OBJ): CFLAGS += -mavx512f -mavx2 -mfma $(SIMD_FW_OPT)
# -Wno-psabi: GCC notes the (unchanged since GCC 4.6) ABI of SIMDe's 64-byte
# structs passed by value.
$(AVX512_EMU_OBJ): CFLAGS += -mavx2 -mfma -Wno-psabi
EXTRA_LIB_OBJ += $(AVX512_UK_OBJ) $(AVX512_FW_OBJ) $(AVX512_EMU_OBJ)
# The registry's rows refer to the tables only when these are defined; it is
# rebuilt when this file changes, so an existing build picks the flags up.
CFLAGS += -DFALCON_HAVE_AVX512 $(if $(SIMD_SIMDE),-DFALCON_HAVE_AVX512_SIMDE)
$(BUILD)/obj/src/backends.o: kernels/avx512/backend.mk
endif
