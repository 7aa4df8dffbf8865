/* `falcon verify`: the gate's case table on every backend, as a table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"

typedef struct cell {
    int cases, failed;
    double out_u, state_u, worst_ratio; /* max errors; max error/threshold */
} cell;

#define NB FALCON_BACKEND_COUNT /* >= gate_backend_count */
#define NF 3
#define NP 2
#define NV 6

static void usage(FILE *f)
{
    fprintf(f, "usage: falcon verify [--profile quick|full] [--backend NAME] [--seeds N] [--verbose]\n"
               "                     [--shape T,n,m]\n"
               "Runs the gate's case table against the MPFR reference and prints, per backend,\n"
               "precision, form and variant, the largest errors in units of roundoff.\n"
               "--shape replaces the table by one case per variant (with and without decay) of\n"
               "that size: a measurement, e.g. --shape 4096,64,64 (minutes: MPFR is slow).\n");
}

int falcon_gate_main(int argc, char **argv)
{
    int profile = 0, seeds = 1, verbose = 0, only = -1;
    long long shape[3] = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile") && i + 1 < argc) {
            const char *p = argv[++i];
            if (!strcmp(p, "quick")) profile = 0;
            else if (!strcmp(p, "full")) profile = 1;
            else { fprintf(stderr, "falcon: error: --profile %s: must be quick or full\n", p); return 2; }
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            only = falcon_backend_parse(argv[++i]);
            if (only < 0 || only == FALCON_BACKEND_MPFR || only == FALCON_BACKEND_AUTO) {
                fprintf(stderr, "falcon: error: --backend %s: not a kernel backend\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
            char *end;
            long s = strtol(argv[++i], &end, 10);
            if (*end || s < 1 || s > 100000) { fprintf(stderr, "falcon: error: --seeds %s: must be an integer in [1, 100000]\n", argv[i]); return 2; }
            seeds = (int)s;
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            char tail;
            if (sscanf(argv[++i], "%lld,%lld,%lld%c", &shape[0], &shape[1], &shape[2], &tail) != 3 ||
                shape[0] < 1 || shape[0] > 100000000 || shape[1] < 1 || shape[1] > FALCON_MAX_DIM ||
                shape[2] < 1 || shape[2] > FALCON_MAX_DIM) {
                fprintf(stderr, "falcon: error: --shape %s: must be T,n,m with T >= 1 and 1 <= n, m <= %d\n",
                        argv[i], FALCON_MAX_DIM);
                return 2;
            }
        } else if (!strcmp(argv[i], "--verbose")) {
            verbose = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "falcon: error: verify: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    gate_case *cases;
    int ncase = shape[0] ? gate_cases_shape(shape[0], shape[1], shape[2], &cases) : gate_cases(profile, &cases);
    if (ncase < 0) return 2;
    static cell cells[NB][NP][NF][NV];
    memset(cells, 0, sizeof cells);
    int skipped[NB] = {0};
    for (int b = 0; b < gate_backend_count; b++)
        skipped[b] = (only >= 0 && (int)gate_backends[b] != only) || !falcon_backend_available(gate_backends[b]);

    for (int s = 0; s < seeds; s++)
        for (int ci = 0; ci < ncase; ci++) {
            gate_case c = cases[ci];
            c.seed += (uint64_t)s * 100003u;
            for (int p = 0; p < NP; p++) {
                gate_data d;
                gate_result ref;
                if (gate_data_make(&c, (falcon_precision)p, &d)) return 2;
                if (gate_reference(&c, &d, &ref)) {
                    fprintf(stderr, "falcon: error: reference failed: %s\n", falcon_last_error());
                    return 2;
                }
                for (int b = 0; b < gate_backend_count; b++) {
                    if (skipped[b] || !gate_backend_runs(gate_backends[b], (falcon_precision)p)) continue;
                    for (int f = 0; f < NF; f++) {
                        gate_result r;
                        cell *x = &cells[b][p][f][c.variant];
                        falcon_status st = gate_run(&c, &d, (falcon_form)f, gate_backends[b], NULL, &r);
                        const double thr = gate_threshold(&c, (falcon_form)f, (falcon_precision)p);
                        const double thr_out = gate_threshold_out(&c, (falcon_form)f, (falcon_precision)p, ref.read_cond);
                        gate_errors e = {INFINITY, INFINITY};
                        if (!st) {
                            e = gate_compare(&r, &ref, (falcon_precision)p);
                            gate_result_free(&r);
                        }
                        /* Worst of the two errors, each against its own threshold. */
                        const double ratio = e.out_u / thr_out > e.state_u / thr ? e.out_u / thr_out : e.state_u / thr;
                        x->cases++;
                        if (!(ratio <= 1)) x->failed++;
                        if (e.out_u > x->out_u) x->out_u = e.out_u;
                        if (e.state_u > x->state_u) x->state_u = e.state_u;
                        if (ratio > x->worst_ratio) x->worst_ratio = ratio;
                        if (verbose || !(ratio <= 1)) {
                            char desc[256];
                            gate_case_describe(&c, desc, sizeof desc);
                            printf("%-6s %s %-9s %s: out %.3g u (threshold %.3g, read cond %.3g), S %.3g u (threshold %.3g)%s%s%s\n",
                                   falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
                                   falcon_form_name((falcon_form)f), desc, e.out_u, thr_out, ref.read_cond,
                                   e.state_u, thr, ratio <= 1 ? "" : "  FAIL", st ? ": " : "",
                                   st ? falcon_last_error() : "");
                        }
                    }
                }
                gate_result_free(&ref);
                gate_data_free(&d);
            }
        }
    free(cases);

    int failed = 0;
    printf("\n%-12s %-5s %-10s %-9s %6s %12s %12s %10s  %s\n", "backend", "prec", "form", "variant",
           "cases", "max out (u)", "max S (u)", "max/thr", "result");
    for (int b = 0; b < gate_backend_count; b++) {
        if (skipped[b]) {
            if (only < 0 || (int)gate_backends[b] == only)
                printf("%-12s skipped: %s\n", falcon_backend_name(gate_backends[b]),
                       falcon_backend_describe(gate_backends[b]));
            continue;
        }
        for (int p = 0; p < NP; p++) {
            if (!gate_backend_runs(gate_backends[b], (falcon_precision)p)) {
                printf("%-12s %-5s skipped: the backend computes in fp32 only\n",
                       falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p));
                continue;
            }
            for (int f = 0; f < NF; f++)
                for (int v = 0; v < NV; v++) {
                    cell *x = &cells[b][p][f][v];
                    failed += x->failed;
                    printf("%-12s %-5s %-10s %-9s %6d %12.3g %12.3g %10.3f  %s\n",
                           falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
                           falcon_form_name((falcon_form)f), falcon_variant_name((falcon_variant)v), x->cases,
                           x->out_u, x->state_u, x->worst_ratio, x->failed ? "FAIL" : "pass");
                }
        }
    }
    printf("\ngate (%s, %d seed%s): %s\n", shape[0] ? "--shape" : profile ? "full profile" : "quick profile", seeds, seeds > 1 ? "s" : "",
           failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
