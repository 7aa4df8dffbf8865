/*
 * The blocked forms' backward driver (kernels/framework/backward-blocked.inc.c),
 * called directly on head views (as src/run_cpu.inc.c builds forward heads),
 * against central finite differences of falcon_run (chunk form, fp64).
 *
 * Each input tensor in turn (q, k, v, beta, alpha, gain, the carried memory,
 * previous key and history) gets a random direction d; the driver's
 * directional derivative SUM g_i d_i is compared with the Richardson
 * extrapolation R = (4 D(h/2) - D(h)) / 3 of the central differences
 * D(h) = (L(x + h d) - L(x - h d)) / 2h of L = <O, dO> + <S_T, dS_T>.
 * Error of R (d scaled so that h is a relative step): truncation O(h^4)
 * times L's fifth derivative along d, and the rounding of L, about
 * u_64 |L|_abs per evaluation, divided by h, with |L|_abs = SUM |dO o| +
 * SUM |dS_T S_T|. With h = 2^-10 the bound is
 *     |g.d - R| <= TOL_TRUNC SUM |g_i d_i| + TOL_ROUND u_64 |L|_abs / h,
 * TOL_TRUNC = 1e-8 covering h^4 ~ 1e-12 times derivative ratios of up to
 * 1e4, TOL_ROUND = 64 covering the 6 evaluations' roundings with their
 * weights 4/3 and 1/3 and the forward's own error of a few u each.
 * A gradient off by one term (a dropped decay factor, a sign) is off by a
 * part of order 1 of SUM |g d|. Measured: the largest error is 0.064 of
 * its bound over every case (scalar backend, fp64).
 *
 * fp32 against fp64: the same float inputs through both drivers; the
 * normwise relative difference of each gradient tensor below FP32_K u_32:
 * the fp32 pass's rounding, a few u per operation through blocks of depth
 * 3 and 11 steps times the gradients' conditioning; measured at most 13.5 u
 * on these well-conditioned random inputs, so 256 leaves a margin of 19.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "../src/backends.h"
#include "../src/internal.h"

enum { NB = 2, NH = 2, HEADS = NB * NH };
enum { TQ, TK, TV, TBETA, TALPHA, TGAIN, TS0, TPK, THK, THV, NTENS };
static const char *tens_name[NTENS] = {"q", "k", "v", "beta", "alpha", "gain", "S0", "prev_key", "hist_k", "hist_v"};

#define TOL_TRUNC 1e-8
#define TOL_ROUND 64.0
#define FD_H 0x1p-10
#define FP32_K 256.0

typedef struct prob {
    falcon_variant var;
    falcon_align align;
    falcon_phi phi;
    int64_t T, n, m, W, chunk;
    int decay; /* 0 none, 1 mild, 2 a near-reset then slow decay */
    double *x[NTENS]; /* the inputs, per tensor */
    int64_t len[NTENS];
    uint8_t has_prev[HEADS];
    int64_t hist_len[HEADS];
    double *dO, *dST;
} prob;

static uint64_t rng_state;
static double urand(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * 0x1p-53;
}
static double srand1(void) { return 2 * urand() - 1; }

static int has_tensor(const prob *p, int t)
{
    if (t == TALPHA) return p->decay != 0;
    if (t == TGAIN) return falcon_variant_has_gain(p->var);
    if (t == TPK) return p->align == FALCON_ALIGN_PREFIX;
    if (t == THK || t == THV) return p->W > 1;
    return 1;
}

static void prob_make(prob *p, falcon_variant var, falcon_align al, falcon_phi phi, int decay, int64_t T,
                      int64_t chunk, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    rng_state = seed;
    p->var = var, p->align = al, p->phi = phi, p->decay = decay, p->T = T, p->chunk = chunk;
    p->n = 5, p->m = 3;
    p->W = falcon_variant_has_window(var) ? 3 : 1;
    const int64_t n = p->n, m = p->m, keep = p->W - 1, rows = NB * T * NH;
    const int64_t lens[NTENS] = {rows * n, rows * n, rows * m, rows, rows, rows * n, HEADS * m * n, HEADS * n,
                                 HEADS * (keep > 0 ? keep : 1) * n, HEADS * (keep > 0 ? keep : 1) * m};
    for (int t = 0; t < NTENS; t++) {
        p->len[t] = lens[t];
        p->x[t] = calloc((size_t)lens[t], sizeof(double));
        /* keys and queries at least 0.1 from relu's and elu1's kinks at 0,
         * 100 times the finite differences' steps */
        const int key = t == TQ || t == TK || t == TPK || t == THK;
        for (int64_t i = 0; i < lens[t]; i++)
            p->x[t][i] = key ? (urand() < 0.5 ? -1 : 1) * (0.1 + 0.9 * urand()) : srand1();
    }
    for (int64_t i = 0; i < rows; i++) {
        p->x[TBETA][i] = 0.2 + 1.3 * urand();
        p->x[TALPHA][i] = decay == 1 ? 0.5 + 0.45 * urand() : 0.97 + 0.02 * urand();
        for (int64_t c = 0; c < n; c++) p->x[TGAIN][i * n + c] = 0.5 + urand();
    }
    if (decay == 2) /* step 4 of every head: a near-reset */
        for (int64_t i = 4 * NH; i < 5 * NH * 1; i++)
            for (int64_t b = 0; b < NB; b++) p->x[TALPHA][b * T * NH + i] = 1e-300;
    for (int64_t hh = 0; hh < HEADS; hh++) {
        p->has_prev[hh] = hh % 2 == 0;
        p->hist_len[hh] = keep > 0 ? (hh < 2 ? keep : hh - 2) : 0;
    }
    p->dO = calloc((size_t)(rows * m), sizeof(double));
    p->dST = calloc((size_t)(HEADS * m * n), sizeof(double));
    for (int64_t i = 0; i < rows * m; i++) p->dO[i] = srand1();
    for (int64_t i = 0; i < HEADS * m * n; i++) p->dST[i] = srand1();
}

static void prob_free(prob *p)
{
    for (int t = 0; t < NTENS; t++) free(p->x[t]);
    free(p->dO), free(p->dST);
}

static falcon_config prob_config(const prob *p, falcon_precision prec)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = p->var, cfg.align = p->align, cfg.phi = p->phi, cfg.form = FALCON_FORM_CHUNK;
    cfg.precision = prec, cfg.window = p->W, cfg.chunk = p->chunk, cfg.threads = 1;
    cfg.backend = FALCON_BACKEND_SCALAR;
    return cfg;
}

static falcon_state *prob_state(const prob *p)
{
    falcon_state *st = NULL;
    cr_assert_eq(falcon_state_create(HEADS, p->n, p->m, p->W, &st), FALCON_OK);
    const int64_t n = p->n, m = p->m, keep = p->W - 1;
    memcpy(st->S, p->x[TS0], sizeof(double) * (size_t)(HEADS * m * n));
    st->memory_f32 = 0;
    for (int64_t hh = 0; hh < HEADS; hh++) {
        st->has_prev[hh] = p->has_prev[hh] && p->align == FALCON_ALIGN_PREFIX;
        memcpy(st->prev_key + hh * n, p->x[TPK] + hh * n, sizeof(double) * (size_t)n);
        st->hist_len[hh] = p->hist_len[hh];
        if (keep > 0) {
            memcpy(st->hist_k + hh * keep * n, p->x[THK] + hh * keep * n, sizeof(double) * (size_t)(keep * n));
            memcpy(st->hist_v + hh * keep * m, p->x[THV] + hh * keep * m, sizeof(double) * (size_t)(keep * m));
        }
    }
    return st;
}

/* L = <O, dO> + <S_T, dS_T> from falcon_run (fp64, chunk form); *mag:
 * the sum of the magnitudes of its terms. */
static double loss(const prob *p, double *mag)
{
    const int64_t rows = NB * p->T * NH, m = p->m, n = p->n;
    falcon_config cfg = prob_config(p, FALCON_FP64);
    falcon_inputs in = {.B = NB, .T = p->T, .H = NH, .n = n, .m = m, .q = p->x[TQ], .k = p->x[TK], .v = p->x[TV],
                        .beta = p->x[TBETA], .alpha = p->decay ? p->x[TALPHA] : NULL,
                        .gain = falcon_variant_has_gain(p->var) ? p->x[TGAIN] : NULL};
    falcon_state *st = prob_state(p);
    double *out = calloc((size_t)(rows * m), sizeof(double)), L = 0, a = 0;
    falcon_status s = falcon_run(&cfg, &in, st, out);
    cr_assert_eq(s, FALCON_OK, "falcon_run: %s", falcon_last_error());
    for (int64_t i = 0; i < rows * m; i++) L += out[i] * p->dO[i], a += fabs(out[i] * p->dO[i]);
    for (int64_t i = 0; i < HEADS * m * n; i++) L += st->S[i] * p->dST[i], a += fabs(st->S[i] * p->dST[i]);
    falcon_state_free(st);
    free(out);
    if (mag) *mag = a;
    return L;
}

/* The driver's gradients of every head, as double, in the tensors' layouts
 * (g[t] as p->x[t]); the inputs rounded to R first. */
#define GRADS_DEFINE(R, SFX)                                                                             \
    static void grads_##SFX(const prob *p, const falcon_cpu_##SFX *cpu, double *g[NTENS])                \
    {                                                                                                    \
        const int64_t T = p->T, n = p->n, m = p->m, keep = p->W - 1;                                     \
        R *xr[NTENS], *gr[NTENS];                                                                        \
        for (int t = 0; t < NTENS; t++) {                                                                \
            xr[t] = calloc((size_t)p->len[t], sizeof(R));                                                \
            gr[t] = calloc((size_t)p->len[t], sizeof(R));                                                \
            for (int64_t i = 0; i < p->len[t]; i++) xr[t][i] = (R)p->x[t][i];                            \
            memset(g[t], 0, sizeof(double) * (size_t)p->len[t]);                                         \
        }                                                                                                \
        R *dOr = calloc((size_t)(NB * T * NH * m), sizeof(R));                                           \
        for (int64_t i = 0; i < NB * T * NH * m; i++) dOr[i] = (R)p->dO[i];                              \
        double *S0 = calloc((size_t)(HEADS * m * n), sizeof(double)), *pk = calloc((size_t)(HEADS * n), sizeof(double)); \
        double *hk = calloc((size_t)(HEADS * (keep + 1) * n), sizeof(double));                           \
        double *hv = calloc((size_t)(HEADS * (keep + 1) * m), sizeof(double)), *dST = calloc((size_t)(HEADS * m * n), sizeof(double)); \
        for (int64_t i = 0; i < HEADS * m * n; i++) S0[i] = (double)(R)p->x[TS0][i], dST[i] = (double)(R)p->dST[i]; \
        for (int64_t i = 0; i < HEADS * n; i++) pk[i] = (double)(R)p->x[TPK][i];                         \
        for (int64_t i = 0; i < HEADS * keep * n; i++) hk[i] = (double)(R)p->x[THK][i];                  \
        for (int64_t i = 0; i < HEADS * keep * m; i++) hv[i] = (double)(R)p->x[THV][i];                  \
        const int64_t L = falcon_chunk_block(p->chunk, p->W);                                            \
        for (int64_t hh = 0; hh < HEADS; hh++) {                                                         \
            const int64_t base = (hh / NH) * T * NH + hh % NH;                                           \
            double scale = 1;                                                                            \
            falcon_grad_head_##SFX gh = {                                                                \
                .f = {.T = T, .n = n, .m = m, .q = xr[TQ] + base * n, .k = xr[TK] + base * n,            \
                      .gain = falcon_variant_has_gain(p->var) ? xr[TGAIN] + base * n : NULL,             \
                      .ldk = NH * n, .v = xr[TV] + base * m, .ldv = NH * m, .beta = xr[TBETA] + base,    \
                      .alpha = p->decay ? xr[TALPHA] + base : NULL, .lds = NH, .ldo = NH * m,            \
                      .regression = falcon_variant_is_regression(p->var),                                \
                      .prefix = p->align == FALCON_ALIGN_PREFIX, .phi = (int)p->phi, .eps = (R)1e-6,     \
                      .window = p->W, .S = S0 + hh * m * n, .S_in = NULL, .scale = &scale,               \
                      .prev_key = p->align == FALCON_ALIGN_PREFIX && p->has_prev[hh] ? pk + hh * n : NULL, \
                      .hist_k = hk + hh * keep * n, .hist_v = hv + hh * keep * m,                        \
                      .hist_len = p->hist_len[hh], .uk = cpu->uk, .work = &falcon_work_library},         \
                .dO = dOr + base * m, .dS_T = dST + hh * m * n,                                          \
                .dq = gr[TQ] + base * n, .dk = gr[TK] + base * n,                                        \
                .dgain = falcon_variant_has_gain(p->var) ? gr[TGAIN] + base * n : NULL,                  \
                .dv = gr[TV] + base * m, .dbeta = gr[TBETA] + base,                                      \
                .dalpha = p->decay ? gr[TALPHA] + base : NULL, .dS0 = g[TS0] + hh * m * n,               \
                .dprev_key = g[TPK] + hh * n, .dhist_k = keep ? g[THK] + hh * keep * n : NULL,           \
                .dhist_v = keep ? g[THV] + hh * keep * m : NULL};                                        \
            cr_assert_not_null(cpu->fw->backward_blocked);                                               \
            falcon_status s = cpu->fw->backward_blocked(&gh, L);                                         \
            cr_assert_eq(s, FALCON_OK, "backward_blocked: %s", falcon_status_name(s));                   \
        }                                                                                                \
        for (int t = TQ; t <= TGAIN; t++)                                                                \
            for (int64_t i = 0; i < p->len[t]; i++) g[t][i] = (double)gr[t][i];                          \
        for (int t = 0; t < NTENS; t++) free(xr[t]), free(gr[t]);                                        \
        free(dOr), free(S0), free(pk), free(hk), free(hv), free(dST);                                    \
    }
GRADS_DEFINE(double, f64)
GRADS_DEFINE(float, f32)

static const falcon_cpu_f64 *scalar_f64(void)
{
    return falcon_backend_cpu_f64(falcon_backend_info_of(FALCON_BACKEND_SCALAR));
}

/* The worst ratio |g.d - R| / bound over the tensors (1 = at the bound). */
static double fd_check(prob *p, const falcon_cpu_f64 *cpu, const char *what)
{
    double *g[NTENS], worst = 0;
    for (int t = 0; t < NTENS; t++) g[t] = calloc((size_t)p->len[t], sizeof(double));
    grads_f64(p, cpu, g);
    double Labs;
    (void)loss(p, &Labs);
    for (int t = 0; t < NTENS; t++) {
        if (!has_tensor(p, t)) continue;
        double *d = calloc((size_t)p->len[t], sizeof(double)), *x0 = malloc(sizeof(double) * (size_t)p->len[t]);
        memcpy(x0, p->x[t], sizeof(double) * (size_t)p->len[t]);
        double gd = 0, gabs = 0;
        for (int64_t i = 0; i < p->len[t]; i++) {
            const double r = srand1();
            /* relative for the ranged inputs: alpha stays in (0, 1], beta and gains in range */
            d[i] = t == TALPHA ? -fabs(r) * x0[i] : t == TBETA || t == TGAIN ? r * 0.1 * x0[i] : r;
            gd += g[t][i] * d[i], gabs += fabs(g[t][i] * d[i]);
        }
        double D[2];
        for (int k = 0; k < 2; k++) {
            const double h = k == 0 ? FD_H : FD_H / 2;
            for (int64_t i = 0; i < p->len[t]; i++) p->x[t][i] = x0[i] + h * d[i];
            const double Lp = loss(p, NULL);
            for (int64_t i = 0; i < p->len[t]; i++) p->x[t][i] = x0[i] - h * d[i];
            const double Lm = loss(p, NULL);
            D[k] = (Lp - Lm) / (2 * h);
        }
        memcpy(p->x[t], x0, sizeof(double) * (size_t)p->len[t]);
        const double R = (4 * D[1] - D[0]) / 3, err = fabs(gd - R);
        const double bound = TOL_TRUNC * gabs + TOL_ROUND * 0x1p-53 * Labs / (FD_H / 2);
        if (err / bound > worst) worst = err / bound;
        cr_expect(err <= bound, "%s: d%s: analytic %.12g, finite differences %.12g (error %.3g, bound %.3g)", what,
                  tens_name[t], gd, R, err, bound);
        free(d), free(x0);
    }
    for (int t = 0; t < NTENS; t++) free(g[t]);
    return worst;
}

static const char *phi_names[] = {"identity", "relu", "elu1", "l2norm"};

/* Every variant x alignment x phi x decay, blocks of 1, 3 and the whole
 * call, windows reaching into the previous block with carried history. */
Test(backward_blocked, finite_differences, .timeout = 600)
{
    const falcon_variant vars[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_1A, FALCON_2A, FALCON_3A};
    const int64_t chunks[] = {1, 3, 64};
    double worst = 0;
    uint64_t seed = 1;
    for (int vi = 0; vi < 6; vi++)
        for (int al = 0; al < 2; al++)
            for (int phi = 0; phi < 4; phi++)
                for (int decay = 0; decay < 3; decay++)
                    for (int ci = 0; ci < 3; ci++) {
                        prob p;
                        prob_make(&p, vars[vi], (falcon_align)al, (falcon_phi)phi, decay, 11, chunks[ci], seed++);
                        char what[160];
                        snprintf(what, sizeof what, "%s %s %s decay %d chunk %lld", falcon_variant_name(vars[vi]),
                                 al ? "same" : "prefix", phi_names[phi], decay, (long long)chunks[ci]);
                        const double w = fd_check(&p, scalar_f64(), what);
                        if (w > worst) worst = w;
                        prob_free(&p);
                    }
    cr_log_info("backward_blocked: worst error / bound %.3g", worst);
}

/* The normwise relative difference of two gradients. */
static double rel_diff(const double *a, const double *b, int64_t len)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < len; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* fp32 against fp64 on the same float inputs, every variant and decay
 * regime, blocks of 3: the difference is the fp32 pass's rounding, a
 * small multiple of 2^-24 times the gradients' conditioning (FP32_K). */
Test(backward_blocked, fp32_against_fp64, .timeout = 300)
{
    const falcon_variant vars[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_1A, FALCON_2A, FALCON_3A};
    const falcon_backend_info *be = falcon_backend_info_of(FALCON_BACKEND_SCALAR);
    double worst = 0;
    for (int vi = 0; vi < 6; vi++)
        for (int decay = 0; decay < 3; decay++)
            for (int phi = 0; phi < 4; phi++) {
                prob p;
                prob_make(&p, vars[vi], FALCON_ALIGN_PREFIX, (falcon_phi)phi, decay, 11, 3, 1000 + vi * 16 + decay * 4 + phi);
                for (int64_t i = 0; i < p.len[TALPHA]; i++) /* the near-reset at float's smallest normal number */
                    if (p.x[TALPHA][i] < 0x1p-126) p.x[TALPHA][i] = 0x1p-126;
                double *g32[NTENS], *g64[NTENS];
                for (int t = 0; t < NTENS; t++) {
                    g32[t] = calloc((size_t)p.len[t], sizeof(double));
                    g64[t] = calloc((size_t)p.len[t], sizeof(double));
                }
                grads_f32(&p, falcon_backend_cpu_f32(be), g32);
                grads_f64(&p, falcon_backend_cpu_f64(be), g64);
                for (int t = 0; t < NTENS; t++) {
                    if (!has_tensor(&p, t)) continue;
                    const double e = rel_diff(g32[t], g64[t], p.len[t]) / 0x1p-24;
                    if (e > worst) worst = e;
                    cr_expect(e <= FP32_K, "%s decay %d %s: d%s differs by %.3g u", falcon_variant_name(vars[vi]), decay,
                              phi_names[phi], tens_name[t], e);
                }
                for (int t = 0; t < NTENS; t++) free(g32[t]), free(g64[t]);
                prob_free(&p);
            }
    cr_log_info("backward_blocked: fp32 against fp64, worst %.3g u", worst);
}

/* Every CPU backend's drivers (their own ISA build) against the finite
 * differences, on one case of each kind. */
Test(backward_blocked, every_backend, .timeout = 300)
{
    for (int bi = 0; bi < FALCON_BACKEND_ROWS; bi++) {
        const falcon_backend_info *be = falcon_backend_info_of((falcon_backend)bi);
        if (!be->f64.uk || !falcon_backend_available((falcon_backend)bi)) continue;
        for (int vi = 0; vi < 2; vi++) {
            prob p;
            prob_make(&p, vi ? FALCON_3A : FALCON_3, FALCON_ALIGN_PREFIX, FALCON_PHI_ELU1, 2, 13, 4, 77 + vi);
            fd_check(&p, falcon_backend_cpu_f64(be), be->name);
            prob_free(&p);
        }
    }
}


/* More blocks than the driver keeps (80 and 75 > 64): the reverse sweep
 * recomputes each segment's block starts from its checkpoint. */
Test(backward_blocked, checkpointed_segments, .timeout = 300)
{
    const int64_t chunks[] = {1, 2};
    for (int vi = 0; vi < 2; vi++)
        for (int ci = 0; ci < 2; ci++) {
            prob p;
            prob_make(&p, vi ? FALCON_3 : FALCON_2A, FALCON_ALIGN_PREFIX, FALCON_PHI_L2NORM, 2, 80 * chunks[ci] - 10 * ci,
                      chunks[ci], 300 + vi * 2 + ci);
            fd_check(&p, scalar_f64(), vi ? "falcon3" : "falcon2a");
            prob_free(&p);
        }
}
