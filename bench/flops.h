/*
 * flops.h: the work and the compulsory memory traffic of one falcon_run call,
 * the denominators of the benchmark's GFLOPS, peak and roofline counters.
 * The flop counts are documented in kernels/framework/flops.h.
 */
#ifndef FALCON_BENCH_FLOPS_H
#define FALCON_BENCH_FLOPS_H

#include <stdint.h>
#include "falcon.h"

/* Floating-point operations (an FMA counts 2) of a run of H heads of T
 * steps, fresh state, with cfg's variant, form, alignment, window and chunk. */
double fb_flops(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m);

/* Bytes that must cross memory at least once: the inputs read, the outputs
 * written, each head's state read and written (in double). */
double fb_bytes(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m);

/* Of those, the per-step inputs (q, k, v, beta, alpha, and the gains):
 * what the validation pass reads before anything is written. */
double fb_input_bytes(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m);

#endif
