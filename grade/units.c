/* Units of roundoff and the formats behind them (see grade.h). */
#include <math.h>
#include <string.h>
#include "grade.h"

typedef struct format {
    const char *name;
    int p;          /* significand bits, the implicit one included */
    int emin, emax; /* exponents of the smallest normal and the largest finite */
} format;

/* u = 2^-p for round to nearest. tf32 and bf16 keep fp32's exponent range. */
static const format formats[GRADE_UNIT_COUNT] = {
    [GRADE_FP64] = {"fp64", 53, -1022, 1023},
    [GRADE_FP32] = {"fp32", 24, -126, 127},
    [GRADE_TF32] = {"tf32", 11, -126, 127},
    [GRADE_BF16] = {"bf16", 8, -126, 127},
    [GRADE_FP16] = {"fp16", 11, -14, 15},
};

const char *grade_unit_name(grade_unit u) { return u < GRADE_UNIT_COUNT ? formats[u].name : "unknown"; }

int grade_unit_parse(const char *s)
{
    for (int i = 0; i < GRADE_UNIT_COUNT; i++)
        if (s && !strcmp(s, formats[i].name)) return i;
    return -1;
}

double grade_unit_roundoff(grade_unit u) { return ldexp(1.0, -formats[u].p); }

int grade_round(double x, grade_unit u, double *out)
{
    const format *f = &formats[u];
    if (!isfinite(x)) return -1;
    if (x == 0) {
        *out = x;
        return 0;
    }
    int e;
    frexp(x, &e); /* |x| = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1) */
    const int lead = e - 1 < f->emin ? f->emin : e - 1;
    const int quantum = lead - (f->p - 1); /* spacing of the format around x */
    const double v = ldexp(nearbyint(ldexp(x, -quantum)), quantum); /* ties to even */
    const double largest = ldexp(2.0 - ldexp(1.0, 1 - f->p), f->emax);
    if (fabs(v) > largest) return -1;
    *out = v;
    return 0;
}

static const char *const layouts[GRADE_LAYOUT_COUNT] = {"falcon", "fla", "ggml"};

const char *grade_layout_name(grade_layout l) { return l < GRADE_LAYOUT_COUNT ? layouts[l] : "unknown"; }

int grade_layout_parse(const char *s)
{
    for (int i = 0; i < GRADE_LAYOUT_COUNT; i++)
        if (s && !strcmp(s, layouts[i])) return i;
    return -1;
}
