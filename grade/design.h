/*
 * Which cases a set holds (grade/design.c): a list designed for coverage,
 * not inherited from the gate. `falcon cases export` writes each of them in
 * each form; docs/cases.md has the coverage table.
 */
#ifndef FALCON_GRADE_DESIGN_H
#define FALCON_GRADE_DESIGN_H

#include "gate.h"

/* One configuration of a set: a gate case plus what the gate's generator
 * does not draw. */
typedef struct export_case {
    gate_case c;
    int carried;     /* starts from a carried state, not a fresh one */
    int beta_edges;  /* some steps have beta exactly 0, some exactly 2, some keys and queries exact zeros */
    int subnormal;   /* some steps' keys and queries are subnormal (l2norm makes them count) */
    int memory_log2; /* the carried memory is scaled by 2^memory_log2 (0: as warmed up) */
    int unit_beta;   /* every beta is exactly 1 */
    /* Layouts (docs/math.md section 13); 0 for a plain batch: */
    int seqs;        /* a packed batch (B = 1) of seqs sequences, lengths grade_packed_lengths */
    int qk_heads;    /* grouped heads: q and k hold qk_heads of the H heads */
    falcon_head_map head_map;
    /* Batch invariance (docs/cases.md): a member of group inv_group (>= 1)
     * holds the group's one sequence (inv_T steps, from inv_seed's inputs
     * and a fresh state) at batch row inv_row, or as packed sequence
     * inv_row; 0 for the other cases. */
    int inv_group, inv_row;
    int64_t inv_T;
    uint64_t inv_seed;
} export_case;

/* The lengths of a packed case's seqs sequences (at most GRADE_MAX_SEQS),
 * given its T: 0, 1, 9, 0, 3 and the rest of T (much longer than the
 * others), cut to seqs; their sum is T. */
#define GRADE_MAX_SEQS 6
void grade_packed_lengths(int seqs, int64_t T, int64_t *len);

/* The cases of a profile: 0 quick (a covering array plus feature
 * families), 1 full (quick's cases, the gate's whole table, long cases
 * under every decay regime). The count, or -1 out of memory. */
int grade_design_cases(int profile, export_case **out);

#endif
