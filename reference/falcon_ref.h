/*
 * The MPFR reference: docs/math.md section 1 step by step (recurrent) and the
 * chunk-parallel equations of docs/math.md section 7, both evaluated at `bits` of
 * precision with inputs converted exactly. Written independently of the
 * kernels' framework so that it is an outside check on them.
 */
#ifndef FALCON_REF_H
#define FALCON_REF_H

#include <mpfr.h>
#include "falcon.h"

/* One head, contiguous double inputs (exact copies of the run's inputs). */
typedef struct falcon_ref_head {
    int64_t T, n, m;
    const double *q, *k;   /* [T][n] raw (phi is applied by the reference) */
    const double *v;       /* [T][m] */
    const double *beta;    /* [T] */
    const double *alpha;   /* [T] or NULL (no decay) */
    const double *gain;    /* [T][n] or NULL (only Falcon-2/2A) */
    /* carried state in */
    const double *S0;       /* [m][n] */
    const double *prev_key; /* [n] raw, or NULL: no previous key */
    const double *hist_k;   /* [hist_len][n] raw keys of the carried examples, oldest first */
    const double *hist_v;   /* [hist_len][m] */
    int64_t hist_len;       /* <= window - 1 */
} falcon_ref_head;

/* The same head with MPFR inputs (any precision; the reference reads them
 * rounded to its own), for inputs that are not doubles: a finite-difference
 * test perturbs them by far less than a double's unit. NULL as above; S0
 * may be NULL (zero). Vectors are plain mpfr_t * (see ref_common.h). */
typedef struct falcon_ref_head_mp {
    int64_t T, n, m;
    mpfr_t *q, *k, *v, *beta, *alpha, *gain;
    mpfr_t *S0, *prev_key, *hist_k, *hist_v;
    int64_t hist_len;
} falcon_ref_head_mp;

typedef struct falcon_ref_opts {
    falcon_variant variant;
    falcon_align align;
    falcon_phi phi;
    double eps;      /* as the run sees it (already rounded to its precision) */
    int64_t window;  /* W (1 for non-window variants) */
    int64_t chunk;   /* chunk length C for the chunk form */
    mpfr_prec_t bits;
} falcon_ref_opts;

/* High-precision results: out [T][m] and S [m][n], mpfr_t arrays that the
 * caller has initialised (any precision; the result is rounded into them).
 * Return FALCON_OK or FALCON_E_NOMEM. */
falcon_status falcon_ref_recurrent_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                      mpfr_t *out, mpfr_t *S);
falcon_status falcon_ref_chunk_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  mpfr_t *out, mpfr_t *S);
/* The recurrent form continued from a high-precision memory: S holds the
 * carried S_{t0} on entry (h->S0 is not read; the carried keys are still
 * h->prev_key and h->hist_k/hist_v) and S_{t0+T} on return. Runs split at
 * any step and chained this way give the one run's results exactly when S
 * has the working precision (nothing is rounded between them): a long
 * stream's reference costs O(T), where rerunning its prefix costs O(T^2). */
falcon_status falcon_ref_recurrent_mp_carry(const falcon_ref_opts *o, const falcon_ref_head *h,
                                            mpfr_t *out, mpfr_t *S);

/* falcon_ref_recurrent_mp over mpfr inputs. */
falcon_status falcon_ref_recurrent_mp_in(const falcon_ref_opts *o, const falcon_ref_head_mp *h,
                                         mpfr_t *out, mpfr_t *S);

/* The same, rounded to double (round-to-nearest). out [T][m], S [m][n]. */
falcon_status falcon_ref_recurrent(const falcon_ref_opts *o, const falcon_ref_head *h,
                                   double *out, double *S);
falcon_status falcon_ref_chunk(const falcon_ref_opts *o, const falcon_ref_head *h,
                               double *out, double *S);

/* One head hh = b*H + h of a [B][T][H][D] batch in precision `prec`, its
 * values converted exactly to double into `buf` (falcon_ref_head_doubles(in)
 * doubles), with that head's carried state from `st` (NULL: a fresh state). */
size_t falcon_ref_head_doubles(const falcon_inputs *in);
void falcon_ref_head_gather(const falcon_inputs *in, falcon_precision prec,
                            const falcon_state_view *st, int64_t hh, double *buf,
                            falcon_ref_head *out);

/*
 * The condition number of the reads, kappa = || (|S_t| |phi(q_t)|)_t ||_F /
 * ||O||_F >= 1: cancellation in o = S q magnifies an error in S by up to
 * kappa, so the output threshold scales with it. The reference computes it
 * from its own S_t at its own precision (never from a kernel under test).
 * Sums accumulate over every head passed to falcon_ref_recurrent_reads.
 */
typedef struct falcon_ref_reads {
    mpfr_t *sums; /* [0]: SUM (|S_t| |phi(q_t)|)^2, [1]: SUM o^2 */
} falcon_ref_reads;

falcon_status falcon_ref_reads_init(falcon_ref_reads *r, mpfr_prec_t bits);
void falcon_ref_reads_free(falcon_ref_reads *r);
/* kappa from the sums so far (1 when there is no read or no cancellation). */
double falcon_ref_reads_cond(const falcon_ref_reads *r);
/* falcon_ref_recurrent, also adding this head's reads to `reads`. */
falcon_status falcon_ref_recurrent_reads(const falcon_ref_opts *o, const falcon_ref_head *h,
                                         double *out, double *S, falcon_ref_reads *reads);

/*
 * The backward pass (docs/math.md section 12): the gradients of
 * L = SUM_t dO_t . o_t + <S_T, dS_T> for the recurrent form of one head,
 * a reverse sweep at o->bits with the states recomputed from checkpoints
 * (docs/math.md 12.2). Shapes: dq, dk, dgain [T][n]; dv [T][m]; dbeta, dalpha
 * [T]; dS0 [m][n]; dprev_key [n]; dhist_k [hist_len][n]; dhist_v
 * [hist_len][m]. dalpha is used only when h->alpha is given, dgain only for
 * Falcon-2/2A, dprev_key only when h->prev_key is given; any other NULL
 * pointer is a gradient not wanted.
 */
typedef struct falcon_ref_grads {
    double *dq, *dk, *dv, *dbeta, *dalpha, *dgain, *dS0, *dprev_key, *dhist_k, *dhist_v;
} falcon_ref_grads;
typedef struct falcon_ref_grads_mp {
    mpfr_t *dq, *dk, *dv, *dbeta, *dalpha, *dgain, *dS0, *dprev_key, *dhist_k, *dhist_v;
} falcon_ref_grads_mp;

/* dO [T][m] and dS_T [m][n], NULL for 0. Every gradient is computed at
 * o->bits and rounded once into g (round-to-nearest); g_abs (may be NULL)
 * receives, in the same sweep, the magnitudes of docs/math.md 12.3 (the
 * sum of |term| over the terms that form each gradient element, every
 * operand the sweep's exact value), rounded up. Returns FALCON_OK or
 * FALCON_E_NOMEM. */
falcon_status falcon_ref_backward(const falcon_ref_opts *o, const falcon_ref_head *h,
                                  const double *dO, const double *dS_T,
                                  const falcon_ref_grads *g, const falcon_ref_grads *g_abs);
/* The same at full precision into caller-initialised mpfr arrays (rounded
 * into their precision); g_mag (may be NULL) the magnitudes.
 * `checkpoint`: steps between the memories the forward sweep keeps, < 1 for
 * ceil(sqrt(T)) (what falcon_ref_backward uses); the results do not depend
 * on it, only the memory, O((T / c + c) m n), does. */
falcon_status falcon_ref_backward_mp(const falcon_ref_opts *o, const falcon_ref_head *h,
                                     const double *dO, const double *dS_T,
                                     const falcon_ref_grads_mp *g, const falcon_ref_grads_mp *g_mag,
                                     int64_t checkpoint);

/* kappa_X = ||X_abs||_F / ||X||_F of one gradient tensor (docs/math.md
 * 12.3), at least 1, and 1 when both norms are 0; +inf when only X's is 0. */
double falcon_ref_grad_cond(const double *x, const double *x_abs, size_t count);

#endif
