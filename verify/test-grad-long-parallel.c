/*
 * The masked-parallel form's backward pass on a long undecayed sequence
 * (docs/math.md 12.5; docs/cases.md, "Gradients"). Its adjoint once ran
 * over the forward's one block of up to 4096 / W steps: the transposed
 * solve of a whole undecayed sequence rounds beyond the gradient
 * thresholds (the exported case q0028, below: dS0 at 438 u against
 * 327 u). falcon_backward now runs the parallel form's adjoint in the chunk
 * form's automatic blocks (falcon_parallel_backward_block). The gradient
 * gate's own table stops at T = 96, where one block is still accurate
 * enough: this test is what fails if that choice is undone (the mutant
 * verify/mutants/grad-parallel-backward-one-block.patch).
 *
 * The case is q0028 of the quick case set (grade/design.c, row_case;
 * grade/export.c, edit_inputs) rebuilt from the same seed: Falcon-1,
 * prefix alignment, elu1, no decay, B = H = 1, T = 1100, n = 6, m = 4,
 * fp32, with beta exactly 0 at every fifth step and exactly 2 two steps
 * later and every other key and query entry 0 in between (the set's beta
 * edges, kept so that the case is the exported one: with its drawn betas
 * one block fails as well, at 1.1 to 1.6 times the threshold). Its
 * parallel gradients from every CPU backend present are judged against
 * the MPFR reverse sweep (256 bits; the mpfr backend's backward door runs
 * the same sweep, test-grad-reference.c backend_door) with the gradient
 * gate's own thresholds (gate_grad_threshold: gate/THRESHOLDS.md,
 * "Gradients", which for this form keeps the forward's depth n + T W).
 * Prints one line per backend with each tensor's error and threshold and
 * the worst ratio.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include "grad-gate.h"
#include "../src/internal.h" /* falcon_parallel_backward_block */

/* Element i of q, k or beta set to x in both of gate_data's buffers: t,
 * the kernel's fp32 copy, and t64, the reference's double copy, which
 * must hold the same values. */
static void set_input(const void *t, const void *t64, int64_t i, double x)
{
    const float f = (float)x;
    ((float *)(uintptr_t)t)[i] = f;
    ((double *)(uintptr_t)t64)[i] = (double)f;
}

/* The exported set's beta edges (grade/export.c, edit_inputs), B = H = 1. */
static void beta_edges(const gate_case *c, gate_data *d)
{
    for (int64_t t = 0; t < c->T; t++) {
        if (t % 5 == 1) set_input(d->in.beta, d->in64.beta, t, 0.0);
        if (t % 5 == 3) set_input(d->in.beta, d->in64.beta, t, 2.0);
        for (int64_t i = 0; t % 5 == 2 && i < c->n; i += 2) { /* phi at its branch point */
            set_input(d->in.q, d->in64.q, t * c->n + i, 0.0);
            set_input(d->in.k, d->in64.k, t * c->n + i, 0.0);
        }
    }
}

/* One backend's parallel-form gradients against the reference, every
 * tensor against its threshold; a failure names the backward's block
 * length, the choice this test guards. */
static void judge(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                  const gate_grad_result *ref, falcon_backend b, const char *desc)
{
    const falcon_form f = FALCON_FORM_PARALLEL;
    const long L = (long)falcon_parallel_backward_block(g->c.n, g->c.m, g->c.window);
    gate_grad_result r;
    const falcon_status s = gate_grad_run(g, d, ct, f, b, NULL, &r);
    cr_assert(s == FALCON_OK, "%s parallel %s: %s", falcon_backend_name(b), desc, falcon_last_error());
    double err[GG_COUNT], worst = 0;
    gate_grad_compare(&r, ref, d->prec, err);
    printf("grad-long-parallel %s %s:", falcon_backend_name(b), desc);
    for (int t = 0; t < GG_COUNT; t++) {
        if (!r.count[t]) continue;
        const double thr = gate_grad_threshold(&g->c, f, d->prec, t, ref->cond[t]);
        printf(" %s %.3g u (<= %.1f)", gate_grad_name(t), err[t], thr);
        worst = fmax(worst, err[t] / thr);
        cr_expect(err[t] <= thr,
                  "%s fp32 parallel %s: %s error %.3g u > threshold %.3g u (kappa %.3g), backward blocks of "
                  "%ld steps (one block of a long undecayed sequence rounds beyond the thresholds: "
                  "docs/math.md 12.5)",
                  falcon_backend_name(b), desc, gate_grad_name(t), err[t], thr, ref->cond[t], L);
    }
    printf(" worst/threshold %.3g (backward blocks of %ld steps)\n", worst, L);
    gate_grad_result_free(&r);
}

Test(grad_long_parallel, undecayed_1100_steps, .timeout = 300)
{
    const gate_grad_case g = {.c = {.variant = FALCON_1, .align = FALCON_ALIGN_PREFIX, .phi = FALCON_PHI_ELU1,
                                    .decay = GATE_DECAY_NONE, .B = 1, .T = 1100, .H = 1, .n = 6, .m = 4,
                                    .window = 1, .chunk = 64, .eps = 1e-6, .key_scale = 1.0, .seed = 300027}};
    char desc[256];
    gate_case_describe(&g.c, desc, sizeof desc);
    gate_data d;
    gate_cotangents ct;
    gate_grad_result ref;
    cr_assert(gate_data_make(&g.c, FALCON_FP32, &d) == 0);
    beta_edges(&g.c, &d);
    cr_assert(gate_cotangents_make(&g.c, FALCON_FP32, &ct) == 0);
    cr_assert(gate_grad_reference(&g, &d, &ct, NULL, &ref) == FALCON_OK, "reference: %s", falcon_last_error());
    int ran = 0;
    for (int b = 0; b < gate_backend_count; b++) {
        const falcon_backend be = gate_backends[b];
        if (!gate_backend_runs(be, FALCON_FP32) || be == FALCON_BACKEND_CUDA) continue;
        judge(&g, &d, &ct, &ref, be, desc);
        ran++;
    }
    cr_assert(ran > 0, "no CPU backend ran");
    gate_grad_result_free(&ref);
    gate_cotangents_free(&ct);
    gate_data_free(&d);
}
