/* The golden cases: exact inputs and independently computed results. */
#ifndef FALCON_GOLDEN_H
#define FALCON_GOLDEN_H
#include <stddef.h>

typedef struct golden_case {
    const char *variant, *align, *phi;
    int window;
    double eps;
    int T, n, m;
    const double *q, *k, *v, *beta, *alpha, *gain; /* alpha, gain may be NULL */
    const double *expected_out;   /* [T][m] */
    const double *expected_state; /* [m][n] */
} golden_case;

extern const golden_case golden_cases[];
extern const int golden_case_count;
#endif
