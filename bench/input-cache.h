/* falcon-bench's inputs (bench/input-cache.c): the sets of bench/inputs.c
 * kept a few at a time, and the decay entries' alpha. */
#ifndef FALCON_BENCH_INPUT_CACHE_H
#define FALCON_BENCH_INPUT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "inputs.h"

/* The inputs of a shape, drawn once while they stay in the cache (up to 8
 * sets within min(2 GiB, an eighth of the memory)); decay >= 0: alpha holds
 * that gate_decay regime (fb_alpha_set_decay), -1: alpha as drawn. Valid
 * until the next call. NULL with the reason in why when a set needs over
 * half the memory or memory runs out. */
const fb_inputs *fb_inputs_get(int64_t T, int64_t H, int64_t n, int64_t m, falcon_precision prec, int has_gain,
                               int decay, char *why, size_t len);
void fb_inputs_cache_free(void);

/* alpha [T][H] of a decay entry: the gate's regime d (gate/gate.c), the
 * same values on every backend and machine. */
void fb_alpha_set_decay(void *alpha, int64_t T, int64_t H, falcon_precision prec, int d);

#endif
