/*
 * One block of the chunk-parallel form (blocked.inc.c, which includes this
 * file where the block runs): the block's context over the driver's work
 * buffers, and the phases RS(blk_block) runs in order: copy, pack, the
 * products, the terms, the system and its solve, the output rows and the
 * end state. Each phase reads and fills the context; docs/math.md section
 * 7.2 has the equations, and blocked.inc.c the block's layout.
 */
/* One block of one head while it runs (RS(blk_block)): the block's
 * matrices carved from the work buffers, its window of examples, the
 * operands its products read and its terms, filled in phase by phase. */
typedef struct blk_ctx {
    const blk_work *w;
    blk_head *c;
    const RS(falcon_head) *h;
    const RS(falcon_uk) *uk;
    const example_src *srcp;
    int64_t c0, Lc, n, m, ldn, ldm, ldg, ldp;
    int64_t g_lo, G; /* the examples the block's windows reach: [g_lo, g_lo + G) */
    /* The keys Xa (rows ldx apart), queries Qa (ldq) and write directions
     * Zg (ldz) as the products read them; Xg: the packed keys, X of [X; Q]. */
    REAL *Xg;
    const REAL *Xa, *Qa, *Zg;
    int64_t ldx, ldq, ldz;
    int drop;
    REAL *Kz, *Qz, *U, *S0q; /* [Kz; Qz] in KQ, [U; S0q] in US */
    int64_t P;               /* terms, ordered by step: term p is (term_j[p], example term_l[p]) */
    int64_t *term_l, *term_j, *first; /* first[j]: step j's first term, first[Lc] = P */
    int affine;                        /* term p is example dl + p at step dj + p */
    int64_t dl, dj;
    double *row, *f0; /* the decay row F[i][.] and its first entries F[i][0] */
    fw_phase_clock clk;
} blk_ctx;

static void RS(blk_ctx_open)(blk_ctx *b, const blk_work *w, blk_head *c, int64_t c0, int64_t Lc)
{
    const RS(falcon_head) *h = c->h;
    const example_src *const srcp = &c->src;
    const int64_t Pmax = Lc * h->window;
    *b = (blk_ctx){.w = w, .c = c, .h = h, .uk = h->uk, .srcp = srcp, .c0 = c0, .Lc = Lc, .n = h->n, .m = h->m,
                   .ldn = w->ldn, .ldm = w->ldm, .ldg = w->ldg, .ldp = w->ldp, .row = w->row,
                   .f0 = w->row + (w->L + 1), .term_l = w->idx, .term_j = w->idx + Pmax, .first = w->idx + 2 * Pmax};
    /* The examples this block's windows reach: [g_lo, g_lo + G). */
    int64_t t_first = c0 > srcp->ex.shift ? c0 : srcp->ex.shift, G = 0, g_lo = 0;
    if (t_first < c0 + Lc) {
        int64_t e_first = falcon_example_of_step(&srcp->ex, t_first);
        g_lo = falcon_window_first(&srcp->ex, e_first);
        G = falcon_example_of_step(&srcp->ex, c0 + Lc - 1) - g_lo + 1;
    }
    b->g_lo = g_lo;
    b->G = G;
}

/* The packed keys: example g_lo + g featurized into row g of Xg, its
 * value's row into yrow[g], xs = xt = 1, and with gains its write
 * direction into Zbuf (xt its scale). */
static void RS(blk_pack_keys)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const example_src *const srcp = b->srcp;
    const int64_t n = b->n, ldn = b->ldn, G = b->G, g_lo = b->g_lo;
    REAL *const Xg = b->Xg, *const Zbuf = b->w->Zbuf, *const xs = b->w->xs, *const xt = b->w->xt;
    const REAL **const yrow = b->w->yrow;
    for (int64_t g = 0; g < G; g++) {
        const REAL *key;
        if (FW_ROW_AHEAD && g + FW_ROW_AHEAD < G) {
            const REAL *ka, *va;
            RS(example_get)(srcp, g_lo + g + FW_ROW_AHEAD, &ka, &va);
            FW_PREFETCH_ROW(ka, sizeof(REAL) * (size_t)n, 0, 3);
        }
        RS(example_get)(srcp, g_lo + g, &key, &yrow[g]);
        RS(falcon_featurize)(h->phi, key, Xg + g * ldn, n);
        xs[g] = xt[g] = 1;
        if (h->gain) { /* W = 1: every example here was revealed in this block */
            int64_t t = falcon_step_of_example(&srcp->ex, g_lo + g);
            xt[g] = RS(write_direction)(h->gain + t * h->ldk, Xg + g * ldn, Zbuf + g * ldn, n);
        }
    }
}

/* Phase COPY: the keys X (the examples') and queries Q as the products
 * read them: the caller's rows where phi is the identity and no operand
 * is rounded (see "direct operands" above), else packed in [X; Q]. */
static void RS(blk_copy)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const blk_work *w = b->w;
    const example_src *const srcp = b->srcp;
    const int64_t n = b->n, ldn = b->ldn, c0 = b->c0, Lc = b->Lc, G = b->G, g_lo = b->g_lo;
    REAL *const XQ = w->XQ, *const xs = w->xs, *const xt = w->xt;
    RS(kq_limits)(srcp, c0, Lc, g_lo, G, w->lim);
    REAL *Xg = XQ, *Qf = XQ + G * ldn;
    const int direct = h->phi == FALCON_MATH_PHI_IDENTITY && !h->operand_drop;
    const REAL *Xa = Xg, *Qa = direct ? h->q + c0 * h->ldk : Qf;
    int64_t ldx = ldn;
    const int64_t ldq = direct ? h->ldk : ldn;
    if (direct && !h->gain && G > 0 && RS(keys_direct)(srcp, g_lo, G, w->yrow, &Xa)) {
        ldx = h->ldk;
        for (int64_t g = 0; g < G; g++) xs[g] = xt[g] = 1;
    }
    b->Xg = Xg, b->Xa = Xa, b->Qa = Qa, b->ldx = ldx, b->ldq = ldq;
    b->Zg = h->gain ? w->Zbuf : Xa;
    b->ldz = h->gain ? ldn : ldx;
    if (Xa == Xg) RS(blk_pack_keys)(b);
    for (int64_t j = 0; !direct && j < Lc; j++) {
        if (FW_ROW_AHEAD && j + FW_ROW_AHEAD < Lc)
            FW_PREFETCH_ROW(h->q + (c0 + j + FW_ROW_AHEAD) * h->ldk, sizeof(REAL) * (size_t)n, 0, 3);
        RS(falcon_featurize)(h->phi, h->q + (c0 + j) * h->ldk, Qf + j * ldn, n);
    }
}

/* [Kz; Qz] = [X; Q] Z^T and [U; S0q] = [X; Q] S_0^T (the X rows only for
 * the regression variants), Sread the memory's operand; xz = diag(Kz). */
static void RS(blk_kq_us)(blk_ctx *b, const REAL *Sread)
{
    const RS(falcon_uk) *uk = b->uk;
    const blk_work *w = b->w;
    const int64_t n = b->n, m = b->m, ldm = b->ldm, ldg = b->ldg, Lc = b->Lc, G = b->G;
    const int64_t ldx = b->ldx, ldq = b->ldq, ldz = b->ldz;
    const REAL *const Xa = b->Xa, *const Qa = b->Qa, *const Zg = b->Zg;
    REAL *const Zt = w->Zt, *const KQ = w->KQ, *const US = w->US, *const xz = w->xz;
    REAL *const Kz = b->Kz, *const Qz = b->Qz, *const S0q = b->S0q;
    if (b->h->regression) {
        /* packed: one call over [X; Q] each */
        const int64_t rows = Qa == Xa + G * ldx && ldq == ldx ? G + Lc : G;
        RS(kq_product)(uk, rows, G, n, Xa, ldx, Zt, ldg, KQ, w->lim);
        uk->gemm_nn(rows, m, n, Xa, ldx, Sread, ldm, 0, US, ldm);
        if (rows == G) {
            RS(kq_product)(uk, Lc, G, n, Qa, ldq, Zt, ldg, Qz, w->lim + G);
            uk->gemm_nn(Lc, m, n, Qa, ldq, Sread, ldm, 0, S0q, ldm);
        }
        for (int64_t g = 0; g < G; g++) xz[g] = Kz[g * ldg + g];
    } else {
        RS(kq_product)(uk, Lc, G, n, Qa, ldq, Zt, ldg, Qz, w->lim + G);
        uk->gemm_nn(Lc, m, n, Qa, ldq, Sread, ldm, 0, S0q, ldm);
        for (int64_t g = 0; g < G; g++)
            uk->gemm_nt(1, 1, n, Xa + g * ldx, ldx, Zg + g * ldz, ldz, 0, xz + g, 1);
    }
}

/* An example whose x.z is out of range stored scaled, x = xs x'
 * (falcon_math.h); 1 when one was, and the products must be taken again.
 * (Falcon-2/2A: z' = g * x' / xt, xt from the gains' scale, and times
 * z's own scale if x'.z' is out of range still.) */
static int RS(blk_rescale_keys)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const RS(falcon_uk) *uk = b->uk;
    const example_src *const srcp = b->srcp;
    const int64_t n = b->n, ldn = b->ldn, G = b->G, g_lo = b->g_lo;
    REAL *const Xg = b->Xg, *const Zbuf = b->w->Zbuf, *const xz = b->w->xz, *const xs = b->w->xs, *const xt = b->w->xt;
    int rescaled = 0;
    for (int64_t g = 0; g < G; g++) {
        if (RS(falcon_xz_in_range)(xz[g])) continue;
        if (b->Xa != Xg) { /* the keys are scaled in place: packed from here on */
            for (int64_t r = 0; r < G; r++) memcpy(Xg + r * ldn, b->Xa + r * b->ldx, sizeof(REAL) * (size_t)n);
            b->Xa = b->Zg = Xg, b->ldx = b->ldz = ldn;
        }
        REAL *xg = Xg + g * ldn, *zg = Zbuf + g * ldn, d;
        if ((xs[g] = RS(falcon_key_scale)(xg, n)) != 1) rescaled = 1;
        if (!h->gain) continue;
        const int64_t t = falcon_step_of_example(&srcp->ex, g_lo + g);
        xt[g] = RS(write_direction)(h->gain + t * h->ldk, xg, zg, n);
        uk->gemm_nt(1, 1, n, xg, ldn, zg, ldn, 0, &d, 1);
        REAL tau2;
        if (!RS(falcon_xz_in_range)(d) && (tau2 = RS(falcon_key_scale)(zg, n)) != 1) {
            xt[g] *= tau2;
            rescaled = 1;
        }
    }
    return rescaled;
}

/* Phases PACK and PRODUCTS: Zt = Z^T and the products (blk_kq_us); an
 * example whose x.z is out of range is then stored scaled and the
 * products are taken again: keys of ordinary size cost one comparison
 * each. */
static void RS(blk_products)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const blk_work *w = b->w;
    const int64_t n = b->n, m = b->m, ldn = b->ldn, ldm = b->ldm, ldg = b->ldg, G = b->G;
    REAL *const St = b->c->St, *const Zt = w->Zt;
    b->Kz = w->KQ, b->Qz = w->KQ + G * ldg, b->U = w->US, b->S0q = w->US + G * ldm;
    /* tf32/bf16: every product's operands rounded (keys, queries and
     * directions here, the memory's copy Sr, then R, Wm and the update's
     * values below); the trsm and the rest stay in fp32. */
    const int drop = h->operand_drop;
    b->drop = drop;
    const REAL *Sread = St;
    if (drop) {
        for (int64_t r = 0; r < n; r++) memcpy(w->Sr + r * ldm, St + r * ldm, sizeof(REAL) * (size_t)m);
        RS(round_operand)(w->Sr, n, m, ldm, drop);
        Sread = w->Sr;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (drop) {
            RS(round_operand)(w->XQ, G + b->Lc, n, ldn, drop);
            if (h->gain) RS(round_operand)(w->Zbuf, G, n, ldn, drop);
        }
        fw_phase_end(&b->clk, FW_PH_PRODUCTS); /* the rounding above, and a second pass's rescaling */
        RS(transpose)(Zt, ldg, b->Zg, b->ldz, G, n);
        fw_phase_end(&b->clk, FW_PH_PACK);
        RS(blk_kq_us)(b, Sread);
        const int rescaled = pass == 0 && RS(blk_rescale_keys)(b);
        if (!rescaled) break;
    }
}

/* Phase TERMS: terms, ordered by step; eta per step from the shared
 * normaliser. The keys are stored scaled, x_l = xs_l x'_l (falcon_math.h),
 * and so are the pseudo-values, r'_p = xs_l r_p, so that r_p z_l^T = r'_p
 * z'_l^T: eta[j] is c = eta sigma, tc[p] = c rho_l multiplies the
 * residual (whose S_0 x_l is xs_l U_l), ts[p] = c rho_l xs_l =
 * eta xs_l^2 the system row. With every scale 1 this is the
 * unscaled arithmetic, bit for bit. */
static void RS(blk_terms)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const example_src *const srcp = b->srcp;
    const int64_t c0 = b->c0, Lc = b->Lc, g_lo = b->g_lo;
    REAL *const xs = b->w->xs, *const xt = b->w->xt, *const xz = b->w->xz;
    REAL *const eta = b->w->eta, *const tc = b->w->tc, *const ts = b->w->ts;
    int64_t *const term_l = b->term_l, *const term_j = b->term_j, *const first = b->first;
    int64_t P = 0;
    for (int64_t j = 0; j < Lc; j++) {
        first[j] = P;
        int64_t e = falcon_example_of_step(&srcp->ex, c0 + j);
        if (e < 0) continue;
        const int64_t lf = falcon_window_first(&srcp->ex, e);
        REAL sum = 0, sigma = xs[lf - g_lo];
        for (int64_t l = lf + 1; l <= e; l++)
            if (xs[l - g_lo] > sigma) sigma = xs[l - g_lo];
        for (int64_t l = lf; l <= e; l++) {
            const REAL rho = xs[l - g_lo] / sigma;
            term_l[P] = l - g_lo;
            term_j[P] = j;
            ts[P] = rho; /* for now */
            P++;
            sum += rho * rho * xz[l - g_lo];
        }
        eta[j] = RS(falcon_eta_scaled)(h->beta[(c0 + j) * h->lds], h->eps, sigma, xt[e - g_lo], sum);
        for (int64_t p = first[j]; p < P; p++) {
            const REAL rho = ts[p];
            tc[p] = eta[j] * rho;
            ts[p] = eta[j] * (rho * xs[term_l[p]]);
        }
    }
    first[Lc] = P;
    /* A window of one gives one term per step with an example, in order:
     * term p is example dl + p at step dj + p, and the gathers below by
     * term_l and term_j are contiguous loads (which the compiler
     * vectorizes); the same values either way. */
    int affine = P > 0;
    const int64_t dl = P > 0 ? term_l[0] : 0, dj = P > 0 ? term_j[0] : 0;
    for (int64_t p = 1; affine && p < P; p++) affine = term_l[p] == dl + p && term_j[p] == dj + p;
    b->P = P, b->affine = affine, b->dl = dl, b->dj = dj;
}

/* Row i of F from row i - 1 (row[i] = 1), f0[i] = F[i][0], and
 * fq[p] = F[i][j_p + 1], the decay from term p's step to step i. */
static void RS(blk_decay_row)(blk_ctx *b, int64_t i)
{
    const RS(falcon_head) *h = b->h;
    const int64_t c0 = b->c0, j = i - 1, dj = b->dj;
    const int64_t *const first = b->first, *const term_j = b->term_j;
    double *const row = b->row;
    REAL *const fq = b->w->fq;
    const int affine = b->affine;
    const double alpha = h->alpha ? (double)h->alpha[(c0 + j) * h->lds] : 1.0;
    if (affine && first[i] > 0 && first[i] == i - dj) {
        /* Term p at step dj + p, so fq[p] = row[dj + 1 + p], the last
         * one row[i] = 1. The row advanced and converted in one loop:
         * read back, the row's new entries came one double off the
         * vector stores that wrote them, no store forwarding
         * (docs/performance.md, "Chunk form: the fused decay row"). */
        const double keep = falcon_decay_keep(alpha);
        for (int64_t q = 0; q <= dj; q++) row[q] = falcon_decay_entry(row[q], keep, alpha);
        double *restrict rq = row + dj + 1;
        for (int64_t p = 0; p + 1 < first[i]; p++) {
            const double v = falcon_decay_entry(rq[p], keep, alpha);
            rq[p] = v;
            fq[p] = (REAL)v;
        }
        row[i] = 1.0;
        fq[first[i] - 1] = 1;
    } else { /* term p's step is term_j[p] (affine, with no term yet: nothing to convert) */
        falcon_decay_row_advance(row, i, alpha);
        for (int64_t p = 0; p < first[i]; p++) fq[p] = (REAL)row[term_j[p] + 1];
    }
    b->f0[i] = row[0];
}

/* The terms of step j, once row j + 1 of F is in place: their residuals
 * (the system's right-hand sides, or the pseudo-values themselves for the
 * inner-product variants) into R and, for the regression variants, their
 * strictly lower rows of A. */
static void RS(blk_system_rows)(blk_ctx *b, int64_t j)
{
    const RS(falcon_head) *h = b->h;
    const blk_work *w = b->w;
    const int64_t m = b->m, ldm = b->ldm, ldg = b->ldg, ldp = b->ldp, G = b->G, dl = b->dl, i = j + 1;
    const int64_t *const first = b->first, *const term_l = b->term_l;
    const double *const row = b->row;
    const REAL *const tc = w->tc, *const ts = w->ts, *const fq = w->fq, *const Kz = b->Kz;
    const REAL *const U = b->U;
    REAL *const R = w->R, *const A = w->A, *const kzg = w->kzg;
    const REAL **const yrow = w->yrow;
    const int affine = b->affine;
    for (int64_t p = first[j]; p < first[i]; p++) {
        const int64_t l = term_l[p];
        if (FW_ROW_AHEAD && l + FW_ROW_AHEAD < G) FW_PREFETCH_ROW(yrow[l + FW_ROW_AHEAD], sizeof(REAL) * (size_t)m, 0, 3);
        const REAL *restrict y = yrow[l];
        REAL *restrict r = R + p * ldm;
        const REAL ej = tc[p];
        if (!h->regression) {
            RS(residual_row)(m, FW_RES_VALUE, ej, 0, 1, y, NULL, r);
            continue;
        }
        const REAL sl = w->xs[l];
        const REAL *restrict u = U + l * ldm;
        if (row[0] >= FW_SAFE_FACTOR) { /* else: a tiny first alpha, see above */
            RS(residual_row)(m, fw_res_kind(1, sl), ej, (REAL)row[0], sl, y, u, r);
        } else {
            const double d0 = row[0];
            for (int64_t c = 0; c < m; c++) r[c] = ej * (y[c] - RS(decay_mul)(d0, sl * u[c]));
        }
        /* strictly lower row p of A; terms of step j do not couple */
        REAL *restrict a = A + p * ldp;
        const REAL *restrict kz = Kz + l * ldg;
        const REAL ejs = ts[p];
        /* kz in term order: contiguous, so that both loops vectorize */
        const REAL *restrict kzl = kz + dl;
        if (!affine) {
            for (int64_t q = 0; q < first[j]; q++) kzg[q] = kz[term_l[q]];
            kzl = kzg;
        }
        for (int64_t q = 0; q < first[j]; q++) a[q] = ejs * fq[q] * kzl[q];
        for (int64_t q = first[j]; q < p; q++) a[q] = 0;
    }
}

/* Row j of W, the output's weights on the terms: fq (.) Qz, in term order. */
static void RS(blk_readout_row)(blk_ctx *b, int64_t j)
{
    const int64_t i = j + 1, dl = b->dl;
    const int64_t *const first = b->first, *const term_l = b->term_l;
    const REAL *const fq = b->w->fq;
    REAL *const kzg = b->w->kzg;
    REAL *restrict w = b->w->Wm + j * b->ldp;
    const REAL *restrict qz = b->Qz + j * b->ldg;
    const REAL *restrict qzl = qz + dl;
    if (!b->affine) {
        for (int64_t p = 0; p < first[i]; p++) kzg[p] = qz[term_l[p]];
        qzl = kzg;
    }
    for (int64_t p = 0; p < first[i]; p++) w[p] = fq[p] * qzl[p];
    for (int64_t p = first[i]; p < b->P; p++) w[p] = 0;
}

/* Phase SYSTEM: row i of F gives the system rows of step i - 1 and
 * output row i - 1. */
static void RS(blk_system)(blk_ctx *b)
{
    b->row[0] = 1.0;
    b->f0[0] = 1.0;
    for (int64_t i = 1; i <= b->Lc; i++) {
        RS(blk_decay_row)(b, i);
        RS(blk_system_rows)(b, i - 1);
        RS(blk_readout_row)(b, i - 1);
    }
}

/* Phase SOLVE: (I + A) R = RHS in place (regression), then the operands of
 * the output product rounded. */
static void RS(blk_solve)(blk_ctx *b)
{
    const blk_work *w = b->w;
    const int64_t P = b->P, m = b->m, ldm = b->ldm, ldp = b->ldp;
    REAL *const A = w->A, *const R = w->R;
    const int drop = b->drop;
    if (b->h->regression) b->uk->trsm_unit_lower(P, m, A, ldp, R, ldm);
    if (drop) RS(round_operand)(R, P, m, ldm, drop), RS(round_operand)(w->Wm, b->Lc, P, ldp, drop);
}

/* Phase OUT_ROWS: the caller's output rows, O + F[j + 1][0] S0q. */
static void RS(blk_out_rows)(blk_ctx *b)
{
    const RS(falcon_head) *h = b->h;
    const int64_t c0 = b->c0, Lc = b->Lc, m = b->m, ldm = b->ldm;
    const REAL *const O = b->w->O, *const S0q = b->S0q;
    const double *const f0 = b->f0;
    for (int64_t j = 0; j < Lc; j++) {
        if (FW_ROW_AHEAD && j + FW_ROW_AHEAD < Lc)
            FW_PREFETCH_ROW(h->out + (c0 + j + FW_ROW_AHEAD) * h->ldo, sizeof(REAL) * (size_t)m, 1, 3);
        REAL *restrict o = h->out + (c0 + j) * h->ldo;
        const REAL *restrict oj = O + j * ldm, *restrict sj = S0q + j * ldm;
        const double d = f0[j + 1];
        /* Each output checked into ck as it is written (finite_add's
         * v - v, from the register), not by a second pass that reads the
         * row back: the same bits, one pass fewer (docs/performance.md,
         * "Chunk form: output rows checked as written"). */
        REAL *restrict ck = b->c->ck;
        if (d >= FW_SAFE_FACTOR) {
            const REAL dr = (REAL)d;
            for (int64_t c = 0; c < m; c++) {
                const REAL v = oj[c] + dr * sj[c];
                o[c] = v;
                ck[c] += v - v;
            }
        } else {
            for (int64_t c = 0; c < m; c++) {
                const REAL v = oj[c] + RS(decay_mul)(d, sj[c]);
                o[c] = v;
                ck[c] += v - v;
            }
        }
    }
}

/* Phase END_STATE: row is now F[Lc][.]; pseudo-values gathered per
 * example (one term per example: scaled in place, the rank update reads
 * the examples dl .. dl + P - 1), then St = F[Lc][0] St + Z^T Rg. */
static void RS(blk_end_state)(blk_ctx *b)
{
    const blk_work *w = b->w;
    const int64_t n = b->n, m = b->m, ldm = b->ldm, ldg = b->ldg, G = b->G, P = b->P, Lc = b->Lc;
    const int64_t dl = b->dl, dj = b->dj, *const term_l = b->term_l, *const term_j = b->term_j;
    const double *const row = b->row, *const f0 = b->f0;
    REAL *const St = b->c->St, *const Zt = w->Zt, *const R = w->R, *const Rg = w->Rg;
    const int drop = b->drop;
    if (b->affine) {
        for (int64_t p = 0; p < P; p++) {
            const REAL d = (REAL)row[dj + p + 1];
            REAL *restrict rp = R + p * ldm;
            for (int64_t c = 0; c < m; c++) rp[c] = 0 + d * rp[c];
        }
        if (drop) RS(round_operand)(R, P, m, ldm, drop);
        b->uk->rank_update(n, m, P, RS(memory_decay)(St, ldm, n, m, f0[Lc]), St, ldm, Zt + dl, ldg, R, ldm);
    } else {
        for (int64_t g = 0; g < G; g++)
            for (int64_t c = 0; c < m; c++) Rg[g * ldm + c] = 0;
        for (int64_t p = 0; p < P; p++) {
            const REAL d = (REAL)row[term_j[p] + 1];
            REAL *restrict rg = Rg + term_l[p] * ldm;
            const REAL *restrict rp = R + p * ldm;
            for (int64_t c = 0; c < m; c++) rg[c] += d * rp[c];
        }
        if (drop) RS(round_operand)(Rg, G, m, ldm, drop);
        b->uk->rank_update(n, m, G, RS(memory_decay)(St, ldm, n, m, f0[Lc]), St, ldm, Zt, ldg, Rg, ldm);
    }
}

/* Steps [c0, c0 + Lc) of one head: the block's system, outputs and end
 * state (the equations at the top of this file), phase by phase, with a
 * slice of the next (head, block)'s prefetch between phases. */
static void RS(blk_block)(const blk_work *w, blk_head *c, int64_t c0, int64_t Lc, blk_prefetch *pf)
{
    blk_ctx b;
    RS(blk_ctx_open)(&b, w, c, c0, Lc);
    fw_phase_clock *const k = &b.clk;
    fw_phase_start(k, b.uk->name, sizeof(REAL) == 4 ? "fp32" : "fp64");
    RS(blk_copy)(&b);
    fw_phase_end(k, FW_PH_COPY);
    /* The values the system's rows will read, prefetched again now: the
     * next-block prefetch had brought them a block ahead, but not all of
     * them stayed in L2 (docs/performance.md, "Chunk form: values
     * prefetched again"). */
    for (int64_t g = 0; g < b.G; g++) FW_PREFETCH_ROW(w->yrow[g], sizeof(REAL) * (size_t)b.m, 0, 2);
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    RS(blk_products)(&b);
    fw_phase_end(k, FW_PH_PRODUCTS);
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    RS(blk_terms)(&b);
    fw_phase_end(k, FW_PH_TERMS);
    RS(blk_system)(&b);
    fw_phase_end(k, FW_PH_SYSTEM);
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    RS(blk_solve)(&b);
    fw_phase_end(k, FW_PH_SOLVE);
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    b.uk->gemm_nn(Lc, b.m, b.P, w->Wm, b.ldp, w->R, b.ldm, 0, w->O, b.ldm);
    fw_phase_end(k, FW_PH_OUT_PRODUCT);
    RS(blk_out_rows)(&b);
    fw_phase_end(k, FW_PH_OUT_ROWS);
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    RS(blk_end_state)(&b);
    fw_phase_end(k, FW_PH_END_STATE);
    pf->slice = pf->end - pf->u; /* what is left */
    RS(blk_prefetch_some)(pf);
    fw_phase_end(k, FW_PH_PREFETCH);
    fw_phase_block_end(k);
}
