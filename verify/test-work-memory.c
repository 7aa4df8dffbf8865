/*
 * The library's kept work memory (src/work-memory.c): the slots hand a kept
 * block only to a request it holds and at most halves, to one user at a
 * time, keep the largest blocks within the cap, and give everything back on
 * release; and a run on reused blocks (the drivers' and the state's copy),
 * poisoned with NaN bytes first, gives bitwise the outputs and state of a
 * run on fresh ones, in every CPU backend, form, variant and precision (the
 * drivers write every element of their work memory before reading it).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"
#include "../src/internal.h"
#include "../kernels/framework/head.h"
#include "falcon_advanced.h"

#define MIB ((size_t)1 << 20)

Test(work_memory, kept_blocks_are_reused)
{
    falcon_work_memory_release();
    falcon_work_keep_min = MIB;
    cr_assert_eq(falcon_work_memory_kept(), 0);
    size_t have = 0, have2 = 0;
    void *p = falcon_work_get(3 * MIB, &have);
    cr_assert(p && have == 3 * MIB);
    falcon_work_put(p, have);
    cr_assert_eq(falcon_work_memory_kept(), 3 * MIB);
    /* a request larger than every kept block is a fresh block */
    void *big = falcon_work_get(5 * MIB, &have2);
    cr_assert(big && big != p && have2 == 5 * MIB, "a 5 MiB request got %zu bytes", have2);
    falcon_work_put(big, have2);
    cr_assert_eq(falcon_work_memory_kept(), 8 * MIB);
    /* nor does a request take a block over twice its size */
    void *small = falcon_work_get(5 * MIB / 4, &have);
    cr_assert(small && small != big && small != p && have == 5 * MIB / 4);
    falcon_work_put(small, have); /* kept too */
    cr_assert_eq(falcon_work_memory_kept(), 8 * MIB + 5 * MIB / 4);
    /* the smallest kept block that holds the request, to one user at a time */
    void *a = falcon_work_get(3 * MIB, &have);
    void *b = falcon_work_get(3 * MIB, &have2);
    cr_assert(a == p && have == 3 * MIB);
    cr_assert(b == big && have2 == 5 * MIB);
    void *c = falcon_work_get(3 * MIB, &have);
    cr_assert(c && c != a && c != b && c != small && have == 3 * MIB);
    memset(a, 1, 3 * MIB), memset(b, 2, 5 * MIB), memset(c, 3, 3 * MIB); /* each whole and apart */
    falcon_work_put(a, 3 * MIB), falcon_work_put(b, 5 * MIB), falcon_work_put(c, 3 * MIB);
    cr_assert_eq(falcon_work_memory_kept(), 11 * MIB + 5 * MIB / 4);
    /* small blocks are malloc's */
    void *s = falcon_work_get(1000, &have);
    cr_assert(s && have == 1000);
    falcon_work_put(s, have);
    cr_assert_eq(falcon_work_memory_kept(), 11 * MIB + 5 * MIB / 4);
    /* the slots keep the largest blocks */
    falcon_work_memory_release();
    falcon_work_keep_min = 4096;
    enum { N = FALCON_WORK_SLOTS + 3 };
    void *blk[N];
    size_t total = 0;
    for (int i = 0; i < N; i++) cr_assert((blk[i] = falcon_work_get((size_t)(N - i) * 4096, &have)));
    for (int i = 0; i < N; i++) falcon_work_put(blk[i], (size_t)(N - i) * 4096);
    for (int i = 4; i <= N; i++) total += (size_t)i * 4096; /* all but 1, 2 and 3 pages */
    cr_assert_eq(falcon_work_memory_kept(), total);
    /* and no more than the cap in all: a block that would pass it is freed */
    falcon_work_memory_release();
    falcon_work_keep_min = MIB;
    falcon_work_keep_max = 10 * MIB;
    const size_t sz[3] = {3 * MIB, 5 * MIB, 4 * MIB};
    for (int i = 0; i < 3; i++) cr_assert((blk[i] = falcon_work_get(sz[i], &have)) && have == sz[i]);
    for (int i = 0; i < 3; i++) falcon_work_put(blk[i], sz[i]); /* 3, then 5: 8 MiB; 4 more would be 12 */
    cr_assert_eq(falcon_work_memory_kept(), 8 * MIB);
    falcon_work_memory_release();
    cr_assert_eq(falcon_work_memory_kept(), 0);
}

/* Every kept block filled with 0xFF bytes (NaN in both precisions). */
static void poison_kept(void)
{
    void *p[8];
    size_t have[8];
    int got = 0;
    while (got < 8 && falcon_work_memory_kept() > 0) {
        p[got] = falcon_work_get(1, &have[got]);
        cr_assert(p[got]);
        memset(p[got], 0xFF, have[got]);
        got++;
    }
    while (got > 0) got--, falcon_work_put(p[got], have[got]);
}

static void run(const falcon_config *cfg, const gate_data *d, unsigned char *out, size_t bytes, falcon_state **st,
                int c_heads, int64_t n, int64_t m, int64_t W)
{
    memset(out, 0xA5, bytes);
    cr_assert(falcon_state_create(c_heads, n, m, W, st) == FALCON_OK);
    cr_assert(falcon_run(cfg, &d->in, *st, out) == FALCON_OK, "%s", falcon_last_error());
}

static void check_backend(falcon_backend backend)
{
    if (!falcon_backend_available(backend))
        cr_skip_test("backend %s not run: %s", falcon_backend_name(backend), falcon_backend_describe(backend));
    int compared = 0;
    for (int p = 0; p < 2; p++)
        if (gate_backend_runs(backend, (falcon_precision)p))
            for (int v = FALCON_1; v <= FALCON_3A; v++)
                for (int f = 0; f < 3; f++) {
                    const int W = falcon_variant_has_window((falcon_variant)v);
                    const gate_case c = {(falcon_variant)v, (falcon_align)(v % 2), (falcon_phi)((v + f) % 4),
                                         GATE_DECAY_RANDOM, 1, 70, 2, 10, 7, W ? 3 : 1, 16, 1e-6, 1.0,
                                         700u + (uint64_t)(10 * v + f)};
                    gate_data d;
                    cr_assert(gate_data_make(&c, (falcon_precision)p, &d) == 0);
                    falcon_config cfg = gate_config(&c, (falcon_form)f, backend, (falcon_precision)p);
                    cfg.threads = 1;
                    const size_t bytes = (p == 0 ? 4 : 8) * (size_t)(c.B * c.T * c.H * c.m);
                    unsigned char *fresh = malloc(bytes), *reused = malloc(bytes);
                    cr_assert(fresh && reused);
                    falcon_state *s_fresh, *s_reused;
                    /* fresh: nothing kept, nothing keeps */
                    falcon_work_memory_release();
                    falcon_work_keep_min = SIZE_MAX;
                    run(&cfg, &d, fresh, bytes, &s_fresh, c.B * c.H, c.n, c.m, c.window);
                    /* reused: every block kept; a first run leaves them, poisoned */
                    falcon_work_keep_min = 0;
                    run(&cfg, &d, reused, bytes, &s_reused, c.B * c.H, c.n, c.m, c.window);
                    falcon_state_free(s_reused);
                    cr_assert(falcon_work_memory_kept() > 0);
                    poison_kept();
                    run(&cfg, &d, reused, bytes, &s_reused, c.B * c.H, c.n, c.m, c.window);
                    const falcon_state_view x = falcon_state_get_view(s_fresh), y = falcon_state_get_view(s_reused);
                    cr_expect(memcmp(fresh, reused, bytes) == 0 &&
                                  memcmp(x.S, y.S, sizeof(double) * (size_t)(x.heads * x.m * x.n)) == 0,
                              "%s %s %s %s: a run on reused work memory differs from one on fresh",
                              falcon_backend_name(backend), falcon_precision_name((falcon_precision)p),
                              falcon_form_name((falcon_form)f), falcon_variant_name((falcon_variant)v));
                    compared++;
                    falcon_state_free(s_fresh), falcon_state_free(s_reused);
                    free(fresh), free(reused);
                    gate_data_free(&d);
                }
    falcon_work_memory_release();
    printf("work memory %s: %d runs on reused blocks bitwise equal to fresh ones\n", falcon_backend_name(backend),
           compared);
}

Test(work_memory, reused_blocks_give_the_same_bits_scalar) { check_backend(FALCON_BACKEND_SCALAR); }
Test(work_memory, reused_blocks_give_the_same_bits_avx2) { check_backend(FALCON_BACKEND_AVX2); }
Test(work_memory, reused_blocks_give_the_same_bits_avx512) { check_backend(FALCON_BACKEND_AVX512); }
Test(work_memory, reused_blocks_give_the_same_bits_avx512_simde) { check_backend(FALCON_BACKEND_AVX512_SIMDE); }
