# The avx2 backend (its row in src/backends.c): the shared kernels and the
# framework over vec-avx2.h, with AVX2 and FMA (mk/simd.mk builds them).
avx2_VEC   := vec-avx2.h
avx2_FLAGS := -mavx2 -mfma
avx2_SIMDE :=
$(call simd_backend,avx2)
