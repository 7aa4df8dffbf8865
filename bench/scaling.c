/*
 * falcon-scaling: how much faster P threads run a case than one, next to
 * how much work this machine lets P independent processes do at once.
 *
 * On a virtual machine the host decides how much of each vCPU a run gets,
 * and that changes from second to second; a P-thread figure measured alone
 * cannot tell a kernel that stops scaling from a host that gave less than
 * P cores. So each round measures, back to back:
 *   t1  one call on 1 thread (best of --calls),
 *   tP  one call on P threads (best of --calls),
 *   the host's ceiling: P child processes each making --calls 1-thread
 *       calls at the same time, against one process alone
 *       (ceiling = P * alone / together: P when the host gives P cores),
 * and the report gives the medians over rounds of t1 / tP, of the ceiling,
 * and of their quotient (the kernels' efficiency against what the host
 * gave; about 1 when the threads scale as far as the machine lets them).
 *
 * Inputs: Falcon-1 (or --variant), prefix alignment, the benchmark's own
 * inputs for the shape (bench/inputs.c: mild decay, n = m).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "falcon.h"
#include "inputs.h"
#include "clock.h"

typedef struct opts {
    falcon_config cfg;
    int64_t T, H, n;
    int threads, rounds, calls;
} opts;

/* Best wall time of `calls` calls on `threads` threads; < 0 on failure. */
static double best_call(const opts *o, const falcon_inputs *in, int threads, void *out)
{
    falcon_config c = o->cfg;
    c.threads = threads;
    double best = INFINITY;
    for (int i = 0; i < o->calls; i++) {
        const double t0 = fb_wall_seconds();
        if (falcon_run(&c, in, NULL, out) != FALCON_OK) {
            fprintf(stderr, "falcon-scaling: falcon_run: %s\n", falcon_last_error());
            return -1;
        }
        const double t = fb_wall_seconds() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* Wall time for `procs` processes to make o->calls 1-thread calls each, at once. */
static double together(const opts *o, const falcon_inputs *in, int procs, void *out)
{
    const double t0 = fb_wall_seconds();
    for (int p = 0; p < procs; p++) {
        const pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) _exit(best_call(o, in, 1, out) < 0 ? 1 : 0);
    }
    int ok = 1, status;
    for (int p = 0; p < procs; p++) ok &= wait(&status) > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return ok ? fb_wall_seconds() - t0 : -1;
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int parse_int(const char *name, const char *v, long lo, long hi, long *out)
{
    char *end;
    const long x = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "falcon-scaling: %s %s: must be an integer in [%ld, %ld]\n", name, v ? v : "(missing)", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: falcon-scaling [--form recurrent|chunk|parallel] [--backend NAME] [--variant NAME]\n"
               "                      [--T T] [--heads H] [--n N] [--threads P] [--rounds R] [--calls K]\n"
               "Speed-up of P threads over 1 on one case (fp32, n = m), next to the speed-up the host gives P\n"
               "independent processes, measured in the same rounds. Defaults: recurrent, auto, falcon1,\n"
               "T 4096, 8 heads, n 128, P 2, 9 rounds of 3 calls.\n");
}

int main(int argc, char **argv)
{
    opts o = {.T = 4096, .H = 8, .n = 128, .threads = 2, .rounds = 9, .calls = 3};
    falcon_config_default(&o.cfg);
    o.cfg.variant = FALCON_1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        int e = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("falcon-scaling %s\n", falcon_version());
            return 0;
        } else if (!strcmp(a, "--form")) {
            e = (x = falcon_form_parse(v ? v : "")) < 0;
            o.cfg.form = (falcon_form)x;
        } else if (!strcmp(a, "--backend")) {
            e = (x = falcon_backend_parse(v ? v : "")) < 0;
            o.cfg.backend = (falcon_backend)x;
        } else if (!strcmp(a, "--variant")) {
            e = (x = falcon_variant_parse(v ? v : "")) < 0;
            o.cfg.variant = (falcon_variant)x;
            if (!e && falcon_variant_has_window(o.cfg.variant)) o.cfg.window = 4;
        } else if (!strcmp(a, "--T")) {
            e = parse_int(a, v, 1, 1 << 20, &x), o.T = x;
        } else if (!strcmp(a, "--heads")) {
            e = parse_int(a, v, 1, 1024, &x), o.H = x;
        } else if (!strcmp(a, "--n")) {
            e = parse_int(a, v, 1, 4096, &x), o.n = x;
        } else if (!strcmp(a, "--threads")) {
            e = parse_int(a, v, 2, 256, &x), o.threads = (int)x;
        } else if (!strcmp(a, "--rounds")) {
            e = parse_int(a, v, 1, 1000, &x), o.rounds = (int)x;
        } else if (!strcmp(a, "--calls")) {
            e = parse_int(a, v, 1, 1000, &x), o.calls = (int)x;
        } else {
            fprintf(stderr, "falcon-scaling: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        if (e) { /* parse_int (e < 0) has said why */
            if (e > 0) fprintf(stderr, "falcon-scaling: %s %s: unknown name\n", a, v ? v : "(missing)");
            return 2;
        }
        i++;
    }
    fb_inputs data;
    if (fb_inputs_make(&data, o.T, o.H, o.n, o.n, FALCON_FP32, falcon_variant_has_gain(o.cfg.variant))) {
        fprintf(stderr, "falcon-scaling: out of memory\n");
        return 2;
    }
    const falcon_inputs in = fb_inputs_view(&data, o.cfg.variant);
    if (falcon_validate(&o.cfg, &in, NULL)) {
        fprintf(stderr, "falcon-scaling: %s\n", falcon_last_error());
        return 2;
    }
    const falcon_backend be = falcon_backend_resolve(o.cfg.backend);
    printf("falcon-scaling: %s %s %s fp32, T = %lld, %lld heads, n = m = %lld, 1 vs %d threads (%d CPUs online); "
           "%d rounds of %d calls (best call per round)\n",
           falcon_form_name(o.cfg.form), falcon_variant_name(o.cfg.variant), falcon_backend_name(be), (long long)o.T,
           (long long)o.H, (long long)o.n, o.threads, (int)sysconf(_SC_NPROCESSORS_ONLN), o.rounds, o.calls);
    printf("%5s %10s %10s %8s %10s %10s\n", "round", "t1 (ms)", "tP (ms)", "t1/tP", "host", "ratio");
    double *sp = malloc(sizeof(double) * (size_t)o.rounds * 3), *host = sp + o.rounds, *eff = host + o.rounds;
    if (!sp) return 2;
    best_call(&o, &in, o.threads, data.out); /* warm up: pages, thread pool */
    for (int r = 0; r < o.rounds; r++) {
        const double t1 = best_call(&o, &in, 1, data.out), tp = best_call(&o, &in, o.threads, data.out);
        const double alone = together(&o, &in, 1, data.out), all = together(&o, &in, o.threads, data.out);
        if (t1 < 0 || tp < 0 || alone < 0 || all < 0) {
            fprintf(stderr, "falcon-scaling: a run failed\n");
            return 1;
        }
        sp[r] = t1 / tp;
        host[r] = o.threads * alone / all;
        eff[r] = sp[r] / host[r];
        printf("%5d %10.2f %10.2f %8.2f %10.2f %10.2f\n", r + 1, 1e3 * t1, 1e3 * tp, sp[r], host[r], eff[r]);
        fflush(stdout);
    }
    printf("median: speed-up %.2f on %d threads; the host let %d processes do %.2f times the work of one; "
           "speed-up / host %.2f\n",
           median(sp, o.rounds), o.threads, o.threads, median(host, o.rounds), median(eff, o.rounds));
    free(sp);
    fb_inputs_free(&data);
    return 0;
}
