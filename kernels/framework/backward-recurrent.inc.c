/*
 * The recurrent form's backward pass (docs/math.md section 12), one head,
 * one precision: the reverse step of 12.1 for every variant, alignment,
 * feature map, decay, window, carried previous key and history, with the
 * recomputation of 12.2.
 *
 * Memory. The reverse step needs S_{t-1} and S_t. One forward sweep keeps
 * the memory at every c-th step (c = the head's checkpoint spacing, or
 * about sqrt(T)); when the reverse sweep reaches a segment of c steps, its
 * states are computed again from that checkpoint into a buffer of c
 * memories: (T / c + c) m n values of the run's precision. The memory is
 * [m][n] with leading dimension n (contiguous, so that <G, S> is one dot
 * product). The recomputation decays the memory directly (the forward's
 * lazy decay of fp32 is a different rounding of the same function).
 *
 * Scaled keys (section 4.1). A window's feature vectors are held as the
 * forward holds them, x = s x' with the write direction z = s tau z''
 * (tau only for Falcon-2/2A), sigma = max s, rho = s / sigma. With
 *     nu = sigma tau / N        (N = eps + SUM x.z; formed as falcon_eta_scaled forms eta sigma)
 * the step writes w_i e_i z''_i^T, w_i = beta nu rho_i, and the reverse
 * step's quantities, all of ordinary size for keys far from 1, are
 *     a_i = G z''_i,   de_i = w_i a_i,   D = SUM_i rho_i e_i . a_i,
 *     dbeta = nu D  (no 0 / 0 at beta = 0),
 *     dN z_i = -D beta nu^2 rho_i z''_i,   dN x_i = (-D beta nu^2 rho_i / tau) x'_i,
 *     eta G^T e_i with eta = beta nu / sigma / tau,
 *     dSbar = G - SUM_i (s_i de_i) x'_i^T   (regression; G for inner product),
 *     dalpha = <G, S_{t-1}> - SUM_i s_i de_i . (S_{t-1} x'_i)   (= <dSbar, S_{t-1}>),
 * and the new G = alpha dSbar is one rank_update with a = alpha.
 *
 * Every O(m n) operation goes through the micro-kernels (gemm_nt: the
 * window's S x' and G z'', <G, S>; gemm_nn: S^T de, G^T e, S_t^T dO;
 * rank_update: the forward write, G's read term and the dSbar update), so
 * each SIMD backend's build runs its own kernels; the O(n), O(m) loops are
 * plain C. An example's dx and dy add up over the W steps whose windows
 * hold it, in a ring of W accumulators: in the reverse sweep an example's
 * last contribution comes at the step that revealed it, where dk = J^T dx
 * (falcon_phi_vjp) of its raw key and dv = dy are written and the slot is
 * cleared for the example W before it.
 */

/* One head's backward work. */
typedef struct bw_head {
    const RS(falcon_grad_head) *g;
    const RS(falcon_head) *h;
    example_src src;
    void *mem;
    size_t mem_bytes;
    int64_t ldn, ldm, W, mn, c, nseg;
    REAL *ckpt;          /* [nseg][m n]: the memory before steps 0, c, 2c, ... */
    REAL *seg;           /* [c][m n]: a segment's later states */
    REAL *G;             /* [m n]: the adjoint of the memory */
    REAL *X, *Zg;        /* [W][ldn]: the window's x' (oldest first); Falcon-2's z'' */
    REAL *xs, *xz;       /* [W]: the keys' scales, x'.z'' */
    const REAL **y;      /* [W]: the window's values */
    REAL *P, *E, *A;     /* [W][ldm]: S_{t-1} x', the residuals e, then G z'' and de */
    REAL *coef;          /* [m][W]: a rank update's coefficients */
    REAL *GE, *SD;       /* [W][ldn]: G^T e, S_{t-1}^T de */
    REAL *u, *du, *dz;   /* [ldn] */
    REAL *ringx, *ringy; /* [W][ldn], [W][ldm]: the examples' dx and dy */
    REAL *vjp;           /* [ldn]: a J^T dx on its way to a double buffer */
    REAL *ck;            /* [max(ldn, ldm)]: the gradients added (finite_add): 0 while finite */
    int finite;          /* the double results so far */
} bw_head;

/* The window of one step and its normaliser. */
typedef struct bw_window {
    int64_t k, first, e; /* examples, the oldest's number, the step's own (-1: none) */
    REAL alpha, beta, tau, sigma, nu;
    const REAL *Z;       /* the write directions z'': X, or Zg */
} bw_window;

static int64_t RS(bw_spacing)(int64_t T, int64_t asked)
{
    if (asked > 0) return asked;
    int64_t c = 1;
    while ((c + 1) * (c + 1) <= T) c++;
    return c;
}

static void RS(bw_carve)(bw_head *b, carver *cv)
{
    const int64_t W = b->W, ldn = b->ldn, ldm = b->ldm, mn = b->mn, ldc = ldn > ldm ? ldn : ldm;
    b->ckpt = RS(carve)(cv, sizeof(REAL) * (size_t)(b->nseg * mn));
    b->seg = RS(carve)(cv, sizeof(REAL) * (size_t)(b->c * mn));
    b->G = RS(carve)(cv, sizeof(REAL) * (size_t)mn);
    b->X = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldn));
    b->Zg = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldn));
    b->xs = RS(carve)(cv, sizeof(REAL) * (size_t)W);
    b->xz = RS(carve)(cv, sizeof(REAL) * (size_t)W);
    b->y = RS(carve)(cv, sizeof(const REAL *) * (size_t)W);
    b->P = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldm));
    b->E = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldm));
    b->A = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldm));
    b->coef = RS(carve)(cv, sizeof(REAL) * (size_t)(b->h->m * W));
    b->GE = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldn));
    b->SD = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldn));
    b->u = RS(carve)(cv, sizeof(REAL) * (size_t)ldn);
    b->du = RS(carve)(cv, sizeof(REAL) * (size_t)ldn);
    b->dz = RS(carve)(cv, sizeof(REAL) * (size_t)ldn);
    b->ringx = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldn));
    b->ringy = RS(carve)(cv, sizeof(REAL) * (size_t)(W * ldm));
    b->vjp = RS(carve)(cv, sizeof(REAL) * (size_t)ldn);
    b->ck = RS(carve)(cv, sizeof(REAL) * (size_t)ldc);
}

static falcon_status RS(bw_open)(bw_head *b, const RS(falcon_grad_head) *g)
{
    const RS(falcon_head) *h = &g->f;
    memset(b, 0, sizeof *b);
    b->g = g;
    b->h = h;
    b->ldn = RS(padded)(h->n);
    b->ldm = RS(padded)(h->m);
    b->W = h->window;
    b->mn = h->m * h->n;
    b->c = RS(bw_spacing)(h->T, g->checkpoint);
    b->nseg = (h->T + b->c - 1) / b->c;
    if (RS(examples_open)(&b->src, h)) return FALCON_E_NOMEM;
    carver cv = {NULL, 0};
    RS(bw_carve)(b, &cv);
    cv.base = h->work->get(cv.used, &b->mem_bytes);
    if (!cv.base) {
        RS(examples_close)(&b->src);
        return FALCON_E_NOMEM;
    }
    b->mem = cv.base;
    cv.used = 0;
    RS(bw_carve)(b, &cv);
    memset(b->ringx, 0, sizeof(REAL) * (size_t)(b->W * b->ldn));
    memset(b->ringy, 0, sizeof(REAL) * (size_t)(b->W * b->ldm));
    memset(b->ck, 0, sizeof(REAL) * (size_t)(b->ldn > b->ldm ? b->ldn : b->ldm));
    b->finite = 1;
    const double *S = h->S_in ? h->S_in : h->S;
    for (int64_t i = 0; i < b->mn; i++) b->ckpt[i] = (REAL)S[i];
    if (g->dS_T)
        for (int64_t i = 0; i < b->mn; i++) b->G[i] = (REAL)g->dS_T[i];
    else
        memset(b->G, 0, sizeof(REAL) * (size_t)b->mn);
    return FALCON_OK;
}

static void RS(bw_close)(bw_head *b)
{
    b->h->work->put(b->mem, b->mem_bytes);
    RS(examples_close)(&b->src);
}

/* Example l of the window into row i: x' (and Falcon-2's z'' at step t),
 * its scale and x'.z'', as the forward's rec_prepare forms them. */
static void RS(bw_example)(bw_head *b, int64_t t, int64_t l, int64_t i, bw_window *w)
{
    const RS(falcon_head) *h = b->h;
    const RS(falcon_uk) *uk = h->uk;
    const int64_t n = h->n, ldn = b->ldn;
    const REAL *key, *g = h->gain ? h->gain + t * h->ldk : NULL;
    REAL *x = b->X + i * ldn, *z = g ? b->Zg + i * ldn : x, xz;
    RS(example_get)(&b->src, l, &key, &b->y[i]);
    RS(falcon_featurize)(h->phi, key, x, n);
    b->xs[i] = 1;
    if (g) w->tau = RS(write_direction)(g, x, z, n);
    uk->gemm_nt(1, 1, n, z, ldn, x, ldn, 0, &xz, 1);
    if (!RS(falcon_xz_in_range)(xz) && (b->xs[i] = RS(falcon_key_scale)(x, n)) != 1) {
        if (g) w->tau = RS(write_direction)(g, x, z, n);
        uk->gemm_nt(1, 1, n, z, ldn, x, ldn, 0, &xz, 1);
    }
    REAL tau2;
    if (g && !RS(falcon_xz_in_range)(xz) && (tau2 = RS(falcon_key_scale)(z, n)) != 1) {
        w->tau *= tau2;
        uk->gemm_nt(1, 1, n, z, ldn, x, ldn, 0, &xz, 1);
    }
    b->xz[i] = xz;
}

/* Step t's window, its decay and its normaliser nu. */
static void RS(bw_prepare)(bw_head *b, int64_t t, bw_window *w)
{
    const RS(falcon_head) *h = b->h;
    memset(w, 0, sizeof *w);
    w->alpha = h->alpha ? h->alpha[t * h->lds] : (REAL)1;
    w->beta = h->beta[t * h->lds];
    w->tau = w->sigma = 1;
    w->Z = h->gain ? b->Zg : b->X;
    w->e = falcon_example_of_step(&b->src.ex, t);
    if (w->e < 0) return;
    w->first = falcon_window_first(&b->src.ex, w->e);
    w->k = w->e - w->first + 1;
    int scaled = 0;
    for (int64_t i = 0; i < w->k; i++) {
        RS(bw_example)(b, t, w->first + i, i, w);
        scaled |= b->xs[i] != 1;
        if (b->xs[i] > w->sigma || i == 0) w->sigma = b->xs[i];
    }
    REAL sum = 0;
    for (int64_t i = 0; i < w->k; i++) {
        const REAL rho = b->xs[i] / w->sigma;
        sum += scaled ? rho * rho * b->xz[i] : b->xz[i];
    }
    w->nu = RS(falcon_nu_scaled)(b->h->eps, w->sigma, w->tau, sum);
}

/* P = X' S0^T and the residuals E (e = y - alpha s P, or y). */
static void RS(bw_residuals)(bw_head *b, const bw_window *w, const REAL *S0)
{
    const RS(falcon_head) *h = b->h;
    const int64_t m = h->m, n = h->n, ldm = b->ldm;
    h->uk->gemm_nt(w->k, m, n, b->X, b->ldn, S0, n, 0, b->P, ldm);
    for (int64_t i = 0; i < w->k; i++)
        RS(residual_row)(m, fw_res_kind(h->regression, b->xs[i]), 1, w->alpha, b->xs[i], b->y[i], b->P + i * ldm,
                         b->E + i * ldm);
}

/* S1 = step t applied to S0 (S1 == S0: in place). */
static void RS(bw_forward_step)(bw_head *b, int64_t t, const REAL *S0, REAL *S1)
{
    const RS(falcon_head) *h = b->h;
    const int64_t m = h->m, n = h->n, W = b->W;
    bw_window w;
    RS(bw_prepare)(b, t, &w);
    if (w.k > 0) RS(bw_residuals)(b, &w, S0);
    if (S1 != S0) memcpy(S1, S0, sizeof(REAL) * (size_t)b->mn);
    if (w.k == 0 && w.alpha == 1) return;
    const REAL bn = w.beta * w.nu;
    for (int64_t i = 0; i < w.k; i++) {
        const REAL wi = bn * (b->xs[i] / w.sigma);
        for (int64_t r = 0; r < m; r++) b->coef[r * W + i] = wi * b->E[i * b->ldm + r];
    }
    h->uk->rank_update(m, n, w.k, w.alpha, S1, n, b->coef, W, w.Z, b->ldn);
}

/* 12.1's first step, the read o_t = S_t u: dq_t = J^T (S_t^T dO_t), G += dO_t u^T. */
static void RS(bw_read)(bw_head *b, int64_t t, const REAL *S1)
{
    const RS(falcon_grad_head) *g = b->g;
    const RS(falcon_head) *h = b->h;
    const int64_t m = h->m, n = h->n;
    REAL *dq = g->dq + t * h->ldk;
    const REAL *q = h->q + t * h->ldk;
    if (!g->dO) {
        memset(dq, 0, sizeof(REAL) * (size_t)n);
        return;
    }
    const REAL *dO = g->dO + t * h->ldo;
    RS(falcon_featurize)(h->phi, q, b->u, n);
    h->uk->gemm_nn(1, n, m, dO, m, S1, n, 0, b->du, b->ldn);
    h->uk->rank_update(m, n, 1, 1, b->G, n, dO, 1, b->u, b->ldn);
    RS(falcon_phi_vjp)(h->phi, q, b->du, dq, n);
    RS(finite_add)(b->ck, dq, n);
}

/* Example i's dx (unscaled), and Falcon-2's dgain, from G^T e (GE), S^T de
 * (SD) and the normaliser's coefficients, into its ring slot. */
static void RS(bw_key_adjoint)(bw_head *b, int64_t t, const bw_window *w, int64_t i, REAL D)
{
    const RS(falcon_head) *h = b->h;
    const int64_t n = h->n, ldn = b->ldn;
    const REAL rho = b->xs[i] / w->sigma, bn = w->beta * w->nu;
    const REAL eta = bn / w->sigma / w->tau, cz = -D * bn * w->nu * rho, cx = cz / w->tau;
    const REAL *x = b->X + i * ldn, *z = w->Z + i * ldn, *ge = b->GE + i * ldn, *sd = b->SD + i * ldn;
    REAL *dx = b->ringx + ((w->first + i) % b->W) * ldn, *dz = b->dz;
    for (int64_t j = 0; j < n; j++) dz[j] = eta * ge[j] + cx * x[j];
    if (h->regression)
        for (int64_t j = 0; j < n; j++) dx[j] += -w->alpha * sd[j] + cz * z[j];
    else
        for (int64_t j = 0; j < n; j++) dx[j] += cz * z[j];
    if (!h->gain) {
        for (int64_t j = 0; j < n; j++) dx[j] += dz[j];
        return;
    }
    const REAL *gr = h->gain + t * h->ldk, s = b->xs[i];
    REAL *dg = b->g->dgain + t * h->ldk;
    for (int64_t j = 0; j < n; j++) {
        dg[j] = (s * x[j]) * dz[j];
        dx[j] += gr[j] * dz[j];
    }
    RS(finite_add)(b->ck, dg, n);
}

static REAL RS(bw_dot)(const REAL *restrict a, const REAL *restrict c, int64_t m)
{
    REAL s = 0;
    for (int64_t r = 0; r < m; r++) s += a[r] * c[r];
    return s;
}

/* 12.1's second and third steps for a step with examples: the write's
 * adjoints, then G <- alpha dSbar. dalpha holds <G, S0> and gets the
 * examples' share. */
static REAL RS(bw_write)(bw_head *b, int64_t t, const bw_window *w, const REAL *S0, REAL *dalpha)
{
    const RS(falcon_head) *h = b->h;
    const RS(falcon_uk) *uk = h->uk;
    const int64_t m = h->m, n = h->n, k = w->k, ldn = b->ldn, ldm = b->ldm, W = b->W;
    RS(bw_residuals)(b, w, S0);
    uk->gemm_nt(k, m, n, w->Z, ldn, b->G, n, 0, b->A, ldm);
    uk->gemm_nn(k, n, m, b->E, ldm, b->G, n, 0, b->GE, ldn);
    REAL D = 0;
    const REAL bn = w->beta * w->nu;
    for (int64_t i = 0; i < k; i++) {
        const REAL rho = b->xs[i] / w->sigma, wi = bn * rho;
        REAL *a = b->A + i * ldm, *dy = b->ringy + ((w->first + i) % W) * ldm;
        D += rho * RS(bw_dot)(b->E + i * ldm, a, m);
        for (int64_t r = 0; r < m; r++) {
            a[r] *= wi; /* now de_i */
            dy[r] += a[r];
        }
    }
    if (h->regression) uk->gemm_nn(k, n, m, b->A, ldm, S0, n, 0, b->SD, ldn);
    for (int64_t i = 0; i < k; i++) RS(bw_key_adjoint)(b, t, w, i, D);
    if (!h->regression) {
        if (w->alpha != 1) uk->rank_update(m, n, 0, w->alpha, b->G, n, b->coef, W, w->Z, ldn);
        return w->nu * D;
    }
    for (int64_t i = 0; i < k; i++) {
        const REAL s = b->xs[i];
        const REAL *de = b->A + i * ldm;
        *dalpha -= s * RS(bw_dot)(de, b->P + i * ldm, m);
        for (int64_t r = 0; r < m; r++) b->coef[r * W + i] = -w->alpha * (s * de[r]);
    }
    uk->rank_update(m, n, k, w->alpha, b->G, n, b->coef, W, b->X, ldn);
    return w->nu * D;
}

/* J^T dx of a raw key into out (REAL), or into dbl (double) when out is
 * NULL; dbl NULL too: not wanted. */
static void RS(bw_key_out)(bw_head *b, const REAL *key, const REAL *dx, REAL *out, double *dbl)
{
    const int64_t n = b->h->n;
    if (out) {
        RS(falcon_phi_vjp)(b->h->phi, key, dx, out, n);
        RS(finite_add)(b->ck, out, n);
        return;
    }
    if (!dbl) return;
    RS(falcon_phi_vjp)(b->h->phi, key, dx, b->vjp, n);
    for (int64_t j = 0; j < n; j++) {
        dbl[j] = (double)b->vjp[j];
        b->finite &= isfinite(dbl[j]) != 0;
    }
}

/* After step t: its own example's dk (or dprev_key) and dv, its slot
 * cleared; dv 0 without one, and under prefix dk_{T-1} = 0. */
static void RS(bw_finish_example)(bw_head *b, int64_t t, int64_t e)
{
    const RS(falcon_grad_head) *g = b->g;
    const RS(falcon_head) *h = b->h;
    const int64_t n = h->n, m = h->m, ldn = b->ldn, ldm = b->ldm;
    REAL *dv = g->dv + t * h->ldv;
    if (h->prefix && t == h->T - 1) memset(g->dk + t * h->ldk, 0, sizeof(REAL) * (size_t)n);
    if (e < 0) {
        memset(dv, 0, sizeof(REAL) * (size_t)m);
        return;
    }
    REAL *dx = b->ringx + (e % b->W) * ldn, *dy = b->ringy + (e % b->W) * ldm;
    const REAL *key, *val;
    RS(example_get)(&b->src, e, &key, &val);
    if (!h->prefix)
        RS(bw_key_out)(b, key, dx, g->dk + t * h->ldk, NULL);
    else if (t > 0)
        RS(bw_key_out)(b, key, dx, g->dk + (t - 1) * h->ldk, NULL);
    else
        RS(bw_key_out)(b, key, dx, NULL, g->dprev_key);
    memcpy(dv, dy, sizeof(REAL) * (size_t)m);
    RS(finite_add)(b->ck, dv, m);
    memset(dx, 0, sizeof(REAL) * (size_t)n);
    memset(dy, 0, sizeof(REAL) * (size_t)m);
}

/* Step t backwards, S0 = S_{t-1} and S1 = S_t. */
static void RS(bw_reverse_step)(bw_head *b, int64_t t, const REAL *S0, const REAL *S1)
{
    const RS(falcon_grad_head) *g = b->g;
    const RS(falcon_head) *h = b->h;
    const int64_t m = h->m, n = h->n, mn = b->mn;
    RS(bw_read)(b, t, S1);
    bw_window w;
    RS(bw_prepare)(b, t, &w);
    REAL dalpha = 0, dbeta = 0;
    if (h->alpha) h->uk->gemm_nt(1, 1, mn, b->G, mn, S0, mn, 0, &dalpha, 1);
    if (w.k > 0)
        dbeta = RS(bw_write)(b, t, &w, S0, &dalpha);
    else if (w.alpha != 1)
        h->uk->rank_update(m, n, 0, w.alpha, b->G, n, b->coef, b->W, b->X, b->ldn);
    g->dbeta[t * h->lds] = dbeta;
    b->ck[0] += dbeta - dbeta;
    if (g->dalpha) {
        g->dalpha[t * h->lds] = dalpha;
        b->ck[0] += dalpha - dalpha;
    }
    if (g->dgain && w.k == 0) memset(g->dgain + t * h->ldk, 0, sizeof(REAL) * (size_t)n);
    RS(bw_finish_example)(b, t, w.e);
}

/* The carried examples' dhist_k, dhist_v (0 past the history), dS0 = G,
 * and dprev_key where the call had no use for one. */
static void RS(bw_state_grads)(bw_head *b)
{
    const RS(falcon_grad_head) *g = b->g;
    const RS(falcon_head) *h = b->h;
    const int64_t n = h->n, m = h->m, keep = h->window - 1, carried = b->src.ex.carried;
    for (int64_t l = 0; l < keep; l++) {
        const REAL *dx = b->ringx + (l % b->W) * b->ldn, *dy = b->ringy + (l % b->W) * b->ldm;
        const REAL *key = NULL, *val = NULL;
        if (l < carried) RS(example_get)(&b->src, l, &key, &val);
        if (g->dhist_k && l < carried) RS(bw_key_out)(b, key, dx, NULL, g->dhist_k + l * n);
        else if (g->dhist_k) memset(g->dhist_k + l * n, 0, sizeof(double) * (size_t)n);
        for (int64_t r = 0; g->dhist_v && r < m; r++) {
            g->dhist_v[l * m + r] = l < carried ? (double)dy[r] : 0.0;
            b->finite &= isfinite(g->dhist_v[l * m + r]) != 0;
        }
    }
    /* the previous key reached no example: same alignment, or T = 0 */
    const int used = h->prefix && h->prev_key && h->T > 0;
    if (g->dprev_key && !used) memset(g->dprev_key, 0, sizeof(double) * (size_t)n);
    for (int64_t i = 0; g->dS0 && i < b->mn; i++) {
        g->dS0[i] = (double)b->G[i];
        b->finite &= isfinite(g->dS0[i]) != 0;
    }
}

/* The checkpoints: one forward sweep, keeping the memory before every
 * c-th step. */
static void RS(bw_checkpoints)(bw_head *b)
{
    for (int64_t s = 1; s < b->nseg; s++) {
        REAL *S = b->ckpt + s * b->mn;
        memcpy(S, S - b->mn, sizeof(REAL) * (size_t)b->mn);
        for (int64_t t = (s - 1) * b->c; t < s * b->c; t++) RS(bw_forward_step)(b, t, S, S);
    }
}

/* The reverse sweep, segment by segment from the last: its states computed
 * again from its checkpoint, then its steps backwards. */
static void RS(bw_sweep)(bw_head *b)
{
    const int64_t T = b->h->T, mn = b->mn;
    for (int64_t s = b->nseg - 1; s >= 0; s--) {
        const int64_t t0 = s * b->c, t1 = T - t0 < b->c ? T : t0 + b->c;
        const REAL *start = b->ckpt + s * mn;
        /* state j of the segment (before step t0 + j): start, then seg[j - 1] */
#define BW_STATE(j) ((j) == 0 ? start : b->seg + ((j) - 1) * mn)
        for (int64_t t = t0; t < t1; t++) RS(bw_forward_step)(b, t, BW_STATE(t - t0), b->seg + (t - t0) * mn);
        for (int64_t t = t1 - 1; t >= t0; t--) RS(bw_reverse_step)(b, t, BW_STATE(t - t0), BW_STATE(t - t0 + 1));
#undef BW_STATE
    }
}

falcon_status FW(fw_backward_recurrent)(const RS(falcon_grad_head) *g)
{
    bw_head b;
    const falcon_status s = RS(bw_open)(&b, g);
    if (s) return s;
    RS(bw_checkpoints)(&b);
    RS(bw_sweep)(&b);
    RS(bw_state_grads)(&b);
    const int finite = b.finite && RS(all_zero)(b.ck, b.ldn > b.ldm ? b.ldn : b.ldm);
    RS(bw_close)(&b);
    return finite ? FALCON_OK : FALCON_E_OVERFLOW;
}
