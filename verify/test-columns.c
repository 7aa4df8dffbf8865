/*
 * The value columns of the memory are independent (docs/math.md section 7.1):
 * the write adds z_i[c] e_i[r] to column r only, e_i[r] reads P_i[r] only,
 * and eta comes from the keys. A run on m value columns therefore equals,
 * bit for bit in the recurrent form, the runs of its two column halves
 * (the values v[.., r0:r1], the memory's rows r0..r1). The CPU recurrent
 * driver relies on it: a memory too large for L1 runs in column tiles, one
 * time block at a time (kernels/framework/recurrent.inc.c, rec_tile). The
 * shapes here are tiled whole (fp32 n = m = 128, fp32 n = 64, m = 256 and
 * fp64 n = 64, m = 128: 64 KiB memories, two tiles) and untiled in halves,
 * so the two paths are compared on every variant and alignment, with a
 * memory that does not start at zero and calls longer than a time block.
 * The tile budget is fixed at the 32 KiB these shapes were chosen for,
 * whatever L1 the machine has (the default takes two thirds of it: an
 * L1 of 32 KiB would leave n = m = 128 untiled); one more run takes a
 * budget that cuts n = 64, m = 256 into three tiles of 80 columns and
 * one of 16, a tile narrower than the rest.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"
#include "../src/internal.h"

/* Columns [r0, r0 + w) of a [rows][m] tensor into [rows][w]. */
static void *columns(const void *src, size_t es, int64_t rows, int64_t m, int64_t r0, int64_t w)
{
    char *dst = malloc(es * (size_t)(rows * w));
    cr_assert(dst);
    for (int64_t i = 0; i < rows; i++)
        memcpy(dst + es * (size_t)(i * w), (const char *)src + es * (size_t)(i * m + r0), es * (size_t)w);
    return dst;
}

/* The case (with d's inputs) through the gate's runner, from the memory
 * S0 ([heads][m][n]) and otherwise a fresh state. */
static gate_result run_from(const gate_case *c, const gate_data *d, falcon_backend be, const double *S0)
{
    falcon_state *st;
    gate_result r;
    cr_assert(falcon_state_create(c->B * c->H, c->n, c->m, c->window, &st) == FALCON_OK);
    cr_assert(falcon_state_set_memory(st, S0) == FALCON_OK);
    cr_assert(gate_run(c, d, FALCON_FORM_RECURRENT, be, st, &r) == FALCON_OK, "%s", falcon_last_error());
    falcon_state_free(st);
    return r;
}

static void halves_equal_whole(falcon_precision p, int64_t n, int64_t m, int64_t tile_bytes)
{
    falcon_set_tile_bytes(tile_bytes);
    const size_t es = p == FALCON_FP64 ? 8 : 4;
    int compared = 0;
    for (int b = 0; b < gate_backend_count; b++) {
        const falcon_backend be = gate_backends[b];
        if (!falcon_backend_available(be) || be == FALCON_BACKEND_MPFR || be == FALCON_BACKEND_CUDA ||
            !gate_backend_runs(be, p))
            continue;
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int a = 0; a < 2; a++) {
                const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1, B = 1, H = 2, T = 300;
                const gate_case c = {(falcon_variant)v, (falcon_align)a, (falcon_phi)((v + a) % 4), GATE_DECAY_RANDOM,
                                     B, T, H, n, m, W, 8, 1e-6, 1.0, 4200u + (uint64_t)(10 * v + a)};
                gate_data d;
                cr_assert(gate_data_make(&c, p, &d) == 0);
                const int64_t heads = B * H, rows = B * T * H;
                double *S0 = malloc(sizeof(double) * (size_t)(heads * m * n));
                cr_assert(S0);
                for (int64_t i = 0; i < heads * m * n; i++) S0[i] = (double)(float)(0.25 * ((i * 37 % 101) - 50) / 50.0);
                gate_result whole = run_from(&c, &d, be, S0);
                int same = 1;
                for (int half = 0; half < 2 && same; half++) {
                    const int64_t r0 = half * (m / 2), w = half ? m - m / 2 : m / 2;
                    gate_case ch = c;
                    gate_data dh = d;
                    ch.m = dh.in.m = w;
                    void *vh = columns(d.in.v, es, rows, m, r0, w);
                    dh.in.v = vh;
                    double *S0h = malloc(sizeof(double) * (size_t)(heads * w * n));
                    cr_assert(S0h);
                    for (int64_t h = 0; h < heads; h++)
                        memcpy(S0h + h * w * n, S0 + (h * m + r0) * n, sizeof(double) * (size_t)(w * n));
                    gate_result part = run_from(&ch, &dh, be, S0h);
                    /* fp32 results widened to double exactly: equal doubles are equal bits */
                    for (int64_t i = 0; i < rows && same; i++)
                        same = !memcmp(part.out + i * w, whole.out + i * m + r0, sizeof(double) * (size_t)w);
                    cr_expect(same, "%s %s %s %s n=%lld m=%lld: outputs of columns [%lld, %lld) differ",
                              falcon_backend_name(be), falcon_precision_name(p), falcon_variant_name((falcon_variant)v),
                              falcon_align_name((falcon_align)a), (long long)n, (long long)m, (long long)r0,
                              (long long)(r0 + w));
                    for (int64_t h = 0; h < heads && same; h++)
                        same = !memcmp(part.S + h * w * n, whole.S + (h * m + r0) * n, sizeof(double) * (size_t)(w * n));
                    cr_expect(same, "%s %s %s: memory rows [%lld, %lld) differ", falcon_backend_name(be),
                              falcon_precision_name(p), falcon_variant_name((falcon_variant)v), (long long)r0,
                              (long long)(r0 + w));
                    gate_result_free(&part);
                    free(S0h);
                    free(vh);
                }
                compared++;
                gate_result_free(&whole);
                free(S0);
                gate_data_free(&d);
            }
    }
    printf("columns %s n=%lld m=%lld: %d runs compared with their halves\n", falcon_precision_name(p), (long long)n,
           (long long)m, compared);
    cr_assert(compared > 0);
}

Test(columns, fp32_n128_m128, .timeout = 300) { halves_equal_whole(FALCON_FP32, 128, 128, 32 * 1024); }
Test(columns, fp32_n64_m256, .timeout = 300) { halves_equal_whole(FALCON_FP32, 64, 256, 32 * 1024); }
Test(columns, fp64_n64_m128, .timeout = 300) { halves_equal_whole(FALCON_FP64, 64, 128, 32 * 1024); }
/* 21 KiB: two thirds of a 32 KiB L1 (AMD Zen) */
Test(columns, fp32_n64_m256_zen_budget, .timeout = 300) { halves_equal_whole(FALCON_FP32, 64, 256, 21 * 1024 + 512); }
