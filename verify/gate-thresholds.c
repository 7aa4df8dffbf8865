/* Thresholds of the gate, in units of roundoff u of the run's precision.
 * Derivation and measurements: verify/THRESHOLDS.md. In short: every
 * quantity is a sum of dot products whose rounding error grows like the
 * square root of their length (random-sign rounding), the regression steps
 * are non-expansive so those errors do not compound, and the blocked forms
 * add sums over the L*W terms of a block. So the memory's error is bounded
 * by K (2 + sqrt(depth)) u with depth = n (recurrent) or n + L W (chunk,
 * parallel), and a read o = S q adds the cancellation of that product: its
 * condition number multiplies the bound. K = 6 puts the largest error
 * measured over 20 seeds of the full table at a third of the threshold or
 * less, while every seeded bug lands at 10^3 u or more. */
#include <math.h>
#include "gate.h"

#define GATE_K 6.0

static double depth(const gate_case *c, falcon_form form)
{
    if (form == FALCON_FORM_RECURRENT) return (double)c->n;
    /* The parallel form runs blocks of falcon_parallel_block(W) steps. */
    int64_t L = form == FALCON_FORM_CHUNK ? c->chunk : falcon_parallel_block(c->window);
    if (L > c->T) L = c->T;
    return (double)(c->n + L * c->window);
}

double gate_threshold(const gate_case *c, falcon_form form, falcon_precision prec)
{
    (void)prec; /* measured in units of each precision's u, the bound is the same */
    return GATE_K * (2.0 + sqrt(depth(c, form)));
}

double gate_threshold_out(const gate_case *c, falcon_form form, falcon_precision prec,
                          double read_cond)
{
    return gate_threshold(c, form, prec) * (read_cond > 1 ? read_cond : 1);
}
