/*
 * falcon_backward (docs/math.md section 12) on the CPU backends, recurrent
 * form:
 *  - fp64 gradients against central finite differences of falcon_run along
 *    random directions, one input tensor at a time, for every variant x
 *    alignment x phi x decay, with a carried memory, previous key and
 *    history (left by a first falcon_run segment), B = H = 2, odd n and m;
 *  - fp32 against fp64 on the same inputs;
 *  - backends against each other, thread counts and checkpoint spacings
 *    (bitwise);
 *  - validation (every rule, nothing written), T = 0;
 *  - edges: beta = 0, alpha at the smallest normal number, l2norm keys of
 *    1e-30 and 1e30.
 *
 * The finite-difference tolerance. For a direction d and step h, the
 * central difference FD(h) = (L(x + h d) - L(x - h d)) / 2h differs from
 * the derivative g.d by a truncation term c h^2 (L''' along d) and a
 * rounding term of at most 2 e_L / 2h, e_L the rounding error of one
 * evaluation of L. The truncation term is estimated from the difference
 * itself, (FD(2h) - FD(h)) / 3 = c h^2 (Richardson); e_L is bounded by
 * K u L_abs, L_abs = SUM |dO| |o| + SUM |dS_T| |S_T| the magnitude of the
 * terms L adds, with K = 64 (the forward's error on these short calls is
 * a few u times the reads' condition number: gate/THRESHOLDS.md). The test
 * takes 4 times their sum: a factor for the estimate's own error (the next
 * term of the expansion, h^4) and for the rounding of the backward itself,
 * which is of order u, far below both.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "../src/internal.h"
#include "../src/backends.h"

/* ---- seeded values (splitmix64) ---- */
static uint64_t bw_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double bw_unit(uint64_t *s) { return (double)(bw_next(s) >> 11) * 0x1p-53; } /* [0, 1) */
/* +-[lo, hi): away from 0, the kinks of relu and elu1 */
static double bw_signed(uint64_t *s, double lo, double hi)
{
    const double x = lo + (hi - lo) * bw_unit(s);
    return bw_next(s) & 1 ? x : -x;
}

/* One problem: its configuration, inputs (double) and a state that a first
 * segment left. */
typedef struct bcase {
    falcon_variant v;
    falcon_align a;
    falcon_phi phi;
    int decay;        /* 0 none, 1 random in [0.5, 0.95]; 2 (3): also float's (double's) smallest normal at every 3rd step */
    int64_t B, T, H, n, m, W;
    double key_scale; /* keys' magnitude */
    double beta;      /* < 0: random in [0.2, 1.5] (inner product: [0.2, 0.5]) */
    uint64_t seed;
} bcase;

typedef struct bdata {
    falcon_config cfg;
    falcon_inputs in;
    double *q, *k, *v, *beta, *alpha, *gain, *dO, *dS;
    falcon_state *st;
} bdata;

static double *bw_fill(uint64_t *s, int64_t count, double lo, double hi, int sign)
{
    double *x = malloc(sizeof(double) * (size_t)(count ? count : 1));
    cr_assert(x);
    for (int64_t i = 0; i < count; i++) x[i] = sign ? bw_signed(s, lo, hi) : lo + (hi - lo) * bw_unit(s);
    return x;
}

/* The inputs of c (rows = B T H) and the state after a first segment of
 * W + 1 steps from a random memory (so that the previous key and W - 1
 * examples are carried). */
static void bw_make(const bcase *c, bdata *d, falcon_backend be)
{
    uint64_t s = c->seed;
    const int64_t rows = c->B * c->T * c->H, heads = c->B * c->H, T1 = c->W + 1;
    memset(d, 0, sizeof *d);
    falcon_config_default(&d->cfg);
    d->cfg.variant = c->v, d->cfg.align = c->a, d->cfg.phi = c->phi, d->cfg.window = c->W;
    d->cfg.precision = FALCON_FP64, d->cfg.backend = be, d->cfg.threads = 1;
    const int reg = falcon_variant_is_regression(c->v);
    d->q = bw_fill(&s, rows * c->n, 0.1, 1, 1);
    d->k = bw_fill(&s, rows * c->n, 0.1 * c->key_scale, c->key_scale, 1);
    d->v = bw_fill(&s, rows * c->m, 0.1, 1, 1);
    d->beta = bw_fill(&s, rows, c->beta < 0 ? 0.2 : c->beta, c->beta < 0 ? (reg ? 1.5 : 0.5) : c->beta, 0);
    d->alpha = c->decay ? bw_fill(&s, rows, 0.5, 0.95, 0) : NULL;
    for (int64_t i = 0; c->decay >= 2 && i < rows; i++)
        if ((i / (c->B * c->H)) % 3 == 1) d->alpha[i] = c->decay == 2 ? FLT_MIN : DBL_MIN;
    d->gain = falcon_variant_has_gain(c->v) ? bw_fill(&s, rows * c->n, 0.5, 1.5, 0) : NULL;
    d->dO = bw_fill(&s, rows * c->m, 0, 1, 1);
    d->dS = bw_fill(&s, heads * c->m * c->n, 0, 1, 1);
    d->in = (falcon_inputs){.B = c->B, .T = c->T, .H = c->H, .n = c->n, .m = c->m, .q = d->q, .k = d->k,
                            .v = d->v, .beta = d->beta, .alpha = d->alpha, .gain = d->gain};
    /* the first segment: its own values, from a random memory */
    const int64_t rows1 = c->B * T1 * c->H;
    double *q1 = bw_fill(&s, rows1 * c->n, 0.1, 1, 1), *k1 = bw_fill(&s, rows1 * c->n, 0.1 * c->key_scale, c->key_scale, 1);
    double *v1 = bw_fill(&s, rows1 * c->m, 0.1, 1, 1), *b1 = bw_fill(&s, rows1, 0.2, 0.5, 0);
    double *a1 = c->decay ? bw_fill(&s, rows1, 0.5, 0.95, 0) : NULL;
    double *g1 = d->gain ? bw_fill(&s, rows1 * c->n, 0.5, 1.5, 0) : NULL, *o1 = malloc(sizeof(double) * (size_t)(rows1 * c->m));
    double *S0 = bw_fill(&s, heads * c->m * c->n, 0, 0.5, 1);
    cr_assert(o1);
    cr_assert(falcon_state_create(heads, c->n, c->m, c->W, &d->st) == FALCON_OK);
    cr_assert(falcon_state_set_memory(d->st, S0) == FALCON_OK);
    const falcon_inputs in1 = {.B = c->B, .T = T1, .H = c->H, .n = c->n, .m = c->m, .q = q1, .k = k1,
                               .v = v1, .beta = b1, .alpha = a1, .gain = g1};
    cr_assert(falcon_run(&d->cfg, &in1, d->st, o1) == FALCON_OK, "%s", falcon_last_error());
    free(q1), free(k1), free(v1), free(b1), free(a1), free(g1), free(o1), free(S0);
}

static void bw_free(bdata *d)
{
    free(d->q), free(d->k), free(d->v), free(d->beta), free(d->alpha), free(d->gain), free(d->dO), free(d->dS);
    falcon_state_free(d->st);
}

/* L = <O, dO> + <S_T, dS_T> of a run from st (not changed), and L_abs. */
static double bw_loss(const bdata *d, const falcon_inputs *in, const falcon_state *st, double *labs)
{
    falcon_state *w;
    const int64_t rows = in->B * in->T * in->H, mn = in->m * in->n, heads = in->B * in->H;
    double *o = malloc(sizeof(double) * (size_t)(rows * in->m));
    cr_assert(o);
    cr_assert(falcon_state_copy(st, &w) == FALCON_OK);
    cr_assert(falcon_run(&d->cfg, in, w, o) == FALCON_OK, "%s", falcon_last_error());
    long double L = 0, A = 0;
    for (int64_t i = 0; i < rows * in->m; i++) L += (long double)d->dO[i] * o[i], A += fabsl((long double)d->dO[i] * o[i]);
    for (int64_t i = 0; i < heads * mn; i++) L += (long double)d->dS[i] * w->S[i], A += fabsl((long double)d->dS[i] * w->S[i]);
    falcon_state_free(w);
    free(o);
    *labs = (double)A;
    return (double)L;
}

/* Gradients of one backward call, in double (fp32 results widened). */
typedef struct bgrads {
    double *t[10]; /* dq dk dv dbeta dalpha dgain dS0 dprev_key dhist_k dhist_v */
    int64_t count[10];
} bgrads;
enum { G_Q, G_K, G_V, G_BETA, G_ALPHA, G_GAIN, G_S0, G_PREV, G_HK, G_HV, G_COUNT };
static const char *const bw_names[G_COUNT] = {"dq", "dk", "dv", "dbeta", "dalpha", "dgain", "dS0", "dprev_key",
                                              "dhist_k", "dhist_v"};

static void bw_counts(const bdata *d, int64_t *count)
{
    const falcon_inputs *in = &d->in;
    const int64_t rows = in->B * in->T * in->H, heads = in->B * in->H, keep = d->cfg.window - 1;
    const int64_t c[G_COUNT] = {rows * in->n, rows * in->n, rows * in->m, rows, in->alpha ? rows : 0,
                                in->gain ? rows * in->n : 0, heads * in->m * in->n, heads * in->n,
                                heads * keep * in->n, heads * keep * in->m};
    memcpy(count, c, sizeof c);
}

static void bgrads_free(bgrads *g)
{
    for (int i = 0; i < G_COUNT; i++) free(g->t[i]);
}

/* falcon_backward of d in precision p (inputs, cotangents rounded to float
 * for fp32), on backend be; the status returned. */
static falcon_status bw_grads(const bdata *d, falcon_precision p, falcon_backend be, int threads, bgrads *g)
{
    const int f32 = p != FALCON_FP64;
    const size_t es = f32 ? sizeof(float) : sizeof(double);
    const double *src[] = {d->q, d->k, d->v, d->beta, d->alpha, d->gain, d->dO};
    const int64_t rows = d->in.B * d->in.T * d->in.H, n = d->in.n, m = d->in.m;
    const int64_t cnt[] = {rows * n, rows * n, rows * m, rows, rows, rows * n, rows * m};
    void *cv[7] = {NULL};
    for (int i = 0; i < 7; i++) {
        if (!src[i]) continue;
        cv[i] = malloc(es * (size_t)cnt[i]);
        cr_assert(cv[i]);
        for (int64_t j = 0; j < cnt[i]; j++)
            if (f32) ((float *)cv[i])[j] = (float)src[i][j];
            else ((double *)cv[i])[j] = src[i][j];
    }
    falcon_inputs in = d->in;
    in.q = cv[0], in.k = cv[1], in.v = cv[2], in.beta = cv[3], in.alpha = cv[4], in.gain = cv[5];
    bw_counts(d, g->count);
    void *raw[G_COUNT];
    for (int i = 0; i < G_COUNT; i++) {
        raw[i] = g->count[i] ? calloc((size_t)g->count[i], i < G_S0 ? es : sizeof(double)) : NULL;
        g->t[i] = calloc((size_t)(g->count[i] + 1), sizeof(double));
        cr_assert(g->t[i] && (raw[i] || !g->count[i]));
    }
    const falcon_grads gr = {raw[G_Q], raw[G_K], raw[G_V], raw[G_BETA], raw[G_ALPHA], raw[G_GAIN],
                             raw[G_S0], raw[G_PREV], raw[G_HK], raw[G_HV]};
    falcon_config cfg = d->cfg;
    cfg.precision = p, cfg.backend = be, cfg.threads = threads;
    const falcon_status s = falcon_backward(&cfg, &in, d->st, cv[6], d->dS, &gr);
    for (int i = 0; i < G_COUNT; i++) {
        for (int64_t j = 0; j < g->count[i]; j++)
            g->t[i][j] = i >= G_S0 ? ((double *)raw[i])[j] : f32 ? ((float *)raw[i])[j] : ((double *)raw[i])[j];
        free(raw[i]);
    }
    for (int i = 0; i < 7; i++) free(cv[i]);
    return s;
}

/* ---- finite differences (fp64) ---- */

/* The array tensor i's gradient belongs to: d's inputs, or st's (a state
 * the loss starts from). */
static double *bw_target(bdata *d, falcon_state *st, int i)
{
    double *const t[G_COUNT] = {d->q, d->k, d->v, d->beta, d->alpha, d->gain, st->S, st->prev_key, st->hist_k,
                                st->hist_v};
    return t[i];
}

/* Whether entry j of state tensor i is one the state holds. */
static int bw_held(const falcon_state *st, int i, int64_t j)
{
    if (i == G_PREV) return st->has_prev[j / st->n];
    if (i == G_HK) return j % (st->keep * st->n) / st->n < st->hist_len[j / (st->keep * st->n)];
    if (i == G_HV) return j % (st->keep * st->m) / st->m < st->hist_len[j / (st->keep * st->m)];
    return 1;
}

/* (L(x + h dir) - L(x - h dir)) / 2h with x tensor i. */
static double bw_fd(bdata *d, int i, const double *dir, int64_t count, double h, double *labs)
{
    falcon_state *st;
    cr_assert(falcon_state_copy(d->st, &st) == FALCON_OK);
    double *x = bw_target(d, st, i), L[2];
    for (int side = 0; side < 2; side++) {
        const double sh = side ? -h : h;
        for (int64_t j = 0; j < count; j++) x[j] += sh * dir[j];
        L[side] = bw_loss(d, &d->in, st, labs);
        for (int64_t j = 0; j < count; j++) x[j] -= sh * dir[j];
    }
    falcon_state_free(st);
    return (L[0] - L[1]) / (2 * h);
}

/* Every gradient of g along a random direction (entries relative to the
 * values) against the central difference; the largest relative
 * disagreement returned. Entries the state does not hold must be 0. */
static double bw_check_fd(bdata *d, const bgrads *g, uint64_t seed, const char *what)
{
    const double h = 1e-6, u = 0x1p-53;
    double worst = 0;
    for (int i = 0; i < G_COUNT; i++) {
        const int64_t count = g->count[i];
        if (!count) continue;
        const double *x = bw_target(d, d->st, i);
        double *dir = malloc(sizeof(double) * (size_t)count), gd = 0, labs;
        cr_assert(dir);
        for (int64_t j = 0; j < count; j++) {
            const int held = i < G_S0 || bw_held(d->st, i, j);
            if (!held) cr_expect(g->t[i][j] == 0, "%s: %s[%lld] = %g where the state holds nothing", what,
                                 bw_names[i], (long long)j, g->t[i][j]);
            dir[j] = held ? (2 * bw_unit(&seed) - 1) * fabs(x[j]) : 0;
            gd += g->t[i][j] * dir[j];
        }
        const double f1 = bw_fd(d, i, dir, count, h, &labs), f2 = bw_fd(d, i, dir, count, 2 * h, &labs);
        const double tol = 4 * (fabs(f2 - f1) / 3 + 64 * u * labs / h), err = fabs(gd - f1);
        cr_expect(err <= tol, "%s: <%s, d> = %.15g, finite difference %.15g (h = %g: %.15g), |diff| %.3g > %.3g",
                  what, bw_names[i], gd, f1, 2 * h, f2, err, tol);
        const double rel = err / (fabs(f1) > 1e-300 ? fabs(f1) : 1e-300);
        if (rel > worst) worst = rel;
        free(dir);
    }
    return worst;
}

/* The CPU backends this machine runs (the SIMDe emulation included). */
static int bw_backends(falcon_backend *list)
{
    const falcon_backend all[] = {FALCON_BACKEND_SCALAR, FALCON_BACKEND_AVX2, FALCON_BACKEND_AVX512,
                                  FALCON_BACKEND_AVX512_SIMDE};
    int count = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (falcon_backend_available(all[i])) list[count++] = all[i];
    return count;
}

static const char *bw_describe(const bcase *c, falcon_backend be, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s %s %s decay %d W %lld key %g beta %g", falcon_backend_name(be),
             falcon_variant_name(c->v), falcon_align_name(c->a), falcon_phi_name(c->phi), c->decay,
             (long long)c->W, c->key_scale, c->beta);
    return buf;
}

/* One case on one backend: fp64 gradients against finite differences. */
static double bw_fd_case(const bcase *c, falcon_backend be)
{
    char what[160];
    bdata d;
    bgrads g;
    bw_make(c, &d, be);
    bw_describe(c, be, what, sizeof what);
    cr_assert(bw_grads(&d, FALCON_FP64, be, 1, &g) == FALCON_OK, "%s: %s", what, falcon_last_error());
    const double worst = bw_check_fd(&d, &g, c->seed ^ 0x5555u, what);
    bgrads_free(&g);
    bw_free(&d);
    return worst;
}

Test(backward, finite_differences_fp64)
{
    falcon_backend list[8];
    const int nb = bw_backends(list);
    for (int b = 0; b < nb; b++) {
        double worst = 0;
        int cases = 0;
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int a = 0; a < 2; a++)
                for (int phi = 0; phi < 4; phi++)
                    for (int decay = 0; decay < 2; decay++) {
                        const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1;
                        const bcase c = {(falcon_variant)v, (falcon_align)a, (falcon_phi)phi, decay, 2, 9, 2, 7, 5, W,
                                         1, -1, 9100u + (uint64_t)(100 * v + 10 * a + 2 * phi + decay)};
                        const double w = bw_fd_case(&c, list[b]);
                        worst = w > worst ? w : worst;
                        cases++;
                    }
        printf("backward fd %s: %d cases, largest relative disagreement %.3g\n", falcon_backend_name(list[b]), cases,
               worst);
    }
}

/* ---- precisions, backends, threads, checkpoints ---- */

/* ||a - b||_F / ||b||_F (absolute when b = 0). */
static double bw_relerr(const double *a, const double *b, int64_t count)
{
    long double num = 0, den = 0;
    for (int64_t i = 0; i < count; i++) num += (long double)(a[i] - b[i]) * (a[i] - b[i]), den += (long double)b[i] * b[i];
    return den > 0 ? (double)sqrtl(num / den) : (double)sqrtl(num);
}

/* d's inputs, cotangents and state rounded to float, so that an fp32 and
 * an fp64 backward see the same values. */
static void bw_round_f32(bdata *d)
{
    double *const t[] = {d->q, d->k, d->v, d->beta, d->alpha, d->gain, d->dO, d->dS};
    const int64_t rows = d->in.B * d->in.T * d->in.H, n = d->in.n, m = d->in.m, heads = d->in.B * d->in.H;
    const int64_t cnt[] = {rows * n, rows * n, rows * m, rows, rows, rows * n, rows * m, heads * m * n};
    for (int i = 0; i < 8; i++)
        for (int64_t j = 0; t[i] && j < cnt[i]; j++) t[i][j] = (float)t[i][j];
    falcon_state *st = d->st;
    for (int64_t j = 0; j < heads * m * n; j++) st->S[j] = (float)st->S[j];
    for (int64_t j = 0; j < heads * n; j++) st->prev_key[j] = (float)st->prev_key[j];
    for (int64_t j = 0; j < heads * st->keep * n; j++) st->hist_k[j] = (float)st->hist_k[j];
    for (int64_t j = 0; j < heads * st->keep * m; j++) st->hist_v[j] = (float)st->hist_v[j];
}

/* The largest normwise error of a's tensors against b's. */
static double bw_worst(const bgrads *a, const bgrads *b, const char *what, double limit)
{
    double worst = 0;
    for (int i = 0; i < G_COUNT; i++) {
        const double e = bw_relerr(a->t[i], b->t[i], a->count[i]);
        cr_expect(e <= limit, "%s: %s differs by %.3g (limit %.3g)", what, bw_names[i], e, limit);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/*
 * fp32 against fp64 on the same (float) values. Each gradient is a sum of
 * terms of a reverse sweep of T steps; as for the forward's memory
 * (gate/THRESHOLDS.md), the fp32 error is K (2 + sqrt(depth)) u times the
 * gradient's condition number (docs/math.md 12.3), here with depth T = 9
 * plus the first segment's and well-conditioned inputs (regression steps
 * with beta <= 1.5 are non-expansive; the inner-product ones add). The
 * limit, 32 u, is K = 6 at depth 13 (both segments); the measured worst
 * over these 48 cases a backend is 6.7 to 7.6 u (printed).
 */
Test(backward, fp32_against_fp64)
{
    falcon_backend list[8];
    const int nb = bw_backends(list);
    const double u = 0x1p-24;
    for (int b = 0; b < nb; b++) {
        double worst = 0;
        for (int v = FALCON_1; v <= FALCON_3A; v++)
            for (int a = 0; a < 2; a++)
                for (int phi = 0; phi < 4; phi++) {
                    const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1;
                    const bcase c = {(falcon_variant)v, (falcon_align)a, (falcon_phi)phi, 1, 2, 9, 2, 7, 5, W,
                                     1, -1, 9700u + (uint64_t)(100 * v + 10 * a + phi)};
                    char what[160];
                    bdata d;
                    bgrads g32, g64;
                    bw_make(&c, &d, list[b]);
                    bw_round_f32(&d);
                    bw_describe(&c, list[b], what, sizeof what);
                    cr_assert(bw_grads(&d, FALCON_FP32, list[b], 1, &g32) == FALCON_OK, "%s: %s", what, falcon_last_error());
                    cr_assert(bw_grads(&d, FALCON_FP64, list[b], 1, &g64) == FALCON_OK, "%s: %s", what, falcon_last_error());
                    const double w = bw_worst(&g32, &g64, what, 32 * u);
                    worst = w > worst ? w : worst;
                    bgrads_free(&g32), bgrads_free(&g64), bw_free(&d);
                }
        printf("backward fp32 vs fp64 %s: largest error %.2f u (2^-24)\n", falcon_backend_name(list[b]), worst / u);
    }
}

/* Bitwise equality of two gradient sets. */
static void bw_same_bits(const bgrads *a, const bgrads *b, const char *what)
{
    for (int i = 0; i < G_COUNT; i++)
        cr_expect(memcmp(a->t[i], b->t[i], sizeof(double) * (size_t)a->count[i]) == 0, "%s: %s differs", what,
                  bw_names[i]);
}

/* Backends agree to rounding (fp64: each backend's sums in its own order,
 * 2^10 u of fp64 against errors of a few u); each is bitwise the same for
 * 1 and 3 threads and for checkpoints every 1, 4 or about sqrt(T) steps
 * (the states a segment recomputes are the sweep's own, bit for bit). */
Test(backward, backends_threads_checkpoints)
{
    falcon_backend list[8];
    const int nb = bw_backends(list);
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int p = 0; p < 2; p++) {
            const falcon_precision prec = p ? FALCON_FP64 : FALCON_FP32;
            const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 4 : 1;
            const bcase c = {(falcon_variant)v, FALCON_ALIGN_PREFIX, (falcon_phi)(v % 4), 1, 2, 23, 2, 9, 7, W, 1, -1,
                             9900u + (uint64_t)v};
            bgrads first, g;
            bdata d;
            char what[200];
            bw_make(&c, &d, FALCON_BACKEND_SCALAR);
            if (!p) bw_round_f32(&d);
            cr_assert(bw_grads(&d, prec, FALCON_BACKEND_SCALAR, 1, &first) == FALCON_OK, "%s", falcon_last_error());
            for (int b = 0; b < nb; b++) {
                bw_describe(&c, list[b], what, sizeof what);
                cr_assert(bw_grads(&d, prec, list[b], 1, &g) == FALCON_OK);
                bw_worst(&g, &first, what, p ? 0x1p-43 : 0x1p-14);
                for (int k = 0; k < 3; k++) {
                    bgrads h;
                    falcon_set_backward_checkpoint(k == 0 ? 0 : k == 1 ? 1 : 4);
                    cr_assert(bw_grads(&d, prec, list[b], k == 0 ? 3 : 1, &h) == FALCON_OK);
                    falcon_set_backward_checkpoint(0);
                    bw_same_bits(&h, &g, what);
                    bgrads_free(&h);
                }
                bgrads_free(&g);
            }
            bgrads_free(&first), bw_free(&d);
        }
}

/* ---- validation: every rule, nothing written ---- */

#define BW_SENTINEL 12345.0

/* Buffers for every gradient of a B = 1, H = 2, T = 3, n = 4, m = 3,
 * W = 3 call, filled with the sentinel. */
typedef struct bbufs {
    double t[G_COUNT][64];
} bbufs;

static falcon_grads bw_sentinel(bbufs *b)
{
    for (int i = 0; i < G_COUNT; i++)
        for (int j = 0; j < 64; j++) b->t[i][j] = BW_SENTINEL;
    return (falcon_grads){b->t[G_Q], b->t[G_K], b->t[G_V], b->t[G_BETA], b->t[G_ALPHA], b->t[G_GAIN],
                          b->t[G_S0], b->t[G_PREV], b->t[G_HK], b->t[G_HV]};
}

static void bw_untouched(const bbufs *b, const char *what)
{
    for (int i = 0; i < G_COUNT; i++)
        for (int j = 0; j < 64; j++)
            cr_assert(b->t[i][j] == BW_SENTINEL, "%s: %s[%d] was written", what, bw_names[i], j);
}

/* One refused call: its status, input and rule, and nothing written. */
static void bw_refused(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *st, const void *dO,
                       const double *dS, const falcon_grads *g, const bbufs *b, falcon_status want,
                       const char *input, const char *rule)
{
    const falcon_status s = falcon_backward(cfg, in, st, dO, dS, g);
    const falcon_error_info *e = falcon_last_error_info();
    cr_expect(s == want, "%s/%s: status %s, expected %s (%s)", input, rule, falcon_status_name(s),
              falcon_status_name(want), falcon_last_error());
    cr_expect(strcmp(e->input, input) == 0 && strcmp(e->rule, rule) == 0, "expected %s/%s, got %s/%s (%s)", input,
              rule, e->input, e->rule, falcon_last_error());
    bw_untouched(b, input);
}

Test(backward, validation)
{
    double q[24], k[24], v[18], beta[6], alpha[6], dO[18], dS[24], gain[24];
    for (int i = 0; i < 24; i++) q[i] = 0.1 * (i % 5) - 0.2, k[i] = 0.05 * (i % 7) - 0.1, dS[i] = 0.01 * i, gain[i] = 1;
    for (int i = 0; i < 18; i++) v[i] = 0.1 * (i % 4), dO[i] = 0.2 - 0.01 * i;
    for (int i = 0; i < 6; i++) beta[i] = 0.5, alpha[i] = 0.9;
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = FALCON_FP64, cfg.variant = FALCON_3, cfg.window = 3, cfg.backend = FALCON_BACKEND_SCALAR;
    falcon_inputs in = {.B = 1, .T = 3, .H = 2, .n = 4, .m = 3, .q = q, .k = k,
                        .v = v, .beta = beta, .alpha = alpha, .gain = NULL};
    bbufs b;
    falcon_grads g = bw_sentinel(&b);
    dO[7] = NAN;
    bw_refused(&cfg, &in, NULL, dO, dS, &g, &b, FALCON_E_NONFINITE, "dO", "finite");
    dO[7] = 0.1, dS[5] = INFINITY;
    bw_refused(&cfg, &in, NULL, dO, dS, &g, &b, FALCON_E_NONFINITE, "dS_T", "finite");
    dS[5] = 1e39, cfg.precision = FALCON_FP32;
    float qf[24], kf[24], vf[18], bf[6], af[6], dOf[18];
    for (int i = 0; i < 24; i++) qf[i] = (float)q[i], kf[i] = (float)k[i];
    for (int i = 0; i < 18; i++) vf[i] = (float)v[i], dOf[i] = (float)dO[i];
    for (int i = 0; i < 6; i++) bf[i] = (float)beta[i], af[i] = (float)alpha[i];
    const falcon_inputs in32 = {.B = 1, .T = 3, .H = 2, .n = 4, .m = 3, .q = qf, .k = kf,
                                .v = vf, .beta = bf, .alpha = af, .gain = NULL};
    bw_refused(&cfg, &in32, NULL, dOf, dS, &g, &b, FALCON_E_RANGE, "dS_T", "state-fit");
    dS[5] = 0.05, cfg.precision = FALCON_FP64;
    bw_refused(&cfg, &in, NULL, dO, dS, NULL, &b, FALCON_E_ARGUMENT, "grads", "null");
    const char *names[] = {"dq", "dk", "dv", "dbeta"};
    for (int i = 0; i < 4; i++) {
        falcon_grads h = g;
        void **slot[] = {&h.dq, &h.dk, &h.dv, &h.dbeta};
        *slot[i] = NULL;
        bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_ARGUMENT, names[i], "null");
    }
    falcon_grads h = g;
    h.dalpha = NULL;
    bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_ARGUMENT, "dalpha", "grad-required");
    in.alpha = NULL;
    bw_refused(&cfg, &in, NULL, dO, dS, &g, &b, FALCON_E_ARGUMENT, "dalpha", "grad-unexpected");
    h = g, h.dalpha = NULL;
    bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_ARGUMENT, "dgain", "grad-unexpected");
    cfg.variant = FALCON_2, cfg.window = 1, in.gain = gain, h.dgain = NULL;
    bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_ARGUMENT, "dgain", "grad-required");
    cfg.variant = FALCON_3, cfg.window = 3, in.gain = NULL, beta[4] = 2.5; /* falcon_run's own rules too */
    bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_RANGE, "beta", "beta-range");
    beta[4] = 0.5;
    falcon_state *st;
    cr_assert(falcon_state_create(2, 4, 3, 2, &st) == FALCON_OK);
    bw_refused(&cfg, &in, st, dO, dS, &h, &b, FALCON_E_SHAPE, "state", "state-window");
    falcon_state_free(st);
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        cfg.backend = FALCON_BACKEND_CUDA;
        bw_refused(&cfg, &in, NULL, dO, dS, &h, &b, FALCON_E_UNAVAILABLE, "config.backend", "backend-unavailable");
    }
}

/* T = 0: L = <S_0, dS_T>, so dS0 = dS_T and the rest of the state's
 * gradients are 0; the step tensors (empty) are not written. */
Test(backward, no_steps)
{
    double dS[24];
    for (int i = 0; i < 24; i++) dS[i] = 0.5 - 0.03 * i;
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = FALCON_FP64, cfg.variant = FALCON_3, cfg.window = 3;
    const falcon_inputs in = {.B = 1, .T = 0, .H = 2, .n = 4, .m = 3, .q = NULL, .k = NULL,
                              .v = NULL, .beta = NULL, .alpha = NULL, .gain = NULL};
    bbufs b;
    falcon_grads g = bw_sentinel(&b);
    g.dalpha = g.dgain = NULL;
    cr_assert(falcon_backward(&cfg, &in, NULL, NULL, dS, &g) == FALCON_OK, "%s", falcon_last_error());
    for (int i = 0; i < 24; i++) cr_expect(b.t[G_S0][i] == dS[i]);
    for (int i = 0; i < 2 * 4; i++) cr_expect(b.t[G_PREV][i] == 0);
    for (int i = 0; i < 2 * 2 * 4; i++) cr_expect(b.t[G_HK][i] == 0);
    for (int i = 0; i < 2 * 2 * 3; i++) cr_expect(b.t[G_HV][i] == 0);
    for (int i = G_Q; i <= G_GAIN; i++) cr_expect(b.t[i][0] == BW_SENTINEL, "%s written", bw_names[i]);
}

/* ---- edges ---- */

/* All gradients finite. */
static void bw_all_finite(const bgrads *g, const char *what)
{
    for (int i = 0; i < G_COUNT; i++)
        for (int64_t j = 0; j < g->count[i]; j++)
            cr_assert(isfinite(g->t[i][j]), "%s: %s[%lld] = %g", what, bw_names[i], (long long)j, g->t[i][j]);
}

/* beta = 0: the step writes nothing, but dbeta = D nu is the derivative,
 * not 0 / 0 and not 0. The gradients are smooth in beta, so at beta = 0
 * they equal those at beta = 1e-9 to about 1e-9 times their size (here
 * of order 1; some, as dv, are themselves O(beta): the error is taken
 * against max(||g||, 1); the limit 1e-6 leaves room for the derivatives'
 * size); the others are checked against finite differences at beta = 0
 * itself. */
Test(backward, beta_zero)
{
    const falcon_variant vs[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_3A};
    for (int i = 0; i < 4; i++)
        for (int a = 0; a < 2; a++) {
            const int64_t W = falcon_variant_has_window(vs[i]) ? 3 : 1;
            bcase c = {vs[i], (falcon_align)a, FALCON_PHI_ELU1, 1, 2, 9, 2, 7, 5, W, 1, 0, 9300u + (uint64_t)(10 * i + a)};
            char what[160];
            bdata d0, d1;
            bgrads g0, g1;
            bw_make(&c, &d0, FALCON_BACKEND_SCALAR);
            c.beta = 1e-9;
            bw_make(&c, &d1, FALCON_BACKEND_SCALAR);
            bw_describe(&c, FALCON_BACKEND_SCALAR, what, sizeof what);
            cr_assert(bw_grads(&d0, FALCON_FP64, FALCON_BACKEND_SCALAR, 1, &g0) == FALCON_OK, "%s", falcon_last_error());
            cr_assert(bw_grads(&d1, FALCON_FP64, FALCON_BACKEND_SCALAR, 1, &g1) == FALCON_OK, "%s", falcon_last_error());
            bw_all_finite(&g0, what);
            for (int t = 0; t < G_COUNT; t++) { /* gradients of size 1, some of them O(beta) */
                long double num = 0, den = 1;
                for (int64_t j = 0; j < g0.count[t]; j++)
                    num += powl(g0.t[t][j] - g1.t[t][j], 2), den += powl(g1.t[t][j], 2);
                cr_expect(sqrtl(num / den) <= 1e-6, "%s: %s differs by %.3Lg", what, bw_names[t], sqrtl(num / den));
            }
            double nz = 0;
            for (int64_t j = 0; j < g0.count[G_BETA]; j++) nz += fabs(g0.t[G_BETA][j]);
            cr_expect(nz > 0, "%s: dbeta is 0 everywhere", what);
            bw_check_fd(&d0, &g0, 77u, what);
            bgrads_free(&g0), bgrads_free(&g1), bw_free(&d0), bw_free(&d1);
        }
}

/* One edge case, with Falcon-2/2A's gains (of the call, not of the first
 * segment) multiplied by gain_scale: fp64 against finite differences
 * (directions relative to the values, so keys of 1e30 move by 1e24), fp32
 * finite and within `limit` of fp64 on the same values. */
static void bw_edge_gains(const bcase *c, double gain_scale, double limit)
{
    char what[200];
    bdata d;
    bgrads g64, g32;
    bw_make(c, &d, FALCON_BACKEND_SCALAR);
    for (int64_t j = 0; d.gain && j < c->B * c->T * c->H * c->n; j++) d.gain[j] *= gain_scale;
    if (limit > 0) bw_round_f32(&d);
    bw_describe(c, FALCON_BACKEND_SCALAR, what, sizeof what);
    if (d.gain) snprintf(what + strlen(what), sizeof what - strlen(what), " gain %g", gain_scale);
    cr_assert(bw_grads(&d, FALCON_FP64, FALCON_BACKEND_SCALAR, 1, &g64) == FALCON_OK, "%s: %s", what, falcon_last_error());
    bw_all_finite(&g64, what);
    bw_check_fd(&d, &g64, 99u, what);
    if (limit > 0) {
        cr_assert(bw_grads(&d, FALCON_FP32, FALCON_BACKEND_SCALAR, 1, &g32) == FALCON_OK, "%s: %s", what,
                  falcon_last_error());
        bw_all_finite(&g32, what);
        const double w = bw_worst(&g32, &g64, what, limit);
        printf("backward edge %s: fp32 %.2f u\n", what, w / 0x1p-24);
        bgrads_free(&g32);
    }
    bgrads_free(&g64), bw_free(&d);
}

static void bw_edge(const bcase *c, double limit) { bw_edge_gains(c, 1, limit); }

/* alpha at the smallest normal number (float's, in both precisions, and
 * double's in fp64) and l2norm keys of 1e-30 and 1e30: the exact
 * gradients are finite and of ordinary size (dk about 1e30 and 1e-30 times
 * dx), and so must be the computed ones; fp32 within the 32 u of
 * fp32_against_fp64. */
Test(backward, edges)
{
    for (int v = FALCON_1; v <= FALCON_3A; v += 2)
        for (int a = 0; a < 2; a++) {
            const int64_t W = falcon_variant_has_window((falcon_variant)v) ? 3 : 1;
            const uint64_t seed = 9500u + (uint64_t)(10 * v + a);
            bcase c = {(falcon_variant)v, (falcon_align)a, FALCON_PHI_L2NORM, 2, 2, 9, 2, 7, 5, W, 1, -1, seed};
            bw_edge(&c, 32 * 0x1p-24);
            c.decay = 3;
            bw_edge(&c, 0);
            c.decay = 1, c.key_scale = 1e-30;
            bw_edge(&c, 32 * 0x1p-24);
            c.key_scale = 1e30;
            bw_edge(&c, 32 * 0x1p-24);
        }
}

/* relu's kink (docs/math.md 12.1: J^T d is 0 where x_i = 0, the
 * contract's convention): queries, keys, the carried previous key and
 * history keys with every third entry exactly 0. Those entries' gradients
 * must be exactly 0 on every backend in both precisions; the rest agree
 * with finite differences, whose directions (relative to the values)
 * leave the zeros where they are. */
static void bw_zero_thirds(double *x, int64_t count)
{
    for (int64_t j = 0; j < count; j += 3) x[j] = 0;
}

Test(backward, relu_kink)
{
    falcon_backend list[8];
    const int nb = bw_backends(list);
    const falcon_variant vs[] = {FALCON_1, FALCON_2, FALCON_3};
    const int kinks[] = {G_Q, G_K, G_PREV, G_HK};
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < 3; i++)
            for (int a = 0; a < 2; a++) {
                const int64_t W = falcon_variant_has_window(vs[i]) ? 3 : 1;
                const bcase c = {vs[i], (falcon_align)a, FALCON_PHI_RELU, 1, 2, 9, 2, 7, 5, W, 1, -1,
                                 9400u + (uint64_t)(10 * i + a)};
                char what[160];
                bdata d;
                bw_make(&c, &d, list[b]);
                const int64_t rows = c.B * c.T * c.H, heads = c.B * c.H;
                bw_zero_thirds(d.q, rows * c.n), bw_zero_thirds(d.k, rows * c.n);
                bw_zero_thirds(d.st->prev_key, heads * c.n), bw_zero_thirds(d.st->hist_k, heads * (W - 1) * c.n);
                bw_round_f32(&d);
                bw_describe(&c, list[b], what, sizeof what);
                for (int p = 0; p < 2; p++) {
                    bgrads g;
                    cr_assert(bw_grads(&d, p ? FALCON_FP64 : FALCON_FP32, list[b], 1, &g) == FALCON_OK, "%s: %s",
                              what, falcon_last_error());
                    for (int k = 0; k < 4; k++)
                        for (int64_t j = 0; j < g.count[kinks[k]]; j += 3)
                            cr_expect(g.t[kinks[k]][j] == 0, "%s (%s): %s[%lld] = %g at the kink x = 0", what,
                                      p ? "fp64" : "fp32", bw_names[kinks[k]], (long long)j, g.t[kinks[k]][j]);
                    if (p) bw_check_fd(&d, &g, 55u, what);
                    bgrads_free(&g);
                }
                bw_free(&d);
            }
}

/* Keys and gains far from 1. The backward holds a window's keys as the
 * forward does (docs/math.md section 4.1: x = s x', z = s tau z''), and
 * every power of two of its reverse step must cancel. fp32 scales keys of
 * 1e10 and 1e-10 (x.x outside [2^-62, 2^62]) and Falcon-2's gains of 1e12
 * and 1e-12 (outside [2^-31, 2^31]) where fp64 does not: fp32 is held to
 * the 32 u of fp32_against_fp64 against fp64. fp64 scales keys of 1e100
 * and 1e-100 and gains of 1e80 and 1e-80: against finite differences.
 * Not further out: the write's key gradient is of order 1 / |k|^2 (from a
 * fresh memory, exactly: L scales as 1 / |k|), so keys of 1e20 in fp32
 * (1e160 in fp64) give subnormal dk, rounded with digits lost. */
Test(backward, scaled_keys)
{
    const falcon_variant vs[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_2A};
    const double keys[][2] = {{1e10, 32 * 0x1p-24}, {1e-10, 32 * 0x1p-24}, {1e100, 0}, {1e-100, 0}};
    const double gains[][2] = {{1e12, 32 * 0x1p-24}, {1e-12, 32 * 0x1p-24}, {1e80, 0}, {1e-80, 0}};
    for (int i = 0; i < 4; i++)
        for (int a = 0; a < 2; a++) {
            const int64_t W = falcon_variant_has_window(vs[i]) ? 3 : 1;
            bcase c = {vs[i], (falcon_align)a, FALCON_PHI_IDENTITY, 1, 2, 9, 2, 7, 5, W, 1, -1,
                       9600u + (uint64_t)(10 * i + a)};
            for (int s = 0; s < 4; s++) {
                c.key_scale = keys[s][0];
                bw_edge(&c, keys[s][1]);
            }
            c.key_scale = 1;
            for (int s = 0; falcon_variant_has_gain(vs[i]) && s < 4; s++) bw_edge_gains(&c, gains[s][0], gains[s][1]);
        }
}
