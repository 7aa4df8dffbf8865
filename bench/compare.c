/*
 * compare.c: per case name, the median of tokens_per_second, GFLOPS and
 * peak_fraction in run A and run B, the ratio B/A of tokens/s, and the same
 * ratio by CPU time (A's cpu_time / B's).
 *
 * The median of a case is the "median" aggregate Google Benchmark writes
 * with --benchmark_repetitions (what `make bench` uses); without one, the
 * median of the case's iteration runs (a single run is its own median).
 * Failed runs (error_occurred) are listed as failed, not compared.
 * --out FILE writes the same figures as whitespace-separated columns for
 * gnuplot, one case per row, NaN where a side lacks the case. It is an
 * output transaction (falcon_outputs): its path is checked before the
 * inputs are read (never a device, a directory or one of the inputs; a
 * symlink is followed), it is written to a temporary file, fsynced and
 * renamed, and a signal or a failure leaves the old file as it was.
 * Cases are matched by name through a hash table: linear in the cases.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compare.h"
#include "falcon.h"
#include "json.h"

/* cpu_time: the main thread's CPU time per iteration. On a shared machine
 * the ratio of CPU times shows whether a change in tokens/s is the code or
 * the share of the CPU the run got (1-thread cases). */
enum { TOK, GFLOPS, PEAK, CPU, NMETRIC };
static const char *const metric_key[NMETRIC] = {"tokens_per_second", "GFLOPS", "peak_fraction", "cpu_time"};

typedef struct bench_row {
    char *name;
    double median[NMETRIC]; /* NaN when absent */
    double *samples[NMETRIC];
    size_t nsamples, cap;
    int has_median, failed;
} bench_row;

typedef struct bench_run {
    bench_row *rows;
    size_t count, cap;
    size_t *slots;   /* open addressing: row index + 1, 0 when free */
    size_t nslots;   /* a power of two, at least twice count */
} bench_run;

static size_t name_hash(const char *s)
{
    size_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot of `name` in r's table: where it is, or the free slot where it goes. */
static size_t *slot_of(const bench_run *r, const char *name)
{
    size_t i = name_hash(name) & (r->nslots - 1);
    while (r->slots[i] && strcmp(r->rows[r->slots[i] - 1].name, name) != 0) i = (i + 1) & (r->nslots - 1);
    return &r->slots[i];
}

static const bench_row *find_row(const bench_run *r, const char *name)
{
    if (!r->nslots) return NULL;
    const size_t at = *slot_of(r, name);
    return at ? &r->rows[at - 1] : NULL;
}

/* Room for one more name: the table doubles (and is rebuilt) when half full. */
static int grow_table(bench_run *r)
{
    if (2 * (r->count + 1) <= r->nslots) return 0;
    const size_t n = r->nslots ? 2 * r->nslots : 256;
    size_t *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    free(r->slots);
    r->slots = slots;
    r->nslots = n;
    for (size_t i = 0; i < r->count; i++) *slot_of(r, r->rows[i].name) = i + 1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, size_t n)
{
    size_t k = 0; /* NaNs (absent values) dropped */
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = v[i];
    if (!k) return NAN;
    qsort(v, k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

static bench_row *row_for(bench_run *r, const char *name)
{
    if (grow_table(r)) return NULL;
    size_t *slot = slot_of(r, name);
    if (*slot) return &r->rows[*slot - 1];
    if (r->count == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 64;
        bench_row *rows = realloc(r->rows, nc * sizeof *rows);
        if (!rows) return NULL;
        r->rows = rows;
        r->cap = nc;
    }
    bench_row *row = &r->rows[r->count];
    memset(row, 0, sizeof *row);
    if (!(row->name = strdup(name))) return NULL;
    for (int k = 0; k < NMETRIC; k++) row->median[k] = NAN;
    *slot = ++r->count;
    return row;
}

/* Metric k of one benchmark entry; cpu_time in seconds whatever its unit. */
static double metric(const falcon_json *b, int k)
{
    double v = falcon_json_get_number(b, metric_key[k], NAN);
    if (k != CPU) return v;
    const char *unit = falcon_json_get_string(b, "time_unit");
    double scale = !unit ? NAN : !strcmp(unit, "s") ? 1 : !strcmp(unit, "ms") ? 1e-3
                 : !strcmp(unit, "us") ? 1e-6 : !strcmp(unit, "ns") ? 1e-9 : NAN;
    return v * scale;
}

static int add_sample(bench_row *row, const falcon_json *b)
{
    if (row->nsamples == row->cap) {
        size_t nc = row->cap ? 2 * row->cap : 4;
        for (int k = 0; k < NMETRIC; k++) {
            double *s = realloc(row->samples[k], nc * sizeof *s);
            if (!s) return -1;
            row->samples[k] = s;
        }
        row->cap = nc;
    }
    for (int k = 0; k < NMETRIC; k++)
        row->samples[k][row->nsamples] = metric(b, k);
    row->nsamples++;
    return 0;
}

static void run_free(bench_run *r)
{
    for (size_t i = 0; i < r->count; i++) {
        free(r->rows[i].name);
        for (int k = 0; k < NMETRIC; k++) free(r->rows[i].samples[k]);
    }
    free(r->rows);
    free(r->slots);
}

/* Load one file into rows; 0, or 2 with a message. */
static int load(const char *path, bench_run *r)
{
    char err[512];
    falcon_json *doc = falcon_json_parse_file(path, err, sizeof err);
    if (!doc) {
        fprintf(stderr, "falcon compare: %s\n", err);
        return 2;
    }
    const falcon_json *list = falcon_json_get(doc, "benchmarks");
    if (!list || list->type != FALCON_JSON_ARRAY) {
        fprintf(stderr, "falcon compare: %s: not Google Benchmark JSON output (no \"benchmarks\" array)\n", path);
        falcon_json_free(doc);
        return 2;
    }
    int status = 0;
    for (size_t i = 0; i < list->count && !status; i++) {
        const falcon_json *b = &list->items[i];
        const char *run_name = falcon_json_get_string(b, "run_name");
        const char *name = run_name ? run_name : falcon_json_get_string(b, "name");
        if (b->type != FALCON_JSON_OBJECT || !name) {
            fprintf(stderr, "falcon compare: %s: benchmarks[%zu] is not an object with a \"name\"\n", path, i);
            status = 2;
            break;
        }
        const char *type = falcon_json_get_string(b, "run_type");
        const char *agg = falcon_json_get_string(b, "aggregate_name");
        const falcon_json *error = falcon_json_get(b, "error_occurred");
        bench_row *row = row_for(r, name);
        if (!row) {
            fprintf(stderr, "falcon compare: out of memory\n");
            status = 2;
        } else if (error && error->type == FALCON_JSON_BOOL && error->boolean) {
            row->failed = 1;
        } else if (type && strcmp(type, "aggregate") == 0) {
            if (agg && strcmp(agg, "median") == 0) {
                row->has_median = 1;
                for (int k = 0; k < NMETRIC; k++)
                    row->median[k] = metric(b, k);
            }
        } else if (add_sample(row, b)) {
            fprintf(stderr, "falcon compare: out of memory\n");
            status = 2;
        }
    }
    falcon_json_free(doc);
    for (size_t i = 0; i < r->count && !status; i++) {
        bench_row *row = &r->rows[i];
        if (!row->has_median)
            for (int k = 0; k < NMETRIC; k++) row->median[k] = median_of(row->samples[k], row->nsamples);
    }
    return status;
}

/* A number for the table: "-" when absent. */
static void cell(char *buf, size_t len, const char *fmt, double v)
{
    if (isnan(v)) snprintf(buf, len, "-");
    else snprintf(buf, len, fmt, v);
}

/* A data-file row's first two columns; whitespace in a name would shift
 * gnuplot's columns, so it becomes '_'. */
static void fputs_name(FILE *f, size_t i, const char *name)
{
    fprintf(f, "%zu ", i);
    for (const char *p = name; *p; p++) fputc(*p == ' ' || *p == '\t' || *p == '\n' ? '_' : *p, f);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: falcon compare A.json B.json [--out FILE]\n"
               "  A, B: Google Benchmark JSON from build/falcon-bench (--benchmark_format=json or\n"
               "  --benchmark_out); per case: median tokens/s of A and B, B/A, B/A by CPU time,\n"
               "  GFLOPS and peak fractions. --out FILE: the same as columns for gnuplot.\n");
}

int falcon_compare_main(int argc, char **argv)
{
    const char *file[2] = {NULL, NULL}, *out = NULL;
    int nfile = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strncmp(argv[i], "--out=", 6) == 0) {
            out = argv[i] + 6;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "falcon compare: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (nfile < 2) {
            file[nfile++] = argv[i];
        } else {
            fprintf(stderr, "falcon compare: more than two files ('%s')\n", argv[i]);
            return 2;
        }
    }
    if (nfile != 2) {
        usage(stderr);
        return 2;
    }

    /* The output first: a path it must not replace fails before anything is read. */
    falcon_outputs *tx = NULL;
    int slot = -1;
    if (out && (falcon_outputs_begin(&tx) || falcon_outputs_input(tx, "A", file[0]) ||
                falcon_outputs_input(tx, "B", file[1]) || falcon_outputs_file(tx, "--out", out, &slot))) {
        fprintf(stderr, "falcon compare: --out: %s\n", falcon_last_error());
        falcon_outputs_abort(tx);
        return 2;
    }
    if (tx) falcon_outputs_clean_on_signals();
    bench_run run[2] = {{0}, {0}};
    int status = load(file[0], &run[0]);
    if (!status) status = load(file[1], &run[1]);
    if (status) {
        run_free(&run[0]);
        run_free(&run[1]);
        falcon_outputs_abort(tx);
        return status;
    }

    /* Cases in A's order, then those only in B. */
    size_t total = run[0].count, width = 4;
    const bench_row **pa = calloc(run[0].count + run[1].count + 1, sizeof *pa);
    const bench_row **pb = calloc(run[0].count + run[1].count + 1, sizeof *pb);
    if (!pa || !pb) {
        free(pa), free(pb);
        run_free(&run[0]), run_free(&run[1]);
        fprintf(stderr, "falcon compare: out of memory\n");
        return 2;
    }
    for (size_t i = 0; i < run[0].count; i++) {
        pa[i] = &run[0].rows[i];
        pb[i] = find_row(&run[1], pa[i]->name);
    }
    for (size_t j = 0; j < run[1].count; j++)
        if (!find_row(&run[0], run[1].rows[j].name)) pb[total++] = &run[1].rows[j];
    for (size_t i = 0; i < total; i++) {
        size_t l = strlen(pa[i] ? pa[i]->name : pb[i]->name);
        if (l > width) width = l;
    }

    FILE *dat = NULL;
    if (tx) {
        const int fd = dup(falcon_outputs_fd(tx, slot));
        if (fd < 0 || !(dat = fdopen(fd, "w"))) {
            fprintf(stderr, "falcon compare: --out: '%s': cannot write it: %s\n", out, strerror(errno));
            if (fd >= 0) close(fd);
            free(pa), free(pb);
            run_free(&run[0]), run_free(&run[1]);
            falcon_outputs_abort(tx);
            return 2;
        }
        fprintf(dat, "# falcon compare: A = %s, B = %s (medians; NaN = absent or failed)\n"
                     "# 1:index 2:case 3:tok_per_s_A 4:tok_per_s_B 5:ratio_B_over_A 6:GFLOPS_A "
                     "7:GFLOPS_B 8:peak_fraction_A 9:peak_fraction_B 10:cpu_ratio_B_over_A\n",
                file[0], file[1]);
    }

    printf("A: %s\nB: %s\n", file[0], file[1]);
    printf("%-*s %11s %11s %7s %7s %9s %9s %7s %7s\n", (int)width, "case", "A tok/s", "B tok/s", "B/A",
           "B/A cpu", "A GFLOPS", "B GFLOPS", "A peak", "B peak");
    double logsum = 0, logcpu = 0;
    int nratio = 0, ncpu = 0, only = 0, failed = 0;
    for (size_t i = 0; i < total; i++) {
        const bench_row *a = pa[i], *b = pb[i];
        const char *name = a ? a->name : b->name;
        double va[NMETRIC], vb[NMETRIC];
        for (int k = 0; k < NMETRIC; k++) {
            va[k] = a && !a->failed ? a->median[k] : NAN;
            vb[k] = b && !b->failed ? b->median[k] : NAN;
        }
        double ratio = va[TOK] > 0 && vb[TOK] > 0 ? vb[TOK] / va[TOK] : NAN;
        double cpu_ratio = va[CPU] > 0 && vb[CPU] > 0 ? va[CPU] / vb[CPU] : NAN;
        if (!isnan(ratio)) logsum += log(ratio), nratio++;
        if (!isnan(cpu_ratio)) logcpu += log(cpu_ratio), ncpu++;
        only += !a || !b;
        failed += (a && a->failed) || (b && b->failed);
        char c[8][32];
        cell(c[0], 32, "%.4g", va[TOK]);
        cell(c[1], 32, "%.4g", vb[TOK]);
        cell(c[2], 32, "%.3f", ratio);
        cell(c[3], 32, "%.3g", va[GFLOPS]);
        cell(c[4], 32, "%.3g", vb[GFLOPS]);
        cell(c[5], 32, "%.1f%%", 100 * va[PEAK]);
        cell(c[6], 32, "%.1f%%", 100 * vb[PEAK]);
        cell(c[7], 32, "%.3f", cpu_ratio);
        if (a && a->failed) snprintf(c[0], 32, "failed");
        if (b && b->failed) snprintf(c[1], 32, "failed");
        printf("%-*s %11s %11s %7s %7s %9s %9s %7s %7s\n", (int)width, name, c[0], c[1], c[2], c[7], c[3],
               c[4], c[5], c[6]);
        if (dat) {
            fputs_name(dat, i, name);
            fprintf(dat, " %.6g %.6g %.6g %.6g %.6g %.6g %.6g %.6g\n", va[TOK], vb[TOK], ratio, va[GFLOPS],
                    vb[GFLOPS], va[PEAK], vb[PEAK], cpu_ratio);
        }
    }
    if (nratio) printf("geometric mean of B/A over %d cases: %.3f\n", nratio, exp(logsum / nratio));
    if (ncpu) printf("geometric mean of B/A by CPU time over %d cases: %.3f\n", ncpu, exp(logcpu / ncpu));
    if (only) printf("%d case(s) in only one file\n", only);
    if (failed) printf("%d case(s) failed in a run\n", failed);

    int rc = 0;
    if (dat) {
        const int bad = ferror(dat), closed = fclose(dat);
        if (bad || closed != 0) {
            fprintf(stderr, "falcon compare: --out: '%s': cannot write it: %s\n", out, strerror(errno));
            falcon_outputs_abort(tx);
            rc = 2;
        } else if (falcon_outputs_commit(tx)) {
            fprintf(stderr, "falcon compare: --out: %s\n", falcon_last_error());
            rc = 2;
        }
    }
    free(pa), free(pb);
    run_free(&run[0]), run_free(&run[1]);
    return rc;
}
