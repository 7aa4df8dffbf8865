/*
 * falcon_all_finite_fast: is every element of an array finite? The one
 * pass over the inputs that every call makes before it writes anything
 * (validate.c, run.c), so it runs at the speed of the memory: a
 * non-finite float is one whose exponent field is all ones, so the scan
 * is an AND and a compare per element and an OR into an accumulator,
 * with no branch. Four independent accumulators over 128-byte steps (and,
 * in the AVX-512 body, a software prefetch 4 KiB ahead) keep enough loads
 * in flight; an AVX2 version (chosen at run time) reads 32 bytes a load,
 * the baseline 16 (SSE2, which the compiler vectorizes the same loop for),
 * and an AVX-512 one 64: from L1 and L2, where the inputs of a short call
 * sit, it reads twice what the AVX2 one does (117 against 67 GB/s measured
 * on Sapphire Rapids over 256 KiB); from L3 and DRAM the three are about
 * equal, and on a 256-bit AVX-512 datapath the AVX2 one reads DRAM faster
 * (SCAN_PICK). Large arrays are shared by the call's threads in
 * dynamic pieces, so that a thread the host slows down does not hold the
 * others up; the answer is the same however they are shared.
 */
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "../kernels/avx512/cpu-avx512.h"
#if defined(__x86_64__) && !defined(FALCON_NO_X86_DISPATCH)
#include <immintrin.h>
#define FALCON_SCAN_AVX2 1
#endif

#define F32_EXP 0x7f800000u
#define F64_EXP 0x7ff0000000000000ull
#define PIECE 4096 /* elements a thread takes at a time */

/* Portable: 0 when some element of [p, p + count) is not finite.
 * Vectorized (SSE2 on x86): scalar, it read 6 GB/s from cache and DRAM
 * alike; vectorized 46 from L2 and 25 from DRAM (Zen 4). */
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
 * on every path and explicitly: GCC inserts vzeroupper only with
 * -fexpensive-optimizations (-O2 and up, not the sanitizer builds' -O1),
 * and even at -O2 GCC 12 put none before the call into the portable tail
 * loop, nor on the return after it. Every call that validated its inputs
 * then left them dirty for the rest of the process (glibc's AVX-512 string
 * functions do not clean them either), and each legacy SSE instruction
 * after it, the scalar backend's and the library's own baseline loops,
 * also depended on its register's previous upper half: the scalar
 * recurrent step ran 5.9 times slower (Zen 5) after any validated call.
 * verify/test-finite-scan.c checks the state after the scan and after a
 * run; falcon_clean_upper (below) cleans after a backend's run.
 *
 * 32 floats (or 16 doubles) a step in four accumulators; the tail goes
 * to the portable loop. lane: 32 or 64 bits.
 *
 * SCAN_AVX2_AHEAD. No software prefetch: the hardware prefetchers keep up
 * with one stream. On Zen 3, where this is the scan, a prefetch 512 bytes
 * ahead (into L1) read 19-20 GB/s over 50 MB, the same as none, and 1 KiB
 * ahead 16-17; on Zen 4, right after a chunk call, 512 bytes ahead read the
 * inputs in 2.29-2.61 ms against 1.97-2.11 with none (48 MiB, medians of
 * 21, three runs; 1 KiB ahead into L2 2.05-2.15). 1 KiB ahead took
 * Sapphire Rapids' DRAM read from 10 to 12.5 GB/s when this was its scan
 * (it now runs the AVX-512 one, whose prefetch stays). */
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
 * SCAN_AVX512_AHEAD. A software prefetch of two lines a 256-byte step,
 * into L2 (T1): into L1 (T0) they halved the DRAM rate on Zen 4 (13.4
 * against 24.5 GB/s over 50 MB; without any, 24.1). 4 KiB ahead: on Zen 5
 * (the two-pipe cores that take this body), timed right after a call
 * (falcon_validate, medians of 7-9, ten alternating rounds), the
 * recurrent case's 24 MiB of inputs (AVX-512 fp32, n = m = 64, 8 heads,
 * T = 4096) took 0.80 of the time they took 1 KiB ahead (1.16 against
 * 1.40 ms; 2 KiB 0.99, 3 KiB 0.85) and the chunk case's 48 MiB (n = m =
 * 128) 0.93 (2.56 against 2.91 ms; 2 and 3 KiB 0.94); 8 KiB ahead was
 * slower than 1 KiB on both. A test program reading 24 MiB after 64 MiB
 * of other stores agreed (one stream: 1 KiB ahead 20-25 GB/s, 4 KiB
 * 25-28); prefetching all four lines of a step instead of two, 1 or 4 KiB
 * ahead, read the same as two. Sapphire Rapids, whose 12.5 GB/s above was
 * 1 KiB ahead, has not been measured 4 KiB ahead. */
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
#endif

/* isa: 0 baseline, 1 AVX2, 2 AVX-512. */
static int scan(const void *p, falcon_precision prec, int64_t count, int isa)
{
#ifdef FALCON_SCAN_AVX2
    if (isa == 2)
        return prec != FALCON_FP64 ? scan_f32_avx512(p, count) : scan_f64_avx512(p, count);
    if (isa == 1)
        return prec != FALCON_FP64 ? scan_f32_avx2(p, count) : scan_f64_avx2(p, count);
#endif
    (void)isa;
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

int falcon_finite_scan_isa(void)
{
#ifdef FALCON_SCAN_AVX2
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#else
    return 0;
#endif
}

/* SCAN_PICK. The widest body, but the AVX2 one where AVX-512 runs on a
 * 256-bit datapath: on Zen 4, in the benchmark (fp32 chunk, n = m = 128,
 * C = 64, 8 heads, T = 4096: 48 MiB of inputs read right after a call),
 * the AVX2 scan took 0.89-0.96 of the AVX-512 one's time (median 0.92,
 * eight alternating rounds; the check's share of the call from 4.1-4.5%
 * to 3.8-4.3%). A test program put the difference in the load width, not
 * the prefetch: the AVX-512 body read the same with its prefetch or
 * without. From L1 and L2 the wider loads win on two-pipe cores (the
 * header), which keep it. Read once (falcon_cpu_avx512_half_width). */
int falcon_finite_scan_pick(void)
{
    const int isa = falcon_finite_scan_isa();
    return isa == 2 && falcon_cpu_avx512_half_width() ? 1 : isa;
}

int falcon_all_finite_isa(const void *p, falcon_precision prec, int64_t count, int threads, int isa)
{
    const size_t size = prec != FALCON_FP64 ? 4 : 8;
    /* The elements before the first 64-byte boundary go first, on their
     * own, so that the vector bodies' loads are aligned: a 64-byte load at
     * malloc's 16-byte alignment spans two cache lines, and the AVX-512
     * scan read 24-25 GB/s from DRAM against 34-38 aligned (Zen 5,
     * 50 MB; AVX2 30 against 33-39). */
    const uintptr_t off = (uintptr_t)p % 64;
    int64_t head = off % size ? 0 : (int64_t)((64 - off) % 64 / size);
    if (head > count) head = count;
    if (!scan(p, prec, head, 0)) return 0;
    p = (const char *)p + (size_t)head * size;
    count -= head;
    const int64_t pieces = count / PIECE;
    int bad = 0;
#pragma omp parallel for reduction(|:bad) schedule(dynamic, 16) num_threads(threads) if(pieces > 256)
    for (int64_t k = 0; k < pieces; k++) bad |= !scan((const char *)p + (size_t)(k * PIECE) * size, prec, PIECE, isa);
    if (!bad) bad = !scan((const char *)p + (size_t)(pieces * PIECE) * size, prec, count - pieces * PIECE, isa);
    return !bad;
}

int falcon_all_finite_fast(const void *p, falcon_precision prec, int64_t count, int threads)
{
    return falcon_all_finite_isa(p, prec, count, threads, falcon_finite_scan_pick());
}
