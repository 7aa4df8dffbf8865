/* The golden gradient cases (verify/data/falcon-grad-golden.json): exact
 * inputs, cotangents and independently computed gradients. */
#ifndef FALCON_GOLDEN_GRAD_H
#define FALCON_GOLDEN_GRAD_H
#include <stddef.h>

/* One gradient tensor: "d_q", "d_k", "d_v", "d_beta", "d_alpha", "d_gain"
 * or "d_S0", row-major, rounded to float64 and to 40 significant digits. */
typedef struct golden_grad_tensor {
    const char *name;
    int count;
    const double *f64;
    const char *const *digits;
} golden_grad_tensor;

typedef struct golden_grad_case {
    const char *variant, *align, *phi;
    int window;
    double eps;
    int T, n, m;
    const double *q, *k, *v, *beta, *alpha, *gain; /* alpha, gain may be NULL */
    const double *S0;   /* [m][n] the carried memory (no previous key, no history) */
    const double *dO;   /* [T][m] */
    const double *dS_T; /* [m][n] */
    int grad_count;
    const golden_grad_tensor *grads;
} golden_grad_case;

extern const golden_grad_case golden_grad_cases[];
extern const int golden_grad_case_count;
#endif
