/*
 * The fp32 recurrent form's lazy decay (kernels/framework/recurrent.inc.c,
 * docs/math.md section 8) as a state sees it: the memory S is the memory
 * itself, a float times the float of scale, exact in double; scale is in
 * [2^-8, 1] after a decayed fp32 recurrent run and 1 after any other run, a
 * reset or set_memory; a checkpoint keeps it, so a stream continued from a
 * loaded checkpoint is the stream continued in memory, bit for bit; a
 * version 1 checkpoint (no scale.npy) loads with every scale 1.
 * (The accuracy of the lazy steps is the gate's and the decay tests';
 * their split into calls is test-segments.c's, bitwise.) Where a CPU
 * backend decays directly (src/backends.c: Zen 5's full-width AVX-512),
 * these tests take the lazy decay on it all the same
 * (falcon_set_direct_decay), and the last one checks the direct rule.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gate.h"
#include "../src/internal.h"

/* Two heads of Falcon-1, n = 5, m = 4, a mild decay over 60 steps: the
 * product of the decays (about 0.55) stays above the fold bound. */
static gate_case lazy_case(uint64_t seed, gate_decay decay)
{
    gate_case c = {FALCON_1, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, decay, 1, 60, 2, 5, 4, 1, 4, 1e-6, 1.0, seed};
    return c;
}

static falcon_state *run_new(const gate_case *c, falcon_form form, falcon_precision p, const gate_data *d,
                             falcon_state *from, void *out)
{
    falcon_state *st = from;
    if (!st) cr_assert(falcon_state_create(c->B * c->H, c->n, c->m, c->window, &st) == FALCON_OK);
    falcon_config cfg = gate_config(c, form, FALCON_BACKEND_AUTO, p);
    falcon_set_direct_decay(0); /* lazy on every backend (a test is a process of its own) */
    cr_assert_eq(falcon_run(&cfg, &d->in, st, out), FALCON_OK, "%s", falcon_last_error());
    return st;
}

/* A copy of `from` after case c's run in form f and precision p. */
static falcon_state *continued(const falcon_state *from, const gate_case *c, falcon_form f, falcon_precision p)
{
    gate_data d;
    cr_assert(gate_data_make(c, p, &d) == 0);
    void *out = malloc(sizeof(double) * (size_t)(c->B * c->T * c->H * c->m));
    cr_assert(out);
    falcon_state *st;
    cr_assert(falcon_state_copy(from, &st) == FALCON_OK);
    run_new(c, f, p, &d, st, out);
    free(out);
    gate_data_free(&d);
    return st;
}

static int scales_are_one(const falcon_state *st)
{
    const falcon_state_view v = falcon_state_get_view(st);
    for (int64_t h = 0; h < v.heads; h++)
        if (falcon_state_scale(st)[h] != 1) return 0;
    return 1;
}

Test(lazy_decay, the_state_holds_the_memory_and_its_scale)
{
    const gate_case c = lazy_case(61, GATE_DECAY_MILD);
    gate_data d;
    cr_assert(gate_data_make(&c, FALCON_FP32, &d) == 0);
    float *out = malloc(sizeof(float) * (size_t)(c.B * c.T * c.H * c.m));
    cr_assert(out);
    falcon_state *st = run_new(&c, FALCON_FORM_RECURRENT, FALCON_FP32, &d, NULL, out);
    const falcon_state_view v = falcon_state_get_view(st);
    for (int64_t h = 0; h < v.heads; h++) {
        const double s = falcon_state_scale(st)[h], f = (double)(float)s;
        cr_expect(s >= 0x1p-8 && s < 1, "head %lld: scale %.17g, not in [2^-8, 1) after 60 mild decays",
                  (long long)h, s);
        for (int64_t i = 0; i < v.m * v.n; i++) {
            const double x = v.S[h * v.m * v.n + i], q = x / f;
            cr_expect((double)(float)q == q && q * f == x, "head %lld S[%lld] = %.17g is not float * (float)scale",
                      (long long)h, (long long)i, x);
        }
    }
    /* 2000 more steps of the same decays: folded on the way, never below 2^-8 */
    gate_case c2 = c;
    c2.T = 2000;
    falcon_state *longer = continued(st, &c2, FALCON_FORM_RECURRENT, FALCON_FP32);
    for (int64_t h = 0; h < v.heads; h++) {
        const double s = falcon_state_scale(longer)[h];
        cr_expect(s >= 0x1p-8 && s <= 1, "head %lld: scale %.17g after 2060 mild decays", (long long)h, s);
    }
    falcon_state *copy;
    cr_assert(falcon_state_copy(st, &copy) == FALCON_OK);
    cr_expect(!memcmp(falcon_state_scale(copy), falcon_state_scale(st), sizeof(double) * (size_t)v.heads));
    /* the chunk form and fp64 runs keep no factor */
    falcon_state *chunk = continued(st, &c, FALCON_FORM_CHUNK, FALCON_FP32);
    cr_expect(scales_are_one(chunk), "a chunk run left a scale");
    falcon_state *s64 = continued(st, &c, FALCON_FORM_RECURRENT, FALCON_FP64);
    cr_expect(scales_are_one(s64), "an fp64 recurrent run left a scale");
    /* the memory set or reset: no factor */
    falcon_state *s2;
    cr_assert(falcon_state_copy(st, &s2) == FALCON_OK);
    cr_assert(falcon_state_set_memory(s2, v.S) == FALCON_OK);
    cr_expect(scales_are_one(s2), "set_memory kept a scale");
    falcon_state_free(s2);
    cr_assert(falcon_state_copy(st, &s2) == FALCON_OK);
    cr_assert(falcon_state_reset(s2) == FALCON_OK);
    cr_expect(scales_are_one(s2), "reset kept a scale");
    falcon_state_free(s2);
    cr_expect(falcon_state_scale(NULL) == NULL);
    falcon_state_free(s64);
    falcon_state_free(chunk);
    falcon_state_free(longer);
    falcon_state_free(copy);
    falcon_state_free(st);
    free(out);
    gate_data_free(&d);
}

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/falcon-lazy-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert(system(cmd) == 0);
}

Test(lazy_decay, a_checkpoint_continues_the_stream_bit_for_bit, .init = make_dir, .fini = remove_dir)
{
    const gate_case c = lazy_case(62, GATE_DECAY_MILD), c2 = lazy_case(63, GATE_DECAY_MILD);
    gate_data d, d2;
    cr_assert(gate_data_make(&c, FALCON_FP32, &d) == 0);
    cr_assert(gate_data_make(&c2, FALCON_FP32, &d2) == 0);
    const size_t count = (size_t)(c.B * c.T * c.H * c.m);
    float *out = malloc(sizeof(float) * 2 * count);
    cr_assert(out);
    falcon_state *st = run_new(&c, FALCON_FORM_RECURRENT, FALCON_FP32, &d, NULL, out), *back;
    cr_assert(!scales_are_one(st));
    char ck[128];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    cr_assert(falcon_checkpoint_save(st, ck) == FALCON_OK, "%s", falcon_last_error());
    cr_assert(falcon_checkpoint_load(ck, &back) == FALCON_OK, "%s", falcon_last_error());
    const falcon_state_view v = falcon_state_get_view(st), w = falcon_state_get_view(back);
    const size_t heads = (size_t)v.heads, cells = heads * (size_t)(v.m * v.n);
    cr_expect(!memcmp(falcon_state_scale(st), falcon_state_scale(back), sizeof(double) * heads), "the scale did not come back");
    cr_expect(!memcmp(v.S, w.S, sizeof(double) * cells), "the memory did not come back");
    run_new(&c2, FALCON_FORM_RECURRENT, FALCON_FP32, &d2, st, out);
    run_new(&c2, FALCON_FORM_RECURRENT, FALCON_FP32, &d2, back, out + count);
    cr_expect(!memcmp(out, out + count, sizeof(float) * count),
              "the stream continued from the checkpoint differs from the one continued in memory");
    cr_expect(!memcmp(falcon_state_get_view(st).S, falcon_state_get_view(back).S, sizeof(double) * cells));
    falcon_state_free(back);

    /* version 1: no scale.npy; the memory as saved, every scale 1 */
    cr_assert(falcon_checkpoint_save(st, ck) == FALCON_OK, "%s", falcon_last_error());
    char path[160];
    snprintf(path, sizeof path, "%s/scale.npy", ck);
    cr_assert(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/falcon-checkpoint.txt", ck);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "format falcon-checkpoint 1\nheads %lld\nn %lld\nm %lld\nwindow %lld\n", (long long)v.heads,
            (long long)v.n, (long long)v.m, (long long)v.window);
    cr_assert(fclose(f) == 0);
    cr_assert(falcon_checkpoint_load(ck, &back) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(scales_are_one(back), "a version 1 checkpoint loaded with a scale");
    cr_expect(!memcmp(falcon_state_get_view(st).S, falcon_state_get_view(back).S, sizeof(double) * cells));
    falcon_state_free(back);
    /* version 2 without its scale.npy: refused */
    snprintf(path, sizeof path, "%s/falcon-checkpoint.txt", ck);
    f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "format falcon-checkpoint 2\nheads %lld\nn %lld\nm %lld\nwindow %lld\n", (long long)v.heads,
            (long long)v.n, (long long)v.m, (long long)v.window);
    cr_assert(fclose(f) == 0);
    cr_expect(falcon_checkpoint_load(ck, &back) != FALCON_OK, "a version 2 checkpoint without scale.npy loaded");
    cr_expect(strstr(falcon_last_error(), "scale.npy") != NULL, "message: %s", falcon_last_error());
    falcon_state_free(st);
    free(out);
    gate_data_free(&d);
    gate_data_free(&d2);
}

/* A scale outside [2^-8, 1] in a checkpoint is refused, naming the head. */
Test(lazy_decay, a_checkpoint_scale_out_of_range_is_refused, .init = make_dir, .fini = remove_dir)
{
    falcon_state *st, *back;
    cr_assert(falcon_state_create(2, 3, 4, 1, &st) == FALCON_OK);
    char ck[128], path[160];
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(path, sizeof path, "%s/scale.npy", ck);
    const double bad[] = {0, 0x1p-9, 1.5, -0.5, NAN};
    for (int i = 0; i < 5; i++) {
        cr_assert(falcon_checkpoint_save(st, ck) == FALCON_OK, "%s", falcon_last_error());
        const double scale[2] = {1, bad[i]};
        falcon_array a = {FALCON_DTYPE_F64, 1, {2}, 2, (void *)scale};
        cr_assert(unlink(path) == 0);
        cr_assert(falcon_npy_write(path, &a) == FALCON_OK, "%s", falcon_last_error());
        cr_expect_eq(falcon_checkpoint_load(ck, &back), FALCON_E_FORMAT, "scale %g accepted", bad[i]);
        cr_expect(strstr(falcon_last_error(), "(head 1)") != NULL, "message: %s", falcon_last_error());
    }
    falcon_state_free(st);
}

/* A backend whose rule says "direct" (forced here on every backend) keeps
 * no factor: its memory is decayed at each step, the state's scale stays
 * 1, and its outputs agree with the lazy decay's to the rounding of the
 * run (both are within the gate's thresholds of the reference). */
Test(lazy_decay, a_backend_that_decays_directly_keeps_no_factor)
{
    const gate_case c = lazy_case(67, GATE_DECAY_MILD);
    gate_data d;
    cr_assert(gate_data_make(&c, FALCON_FP32, &d) == 0);
    const size_t count = (size_t)(c.B * c.T * c.H * c.m);
    float *lazy = malloc(sizeof(float) * count), *direct = malloc(sizeof(float) * count);
    cr_assert(lazy && direct);
    falcon_state *sl = run_new(&c, FALCON_FORM_RECURRENT, FALCON_FP32, &d, NULL, lazy);
    cr_assert(!scales_are_one(sl), "the lazy run kept no factor");
    falcon_state *sd;
    cr_assert(falcon_state_create(c.B * c.H, c.n, c.m, c.window, &sd) == FALCON_OK);
    falcon_config cfg = gate_config(&c, FALCON_FORM_RECURRENT, FALCON_BACKEND_AUTO, FALCON_FP32);
    falcon_set_direct_decay(1);
    cr_assert_eq(falcon_run(&cfg, &d.in, sd, direct), FALCON_OK, "%s", falcon_last_error());
    falcon_set_direct_decay(-1);
    cr_expect(scales_are_one(sd), "a run with the decay direct left a scale");
    double worst = 0, top = 0;
    for (size_t i = 0; i < count; i++) {
        const double e = fabs((double)lazy[i] - (double)direct[i]), a = fabs((double)lazy[i]);
        if (e > worst) worst = e;
        if (a > top) top = a;
    }
    /* 60 steps of float arithmetic apart: a few hundred u of the largest
     * output at most; a dropped decay (0.55 by the end) would be far off */
    cr_expect(worst <= 1e-4 * top, "lazy and direct outputs differ by %g (largest output %g)", worst, top);
    falcon_state_free(sd);
    falcon_state_free(sl);
    free(direct);
    free(lazy);
    gate_data_free(&d);
}
