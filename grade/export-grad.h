/*
 * The gradients of a case set (`falcon cases export --grad`, docs/cases.md
 * "Gradients"), shared by the export and by `falcon check`.
 *
 * Each case gets seeded cotangents (dO, dS_T), the MPFR reference's
 * gradients of L = <O, dO> + <S_T, dS_T> (docs/math.md section 12) and, per
 * gradient, its threshold in units of roundoff with the reference's
 * conditioning kappa_X. All of it comes from the gradient gate
 * (gate/grad-gate.h): its cotangents, its reference sweep, its threshold
 * and its error; nothing here is a second reference or formula.
 */
#ifndef FALCON_GRADE_EXPORT_GRAD_H
#define FALCON_GRADE_EXPORT_GRAD_H

#include <jansson.h>
#include "set.h"
#include "grad-gate.h"

/* The file names of a gradient: the reference's in the set ("ref_dq.npy")
 * and an implementation's in its results ("dq.npy"); t a gate_grad_tensor. */
const char *grad_ref_file(int t);
const char *grad_result_file(int t);
/* The tensor whose result file is `file`, or -1. */
int grad_tensor_of_file(const char *file);

/* The gradients of one configuration: cotangents exact in the unit and the
 * reference's gradients (value scale 1), computed once for its three forms.
 * cot_scale: the power of two on the gate's cotangents (uniform in (-1, 1))
 * that keeps every gradient within the unit's range (1 but where an exact
 * gradient would overflow it). */
typedef struct grad_export {
    gate_cotangents ct;
    gate_grad_result ref;
    double cot_scale;
    int64_t rows, qk_heads; /* the state's rows (B, or a packed case's seqs); q/k heads */
    int64_t threshold_T;    /* the steps the thresholds count (a packed case's longest) */
} grad_export;

/* A case the plain gradient gate cannot run (packed, grouped heads:
 * grade/export-layout.c): its shapes and its reference, from cotangents. */
typedef struct grad_layout {
    int64_t rows, qk_heads, threshold_T;
    falcon_status (*reference)(const void *ctx, const gate_grad_case *gc, const gate_data *d,
                               const gate_cotangents *ct, const falcon_state *init, gate_grad_result *r);
    const void *ctx;
} grad_layout;

/* c: the case with its eps already in the inputs' format; d: its inputs;
 * init: its initial state; carried: whether that state carries a previous
 * key and a window history; layout: NULL for a plain case. FALCON_OK, or the reference's failure
 * (falcon_last_error says what, except for FALCON_E_NOMEM). */
falcon_status grad_export_make(const gate_case *c, int carried, const gate_data *d, const falcon_state *init,
                               grade_unit u, const grad_layout *layout, grad_export *g);
void grad_export_free(grad_export *g);

/* A form's copy into the case folder `dir`: dO.npy, dS_T.npy and the
 * ref_d*.npy files, the gradients scaled for the copy's value scale vs; and
 * into case.json `j` the key "gradients" (per tensor: files, shape,
 * threshold_u, kappa, how the threshold was formed) and "cotangents". 0, or 2
 * after cli_error. */
int grad_export_write(set_sink *sink, const char *dir, const gate_case *c, falcon_form form, grade_unit u,
                      double vs, const grad_export *g, json_t *j);

#endif
