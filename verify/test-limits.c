/*
 * The limits of the precision and the corners the gate's random cases never
 * reach, every form and every backend present against the MPFR backend,
 * within the gate's own thresholds:
 *  - keys far from 1 (1e20 and 1e30 in fp32, 1e160 and 1e300 in fp64, near
 *    the square root of the largest number, tiny ones, tiny ones with a tiny
 *    eps, windows that mix scales), under every feature map, and gains far
 *    from 1: x.z overflows or underflows where the results do not
 *    (docs/math.md section 4);
 *  - results that truly overflow the precision: every form and backend
 *    reports FALCON_E_OVERFLOW, as the MPFR backend rounded to that
 *    precision does, never a silent wrong answer;
 *  - a step that learns nothing (prefix alignment, no previous key) on a
 *    memory that is not zero, as falcon_state_set_memory leaves it: the step
 *    must still decay and read the memory;
 *  - near-reset decays whose product is below the smallest normal number,
 *    on a memory large enough that what they leave of it is not;
 *  - batches whose head count is not a multiple of the recurrent form's head
 *    group and exceeds its cap, at 1 and 2 threads.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"
#include "falcon_advanced.h"

#define REF_BITS 256

/* What a test changes in the gate's seeded inputs. */
typedef struct limits_case {
    gate_case c;
    double key_mag;   /* keys scaled to this magnitude (1: as generated) */
    double key_alt;   /* if not 0: every third step's key has this magnitude instead */
    double value_mag; /* values scaled to this magnitude */
    double query_mag; /* queries scaled to this magnitude */
    int zero_key;     /* step 4's key is exactly zero (l2norm maps it to 0) */
    double gain_mag;  /* Falcon-2/2A: gains scaled to this magnitude (0: as generated) */
    double reset;     /* if not 0: alpha at steps 1 and 2 (near-resets whose product is tiny) */
    int64_t reset_at; /* if not 0: the reset at this step only, and alpha = before at the steps before it */
    double before;
} limits_case;

/* Set by a test whose runs may report an overflow where the reference has
 * none (falcon_eta_scaled's c): check() then takes the report as an answer. */
static int may_refuse;

static double round_to(falcon_precision p, double x) { return p == FALCON_FP32 ? (double)(float)x : x; }

/* Element i of a tensor: x in the run's precision and its exact double copy. */
static void set_both(gate_data *d, const void *t, const void *t64, int64_t i, double x)
{
    x = round_to(d->prec, x);
    ((double *)t64)[i] = x;
    if (d->prec == FALCON_FP32) ((float *)t)[i] = (float)x;
    else ((double *)t)[i] = x;
}

static void data_make(const limits_case *lc, falcon_precision prec, gate_data *d)
{
    const gate_case *c = &lc->c;
    cr_assert(gate_data_make(c, prec, d) == 0);
    const int64_t rows = c->B * c->T * c->H, n = c->n, m = c->m;
    const double *k64 = d->in64.k, *q64 = d->in64.q, *v64 = d->in64.v;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = (r / c->H) % c->T;
        const double km = lc->key_alt != 0 && t % 3 == 1 ? lc->key_alt : lc->key_mag;
        for (int64_t i = 0; i < n; i++) {
            const double k = lc->zero_key && t == 4 ? 0.0 : km * k64[r * n + i];
            set_both(d, d->in.k, d->in64.k, r * n + i, k);
            set_both(d, d->in.q, d->in64.q, r * n + i, lc->query_mag * q64[r * n + i]);
        }
        for (int64_t i = 0; i < m; i++) set_both(d, d->in.v, d->in64.v, r * m + i, lc->value_mag * v64[r * m + i]);
        if (lc->gain_mag != 0 && d->in64.gain)
            for (int64_t i = 0; i < n; i++)
                set_both(d, d->in.gain, d->in64.gain, r * n + i, lc->gain_mag * ((const double *)d->in64.gain)[r * n + i]);
        if (lc->reset != 0 && d->in64.alpha && !lc->reset_at && (t == 1 || t == 2))
            set_both(d, d->in.alpha, d->in64.alpha, r, lc->reset);
        if (lc->reset_at && d->in64.alpha && t <= lc->reset_at)
            set_both(d, d->in.alpha, d->in64.alpha, r, t == lc->reset_at ? lc->reset : lc->before);
    }
}

/* ||x||_2 without overflow or underflow. */
static double norm2(const double *x, int64_t count)
{
    double s = 0, acc = 0;
    for (int64_t i = 0; i < count; i++)
        if (fabs(x[i]) > s) s = fabs(x[i]);
    if (s == 0) return 0;
    for (int64_t i = 0; i < count; i++) acc += (x[i] / s) * (x[i] / s);
    return s * sqrt(acc);
}

static void phi_of(falcon_phi phi, const double *q, double *out, int64_t n)
{
    const double nq = norm2(q, n);
    for (int64_t i = 0; i < n; i++) {
        const double x = q[i];
        out[i] = phi == FALCON_PHI_RELU ? (x > 0 ? x : 0)
               : phi == FALCON_PHI_ELU1 ? (x > 0 ? x + 1 : exp(x))
               : phi == FALCON_PHI_L2NORM ? (nq > 0 ? x / nq : 0) : x;
    }
}

static falcon_state *state_from(const gate_case *c, const double *S0)
{
    falcon_state *st;
    cr_assert(falcon_state_create(c->B * c->H, c->n, c->m, c->window, &st) == FALCON_OK);
    if (S0) cr_assert(falcon_state_set_memory(st, S0) == FALCON_OK);
    return st;
}

/* The reference: the MPFR backend over the whole call from memory S0 (NULL:
 * fresh), on the exact double copy of the inputs, rounded to double; and
 * the reads' condition number || (|S_t| |phi(q_t)|)_t || / ||O|| from a
 * second pass, one step per call (a ratio of norms needs no more). */
static falcon_status reference(const gate_case *c, const gate_data *d, const double *S0, gate_result *r)
{
    falcon_config cfg = gate_config(c, FALCON_FORM_RECURRENT, FALCON_BACKEND_MPFR, FALCON_FP64);
    cfg.mpfr_bits = REF_BITS;
    const int64_t B = c->B, H = c->H, T = c->T, n = c->n, m = c->m, heads = B * H;
    r->out_count = B * T * H * m;
    r->state_count = heads * m * n;
    r->out = calloc((size_t)r->out_count + 1, sizeof(double));
    r->S = calloc((size_t)r->state_count + 1, sizeof(double));
    double *absprod = calloc((size_t)r->out_count + 1, sizeof(double));
    double *step = malloc(sizeof(double) * (size_t)(heads * (3 * n + 2 * m + 2) + n));
    cr_assert(r->out && r->S && absprod && step);
    falcon_state *st = state_from(c, S0);
    falcon_status s = falcon_run(&cfg, &d->in64, st, r->out);
    if (!s) memcpy(r->S, falcon_state_get_view(st).S, sizeof(double) * (size_t)r->state_count);
    falcon_state_free(st);
    st = state_from(c, S0);
    const falcon_inputs *in = &d->in64;
    double *q = step, *k = q + heads * n, *g = k + heads * n, *v = g + heads * n;
    double *beta = v + heads * m, *alpha = beta + heads, *o = alpha + heads, *qf = o + heads * m;
    for (int64_t t = 0; t < T && !s; t++) {
        for (int64_t b = 0; b < B; b++) {
            const int64_t row = (b * T + t) * H, hs = b * H;
            const size_t dn = sizeof(double) * (size_t)(H * n), dm = sizeof(double) * (size_t)(H * m);
            memcpy(q + hs * n, (const double *)in->q + row * n, dn);
            memcpy(k + hs * n, (const double *)in->k + row * n, dn);
            memcpy(v + hs * m, (const double *)in->v + row * m, dm);
            memcpy(beta + hs, (const double *)in->beta + row, sizeof(double) * (size_t)H);
            if (in->alpha) memcpy(alpha + hs, (const double *)in->alpha + row, sizeof(double) * (size_t)H);
            if (in->gain) memcpy(g + hs * n, (const double *)in->gain + row * n, dn);
        }
        falcon_inputs in1 = {.B = B, .T = 1, .H = H, .n = n, .m = m, .q = q, .k = k,
                             .v = v, .beta = beta, .alpha = in->alpha ? alpha : NULL, .gain = in->gain ? g : NULL};
        if ((s = falcon_run(&cfg, &in1, st, o))) break;
        const double *S = falcon_state_get_view(st).S;
        for (int64_t hh = 0; hh < heads; hh++) {
            phi_of(c->phi, q + hh * n, qf, n);
            for (int64_t i = 0; i < m; i++) {
                double a = 0;
                for (int64_t j = 0; j < n; j++) a += fabs(S[(hh * m + i) * n + j] * qf[j]);
                absprod[((hh / H * T + t) * H + hh % H) * m + i] = a;
            }
        }
    }
    const double no = norm2(r->out, r->out_count), na = norm2(absprod, r->out_count);
    r->read_cond = !s && no > 0 && na > no ? na / no : 1.0;
    falcon_state_free(st);
    free(absprod);
    free(step);
    if (s) gate_result_free(r);
    return s;
}

/* Status of the MPFR backend rounded to the run's own precision. */
static falcon_status mpfr_status(const gate_case *c, const gate_data *d, const double *S0)
{
    falcon_config cfg = gate_config(c, FALCON_FORM_RECURRENT, FALCON_BACKEND_MPFR, d->prec);
    cfg.mpfr_bits = REF_BITS;
    falcon_state *st = state_from(c, S0);
    void *out = malloc((d->prec == FALCON_FP32 ? 4 : 8) * (size_t)(c->B * c->T * c->H * c->m + 1));
    falcon_status s = falcon_run(&cfg, &d->in, st, out);
    free(out);
    falcon_state_free(st);
    return s;
}

/* One run of a kernel backend; results in double. */
static falcon_status run_one(const gate_case *c, const gate_data *d, falcon_form form, falcon_backend b,
                             int threads, const double *S0, gate_result *r)
{
    falcon_config cfg = gate_config(c, form, b, d->prec);
    cfg.threads = threads;
    r->out_count = c->B * c->T * c->H * c->m;
    r->state_count = c->B * c->H * c->m * c->n;
    r->out = calloc((size_t)r->out_count + 1, sizeof(double));
    r->S = calloc((size_t)r->state_count + 1, sizeof(double));
    const size_t es = d->prec == FALCON_FP32 ? 4 : 8;
    char *out = malloc(es * (size_t)(r->out_count + 1));
    cr_assert(r->out && r->S && out);
    memset(out, 0x7f, es * (size_t)r->out_count); /* not zeros: every output must be written */
    falcon_state *st = state_from(c, S0);
    falcon_status s = falcon_run(&cfg, &d->in, st, out);
    for (int64_t i = 0; !s && i < r->out_count; i++)
        r->out[i] = d->prec == FALCON_FP32 ? ((float *)out)[i] : ((double *)out)[i];
    if (!s) memcpy(r->S, falcon_state_get_view(st).S, sizeof(double) * (size_t)r->state_count);
    falcon_state_free(st);
    free(out);
    return s;
}

/* Every backend present, every form: within the gate's thresholds of the
 * reference, or an overflow exactly where the MPFR backend reports one.
 * Returns the largest output error seen, in units of roundoff. */
static double check(const limits_case *lc, falcon_precision prec, const double *S0, int threads, const char *what)
{
    const gate_case *c = &lc->c;
    gate_data d;
    data_make(lc, prec, &d);
    char desc[256];
    gate_case_describe(c, desc, sizeof desc);
    const falcon_status want = mpfr_status(c, &d, S0);
    cr_assert(want == FALCON_OK || want == FALCON_E_OVERFLOW, "%s %s: mpfr backend: %s", what, desc,
              falcon_last_error());
    gate_result ref = {0};
    if (want == FALCON_OK)
        cr_assert(reference(c, &d, S0, &ref) == FALCON_OK, "%s %s: reference: %s", what, desc, falcon_last_error());
    double worst = 0;
    for (int b = 0; b < gate_backend_count; b++) {
        if (!gate_backend_runs(gate_backends[b], prec)) continue;
        const char *bn = falcon_backend_name(gate_backends[b]);
        for (int f = 0; f < 3; f++) {
            const char *fn = falcon_form_name((falcon_form)f);
            gate_result r;
            const falcon_status s = run_one(c, &d, (falcon_form)f, gate_backends[b], threads, S0, &r);
            if (want == FALCON_E_OVERFLOW) {
                printf("limits %s %s %s %s %s keys %g values %g: %s\n", what, bn, falcon_precision_name(prec), fn,
                       desc, lc->key_mag, lc->value_mag, s == FALCON_E_OVERFLOW ? "overflow, as mpfr" : "NOT overflow");
                cr_expect(s == FALCON_E_OVERFLOW, "%s %s %s %s %s: mpfr reports an overflow, the run returned %d (%s)",
                          what, bn, falcon_precision_name(prec), fn, desc, (int)s, s ? falcon_last_error() : "ok");
                gate_result_free(&r);
                continue;
            }
            if (s == FALCON_E_OVERFLOW && may_refuse) {
                printf("limits %s %s %s %s %s keys %g values %g: refused, reported: %s\n", what, bn,
                       falcon_precision_name(prec), fn, desc, lc->key_mag, lc->value_mag, falcon_last_error());
                gate_result_free(&r);
                continue;
            }
            cr_expect(s == FALCON_OK, "%s %s %s %s %s: %s", what, bn, falcon_precision_name(prec), fn, desc,
                      falcon_last_error());
            if (s) {
                gate_result_free(&r);
                worst = INFINITY;
                continue;
            }
            const gate_errors e = gate_compare(&r, &ref, prec);
            const double thr = gate_threshold(c, (falcon_form)f, prec);
            const double thr_out = gate_threshold_out(c, (falcon_form)f, prec, ref.read_cond);
            printf("limits %s %s %s %s %s keys %g/%g values %g: out %.2f u (<= %.1f), S %.2f u (<= %.1f)\n", what,
                   bn, falcon_precision_name(prec), fn, desc, lc->key_mag, lc->key_alt, lc->value_mag, e.out_u,
                   thr_out, e.state_u, thr);
            cr_expect(e.out_u <= thr_out, "%s %s %s %s %s: out error %.3g u > %.3g u", what, bn,
                      falcon_precision_name(prec), fn, desc, e.out_u, thr_out);
            cr_expect(e.state_u <= thr, "%s %s %s %s %s: state error %.3g u > %.3g u", what, bn,
                      falcon_precision_name(prec), fn, desc, e.state_u, thr);
            if (!(e.out_u <= worst)) worst = e.out_u;
            gate_result_free(&r);
        }
    }
    if (want == FALCON_OK) gate_result_free(&ref);
    gate_data_free(&d);
    return worst;
}

static gate_case base_case(falcon_variant v, falcon_align a, falcon_phi phi, uint64_t seed)
{
    gate_case c = {v, a, phi, GATE_DECAY_RANDOM, 1, 24, 1, 6, 5,
                   falcon_variant_has_window(v) ? 3 : 1, 5, 1e-6, 1.0, seed};
    return c;
}

/* Keys far from 1, every variant, alignment and feature map. */
static void keys_at_the_limits(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    /* magnitude, alternate magnitude (every third step), eps */
    const double mags[][3] = {
        {f32 ? 1e20 : 1e160, 0, 1e-6},
        {f32 ? 1.8e19 : 1.3e154, 0, 1e-6}, /* near sqrt(largest): x.x just overflows */
        {f32 ? 1e30 : 1e300, 0, 1e-6},
        {f32 ? 1e20 : 1e160, 1.0, 1e-6},   /* windows mixing scales */
        {f32 ? 1e-20 : 1e-160, 0, 1e-6},
        {f32 ? 1e-30 : 1e-300, 0, 1e-6},
        {f32 ? 1e-20 : 1e-160, 0, f32 ? 1e-38 : 1e-300}, /* tiny eps: eta alone would overflow */
    };
    const int nmag = (int)(sizeof mags / sizeof mags[0]);
    uint64_t seed = 900;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int i = 0; i < nmag; i++)
            for (int a = 0; a < 2; a++) {
                const falcon_phi phi = (falcon_phi)((v + i + a) % 4);
                /* A zero key (l2norm's guard) except under elu1, which maps
                 * it to ones: an example of scale 1 among keys of 1e20 is a
                 * different, ill-conditioned problem. */
                limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, phi, seed++),
                                  mags[i][0], mags[i][1], 1.0, 1.0, phi != FALCON_PHI_ELU1, 0, 0, 0, 0};
                lc.c.eps = mags[i][2];
                check(&lc, prec, NULL, 1, "keys");
            }
}

Test(limits, keys_at_the_limits_fp32) { keys_at_the_limits(FALCON_FP32); }
Test(limits, keys_at_the_limits_fp64) { keys_at_the_limits(FALCON_FP64); }

/* Large values with large keys: representable, so computed; and results
 * that overflow the precision: reported as overflows by every form. */
static void large_values(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    uint64_t seed = 950;
    for (int v = FALCON_1; v <= FALCON_3A; v++) {
        limits_case fits = {base_case((falcon_variant)v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, seed++),
                            f32 ? 1e20 : 1e160, 0, f32 ? 1e30 : 1e250, 1.0, 0, 0, 0, 0, 0};
        check(&fits, prec, NULL, 1, "values");
        limits_case over = {base_case((falcon_variant)v, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, seed++),
                            1.0, 0, f32 ? 1e36 : 1e306, f32 ? 1e20 : 1e100, 0, 0, 0, 0, 0};
        check(&over, prec, NULL, 1, "overflow");
    }
}

Test(limits, large_values_fp32) { large_values(FALCON_FP32); }
Test(limits, large_values_fp64) { large_values(FALCON_FP64); }

/* Values large enough, with a decay, that the fp32 recurrent form's lazy
 * decay leaves float's range where the memory and the reads do not: it
 * keeps the memory divided by a factor that falls to 2^-8 (kernels/
 * framework/recurrent.inc.c). Case 0: values of 1e36, alpha = 0.5 (the
 * memory and reads up to about 1e37); case 1: values of 1e37, alpha = 0.6
 * at every step (not a power of two, so lazy and direct steps round
 * differently); case 2: case 1 with n = 64, m = 256 and T = 10, a memory
 * the recurrent form keeps in column tiles. */
static limits_case lazy_range_case(int v, int a, int which, uint64_t seed)
{
    limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_IDENTITY, seed),
                      1.0, 0, 1e36, 1.0, 0, 0, 0, 0, 0};
    lc.c.decay = GATE_DECAY_STRONG;
    if (which >= 1) { /* alpha = before up to reset_at, and reset there */
        lc.value_mag = 1e37;
        lc.reset = lc.before = 0.6;
        lc.reset_at = lc.c.T - 1;
    }
    if (which == 2) { /* a memory in column tiles (recurrent.inc.c, rec_tile) */
        lc.c.n = 64;
        lc.c.m = 256;
        lc.c.T = 10;
        lc.reset_at = lc.c.T - 1;
    }
    return lc;
}

/* The call must give the results all the same: it runs such a head again
 * step by step, a step that leaves the range taken again with the decay
 * direct. Checked to fail without that second run. */
Test(limits, large_values_lazy_decay_fp32)
{
    uint64_t seed = 1300;
    for (int which = 0; which < 3; which++)
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int a = 0; a < 2; a++) {
                const limits_case lc = lazy_range_case(v, a, which, seed++);
                check(&lc, FALCON_FP32, NULL, 1, "lazy-range");
            }
}

/* One call's outputs and state, bitwise those of the call split at every
 * step into two with the state carried; returns how many splits differ. */
static int splits_differ(const gate_case *c, const gate_data *d, falcon_backend b)
{
    const falcon_config cfg = gate_config(c, FALCON_FORM_RECURRENT, b, FALCON_FP32);
    const int64_t T = c->T, m = c->m, n = c->n;
    float *whole = malloc(sizeof(float) * (size_t)(T * m)), *part = malloc(sizeof(float) * (size_t)(T * m));
    cr_assert(whole && part);
    falcon_state *one = state_from(c, NULL);
    cr_assert(falcon_run(&cfg, &d->in, one, whole) == FALCON_OK, "%s", falcon_last_error());
    int differ = 0;
    for (int64_t t = 1; t < T; t++) {
        falcon_state *st = state_from(c, NULL);
        const falcon_inputs a = gate_inputs_slice(d, 0, t), z = gate_inputs_slice(d, t, T);
        cr_assert(falcon_run(&cfg, &a, st, part) == FALCON_OK, "%s", falcon_last_error());
        cr_assert(falcon_run(&cfg, &z, st, part + t * m) == FALCON_OK, "%s", falcon_last_error());
        differ += memcmp(part, whole, sizeof(float) * (size_t)(T * m)) != 0 ||
                  memcmp(falcon_state_get_view(st).S, falcon_state_get_view(one).S, sizeof(double) * (size_t)(m * n)) ||
                  *falcon_state_scale(st) != *falcon_state_scale(one);
        falcon_state_free(st);
    }
    falcon_state_free(one);
    free(whole);
    free(part);
    return differ;
}

/* The cases above, split: the step-by-step second run gives a split the
 * one call's bits, as every recurrent split must (test-segments.c, with
 * values of ordinary size). Checked to fail (case 1: every variant and
 * alignment, 12 to 22 of the 23 splits each, on every backend that decays
 * lazily; case 2: 2 of the 12, 8 and 9 of 9 splits) when the head runs the whole call again with the decay direct:
 * a split's first part, finite lazily, keeps lazy bits the one call does
 * not. (Case 0's decay of 0.5 makes most lazy steps exact.) */
Test(limits, lazy_decay_rerun_splits_bitwise_fp32)
{
    uint64_t seed = 1300;
    for (int which = 0; which < 3; which++)
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int a = 0; a < 2; a++) {
                const limits_case lc = lazy_range_case(v, a, which, seed++);
                gate_data d;
                data_make(&lc, FALCON_FP32, &d);
                char desc[256];
                gate_case_describe(&lc.c, desc, sizeof desc);
                for (int b = 0; b < gate_backend_count; b++) {
                    if (!gate_backend_runs(gate_backends[b], FALCON_FP32) || gate_backends[b] == FALCON_BACKEND_CUDA)
                        continue;
                    const int differ = splits_differ(&lc.c, &d, gate_backends[b]);
                    printf("limits lazy-rerun splits %s %s values %g: %d of %lld differ\n",
                           falcon_backend_name(gate_backends[b]), desc, lc.value_mag, differ, (long long)(lc.c.T - 1));
                    cr_expect(differ == 0, "%s %s values %g: %d splits differ from the one call",
                              falcon_backend_name(gate_backends[b]), desc, lc.value_mag, differ);
                }
                gate_data_free(&d);
            }
}

/* Falcon-2/2A's gains far from 1, with keys of ordinary size and far from
 * 1: the write direction z = g * x leaves the range on its own. */
static void gains_at_the_limits(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    const double gains[] = {f32 ? 1e30 : 1e250, f32 ? 1e-30 : 1e-250, f32 ? 1e36 : 1e300};
    const double keys[] = {1.0, f32 ? 1e20 : 1e160, f32 ? 1e-20 : 1e-160};
    uint64_t seed = 1100;
    for (int v = FALCON_2; v <= FALCON_2A; v += FALCON_2A - FALCON_2)
        for (int gi = 0; gi < 3; gi++)
            for (int ki = 0; ki < 3; ki++)
                for (int a = 0; a < 2; a++) {
                    limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_IDENTITY, seed++),
                                      keys[ki], 0, 1.0, 1.0, 0, gains[gi], 0, 0, 0};
                    if (gi == 1 && ki == 2) continue; /* tiny gains and keys: subnormal results */
                    check(&lc, prec, NULL, 1, "gains");
                }
}

Test(limits, gains_at_the_limits_fp32) { gains_at_the_limits(FALCON_FP32); }
Test(limits, gains_at_the_limits_fp64) { gains_at_the_limits(FALCON_FP64); }

/* Subnormal gains on keys of ordinary size: z = g * x formed as it stands
 * would be subnormal and lose digits, though the memory and the reads it
 * leads to (about beta / eps times z) are normal numbers. */
static void subnormal_gains(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    const double gains[] = {f32 ? 1e-41 : 1e-310, f32 ? 1e-43 : 1e-312};
    uint64_t seed = 1150;
    for (int v = FALCON_2; v <= FALCON_2A; v += FALCON_2A - FALCON_2)
        for (int gi = 0; gi < 2; gi++)
            for (int a = 0; a < 2; a++) {
                limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_IDENTITY, seed++),
                                  1.0, 0, 1.0, 1.0, 0, gains[gi], 0, 0, 0};
                check(&lc, prec, NULL, 1, "subnormal gains");
            }
}

Test(limits, subnormal_gains_fp32) { subnormal_gains(FALCON_FP32); }
Test(limits, subnormal_gains_fp64) { subnormal_gains(FALCON_FP64); }

/* Tiny keys or gains with a large eps: the step's coefficient c = eta
 * sigma tau (falcon_eta_scaled) would be 0 or lose its digits, although
 * the writes (about beta / eps times e z) and the outputs are normal
 * numbers. Every backend and form either comes within the thresholds or
 * reports it; before the check on c, all returned zeros (the memory never
 * moved) with success. */
static void step_size_underflow(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    /* variant, key magnitude, gain magnitude, eps, value magnitude */
    const struct { falcon_variant v; double key, gain, eps, value; } cases[] = {
        {FALCON_1, f32 ? 1e-12 : 1e-80, 0, f32 ? 1e30 : 1e250, f32 ? 1e30 : 1e250},
        {FALCON_3, f32 ? 1e-12 : 1e-80, 0, f32 ? 1e30 : 1e250, f32 ? 1e30 : 1e250},
        {FALCON_1A, f32 ? 1e-12 : 1e-80, 0, f32 ? 1e30 : 1e250, f32 ? 1e30 : 1e250},
        {FALCON_2, 1.0, f32 ? 1e-40 : 1e-310, 1.0, f32 ? 1e20 : 1e150},
        {FALCON_2A, 1.0, f32 ? 1e-10 : 1e-80, f32 ? 1e30 : 1e300, f32 ? 1e30 : 1e300},
    };
    uint64_t seed = 1170;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int a = 0; a < 2; a++) {
            limits_case lc = {base_case(cases[i].v, (falcon_align)a, FALCON_PHI_IDENTITY, seed++), cases[i].key, 0,
                              cases[i].value, 1.0, 0, cases[i].gain, 0, 0, 0};
            lc.c.eps = cases[i].eps;
            may_refuse = 1;
            check(&lc, prec, NULL, 1, "step size underflow");
            may_refuse = 0;
        }
}

/* l2norm of keys and queries whose norm is subnormal: the unit vector is
 * representable, but dividing by a norm rounded as a subnormal lost its
 * digits (fp32 keys of 1e-42: 3000 u in the memory). */
static void subnormal_l2norm(falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    uint64_t seed = 1190;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int a = 0; a < 2; a++) {
            limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_L2NORM, seed++),
                              f32 ? 1e-42 : 1e-315, 0, 1.0, f32 ? 1e-41 : 1e-314, 0, 0, 0, 0, 0};
            check(&lc, prec, NULL, 1, "subnormal l2norm");
        }
}

Test(limits, subnormal_l2norm_fp32) { subnormal_l2norm(FALCON_FP32); }
Test(limits, subnormal_l2norm_fp64) { subnormal_l2norm(FALCON_FP64); }

Test(limits, step_size_underflow_fp32) { step_size_underflow(FALCON_FP32); }
Test(limits, step_size_underflow_fp64) { step_size_underflow(FALCON_FP64); }

/* A memory set by falcon_state_set_memory and no previous key: under prefix
 * alignment the first step learns nothing, but forgets and reads. */
Test(limits, step_without_example_on_a_set_memory)
{
    uint64_t seed = 990;
    for (int p = 0; p < 2; p++)
        for (int v = FALCON_1; v <= FALCON_3A; v++) {
            limits_case lc = {base_case((falcon_variant)v, FALCON_ALIGN_PREFIX, (falcon_phi)(v % 4), seed++),
                              1.0, 0, 1.0, 1.0, 0, 0, 0, 0, 0};
            lc.c.decay = GATE_DECAY_STRONG; /* alpha = 1/2 on every step: a skipped decay shows */
            lc.c.T = 7;
            double S0[30];
            for (int i = 0; i < 30; i++) S0[i] = 0.5 - 0.125 * (double)(i % 9) + 0.01 * (double)i;
            check(&lc, (falcon_precision)p, S0, 1, "set-memory");
        }
}

/* Two near-resets in a row on a large memory: their product, 1e-40, is
 * below the smallest normal float, and the memory of 1e30 it scales
 * still reads as 1e-10, above the tiny values written since. The chunk
 * form must take that product in double (blocked.inc.c, RS(decay_mul),
 * RS(memory_decay)): rounded to a subnormal float first, the factor kept
 * 16 bits and the reads were off by about 10^-5. */
Test(limits, near_resets_on_a_large_memory_fp32)
{
    uint64_t seed = 1100;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int a = 0; a < 2; a++) {
            limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_IDENTITY, seed++),
                              1.0, 0, 1e-15, 1.0, 0, 0, 1e-20, 0, 0};
            lc.c.decay = GATE_DECAY_MILD;
            lc.c.T = 9;
            double S0[30];
            for (int i = 0; i < 30; i++) S0[i] = 1e30 * (0.5 - 0.125 * (double)(i % 9) + 0.01 * (double)i);
            check(&lc, FALCON_FP32, S0, 1, "near-resets");
        }
}

/* A near-reset at the smallest normal float after ten decays of 0.6 on a
 * memory of 1e37: the fp32 recurrent form keeps those ten decays as its
 * lazy factor c (about 2^-7.4), and c times the smallest normal float is
 * deep in the subnormal range, where one factor keeps 16 or 17 bits; the
 * memory it scales, about 1e-3, outweighs the tiny values written since.
 * The form must first fold c into the memory, then decay it (recurrent.inc.c,
 * rec_decay): with the single subnormal factor the memory was off by
 * 90-94 units of roundoff in every case (the bound is 26.7; 2.9-5.9 with
 * the fold). */
Test(limits, a_near_reset_after_lazy_steps_fp32)
{
    uint64_t seed = 1400;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int a = 0; a < 2; a++) {
            limits_case lc = {base_case((falcon_variant)v, (falcon_align)a, FALCON_PHI_IDENTITY, seed++),
                              1.0, 0, 1e-15, 1.0, 0, 0, 0x1p-126, 10, 0.6};
            lc.c.T = 14;
            double S0[30];
            for (int i = 0; i < 30; i++) S0[i] = 1e37 * (0.5 - 0.125 * (double)(i % 9) + 0.01 * (double)i);
            check(&lc, FALCON_FP32, S0, 1, "reset-after-lazy");
        }
}

/* More heads than the recurrent form's group cap (16), in a count that is
 * not a multiple of the group, at 1 and 2 threads. */
Test(limits, batches_beyond_the_head_group)
{
    const int64_t shapes[][2] = {{3, 13}, {1, 17}}; /* B, H: 39 and 17 heads */
    uint64_t seed = 1000;
    for (int sh = 0; sh < 2; sh++)
        for (int threads = 1; threads <= 2; threads++)
            for (int p = 0; p < 2; p++) {
                const falcon_variant v = sh ? FALCON_3A : FALCON_1;
                limits_case lc = {base_case(v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, seed++), 1.0, 0, 1.0, 1.0, 0, 0, 0, 0, 0};
                lc.c.B = shapes[sh][0];
                lc.c.H = shapes[sh][1];
                lc.c.T = 9;
                check(&lc, (falcon_precision)p, NULL, threads, threads == 1 ? "heads-1-thread" : "heads-2-threads");
            }
}
