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
    mpfr_t *all[] = {b->ck, b->st, b->G, b->dSbar, b->z, b->e, b->a, b->du, b->vn, b->dx, b->dy, b->s,
                     b->dz, b->Gmag, b->du_mag, b->dx_mag, b->dy_mag};
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
    b->dz = fref_vec_alloc((size_t)(w * n), p);
    if (!b->ck || !b->st || !b->G || !b->dSbar || !b->z || !b->e || !b->a || !b->du || !b->vn ||
        !b->dx || !b->dy || !b->s || !b->dz)
        return FALCON_E_NOMEM;
    if (b->ga) {
        b->Gmag = fref_vec_alloc((size_t)mn, p);
        b->du_mag = fref_vec_alloc((size_t)n, p);
        b->dx_mag = fref_vec_alloc((size_t)(c->nex * n), p);
        b->dy_mag = fref_vec_alloc((size_t)(c->nex * m), p);
        if (!b->Gmag || !b->du_mag || !b->dx_mag || !b->dy_mag)
            return FALCON_E_NOMEM;
    }
    bwd_scalars_init(b);
    return FALCON_OK;
}

/* The wanted gradients of g that apply, zeroed. */
static falcon_ref_grads_mp used_of(const grad_sizes *sz, const falcon_ref_grads_mp *g)
{
    falcon_ref_grads_mp used = {0};
#define FREF_USE(f)                                                      \
    if (g->f && sz->f) {                                                 \
        used.f = g->f;                                                   \
        for (int64_t i = 0; i < sz->f; i++) mpfr_set_zero(used.f[i], 1); \
    }
    FREF_GRADS(FREF_USE)
#undef FREF_USE
    return used;
}

falcon_status falcon_ref_backward_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                     const double *dO, const double *dS_T,
                                     const falcon_ref_grads_mp *g, const falcon_ref_grads_mp *g_mag,
                                     int64_t checkpoint)
{
    const grad_sizes sz = sizes_of(o, h);
    const falcon_ref_grads_mp none = {0};
    falcon_ref_grads_mp used = used_of(&sz, g ? g : &none), used_mag = used_of(&sz, g_mag ? g_mag : &none);
    bwd_sweep b = {.dO = dO, .g = &used, .ga = g_mag ? &used_mag : NULL,
                   .align_same = o->align == FALCON_ALIGN_SAME};
    falcon_status st = fref_ctx_init(&b.c, o, h);
    if (st != FALCON_OK)
        return st;
    st = alloc_sweep(&b, checkpoint);
    if (st == FALCON_OK) {
        bwd_sweep_run(&b, dS_T);
        bwd_examples_out(&b);
    }
    free_sweep(&b);
    return st;
}

/* Carve mpfr arrays for the gradients d wants (next: the pool). */
static falcon_ref_grads_mp carve(const grad_sizes *sz, const falcon_ref_grads *d, mpfr_t **next)
{
    falcon_ref_grads_mp mp = {0};
    if (!d) return mp;
#define FREF_CARVE(f) if (d->f && sz->f) { mp.f = *next; *next += sz->f; }
    FREF_GRADS(FREF_CARVE)
#undef FREF_CARVE
    return mp;
}

/* mp rounded into d (rnd: nearest, or up for the magnitudes). */
static void round_out(const grad_sizes *sz, const falcon_ref_grads_mp *mp, const falcon_ref_grads *d, mpfr_rnd_t rnd)
{
    if (!d) return;
#define FREF_ROUND(f)                                      \
    for (int64_t i = 0; mp->f && i < sz->f; i++)           \
        d->f[i] = mpfr_get_d(mp->f[i], rnd);
    FREF_GRADS(FREF_ROUND)
#undef FREF_ROUND
}

/* One sweep at o->bits for both, each rounded to double once. */
falcon_status falcon_ref_backward(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  const double *dO, const double *dS_T,
                                  const falcon_ref_grads *g, const falcon_ref_grads *g_abs)
{
    const grad_sizes sz = sizes_of(o, h);
    size_t total = 0;
#define FREF_COUNT(f) total += (g && g->f ? (size_t)sz.f : 0) + (g_abs && g_abs->f ? (size_t)sz.f : 0);
    FREF_GRADS(FREF_COUNT)
#undef FREF_COUNT
    mpfr_t *all = fref_vec_alloc(total + 1, o->bits), *next = all;
    if (!all)
        return FALCON_E_NOMEM;
    const falcon_ref_grads_mp mp = carve(&sz, g, &next), mp_abs = carve(&sz, g_abs, &next);
    falcon_status st = falcon_ref_backward_mp(o, h, dO, dS_T, &mp, g_abs ? &mp_abs : NULL, 0);
    if (st == FALCON_OK) {
        round_out(&sz, &mp, g, MPFR_RNDN);
        round_out(&sz, &mp_abs, g_abs, MPFR_RNDU);
    }
    fref_vec_free(all);
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
