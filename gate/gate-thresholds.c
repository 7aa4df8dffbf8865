/* Thresholds of the gate, in units of roundoff u of the run's precision.
 * Derivation and measurements: gate/THRESHOLDS.md. In short: every
 * quantity is a sum of dot products whose rounding error grows like the
 * square root of their length (random-sign rounding), the regression steps
 * are non-expansive so those errors do not compound, and the blocked forms
 * add sums over the L*W terms of a block. So the memory's error is bounded
 * by K (2 + sqrt(depth)) u with depth = n (recurrent) or n + L W (chunk,
 * parallel), and a read o = S q adds the cancellation of that product: its
 * condition number multiplies the bound. K = 6 puts the largest error
 * measured over 20 seeds of the full table at a third of the threshold or
 * less, while every seeded bug lands at 10^3 u or more.
 * tf32 and bf16 (the chunk form's operand formats): the same bound with
 * each rounding in its own unit. The 2 of the bound is the rounding of a
 * product's operands, in the format's u_op; the sqrt(depth) term is the
 * accumulation, still fp32's u. In units of u_op the bound is then
 * K (2 + sqrt(depth) u / u_op): the operand rounding dominates, and the
 * error no longer grows with depth (errors of independent operands add in
 * quadrature, as the sum itself grows). */
#include <math.h>
#include "gate.h"

#define GATE_K 6.0

static double depth(const gate_case *c, falcon_form form)
{
    if (form == FALCON_FORM_RECURRENT) return (double)c->n;
    /* The blocks the run cuts: the chunk form's falcon_chunk_block (C, or
     * the automatic choice, at most 4096 / W), the parallel form's
     * falcon_parallel_block(W). */
    int64_t L = form == FALCON_FORM_CHUNK
                    ? falcon_chunk_block(falcon_chunk_of(c->chunk, c->n, c->m, c->window), c->window)
                    : falcon_parallel_block(c->window);
    if (L > c->T) L = c->T;
    return (double)(c->n + L * c->window);
}

double gate_threshold(const gate_case *c, falcon_form form, falcon_precision prec)
{
    /* u_op: the unit of the errors; u: of the accumulation (the same but in tf32, bf16) */
    const double u_op = gate_unit_roundoff(prec);
    const double u = gate_operand_drop(prec) ? gate_unit_roundoff(FALCON_FP32) : u_op;
    return GATE_K * (2.0 + sqrt(depth(c, form)) * u / u_op);
}

double gate_threshold_out(const gate_case *c, falcon_form form, falcon_precision prec,
                          double read_cond)
{
    return gate_threshold(c, form, prec) * (read_cond > 1 ? read_cond : 1);
}
