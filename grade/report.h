/* What `falcon check` reports: the table, JSON and JUnit XML (report.c). */
#ifndef FALCON_GRADE_REPORT_H
#define FALCON_GRADE_REPORT_H

#include <stdio.h>
#include "where.h"
#include "invariance.h"

/* The largest normwise relative error a threshold may allow: 2^-4. A case
 * whose threshold in the judged unit (thr_u * u) is larger, for its outputs
 * or its state, cannot pass: it is CHECK_UNJUDGEABLE (an all-zero result,
 * relative error 1, would be within such a threshold). */
#define CHECK_MAX_RELERR 0.0625

typedef enum check_status {
    CHECK_PASS = 0,
    CHECK_FAIL,
    CHECK_SKIP,
    CHECK_UNJUDGEABLE /* within its threshold, but the threshold allows more than CHECK_MAX_RELERR */
} check_status;

/* One gradient of a case exported with --grad (docs/cases.md, "Gradients"). */
#define CHECK_NGRAD 10 /* gate_grad_tensor's GG_COUNT: dq, dk, dv, dbeta, dalpha, dgain, dS0, dprev_key, dhist_k, dhist_v */
typedef struct check_grad {
    int has;              /* the case has the reference's gradient */
    int given;            /* the results hold it */
    int finite;           /* every element of the given gradient is finite */
    double err_u, thr_u;  /* the normwise relative error and threshold in units of roundoff */
    double kappa;         /* the reference's conditioning (INFINITY: the reference is 0, its terms are not) */
    check_status status;  /* PASS, FAIL or UNJUDGEABLE (given), else SKIP */
} check_grad;

typedef struct check_case {
    char name[256], variant[16], form[16], align[16], decay[16]; /* cut at a UTF-8 character boundary */
    check_status status;
    const char *reason;           /* CHECK_SKIP: the manifest's reason, whole (owned by the manifest) */
    double out_u, state_u;        /* errors in units of roundoff; state_u NaN when no state was given */
    double thr_out_u, thr_state_u;
    double ratio;                 /* the larger error over its threshold */
    int identical;                /* out (and state, when given) equal the reference bit for bit */
    const char *dtype;            /* the result out.npy's format: "float16", "float32", "float64" */
    int no_steps;                 /* T = 0: the case's only result is its final state */
    check_where where;            /* outputs beyond their threshold: the first bad step (else all -1) */
    int grad_ref;                 /* the case has reference gradients (a set exported with --grad) */
    int grad_given;               /* how many of them the results hold (0: not graded for gradients) */
    check_grad grad[CHECK_NGRAD];
} check_case;

/* How the cases are printed: the table (failing cases, groups, notes) or
 * one line per case (--format lines). */
typedef enum check_format { CHECK_FORMAT_TABLE = 0, CHECK_FORMAT_LINES } check_format;

typedef struct check_report {
    const char *cases_dir, *results_dir, *unit;
    double u;
    const check_case *cases;
    int count;
    double max_skipped; /* --max-skipped: the largest fraction of cases that may be skipped; < 0: any */
    const check_invariance *inv; /* the batch-invariance groups (invariance.h), ninv of them */
    int ninv;
    int require_inv;    /* --require-batch-invariance: a batch-variant group fails the run */
} check_report;

/* The run's counts. judged: cases with a verdict (pass + fail); no_state:
 * cases read without a state.npy; identical_groups: variant and form groups
 * whose every result equals the reference bit for bit; too_many_skips:
 * more skipped cases than --max-skipped allows. */
typedef struct check_tally {
    int pass, fail, skip, unjudgeable, judged, no_state, identical_groups, too_many_skips;
    int grad_cases, no_grad; /* cases read that have reference gradients; of those, the ones given none */
} check_tally;

/* src copied into dst (size bytes), cut at the last whole UTF-8 character
 * that fits (and before a byte that starts none): never half a character. */
void check_copy_text(char *dst, size_t size, const char *src);
check_tally check_count(const check_report *r);
/* A case failed, or more cases were skipped than --max-skipped allows. */
int check_failed(const check_report *r);
/* Failing cases (every case with verbose), the per variant and form table
 * (the columns of `falcon verify`), and a summary line with the lines that
 * qualify it (cases not judgeable, states not given, groups identical to
 * the reference, too many skips). */
void check_print(FILE *f, const check_report *r, int verbose);
/* --format lines: one line per case, "<case>: OK|FAIL|SKIP|NOT JUDGEABLE
 * ...", then the summary line (which says when the set was not verified:
 * trust_set), nothing else. */
void check_print_lines(FILE *f, const check_report *r, int trust_set);
/* The report as JSON and as JUnit XML; NULL when out of memory (free it). */
char *check_json_text(const check_report *r);
char *check_junit_text(const check_report *r);

#endif
