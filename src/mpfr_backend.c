/* The mpfr backend: each head's inputs copied exactly into double arrays,
 * run through the MPFR reference, rounded to the run's precision. The
 * masked-parallel form is the chunk equations with one chunk per call. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "falcon_ref.h"

int falcon_mpfr_available(void) { return 1; }

/* Rows t of a [B][T][H][width] tensor for head (b, h), as contiguous double. */
static void gather(const void *src, falcon_precision prec, const falcon_inputs *in, int64_t b,
                   int64_t h, int64_t width, double *dst)
{
    for (int64_t t = 0; t < in->T; t++)
        for (int64_t i = 0; i < width; i++)
            dst[t * width + i] = falcon_load(src, prec, ((b * in->T + t) * in->H + h) * width + i);
}

static falcon_status run_head(const falcon_config *cfg, const falcon_inputs *in, falcon_state *st,
                              void *out, int64_t b, int64_t h)
{
    const int64_t T = in->T, n = in->n, m = in->m, hh = b * in->H + h;
    const falcon_precision prec = cfg->precision;
    size_t count = (size_t)(3 * T * n + T * m + 2 * T + T * m + m * n);
    double *buf = malloc(sizeof(double) * (count ? count : 1));
    if (!buf) return FALCON_E_NOMEM;
    double *q = buf, *k = q + T * n, *g = k + T * n, *v = g + T * n, *beta = v + T * m;
    double *alpha = beta + T, *o = alpha + T, *S = o + T * m;
    gather(in->q, prec, in, b, h, n, q);
    gather(in->k, prec, in, b, h, n, k);
    gather(in->v, prec, in, b, h, m, v);
    gather(in->beta, prec, in, b, h, 1, beta);
    if (in->alpha) gather(in->alpha, prec, in, b, h, 1, alpha);
    if (in->gain) gather(in->gain, prec, in, b, h, n, g);
    falcon_ref_head rh = {
        .T = T, .n = n, .m = m, .q = q, .k = k, .v = v, .beta = beta,
        .alpha = in->alpha ? alpha : NULL, .gain = in->gain ? g : NULL,
        .S0 = st->S + hh * m * n,
        .prev_key = st->has_prev[hh] ? st->prev_key + hh * n : NULL,
        .hist_k = st->hist_k + hh * st->keep * n, .hist_v = st->hist_v + hh * st->keep * m,
        .hist_len = st->hist_len[hh],
    };
    falcon_ref_opts ro = {
        .variant = cfg->variant, .align = cfg->align, .phi = cfg->phi,
        .eps = prec == FALCON_FP32 ? (double)(float)cfg->eps : cfg->eps,
        .window = cfg->window,
        .chunk = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(cfg->chunk, cfg->window) : (T > 0 ? T : 1),
        .bits = cfg->mpfr_bits,
    };
    falcon_status s = cfg->form == FALCON_FORM_RECURRENT ? falcon_ref_recurrent(&ro, &rh, o, S)
                                                         : falcon_ref_chunk(&ro, &rh, o, S);
    if (!s) {
        memcpy(st->S + hh * m * n, S, sizeof(double) * (size_t)(m * n));
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < m; c++) {
                int64_t at = ((b * T + t) * in->H + h) * m + c;
                if (prec == FALCON_FP32) ((float *)out)[at] = (float)o[t * m + c];
                else ((double *)out)[at] = o[t * m + c];
            }
    }
    free(buf);
    return s;
}

falcon_status falcon_mpfr_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    falcon_status result = FALCON_OK;
    const int64_t heads = in->B * in->H;
#pragma omp parallel num_threads(falcon_threads(cfg))
    {
#pragma omp for schedule(dynamic, 1)
        for (int64_t hh = 0; hh < heads; hh++) {
            falcon_status s = run_head(cfg, in, work, out, hh / in->H, hh % in->H);
            if (s) {
#pragma omp critical(falcon_mpfr_status)
                result = s;
            }
        }
        /* MPFR caches constants (log 2, ...) per thread, and an OpenMP
         * thread may end (a team of another size follows) without freeing
         * them: a leak per thread, which LeakSanitizer reports. */
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    return result;
}
