/* The mpfr backend's backward pass (falcon_advanced.h, falcon_reference_grad):
 * each head's inputs copied exactly (falcon_ref_head_gather) with its rows
 * of dO and its slice of dS_T, run through the reference's backward pass
 * (falcon_ref_backward, docs/math.md section 12), and every gradient rounded
 * once into the caller's buffers: the run's precision for the input
 * tensors (float below fp64), double for the state's. */
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "falcon_advanced.h"
#include "ref_backward.h"

/* Rows t of head (b, h) of a [B][T][H][width] tensor, from or to doubles. */
static double load(const void *p, falcon_precision prec, int64_t i)
{
    return prec != FALCON_FP64 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static void head_rows_in(const void *src, falcon_precision prec, const falcon_inputs *in, int64_t hh,
                         int64_t width, double *dst)
{
    const int64_t b = hh / in->H, h = hh % in->H;
    for (int64_t t = 0; t < in->T; t++)
        for (int64_t i = 0; i < width; i++)
            dst[t * width + i] = load(src, prec, ((b * in->T + t) * in->H + h) * width + i);
}
static void head_rows_out(const double *src, falcon_precision prec, const falcon_inputs *in, int64_t hh,
                          int64_t width, void *dst)
{
    const int64_t b = hh / in->H, h = hh % in->H;
    if (!dst)
        return;
    for (int64_t t = 0; t < in->T; t++)
        for (int64_t i = 0; i < width; i++) {
            const int64_t at = ((b * in->T + t) * in->H + h) * width + i;
            if (prec != FALCON_FP64) ((float *)dst)[at] = (float)src[t * width + i];
            else ((double *)dst)[at] = src[t * width + i];
        }
}

/* The state's gradients of head hh: dS0, dprev_key (0 without a previous
 * key) and the history's (0 past the head's history). */
static void state_grads_out(const falcon_ref_head *rh, const falcon_state_view *st, int64_t hh,
                            const falcon_ref_grads *g, const falcon_grads *out)
{
    const int64_t n = rh->n, m = rh->m, keep = st->keep, hl = rh->hist_len;
    if (out->dS0) memcpy(out->dS0 + hh * m * n, g->dS0, sizeof(double) * (size_t)(m * n));
    if (out->dprev_key)
        for (int64_t i = 0; i < n; i++) out->dprev_key[hh * n + i] = rh->prev_key ? g->dprev_key[i] : 0.0;
    for (int64_t r = 0; r < keep; r++) {
        for (int64_t i = 0; out->dhist_k && i < n; i++)
            out->dhist_k[(hh * keep + r) * n + i] = r < hl ? g->dhist_k[r * n + i] : 0.0;
        for (int64_t i = 0; out->dhist_v && i < m; i++)
            out->dhist_v[(hh * keep + r) * m + i] = r < hl ? g->dhist_v[r * m + i] : 0.0;
    }
}

static falcon_status grad_head(const falcon_config *cfg, const falcon_inputs *in, const falcon_state_view *st,
                               const void *dO, const double *dS_T, const falcon_grads *out, int64_t hh)
{
    const int64_t T = in->T, n = in->n, m = in->m, keep = st->keep;
    const falcon_precision prec = cfg->precision;
    const size_t nin = falcon_ref_head_doubles(in);
    const size_t ngrad = (size_t)(3 * T * n + 2 * T * m + 2 * T + m * n + n + keep * (n + m)) + 1;
    double *buf = malloc(sizeof(double) * (nin + ngrad));
    if (!buf) return FALCON_E_NOMEM;
    falcon_ref_head rh;
    falcon_ref_head_gather(in, prec, st, hh, buf, &rh);
    double *dq = buf + nin, *dk = dq + T * n, *dgain = dk + T * n, *dv = dgain + T * n, *dOh = dv + T * m;
    double *dbeta = dOh + T * m, *dalpha = dbeta + T, *dS0 = dalpha + T, *dprev = dS0 + m * n;
    double *dhk = dprev + n, *dhv = dhk + keep * n;
    if (dO) head_rows_in(dO, prec, in, hh, m, dOh);
    const falcon_ref_grads g = {.dq = dq, .dk = dk, .dv = dv, .dbeta = dbeta, .dalpha = dalpha,
                                .dgain = dgain, .dS0 = dS0, .dprev_key = dprev, .dhist_k = dhk, .dhist_v = dhv};
    const falcon_ref_opts ro = {
        .variant = cfg->variant, .align = cfg->align, .phi = cfg->phi,
        .eps = prec != FALCON_FP64 ? (double)(float)cfg->eps : cfg->eps,
        .window = cfg->window, .chunk = T > 0 ? T : 1, .bits = cfg->mpfr_bits,
    };
    falcon_status s = falcon_ref_backward(&ro, &rh, dO ? dOh : NULL, dS_T ? dS_T + hh * m * n : NULL, &g, NULL);
    if (!s) {
        head_rows_out(dq, prec, in, hh, n, out->dq);
        head_rows_out(dk, prec, in, hh, n, out->dk);
        head_rows_out(dv, prec, in, hh, m, out->dv);
        head_rows_out(dbeta, prec, in, hh, 1, out->dbeta);
        if (in->alpha) head_rows_out(dalpha, prec, in, hh, 1, out->dalpha);
        if (in->gain) head_rows_out(dgain, prec, in, hh, n, out->dgain);
        state_grads_out(&rh, st, hh, &g, out);
    }
    free(buf);
    return s;
}

typedef struct grad_ctx {
    const falcon_config *cfg;
    const falcon_inputs *in;
    const falcon_state_view *state;
    const void *dO;
    const double *dS_T;
    const falcon_grads *grads;
} grad_ctx;

static falcon_status grad_one(void *p, int64_t hh)
{
    const grad_ctx *c = p;
    return grad_head(c->cfg, c->in, c->state, c->dO, c->dS_T, c->grads, hh);
}

falcon_status fref_reference_grad(const falcon_config *cfg, const falcon_inputs *in,
                                  const falcon_state_view *state, const void *dO, const double *dS_T,
                                  const falcon_grads *grads)
{
    grad_ctx c = {cfg, in, state, dO, dS_T, grads};
    return fref_each_head(cfg->threads, in->B * in->H, grad_one, &c);
}
