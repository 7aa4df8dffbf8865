/* What `falcon check` reports: the table, JSON and JUnit XML (report.c). */
#ifndef FALCON_GRADE_REPORT_H
#define FALCON_GRADE_REPORT_H

#include <stdio.h>

typedef enum check_status { CHECK_PASS = 0, CHECK_FAIL, CHECK_SKIP } check_status;

typedef struct check_case {
    char name[256], variant[16], form[16], align[16], decay[16];
    check_status status;
    char reason[256];             /* CHECK_SKIP: the manifest's reason */
    double out_u, state_u;        /* errors in units of roundoff; state_u NaN when no state was given */
    double thr_out_u, thr_state_u;
    double ratio;                 /* the larger error over its threshold */
} check_case;

typedef struct check_report {
    const char *cases_dir, *results_dir, *unit;
    double u;
    const check_case *cases;
    int count;
} check_report;

int check_failed(const check_report *r);
/* Failing cases (every case with verbose), the per variant and form table
 * (the columns of `falcon verify`), and a summary line. */
void check_print(FILE *f, const check_report *r, int verbose);
/* The report as JSON and as JUnit XML; NULL when out of memory (free it). */
char *check_json_text(const check_report *r);
char *check_junit_text(const check_report *r);

#endif
