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
} export_case;

/* The cases of a profile: 0 quick (a covering array plus feature
 * families), 1 full (quick's cases, the gate's whole table, long cases
 * under every decay regime). The count, or -1 out of memory. */
int grade_design_cases(int profile, export_case **out);

#endif
