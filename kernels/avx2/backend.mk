# The avx2 backend (its row in src/backends.c): the micro-kernel tables
# falcon_uk_avx2_{f32,f64} (f32-avx2.c, with update_read in a unit of its own,
# f32-avx2-update-read.c; the same for f64) and the framework's drivers falcon_fw_avx2_{f32,f64}
# (framework-*, with the recurrent driver in recurrent-*),
# compiled with -mavx2 -mfma. x86-64 only; SIMD=0 leaves it out (mk/simd.mk).
ifeq ($(SIMD)$(SIMD_X86),11)
AVX2_UK_OBJ := $(BUILD)/obj/kernels/avx2/f32-avx2.o $(BUILD)/obj/kernels/avx2/f64-avx2.o \
               $(BUILD)/obj/kernels/avx2/f32-avx2-update-read.o $(BUILD)/obj/kernels/avx2/f64-avx2-update-read.o
AVX2_FW_OBJ := $(BUILD)/obj/kernels/avx2/framework-f32-avx2.o $(BUILD)/obj/kernels/avx2/framework-f64-avx2.o \
               $(BUILD)/obj/kernels/avx2/recurrent-f32-avx2.o $(BUILD)/obj/kernels/avx2/recurrent-f64-avx2.o
$(AVX2_UK_OBJ): CFLAGS += -mavx2 -mfma $(SIMD_UK_OPT)
$(AVX2_FW_OBJ): CFLAGS += -mavx2 -mfma $(SIMD_FW_OPT)
EXTRA_LIB_OBJ += $(AVX2_UK_OBJ) $(AVX2_FW_OBJ)
# The registry's row refers to the tables only when this is defined; it is
# rebuilt when this file changes, so an existing build picks the flag up.
CFLAGS += -DFALCON_HAVE_AVX2
$(BUILD)/obj/src/backends.o: kernels/avx2/backend.mk
endif
