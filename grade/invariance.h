/*
 * Batch invariance (docs/cases.md, "Batch invariance"): the cases of a
 * group hold one sequence at different batch rows, between different
 * neighbours or packed among sequences of other lengths; a correct kernel
 * that computes each sequence on its own gives it the same results, bit for
 * bit, wherever it sits. `falcon check` compares them apart from the
 * verdict: a group whose members' results for the sequence differ in any
 * bit is "batch-variant" (an error when --require-batch-invariance).
 */
#ifndef FALCON_GRADE_INVARIANCE_H
#define FALCON_GRADE_INVARIANCE_H

#include <jansson.h>
#include <stdio.h>

typedef struct check_invariance {
    char group[64];        /* the case.json group and the form: "b1-chunk" */
    char first[256];       /* the member the others are compared with */
    char other[256];       /* batch-variant: the first member that differs */
    char where[128];       /* and where: "out[t=3, h=1, j=0]" or "state[h=0, i=2, j=1]" */
    int members, compared; /* members in the set; compared: judged with results */
    int variant;
} check_invariance;

/* The groups of the set (index: its cases; cases_dir, results_dir: where
 * their case.json and results lie; skip: the manifest's skips), compared.
 * *out (malloc'd, *count groups; none: NULL, 0). 0, or 2 after an error line
 * (a member whose result cannot be read was already refused by judging). */
int check_invariance_groups(const char *cases_dir, const char *results_dir, json_t *index, json_t *skip,
                            check_invariance **out, int *count);

/* The table's lines ("batch invariance: ...", a BATCH-VARIANT line per
 * group that is; with `lines` (--format lines) the BATCH-VARIANT lines
 * alone), the JSON array, and how many groups are variant. */
void check_invariance_print(FILE *f, const check_invariance *g, int n, int lines);
json_t *check_invariance_json(const check_invariance *g, int n);
int check_invariance_variant(const check_invariance *g, int n);

#endif
