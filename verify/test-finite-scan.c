/*
 * The validation pass's finiteness scan (src/finite-scan.c) on its own:
 * every path it takes (the vector bodies, their tails, the threads' pieces
 * and the remainder after them) must find one infinity or NaN wherever it
 * sits, in fp32 and fp64, and must pass the extremes of the finite range
 * (the largest number, subnormals, -0). The gate's inputs are too short or
 * too clean to reach most of these paths.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "../src/internal.h"

/* Lengths around every vector width and unroll (4 x 16 floats is the
 * widest step), around the 4096-element pieces, and past the 256 pieces
 * above which the threads share them. */
#define SHARED (257 * 4096 + 33)
static const int64_t lengths[] = {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 257,
                                  4095, 4096, 4097, 3 * 4096 + 77, SHARED};

static void set(void *p, int f32, int64_t i, double x)
{
    if (f32) ((float *)p)[i] = (float)x;
    else ((double *)p)[i] = x;
}

/* Positions to poison: all of them for short arrays, else the edges of
 * every 64-element step and of the pieces, and a stride through the rest. */
static int probe_at(int64_t i, int64_t len)
{
    if (len == SHARED) /* a few pieces' edges, the middle, the remainder */
        return i < 2 || (i >= 4094 && i < 4098) || i == len / 2 || (i >= 256 * 4096 - 1 && i < 256 * 4096 + 1) ||
               (i >= 257 * 4096 - 1 && i < 257 * 4096 + 1) || len - i <= 3;
    return len <= 300 || i % 64 < 2 || i % 64 > 61 || i % 4096 < 2 || len - i <= 65 || i % 97 == 0;
}

static void scan_everywhere(int f32, int threads, int isa)
{
    const falcon_precision prec = f32 ? FALCON_FP32 : FALCON_FP64;
    const double extremes[] = {f32 ? FLT_MAX : DBL_MAX, f32 ? -FLT_MAX : -DBL_MAX, f32 ? 0x1p-149 : 0x1p-1074, -0.0, 1.0};
    const double bad[] = {INFINITY, -INFINITY, NAN};
    int64_t missed = 0, wrong = 0, probes = 0;
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        const int64_t len = lengths[l];
        /* The scan aligns its vector loads to 64 bytes after a head of
         * up to 15 floats (7 doubles): arrays that start on the boundary,
         * one element past it and one element before the next. */
        const int64_t per_line = f32 ? 16 : 8, offsets[] = {0, 1, per_line - 1};
        for (size_t o = 0; o < sizeof offsets / sizeof *offsets; o++) {
            char *mem = aligned_alloc(64, (size_t)(len + per_line) * 8 / 64 * 64 + 64);
            cr_assert(mem);
            void *p = mem + offsets[o] * (f32 ? 4 : 8);
            for (int64_t i = 0; i < len; i++) set(p, f32, i, extremes[i % 5]);
            wrong += !falcon_all_finite_isa(p, prec, len, threads, isa);
            for (int64_t i = 0; i < len; i++) {
                if (!probe_at(i, len)) continue;
                set(p, f32, i, bad[i % 3]);
                missed += falcon_all_finite_isa(p, prec, len, threads, isa);
                probes++;
                set(p, f32, i, extremes[i % 5]);
            }
            free(mem);
        }
    }
    static const char *const isa_name[] = {"portable", "avx2", "avx512"};
    cr_expect_eq(wrong, 0, "%s %s, %d thread(s): %lld all-finite arrays refused", isa_name[isa],
                 f32 ? "fp32" : "fp64", threads, (long long)wrong);
    cr_expect_eq(missed, 0, "%s %s, %d thread(s): %lld of %lld poisoned elements missed", isa_name[isa],
                 f32 ? "fp32" : "fp64", threads, (long long)missed, (long long)probes);
}

/* Every body this CPU runs, not only the one the library picks. */
static void scan_every_isa(int f32, int threads)
{
    for (int isa = 0; isa <= falcon_finite_scan_isa(); isa++) scan_everywhere(f32, threads, isa);
}

Test(finite_scan, fp32_one_thread) { scan_every_isa(1, 1); }
Test(finite_scan, fp64_one_thread) { scan_every_isa(0, 1); }
Test(finite_scan, fp32_two_threads) { scan_every_isa(1, 2); }
Test(finite_scan, fp64_two_threads) { scan_every_isa(0, 2); }

/*
 * The scan leaves the upper halves of the vector registers clean when it
 * returns (src/finite-scan.c, SCAN_CLEAN_UPPER), and so does every CPU
 * backend's run: a dirty upper half makes each legacy SSE instruction after
 * it (the scalar backend, the library's baseline code, the caller's) depend
 * on the register's old value, and it stays dirty until something cleans
 * it. A run must also clean what its caller left dirty, before the
 * scalar backend and the baseline code run (the validation's scan does).
 * Read with XINUSE (xgetbv with ecx = 1): bit 2 is set while the upper
 * halves of ymm0-15 are not zero, bit 6 those of zmm0-15.
 */
#if defined(__x86_64__) && !defined(FALCON_NO_X86_DISPATCH)
#include <cpuid.h>
#include <immintrin.h>
#include "gate.h"

#define UPPER_DIRTY 0x44u

/* The XINUSE bits, or -1 where the CPU cannot say. */
static long xinuse(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 4) || !__builtin_cpu_supports("avx")) return -1;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (long)lo;
}

__attribute__((target("avx"))) static void clean_upper(void) { _mm256_zeroupper(); }

/* What a caller's AVX code may leave behind: ymm0's upper half not zero.
 * Plain asm in a baseline function (only called where AVX runs): an AVX
 * function of GCC's would clean up on return. */
__attribute__((noinline)) static void dirty_upper(void)
{
    static const float one = 1;
    __asm__ volatile("vbroadcastss %0, %%ymm0" : : "m"(one) : "xmm0");
}

static long dirty_after_scan(const void *p, int f32, int64_t len, int isa)
{
    clean_upper();
    (void)falcon_all_finite_isa(p, f32 ? FALCON_FP32 : FALCON_FP64, len, 1, isa);
    return xinuse() & UPPER_DIRTY;
}

Test(finite_scan, leaves_the_upper_halves_clean)
{
    if (xinuse() < 0) cr_skip_test("this CPU does not report XINUSE");
    const int64_t lens[] = {1, 31, 64, 65, 4097};
    for (int isa = 1; isa <= falcon_finite_scan_isa(); isa++)
        for (int f32 = 0; f32 < 2; f32++)
            for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
                const int64_t len = lens[l];
                double *mem = calloc((size_t)len, sizeof(double));
                cr_assert(mem);
                /* finite throughout (the tail runs), then a NaN first and last */
                for (int where = -1; where < 2; where++) {
                    if (where >= 0) set(mem, f32, where ? len - 1 : 0, NAN);
                    cr_expect_eq(dirty_after_scan(mem, f32, len, isa), 0,
                                 "isa %d, %s, %lld elements, NaN at %d: upper halves left dirty", isa,
                                 f32 ? "fp32" : "fp64", (long long)len, where);
                    if (where >= 0) set(mem, f32, where ? len - 1 : 0, 0);
                }
                free(mem);
            }
}

Test(finite_scan, runs_leave_the_upper_halves_clean)
{
    if (xinuse() < 0) cr_skip_test("this CPU does not report XINUSE");
    enum { T = 40, n = 20, m = 12 };
    static double q[T * n], k[T * n], v[T * m], beta[T], alpha[T], out[T * m];
    static float qf[T * n], kf[T * n], vf[T * m], betaf[T], alphaf[T], outf[T * m];
    for (int i = 0; i < T * n; i++) q[i] = k[i] = qf[i] = kf[i] = 0.25f * (float)(i % 7) - 0.75f;
    for (int i = 0; i < T * m; i++) v[i] = vf[i] = 0.5f - 0.125f * (float)(i % 5);
    for (int i = 0; i < T; i++) beta[i] = betaf[i] = 0.5f, alpha[i] = alphaf[i] = 0.875f;
    const falcon_form forms[] = {FALCON_FORM_RECURRENT, FALCON_FORM_PARALLEL, FALCON_FORM_CHUNK};
    for (int b = 0; b < gate_backend_count; b++)
        for (int fp64 = 0; fp64 < 2; fp64++)
            for (int f = 0; f < 3; f++) {
                const falcon_precision prec = fp64 ? FALCON_FP64 : FALCON_FP32;
                if (!gate_backend_runs(gate_backends[b], prec)) continue;
                falcon_config cfg;
                falcon_config_default(&cfg);
                cfg.precision = prec, cfg.form = forms[f], cfg.backend = gate_backends[b], cfg.chunk = 8;
                cfg.threads = 1;
                falcon_inputs in = fp64 ? falcon_inputs_sequence(T, n, m, q, k, v, beta, alpha, NULL)
                                        : falcon_inputs_sequence(T, n, m, qf, kf, vf, betaf, alphaf, NULL);
                dirty_upper(); /* the caller's state must not slow the run's baseline code */
                cr_assert_neq(xinuse() & UPPER_DIRTY, 0, "the test could not dirty the upper halves");
                const falcon_status s = falcon_run(&cfg, &in, NULL, fp64 ? (void *)out : (void *)outf);
                const long dirty = xinuse() & UPPER_DIRTY;
                cr_assert_eq(s, FALCON_OK, "%s", falcon_last_error());
                cr_expect_eq(dirty, 0, "%s %s %s: the run left the upper halves dirty",
                             falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                             falcon_form_name(forms[f]));
            }
}
#endif
