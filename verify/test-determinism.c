/*
 * Determinism: for one backend, form and precision, the same inputs give
 * bitwise the same outputs and the same carried state (memory, previous key,
 * window history), run after run and whatever the thread count. Heads of a
 * batch are independent and each runs the same code on any thread, so this
 * must hold exactly. Every CPU backend present (scalar, avx2, avx512,
 * avx512-simde, mpfr), every form, both precisions, every variant, on a batch
 * of B x H = 2 x 3 heads, threads = 0 (OpenMP's choice, run twice), 1, 2, 3
 * and 8 (and the cuda backend, fp32, where a GPU is present), starting from a carried state (a first run on other inputs) so that
 * the previous key and the window history take part.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"

static const int thread_counts[] = {0, 0, 1, 2, 3, 8};
#define NUM_RUNS ((int)(sizeof thread_counts / sizeof thread_counts[0]))

/* Everything a run leaves: the reads (raw bytes) and the whole state. */
typedef struct outcome {
    unsigned char *out;
    size_t out_bytes;
    falcon_state *state;
} outcome;

static void outcome_free(outcome *o)
{
    free(o->out);
    falcon_state_free(o->state);
    memset(o, 0, sizeof *o);
}

static void run_once(const falcon_config *cfg, const gate_data *d, const falcon_state *warm, outcome *o)
{
    const size_t es = d->prec == FALCON_FP32 ? 4 : 8;
    o->out_bytes = es * (size_t)(d->in.B * d->in.T * d->in.H * d->in.m);
    o->out = malloc(o->out_bytes + 1);
    cr_assert(o->out);
    memset(o->out, 0xA5, o->out_bytes + 1);
    cr_assert(falcon_state_copy(warm, &o->state) == FALCON_OK);
    cr_assert(falcon_run(cfg, &d->in, o->state, o->out) == FALCON_OK, "%s", falcon_last_error());
}

/* Bitwise equality of two states; names the first part that differs. */
static const char *state_diff(const falcon_state *a, const falcon_state *b)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const size_t H = (size_t)x.heads, n = (size_t)x.n, m = (size_t)x.m, keep = (size_t)x.keep;
    if (memcmp(x.S, y.S, sizeof(double) * H * m * n)) return "S";
    if (memcmp(x.has_prev, y.has_prev, H)) return "has_prev";
    if (memcmp(x.prev_key, y.prev_key, sizeof(double) * H * n)) return "prev_key";
    if (memcmp(x.hist_len, y.hist_len, sizeof(int64_t) * H)) return "hist_len";
    if (memcmp(x.hist_k, y.hist_k, sizeof(double) * H * keep * n)) return "hist_k";
    if (memcmp(x.hist_v, y.hist_v, sizeof(double) * H * keep * m)) return "hist_v";
    return NULL;
}

static void check_backend(falcon_backend backend)
{
    if (!falcon_backend_available(backend))
        cr_skip_test("backend %s not run: %s", falcon_backend_name(backend), falcon_backend_describe(backend));
    /* The mpfr backend is slow: fewer steps, same coverage. */
    const int64_t T = backend == FALCON_BACKEND_MPFR ? 12 : 45;
    int compared = 0;
    for (int p = 0; p < 2; p++)
        if (backend == FALCON_BACKEND_MPFR || gate_backend_runs(backend, (falcon_precision)p))
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int f = 0; f < 3; f++) {
                const int W = falcon_variant_has_window((falcon_variant)v);
                const gate_case c = {(falcon_variant)v, (falcon_align)(v % 2), (falcon_phi)((v + f) % 4),
                                     GATE_DECAY_RANDOM, 2, T, 3, 6, 5, W ? 3 : 1, 8, 1e-6, 1.0,
                                     900u + (uint64_t)(10 * v + f)};
                gate_case c0 = c;
                c0.seed += 1000;
                gate_data d, d0;
                cr_assert(gate_data_make(&c, (falcon_precision)p, &d) == 0);
                cr_assert(gate_data_make(&c0, (falcon_precision)p, &d0) == 0);
                falcon_config cfg = gate_config(&c, (falcon_form)f, backend, (falcon_precision)p);
                /* A carried state: a first run on other inputs. */
                falcon_state *warm;
                cr_assert(falcon_state_create(c.B * c.H, c.n, c.m, c.window, &warm) == FALCON_OK);
                void *scratch = malloc(8 * (size_t)(c.B * c.T * c.H * c.m));
                cr_assert(falcon_run(&cfg, &d0.in, warm, scratch) == FALCON_OK, "%s", falcon_last_error());
                free(scratch);
                outcome first = {0};
                for (int r = 0; r < NUM_RUNS; r++) {
                    cfg.threads = thread_counts[r];
                    outcome o = {0};
                    run_once(&cfg, &d, warm, &o);
                    if (r == 0) {
                        first = o;
                        continue;
                    }
                    const char *what = memcmp(o.out, first.out, first.out_bytes) ? "out"
                                                                                : state_diff(o.state, first.state);
                    cr_expect(what == NULL, "%s %s %s %s: threads=%d differs from threads=0 in %s",
                              falcon_backend_name(backend), falcon_precision_name((falcon_precision)p),
                              falcon_form_name((falcon_form)f), falcon_variant_name((falcon_variant)v),
                              thread_counts[r], what ? what : "");
                    cr_expect(o.out[o.out_bytes] == 0xA5, "wrote past the output");
                    compared++;
                    outcome_free(&o);
                }
                outcome_free(&first);
                falcon_state_free(warm);
                gate_data_free(&d);
                gate_data_free(&d0);
            }
    printf("determinism %s: %d runs bitwise equal to the first of their configuration\n",
           falcon_backend_name(backend), compared);
}

/* Every backend of the registry but auto (cuda runs where a GPU is: not a
 * CPU backend, threads do not apply, but runs must repeat there too). */
ParameterizedTestParameters(determinism, backend)
{
    static falcon_backend all[FALCON_BACKEND_ROWS - 1];
    for (int b = 1; b < FALCON_BACKEND_ROWS; b++) all[b - 1] = (falcon_backend)b;
    return cr_make_param_array(falcon_backend, all, FALCON_BACKEND_ROWS - 1);
}

/* (The mpfr backend needs the long timeout.) */
ParameterizedTest(falcon_backend *b, determinism, backend, .timeout = 600) { check_backend(*b); }
