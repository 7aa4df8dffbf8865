/*
 * Packed batches and grouped heads in a case set (docs/cases.md, "Packed
 * batches and grouped heads"): the inputs of such a case, its state's heads
 * and its reference. The reference lowers the layout itself, to the
 * per-head MPFR recurrence of plain cases (gate_reference_from): the
 * library's own lowering (src/layout.c) is under test, never used here.
 */
#ifndef FALCON_GRADE_EXPORT_LAYOUT_H
#define FALCON_GRADE_EXPORT_LAYOUT_H

#include <jansson.h>
#include "design.h"
#include "set.h"
#include "grad-gate.h"

/* The packed offsets of a case (cu_seqlens), held beside its inputs. */
typedef struct case_layout {
    int64_t cu[GRADE_MAX_SEQS + 1];
} case_layout;

/* 1 when the case is packed or grouped. */
int layout_is_plain(const export_case *e);
/* The state heads of the case: seqs x H packed, B x H otherwise. */
int64_t layout_state_heads(const export_case *e);
/* The q/k heads of the case (H unless grouped). */
int64_t layout_qk_heads(const export_case *e);
/* The case as the thresholds see it: T the longest sequence's. */
gate_case layout_threshold_case(const export_case *e);

/* The generated inputs d (value heads everywhere) given the case's layout:
 * q and k of grouped heads kept for the q/k heads only, each the one of its
 * first value head (both buffers), and the packed offsets in l; d's inputs
 * then describe the layout (falcon_inputs' cu_seqlens, qk_heads). */
void layout_apply(const export_case *e, gate_data *d, case_layout *l);

/* The reference of a case with its layout applied (d), from the initial
 * state init (seqs x H or B x H heads): each packed sequence on its own
 * heads, q and k repeated to the value heads; the read condition number
 * that of the whole call. */
falcon_status layout_reference(const export_case *e, const gate_case *c, const gate_data *d,
                               const falcon_state *init, gate_result *r);

/* The MPFR gradients of a layout case (grad_layout's reference; ctx: the
 * export_case), from the cotangents ct: each packed sequence and its
 * state rows alone, q and k repeated to the value heads, the gradient of a
 * shared q/k head the sum of its value heads' (its X_abs too, so kappa is
 * the shared head's). */
falcon_status layout_grad_reference(const void *ctx, const gate_grad_case *gc, const gate_data *d,
                                    const gate_cotangents *ct, const falcon_state *init, gate_grad_result *r);

/* Batch invariance (design.h, inv_group): the group's one sequence written
 * into a member's generated inputs d (both buffers) at its place; 0, or -1
 * out of memory. Nothing for other cases. */
int layout_share(const export_case *e, gate_data *d);
/* case.json's "invariance": the group and where the member holds its
 * sequence (batch row b, steps [t0, t1), state row); none for others. */
void layout_invariance_json(const export_case *e, json_t *j);

/* cu_seqlens.npy (int64 [seqs + 1]) of a packed case into dir, through
 * the sink; 0, or 2 after cli_error. */
int layout_write_offsets(set_sink *sink, const char *dir, const falcon_inputs *in);
/* case.json's layout keys: "seqs" (packed), "qk_heads" and "head_map"
 * ("interleaved" or "tiled": grouped); none for a plain case. */
void layout_json(const export_case *e, json_t *j);

#endif
