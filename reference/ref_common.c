/*
 * Shared bookkeeping of the MPFR reference (see ref_common.h).
 */
#include "ref_common.h"

#include <stdlib.h>
#include <string.h>

mpfr_t *fref_vec_alloc(size_t count, mpfr_prec_t prec)
{
    /* One block: the mpfr_t headers, then every significand. sizeof(mpfr_t)
     * and the significand size are multiples of the limb size, so each
     * significand stays limb-aligned. */
    size_t limb_bytes = mpfr_custom_get_size(prec);
    size_t per = sizeof(mpfr_t) + limb_bytes;
    if (count == 0)
        count = 1; /* keep a valid pointer for empty arrays */
    if (count > SIZE_MAX / per)
        return NULL;
    mpfr_t *v = malloc(count * per);
    if (!v)
        return NULL;
    char *limbs = (char *)(v + count);
    for (size_t i = 0; i < count; i++) {
        void *d = limbs + i * limb_bytes;
        mpfr_custom_init(d, prec);
        mpfr_custom_init_set(v[i], MPFR_ZERO_KIND, 0, prec, d);
    }
    return v;
}

void fref_vec_free(mpfr_t *v)
{
    free(v);
}

void fref_dot_acc(mpfr_ptr acc, mpfr_t *a, mpfr_t *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        mpfr_fma(acc, a[i], b[i], acc, MPFR_RNDN);
}

void fref_matvec(mpfr_t *y, mpfr_t *S, mpfr_t *x, int64_t m, int64_t n)
{
    for (int64_t a = 0; a < m; a++) {
        mpfr_set_zero(y[a], 1);
        fref_dot_acc(y[a], S + a * n, x, n);
    }
}

void fref_load(mpfr_t *dst, const double *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        mpfr_set_d(dst[i], src ? src[i] : 0.0, MPFR_RNDN); /* exact */
}

void fref_store(mpfr_t *dst, mpfr_t *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        mpfr_set(dst[i], src[i], MPFR_RNDN);
}

/* dst[n] = phi(raw[n]) at the context's precision. */
static void fref_phi(fref_ctx *c, mpfr_t *dst, mpfr_t *raw)
{
    int64_t n = c->n;
    for (int64_t i = 0; i < n; i++) {
        switch (c->phi) {
        case FALCON_PHI_RELU:
            if (mpfr_sgn(raw[i]) > 0)
                mpfr_set(dst[i], raw[i], MPFR_RNDN);
            else
                mpfr_set_zero(dst[i], 1);
            break;
        case FALCON_PHI_ELU1:
            if (mpfr_sgn(raw[i]) > 0)
                mpfr_add_ui(dst[i], raw[i], 1, MPFR_RNDN);
            else
                mpfr_exp(dst[i], raw[i], MPFR_RNDN);
            break;
        default: /* identity, and l2norm before its scaling */
            mpfr_set(dst[i], raw[i], MPFR_RNDN);
            break;
        }
    }
    if (c->phi != FALCON_PHI_L2NORM)
        return;
    /* Squares of doubles (or of values of a similar range) cannot
     * underflow MPFR's exponent range, so the norm is zero exactly when the
     * vector is. */
    mpfr_ptr s = c->tmp[0];
    mpfr_set_zero(s, 1);
    fref_dot_acc(s, dst, dst, n);
    if (mpfr_zero_p(s)) {
        for (int64_t i = 0; i < n; i++)
            mpfr_set_zero(dst[i], 1);
        return;
    }
    mpfr_sqrt(s, s, MPFR_RNDN);
    for (int64_t i = 0; i < n; i++)
        mpfr_div(dst[i], dst[i], s, MPFR_RNDN);
}

/* The raw key of step t's example (t >= shift). */
static mpfr_t *fref_step_key(const fref_ctx *c, int64_t t, falcon_align align)
{
    const falcon_ref_head_mp *h = &c->h;
    if (align == FALCON_ALIGN_SAME)
        return h->k + t * c->n;
    return t == 0 ? h->prev_key : h->k + (t - 1) * c->n;
}

static void fref_fill_examples(fref_ctx *c, falcon_align align)
{
    const falcon_ref_head_mp *h = &c->h;
    int64_t e = 0;
    for (int64_t i = 0; i < h->hist_len; i++, e++) {
        fref_phi(c, c->x + e * c->n, h->hist_k + i * c->n);
        c->y[e] = h->hist_v + i * c->m;
    }
    for (int64_t t = c->shift; t < c->T; t++, e++) {
        fref_phi(c, c->x + e * c->n, fref_step_key(c, t, align));
        c->y[e] = h->v + t * c->m;
    }
    for (int64_t t = 0; t < c->T; t++)
        fref_phi(c, c->q + t * c->n, h->q + t * c->n);
}

/* Carve `count` values off *next, exact copies of src (zeros for NULL). */
static mpfr_t *take(mpfr_t **next, const double *src, int64_t count)
{
    mpfr_t *v = *next;
    fref_load(v, src, (size_t)count);
    *next += count;
    return v;
}

/* h's doubles as mpfr values in one allocation owned by the context. */
static falcon_status fref_convert(fref_ctx *c, const falcon_ref_head *h, mpfr_prec_t prec)
{
    const int64_t T = h->T, n = h->n, m = h->m, hl = h->hist_len;
    size_t count = (size_t)(3 * T * n + T * m + 2 * T + m * n + n + hl * (n + m));
    c->owned = fref_vec_alloc(count, prec);
    if (!c->owned)
        return FALCON_E_NOMEM;
    mpfr_t *next = c->owned;
    falcon_ref_head_mp *d = &c->h;
    *d = (falcon_ref_head_mp){.T = T, .n = n, .m = m, .hist_len = hl};
    d->q = take(&next, h->q, T * n);
    d->k = take(&next, h->k, T * n);
    d->v = take(&next, h->v, T * m);
    d->beta = take(&next, h->beta, T);
    d->S0 = take(&next, h->S0, m * n);
    d->hist_k = take(&next, h->hist_k, hl * n);
    d->hist_v = take(&next, h->hist_v, hl * m);
    d->alpha = h->alpha ? take(&next, h->alpha, T) : NULL;
    d->gain = h->gain ? take(&next, h->gain, T * n) : NULL;
    d->prev_key = h->prev_key ? take(&next, h->prev_key, n) : NULL;
    return FALCON_OK;
}

/* Everything but the inputs, which c->h holds already. */
static falcon_status fref_ctx_setup(fref_ctx *c, const falcon_ref_opts *o)
{
    falcon_variant v = o->variant;
    const falcon_ref_head_mp *h = &c->h;
    c->prec = o->bits;
    c->T = h->T;
    c->n = h->n;
    c->m = h->m;
    /* The reference is independent of the library, so it decides the
     * variant properties itself. */
    c->W = (v == FALCON_3 || v == FALCON_3A) && o->window > 1 ? o->window : 1;
    c->regression = v == FALCON_1 || v == FALCON_2 || v == FALCON_3;
    c->has_gain = v == FALCON_2 || v == FALCON_2A;
    c->phi = o->phi;
    c->eps = o->eps;
    c->shift = o->align == FALCON_ALIGN_PREFIX && h->prev_key == NULL ? 1 : 0;
    c->nex = h->hist_len + (c->T > c->shift ? c->T - c->shift : 0);

    c->x = fref_vec_alloc((size_t)(c->nex * c->n), c->prec);
    c->y = malloc((size_t)(c->nex > 0 ? c->nex : 1) * sizeof *c->y);
    c->q = fref_vec_alloc((size_t)(c->T * c->n), c->prec);
    c->tmp = fref_vec_alloc(FREF_NTMP, c->prec);
    if (!c->x || !c->y || !c->q || !c->tmp) {
        fref_ctx_free(c);
        return FALCON_E_NOMEM;
    }
    fref_fill_examples(c, o->align);
    return FALCON_OK;
}

falcon_status fref_ctx_init_mp(fref_ctx *c, const falcon_ref_opts *o, const falcon_ref_head_mp *h)
{
    memset(c, 0, sizeof *c);
    c->h = *h;
    return fref_ctx_setup(c, o);
}

falcon_status fref_ctx_init(fref_ctx *c, const falcon_ref_opts *o, const falcon_ref_head *h)
{
    memset(c, 0, sizeof *c);
    /* Doubles are exact at any precision the reference runs at (>= 53). */
    falcon_status st = fref_convert(c, h, o->bits > 53 ? o->bits : 53);
    return st != FALCON_OK ? st : fref_ctx_setup(c, o);
}

void fref_load_S0(const fref_ctx *c, mpfr_t *S)
{
    size_t count = (size_t)(c->m * c->n);
    if (c->h.S0)
        fref_store(S, c->h.S0, count);
    else
        fref_load(S, NULL, count);
}

void fref_ctx_free(fref_ctx *c)
{
    fref_vec_free(c->x);
    free((void *)c->y);
    fref_vec_free(c->q);
    fref_vec_free(c->tmp);
    fref_vec_free(c->owned);
    memset(c, 0, sizeof *c);
}

int64_t fref_window(const fref_ctx *c, int64_t t, int64_t *lo)
{
    *lo = 0;
    if (t < c->shift)
        return 0;
    int64_t e = c->h.hist_len + t - c->shift; /* step t's own example */
    *lo = e - c->W + 1 > 0 ? e - c->W + 1 : 0;
    return e - *lo + 1;
}

void fref_step_terms(fref_ctx *c, int64_t t, int64_t lo, int64_t cnt, mpfr_t *z, mpfr_ptr eta)
{
    int64_t n = c->n;
    mpfr_t *g = c->has_gain ? c->h.gain + t * n : NULL;
    mpfr_set_d(eta, c->eps, MPFR_RNDN);
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *x = c->x + (lo + l) * n, *zl = z + l * n;
        for (int64_t i = 0; i < n; i++) {
            if (g)
                mpfr_mul(zl[i], x[i], g[i], MPFR_RNDN);
            else
                mpfr_set(zl[i], x[i], MPFR_RNDN);
        }
        fref_dot_acc(eta, x, zl, n);
    }
    mpfr_div(eta, c->h.beta[t], eta, MPFR_RNDN);
}

falcon_status fref_run_double(fref_mp_fn fn, const falcon_ref_opts *o,
                              const falcon_ref_head *h, double *out, double *S, mpfr_t *reads)
{
    /* Temporaries at the working precision, so that the only rounding to
     * double is mpfr_get_d's (no double rounding through a 53-bit mpfr). */
    size_t no = (size_t)(h->T * h->m), ns = (size_t)(h->m * h->n);
    mpfr_t *mo = fref_vec_alloc(no, o->bits);
    mpfr_t *ms = fref_vec_alloc(ns, o->bits);
    falcon_status st = FALCON_E_NOMEM;
    if (mo && ms)
        st = fn(o, h, mo, ms, reads);
    if (st == FALCON_OK) {
        for (size_t i = 0; i < no; i++)
            out[i] = mpfr_get_d(mo[i], MPFR_RNDN);
        for (size_t i = 0; i < ns; i++)
            S[i] = mpfr_get_d(ms[i], MPFR_RNDN);
    }
    fref_vec_free(mo);
    fref_vec_free(ms);
    return st;
}
