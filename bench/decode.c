/*
 * falcon-decode: what one decode call (T = 1, the state carried) costs
 * against the arithmetic of its step.
 *
 *   step   the time per step of one long call (--T steps) on a carried
 *          state: the recurrence's own work, the call's fixed cost spread
 *          over the steps;
 *   call   one falcon_run_from call of one step on the carried state
 *          (checks, the working copy of the state, the run, the commit);
 *   twice  the same step as `falcon run` made each segment's call before
 *          falcon_run_from: falcon_validate_from, then falcon_run.
 *
 * Each figure is the median of --calls timings (the long call: of --reps);
 * the report gives call / step, the overhead a decoder pays per token. On
 * one thread the clock is the thread's CPU time, which a busy host's
 * scheduling does not inflate; on more, the wall clock.
 * Inputs: Falcon-1, prefix alignment, recurrent form, the benchmark's own
 * inputs (bench/inputs.c). The method and the figures measured are in
 * docs/performance.md ("Decode calls").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "clock.h"
#include "inputs.h"
#include "median.h"

typedef struct opts {
    falcon_config cfg;
    int64_t T, H, n;
    int calls, reps;
} opts;

static double now(const opts *o)
{
    return o->cfg.threads == 1 ? fb_thread_cpu_seconds() : fb_wall_seconds();
}

static int usage(void)
{
    fprintf(stderr, "usage: falcon-decode [--backend NAME] [--precision fp32|fp64] [--threads P] [--heads H]\n"
                    "                     [--n N] [--T STEPS] [--calls C] [--reps R]\n"
                    "defaults: auto, fp32, 1 thread, 8 heads, n = m = 128, T = 256, 2000 calls, 21 reps\n");
    return 2;
}

static int parse(int argc, char **argv, opts *o)
{
    falcon_config_default(&o->cfg);
    o->cfg.threads = 1;
    o->T = 256, o->H = 8, o->n = 128, o->calls = 2000, o->reps = 21;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--backend") && falcon_backend_parse(v) >= 0) o->cfg.backend = falcon_backend_parse(v);
        else if (!strcmp(a, "--precision") && falcon_precision_parse(v) >= 0)
            o->cfg.precision = falcon_precision_parse(v);
        else if (!strcmp(a, "--threads")) o->cfg.threads = atoi(v);
        else if (!strcmp(a, "--heads")) o->H = atoll(v);
        else if (!strcmp(a, "--n")) o->n = atoll(v);
        else if (!strcmp(a, "--T")) o->T = atoll(v);
        else if (!strcmp(a, "--calls")) o->calls = atoi(v);
        else if (!strcmp(a, "--reps")) o->reps = atoi(v);
        else return usage();
        i++;
    }
    return o->T >= 1 && o->H >= 1 && o->n >= 1 && o->calls >= 1 && o->reps >= 1 ? 0 : usage();
}

/* Step t of the long inputs as a call of one step. */
static falcon_inputs step_view(const fb_inputs *in, int64_t t)
{
    const size_t sz = in->prec == FALCON_FP64 ? 8 : 4, row = (size_t)(t * in->H);
    falcon_inputs v = {.B = 1, .T = 1, .H = in->H, .n = in->n, .m = in->m};
    v.q = (const char *)in->q + row * (size_t)in->n * sz;
    v.k = (const char *)in->k + row * (size_t)in->n * sz;
    v.v = (const char *)in->v + row * (size_t)in->m * sz;
    v.beta = (const char *)in->beta + row * sz;
    v.alpha = (const char *)in->alpha + row * sz;
    return v;
}

/* Median seconds per step of the whole --T steps in one call. */
static double step_seconds(const opts *o, const fb_inputs *in, falcon_state *st)
{
    const falcon_inputs all = fb_inputs_view(in, o->cfg.variant);
    double *t = malloc(sizeof(double) * (size_t)o->reps);
    int r = 0;
    for (; t && r < o->reps; r++) {
        const double t0 = now(o);
        if (falcon_run(&o->cfg, &all, st, in->out)) break;
        t[r] = (now(o) - t0) / (double)o->T;
    }
    const double med = t && r == o->reps ? fb_median(t, (size_t)o->reps) : -1;
    free(t);
    return med;
}

/* Median seconds of a one-step call; twice: validate, then run. */
static double call_seconds(const opts *o, const fb_inputs *in, falcon_state *st, int twice)
{
    double *t = malloc(sizeof(double) * (size_t)o->calls);
    int c = 0;
    for (; t && c < o->calls; c++) {
        const int64_t step = c % o->T;
        const falcon_inputs one = step_view(in, step);
        const double t0 = now(o);
        const falcon_status s = twice ? (falcon_validate_from(&o->cfg, &one, st, c) ||
                                         falcon_run(&o->cfg, &one, st, in->out))
                                      : falcon_run_from(&o->cfg, &one, st, in->out, c);
        if (s) break;
        t[c] = now(o) - t0;
    }
    const double med = t && c == o->calls ? fb_median(t, (size_t)o->calls) : -1;
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    opts o;
    if (parse(argc, argv, &o)) return 2;
    fb_inputs in;
    falcon_state *st;
    if (fb_inputs_make(&in, o.T, o.H, o.n, o.n, o.cfg.precision, 0) ||
        falcon_state_create(o.H, o.n, o.n, 1, &st)) {
        fprintf(stderr, "falcon-decode: out of memory\n");
        return 1;
    }
    /* warm up: the work memory kept, the pages of the state mapped */
    const double warm = call_seconds(&o, &in, st, 0);
    const double step = step_seconds(&o, &in, st), call = call_seconds(&o, &in, st, 0),
                 twice = call_seconds(&o, &in, st, 1);
    if (warm < 0 || step < 0 || call < 0 || twice < 0) {
        fprintf(stderr, "falcon-decode: %s\n", falcon_last_error());
        return 1;
    }
    printf("backend %s, %s, %d thread(s), %lld heads, n = m = %lld\n",
           falcon_backend_name(falcon_backend_resolve(o.cfg.backend)), falcon_precision_name(o.cfg.precision),
           o.cfg.threads, (long long)o.H, (long long)o.n);
    printf("step (in a call of %lld): %8.2f us\n", (long long)o.T, 1e6 * step);
    printf("call (falcon_run_from):   %8.2f us  %.2fx the step\n", 1e6 * call, call / step);
    printf("call (validate + run):    %8.2f us  %.2fx the step\n", 1e6 * twice, twice / step);
    falcon_state_free(st);
    fb_inputs_free(&in);
    return 0;
}
