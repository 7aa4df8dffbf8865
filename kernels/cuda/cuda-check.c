/*
 * cuda-check: the CUDA backend's own checks.
 *
 *   cuda-check emulate      (CPU) the kernels run in the CPU emulation
 *                           (cuda_emulate.c) against the scalar fp64 backend:
 *                           every variant x form x alignment x decay regime x
 *                           phi, state carried across two segments, batched
 *                           layout; plus races (threads of a phase run in
 *                           reverse must give bitwise the same result), block
 *                           sizes, shared-memory budgets down to none, and
 *                           larger / odd shapes.
 *   cuda-check unavailable  (no GPU) the cuda backend reports itself
 *                           unavailable and falcon_run refuses it cleanly.
 *   cuda-check device       (GPU) the same sweep on the GPU through falcon_run,
 *                           against the MPFR backend (fp64-rounded) when it is
 *                           built in, else the scalar fp64 backend.
 *   cuda-check bench [T]    (GPU) tokens/s and fraction of the measured fp32
 *                           FMA peak, recurrent and chunk forms.
 *   cuda-check auto         device if a GPU is usable, else unavailable.
 *
 * Errors are normwise relative, ||X - X_ref||_F / ||X_ref||_F, of the outputs
 * O and the final memory S, in units of fp32 roundoff u = 2^-24.
 *
 * Gate (documented in kernels/cuda/README.md): a case passes when both errors
 * are at most max(GATE_FLOOR, GATE_FACTOR x the error of the scalar fp32 CPU
 * backend on the same case, form and segmentation). The CPU fp32 backend is
 * the project's gated fp32 implementation of the same algorithms; the CUDA
 * kernels differ from it only in summation order (partial sums over column
 * slices, FMA contraction, device expf), so on random inputs they land within
 * a small factor of it. The floor keeps cases whose CPU error is a fraction
 * of a unit from failing on one unlucky rounding.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../src/internal.h"
#include "cuda_api.h"
#include "cuda_emulate.h"

#define GATE_FLOOR 32.0
#define GATE_FACTOR 4.0
#define U32 5.9604644775390625e-08 /* 2^-24 */

/* ---- inputs ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

enum { DECAY_NONE, DECAY_RESET, DECAY_MIX, NDECAY };
static const char *const decay_names[] = {"none", "reset", "mix"};

typedef struct case_t {
    falcon_variant variant;
    falcon_form form;
    falcon_align align;
    falcon_phi phi;
    int decay;
    int64_t B, H, T, n, m, W, C, split; /* split: first segment's length (0: one call) */
    double key_mag;   /* keys scaled to this magnitude (0: 1) */
    double value_mag; /* values and queries scaled to this magnitude (0: 1) */
    int set_memory;   /* start from a memory set by falcon_state_set_memory, not zero */
    double gain_mag;  /* Falcon-2/2A's gains scaled to this magnitude (0: 1) */
} case_t;

/* Inputs in fp32 (what the fp32 runs see) and the same values in double. */
typedef struct gen_t {
    int64_t rows;
    float *f[6];  /* q, k, v, beta, alpha, gain */
    double *d[6];
    int64_t width[6];
} gen_t;
enum { IQ, IK, IV, IBETA, IALPHA, IGAIN };

static void gen_free(gen_t *g)
{
    for (int i = 0; i < 6; i++) {
        free(g->f[i]);
        free(g->d[i]);
    }
    memset(g, 0, sizeof *g);
}

static void gen_make(const case_t *c, gen_t *g)
{
    memset(g, 0, sizeof *g);
    g->rows = c->B * c->T * c->H;
    const int64_t w[6] = {c->n, c->n, c->m, 1, 1, c->n};
    const int reg = falcon_variant_is_regression(c->variant);
    for (int i = 0; i < 6; i++) {
        g->width[i] = w[i];
        if (i == IALPHA && c->decay == DECAY_NONE) continue;
        if (i == IGAIN && !falcon_variant_has_gain(c->variant)) continue;
        const int64_t count = g->rows * w[i];
        g->f[i] = malloc(sizeof(float) * (size_t)(count + 1));
        g->d[i] = malloc(sizeof(double) * (size_t)(count + 1));
        for (int64_t j = 0; j < count; j++) {
            const int64_t t = (j / w[i] / c->H) % c->T;
            double x;
            switch (i) {
            case IBETA: x = reg ? 0.2 + 1.6 * urand() : 0.5 * urand(); break;
            case IALPHA:
                if (c->decay == DECAY_RESET) /* one near-reset, then slow decay */
                    x = t == c->T / 3 ? FLT_MIN : 0.97 + 0.03 * urand();
                else /* a random mixture of strong, near-reset and slow decays */
                    x = urand() < 0.1 ? FLT_MIN * (1 + urand()) : urand() < 0.5 ? 0.3 + 0.7 * urand() : 0.99 + 0.01 * urand();
                break;
            case IGAIN: x = 2.0 * urand(); break;
            default: x = 2.0 * urand() - 1.0;
            }
            if (i == IK && c->key_mag != 0) x *= c->key_mag;
            if ((i == IV || i == IQ) && c->value_mag != 0) x *= c->value_mag;
            if (i == IGAIN && c->gain_mag != 0) x *= c->gain_mag;
            g->f[i][j] = (float)x;
            g->d[i][j] = (double)g->f[i][j]; /* exactly the fp32 value */
        }
    }
}

/* Rows [t0, t1) of a [B][T][H][w] tensor as a new [B][t1-t0][H][w] one. */
static void *slice(const void *src, size_t elem, const case_t *c, int64_t w, int64_t t0, int64_t t1)
{
    if (!src) return NULL;
    const int64_t Ts = t1 - t0, rowb = c->H * w * (int64_t)elem;
    char *dst = malloc((size_t)(c->B * Ts * rowb + 1));
    for (int64_t b = 0; b < c->B; b++)
        memcpy(dst + b * Ts * rowb, (const char *)src + (b * c->T + t0) * rowb, (size_t)(Ts * rowb));
    return dst;
}

/* ---- running a case ---- */

typedef enum { RUN_LIB, RUN_EMU } run_kind;

/* falcon_run with the emulated CUDA kernels in place of the GPU: the same
 * steps as src/run.c (validate, work copy, backend, state bookkeeping). */
static falcon_status run_emu(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state,
                             void *out)
{
    falcon_status s = falcon_validate(cfg, in, state);
    if (s) return s;
    falcon_state *work;
    if ((s = falcon_state_copy(state, &work))) return s;
    s = falcon_cuda_run_with(cfg, in, work, out, fc_emu_exec);
    /* src/run.c's overflow check: a result that is not finite is reported */
    for (int64_t i = 0; !s && i < in->B * in->T * in->H * in->m; i++)
        if (!isfinite(((const float *)out)[i])) s = falcon_fail(FALCON_E_OVERFLOW, "out[%lld] is not finite", (long long)i);
    for (int64_t i = 0; !s && i < work->heads * work->m * work->n; i++)
        if (!isfinite(work->S[i])) s = falcon_fail(FALCON_E_OVERFLOW, "S[%lld] is not finite", (long long)i);
    if (s) {
        falcon_state_free(work);
        return s;
    }
    for (int64_t b = 0; b < in->B; b++)
        for (int64_t h = 0; h < in->H; h++) falcon_state_advance(work, cfg, in, b, h);
    falcon_state_take(state, work);
    return FALCON_OK;
}

/* Run case c (its form overridden by `form`) in segments; out_full
 * [B][T][H][m] and S [heads][m][n] in double. */
static falcon_status run_case(const case_t *c, const gen_t *g, falcon_backend be, falcon_precision prec,
                              falcon_form form, int split, run_kind kind, double *out_full, double *S)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = c->variant; cfg.align = c->align; cfg.phi = c->phi; cfg.form = form;
    cfg.backend = be; cfg.precision = prec; cfg.window = c->W; cfg.chunk = c->C;
    cfg.threads = 1;
    const size_t el = prec == FALCON_FP32 ? sizeof(float) : sizeof(double);
    falcon_state *st;
    falcon_status s = falcon_state_create(c->B * c->H, c->n, c->m, c->W, &st);
    if (s) return s;
    if (c->set_memory) {
        const int64_t cnt = c->B * c->H * c->m * c->n;
        double *S0 = malloc(sizeof(double) * (size_t)cnt);
        for (int64_t i = 0; i < cnt; i++) S0[i] = 0.5 - 0.125 * (double)(i % 9) + 0.01 * (double)(i % 31);
        s = falcon_state_set_memory(st, S0);
        free(S0);
        if (s) {
            falcon_state_free(st);
            return s;
        }
    }
    int64_t cuts[3] = {0, split > 0 && split < c->T ? split : c->T, c->T};
    const int nseg = cuts[1] < c->T ? 2 : 1;
    if (nseg == 1) cuts[1] = c->T;
    for (int sg = 0; sg < nseg && !s; sg++) {
        const int64_t t0 = cuts[sg], t1 = cuts[sg + 1], Ts = t1 - t0;
        void *p[6];
        for (int i = 0; i < 6; i++)
            p[i] = slice(prec == FALCON_FP32 ? (void *)g->f[i] : (void *)g->d[i], el, c, g->width[i], t0, t1);
        falcon_inputs in = falcon_inputs_sequence(Ts, c->n, c->m, p[IQ], p[IK], p[IV], p[IBETA], p[IALPHA], p[IGAIN]);
        in.B = c->B;
        in.H = c->H;
        const int64_t cnt = c->B * Ts * c->H * c->m;
        void *o = malloc(el * (size_t)(cnt + 1));
        for (int64_t i = 0; i < cnt; i++) /* poison: every output must be written */
            if (prec == FALCON_FP32) ((float *)o)[i] = NAN; else ((double *)o)[i] = NAN;
        s = kind == RUN_EMU ? run_emu(&cfg, &in, st, o) : falcon_run(&cfg, &in, st, o);
        if (!s)
            for (int64_t b = 0; b < c->B; b++)
                for (int64_t t = 0; t < Ts; t++)
                    for (int64_t i = 0; i < c->H * c->m; i++) {
                        const int64_t from = (b * Ts + t) * c->H * c->m + i;
                        out_full[(b * c->T + t0 + t) * c->H * c->m + i] =
                            prec == FALCON_FP32 ? (double)((float *)o)[from] : ((double *)o)[from];
                    }
        free(o);
        for (int i = 0; i < 6; i++) free(p[i]);
    }
    if (!s) memcpy(S, st->S, sizeof(double) * (size_t)(c->B * c->H * c->m * c->n));
    falcon_state_free(st);
    return s;
}

static double rel_err(const double *x, const double *ref, int64_t count)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < count; i++) {
        if (isnan(x[i])) return INFINITY;
        num += (x[i] - ref[i]) * (x[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return (den > 0 ? sqrt(num / den) : sqrt(num)) / U32;
}

/* ---- the sweep ---- */

typedef struct result_t {
    double err_o, err_s, cpu_o, cpu_s, gate;
    int pass;
} result_t;

static const char *form_short(falcon_form f)
{
    return f == FALCON_FORM_RECURRENT ? "rec" : f == FALCON_FORM_CHUNK ? "chunk" : "par";
}

static void case_name(const case_t *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%s/%s/decay=%s n=%lld m=%lld T=%lld W=%lld C=%lld B=%lld H=%lld%s%s%s",
             falcon_variant_name(c->variant), form_short(c->form), falcon_align_name(c->align),
             falcon_phi_name(c->phi), decay_names[c->decay], (long long)c->n, (long long)c->m,
             (long long)c->T, (long long)c->W, (long long)c->C, (long long)c->B, (long long)c->H,
             c->key_mag != 0 ? (c->key_mag > 1 ? " huge-keys" : " tiny-keys") : "",
             c->gain_mag != 0 ? (c->gain_mag > 1 ? " huge-gains" : " tiny-gains") : "",
             c->set_memory ? " set-memory" : "");
}

typedef struct refs_t {
    double *ref_o, *ref_s, *cpu_o, *cpu_s, *o, *s;
} refs_t;

static int refs_alloc(const case_t *c, refs_t *r)
{
    const int64_t no = c->B * c->T * c->H * c->m, ns = c->B * c->H * c->m * c->n;
    double *buf = malloc(sizeof(double) * (size_t)(3 * (no + ns)));
    if (!buf) return -1;
    r->ref_o = buf; r->ref_s = buf + no;
    r->cpu_o = r->ref_s + ns; r->cpu_s = r->cpu_o + no;
    r->o = r->cpu_s + ns; r->s = r->o + no;
    return 0;
}

/* Reference (fp64 recurrent, one call) and the CPU fp32 yardstick. */
static int compute_refs(const case_t *c, const gen_t *g, falcon_backend ref_be, refs_t *r)
{
    falcon_status s = run_case(c, g, ref_be, FALCON_FP64, FALCON_FORM_RECURRENT, 0, RUN_LIB, r->ref_o, r->ref_s);
    if (!s) s = run_case(c, g, FALCON_BACKEND_SCALAR, FALCON_FP32, c->form, (int)c->split, RUN_LIB, r->cpu_o, r->cpu_s);
    if (s) fprintf(stderr, "reference run failed: %s\n", falcon_last_error());
    return s ? -1 : 0;
}

static result_t judge(const case_t *c, const refs_t *r)
{
    const int64_t no = c->B * c->T * c->H * c->m, ns = c->B * c->H * c->m * c->n;
    result_t x;
    x.err_o = rel_err(r->o, r->ref_o, no);
    x.err_s = rel_err(r->s, r->ref_s, ns);
    x.cpu_o = rel_err(r->cpu_o, r->ref_o, no);
    x.cpu_s = rel_err(r->cpu_s, r->ref_s, ns);
    const double cpu = x.cpu_o > x.cpu_s ? x.cpu_o : x.cpu_s;
    x.gate = GATE_FACTOR * cpu > GATE_FLOOR ? GATE_FACTOR * cpu : GATE_FLOOR;
    x.pass = x.err_o <= x.gate && x.err_s <= x.gate;
    return x;
}

/* Per (variant, form): worst ratio error / gate, for the summary table. */
typedef struct summary_t {
    double worst_err[6][3], worst_ratio[6][3], worst_cpu[6][3];
    int cases[6][3], fails[6][3];
} summary_t;

static void summarize(summary_t *sm, const case_t *c, const result_t *x)
{
    const int v = (int)c->variant, f = (int)c->form;
    const double e = x->err_o > x->err_s ? x->err_o : x->err_s;
    const double cpu = x->cpu_o > x->cpu_s ? x->cpu_o : x->cpu_s;
    if (e > sm->worst_err[v][f]) sm->worst_err[v][f] = e;
    if (cpu > sm->worst_cpu[v][f]) sm->worst_cpu[v][f] = cpu;
    if (e / x->gate > sm->worst_ratio[v][f]) sm->worst_ratio[v][f] = e / x->gate;
    sm->cases[v][f]++;
    sm->fails[v][f] += !x->pass;
}

static void print_summary(const summary_t *sm, const char *what)
{
    printf("\n%s: worst error (units of 2^-24) per variant and form; cpu = scalar fp32 on the same cases\n", what);
    printf("%-10s %-6s %6s %10s %10s %10s %6s\n", "variant", "form", "cases", "worst", "cpu-fp32", "err/gate", "fails");
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++)
            if (sm->cases[v][f])
                printf("%-10s %-6s %6d %10.2f %10.2f %10.3f %6d\n", falcon_variant_name((falcon_variant)v),
                       form_short((falcon_form)f), sm->cases[v][f], sm->worst_err[v][f], sm->worst_cpu[v][f],
                       sm->worst_ratio[v][f], sm->fails[v][f]);
}

/* The standard case list: every variant x form x align x decay x phi on a
 * small batched shape, plus larger and odd shapes. */
static int make_cases(case_t **out, int big)
{
    int cap = 1024, n = 0;
    case_t *cs = malloc(sizeof(case_t) * (size_t)cap);
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++)
            for (int a = 0; a < 2; a++)
                for (int d = 0; d < NDECAY; d++)
                    for (int p = 0; p < 4; p++) {
                        case_t c = {(falcon_variant)v, (falcon_form)f, (falcon_align)a, (falcon_phi)p, d,
                                    2, 3, 40, 12, 10, falcon_variant_has_window((falcon_variant)v) ? 3 : 1, 8, 17, 0, 0, 0, 0};
                        cs[n++] = c;
                    }
    /* keys at the limits of fp32 (x.x overflows or underflows where the
     * results do not), and a memory that is not zero before a first step
     * that learns nothing (prefix alignment, no previous key) */
    const double mags[] = {1e20, 1e30, 1e-20};
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++) {
            for (int k = 0; k < 3; k++)
                for (int a = 0; a < 2; a++) {
                    case_t c = {(falcon_variant)v, (falcon_form)f, (falcon_align)a, (falcon_phi)((v + k + a) % 4),
                                DECAY_MIX, 2, 3, 40, 12, 10, falcon_variant_has_window((falcon_variant)v) ? 3 : 1,
                                8, 17, mags[k], 0, 0, 0};
                    cs[n++] = c;
                }
            /* Falcon-2/2A: gains of 1e30 with keys of 1 and 1e20, and 1e-30 */
            for (int k = 0; k < 3 && falcon_variant_has_gain((falcon_variant)v); k++) {
                case_t c = {(falcon_variant)v, (falcon_form)f, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, DECAY_MIX,
                            2, 3, 40, 12, 10, 1, 8, 17, k == 1 ? 1e20 : 0, 0, 0, k == 2 ? 1e-30 : 1e30};
                cs[n++] = c;
            }
            case_t c = {(falcon_variant)v, (falcon_form)f, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, DECAY_MIX,
                        2, 3, 40, 12, 10, falcon_variant_has_window((falcon_variant)v) ? 3 : 1, 8, 0, 0, 0, 1, 0};
            cs[n++] = c;
        }
    /* larger and odd shapes: on-chip limits, global fallbacks, long blocks */
    const int64_t shapes[][4] = {{128, 128, 24, 1}, {130, 70, 20, 1}, {33, 129, 20, 2}, {64, 64, 300, 1}};
    const int nshapes = big ? 4 : 3;
    for (int s = 0; s < nshapes; s++)
        for (int v = 0; v < 6; v++)
            for (int f = 0; f < 3; f++) {
                case_t c = {(falcon_variant)v, (falcon_form)f, FALCON_ALIGN_PREFIX, FALCON_PHI_L2NORM, DECAY_MIX,
                            1, shapes[s][3], shapes[s][2], shapes[s][0], shapes[s][1],
                            falcon_variant_has_window((falcon_variant)v) ? 4 : 1, 16, shapes[s][2] / 2 + 1, 0, 0, 0, 0};
                cs[n++] = c;
            }
    *out = cs;
    return n;
}

static int mode_emulate(int use_mpfr)
{
    case_t *cs;
    const int ncases = make_cases(&cs, 0);
    const falcon_backend small_ref = use_mpfr && falcon_backend_available(FALCON_BACKEND_MPFR)
                                         ? FALCON_BACKEND_MPFR : FALCON_BACKEND_SCALAR;
    printf("reference: %s recurrent fp64, one call (scalar fp64 for n or m > 12)\n",
           falcon_backend_name(small_ref));
    summary_t sm, sm_lim;
    memset(&sm, 0, sizeof sm);
    memset(&sm_lim, 0, sizeof sm_lim);
    int fails = 0, races = 0, layout_fails = 0, checked_layouts = 0;
    for (int i = 0; i < ncases; i++) {
        const case_t *c = &cs[i];
        gen_t g;
        refs_t r;
        gen_make(c, &g);
        const falcon_backend ref_be = c->n <= 12 && c->m <= 12 ? small_ref : FALCON_BACKEND_SCALAR;
        if (refs_alloc(c, &r) || compute_refs(c, &g, ref_be, &r)) return 2;
        fc_emu_smem_bytes = 227 * 1024;
        fc_emu_threads = 0;
        fc_emu_reverse = 0;
        char name[256];
        case_name(c, name, sizeof name);
        if (run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_EMU, r.o, r.s)) {
            printf("FAIL %s: emulated run failed: %s\n", name, falcon_last_error());
            fails++;
            continue;
        }
        result_t x = judge(c, &r);
        summarize(c->key_mag != 0 || c->gain_mag != 0 || c->set_memory ? &sm_lim : &sm, c, &x);
        if (!x.pass) {
            printf("FAIL %s: err O %.2f S %.2f > gate %.2f (cpu fp32 O %.2f S %.2f)\n", name, x.err_o, x.err_s,
                   x.gate, x.cpu_o, x.cpu_s);
            fails++;
        }
        /* Races: the same run with each phase's threads in reverse order, at
         * a small block so that every thread has several items. */
        if (c->phi == FALCON_PHI_L2NORM || c->n > 12) {
            const int64_t no = c->B * c->T * c->H * c->m, ns = c->B * c->H * c->m * c->n;
            double *o2 = malloc(sizeof(double) * (size_t)(2 * (no + ns)));
            double *s2 = o2 + no, *o3 = s2 + ns, *s3 = o3 + no;
            fc_emu_threads = 64;
            fc_emu_reverse = 0;
            falcon_status s1 = run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_EMU, o2, s2);
            fc_emu_reverse = 1;
            falcon_status s2s = run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_EMU, o3, s3);
            if (s1 || s2s || memcmp(o2, o3, sizeof(double) * (size_t)(no + ns))) {
                printf("RACE %s: results depend on the order of threads within a phase\n", name);
                races++;
            }
            fc_emu_reverse = 0;
            /* Block sizes and shared-memory budgets, down to everything in
             * global memory. */
            const int threads[] = {32, 96, 512};
            const int64_t budgets[] = {227 * 1024, 16 * 1024, 0};
            for (int ti = 0; ti < 3; ti++)
                for (int bi = 0; bi < 3; bi++) {
                    fc_emu_threads = threads[ti];
                    fc_emu_smem_bytes = budgets[bi];
                    refs_t r2 = r;
                    r2.o = o2;
                    r2.s = s2;
                    falcon_status s3s = run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_EMU, o2, s2);
                    result_t y = judge(c, &r2);
                    checked_layouts++;
                    if (s3s || !y.pass) {
                        printf("FAIL %s threads=%d smem=%lld: err O %.2f S %.2f > gate %.2f\n", name, threads[ti],
                               (long long)budgets[bi], y.err_o, y.err_s, y.gate);
                        layout_fails++;
                    }
                }
            fc_emu_threads = 0;
            fc_emu_smem_bytes = 227 * 1024;
            free(o2);
        }
        free(r.ref_o);
        gen_free(&g);
    }
    print_summary(&sm, "CUDA kernels in CPU emulation vs scalar fp64");
    print_summary(&sm_lim, "the same, keys of 1e20, 1e30 and 1e-20, gains of 1e30 and 1e-30, and a set memory before an empty step");

    /* Results that overflow fp32 (o = S q of order 1e72): reported as an
     * overflow, as the CPU backends do, in every variant and form. */
    int overflow_fails = 0;
    for (int v = 0; v < 6; v++)
        for (int f = 0; f < 3; f++) {
            case_t c = {(falcon_variant)v, (falcon_form)f, FALCON_ALIGN_SAME, FALCON_PHI_IDENTITY, DECAY_NONE,
                        1, 2, 12, 6, 5, falcon_variant_has_window((falcon_variant)v) ? 3 : 1, 4, 0, 0, 1e36, 0, 0};
            gen_t g;
            refs_t r;
            gen_make(&c, &g);
            if (refs_alloc(&c, &r)) return 2;
            const falcon_status cpu = run_case(&c, &g, FALCON_BACKEND_SCALAR, FALCON_FP32, c.form, 0, RUN_LIB, r.cpu_o, r.cpu_s);
            const falcon_status emu = run_case(&c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c.form, 0, RUN_EMU, r.o, r.s);
            if (cpu != FALCON_E_OVERFLOW || emu != FALCON_E_OVERFLOW) {
                char name[256];
                case_name(&c, name, sizeof name);
                printf("FAIL %s values 1e36: scalar fp32 %s, emulated %s (both must be overflow)\n", name,
                       falcon_status_name(cpu), falcon_status_name(emu));
                overflow_fails++;
            }
            free(r.ref_o);
            gen_free(&g);
        }
    printf("overflowing results: 18 cases, %d not reported as an overflow\n", overflow_fails);
    fails += overflow_fails;
    printf("\nemulation: %d cases, %d failed the gate; %d race checks failed; %d layout/block-size runs, %d failed\n",
           ncases, fails, races, checked_layouts, layout_fails);
    free(cs);

    /* fp64 is refused (the backend computes in fp32). */
    {
        double q[4] = {1, 0, 0, 1}, k[4] = {0, 1, 1, 0}, v[2] = {1, 2}, beta[2] = {1, 1}, o[2];
        falcon_config cfg;
        falcon_config_default(&cfg);
        cfg.precision = FALCON_FP64;
        cfg.backend = FALCON_BACKEND_CUDA;
        falcon_inputs in = falcon_inputs_sequence(2, 2, 1, q, k, v, beta, NULL, NULL);
        falcon_state *st;
        falcon_state_create(1, 2, 1, 1, &st);
        falcon_status s = falcon_cuda_run_with(&cfg, &in, st, o, fc_emu_exec);
        printf("fp64 request: %s: %s\n", falcon_status_name(s), falcon_last_error());
        if (s != FALCON_E_UNAVAILABLE) fails++;
        falcon_state_free(st);
    }
    const int bad = fails + races + layout_fails;
    printf("%s\n", bad ? "EMULATION CHECK FAILED" : "EMULATION CHECK PASSED");
    return bad ? 1 : 0;
}

static int mode_unavailable(void)
{
    int bad = 0;
    const int avail = falcon_backend_available(FALCON_BACKEND_CUDA);
    printf("falcon_backend_available(cuda) = %d\n", avail);
    printf("falcon_backend_describe(cuda) = %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
    if (avail) {
        printf("a GPU is usable here: run `cuda-check device`\n");
        return 1;
    }
    float q[4] = {1, 0, 0, 1}, k[4] = {0, 1, 1, 0}, v[2] = {1, 2}, beta[2] = {1, 1};
    float o[2] = {42, 42};
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.backend = FALCON_BACKEND_CUDA;
    falcon_inputs in = falcon_inputs_sequence(2, 2, 1, q, k, v, beta, NULL, NULL);
    falcon_status s = falcon_run(&cfg, &in, NULL, o);
    printf("falcon_run(backend cuda): %s: %s\n", falcon_status_name(s), falcon_last_error());
    if (s != FALCON_E_UNAVAILABLE || o[0] != 42 || o[1] != 42) bad++;
    /* the backend entry point itself, below falcon_run's availability check */
    falcon_state *st;
    falcon_state_create(1, 2, 1, 1, &st);
    s = falcon_cuda_run(&cfg, &in, st, o);
    printf("falcon_cuda_run: %s: %s\n", falcon_status_name(s), falcon_last_error());
    if (s != FALCON_E_UNAVAILABLE || o[0] != 42) bad++;
    falcon_state_free(st);
    if (falcon_backend_resolve(FALCON_BACKEND_AUTO) == FALCON_BACKEND_CUDA) bad++;
    printf("%s\n", bad ? "UNAVAILABLE CHECK FAILED" : "UNAVAILABLE CHECK PASSED");
    return bad ? 1 : 0;
}

static int mode_device(int quick)
{
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        printf("no usable GPU: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
        return 2;
    }
    printf("device: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
    const int mpfr = falcon_backend_available(FALCON_BACKEND_MPFR);
    printf("reference: %s\n", mpfr ? "MPFR backend (256 bits, rounded to fp64), recurrent form, one call; "
                                     "scalar fp64 for the larger shapes (n or m > 12)"
                                   : "MPFR is not built in here: scalar fp64 CPU backend, recurrent form, one call");
    case_t *cs;
    int ncases = make_cases(&cs, 1);
    if (quick) { /* one small case per variant and form (for compute-sanitizer) */
        int k = 0;
        for (int i = 0; i < ncases; i++)
            if (cs[i].n == 12 && cs[i].align == FALCON_ALIGN_PREFIX && cs[i].decay == DECAY_MIX &&
                cs[i].phi == FALCON_PHI_L2NORM)
                cs[k++] = cs[i];
        ncases = k;
    }
    summary_t sm;
    memset(&sm, 0, sizeof sm);
    int fails = 0;
    double worst_emu_gap = 0;
    for (int i = 0; i < ncases; i++) {
        const case_t *c = &cs[i];
        gen_t g;
        refs_t r;
        gen_make(c, &g);
        const falcon_backend ref_be =
            mpfr && !quick && c->n <= 12 && c->m <= 12 ? FALCON_BACKEND_MPFR : FALCON_BACKEND_SCALAR;
        if (refs_alloc(c, &r) || compute_refs(c, &g, ref_be, &r)) return 2;
        char name[256];
        case_name(c, name, sizeof name);
        if (run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_LIB, r.o, r.s)) {
            printf("FAIL %s: GPU run failed: %s\n", name, falcon_last_error());
            fails++;
            continue;
        }
        result_t x = judge(c, &r);
        summarize(&sm, c, &x);
        /* the same kernels emulated on the CPU, for diagnosis */
        refs_t re = r;
        const int64_t no = c->B * c->T * c->H * c->m, ns = c->B * c->H * c->m * c->n;
        re.o = malloc(sizeof(double) * (size_t)(no + ns));
        re.s = re.o + no;
        double emu = -1;
        if (!quick && !run_case(c, &g, FALCON_BACKEND_CUDA, FALCON_FP32, c->form, (int)c->split, RUN_EMU, re.o, re.s)) {
            result_t y = judge(c, &re);
            emu = y.err_o > y.err_s ? y.err_o : y.err_s;
            const double e = x.err_o > x.err_s ? x.err_o : x.err_s;
            if (e - emu > worst_emu_gap) worst_emu_gap = e - emu;
        }
        free(re.o);
        if (!x.pass) {
            printf("FAIL %s: err O %.2f S %.2f > gate %.2f (cpu fp32 O %.2f S %.2f; emulated %.2f)\n", name,
                   x.err_o, x.err_s, x.gate, x.cpu_o, x.cpu_s, emu);
            fails++;
        }
        free(r.ref_o);
        gen_free(&g);
    }
    print_summary(&sm, "CUDA backend on the GPU vs fp64 reference");
    printf("largest excess of a GPU error over the emulated kernels' error: %.2f units\n", worst_emu_gap);
    printf("gate: error <= max(%.0f, %.0f x cpu fp32 error) on both O and S\n", GATE_FLOOR, GATE_FACTOR);
    printf("device check: %d cases, %d failed: %s\n", ncases, fails, fails ? "FAILED" : "PASSED");
    free(cs);
    return fails ? 1 : 0;
}

/* ---- benchmark ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* FLOPs of the algorithm as implemented (multiply-add = 2) per head. */
static double bench_flops(falcon_form form, int64_t T, int64_t n, int64_t m, int64_t L)
{
    if (form == FALCON_FORM_RECURRENT) /* P = S [x q] (2 dots), update (1 rank-1 + scale) */
        return (double)T * (2.0 * 2 * m * n + 2.0 * m * n + m * n);
    const double blocks = (double)T / L, G = (double)L, P = (double)L;
    /* QZ, S0q, KZ, U, solve, outputs, end-state update */
    const double per = 2 * L * G * n + 2.0 * L * m * n + 2 * G * G * n + 2 * G * m * n + P * P * m +
                       L * P * m * 2 + 2 * m * n * G;
    return blocks * per;
}

static int mode_bench(int64_t Tmax)
{
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        printf("no usable GPU: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
        return 2;
    }
    const double peak = fc_dev_fp32_peak();
    printf("device: %s\nmeasured fp32 FMA peak: %.1f TFLOP/s\n", falcon_backend_describe(FALCON_BACKEND_CUDA),
           peak * 1e-12);
    const int64_t Hs[] = {16, 64}, dims[] = {64, 128};
    const int64_t rows_max = 64 * Tmax, nmax = 128;
    float *q = malloc(sizeof(float) * (size_t)(rows_max * nmax)), *k = malloc(sizeof(float) * (size_t)(rows_max * nmax));
    float *v = malloc(sizeof(float) * (size_t)(rows_max * nmax)), *o = malloc(sizeof(float) * (size_t)(rows_max * nmax));
    float *beta = malloc(sizeof(float) * (size_t)rows_max), *alpha = malloc(sizeof(float) * (size_t)rows_max);
    if (!q || !k || !v || !o || !beta || !alpha) {
        printf("out of host memory for T = %lld\n", (long long)Tmax);
        return 2;
    }
    for (int64_t i = 0; i < rows_max * nmax; i++) {
        q[i] = (float)(urand() * 2 - 1);
        k[i] = (float)(urand() * 2 - 1);
        v[i] = (float)(urand() * 2 - 1);
    }
    for (int64_t i = 0; i < rows_max; i++) {
        beta[i] = (float)(0.2 + urand());
        alpha[i] = (float)(0.98 + 0.02 * urand());
    }
    fc_dev_set_timing(1);
    printf("\n%-10s %5s %7s %5s %10s %10s %12s %10s %8s\n", "form", "heads", "T", "n=m", "kernel ms", "wall ms",
           "tokens/s", "GFLOP/s", "%peak");
    for (int fi = 0; fi < 2; fi++)
        for (int hi = 0; hi < 2; hi++)
            for (int di = 0; di < 2; di++) {
                const falcon_form form = fi ? FALCON_FORM_CHUNK : FALCON_FORM_RECURRENT;
                const int64_t H = Hs[hi], d = dims[di], T = Tmax;
                falcon_config cfg;
                falcon_config_default(&cfg);
                cfg.backend = FALCON_BACKEND_CUDA;
                cfg.form = form;
                cfg.chunk = 64;
                falcon_inputs in = falcon_inputs_sequence(T, d, d, q, k, v, beta, alpha, NULL);
                in.H = H;
                falcon_state *st;
                falcon_state_create(H, d, d, 1, &st);
                /* warm-up on a short prefix, then the timed run */
                falcon_inputs warm = in;
                warm.T = T < 256 ? T : 256;
                falcon_status s = falcon_cuda_run(&cfg, &warm, st, o);
                falcon_state_reset(st);
                const double t0 = now_s();
                if (!s) s = falcon_cuda_run(&cfg, &in, st, o);
                const double wall = (now_s() - t0) * 1e3;
                const double ms = fc_dev_last_kernel_ms();
                falcon_state_free(st);
                if (s) {
                    printf("%-10s %5lld %7lld %5lld   failed: %s\n", falcon_form_name(form), (long long)H,
                           (long long)T, (long long)d, falcon_last_error());
                    continue;
                }
                const double fl = bench_flops(form, T, d, d, cfg.chunk) * H;
                printf("%-10s %5lld %7lld %5lld %10.2f %10.1f %12.3e %10.1f %7.2f%%\n", falcon_form_name(form),
                       (long long)H, (long long)T, (long long)d, ms, wall, H * T / (ms * 1e-3),
                       fl / (ms * 1e-3) * 1e-9, peak > 0 ? 100.0 * fl / (ms * 1e-3) / peak : 0.0);
            }
    printf("(kernel ms: prep + main kernels by CUDA events, no copies; wall ms includes the host<->device copies;\n"
           " GFLOP/s counts the algorithm's multiply-adds as 2; %%peak against the measured FMA peak)\n");
    free(q); free(k); free(v); free(o); free(beta); free(alpha);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines survive a timeout's kill */
    const char *mode = argc > 1 ? argv[1] : "auto";
    if (!strcmp(mode, "emulate")) return mode_emulate(argc > 2 && !strcmp(argv[2], "mpfr"));
    if (!strcmp(mode, "unavailable")) return mode_unavailable();
    if (!strcmp(mode, "device")) return mode_device(argc > 2 && !strcmp(argv[2], "quick"));
    if (!strcmp(mode, "bench")) return mode_bench(argc > 2 ? atoll(argv[2]) : 65536);
    if (!strcmp(mode, "auto"))
        return falcon_backend_available(FALCON_BACKEND_CUDA) ? mode_device(0) : mode_unavailable();
    fprintf(stderr, "usage: %s emulate [mpfr] | unavailable | device [quick] | bench [T] | auto\n", argv[0]);
    return 2;
}
