/*
 * clock.h: the two clocks the benchmarks time with, in seconds. The wall
 * clock (CLOCK_MONOTONIC) for calls whose heads run on other threads; the
 * calling thread's CPU time for single-thread probes that a busy host's
 * scheduling should not inflate.
 */
#ifndef FALCON_BENCH_CLOCK_H
#define FALCON_BENCH_CLOCK_H

#include <time.h>

static inline double fb_wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double fb_thread_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
