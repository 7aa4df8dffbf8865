/*
 * The gradient gate (docs/math.md section 12): the gradients of a kernel's
 * backward pass against the MPFR reverse sweep, as normwise relative errors
 * in units of roundoff, one per gradient tensor, each against a threshold
 * that carries the tensor's conditioning (kappa_X, computed by the
 * reference's absolute sweep). gate/THRESHOLDS.md, "Gradients", has the
 * derivation and the calibration.
 */
#ifndef FALCON_GRAD_GATE_H
#define FALCON_GRAD_GATE_H

#include "gate.h"

/* The gradient tensors, in falcon_grads' order. */
typedef enum gate_grad_tensor {
    GG_DQ = 0, GG_DK, GG_DV, GG_DBETA, GG_DALPHA, GG_DGAIN, GG_DS0, GG_DPREV, GG_DHK, GG_DHV, GG_COUNT
} gate_grad_tensor;
const char *gate_grad_name(int tensor); /* "dq", ... */

/* A gradient case: a gate case, and whether its call starts from a carried
 * state (a previous key and a window history made by a first segment of
 * `carried` steps through the MPFR backend, so that kernel and reference
 * start from the same state). */
typedef struct gate_grad_case {
    gate_case c;
    int64_t carried; /* steps of the first segment; 0: a fresh state */
} gate_grad_case;

/* The table: profile 0 quick (make check), 1 full (falcon verify --grad
 * --profile full). Returns the count, -1 when out of memory. */
int gate_grad_cases(int profile, gate_grad_case **cases);

/* Seeded cotangents of a case in a precision: dO [B][T][H][m] in the run's
 * element type and its exact double copy, dS_T [heads][m][n] (double,
 * exact in the precision), uniform in (-1, 1). */
typedef struct gate_cotangents {
    void *dO;
    double *dO64, *dS;
} gate_cotangents;
int gate_cotangents_make(const gate_case *c, falcon_precision prec, gate_cotangents *ct);
/* The same for a call whose state has `heads` heads (a packed batch's
 * seqs x H): dS_T [heads][m][n]. */
int gate_cotangents_make_heads(const gate_case *c, int64_t heads, falcon_precision prec, gate_cotangents *ct);
void gate_cotangents_free(gate_cotangents *ct);

/* Every gradient of a call, in double ([B][T][H][D] tensors, state
 * gradients [heads][...]); count 0 for a tensor the call does not have.
 * cond: the reference's kappa_X (1 for a kernel's result). */
typedef struct gate_grad_result {
    int64_t count[GG_COUNT];
    double *x[GG_COUNT];
    double cond[GG_COUNT];
    double abs_norm[GG_COUNT]; /* reference only: ||X_abs||_F */
} gate_grad_result;
void gate_grad_result_free(gate_grad_result *r);
/* ||x||_F, scaled so that neither tiny nor huge values under- or overflow
 * (a value that is not finite is returned as it is). */
double gate_frobenius(const double *x, int64_t count);

/* The carried state of a case (NULL for a fresh one), made the same way for
 * every run of it. */
falcon_status gate_grad_state(const gate_grad_case *g, const gate_data *d, falcon_state **state);
/* A kernel's gradients through falcon_backward. */
falcon_status gate_grad_run(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                            falcon_form form, falcon_backend backend, const falcon_state *state,
                            gate_grad_result *r);
/* The same through another entry with falcon_backward's contract (the
 * CUDA backend's CPU emulation, verify/cuda/cuda-check-grad.c). */
typedef falcon_status (*gate_backward_fn)(const falcon_config *cfg, const falcon_inputs *in,
                                          const falcon_state *state, const void *dO, const double *dS_T,
                                          const falcon_grads *grads);
falcon_status gate_grad_run_with(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                 falcon_form form, falcon_backend backend, const falcon_state *state,
                                 gate_backward_fn backward, gate_grad_result *r);
/* The MPFR reverse sweep (256 bits), called head by head, with kappa_X. */
falcon_status gate_grad_reference(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                  const falcon_state *state, gate_grad_result *r);
/* The same, keeping the absolute sweep's tensors X_abs in *r_abs (whose
 * cond and abs_norm are not set), for a caller that assembles a call from
 * pieces (grade/export-layout.c): kappa_X = falcon_ref_grad_cond(X, X_abs). */
falcon_status gate_grad_reference_abs(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                      const falcon_state *state, gate_grad_result *r, gate_grad_result *r_abs);

/* err_u[t]: the normwise relative error of tensor t in units of roundoff
 * (0 where the tensor is absent). Where the reference's X is exactly 0 but
 * its terms are not (kappa_X infinite), the error is ||X|| / ||X_abs||
 * instead: relative to the terms that cancelled, so never vacuous. */
void gate_grad_compare(const gate_grad_result *r, const gate_grad_result *ref, falcon_precision prec,
                       double err_u[GG_COUNT]);
/* The threshold of tensor t, in units of roundoff (gate/THRESHOLDS.md). */
double gate_grad_threshold(const gate_case *c, falcon_form form, falcon_precision prec, int tensor,
                           double cond);

#endif
