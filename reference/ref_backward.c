/*
 * MPFR reference, backward pass: the reverse step of docs/math.md 12.1 over
 * the recurrent form, with the states recomputed from checkpoints (12.2),
 * and, when asked, the magnitudes of 12.3: beside each gradient it adds the
 * magnitudes of the terms that form it, every operand the sweep's own exact
 * (signed) value, in b->ga.
 */
#include "ref_backward.h"

#include <math.h>
#include <string.h>

enum { S_ETA, S_N, S_DETA, S_DN, S_DO, S_ONE, S_ACC, S_TERM, S_NORM, S_MAG, S_W, S_COUNT };

/* acc += x y, or acc -= x y when `neg`. */
static void term(mpfr_ptr acc, mpfr_srcptr x, mpfr_srcptr y, int neg)
{
    if (neg) {
        mpfr_fms(acc, x, y, acc, MPFR_RNDN);
        mpfr_neg(acc, acc, MPFR_RNDN);
    } else {
        mpfr_fma(acc, x, y, acc, MPFR_RNDN);
    }
}

/* acc += |x y| (a magnitude of 12.3). */
static void mag(bwd_sweep *b, mpfr_ptr acc, mpfr_srcptr x, mpfr_srcptr y)
{
    mpfr_ptr t = b->s[S_TERM];
    mpfr_mul(t, x, y, MPFR_RNDN);
    mpfr_abs(t, t, MPFR_RNDN);
    mpfr_add(acc, acc, t, MPFR_RNDN);
}

static void zeros(mpfr_t *v, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        mpfr_set_zero(v[i], 1);
}

/* dst[n] = J_phi(raw)^T d (docs/math.md 12.1's table), with fx = phi(raw). */
static void phi_transpose(bwd_sweep *b, mpfr_t *dst, mpfr_t *raw, mpfr_t *fx, mpfr_t *d)
{
    const int64_t n = b->c.n;
    if (b->c.phi == FALCON_PHI_L2NORM) {
        mpfr_ptr norm = b->s[S_NORM], pd = b->s[S_ACC];
        mpfr_set_zero(norm, 1);
        fref_dot_acc(norm, raw, raw, n);
        if (mpfr_zero_p(norm)) { /* phi(0) = 0: the convention's zero Jacobian */
            zeros(dst, n);
            return;
        }
        mpfr_sqrt(norm, norm, MPFR_RNDN);
        mpfr_set_zero(pd, 1);
        for (int64_t i = 0; i < n; i++)
            term(pd, fx[i], d[i], 0);
        for (int64_t i = 0; i < n; i++) {
            mpfr_set(dst[i], d[i], MPFR_RNDN);
            term(dst[i], fx[i], pd, 1);
            mpfr_div(dst[i], dst[i], norm, MPFR_RNDN);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int positive = mpfr_sgn(raw[i]) > 0;
        if (b->c.phi == FALCON_PHI_RELU && !positive)
            mpfr_set_zero(dst[i], 1); /* 0 at the kink too */
        else if (b->c.phi == FALCON_PHI_ELU1 && !positive)
            mpfr_mul(dst[i], fx[i], d[i], MPFR_RNDN); /* exp(raw) = phi(raw) */
        else
            mpfr_set(dst[i], d[i], MPFR_RNDN);
    }
}

/* The magnitudes of phi_transpose's terms: |J|^T |d| element by element,
 * l2norm's (|d| + |p| (|p| . |d|)) / ||x|| (its I - p p^T's terms). */
static void phi_transpose_mag(bwd_sweep *b, mpfr_t *dst, mpfr_t *raw, mpfr_t *fx, mpfr_t *d)
{
    const int64_t n = b->c.n;
    if (b->c.phi == FALCON_PHI_L2NORM) {
        mpfr_ptr norm = b->s[S_NORM], pd = b->s[S_ACC];
        mpfr_set_zero(norm, 1);
        fref_dot_acc(norm, raw, raw, n);
        if (mpfr_zero_p(norm)) {
            zeros(dst, n);
            return;
        }
        mpfr_sqrt(norm, norm, MPFR_RNDN);
        mpfr_set_zero(pd, 1);
        for (int64_t i = 0; i < n; i++) mag(b, pd, fx[i], d[i]);
        for (int64_t i = 0; i < n; i++) {
            mpfr_abs(dst[i], d[i], MPFR_RNDN);
            mag(b, dst[i], fx[i], pd);
            mpfr_div(dst[i], dst[i], norm, MPFR_RNDN);
        }
        return;
    }
    phi_transpose(b, dst, raw, fx, d);
    for (int64_t i = 0; i < n; i++) mpfr_abs(dst[i], dst[i], MPFR_RNDN);
}

/* Rounded once into the caller's arrays (NULL: not wanted). */
static void put(mpfr_t *dst, mpfr_t *src, int64_t count)
{
    if (dst)
        fref_store(dst, src, (size_t)count);
}

/* Step 1, the read o_t = S_t u: du = S_t^T dO_t, G += dO_t u^T, dq_t. */
static void reverse_read(bwd_sweep *b, int64_t t, mpfr_t *S)
{
    const int64_t n = b->c.n, m = b->c.m;
    mpfr_t *u = b->c.q + t * n;
    mpfr_ptr dO = b->s[S_DO];
    zeros(b->du, n);
    if (b->ga) { /* G's terms so far: |G| (the later steps' sum), then |dO| |u|^T */
        zeros(b->du_mag, n);
        for (int64_t i = 0; i < m * n; i++) mpfr_abs(b->Gmag[i], b->G[i], MPFR_RNDN);
    }
    for (int64_t a = 0; b->dO && a < m; a++) {
        mpfr_set_d(dO, b->dO[t * m + a], MPFR_RNDN); /* exact */
        for (int64_t j = 0; j < n; j++) {
            term(b->du[j], S[a * n + j], dO, 0);
            term(b->G[a * n + j], dO, u[j], 0);
            if (b->ga) {
                mag(b, b->du_mag[j], S[a * n + j], dO);
                mag(b, b->Gmag[a * n + j], dO, u[j]);
            }
        }
    }
    if (b->g->dq) {
        phi_transpose(b, b->vn, b->c.h.q + t * n, u, b->du);
        put(b->g->dq + t * n, b->vn, n);
    }
    if (b->ga && b->ga->dq) {
        phi_transpose_mag(b, b->vn, b->c.h.q + t * n, u, b->du_mag);
        put(b->ga->dq + t * n, b->vn, n);
    }
}

/* e_l = y_l - Sbar x_l (regression) or y_l, and a_l = G z_l, per example
 * of the window; Sbar = alpha S_{t-1}. */
static void write_residuals(bwd_sweep *b, int64_t lo, int64_t cnt, mpfr_t *S, mpfr_srcptr alpha)
{
    const int64_t n = b->c.n, m = b->c.m;
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *e = b->e + l * m, *a = b->a + l * m, *x = b->c.x + (lo + l) * n;
        mpfr_t *y = b->c.y[lo + l], *z = b->z + l * n;
        for (int64_t r = 0; r < m; r++) {
            mpfr_set(e[r], y[r], MPFR_RNDN);
            if (b->c.regression) {
                mpfr_ptr w = b->s[S_ACC];
                mpfr_set_zero(w, 1);
                for (int64_t j = 0; j < n; j++)
                    term(w, S[r * n + j], x[j], 0);
                term(e[r], alpha, w, 1);
            }
            mpfr_set_zero(a[r], 1);
            for (int64_t j = 0; j < n; j++)
                term(a[r], b->G[r * n + j], z[j], 0);
        }
    }
}

/* The adjoints of example l's key side: dz = eta G^T e + dN x, then
 * dx += -Sbar^T de (regression) + dN z, and the direction's share (z = x,
 * or z = g * x with dgain = x * dz). */
static void write_key_adjoints(bwd_sweep *b, int64_t t, int64_t ex, int64_t l, mpfr_t *S,
                               mpfr_srcptr alpha)
{
    const int64_t n = b->c.n, m = b->c.m;
    mpfr_t *e = b->e + l * m, *de = b->a + l * m, *z = b->z + l * n;
    mpfr_t *x = b->c.x + ex * n, *dx = b->dx + ex * n, *dz = b->dz + l * n;
    mpfr_t *gain = b->c.has_gain ? b->c.h.gain + t * n : NULL;
    mpfr_ptr acc = b->s[S_ACC];
    for (int64_t j = 0; j < n; j++) {
        mpfr_set_zero(dz[j], 1);
        for (int64_t r = 0; r < m; r++)
            term(dz[j], b->G[r * n + j], e[r], 0);
        mpfr_mul(dz[j], dz[j], b->s[S_ETA], MPFR_RNDN);
        term(dz[j], b->s[S_DN], x[j], 0);
        if (b->c.regression) {
            mpfr_set_zero(acc, 1);
            for (int64_t r = 0; r < m; r++)
                term(acc, S[r * n + j], de[r], 0);
            term(dx[j], alpha, acc, 1);
        }
        term(dx[j], b->s[S_DN], z[j], 0);
        if (gain) {
            term(dx[j], gain[j], dz[j], 0);
            if (b->g->dgain) {
                mpfr_set_zero(acc, 1);
                term(acc, x[j], dz[j], 0);
                mpfr_set(b->g->dgain[t * n + j], acc, MPFR_RNDN);
            }
        } else {
            mpfr_add(dx[j], dx[j], dz[j], MPFR_RNDN);
        }
    }
}

/* The magnitudes of the write's terms (12.3), from the step's exact
 * values: dbeta's |e| . |G| |z| / N, each example's dy (eta |G| |z|), dz
 * (eta |G|^T |e| + |dN| |x|) and dx (|alpha| |S|^T |de| + |dN| |z| + the
 * direction's share), dgain's |x| |dz|, and dSbar's |de| |x|^T into Gmag. */
static void write_magnitudes(bwd_sweep *b, int64_t t, int64_t lo, int64_t cnt, mpfr_t *S, mpfr_srcptr alpha)
{
    const int64_t n = b->c.n, m = b->c.m;
    mpfr_ptr acc = b->s[S_ACC], dbeta = b->s[S_MAG], w = b->s[S_W];
    mpfr_t *gain = b->c.has_gain ? b->c.h.gain + t * n : NULL, *dz = b->vn;
    mpfr_set_zero(dbeta, 1);
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *e = b->e + l * m, *de = b->a + l * m, *z = b->z + l * n, *x = b->c.x + (lo + l) * n;
        mpfr_t *dx = b->dx_mag + (lo + l) * n, *dy = b->dy_mag + (lo + l) * m;
        for (int64_t r = 0; r < m; r++) {
            mpfr_set_zero(acc, 1);
            for (int64_t j = 0; j < n; j++) mag(b, acc, b->G[r * n + j], z[j]);
            mag(b, dbeta, e[r], acc);
            mpfr_mul(acc, acc, b->s[S_ETA], MPFR_RNDN);
            mpfr_add(dy[r], dy[r], acc, MPFR_RNDN);
            for (int64_t j = 0; b->c.regression && j < n; j++) mag(b, b->Gmag[r * n + j], de[r], x[j]);
        }
        for (int64_t j = 0; j < n; j++) {
            mpfr_set_zero(dz[j], 1);
            for (int64_t r = 0; r < m; r++) mag(b, dz[j], b->G[r * n + j], e[r]);
            mpfr_mul(dz[j], dz[j], b->s[S_ETA], MPFR_RNDN);
            mpfr_abs(dz[j], dz[j], MPFR_RNDN);
            mag(b, dz[j], b->s[S_DN], x[j]);
            for (int64_t r = 0; b->c.regression && r < m; r++) {
                mpfr_mul(w, S[r * n + j], alpha, MPFR_RNDN);
                mag(b, dx[j], w, de[r]);
            }
            mag(b, dx[j], b->s[S_DN], z[j]);
            if (gain) {
                mag(b, dx[j], gain[j], dz[j]);
                if (b->ga->dgain) {
                    mpfr_set_zero(acc, 1);
                    mag(b, acc, x[j], dz[j]);
                    mpfr_set(b->ga->dgain[t * n + j], acc, MPFR_RNDN);
                }
            } else {
                mpfr_add(dx[j], dx[j], dz[j], MPFR_RNDN);
            }
        }
    }
    if (b->ga->dbeta)
        mpfr_div(b->ga->dbeta[t], dbeta, b->s[S_N], MPFR_RNDN);
}

/* Step 2, the write S_t = Sbar + eta SUM_l e_l z_l^T: every adjoint of
 * 12.1's table; leaves dSbar in b->dSbar. */
static void reverse_write(bwd_sweep *b, int64_t t, mpfr_t *S, mpfr_srcptr alpha)
{
    const int64_t n = b->c.n, m = b->c.m, mn = m * n;
    int64_t lo, cnt = fref_window(&b->c, t, &lo);
    for (int64_t i = 0; i < mn; i++)
        mpfr_set(b->dSbar[i], b->G[i], MPFR_RNDN);
    if (cnt == 0)
        return; /* dbeta_t = 0 (already), dSbar = G */
    mpfr_ptr eta = b->s[S_ETA], N = b->s[S_N], deta = b->s[S_DETA], dN = b->s[S_DN];
    fref_step_terms(&b->c, t, lo, cnt, b->z, eta);
    mpfr_set_d(N, b->c.eps, MPFR_RNDN);
    for (int64_t l = 0; l < cnt; l++)
        fref_dot_acc(N, b->c.x + (lo + l) * n, b->z + l * n, n);
    write_residuals(b, lo, cnt, S, alpha);
    mpfr_set_zero(deta, 1);
    for (int64_t i = 0; i < cnt * m; i++)
        term(deta, b->e[i], b->a[i], 0);
    if (b->g->dbeta)
        mpfr_div(b->g->dbeta[t], deta, N, MPFR_RNDN);
    mpfr_mul(dN, deta, eta, MPFR_RNDN); /* dN = -deta eta / N */
    mpfr_div(dN, dN, N, MPFR_RNDN);
    mpfr_neg(dN, dN, MPFR_RNDN);
    for (int64_t l = 0; l < cnt; l++) {
        mpfr_t *de = b->a + l * m, *x = b->c.x + (lo + l) * n, *dy = b->dy + (lo + l) * m;
        for (int64_t r = 0; r < m; r++) {
            mpfr_mul(de[r], de[r], eta, MPFR_RNDN); /* a_l becomes de_l */
            mpfr_add(dy[r], dy[r], de[r], MPFR_RNDN);
        }
        write_key_adjoints(b, t, lo + l, l, S, alpha);
        for (int64_t r = 0; b->c.regression && r < m; r++)
            for (int64_t j = 0; j < n; j++)
                term(b->dSbar[r * n + j], de[r], x[j], 1);
    }
    if (b->ga)
        write_magnitudes(b, t, lo, cnt, S, alpha);
}

/* Step 3, the decay Sbar = alpha S_{t-1}: dalpha_t, and G becomes the
 * adjoint of S_{t-1}. */
static void reverse_forget(bwd_sweep *b, int64_t t, mpfr_t *S, mpfr_srcptr alpha)
{
    const int64_t mn = b->c.m * b->c.n;
    mpfr_t *swap = b->G;
    b->G = b->dSbar;
    b->dSbar = swap;
    if (!b->c.h.alpha)
        return;
    mpfr_ptr acc = b->s[S_ACC];
    mpfr_set_zero(acc, 1);
    for (int64_t i = 0; i < mn; i++) {
        term(acc, b->G[i], S[i], 0);
        mpfr_mul(b->G[i], b->G[i], alpha, MPFR_RNDN);
    }
    if (b->g->dalpha)
        mpfr_set(b->g->dalpha[t], acc, MPFR_RNDN);
    if (!b->ga)
        return;
    /* dalpha's terms: dSbar's (in Gmag) times |S_{t-1}|; then the
     * memory's adjoint's terms times alpha (dS0's, after step 1) */
    mpfr_set_zero(acc, 1);
    for (int64_t i = 0; i < mn; i++) {
        mag(b, acc, b->Gmag[i], S[i]);
        mpfr_mul(b->Gmag[i], b->Gmag[i], alpha, MPFR_RNDN);
    }
    if (b->ga->dalpha)
        mpfr_set(b->ga->dalpha[t], acc, MPFR_RNDN);
}

/* One segment, steps t0 .. t0+L-1: its states recomputed from the
 * checkpoint (st[i] = S before step t0+i), then the reverse steps. */
static void reverse_segment(bwd_sweep *b, int64_t t0, int64_t L, mpfr_t *checkpoint)
{
    const int64_t mn = b->c.m * b->c.n;
    fref_store(b->st, checkpoint, (size_t)mn);
    for (int64_t i = 0; i < L; i++) {
        fref_store(b->st + (i + 1) * mn, b->st + i * mn, (size_t)mn);
        fref_step(&b->c, b->st + (i + 1) * mn, b->z, b->e, t0 + i);
    }
    for (int64_t i = L - 1; i >= 0; i--) {
        int64_t t = t0 + i;
        mpfr_srcptr alpha = b->c.h.alpha ? b->c.h.alpha[t] : b->s[S_ONE];
        reverse_read(b, t, b->st + (i + 1) * mn);
        reverse_write(b, t, b->st + i * mn, alpha);
        reverse_forget(b, t, b->st + i * mn, alpha);
    }
}

/* The forward sweep keeping a checkpoint every b->seg steps, then the
 * reverse sweep segment by segment, last first. */
void bwd_sweep_run(bwd_sweep *b, const double *dS_T)
{
    const int64_t T = b->c.T, mn = b->c.m * b->c.n, seg = b->seg;
    mpfr_t *S = b->st;
    fref_load_S0(&b->c, S);
    for (int64_t t = 0; t < T; t++) {
        if (t % seg == 0)
            fref_store(b->ck + (t / seg) * mn, S, (size_t)mn);
        fref_step(&b->c, S, b->z, b->e, t);
    }
    fref_load(b->G, dS_T, (size_t)mn);
    for (int64_t i = 0; b->ga && i < mn; i++) /* T = 0: dS0 = dS_T, its own terms */
        mpfr_abs(b->Gmag[i], b->G[i], MPFR_RNDN);
    for (int64_t t0 = (T - 1) / seg * seg; T > 0 && t0 >= 0; t0 -= seg)
        reverse_segment(b, t0, T - t0 < seg ? T - t0 : seg, b->ck + (t0 / seg) * mn);
    put(b->g->dS0, b->G, mn);
    if (b->ga)
        put(b->ga->dS0, b->Gmag, mn);
}

size_t bwd_scalar_count(void) { return S_COUNT; }

void bwd_scalars_init(bwd_sweep *b) { mpfr_set_ui(b->s[S_ONE], 1, MPFR_RNDN); }

/* Where example e came from (docs/math.md 12.1, "Which key"): its raw key,
 * and the slots of g its key's and value's gradients go to (NULL: not
 * wanted): a carried example's history rows, else the key of step t
 * (same alignment) or t - 1 (prefix; the state's previous key before step
 * 0) and step t's value. */
static mpfr_t *example_slots(const bwd_sweep *b, const falcon_ref_grads_mp *g, int64_t e, mpfr_t **dk, mpfr_t **dv)
{
    const fref_ctx *c = &b->c;
    const int64_t n = c->n, m = c->m, hl = c->h.hist_len;
    if (e < hl) {
        *dk = g->dhist_k ? g->dhist_k + e * n : NULL;
        *dv = g->dhist_v ? g->dhist_v + e * m : NULL;
        return c->h.hist_k + e * n;
    }
    const int64_t t = e - hl + c->shift, kt = b->align_same ? t : t - 1;
    *dk = kt >= 0 ? (g->dk ? g->dk + kt * n : NULL) : g->dprev_key;
    *dv = g->dv ? g->dv + t * m : NULL;
    return kt >= 0 ? c->h.k + kt * n : c->h.prev_key;
}

/* The example adjoints dx, dy handed to the raw keys and values they came
 * from: dk = J_phi(k)^T dx (docs/math.md 12.1, "Which key"). */
void bwd_examples_out(bwd_sweep *b)
{
    const fref_ctx *c = &b->c;
    const int64_t n = c->n, m = c->m;
    for (int64_t e = 0; e < c->nex; e++) {
        mpfr_t *dk, *dv, *raw = example_slots(b, b->g, e, &dk, &dv);
        if (dk) {
            phi_transpose(b, b->vn, raw, c->x + e * n, b->dx + e * n);
            put(dk, b->vn, n);
        }
        put(dv, b->dy + e * m, m);
        if (!b->ga)
            continue;
        (void)example_slots(b, b->ga, e, &dk, &dv);
        if (dk) {
            phi_transpose_mag(b, b->vn, raw, c->x + e * n, b->dx_mag + e * n);
            put(dk, b->vn, n);
        }
        put(dv, b->dy_mag + e * m, m);
    }
}
