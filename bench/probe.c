/*
 * probe.c: measured peaks. FMA throughput: tight loops of independent FMA
 * chains (enough chains to cover latency x pipes on current x86 cores: 12
 * for AVX2, 16 for AVX-512, 24 for the portable loop's multiply and add),
 * each held in a register, each acc = acc * a + b with a < 1, so values
 * converge and never overflow or go subnormal. Memory: a STREAM triad over a
 * buffer many times the last-level cache.
 *
 * The ISA loops use function target attributes rather than -mavx2/-mavx512f
 * on the whole file: the rest of this file (and anything the compiler
 * inlines into it) stays baseline x86-64, and each loop runs only after
 * __builtin_cpu_supports says the CPU has it.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "probe.h"
#include "clock.h"

/* A loop returns a value that depends on every chain, so none is dead code;
 * flops per iteration are reported through *fpi. */
typedef double (*fma_loop)(int64_t iters, double *fpi);

/* One loop per (ISA, precision), written once: REP pastes a statement per
 * chain x0, x1, ..., kept in registers. */
#define REP12(M, A, B) M(0, A, B) M(1, A, B) M(2, A, B) M(3, A, B) M(4, A, B) M(5, A, B) \
                       M(6, A, B) M(7, A, B) M(8, A, B) M(9, A, B) M(10, A, B) M(11, A, B)
#define REP16(M, A, B) REP12(M, A, B) M(12, A, B) M(13, A, B) M(14, A, B) M(15, A, B)
#define REP24(M, A, B) REP16(M, A, B) M(16, A, B) M(17, A, B) M(18, A, B) M(19, A, B) \
                       M(20, A, B) M(21, A, B) M(22, A, B) M(23, A, B)
#define DECL(i, VT, SET1) VT x##i = SET1(0.01 * (i));
#define STEP(i, FMA, _) x##i = FMA(x##i, a, b);
#define SUM(i, ADD, _) acc = ADD(acc, x##i);

#define FMA_LOOP(NAME, ATTR, REP, NCH, VT, ET, LANES, SET1, FMA, ADD, STORE)          \
    ATTR static double NAME(int64_t iters, double *fpi)                             \
    {                                                                               \
        const VT a = SET1(0.9999999), b = SET1(1e-7);                               \
        REP(DECL, VT, SET1)                                                         \
        VT acc = SET1(0.0);                                                         \
        for (int64_t it = 0; it < iters; it++) { REP(STEP, FMA, 0) }                \
        REP(SUM, ADD, 0)                                                            \
        ET out[LANES];                                                              \
        STORE(out, acc);                                                            \
        double s = 0;                                                               \
        for (int i = 0; i < LANES; i++) s += out[i];                                \
        *fpi = 2.0 * NCH * LANES;                                                   \
        return s;                                                                   \
    }

/* Portable fallback, in double: a multiply and an add per chain (fused
 * only if the compiler contracts them), 2 flops. Each chain waits for
 * both latencies (8 cycles on current x86 cores) and two pipes take each
 * kind: 24 chains keep them busy where 8, held in an array the compiler
 * left in memory, measured under half of it. */
#define SC_SET1(v) (v)
#define SC_FMA(x, a, b) ((x) * (a) + (b))
#define SC_ADD(x, y) ((x) + (y))
#define SC_STORE(out, acc) ((out)[0] = (acc))
FMA_LOOP(loop_scalar, , REP24, 24, double, double, 1, SC_SET1, SC_FMA, SC_ADD, SC_STORE)

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f")))
FMA_LOOP(loop_avx2_f32, AVX2, REP12, 12, __m256, float, 8, _mm256_set1_ps, _mm256_fmadd_ps,
         _mm256_add_ps, _mm256_storeu_ps)
FMA_LOOP(loop_avx2_f64, AVX2, REP12, 12, __m256d, double, 4, _mm256_set1_pd, _mm256_fmadd_pd,
         _mm256_add_pd, _mm256_storeu_pd)
FMA_LOOP(loop_avx512_f32, AVX512, REP16, 16, __m512, float, 16, _mm512_set1_ps, _mm512_fmadd_ps,
         _mm512_add_ps, _mm512_storeu_ps)
FMA_LOOP(loop_avx512_f64, AVX512, REP16, 16, __m512d, double, 8, _mm512_set1_pd, _mm512_fmadd_pd,
         _mm512_add_pd, _mm512_storeu_pd)
#endif

/* The size of cpu0's data or unified cache of `level` (1, 2, 3), in bytes:
 * sysfs (what this core has or shares), else sysconf, else 0. sysfs first:
 * under virtualisation glibc's sysconf can report the host's L3, not the
 * guest's (docs/performance.md, "The benchmark's timings on a shared host"). */
int64_t fb_cache_bytes(int level)
{
    for (int idx = 0; idx < 16; idx++) {
        char path[80], type[32] = "", unit = 0;
        int lv = 0;
        long long size = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f) break;
        int got = fscanf(f, "%d", &lv);
        fclose(f);
        if (got != 1 || lv != level) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        if ((f = fopen(path, "r"))) {
            got = fscanf(f, "%31s", type);
            fclose(f);
            if (got == 1 && !strcmp(type, "Instruction")) continue;
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if (!(f = fopen(path, "r"))) continue;
        got = fscanf(f, "%lld%c", &size, &unit);
        fclose(f);
        if (got >= 1 && size > 0) return size * (unit == 'K' ? 1024LL : unit == 'M' ? 1048576LL : 1LL);
    }
    const long s = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : level == 2 ? _SC_LEVEL2_CACHE_SIZE
                                                                            : _SC_LEVEL3_CACHE_SIZE);
    return s > 0 ? s : 0;
}

/* The last-level cache, else 32 MiB. */
static int64_t llc_bytes(void)
{
    for (int level = 3; level >= 2; level--) {
        const int64_t b = fb_cache_bytes(level);
        if (b > 0) return b;
    }
    return 32LL << 20;
}

static volatile double probe_sink; /* keeps every loop's result live */

/* GFLOPS of `loop` on each of `threads` threads at once (total): calibrated to
 * about 20 ms a trial, the best trial once 10 in a row have not beaten it by
 * 1% (at most 100 trials): a shared host that slows the core for a moment
 * (a busy SMT sibling does not show in CPU time) costs trials, not a low
 * peak and peak fractions above 1 for the whole run. One thread is timed by its own CPU
 * clock: on a shared machine that is the core's throughput while it runs,
 * not the share the scheduler gave it. Several threads are timed by the wall
 * clock (the least disturbed trial is the closest to the machine's peak). */
static double fma_gflops(fma_loop loop, int threads)
{
    double fpi = 0;
    int64_t iters = 1 << 16;
    for (;;) {
        double t0 = fb_thread_cpu_seconds();
        probe_sink = loop(iters, &fpi);
        if (fb_thread_cpu_seconds() - t0 > 0.01 || iters > ((int64_t)1 << 40)) break;
        iters *= 2;
    }
    double best = 0;
    for (int trial = 0, quiet = 0; trial < 100 && quiet < 10; trial++) {
        double t0 = threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds(), sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += loop(iters * 2, &fpi);
        double dt = (threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds()) - t0;
        probe_sink = sink;
        double g = fpi * (double)(iters * 2) * threads / dt * 1e-9;
        quiet = g > 1.01 * best ? 0 : quiet + 1;
        if (g > best) best = g;
    }
    return best;
}

/* Best-of-5 triad bandwidth on `threads` threads, GB/s (clocks as above). */
static double triad(double *a, const double *b, const double *c, int64_t N, int threads)
{
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < N; i++) a[i] = b[i] + 3.0 * c[i];
        double dt = (threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds()) - t0, g = 24.0 * (double)N / dt * 1e-9;
        if (g > best) best = g;
    }
    probe_sink = a[N / 2];
    return best;
}

/* A streaming read, GB/s: every byte of [b, b + N) read once a trial (the
 * best of 5), ORed into accumulators the compiler cannot drop. The input
 * check is such a read (src/finite-scan.c), and one stream of reads does
 * not run at the triad's two read streams and one write stream (the
 * figures: docs/performance.md, "The benchmark's timings on a shared
 * host"). So the check's floor is this figure, the triad the roofline's. Four 32-byte
 * loads an iteration (AVX2 where the CPU has it), each into its own
 * accumulator. */
#if defined(__x86_64__)
AVX2 static uint64_t read_avx2(const double *b, int64_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_or_si256(a0, _mm256_castpd_si256(_mm256_loadu_pd(b + i)));
        a1 = _mm256_or_si256(a1, _mm256_castpd_si256(_mm256_loadu_pd(b + i + 4)));
        a2 = _mm256_or_si256(a2, _mm256_castpd_si256(_mm256_loadu_pd(b + i + 8)));
        a3 = _mm256_or_si256(a3, _mm256_castpd_si256(_mm256_loadu_pd(b + i + 12)));
    }
    const __m256i a = _mm256_or_si256(_mm256_or_si256(a0, a1), _mm256_or_si256(a2, a3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a);
    _mm256_zeroupper();
    uint64_t r = out[0] | out[1] | out[2] | out[3];
    for (; i < n; i++) r |= b[i] != 0;
    return r;
}
#endif

static uint64_t read_portable(const double *b, int64_t n)
{
    double m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        m0 = b[i] > m0 ? b[i] : m0;
        m1 = b[i + 1] > m1 ? b[i + 1] : m1;
        m2 = b[i + 2] > m2 ? b[i + 2] : m2;
        m3 = b[i + 3] > m3 ? b[i + 3] : m3;
    }
    for (; i < n; i++) m0 = b[i] > m0 ? b[i] : m0;
    return (m0 + m1 + m2 + m3) > 0;
}

static double stream_read(const double *b, int64_t N, int threads)
{
#if defined(__x86_64__)
    const int avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx2 = 0;
#endif
    double best = 0;
    uint64_t sink = 0;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds();
#pragma omp parallel num_threads(threads) reduction(| : sink)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            const int64_t lo = N * t / nt, hi = N * (t + 1) / nt;
#if defined(__x86_64__)
            sink |= avx2 ? read_avx2(b + lo, hi - lo) : read_portable(b + lo, hi - lo);
#else
            (void)avx2;
            sink |= read_portable(b + lo, hi - lo);
#endif
        }
        double dt = (threads > 1 ? fb_wall_seconds() : fb_thread_cpu_seconds()) - t0, g = 8.0 * (double)N / dt * 1e-9;
        if (g > best) best = g;
    }
    probe_sink = (double)sink;
    return best;
}

void fb_probe_run(fb_probe *p)
{
    *p = (fb_probe){.best_isa = "scalar"};
    p->threads = omp_get_max_threads();
    fma_loop best32 = loop_scalar, best64 = loop_scalar;
    p->f32_scalar = p->f32_best = fma_gflops(loop_scalar, 1);
    p->f64_scalar = p->f64_best = p->f32_scalar; /* the fallback loop is double */
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        p->f32_avx2 = fma_gflops(loop_avx2_f32, 1);
        p->f64_avx2 = fma_gflops(loop_avx2_f64, 1);
        if (p->f32_avx2 > p->f32_best) p->f32_best = p->f32_avx2, best32 = loop_avx2_f32, p->best_isa = "avx2+fma";
        if (p->f64_avx2 > p->f64_best) p->f64_best = p->f64_avx2, best64 = loop_avx2_f64;
    }
    if (__builtin_cpu_supports("avx512f")) {
        p->f32_avx512 = fma_gflops(loop_avx512_f32, 1);
        p->f64_avx512 = fma_gflops(loop_avx512_f64, 1);
        if (p->f32_avx512 > p->f32_best) p->f32_best = p->f32_avx512, best32 = loop_avx512_f32, p->best_isa = "avx512f";
        if (p->f64_avx512 > p->f64_best) p->f64_best = p->f64_avx512, best64 = loop_avx512_f64;
    }
#endif
    p->f32_all = fma_gflops(best32, p->threads);
    p->f64_all = fma_gflops(best64, p->threads);

    /* Three arrays, each twice the last-level cache and at least 64 MiB
     * (at most 512 MiB: some hypervisors report the whole host's L3). */
    int64_t bytes = 2 * llc_bytes();
    if (bytes < (64 << 20)) bytes = 64 << 20;
    if (bytes > (512 << 20)) bytes = 512 << 20;
    int64_t N = bytes / 8;
    double *a = malloc(3 * (size_t)bytes);
    if (!a) return;
    double *b = a + N, *c = b + N;
#pragma omp parallel for schedule(static) /* first touch where the triad runs */
    for (int64_t i = 0; i < N; i++) a[i] = 0, b[i] = 1, c[i] = 0.5;
    p->buffer_mib = (double)bytes / (1 << 20);
    p->bw_1 = triad(a, b, c, N, 1);
    p->bw_all = triad(a, b, c, N, p->threads);
    /* all three arrays: the caches hold none of it after the triad */
    p->read_1 = stream_read(a, 3 * N, 1);
    p->read_all = stream_read(a, 3 * N, p->threads);
    free(a);
}
