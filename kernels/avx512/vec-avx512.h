/*
 * The vector abstraction of kernels/avx2/vec-avx2.h over 512-bit vectors:
 * __m512 (16 floats) for FALCON_REAL_F32, __m512d (8 doubles) otherwise.
 * The kernel sources are the same files as AVX2's (kernels/simd); only
 * this header and the tile sizes differ.
 *
 * One macro picks the implementation of the intrinsics:
 *   FALCON_VEC_SIMDE undefined: native AVX-512F (-mavx512f -mavx2 -mfma);
 *   FALCON_VEC_SIMDE defined:   SIMDe's portable versions (compiled with
 *     -mavx2 -mfma, SIMDe lowers each 512-bit op to two 256-bit ones), so
 *     the logic of these kernels runs and is tested on CPUs without AVX-512.
 * SIMDe 0.7.4 lacks masked loads and stores (_mm512_maskz_loadu_*,
 * _mm512_mask_storeu_*) and _mm512_reduce_add_*: the tails go through a
 * small stack buffer there, and v_reduce4 uses only casts, 256-bit extracts
 * and AVX2 horizontal adds, which both implementations have.
 */
#ifndef FALCON_VEC_AVX512_H
#define FALCON_VEC_AVX512_H

#include <stdint.h>
#include <string.h>
#ifdef FALCON_VEC_SIMDE
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#else
#include <immintrin.h>
#endif

#define VINLINE static inline __attribute__((always_inline))
#ifdef FALCON_VEC_SIMDE
#define V_KEEP(x) ((void)0) /* SIMDe's vectors are not register operands */
#else
#define V_KEEP(x) __asm__("" : "+v"(x))
#endif

/* 32 vector registers: larger tiles than AVX2 (see vec-avx2.h). */
#define NT_MR 4
#define NT_NR 4
#define AX_MR 6
#define AX_NV 4
#define TR_MR 4
#define TR_NV 4

#ifdef FALCON_VEC_SIMDE
#define V_ISA_NAME "avx512-simde"
#else
#define V_ISA_NAME "avx512"
#endif
/* update_read in the axpy tile's 4-vector blocks (V_UR_NV unset), whose
 * 2 x 4 accumulators keep two 512-bit FMA pipes busy; and a second table
 * (the registry picks it on a 256-bit datapath, one 512-bit FMA a cycle)
 * with 2-vector blocks, whose Z vectors of up to 4 terms stay in registers
 * (UR_ZREG). The same bits either way. Measurements: docs/performance.md,
 * "SIMD backends". */
#define V_HALF_UR_NV 2
#define V_HALF_UR_ZREG 4

#ifdef FALCON_REAL_F32

#ifdef FALCON_VEC_SIMDE
#define VNAME(x) x##_avx512emu_f32
#else
#define VNAME(x) x##_avx512_f32
#endif
typedef __m512 vreal;
#define VL 16

VINLINE vreal v_loadu(const float *p) { return _mm512_loadu_ps(p); }
VINLINE void v_storeu(float *p, vreal v) { _mm512_storeu_ps(p, v); }
VINLINE vreal v_set1(float x) { return _mm512_set1_ps(x); }
VINLINE vreal v_zero(void) { return _mm512_setzero_ps(); }
VINLINE vreal v_mul(vreal a, vreal b) { return _mm512_mul_ps(a, b); }
VINLINE vreal v_add(vreal a, vreal b) { return _mm512_add_ps(a, b); }
VINLINE vreal v_fma(vreal a, vreal b, vreal c) { return _mm512_fmadd_ps(a, b, c); }
VINLINE vreal v_fnma(vreal a, vreal b, vreal c) { return _mm512_fnmadd_ps(a, b, c); }
/* lanes i and i+8 added, then the AVX2 tree of vec-avx2.h */
VINLINE __m256 v_fold256(vreal v)
{
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}
VINLINE void v_reduce4(vreal v0, vreal v1, vreal v2, vreal v3, float *out)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(v_fold256(v0), v_fold256(v1)),
                              _mm256_hadd_ps(v_fold256(v2), v_fold256(v3)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
}
#ifndef FALCON_VEC_SIMDE
typedef __mmask16 vmask;
VINLINE vmask v_mask(int64_t r) { return (__mmask16)((1u << r) - 1u); }
VINLINE vreal v_load_mask(const float *p, vmask k) { return _mm512_maskz_loadu_ps(k, p); }
VINLINE void v_store_mask(float *p, vmask k, vreal v) { _mm512_mask_storeu_ps(p, k, v); }
#endif

#else /* double */

#ifdef FALCON_VEC_SIMDE
#define VNAME(x) x##_avx512emu_f64
#else
#define VNAME(x) x##_avx512_f64
#endif
typedef __m512d vreal;
#define VL 8

VINLINE vreal v_loadu(const double *p) { return _mm512_loadu_pd(p); }
VINLINE void v_storeu(double *p, vreal v) { _mm512_storeu_pd(p, v); }
VINLINE vreal v_set1(double x) { return _mm512_set1_pd(x); }
VINLINE vreal v_zero(void) { return _mm512_setzero_pd(); }
VINLINE vreal v_mul(vreal a, vreal b) { return _mm512_mul_pd(a, b); }
VINLINE vreal v_add(vreal a, vreal b) { return _mm512_add_pd(a, b); }
VINLINE vreal v_fma(vreal a, vreal b, vreal c) { return _mm512_fmadd_pd(a, b, c); }
VINLINE vreal v_fnma(vreal a, vreal b, vreal c) { return _mm512_fnmadd_pd(a, b, c); }
VINLINE __m256d v_fold256(vreal v)
{
    return _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
}
VINLINE void v_reduce4(vreal v0, vreal v1, vreal v2, vreal v3, double *out)
{
    __m256d a = _mm256_hadd_pd(v_fold256(v0), v_fold256(v1));
    __m256d b = _mm256_hadd_pd(v_fold256(v2), v_fold256(v3));
    _mm256_storeu_pd(out, _mm256_add_pd(_mm256_permute2f128_pd(a, b, 0x20),
                                        _mm256_permute2f128_pd(a, b, 0x31)));
}
#ifndef FALCON_VEC_SIMDE
typedef __mmask8 vmask;
VINLINE vmask v_mask(int64_t r) { return (__mmask8)((1u << r) - 1u); }
VINLINE vreal v_load_mask(const double *p, vmask k) { return _mm512_maskz_loadu_pd(k, p); }
VINLINE void v_store_mask(double *p, vmask k, vreal v) { _mm512_mask_storeu_pd(p, k, v); }
#endif

#endif /* precision */

#ifdef FALCON_VEC_SIMDE
/* Masked tails without SIMDe's (missing) masked loads/stores: the mask is
 * the lane count, the partial vector goes through a zeroed stack buffer. */
typedef int64_t vmask;
VINLINE vmask v_mask(int64_t r) { return r; }
VINLINE vreal v_load_mask(const REAL *p, vmask r)
{
    REAL t[VL] = {0};
    memcpy(t, p, sizeof(REAL) * (size_t)r);
    return v_loadu(t);
}
VINLINE void v_store_mask(REAL *p, vmask r, vreal v)
{
    REAL t[VL];
    v_storeu(t, v);
    memcpy(p, t, sizeof(REAL) * (size_t)r);
}
#endif

#endif
