/*
 * cases.c: the throughput benchmarks of build/falcon-bench, in C against the
 * public API (include/falcon.h), registered with Google Benchmark through
 * bench/gbench-shim.h.
 *
 * Names: form/variant/backend/precision/T:T/n:n/m:m[/C:C][/W:W]/heads:H/threads:P
 *   e.g. chunk/falcon1/avx2/fp32/T:4096/n:128/m:128/C:64/heads:8/threads:1
 *        recurrent/falcon3/avx512/fp64/T:4096/n:64/m:64/W:4/heads:8/threads:1
 * to which Google Benchmark appends /real_time (the cases are timed by the
 * wall clock: heads run on OpenMP threads, whose work the main thread's CPU
 * time would miss), and _median etc. for aggregates. C only for the chunk
 * form, W only for the window variants (W = 4). Every
 * case runs B = 1, prefix alignment, identity phi, eps 1e-6, a fresh state
 * per call (so no state grows across iterations), inputs in the [1][T][H][D]
 * layout generated once (seeded by T, H, n, m) outside the timed region.
 *
 * Counters (medians over repetitions are what `make bench` reports):
 *   tokens_per_second  T * heads / wall time of one falcon_run call
 *   GFLOPS             flops (bench/flops.c) / wall time / 1e9
 *   peak_fraction      GFLOPS / (probed per-core FMA peak of the precision x
 *                      the threads that can work: min(threads, heads, CPUs))
 *   roofline_fraction  GFLOPS / min(that peak, arith_intensity x probed triad
 *                      bandwidth (1 thread, or all threads when P > 1))
 *   arith_intensity    flops / compulsory bytes (bench/flops.c), flop/byte
 *   validation_fraction  the share of a call that its input checks take
 *                      (falcon_validate, the median of three, each timed
 *                      right after a call, so with the caches as a call's
 *                      own check finds them): the one pass over every input
 *                      that must end before anything is written, so it
 *                      runs at the speed the inputs come from the memory
 *                      (DRAM for T x heads beyond the caches)
 *   validation_floor   the share that one read of every input (bench/flops.c)
 *                      would take at the probed streaming-read bandwidth
 *                      (1 thread, or all): the memory's floor under
 *                      validation_fraction for inputs beyond the caches
 *   driver_fraction, kernel_fraction  (chunk and masked-parallel forms on
 *                      the CPU) the blocked driver's own loops and its
 *                      micro-kernel calls, as shares of a call
 *                      (phase_counters below)
 *   phase_<phase>      (--sweep=goals, its chunk cases but the decay
 *                      entries) each phase's share of a call, the two above
 *                      phase by phase: phase_products, phase_end_state, ...
 *                      (kernels/framework/phase-clock.h names them)
 *   paired_over_mild   (decay/extreme/ and decay/mix/ entries) the regime's
 *                      call time over the same case's under mild, timed in
 *                      alternation (paired_counter below)
 * Each CPU backend's micro-kernels on their own (bench/ukernels.c), in
 * entries named ukernel/<kernel>/<backend>/<precision>/<shape>. The decay
 * entries, decay/<regime>/<a case's name>, run a case under each decay
 * regime of the stability study (none, mild, strong, extreme, mix;
 * gate/gate.c), everything else equal (see add_regimes).
 * The peaks come from bench/probe.c, run at startup in the same process. The
 * cuda backend gets only the first two (a CPU peak says nothing about it).
 *
 * The yardstick (bench/blas.h; when built with OpenBLAS): for every
 * (precision, n, m, C) of the registered CPU chunk cases, OpenBLAS on one
 * thread running the GEMMs of one chunk block,
 *   blas/sgemm/chunk-shapes/n:128/m:128/C:64/threads:1   (dgemm for fp64)
 * and a plain square product for reference, blas/sgemm/square/n:1024/threads:1,
 * with the counters GFLOPS (the chunk model's flops of one block / wall time)
 * and peak_fraction (over the probed per-core peak): the "BLAS-achievable"
 * fraction a chunk case's peak_fraction is read against. The same figures,
 * timed at startup by the thread's CPU clock as the probe is, are in the
 * context (falcon_blas_achievable, falcon_blas_square).
 *
 * Sweeps (--sweep=default|full|goals, or FALCON_BENCH_SWEEP): see
 * register_default, register_full and register_goals. avx512-simde (AVX-512 kernels emulated on AVX2 through
 * SIMDe: a correctness tool, slow) is left out unless --simde or
 * FALCON_BENCH_SIMDE=1.
 */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "falcon.h"
#include "backward.h"
#include "blas.h"
#include "buildinfo.h"
#include "ukernels.h"
#include "flops.h"
#include "gbench-shim.h"
#include "inputs.h"
#include "input-cache.h"
#include "median.h"
#include "phases.h"
#include "side-checks.h"
#include "probe.h"
#include "clock.h"
#include "context.h"
#include "../gate/gate.h" /* the decay regimes (gate_decay_alpha) */

/* The base point every one-axis sweep varies around. */
enum { BASE_T = 4096, BASE_N = 128, BASE_C = 64, BASE_H = 8, WINDOW = 4 };

typedef struct bcase {
    falcon_config cfg;
    int64_t T, H, n, m;
    int workers; /* threads that can work at once: min(threads, heads, CPUs) */
    int decay;   /* -1: the inputs' own mild decay; else a gate_decay regime (decay/ entries) */
    double flops, bytes, in_bytes;
    int profiled; /* a repetition has taken its phase counters */
    int checked;  /* a repetition has taken its side checks */
    fb_side side;   /* --checks-once: the side checks' counters, kept */
    fb_side phases; /* the phase counters of a call over a quarter second, kept */
    char name[160];
} bcase;

static struct {
    bcase **cases;
    size_t count, cap;
    double max_gflop; /* register nothing heavier per call; 0 = no limit */
    int probe_ok;
    int probe_asked; /* 0: --no-probe; 1 with !probe_ok: it ran and failed */
    fb_probe probe;
    int ncpu;
    int phases;       /* --phases: print each profiled call's phases */
    int phase_shares; /* the goals sweep: each phase's share of a call as a counter too */
    int checks_once;  /* --checks-once: the side checks in a case's first repetition only */
    int scalar_reps;  /* --scalar-reps=N: the scalar backend's repetitions (0: the flag's) */
} g;

/* ---- where a chunk call's time goes ---- */

/* One call of case c with the phase clock on, its shares added to ps
 * (bench/phases.h): 1 if it ran, 0 if it failed, -1 if no blocked driver ran. */
static int phase_sample(const bcase *c, const falcon_inputs *fi, void *out, fb_phase_samples *ps)
{
    return fb_phase_sample(&c->cfg, fi, out, c->workers, g.phases ? c->name : NULL, ps);
}

/* ---- a near-reset regime's cost, paired with mild ----
 * The decay goal compares two cases' rates, and a shared host's slow
 * spells last seconds, so two regimes timed apart, even interleaved by
 * repetition, can differ by 1.5 with the same work (the figures:
 * docs/performance.md, "The benchmark's timings on a shared host"). Here
 * an extreme or mix entry times its calls against the same case under
 * mild in alternation, after the timed loop (untimed by the benchmark):
 * rounds of one call each, the order swapped every round, for a quarter of
 * a second (at least 3 rounds, at most 15); paired_over_mild is the median
 * of the rounds' time ratios (this regime's over mild's: mild's rate over
 * this one's, as the decay table's columns). A spell then falls on both
 * calls of a round. */
static void paired_counter(fb_state *st, const bcase *c, const falcon_inputs *fi, void *out, fb_side *keep)
{
    if (c->decay != GATE_DECAY_EXTREME && c->decay != GATE_DECAY_MIX) return;
    enum { MIN_ROUNDS = 3, MAX_ROUNDS = 15 };
    const size_t size = c->cfg.precision == FALCON_FP32 ? 4 : 8;
    void *mild = malloc((size_t)(c->T * c->H) * size);
    if (!mild) return;
    fb_alpha_set_decay(mild, c->T, c->H, c->cfg.precision, GATE_DECAY_MILD);
    falcon_inputs fm = *fi;
    fm.alpha = mild;
    double ratio[MAX_ROUNDS];
    int rounds = 0;
    const double start = fb_wall_seconds();
    while (rounds < MAX_ROUNDS && (rounds < MIN_ROUNDS || fb_wall_seconds() - start < 0.25)) {
        double t[2]; /* [0]: this regime, [1]: mild */
        for (int k = 0; k < 2; k++) {
            const int which = (k + rounds) % 2;
            const double t0 = fb_wall_seconds();
            if (falcon_run(&c->cfg, which ? &fm : fi, NULL, out) != FALCON_OK) {
                free(mild);
                return;
            }
            t[which] = fb_wall_seconds() - t0;
        }
        if (!(t[1] > 0)) break;
        ratio[rounds++] = t[0] / t[1];
    }
    free(mild);
    if (rounds < MIN_ROUNDS) return;
    fb_side_set(st, keep, "paired_over_mild", fb_median(ratio, (size_t)rounds));
}

/* The input check's share of a call (validation_fraction, and with the
 * probe validation_floor): one check right after the timed loop's last
 * call, where a call's own check runs, in every run of the body, so that
 * the case's median is over its repetitions (a single check is at the mercy
 * of the host). Checks back to back, or after a call of another shape,
 * find the caches as something else left them and read low. The figures:
 * docs/performance.md, "The benchmark's timings on a shared host".
 * Nonzero if the check failed. */
static int input_check(fb_state *st, const bcase *c, const falcon_inputs *fi, double per_call)
{
    const double v0 = fb_wall_seconds();
    if (falcon_validate(&c->cfg, fi, NULL) != FALCON_OK) return 1;
    fb_state_set_counter(st, "validation_fraction", (fb_wall_seconds() - v0) / per_call, FB_DEFAULT);
    const double rd = c->workers > 1 ? g.probe.read_all : g.probe.read_1;
    if (g.probe_ok && rd > 0)
        fb_state_set_counter(st, "validation_floor", c->in_bytes * 1e-9 / rd / per_call, FB_DEFAULT);
    return 0;
}

/* The side checks, untimed calls after the timed loop: the phase shares of
 * the blocked forms (three calls; one for calls over a quarter of a
 * second, which run thousands of blocks whose shares a second call
 * repeats), a near-reset regime's paired ratio. With --checks-once they are
 * measured in the case's first run of the body and kept in c->side, and
 * its later runs set them again (bench/side-checks.h); without, every run
 * measures them, but the phase shares of a long call: once, kept in
 * c->phases. Nonzero when a call failed. */
static int side_checks(fb_state *st, bcase *c, const falcon_inputs *fi, void *out, double per_call)
{
    if (g.checks_once && c->checked) {
        fb_side_replay(st, &c->side);
        return 0;
    }
    c->checked = 1;
    fb_side *keep = g.checks_once ? &c->side : NULL;
    const int blocked = c->cfg.form == FALCON_FORM_CHUNK || c->cfg.form == FALCON_FORM_PARALLEL;
    const int long_call = per_call > 0.25;
    if (blocked && (keep || !long_call || !c->profiled)) {
        fb_phase_samples ps = {0};
        for (int i = 0; i < (long_call ? 1 : 3); i++)
            if (phase_sample(c, fi, out, &ps) == 0) return 1;
        c->phases.n = 0;
        fb_phase_counters(st, &ps, g.phase_shares && c->decay < 0, keep ? keep : &c->phases);
        c->profiled = 1;
    } else if (blocked) fb_side_replay(st, &c->phases);
    paired_counter(st, c, fi, out, keep);
    return 0;
}

/* ---- the benchmark body ---- */

static void body(fb_state *st, void *user)
{
    bcase *c = user;
    char why[160];
    const fb_inputs *in = fb_inputs_get(c->T, c->H, c->n, c->m, c->cfg.precision,
                                        falcon_variant_has_gain(c->cfg.variant), c->decay, why, sizeof why);
    if (!in) {
        fb_state_skip_with_error(st, why);
        return;
    }
    falcon_inputs fi = fb_inputs_view(in, c->cfg.variant);
    if (c->decay == GATE_DECAY_NONE) fi.alpha = NULL; /* as the gate runs it: no decay at all */
    /* The fractions are plain numbers, from this wall clock (the same span
     * Google Benchmark times): as rate counters they would print as "/s". */
    int64_t iters = 0;
    const double t0 = fb_wall_seconds();
    while (fb_state_keep_running(st)) {
        falcon_status s = falcon_run(&c->cfg, &fi, NULL, in->out);
        if (s != FALCON_OK) {
            snprintf(why, sizeof why, "falcon_run: %s: %s", falcon_status_name(s), falcon_last_error());
            fb_state_skip_with_error(st, why);
            return;
        }
        iters++;
    }
    const double elapsed = fb_wall_seconds() - t0;
    const unsigned rate = FB_RATE | FB_ITER_INVARIANT; /* per call, divided by wall time */
    fb_state_set_counter(st, "tokens_per_second", (double)(c->T * c->H), rate);
    fb_state_set_counter(st, "GFLOPS", c->flops * 1e-9, rate);
    if (c->cfg.backend == FALCON_BACKEND_CUDA || iters == 0 || elapsed <= 0) return;
    const double per_call = elapsed / (double)iters;
    if (input_check(st, c, &fi, per_call) || side_checks(st, c, &fi, in->out, per_call)) return;
    if (!g.probe_ok) return;
    const double gflops = c->flops * 1e-9 * (double)iters / elapsed;
    const int f32 = c->cfg.precision == FALCON_FP32;
    const double peak = (f32 ? g.probe.f32_best : g.probe.f64_best) * c->workers;
    const double ai = c->flops / c->bytes;
    const double bw = c->workers > 1 ? g.probe.bw_all : g.probe.bw_1;
    /* The check's share if it read every input once at the probed read
     * bandwidth (a streaming read, as the check is; not the triad, whose
     * mix of streams a lone read does not reach): what the memory allows
     * it, for inputs beyond the caches (from the caches it can run below).
     * A fraction near this floor is the memory's, not the scan's: the floor
     * is input bytes per flop times the call's GFLOPS over the bandwidth,
     * so a faster call raises it. */
    const double roof = ai * bw < peak ? ai * bw : peak;
    fb_state_set_counter(st, "peak_fraction", gflops / peak, FB_DEFAULT);
    fb_state_set_counter(st, "roofline_fraction", gflops / roof, FB_DEFAULT);
    fb_state_set_counter(st, "arith_intensity", ai, FB_DEFAULT);
}

/* ---- registration ---- */

static int add_decay(falcon_backend b, falcon_variant v, falcon_form f, falcon_precision p, int64_t T,
                     int64_t n, int64_t C, int64_t H, int threads, int decay)
{
    bcase *c = calloc(1, sizeof *c);
    if (!c) return -1;
    c->decay = decay;
    falcon_config_default(&c->cfg);
    c->cfg.variant = v;
    c->cfg.form = f;
    c->cfg.backend = b;
    c->cfg.precision = p;
    c->cfg.window = falcon_variant_has_window(v) ? WINDOW : 1;
    c->cfg.chunk = C;
    c->cfg.threads = threads;
    c->T = T, c->H = H, c->n = n, c->m = n;
    int64_t w = threads < H ? threads : H;
    c->workers = (int)(w < g.ncpu ? w : g.ncpu);
    c->flops = fb_flops(&c->cfg, T, H, n, n);
    c->bytes = fb_bytes(&c->cfg, T, H, n, n);
    c->in_bytes = fb_input_bytes(&c->cfg, T, H, n, n);

    if (g.max_gflop > 0 && c->flops * 1e-9 > g.max_gflop) {
        free(c);
        return 0;
    }

    char extra[40] = "";
    int len = 0;
    if (f == FALCON_FORM_CHUNK) len += snprintf(extra + len, sizeof extra - (size_t)len, "/C:%lld", (long long)C);
    if (c->cfg.window > 1) snprintf(extra + len, sizeof extra - (size_t)len, "/W:%lld", (long long)c->cfg.window);
    char regime[40] = "";
    if (decay >= 0) snprintf(regime, sizeof regime, "decay/%s/", gate_decay_name((gate_decay)decay));
    snprintf(c->name, sizeof c->name, "%s%s/%s/%s/%s/T:%lld/n:%lld/m:%lld%s/heads:%lld/threads:%d", regime,
             falcon_form_name(f), falcon_variant_name(v), falcon_backend_name(b), falcon_precision_name(p),
             (long long)T, (long long)n, (long long)n, extra, (long long)H, threads);

    /* The one-axis sweeps cross at the base point: keep the first of duplicates. */
    for (size_t i = 0; i < g.count; i++)
        if (strcmp(g.cases[i]->name, c->name) == 0) {
            free(c);
            return 0;
        }
    if (g.count == g.cap) {
        size_t nc = g.cap ? 2 * g.cap : 256;
        bcase **cs = realloc(g.cases, nc * sizeof *cs);
        if (!cs) {
            free(c);
            return -1;
        }
        g.cases = cs, g.cap = nc;
    }
    g.cases[g.count++] = c;
    return fb_register_reps(c->name, body, c, b == FALCON_BACKEND_SCALAR ? g.scalar_reps : 0);
}

static int add(falcon_backend b, falcon_variant v, falcon_form f, falcon_precision p, int64_t T,
               int64_t n, int64_t C, int64_t H, int threads)
{
    return add_decay(b, v, f, p, T, n, C, H, threads, -1);
}

/* The decay entries, decay/<regime>/<the case's usual name>: the same case
 * under each of the stability study's five regimes (gate_decay_alpha), so
 * that a near-reset decay's cost shows as extreme or mix against mild in
 * one run (the report's decay table). A regime changes only alpha. */
static const gate_decay regimes[] = {GATE_DECAY_NONE, GATE_DECAY_MILD, GATE_DECAY_STRONG, GATE_DECAY_EXTREME,
                                     GATE_DECAY_MIX};
enum { DECAY_T = 1024, DECAY_N = 64 };

static int add_regimes(falcon_backend b, falcon_precision p)
{
    int rc = 0;
    for (int f = 0; f < 2; f++)
        for (int v = 0; v < 2; v++)
            for (size_t r = 0; r < sizeof regimes / sizeof regimes[0]; r++)
                rc |= add_decay(b, v ? FALCON_3 : FALCON_1, f ? FALCON_FORM_CHUNK : FALCON_FORM_RECURRENT, p, DECAY_T,
                                DECAY_N, BASE_C, BASE_H, 1, (int)regimes[r]);
    return rc;
}

/* The CPU backends to measure, the best one (what auto resolves to), and cuda. */
static falcon_backend cpu_backends[FALCON_BACKEND_ROWS];
static int ncpu_backends;

/* Every backend available here but auto, cuda and mpfr, in the enum's order. */
static void find_backends(int simde)
{
    for (int b = 0; b < FALCON_BACKEND_ROWS; b++)
        if (b != FALCON_BACKEND_AUTO && b != FALCON_BACKEND_CUDA && b != FALCON_BACKEND_MPFR &&
            falcon_backend_available((falcon_backend)b) && (simde || b != FALCON_BACKEND_AVX512_SIMDE))
            cpu_backends[ncpu_backends++] = (falcon_backend)b;
}

static const falcon_precision precs[] = {FALCON_FP32, FALCON_FP64};
static const falcon_form forms[] = {FALCON_FORM_RECURRENT, FALCON_FORM_CHUNK, FALCON_FORM_PARALLEL};
static const falcon_variant variants[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_1A, FALCON_2A, FALCON_3A};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The CPU backend auto resolves to (the last CPU one where auto is cuda). */
static falcon_backend best_cpu_backend(void)
{
    const falcon_backend best = falcon_backend_resolve(FALCON_BACKEND_AUTO);
    return best == FALCON_BACKEND_CUDA ? cpu_backends[ncpu_backends - 1] : best;
}

/* The chunk-size sweep on backend b: Falcon-1 fp32 at C = 16, 32, 128, 256
 * (C = BASE_C is the base point, registered with the other cases). */
static int add_chunk_sweep(falcon_backend b)
{
    static const int64_t Cs[] = {16, 32, 128, 256};
    int rc = 0;
    for (size_t i = 0; i < N_OF(Cs); i++)
        rc |= add(b, FALCON_1, FALCON_FORM_CHUNK, FALCON_FP32, BASE_T, BASE_N, Cs[i], BASE_H, 1);
    return rc;
}

/*
 * Default (3 to 5 minutes with `make bench` on 2 cores: 3 repetitions, min time 0.3 s):
 *   every CPU backend x {recurrent, chunk} x {falcon1, falcon3} x n = m in
 *   {64, 128} x {fp32, fp64}, T = 4096, C = 64, 8 heads, 1 thread;
 *   parallel form, falcon1 and falcon3, every CPU backend, fp32, T = 512, n = 64;
 *   on the best backend, fp32, n = 128 unless swept:
 *     the other variants (falcon2, 1a, 2a, 3a), recurrent and chunk;
 *     falcon1 recurrent and chunk over T = 256, 1024, 16384, 65536 and n = 32, 256;
 *     falcon1 chunk over C = 16, 32, 128, 256;
 *     falcon1 recurrent and chunk with heads 1, 8 x threads 1, all CPUs;
 *   mpfr: falcon1 recurrent and chunk, fp64, T = 64, n = m = 16, 1 head;
 *   decay/<regime>/: every CPU backend x {recurrent, chunk} x {falcon1,
 *     falcon3} x the five regimes, fp32, T = 1024, n = m = 64, 8 heads.
 */
static int register_default(void)
{
    int rc = 0;
    const falcon_backend best = falcon_backend_resolve(FALCON_BACKEND_AUTO), best_cpu = best_cpu_backend();
    for (int b = 0; b < ncpu_backends; b++)
        for (int f = 0; f < 2; f++)
            for (int v = 0; v < 2; v++)
                for (int64_t n = 64; n <= 128; n *= 2)
                    for (size_t p = 0; p < N_OF(precs); p++)
                        rc |= add(cpu_backends[b], v ? FALCON_3 : FALCON_1, forms[f], precs[p], BASE_T, n, BASE_C,
                                  BASE_H, 1);
    for (int b = 0; b < ncpu_backends; b++)
        for (int v = 0; v < 2; v++)
            rc |= add(cpu_backends[b], v ? FALCON_3 : FALCON_1, FALCON_FORM_PARALLEL, FALCON_FP32, 512, 64,
                      BASE_C, BASE_H, 1);
    static const falcon_variant others[] = {FALCON_2, FALCON_1A, FALCON_2A, FALCON_3A};
    static const int64_t Ts[] = {256, 1024, 16384, 65536}, ns[] = {32, 256};
    for (int f = 0; f < 2; f++) {
        for (size_t v = 0; v < N_OF(others); v++)
            rc |= add(best_cpu, others[v], forms[f], FALCON_FP32, BASE_T, BASE_N, BASE_C, BASE_H, 1);
        for (size_t i = 0; i < N_OF(Ts); i++)
            rc |= add(best_cpu, FALCON_1, forms[f], FALCON_FP32, Ts[i], BASE_N, BASE_C, BASE_H, 1);
        for (size_t i = 0; i < N_OF(ns); i++)
            rc |= add(best_cpu, FALCON_1, forms[f], FALCON_FP32, BASE_T, ns[i], BASE_C, BASE_H, 1);
        for (int64_t H = 1; H <= BASE_H; H *= BASE_H)
            for (int t = 1; t <= g.ncpu; t = t < g.ncpu ? g.ncpu : t + 1)
                rc |= add(best_cpu, FALCON_1, forms[f], FALCON_FP32, BASE_T, BASE_N, BASE_C, H, t);
    }
    rc |= add_chunk_sweep(best_cpu);
    if (best == FALCON_BACKEND_CUDA)
        for (int f = 0; f < 3; f++)
            rc |= add(best, FALCON_1, forms[f], FALCON_FP32, BASE_T, BASE_N, BASE_C, BASE_H, 1);
    for (int f = 0; f < 2; f++)
        rc |= add(FALCON_BACKEND_MPFR, FALCON_1, forms[f], FALCON_FP64, 64, 16, 16, 1, 1);
    for (int b = 0; b < ncpu_backends; b++) rc |= add_regimes(cpu_backends[b], FALCON_FP32);
    return rc;
}

/*
 * Goals (`make goals`, a few minutes): the cases the performance goals are
 * read from (README, "Performance goals"; the report's goals table), one
 * thread, fp32, 8 heads, T = 4096: on every CPU backend Falcon-1 chunk
 * n = m = 128, C = 64 and recurrent n = m = 64, and its decay entries; on the
 * best backend the chunk sizes of the default sweep; the yardstick of each
 * chunk shape (register_blas). No micro-kernel entries.
 */
static int register_goals(void)
{
    int rc = 0;
    for (int b = 0; b < ncpu_backends; b++) {
        rc |= add(cpu_backends[b], FALCON_1, FALCON_FORM_CHUNK, FALCON_FP32, BASE_T, BASE_N, BASE_C, BASE_H, 1);
        rc |= add(cpu_backends[b], FALCON_1, FALCON_FORM_RECURRENT, FALCON_FP32, BASE_T, 64, BASE_C, BASE_H, 1);
    }
    rc |= add_chunk_sweep(best_cpu_backend());
    for (int b = 0; b < ncpu_backends; b++) rc |= add_regimes(cpu_backends[b], FALCON_FP32);
    return rc;
}

/*
 * Full: for every backend present (CPU ones, cuda) x variant x form x
 * precision: the grid T = 256, 512, ..., 65536 x n = m in {32, 64, 128, 256}
 * (C = 64, 8 heads, 1 thread); C in {16, 32, 64, 128, 256} (chunk form); the
 * grid heads in {1, 2, 4, 8, 16} x threads in {1, 2, 4, ..., CPUs}; mpfr:
 * every variant x form x precision at T in {16, 64, 256}, n = m = 16, C = 16;
 * the decay entries of the default sweep in fp32 and fp64.
 * Many hours (the parallel form is O(T x 4096) per head): select with
 * --benchmark_filter or bound it with --max-gflop.
 */
static int register_full(void)
{
    int rc = 0;
    falcon_backend bs[FALCON_BACKEND_ROWS];
    int nb = 0;
    for (int b = 0; b < ncpu_backends; b++) bs[nb++] = cpu_backends[b];
    if (falcon_backend_available(FALCON_BACKEND_CUDA)) bs[nb++] = FALCON_BACKEND_CUDA;
    for (int b = 0; b < nb; b++)
        for (size_t v = 0; v < N_OF(variants); v++)
            for (size_t f = 0; f < N_OF(forms); f++)
                for (size_t p = 0; p < N_OF(precs); p++) {
                    for (int64_t T = 256; T <= 65536; T *= 2)
                        for (int64_t n = 32; n <= 256; n *= 2)
                            rc |= add(bs[b], variants[v], forms[f], precs[p], T, n, BASE_C, BASE_H, 1);
                    if (forms[f] == FALCON_FORM_CHUNK)
                        for (int64_t C = 16; C <= 256; C *= 2)
                            rc |= add(bs[b], variants[v], forms[f], precs[p], BASE_T, BASE_N, C, BASE_H, 1);
                    for (int64_t H = 1; H <= 16; H *= 2)
                        for (int t = 1; t <= g.ncpu; t = t * 2 <= g.ncpu || t == g.ncpu ? t * 2 : g.ncpu)
                            rc |= add(bs[b], variants[v], forms[f], precs[p], BASE_T, BASE_N, BASE_C, H, t);
                }
    for (size_t v = 0; v < N_OF(variants); v++)
        for (size_t f = 0; f < N_OF(forms); f++)
            for (size_t p = 0; p < N_OF(precs); p++)
                for (int64_t T = 16; T <= 256; T *= 4)
                    rc |= add(FALCON_BACKEND_MPFR, variants[v], forms[f], precs[p], T, 16, 16, 1, 1);
    for (int b = 0; b < ncpu_backends; b++)
        for (size_t p = 0; p < N_OF(precs); p++) rc |= add_regimes(cpu_backends[b], precs[p]);
    return rc;
}

/* ---- the yardstick: OpenBLAS on the chunk block's shapes (bench/blas.h) ---- */

typedef struct blas_case {
    int fp64;
    int64_t n, m, C; /* C = 0: the square product n x n x n */
    double flops;
    char name[96];
} blas_case;

static struct {
    blas_case *cases;
    size_t count;
} gb;

static void blas_body(fb_state *st, void *user)
{
    const blas_case *b = user;
    fb_blas_work *w = fb_blas_new(b->fp64, b->n, b->m, b->C);
    if (!w) {
        fb_state_skip_with_error(st, "out of memory for the BLAS operands");
        return;
    }
    fb_blas_run(w); /* warm, untimed */
    int64_t iters = 0;
    const double t0 = fb_wall_seconds();
    while (fb_state_keep_running(st)) {
        fb_blas_run(w);
        iters++;
    }
    const double elapsed = fb_wall_seconds() - t0;
    fb_blas_free(w);
    fb_state_set_counter(st, "GFLOPS", b->flops * 1e-9, FB_RATE | FB_ITER_INVARIANT);
    if (!g.probe_ok || iters == 0 || elapsed <= 0) return;
    const double peak = b->fp64 ? g.probe.f64_best : g.probe.f32_best;
    fb_state_set_counter(st, "peak_fraction", b->flops * 1e-9 * (double)iters / elapsed / peak, FB_DEFAULT);
}

enum { BLAS_SQUARE = 1024 };

/* One entry per (precision, n, m, C) of the registered CPU chunk cases, then
 * the square products; registered after the falcon cases. */
static int register_blas(void)
{
    if (!fb_blas_available()) return 0;
    gb.cases = calloc(g.count + 2, sizeof *gb.cases);
    if (!gb.cases) return -1;
    for (size_t i = 0; i < g.count; i++) {
        const bcase *c = g.cases[i];
        if (c->cfg.form != FALCON_FORM_CHUNK || c->decay >= 0 || c->cfg.backend == FALCON_BACKEND_CUDA ||
            c->cfg.backend == FALCON_BACKEND_MPFR)
            continue;
        const int fp64 = c->cfg.precision == FALCON_FP64;
        size_t k = 0;
        while (k < gb.count && !(gb.cases[k].fp64 == fp64 && gb.cases[k].n == c->n && gb.cases[k].m == c->m &&
                                 gb.cases[k].C == c->cfg.chunk))
            k++;
        if (k < gb.count) continue;
        blas_case *b = &gb.cases[gb.count++];
        b->fp64 = fp64, b->n = c->n, b->m = c->m, b->C = c->cfg.chunk;
    }
    for (int fp64 = 0; fp64 < 2; fp64++) {
        blas_case *b = &gb.cases[gb.count];
        b->fp64 = fp64, b->n = b->m = BLAS_SQUARE, b->C = 0;
        b->flops = 2.0 * BLAS_SQUARE * BLAS_SQUARE * BLAS_SQUARE;
        if (g.max_gflop <= 0 || b->flops * 1e-9 <= g.max_gflop) gb.count++;
    }
    int rc = 0;
    for (size_t k = 0; k < gb.count; k++) {
        blas_case *b = &gb.cases[k];
        const char *fn = b->fp64 ? "dgemm" : "sgemm";
        if (b->C) {
            fb_blas_work *w = fb_blas_new(b->fp64, b->n, b->m, b->C);
            if (!w) return -1;
            b->flops = fb_blas_flops(w);
            fb_blas_free(w);
            snprintf(b->name, sizeof b->name, "blas/%s/chunk-shapes/n:%lld/m:%lld/C:%lld/threads:1", fn,
                     (long long)b->n, (long long)b->m, (long long)b->C);
        } else {
            snprintf(b->name, sizeof b->name, "blas/%s/square/n:%lld/threads:1", fn, (long long)b->n);
        }
        rc |= fb_register(b->name, blas_body, b);
    }
    return rc;
}

/* The yardstick's figures at startup into the context (fb_add_blas_context). */
static void blas_context(const fb_run_facts *facts)
{
    fb_blas_shape *shapes = calloc(gb.count + 1, sizeof *shapes);
    for (size_t k = 0; shapes && k < gb.count; k++)
        shapes[k] = (fb_blas_shape){gb.cases[k].fp64, gb.cases[k].n, gb.cases[k].m, gb.cases[k].C};
    fb_add_blas_context(facts, shapes, shapes ? gb.count : 0);
    free(shapes);
}

/* ---- flags ---- */

void fb_usage(void)
{
    printf("\nfalcon-bench flags (besides Google Benchmark's above):\n"
           "  --sweep=default|full|goals  the registered set (env FALCON_BENCH_SWEEP); default about 5\n"
           "                         min under `make bench`, full: every backend x variant x form x\n"
           "                         precision over T x n, C, heads x threads (many hours; use\n"
           "                         --benchmark_filter), goals: the cases of the performance goals\n"
           "                         (`make goals`, a few minutes), the chunk cases with a counter\n"
           "                         for each phase's share of a call (phase_products, ...)\n"
           "  --simde                include the avx512-simde backend (emulated AVX-512; env\n"
           "                         FALCON_BENCH_SIMDE=1); left out by default\n"
           "  --max-gflop=X          register no case above X GFLOP per call\n"
           "  --no-probe             skip the startup peak probe (no peak or roofline counters)\n"
           "  --checks-once          the side checks' untimed calls (driver_fraction, kernel_fraction,\n"
           "                         paired_over_mild, backward_over_forward) in each case's first\n"
           "                         repetition only, not in every one (the quick report's protocol)\n"
           "  --scalar-reps=N        the scalar backend's cases with N repetitions, the others with\n"
           "                         --benchmark_repetitions (the quick report: 1; its calls are the\n"
           "                         longest, its figures feed no goal; one repetition has no median)\n"
           "  --phases               print, for each chunk and masked-parallel case, the phases of the\n"
           "                         calls its driver_fraction comes from (mean and median a block)\n"
           "  --out=FILE             the results as JSON in FILE, replaced only by a run that\n"
           "                         measured a case (checked first; a temporary beside it meanwhile)\n"
           "names: form/variant/backend/precision/T:T/n:n/m:m[/C:C][/W:W]/heads:H/threads:P/real_time\n"
           "  (/real_time: Google Benchmark's mark of wall-clock timing); decay/REGIME/NAME: a case\n"
           "  under one of the stability study's decay regimes (none, mild, strong, extreme, mix)\n"
           "  and the yardstick (OpenBLAS, 1 thread): blas/sgemm|dgemm/chunk-shapes/n:n/m:m/C:C/threads:1,\n"
           "  the GEMMs of one chunk block, and blas/sgemm|dgemm/square/n:1024/threads:1\n"
           "  yardstick: %s\n", fb_blas_describe());
}

int fb_setup(int *argc, char **argv)
{
    const char *sweep = getenv("FALCON_BENCH_SWEEP");
    const char *simde_env = getenv("FALCON_BENCH_SIMDE");
    int simde = simde_env && strcmp(simde_env, "0") != 0 && simde_env[0], probe = 1, out = 1;
    if (!sweep || !sweep[0]) sweep = "default";
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--sweep=", 8) == 0) sweep = a + 8;
        else if (strcmp(a, "--simde") == 0) simde = 1;
        else if (strcmp(a, "--no-probe") == 0) probe = 0;
        else if (strcmp(a, "--phases") == 0) g.phases = 1;
        else if (strcmp(a, "--checks-once") == 0) g.checks_once = 1;
        else if (strncmp(a, "--scalar-reps=", 14) == 0) {
            char *end;
            const long r = strtol(a + 14, &end, 10);
            if (*end || end == a + 14 || r < 1 || r > 100) {
                fprintf(stderr, "falcon-bench: --scalar-reps wants a count in [1, 100], got '%s'\n", a + 14);
                return 2;
            }
            g.scalar_reps = (int)r;
        }
        else if (strncmp(a, "--max-gflop=", 12) == 0) {
            char *end;
            g.max_gflop = strtod(a + 12, &end);
            if (*end || g.max_gflop <= 0) {
                fprintf(stderr, "falcon-bench: --max-gflop wants a positive number, got '%s'\n", a + 12);
                return 2;
            }
        } else {
            argv[out++] = argv[i]; /* not ours: Google Benchmark reports it */
            continue;
        }
    }
    *argc = out;
    argv[out] = NULL;
    if (out > 1) return -1; /* the shim reports the unknown flags; no probe first */
    if (strcmp(sweep, "default") != 0 && strcmp(sweep, "full") != 0 && strcmp(sweep, "goals") != 0) {
        fprintf(stderr, "falcon-bench: --sweep must be default, full or goals, got '%s'\n", sweep);
        return 2;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    g.ncpu = ncpu > 0 ? (int)ncpu : 1;
    find_backends(simde);
    if (probe) {
        g.probe_asked = 1;
        fb_probe_run(&g.probe);
        g.probe_ok = g.probe.f32_best > 0 && g.probe.f64_best > 0 && g.probe.bw_1 > 0 && g.probe.bw_all > 0 &&
                     g.probe.read_1 > 0 && g.probe.read_all > 0;
        if (g.probe_ok)
            fprintf(stderr, "probe: per-core peak fp32 %.1f, fp64 %.1f GFLOPS (%s); triad %.1f GB/s (1 thread), "
                            "%.1f GB/s (%d threads); read %.1f GB/s (1 thread), %.1f GB/s\n",
                    g.probe.f32_best, g.probe.f64_best, g.probe.best_isa, g.probe.bw_1, g.probe.bw_all,
                    g.probe.threads, g.probe.read_1, g.probe.read_all);
        else
            fprintf(stderr, "falcon-bench: warning: the probe failed (no memory for its buffers, or a zero "
                            "measurement): no peak or roofline counters in this run\n");
    }
    const fb_run_facts facts = {sweep, simde, g.ncpu, g.probe_asked, g.probe_ok ? &g.probe : NULL, cpu_backends,
                                 ncpu_backends, g.checks_once, g.scalar_reps};
    fb_add_run_context(&facts);
    const int full = strcmp(sweep, "full") == 0, goals = strcmp(sweep, "goals") == 0;
    g.phase_shares = goals;
    if ((full ? register_full() : goals ? register_goals() : register_default()) || register_blas() ||
        (!goals && fb_backward_register(cpu_backends, ncpu_backends, best_cpu_backend(), full,
                                        g.probe_ok ? g.probe.f32_best : 0, g.checks_once)) ||
        (!goals && fb_ukernels_register(cpu_backends, ncpu_backends, full, g.probe_ok ? g.probe.f32_best : 0,
                                        g.probe_ok ? g.probe.f64_best : 0))) {
        fprintf(stderr, "falcon-bench: out of memory registering the cases\n");
        return 2;
    }
    blas_context(&facts);
    return -1;
}

void fb_teardown(void)
{
    fb_inputs_cache_free();
    fb_ukernels_free();
    fb_backward_free();
    free(gb.cases);
    for (size_t i = 0; i < g.count; i++) free(g.cases[i]);
    free(g.cases);
}
