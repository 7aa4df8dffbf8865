/*
 * The chunk-parallel form (docs/math.md section 7.2), one head, one precision, blocks of L
 * steps. Inside a block every pair (step j, example l in E_j) is a term p;
 * the pseudo-values R solve the unit lower-triangular system
 *     (I + A) R = RHS,  A[p][p'] = eta_j F[j][j'] (z_l' . x_l) for j' < j,
 *                       RHS_p   = eta_j (y_l - F[j][0] S_0 x_l)   (regression)
 *     R_p = eta_j y_l                                             (inner product)
 * then O = (F (.) Q Z^T) R + F[.][0] (.) Q S_0^T and
 *      S_L = F[L][0] S_0 + sum_p F[L][j] r_p z_l^T.
 * F[i][j] = alpha_{j+1} ... alpha_i comes one row at a time from
 * falcon_decay_row_advance: no product ever spans more than one block, and no
 * factor is a quotient of two cumulative products (docs/math.md section 8).
 * Products between examples (Q Z^T, X Z^T, X S_0^T) are formed once per
 * example pair and indexed by term, since a window repeats each example in
 * up to W terms. The block's keys and queries sit in one matrix [X; Q], so
 * [Kz; Qz] = [X; Q] Z^T and [U; S0q] = [X; Q] S_0^T are one micro-kernel
 * call each, and x_l . z_l (the normaliser) is the diagonal of Kz. Both
 * are axpy-form GEMMs (gemm_nn): the memory is kept transposed, St = S^T
 * (examples.inc.c), and each block packs Zt = Z^T once; the end-of-block
 * write is then St = F[L][0] St + Z^T Rg, a rank update of St whose
 * coefficients are Zt's rows (rank_update takes E [m][k]), so that the
 * keys are not read again after the products: they may stay where the
 * caller keeps them ("direct operands" below).
 *
 * The masked-parallel form is this function with a single block spanning
 * the whole call (capped, see falcon_parallel_block in src/run.c): the same
 * explicit masked matrices, O(T^2) work.
 */
#include "phase-clock.h"
#include "transpose.inc.c"

/* ---- decay factors in a block's products (docs/math.md section 8) ----
 * A block ends before a step whose decay would take a factor between two
 * of its steps, F[i][j + 1] (the alphas of the steps after the first),
 * below FW_SAFE_FACTOR: 2^-100 in fp32, 2^-996 in fp64. Every coupling of
 * the block's system, every entry of W and every factor of its write is
 * then a normal number, and so are its products with values above 2^-26:
 * no subnormal operand for the micro-kernels (an x86 core takes a
 * microcode assist for each: docs/performance.md, "Chunk form: subnormal
 * factors"), and no coupling rounded to a few bits, where a tiny factor times a large
 * pseudo-value is a large part of a small memory. Blocks stay chunk-sized
 * unless the decays are near-resets. The first step's alpha scales only
 * the memory the block starts from, F[i][0], which may be tiny: it is
 * applied in double (RS(decay_mul), RS(memory_decay)). */
#define FW_SAFE_FACTOR ((double)REAL_MIN * 0x1p26)

static int64_t RS(block_length)(const RS(falcon_head) *h, int64_t c0, int64_t L)
{
    const int64_t Lc = h->T - c0 < L ? h->T - c0 : L;
    if (!h->alpha) return Lc;
    double g = 1;
    for (int64_t i = 1; i < Lc; i++) {
        g *= (double)h->alpha[(c0 + i) * h->lds];
        if (g < FW_SAFE_FACTOR) return i;
    }
    return Lc;
}

/* A factor times a value, taken in double and rounded once, so that in
 * fp32 a factor below the smallest normal float still scales a large value
 * exactly. */
static inline REAL RS(decay_mul)(double f, REAL x) { return (REAL)(f * (double)x); }

/* The memory's decay over a block, f = F[L][0], as the rank update's
 * scale. A factor below the smallest normal number of the precision (in
 * fp32 the double row can hold one) is applied here instead, in the
 * precision and exactly: g = f 2^128 is normal, t = g S is rounded once,
 * and t 2^-64 2^-64 is exact; an entry whose result would be below the
 * smallest normal number is zero (a memory that small carries an absolute
 * error of that size, docs/math.md section 4), decided on t, and only
 * magnitudes of at least 2^2 are scaled: no subnormal number is formed.
 * The rank update then adds to the memory as it is. (fp64: the row holds
 * no factor below the smallest normal double, falcon_decay_row_advance.) */
#ifdef FALCON_REAL_F32
typedef uint32_t RS(bits);
#else
typedef uint64_t RS(bits);
#endif
static REAL RS(memory_decay)(REAL *St, int64_t ldm, int64_t n, int64_t m, double f)
{
    if (f == 0 || f >= REAL_MIN) return (REAL)f;
    const double gd = f * 0x1p128;
    const REAL g = gd >= REAL_MIN ? (REAL)gd : 0, low = (REAL)0x1p-64, floor = (REAL)(REAL_MIN * 0x1p128);
    RS(bits) floor_bits;
    memcpy(&floor_bits, &floor, sizeof floor_bits);
    for (int64_t r = 0; r < n; r++) {
        REAL *s = St + r * ldm;
        for (int64_t c = 0; c < m; c++) {
            /* On the bits: magnitude and sign apart, the magnitude scaled
             * from at least `floor` only, then masked to zero; a select
             * would become a branch per element on AVX2, or arithmetic on
             * every lane, subnormal ones included. */
            const REAL t = g * s[c];
            RS(bits) tb, vb;
            memcpy(&tb, &t, sizeof tb);
            const RS(bits) sign = tb & ~(~(RS(bits))0 >> 1), mag = tb ^ sign; /* bits order as values */
            const RS(bits) big = mag > floor_bits ? mag : floor_bits;
            REAL x;
            memcpy(&x, &big, sizeof x);
            x = x * low * low;
            memcpy(&vb, &x, sizeof vb);
            vb = (vb | sign) & -(RS(bits))(mag >= floor_bits);
            memcpy(&s[c], &vb, sizeof vb);
        }
    }
    return 1;
}

/* The work buffers of one block, shared by the heads of a group (one
 * block of one head at a time); sized for blocks of L steps. */
typedef struct blk_work {
    int64_t L, ldn, ldm, ldg, ldp;
    void *mem;
    size_t mem_bytes; /* falcon_work_get's size of mem */
    REAL *XQ, *Zbuf, *Zt, *xz, *KQ, *US, *A, *R, *Wm, *Rg, *O, *eta, *fq, *kzg, *xs, *xt, *tc, *ts;
    REAL *Sr; /* tf32/bf16: the memory's operand copy */
    REAL *S0; /* regression: the memory a block starts from, kept until its end state is checked (blk_run) */
    double *row;
    int64_t *idx;
    int64_t *lim; /* [G + L]: the last column of [Kz; Qz] each row needs */
    const REAL **yrow;
} blk_work;

/* One head of a group between blocks: its examples and its memory,
 * kept transposed (St = S^T [n][m], examples.inc.c). */
typedef struct blk_head {
    const RS(falcon_head) *h;
    example_src src;
    REAL *St;
    size_t St_bytes; /* falcon_work_get's size of St */
    REAL *ck; /* [m]: the outputs and memory added (finite_add): 0 while finite */
    double amax; /* regression: the memory's largest magnitude (blk_run) */
} blk_head;

static int RS(blk_work_open)(blk_work *w, const RS(falcon_head) *h, int64_t L)
{
    const int64_t n = h->n, m = h->m, W = h->window;
    const int64_t Gmax = L + W - 1, Pmax = L * W;
    memset(w, 0, sizeof *w);
    w->L = L;
    w->ldn = RS(padded)(n);
    w->ldm = RS(padded)(m);
    w->ldg = RS(padded)(Gmax);
    w->ldp = RS(padded)(Pmax);
    const int64_t ldn = w->ldn, ldm = w->ldm, ldg = w->ldg, ldp = w->ldp;
    carver cv = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        w->XQ = RS(carve)(&cv, sizeof(REAL) * (size_t)((Gmax + L) * ldn));
        w->Zbuf = RS(carve)(&cv, h->gain ? sizeof(REAL) * (size_t)(Gmax * ldn) : 0);
        w->Zt = RS(carve)(&cv, sizeof(REAL) * (size_t)(n * ldg));
        w->xz = RS(carve)(&cv, sizeof(REAL) * (size_t)Gmax);
        w->KQ = RS(carve)(&cv, sizeof(REAL) * (size_t)((Gmax + L) * ldg));
        w->US = RS(carve)(&cv, sizeof(REAL) * (size_t)((Gmax + L) * ldm));
        w->A = RS(carve)(&cv, h->regression ? sizeof(REAL) * (size_t)(Pmax * ldp) : 0);
        w->R = RS(carve)(&cv, sizeof(REAL) * (size_t)(Pmax * ldm));
        w->Wm = RS(carve)(&cv, sizeof(REAL) * (size_t)(L * ldp));
        w->Rg = RS(carve)(&cv, sizeof(REAL) * (size_t)(Gmax * ldm));
        w->O = RS(carve)(&cv, sizeof(REAL) * (size_t)(L * ldm));
        w->eta = RS(carve)(&cv, sizeof(REAL) * (size_t)L);
        w->fq = RS(carve)(&cv, sizeof(REAL) * (size_t)Pmax);
        w->kzg = RS(carve)(&cv, sizeof(REAL) * (size_t)Pmax);
        w->xs = RS(carve)(&cv, sizeof(REAL) * (size_t)Gmax);
        w->xt = RS(carve)(&cv, sizeof(REAL) * (size_t)Gmax);
        w->tc = RS(carve)(&cv, sizeof(REAL) * (size_t)Pmax);
        w->ts = RS(carve)(&cv, sizeof(REAL) * (size_t)Pmax);
        w->row = RS(carve)(&cv, sizeof(double) * (size_t)(2 * (L + 1)));
        w->idx = RS(carve)(&cv, sizeof(int64_t) * (size_t)(2 * Pmax + L + 1));
        w->lim = RS(carve)(&cv, sizeof(int64_t) * (size_t)(Gmax + L));
        w->yrow = RS(carve)(&cv, sizeof(const REAL *) * (size_t)Gmax);
        w->Sr = RS(carve)(&cv, h->operand_drop ? sizeof(REAL) * (size_t)(n * ldm) : 0);
        w->S0 = RS(carve)(&cv, h->regression ? sizeof(REAL) * (size_t)((n + 1) * ldm) : 0);
        if (pass == 0) {
            cv.base = falcon_work_get(cv.used, &w->mem_bytes);
            cv.used = 0;
            if (!cv.base) return 1;
            w->mem = cv.base;
        }
    }
    return 0;
}

/* The largest magnitude in the memory St (n rows of m), taken on the bits
 * (magnitudes order as unsigned integers), so that the reduction
 * vectorizes: a float max reduction does not without -ffast-math
 * (docs/performance.md, "Chunk form: the memory's largest magnitude"). A
 * NaN counts as larger than any number. */
static double RS(memory_amax)(const REAL *St, int64_t ldm, int64_t n, int64_t m)
{
    RS(bits) a = 0;
    for (int64_t r = 0; r < n; r++) {
        const REAL *restrict s = St + r * ldm;
        for (int64_t c = 0; c < m; c++) {
            RS(bits) b;
            memcpy(&b, &s[c], sizeof b);
            b &= ~(RS(bits))0 >> 1;
            a = b > a ? b : a;
        }
    }
    REAL x;
    memcpy(&x, &a, sizeof x);
    return (double)x;
}

static int RS(blk_open)(blk_head *c, const RS(falcon_head) *h, int64_t ldm)
{
    memset(c, 0, sizeof *c);
    c->h = h;
    if (RS(examples_open)(&c->src, h)) return 1;
    c->St = falcon_work_get(sizeof(REAL) * (size_t)((h->n + 1) * ldm), &c->St_bytes);
    if (!c->St) {
        RS(examples_close)(&c->src);
        return 1;
    }
    c->ck = c->St + h->n * ldm;
    memset(c->ck, 0, sizeof(REAL) * (size_t)ldm);
    RS(load_memory)(c->St, ldm, h->S, h->m, h->n, 1);
    c->amax = h->regression ? RS(memory_amax)(c->St, ldm, h->n, h->m) : 0;
    return 0;
}

/* 0 when an output row or the memory it stored was not finite. */
static int RS(blk_close)(blk_head *c, int64_t ldm, int store)
{
    if (!c->St) return 1;
    if (store) {
        RS(check_memory)(c->ck, c->St, ldm, c->h->m, c->h->n);
        RS(store_memory)(c->h->S, c->St, ldm, c->h->m, c->h->n, 1);
        *c->h->scale = 1; /* the memory as it is: no lazy factor */
    }
    const int finite = RS(all_zero)(c->ck, c->h->m);
    falcon_work_put(c->St, c->St_bytes);
    c->St = NULL;
    RS(examples_close)(&c->src);
    return finite;
}

/* tf32/bf16 (falcon_math.h): a matrix product's operand rounded to the
 * format, rows x cols at stride ld, in place, as a tensor core reads it;
 * the micro-kernels then multiply exactly and accumulate in fp32. Only fp32
 * runs have operand formats. */
static void RS(round_operand)(REAL *x, int64_t rows, int64_t cols, int64_t ld, int drop)
{
#ifdef FALCON_REAL_F32
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) x[r * ld + c] = falcon_round_operand(x[r * ld + c], drop);
#else
    (void)x, (void)rows, (void)cols, (void)ld, (void)drop;
#endif
}

/* The rows of the (head, block) that comes next, prefetched a slice at a
 * time between the phases of the current block: issued all at once, the
 * prefetches of a block's rows (a few thousand cache lines) fill the
 * core's miss buffers and stall it; spread out, they arrive while the
 * micro-kernels compute. Not from inside the products' register tile: that
 * slowed the products more than it saved (docs/performance.md, "Chunk
 * form: next-block prefetch"). */
typedef struct blk_prefetch {
    const RS(falcon_head) *h;
    int64_t u, end; /* steps [u, end) still to prefetch */
    int64_t slice;  /* steps per call */
} blk_prefetch;

static void RS(blk_prefetch_some)(blk_prefetch *pf)
{
    for (int64_t k = 0; k < pf->slice && pf->u < pf->end; k++, pf->u++) FW_PREFETCH_STEP(pf->h, pf->u, 2);
}

/* The loops that read or write the caller's rows (keys and values while
 * featurizing and forming residuals, queries, outputs) also prefetch the
 * row FW_ROW_AHEAD ahead into L1. In the [T][H][D] layout a head's rows
 * lie H * D * sizeof(REAL) apart (4 KiB for 8 heads of 128 floats), so
 * they share few L2 sets and the next-block hint above is partly evicted
 * before use. Four rows ahead covers a DRAM miss at these loops' speed
 * (docs/performance.md, "Chunk form: row prefetch"). */
#ifndef FW_ROW_AHEAD
#define FW_ROW_AHEAD 4
#endif

/* ---- the causal half of [Kz; Qz] ----
 * Of [Kz; Qz] = [X; Q] Z^T the block reads only the columns of examples
 * up to a limit per row: Kz[l][l] (the normaliser's x.z) and Kz[l][l'] for
 * the examples l' of steps before the steps whose windows hold l (the
 * system's couplings), Qz[j][l'] for the examples of steps up to j (the
 * output's). For a window of one that is the lower triangle. lim[r] is the
 * last such column of row r of [X; Q] (-1: none), from the example and
 * window bookkeeping, so the rule holds for every alignment and window. */
static void RS(kq_limits)(const example_src *srcp, int64_t c0, int64_t Lc, int64_t g_lo, int64_t G, int64_t *lim)
{
    int64_t *limK = lim, *limQ = lim + G, before = -1; /* last example of the steps so far */
    for (int64_t g = 0; g < G; g++) limK[g] = g;
    for (int64_t j = 0; j < Lc; j++) {
        const int64_t e = falcon_example_of_step(&srcp->ex, c0 + j);
        if (e >= 0) {
            for (int64_t l = falcon_window_first(&srcp->ex, e) - g_lo; l <= e - g_lo; l++)
                if (limK[l] < before) limK[l] = before;
            before = e - g_lo;
        }
        limQ[j] = before;
    }
}

/* Rows [0, M) of C = A Z^T (Zt = Z^T, G columns) up to each row's limit:
 * panels of KQ_PANEL rows (a multiple of the micro-kernels' 6-row tiles),
 * each as wide as its last needed column, rounded up to a cache line of
 * columns. Every element computed is the same whatever the panel. For a
 * window of one and C = 64 that is 0.72 of the dense product's work
 * (docs/performance.md, "Chunk form: the causal half of [Kz; Qz]"). */
#ifndef KQ_PANEL
#define KQ_PANEL 24
#endif
static void RS(kq_product)(const RS(falcon_uk) *uk, int64_t M, int64_t G, int64_t n, const REAL *A, int64_t lda,
                           const REAL *Zt, int64_t ldg, REAL *C, const int64_t *lim)
{
    const int64_t line = FW_LINE / (int64_t)sizeof(REAL);
    for (int64_t i0 = 0; i0 < M; i0 += KQ_PANEL) {
        const int64_t rows = M - i0 < KQ_PANEL ? M - i0 : KQ_PANEL;
        int64_t last = -1;
        for (int64_t i = i0; i < i0 + rows; i++)
            if (lim[i] > last) last = lim[i];
        if (last < 0) continue;
        int64_t N = (last + line) / line * line; /* columns 0 .. last, in whole lines */
        if (N > G) N = G;
        uk->gemm_nn(rows, N, n, A + i0 * lda, lda, Zt, ldg, 0, C + i0 * ldg, ldg);
    }
}

/* ---- direct operands ----
 * With the identity feature map and no operand rounding, the products
 * read the keys and queries where the caller keeps them (rows ldk apart)
 * instead of a packed copy: the copy was the longest of the driver's own
 * loops (docs/performance.md, "Chunk form: direct operands"). The
 * end-of-block write reads the keys through Zt, so the caller's rows are
 * not needed again after the products. The keys are direct when the block's examples are consecutive rows of k (not carried
 * from the state's history, not the previous call's key of a prefix
 * alignment); a key scaled for its normaliser (falcon_math.h) makes the
 * block pack them after all. The same products, element for element. */
static int RS(keys_direct)(const example_src *s, int64_t g_lo, int64_t G, const REAL **yrow, const REAL **X)
{
    const RS(falcon_head) *h = s->h;
    int64_t row0 = 0;
    for (int64_t g = 0; g < G; g++) {
        const int64_t e = g_lo + g;
        if (e < s->ex.carried) return 0;
        const int64_t t = falcon_step_of_example(&s->ex, e), row = h->prefix ? t - 1 : t;
        if (g == 0) row0 = row;
        if (row < 0 || row != row0 + g) return 0;
        const REAL *key;
        RS(example_get)(s, e, &key, &yrow[g]);
    }
    *X = h->k + row0 * h->ldk;
    return 1;
}

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

/* ---- a large memory projected away ----
 * A regression block's end state S_L = F S_0 + Z^T R holds S_0 twice: in
 * F S_0 and, through the residuals, in Z^T R. Where the block's steps
 * project most of S_0 away (more steps than the key width, beta near 1)
 * the two cancel, and S_L keeps the rounding errors of terms the size of
 * F S_0: its relative error is ||F S_0|| / ||S_L|| times a step's, where
 * the recurrent form, which rounds each projection of a memory already
 * projected, stays at a few u (verify/test-carried-memory.c). So blk_run
 * keeps S_0 and, when the end state came out more than FALCON_CUT_RATIO
 * times smaller than F S_0 (largest magnitudes: one pass, no overflow),
 * runs the block again as two halves, each checked in the same way, down
 * to single steps, which are the recurrent step. The test is the
 * cancellation itself, measured, so it holds for every variant, window
 * and decay. A block whose memory is not much larger than what its steps
 * leave passes it at the cost of one copy of S and one pass for its
 * largest magnitude; the errors, the cost, how often blocks are cut and
 * the choice of the ratio 2: docs/performance.md, "Chunk form: the cut of
 * a cancelling block". The halves depend only on the block, so a call cut into segments at block boundaries still
 * matches the whole call bit for bit, and the chunk form with C >= T still
 * matches the parallel form. */
/* falcon_block_cancels and FALCON_CUT_RATIO: falcon_math.h, shared with
 * the CUDA chunk form. */

/* Steps [c0, c0 + Lc) of one head, cut where the end state cancels
 * (above). c->amax is the memory's largest magnitude before and after. */
static void RS(blk_run)(const blk_work *w, blk_head *c, int64_t c0, int64_t Lc, blk_prefetch *pf)
{
    const RS(falcon_head) *h = c->h;
    if (!h->regression) {
        RS(blk_block)(w, c, c0, Lc, pf);
        return;
    }
    const int64_t n = h->n, m = h->m, ldm = w->ldm;
    const double a0 = c->amax;
    if (Lc > 1) {
        for (int64_t r = 0; r < n; r++) memcpy(w->S0 + r * ldm, c->St + r * ldm, sizeof(REAL) * (size_t)m);
        memcpy(w->S0 + n * ldm, c->ck, sizeof(REAL) * (size_t)m);
    }
    RS(blk_block)(w, c, c0, Lc, pf);
    c->amax = RS(memory_amax)(c->St, ldm, n, m);
    const double f = w->row[w->L + 1 + Lc]; /* F[Lc][0] */
    if (Lc < 2 || !falcon_block_cancels(f, a0, c->amax)) return;
    for (int64_t r = 0; r < n; r++) memcpy(c->St + r * ldm, w->S0 + r * ldm, sizeof(REAL) * (size_t)m);
    memcpy(c->ck, w->S0 + n * ldm, sizeof(REAL) * (size_t)m);
    c->amax = a0;
    const int64_t half = Lc / 2;
    RS(blk_run)(w, c, c0, half, pf);
    RS(blk_run)(w, c, c0 + half, Lc - half, pf);
}

/* A group of heads (same shapes and T), one block of each in turn: the
 * rows of a step's heads are adjacent in the caller's [T][H][D] tensors,
 * so a group reads and writes them in whole pages and cache lines while
 * they are cached, and the hardware prefetchers see one stream per tensor
 * (docs/performance.md, "Chunk form: head groups"). While one head
 * computes its block, the rows of the next (head, block) are prefetched.
 * Each head's arithmetic is the same whatever the group. */
static falcon_status FW(falcon_blocked)(const RS(falcon_head) *heads, int64_t count, int64_t L)
{
    enum { GROUP_MAX = FALCON_HEAD_GROUP_MAX };
    if (count > GROUP_MAX) count = GROUP_MAX; /* callers respect the limit */
    if (count < 1) return FALCON_OK;
    const int64_t T = heads[0].T;
    if (L > T) L = T > 0 ? T : 1;
    blk_work w;
    blk_head c[GROUP_MAX];
    if (RS(blk_work_open)(&w, &heads[0], L)) return FALCON_E_NOMEM;
    for (int64_t i = 0; i < count; i++)
        if (RS(blk_open)(&c[i], &heads[i], w.ldm)) {
            while (i > 0) RS(blk_close)(&c[--i], w.ldm, 0);
            falcon_work_put(w.mem, w.mem_bytes);
            return FALCON_E_NOMEM;
        }
    /* Each head at its own step: blocks end early at near-reset decays,
     * which differ from head to head. */
    int64_t pos[GROUP_MAX] = {0}, left = count;
    while (left > 0)
        for (int64_t i = 0; i < count; i++) {
            if (pos[i] >= T) continue;
            const int64_t c0 = pos[i], Lc = RS(block_length)(&heads[i], c0, L);
            pos[i] += Lc;
            left -= pos[i] >= T;
            /* the next (head, block): head i + 1 where it stands, or head 0 */
            const int64_t ni = i + 1 < count ? i + 1 : 0, u0 = pos[ni];
            const int64_t un = u0 < T ? RS(block_length)(&heads[ni], u0, L) : 0;
            blk_prefetch pf = {&heads[ni], u0, u0 + un, (un + 4) / 5};
            if (L > 256) pf.end = u0; /* a masked-parallel block would not keep them cached */
            RS(blk_run)(&w, &c[i], c0, Lc, &pf);
        }
    int bad = 0;
    for (int64_t i = 0; i < count; i++) bad |= !RS(blk_close)(&c[i], w.ldm, 1);
    falcon_work_put(w.mem, w.mem_bytes);
    return bad ? FALCON_E_OVERFLOW : FALCON_OK;
}
