/* The backward pass's cases of build/falcon-bench (bench/backward.c). */
#ifndef FALCON_BENCH_BACKWARD_H
#define FALCON_BENCH_BACKWARD_H

#include "falcon.h"

/* backward/<case> for Falcon-1 fp32, T = 4096, one head, one thread. The
 * default sweep: the chunk form (C = 64) at n = m = 128 on each of the ncpu
 * CPU backends, and the recurrent one there on the best backend, which
 * also runs both forms at n = m = 64 (a scalar recurrent backward at 128
 * takes 0.5 s or more a call); full: both forms at n = m = 64 and 128 on
 * every CPU backend. f32_peak: the probed per-core fp32 FMA peak in GFLOPS
 * (0: no peak_fraction). checks_once: backward_over_forward in each case's
 * first repetition only (falcon-bench --checks-once). 0, or -1 when out of
 * memory. */
int fb_backward_register(const falcon_backend *cpu, int ncpu, falcon_backend best, int full, double f32_peak,
                         int checks_once);
void fb_backward_free(void);

#endif
