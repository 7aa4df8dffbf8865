/*
 * ukernels.h: each CPU backend's micro-kernels benchmarked on their own
 * (bench/ukernels.c), on the shapes the drivers give them, with their
 * operands in cache.
 */
#ifndef FALCON_BENCH_UKERNELS_H
#define FALCON_BENCH_UKERNELS_H

#include "falcon.h"

/* Registers the entries for the backends bs[0 .. nb) (CPU ones); full: the
 * full sweep's larger set. peak_f32, peak_f64: the probed per-core peaks
 * in GFLOPS (<= 0: no peak_fraction counter). 0, or -1 without memory. */
int fb_ukernels_register(const falcon_backend *bs, int nb, int full, double peak_f32, double peak_f64);
void fb_ukernels_free(void);

#endif
