/*
 * The chunk driver's phase clock (kernels/framework/phase-clock.h) is a
 * build-time diagnostic, but its figures decide what gets tuned: the
 * histogram its medians come from must keep every time to within a bin's
 * width, and the median must be the middle block's, not the mean's. The
 * header is compiled here with the clock on, as a -DFW_PHASE_CLOCK build
 * compiles it.
 */
#define FW_PHASE_CLOCK 1
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "../kernels/framework/phase-clock.h"

/* Bins of FW_PH_BIN_BITS bits below the leading one: a bin's middle is
 * within half a bin, 2^-(FW_PH_BIN_BITS + 1) of the time, or exact below
 * 2^FW_PH_BIN_BITS. */
static void check_time(unsigned long long v)
{
    const int k = fw_phase_bin(v);
    cr_assert(k >= 0 && k < FW_PH_BINS, "time %llu: bin %d of %d", v, k, (int)FW_PH_BINS);
    const double x = fw_phase_bin_value(k), tol = (double)v / (2 << FW_PH_BIN_BITS) + 0.5;
    cr_assert(fabs(x - (double)v) <= tol, "time %llu: bin %d reads %.1f", v, k, x);
    if (v + 1 != 0) cr_assert(fw_phase_bin(v + 1) >= k, "time %llu: the next time falls in an earlier bin", v);
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

static void put(int ph, unsigned long long v, int times)
{
    for (int i = 0; i < times; i++) fw_phase_hist[ph][fw_phase_bin(v)]++;
}

Test(phase_clock, the_median_is_the_middle_block_not_the_mean)
{
    memset(fw_phase_hist, 0, sizeof fw_phase_hist);
    /* 51 blocks of 10,000 ticks and 49 the host held up for 10^9: the
     * median is 10,000 (the mean would be about 5 x 10^8) ... */
    put(0, 10000, 51);
    put(0, 1000000000ull, 49);
    const double m0 = fw_phase_median(0);
    cr_assert(fabs(m0 - 10000) <= 10000.0 / 128 + 0.5, "median %.1f, expected 10000", m0);
    /* ... and with the majority the other way, the slow one. */
    put(1, 10000, 49);
    put(1, 1000000000ull, 51);
    const double m1 = fw_phase_median(1);
    cr_assert(fabs(m1 - 1e9) <= 1e9 / 128, "median %.1f, expected 1e9", m1);
    /* Times 1000 .. 1998 once each: the middle is 1499. */
    for (unsigned long long v = 1000; v < 1999; v++) put(2, v, 1);
    const double m2 = fw_phase_median(2);
    cr_assert(fabs(m2 - 1499) <= 1499.0 / 128 + 0.5, "median %.1f, expected 1499", m2);
    cr_assert_eq(fw_phase_median(3), 0, "a phase with no blocks has median 0");
    memset(fw_phase_hist, 0, sizeof fw_phase_hist);
    /* reached through the FW_PHASE_ macros only */
    (void)fw_phase_report, (void)fw_phase_last, (void)fw_phase_block;
}
