/*
 * MPFR reference, recurrent form: docs/math.md section 1 literally, one step at a
 * time (forget, write over the window, read).
 */
#include "ref_common.h"

/* Scratch of one call, allocated once (nothing is allocated per step). */
typedef struct rec_buf {
    mpfr_t *S;   /* [m][n] the memory */
    mpfr_t *z;   /* [W][n] write directions of the step's window */
    mpfr_t *r;   /* [W][m] eta * residual (or eta * y) per window example */
    mpfr_t *o;   /* [m] the read */
} rec_buf;

static void rec_buf_free(rec_buf *b)
{
    fref_vec_free(b->S);
    fref_vec_free(b->z);
    fref_vec_free(b->r);
    fref_vec_free(b->o);
}

static falcon_status rec_buf_alloc(rec_buf *b, const fref_ctx *c)
{
    int64_t w = c->W < c->nex ? c->W : c->nex; /* largest window */
    b->S = fref_vec_alloc((size_t)(c->m * c->n), c->prec);
    b->z = fref_vec_alloc((size_t)(w * c->n), c->prec);
    b->r = fref_vec_alloc((size_t)(w * c->m), c->prec);
    b->o = fref_vec_alloc((size_t)c->m, c->prec);
    if (b->S && b->z && b->r && b->o)
        return FALCON_OK;
    rec_buf_free(b);
    return FALCON_E_NOMEM;
}

/* The write of step t on the already decayed memory Sbar. */
static void rec_write(fref_ctx *c, rec_buf *b, int64_t t)
{
    int64_t n = c->n, m = c->m, lo;
    int64_t cnt = fref_window(c, t, &lo);
    if (cnt == 0)
        return; /* no example: S_t = Sbar */
    mpfr_ptr eta = c->tmp[1];
    fref_step_terms(c, t, lo, cnt, b->z, eta);
    /* Every residual is taken against Sbar, before any of the window's
     * writes land, so all of them are formed first. */
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *rl = b->r + l * m;
        const double *y = c->y[lo + l];
        if (c->regression)
            fref_matvec(rl, b->S, c->x + (lo + l) * n, m, n);
        for (int64_t a = 0; a < m; a++) {
            if (c->regression)
                mpfr_d_sub(rl[a], y[a], rl[a], MPFR_RNDN);
            else
                mpfr_set_d(rl[a], y[a], MPFR_RNDN);
            mpfr_mul(rl[a], rl[a], eta, MPFR_RNDN);
        }
    }
    for (int64_t l = 0; l < cnt; l++)
        for (int64_t a = 0; a < m; a++)
            for (int64_t i = 0; i < n; i++)
                mpfr_fma(b->S[a * n + i], b->r[l * m + a], b->z[l * n + i],
                         b->S[a * n + i], MPFR_RNDN);
}

static void rec_run(fref_ctx *c, rec_buf *b, mpfr_t *out)
{
    int64_t n = c->n, m = c->m, mn = m * n;
    const double *alpha = c->h->alpha;
    mpfr_ptr a_t = c->tmp[2]; /* alpha_t converted once, not per element */
    for (int64_t t = 0; t < c->T; t++) {
        if (alpha) { /* forgetting first: Sbar = alpha_t S_{t-1} */
            mpfr_set_d(a_t, alpha[t], MPFR_RNDN);
            for (int64_t i = 0; i < mn; i++)
                mpfr_mul(b->S[i], b->S[i], a_t, MPFR_RNDN);
        }
        rec_write(c, b, t);
        fref_matvec(b->o, b->S, c->q + t * n, m, n); /* read after write */
        fref_store(out + t * m, b->o, (size_t)m);
    }
}

falcon_status falcon_ref_recurrent_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                      mpfr_t *out, mpfr_t *S)
{
    fref_ctx c;
    rec_buf b = {0};
    falcon_status st = fref_ctx_init(&c, o, h);
    if (st != FALCON_OK)
        return st;
    st = rec_buf_alloc(&b, &c);
    if (st == FALCON_OK) {
        fref_load(b.S, h->S0, (size_t)(c.m * c.n));
        rec_run(&c, &b, out);
        fref_store(S, b.S, (size_t)(c.m * c.n));
        rec_buf_free(&b);
    }
    fref_ctx_free(&c);
    return st;
}

falcon_status falcon_ref_recurrent(const falcon_ref_opts *o, const falcon_ref_head *h,
                                   double *out, double *S)
{
    return fref_run_double(falcon_ref_recurrent_mp, o, h, out, S);
}
