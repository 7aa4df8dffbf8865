/*
 * MPFR reference, chunk-parallel form: the equations of docs/math.md section 7.2
 * taken literally (terms, pseudo-values by forward substitution, outputs and
 * end state from the chunk's start state S_0). Its distance from the
 * recurrent form is pure MPFR rounding, which checks the algebra of the
 * chunked kernels independently of float rounding.
 *
 * Local step j = 0..L-1 of a chunk is global step t0 + j; b[j + 1] is the
 * chunk's cumulative log-decay through that step (b[0] = 0). Every decay
 * factor is e^{b[i+1] - b[j+1]} (j <= i), the exponential of a difference,
 * or e^{b[i+1]} on S_0; at the reference's precision no factor is near
 * MPFR's exponent limits (|b| <= C * 745 nats).
 */
#include "ref_common.h"

#include <stdlib.h>

/* Scratch of one call, sized for the largest chunk. */
typedef struct chunk_buf {
    mpfr_t *S;        /* [m][n] the state carried between chunks */
    mpfr_t *z;        /* [P][n] write direction of each term */
    mpfr_t *r;        /* [P][m] pseudo-value of each term */
    mpfr_t *eta;      /* [L] step size of each local step */
    mpfr_t *b;        /* [L+1] cumulative log-decay */
    mpfr_t *o;        /* [m] output accumulator */
    int64_t *ex;      /* [P] example of each term (its key x_p, target y_p) */
    int64_t *first;   /* [L+1] terms of local step j: first[j] .. first[j+1]-1 */
} chunk_buf;

static void chunk_buf_free(chunk_buf *k)
{
    fref_vec_free(k->S);
    fref_vec_free(k->z);
    fref_vec_free(k->r);
    fref_vec_free(k->eta);
    fref_vec_free(k->b);
    fref_vec_free(k->o);
    free(k->ex);
    free(k->first);
}

/* The most terms any chunk has: the sum of its steps' window sizes. */
static int64_t chunk_max_terms(const fref_ctx *c, int64_t C)
{
    int64_t best = 0, lo;
    for (int64_t t0 = 0; t0 < c->T; t0 += C) {
        int64_t p = 0;
        for (int64_t t = t0; t < c->T && t < t0 + C; t++)
            p += fref_window(c, t, &lo);
        best = p > best ? p : best;
    }
    return best > 0 ? best : 1;
}

static falcon_status chunk_buf_alloc(chunk_buf *k, const fref_ctx *c, int64_t C)
{
    int64_t L = C < c->T ? C : c->T, P = chunk_max_terms(c, C);
    k->S = fref_vec_alloc((size_t)(c->m * c->n), c->prec);
    k->z = fref_vec_alloc((size_t)(P * c->n), c->prec);
    k->r = fref_vec_alloc((size_t)(P * c->m), c->prec);
    k->eta = fref_vec_alloc((size_t)L, c->prec);
    k->b = fref_vec_alloc((size_t)(L + 1), c->prec);
    k->o = fref_vec_alloc((size_t)c->m, c->prec);
    k->ex = malloc((size_t)P * sizeof *k->ex);
    k->first = malloc((size_t)(L + 1) * sizeof *k->first);
    if (k->S && k->z && k->r && k->eta && k->b && k->o && k->ex && k->first)
        return FALCON_OK;
    chunk_buf_free(k);
    return FALCON_E_NOMEM;
}

/* f = e^{b[i] - b[j]} (indices into b). */
static void chunk_factor(mpfr_ptr f, chunk_buf *k, int64_t i, int64_t j)
{
    mpfr_sub(f, k->b[i], k->b[j], MPFR_RNDN);
    mpfr_exp(f, f, MPFR_RNDN);
}

/* Log-decays, terms (example, direction) and step sizes of the chunk. */
static void chunk_terms(fref_ctx *c, chunk_buf *k, int64_t t0, int64_t L)
{
    mpfr_t *alpha = c->h.alpha;
    int64_t p = 0, lo;
    mpfr_set_zero(k->b[0], 1);
    for (int64_t j = 0; j < L; j++) {
        int64_t t = t0 + j, cnt = fref_window(c, t, &lo);
        if (alpha)
            mpfr_log(k->b[j + 1], alpha[t], MPFR_RNDN);
        else
            mpfr_set_zero(k->b[j + 1], 1);
        mpfr_add(k->b[j + 1], k->b[j + 1], k->b[j], MPFR_RNDN);
        k->first[j] = p;
        if (cnt > 0)
            fref_step_terms(c, t, lo, cnt, k->z + p * c->n, k->eta[j]);
        for (int64_t l = 0; l < cnt; l++)
            k->ex[p++] = lo + l;
    }
    k->first[L] = p;
}

/* r_p -= e^{b_j - b_j'} (z_p'.x_p) r_p' for every term p' of step jp. */
static void chunk_subtract_step(fref_ctx *c, chunk_buf *k, int64_t p, int64_t j, int64_t jp)
{
    int64_t n = c->n, m = c->m;
    mpfr_ptr f = c->tmp[1], cf = c->tmp[2];
    mpfr_t *rp = k->r + p * m, *xp = c->x + k->ex[p] * n;
    chunk_factor(f, k, j + 1, jp + 1);
    for (int64_t q = k->first[jp]; q < k->first[jp + 1]; q++) {
        mpfr_set_zero(cf, 1);
        fref_dot_acc(cf, k->z + q * n, xp, n);
        mpfr_mul(cf, cf, f, MPFR_RNDN);
        mpfr_neg(cf, cf, MPFR_RNDN);
        for (int64_t a = 0; a < m; a++)
            mpfr_fma(rp[a], cf, k->r[q * m + a], rp[a], MPFR_RNDN);
    }
}

/* Pseudo-values. Regression: forward substitution of the unit
 * lower-triangular system, step by step (terms of one step are independent);
 * inner product: r_p = eta_p y_p. */
static void chunk_solve(fref_ctx *c, chunk_buf *k, int64_t L)
{
    int64_t n = c->n, m = c->m;
    mpfr_ptr f = c->tmp[3]; /* tmp[1], tmp[2] belong to chunk_subtract_step */
    for (int64_t j = 0; j < L; j++) {
        chunk_factor(f, k, j + 1, 0); /* e^{b_j} on S_0 */
        for (int64_t p = k->first[j]; p < k->first[j + 1]; p++) {
            mpfr_t *rp = k->r + p * m;
            mpfr_t *y = c->y[k->ex[p]];
            if (c->regression)
                fref_matvec(rp, k->S, c->x + k->ex[p] * n, m, n);
            for (int64_t a = 0; a < m; a++) {
                if (c->regression) {
                    mpfr_mul(rp[a], rp[a], f, MPFR_RNDN);
                    mpfr_sub(rp[a], y[a], rp[a], MPFR_RNDN);
                } else {
                    mpfr_set(rp[a], y[a], MPFR_RNDN);
                }
            }
            for (int64_t jp = 0; c->regression && jp < j; jp++)
                chunk_subtract_step(c, k, p, j, jp);
            for (int64_t a = 0; a < m; a++)
                mpfr_mul(rp[a], rp[a], k->eta[j], MPFR_RNDN);
        }
    }
}

/* o_i = e^{b_i} S_0 phi(q_i) + SUM_{p: j <= i} e^{b_i - b_j} (z_p.phi(q_i)) r_p */
static void chunk_read(fref_ctx *c, chunk_buf *k, int64_t t0, int64_t L, mpfr_t *out)
{
    int64_t n = c->n, m = c->m;
    mpfr_ptr f = c->tmp[1], cf = c->tmp[2];
    for (int64_t i = 0; i < L; i++) {
        mpfr_t *qi = c->q + (t0 + i) * n;
        fref_matvec(k->o, k->S, qi, m, n);
        chunk_factor(f, k, i + 1, 0);
        for (int64_t a = 0; a < m; a++)
            mpfr_mul(k->o[a], k->o[a], f, MPFR_RNDN);
        for (int64_t j = 0; j <= i; j++) {
            if (k->first[j] == k->first[j + 1])
                continue;
            chunk_factor(f, k, i + 1, j + 1);
            for (int64_t p = k->first[j]; p < k->first[j + 1]; p++) {
                mpfr_set_zero(cf, 1);
                fref_dot_acc(cf, k->z + p * n, qi, n);
                mpfr_mul(cf, cf, f, MPFR_RNDN);
                for (int64_t a = 0; a < m; a++)
                    mpfr_fma(k->o[a], cf, k->r[p * m + a], k->o[a], MPFR_RNDN);
            }
        }
        fref_store(out + (t0 + i) * m, k->o, (size_t)m);
    }
}

/* S_L = e^{b_L} S_0 + SUM_p e^{b_L - b_j} r_p z_p^T, in place of S_0. */
static void chunk_end_state(fref_ctx *c, chunk_buf *k, int64_t L)
{
    int64_t n = c->n, m = c->m;
    mpfr_ptr f = c->tmp[1], cf = c->tmp[2];
    chunk_factor(f, k, L, 0);
    for (int64_t i = 0; i < m * n; i++)
        mpfr_mul(k->S[i], k->S[i], f, MPFR_RNDN);
    for (int64_t j = 0; j < L; j++) {
        chunk_factor(f, k, L, j + 1);
        for (int64_t p = k->first[j]; p < k->first[j + 1]; p++)
            for (int64_t a = 0; a < m; a++) {
                mpfr_mul(cf, f, k->r[p * m + a], MPFR_RNDN);
                for (int64_t i = 0; i < n; i++)
                    mpfr_fma(k->S[a * n + i], cf, k->z[p * n + i], k->S[a * n + i],
                             MPFR_RNDN);
            }
    }
}

falcon_status falcon_ref_chunk_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  mpfr_t *out, mpfr_t *S)
{
    fref_ctx c;
    chunk_buf k = {0};
    falcon_status st = fref_ctx_init(&c, o, h);
    if (st != FALCON_OK)
        return st;
    /* C < 1 is rejected by validation; treat it as one chunk regardless. */
    int64_t C = o->chunk >= 1 ? o->chunk : (c.T > 0 ? c.T : 1);
    st = chunk_buf_alloc(&k, &c, C);
    if (st == FALCON_OK) {
        fref_load_S0(&c, k.S);
        for (int64_t t0 = 0; t0 < c.T; t0 += C) {
            int64_t L = c.T - t0 < C ? c.T - t0 : C;
            chunk_terms(&c, &k, t0, L);
            chunk_solve(&c, &k, L);
            chunk_read(&c, &k, t0, L, out);
            chunk_end_state(&c, &k, L);
        }
        fref_store(S, k.S, (size_t)(c.m * c.n));
        chunk_buf_free(&k);
    }
    fref_ctx_free(&c);
    return st;
}

static falcon_status chunk_mp(const falcon_ref_opts *o, const falcon_ref_head *h, mpfr_t *out,
                              mpfr_t *S, mpfr_t *reads)
{
    (void)reads; /* the read condition comes from the recurrent form */
    return falcon_ref_chunk_mp(o, h, out, S);
}

falcon_status falcon_ref_chunk(const falcon_ref_opts *o, const falcon_ref_head *h,
                               double *out, double *S)
{
    return fref_run_double(chunk_mp, o, h, out, S, NULL);
}
