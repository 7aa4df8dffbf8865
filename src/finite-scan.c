/*
 * falcon_all_finite_fast: is every element of an array finite? The one
 * pass over the inputs that every call makes before it writes anything
 * (validate.c, run.c), so it runs at the speed of the memory: a
 * non-finite float is one whose exponent field is all ones, so the scan
 * is an AND and a compare per element and an OR into an accumulator,
 * with no branch, in four independent accumulators (enough loads in
 * flight). The vector bodies are the CPU backends' (the registry's rows
 * name theirs: src/backends.c); the one taken is that of the backend auto
 * picks on this machine, else the portable loop. Large arrays are shared
 * by the call's threads in dynamic pieces, so that a thread the host slows
 * down does not hold the others up; the answer is the same however they
 * are shared. Measurements: docs/performance.md, "Input scan".
 */
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "backends.h"
#if defined(__x86_64__) && !defined(FALCON_NO_X86_DISPATCH)
#include <immintrin.h>
#define FALCON_SCAN_AVX2 1
#endif

#define F32_EXP 0x7f800000u
#define F64_EXP 0x7ff0000000000000ull
#define PIECE 4096 /* elements a thread takes at a time */

/* Portable: 0 when some element of [p, p + count) is not finite.
 * Vectorized (SSE2 on x86): several times the scalar loop's rate. */
VECTORIZED static int scan_f32(const uint32_t *p, int64_t count)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < count; i++) bad |= (p[i] & F32_EXP) == F32_EXP;
    return !bad;
}

VECTORIZED static int scan_f64(const uint64_t *p, int64_t count)
{
    uint64_t bad = 0;
    for (int64_t i = 0; i < count; i++) bad |= (p[i] & F64_EXP) == F64_EXP;
    return !bad;
}

#ifdef FALCON_SCAN_AVX2
/* SCAN_CLEAN_UPPER. The vector scans leave the upper halves of the vector
 * registers clean (vzeroupper) before they run or return to baseline code,
 * on every path and explicitly: the compiler does not insert it on every
 * path (not below -O2, nor before a call into the portable tail loop), and
 * dirty halves slow every legacy SSE instruction after them, the scalar
 * backend's included (docs/performance.md, "Clean vector registers before
 * baseline code"). verify/test-finite-scan.c checks the state after the
 * scan and after a run; falcon_clean_upper (below) cleans after a
 * backend's run.
 *
 * 32 floats (or 16 doubles) a step in four accumulators; the tail goes
 * to the portable loop. lane: 32 or 64 bits.
 *
 * SCAN_AVX2_AHEAD. No software prefetch: the hardware prefetchers keep up
 * with one stream (docs/performance.md). */
#define SCAN_AVX2_BODY(CMPEQ, EXP_SET1, PER)                                          \
    const __m256i e = EXP_SET1;                                                       \
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;                   \
    int64_t i = 0;                                                                    \
    for (; i + 4 * PER <= count; i += 4 * PER) {                                      \
        const __m256i *v = (const __m256i *)(p + i);                                  \
        a0 = _mm256_or_si256(a0, CMPEQ(_mm256_and_si256(_mm256_loadu_si256(v), e), e));     \
        a1 = _mm256_or_si256(a1, CMPEQ(_mm256_and_si256(_mm256_loadu_si256(v + 1), e), e)); \
        a2 = _mm256_or_si256(a2, CMPEQ(_mm256_and_si256(_mm256_loadu_si256(v + 2), e), e)); \
        a3 = _mm256_or_si256(a3, CMPEQ(_mm256_and_si256(_mm256_loadu_si256(v + 3), e), e)); \
    }                                                                                 \
    const __m256i a = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));

__attribute__((target("avx2"))) static int scan_f32_avx2(const uint32_t *p, int64_t count)
{
    SCAN_AVX2_BODY(_mm256_cmpeq_epi32, _mm256_set1_epi32((int)F32_EXP), 8)
    const int ok = _mm256_testz_si256(a, a);
    _mm256_zeroupper(); /* before the baseline tail: see SCAN_CLEAN_UPPER */
    return ok && scan_f32(p + i, count - i);
}

__attribute__((target("avx2"))) static int scan_f64_avx2(const uint64_t *p, int64_t count)
{
    SCAN_AVX2_BODY(_mm256_cmpeq_epi64, _mm256_set1_epi64x((long long)F64_EXP), 4)
    const int ok = _mm256_testz_si256(a, a);
    _mm256_zeroupper(); /* before the baseline tail: see SCAN_CLEAN_UPPER */
    return ok && scan_f64(p + i, count - i);
}
#endif

#ifdef FALCON_SCAN_AVX2
/* The same with 64-byte loads and a mask per compare; the tail to the
 * AVX2 version.
 *
 * SCAN_AVX512_AHEAD. A software prefetch of two lines a 256-byte step, 4 KiB
 * ahead into L2 (T1): it read DRAM faster than none, than nearer ones and
 * than T0 (docs/performance.md). */
#define SCAN_AVX512_AHEAD 4096
#define SCAN_AVX512_BODY(CMPEQ_MASK, EXP_SET1, PER)                                    \
    const __m512i e = EXP_SET1;                                                        \
    __mmask16 bad = 0;                                                                 \
    int64_t i = 0;                                                                     \
    for (; i + 4 * PER <= count; i += 4 * PER) {                                       \
        const char *v = (const char *)(p + i);                                        \
        _mm_prefetch(v + SCAN_AVX512_AHEAD, _MM_HINT_T1);                             \
        _mm_prefetch(v + SCAN_AVX512_AHEAD + 128, _MM_HINT_T1);                       \
        const __m512i a0 = _mm512_and_si512(_mm512_loadu_si512(v), e);               \
        const __m512i a1 = _mm512_and_si512(_mm512_loadu_si512(v + 64), e);          \
        const __m512i a2 = _mm512_and_si512(_mm512_loadu_si512(v + 128), e);         \
        const __m512i a3 = _mm512_and_si512(_mm512_loadu_si512(v + 192), e);         \
        bad |= (__mmask16)(CMPEQ_MASK(a0, e) | CMPEQ_MASK(a1, e) | CMPEQ_MASK(a2, e) | \
                           CMPEQ_MASK(a3, e));                                         \
    }

__attribute__((target("avx512f"))) static int scan_f32_avx512(const uint32_t *p, int64_t count)
{
    SCAN_AVX512_BODY(_mm512_cmpeq_epi32_mask, _mm512_set1_epi32((int)F32_EXP), 16)
    const int ok = !bad;
    _mm256_zeroupper(); /* see SCAN_CLEAN_UPPER */
    return ok && scan_f32_avx2(p + i, count - i);
}

__attribute__((target("avx512f"))) static int scan_f64_avx512(const uint64_t *p, int64_t count)
{
    SCAN_AVX512_BODY(_mm512_cmpeq_epi64_mask, _mm512_set1_epi64((long long)F64_EXP), 8)
    const int ok = !bad;
    _mm256_zeroupper(); /* see SCAN_CLEAN_UPPER */
    return ok && scan_f64_avx2(p + i, count - i);
}

const falcon_scan falcon_scan_avx2 = {scan_f32_avx2, scan_f64_avx2};
const falcon_scan falcon_scan_avx512 = {scan_f32_avx512, scan_f64_avx512};
#endif

/* sc: a vector body, or NULL for the portable one. */
static int scan(const void *p, falcon_precision prec, int64_t count, const falcon_scan *sc)
{
    if (sc) return prec != FALCON_FP64 ? sc->f32(p, count) : sc->f64(p, count);
    return prec != FALCON_FP64 ? scan_f32(p, count) : scan_f64(p, count);
}

#ifdef FALCON_SCAN_AVX2
__attribute__((target("avx"))) static void clean_upper_avx(void) { _mm256_zeroupper(); }
#endif

void falcon_clean_upper(void)
{
#ifdef FALCON_SCAN_AVX2
    if (__builtin_cpu_supports("avx")) clean_upper_avx(); /* reads a word libgcc set at load */
#endif
}

/* The vector bodies this machine runs: those of the CPU backends it runs
 * (the registry's rows with a scan), narrowest (lowest auto_rank) first;
 * and in *pick the rank in that list of the one the input check takes (0:
 * none), the scan of the backend auto picks. Hidden backends count: hiding
 * one is for the tests of its errors, not of the scan. */
enum { MAX_SCANS = 8 };
static int scans_here(const falcon_scan *out[MAX_SCANS], int *pick)
{
    int n = 0, rank[MAX_SCANS];
    const falcon_scan *chosen = NULL;
    for (int b = 0; b < FALCON_BACKEND_ROWS && n < MAX_SCANS; b++) {
        const falcon_backend_info *be = falcon_backend_info_of((falcon_backend)b);
        if (!be->scan || !be->usable || !be->usable()) continue;
        int i = n++;
        for (; i > 0 && rank[i - 1] > be->auto_rank; i--) out[i] = out[i - 1], rank[i] = rank[i - 1];
        out[i] = be->scan, rank[i] = be->auto_rank;
        if (i == n - 1) chosen = falcon_backend_scan(be);
    }
    *pick = 0;
    for (int i = 0; i < n; i++)
        if (out[i] == chosen) *pick = i + 1;
    return n;
}

int falcon_finite_scan_isa(void)
{
    const falcon_scan *sc[MAX_SCANS];
    int pick;
    return scans_here(sc, &pick);
}

int falcon_finite_scan_pick(void)
{
    const falcon_scan *sc[MAX_SCANS];
    int pick;
    (void)scans_here(sc, &pick);
    return pick;
}

/* isa: 0 the portable body, i the i-th of scans_here's. */
static const falcon_scan *scan_of(int isa)
{
    const falcon_scan *sc[MAX_SCANS];
    int pick;
    const int n = scans_here(sc, &pick);
    return isa > 0 && isa <= n ? sc[isa - 1] : NULL;
}

int falcon_all_finite_isa(const void *p, falcon_precision prec, int64_t count, int threads, int isa)
{
    const size_t size = prec != FALCON_FP64 ? 4 : 8;
    /* The elements before the first 64-byte boundary go first, on their
     * own, so that the vector bodies' loads are aligned: a 64-byte load at
     * malloc's 16-byte alignment spans two cache lines. */
    const uintptr_t off = (uintptr_t)p % 64;
    int64_t head = off % size ? 0 : (int64_t)((64 - off) % 64 / size);
    if (head > count) head = count;
    if (!scan(p, prec, head, NULL)) return 0;
    const falcon_scan *sc = scan_of(isa);
    p = (const char *)p + (size_t)head * size;
    count -= head;
    const int64_t pieces = count / PIECE;
    int bad = 0;
#pragma omp parallel for reduction(|:bad) schedule(dynamic, 16) num_threads(threads) if(pieces > 256)
    for (int64_t k = 0; k < pieces; k++) bad |= !scan((const char *)p + (size_t)(k * PIECE) * size, prec, PIECE, sc);
    if (!bad) bad = !scan((const char *)p + (size_t)(pieces * PIECE) * size, prec, count - pieces * PIECE, sc);
    return !bad;
}

int falcon_all_finite_fast(const void *p, falcon_precision prec, int64_t count, int threads)
{
    return falcon_all_finite_isa(p, prec, count, threads, falcon_finite_scan_pick());
}
