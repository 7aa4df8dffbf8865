/*
 * The vector abstraction the SIMD micro-kernels are written against, AVX2+FMA
 * flavour: __m256 (8 floats) for FALCON_REAL_F32, __m256d (4 doubles)
 * otherwise. Include after real.h; one precision per translation unit.
 *
 * The kernels (kernels/simd: gemm-nt.inc.c, gemm-nn.inc.c, rank-update.inc.c,
 * trsm.inc.c) see only:
 *   vreal, vmask, VL                       vector type, tail-mask type, lanes
 *   v_loadu v_storeu v_set1 v_zero         unaligned memory, broadcast
 *   v_mul v_add v_fma (a*b+c) v_fnma (c-a*b)  arithmetic (FMA: one rounding)
 *   v_mask(r) v_load_mask v_store_mask     the first r lanes (0 < r < VL)
 *   v_reduce4(v0, v1, v2, v3, out)         out[i] = sum of the lanes of vi
 *   V_KEEP(v)                              keep v in a register (no refolding)
 *   VNAME(x)                               x_avx2_f32 / x_avx2_f64
 *   NT_MR NT_NR AX_MR AX_NV TR_MR TR_NV    register tile sizes
 * and the table's parts (kernels/simd/ukernels.c, update-read-unit.c):
 *   V_ISA_NAME                             the table's name
 *   V_UR_NV                                update_read's column block, in
 *                                          vectors (unset: AX_NV)
 *   V_HALF_UR_NV, V_HALF_UR_ZREG           where set, a second table for a
 *                                          256-bit datapath (vec-avx512.h)
 * kernels/avx512/vec-avx512.h provides the same names over 512-bit vectors,
 * so those sources are compiled unchanged for AVX-512.
 *
 * v_reduce4 sums every vector with the same fixed tree whatever its
 * position among the four, so a dot product never depends on which tile
 * (or which tail) computed it.
 */
#ifndef FALCON_VEC_AVX2_H
#define FALCON_VEC_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define VINLINE static inline __attribute__((always_inline))
/* Pin a value in a register: stops GCC from folding a load that several
 * FMAs share back into each FMA as a memory operand (one load per use). */
#define V_KEEP(x) __asm__("" : "+x"(x))

/* gemm_nt (dot-product form): NT_MR rows of A x NT_NR rows of B, one vector
 * accumulator each (8 accumulators cover the FMA latency x throughput). */
#define NT_MR 2
#define NT_NR 4
/* gemm_nn / rank_update (axpy form): AX_MR rows x AX_NV vectors of C. */
#define AX_MR 6
#define AX_NV 2
/* trsm: TR_MR rows solved together, TR_NV vectors of columns (6 x 2
 * accumulators, as the axpy tile: per q 2 loads and 6 broadcasts feed 12
 * FMAs; docs/performance.md, "SIMD backends"). */
#define TR_MR 6
#define TR_NV 2

#define V_ISA_NAME "avx2"
/* update_read in column blocks of 4 vectors, not the axpy tile's 2: its
 * 2 x 4 accumulators keep both FMA pipes busy (ports x latency = 8); the
 * block's Z vectors are then reloaded from L1 each row. Measurements:
 * docs/performance.md, "SIMD backends". */
#define V_UR_NV 4

#ifdef FALCON_REAL_F32

#define VNAME(x) x##_avx2_f32
typedef __m256 vreal;
typedef __m256i vmask;
#define VL 8

VINLINE vreal v_loadu(const float *p) { return _mm256_loadu_ps(p); }
VINLINE void v_storeu(float *p, vreal v) { _mm256_storeu_ps(p, v); }
VINLINE vreal v_set1(float x) { return _mm256_set1_ps(x); }
VINLINE vreal v_zero(void) { return _mm256_setzero_ps(); }
VINLINE vreal v_mul(vreal a, vreal b) { return _mm256_mul_ps(a, b); }
VINLINE vreal v_add(vreal a, vreal b) { return _mm256_add_ps(a, b); }
VINLINE vreal v_fma(vreal a, vreal b, vreal c) { return _mm256_fmadd_ps(a, b, c); }
VINLINE vreal v_fnma(vreal a, vreal b, vreal c) { return _mm256_fnmadd_ps(a, b, c); }
VINLINE vmask v_mask(int64_t r)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
VINLINE vreal v_load_mask(const float *p, vmask k) { return _mm256_maskload_ps(p, k); }
VINLINE void v_store_mask(float *p, vmask k, vreal v) { _mm256_maskstore_ps(p, k, v); }
/* ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) for each of the four. */
VINLINE void v_reduce4(vreal v0, vreal v1, vreal v2, vreal v3, float *out)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}

#else

#define VNAME(x) x##_avx2_f64
typedef __m256d vreal;
typedef __m256i vmask;
#define VL 4

VINLINE vreal v_loadu(const double *p) { return _mm256_loadu_pd(p); }
VINLINE void v_storeu(double *p, vreal v) { _mm256_storeu_pd(p, v); }
VINLINE vreal v_set1(double x) { return _mm256_set1_pd(x); }
VINLINE vreal v_zero(void) { return _mm256_setzero_pd(); }
VINLINE vreal v_mul(vreal a, vreal b) { return _mm256_mul_pd(a, b); }
VINLINE vreal v_add(vreal a, vreal b) { return _mm256_add_pd(a, b); }
VINLINE vreal v_fma(vreal a, vreal b, vreal c) { return _mm256_fmadd_pd(a, b, c); }
VINLINE vreal v_fnma(vreal a, vreal b, vreal c) { return _mm256_fnmadd_pd(a, b, c); }
VINLINE vmask v_mask(int64_t r)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(r), _mm256_setr_epi64x(0, 1, 2, 3));
}
VINLINE vreal v_load_mask(const double *p, vmask k) { return _mm256_maskload_pd(p, k); }
VINLINE void v_store_mask(double *p, vmask k, vreal v) { _mm256_maskstore_pd(p, k, v); }
/* (l0+l1) + (l2+l3) for each of the four. */
VINLINE void v_reduce4(vreal v0, vreal v1, vreal v2, vreal v3, double *out)
{
    __m256d a = _mm256_hadd_pd(v0, v1), b = _mm256_hadd_pd(v2, v3);
    _mm256_storeu_pd(out, _mm256_add_pd(_mm256_permute2f128_pd(a, b, 0x20),
                                        _mm256_permute2f128_pd(a, b, 0x31)));
}

#endif

#endif
