/*
 * The benchmark's flop model (kernels/framework/flops.h) and the count of
 * a call (bench/flops.c): small cases counted by hand from the products
 * the forms run, and the block lengths a run actually uses.
 */
#include <criterion/criterion.h>
#include "falcon.h"
#include "../bench/flops.h"
#include "../kernels/framework/flops.h"

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
