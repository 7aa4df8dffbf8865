/*
 * The operand formats tf32 and bf16 (docs/math.md section 11): the rounding
 * itself against an independent oracle and at the edges of the range, the
 * rules that refuse what they do not model, and the chunk form's errors,
 * which must be at the format's roundoff: not above the gate's threshold
 * (test-gate.c) and not far below it either (rounding that never happened).
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "gate.h"
#include "../kernels/common/falcon_math.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The oracle: the two neighbours on the format's grid, from the value's
 * binade in double, the nearer one, a tie to the one whose last kept bit
 * is 0; beyond the format's largest number by half an ulp or more: infinity.
 * (Arithmetic on values, not the bit trick under test.) */
static float oracle(float x, int drop)
{
    if (x == 0 || isinf(x)) return x;
    const double ax = fabs((double)x);
    int e;
    frexp(ax, &e); /* ax in [2^(e-1), 2^e) */
    int q = e - 1 - (23 - drop); /* the grid's spacing is 2^q */
    if (q < -149 + drop) q = -149 + drop; /* subnormal: fp32's fixed spacing, coarsened */
    const double ulp = ldexp(1.0, q), lo = floor(ax / ulp) * ulp, hi = lo + ulp;
    double r = ax - lo < hi - ax ? lo : hi - ax < ax - lo ? hi : fmod(lo / ulp, 2) == 0 ? lo : hi;
    const double max = (double)falcon_operand_format_max(drop);
    if (r > max) r = INFINITY;
    return (float)(x < 0 ? -r : r);
}

Test(operands, rounding_matches_the_oracle_on_random_bits)
{
    const int drops[] = {FALCON_TF32_DROP, FALCON_BF16_DROP};
    uint64_t s = 88172645463325252ull;
    long checked = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 400000; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint32_t u = (uint32_t)s;
            /* a quarter of them on exact ties and their neighbours */
            if (i % 4 == 1) u = (u & ~((1u << drops[d]) - 1)) | (1u << (drops[d] - 1));
            if (i % 4 == 2) u = (u & ~((1u << drops[d]) - 1)) | ((1u << (drops[d] - 1)) + (i & 1 ? 1 : -1));
            const float x = from_bits(u);
            if (isnan(x)) continue;
            const float got = falcon_round_operand(x, drops[d]), want = oracle(x, drops[d]);
            cr_assert(to_bits(got) == to_bits(want), "drop %d: x = %a (0x%08x): got %a, oracle %a", drops[d], (double)x,
                      u, (double)got, (double)want);
            checked++;
        }
    cr_assert(checked > 700000);
}

Test(operands, rounding_at_the_edges)
{
    /* tf32: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: to 1 (even);
     * 1 + 3 2^-11 ties to 1 + 2^-9; anything above half rounds up. */
    cr_assert_eq(falcon_round_operand(1.0f + 0x1p-11f, FALCON_TF32_DROP), 1.0f);
    cr_assert_eq(falcon_round_operand(1.0f + 3 * 0x1p-11f, FALCON_TF32_DROP), 1.0f + 0x1p-9f);
    cr_assert_eq(falcon_round_operand(1.0f + 0x1p-11f + 0x1p-23f, FALCON_TF32_DROP), 1.0f + 0x1p-10f);
    cr_assert_eq(falcon_round_operand(-(1.0f + 0x1p-11f + 0x1p-23f), FALCON_TF32_DROP), -(1.0f + 0x1p-10f));
    /* bf16: 1 + 2^-8 ties to 1; the largest number stays, FLT_MAX overflows */
    cr_assert_eq(falcon_round_operand(1.0f + 0x1p-8f, FALCON_BF16_DROP), 1.0f);
    const float bmax = falcon_operand_format_max(FALCON_BF16_DROP), tmax = falcon_operand_format_max(FALCON_TF32_DROP);
    cr_assert_eq(to_bits(bmax), 0x7F7F0000u);
    cr_assert_eq(to_bits(tmax), 0x7F7FE000u);
    cr_assert_eq(falcon_round_operand(bmax, FALCON_BF16_DROP), bmax);
    cr_assert(isinf(falcon_round_operand(FLT_MAX, FALCON_BF16_DROP)));
    cr_assert(isinf(falcon_round_operand(-FLT_MAX, FALCON_TF32_DROP)) && falcon_round_operand(-FLT_MAX, FALCON_TF32_DROP) < 0);
    /* a carry into the exponent: the next binade */
    cr_assert_eq(falcon_round_operand(2.0f - 0x1p-23f, FALCON_BF16_DROP), 2.0f);
    /* subnormal numbers on the coarser grid; zero keeps its sign */
    cr_assert_eq(to_bits(falcon_round_operand(from_bits(0x00008000u), FALCON_BF16_DROP)), 0u);
    cr_assert_eq(to_bits(falcon_round_operand(from_bits(0x00018000u), FALCON_BF16_DROP)), 0x00020000u);
    cr_assert_eq(to_bits(falcon_round_operand(from_bits(0x80000001u), FALCON_TF32_DROP)), 0x80000000u);
    cr_assert_eq(to_bits(falcon_round_operand(FLT_MIN, FALCON_BF16_DROP)), to_bits(FLT_MIN));
    cr_assert(isinf(falcon_round_operand(INFINITY, FALCON_BF16_DROP)));
    /* the product of two operands is exact in fp32 */
    const float a = falcon_round_operand(1.2345678f, FALCON_TF32_DROP), b = falcon_round_operand(-7.654321f, FALCON_TF32_DROP);
    cr_assert_eq((double)(a * b), (double)a * (double)b);
}

/* One small case through a configuration: its status. */
static falcon_status run_small(falcon_precision prec, falcon_form form, falcon_backend be, float big)
{
    enum { T = 5, n = 3, m = 2 };
    float q[T * n], k[T * n], v[T * m], beta[T], out[T * m];
    for (int i = 0; i < T * n; i++) q[i] = k[i] = 0.25f * (float)(i % 5) - 0.5f;
    for (int i = 0; i < T * m; i++) v[i] = 0.5f - 0.125f * (float)(i % 7);
    for (int i = 0; i < T; i++) beta[i] = 1;
    q[7] = big;
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = prec, cfg.form = form, cfg.backend = be, cfg.chunk = 2;
    falcon_inputs in = falcon_inputs_sequence(T, n, m, q, k, v, beta, NULL, NULL);
    return falcon_run(&cfg, &in, NULL, out);
}

Test(operands, what_is_not_modelled_is_refused)
{
    cr_assert_eq(run_small(FALCON_TF32, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, 0.5f), FALCON_OK, "%s",
                 falcon_last_error());
    cr_assert_eq(run_small(FALCON_BF16, FALCON_FORM_RECURRENT, FALCON_BACKEND_SCALAR, 0.5f), FALCON_E_ARGUMENT);
    cr_assert(strstr(falcon_last_error(), "only the chunk form"), "%s", falcon_last_error());
    cr_assert_eq(run_small(FALCON_TF32, FALCON_FORM_PARALLEL, FALCON_BACKEND_SCALAR, 0.5f), FALCON_E_ARGUMENT);
    cr_assert_eq(run_small(FALCON_TF32, FALCON_FORM_CHUNK, FALCON_BACKEND_MPFR, 0.5f), FALCON_E_ARGUMENT);
    cr_assert(strstr(falcon_last_error(), "computes exactly"), "%s", falcon_last_error());
    cr_assert_eq(run_small(FALCON_BF16, FALCON_FORM_CHUNK, FALCON_BACKEND_CUDA, 0.5f), FALCON_E_ARGUMENT);
    cr_assert_eq(run_small((falcon_precision)4, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, 0.5f), FALCON_E_ARGUMENT);
}

Test(operands, inputs_beyond_the_format_are_refused)
{
    const float bmax = falcon_operand_format_max(FALCON_BF16_DROP);
    /* the format's largest number is an input like any other (its products
     * overflow fp32, which the run reports) */
    const falcon_status s = run_small(FALCON_BF16, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, bmax);
    cr_assert(s == FALCON_OK || s == FALCON_E_OVERFLOW, "%s", falcon_last_error());
    cr_assert_eq(run_small(FALCON_BF16, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, nextafterf(bmax, INFINITY)),
                 FALCON_E_RANGE);
    cr_assert(strstr(falcon_last_error(), "q[t=2,i=1]") && strstr(falcon_last_error(), "largest bf16"), "%s",
              falcon_last_error());
    cr_assert_eq(run_small(FALCON_TF32, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, -FLT_MAX), FALCON_E_RANGE);
    cr_assert_eq(run_small(FALCON_FP32, FALCON_FORM_CHUNK, FALCON_BACKEND_SCALAR, -FLT_MAX) != FALCON_E_RANGE, 1,
                 "fp32 has no operand format to refuse FLT_MAX: %s", falcon_last_error());
}

/*
 * The memory is not an operand: its reads use a rounded copy, and it keeps
 * fp32. An inner-product run whose writes are all zero (beta = 0) and
 * without decay leaves a memory of full fp32 values bit for bit, in every
 * CPU backend, where rounding it in place would leave it on the format's
 * grid (at the gate's lengths that error hides among the others).
 */
Test(operands, the_memory_keeps_fp32)
{
    enum { T = 40, n = 5, m = 3 };
    float q[T * n], k[T * n], v[T * m], beta[T], out[T * m];
    double S0[m * n];
    for (int i = 0; i < T * n; i++) q[i] = k[i] = 0.25f * (float)(i % 7) - 0.75f;
    for (int i = 0; i < T * m; i++) v[i] = 0.5f - 0.125f * (float)(i % 5);
    for (int i = 0; i < T; i++) beta[i] = 0;
    for (int i = 0; i < m * n; i++) S0[i] = (double)(1.0f + (float)(i + 1) * 0x1.2345p-20f); /* low bits set */
    const falcon_precision formats[] = {FALCON_TF32, FALCON_BF16};
    for (int b = 0; b < gate_backend_count; b++)
        for (int p = 0; p < 2; p++) {
            if (!gate_backend_runs(gate_backends[b], formats[p])) continue;
            falcon_state *st;
            cr_assert_eq(falcon_state_create(1, n, m, 1, &st), FALCON_OK);
            cr_assert_eq(falcon_state_set_memory(st, S0), FALCON_OK);
            falcon_config cfg;
            falcon_config_default(&cfg);
            cfg.variant = FALCON_1A, cfg.form = FALCON_FORM_CHUNK, cfg.chunk = 8;
            cfg.precision = formats[p], cfg.backend = gate_backends[b];
            falcon_inputs in = falcon_inputs_sequence(T, n, m, q, k, v, beta, NULL, NULL);
            cr_assert_eq(falcon_run(&cfg, &in, st, out), FALCON_OK, "%s", falcon_last_error());
            const double *S = falcon_state_get_view(st).S;
            for (int i = 0; i < m * n; i++)
                cr_expect(S[i] == S0[i], "%s %s: S[%d] = %a, was %a: the memory was rounded",
                          falcon_backend_name(gate_backends[b]), falcon_precision_name(formats[p]), i, S[i], S0[i]);
            falcon_state_free(st);
        }
}

/*
 * The rounding happened, in every CPU backend: over each variant's cases of
 * the full table, the largest error is at least a quarter of the format's
 * roundoff (measured: 0.8 to 3.7 u_op). Without the rounding the chunk form
 * computes fp32 and its errors are 2^-13 (tf32) or 2^-16 (bf16) of that.
 * The upper bound is the gate's (test-gate.c).
 */
static void rounding_happened(falcon_precision prec)
{
    gate_case *cases;
    const int ncase = gate_cases(1, &cases);
    cr_assert(ncase > 0);
    for (int b = 0; b < gate_backend_count; b++) {
        if (!gate_backend_runs(gate_backends[b], prec)) continue;
        double most[6] = {0};
        for (int i = 0; i < ncase; i++) {
            gate_data d;
            gate_result ref, r;
            cr_assert(gate_data_make(&cases[i], prec, &d) == 0);
            cr_assert(gate_reference(&cases[i], &d, &ref) == FALCON_OK);
            cr_assert(gate_run(&cases[i], &d, FALCON_FORM_CHUNK, gate_backends[b], NULL, &r) == FALCON_OK, "%s",
                      falcon_last_error());
            const gate_errors e = gate_compare(&r, &ref, prec);
            const double worst = e.out_u > e.state_u ? e.out_u : e.state_u;
            if (worst > most[cases[i].variant]) most[cases[i].variant] = worst;
            gate_result_free(&r), gate_result_free(&ref), gate_data_free(&d);
        }
        for (int v = 0; v < 6; v++)
            cr_expect(most[v] >= 0.25, "%s %s %s: largest error %.3g u_op: the operands were not rounded",
                      falcon_backend_name(gate_backends[b]), falcon_precision_name(prec),
                      falcon_variant_name((falcon_variant)v), most[v]);
    }
    free(cases);
}

Test(operands, tf32_rounding_happened) { rounding_happened(FALCON_TF32); }
Test(operands, bf16_rounding_happened) { rounding_happened(FALCON_BF16); }
