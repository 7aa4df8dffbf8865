/*
 * Internal helpers shared by the two MPFR reference forms (ref_recurrent.c,
 * ref_chunk.c): MPFR vectors, the feature map, the list of examples with
 * each step's window, and each step's write directions and step size.
 * Everything here is the bookkeeping that both forms must agree on, so it
 * lives in one place; the forms differ only in how they combine the terms.
 */
#ifndef FALCON_REF_COMMON_H
#define FALCON_REF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <mpfr.h>
#include "falcon_ref.h"

#define FREF_NTMP 4 /* scratch scalars in a context */

/* One call's view of the inputs, held as MPFR values (the caller's, from
 * a falcon_ref_head_mp, or exact conversions of a falcon_ref_head's
 * doubles), with phi applied in MPFR. Examples are
 * numbered 0..nex-1: the carried ones first (oldest first), then one per
 * step from step `shift` on, so every window is a contiguous range. */
typedef struct fref_ctx {
    falcon_ref_head_mp h; /* the inputs (S0 NULL: zero) */
    mpfr_t *owned;        /* the converted doubles (NULL for mpfr inputs) */
    mpfr_prec_t prec;
    int64_t T, n, m;
    int64_t W;          /* effective window: 1 unless Falcon-3/3A */
    int regression;     /* Falcon-1/2/3 (else the inner-product twins) */
    int has_gain;       /* Falcon-2/2A */
    falcon_phi phi;
    double eps;
    int64_t shift;      /* 1 when step 0 has no example (prefix, no previous key) */
    int64_t nex;        /* number of examples */
    mpfr_t *x;          /* [nex][n] phi(key) of every example */
    mpfr_t **y;         /* [nex] the example's target row (into h.v or h.hist_v) */
    mpfr_t *q;          /* [T][n] phi(q_t) */
    mpfr_t *tmp;        /* FREF_NTMP scratch scalars */
} fref_ctx;

/* `count` zeros of precision `prec` in one allocation (MPFR's custom
 * interface, so a failed allocation is reported, not an abort). Free with
 * fref_vec_free, never mpfr_clear. NULL on allocation failure. */
mpfr_t *fref_vec_alloc(size_t count, mpfr_prec_t prec);
void fref_vec_free(mpfr_t *v);

falcon_status fref_ctx_init(fref_ctx *c, const falcon_ref_opts *o, const falcon_ref_head *h);
/* The same over mpfr inputs, which the context reads in place. */
falcon_status fref_ctx_init_mp(fref_ctx *c, const falcon_ref_opts *o, const falcon_ref_head_mp *h);
void fref_ctx_free(fref_ctx *c);

/* Window E_t of step t: examples lo .. lo+count-1; count 0 when step t has
 * no example. */
int64_t fref_window(const fref_ctx *c, int64_t t, int64_t *lo);

/* The terms of step t over its window (lo, cnt from fref_window, cnt >= 1):
 * write directions z[cnt][n] (x_l, or g_t * x_l for Falcon-2/2A) and
 * eta = beta_t / (eps + SUM_l x_l.z_l). */
void fref_step_terms(fref_ctx *c, int64_t t, int64_t lo, int64_t cnt, mpfr_t *z, mpfr_ptr eta);

/* (Vectors are passed as plain mpfr_t *: a const-qualified pointer to the
 * array type mpfr_t does not convert implicitly in C11.) */
/* acc += a.b (length n). */
void fref_dot_acc(mpfr_ptr acc, mpfr_t *a, mpfr_t *b, int64_t n);
/* y[m] = S[m][n] x[n]. */
void fref_matvec(mpfr_t *y, mpfr_t *S, mpfr_t *x, int64_t m, int64_t n);
/* dst[i] = src[i] (exact), or 0 for src == NULL. */
void fref_load(mpfr_t *dst, const double *src, size_t count);
/* dst[i] = src[i] rounded to nearest into dst's precision. */
void fref_store(mpfr_t *dst, mpfr_t *src, size_t count);

/* One recurrent step on S (S_{t-1} in, S_t out): the decay, then the write
 * over the window (docs/math.md section 1). z [W][n] and r [W][m] are
 * scratch for the window's directions and scaled residuals. */
void fref_step(fref_ctx *c, mpfr_t *S, mpfr_t *z, mpfr_t *r, int64_t t);
/* S[m][n] = the carried memory S0 (zero when the head has none). */
void fref_load_S0(const fref_ctx *c, mpfr_t *S);

/* Run an _mp form at the opts' precision and round its results to double.
 * `reads` (may be NULL) is passed through to the form: the read sums of
 * falcon_ref_reads, which only the recurrent form accumulates. */
typedef falcon_status (*fref_mp_fn)(const falcon_ref_opts *, const falcon_ref_head *,
                                    mpfr_t *out, mpfr_t *S, mpfr_t *reads);
falcon_status fref_run_double(fref_mp_fn fn, const falcon_ref_opts *o,
                              const falcon_ref_head *h, double *out, double *S, mpfr_t *reads);

#endif
