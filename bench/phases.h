/*
 * phases.h: the blocked driver's phases (kernels/framework/phase-clock.h)
 * as shares of a call, for the benchmark's chunk and masked-parallel
 * cases: driver_fraction, the driver's own loops (the copy of keys and
 * queries, the next block's prefetches, the packing of Z^T, the terms, the
 * system's rows, the output rows); kernel_fraction, the phases that are
 * micro-kernel calls (products, solve, W R, end state); with shares, one
 * phase_<phase> counter each. Each the median of the shares of up to three
 * untimed calls with the phase clock on, the call timed by the same clock;
 * with P threads over P times the call. The rest of a call is its
 * validation, its setup and the state's load and store. The clock's reads
 * cost about 0.3% of a block.
 */
#ifndef FALCON_BENCH_PHASES_H
#define FALCON_BENCH_PHASES_H

#include "falcon.h"
#include "side-checks.h"
#include "../kernels/framework/phase-clock.h"

typedef struct fb_phase_samples {
    int n;
    double drv[3], ker[3], ph[FW_PH_COUNT][3];
} fb_phase_samples;

/* One call with the phase clock on (workers: the threads that can work at
 * once), its shares added to ps; with name non-NULL, its phases printed to
 * stderr. 1 if the call ran, 0 if it failed, -1 if it ran no blocked driver
 * (cuda, reference) or ps is full. */
int fb_phase_sample(const falcon_config *cfg, const falcon_inputs *fi, void *out, int workers, const char *name,
                    fb_phase_samples *ps);

/* The medians of ps as counters (fb_side_set with keep); nothing if ps is empty. */
void fb_phase_counters(fb_state *st, const fb_phase_samples *ps, int shares, fb_side *keep);

#endif
