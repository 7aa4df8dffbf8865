/* `falcon verify`: the gate's case table on every backend, as a table (and
 * with --json, as a JSON file); --variant/--form/--precision/--backend keep
 * a part of it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gate.h"
#include "grad-gate.h"
#include "../util/opts.h"
#include "falcon_io.h"

typedef struct cell {
    int cases, failed;
    double out_u, state_u, worst_ratio; /* max errors; max error/threshold */
} cell;

#define NB FALCON_BACKEND_ROWS /* >= gate_backend_count */
#define NF 3
#define NP GATE_PRECISION_COUNT
#define NV 6

/* "{scalar,avx2,...}": the kernel backends --backend takes. */
static const char *backend_choices(char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "{");
    for (int b = 0; b < gate_backend_count && used < size; b++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", b ? "," : "", falcon_backend_name(gate_backends[b]));
    if (used < size) snprintf(buf + used, size - used, "}");
    return buf;
}

static void usage(FILE *f)
{
    char list[160];
    fprintf(f, "usage: falcon verify [--profile quick|full] [--backend B] [--variant V]\n"
               "                     [--form F] [--precision P] [--seeds N] [--shape T,n,m]\n"
               "                     [--json FILE] [--verbose] [--grad]\n"
               "Runs the gate's case table against the MPFR reference and prints, per backend,\n"
               "precision, form and variant, the largest errors in units of roundoff; exits 1\n"
               "if a case is over its threshold. The quick profile is the default; --profile\n"
               "full is the whole table (what `make check` runs through falcon-verify).\n"
               "  --backend %s\n"
               "  --variant {falcon1,falcon2,falcon3,falcon1a,falcon2a,falcon3a}\n"
               "  --form {recurrent,chunk,parallel}   --precision {fp32,fp64,tf32,bf16}\n"
               "                only that part of the table (default: all of it)\n"
               "  --seeds N     each case with N seeds (default 1)\n"
               "  --shape T,n,m one case per variant (with and without decay) of that size\n"
               "                instead of the table: a measurement, e.g. 4096,64,64 (minutes:\n"
               "                MPFR is slow)\n"
               "  --json FILE   also write the table (and the skipped backends) as JSON\n"
               "  --verbose     print every case, not only the failing ones\n"
               "  --grad        the gradient gate instead: every gradient of the backward pass\n"
               "                (falcon_backward) against the MPFR reverse sweep, fp32 and fp64;\n"
               "                the columns are then the largest error of any gradient and of\n"
               "                dS0; a form without a backward pass in this build is skipped\n",
            backend_choices(list, sizeof list));
}

/* A name option's value: its enum value, or -1 after the error. */
static int enum_value(const char *opt, const char *text, int (*parse)(const char *), const char *list)
{
    const int v = parse(text);
    if (v < 0) cli_error("%s: unknown value '%s' (choose one of %s)", opt, text, list);
    return v;
}

/* JSON string contents: quotes, backslashes and control characters escaped. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

/* A number, or null for a NaN or infinity (a case that did not run). */
static void json_number(FILE *f, double x)
{
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

/* The command's options; -1: no filter. */
typedef struct gate_opts {
    int profile, seeds, verbose, only, only_variant, only_form, only_prec;
    int grad; /* --grad: the gradient gate (grad-gate.h) */
    const char *json;
    long long shape[3]; /* --shape T,n,m; T = 0: the profile's table */
} gate_opts;

/* The backends (and backend x precision pairs) the table leaves out, with why. */
typedef struct gate_skips {
    int n;
    char backend[NB * NP][32], why[NB * NP][512];
} gate_skips;

/* Parses argv into o: -1 to run, else the exit status (0 after --help). */
static int parse_options(int argc, char **argv, gate_opts *o)
{
    char list[160];
    static const opt_def defs[] = {
        {"profile", 'p', 1}, {"backend", 'b', 1}, {"variant", 'v', 1}, {"form", 'f', 1}, {"precision", 'P', 1},
        {"json", 'j', 1}, {"seeds", 's', 1}, {"shape", 'S', 1}, {"verbose", 'V', 0}, {"grad", 'g', 0},
        {"help", 'h', 0},
        {NULL, 0, 0}};
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon verify", defs, 0);
    for (int id; (id = opt_next(&sc)) != OPT_END;) {
        const char *val = sc.value;
        switch (id) {
        case OPT_ERROR:
            return CLI_FAIL;
        case 'p':
            if (!strcmp(val, "quick")) o->profile = 0;
            else if (!strcmp(val, "full")) o->profile = 1;
            else return cli_error("--profile: unknown value '%s' (choose one of {quick,full})", val);
            break;
        case 'b':
            backend_choices(list, sizeof list);
            o->only = falcon_backend_parse(val);
            if (o->only == FALCON_BACKEND_MPFR || o->only == FALCON_BACKEND_AUTO)
                return cli_error("--backend: '%s' is not a kernel backend (choose one of %s)", val, list);
            if (o->only < 0) return cli_error("--backend: unknown value '%s' (choose one of %s)", val, list);
            break;
        case 'v':
            if ((o->only_variant = enum_value("--variant", val, falcon_variant_parse,
                                              "{falcon1,falcon2,falcon3,falcon1a,falcon2a,falcon3a}")) < 0) return 2;
            break;
        case 'f':
            if ((o->only_form = enum_value("--form", val, falcon_form_parse, "{recurrent,chunk,parallel}")) < 0) return 2;
            break;
        case 'P':
            if ((o->only_prec = enum_value("--precision", val, falcon_precision_parse, "{fp32,fp64,tf32,bf16}")) < 0)
                return 2;
            break;
        case 'j':
            if (!*val) return cli_error("--json: the path is empty");
            o->json = val;
            break;
        case 's': {
            char *end;
            long n = strtol(val, &end, 10);
            if (*end || end == val || n < 1 || n > 100000)
                return cli_error("--seeds: '%s' must be an integer in [1, 100000]", val);
            o->seeds = (int)n;
            break;
        }
        case 'S': {
            char tail;
            long long *shape = o->shape;
            if (sscanf(val, "%lld,%lld,%lld%c", &shape[0], &shape[1], &shape[2], &tail) != 3 ||
                shape[0] < 1 || shape[0] > 100000000 || shape[1] < 1 || shape[1] > FALCON_MAX_DIM ||
                shape[2] < 1 || shape[2] > FALCON_MAX_DIM)
                return cli_error("--shape: '%s' must be T,n,m with T >= 1 and 1 <= n, m <= %d", val, FALCON_MAX_DIM);
            break;
        }
        case 'V':
            o->verbose = 1;
            break;
        case 'g':
            o->grad = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        }
    }
    return -1;
}

/* One case in precision p on every backend and form the options keep,
 * against its reference: each result into its cell, a line for each
 * failure (every case with --verbose). */
static void run_backends(const gate_opts *o, const gate_case *c, const gate_data *d, const gate_result *ref,
                         falcon_precision p, const int *skipped, cell cells[NB][NP][NF][NV])
{
    for (int b = 0; b < gate_backend_count; b++) {
        if (skipped[b] || !gate_backend_runs(gate_backends[b], p)) continue;
        for (int f = 0; f < NF; f++) {
            if ((o->only_form >= 0 && f != o->only_form) || !gate_form_runs((falcon_form)f, p)) continue;
            gate_result r;
            cell *x = &cells[b][p][f][c->variant];
            falcon_status st = gate_run(c, d, (falcon_form)f, gate_backends[b], NULL, &r);
            const double thr = gate_threshold(c, (falcon_form)f, p);
            const double thr_out = gate_threshold_out(c, (falcon_form)f, p, ref->read_cond);
            gate_errors e = {INFINITY, INFINITY};
            if (!st) {
                e = gate_compare(&r, ref, p);
                gate_result_free(&r);
            }
            /* Worst of the two errors, each against its own threshold. */
            const double ratio = e.out_u / thr_out > e.state_u / thr ? e.out_u / thr_out : e.state_u / thr;
            x->cases++;
            if (!(ratio <= 1)) x->failed++;
            if (e.out_u > x->out_u) x->out_u = e.out_u;
            if (e.state_u > x->state_u) x->state_u = e.state_u;
            if (ratio > x->worst_ratio) x->worst_ratio = ratio;
            if (o->verbose || !(ratio <= 1)) {
                char desc[256];
                gate_case_describe(c, desc, sizeof desc);
                printf("%-6s %s %-9s %s: out %.3g u (threshold %.3g, read cond %.3g), S %.3g u (threshold %.3g)%s%s%s\n",
                       falcon_backend_name(gate_backends[b]), falcon_precision_name(p), falcon_form_name((falcon_form)f),
                       desc, e.out_u, thr_out, ref->read_cond, e.state_u, thr, ratio <= 1 ? "" : "  FAIL",
                       st ? ": " : "", st ? falcon_last_error() : "");
            }
        }
    }
}

/* One gradient case in precision p on every backend and form the options
 * keep: each result into its cell (out_u: the worst gradient, state_u:
 * dS0), a line for each failure. A form whose backward pass the build
 * lacks (FALCON_E_UNAVAILABLE) is left out of the cells. */
static void run_grad_backends(const gate_opts *o, const gate_grad_case *g, const gate_data *d,
                              const gate_cotangents *ct, const falcon_state *st, const gate_grad_result *ref,
                              falcon_precision p, const int *skipped, cell cells[NB][NP][NF][NV])
{
    for (int b = 0; b < gate_backend_count; b++) {
        if (skipped[b] || !gate_backend_runs(gate_backends[b], p) || gate_backends[b] == FALCON_BACKEND_CUDA) continue;
        for (int f = 0; f < NF; f++) {
            if ((o->only_form >= 0 && f != o->only_form) || !gate_form_runs((falcon_form)f, p)) continue;
            gate_grad_result r;
            const falcon_status s = gate_grad_run(g, d, ct, (falcon_form)f, gate_backends[b], st, &r);
            if (s == FALCON_E_UNAVAILABLE) continue;
            double err[GG_COUNT], worst = 0, ratio = 0;
            int worst_t = 0;
            if (!s) gate_grad_compare(&r, ref, p, err);
            for (int t = 0; t < GG_COUNT; t++) {
                if (!ref->count[t]) continue;
                const double e = s ? INFINITY : err[t];
                const double q = e / gate_grad_threshold(&g->c, (falcon_form)f, p, t, ref->cond[t]);
                if (!(q <= ratio)) ratio = q, worst_t = t;
                if (!(e <= worst)) worst = e;
            }
            cell *x = &cells[b][p][f][g->c.variant];
            x->cases++;
            if (!(ratio <= 1)) x->failed++;
            if (!(worst <= x->out_u)) x->out_u = worst;
            if (!s && err[GG_DS0] > x->state_u) x->state_u = err[GG_DS0];
            if (!(ratio <= x->worst_ratio)) x->worst_ratio = ratio;
            if (o->verbose || !(ratio <= 1)) {
                char desc[256];
                gate_case_describe(&g->c, desc, sizeof desc);
                printf("%-6s %s %-9s %s carried=%lld: worst %s at %.3g of its threshold%s%s%s\n",
                       falcon_backend_name(gate_backends[b]), falcon_precision_name(p),
                       falcon_form_name((falcon_form)f), desc, (long long)g->carried, gate_grad_name(worst_t), ratio,
                       ratio <= 1 ? "" : "  FAIL", s ? ": " : "", s ? falcon_last_error() : "");
            }
            if (!s) gate_grad_result_free(&r);
        }
    }
}

/* The gradient table, each seed and precision the options keep (fp32 and
 * fp64, and tf32 and bf16 for the chunk form), into cells: 0, or 2 with a
 * message. */
static int run_grad_cases(const gate_opts *o, const int *skipped, cell cells[NB][NP][NF][NV])
{
    gate_grad_case *cases;
    const int ncase = gate_grad_cases(o->profile, &cases);
    if (ncase < 0) return cli_error("verify: out of memory for the gradient case table");
    int rc = 0;
    for (int s = 0; s < o->seeds && !rc; s++)
        for (int ci = 0; ci < ncase && !rc; ci++) {
            gate_grad_case g = cases[ci];
            if (o->only_variant >= 0 && (int)g.c.variant != o->only_variant) continue;
            g.c.seed += (uint64_t)s * 100003u;
            for (int p = 0; p < NP && !rc; p++) {
                if (o->only_prec >= 0 && p != o->only_prec) continue;
                gate_data d;
                gate_cotangents ct;
                gate_grad_result ref;
                falcon_state *st = NULL;
                if (gate_data_make(&g.c, (falcon_precision)p, &d)) {
                    rc = cli_error("verify: out of memory for a case's inputs");
                    break;
                }
                if (gate_cotangents_make(&g.c, (falcon_precision)p, &ct) || gate_grad_state(&g, &d, &st) ||
                    gate_grad_reference(&g, &d, &ct, st, &ref))
                    rc = cli_error("verify: the reference of a gradient case failed: %s", falcon_last_error());
                else {
                    run_grad_backends(o, &g, &d, &ct, st, &ref, (falcon_precision)p, skipped, cells);
                    gate_grad_result_free(&ref);
                }
                falcon_state_free(st);
                gate_cotangents_free(&ct);
                gate_data_free(&d);
            }
        }
    free(cases);
    return rc;
}

/* Every case of the table, each seed and precision the options keep, into
 * cells: 0, or 2 with a message (no memory, a reference that failed). */
static int run_cases(const gate_opts *o, const gate_case *cases, int ncase, const int *skipped,
                     cell cells[NB][NP][NF][NV])
{
    for (int s = 0; s < o->seeds; s++)
        for (int ci = 0; ci < ncase; ci++) {
            gate_case c = cases[ci];
            if (o->only_variant >= 0 && (int)c.variant != o->only_variant) continue;
            c.seed += (uint64_t)s * 100003u;
            for (int p = 0; p < NP; p++) {
                if (o->only_prec >= 0 && p != o->only_prec) continue;
                gate_data d;
                gate_result ref;
                if (gate_data_make(&c, (falcon_precision)p, &d)) {
                    fprintf(stderr, "falcon: error: cannot make the inputs of a case (T %lld, n %lld, m %lld, %s): "
                            "out of memory\n", (long long)c.T, (long long)c.n, (long long)c.m,
                            falcon_precision_name((falcon_precision)p));
                    return 2;
                }
                if (gate_reference(&c, &d, &ref)) {
                    fprintf(stderr, "falcon: error: reference failed: %s\n", falcon_last_error());
                    gate_data_free(&d);
                    return 2;
                }
                run_backends(o, &c, &d, &ref, (falcon_precision)p, skipped, cells);
                gate_result_free(&ref);
                gate_data_free(&d);
            }
        }
    return 0;
}

/* The forward gate's table (or --shape's cases) into cells. */
static int run_table(const gate_opts *o, const int *skipped, cell cells[NB][NP][NF][NV])
{
    gate_case *cases;
    const long long *shape = o->shape;
    int ncase = shape[0] ? gate_cases_shape(shape[0], shape[1], shape[2], &cases) : gate_cases(o->profile, &cases);
    if (ncase < 0) return cli_error("verify: out of memory for the case table");
    const int rc = run_cases(o, cases, ncase, skipped, cells);
    free(cases);
    return rc;
}

/* The --json report's head, written to the transaction's temporary (its
 * slot): the stream, or NULL with a message. */
static FILE *json_begin(const gate_opts *o, falcon_outputs *tx, int slot)
{
    FILE *js = NULL;
    const int fd = dup(falcon_outputs_fd(tx, slot));
    if (fd < 0 || !(js = fdopen(fd, "w"))) {
        fprintf(stderr, "falcon: error: --json: '%s': cannot write it: %s\n", o->json, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    fprintf(js, "{\n  \"profile\": \"%s\",\n  \"seeds\": %d,\n  \"filters\": {",
            o->shape[0] ? "shape" : o->profile ? "full" : "quick", o->seeds);
    const char *fk[4] = {"backend", "variant", "form", "precision"};
    const char *fv[4] = {o->only >= 0 ? falcon_backend_name((falcon_backend)o->only) : NULL,
                         o->only_variant >= 0 ? falcon_variant_name((falcon_variant)o->only_variant) : NULL,
                         o->only_form >= 0 ? falcon_form_name((falcon_form)o->only_form) : NULL,
                         o->only_prec >= 0 ? falcon_precision_name((falcon_precision)o->only_prec) : NULL};
    for (int k = 0, first = 1; k < 4; k++)
        if (fv[k]) fprintf(js, "%s\"%s\": \"%s\"", first ? "" : ", ", fk[k], fv[k]), first = 0;
    fprintf(js, "},\n");
    if (o->shape[0]) fprintf(js, "  \"shape\": [%lld, %lld, %lld],\n", o->shape[0], o->shape[1], o->shape[2]);
    fprintf(js, "  \"units\": \"errors in units of roundoff of the run's precision\",\n  \"rows\": [");
    return js;
}

/* One row of the table (and of the JSON when js). */
static void print_cell(FILE *js, int *rows, int b, int p, int f, int v, const cell *x)
{
    printf("%-12s %-5s %-10s %-9s %6d %12.3g %12.3g %10.3f  %s\n", falcon_backend_name(gate_backends[b]),
           falcon_precision_name((falcon_precision)p), falcon_form_name((falcon_form)f),
           falcon_variant_name((falcon_variant)v), x->cases, x->out_u, x->state_u, x->worst_ratio,
           x->failed ? "FAIL" : "pass");
    if (!js) return;
    fprintf(js, "%s\n    {\"backend\": \"%s\", \"precision\": \"%s\", \"form\": \"%s\", "
                "\"variant\": \"%s\", \"cases\": %d, \"failed\": %d, \"max_out_u\": ",
            (*rows)++ ? "," : "", falcon_backend_name(gate_backends[b]), falcon_precision_name((falcon_precision)p),
            falcon_form_name((falcon_form)f), falcon_variant_name((falcon_variant)v), x->cases, x->failed);
    json_number(js, x->out_u);
    fputs(", \"max_state_u\": ", js);
    json_number(js, x->state_u);
    fputs(", \"max_ratio\": ", js);
    json_number(js, x->worst_ratio);
    fprintf(js, ", \"result\": \"%s\"}", x->failed ? "fail" : "pass");
}

/* The table, per backend, precision, form and variant (rows into js too),
 * and the skipped backends into sk: the count of failed cases. */
static int print_table(const gate_opts *o, const int *skipped, cell cells[NB][NP][NF][NV], FILE *js, gate_skips *sk)
{
    int failed = 0, rows = 0;
    printf("\n%-12s %-5s %-10s %-9s %6s %12s %12s %10s  %s\n", "backend", "prec", "form", "variant",
           "cases", o->grad ? "max grad (u)" : "max out (u)", o->grad ? "max dS0 (u)" : "max S (u)", "max/thr",
           "result");
    for (int b = 0; b < gate_backend_count; b++) {
        const char *name = falcon_backend_name(gate_backends[b]);
        if (skipped[b]) {
            if (o->only < 0 || (int)gate_backends[b] == o->only) {
                printf("%-12s skipped: %s\n", name, falcon_backend_describe(gate_backends[b]));
                snprintf(sk->backend[sk->n], sizeof sk->backend[0], "%s", name);
                snprintf(sk->why[sk->n++], sizeof sk->why[0], "%s", falcon_backend_describe(gate_backends[b]));
            }
            continue;
        }
        for (int p = 0; p < NP; p++) {
            if (o->only_prec >= 0 && p != o->only_prec) continue;
            if (!gate_backend_runs(gate_backends[b], (falcon_precision)p)) {
                printf("%-12s %-5s skipped: the backend computes in fp32 only\n", name,
                       falcon_precision_name((falcon_precision)p));
                snprintf(sk->backend[sk->n], sizeof sk->backend[0], "%s %s", name,
                         falcon_precision_name((falcon_precision)p));
                snprintf(sk->why[sk->n++], sizeof sk->why[0], "the backend computes in fp32 only");
                continue;
            }
            for (int f = 0; f < NF; f++)
                for (int v = 0; v < NV; v++) {
                    if ((o->only_form >= 0 && f != o->only_form) || (o->only_variant >= 0 && v != o->only_variant) ||
                        !gate_form_runs((falcon_form)f, (falcon_precision)p))
                        continue;
                    failed += cells[b][p][f][v].failed;
                    print_cell(js, &rows, b, p, f, v, &cells[b][p][f][v]);
                }
        }
    }
    printf("\n%s (%s, %d seed%s): %s\n", o->grad ? "gradient gate" : "gate",
           o->shape[0] ? "--shape" : o->profile ? "full profile" : "quick profile", o->seeds, o->seeds > 1 ? "s" : "",
           failed ? "FAILED" : "passed");
    return failed;
}

/* The JSON's tail, then the report committed: 0, or 2 with a message (the
 * transaction aborted). */
static int json_end(const gate_opts *o, FILE *js, falcon_outputs *tx, const gate_skips *sk, int failed)
{
    fprintf(js, "\n  ],\n  \"skipped\": [");
    for (int k = 0; k < sk->n; k++) {
        fprintf(js, "%s\n    {\"backend\": ", k ? "," : "");
        json_string(js, sk->backend[k]);
        fputs(", \"reason\": ", js);
        json_string(js, sk->why[k]);
        fputc('}', js);
    }
    fprintf(js, "%s],\n  \"passed\": %s\n}\n", sk->n ? "\n  " : "", failed ? "false" : "true");
    const int bad = ferror(js), closed = fclose(js);
    if (bad || closed != 0) {
        fprintf(stderr, "falcon: error: --json: '%s': cannot write it: %s\n", o->json, strerror(errno));
        falcon_outputs_abort(tx);
        return 2;
    }
    if (falcon_outputs_commit(tx)) {
        fprintf(stderr, "falcon: error: --json: %s\n", falcon_last_error());
        return 2;
    }
    return 0;
}

int falcon_gate_main(int argc, char **argv)
{
    gate_opts o = {.profile = 0, .seeds = 1, .only = -1, .only_variant = -1, .only_form = -1, .only_prec = -1};
    const int parsed = parse_options(argc, argv, &o);
    if (parsed >= 0) return parsed;
    if (o.only >= 0 && !falcon_backend_available((falcon_backend)o.only)) {
        fprintf(stderr, "falcon: error: --backend %s: is not available here: %s\n",
                falcon_backend_name((falcon_backend)o.only), falcon_backend_describe((falcon_backend)o.only));
        return 2;
    }
    /* --json is an output transaction, checked before any case runs: never a
     * directory, a device or a symlink to one, which a symlink to a file is
     * followed (src/outputs.c). */
    falcon_outputs *tx = NULL;
    int js_slot = -1;
    if (o.json) falcon_outputs_clean_on_signals(); /* a signal removes the report's temporary */
    if (o.json && (falcon_outputs_begin(&tx) || falcon_outputs_file(tx, "--json", o.json, &js_slot))) {
        fprintf(stderr, "falcon: error: --json: %s\n", falcon_last_error());
        falcon_outputs_abort(tx);
        return 2;
    }
    static cell cells[NB][NP][NF][NV];
    memset(cells, 0, sizeof cells);
    int skipped[NB] = {0};
    for (int b = 0; b < gate_backend_count; b++)
        skipped[b] = (o.only >= 0 && (int)gate_backends[b] != o.only) || !falcon_backend_available(gate_backends[b]);
    const int rc = o.grad ? run_grad_cases(&o, skipped, cells) : run_table(&o, skipped, cells);
    if (rc) {
        falcon_outputs_abort(tx);
        return rc;
    }
    /* The JSON goes to the transaction's temporary, committed when complete. */
    FILE *js = NULL;
    if (o.json && !(js = json_begin(&o, tx, js_slot))) {
        falcon_outputs_abort(tx);
        return 2;
    }
    static gate_skips sk;
    sk.n = 0;
    const int failed = print_table(&o, skipped, cells, js, &sk);
    if (js && json_end(&o, js, tx, &sk, failed)) return 2;
    return failed ? 1 : 0;
}
