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
