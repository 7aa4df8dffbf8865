/*
 * docs/math.md section 8 stress: long runs whose decay product underflows many times
 * over, the smallest normal number as alpha, one near-reset followed by slow
 * decay, and a random mixture, in every form and backend. Up to a few
 * thousand steps the MPFR recurrence is the reference; at 10^6 steps the
 * fp64 recurrent kernel stands in, after this file has checked it against
 * MPFR on the overlapping lengths.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "gate.h"

static void against_mpfr(gate_decay decay, int64_t T)
{
    for (int v = FALCON_1; v <= FALCON_3A; v += 2) /* falcon1, falcon3, falcon2a */
        for (int p = 0; p < 2; p++) {
            const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 2 : 1;
            gate_case c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, decay,
                           1, T, 1, 4, 3, W, 64, 1e-6, 1.0, 5000u + (uint64_t)v};
            gate_data d;
            gate_result ref;
            cr_assert(gate_data_make(&c, (falcon_precision)p, &d) == 0);
            cr_assert(gate_reference(&c, &d, &ref) == FALCON_OK);
            for (int b = 0; b < gate_backend_count; b++) {
                if (!gate_backend_runs(gate_backends[b], (falcon_precision)p)) continue;
                for (int f = 0; f < 3; f++) {
                    gate_result r;
                    cr_assert(gate_run(&c, &d, (falcon_form)f, gate_backends[b], NULL, &r) == FALCON_OK,
                              "%s", falcon_last_error());
                    gate_errors e = gate_compare(&r, &ref, (falcon_precision)p);
                    const double thr = gate_threshold(&c, (falcon_form)f, (falcon_precision)p);
                    const double thr_out = gate_threshold_out(&c, (falcon_form)f, (falcon_precision)p, ref.read_cond);
                    printf("decay %s T=%lld %s %s %s %s: out %.2f u (<= %.1f), S %.2f u (<= %.1f)\n",
                           gate_decay_name(decay), (long long)T, falcon_variant_name(c.variant),
                           falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
                           falcon_form_name((falcon_form)f), e.out_u, thr_out, e.state_u, thr);
                    cr_expect(e.out_u <= thr_out && e.state_u <= thr, "%s %s %s %s: %.3g u, %.3g u",
                              gate_decay_name(decay), falcon_variant_name(c.variant),
                              falcon_precision_name((falcon_precision)p), falcon_form_name((falcon_form)f),
                              e.out_u, e.state_u);
                    gate_result_free(&r);
                }
            }
            gate_result_free(&ref);
            gate_data_free(&d);
        }
}

/* 0.5^3000 = 2^-3000: underflows fp64 three times over, fp32 twenty times. */
Test(decay, strong_underflows_many_times, .timeout = 600) { against_mpfr(GATE_DECAY_STRONG, 3000); }
Test(decay, smallest_normal_every_fifth_step, .timeout = 600) { against_mpfr(GATE_DECAY_EXTREME, 3000); }
Test(decay, near_reset_then_slow, .timeout = 600) { against_mpfr(GATE_DECAY_RESET_SLOW, 3000); }
Test(decay, random_mixture, .timeout = 600) { against_mpfr(GATE_DECAY_MIX, 3000); }

/* 10^6 steps, n = m = 4. fp32 kernels against the fp64 recurrent kernel,
 * which the tests above check against MPFR with the same shapes and regimes. */
Test(decay, million_steps, .timeout = 900)
{
    const int64_t T = 1000000;
    for (int v = FALCON_1; v <= FALCON_1A; v += 3) /* falcon1 and falcon1a */
        for (int dec = 0; dec < 2; dec++) {
            const gate_decay decay = dec ? GATE_DECAY_MIX : GATE_DECAY_RESET_SLOW;
            gate_case c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, decay,
                           1, T, 1, 4, 4, 1, 64, 1e-6, 1.0, 777u};
            gate_data d32, d64;
            cr_assert(gate_data_make(&c, FALCON_FP32, &d32) == 0);
            cr_assert(gate_data_make(&c, FALCON_FP64, &d64) == 0);
            /* The fp64 reference runs on the fp32 data's values (exact in double). */
            gate_data ref_in = d64;
            ref_in.in = d32.in64;
            gate_result ref;
            cr_assert(gate_run(&c, &ref_in, FALCON_FORM_RECURRENT, FALCON_BACKEND_SCALAR, NULL, &ref) == FALCON_OK);
            for (int b = 0; b < gate_backend_count; b++) {
                if (!gate_backend_runs(gate_backends[b], FALCON_FP32)) continue;
                for (int f = 0; f < 2; f++) { /* recurrent, chunk */
                    gate_result r;
                    cr_assert(gate_run(&c, &d32, (falcon_form)f, gate_backends[b], NULL, &r) == FALCON_OK,
                              "%s", falcon_last_error());
                    gate_errors e = gate_compare(&r, &ref, FALCON_FP32);
                    int finite = 1;
                    for (int64_t i = 0; i < r.out_count; i++) finite &= isfinite(r.out[i]);
                    const double thr = gate_threshold(&c, (falcon_form)f, FALCON_FP32);
                    printf("decay %s T=10^6 %s %s fp32 %s vs fp64: out %.2f u, S %.2f u (<= %.1f)\n",
                           gate_decay_name(decay), falcon_variant_name(c.variant),
                           falcon_backend_name(gate_backends[b]), falcon_form_name((falcon_form)f), e.out_u,
                           e.state_u, thr);
                    cr_expect(finite, "non-finite output");
                    /* With decay every read depends on a bounded past, so the
                     * bound of the short runs holds at any length. */
                    cr_expect(e.out_u <= thr && e.state_u <= thr, "%s %s: %.3g u, %.3g u",
                              falcon_variant_name(c.variant), falcon_form_name((falcon_form)f), e.out_u, e.state_u);
                    gate_result_free(&r);
                }
            }
            gate_result_free(&ref);
            gate_data_free(&d32);
            gate_data_free(&d64);
        }
}
