/*
 * The backward pass's entry points (falcon_ref.h): the sweep's scratch,
 * the gradients rounded to double, and the gradient condition number.
 */
#include "ref_backward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every gradient tensor, in falcon_ref_grads' order. */
#define FREF_GRADS(X) X(dq) X(dk) X(dv) X(dbeta) X(dalpha) X(dgain) X(dS0) X(dprev_key) X(dhist_k) X(dhist_v)

/* Each gradient's element count for this call; 0 when it does not apply
 * (no decay, no gains, no previous key). */
typedef struct grad_sizes {
#define FREF_SIZE_FIELD(f) int64_t f;
    FREF_GRADS(FREF_SIZE_FIELD)
#undef FREF_SIZE_FIELD
} grad_sizes;

static grad_sizes sizes_of(const falcon_ref_opts *o, const falcon_ref_head *h)
{
    const int64_t T = h->T, n = h->n, m = h->m;
    const int gains = o->variant == FALCON_2 || o->variant == FALCON_2A;
    return (grad_sizes){
        .dq = T * n, .dk = T * n, .dv = T * m, .dbeta = T,
        .dalpha = h->alpha ? T : 0, .dgain = gains ? T * n : 0, .dS0 = m * n,
        .dprev_key = h->prev_key ? n : 0, .dhist_k = h->hist_len * n, .dhist_v = h->hist_len * m,
    };
}

static void free_sweep(bwd_sweep *b)
{
    mpfr_t *all[] = {b->ck, b->st, b->G, b->dSbar, b->z, b->e, b->a, b->du, b->vn, b->dx, b->dy, b->s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        fref_vec_free(all[i]);
    fref_ctx_free(&b->c);
}

/* ceil(sqrt(T)), at least 1. */
static int64_t default_segment(int64_t T)
{
    int64_t s = (int64_t)sqrt((double)T);
    while (s * s < T)
        s++;
    return s > 1 ? s : 1;
}

static falcon_status alloc_sweep(bwd_sweep *b, int64_t checkpoint)
{
    const fref_ctx *c = &b->c;
    const int64_t T = c->T, n = c->n, m = c->m, mn = m * n, p = c->prec;
    const int64_t w = c->W < c->nex ? c->W : (c->nex > 0 ? c->nex : 1);
    b->seg = checkpoint >= 1 ? checkpoint : default_segment(T);
    const int64_t seg = b->seg < T ? b->seg : (T > 0 ? T : 1);
    b->ck = fref_vec_alloc((size_t)((T + seg - 1) / seg * mn), p);
    b->st = fref_vec_alloc((size_t)((seg + 1) * mn), p);
    b->G = fref_vec_alloc((size_t)mn, p);
    b->dSbar = fref_vec_alloc((size_t)mn, p);
    b->z = fref_vec_alloc((size_t)(w * n), p);
    b->e = fref_vec_alloc((size_t)(w * m), p);
    b->a = fref_vec_alloc((size_t)(w * m), p);
    b->du = fref_vec_alloc((size_t)n, p);
    b->vn = fref_vec_alloc((size_t)n, p);
    b->dx = fref_vec_alloc((size_t)(c->nex * n), p);
    b->dy = fref_vec_alloc((size_t)(c->nex * m), p);
    b->s = fref_vec_alloc(bwd_scalar_count(), p);
    if (!b->ck || !b->st || !b->G || !b->dSbar || !b->z || !b->e || !b->a || !b->du || !b->vn ||
        !b->dx || !b->dy || !b->s)
        return FALCON_E_NOMEM;
    bwd_scalars_init(b);
    return FALCON_OK;
}

falcon_status falcon_ref_backward_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                     const double *dO, const double *dS_T,
                                     const falcon_ref_grads_mp *g, int absolute, int64_t checkpoint)
{
    const grad_sizes sz = sizes_of(o, h);
    falcon_ref_grads_mp used = {0}; /* the wanted gradients that apply, zeroed */
#define FREF_USE(f)                                                      \
    if (g->f && sz.f) {                                                  \
        used.f = g->f;                                                   \
        for (int64_t i = 0; i < sz.f; i++) mpfr_set_zero(used.f[i], 1); \
    }
    FREF_GRADS(FREF_USE)
#undef FREF_USE
    bwd_sweep b = {.absolute = absolute != 0, .dO = dO, .g = &used};
    falcon_status st = fref_ctx_init(&b.c, o, h);
    if (st != FALCON_OK)
        return st;
    st = alloc_sweep(&b, checkpoint);
    if (st == FALCON_OK) {
        bwd_sweep_run(&b, dS_T);
        bwd_examples_out(&b, o->align);
    }
    free_sweep(&b);
    return st;
}

/* One sweep at o->bits, rounded to double (rnd: nearest, or up for the
 * absolute sweep's magnitudes). */
static falcon_status backward_double(const falcon_ref_opts *o, const falcon_ref_head *h,
                                     const double *dO, const double *dS_T,
                                     const falcon_ref_grads *d, int absolute)
{
    const grad_sizes sz = sizes_of(o, h);
    size_t total = 0;
#define FREF_COUNT(f) total += d->f ? (size_t)sz.f : 0;
    FREF_GRADS(FREF_COUNT)
#undef FREF_COUNT
    mpfr_t *all = fref_vec_alloc(total, o->bits), *next = all;
    if (!all)
        return FALCON_E_NOMEM;
    falcon_ref_grads_mp mp = {0};
#define FREF_CARVE(f) if (d->f && sz.f) { mp.f = next; next += sz.f; }
    FREF_GRADS(FREF_CARVE)
#undef FREF_CARVE
    falcon_status st = falcon_ref_backward_mp(o, h, dO, dS_T, &mp, absolute, 0);
    const mpfr_rnd_t rnd = absolute ? MPFR_RNDU : MPFR_RNDN;
#define FREF_ROUND(f)                                                      \
    for (int64_t i = 0; st == FALCON_OK && mp.f && i < sz.f; i++)          \
        d->f[i] = mpfr_get_d(mp.f[i], rnd);
    FREF_GRADS(FREF_ROUND)
#undef FREF_ROUND
    fref_vec_free(all);
    return st;
}

falcon_status falcon_ref_backward(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  const double *dO, const double *dS_T,
                                  const falcon_ref_grads *g, const falcon_ref_grads *g_abs)
{
    falcon_status st = g ? backward_double(o, h, dO, dS_T, g, 0) : FALCON_OK;
    if (st == FALCON_OK && g_abs)
        st = backward_double(o, h, dO, dS_T, g_abs, 1);
    return st;
}

double falcon_ref_grad_cond(const double *x, const double *x_abs, size_t count)
{
    /* Sums of squares in MPFR: no overflow or underflow at any scale. */
    mpfr_t num, den, t;
    mpfr_inits2(64, num, den, t, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (size_t i = 0; i < count; i++) {
        mpfr_set_d(t, x_abs[i], MPFR_RNDN);
        mpfr_fma(num, t, t, num, MPFR_RNDU);
        mpfr_set_d(t, x[i], MPFR_RNDN);
        mpfr_fma(den, t, t, den, MPFR_RNDD);
    }
    double kappa = 1.0;
    if (mpfr_zero_p(den)) {
        kappa = mpfr_zero_p(num) ? 1.0 : INFINITY;
    } else {
        mpfr_div(t, num, den, MPFR_RNDU);
        mpfr_sqrt(t, t, MPFR_RNDU);
        kappa = fmax(1.0, mpfr_get_d(t, MPFR_RNDU));
    }
    mpfr_clears(num, den, t, (mpfr_ptr)0);
    return kappa;
}
