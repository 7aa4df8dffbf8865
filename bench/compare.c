/*
 * compare.c: per case name, the median of tokens_per_second, GFLOPS and
 * peak_fraction in run A and run B, the ratio B/A of tokens/s, and the same
 * ratio by CPU time (A's cpu_time / B's). With three files or more, the
 * N-machine table: per case the tokens/s of A and the ratio of every other
 * file to A, and the geometric mean of each ratio over the cases that every
 * file has (compare_many).
 *
 * Each file's protocol (repetitions, minimum time per repetition, whether
 * the cases' repetitions were interleaved, sweep) is read from the context
 * falcon-bench writes (falcon_repetitions, falcon_min_time,
 * falcon_interleaved, falcon_sweep; the repetitions from the entries of an
 * older file), printed with the file, and a warning says when the files
 * differ in it: their "medians" are then not the same statistic.
 *
 * The median of a case is the "median" aggregate Google Benchmark writes
 * with --benchmark_repetitions (what `make bench` uses); without one, the
 * median of the case's iteration runs (a single run is its own median).
 * Failed runs (error_occurred) are listed as failed, not compared.
 * --out FILE writes the same figures as whitespace-separated columns for
 * gnuplot, one case per row, NaN where a side lacks the case; a case name
 * that cannot be one column is refused (check_column_names). It is an
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
#include "median.h"
#include "falcon.h"
#include "falcon_io.h"
#include "../util/json.h"
#include "../util/opts.h"

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
    char protocol[160]; /* "3 repetitions x 0.3 s, interleaved, sweep default" */
    char cpu[256];      /* the context's falcon_cpu_model and its family and model (falcon_cpu_id), or "" */
    size_t *slots;   /* open addressing: row index + 1, 0 when free */
    size_t nslots;   /* a power of two, at least twice count */
} bench_run;

#define MAX_FILES 26 /* named A to Z */


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

static double median_of(double *v, size_t n)
{
    size_t k = 0; /* NaNs (absent values) dropped */
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i])) v[k++] = v[i];
    return k ? fb_median(v, k) : NAN;
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

/* The protocol of a run from its context; `reps`: the largest "repetitions"
 * of its entries, for a file written before the context recorded it. */
static void read_protocol(const falcon_json *ctx, int reps, bench_run *r)
{
    const char *rep = ctx ? falcon_json_get_string(ctx, "falcon_repetitions") : NULL;
    const char *min = ctx ? falcon_json_get_string(ctx, "falcon_min_time") : NULL;
    const char *sweep = ctx ? falcon_json_get_string(ctx, "falcon_sweep") : NULL;
    const char *mixed = ctx ? falcon_json_get_string(ctx, "falcon_interleaved") : NULL;
    const char *cpu = ctx ? falcon_json_get_string(ctx, "falcon_cpu_model") : NULL;
    char nrep[32];
    snprintf(nrep, sizeof nrep, "%d", reps > 0 ? reps : 1);
    if (!rep) rep = nrep;
    /* interleaved: each case's repetitions spread among the others' (a file
     * that does not say ran them one case after another) */
    snprintf(r->protocol, sizeof r->protocol, "%s repetition%s x %s%s%s, sweep %s", rep, strcmp(rep, "1") ? "s" : "",
             min ? min : "unrecorded minimum time", min ? " s" : "", mixed && !strcmp(mixed, "true") ? ", interleaved" : "",
             sweep ? sweep : "unrecorded");
    /* the identity up to its caches: a generic name alone ("Intel(R) Xeon(R)
     * Processor") does not tell two machines apart */
    const char *id = ctx ? falcon_json_get_string(ctx, "falcon_cpu_id") : NULL;
    const int idlen = id ? (int)strcspn(id, ";") : 0;
    snprintf(r->cpu, sizeof r->cpu, "%s%s%.*s", cpu ? cpu : "", cpu && id ? ", " : "", idlen, id ? id : "");
}

/* Prints (stdout and stderr) a warning when the runs' protocols differ. */
static void warn_protocols(const bench_run *run, int n)
{
    int differ = 0;
    for (int i = 1; i < n; i++) differ |= strcmp(run[i].protocol, run[0].protocol) != 0;
    if (!differ) return;
    char msg[MAX_FILES * 180 + 160];
    size_t used = (size_t)snprintf(msg, sizeof msg, "the files were measured with different protocols (");
    for (int i = 0; i < n && used < sizeof msg; i++)
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%c: %s", i ? "; " : "", 'A' + i, run[i].protocol);
    int single = 0; /* a file of one repetition: its "median" is one sample */
    for (int i = 0; i < n; i++) single |= strncmp(run[i].protocol, "1 repetition ", 13) == 0;
    if (used < sizeof msg)
        snprintf(msg + used, sizeof msg - used, "): their medians are not measured alike%s; compare runs made "
                 "with the same BENCH_REPS and BENCH_MIN_TIME", single ? " (a median of one repetition is a single sample)" : "");
    printf("warning: %s\n", msg);
    fprintf(stderr, "falcon: warning: %s\n", msg);
}

/* Load one file into rows; 0, or 2 with a message. */
static int load(const char *path, bench_run *r)
{
    char err[512];
    falcon_json *doc = falcon_json_parse_file(path, err, sizeof err);
    if (!doc) {
        fprintf(stderr, "falcon: error: %s\n", err);
        return 2;
    }
    const falcon_json *list = falcon_json_get(doc, "benchmarks");
    if (!list || list->type != FALCON_JSON_ARRAY) {
        fprintf(stderr, "falcon: error: %s: not Google Benchmark JSON output (no \"benchmarks\" array)\n", path);
        falcon_json_free(doc);
        return 2;
    }
    int status = 0, reps = 0;
    for (size_t i = 0; i < list->count && !status; i++) {
        const falcon_json *b = &list->items[i];
        const double nrep = falcon_json_get_number(b, "repetitions", 0);
        if (nrep > reps && nrep < 1e9) reps = (int)nrep;
        const char *run_name = falcon_json_get_string(b, "run_name");
        const char *name = run_name ? run_name : falcon_json_get_string(b, "name");
        if (b->type != FALCON_JSON_OBJECT || !name) {
            fprintf(stderr, "falcon: error: %s: benchmarks[%zu] is not an object with a \"name\"\n", path, i);
            status = 2;
            break;
        }
        const char *type = falcon_json_get_string(b, "run_type");
        const char *agg = falcon_json_get_string(b, "aggregate_name");
        const falcon_json *error = falcon_json_get(b, "error_occurred");
        bench_row *row = row_for(r, name);
        if (!row) {
            fprintf(stderr, "falcon: error: out of memory\n");
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
            fprintf(stderr, "falcon: error: out of memory\n");
            status = 2;
        }
    }
    read_protocol(falcon_json_get(doc, "context"), reps, r);
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

/* A data-file row's first two columns (the name passed column_name). */
static void fputs_name(FILE *f, size_t i, const char *name) { fprintf(f, "%zu %s", i, name); }

/* Can `name` be one column of the data file? gnuplot splits a row at white
 * space, reads '"' as the start of a quoted column and '#' as a comment, so
 * an empty name, a name with a space or control byte, '#' or '"' would shift
 * or hide the columns after it. Rewriting it ("a b" as "a_b") could merge two
 * cases, so such a name is refused. */
static int column_name(const char *name)
{
    if (!*name) return 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == '#' || *p == '"') return 0;
    return 1;
}

/* Every case name of the runs is a column_name; 0, or 2 after one error
 * line that shows the name with its bad bytes escaped. */
static int check_column_names(const bench_run *run, int n, const char *const *file)
{
    for (int f = 0; f < n; f++)
        for (size_t i = 0; i < run[f].count; i++) {
            const char *name = run[f].rows[i].name;
            if (column_name(name)) continue;
            char shown[200];
            size_t at = 0;
            for (const unsigned char *p = (const unsigned char *)name; *p && at + 5 < sizeof shown; p++)
                at += (size_t)snprintf(shown + at, sizeof shown - at, *p <= ' ' || *p == 0x7f ? "\\x%02x" : "%c", *p);
            shown[at] = '\0';
            return cli_error("--out: %s: case name \"%s\": a name in the data file must be one column "
                             "(not empty; no white space, control byte, '#' or '\"')", file[f], shown);
        }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: falcon compare A.json B.json [C.json ...] [--out FILE]\n"
               "  Google Benchmark JSON from build/falcon-bench (make bench). Two files: per\n"
               "  case the median tokens/s of A and B, B/A, B/A by CPU time, GFLOPS and peak\n"
               "  fractions. Three or more (up to %d machines): per case the tokens/s of A\n"
               "  and each file's ratio to A, and the geometric mean of each ratio over the\n"
               "  cases every file has. Warns when the files' protocols (repetitions,\n"
               "  minimum time, sweep) differ. --out FILE: the same as columns for gnuplot\n"
               "  (plots/bench-compare.gp, plots/bench-machines.gp); a case name that is\n"
               "  empty or holds white space, a control byte, '#' or '\"' is refused there.\n",
            MAX_FILES);
}

/* The N-machine table (three files or more): the cases in order of first
 * appearance; per case A's tokens/s and each file's ratio to A; the
 * geometric mean of A's tokens/s and of each ratio over the cases that every
 * file has (and none failed), so that every mean is over the same cases.
 * --out: the same as columns for gnuplot (plots/bench-machines.gp); the
 * file is written under a temporary name and renamed. 0, or 2. */
/* Close the --out stream and commit its transaction (or abort it): 0 or 2. */
static int finish_out(FILE *dat, falcon_outputs *tx)
{
    const int bad = ferror(dat), closed = fclose(dat);
    if (bad || closed != 0) {
        fprintf(stderr, "falcon: error: --out: cannot write it: %s\n", strerror(errno));
        falcon_outputs_abort(tx);
        return 2;
    }
    if (falcon_outputs_commit(tx)) {
        fprintf(stderr, "falcon: error: --out: %s\n", falcon_last_error());
        return 2;
    }
    return 0;
}

static int compare_many(const bench_run *run, int n, const char *const *file, falcon_outputs *tx, int slot)
{
    size_t cap = 1, total = 0, width = 14, ncommon = 0;
    for (int f = 0; f < n; f++) cap += run[f].count;
    const char **names = calloc(cap, sizeof *names);
    double *logsum = calloc((size_t)n, sizeof *logsum);
    if (!names || !logsum) {
        free(names), free(logsum);
        falcon_outputs_abort(tx);
        fprintf(stderr, "falcon: error: out of memory\n");
        return 2;
    }
    /* Every name once, in the order of the files (hash look-ups: linear). */
    for (int f = 0; f < n; f++)
        for (size_t i = 0; i < run[f].count; i++) {
            int seen = 0;
            for (int g = 0; g < f && !seen; g++) seen = find_row(&run[g], run[f].rows[i].name) != NULL;
            if (!seen && find_row(&run[f], run[f].rows[i].name) == &run[f].rows[i]) names[total++] = run[f].rows[i].name;
        }
    for (size_t i = 0; i < total; i++)
        if (strlen(names[i]) > width) width = strlen(names[i]);

    FILE *dat = NULL;
    if (tx) {
        const int fd = dup(falcon_outputs_fd(tx, slot));
        if (fd < 0 || !(dat = fdopen(fd, "w"))) {
            fprintf(stderr, "falcon: error: --out: cannot write it: %s\n", strerror(errno));
            if (fd >= 0) close(fd);
            free(names), free(logsum);
            falcon_outputs_abort(tx);
            return 2;
        }
        fprintf(dat, "# falcon compare: %d machines (medians of tokens/s; NaN = absent or failed)\n# machines %d\n",
                n, n);
        for (int f = 0; f < n; f++) {
            const char *base = strrchr(file[f], '/');
            fprintf(dat, "# machine %d %c: %s (%s)\n", f + 1, 'A' + f, run[f].cpu[0] ? run[f].cpu : "CPU unrecorded",
                    base ? base + 1 : file[f]);
        }
        fprintf(dat, "# 1:index 2:case 3..%d:tok_per_s of each machine %d..%d:ratio to A of B.. "
                     "%d:index among the cases every file has (nan: not in every file)\n",
                2 + n, 3 + n, 1 + 2 * n, 2 + 2 * n);
    }

    printf("machines (medians of tokens/s; X/A: throughput of X over A's):\n");
    for (int f = 0; f < n; f++)
        printf("  %c: %s (%s%s%s)\n", 'A' + f, file[f], run[f].cpu, run[f].cpu[0] ? "; " : "", run[f].protocol);
    warn_protocols(run, n);
    printf("%-*s %11s", (int)width, "case", "A tok/s");
    for (int f = 1; f < n; f++) printf("   %c/A", 'A' + f);
    printf("\n");
    size_t partial = 0;
    for (size_t i = 0; i < total; i++) {
        double tok[MAX_FILES];
        int every = 1;
        for (int f = 0; f < n; f++) {
            const bench_row *r = find_row(&run[f], names[i]);
            tok[f] = r && !r->failed ? r->median[TOK] : NAN;
            every &= tok[f] > 0;
        }
        if (every) {
            for (int f = 0; f < n; f++) logsum[f] += log(tok[f]);
            ncommon++;
        } else {
            partial++;
        }
        char c[32];
        cell(c, sizeof c, "%.4g", tok[0]);
        printf("%-*s %11s", (int)width, names[i], c);
        for (int f = 1; f < n; f++) {
            cell(c, sizeof c, "%.3f", tok[0] > 0 && tok[f] > 0 ? tok[f] / tok[0] : NAN);
            printf(" %5s", c);
        }
        printf("\n");
        if (dat) {
            fputs_name(dat, i, names[i]);
            for (int f = 0; f < n; f++) fprintf(dat, " %.6g", tok[f]);
            for (int f = 1; f < n; f++) fprintf(dat, " %.6g", tok[0] > 0 && tok[f] > 0 ? tok[f] / tok[0] : NAN);
            if (every) fprintf(dat, " %zu\n", ncommon - 1);
            else fprintf(dat, " nan\n");
        }
    }
    if (ncommon) {
        printf("%-*s %11.4g", (int)width, "geometric mean", exp(logsum[0] / (double)ncommon));
        for (int f = 1; f < n; f++) printf(" %5.3f", exp((logsum[f] - logsum[0]) / (double)ncommon));
        printf("\ngeometric means over the %zu cases that every file has", ncommon);
        if (partial) printf(" (%zu more cases are missing or failed in some file)", partial);
        printf("\n");
        for (int f = 1; f < n; f++)
            printf("geometric mean of %c/A over %zu cases: %.3f\n", 'A' + f, ncommon,
                   exp((logsum[f] - logsum[0]) / (double)ncommon));
    } else {
        printf("no case is in every file: no geometric mean\n");
    }
    if (dat) {
        fprintf(dat, "# geomean_cases %zu\n", ncommon);
        for (int f = 1; f < n; f++)
            fprintf(dat, "# geomean %d %.6g\n", f + 1, ncommon ? exp((logsum[f] - logsum[0]) / (double)ncommon) : NAN);
    }
    const int rc = dat ? finish_out(dat, tx) : 0;
    free(names), free(logsum);
    return rc;
}

/* Two files, case by case (A's order, then the cases only in B), to
 * stdout and, with tx, to --out's slot: commits or aborts tx, frees both
 * runs. The exit status. */
static int compare_two(bench_run *run, const char *const *file, const char *out, falcon_outputs *tx, int slot)
{
    /* Cases in A's order, then those only in B. */
    size_t total = run[0].count, width = 4;
    const bench_row **pa = calloc(run[0].count + run[1].count + 1, sizeof *pa);
    const bench_row **pb = calloc(run[0].count + run[1].count + 1, sizeof *pb);
    if (!pa || !pb) {
        free(pa), free(pb);
        run_free(&run[0]), run_free(&run[1]);
        fprintf(stderr, "falcon: error: out of memory\n");
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
            fprintf(stderr, "falcon: error: --out: '%s': cannot write it: %s\n", out, strerror(errno));
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

    printf("A: %s (%s%s%s)\nB: %s (%s%s%s)\n", file[0], run[0].cpu, run[0].cpu[0] ? "; " : "", run[0].protocol,
           file[1], run[1].cpu, run[1].cpu[0] ? "; " : "", run[1].protocol);
    warn_protocols(run, 2);
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
        /* Both means over the same cases: those with tokens/s (the
         * falcon cases; not the BLAS yardstick's blas/ entries). */
        if (!isnan(cpu_ratio) && !isnan(ratio)) logcpu += log(cpu_ratio), ncpu++;
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

    const int rc = dat ? finish_out(dat, tx) : 0;
    free(pa), free(pb);
    run_free(&run[0]), run_free(&run[1]);
    return rc;
}

int falcon_compare_main(int argc, char **argv)
{
    const char *file[MAX_FILES] = {NULL}, *out = NULL;
    int nfile = 0;
    static const opt_def defs[] = {{"out", 'o', 1}, {"help", 'h', 0}, {NULL, 0, 0}};
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon compare", defs, OPT_POSITIONALS);
    for (int id; (id = opt_next(&sc)) != OPT_END;) {
        switch (id) {
        case OPT_ERROR: return CLI_FAIL;
        case 'h': usage(stdout); return 0;
        case 'o': out = sc.value; break;
        default: /* a file */
            if (nfile == MAX_FILES) return cli_error("more than %d files ('%s')", MAX_FILES, sc.value);
            file[nfile++] = sc.value;
        }
    }
    if (nfile < 2) {
        fprintf(stderr, "falcon: error: compare needs two result files or more, got %d (see falcon compare --help)\n",
                nfile);
        return 2;
    }
    if (out && !*out) {
        fprintf(stderr, "falcon: error: --out: the path is empty\n");
        return 2;
    }

    /* The output first: a path it must not replace fails before anything is read. */
    falcon_outputs *tx = NULL;
    int slot = -1, bad_tx = out && falcon_outputs_begin(&tx);
    for (int f = 0; f < nfile && out && !bad_tx; f++) {
        const char label[2] = {(char)('A' + f), 0};
        bad_tx = falcon_outputs_input(tx, label, file[f]) != FALCON_OK;
    }
    if (out && (bad_tx || falcon_outputs_file(tx, "--out", out, &slot))) {
        fprintf(stderr, "falcon: error: --out: %s\n", falcon_last_error());
        falcon_outputs_abort(tx);
        return 2;
    }
    if (tx) falcon_outputs_clean_on_signals();
    static bench_run run[MAX_FILES];
    memset(run, 0, sizeof run);
    int status = 0;
    for (int f = 0; f < nfile && !status; f++) status = load(file[f], &run[f]);
    if (!status && tx) status = check_column_names(run, nfile, file);
    if (status) falcon_outputs_abort(tx);
    else if (nfile > 2) status = compare_many(run, nfile, file, tx, slot); /* commits or aborts tx */
    if (status || nfile > 2) {
        for (int f = 0; f < nfile; f++) run_free(&run[f]);
        return status;
    }

    return compare_two(run, file, out, tx, slot); /* commits or aborts tx, frees the runs */
}
