/*
 * The chunk driver's phase clock (kernels/framework/phase-clock.h,
 * kernels/framework/phase-clock.c): its figures are the benchmark's driver share and
 * decide what gets tuned. The histogram its medians come from must keep
 * every time to within a bin's width, the median must be the middle
 * block's, not the mean's, the record must start empty at each begin, and
 * a chunk call with the clock on must fill it with phases that lie inside
 * the call.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "../kernels/framework/phase-clock.h"
#include "falcon.h"

/* Bins of FW_PH_BIN_BITS bits below the leading one: a bin's middle is
 * within half a bin, 2^-(FW_PH_BIN_BITS + 1) of the time, or exact below
 * 2^FW_PH_BIN_BITS. */
static void check_time(unsigned long long v)
{
    const int k = falcon_phase_bin(v);
    cr_assert(k >= 0 && k < FW_PH_BINS, "time %llu: bin %d of %d", v, k, (int)FW_PH_BINS);
    const double x = falcon_phase_bin_value(k), tol = (double)v / (2 << FW_PH_BIN_BITS) + 0.5;
    cr_assert(fabs(x - (double)v) <= tol, "time %llu: bin %d reads %.1f", v, k, x);
    if (v + 1 != 0) cr_assert(falcon_phase_bin(v + 1) >= k, "time %llu: the next time falls in an earlier bin", v);
}

Test(phase_clock, a_bin_keeps_its_times_to_half_its_width)
{
    for (unsigned long long v = 0; v < 4096; v++) check_time(v);
    for (int b = 6; b < 64; b++) {
        const unsigned long long p = 1ull << b;
        check_time(p - 1), check_time(p), check_time(p + 1), check_time(p + p / 3);
    }
    check_time(~0ull);
    unsigned long long s = 12345;
    for (int i = 0; i < 100000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        check_time(s >> (s % 40));
    }
}

/* `times` blocks whose phase ph took v (the others 0), as the marks add them. */
static void put(int ph, unsigned long long v, int times)
{
    unsigned long long t[FW_PH_COUNT] = {0};
    t[ph] = v;
    for (int i = 0; i < times; i++) falcon_phase_clock_add_block(t, "test", "fp32");
}

Test(phase_clock, the_median_is_the_middle_block_not_the_mean)
{
    falcon_phase_clock_begin();
    /* 51 blocks of 10,000 ticks and 49 the host held up for 10^9: the
     * median is 10,000 (the mean about 4.9 x 10^8) ... */
    put(0, 10000, 51);
    put(0, 1000000000ull, 49);
    /* ... and with the majority the other way, the slow one. */
    put(1, 10000, 49);
    put(1, 1000000000ull, 51);
    /* Times 1000 .. 1998 once each: the middle is 1499. */
    for (unsigned long long v = 1000; v < 1999; v++) put(2, v, 1);
    falcon_phase_summary sm;
    falcon_phase_clock_end(&sm);
    cr_assert_eq(falcon_phase_clock_on(), 0, "end switches the clock off");
    cr_assert_eq(sm.blocks, 100 + 100 + 999, "%llu blocks", sm.blocks);
    /* every block put 0 in the phases it did not name: phase 0's 10,000s
     * and 10^9s are 100 of 1199 blocks, so its median is 0 */
    cr_assert_eq(sm.median[3], 0, "a phase with only zero times has median 0");
    cr_assert(fabs(sm.total[0] - (51 * 10000.0 + 49 * 1e9)) < 1, "total %.0f", sm.total[0]);
    cr_assert(fabs(sm.mean[0] - sm.total[0] / 1199) < 1e-6 * sm.mean[0], "mean %.1f", sm.mean[0]);
    cr_assert_str_eq(sm.isa, "test");
    cr_assert_str_eq(sm.prec, "fp32");

    /* The medians alone: one phase's blocks only at a time. */
    falcon_phase_clock_begin();
    cr_assert_eq(falcon_phase_clock_on(), 1, "begin switches the clock on");
    put(0, 10000, 51);
    put(0, 1000000000ull, 49);
    falcon_phase_clock_end(&sm);
    cr_assert(fabs(sm.median[0] - 10000) <= 10000.0 / 128 + 0.5, "median %.1f, expected 10000", sm.median[0]);
    cr_assert(sm.mean[0] > 4e8, "the mean %.3g is the held-up blocks' too", sm.mean[0]);
    falcon_phase_clock_begin();
    put(1, 10000, 49);
    put(1, 1000000000ull, 51);
    falcon_phase_clock_end(&sm);
    cr_assert(fabs(sm.median[1] - 1e9) <= 1e9 / 128, "median %.1f, expected 1e9", sm.median[1]);
    cr_assert_eq(sm.blocks, 100, "begin emptied the record (%llu blocks)", sm.blocks);
    falcon_phase_clock_begin();
    for (unsigned long long v = 1000; v < 1999; v++) put(2, v, 1);
    falcon_phase_clock_end(&sm);
    cr_assert(fabs(sm.median[2] - 1499) <= 1499.0 / 128 + 0.5, "median %.1f, expected 1499", sm.median[2]);
    falcon_phase_clock_begin();
    falcon_phase_clock_end(&sm);
    cr_assert_eq(sm.blocks, 0);
    cr_assert_eq(sm.median[0], 0, "no blocks: median 0");
    cr_assert_str_eq(sm.isa, "none");
}

/* A chunk call with the clock on: one record a block (T / C blocks a head),
 * every phase inside the call, the driver's phases and the kernels' both
 * there; off, a call adds nothing. */
Test(phase_clock, a_chunk_call_fills_it_with_phases_inside_the_call)
{
    enum { T = 256, H = 2, N = 16, C = 32 };
    static float q[T * H * N], k[T * H * N], v[T * H * N], o[T * H * N], b[T * H], a[T * H];
    unsigned s = 7;
    for (int i = 0; i < T * H * N; i++) {
        s = s * 1664525u + 1013904223u, q[i] = (float)((s >> 8) * 0x1p-24 - 0.5);
        s = s * 1664525u + 1013904223u, k[i] = (float)((s >> 8) * 0x1p-24 - 0.5);
        s = s * 1664525u + 1013904223u, v[i] = (float)((s >> 8) * 0x1p-24 - 0.5);
    }
    for (int i = 0; i < T * H; i++) b[i] = 0.5f, a[i] = 0.99f;
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.form = FALCON_FORM_CHUNK;
    cfg.precision = FALCON_FP32;
    cfg.chunk = C;
    cfg.threads = 1;
    falcon_inputs in = {.B = 1, .T = T, .H = H, .n = N, .m = N, .q = q, .k = k,
                        .v = v, .beta = b, .alpha = a, .gain = NULL};
    falcon_phase_summary sm;
    falcon_phase_clock_begin();
    const unsigned long long t0 = falcon_phase_clock_now();
    cr_assert_eq(falcon_run(&cfg, &in, NULL, o), FALCON_OK, "%s", falcon_last_error());
    const unsigned long long t1 = falcon_phase_clock_now();
    falcon_phase_clock_end(&sm);
    cr_assert_eq(sm.blocks, (unsigned long long)(H * (T / C)), "%llu blocks", sm.blocks);
    double all = 0, driver = 0;
    for (int i = 0; i < FW_PH_COUNT; i++) {
        all += sm.total[i];
        if (FW_PH_IS_DRIVER(i)) driver += sm.total[i];
    }
    cr_assert(all <= (double)(t1 - t0), "the phases (%.0f) lie inside the call (%llu)", all, t1 - t0);
    cr_assert(sm.total[FW_PH_PRODUCTS] > 0 && sm.total[FW_PH_END_STATE] > 0 && sm.total[FW_PH_COPY] > 0,
              "products %.0f, end state %.0f, copy %.0f", sm.total[FW_PH_PRODUCTS], sm.total[FW_PH_END_STATE],
              sm.total[FW_PH_COPY]);
    cr_assert(driver > 0 && driver < all, "driver %.0f of %.0f", driver, all);
    cr_assert_eq(falcon_run(&cfg, &in, NULL, o), FALCON_OK);
    falcon_phase_clock_end(&sm); /* off: the record is as the first call left it */
    cr_assert_eq(sm.blocks, (unsigned long long)(H * (T / C)), "a call with the clock off added blocks");
}
