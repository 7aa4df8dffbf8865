#include <stdlib.h>
#include <string.h>
#include "inputs.h"

/* splitmix64: a seeded, portable stream (the same inputs on every machine). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* One value uniform in [lo, hi). */
static double draw(uint64_t *s, double lo, double hi) { return lo + (hi - lo) * (double)(rng_next(s) >> 11) * 0x1.0p-53; }

/* count values uniform in [lo, hi), stored as the precision's type. */
static void *fill(uint64_t *s, int64_t count, double lo, double hi, falcon_precision prec)
{
    void *p = malloc((size_t)count * (prec == FALCON_FP32 ? 4 : 8) + 1);
    if (!p) return NULL;
    for (int64_t i = 0; i < count; i++) {
        const double u = draw(s, lo, hi);
        if (prec == FALCON_FP32) ((float *)p)[i] = (float)u;
        else ((double *)p)[i] = u;
    }
    return p;
}

/* The output written now, every page, so that the first timed call does
 * not fault its pages in: the largest cases are timed over one call, which
 * the faults would dominate (docs/performance.md, "The benchmark's timings
 * on a shared host"). Not as malloc then memset(0): GCC turns that pair
 * into calloc, whose large blocks are fresh pages left untouched. The
 * volatile stores to each
 * page cannot be merged away, and the memset after them only sets the
 * contents. */
static void touch_zero(void *p, size_t bytes)
{
    volatile unsigned char *b = p;
    for (size_t i = 0; i < bytes; i += 4096) b[i] = 0;
    memset(p, 0, bytes);
}

void fb_inputs_free(fb_inputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->beta), free(in->alpha), free(in->gain), free(in->out);
    memset(in, 0, sizeof *in);
}

#define ALPHA_LO 0.99 /* mild decay: alpha uniform in [0.99, 1) */
#define ALPHA_HI 1.0

static uint64_t shape_seed(int64_t T, int64_t H, int64_t n, int64_t m)
{
    return 0x46616c636f6eull ^ ((uint64_t)T << 40) ^ ((uint64_t)H << 28) ^ ((uint64_t)n << 14) ^ (uint64_t)m;
}

void fb_inputs_alpha_redraw(fb_inputs *in)
{
    const int64_t TH = in->T * in->H;
    /* splitmix64 steps its state by a constant: alpha's draws start after
     * those of q, k, v and beta */
    uint64_t s = shape_seed(in->T, in->H, in->n, in->m) +
                 (uint64_t)(TH * (2 * in->n + in->m + 1)) * 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < TH; i++) {
        const double u = draw(&s, ALPHA_LO, ALPHA_HI);
        if (in->prec == FALCON_FP32) ((float *)in->alpha)[i] = (float)u;
        else ((double *)in->alpha)[i] = u;
    }
}

int fb_inputs_make(fb_inputs *in, int64_t T, int64_t H, int64_t n, int64_t m, falcon_precision prec,
                   int has_gain)
{
    const int64_t TH = T * H, size = prec == FALCON_FP32 ? 4 : 8;
    uint64_t s = shape_seed(T, H, n, m);
    *in = (fb_inputs){.T = T, .H = H, .n = n, .m = m, .prec = prec, .has_gain = has_gain};
    in->q = fill(&s, TH * n, -1, 1, prec);
    in->k = fill(&s, TH * n, -1, 1, prec);
    in->v = fill(&s, TH * m, -1, 1, prec);
    in->beta = fill(&s, TH, 0.5, 1, prec);
    in->alpha = fill(&s, TH, ALPHA_LO, ALPHA_HI, prec);
    in->gain = has_gain ? fill(&s, TH * n, 0.5, 1.5, prec) : NULL;
    in->out = malloc((size_t)(TH * m) * (size_t)size);
    if (in->out) touch_zero(in->out, (size_t)(TH * m) * (size_t)size);
    if (!in->q || !in->k || !in->v || !in->beta || !in->alpha || (has_gain && !in->gain) || !in->out) {
        fb_inputs_free(in);
        return -1;
    }
    return 0;
}

falcon_inputs fb_inputs_view(const fb_inputs *in, falcon_variant variant)
{
    return (falcon_inputs){.B = 1, .T = in->T, .H = in->H, .n = in->n, .m = in->m, .q = in->q, .k = in->k,
                           .v = in->v, .beta = in->beta, .alpha = in->alpha,
                           .gain = falcon_variant_has_gain(variant) ? in->gain : NULL};
}
