/*
 * Internal to the backward pass of the MPFR reference (ref_backward.c, the
 * reverse sweep; ref_backward_api.c, its allocation and entry points).
 */
#ifndef FALCON_REF_BACKWARD_H
#define FALCON_REF_BACKWARD_H

#include "ref_common.h"
#include "falcon_advanced.h"

typedef struct bwd_sweep {
    fref_ctx c;
    int64_t seg;         /* steps between checkpoints */
    int align_same;      /* same alignment (else prefix) */
    const double *dO;    /* [T][m] or NULL (zero) */
    const falcon_ref_grads_mp *g;
    const falcon_ref_grads_mp *ga; /* NULL, or the terms' magnitudes (docs/math.md 12.3) */
    mpfr_t *ck;          /* [ceil(T / seg)][m][n] S before steps 0, seg, 2 seg, ... */
    mpfr_t *st;          /* [seg + 1][m][n] a segment's states; the forward sweep's memory */
    mpfr_t *G, *dSbar;   /* [m][n] adjoints of S_t and of the decayed memory */
    mpfr_t *z, *e, *a;   /* [W][n] directions, [W][m] residuals, [W][m] G z then de */
    mpfr_t *du, *vn;     /* [n] the read's adjoint; [n] scratch */
    mpfr_t *dx, *dy;     /* [nex][n], [nex][m] the examples' adjoints, summed over windows */
    mpfr_t *dz;          /* [W][n] the step's direction adjoints */
    /* with ga: the magnitudes of the terms of G (then dSbar), du, dx, dy */
    mpfr_t *Gmag, *du_mag, *dx_mag, *dy_mag;
    mpfr_t *s;           /* bwd_scalar_count() scalars */
} bwd_sweep;

size_t bwd_scalar_count(void);
void bwd_scalars_init(bwd_sweep *b);
/* The sweep (with the magnitudes when ga is set); then dS0 is written, and
 * every per-step gradient. */
void bwd_sweep_run(bwd_sweep *b, const double *dS_T);
/* dk, dv, dprev_key, dhist_k, dhist_v from the examples' adjoints. */
void bwd_examples_out(bwd_sweep *b);

/* fn(ctx, hh) over `heads` heads in parallel (threads <= 0: OpenMP's
 * default); the first failed head's status (ref_backend.c). */
typedef falcon_status (*fref_head_fn)(void *ctx, int64_t hh);
falcon_status fref_each_head(int threads, int64_t heads, fref_head_fn fn, void *ctx);

/* The mpfr backend's backward door (falcon_reference_grad, ref_backend_grad.c),
 * attached by falcon_reference_attach. */
falcon_status fref_reference_grad(const falcon_config *cfg, const falcon_inputs *in,
                                  const falcon_state_view *state, const void *dO, const double *dS_T,
                                  const falcon_grads *grads);

#endif
