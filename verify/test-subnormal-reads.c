/*
 * Reads of subnormal size in the fp32 recurrent form (kernels/framework/
 * recurrent.inc.c): queries of about 1e-39 (relu keeps the positive ones
 * as they are), a decay in (0.8, 1). The outputs are subnormal numbers, so
 * storing them in fp32 alone costs a relative error of up to 2^-150 per
 * element over their size (the "storage floor", tens of u here). The lazy
 * decay (S = C St) must read as accurately as the direct decay: before the
 * read applied C last, its factor (z.q) C was rounded on the subnormal grid
 * up to 2^8 times deeper than z.q, and the lazy reads came out 1.7 to 9
 * times the direct ones (318 u against 34 u, Falcon-1, n = 16, T = 2000,
 * on every backend here; on a CPU whose backend decays directly, such as
 * Zen 5's AVX-512, that showed as the scalar backend 40 times worse). Every
 * backend, both ways, against the MPFR recurrence.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include "gate.h"
#include "../src/internal.h"

/* The lazy reads' error may be this multiple of the direct ones' at most. */
#define LAZY_FACTOR 1.5

/* The normwise relative error of rounding every output to fp32's subnormal
 * grid at worst, in units of 2^-24 (at least 1). */
static double storage_floor(const gate_result *ref)
{
    double ss = 0;
    for (int64_t i = 0; i < ref->out_count; i++) ss += ref->out[i] * ref->out[i] * 0x1p300;
    const double f = 0x1p-150 * sqrt((double)ref->out_count) / (sqrt(ss) * 0x1p-150) / 0x1p-24;
    return f > 1 ? f : 1;
}

static gate_errors run_one(const gate_case *c, const gate_data *d, const gate_result *ref, falcon_backend b,
                           int direct)
{
    falcon_set_direct_decay(direct);
    gate_result r;
    cr_assert(gate_run(c, d, FALCON_FORM_RECURRENT, b, NULL, &r) == FALCON_OK, "%s", falcon_last_error());
    const gate_errors e = gate_compare(&r, ref, FALCON_FP32);
    gate_result_free(&r);
    return e;
}

static void subnormal_reads_shape(falcon_variant v, int64_t T, int64_t n, int64_t m)
{
    const int64_t W = falcon_variant_has_window(v) ? 3 : 1;
    gate_case c = {v, FALCON_ALIGN_PREFIX, FALCON_PHI_RELU, GATE_DECAY_RANDOM, 1, T, 1, n, m, W, 16, 1e-6, 1.0,
                   900u + (uint64_t)v};
    gate_data d;
    cr_assert(gate_data_make(&c, FALCON_FP32, &d) == 0);
    /* q times 1e-39 (subnormal), alpha in (0.8, 1), both buffers alike */
    float *q = (float *)d.in.q, *alpha = (float *)d.in.alpha;
    double *q64 = (double *)d.in64.q, *alpha64 = (double *)d.in64.alpha;
    for (int64_t i = 0; i < c.T * c.n; i++) q64[i] = (double)(q[i] = (float)(q64[i] * 1e-39));
    for (int64_t t = 0; t < c.T; t++) alpha64[t] = (double)(alpha[t] = (float)(0.8 + 0.4 * (alpha64[t] - 0.5)));
    gate_result ref;
    cr_assert(gate_reference(&c, &d, &ref) == FALCON_OK);
    const double floor = storage_floor(&ref);
    const double thr = gate_threshold_out(&c, FALCON_FORM_RECURRENT, FALCON_FP32, ref.read_cond) * floor;
    for (int b = 0; b < gate_backend_count; b++) {
        if (!gate_backend_runs(gate_backends[b], FALCON_FP32)) continue;
        const gate_errors lazy = run_one(&c, &d, &ref, gate_backends[b], 0);
        const gate_errors direct = run_one(&c, &d, &ref, gate_backends[b], 1);
        const double lim = fmax(LAZY_FACTOR * direct.out_u, 2 * floor);
        printf("subnormal reads %s %s T=%lld n=%lld: out lazy %.1f u (<= %.1f), direct %.1f u (<= %.1f; storage "
               "floor %.1f u), S %.2f u, %.2f u\n",
               falcon_backend_name(gate_backends[b]), falcon_variant_name(v), (long long)T, (long long)n, lazy.out_u,
               lim, direct.out_u, thr, floor, lazy.state_u, direct.state_u);
        cr_expect(direct.out_u <= thr && lazy.out_u <= lim, "%s %s T=%lld n=%lld: lazy %.3g u, direct %.3g u",
                  falcon_backend_name(gate_backends[b]), falcon_variant_name(v), (long long)T, (long long)n,
                  lazy.out_u, direct.out_u);
    }
    gate_result_free(&ref);
    gate_data_free(&d);
}

static void subnormal_reads(falcon_variant v)
{
    const int64_t shapes[][3] = {{64, 8, 6}, {512, 32, 32}, {2000, 16, 16}};
    for (int i = 0; i < 3; i++) subnormal_reads_shape(v, shapes[i][0], shapes[i][1], shapes[i][2]);
}

Test(subnormal_reads, falcon1) { subnormal_reads(FALCON_1); }
Test(subnormal_reads, falcon2) { subnormal_reads(FALCON_2); }
Test(subnormal_reads, falcon3) { subnormal_reads(FALCON_3); }
Test(subnormal_reads, falcon1a) { subnormal_reads(FALCON_1A); }
