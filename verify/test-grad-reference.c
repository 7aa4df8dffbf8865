/*
 * The MPFR reference's backward pass (docs/math.md section 12) checked two
 * independent ways:
 *  - central finite differences of the MPFR forward at 512 bits along
 *    random directions, with the inputs perturbed as MPFR values
 *    (falcon_ref_recurrent_mp_in), for every variant, alignment, feature
 *    map, with and without decay, a window with carried history and a
 *    previous key (so every gradient, the state's included, is checked);
 *  - the golden gradients of verify/data/falcon-grad-golden.json, computed
 *    outside this project (central differences at 70 digits).
 * Error analysis of the finite differences: with h = 2^-133 (~1e-40) the
 * truncation error is h^2 |L'''| / 6 ~ 1e-80 |L'''| and the rounding error
 * at 512 bits ~ 2^-512 |L| / h ~ 1e-114 |L|, so an agreement of 1e-30
 * relative (to SUM |grad_i d_i|) leaves a margin of over 30 digits for the
 * derivatives' size, while any wrong adjoint term gives an O(1) error.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon_ref.h"
#include "golden-grad.h"
#include "../src/internal.h"

#define FD_BITS 512
#define FD_LOG2_H (-133)
#define FD_TOL 1e-30
/* The golden values: 40 significant digits (5e-41 relative), computed by
 * central differences at 70 digits (h = 1e-25: errors ~1e-45 of the
 * loss's scale). */
#define GOLDEN_TOL 1e-35

/* The inputs of one case as doubles, in one block. */
typedef struct fd_case {
    falcon_ref_opts o;
    falcon_ref_head h;
    double *dO, *dS_T;
    double *buf;
} fd_case;

/* Tensors perturbed in a finite difference, in this order. */
enum { IN_Q, IN_K, IN_V, IN_BETA, IN_ALPHA, IN_GAIN, IN_S0, IN_PREV, IN_HK, IN_HV, IN_COUNT };

static uint64_t rng_state;
static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1p-53;
}
/* Away from relu's and elu1's kink at 0: magnitude in [1/8, 2]. */
static double signed_value(void)
{
    double x = 0.125 + 1.875 * uniform();
    return uniform() < 0.5 ? -x : x;
}
static void fill(double *v, int64_t count, double lo, double hi, int signed_values)
{
    for (int64_t i = 0; i < count; i++)
        v[i] = signed_values ? signed_value() : lo + (hi - lo) * uniform();
}

static void make_case(fd_case *c, falcon_variant var, falcon_align al, falcon_phi phi, int decay,
                      int carried, int64_t T)
{
    const int64_t n = 3, m = 2, window = var == FALCON_3 || var == FALCON_3A ? 3 : 1;
    const int64_t hl = carried ? window - 1 : 0;
    c->buf = calloc((size_t)(4 * T * n + 2 * T * m + 2 * T + 2 * m * n + n + hl * (n + m)), sizeof(double));
    double *p = c->buf, *q = p, *k = q + T * n, *gain = k + T * n, *v = gain + T * n;
    double *beta = v + T * m, *alpha = beta + T, *S0 = alpha + T, *prev = S0 + m * n;
    double *hk = prev + n, *hv = hk + hl * n;
    c->dO = hv + hl * m;
    c->dS_T = c->dO + T * m;
    fill(q, T * n, 0, 0, 1);
    fill(k, T * n, 0, 0, 1);
    fill(v, T * m, 0, 0, 1);
    fill(gain, T * n, 0.5, 2.0, 0);
    fill(beta, T, 0.2, 1.8, 0);
    fill(alpha, T, 0.5, 1.0, 0);
    fill(S0, m * n, 0, 0, carried);
    fill(prev, n, 0, 0, 1);
    fill(hk, hl * n, 0, 0, 1);
    fill(hv, hl * m, 0, 0, 1);
    fill(c->dO, T * m, 0, 0, 1);
    fill(c->dS_T, m * n, 0, 0, 1);
    c->o = (falcon_ref_opts){.variant = var, .align = al, .phi = phi, .eps = 1e-6, .window = window,
                             .chunk = 1, .bits = FD_BITS};
    c->h = (falcon_ref_head){.T = T, .n = n, .m = m, .q = q, .k = k, .v = v, .beta = beta,
                             .alpha = decay ? alpha : NULL,
                             .gain = var == FALCON_2 || var == FALCON_2A ? gain : NULL, .S0 = S0,
                             .prev_key = carried ? prev : NULL, .hist_k = hk, .hist_v = hv, .hist_len = hl};
}

static mpfr_t *vec(int64_t count)
{
    mpfr_t *v = malloc(sizeof(mpfr_t) * (size_t)(count > 0 ? count : 1));
    for (int64_t i = 0; i < count; i++) mpfr_init2(v[i], FD_BITS), mpfr_set_zero(v[i], 1);
    return v;
}
static void vec_free(mpfr_t *v, int64_t count)
{
    for (int64_t i = 0; i < count; i++) mpfr_clear(v[i]);
    free(v);
}

/* Each input tensor's doubles, gradient slot and size (NULL: absent). */
typedef struct tensor_list {
    const double *x[IN_COUNT];
    int64_t count[IN_COUNT];
    mpfr_t *grad[IN_COUNT];
} tensor_list;

static tensor_list tensors(const fd_case *c)
{
    const falcon_ref_head *h = &c->h;
    const int64_t T = h->T, n = h->n, m = h->m, hl = h->hist_len;
    tensor_list t = {
        .x = {h->q, h->k, h->v, h->beta, h->alpha, h->gain, h->S0, h->prev_key, h->hist_k, h->hist_v},
        .count = {T * n, T * n, T * m, T, h->alpha ? T : 0, h->gain ? T * n : 0, m * n,
                  h->prev_key ? n : 0, hl * n, hl * m},
    };
    for (int i = 0; i < IN_COUNT; i++) {
        if (!t.x[i]) t.count[i] = 0;
        t.grad[i] = vec(t.count[i]);
    }
    return t;
}
static void tensors_free(tensor_list *t)
{
    for (int i = 0; i < IN_COUNT; i++) vec_free(t->grad[i], t->count[i]);
}

/* L at x + sign h d (d: one direction per tensor, [IN_COUNT][count]). */
static void loss_at(const fd_case *c, const tensor_list *t, double **d, int sign, mpfr_ptr L)
{
    const falcon_ref_head *h = &c->h;
    const int64_t T = h->T, n = h->n, m = h->m;
    mpfr_t *x[IN_COUNT];
    for (int i = 0; i < IN_COUNT; i++) {
        x[i] = t->count[i] ? vec(t->count[i]) : NULL;
        for (int64_t j = 0; j < t->count[i]; j++) { /* exact at 512 bits */
            mpfr_set_d(x[i][j], d[i][j], MPFR_RNDN);
            mpfr_mul_2si(x[i][j], x[i][j], FD_LOG2_H, MPFR_RNDN);
            if (sign < 0) mpfr_neg(x[i][j], x[i][j], MPFR_RNDN);
            mpfr_add_d(x[i][j], x[i][j], t->x[i][j], MPFR_RNDN);
        }
    }
    falcon_ref_head_mp hm = {.T = T, .n = n, .m = m, .q = x[IN_Q], .k = x[IN_K], .v = x[IN_V],
                             .beta = x[IN_BETA], .alpha = x[IN_ALPHA], .gain = x[IN_GAIN], .S0 = x[IN_S0],
                             .prev_key = x[IN_PREV], .hist_k = x[IN_HK], .hist_v = x[IN_HV],
                             .hist_len = h->hist_len};
    mpfr_t *out = vec(T * m), *S = vec(m * n);
    cr_assert(falcon_ref_recurrent_mp_in(&c->o, &hm, out, S) == FALCON_OK);
    mpfr_set_zero(L, 1);
    for (int64_t i = 0; i < T * m; i++) {
        mpfr_mul_d(out[i], out[i], c->dO[i], MPFR_RNDN);
        mpfr_add(L, L, out[i], MPFR_RNDN);
    }
    for (int64_t i = 0; i < m * n; i++) {
        mpfr_mul_d(S[i], S[i], c->dS_T[i], MPFR_RNDN);
        mpfr_add(L, L, S[i], MPFR_RNDN);
    }
    vec_free(out, T * m);
    vec_free(S, m * n);
    for (int i = 0; i < IN_COUNT; i++) vec_free(x[i], t->count[i]);
}

/* |(L(x + h d) - L(x - h d)) / 2h - <grad, d>| / SUM |grad_i d_i|. */
static double fd_error(const fd_case *c, const tensor_list *t)
{
    double *d[IN_COUNT];
    mpfr_t lp, lm, dir, mag, x;
    mpfr_inits2(FD_BITS, lp, lm, dir, mag, x, (mpfr_ptr)0);
    mpfr_set_zero(dir, 1);
    mpfr_set_zero(mag, 1);
    for (int i = 0; i < IN_COUNT; i++) {
        d[i] = malloc(sizeof(double) * (size_t)(t->count[i] + 1));
        fill(d[i], t->count[i], -1.0, 1.0, 0);
        for (int64_t j = 0; j < t->count[i]; j++) {
            mpfr_mul_d(x, t->grad[i][j], d[i][j], MPFR_RNDN);
            mpfr_add(dir, dir, x, MPFR_RNDN);
            mpfr_abs(x, x, MPFR_RNDN);
            mpfr_add(mag, mag, x, MPFR_RNDN);
        }
    }
    loss_at(c, t, d, 1, lp);
    loss_at(c, t, d, -1, lm);
    mpfr_sub(x, lp, lm, MPFR_RNDN);
    mpfr_mul_2si(x, x, -FD_LOG2_H - 1, MPFR_RNDN);
    mpfr_sub(x, x, dir, MPFR_RNDN);
    mpfr_abs(x, x, MPFR_RNDN);
    double err = mpfr_zero_p(mag) ? mpfr_get_d(x, MPFR_RNDU) : (mpfr_div(x, x, mag, MPFR_RNDN), mpfr_get_d(x, MPFR_RNDU));
    mpfr_clears(lp, lm, dir, mag, x, (mpfr_ptr)0);
    for (int i = 0; i < IN_COUNT; i++) free(d[i]);
    return err;
}

/* The reference's gradients at 512 bits into t->grad. */
static void backward_into(const fd_case *c, tensor_list *t, int64_t checkpoint)
{
    falcon_ref_grads_mp g = {.dq = t->grad[IN_Q], .dk = t->grad[IN_K], .dv = t->grad[IN_V],
                             .dbeta = t->grad[IN_BETA], .dalpha = t->grad[IN_ALPHA], .dgain = t->grad[IN_GAIN],
                             .dS0 = t->grad[IN_S0], .dprev_key = t->grad[IN_PREV],
                             .dhist_k = t->grad[IN_HK], .dhist_v = t->grad[IN_HV]};
    cr_assert(falcon_ref_backward_mp(&c->o, &c->h, c->dO, c->dS_T, &g, NULL, checkpoint) == FALCON_OK);
}

/* |g| <= g_abs element by element (the magnitudes bound the terms'
 * magnitudes), and kappa >= 1 for every tensor. */
static void check_absolute(const fd_case *c, const tensor_list *t)
{
    double *dv[IN_COUNT], *da[IN_COUNT];
    for (int i = 0; i < IN_COUNT; i++) {
        dv[i] = t->count[i] ? malloc(sizeof(double) * (size_t)t->count[i]) : NULL;
        da[i] = t->count[i] ? malloc(sizeof(double) * (size_t)t->count[i]) : NULL;
    }
    falcon_ref_grads g = {dv[IN_Q], dv[IN_K], dv[IN_V], dv[IN_BETA], dv[IN_ALPHA], dv[IN_GAIN],
                          dv[IN_S0], dv[IN_PREV], dv[IN_HK], dv[IN_HV]};
    falcon_ref_grads ga = {da[IN_Q], da[IN_K], da[IN_V], da[IN_BETA], da[IN_ALPHA], da[IN_GAIN],
                           da[IN_S0], da[IN_PREV], da[IN_HK], da[IN_HV]};
    falcon_ref_opts o = c->o;
    o.bits = 256;
    cr_assert(falcon_ref_backward(&o, &c->h, c->dO, c->dS_T, &g, &ga) == FALCON_OK);
    for (int i = 0; i < IN_COUNT; i++) {
        for (int64_t j = 0; j < t->count[i]; j++)
            cr_expect(fabs(dv[i][j]) <= da[i][j], "tensor %d [%ld]: |g| %.17g > g_abs %.17g", i, (long)j,
                      dv[i][j], da[i][j]);
        if (t->count[i]) cr_expect(falcon_ref_grad_cond(dv[i], da[i], (size_t)t->count[i]) >= 1.0);
        free(dv[i]);
        free(da[i]);
    }
}

Test(grad_reference, finite_differences_every_variant_alignment_phi)
{
    static const falcon_phi phis[4] = {FALCON_PHI_IDENTITY, FALCON_PHI_RELU, FALCON_PHI_ELU1, FALCON_PHI_L2NORM};
    rng_state = 20240917;
    double worst = 0;
    int runs = 0;
    for (int var = FALCON_1; var <= FALCON_3A; var++)
        for (int al = 0; al < 2; al++)
            for (int carried = 0; carried < 2; carried++, runs++) {
                fd_case c;
                make_case(&c, (falcon_variant)var, (falcon_align)al, phis[runs % 4], runs % 3 != 0, carried,
                          1 + (runs * 5) % 12);
                tensor_list t = tensors(&c);
                backward_into(&c, &t, 0);
                for (int dir = 0; dir < 3; dir++) {
                    double e = fd_error(&c, &t);
                    worst = fmax(worst, e);
                    cr_expect(e <= FD_TOL, "%s/%s/%s decay=%d carried=%d T=%ld: FD disagrees by %.3g",
                              falcon_variant_name((falcon_variant)var), falcon_align_name((falcon_align)al),
                              falcon_phi_name(c.o.phi), c.h.alpha != NULL, carried, (long)c.h.T, e);
                }
                check_absolute(&c, &t);
                tensors_free(&t);
                free(c.buf);
            }
    printf("grad_reference: %d cases x 3 directions, worst FD disagreement %.3g (<= %.0e)\n", runs, worst,
           FD_TOL);
}

/* T = 50 with a checkpoint every 8 steps (7 segments, the last short): the
 * same gradients, bit for bit, as one segment over the whole call (the
 * states are recomputed by the same arithmetic), and finite differences
 * agree. */
Test(grad_reference, checkpoint_segments)
{
    rng_state = 77;
    fd_case c;
    make_case(&c, FALCON_3, FALCON_ALIGN_PREFIX, FALCON_PHI_ELU1, 1, 1, 50);
    tensor_list a = tensors(&c), b = tensors(&c);
    backward_into(&c, &a, 8);
    backward_into(&c, &b, 50);
    for (int i = 0; i < IN_COUNT; i++)
        for (int64_t j = 0; j < a.count[i]; j++)
            cr_expect(mpfr_equal_p(a.grad[i][j], b.grad[i][j]), "tensor %d [%ld] differs", i, (long)j);
    double e = fd_error(&c, &a);
    printf("grad_reference: T = 50, c = 8: FD disagreement %.3g\n", e);
    cr_expect(e <= FD_TOL, "FD disagrees by %.3g", e);
    tensors_free(&a);
    tensors_free(&b);
    free(c.buf);
}

Test(grad_reference, gradient_condition_number)
{
    const double x[2] = {3.0, -4.0}, xa[2] = {6.0, 8.0}, zero[2] = {0, 0};
    cr_expect(falcon_ref_grad_cond(x, xa, 2) == 2.0);
    cr_expect(falcon_ref_grad_cond(zero, zero, 2) == 1.0);
    cr_expect(isinf(falcon_ref_grad_cond(zero, xa, 2)));
}

static int golden_slot(const char *name)
{
    static const char *const names[IN_COUNT] = {"d_q", "d_k", "d_v", "d_beta", "d_alpha", "d_gain", "d_S0"};
    for (int i = 0; i < IN_COUNT; i++)
        if (names[i] && strcmp(names[i], name) == 0) return i;
    return -1;
}

/* One golden tensor: the 40-digit values to GOLDEN_TOL relative (the
 * tensor's largest magnitude as the floor of the scale: a value that
 * cancels to near 0 carries the absolute error of its terms), and the
 * rounded doubles exactly or within one unit in the last place. Returns the
 * worst relative difference. */
static double golden_tensor(const golden_grad_case *gc, const golden_grad_tensor *gt, mpfr_t *mine)
{
    mpfr_t gold, diff, scale;
    mpfr_inits2(FD_BITS, gold, diff, scale, (mpfr_ptr)0);
    mpfr_set_zero(scale, 1);
    for (int j = 0; j < gt->count; j++) {
        mpfr_set_str(gold, gt->digits[j], 10, MPFR_RNDN);
        mpfr_abs(gold, gold, MPFR_RNDN);
        mpfr_max(scale, scale, gold, MPFR_RNDN);
    }
    double worst = 0;
    for (int j = 0; j < gt->count; j++) {
        cr_assert(mpfr_set_str(gold, gt->digits[j], 10, MPFR_RNDN) == 0, "bad digits %s", gt->digits[j]);
        mpfr_sub(diff, mine[j], gold, MPFR_RNDN);
        mpfr_abs(diff, diff, MPFR_RNDN);
        mpfr_abs(gold, gold, MPFR_RNDN);
        if (!mpfr_zero_p(scale)) mpfr_div(diff, diff, mpfr_greater_p(gold, scale) ? gold : scale, MPFR_RNDN);
        double rel = mpfr_get_d(diff, MPFR_RNDU);
        worst = fmax(worst, rel);
        const double d = mpfr_get_d(mine[j], MPFR_RNDN), want = gt->f64[j];
        cr_expect(rel <= GOLDEN_TOL, "%s/%s/%s W=%d T=%d %s[%d]: %.3g relative", gc->variant, gc->align,
                  gc->phi, gc->window, gc->T, gt->name, j, rel);
        cr_expect(d == want || nextafter(d, INFINITY) == want || nextafter(d, -INFINITY) == want,
                  "%s/%s/%s %s[%d]: %.17g, golden %.17g", gc->variant, gc->align, gc->phi, gt->name, j, d, want);
    }
    mpfr_clears(gold, diff, scale, (mpfr_ptr)0);
    return worst;
}

Test(grad_reference, golden_gradients)
{
    double worst = 0;
    int tensors_checked = 0;
    for (int i = 0; i < golden_grad_case_count; i++) {
        const golden_grad_case *gc = &golden_grad_cases[i];
        fd_case c = {.dO = (double *)gc->dO, .dS_T = (double *)gc->dS_T};
        c.o = (falcon_ref_opts){.variant = falcon_variant_parse(gc->variant), .align = falcon_align_parse(gc->align),
                                .phi = falcon_phi_parse(gc->phi), .eps = gc->eps, .window = gc->window,
                                .chunk = 1, .bits = FD_BITS};
        c.h = (falcon_ref_head){.T = gc->T, .n = gc->n, .m = gc->m, .q = gc->q, .k = gc->k, .v = gc->v,
                                .beta = gc->beta, .alpha = gc->alpha, .gain = gc->gain, .S0 = gc->S0};
        tensor_list t = tensors(&c);
        backward_into(&c, &t, 0);
        for (int g = 0; g < gc->grad_count; g++) {
            const int slot = golden_slot(gc->grads[g].name);
            cr_assert(slot >= 0 && t.count[slot] == gc->grads[g].count, "case %d: %s", i, gc->grads[g].name);
            worst = fmax(worst, golden_tensor(gc, &gc->grads[g], t.grad[slot]));
            tensors_checked++;
        }
        tensors_free(&t);
    }
    printf("grad_reference: %d golden cases, %d tensors: worst relative difference %.3g (<= %.0e)\n",
           golden_grad_case_count, tensors_checked, worst, GOLDEN_TOL);
}

/* The mpfr backend's backward door (falcon_reference_attach attaches it):
 * per head, the same numbers as falcon_ref_backward on that head's gathered
 * inputs, scattered into the [B][T][H][D] layout in the run's precision and
 * the state's gradients in double; a fresh state's dprev_key and history
 * gradients are 0. B = H = 2, Falcon-3 (W = 3) with decay, prefix. */
static void door_case(falcon_precision prec, int warm)
{
    enum { B = 2, H = 2, T = 5, N = 3, M = 2, W = 3, HEADS = B * H };
    const size_t es = prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    double raw[(3 * N + M + 2) * B * T * H + M * B * T * H];
    rng_state = 99;
    fill(raw, (int64_t)(sizeof raw / sizeof raw[0]), 0, 0, 1);
    char *in_buf = calloc(sizeof raw / sizeof raw[0], es), *g_buf = calloc((3 * N + M + 2) * B * T * H, es);
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        double x = i >= (size_t)((3 * N + M) * B * T * H) && i < (size_t)((3 * N + M + 2) * B * T * H)
                       ? 0.5 + 0.25 * fabs(raw[i]) : raw[i]; /* beta and alpha in (0.5, 1] */
        if (prec == FALCON_FP64) ((double *)in_buf)[i] = x;
        else ((float *)in_buf)[i] = (float)x;
    }
    const int64_t BTH = B * T * H;
    char *q = in_buf, *k = q + es * BTH * N, *gain = k + es * BTH * N, *v = gain + es * BTH * N;
    char *beta = v + es * BTH * M, *alpha = beta + es * BTH, *dO = alpha + es * BTH;
    falcon_inputs in = {.B = B, .T = T, .H = H, .n = N, .m = M, .q = q, .k = k, .v = v, .beta = beta, .alpha = alpha};
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = FALCON_3, cfg.window = W, cfg.precision = prec, cfg.backend = FALCON_BACKEND_MPFR;
    falcon_state *st;
    cr_assert(falcon_state_create(HEADS, N, M, W, &st) == FALCON_OK);
    if (warm) cr_assert(falcon_run(&cfg, &in, st, g_buf) == FALCON_OK, "%s", falcon_last_error());
    double dS_T[HEADS * M * N], dS0[HEADS * M * N], dprev[HEADS * N], dhk[HEADS * (W - 1) * N];
    double dhv[HEADS * (W - 1) * M];
    fill(dS_T, HEADS * M * N, 0, 0, 1);
    char *dq = g_buf, *dk = dq + es * BTH * N, *dv = dk + es * BTH * N, *dbeta = dv + es * BTH * M;
    char *dalpha = dbeta + es * BTH;
    falcon_grads g = {dq, dk, dv, dbeta, dalpha, NULL, dS0, dprev, dhk, dhv};
    cr_assert(falcon_mpfr_backward(&cfg, &in, st, dO, dS_T, &g) == FALCON_OK, "%s", falcon_last_error());
    const falcon_state_view view = falcon_state_get_view(st);
    double *hb = malloc(sizeof(double) * falcon_ref_head_doubles(&in)), dOh[T * M];
    int mismatches = 0;
    for (int64_t hh = 0; hh < HEADS; hh++) {
        falcon_ref_head rh;
        falcon_ref_head_gather(&in, prec, &view, hh, hb, &rh);
        const int64_t b = hh / H, h = hh % H;
        for (int64_t t = 0; t < T; t++)
            for (int64_t a = 0; a < M; a++) {
                const int64_t at = ((b * T + t) * H + h) * M + a;
                dOh[t * M + a] = prec == FALCON_FP64 ? ((double *)dO)[at] : ((float *)dO)[at];
            }
        double r[T * N * 2 + T * M + 2 * T + M * N + N + (W - 1) * (N + M)];
        double *rq = r, *rk = rq + T * N, *rv = rk + T * N, *rb = rv + T * M, *ra = rb + T, *rS = ra + T;
        double *rp = rS + M * N, *rhk = rp + N, *rhv = rhk + (W - 1) * N;
        memset(r, 0, sizeof r);
        falcon_ref_grads want = {rq, rk, rv, rb, ra, NULL, rS, rp, rhk, rhv};
        const falcon_ref_opts ro = {.variant = FALCON_3, .align = cfg.align, .phi = cfg.phi,
                                    .eps = prec == FALCON_FP64 ? cfg.eps : (double)(float)cfg.eps,
                                    .window = W, .chunk = T, .bits = cfg.mpfr_bits};
        cr_assert(falcon_ref_backward(&ro, &rh, dOh, dS_T + hh * M * N, &want, NULL) == FALCON_OK);
        const struct { const char *dst; const double *src; int64_t width; } rows[] = {
            {dq, rq, N}, {dk, rk, N}, {dv, rv, M}, {dbeta, rb, 1}, {dalpha, ra, 1}};
        for (size_t f = 0; f < sizeof rows / sizeof rows[0]; f++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t i = 0; i < rows[f].width; i++) {
                    const int64_t at = ((b * T + t) * H + h) * rows[f].width + i;
                    const double want_v = prec == FALCON_FP64 ? rows[f].src[t * rows[f].width + i]
                                                              : (double)(float)rows[f].src[t * rows[f].width + i];
                    const double got = prec == FALCON_FP64 ? ((double *)rows[f].dst)[at] : ((float *)rows[f].dst)[at];
                    mismatches += got != want_v;
                }
        for (int64_t i = 0; i < M * N; i++) mismatches += dS0[hh * M * N + i] != rS[i];
        for (int64_t i = 0; i < N; i++) mismatches += dprev[hh * N + i] != (warm ? rp[i] : 0.0);
        for (int64_t i = 0; i < (W - 1) * N; i++) mismatches += dhk[hh * (W - 1) * N + i] != (warm ? rhk[i] : 0.0);
        for (int64_t i = 0; i < (W - 1) * M; i++) mismatches += dhv[hh * (W - 1) * M + i] != (warm ? rhv[i] : 0.0);
        if (warm) cr_expect(rh.prev_key && rh.hist_len == W - 1, "the warm-up run left a previous key and history");
    }
    cr_expect(mismatches == 0, "%s warm=%d: %d gradient elements differ from the reference's",
              falcon_precision_name(prec), warm, mismatches);
    free(hb);
    free(in_buf);
    free(g_buf);
    falcon_state_free(st);
}

Test(grad_reference, backend_door)
{
    for (int warm = 0; warm < 2; warm++) {
        door_case(FALCON_FP64, warm);
        door_case(FALCON_FP32, warm);
    }
}
