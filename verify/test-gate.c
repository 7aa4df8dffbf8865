/*
 * The gate: the full case table (gate/gate-cases.c) through every backend
 * present, every form and precision (tf32 and bf16: the chunk form), against the MPFR reference
 * within the thresholds of gate/gate-thresholds.c. One test per variant
 * and precision; each case prints its errors in units of roundoff.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"
#include "../src/backends.h"

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
                if (!gate_form_runs((falcon_form)f, prec)) continue; /* tf32, bf16: the chunk form */
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
GATE_TEST(1, TF32)
GATE_TEST(1, BF16)
GATE_TEST(2, TF32)
GATE_TEST(2, BF16)
GATE_TEST(3, TF32)
GATE_TEST(3, BF16)
GATE_TEST(1A, TF32)
GATE_TEST(1A, BF16)
GATE_TEST(2A, TF32)
GATE_TEST(2A, BF16)
GATE_TEST(3A, TF32)
GATE_TEST(3A, BF16)

/* Every backend of the registry but auto. One that cannot run here is
 * reported as skipped, with the reason, never as passed. One that can must be
 * in the gate's loops above, and a CPU backend's row must hold its own
 * micro-kernels and a framework build of its own ISA or the baseline: a row
 * that pointed at another backend's tables would pass every numeric test
 * while leaving this backend's kernels untested. */
ParameterizedTestParameters(gate, backend)
{
    static falcon_backend all[FALCON_BACKEND_ROWS - 1];
    for (int b = 1; b < FALCON_BACKEND_ROWS; b++) all[b - 1] = (falcon_backend)b;
    return cr_make_param_array(falcon_backend, all, FALCON_BACKEND_ROWS - 1);
}

ParameterizedTest(falcon_backend *bp, gate, backend)
{
    const falcon_backend b = *bp;
    const char *name = falcon_backend_name(b);
    if (!falcon_backend_available(b))
        cr_skip_test("backend %s not run: %s", name, falcon_backend_describe(b));
    printf("gate: backend %s ran: %s\n", name, falcon_backend_describe(b));
    const falcon_backend_info *be = falcon_backend_info_of(b);
    cr_assert(be && !strcmp(be->name, name));
    if (be->run) {
        cr_assert(!be->f32.uk && !be->f64.uk, "%s: both a run function and kernels", name);
    } else {
        cr_assert(be->f32.uk && be->f64.uk && be->f32.fw && be->f64.fw, "%s: kernels or drivers missing", name);
        cr_expect_str_eq(be->f32.uk->name, name, "%s runs the fp32 kernels of %s", name, be->f32.uk->name);
        cr_expect_str_eq(be->f64.uk->name, name, "%s runs the fp64 kernels of %s", name, be->f64.uk->name);
        cr_expect(!strcmp(be->f32.fw->isa, "baseline") || !strcmp(be->f32.fw->isa, name),
                  "%s drives its fp32 kernels with the framework built for %s", name, be->f32.fw->isa);
        cr_expect(!strcmp(be->f64.fw->isa, "baseline") || !strcmp(be->f64.fw->isa, name),
                  "%s drives its fp64 kernels with the framework built for %s", name, be->f64.fw->isa);
        /* tables for a 256-bit datapath: all or none, of the same backend and drivers */
        const int half = be->half_width != NULL;
        cr_expect(half == (be->f32_half.uk != NULL) && half == (be->f64_half.uk != NULL),
                  "%s: a half-width choice without its tables, or tables without it", name);
        if (half)
            cr_expect(!strcmp(be->f32_half.uk->name, name) && !strcmp(be->f64_half.uk->name, name) &&
                          be->f32_half.fw == be->f32.fw && be->f64_half.fw == be->f64.fw,
                      "%s: its half-width tables are another backend's", name);
    }
    if (b == FALCON_BACKEND_MPFR) return; /* the reference, not a gated kernel */
    int listed = 0;
    for (int i = 0; i < gate_backend_count; i++) listed += gate_backends[i] == b;
    cr_expect_eq(listed, 1, "backend %s is in the gate's list %d times", name, listed);
    cr_expect(gate_backend_runs(b, FALCON_FP32), "backend %s is available but the gate skips it in fp32", name);
}
