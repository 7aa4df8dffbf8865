/*
 * The blocked forms' backward pass at the edges of the range (docs/math.md
 * section 12.5): inputs the gradient gate's random cases never reach,
 * where the forward chunk kernel leaves its block algebra, so that the
 * blocked backward hands the head to the recurrent one:
 *  - keys far from 1, whose x.z leaves the normaliser's range
 *    (falcon_xz_in_range): the forward stores them scaled (section 4.1);
 *    unscaled, x.z overflows (dk wrong by 10^5 thresholds in fp32) or
 *    underflows (a spurious overflow);
 *  - Falcon-2/2A's gains far from 1, the same through z = g * x
 *    (subnormal gains: dgain 4.8 (fp32) to 8.8 (fp64) thresholds);
 *  - the carried-memory family's adjoint (falcon_block_cancels): a block
 *    whose steps project G mostly away forms dS_0 as a difference of terms
 *    of the size of G_L (up to 7.8 thresholds in one block of 30 steps).
 * Each case through every CPU backend present, the chunk and parallel
 * forms (and the recurrent one, the yardstick), fp32 and fp64, against the
 * MPFR reverse sweep; every gradient tensor within the gradient gate's own
 * threshold (gate/THRESHOLDS.md, "Gradients"). Prints one line per run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "grad-gate.h"

/* A limit case: a gradient case and what changes in its seeded inputs. */
typedef struct lim_case {
    gate_grad_case g;
    double key_mag;  /* keys times this (1: as generated) */
    double gain_mag; /* Falcon-2/2A: gains times this (1: as generated) */
    double carried;  /* if not 0: the carried-memory family, memory of this scale */
    int no_reads;    /* dO = 0: the cotangent is dS_T alone */
} lim_case;

/* Element i of a tensor (gate_data owns the buffers falcon_inputs points
 * into as const): x in the run's precision and its exact double copy. */
static void set_both(gate_data *d, const void *t, const void *t64, int64_t i, double x)
{
    if (d->prec == FALCON_FP64) {
        ((double *)(uintptr_t)t)[i] = x, ((double *)(uintptr_t)t64)[i] = x;
        return;
    }
    ((float *)(uintptr_t)t)[i] = (float)x;
    ((double *)(uintptr_t)t64)[i] = (double)(float)x;
}

static void scale_inputs(const lim_case *lc, gate_data *d)
{
    const gate_case *c = &lc->g.c;
    const int64_t count = c->B * c->T * c->H * c->n;
    for (int64_t i = 0; i < count; i++) {
        set_both(d, d->in.k, d->in64.k, i, lc->key_mag * ((const double *)d->in64.k)[i]);
        if (d->in64.gain)
            set_both(d, d->in.gain, d->in64.gain, i, lc->gain_mag * ((const double *)d->in64.gain)[i]);
    }
}

/* One run: each tensor against its threshold; the line ends with the
 * worst ratio of error to threshold. */
static void judge(const lim_case *lc, const gate_data *d, const gate_cotangents *ct, const falcon_state *st,
                    const gate_grad_result *ref, falcon_backend b, falcon_form f, const char *desc)
{
    gate_grad_result r;
    const falcon_status s = gate_grad_run(&lc->g, d, ct, f, b, st, &r);
    cr_assert(s == FALCON_OK, "%s %s %s: %s", falcon_backend_name(b), falcon_form_name(f), desc,
              falcon_last_error());
    double err[GG_COUNT], worst = 0;
    gate_grad_compare(&r, ref, d->prec, err);
    printf("grad-limits %s %s %s %s:", falcon_backend_name(b), falcon_precision_name(d->prec), falcon_form_name(f),
           desc);
    for (int t = 0; t < GG_COUNT; t++) {
        if (!r.count[t]) continue;
        const double thr = gate_grad_threshold(&lc->g.c, f, d->prec, t, ref->cond[t]);
        printf(" %s %.3g u (<= %.1f)", gate_grad_name(t), err[t], thr);
        worst = fmax(worst, err[t] / thr);
        cr_expect(err[t] <= thr, "%s %s %s %s: %s error %.3g u > %.3g u (kappa %.3g)", falcon_backend_name(b),
                  falcon_precision_name(d->prec), falcon_form_name(f), desc, gate_grad_name(t), err[t], thr,
                  ref->cond[t]);
    }
    printf(" worst/threshold %.3g\n", worst);
    gate_grad_result_free(&r);
}

static void run_case(const lim_case *lc, falcon_precision prec)
{
    gate_data d;
    gate_cotangents ct;
    gate_grad_result ref;
    falcon_state *st = NULL;
    char desc[320], base[256];
    gate_case_describe(&lc->g.c, base, sizeof base);
    snprintf(desc, sizeof desc, "%s keys*%g gains*%g carried=%g", base, lc->key_mag, lc->gain_mag, lc->carried);
    cr_assert(gate_data_make(&lc->g.c, prec, &d) == 0);
    scale_inputs(lc, &d);
    if (lc->carried != 0) {
        gate_carried_inputs(&lc->g.c, &d);
        cr_assert(gate_carried_state(&lc->g.c, prec, lc->carried, lc->g.c.seed, &st) == FALCON_OK, "%s",
                  falcon_last_error());
    }
    cr_assert(gate_cotangents_make(&lc->g.c, prec, &ct) == 0);
    if (lc->no_reads) /* the cotangent dS_T alone */
        for (int64_t i = 0; i < lc->g.c.B * lc->g.c.T * lc->g.c.H * lc->g.c.m; i++) {
            ct.dO64[i] = 0;
            if (prec == FALCON_FP64) ((double *)ct.dO)[i] = 0;
            else ((float *)ct.dO)[i] = 0;
        }
    cr_assert(gate_grad_reference(&lc->g, &d, &ct, st, &ref) == FALCON_OK, "reference %s: %s", desc,
              falcon_last_error());
    int ran = 0;
    for (int b = 0; b < gate_backend_count; b++) {
        if (!gate_backend_runs(gate_backends[b], prec) || gate_backends[b] == FALCON_BACKEND_CUDA) continue;
        for (int f = 0; f < 3; f++) {
            judge(lc, &d, &ct, st, &ref, gate_backends[b], (falcon_form)f, desc);
            ran++;
        }
    }
    cr_assert(ran > 0, "no backend ran");
    gate_grad_result_free(&ref);
    falcon_state_free(st);
    gate_cotangents_free(&ct);
    gate_data_free(&d);
}

static lim_case make(falcon_variant v, falcon_align a, gate_decay decay, double eps, double key_mag,
                     double gain_mag, uint64_t seed)
{
    lim_case lc = {
        .g = {.c = {.variant = v, .align = a, .phi = FALCON_PHI_IDENTITY, .decay = decay, .B = 1, .T = 24,
                    .H = 1, .n = 5, .m = 4, .window = falcon_variant_has_window(v) ? 3 : 1, .chunk = 8,
                    .eps = eps, .key_scale = 1.0, .seed = seed}},
        .key_mag = key_mag,
        .gain_mag = gain_mag,
    };
    return lc;
}

/* Keys far from 1: x.x outside [2^-62, 2^62] (fp32), [2^-510, 2^510]
 * (fp64); tiny keys with an eps tinier still, so that eps does not hide
 * them. */
static void keys_far_from_one(falcon_variant v, falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    const double mags[][2] = {{f32 ? 1e15 : 1e140, 1e-6}, {f32 ? 1e-19 : 1e-140, f32 ? 1e-38 : 1e-300}};
    for (int i = 0; i < 2; i++)
        for (int a = 0; a < 2; a++) {
            const lim_case lc = make(v, (falcon_align)a, GATE_DECAY_RANDOM, mags[i][1], mags[i][0], 1.0,
                                     9900u + 10u * (uint64_t)v + 2u * (uint64_t)i + (uint64_t)a);
            run_case(&lc, prec);
        }
}

/* Falcon-2/2A's gains far from 1, keys of ordinary size. */
static void gains_far_from_one(falcon_variant v, falcon_precision prec)
{
    const int f32 = prec == FALCON_FP32;
    const double mags[][2] = {{f32 ? 1e37 : 1e305, 1e-6}, {f32 ? 1e-40 : 1e-310, f32 ? 1e-30 : 1e-300}};
    for (int i = 0; i < 2; i++) {
        const lim_case lc = make(v, FALCON_ALIGN_PREFIX, GATE_DECAY_RANDOM, mags[i][1], 1.0, mags[i][0],
                                 9950u + 10u * (uint64_t)v + (uint64_t)i);
        run_case(&lc, prec);
    }
}

/* The carried-memory family's adjoint (gate_carried_case: beta = 1, eps =
 * 1e-20, keys of width 4), the cotangent dS_T alone: the reverse sweep
 * carries G_T through steps that project it off their keys, so that a
 * block's dS_0 is a difference of terms of the size of G_L, the transpose
 * of the forward's cancellation; from a memory 1e6 times what the steps
 * write, so that the first sweep's memories cancel too. Blocks of 16 steps
 * and the parallel form's one block of all 30. */
static void carried_memory(falcon_variant v, falcon_precision prec)
{
    lim_case lc = {.g = {.c = gate_carried_case(v, GATE_DECAY_NONE, 30, 4, 3, 16, 9980u + (uint64_t)v)},
                   .key_mag = 1.0, .gain_mag = 1.0, .carried = 1e6, .no_reads = 1};
    run_case(&lc, prec);
}

#define LIMIT_TESTS(V)                                                                  \
    Test(grad_limits, keys_##V, .timeout = 300)                                         \
    {                                                                                   \
        keys_far_from_one(FALCON_##V, FALCON_FP32);                                     \
        keys_far_from_one(FALCON_##V, FALCON_FP64);                                     \
    }                                                                                   \
    Test(grad_limits, carried_##V, .timeout = 300)                                      \
    {                                                                                   \
        carried_memory(FALCON_##V, FALCON_FP32);                                        \
        carried_memory(FALCON_##V, FALCON_FP64);                                        \
    }

LIMIT_TESTS(1)
LIMIT_TESTS(2)
LIMIT_TESTS(3)
LIMIT_TESTS(1A)
LIMIT_TESTS(2A)
LIMIT_TESTS(3A)

Test(grad_limits, gains_2, .timeout = 300)
{
    gains_far_from_one(FALCON_2, FALCON_FP32);
    gains_far_from_one(FALCON_2, FALCON_FP64);
}
Test(grad_limits, gains_2A, .timeout = 300)
{
    gains_far_from_one(FALCON_2A, FALCON_FP32);
    gains_far_from_one(FALCON_2A, FALCON_FP64);
}
