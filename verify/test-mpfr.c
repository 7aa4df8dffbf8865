/*
 * The reference checks itself: the MPFR chunk-parallel equations against the
 * MPFR recurrence, with decay (including the smallest normal double), both
 * alignments, windows and a carried state, must agree to the MPFR precision
 * itself. That proves the algebra of docs/math.md section 7 independently of any
 * float rounding, so the float forms can then be judged against either.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "falcon_ref.h"
#include "gate.h"

#define BITS 256

/* ||a - b|| / ||b|| computed in MPFR, returned as log2. */
static double log2_reldiff(mpfr_t *a, mpfr_t *b, int64_t count)
{
    mpfr_t num, den, t;
    mpfr_inits2(BITS, num, den, t, (mpfr_ptr)0);
    mpfr_set_zero(num, 1);
    mpfr_set_zero(den, 1);
    for (int64_t i = 0; i < count; i++) {
        mpfr_sub(t, a[i], b[i], MPFR_RNDN);
        mpfr_fma(num, t, t, num, MPFR_RNDN);
        mpfr_fma(den, b[i], b[i], den, MPFR_RNDN);
    }
    double r;
    if (mpfr_zero_p(num)) r = -1e9;
    else {
        mpfr_div(t, num, den, MPFR_RNDN);
        mpfr_log2(t, t, MPFR_RNDN);
        r = mpfr_get_d(t, MPFR_RNDN) / 2;
    }
    mpfr_clears(num, den, t, (mpfr_ptr)0);
    return r;
}

static mpfr_t *vec(int64_t n)
{
    mpfr_t *v = malloc(sizeof(mpfr_t) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) mpfr_init2(v[i], BITS);
    return v;
}

static void vec_free(mpfr_t *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) mpfr_clear(v[i]);
    free(v);
}

Test(mpfr, chunk_equals_recurrent_at_mpfr_precision)
{
    const int64_t T = 13, n = 4, m = 3;
    double worst = -1e9;
    int runs = 0;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int a = 0; a < 2; a++)
            for (int carried = 0; carried < 2; carried++)
                for (int64_t C = 1; C <= 13; C += 3) {
                    const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1;
                    gate_case gc = {(falcon_variant)v, (falcon_align)a, (falcon_phi)((v + C) % 4),
                                    GATE_DECAY_MIX, 1, T, 1, n, m, W, C, 1e-6, 1.0, 77u + (uint64_t)runs};
                    gate_data d;
                    cr_assert(gate_data_make(&gc, FALCON_FP64, &d) == 0);
                    double *alpha = (double *)d.in64.alpha;
                    alpha[5] = DBL_MIN; /* a near-reset inside a chunk */
                    /* A carried state: memory, previous key and W-1 examples. */
                    double S0[12], pk[4], hk[8], hv[6];
                    for (int i = 0; i < 12; i++) S0[i] = 0.25 * (i % 5) - 0.5;
                    for (int i = 0; i < 4; i++) pk[i] = 0.3 * i - 0.4;
                    for (int i = 0; i < 8; i++) hk[i] = 0.1 * i - 0.35;
                    for (int i = 0; i < 6; i++) hv[i] = 0.2 * i - 0.5;
                    falcon_ref_head h = {T, n, m, d.in64.q, d.in64.k, d.in64.v, d.in64.beta,
                                         d.in64.alpha, d.in64.gain,
                                         carried ? S0 : NULL, carried ? pk : NULL, hk, hv,
                                         carried ? W - 1 : 0};
                    if (!carried) {
                        static const double zero[12];
                        h.S0 = zero;
                    }
                    falcon_ref_opts o = {(falcon_variant)v, (falcon_align)a, gc.phi, 1e-6, W, C, BITS};
                    mpfr_t *ro = vec(T * m), *rs = vec(m * n), *co = vec(T * m), *cs = vec(m * n);
                    cr_assert(falcon_ref_recurrent_mp(&o, &h, ro, rs) == FALCON_OK);
                    cr_assert(falcon_ref_chunk_mp(&o, &h, co, cs) == FALCON_OK);
                    double eo = log2_reldiff(co, ro, T * m), es = log2_reldiff(cs, rs, m * n);
                    if (eo > worst) worst = eo;
                    if (es > worst) worst = es;
                    cr_expect(eo < -(BITS - 40) && es < -(BITS - 40),
                              "%s %s C=%lld carried=%d: chunk vs recurrent 2^%.1f (out), 2^%.1f (S)",
                              falcon_variant_name(o.variant), falcon_align_name(o.align), (long long)C,
                              carried, eo, es);
                    vec_free(ro, T * m); vec_free(rs, m * n); vec_free(co, T * m); vec_free(cs, m * n);
                    gate_data_free(&d);
                    runs++;
                }
    printf("mpfr: chunk vs recurrent over %d runs at %d bits: worst relative difference 2^%.1f\n", runs,
           BITS, worst);
}

/* The read condition number comes from the reference's own S_t. Recompute
 * it independently: step the mpfr backend one token at a time with the
 * state carried (each S_t rounded to double: ample for a ratio of norms)
 * and form || (|S_t| |phi(q_t)|)_t || / ||O|| directly. A case with a
 * batch, decay, a window and a feature map; and a T = 1 read whose terms
 * cancel, where kappa is large. */
static double kappa_by_steps(const gate_case *c, const gate_data *d)
{
    const int64_t B = c->B, H = c->H, T = c->T, n = c->n, m = c->m, heads = B * H;
    falcon_config cfg = gate_config(c, FALCON_FORM_RECURRENT, FALCON_BACKEND_MPFR, FALCON_FP64);
    cfg.eps = gate_eps(c, d->prec);
    falcon_state *st;
    cr_assert_eq(falcon_state_create(heads, n, m, c->window, &st), FALCON_OK);
    double *buf = calloc((size_t)(heads * (3 * n + 2 * m + 2) + n), sizeof(double));
    double *q = buf, *k = q + heads * n, *g = k + heads * n, *v = g + heads * n;
    double *beta = v + heads * m, *alpha = beta + heads, *o = alpha + heads, *qf = o + heads * m;
    const falcon_inputs *in = &d->in64;
    double abs2 = 0, out2 = 0;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t hh = 0; hh < heads; hh++) {
            const int64_t row = (hh / H * T + t) * H + hh % H;
            for (int64_t i = 0; i < n; i++) {
                q[hh * n + i] = ((const double *)in->q)[row * n + i];
                k[hh * n + i] = ((const double *)in->k)[row * n + i];
                if (in->gain) g[hh * n + i] = ((const double *)in->gain)[row * n + i];
            }
            for (int64_t i = 0; i < m; i++) v[hh * m + i] = ((const double *)in->v)[row * m + i];
            beta[hh] = ((const double *)in->beta)[row];
            if (in->alpha) alpha[hh] = ((const double *)in->alpha)[row];
        }
        falcon_inputs in1 = {.B = B, .T = 1, .H = H, .n = n, .m = m, .q = q, .k = k,
                             .v = v, .beta = beta, .alpha = in->alpha ? alpha : NULL, .gain = in->gain ? g : NULL};
        cr_assert_eq(falcon_run(&cfg, &in1, st, o), FALCON_OK, "%s", falcon_last_error());
        const double *S = falcon_state_get_view(st).S;
        for (int64_t hh = 0; hh < heads; hh++) {
            double ss = 0;
            for (int64_t j = 0; j < n; j++) ss += q[hh * n + j] * q[hh * n + j];
            for (int64_t j = 0; j < n; j++) {
                const double x = q[hh * n + j];
                qf[j] = c->phi == FALCON_PHI_RELU ? (x > 0 ? x : 0)
                      : c->phi == FALCON_PHI_ELU1 ? (x > 0 ? x + 1 : exp(x))
                      : c->phi == FALCON_PHI_L2NORM ? x / sqrt(ss) : x;
            }
            for (int64_t i = 0; i < m; i++) {
                double a = 0;
                for (int64_t j = 0; j < n; j++) a += fabs(S[(hh * m + i) * n + j] * qf[j]);
                abs2 += a * a;
                out2 += o[hh * m + i] * o[hh * m + i];
            }
        }
    }
    falcon_state_free(st);
    free(buf);
    return abs2 > out2 ? sqrt(abs2 / out2) : 1.0;
}

Test(mpfr, read_condition_from_the_reference)
{
    const gate_case cases[] = {
        {FALCON_3, FALCON_ALIGN_PREFIX, FALCON_PHI_ELU1, GATE_DECAY_RANDOM, 2, 20, 3, 4, 5, 3, 6, 1e-6, 1.0, 7},
        {FALCON_1A, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, GATE_DECAY_NONE, 1, 1, 1, 4, 3, 1, 4, 1e-6, 1.0, 11},
        {FALCON_2, FALCON_ALIGN_SAME, FALCON_PHI_L2NORM, GATE_DECAY_MIX, 1, 40, 2, 6, 5, 1, 8, 1e-6, 1.0, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gate_data d;
        gate_result ref;
        cr_assert_eq(gate_data_make(&cases[i], FALCON_FP64, &d), 0);
        cr_assert_eq(gate_reference(&cases[i], &d, &ref), FALCON_OK);
        const double k = kappa_by_steps(&cases[i], &d);
        cr_log_info("read condition case %zu: reference %.17g, by steps %.17g", i, ref.read_cond, k);
        cr_expect(ref.read_cond >= 1);
        cr_expect(fabs(ref.read_cond - k) <= 1e-9 * k, "case %zu: kappa %.17g from the reference, %.17g by steps",
                  i, ref.read_cond, k);
        gate_result_free(&ref);
        gate_data_free(&d);
    }
}
