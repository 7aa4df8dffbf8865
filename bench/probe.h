/*
 * probe.h: the machine's measured peaks, taken at startup in the same run as
 * the benchmarks (same build, same clocks and power state). One-thread
 * figures are timed by the thread's CPU clock, so a busy shared machine
 * does not lower the peak: there, wall-clock throughput below it shows up as
 * a lower peak fraction (and as real_time above cpu_time in the report).
 */
#ifndef FALCON_BENCH_PROBE_H
#define FALCON_BENCH_PROBE_H

#include <stdint.h>

typedef struct fb_probe {
    /* FMA throughput of one core, GFLOPS (an FMA = 2 flops), per ISA; 0 when
     * the CPU lacks the ISA. "best" is the largest, and its ISA's name. */
    double f32_scalar, f64_scalar, f32_avx2, f64_avx2, f32_avx512, f64_avx512;
    double f32_best, f64_best;
    const char *best_isa;
    /* The best ISA's loop on every thread at once (for comparison only: the
     * peak of a t-thread case is t x the per-core figure). */
    double f32_all, f64_all;
    int threads;
    /* STREAM triad a = b + s c, GB/s (24 bytes per element, no write-allocate
     * counted), over three arrays of buffer_mib MiB each. */
    double bw_1, bw_all, buffer_mib;
    /* A streaming read of the same three arrays, GB/s (one read stream a
     * thread, as the input check reads): the check's floor. */
    double read_1, read_all;
} fb_probe;

/* The size of cpu0's level-`level` data or unified cache in bytes (sysfs,
 * else sysconf; 0 when neither knows). */
int64_t fb_cache_bytes(int level);

/* Runs the probes (a few seconds). */
void fb_probe_run(fb_probe *p);

#endif
