/*
 * The gate: the full case table (verify/gate-cases.c) through every backend
 * present, every form and both precisions, against the MPFR reference
 * within the thresholds of verify/gate-thresholds.c. One test per variant
 * and precision; each case prints its errors in units of roundoff.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include "gate.h"

static void run_variant(falcon_variant v, falcon_precision prec)
{
    gate_case *cases;
    int n = gate_cases(1, &cases);
    cr_assert(n > 0);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        if (cases[i].variant != v) continue;
        gate_data d;
        gate_result ref;
        cr_assert(gate_data_make(&cases[i], prec, &d) == 0);
        cr_assert(gate_reference(&cases[i], &d, &ref) == FALCON_OK, "reference: %s", falcon_last_error());
        char desc[256];
        gate_case_describe(&cases[i], desc, sizeof desc);
        for (int b = 0; b < gate_backend_count; b++) {
            if (!gate_backend_runs(gate_backends[b], prec)) continue;
            for (int f = 0; f < 3; f++) {
                gate_result r;
                falcon_status s = gate_run(&cases[i], &d, (falcon_form)f, gate_backends[b], NULL, &r);
                cr_assert(s == FALCON_OK, "%s %s: %s", falcon_backend_name(gate_backends[b]), desc, falcon_last_error());
                gate_errors e = gate_compare(&r, &ref, prec);
                double thr = gate_threshold(&cases[i], (falcon_form)f, prec);
                double thr_out = gate_threshold_out(&cases[i], (falcon_form)f, prec, ref.read_cond);
                printf("gate %s %s %s %s: out %.2f u (<= %.1f), S %.2f u (<= %.1f)\n",
                       falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                       falcon_form_name((falcon_form)f), desc, e.out_u, thr_out, e.state_u, thr);
                cr_expect(e.out_u <= thr_out, "%s %s %s %s: out error %.3g u > %.3g u",
                          falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                          falcon_form_name((falcon_form)f), desc, e.out_u, thr_out);
                cr_expect(e.state_u <= thr, "%s %s %s %s: state error %.3g u > %.3g u",
                          falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                          falcon_form_name((falcon_form)f), desc, e.state_u, thr);
                gate_result_free(&r);
                checked++;
            }
        }
        gate_result_free(&ref);
        gate_data_free(&d);
    }
    cr_assert(checked > 0, "no case ran");
    free(cases);
}

#define GATE_TEST(V, P) \
    Test(gate, V##_##P) { run_variant(FALCON_##V, FALCON_##P); }

GATE_TEST(1, FP32)
GATE_TEST(1, FP64)
GATE_TEST(2, FP32)
GATE_TEST(2, FP64)
GATE_TEST(3, FP32)
GATE_TEST(3, FP64)
GATE_TEST(1A, FP32)
GATE_TEST(1A, FP64)
GATE_TEST(2A, FP32)
GATE_TEST(2A, FP64)
GATE_TEST(3A, FP32)
GATE_TEST(3A, FP64)

/* Backends that cannot run here are reported as skipped, with the reason,
 * never as passed: one Criterion test per such backend. */
static void skip_unless_available(falcon_backend b)
{
    if (!falcon_backend_available(b))
        cr_skip_test("backend %s not run: %s", falcon_backend_name(b), falcon_backend_describe(b));
    printf("gate: backend %s ran: %s\n", falcon_backend_name(b), falcon_backend_describe(b));
}

Test(gate, backend_avx512_native) { skip_unless_available(FALCON_BACKEND_AVX512); }
Test(gate, backend_avx512_simde) { skip_unless_available(FALCON_BACKEND_AVX512_SIMDE); }
Test(gate, backend_avx2) { skip_unless_available(FALCON_BACKEND_AVX2); }
Test(gate, backend_cuda) { skip_unless_available(FALCON_BACKEND_CUDA); }
