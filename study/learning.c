/*
 * `falcon stability --learning`: how well each variant learns a stream whose
 * next value follows the current key through a slowly drifting linear map,
 *     v_{t+1} = A_t k_t + sigma xi,   A_{t+1} = sqrt(1 - rho^2) A_t + rho G_t,
 * measured as the normalized prediction error of o_t = S_t k_t (q_t = k_t)
 * for v_{t+1}, in bins of T. Prefix alignment learns (k_{t-1}, v_t): exactly
 * this relation; same-step alignment learns (k_t, v_t), which here carries
 * nothing about the next value.
 *
 * Hyper-parameters (beta, alpha, W) are chosen at T0 by a grid search (the
 * lowest error over steps 1..T0) for each variant x alignment x decay off/on;
 * the curves run to --factor x T0 with those values (length extrapolation).
 * Four families vary one factor each with the others held fixed: alignment,
 * plasticity (beta), forgetting (alpha), rehearsal (W).
 *
 * The stream has its own generator: the gate's (gate/gate.c) draws
 * independent uniform inputs for accuracy tests and is not exported; this
 * one is a different process (a drifting map, Gaussian keys), generated
 * segment by segment so memory is bounded at any length.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "study.h"

#define MAXBIN 40
#define SEG 4096

typedef struct lparams {
    const char *profile, *out;
    int64_t n, m, t0, factor, seeds, tune_seeds;
    double rho, sigma;
    int threads;
} lparams;

typedef struct lrun {
    char name[64], family[16];
    falcon_variant v;
    falcon_align a;
    double beta, alpha; /* alpha 1: no decay input */
    int64_t W;
    double num[MAXBIN], den[MAXBIN];
    int failed;
} lrun;

/* ---- the stream: splitmix64, Gaussian keys, a drifting map ---- */
typedef struct lgen {
    uint64_t s;
    int64_t n, m;
    double rho, sigma, *A, *g, *kprev;
} lgen;

static double unif(uint64_t *s) /* [0, 1) */
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static double gauss(uint64_t *s) { return sqrt(-2 * log(1 - unif(s))) * cos(2 * M_PI * unif(s)); }
/* Uniform with unit variance: cheaper than Gaussian where only the variance matters. */
static double unit_noise(uint64_t *s) { return sqrt(3.0) * (2 * unif(s) - 1); }

static int lgen_init(lgen *g, uint64_t seed, const lparams *P)
{
    memset(g, 0, sizeof *g);
    g->s = seed * 0x9E3779B97F4A7C15ull + 7, g->n = P->n, g->m = P->m, g->rho = P->rho, g->sigma = P->sigma;
    g->A = malloc(sizeof(double) * (size_t)(P->n * P->m));
    g->g = malloc(sizeof(double) * (size_t)P->n);
    g->kprev = malloc(sizeof(double) * (size_t)P->n);
    if (!g->A || !g->g || !g->kprev) return -1;
    /* Entries of variance 1/n: E||A k||^2 = m/n E||k||^2 = 1 for n = m. */
    for (int64_t i = 0; i < P->n * P->m; i++) g->A[i] = gauss(&g->s) / sqrt((double)P->n);
    for (int64_t i = 0; i < P->n; i++) g->g[i] = 0.5 + unif(&g->s); /* Falcon-2 gains in [0.5, 1.5) */
    for (int64_t i = 0; i < P->n; i++) g->kprev[i] = gauss(&g->s) / sqrt((double)P->n);
    return 0;
}

static void lgen_free(lgen *g) { free(g->A), free(g->g), free(g->kprev); }

/* Rows of (k_t, v_t): v_t = A k_{t-1} + noise, then k_t drawn, then A drifts. */
static void lgen_rows(lgen *g, int64_t rows, double *k, double *v)
{
    const int64_t n = g->n, m = g->m;
    const double keep = sqrt(1 - g->rho * g->rho), step = g->rho / sqrt((double)n);
    for (int64_t t = 0; t < rows; t++) {
        for (int64_t a = 0; a < m; a++) {
            double s = g->sigma * gauss(&g->s);
            for (int64_t i = 0; i < n; i++) s += g->A[a * n + i] * g->kprev[i];
            v[t * m + a] = s;
        }
        for (int64_t i = 0; i < n; i++) k[t * n + i] = g->kprev[i] = gauss(&g->s) / sqrt((double)n);
        for (int64_t i = 0; i < n * m; i++) g->A[i] = keep * g->A[i] + step * unit_noise(&g->s);
    }
}

/* ---- running configurations over the stream ---- */

/* Bin of step t (1-based): the first edge >= t. */
static int bin_of(const int64_t *edge, int nbin, int64_t t)
{
    int b = 0;
    while (b < nbin - 1 && t > edge[b]) b++;
    return b;
}

/*
 * Runs every configuration over `seeds` streams of length T (fp64, the best
 * backend, recurrent form), accumulating ||o_t - v_{t+1}||^2 and
 * ||v_{t+1}||^2 per bin. Configurations run in parallel on each segment.
 */
static int run_all(const lparams *P, lrun *runs, int nrun, int64_t T, const int64_t *edge, int nbin,
                   int64_t seeds, uint64_t seed0)
{
    const int64_t n = P->n, m = P->m;
    /* Row L of a segment is the next segment's row 0: the target of the last output. */
    double *k = malloc(sizeof(double) * (size_t)((SEG + 1) * n));
    double *v = malloc(sizeof(double) * (size_t)((SEG + 1) * m));
    double *gain = malloc(sizeof(double) * (size_t)(SEG * n));
    falcon_state **st = calloc((size_t)nrun, sizeof *st);
    int rc = !k || !v || !gain || !st;
    for (int i = 0; i < nrun && !rc; i++) {
        rc |= falcon_state_create(1, n, m, runs[i].W, &st[i]) != FALCON_OK;
        memset(runs[i].num, 0, sizeof runs[i].num), memset(runs[i].den, 0, sizeof runs[i].den);
        runs[i].failed = 0;
    }
    for (int64_t sd = 0; sd < seeds && !rc; sd++) {
        lgen g;
        if (lgen_init(&g, seed0 + (uint64_t)sd, P)) {
            lgen_free(&g);
            rc = -1;
            break;
        }
        for (int64_t r = 0; r < SEG; r++) memcpy(gain + r * n, g.g, sizeof(double) * (size_t)n);
        for (int i = 0; i < nrun; i++) falcon_state_reset(st[i]);
        lgen_rows(&g, 1, k, v);
        for (int64_t t = 0; t < T && !rc; t += SEG) {
            const int64_t L = T - t < SEG ? T - t : SEG;
            lgen_rows(&g, L, k + n, v + m); /* rows 1..L: row L is the look-ahead */
#pragma omp parallel for schedule(dynamic, 1) num_threads(P->threads)
            for (int i = 0; i < nrun; i++) {
                lrun *r = &runs[i];
                if (r->failed) continue;
                double *out = malloc(sizeof(double) * (size_t)(L * m));
                double *ba = malloc(sizeof(double) * (size_t)(2 * L));
                if (!out || !ba) {
                    r->failed = 1;
                    free(out), free(ba);
                    continue;
                }
                for (int64_t j = 0; j < L; j++) ba[j] = r->beta, ba[L + j] = r->alpha;
                falcon_config cfg;
                falcon_config_default(&cfg);
                cfg.variant = r->v, cfg.align = r->a, cfg.window = r->W, cfg.precision = FALCON_FP64;
                cfg.threads = 1;
                falcon_inputs in = falcon_inputs_sequence(L, n, m, k, k, v, ba, r->alpha < 1 ? ba + L : NULL,
                                                          falcon_variant_has_gain(r->v) ? gain : NULL);
                if (falcon_run(&cfg, &in, st[i], out) != FALCON_OK) r->failed = 1;
                for (int64_t j = 0; j < L && !r->failed; j++) {
                    const int b = bin_of(edge, nbin, t + j + 1);
                    for (int64_t a = 0; a < m; a++) {
                        const double y = v[(j + 1) * m + a], d = out[j * m + a] - y;
                        r->num[b] += d * d, r->den[b] += y * y;
                    }
                }
                free(out), free(ba);
            }
            memcpy(k, k + L * n, sizeof(double) * (size_t)n);
            memcpy(v, v + L * m, sizeof(double) * (size_t)m);
        }
        lgen_free(&g);
    }
    for (int i = 0; st && i < nrun; i++) falcon_state_free(st[i]);
    free(st), free(k), free(v), free(gain);
    return rc ? -1 : 0;
}

static double nmse(const lrun *r, int b)
{
    return r->failed || !(r->den[b] > 0) || !isfinite(r->num[b]) ? INFINITY : r->num[b] / r->den[b];
}

/* ---- the grid search at T0 ---- */

static const double beta_grid[] = {0.003, 0.01, 0.03, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0};
static const double alpha_grid[] = {0.9, 0.97, 0.99, 0.997, 0.999};
static const int64_t window_grid[] = {2, 4, 8, 16};
#define NB (int)(sizeof beta_grid / sizeof beta_grid[0])
#define NA (int)(sizeof alpha_grid / sizeof alpha_grid[0])
#define NW (int)(sizeof window_grid / sizeof window_grid[0])

static const falcon_variant variants[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_1A, FALCON_2A, FALCON_3A};

typedef struct tuned {
    falcon_variant v;
    falcon_align a;
    int decay;
    lrun best;
    double err_t0;
    int candidates;
} tuned;

/* 24 slots: variant x alignment x decay off/on; windows only for Falcon-3/3A. */
static int tune(const lparams *P, tuned *slot)
{
    const int per = NB * NA * NW;
    lrun *c = calloc((size_t)(24 * per), sizeof *c);
    if (!c) return -1;
    int nc = 0, ns = 0;
    for (int vi = 0; vi < 6; vi++)
        for (int a = 0; a < 2; a++)
            for (int dec = 0; dec < 2; dec++) {
                tuned *s = &slot[ns++];
                s->v = variants[vi], s->a = (falcon_align)a, s->decay = dec, s->candidates = 0;
                const int nw = falcon_variant_has_window(s->v) ? NW : 1, na = dec ? NA : 1;
                for (int w = 0; w < nw; w++)
                    for (int al = 0; al < na; al++)
                        for (int b = 0; b < NB; b++) {
                            if (falcon_variant_is_regression(s->v) && beta_grid[b] > 2) continue;
                            lrun *r = &c[nc++];
                            r->v = s->v, r->a = s->a, r->beta = beta_grid[b];
                            r->alpha = dec ? alpha_grid[al] : 1, r->W = nw > 1 ? window_grid[w] : 1;
                            s->candidates++;
                        }
            }
    const int64_t edge[1] = {P->t0};
    int rc = run_all(P, c, nc, P->t0, edge, 1, P->tune_seeds, 9000);
    for (int i = 0, at = 0; i < ns && !rc; i++) {
        slot[i].err_t0 = INFINITY;
        for (int j = 0; j < slot[i].candidates; j++, at++)
            if (nmse(&c[at], 0) < slot[i].err_t0) slot[i].err_t0 = nmse(&c[at], 0), slot[i].best = c[at];
    }
    free(c);
    return rc;
}

static const tuned *find(const tuned *slot, falcon_variant v, falcon_align a, int decay)
{
    for (int i = 0; i < 24; i++)
        if (slot[i].v == v && slot[i].a == a && slot[i].decay == decay) return &slot[i];
    return &slot[0];
}

static lrun *add(lrun *runs, int *nr, const char *family, const lrun *base, const char *fmt, double x)
{
    lrun *r = &runs[(*nr)++];
    *r = *base;
    snprintf(r->family, sizeof r->family, "%s", family);
    snprintf(r->name, sizeof r->name, fmt, x);
    return r;
}

/* The tuned curves, then one family per factor around two fixed bases:
 * Falcon-1 (prefix, tuned without decay) and Falcon-1A (prefix, tuned with). */
static int build_runs(const tuned *slot, lrun *runs)
{
    int nr = 0;
    for (int i = 0; i < 24; i++) {
        char fmt[64];
        snprintf(fmt, sizeof fmt, "%s-%s-%s", falcon_variant_name(slot[i].v), falcon_align_name(slot[i].a),
                 slot[i].decay ? "decay" : "nodecay");
        add(runs, &nr, "tuned", &slot[i].best, fmt, 0);
    }
    const lrun b1 = find(slot, FALCON_1, FALCON_ALIGN_PREFIX, 0)->best;
    const lrun b1a = find(slot, FALCON_1A, FALCON_ALIGN_PREFIX, 1)->best;
    for (int a = 0; a < 2; a++) {
        add(runs, &nr, "alignment", &b1, a ? "falcon1-same" : "falcon1-prefix", 0)->a = (falcon_align)a;
        add(runs, &nr, "alignment", &b1a, a ? "falcon1a-same" : "falcon1a-prefix", 0)->a = (falcon_align)a;
    }
    static const double betas[] = {0.01, 0.03, 0.1, 0.3, 1.0, 1.9};
    for (int i = 0; i < 6; i++) {
        add(runs, &nr, "plasticity", &b1, "falcon1-beta=%g", betas[i])->beta = betas[i];
        add(runs, &nr, "plasticity", &b1a, "falcon1a-beta=%g", betas[i])->beta = betas[i];
    }
    static const double alphas[] = {1.0, 0.999, 0.99, 0.97, 0.9};
    for (int i = 0; i < 5; i++) {
        add(runs, &nr, "forgetting", &b1, "falcon1-alpha=%g", alphas[i])->alpha = alphas[i];
        add(runs, &nr, "forgetting", &b1a, "falcon1a-alpha=%g", alphas[i])->alpha = alphas[i];
    }
    for (int64_t W = 1; W <= 16; W *= 2) {
        lrun *r = add(runs, &nr, "rehearsal", &b1, "falcon3-W=%g", (double)W);
        r->v = FALCON_3, r->W = W;
        r = add(runs, &nr, "rehearsal", &b1a, "falcon3a-W=%g", (double)W);
        r->v = FALCON_3A, r->W = W;
    }
    return nr;
}

/* ---- output ---- */

static void describe(const lrun *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s beta=%g alpha=%g W=%lld", falcon_variant_name(r->v), falcon_align_name(r->a), r->beta,
             r->alpha, (long long)r->W);
}

/* The key title of a tuned curve (its panel names the alignment). */
static void tuned_label(const lrun *r, char *buf, size_t len)
{
    int at = snprintf(buf, len, "%s, %s: beta %g", falcon_variant_name(r->v), r->alpha < 1 ? "decay" : "no decay", r->beta);
    if (r->alpha < 1 && at > 0 && (size_t)at < len) at += snprintf(buf + at, len - (size_t)at, ", alpha %g", r->alpha);
    if (r->W > 1 && at > 0 && (size_t)at < len) snprintf(buf + at, len - (size_t)at, ", W %lld", (long long)r->W);
}

static int write_out(const lparams *P, const tuned *slot, const lrun *runs, int nr, const int64_t *edge, int nbin,
                     double floor_nmse, double secs)
{
    char path[4096], file[128], d[128];
    FILE *f = study_open(P->out, "learning.json", path, sizeof path);
    if (!f) return -1;
    fprintf(f, "{\n  \"profile\": \"%s\", \"n\": %lld, \"m\": %lld, \"t0\": %lld, \"tmax\": %lld, \"seeds\": %lld,\n"
               "  \"tune_seeds\": %lld, \"rho\": %g, \"sigma\": %g, \"noise_floor_nmse\": %.4g, \"seconds\": %.1f,\n"
               "  \"stream\": \"v_{t+1} = A_t k_t + sigma xi, A_{t+1} = sqrt(1-rho^2) A_t + rho G_t; q_t = k_t\",\n"
               "  \"error\": \"sum ||o_t - v_{t+1}||^2 / sum ||v_{t+1}||^2 over the bin (lo, hi]\",\n"
               "  \"backend\": \"%s\", \"precision\": \"fp64\", \"form\": \"recurrent\",\n"
               "  \"grid\": {\"beta\": [",
            P->profile, (long long)P->n, (long long)P->m, (long long)P->t0, (long long)(P->t0 * P->factor),
            (long long)P->seeds, (long long)P->tune_seeds, P->rho, P->sigma, floor_nmse, secs,
            falcon_backend_name(falcon_backend_resolve(FALCON_BACKEND_AUTO)));
    for (int i = 0; i < NB; i++) fprintf(f, "%s%g", i ? ", " : "", beta_grid[i]);
    fputs("], \"alpha\": [1", f);
    for (int i = 0; i < NA; i++) fprintf(f, ", %g", alpha_grid[i]);
    fputs("], \"window\": [1", f);
    for (int i = 0; i < NW; i++) fprintf(f, ", %lld", (long long)window_grid[i]);
    fputs("]},\n  \"tuned\": [", f);
    for (int i = 0; i < 24; i++) {
        const lrun *b = &slot[i].best;
        fprintf(f, "%s\n    {\"variant\": \"%s\", \"align\": \"%s\", \"decay\": %s, \"beta\": %g, \"alpha\": %g, "
                   "\"window\": %lld, \"nmse_t0\": ",
                i ? "," : "", falcon_variant_name(slot[i].v), falcon_align_name(slot[i].a),
                slot[i].decay ? "true" : "false", b->beta, b->alpha, (long long)b->W);
        study_json_num(f, slot[i].err_t0);
        fprintf(f, ", \"candidates\": %d}", slot[i].candidates);
    }
    fputs("\n  ],\n  \"curves\": [", f);
    for (int i = 0; i < nr; i++) {
        describe(&runs[i], d, sizeof d);
        fprintf(f, "%s\n    {\"family\": \"%s\", \"name\": \"%s\", \"config\": \"%s\", \"points\": [", i ? "," : "",
                runs[i].family, runs[i].name, d);
        for (int b = 0; b < nbin; b++) {
            fprintf(f, "%s[%lld, %lld, ", b ? ", " : "", (long long)(b ? edge[b - 1] : 0), (long long)edge[b]);
            study_json_num(f, nmse(&runs[i], b));
            fputc(']', f);
        }
        fputs("]}", f);
    }
    fputs("\n  ]\n}\n", f);
    int rc = study_close(f);

    /* One .dat per curve: bin lo, hi, geometric middle, error; then the
     * tuned table and T0 for the plots. */
    snprintf(path, sizeof path, "%s/curves", P->out);
    if (study_mkdir(path)) return -1;
    for (int i = 0; i < nr && !rc; i++) {
        snprintf(file, sizeof file, "curves/%.15s_%.63s.dat", runs[i].family, runs[i].name);
        if (!(f = study_open(P->out, file, path, sizeof path))) return -1;
        describe(&runs[i], d, sizeof d);
        /* A header row: gnuplot takes the key title from column 4. The
         * alignment family's curves say their hyper-parameters, which are
         * those tuned for prefix alignment also on the same-step curves. */
        char label[256];
        if (!strcmp(runs[i].family, "alignment")) {
            char hp[128];
            tuned_label(&runs[i], hp, sizeof hp);
            snprintf(label, sizeof label, "%.127s, %.15s alignment%s", hp, falcon_align_name(runs[i].a),
                     runs[i].a == FALCON_ALIGN_SAME ? " (parameters tuned for prefix)" : "");
        } else if (!strcmp(runs[i].family, "tuned")) {
            tuned_label(&runs[i], label, sizeof label);
        } else {
            snprintf(label, sizeof label, "%.63s", runs[i].name);
        }
        fprintf(f, "# %s (%s): T_lo T_hi T_mid nmse\nT_lo T_hi T_mid \"%s\"\n", runs[i].name, d, label);
        for (int b = 0; b < nbin; b++) {
            const double lo = b ? (double)edge[b - 1] : 1.0;
            fprintf(f, "%.0f %lld %.6g %.6g\n", lo, (long long)edge[b], sqrt(lo * (double)edge[b]), nmse(&runs[i], b));
        }
        rc |= study_close(f);
    }
    if (!(f = study_open(P->out, "tuned.dat", path, sizeof path))) return -1;
    fprintf(f, "# chosen at T0 = %lld by grid search: variant align decay beta alpha W nmse_T0 nmse_last_bin\n"
               "# t0 %lld noise_floor %.6g\n",
            (long long)P->t0, (long long)P->t0, floor_nmse);
    for (int i = 0; i < 24; i++)
        fprintf(f, "%s %s %s %g %g %lld %.4g %.4g\n", falcon_variant_name(slot[i].v), falcon_align_name(slot[i].a),
                slot[i].decay ? "decay" : "nodecay", slot[i].best.beta, slot[i].best.alpha,
                (long long)slot[i].best.W, slot[i].err_t0, nmse(&runs[i], nbin - 1));
    return rc | study_close(f);
}

int study_learning_main(int argc, char **argv)
{
    lparams P = {"quick", "report/learning", 16, 16, 1000, 64, 4, 2, 0.01, 0.1, omp_get_max_threads()};
    enum { O_LEARNING = 1, O_HELP, O_PROFILE, O_OUT, O_T0, O_FACTOR, O_SEEDS, O_N, O_THREADS };
    static const opt_def defs[] = {
        {"learning", O_LEARNING, 0}, {"help", O_HELP, 0}, {"profile", O_PROFILE, 1}, {"out", O_OUT, 1},
        {"t0", O_T0, 1}, {"factor", O_FACTOR, 1}, {"seeds", O_SEEDS, 1}, {"n", O_N, 1}, {"threads", O_THREADS, 1},
        {NULL, 0, 0}};
    int64_t threads = P.threads;
    const study_int_opt ints[] = {{O_T0, 8, 100000000, &P.t0}, {O_FACTOR, 1, 1000000, &P.factor},
                                  {O_SEEDS, 1, 100000, &P.seeds}, {O_N, 1, 1024, &P.n},
                                  {O_THREADS, 1, 1024, &threads}};
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon stability --learning", defs, 0);
    for (int id; (id = opt_next(&sc)) != OPT_END;) {
        const char *v = sc.value;
        if (id == OPT_ERROR) return CLI_FAIL;
        if (id == O_LEARNING) continue;
        if (id == O_HELP) {
            printf("usage: falcon stability --learning [--profile quick|full] [--out DIR] [--t0 T] [--factor F]\n"
                   "                                   [--seeds S] [--n N] [--threads P]\n"
                   "Prediction error of o_t for v_{t+1} on a drifting linear stream, every variant, both\n"
                   "alignments, decay off/on; hyper-parameters chosen at T0 (default 1000) by grid search,\n"
                   "curves to F x T0 (quick 64, full 1024). Writes DIR/learning.json, DIR/tuned.dat and\n"
                   "DIR/curves/*.dat (default DIR report/learning).\n");
            return 0;
        }
        if (id == O_PROFILE) {
            const int full = study_parse_profile(v);
            if (full < 0) return 2;
            P.profile = full ? "full" : "quick", P.factor = full ? 1024 : 64, P.seeds = full ? 16 : 4;
            P.tune_seeds = full ? 8 : 2;
            continue;
        }
        if (id == O_OUT) {
            P.out = v;
            continue;
        }
        /* The integer options. */
        if (study_int_option(&sc, id, ints, (int)(sizeof ints / sizeof ints[0])) < 0) return 2;
    }
    P.m = P.n, P.threads = (int)threads;
    static const char *const reports[] = {"learning.json", "tuned.dat", NULL};
    if (study_mkdir(P.out) || study_reports_check(P.out, "learning", reports)) return 2; /* before the runs */
    /* Bins: T0 / 8 x 2^k up to factor x T0, the first from step 1. */
    int64_t edge[MAXBIN];
    int nbin = 0;
    for (int64_t e = P.t0 / 8 > 0 ? P.t0 / 8 : 1; nbin < MAXBIN - 1 && e < P.t0 * P.factor; e *= 2) edge[nbin++] = e;
    edge[nbin++] = P.t0 * P.factor;
    const double floor_nmse = P.m * P.sigma * P.sigma / (1 + P.m * P.sigma * P.sigma);
    printf("falcon stability --learning, %s profile: n = m = %lld, rho = %g, sigma = %g (noise floor %.3g); "
           "tuning at T0 = %lld over %lld seeds, curves to %lld over %lld seeds\n",
           P.profile, (long long)P.n, P.rho, P.sigma, floor_nmse, (long long)P.t0, (long long)P.tune_seeds,
           (long long)(P.t0 * P.factor), (long long)P.seeds);
    fflush(stdout);
    const double t0 = omp_get_wtime();
    tuned slot[24];
    lrun runs[24 + 4 + 12 + 10 + 10];
    if (tune(&P, slot)) {
        fprintf(stderr, "falcon: error: learning: out of memory\n");
        return 2;
    }
    printf("tuned at T0 = %lld (grid search; error over steps 1..T0):\n", (long long)P.t0);
    for (int i = 0; i < 24; i++)
        printf("  %-9s %-6s %-8s beta %-6g alpha %-6g W %-3lld  error %.4g (%d candidates)\n",
               falcon_variant_name(slot[i].v), falcon_align_name(slot[i].a), slot[i].decay ? "decay" : "nodecay",
               slot[i].best.beta, slot[i].best.alpha, (long long)slot[i].best.W, slot[i].err_t0,
               slot[i].candidates);
    const int nr = build_runs(slot, runs);
    if (run_all(&P, runs, nr, P.t0 * P.factor, edge, nbin, P.seeds, 1)) {
        fprintf(stderr, "falcon: error: learning: out of memory\n");
        return 2;
    }
    const double secs = omp_get_wtime() - t0;
    int failed = 0;
    printf("\nprediction error at T0 = %lld and in the last bin (%lld, %lld]:\n", (long long)P.t0,
           (long long)edge[nbin - 2], (long long)edge[nbin - 1]);
    for (int i = 0; i < nr; i++) {
        int b0 = 0;
        while (b0 < nbin - 1 && edge[b0] < P.t0) b0++;
        printf("  %-10s %-26s %10.4g %10.4g%s\n", runs[i].family, runs[i].name, nmse(&runs[i], b0),
               nmse(&runs[i], nbin - 1), runs[i].failed ? "  FAILED" : "");
        failed |= runs[i].failed;
    }
    int io = write_out(&P, slot, runs, nr, edge, nbin, floor_nmse, secs);
    io |= study_reports_end(!io);
    if (io) printf("\n%s in %.1f s; the reports were not written (%s keeps the earlier ones)\n",
                   failed ? "FAILED" : "done", secs, P.out);
    else printf("\n%s in %.1f s; wrote %s/learning.json, tuned.dat, curves/*.dat\n", failed ? "FAILED" : "done",
                secs, P.out);
    return io ? 2 : failed ? 1 : 0;
}
