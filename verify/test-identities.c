/*
 * docs/math.md section 1's exact identities: Falcon-2 with unit gains is Falcon-1,
 * Falcon-3 with W = 1 is Falcon-1, likewise for the A twins; and Falcon-1
 * with beta = 1, eps -> 0 interpolates (S_t x_t = y_t). Checked on every
 * backend, form and precision, to rounding.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "gate.h"

/* Run `twin` on the data of `base` (gains set to 1) and compare. */
static void identity(falcon_variant base, falcon_variant twin)
{
    for (int b = 0; b < gate_backend_count; b++) {
        if (!falcon_backend_available(gate_backends[b])) continue;
        for (int p = 0; p < 2; p++)
            if (gate_backend_runs(gate_backends[b], (falcon_precision)p))
            for (int f = 0; f < 3; f++)
                for (int a = 0; a < 2; a++) {
                    gate_case c = {base, (falcon_align)a, FALCON_PHI_IDENTITY, GATE_DECAY_RANDOM,
                                   1, 45, 1, 6, 5, 1, 8, 1e-6, 1.0, 900u + (uint64_t)(a + 2 * f)};
                    gate_case t = c;
                    t.variant = twin;
                    gate_data db, dt;
                    cr_assert(gate_data_make(&c, (falcon_precision)p, &db) == 0);
                    cr_assert(gate_data_make(&t, (falcon_precision)p, &dt) == 0);
                    if (dt.in.gain) { /* unit gains; otherwise the same draws */
                        for (int64_t i = 0; i < t.T * t.n; i++) {
                            if (p == FALCON_FP32) ((float *)dt.in.gain)[i] = 1.0f;
                            else ((double *)dt.in.gain)[i] = 1.0;
                        }
                    }
                    gate_result rb, rt;
                    cr_assert(gate_run(&c, &db, (falcon_form)f, gate_backends[b], NULL, &rb) == FALCON_OK);
                    cr_assert(gate_run(&t, &dt, (falcon_form)f, gate_backends[b], NULL, &rt) == FALCON_OK);
                    gate_errors e = gate_compare(&rt, &rb, (falcon_precision)p);
                    printf("identity %s = %s, %s %s %s %s: %.2f u, %.2f u\n", falcon_variant_name(twin),
                           falcon_variant_name(base), falcon_backend_name(gate_backends[b]),
                           falcon_precision_name((falcon_precision)p), falcon_form_name((falcon_form)f),
                           falcon_align_name((falcon_align)a), e.out_u, e.state_u);
                    /* Unit gains and a one-example window add no operation
                     * with a rounding of its own: allow 2 u for a backend
                     * that orders its sums differently on either path. */
                    cr_expect(e.out_u <= 2 && e.state_u <= 2, "%s vs %s: %.3g u, %.3g u",
                              falcon_variant_name(twin), falcon_variant_name(base), e.out_u, e.state_u);
                    gate_result_free(&rb); gate_result_free(&rt);
                    gate_data_free(&db); gate_data_free(&dt);
                }
    }
}

Test(identities, falcon2_unit_gains_is_falcon1) { identity(FALCON_1, FALCON_2); }
Test(identities, falcon3_window1_is_falcon1) { identity(FALCON_1, FALCON_3); }
Test(identities, falcon2a_unit_gains_is_falcon1a) { identity(FALCON_1A, FALCON_2A); }
Test(identities, falcon3a_window1_is_falcon1a) { identity(FALCON_1A, FALCON_3A); }

/* beta = 1 and a vanishing eps: after each step S_t x_t = y_t. */
Test(identities, falcon1_interpolates)
{
    const int64_t n = 5, m = 4, T = 12;
    for (int p = 0; p < 2; p++) {
        gate_case c = {FALCON_1, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, GATE_DECAY_RANDOM,
                       1, T, 1, n, m, 1, 4, p == FALCON_FP32 ? 1e-30 : 1e-300, 1.0, 4242};
        gate_data d;
        cr_assert(gate_data_make(&c, (falcon_precision)p, &d) == 0);
        for (int64_t t = 0; t < T; t++) {
            if (p == FALCON_FP32) ((float *)d.in.beta)[t] = 1.0f;
            else ((double *)d.in.beta)[t] = 1.0;
        }
        falcon_config cfg = gate_config(&c, FALCON_FORM_RECURRENT, FALCON_BACKEND_SCALAR, (falcon_precision)p);
        falcon_state *st;
        cr_assert(falcon_state_create(1, n, m, 1, &st) == FALCON_OK);
        double out[8];
        const size_t es = p == FALCON_FP32 ? 4 : 8;
        double worst = 0;
        for (int64_t t = 0; t < T; t++) {
            const char *q = (const char *)d.in.q + es * t * n, *k = (const char *)d.in.k + es * t * n;
            const char *v = (const char *)d.in.v + es * t * m, *beta = (const char *)d.in.beta + es * t;
            const char *alpha = (const char *)d.in.alpha + es * t;
            falcon_inputs in1 = falcon_inputs_sequence(1, n, m, q, k, v, beta, alpha, NULL);
            cr_assert(falcon_run(&cfg, &in1, st, out) == FALCON_OK, "%s", falcon_last_error());
            const double *S = falcon_state_get_view(st).S;
            double num = 0, den = 0;
            for (int64_t i = 0; i < m; i++) {
                double sx = 0, y = falcon_load_test(v, (falcon_precision)p, i);
                for (int64_t j = 0; j < n; j++) sx += S[i * n + j] * falcon_load_test(k, (falcon_precision)p, j);
                num += (sx - y) * (sx - y);
                den += y * y;
            }
            double e = sqrt(num / den) / gate_unit_roundoff((falcon_precision)p);
            if (e > worst) worst = e;
        }
        printf("identity falcon1 interpolates (%s): max ||S x - y|| / ||y|| = %.2f u\n",
               falcon_precision_name((falcon_precision)p), worst);
        cr_expect(worst <= 6.0 * (2.0 + sqrt((double)n)), "interpolation off by %.3g u", worst);
        falcon_state_free(st);
        gate_data_free(&d);
    }
}
