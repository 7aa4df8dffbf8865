# Two backends from these (their rows in src/backends.c; mk/simd.mk builds
# them): avx512, the shared kernels and the framework over vec-avx512.h with
# AVX-512F; avx512-simde, the same kernels against SIMDe under AVX2 and FMA
# (tests the AVX-512 logic on AVX2 machines), where SIMDe's headers exist.
# -Wno-psabi: GCC notes the (unchanged since GCC 4.6) ABI of SIMDe's
# 64-byte structs passed by value.
avx512_VEC   := vec-avx512.h
avx512_FLAGS := -mavx512f -mavx2 -mfma
avx512_SIMDE := -mavx2 -mfma -Wno-psabi
$(call simd_backend,avx512)
