/*
 * median.h: the median of a few timings or rates, the one statistic the
 * benchmarks quote (the phase and check shares, the paired decay ratio, the
 * yardstick's repetitions, falcon compare's samples). Sorts v in place; the
 * mean of the middle two for an even count. n >= 1.
 */
#ifndef FALCON_BENCH_MEDIAN_H
#define FALCON_BENCH_MEDIAN_H

#include <stddef.h>
#include <stdlib.h>

static inline int fb_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double fb_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, fb_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
