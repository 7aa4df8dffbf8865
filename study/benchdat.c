/*
 * `falcon-study bench-dat BENCH.json --out DIR` (build/falcon-study; what
 * plots/plot-all.sh runs before plots/bench.gp): Google Benchmark JSON from
 * build/falcon-bench (case names form/variant/backend/precision/T:../n:../
 * m:..[/C:..][/W:..]/heads:../threads:..) as whitespace-separated files for
 * gnuplot (plots/bench-*.gp):
 *   DIR/cases.dat          one row per case: its parameters and the medians
 *                          of tokens_per_second, GFLOPS and peak_fraction
 *   DIR/<X>/<rest>.dat     one-axis sweeps, X in T, n, C, threads: the cases
 *                          equal in every other parameter, sorted by X
 *                          (file name: the other parameters, '_'-separated);
 *                          a C sweep's header names the default chunk size
 *                          of its shape ("# auto_C 16", falcon_chunk_auto)
 *   DIR/blas.dat           the yardstick's entries (blas/sgemm|dgemm/chunk-shapes/
 *                          n:../m:../C:../threads:1, blas/.../square/n:..):
 *                          precision n m C (0: square) and the medians of
 *                          GFLOPS and peak_fraction ("BLAS-achievable")
 * The median of a case is Google Benchmark's "median" aggregate (what
 * `make bench` writes, with repetitions), else the median of its iteration
 * runs, as `falcon compare` takes it. JSON is read with util/json.h, the
 * reader `falcon compare` uses too (tools-level code, not the benchmark's).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../util/json.h" /* the tools' JSON reader (benchmark files hold NaN) */
#include "../util/opts.h"
#include "stability.h"
#include "study.h"

enum { P_T, P_N, P_M, P_C, P_W, P_HEADS, P_THREADS, NPARAM };
static const char *const param_key[NPARAM] = {"T", "n", "m", "C", "W", "heads", "threads"};
enum { TOK, GFLOPS, PEAK, NMETRIC };
static const char *const metric_key[NMETRIC] = {"tokens_per_second", "GFLOPS", "peak_fraction"};

typedef struct bcase {
    char form[16], variant[16], backend[16], prec[8];
    long long p[NPARAM]; /* 0 when absent (C, W) */
    double median[NMETRIC], *samples[NMETRIC];
    int nsamples, has_median, failed;
} bcase;

/* form/variant/backend/precision/key:value/...; 0 if the name parses. */
static int parse_name(const char *name, bcase *c)
{
    char buf[256], *save = NULL;
    /* decay/<regime>/<case> and backward/<case>: the benchmark's decay and
     * backward entries, tables and a plot of the report's own
     * (verify/tools/report.sh), not points of these sweeps */
    if (strlen(name) >= sizeof buf || !strncmp(name, "decay/", 6) || !strncmp(name, "backward/", 9)) return -1;
    strcpy(buf, name);
    char *tok[4];
    for (int i = 0; i < 4; i++)
        if (!(tok[i] = strtok_r(i ? NULL : buf, "/", &save)) || strlen(tok[i]) >= 16) return -1;
    snprintf(c->form, sizeof c->form, "%s", tok[0]), snprintf(c->variant, sizeof c->variant, "%s", tok[1]);
    snprintf(c->backend, sizeof c->backend, "%s", tok[2]), snprintf(c->prec, sizeof c->prec, "%s", tok[3]);
    for (char *t; (t = strtok_r(NULL, "/", &save));) {
        char *colon = strchr(t, ':');
        if (!colon) continue; /* e.g. real_time: Google Benchmark's own marks */
        *colon = 0;
        for (int k = 0; k < NPARAM; k++)
            if (!strcmp(t, param_key[k])) c->p[k] = atoll(colon + 1);
    }
    return c->p[P_T] > 0 && c->p[P_N] > 0 ? 0 : -1;
}

/* blas/sgemm|dgemm/chunk-shapes|square/key:value/...: the yardstick's
 * entries, kept as cases of form "blas", backend the shape kind; 0 if it parses. */
static int parse_blas(const char *name, bcase *c)
{
    char buf[256], *save = NULL;
    if (strncmp(name, "blas/", 5) || strlen(name) >= sizeof buf) return -1;
    strcpy(buf, name);
    char *tok[3];
    for (int i = 0; i < 3; i++)
        if (!(tok[i] = strtok_r(i ? NULL : buf, "/", &save)) || strlen(tok[i]) >= 16) return -1;
    snprintf(c->form, sizeof c->form, "blas"), snprintf(c->variant, sizeof c->variant, "%s", tok[1]);
    snprintf(c->backend, sizeof c->backend, "%s", tok[2]);
    snprintf(c->prec, sizeof c->prec, "%s", !strcmp(tok[1], "dgemm") ? "fp64" : "fp32");
    for (char *t; (t = strtok_r(NULL, "/", &save));) {
        char *colon = strchr(t, ':');
        if (!colon) continue;
        *colon = 0;
        for (int k = 0; k < NPARAM; k++)
            if (!strcmp(t, param_key[k])) c->p[k] = atoll(colon + 1);
    }
    if (!c->p[P_M]) c->p[P_M] = c->p[P_N];
    return c->p[P_N] > 0 ? 0 : -1;
}

static int same_case(const bcase *a, const bcase *b)
{
    return !strcmp(a->form, b->form) && !strcmp(a->variant, b->variant) && !strcmp(a->backend, b->backend) &&
           !strcmp(a->prec, b->prec) && !memcmp(a->p, b->p, sizeof a->p);
}

/* Cases by their parameters: an open-addressing table of indices into the
 * case array, so that an entry finds its case in O(1) rather than by a scan
 * of every case read so far (quadratic: 20,000 cases took minutes). */
typedef struct case_table {
    int *slot; /* index into the cases, -1 if empty */
    size_t mask;
} case_table;

/* Over what same_case compares: the strings up to their ends (the bytes
 * past them may differ) and the parameters. */
static uint64_t case_hash(const bcase *c)
{
    const char *const s[] = {c->form, c->variant, c->backend, c->prec};
    uint64_t h = STUDY_FNV_BASIS;
    for (int i = 0; i < 4; i++) h = study_fnv1a(h, s[i], strlen(s[i]) + 1);
    return study_fnv1a(h, c->p, sizeof c->p);
}

/* Room for `most` cases at half load at most; 0, or -1 without memory. */
static int table_init(case_table *t, size_t most)
{
    size_t cap = 16;
    while (cap < 2 * most) cap *= 2;
    t->mask = cap - 1;
    if (!(t->slot = malloc(sizeof *t->slot * cap))) return -1;
    memset(t->slot, 0xff, sizeof *t->slot * cap); /* every slot -1 */
    return 0;
}

/* The index of c's case, appended to cs (at *nc) when it is new: cases keep
 * the order of their first entry, which the tables follow. */
static int table_find_or_add(case_table *t, bcase *cs, int *nc, const bcase *c)
{
    size_t i = (size_t)case_hash(c) & t->mask;
    while (t->slot[i] >= 0 && !same_case(&cs[t->slot[i]], c)) i = (i + 1) & t->mask;
    if (t->slot[i] < 0) cs[*nc] = *c, t->slot[i] = (*nc)++;
    return t->slot[i];
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = v[i];
    if (!k) return NAN;
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

/* The file name of case c in sweep `axis`: every other parameter. */
static void sweep_key(const bcase *c, int axis, char *buf, size_t len)
{
    int at = snprintf(buf, len, "%s_%s_%s_%s", c->form, c->variant, c->backend, c->prec);
    static const char *const tag[NPARAM] = {"T", "n", "m", "C", "W", "h", "p"};
    for (int k = 0; k < NPARAM && at > 0 && (size_t)at < len; k++)
        if (k != axis && k != P_M && k != P_W && c->p[k])
            at += snprintf(buf + at, len - (size_t)at, "_%s%lld", tag[k], c->p[k]);
}

static int by_axis;
static int cmp_axis(const void *a, const void *b)
{
    const bcase *x = *(bcase *const *)a, *y = *(bcase *const *)b;
    return (x->p[by_axis] > y->p[by_axis]) - (x->p[by_axis] < y->p[by_axis]);
}

/* A case of a sweep: its file name and its index. Sorted by name, then
 * index, equal names are adjacent and in the order the cases were read. */
typedef struct keyed {
    char key[256];
    int i;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    const int c = strcmp(x->key, y->key);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* A sweep: the run of keyed entries [from, to) it holds and the case that
 * opens it, whose index orders the sweeps (their files are written in the
 * order of their first case, as the report set's record lists them). */
typedef struct sweep {
    int first, from, to;
} sweep;

static int cmp_sweep(const void *a, const void *b)
{
    const sweep *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* A case may open a sweep of `axis` (a failed one is in none; one without
 * C opens no C sweep, though it joins one opened before it). */
static int opens_sweep(const bcase *c, int axis)
{
    return !(axis == P_C && !c->p[P_C]) && strcmp(c->form, "blas");
}

/* The sweeps of `axis`, in the order of their first case: each holds the
 * cases with its file name from the first that may open it on. Sorting by
 * name makes this O(N log N); a scan of the later cases per sweep was
 * quadratic. *nsw sweeps into sw (room for nc), whose runs index ks. */
static void find_sweeps(const bcase *cs, int nc, int axis, keyed *ks, sweep *sw, int *nsw)
{
    int nk = 0;
    for (int i = 0; i < nc; i++)
        if (!cs[i].failed) sweep_key(&cs[i], axis, ks[nk].key, sizeof ks[nk].key), ks[nk++].i = i;
    qsort(ks, (size_t)nk, sizeof *ks, cmp_keyed);
    *nsw = 0;
    for (int a = 0, b; a < nk; a = b) {
        int open = -1;
        for (b = a; b < nk && !strcmp(ks[b].key, ks[a].key); b++)
            if (open < 0 && opens_sweep(&cs[ks[b].i], axis)) open = b;
        if (open >= 0) sw[(*nsw)++] = (sweep){ks[open].i, open, b};
    }
    qsort(sw, (size_t)*nsw, sizeof *sw, cmp_sweep);
}

/* One sweep's file: its cases sorted by the axis' value. They go into the
 * sort in the order they were read: qsort is not stable, and cases apart
 * only in m or W tie, so another order could swap their rows. */
static int write_sweep(const char *dir, const keyed *ks, const sweep *w, bcase *cs, bcase **grp, int axis)
{
    char path[4096], name[300];
    const char *key = ks[w->from].key;
    int ng = 0;
    for (int k = w->from; k < w->to; k++) grp[ng++] = &cs[ks[k].i];
    by_axis = axis;
    qsort(grp, (size_t)ng, sizeof *grp, cmp_axis);
    if (ng < 2 && axis != P_T) return 0; /* not a sweep (every case shows in the T plot) */
    snprintf(name, sizeof name, "%s.dat", key);
    FILE *f = study_open(dir, name, path, sizeof path);
    if (!f) return -1;
    fprintf(f, "# %s: %s tokens_per_second GFLOPS peak_fraction (medians)\n", key, param_key[axis]);
    /* The chunk sweep is read against the library's default, which is
     * not the benchmark's base C but the model's pick for the shape. */
    if (axis == P_C) {
        const bcase *c = &cs[w->first];
        fprintf(f, "# auto_C %lld (falcon_chunk_auto of n, m, W: the default chunk size)\n",
                (long long)falcon_chunk_auto(c->p[P_N], c->p[P_M], c->p[P_W] ? c->p[P_W] : 1));
    }
    for (int g = 0; g < ng; g++)
        fprintf(f, "%lld %.6g %.6g %.6g\n", grp[g]->p[axis], grp[g]->median[TOK], grp[g]->median[GFLOPS],
                grp[g]->median[PEAK]);
    return study_close(f);
}

static int write_sweeps(const char *out, bcase *cs, int nc, int axis, const char *dirname)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", out, dirname);
    if (study_mkdir(dir)) return -1;
    keyed *ks = malloc(sizeof *ks * ((size_t)nc + 1));
    sweep *sw = malloc(sizeof *sw * ((size_t)nc + 1));
    bcase **grp = malloc(sizeof *grp * ((size_t)nc + 1));
    int nsw = 0, rc = !ks || !sw || !grp ? -1 : 0;
    if (!rc) find_sweeps(cs, nc, axis, ks, sw, &nsw);
    for (int w = 0; w < nsw && !rc; w++) rc = write_sweep(dir, ks, &sw[w], cs, grp, axis);
    free(ks), free(sw), free(grp);
    return rc;
}

int falcon_benchdat_main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    static const opt_def defs[] = {{"out", 'o', 1}, {"help", 'h', 0}, {NULL, 0, 0}};
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon-study bench-dat", defs, OPT_POSITIONALS);
    for (int id; (id = opt_next(&sc)) != OPT_END;) {
        if (id == OPT_ERROR) return CLI_FAIL;
        if (id == 'h') {
            printf("usage: falcon-study bench-dat BENCH.json --out DIR\n"
                   "Google Benchmark JSON (build/falcon-bench) to gnuplot data: DIR/cases.dat and the\n"
                   "one-axis sweeps DIR/{T,n,C,threads}/*.dat (medians of tokens/s, GFLOPS, peak\n"
                   "fraction), and DIR/blas.dat, the BLAS yardstick's entries (blas/...), which\n"
                   "plots/bench.gp draws (plots/plot-all.sh runs both).\n");
            return 0;
        }
        if (id == 'o') out = sc.value;
        else if (!in) in = sc.value;
        else return cli_error("unexpected argument '%s' (see falcon-study bench-dat --help)", sc.value);
    }
    if (!in || !out) {
        cli_error("bench-dat: need BENCH.json and --out DIR");
        return 2;
    }
    char err[512];
    static const char *const tables[] = {"cases.dat", "blas.dat", NULL};
    /* the JSON is an input of the set: no table may replace it */
    if (study_reports_input("BENCH.json", in) || study_reports_check(out, "bench-dat", tables)) {
        study_reports_end(0);
        return 2;
    }
    falcon_json *doc = falcon_json_parse_file(in, err, sizeof err);
    const falcon_json *list = doc ? falcon_json_get(doc, "benchmarks") : NULL;
    if (!list || list->type != FALCON_JSON_ARRAY) {
        cli_error("bench-dat: %s", doc ? "no \"benchmarks\" array" : err);
        falcon_json_free(doc);
        study_reports_end(0);
        return 2;
    }
    bcase *cs = calloc(list->count + 1, sizeof *cs);
    case_table table = {NULL, 0};
    int nc = 0, rc = cs && !table_init(&table, list->count + 1) ? 0 : 2, skipped = 0;
    for (size_t i = 0; i < list->count && !rc; i++) {
        const falcon_json *b = &list->items[i];
        const char *name = falcon_json_get_string(b, "run_name");
        if (!name) name = falcon_json_get_string(b, "name");
        bcase c;
        memset(&c, 0, sizeof c);
        if (!name || (parse_name(name, &c) && parse_blas(name, &c))) {
            skipped++;
            continue;
        }
        bcase *k = &cs[table_find_or_add(&table, cs, &nc, &c)];
        const falcon_json *e = falcon_json_get(b, "error_occurred");
        const char *type = falcon_json_get_string(b, "run_type"), *agg = falcon_json_get_string(b, "aggregate_name");
        if (e && e->type == FALCON_JSON_BOOL && e->boolean) {
            k->failed = 1;
        } else if (type && !strcmp(type, "aggregate")) {
            if (agg && !strcmp(agg, "median")) {
                k->has_median = 1;
                for (int m = 0; m < NMETRIC; m++) k->median[m] = falcon_json_get_number(b, metric_key[m], NAN);
            }
        } else {
            for (int m = 0; m < NMETRIC && !rc; m++) {
                double *s = realloc(k->samples[m], sizeof *s * (size_t)(k->nsamples + 1));
                if (!s) rc = 2;
                else (k->samples[m] = s)[k->nsamples] = falcon_json_get_number(b, metric_key[m], NAN);
            }
            k->nsamples++;
        }
    }
    falcon_json_free(doc);
    free(table.slot);
    for (int i = 0; i < nc; i++)
        if (!cs[i].has_median)
            for (int m = 0; m < NMETRIC; m++) cs[i].median[m] = median_of(cs[i].samples[m], cs[i].nsamples);
    char path[4096];
    FILE *f = !rc && !study_mkdir(out) ? study_open(out, "cases.dat", path, sizeof path) : NULL;
    if (!f) rc = 2;
    if (f) {
        fprintf(f, "# from %s (medians; NaN: absent or failed)\n# form variant backend precision T n m C W heads "
                   "threads tokens_per_second GFLOPS peak_fraction\n", in);
        for (int i = 0; i < nc; i++) {
            const bcase *c = &cs[i];
            if (!strcmp(c->form, "blas")) continue;
            fprintf(f, "%s %s %s %s", c->form, c->variant, c->backend, c->prec);
            for (int k = 0; k < NPARAM; k++) fprintf(f, " %lld", c->p[k]);
            for (int m = 0; m < NMETRIC; m++) fprintf(f, " %.6g", c->failed ? NAN : c->median[m]);
            fputc('\n', f);
        }
        if (study_close(f)) rc = 2;
    }
    FILE *fb = !rc ? study_open(out, "blas.dat", path, sizeof path) : NULL;
    if (!rc && !fb) rc = 2;
    if (fb) {
        fprintf(fb, "# from %s: OpenBLAS, 1 thread, on the GEMMs of one chunk block (C > 0) or a square product "
                    "(C = 0)\n# precision n m C GFLOPS peak_fraction (medians; NaN: absent or failed)\n", in);
        for (int i = 0; i < nc; i++)
            if (!strcmp(cs[i].form, "blas"))
                fprintf(fb, "%s %lld %lld %lld %.6g %.6g\n", cs[i].prec, cs[i].p[P_N], cs[i].p[P_M], cs[i].p[P_C],
                        cs[i].failed ? NAN : cs[i].median[GFLOPS], cs[i].failed ? NAN : cs[i].median[PEAK]);
        if (study_close(fb)) rc = 2;
    }
    static const int axes[] = {P_T, P_N, P_C, P_THREADS};
    static const char *const dirs[] = {"T", "n", "C", "threads"};
    for (int a = 0; a < 4 && !rc; a++)
        if (write_sweeps(out, cs, nc, axes[a], dirs[a])) rc = 2;
    if (study_reports_end(!rc)) rc = 2; /* the tables change together, or not at all */
    int nblas = 0;
    for (int i = 0; cs && i < nc; i++) {
        nblas += !strcmp(cs[i].form, "blas");
        for (int m = 0; m < NMETRIC; m++) free(cs[i].samples[m]);
    }
    free(cs);
    if (!rc)
        printf("bench-dat: %d cases and %d BLAS yardstick entries from %s into %s (%d entries neither)\n",
               nc - nblas, nblas, in, out, skipped);
    return rc;
}
