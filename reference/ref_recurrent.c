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
    mpfr_t *reads; /* NULL, or [2] sums for the read condition number (falcon_ref_reads) */
    mpfr_t *acc;   /* [1] scratch: one row of |S_t| |phi(q_t)| */
} rec_buf;

static void rec_buf_free(rec_buf *b)
{
    fref_vec_free(b->S);
    fref_vec_free(b->z);
    fref_vec_free(b->r);
    fref_vec_free(b->o);
    fref_vec_free(b->acc);
}

static falcon_status rec_buf_alloc(rec_buf *b, const fref_ctx *c)
{
    int64_t w = c->W < c->nex ? c->W : c->nex; /* largest window */
    b->S = fref_vec_alloc((size_t)(c->m * c->n), c->prec);
    b->z = fref_vec_alloc((size_t)(w * c->n), c->prec);
    b->r = fref_vec_alloc((size_t)(w * c->m), c->prec);
    b->o = fref_vec_alloc((size_t)c->m, c->prec);
    b->acc = fref_vec_alloc(1, c->prec);
    if (b->S && b->z && b->r && b->o && b->acc)
        return FALCON_OK;
    rec_buf_free(b);
    return FALCON_E_NOMEM;
}

/* The write of step t on the already decayed memory Sbar. */
static void rec_write(fref_ctx *c, mpfr_t *S, mpfr_t *z, mpfr_t *r, int64_t t)
{
    int64_t n = c->n, m = c->m, lo;
    int64_t cnt = fref_window(c, t, &lo);
    if (cnt == 0)
        return; /* no example: S_t = Sbar */
    mpfr_ptr eta = c->tmp[1];
    fref_step_terms(c, t, lo, cnt, z, eta);
    /* Every residual is taken against Sbar, before any of the window's
     * writes land, so all of them are formed first. */
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *rl = r + l * m, *y = c->y[lo + l];
        if (c->regression)
            fref_matvec(rl, S, c->x + (lo + l) * n, m, n);
        for (int64_t a = 0; a < m; a++) {
            if (c->regression)
                mpfr_sub(rl[a], y[a], rl[a], MPFR_RNDN);
            else
                mpfr_set(rl[a], y[a], MPFR_RNDN);
            mpfr_mul(rl[a], rl[a], eta, MPFR_RNDN);
        }
    }
    for (int64_t l = 0; l < cnt; l++)
        for (int64_t a = 0; a < m; a++)
            for (int64_t i = 0; i < n; i++)
                mpfr_fma(S[a * n + i], r[l * m + a], z[l * n + i], S[a * n + i], MPFR_RNDN);
}

void fref_step(fref_ctx *c, mpfr_t *S, mpfr_t *z, mpfr_t *r, int64_t t)
{
    if (c->h.alpha) { /* forgetting first: Sbar = alpha_t S_{t-1} */
        int64_t mn = c->m * c->n;
        for (int64_t i = 0; i < mn; i++)
            mpfr_mul(S[i], S[i], c->h.alpha[t], MPFR_RNDN);
    }
    rec_write(c, S, z, r, t);
}

/* The read's condition: sums[0] += SUM_a (SUM_j |S_aj| |phi(q_t)_j|)^2 and
 * sums[1] += SUM_a o_a^2, at the reference's precision (no overflow or
 * underflow whatever the scale of the inputs). */
static void rec_read_sums(fref_ctx *c, rec_buf *b, int64_t t)
{
    const int64_t n = c->n, m = c->m;
    mpfr_ptr acc = b->acc[0], x = c->tmp[3];
    mpfr_t *q = c->q + t * n;
    for (int64_t a = 0; a < m; a++) {
        mpfr_set_zero(acc, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_mul(x, b->S[a * n + j], q[j], MPFR_RNDN);
            mpfr_abs(x, x, MPFR_RNDN);
            mpfr_add(acc, acc, x, MPFR_RNDN);
        }
        mpfr_fma(b->reads[0], acc, acc, b->reads[0], MPFR_RNDN);
        mpfr_fma(b->reads[1], b->o[a], b->o[a], b->reads[1], MPFR_RNDN);
    }
}

static void rec_run(fref_ctx *c, rec_buf *b, mpfr_t *out)
{
    int64_t n = c->n, m = c->m;
    for (int64_t t = 0; t < c->T; t++) {
        fref_step(c, b->S, b->z, b->r, t);
        fref_matvec(b->o, b->S, c->q + t * n, m, n); /* read after write */
        fref_store(out + t * m, b->o, (size_t)m);
        if (b->reads)
            rec_read_sums(c, b, t);
    }
}

/* The form over an initialised context, which it frees: from the state's
 * memory (h->S0), or, when carried, from the memory in S (S_{t0} on entry,
 * at any precision). */
static falcon_status recurrent_ctx(fref_ctx *c, mpfr_t *out, mpfr_t *S, mpfr_t *reads, int carried)
{
    rec_buf b = {0};
    b.reads = reads;
    falcon_status st = rec_buf_alloc(&b, c);
    if (st == FALCON_OK) {
        if (carried)
            fref_store(b.S, S, (size_t)(c->m * c->n));
        else
            fref_load_S0(c, b.S);
        rec_run(c, &b, out);
        fref_store(S, b.S, (size_t)(c->m * c->n));
        rec_buf_free(&b);
    }
    fref_ctx_free(c);
    return st;
}

static falcon_status recurrent_from(const falcon_ref_opts *o, const falcon_ref_head *h,
                                    mpfr_t *out, mpfr_t *S, mpfr_t *reads, int carried)
{
    fref_ctx c;
    falcon_status st = fref_ctx_init(&c, o, h);
    return st != FALCON_OK ? st : recurrent_ctx(&c, out, S, reads, carried);
}

falcon_status falcon_ref_recurrent_mp_in(const falcon_ref_opts *o, const falcon_ref_head_mp *h,
                                         mpfr_t *out, mpfr_t *S)
{
    fref_ctx c;
    falcon_status st = fref_ctx_init_mp(&c, o, h);
    return st != FALCON_OK ? st : recurrent_ctx(&c, out, S, NULL, 0);
}

static falcon_status recurrent_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  mpfr_t *out, mpfr_t *S, mpfr_t *reads)
{
    return recurrent_from(o, h, out, S, reads, 0);
}

falcon_status falcon_ref_recurrent_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                      mpfr_t *out, mpfr_t *S)
{
    return recurrent_mp(o, h, out, S, NULL);
}

falcon_status falcon_ref_recurrent_mp_carry(const falcon_ref_opts *o, const falcon_ref_head *h,
                                            mpfr_t *out, mpfr_t *S)
{
    return recurrent_from(o, h, out, S, NULL, 1);
}

falcon_status falcon_ref_recurrent(const falcon_ref_opts *o, const falcon_ref_head *h,
                                   double *out, double *S)
{
    return fref_run_double(recurrent_mp, o, h, out, S, NULL);
}

falcon_status falcon_ref_recurrent_reads(const falcon_ref_opts *o, const falcon_ref_head *h,
                                         double *out, double *S, falcon_ref_reads *reads)
{
    return fref_run_double(recurrent_mp, o, h, out, S, reads->sums);
}

falcon_status falcon_ref_reads_init(falcon_ref_reads *r, mpfr_prec_t bits)
{
    r->sums = fref_vec_alloc(2, bits);
    return r->sums ? FALCON_OK : FALCON_E_NOMEM;
}

double falcon_ref_reads_cond(const falcon_ref_reads *r)
{
    /* kappa = sqrt(sums[0] / sums[1]) >= 1; 1 when every read is zero. */
    if (mpfr_zero_p(r->sums[1]) || mpfr_cmp(r->sums[0], r->sums[1]) <= 0)
        return 1.0;
    mpfr_t k;
    mpfr_init2(k, mpfr_get_prec(r->sums[0]));
    mpfr_div(k, r->sums[0], r->sums[1], MPFR_RNDN);
    mpfr_sqrt(k, k, MPFR_RNDN);
    double d = mpfr_get_d(k, MPFR_RNDU);
    mpfr_clear(k);
    return d;
}

void falcon_ref_reads_free(falcon_ref_reads *r)
{
    fref_vec_free(r->sums);
    r->sums = NULL;
}
