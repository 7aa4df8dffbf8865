/*
 * The benchmark's flop model (kernels/framework/flops.h) and the count of
 * a call (bench/flops.c): small cases counted by hand from the products
 * the forms run, and the block lengths a run actually uses; the backward
 * pass's count against the micro-kernel calls its drivers make.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include "falcon.h"
#include "../bench/flops.h"
#include "../kernels/framework/flops.h"
#include "../src/backends.h"
#include "../src/internal.h"

static falcon_config config(falcon_variant v, falcon_form f, int64_t W, int64_t C)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = v, cfg.form = f, cfg.window = W, cfg.chunk = C;
    return cfg;
}

/* Recurrent, W = 1: [x; q] S^T (2 x 2mn) and the write (2mn): 6mn a step. */
Test(flops, recurrent_by_hand)
{
    cr_expect_eq(falcon_flops(FALCON_FORM_RECURRENT, 1, 10, 2, 3, 1, 0), 360.0);
    /* W = 4, n = m = 2 (2mn = 8): k = 1..4 examples over the first 4
     * steps, 8 (2k + 1) each (24 x 8), then 6 steps of 8 x 9. */
    cr_expect_eq(falcon_flops(FALCON_FORM_RECURRENT, 1, 10, 2, 2, 4, 0), 192.0 + 432.0);
}

/* Chunk, W = 1: a block of l steps is 4 l^2 n + 6 l m n + 3 l^2 m
 * (regression), 2 l^2 n + 4 l m n + 2 l^2 m (inner product). T = 10,
 * C = 4, n = 2, m = 3: blocks of 4, 4 and 2 steps. */
Test(flops, chunk_by_hand)
{
    cr_expect_eq(falcon_flops(FALCON_FORM_CHUNK, 1, 10, 2, 3, 1, 4), 2 * 416.0 + 140.0);
    cr_expect_eq(falcon_flops(FALCON_FORM_CHUNK, 0, 10, 2, 3, 1, 4), 2 * 256.0 + 88.0);
}

/* A call is counted with the blocks it runs: the chunk capped at 4096 / W
 * (falcon_chunk_block), the masked-parallel form in blocks of 4096 / W. */
Test(flops, call_uses_the_run_blocks)
{
    const int64_t T = 3000, n = 8, m = 4;
    falcon_config c3 = config(FALCON_3, FALCON_FORM_CHUNK, 4, 4096);
    cr_expect_eq(fb_flops(&c3, T, 1, n, m), falcon_flops(FALCON_FORM_CHUNK, 1, T, n, m, 4, 1024));
    falcon_config c1 = config(FALCON_1, FALCON_FORM_CHUNK, 1, 256);
    cr_expect_eq(fb_flops(&c1, T, 3, n, m), 3 * falcon_flops(FALCON_FORM_CHUNK, 1, T, n, m, 1, 256));
    falcon_config ca = config(FALCON_1A, FALCON_FORM_CHUNK, 1, FALCON_CHUNK_AUTO);
    cr_expect_eq(fb_flops(&ca, T, 1, n, m),
                 falcon_flops(FALCON_FORM_CHUNK, 0, T, n, m, 1, falcon_chunk_auto(n, m, 1)));
    falcon_config p1 = config(FALCON_1, FALCON_FORM_PARALLEL, 1, 64);
    cr_expect_eq(fb_flops(&p1, 5000, 1, n, m), falcon_flops(FALCON_FORM_CHUNK, 1, 5000, n, m, 1, 4096));
}

/* ---- the backward pass's count (falcon_backward_flops) against its kernels ----
 * The scalar fp64 micro-kernels behind a table that adds up what each call
 * does (2 flops per multiply-add; the unit lower solve P (P - 1) m); the
 * backward drivers run on it through falcon_backward_cpu_f64 and the sum
 * is compared with the model. Same alignment, so that every step has its
 * example; a blocked case with W > 1 starts from a full history, so that
 * every block reaches W - 1 examples back as the model counts. */
static double counted;
static const falcon_uk_f64 *inner;

static void count_nt(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B, int64_t ldb,
                     double beta, double *C, int64_t ldc)
{
    counted += 2.0 * (double)M * (double)N * (double)K;
    inner->gemm_nt(M, N, K, A, lda, B, ldb, beta, C, ldc);
}

static void count_nn(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda, const double *B, int64_t ldb,
                     double beta, double *C, int64_t ldc)
{
    counted += 2.0 * (double)M * (double)N * (double)K;
    inner->gemm_nn(M, N, K, A, lda, B, ldb, beta, C, ldc);
}

static void count_rank(int64_t m, int64_t n, int64_t k, double a, double *S, int64_t lds, const double *E,
                       int64_t lde, const double *Z, int64_t ldz)
{
    counted += 2.0 * (double)m * (double)n * (double)k;
    inner->rank_update(m, n, k, a, S, lds, E, lde, Z, ldz);
}

static void count_trsm(int64_t P, int64_t m, const double *L, int64_t ldl, double *X, int64_t ldx)
{
    counted += (double)P * (double)(P - 1) * (double)m;
    inner->trsm_unit_lower(P, m, L, ldl, X, ldx);
}

/* The counted flops of one backward call, one head. */
static double backward_counted(falcon_variant v, falcon_form f, int64_t T, int64_t n, int64_t m, int64_t W,
                               int64_t C, int decay)
{
    const falcon_cpu_f64 *scalar = falcon_backend_cpu_f64(falcon_backend_info_of(FALCON_BACKEND_SCALAR));
    inner = scalar->uk;
    falcon_uk_f64 table = *inner;
    table.gemm_nt = count_nt, table.gemm_nn = count_nn, table.rank_update = count_rank;
    table.trsm_unit_lower = count_trsm, table.update_read = NULL, table.dot2_copy = NULL;
    const falcon_cpu_f64 cpu = {.uk = &table, .fw = scalar->fw, .direct_decay = NULL};
    falcon_config cfg = config(v, f, W, C);
    cfg.align = FALCON_ALIGN_SAME, cfg.precision = FALCON_FP64, cfg.threads = 1;
    double *x[8];
    const int64_t len[8] = {T * n, T * n, T * m, T, T, T * n, T * n, T * m};
    for (int t = 0; t < 8; t++) {
        x[t] = calloc((size_t)len[t], sizeof(double));
        for (int64_t i = 0; i < len[t]; i++) x[t][i] = t == 3 ? 0.7 : t == 4 ? 0.98 : 0.25 + 0.5 * (double)((i * 7 + t) % 5) / 5;
    }
    const falcon_inputs in = {.B = 1, .T = T, .H = 1, .n = n, .m = m, .q = x[0], .k = x[1], .v = x[2], .beta = x[3],
                              .alpha = decay ? x[4] : NULL};
    falcon_state *st = NULL;
    cr_assert_eq(falcon_state_create(1, n, m, W, &st), FALCON_OK);
    if (f != FALCON_FORM_RECURRENT && W > 1) { /* a full history: W - 1 carried examples */
        st->hist_len[0] = W - 1;
        for (int64_t i = 0; i < (W - 1) * n; i++) st->hist_k[i] = 0.5;
        for (int64_t i = 0; i < (W - 1) * m; i++) st->hist_v[i] = 0.25;
    }
    double *dS = calloc((size_t)(m * n), sizeof(double)), *dS0 = calloc((size_t)(m * n), sizeof(double));
    const falcon_grads g = {.dq = x[5], .dk = x[6], .dv = x[7], .dbeta = calloc((size_t)T, sizeof(double)),
                            .dalpha = decay ? calloc((size_t)T, sizeof(double)) : NULL, .dS0 = dS0};
    counted = 0;
    const falcon_status s = falcon_backward_cpu_f64(&cfg, &in, st, x[2] /* dO: any m-rows */, dS, &g, &cpu);
    cr_assert_eq(s, FALCON_OK, "%s", falcon_status_name(s));
    free(g.dbeta), free(g.dalpha), free(dS), free(dS0);
    for (int t = 0; t < 8; t++) free(x[t]);
    falcon_state_free(st);
    return counted;
}

Test(flops, backward_counts_its_kernels)
{
    static const struct {
        falcon_variant v;
        falcon_form f;
        int64_t T, n, m, C;
        int decay;
    } cases[] = {
        {FALCON_1, FALCON_FORM_RECURRENT, 50, 6, 5, 0, 1},  {FALCON_1A, FALCON_FORM_RECURRENT, 17, 4, 3, 0, 0},
        {FALCON_3, FALCON_FORM_RECURRENT, 30, 5, 4, 0, 1},  {FALCON_3A, FALCON_FORM_RECURRENT, 9, 3, 6, 0, 1},
        {FALCON_1, FALCON_FORM_CHUNK, 70, 6, 5, 8, 1},      {FALCON_1A, FALCON_FORM_CHUNK, 70, 4, 3, 16, 0},
        {FALCON_3, FALCON_FORM_CHUNK, 45, 5, 4, 8, 1},      {FALCON_3A, FALCON_FORM_CHUNK, 23, 3, 6, 4, 1},
        {FALCON_1, FALCON_FORM_CHUNK, 300, 3, 2, 4, 1}, /* 75 blocks: checkpointed segments */
        {FALCON_1, FALCON_FORM_CHUNK, 150, 3, 2, 64, 1}, {FALCON_3, FALCON_FORM_CHUNK, 150, 3, 2, 64, 0}, /* panels */
        {FALCON_1, FALCON_FORM_PARALLEL, 40, 4, 4, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t W = falcon_variant_has_window(cases[i].v) ? 4 : 1;
        const int64_t L = cases[i].f == FALCON_FORM_CHUNK ? falcon_chunk_block(cases[i].C, W)
                                                          : falcon_parallel_backward_block(cases[i].n, cases[i].m, W);
        const double got = backward_counted(cases[i].v, cases[i].f, cases[i].T, cases[i].n, cases[i].m, W,
                                            cases[i].C ? cases[i].C : 64, cases[i].decay);
        const double want = falcon_backward_flops(cases[i].f, falcon_variant_is_regression(cases[i].v),
                                                  cases[i].decay, cases[i].T, cases[i].n, cases[i].m, W, L);
        cr_expect_eq(got, want, "case %zu (%s %s T %lld): kernels %.0f, model %.0f", i,
                     falcon_variant_name(cases[i].v), falcon_form_name(cases[i].f), (long long)cases[i].T, got, want);
    }
}
