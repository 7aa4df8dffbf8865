/*
 * docs/math.md section 10: every bad input gets its error code and a message naming
 * the tensor, the index and the rule; the caller's output buffer and the
 * state are left untouched.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "falcon.h"
#include "../src/backends.h"

#define TT 6
#define NN 3
#define MM 2

typedef struct fixture {
    double q[TT * NN], k[TT * NN], v[TT * MM], beta[TT], alpha[TT], gain[TT * NN];
    double out[TT * MM];
    falcon_config cfg;
    falcon_inputs in;
} fixture;

static void setup(fixture *f, falcon_variant v)
{
    for (int i = 0; i < TT * NN; i++) f->q[i] = f->k[i] = 0.1 * (i % 7) - 0.3, f->gain[i] = 1.0;
    for (int i = 0; i < TT * MM; i++) f->v[i] = 0.2 * (i % 5) - 0.4;
    for (int i = 0; i < TT; i++) f->beta[i] = 1.0, f->alpha[i] = 0.9;
    for (int i = 0; i < TT * MM; i++) f->out[i] = 12345.0;
    falcon_config_default(&f->cfg);
    f->cfg.variant = v;
    f->cfg.precision = FALCON_FP64;
    f->cfg.backend = FALCON_BACKEND_SCALAR;
    f->in = falcon_inputs_sequence(TT, NN, MM, f->q, f->k, f->v, f->beta, f->alpha,
                                   falcon_variant_has_gain(v) ? f->gain : NULL);
}

/* Run, expect `code` and a message containing `needle`, and untouched out/state. */
static void expect_error(fixture *f, falcon_status code, const char *needle)
{
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, f->cfg.window >= 1 && f->cfg.window <= 4096 ? f->cfg.window : 1, &st) == FALCON_OK);
    falcon_state_view before = falcon_state_get_view(st);
    double S0[NN * MM];
    memcpy(S0, before.S, sizeof S0);
    falcon_status s = falcon_run(&f->cfg, &f->in, st, f->out);
    cr_expect_eq(s, code, "expected %s, got %s (%s)", falcon_status_name(code), falcon_status_name(s),
                 falcon_last_error());
    cr_expect(strstr(falcon_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"",
              falcon_last_error(), needle);
    for (int i = 0; i < TT * MM; i++) cr_expect_eq(f->out[i], 12345.0, "out[%d] was written", i);
    cr_expect(memcmp(S0, falcon_state_get_view(st).S, sizeof S0) == 0, "state was modified");
    cr_expect_eq(falcon_state_get_view(st).has_prev[0], 0, "state history was modified");
    falcon_state_free(st);
}

Test(validation, beta_outside_range_for_regression)
{
    fixture f;
    setup(&f, FALCON_1);
    f.beta[3] = 2.5;
    expect_error(&f, FALCON_E_RANGE, "beta[t=3]");
}

Test(validation, negative_beta_for_inner_product)
{
    fixture f;
    setup(&f, FALCON_1A);
    f.beta[2] = -0.1;
    expect_error(&f, FALCON_E_RANGE, "beta[t=2]");
}

Test(validation, inner_product_accepts_large_beta)
{
    fixture f;
    setup(&f, FALCON_1A);
    f.beta[2] = 7.0;
    cr_expect_eq(falcon_run(&f.cfg, &f.in, NULL, f.out), FALCON_OK, "%s", falcon_last_error());
}

Test(validation, alpha_zero_negative_above_one_nan)
{
    const double bad[] = {0.0, -0.5, 1.5, NAN, INFINITY};
    for (int i = 0; i < 5; i++) {
        fixture f;
        setup(&f, FALCON_3);
        f.alpha[4] = bad[i];
        expect_error(&f, isfinite(bad[i]) ? FALCON_E_RANGE : FALCON_E_NONFINITE, "alpha[t=4]");
    }
}

/* The same rules in fp32 (validate.c checks ranges with a typed loop per
 * precision): each bad value, alone in a tensor of good ones, is refused
 * and named; alpha = 1 and beta = 2 (the closed ends) pass. */
Test(validation, ranges_in_fp32)
{
    enum { T32 = 40 };
    float q[T32 * 2], v[T32], beta[T32], alpha[T32], out[T32];
    for (int i = 0; i < T32 * 2; i++) q[i] = 0.25f * (float)(i % 5) - 0.5f;
    const struct { int alpha; float x; falcon_status want; } cases[] = {
        {1, 0.0f, FALCON_E_RANGE}, {1, 1.0000001f, FALCON_E_RANGE}, {1, NAN, FALCON_E_NONFINITE},
        {1, 1.0f, FALCON_OK},      {0, 2.0f, FALCON_OK},            {0, 2.0000002f, FALCON_E_RANGE},
        {0, -0.0f, FALCON_OK},     {0, -1e-30f, FALCON_E_RANGE},     {0, INFINITY, FALCON_E_NONFINITE},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int at = 0; at < T32; at += 13) { /* first, middle and last vector of the loop */
            for (int i = 0; i < T32; i++) v[i] = 0.5f, beta[i] = 1.0f, alpha[i] = 0.5f;
            (cases[c].alpha ? alpha : beta)[at] = cases[c].x;
            falcon_config cfg;
            falcon_config_default(&cfg);
            cfg.backend = FALCON_BACKEND_SCALAR;
            const falcon_inputs in = falcon_inputs_sequence(T32, 2, 1, q, q, v, beta, alpha, NULL);
            const falcon_status s = falcon_run(&cfg, &in, NULL, out);
            cr_expect_eq(s, cases[c].want, "%s[%d] = %g: got %s (%s)", cases[c].alpha ? "alpha" : "beta", at,
                         (double)cases[c].x, falcon_status_name(s), falcon_last_error());
        }
}

Test(validation, nonfinite_inputs)
{
    fixture f;
    setup(&f, FALCON_1);
    f.q[2 * NN + 1] = NAN;
    expect_error(&f, FALCON_E_NONFINITE, "q[t=2,i=1]");
    setup(&f, FALCON_1);
    f.k[0] = -INFINITY;
    expect_error(&f, FALCON_E_NONFINITE, "k[t=0,i=0]");
    setup(&f, FALCON_1);
    f.v[5 * MM + 1] = INFINITY;
    expect_error(&f, FALCON_E_NONFINITE, "v[t=5,i=1]");
    setup(&f, FALCON_2);
    f.gain[7] = NAN;
    expect_error(&f, FALCON_E_NONFINITE, "gain[t=2,i=1]");
}

Test(validation, negative_gain)
{
    fixture f;
    setup(&f, FALCON_2A);
    f.gain[4] = -1.0;
    expect_error(&f, FALCON_E_RANGE, "gain[t=1,i=1]");
}

Test(validation, gain_missing_or_unexpected)
{
    fixture f;
    setup(&f, FALCON_2);
    f.in.gain = NULL;
    expect_error(&f, FALCON_E_ARGUMENT, "gain");
    setup(&f, FALCON_1);
    f.in.gain = f.gain;
    expect_error(&f, FALCON_E_ARGUMENT, "gain");
}

Test(validation, eps)
{
    const double bad[] = {0.0, -1e-6, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        fixture f;
        setup(&f, FALCON_1);
        f.cfg.eps = bad[i];
        expect_error(&f, FALCON_E_RANGE, "eps");
    }
    fixture f;
    setup(&f, FALCON_1);
    f.cfg.eps = 1e-50; /* positive in fp64, zero once rounded to fp32 */
    f.cfg.precision = FALCON_FP32;
    expect_error(&f, FALCON_E_RANGE, "eps");
}

Test(validation, window_and_chunk)
{
    fixture f;
    setup(&f, FALCON_1);
    f.cfg.window = 2;
    expect_error(&f, FALCON_E_RANGE, "window = 2");
    setup(&f, FALCON_3);
    f.cfg.window = 0;
    expect_error(&f, FALCON_E_RANGE, "window = 0");
    setup(&f, FALCON_3);
    f.cfg.chunk = -1;
    expect_error(&f, FALCON_E_RANGE, "chunk = -1");
    setup(&f, FALCON_3);
    f.cfg.chunk = FALCON_MAX_CHUNK + 1;
    expect_error(&f, FALCON_E_RANGE, "or 0 (auto)");
}

/* chunk = 0 is FALCON_CHUNK_AUTO (the default): a run, bit for bit the one
 * with the model's chunk size. */
Test(validation, chunk_auto_is_the_model_size)
{
    fixture f;
    setup(&f, FALCON_3);
    f.cfg.form = FALCON_FORM_CHUNK;
    f.cfg.window = 2;
    cr_assert_eq(f.cfg.chunk, FALCON_CHUNK_AUTO, "the default chunk is auto");
    double auto_out[TT * MM], model_out[TT * MM];
    cr_assert(falcon_run(&f.cfg, &f.in, NULL, auto_out) == FALCON_OK, "%s", falcon_last_error());
    f.cfg.chunk = falcon_chunk_auto(NN, MM, 2);
    cr_assert(f.cfg.chunk >= 8 && f.cfg.chunk <= 256);
    cr_assert(falcon_run(&f.cfg, &f.in, NULL, model_out) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(memcmp(auto_out, model_out, sizeof auto_out) == 0, "auto differs from chunk = %lld",
              (long long)f.cfg.chunk);
    /* the model: 16 for n = m = 64 and 128, 32 for 256, 8 with a window of 4 */
    cr_expect_eq(falcon_chunk_auto(64, 64, 1), 16);
    cr_expect_eq(falcon_chunk_auto(128, 128, 1), 16);
    cr_expect_eq(falcon_chunk_auto(256, 256, 1), 32);
    cr_expect_eq(falcon_chunk_auto(64, 64, 4), 8);
    /* the largest widths: a chunk in range, no integer overflow (UBSan) */
    cr_expect_eq(falcon_chunk_auto(INT64_MAX, INT64_MAX, 1), 256);
}

/* A segment's steps t0 .. t0 + T - 1 must have numbers: a t0 past
 * 2^63 - 1 - T is refused instead of naming a wrapped step. */
Test(validation, a_start_step_past_the_range_is_refused)
{
    fixture f;
    setup(&f, FALCON_1);
    cr_expect_eq(falcon_validate_from(&f.cfg, &f.in, NULL, INT64_MAX - f.in.T), FALCON_OK, "%s", falcon_last_error());
    cr_expect_eq(falcon_validate_from(&f.cfg, &f.in, NULL, INT64_MAX - f.in.T + 1), FALCON_E_ARGUMENT);
    cr_expect(strstr(falcon_last_error(), "t0 = ") != NULL, "%s", falcon_last_error());
}

Test(validation, shapes)
{
    fixture f;
    setup(&f, FALCON_1);
    f.in.T = -1;
    expect_error(&f, FALCON_E_SHAPE, "T = -1");
    setup(&f, FALCON_1);
    f.in.n = 0;
    expect_error(&f, FALCON_E_SHAPE, "n = 0");
    setup(&f, FALCON_1);
    f.in.m = FALCON_MAX_DIM + 1;
    expect_error(&f, FALCON_E_SHAPE, "m = ");
    setup(&f, FALCON_1);
    f.in.B = 0;
    expect_error(&f, FALCON_E_SHAPE, "B = 0");
    setup(&f, FALCON_1);
    f.in.q = NULL;
    expect_error(&f, FALCON_E_ARGUMENT, "q is NULL");
}

Test(validation, state_must_match)
{
    fixture f;
    setup(&f, FALCON_3);
    f.cfg.window = 3;
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN + 1, MM, 3, &st) == FALCON_OK);
    cr_expect_eq(falcon_run(&f.cfg, &f.in, st, f.out), FALCON_E_SHAPE);
    cr_expect(strstr(falcon_last_error(), "state is [1 heads][m=2][n=4] but the inputs have 1 x 1 heads, m = 2, n = 3"),
              "%s", falcon_last_error());
    falcon_state_free(st);
    cr_assert(falcon_state_create(1, NN, MM, 2, &st) == FALCON_OK);
    cr_expect_eq(falcon_run(&f.cfg, &f.in, st, f.out), FALCON_E_SHAPE);
    cr_expect(strstr(falcon_last_error(), "state was created for window 2, the run uses window 3"), "%s",
              falcon_last_error());
    falcon_state_free(st);
    for (int i = 0; i < TT * MM; i++) cr_expect_eq(f.out[i], 12345.0);
}

Test(validation, unknown_enums)
{
    fixture f;
    setup(&f, FALCON_1);
    f.cfg.variant = (falcon_variant)17;
    expect_error(&f, FALCON_E_ARGUMENT, "config.variant = 17: unknown variant");
    setup(&f, FALCON_1);
    f.cfg.form = (falcon_form)-1;
    expect_error(&f, FALCON_E_ARGUMENT, "config.form = -1: unknown form");
    /* The first value past the registry's backends. */
    setup(&f, FALCON_1);
    f.cfg.backend = FALCON_BACKEND_ROWS;
    char want[64];
    snprintf(want, sizeof want, "config.backend = %d: unknown backend", (int)FALCON_BACKEND_ROWS);
    expect_error(&f, FALCON_E_ARGUMENT, want);
}

Test(validation, batched_index_names_b_t_h)
{
    double q[2 * 3 * 2 * NN], v[2 * 3 * 2 * MM], beta[12], out[2 * 3 * 2 * MM];
    for (int i = 0; i < 2 * 3 * 2 * NN; i++) q[i] = 0.1;
    for (int i = 0; i < 2 * 3 * 2 * MM; i++) v[i] = 0.1, out[i] = 12345.0;
    for (int i = 0; i < 12; i++) beta[i] = 1.0;
    beta[(1 * 3 + 2) * 2 + 1] = 3.0; /* b = 1, t = 2, h = 1 */
    falcon_config c;
    falcon_config_default(&c);
    c.precision = FALCON_FP64;
    falcon_inputs in = {.B = 2, .T = 3, .H = 2, .n = NN, .m = MM, .q = q, .k = q,
                        .v = v, .beta = beta, .alpha = NULL, .gain = NULL};
    cr_expect_eq(falcon_run(&c, &in, NULL, out), FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "beta[b=1,t=2,h=1]") != NULL, "%s", falcon_last_error());
    for (int i = 0; i < 2 * 3 * 2 * MM; i++) cr_expect_eq(out[i], 12345.0);
}

/* falcon_last_error_info: the fields of a failure, so that no caller parses
 * the message; each failure replaces every field of the one before. */
Test(validation, error_info_names_input_rule_index_step_head)
{
    double q[2 * 3 * 2 * NN], v[2 * 3 * 2 * MM], beta[12], out[2 * 3 * 2 * MM];
    for (int i = 0; i < 2 * 3 * 2 * NN; i++) q[i] = 0.1;
    for (int i = 0; i < 2 * 3 * 2 * MM; i++) v[i] = 0.1;
    for (int i = 0; i < 12; i++) beta[i] = 1.0;
    beta[(1 * 3 + 2) * 2 + 1] = 3.0; /* b = 1, t = 2, h = 1 */
    falcon_config c;
    falcon_config_default(&c);
    c.precision = FALCON_FP64;
    falcon_inputs in = {.B = 2, .T = 3, .H = 2, .n = NN, .m = MM, .q = q, .k = q,
                        .v = v, .beta = beta, .alpha = NULL, .gain = NULL};
    cr_assert_eq(falcon_run_from(&c, &in, NULL, out, 10), FALCON_E_RANGE);
    const falcon_error_info *e = falcon_last_error_info();
    cr_expect_eq(e->status, FALCON_E_RANGE);
    cr_expect_str_eq(e->input, "beta");
    cr_expect_str_eq(e->rule, "beta-range");
    cr_expect_eq(e->index, (1 * 3 + 2) * 2 + 1);
    cr_expect_eq(e->t, 12, "steps count from t0");
    cr_expect_eq(e->head, 1 * 2 + 1);
    cr_expect_str_eq(e->message, falcon_last_error());
    cr_expect(strstr(e->message, "beta[b=1,t=12,h=1]") != NULL, "%s", e->message);
    q[(0 * 3 + 1) * 2 * NN + 1 * NN + 2] = NAN; /* b = 0, t = 1, h = 1, i = 2 */
    cr_assert_eq(falcon_run(&c, &in, NULL, out), FALCON_E_NONFINITE);
    cr_expect_str_eq(e->input, "q");
    cr_expect_str_eq(e->rule, "finite");
    cr_expect_eq(e->index, (0 * 3 + 1) * 2 * NN + 1 * NN + 2);
    cr_expect_eq(e->t, 1);
    cr_expect_eq(e->head, 1);
    c.eps = -1;
    cr_assert_eq(falcon_run(&c, &in, NULL, out), FALCON_E_RANGE);
    cr_expect_str_eq(e->input, "config.eps");
    cr_expect_str_eq(e->rule, "eps-range");
    cr_expect(e->index == -1 && e->t == -1 && e->head == -1, "a config field has no index");
    c.eps = 1e-6;
    in.n = 0;
    cr_assert_eq(falcon_validate(&c, &in, NULL), FALCON_E_SHAPE);
    cr_expect_str_eq(e->input, "n");
    cr_expect_str_eq(e->rule, "n-range");
}

/* falcon_run_from checks once and computes what falcon_run does: the step
 * number t0 only names steps in messages. */
Test(validation, run_from_equals_run)
{
    fixture f;
    setup(&f, FALCON_1);
    double out0[TT * MM], out1[TT * MM];
    falcon_state *a, *b;
    cr_assert(falcon_state_create(1, NN, MM, 1, &a) == FALCON_OK);
    cr_assert(falcon_state_create(1, NN, MM, 1, &b) == FALCON_OK);
    cr_assert_eq(falcon_run(&f.cfg, &f.in, a, out0), FALCON_OK, "%s", falcon_last_error());
    cr_assert_eq(falcon_run_from(&f.cfg, &f.in, b, out1, 1234), FALCON_OK, "%s", falcon_last_error());
    cr_expect(memcmp(out0, out1, sizeof out0) == 0);
    cr_expect(memcmp(falcon_state_get_view(a).S, falcon_state_get_view(b).S, sizeof(double) * NN * MM) == 0);
    cr_expect_eq(falcon_run_from(&f.cfg, &f.in, b, out1, -1), FALCON_E_ARGUMENT);
    cr_expect_str_eq(falcon_last_error_info()->rule, "t0-range");
    falcon_state_free(a);
    falcon_state_free(b);
}

/* The recurrent form reads a carried memory from the caller's state and
 * writes the new one into the working copy (src/run.c): a call that
 * overflows in one head of two leaves every element of the state as it was,
 * in either precision and on every CPU backend. */
Test(validation, a_failed_call_leaves_a_carried_state_as_it_was)
{
    enum { H = 2, T = 3 };
    for (int p = 0; p < 2; p++)
        for (int b = FALCON_BACKEND_SCALAR; b < FALCON_BACKEND_ROWS; b++) {
            if (b == FALCON_BACKEND_CUDA || b == FALCON_BACKEND_MPFR || !falcon_backend_available((falcon_backend)b))
                continue;
            const double big = p == FALCON_FP64 ? 1e300 : 3e38;
            double qd[T * H * NN], vd[T * H * MM], bd[T * H], out[T * H * MM];
            float qf[T * H * NN], vf[T * H * MM], bf[T * H], outf[T * H * MM];
            for (int i = 0; i < T * H * NN; i++) qd[i] = 0.1 * (i % 5) + 0.05;
            for (int i = 0; i < T * H * MM; i++) vd[i] = 0.2 * (i % 3) - 0.1;
            for (int i = 0; i < T * H; i++) bd[i] = 1.0;
            falcon_config c;
            falcon_config_default(&c);
            c.precision = (falcon_precision)p;
            c.backend = (falcon_backend)b;
            falcon_state *st;
            cr_assert(falcon_state_create(H, NN, MM, 1, &st) == FALCON_OK);
            for (int round = 0; round < 2; round++) {
                if (round == 1) { /* head 1, last step: a read beyond the range */
                    for (int i = 0; i < NN; i++) qd[(2 * H + 1) * NN + i] = big;
                    for (int i = 0; i < MM; i++) vd[(2 * H + 1) * MM + i] = big;
                }
                for (int i = 0; i < T * H * NN; i++) qf[i] = (float)qd[i];
                for (int i = 0; i < T * H * MM; i++) vf[i] = (float)vd[i];
                for (int i = 0; i < T * H; i++) bf[i] = (float)bd[i];
                const int f64 = p == FALCON_FP64;
                const falcon_inputs in = {.B = 1, .T = T, .H = H, .n = NN, .m = MM,
                                          .q = f64 ? (void *)qd : qf, .k = f64 ? (void *)qd : qf,
                                          .v = f64 ? (void *)vd : vf, .beta = f64 ? (void *)bd : bf, .alpha = NULL, .gain = NULL};
                double S0[H * NN * MM];
                memcpy(S0, falcon_state_get_view(st).S, sizeof S0);
                const falcon_status s = falcon_run(&c, &in, st, f64 ? (void *)out : outf);
                cr_expect_eq(s, round ? FALCON_E_OVERFLOW : FALCON_OK, "%s %s round %d: %s",
                             falcon_backend_name(c.backend), falcon_precision_name(c.precision), round,
                             falcon_last_error());
                if (round)
                    cr_expect(memcmp(S0, falcon_state_get_view(st).S, sizeof S0) == 0, "%s %s: the state changed",
                              falcon_backend_name(c.backend), falcon_precision_name(c.precision));
            }
            falcon_state_free(st);
        }
}

/* Every backend in turn made unavailable (as on a machine that lacks it):
 * asking for it is an error naming it, never a crash or a run on another
 * backend, and auto picks another one. Where the machine lacks a backend
 * anyway, the same without hiding it. */
Test(validation, missing_backend_is_an_error_not_a_crash)
{
    int checked = 0;
    for (int b = FALCON_BACKEND_AUTO + 1; b < FALCON_BACKEND_ROWS; b++) {
        const int had = falcon_backend_available((falcon_backend)b);
        for (int hide = 0; hide < 2; hide++) {
            if (!hide && had) continue;
            falcon_backend_hide((falcon_backend)b, hide);
            cr_expect(!falcon_backend_available((falcon_backend)b), "%s still available", falcon_backend_name(b));
            const falcon_backend chosen = falcon_backend_resolve(FALCON_BACKEND_AUTO);
            cr_expect(chosen != (falcon_backend)b || b == FALCON_BACKEND_SCALAR,
                      "auto chose the unavailable %s", falcon_backend_name(b));
            fixture f;
            setup(&f, FALCON_1);
            f.cfg.backend = (falcon_backend)b;
            expect_error(&f, FALCON_E_UNAVAILABLE, falcon_backend_name(b));
            falcon_backend_hide((falcon_backend)b, 0);
            checked++;
        }
        cr_expect_eq(falcon_backend_available((falcon_backend)b), had, "%s not restored", falcon_backend_name(b));
    }
    cr_expect_geq(checked, FALCON_BACKEND_ROWS - 1);
}

/* Finite inputs can still overflow an inner-product memory: the call
 * reports it and keeps the state as it was. */
Test(validation, overflow_is_reported_not_leaked)
{
    fixture f;
    setup(&f, FALCON_1A);
    f.cfg.precision = FALCON_FP32;
    float q[TT * NN], v[TT * MM], beta[TT], out[TT * MM];
    for (int i = 0; i < TT * NN; i++) q[i] = 1e-3f;
    for (int i = 0; i < TT * MM; i++) v[i] = 3e38f, out[i] = 0;
    for (int i = 0; i < TT; i++) beta[i] = 1e30f;
    f.in = falcon_inputs_sequence(TT, NN, MM, q, q, v, beta, NULL, NULL);
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, 1, &st) == FALCON_OK);
    cr_expect_eq(falcon_run(&f.cfg, &f.in, st, out), FALCON_E_OVERFLOW);
    cr_expect(strstr(falcon_last_error(), "not finite") != NULL, "%s", falcon_last_error());
    cr_expect_eq(falcon_state_get_view(st).has_prev[0], 0);
    for (int i = 0; i < NN * MM; i++) cr_expect_eq(falcon_state_get_view(st).S[i], 0.0);
    falcon_state_free(st);
}

/* Runs Falcon-1 or 1A (fp32, chunk 4, no decay) on every CPU kernel
 * backend (and mpfr when with_mpfr) and form, and expects an overflow
 * whose message has `want`, the state kept, and every output equal to
 * out_is (unless NaN: any). Returns the number of runs. */
static int expect_overflow_everywhere(falcon_variant var, int64_t window, falcon_align align, const float *q,
                                      const float *k, const float *v, const float *beta, const char *want,
                                      float out_is, int with_mpfr)
{
    int checked = 0;
    for (int b = FALCON_BACKEND_AUTO + 1; b < FALCON_BACKEND_ROWS; b++) {
        if (!falcon_backend_available((falcon_backend)b) || b == FALCON_BACKEND_CUDA ||
            (b == FALCON_BACKEND_MPFR && !with_mpfr))
            continue;
        for (int form = FALCON_FORM_RECURRENT; form <= FALCON_FORM_PARALLEL; form++) {
            fixture f;
            setup(&f, var);
            f.cfg.precision = FALCON_FP32;
            f.cfg.align = align;
            f.cfg.window = window;
            f.cfg.backend = (falcon_backend)b;
            f.cfg.form = (falcon_form)form;
            f.cfg.chunk = 4;
            f.in = falcon_inputs_sequence(TT, NN, MM, q, k, v, beta, NULL, NULL);
            float out[TT * MM];
            for (int i = 0; i < TT * MM; i++) out[i] = 1;
            falcon_state *st;
            cr_assert(falcon_state_create(1, NN, MM, window, &st) == FALCON_OK);
            const falcon_status s = falcon_run(&f.cfg, &f.in, st, out);
            const char *be = falcon_backend_name(b), *fm = falcon_form_name(f.cfg.form);
            cr_expect_eq(s, FALCON_E_OVERFLOW, "%s %s: %s", be, fm, s ? falcon_last_error() : "returned OK");
            cr_expect(s && strstr(falcon_last_error(), want), "%s %s: %s (want '%s')", be, fm, falcon_last_error(), want);
            for (int i = 0; i < TT * MM && out_is == out_is; i++)
                cr_expect(out[i] == out_is, "%s %s: out[%d] = %g", be, fm, i, (double)out[i]);
            for (int i = 0; i < NN * MM; i++) cr_expect_eq(falcon_state_get_view(st).S[i], 0.0);
            falcon_state_free(st);
            checked++;
        }
    }
    return checked;
}

/* An output can overflow while the memory stays finite (a huge query read
 * through an ordinary memory): the CPU drivers check each output row as
 * they write it, so every backend and form must report it, name the
 * element, and keep the state. Only the last step's query is huge, so
 * the first bad element is out[(TT - 1) * MM]. With a window of 3 that
 * step writes 3 examples (the recurrent driver checks such a step's row
 * apart from a one-example step's). */
static void output_overflow_alone(falcon_variant var, int64_t window)
{
    float q[TT * NN], k[TT * NN], v[TT * MM], beta[TT];
    for (int i = 0; i < TT * NN; i++) q[i] = i >= (TT - 1) * NN ? 3e38f : 0.5f, k[i] = 0.5f;
    for (int i = 0; i < TT * MM; i++) v[i] = 1.0f;
    for (int i = 0; i < TT; i++) beta[i] = 1.0f;
    char want[32];
    snprintf(want, sizeof want, "out[%d] is not finite", (TT - 1) * MM);
    const int checked = expect_overflow_everywhere(var, window, FALCON_ALIGN_PREFIX, q, k, v, beta, want, NAN, 1);
    cr_expect_geq(checked, 3 * 3, "scalar, avx2 and mpfr at least");
}

Test(validation, an_output_overflow_alone_is_reported) { output_overflow_alone(FALCON_1, 1); }
Test(validation, an_output_overflow_alone_is_reported_in_a_window) { output_overflow_alone(FALCON_3, 3); }

/* The memory can overflow while every output stays finite: zero queries,
 * and values that first take the memory past the largest float at the
 * last write. The CPU drivers check the memory as they store it, and the
 * mpfr backend rounds its memory to float32 in an fp32 run, so every
 * backend and form must report it and keep the state. */
Test(validation, a_memory_overflow_alone_is_reported)
{
    float q[TT * NN], k[TT * NN], v[TT * MM], beta[TT];
    for (int i = 0; i < TT * NN; i++) q[i] = 0, k[i] = 1;
    for (int i = 0; i < TT * MM; i++) v[i] = i >= (TT - 2) * MM ? 3e38f : 0;
    for (int i = 0; i < TT; i++) beta[i] = 3; /* eta = 3 / (eps + 3): about 1 */
    const int checked = expect_overflow_everywhere(FALCON_1A, 1, FALCON_ALIGN_SAME, q, k, v, beta, "S[", 0, 1);
    cr_expect_geq(checked, 3 * 3, "scalar, avx2 and mpfr at least");
}

/* ---- a carried state that the run's precision cannot hold ----
 * A state holds double; an fp32 run holds the memory in float32 and its
 * carried keys as its inputs. A value that does not fit is bad input, named
 * before anything is written, in every backend and form alike. */

/* An fp32 run of Falcon-1 (q = k = 0, so the memory only decays) from a
 * state whose memory is S0 everywhere but S[3] = s3; out must stay as it
 * was unless the run succeeds. Returns the status. */
static falcon_status run_from_memory(falcon_backend b, falcon_form form, falcon_precision p, double s3)
{
    fixture f;
    setup(&f, FALCON_1);
    float q[TT * NN] = {0}, v[TT * MM], beta[TT], alpha[TT], out[TT * MM];
    for (int i = 0; i < TT * MM; i++) v[i] = 0.25f, out[i] = 7.0f;
    for (int i = 0; i < TT; i++) beta[i] = 1, alpha[i] = 0.5f;
    f.cfg.precision = p;
    f.cfg.backend = b;
    f.cfg.form = form;
    f.cfg.chunk = 4;
    f.in = falcon_inputs_sequence(TT, NN, MM, q, q, v, beta, alpha, NULL);
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, 1, &st) == FALCON_OK);
    double S[NN * MM] = {0};
    S[3] = s3;
    cr_assert(falcon_state_set_memory(st, S) == FALCON_OK);
    const falcon_status s = falcon_run(&f.cfg, &f.in, st, out);
    if (s)
        for (int i = 0; i < TT * MM; i++) cr_expect_eq(out[i], 7.0f, "out[%d] was written", i);
    if (s) cr_expect_eq(falcon_state_get_view(st).S[3], s3, "the state was modified");
    falcon_state_free(st);
    return s;
}

Test(validation, a_memory_beyond_float32_is_refused_everywhere)
{
    int checked = 0;
    for (int b = FALCON_BACKEND_AUTO + 1; b < FALCON_BACKEND_ROWS; b++) {
        if (!falcon_backend_available((falcon_backend)b) || b == FALCON_BACKEND_CUDA) continue;
        for (int form = FALCON_FORM_RECURRENT; form <= FALCON_FORM_PARALLEL; form++, checked++) {
            const falcon_status s = run_from_memory((falcon_backend)b, (falcon_form)form, FALCON_FP32, 1e39);
            cr_expect_eq(s, FALCON_E_RANGE, "%s %s: %s", falcon_backend_name(b), falcon_form_name(form),
                         s ? falcon_last_error() : "returned OK");
            cr_expect(strstr(falcon_last_error(), "state S: element 3 (head 0) = 1e+39 does not fit in float32") != NULL,
                      "%s", falcon_last_error());
        }
    }
    cr_expect_geq(checked, 3 * 3, "scalar, avx2 and mpfr at least");
}

/* The edge: what rounds to the largest float fits, the tie above it
 * (which rounds to infinity) does not; fp64 takes any finite value. */
Test(validation, a_memory_at_the_edge_of_float32)
{
    const double tie = (double)FLT_MAX + 0x1p103, below = nextafter(tie, 0.0);
    cr_expect_eq(run_from_memory(FALCON_BACKEND_SCALAR, FALCON_FORM_RECURRENT, FALCON_FP32, FLT_MAX), FALCON_OK, "%s",
                 falcon_last_error());
    cr_expect_eq(run_from_memory(FALCON_BACKEND_SCALAR, FALCON_FORM_RECURRENT, FALCON_FP32, -below), FALCON_OK, "%s",
                 falcon_last_error());
    cr_expect_eq(run_from_memory(FALCON_BACKEND_SCALAR, FALCON_FORM_CHUNK, FALCON_FP32, tie), FALCON_E_RANGE);
    cr_expect_eq(run_from_memory(FALCON_BACKEND_SCALAR, FALCON_FORM_CHUNK, FALCON_FP32, -tie), FALCON_E_RANGE);
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, 1, &st) == FALCON_OK);
    double S[NN * MM] = {0};
    S[3] = 1e300;
    cr_assert(falcon_state_set_memory(st, S) == FALCON_OK);
    cr_expect_eq(falcon_state_check(st, FALCON_FP64), FALCON_OK, "%s", falcon_last_error());
    cr_expect_eq(falcon_state_check(st, FALCON_TF32), FALCON_E_RANGE);
    falcon_state_free(st);
}

/* The carried keys: an fp64 run leaves its last key as the previous key
 * (prefix alignment) and its last two in the history (a window of 3),
 * every value of which the state carries on; an fp32 run from
 * that state must refuse a key beyond float32, a bf16 run one beyond bf16
 * (3.3895e38) that float32 still holds. */
static falcon_state *state_after_fp64_key(falcon_variant var, falcon_align align, int64_t W, int64_t t, double key)
{
    fixture f;
    setup(&f, var);
    f.cfg.align = align;
    f.cfg.window = W;
    f.k[t * NN + 1] = key;
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, W, &st) == FALCON_OK);
    cr_assert(falcon_run(&f.cfg, &f.in, st, f.out) == FALCON_OK, "%s", falcon_last_error());
    return st;
}

static falcon_status run_fp32_from(falcon_state *st, falcon_variant var, falcon_align align, int64_t W,
                                   falcon_precision p)
{
    fixture f;
    setup(&f, var);
    float q[TT * NN], v[TT * MM], beta[TT], out[TT * MM];
    for (int i = 0; i < TT * NN; i++) q[i] = 0.125f;
    for (int i = 0; i < TT * MM; i++) v[i] = 0.25f, out[i] = 7.0f;
    for (int i = 0; i < TT; i++) beta[i] = 1;
    f.cfg.align = align;
    f.cfg.window = W;
    f.cfg.precision = p;
    f.cfg.form = FALCON_FORM_CHUNK;
    f.cfg.chunk = 4;
    f.in = falcon_inputs_sequence(TT, NN, MM, q, q, v, beta, NULL, NULL);
    const falcon_status s = falcon_run(&f.cfg, &f.in, st, out);
    if (s)
        for (int i = 0; i < TT * MM; i++) cr_expect_eq(out[i], 7.0f, "out[%d] was written", i);
    return s;
}

Test(validation, carried_keys_beyond_the_run_precision_are_refused)
{
    falcon_state *st = state_after_fp64_key(FALCON_1, FALCON_ALIGN_PREFIX, 1, TT - 1, 1e39);
    cr_expect_eq(run_fp32_from(st, FALCON_1, FALCON_ALIGN_PREFIX, 1, FALCON_FP32), FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "state prev_key: element 1 (head 0) = 1e+39 does not fit in float32") != NULL,
              "%s", falcon_last_error());
    cr_expect_eq(falcon_state_check(st, FALCON_FP64), FALCON_OK);
    falcon_state_free(st);

    st = state_after_fp64_key(FALCON_3, FALCON_ALIGN_SAME, 3, TT - 2, -1e39);
    cr_expect_eq(run_fp32_from(st, FALCON_3, FALCON_ALIGN_SAME, 3, FALCON_FP32), FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "state hist_k: element 1 (head 0) = -1e+39 does not fit in float32") != NULL,
              "%s", falcon_last_error());
    falcon_state_free(st);

    st = state_after_fp64_key(FALCON_1, FALCON_ALIGN_PREFIX, 1, TT - 1, 3.395e38);
    cr_expect_eq(run_fp32_from(st, FALCON_1, FALCON_ALIGN_PREFIX, 1, FALCON_BF16), FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "state prev_key: element 1 (head 0) = 3.395e+38 does not fit in bf16") != NULL,
              "%s", falcon_last_error());
    cr_expect_eq(falcon_state_check(st, FALCON_FP32), FALCON_OK, "%s", falcon_last_error());
    falcon_state_free(st);

    cr_expect_eq(falcon_state_check(NULL, FALCON_FP32), FALCON_E_ARGUMENT);
}

/* An fp64 run may leave a memory beyond float32: the next fp32 run from
 * that state must check it (a state that an fp32 run stored is known to
 * fit, and is not scanned again). */
Test(validation, a_memory_an_fp64_run_left_is_checked)
{
    fixture f;
    setup(&f, FALCON_1A);
    for (int i = (TT - 1) * MM; i < TT * MM; i++) f.v[i] = 1e39;
    falcon_state *st;
    cr_assert(falcon_state_create(1, NN, MM, 1, &st) == FALCON_OK);
    cr_assert(falcon_run(&f.cfg, &f.in, st, f.out) == FALCON_OK, "%s", falcon_last_error());
    cr_expect_eq(run_fp32_from(st, FALCON_1A, FALCON_ALIGN_PREFIX, 1, FALCON_FP32), FALCON_E_RANGE);
    cr_expect(strstr(falcon_last_error(), "state S: element") != NULL, "%s", falcon_last_error());
    falcon_state_free(st);
}
