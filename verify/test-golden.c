/*
 * The golden cases (computed independently of this project, 50 digits,
 * rounded to fp64): every backend, form and precision must reproduce them.
 * fp64 within a few u; fp32 inputs are exact binary fractions, so fp32 runs
 * see the same problem and must land within the gate's fp32 bound.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "falcon.h"
#include "gate.h"
#include "golden.h"

static void to_prec(const double *src, int64_t count, falcon_precision p, void *dst)
{
    for (int64_t i = 0; i < count; i++) {
        if (p == FALCON_FP32) ((float *)dst)[i] = (float)src[i];
        else ((double *)dst)[i] = src[i];
    }
}

static void check_case(const golden_case *g, falcon_backend be, falcon_form form, falcon_precision p)
{
    const int64_t T = g->T, n = g->n, m = g->m;
    const size_t es = p == FALCON_FP32 ? sizeof(float) : sizeof(double);
    char *buf = malloc(es * (size_t)(3 * T * n + T * m + 2 * T + T * m) + 8);
    char *q = buf, *k = q + es * T * n, *gain = k + es * T * n, *v = gain + es * T * n;
    char *beta = v + es * T * m, *alpha = beta + es * T, *out = alpha + es * T;
    to_prec(g->q, T * n, p, q);
    to_prec(g->k, T * n, p, k);
    to_prec(g->v, T * m, p, v);
    to_prec(g->beta, T, p, beta);
    if (g->alpha) to_prec(g->alpha, T, p, alpha);
    if (g->gain) to_prec(g->gain, T * n, p, gain);
    falcon_config c;
    falcon_config_default(&c);
    c.variant = falcon_variant_parse(g->variant);
    c.align = falcon_align_parse(g->align);
    c.phi = falcon_phi_parse(g->phi);
    c.window = g->window;
    c.eps = g->eps;
    c.form = form;
    c.chunk = 4;
    c.backend = be;
    c.precision = p;
    falcon_inputs in = falcon_inputs_sequence(T, n, m, q, k, v, beta, g->alpha ? alpha : NULL,
                                              g->gain ? gain : NULL);
    falcon_state *st;
    cr_assert(falcon_state_create(1, n, m, g->window, &st) == FALCON_OK);
    cr_assert(falcon_run(&c, &in, st, out) == FALCON_OK, "%s", falcon_last_error());
    double *o = malloc(sizeof(double) * (size_t)(T * m));
    for (int64_t i = 0; i < T * m; i++) o[i] = p == FALCON_FP32 ? ((float *)out)[i] : ((double *)out)[i];
    const double u = gate_unit_roundoff(p);
    double eo = gate_relerr(o, g->expected_out, T * m) / u;
    double es_ = gate_relerr(falcon_state_get_view(st).S, g->expected_state, m * n) / u;
    /* Nine steps of width three: the gate's bound for the smallest shapes. */
    double thr = 6.0 * (2.0 + sqrt((double)(n + (form == FALCON_FORM_RECURRENT ? 0 : 4 * g->window))));
    printf("golden %s %s %s %s %s W=%d: out %.2f u, S %.2f u (<= %.1f)\n", falcon_backend_name(be),
           falcon_precision_name(p), falcon_form_name(form), g->variant, g->align, g->window, eo, es_, thr);
    cr_expect(eo <= thr, "%s %s %s %s/%s/%s: out %.3g u", falcon_backend_name(be), falcon_precision_name(p),
              falcon_form_name(form), g->variant, g->align, g->phi, eo);
    cr_expect(es_ <= thr, "%s %s %s %s/%s/%s: S %.3g u", falcon_backend_name(be), falcon_precision_name(p),
              falcon_form_name(form), g->variant, g->align, g->phi, es_);
    free(o);
    free(buf);
    falcon_state_free(st);
}

Test(golden, every_backend_form_and_precision)
{
    int runs = 0;
    for (int i = 0; i < golden_case_count; i++)
        for (int b = 0; b <= gate_backend_count; b++) { /* the kernels, then mpfr */
            const falcon_backend be = b < gate_backend_count ? gate_backends[b] : FALCON_BACKEND_MPFR;
            if (!falcon_backend_available(be)) continue;
            for (int f = 0; f < 3; f++)
                for (int p = 0; p < 2; p++) {
                    if (!gate_backend_runs(be, (falcon_precision)p)) continue;
                    check_case(&golden_cases[i], be, (falcon_form)f, (falcon_precision)p);
                    runs++;
                }
        }
    cr_assert(runs >= golden_case_count * 6);
}
