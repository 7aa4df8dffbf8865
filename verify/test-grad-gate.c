/*
 * The gradient gate (gate/grad-gate.h): every case of the quick table
 * through every kernel backend present and every form whose backward pass
 * the build has, in fp32 and fp64, against the MPFR reverse sweep; every
 * gradient tensor within its threshold (gate/THRESHOLDS.md, "Gradients").
 * tf32 and bf16: the chunk form only (the precisions of its operand model),
 * against the same reverse sweep of their fp32 data, errors in u_op
 * (gate/THRESHOLDS.md, "Gradients: tf32 and bf16").
 * One test per variant and precision; each case prints its errors.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include "grad-gate.h"

/* One kernel run of a case: its errors against the reference, each tensor
 * against its threshold. Returns 1 if it ran, 0 if the form has no
 * backward pass in this build. */
static int judge(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct, const falcon_state *st,
                 const gate_grad_result *ref, falcon_backend b, falcon_form f, const char *desc)
{
    gate_grad_result r;
    const falcon_status s = gate_grad_run(g, d, ct, f, b, st, &r);
    if (s == FALCON_E_UNAVAILABLE && f != FALCON_FORM_RECURRENT) return 0;
    cr_assert(s == FALCON_OK, "%s %s %s: %s", falcon_backend_name(b), falcon_form_name(f), desc, falcon_last_error());
    double err[GG_COUNT];
    gate_grad_compare(&r, ref, d->prec, err);
    printf("grad-gate %s %s %s %s:", falcon_backend_name(b), falcon_precision_name(d->prec), falcon_form_name(f), desc);
    for (int t = 0; t < GG_COUNT; t++) {
        if (!r.count[t]) continue;
        const double thr = gate_grad_threshold(&g->c, f, d->prec, t, ref->cond[t]);
        printf(" %s %.2f u (<= %.1f)", gate_grad_name(t), err[t], thr);
        cr_expect(err[t] <= thr, "%s %s %s %s: %s error %.3g u > %.3g u (kappa %.3g)", falcon_backend_name(b),
                  falcon_precision_name(d->prec), falcon_form_name(f), desc, gate_grad_name(t), err[t], thr,
                  ref->cond[t]);
    }
    printf("\n");
    gate_grad_result_free(&r);
    return 1;
}

static int judge_case(const gate_grad_case *g, falcon_precision prec)
{
    gate_data d;
    gate_cotangents ct;
    gate_grad_result ref;
    falcon_state *st = NULL;
    char desc[256];
    gate_case_describe(&g->c, desc, sizeof desc);
    cr_assert(gate_data_make(&g->c, prec, &d) == 0);
    cr_assert(gate_cotangents_make(&g->c, prec, &ct) == 0);
    cr_assert(gate_grad_state(g, &d, &st) == FALCON_OK, "state: %s", falcon_last_error());
    cr_assert(gate_grad_reference(g, &d, &ct, st, &ref) == FALCON_OK, "reference: %s", falcon_last_error());
    int ran = 0;
    for (int b = 0; b < gate_backend_count; b++) {
        if (!gate_backend_runs(gate_backends[b], prec) || gate_backends[b] == FALCON_BACKEND_CUDA) continue;
        for (int f = 0; f < 3; f++)
            if (gate_form_runs((falcon_form)f, prec)) ran += judge(g, &d, &ct, st, &ref, gate_backends[b], (falcon_form)f, desc);
    }
    gate_grad_result_free(&ref);
    falcon_state_free(st);
    gate_cotangents_free(&ct);
    gate_data_free(&d);
    return ran;
}

static void run_variant(falcon_variant v, falcon_precision prec)
{
    gate_grad_case *cases;
    const int n = gate_grad_cases(0, &cases);
    cr_assert(n > 0);
    int ran = 0;
    for (int i = 0; i < n; i++)
        if (cases[i].c.variant == v) ran += judge_case(&cases[i], prec);
    cr_assert(ran > 0, "no gradient was judged");
    free(cases);
}

#define GRAD_TEST(V, P) \
    Test(grad_gate, V##_##P, .timeout = 600) { run_variant(FALCON_##V, FALCON_##P); }

GRAD_TEST(1, FP32)
GRAD_TEST(1, FP64)
GRAD_TEST(2, FP32)
GRAD_TEST(2, FP64)
GRAD_TEST(3, FP32)
GRAD_TEST(3, FP64)
GRAD_TEST(1A, FP32)
GRAD_TEST(1A, FP64)
GRAD_TEST(2A, FP32)
GRAD_TEST(2A, FP64)
GRAD_TEST(3A, FP32)
GRAD_TEST(3A, FP64)
GRAD_TEST(1, TF32)
GRAD_TEST(1, BF16)
GRAD_TEST(2, TF32)
GRAD_TEST(2, BF16)
GRAD_TEST(3, TF32)
GRAD_TEST(3, BF16)
GRAD_TEST(1A, TF32)
GRAD_TEST(1A, BF16)
GRAD_TEST(2A, TF32)
GRAD_TEST(2A, BF16)
GRAD_TEST(3A, TF32)
GRAD_TEST(3A, BF16)
