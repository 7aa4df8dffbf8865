/* The chunk form's transposition of a block's keys, one precision
 * (included by blocked.inc.c; the recurrent form has no use for it).
 *
 * dst [cols][rows] (leading dimension ldd) = src [rows][cols]^T: the
 * chunk form packs a block's Z^T once, so that the block's products with
 * Z are axpy-form GEMMs too. On x86-64 in tiles of 4 x 4 floats or 2 x 2
 * doubles through SSE registers (element by element it took 4% of a
 * chunk call), 8 x 8 or 4 x 4 through AVX ones where the build has them;
 * a copy, so every build gives the same bits. */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__AVX__)
#include <immintrin.h>
/* The AVX builds (the AVX2 and AVX-512 drivers) take tiles of 8 x 8 floats
 * or 4 x 4 doubles: with direct operands (blocked.inc.c) the transposition
 * reads the keys from the caller's rows, and the 4 x 4 SSE tiles' shuffles
 * were most of its time (docs/performance.md, "Chunk form: the
 * transposition's tiles"). */
static int64_t RS(transpose_avx)(REAL *restrict dst, int64_t ldd, const REAL *restrict src, int64_t lds,
                                 int64_t rows, int64_t cols)
{
#ifdef FALCON_REAL_F32
    enum { B = 8 };
#else
    enum { B = 4 };
#endif
    int64_t r0 = 0;
    for (; r0 + B <= rows; r0 += B) {
        const REAL *s = src + r0 * lds;
        int64_t c = 0;
        for (; c + B <= cols; c += B) {
#ifdef FALCON_REAL_F32
            __m256 r[8], t[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + i * lds + c);
            for (int i = 0; i < 8; i += 2) { /* pairs of rows interleaved */
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) { /* r[i + j]: column j and j + 4 of rows i..i+3 */
                r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
            }
            for (int j = 0; j < 4; j++) {
                _mm256_storeu_ps(dst + (c + j) * ldd + r0, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
                _mm256_storeu_ps(dst + (c + j + 4) * ldd + r0, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
            }
#else
            const __m256d a = _mm256_loadu_pd(s + c), b = _mm256_loadu_pd(s + lds + c);
            const __m256d e = _mm256_loadu_pd(s + 2 * lds + c), f = _mm256_loadu_pd(s + 3 * lds + c);
            const __m256d t0 = _mm256_unpacklo_pd(a, b), t1 = _mm256_unpackhi_pd(a, b);
            const __m256d t2 = _mm256_unpacklo_pd(e, f), t3 = _mm256_unpackhi_pd(e, f);
            _mm256_storeu_pd(dst + c * ldd + r0, _mm256_permute2f128_pd(t0, t2, 0x20));
            _mm256_storeu_pd(dst + (c + 1) * ldd + r0, _mm256_permute2f128_pd(t1, t3, 0x20));
            _mm256_storeu_pd(dst + (c + 2) * ldd + r0, _mm256_permute2f128_pd(t0, t2, 0x31));
            _mm256_storeu_pd(dst + (c + 3) * ldd + r0, _mm256_permute2f128_pd(t1, t3, 0x31));
#endif
        }
        for (; c < cols; c++)
            for (int64_t r = r0; r < r0 + B; r++) dst[c * ldd + r] = src[r * lds + c];
    }
    return r0;
}
#endif

static void RS(transpose)(REAL *restrict dst, int64_t ldd, const REAL *restrict src, int64_t lds,
                          int64_t rows, int64_t cols)
{
#if defined(__AVX__)
    const int64_t done = RS(transpose_avx)(dst, ldd, src, lds, rows, cols); /* rows 0 .. done-1 */
    dst += done, src += done * lds, rows -= done;
#endif
    int64_t r0 = 0;
#if defined(__SSE2__) && defined(FALCON_REAL_F32)
    for (; r0 + 4 <= rows; r0 += 4) {
        const float *s = src + r0 * lds;
        int64_t c = 0;
        for (; c + 4 <= cols; c += 4) {
            __m128 a = _mm_loadu_ps(s + c), b = _mm_loadu_ps(s + lds + c);
            __m128 e = _mm_loadu_ps(s + 2 * lds + c), f = _mm_loadu_ps(s + 3 * lds + c);
            _MM_TRANSPOSE4_PS(a, b, e, f);
            _mm_storeu_ps(dst + c * ldd + r0, a);
            _mm_storeu_ps(dst + (c + 1) * ldd + r0, b);
            _mm_storeu_ps(dst + (c + 2) * ldd + r0, e);
            _mm_storeu_ps(dst + (c + 3) * ldd + r0, f);
        }
        for (; c < cols; c++)
            for (int64_t r = r0; r < r0 + 4; r++) dst[c * ldd + r] = src[r * lds + c];
    }
#elif defined(__SSE2__)
    for (; r0 + 2 <= rows; r0 += 2) {
        const double *s = src + r0 * lds;
        int64_t c = 0;
        for (; c + 2 <= cols; c += 2) {
            const __m128d a = _mm_loadu_pd(s + c), b = _mm_loadu_pd(s + lds + c);
            _mm_storeu_pd(dst + c * ldd + r0, _mm_unpacklo_pd(a, b));
            _mm_storeu_pd(dst + (c + 1) * ldd + r0, _mm_unpackhi_pd(a, b));
        }
        for (; c < cols; c++)
            for (int64_t r = r0; r < r0 + 2; r++) dst[c * ldd + r] = src[r * lds + c];
    }
#endif
    for (int64_t r = r0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * ldd + r] = src[r * lds + c];
}
