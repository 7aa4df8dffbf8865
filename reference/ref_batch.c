/*
 * One head of a [B][T][H][D] batch as the reference's contiguous double
 * inputs, with that head's carried state: shared by the mpfr backend and by
 * the gate, which calls the reference directly (not through falcon_run).
 */
#include "falcon_ref.h"

static double load(const void *p, falcon_precision prec, int64_t i)
{
    return prec != FALCON_FP64 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Rows t of a [B][T][H][width] tensor for head (b, h), contiguous. */
static void gather(const void *src, falcon_precision prec, const falcon_inputs *in, int64_t b,
                   int64_t h, int64_t width, double *dst)
{
    for (int64_t t = 0; t < in->T; t++)
        for (int64_t i = 0; i < width; i++)
            dst[t * width + i] = load(src, prec, ((b * in->T + t) * in->H + h) * width + i);
}

size_t falcon_ref_head_doubles(const falcon_inputs *in)
{
    const int64_t T = in->T, n = in->n, m = in->m;
    return (size_t)(3 * T * n + T * m + 2 * T) + 1;
}

void falcon_ref_head_gather(const falcon_inputs *in, falcon_precision prec,
                            const falcon_state_view *st, int64_t hh, double *buf,
                            falcon_ref_head *out)
{
    const int64_t T = in->T, n = in->n, m = in->m, b = hh / in->H, h = hh % in->H;
    double *q = buf, *k = q + T * n, *g = k + T * n, *v = g + T * n, *beta = v + T * m;
    double *alpha = beta + T;
    gather(in->q, prec, in, b, h, n, q);
    gather(in->k, prec, in, b, h, n, k);
    gather(in->v, prec, in, b, h, m, v);
    gather(in->beta, prec, in, b, h, 1, beta);
    if (in->alpha) gather(in->alpha, prec, in, b, h, 1, alpha);
    if (in->gain) gather(in->gain, prec, in, b, h, n, g);
    *out = (falcon_ref_head){
        .T = T, .n = n, .m = m, .q = q, .k = k, .v = v, .beta = beta,
        .alpha = in->alpha ? alpha : NULL, .gain = in->gain ? g : NULL,
        .S0 = st ? st->S + hh * m * n : NULL,
        .prev_key = st && st->has_prev[hh] ? st->prev_key + hh * n : NULL,
        .hist_k = st ? st->hist_k + hh * st->keep * n : NULL,
        .hist_v = st ? st->hist_v + hh * st->keep * m : NULL,
        .hist_len = st ? st->hist_len[hh] : 0,
    };
}
