/* The benchmarks' inputs: one shape's [1][T][H][D] tensors, generated from a
 * seed that depends only on the shape (the same inputs on every machine),
 * shared by falcon-bench (bench/cases.c) and falcon-scaling. */
#ifndef FALCON_BENCH_INPUTS_H
#define FALCON_BENCH_INPUTS_H

#include <stdint.h>
#include "falcon.h"

typedef struct fb_inputs {
    int64_t T, H, n, m;
    falcon_precision prec;
    int has_gain;
    void *q, *k, *v, *beta, *alpha, *gain, *out; /* out: zeroed, [T][H][m] */
} fb_inputs;

/* q, k, v uniform in [-1, 1), beta in [0.5, 1) (every step non-expansive),
 * alpha in [0.99, 1) (mild decay), gain in [0.5, 1.5) when has_gain.
 * 0, or -1 when out of memory (in is then empty). */
int fb_inputs_make(fb_inputs *in, int64_t T, int64_t H, int64_t n, int64_t m, falcon_precision prec,
                   int has_gain);
void fb_inputs_free(fb_inputs *in);
/* alpha as fb_inputs_make drew it, again (after a caller changed it). */
void fb_inputs_alpha_redraw(fb_inputs *in);
/* The view falcon_run takes (B = 1; gain only where the variant has one). */
falcon_inputs fb_inputs_view(const fb_inputs *in, falcon_variant variant);

#endif
