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
    size_t mem_bytes; /* the work memory's size of mem */
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
    size_t St_bytes; /* the work memory's size of St */
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
            cv.base = h->work->get(cv.used, &w->mem_bytes);
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
    c->St = h->work->get(sizeof(REAL) * (size_t)((h->n + 1) * ldm), &c->St_bytes);
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
    c->h->work->put(c->St, c->St_bytes);
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

#include "block-phases.inc.c"

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
            heads[0].work->put(w.mem, w.mem_bytes);
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
    heads[0].work->put(w.mem, w.mem_bytes);
    return bad ? FALCON_E_OVERFLOW : FALCON_OK;
}
