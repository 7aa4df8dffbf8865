/*
 * backward.c: falcon_backward's throughput (docs/math.md section 12) in
 * build/falcon-bench, beside the forward cases of cases.c.
 *
 * Names: backward/<the forward case's name>, e.g.
 *   backward/chunk/falcon1/avx2/fp32/T:4096/n:128/m:128/C:64/heads:1/threads:1
 * The inputs are the forward case's (bench/inputs.c, the same seed), one
 * head: a backward call keeps its block starts or checkpoints, and one
 * head of T = 4096 already takes a scalar core about half a second at
 * n = m = 128. The cotangents dO are uniform in [-1, 1) (seeded), dS_T is
 * 0; every gradient is asked for (dq, dk, dv, dbeta, dalpha, dS0).
 *
 * Counters:
 *   tokens_per_second     T x heads / wall time of one falcon_backward call
 *   GFLOPS, peak_fraction the backward flop count (falcon_backward_flops in
 *                         kernels/framework/flops.h: the products as the
 *                         kernels call them, the recomputation included)
 *                         over the call's time, and over the probed
 *                         per-core FMA peak
 *   backward_over_forward the time of a backward call over a falcon_run
 *                         call of the same case, timed in alternation
 *                         after the timed loop (the order swapped every
 *                         round; at least 3 rounds, at most 15, for a
 *                         quarter of a second): the median of the rounds'
 *                         ratios, so that a shared host's slow spell falls
 *                         on both calls of a round
 *   forward_tokens_per_second  T x heads over the median forward call of
 *                         those rounds
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "backward.h"
#include "clock.h"
#include "gbench-shim.h"
#include "inputs.h"
#include "median.h"
#include "side-checks.h"
#include "../kernels/framework/flops.h"

typedef struct bw_case {
    falcon_config cfg;
    int64_t T, H, n, m;
    double flops, peak; /* peak: the probed per-core FMA peak, 0 if none */
    int checked;        /* a repetition has timed the paired rounds */
    fb_side side;       /* checks_once: their counters, kept (bench/side-checks.h) */
    char name[160];
} bw_case;

static struct {
    bw_case *cases;
    size_t count, cap;
    int checks_once; /* the paired rounds in a case's first repetition only */
} gw;

/* One backward call's buffers: the cotangent dO and every gradient. */
typedef struct bw_bufs {
    void *dO, *dq, *dk, *dv, *dbeta, *dalpha;
    double *dS0;
} bw_bufs;

static void bufs_free(bw_bufs *b)
{
    free(b->dO), free(b->dq), free(b->dk), free(b->dv), free(b->dbeta), free(b->dalpha), free(b->dS0);
}

static int bufs_make(bw_bufs *b, const bw_case *c)
{
    const size_t size = c->cfg.precision == FALCON_FP32 ? 4 : 8, TH = (size_t)(c->T * c->H);
    const size_t n = (size_t)c->n, m = (size_t)c->m;
    *b = (bw_bufs){malloc(TH * m * size), malloc(TH * n * size), malloc(TH * n * size), malloc(TH * m * size),
                   malloc(TH * size), malloc(TH * size), malloc((size_t)c->H * m * n * sizeof(double))};
    if (!b->dO || !b->dq || !b->dk || !b->dv || !b->dbeta || !b->dalpha || !b->dS0) {
        bufs_free(b);
        return -1;
    }
    uint64_t s = 0x64646f0000ull ^ (uint64_t)c->T;
    for (size_t i = 0; i < TH * m; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(s >> 11) * 0x1.0p-53 * 2 - 1;
        if (size == 4) ((float *)b->dO)[i] = (float)u;
        else ((double *)b->dO)[i] = u;
    }
    return 0;
}

/* backward_over_forward and forward_tokens_per_second (the header). */
static void paired_counters(fb_state *st, bw_case *c, const falcon_inputs *fi, const bw_bufs *b,
                            const falcon_grads *gr, void *out)
{
    enum { MIN_ROUNDS = 3, MAX_ROUNDS = 15 };
    double ratio[MAX_ROUNDS], fwd[MAX_ROUNDS];
    int rounds = 0;
    const double start = fb_wall_seconds();
    while (rounds < MAX_ROUNDS && (rounds < MIN_ROUNDS || fb_wall_seconds() - start < 0.25)) {
        double t[2]; /* [0]: backward, [1]: forward */
        for (int k = 0; k < 2; k++) {
            const int which = (k + rounds) % 2;
            const double t0 = fb_wall_seconds();
            const falcon_status s = which ? falcon_run(&c->cfg, fi, NULL, out)
                                          : falcon_backward(&c->cfg, fi, NULL, b->dO, NULL, gr);
            if (s != FALCON_OK) return;
            t[which] = fb_wall_seconds() - t0;
        }
        if (!(t[1] > 0)) return;
        ratio[rounds] = t[0] / t[1], fwd[rounds] = t[1];
        rounds++;
    }
    fb_side *keep = gw.checks_once ? &c->side : NULL;
    fb_side_set(st, keep, "backward_over_forward", fb_median(ratio, (size_t)rounds));
    fb_side_set(st, keep, "forward_tokens_per_second", (double)(c->T * c->H) / fb_median(fwd, (size_t)rounds));
}

static void body(fb_state *st, void *user)
{
    bw_case *c = user;
    fb_inputs in;
    bw_bufs b;
    if (fb_inputs_make(&in, c->T, c->H, c->n, c->m, c->cfg.precision, 0)) {
        fb_state_skip_with_error(st, "out of memory for the inputs");
        return;
    }
    if (bufs_make(&b, c)) {
        fb_inputs_free(&in);
        fb_state_skip_with_error(st, "out of memory for the gradients");
        return;
    }
    const falcon_inputs fi = fb_inputs_view(&in, c->cfg.variant);
    const falcon_grads gr = {.dq = b.dq, .dk = b.dk, .dv = b.dv, .dbeta = b.dbeta, .dalpha = b.dalpha, .dS0 = b.dS0};
    int64_t iters = 0;
    int ok = 1;
    const double t0 = fb_wall_seconds();
    while (fb_state_keep_running(st)) {
        const falcon_status s = falcon_backward(&c->cfg, &fi, NULL, b.dO, NULL, &gr);
        if (s != FALCON_OK) {
            char why[200];
            snprintf(why, sizeof why, "falcon_backward: %s: %s", falcon_status_name(s), falcon_last_error());
            fb_state_skip_with_error(st, why);
            ok = 0;
            break;
        }
        iters++;
    }
    const double elapsed = fb_wall_seconds() - t0;
    if (ok) {
        const unsigned rate = FB_RATE | FB_ITER_INVARIANT;
        fb_state_set_counter(st, "tokens_per_second", (double)(c->T * c->H), rate);
        fb_state_set_counter(st, "GFLOPS", c->flops * 1e-9, rate);
        if (c->peak > 0 && iters > 0 && elapsed > 0)
            fb_state_set_counter(st, "peak_fraction", c->flops * 1e-9 * (double)iters / elapsed / c->peak, FB_DEFAULT);
        if (gw.checks_once && c->checked) fb_side_replay(st, &c->side);
        else paired_counters(st, c, &fi, &b, &gr, in.out);
        c->checked = 1;
    }
    bufs_free(&b);
    fb_inputs_free(&in);
}

/* Registers backward/<name> for Falcon-1 fp32 in form f on backend be. */
static int add(falcon_backend be, falcon_form f, int64_t T, int64_t n, int64_t C, double peak)
{
    if (gw.count == gw.cap) return -1; /* registered by address: the array never moves */
    bw_case *c = &gw.cases[gw.count];
    memset(c, 0, sizeof *c);
    falcon_config_default(&c->cfg);
    c->cfg.variant = FALCON_1, c->cfg.form = f, c->cfg.backend = be, c->cfg.precision = FALCON_FP32;
    c->cfg.window = 1, c->cfg.chunk = C, c->cfg.threads = 1;
    c->T = T, c->H = 1, c->n = n, c->m = n, c->peak = peak;
    const int64_t L = f == FALCON_FORM_CHUNK ? falcon_chunk_block(C, 1) : 0;
    c->flops = (double)c->H * falcon_backward_flops(f, 1, 1, T, n, n, 1, L);
    char extra[24] = "";
    if (f == FALCON_FORM_CHUNK) snprintf(extra, sizeof extra, "/C:%lld", (long long)C);
    snprintf(c->name, sizeof c->name, "backward/%s/falcon1/%s/fp32/T:%lld/n:%lld/m:%lld%s/heads:1/threads:1",
             falcon_form_name(f), falcon_backend_name(be), (long long)T, (long long)n, (long long)n, extra);
    gw.count++;
    return fb_register(c->name, body, c);
}

int fb_backward_register(const falcon_backend *cpu, int ncpu, falcon_backend best, int full, double f32_peak,
                         int checks_once)
{
    gw.checks_once = checks_once;
    gw.cap = (size_t)(4 * ncpu + 2);
    gw.cases = calloc(gw.cap, sizeof *gw.cases);
    if (!gw.cases) return -1;
    int rc = 0;
    for (int b = 0; b < ncpu; b++)
        for (int64_t n = full ? 64 : 128; n <= 128; n *= 2)
            for (int f = full || cpu[b] == best ? 0 : 1; f < 2; f++)
                rc |= add(cpu[b], f ? FALCON_FORM_CHUNK : FALCON_FORM_RECURRENT, 4096, n, 64, f32_peak);
    for (int f = 0; !full && f < 2; f++)
        rc |= add(best, f ? FALCON_FORM_CHUNK : FALCON_FORM_RECURRENT, 4096, 64, 64, f32_peak);
    return rc;
}

void fb_backward_free(void)
{
    free(gw.cases);
    memset(&gw, 0, sizeof gw);
}
