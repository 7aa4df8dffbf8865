/*
 * The recurrent form (docs/math.md sections 1, 7.1), one precision. Each step of a head is two
 * passes over its memory whatever the variant:
 *   1. P = [x_1 .. x_k, phi(q_t)] S_{t-1}^T       (k = |E_t|)
 *   2. S_t = alpha S_{t-1} + sum_i eta e_i z_i^T  (decay fused)
 * on the transposed copy St = S^T [n][m] (examples.inc.c): pass 1 is rows
 * of St scaled by the keys' entries and summed, pass 2 adds z_i[c] e_i to
 * row c of St. Pass 2 of step t and pass 1 of step t + 1 are one sweep of
 * the update_read micro-kernel (each row of St updated, stored and added
 * into P while in registers), so the memory is read and written once a
 * step (rec_steps below).
 * with e_i = y_i - alpha P_i (regression) or y_i (inner product), and the
 * read o_t = alpha P_q + eta sum_i (z_i . q) e_i taken from pass 1, which
 * equals S_t phi(q_t) without a third pass. In fp32 runs the decay is kept
 * as a scalar factor of the memory (lazy decay, rec_decay below), folded
 * into it before it leaves [2^-8, 1]; fp64 runs apply it to S directly.
 *
 * P is kept one row per vector ([k + 1][m]), so the residual and read loops
 * run along contiguous rows. The small dot products (x.x of the new
 * example, z_i.q) are micro-kernel calls too: every reduction of a step is
 * a gemm_nt (or dot2_copy, its 1 x 2 case with the query's copy fused,
 * the same bits), whose result per element does not depend on the call's shape,
 * and each step does the same arithmetic wherever a call starts (a split
 * call gives bitwise the same result as one call).
 *
 * Heads in time blocks: falcon_recurrent runs a group of heads together,
 * FW_TIME_BLOCK steps of each in turn, so that the rows the group reads and
 * writes ([T][H][D] layout: the heads of one step are adjacent) are used in
 * whole cache lines and pages while they are cached, and the hardware
 * prefetchers see the group's streams. Each head keeps its own work memory
 * between blocks; its arithmetic is the same whatever the grouping. Within
 * a head, the rows of step t + FW_AHEAD are prefetched at step t: one
 * head's rows are H*D apart, a stride the hardware does not follow; into
 * L1 when the memory fits there, else into L2 (rec_open); the output
 * row's too, or the step's stores wait for their lines. Neither tunable
 * changes results. Long blocks pay less: switching heads costs each one
 * its memory's return to L1 (and a tiled memory its window's copy), paid
 * once a block. The figures behind FW_TIME_BLOCK and FW_AHEAD:
 * docs/performance.md, "Recurrent form: head groups and row prefetch". */
#ifndef FW_TIME_BLOCK
#define FW_TIME_BLOCK 128
#endif
#ifndef FW_AHEAD
#define FW_AHEAD 2
#endif
/* lazy decay (rec_decay): fp32 only */
#ifndef FW_LAZY
#ifdef FALCON_REAL_F32
#define FW_LAZY 1
#else
#define FW_LAZY 0
#endif
#endif

/* One head's work memory and position between time blocks. */
typedef struct rec_head {
    const RS(falcon_head) *h;
    example_src src;
    void *mem;
    size_t mem_bytes; /* the work memory's size of mem */
    size_t mem_used;  /* the part carved (rec_checked copies it) */
    int64_t ldn, ldm;
    REAL *St, *X, *Zg, *P, *E, *xz, *zq; /* St: S^T; X: the window's keys oldest first, then phi(q) */
    REAL *xs; /* the scale of each key of the window (falcon_math.h: X holds x / s) */
    REAL *Zw; /* the write directions of the step whose write is pending */
    /* W = 1 without gains: a second X, swapped with X at each new example,
     * so that the pending write reads its key where the previous step left
     * it instead of a copy in Zw (one libc memcpy a step, docs/performance.md,
     * "Recurrent form: small per-step costs"). NULL otherwise. */
    REAL *Xalt;
    const REAL *Zcur; /* the pending write's directions: Zw, or row 0 of the X before the swap */
    const REAL **yrow;
    int64_t cnt; /* examples in the window */
    REAL *ck;    /* [m]: the outputs and memory added (finite_add): 0 while finite */
    int64_t mt;  /* columns per tile of St (rec_tile); m: one tile */
    int64_t ldt; /* St's leading dimension: mt when tiled (tile r0 / mt at St + r0 n), else ldm */
    /* the window as a time block found it, for the tiles after the first */
    REAL *X0, *xz0, *xs0;
    const REAL **yrow0;
    int64_t cnt0;
    int pf_l1; /* the step's rows prefetched into L1 (else L2): rec_open */
    /* Lazy decay (below): the memory is C times St. lazy: C is kept (else
     * C = 1 and the decay goes into St at every step); C0: C as the time
     * block found it, for the tiles after the first. */
    int lazy;
    double C, C0;
} rec_head;

/* Column tiles. Each column r of the memory (a value index) evolves on its
 * own: the write adds z_i[c] e_i[r] to column r only, e_i[r] reads P_i[r]
 * only, and eta comes from the keys. A time block can therefore run tile
 * by tile, every step of the block on columns [r0, r0 + mt) before the
 * next tile, with the same arithmetic per element as one sweep over all
 * columns (the micro-kernel already works in column blocks): the same bits.
 * A tile of St (n x mt) that fits in L1 stays there for the block's steps;
 * the whole memory of n = m = 128 (64 KiB in fp32) does not, and every
 * step then read and wrote it through L2. Each tile is stored on its own,
 * [n][mt] contiguous: as columns of the whole [n][m] array its rows would
 * be 4 m bytes apart and fall in a fraction of L1's sets (half of them for
 * m = 2 mt), which then cannot hold it. The step's own work (keys,
 * normaliser) is repeated per tile. tile_bytes is the L1 share for the
 * tile (src/run.c, falcon_tile_bytes): two thirds of the L1 data cache, so
 * that the step's other lines (keys, reads, the rows of P and E) fit
 * beside it; a tile of all of L1 would leave them no room, and under LRU
 * they would evict it (docs/performance.md, "Recurrent form: memory
 * tiles"). -DFW_TILE_BYTES fixes it at build time (for measurements). */
#ifndef FW_TILE_MIN_LINES
#define FW_TILE_MIN_LINES 4
#endif
static int64_t RS(rec_tile)(int64_t n, int64_t m, int64_t budget)
{
#ifdef FW_TILE_BYTES
    budget = FW_TILE_BYTES;
#endif
    const int64_t col = (int64_t)sizeof(REAL) * (n > 0 ? n : 1), line = 64 / (int64_t)sizeof(REAL);
    if (col * m <= budget) return m > 0 ? m : 1;
    const int64_t mt = budget / col / line * line; /* whole cache lines of a row */
    /* Narrower than 4 lines, a tile's rows are too short for the
     * micro-kernel (its column block is 4 AVX-512 vectors) and the per-tile
     * work adds up: one tile (docs/performance.md, "Recurrent form: memory
     * tiles"). */
    return mt >= FW_TILE_MIN_LINES * line ? mt : m;
}

/* The columns of the tile that starts at r0. */
static inline int64_t RS(rec_tile_width)(const rec_head *c, int64_t r0)
{
    return c->h->m - r0 < c->mt ? c->h->m - r0 : c->mt;
}

static falcon_status RS(rec_open)(rec_head *c, const RS(falcon_head) *h)
{
    const int64_t n = h->n, m = h->m, W = h->window;
    const int64_t ldn = RS(padded)(n), ldm = RS(padded)(m);
    const int swap_x = W == 1 && !h->gain;
    memset(c, 0, sizeof *c);
    c->h = h;
    c->ldn = ldn;
    c->ldm = ldm;
    if (RS(examples_open)(&c->src, h)) return FALCON_E_NOMEM;
    c->mt = RS(rec_tile)(n, m, h->tile_bytes);
    const int tiled = c->mt < m;
    /* A memory (tile) larger than L1's share passes through L1 at every
     * step and evicts what was prefetched there two steps earlier, so the
     * step's rows go to L2 instead; a memory that fits keeps the L1
     * prefetch (docs/performance.md, "Recurrent form: memory tiles"). */
    c->pf_l1 = (int64_t)sizeof(REAL) * n * c->mt <= h->tile_bytes;
    c->ldt = tiled ? c->mt : ldm;
    c->lazy = FW_LAZY && h->alpha && !h->direct_decay;
    c->C = 1;
    if (c->lazy && *h->scale > 0 && *h->scale <= 1) c->C = *h->scale; /* the state's (checked there) */
    carver cv = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        c->St = RS(carve)(&cv, sizeof(REAL) * (size_t)(tiled ? n * c->mt * ((m + c->mt - 1) / c->mt) : n * ldm));
        c->X = RS(carve)(&cv, sizeof(REAL) * (size_t)((W + 1) * ldn));
        c->Zg = RS(carve)(&cv, sizeof(REAL) * (size_t)ldn);
        c->Zw = RS(carve)(&cv, sizeof(REAL) * (size_t)(W * ldn));
        c->Xalt = RS(carve)(&cv, swap_x ? sizeof(REAL) * (size_t)((W + 1) * ldn) : 0);
        c->P = RS(carve)(&cv, sizeof(REAL) * (size_t)((W + 1) * ldm));
        c->E = RS(carve)(&cv, sizeof(REAL) * (size_t)(W * ldm));
        c->xz = RS(carve)(&cv, sizeof(REAL) * (size_t)(W + 1));
        c->xs = RS(carve)(&cv, sizeof(REAL) * (size_t)(W + 1));
        c->zq = RS(carve)(&cv, sizeof(REAL) * (size_t)(W + 1));
        c->yrow = RS(carve)(&cv, sizeof(const REAL *) * (size_t)W);
        c->ck = RS(carve)(&cv, sizeof(REAL) * (size_t)ldm);
        c->X0 = RS(carve)(&cv, tiled ? sizeof(REAL) * (size_t)(W * ldn) : 0);
        c->xz0 = RS(carve)(&cv, tiled ? sizeof(REAL) * (size_t)W : 0);
        c->xs0 = RS(carve)(&cv, tiled ? sizeof(REAL) * (size_t)W : 0);
        c->yrow0 = RS(carve)(&cv, tiled ? sizeof(const REAL *) * (size_t)W : 0);
        if (pass == 0) {
            cv.base = h->work->get(cv.used, &c->mem_bytes);
            cv.used = 0;
            if (!cv.base) {
                RS(examples_close)(&c->src);
                return FALCON_E_NOMEM;
            }
            c->mem = cv.base;
        }
    }
    c->mem_used = cv.used;
    memset(c->ck, 0, sizeof(REAL) * (size_t)ldm);
    c->Zcur = c->Zw;
    if (!swap_x) c->Xalt = NULL; /* carved empty: a pointer, but no room */
    const double *S = h->S_in ? h->S_in : h->S;
    for (int64_t r0 = 0; r0 < m; r0 += c->mt)
        RS(load_memory)(c->St + r0 * n, c->ldt, S + r0 * n, RS(rec_tile_width)(c, r0), n, (double)(REAL)c->C);
    for (int64_t e = 0; e < c->src.ex.carried; e++) { /* at most W - 1 carried */
        const REAL *key;
        REAL *x = c->X + c->cnt * ldn;
        RS(example_get)(&c->src, e, &key, &c->yrow[c->cnt]);
        RS(falcon_featurize)(h->phi, key, x, n);
        c->xs[c->cnt] = 1;
        h->uk->gemm_nt(1, 1, n, x, ldn, x, ldn, 0, c->xz + c->cnt, 1);
        if (!RS(falcon_xz_in_range)(c->xz[c->cnt]) && (c->xs[c->cnt] = RS(falcon_key_scale)(x, n)) != 1)
            h->uk->gemm_nt(1, 1, n, x, ldn, x, ldn, 0, c->xz + c->cnt, 1);
        c->cnt++;
    }
    return FALCON_OK;
}

/* 1 while the outputs checked into ck and the memory are finite (a
 * step's or a head's check). */
static int RS(rec_finite)(rec_head *c)
{
    const int64_t m = c->h->m, n = c->h->n;
    for (int64_t r0 = 0; r0 < m; r0 += c->mt)
        RS(check_memory)(c->ck + r0, c->St + r0 * n, c->ldt, RS(rec_tile_width)(c, r0), n);
    return RS(all_zero)(c->ck, m);
}

/* 0 when an output row or the memory was not finite. */
static int RS(rec_close)(rec_head *c, int store)
{
    if (!c->mem) return 1;
    const int64_t m = c->h->m, n = c->h->n;
    const int finite = store ? RS(rec_finite)(c) : RS(all_zero)(c->ck, m);
    /* a lazy head's state stays for its second run; any other's is stored,
     * so that the call's scan names the element */
    store = store && (finite || !c->lazy);
    for (int64_t r0 = 0; store && r0 < m; r0 += c->mt)
        RS(store_memory)(c->h->S + r0 * n, c->St + r0 * n, c->ldt, RS(rec_tile_width)(c, r0), n, (double)(REAL)c->C);
    if (store) *c->h->scale = c->C;
    c->h->work->put(c->mem, c->mem_bytes);
    c->mem = NULL;
    RS(examples_close)(&c->src);
    return finite;
}

/* What a step's first phase leaves for its second. */
typedef struct rec_step {
    REAL a;         /* decay */
    REAL w;         /* the write's factor on St: a, or what lazy decay leaves (rec_finish) */
    int64_t k;      /* examples written (0: none revealed) */
    REAL tau;       /* Falcon-2/2A: z scaled on its own */
    const REAL *Z;  /* the write directions: X, or Zg */
    REAL f;         /* a factor folded into St by the write's pass (rec_decay), else 1 */
} rec_step;

/* Step t's first phase, which does not read the memory: the window and
 * its keys, phi(q) after them in X, the new example's [z.x, z.q]. If z.x
 * is out of range, x is stored scaled, x = xs x' (falcon_math.h), and
 * both are taken again. */
static rec_step RS(rec_prepare)(rec_head *c, int64_t t, int prefetch)
{
    const RS(falcon_head) *h = c->h;
    const int64_t n = h->n, W = h->window, T = h->T, ldn = c->ldn;
    const RS(falcon_uk) *uk = h->uk;
    const int64_t e = falcon_example_of_step(&c->src.ex, t);
    if (e >= 0 && c->cnt == W && c->Xalt) { /* W = 1: the new key into the other X */
        REAL *const x = c->X;
        c->X = c->Xalt;
        c->Xalt = x;
    }
    REAL *const X = c->X, *const Zg = c->Zg, *const xz = c->xz, *const zq = c->zq, *const xs = c->xs;
    enum { AHEAD = FW_AHEAD }; /* steps between a prefetch and the use */
    if (AHEAD > 0 && prefetch && t + AHEAD < T) {
        if (c->pf_l1) FW_PREFETCH_STEP(h, t + AHEAD, 3);
        else FW_PREFETCH_STEP(h, t + AHEAD, 2);
    }
    const REAL alpha = h->alpha ? h->alpha[t * h->lds] : (REAL)1;
    rec_step st = {alpha, alpha, 0, 1, X, 1};
    if (e >= 0) {
        if (c->cnt == W) { /* slide the window by one */
            if (W > 1) {
                memmove(X, X + ldn, sizeof(REAL) * (size_t)((W - 1) * ldn));
                memmove(c->yrow, c->yrow + 1, sizeof(const REAL *) * (size_t)(W - 1));
                memmove(xz, xz + 1, sizeof(REAL) * (size_t)(W - 1));
                memmove(xs, xs + 1, sizeof(REAL) * (size_t)(W - 1));
            }
            c->cnt--;
        }
        const REAL *key;
        RS(example_get)(&c->src, e, &key, &c->yrow[c->cnt]);
        RS(falcon_featurize)(h->phi, key, X + c->cnt * ldn, n);
        c->cnt++;
    }
    const int64_t k = e >= 0 ? c->cnt : 0;
    st.k = k;
    /* phi(q) after the keys; the identity map's copy is made by the step's
     * first product below (dot2_copy: the same bits as the copy, then
     * gemm_nt), which reads q once instead of twice. */
    const REAL *const qt = h->q + t * h->ldk;
    const int copy_q = k > 0 && h->phi == FALCON_MATH_PHI_IDENTITY;
    if (!copy_q) RS(falcon_featurize)(h->phi, qt, X + k * ldn, n);
    /* The new example (row k - 1 of X, phi(q) right after it): its
     * [z.x, z.q], z = g_t * x for Falcon-2/2A (W = 1), else x. */
    if (k > 0) {
        REAL *xn = X + (k - 1) * ldn, *zn = h->gain ? Zg : xn, d2[2];
        xs[k - 1] = 1;
        for (int pass = 0; pass < 2; pass++) {
            if (h->gain) st.tau = RS(write_direction)(h->gain + t * h->ldk, xn, Zg, n);
            if (pass == 0 && copy_q) uk->dot2_copy(n, zn, xn, ldn, qt, d2);
            else uk->gemm_nt(1, 2, n, zn, ldn, xn, ldn, 0, d2, 2);
            if (pass > 0 || RS(falcon_xz_in_range)(d2[0])) break;
            if ((xs[k - 1] = RS(falcon_key_scale)(xn, n)) == 1) break;
        }
        /* z' scaled on its own too if x'.z' is still out of range (with the
         * gains scaled first, only just: a safeguard the gate's cases do not
         * reach) */
        REAL tau2;
        if (h->gain && !RS(falcon_xz_in_range)(d2[0]) && (tau2 = RS(falcon_key_scale)(Zg, n)) != 1) {
            st.tau *= tau2;
            uk->gemm_nt(1, 2, n, Zg, ldn, xn, ldn, 0, d2, 2);
        }
        xz[k - 1] = d2[0];
        zq[k - 1] = d2[1];
        st.Z = h->gain ? Zg : X;
    }
    return st;
}

/* o = a pq: the read's part from the memory before the step's write
 * (a restrict-parameter helper, as residual_row in examples.inc.c, so
 * that the compiler drops its overlap tests: docs/performance.md,
 * "Recurrent form: small per-step costs"). */
static inline void RS(rec_read_start)(int64_t m, REAL a, const REAL *restrict pq, REAL *restrict o)
{
    for (int64_t r = 0; r < m; r++) o[r] = a * pq[r];
}

/* One example's row of E (residual_row) and its share of the read:
 * o = a pq + zq e when pq is given (the step's only example), else
 * o += zq e. */
static inline void RS(rec_residual)(int64_t m, int kind, REAL c, REAL a, REAL xs, const REAL *restrict y,
                                    const REAL *restrict p, REAL *restrict e, REAL zq, const REAL *restrict pq,
                                    int lazy, REAL *restrict o, REAL *restrict ck)
{
    RS(residual_row)(m, kind, c, a, xs, y, p, e);
    if (pq && lazy)
        for (int64_t r = 0; r < m; r++) {
            const REAL v = a * (pq[r] + zq * e[r]);
            o[r] = v;
            ck[r] += v - v;
        }
    else if (pq)
        for (int64_t r = 0; r < m; r++) {
            const REAL v = a * pq[r] + zq * e[r];
            o[r] = v;
            ck[r] += v - v;
        }
    else
        for (int64_t r = 0; r < m; r++) o[r] += zq * e[r];
}

/* Lazy decay (docs/math.md section 8), in fp32 runs with a decay: the
 * memory is S = C St with a scalar C, and a step's decay multiplies C
 * instead of the memory: the write St += (E / C) Z is then the plain
 * fma(e, z, St) of update_read with a = 1, three vector operations an
 * element instead of four (docs/performance.md, "Recurrent form: lazy
 * decay"). The residual takes (REAL)C P (P read from St), the read (REAL)C times
 * pq plus the write's contribution at St's scale (C applied last, for
 * reads of subnormal size), and the write's coefficients are divided by
 * it, the rounding of the same order as the direct decay's. C is a double, the running product of the
 * decays rounded to float at each use, so its error does not grow with
 * the steps. C stays in [FALCON_LAZY_SCALE_MIN, 1], and so St within 2^8 of S:
 *  - a step whose decay would take C below the bound folds it: the step
 *    is the direct decay's with a = (REAL)(C alpha), a normal float (C = 1
 *    gives alpha itself: the direct decay's step bit for bit), and C = 1;
 *  - a near reset (C alpha below float's normal range) after lazy steps
 *    first multiplies St and P by (REAL)C, then takes alpha as the direct
 *    decay does: C alpha as one subnormal factor would lose the digits of
 *    the memory it keeps. P is folded at once (k + 1 rows); St in the
 *    step's own pass (update_read's f: each row multiplied as it is
 *    loaded, the same roundings as a pass of its own, which had cost a
 *    near reset as much as the rest of its step).
 * The decisions read only C and alpha, never where a call or a time block
 * starts, and the state carries C (falcon_state's scale; the memory it
 * stores is (double)(REAL)C times St, exact in double, which the next
 * call divides back exactly): a split call is the one call bit for bit.
 * fp64 runs decay directly: no double product is exact in the state.
 * Where St or E / C overflows and S would not (a memory within 2^8 of
 * float's largest), the call's check finds it and the head runs again,
 * a step that overflows lazily taken again with the decay direct
 * (rec_checked: a rule of the step too, so splits stay bitwise). */

/* x[rows][cols] (leading dimension ld) <- f x: a fold, each element rounded. */
static void RS(scale_rows)(REAL *x, int64_t rows, int64_t cols, int64_t ld, REAL f)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t r = 0; r < cols; r++) x[i * ld + r] *= f;
}

/* St <- f St on the tile's columns (rec_checked's fold, outside a step). */
static void RS(rec_fold)(rec_head *c, int64_t r0, int64_t mw, REAL f)
{
    RS(scale_rows)(c->St + r0 * c->h->n, c->h->n, mw, c->ldt, f);
}

/* Step t's decay as the residual and the read take it (the return), and
 * st->w, the write's factor on St: lazy decay's three cases above. */
static REAL RS(rec_decay)(rec_head *c, rec_step *st, int64_t r0, int64_t mw, int *lazy_step)
{
    *lazy_step = 0;
    if (!c->lazy) return st->a;
    const double C1 = c->C * (double)st->a;
    if (C1 >= FALCON_LAZY_SCALE_MIN) {
        c->C = C1;
        st->w = 1;
        *lazy_step = 1;
        return (REAL)C1;
    }
    if (c->C != 1 && C1 < (double)REAL_MIN) { /* P now, St in the step's pass (st->f) */
        const REAL f = (REAL)c->C;
        RS(scale_rows)(c->P + r0, st->k + 1, mw, c->ldm, f);
        st->f = f;
    } else {
        st->w = (REAL)C1;
    }
    c->C = 1;
    return st->w;
}

/* Step t's second phase, from P = [x_1 .. x_k, phi(q_t)] S_{t-1}^T: the
 * residuals, eta, the read o_t and the rows E the write needs. o_t is
 * checked into ck as it is written (finite_add; for one example in the
 * loop that writes it, while in registers, not read back:
 * docs/performance.md, "Recurrent form: small per-step costs"). */
static void RS(rec_finish)(rec_head *c, int64_t t, rec_step *st, int64_t r0, int64_t m)
{
    REAL *const ck = c->ck + r0;
    const RS(falcon_head) *h = c->h;
    const int64_t n = h->n, ldn = c->ldn, ldm = c->ldm, k = st->k;
    const RS(falcon_uk) *uk = h->uk;
    REAL *const X = c->X, *const P = c->P + r0, *const E = c->E + r0;
    REAL *const xz = c->xz, *const zq = c->zq, *const xs = c->xs;
    const REAL **const yrow = c->yrow;
    int lazy_step;
    const REAL a = RS(rec_decay)(c, st, r0, m, &lazy_step);
    REAL *const o = h->out + t * h->ldo + r0;
    const REAL *const pq = P + k * ldm;
    if (k == 0) {
        RS(rec_read_start)(m, a, pq, o);
        RS(finite_add)(ck, o, m);
        return;
    }
    /* k >= 1. With the window's keys stored scaled, x_i = xs_i x'_i,
     * P_i = S x'_i, so the residual takes xs_i P_i, and the write is
     * c rho_i e_i z'_i^T with c = eta sigma, rho_i = xs_i / sigma
     * (falcon_math.h). With every scale 1 (keys of ordinary size) this is
     * the unscaled arithmetic, bit for bit, and costs no more. */
    REAL xzsum = 0, sigma = xs[0];
    int scaled = xs[0] != 1;
    if (k > 1) uk->gemm_nt(k - 1, 1, n, X, ldn, X + k * ldn, ldn, 0, zq, 1);
    for (int64_t i = 1; i < k; i++) {
        scaled |= xs[i] != 1;
        if (xs[i] > sigma) sigma = xs[i];
    }
    if (!scaled)
        for (int64_t i = 0; i < k; i++) xzsum += xz[i];
    else
        for (int64_t i = 0; i < k; i++) {
            const REAL rho = xs[i] / sigma;
            xzsum += rho * rho * xz[i];
        }
    const REAL eta0 = RS(falcon_eta_scaled)(h->beta[t * h->lds], h->eps, sigma, st->tau, xzsum);
    /* A lazy step writes E / a, and reads the memory and its write at the
     * scale of St: o = a (pq + zq (E / a)), a applied last. Taken as
     * a pq + (zq a) (E / a), the factor (zq a) of a subnormal read (queries
     * of about 1e-39) was rounded on the subnormal grid a factor a (down to
     * 2^-8) deeper than zq: reads 6-10 times the direct decay's error
     * (verify/test-subnormal-reads.c). */
    const REAL eta = lazy_step ? eta0 / a : eta0;
    if (k == 1) {
        const REAL s0 = xs[0];
        RS(rec_residual)(m, fw_res_kind(h->regression, s0), eta, a, s0, yrow[0] + r0, P, E, zq[0], pq, lazy_step, o,
                         ck);
    } else {
        RS(rec_read_start)(m, lazy_step ? 1 : a, pq, o);
        for (int64_t i = 0; i < k; i++) {
            const REAL si = xs[i], ci = scaled ? eta * (xs[i] / sigma) : eta;
            RS(rec_residual)(m, fw_res_kind(h->regression, si), ci, a, si, yrow[i] + r0, P + i * ldm, E + i * ldm,
                             zq[i], NULL, 0, o, ck);
        }
        for (int64_t r = 0; lazy_step && r < m; r++) o[r] *= a;
        RS(finite_add)(ck, o, m);
    }
    /* The next step's first phase may overwrite the window's rows (or Zg):
     * the write keeps its own copy of the directions, unless that phase
     * writes into the other X (Xalt). */
    if (c->Xalt && st->Z == c->X) {
        c->Zcur = st->Z;
    } else {
        memcpy(c->Zw, st->Z, sizeof(REAL) * (size_t)(k * ldn));
        c->Zcur = c->Zw;
    }
}

/* Steps [t0, t1) of one head. The write of step t and the read of step
 * t + 1 are one pass over the memory (update_read): S_t = alpha S_{t-1} +
 * E^T Z, then P_{t+1} = [X; q]_{t+1} S_t^T. The first read of a time
 * block and the last write are the same kernel with nothing to write or
 * nothing to read, so every step does the same arithmetic wherever a
 * call or a block starts. */
static void RS(rec_steps_tile)(rec_head *c, int64_t t0, int64_t t1, int64_t r0, int64_t mw)
{
    const RS(falcon_head) *h = c->h;
    const int64_t n = h->n, ldn = c->ldn, ldm = c->ldm, ldt = c->ldt;
    const RS(falcon_uk) *uk = h->uk;
    REAL *const St = c->St + r0 * n, *const E = c->E + r0, *const P = c->P + r0;
    const int prefetch = r0 == 0; /* the rows a later tile reads are cached */
    rec_step st = RS(rec_prepare)(c, t0, prefetch);
    uk->update_read(n, mw, 0, 1, 1, St, ldt, c->Zcur, ldn, E, ldm, st.k + 1, c->X, ldn, P, ldm);
    for (int64_t t = t0; t < t1; t++) {
        RS(rec_finish)(c, t, &st, r0, mw);
        const REAL a = st.w, f = st.f;
        const int64_t k = st.k;
        if (t + 1 < t1) {
            st = RS(rec_prepare)(c, t + 1, prefetch);
            uk->update_read(n, mw, k, a, f, St, ldt, c->Zcur, ldn, E, ldm, st.k + 1, c->X, ldn, P, ldm);
        } else {
            uk->update_read(n, mw, k, a, f, St, ldt, c->Zcur, ldn, E, ldm, 0, c->X, ldn, P, ldm);
        }
    }
}

/* The window (its keys, values, x.x and scales) as a time block found
 * it, kept for the next tile, and put back. */
static void RS(rec_window_keep)(rec_head *c, int back)
{
    REAL *X[2] = {c->X, c->X0}, *xz[2] = {c->xz, c->xz0}, *xs[2] = {c->xs, c->xs0};
    const REAL **yrow[2] = {c->yrow, c->yrow0};
    int64_t *cnt[2] = {&c->cnt, &c->cnt0};
    const int from = back, to = !back;
    const size_t rows = (size_t)(*cnt[to] = *cnt[from]);
    memcpy(X[to], X[from], sizeof(REAL) * rows * (size_t)c->ldn);
    memcpy(xz[to], xz[from], sizeof(REAL) * rows);
    memcpy(xs[to], xs[from], sizeof(REAL) * rows);
    memcpy(yrow[to], yrow[from], sizeof(const REAL *) * rows);
}

static void RS(rec_steps)(rec_head *c, int64_t t0, int64_t t1)
{
    const int64_t m = c->h->m;
    if (t0 >= t1) return;
    if (c->mt >= m) {
        RS(rec_steps_tile)(c, t0, t1, 0, m);
        return;
    }
    RS(rec_window_keep)(c, 0);
    c->C0 = c->C;
    for (int64_t r0 = 0; r0 < m; r0 += c->mt) {
        if (r0 > 0) RS(rec_window_keep)(c, 1);
        c->C = c->C0;
        RS(rec_steps_tile)(c, t0, t1, r0, RS(rec_tile_width)(c, r0));
    }
}

/* A group of heads (same T), FW_TIME_BLOCK steps of each in turn; again[i]
 * set where a lazy head's result was not finite (its state not stored). */
static falcon_status RS(rec_group)(const RS(falcon_head) *const *heads, int64_t count, int *again)
{
    enum { GROUP_MAX = FALCON_HEAD_GROUP_MAX };
    rec_head c[GROUP_MAX]; /* count <= GROUP_MAX: FW(fw_recurrent) */
    for (int64_t i = 0; i < count; i++) {
        falcon_status s = RS(rec_open)(&c[i], heads[i]);
        if (s) {
            while (i > 0) RS(rec_close)(&c[--i], 0);
            return s;
        }
    }
    const int64_t T = count > 0 ? heads[0]->T : 0;
    for (int64_t t0 = 0; t0 < T; t0 += FW_TIME_BLOCK) {
        const int64_t t1 = T - t0 < FW_TIME_BLOCK ? T : t0 + FW_TIME_BLOCK;
        for (int64_t i = 0; i < count; i++) RS(rec_steps)(&c[i], t0, t1);
    }
    int bad = 0;
    for (int64_t i = 0; i < count; i++) {
        const int finite = RS(rec_close)(&c[i], 1);
        again[i] = !finite && c[i].lazy;
        bad |= !finite && !again[i];
    }
    return bad ? FALCON_E_OVERFLOW : FALCON_OK;
}

/* A head whose lazy run was not finite, run again from the state the call
 * found, one step at a time: each step lazily as before, and one whose
 * output or memory is not finite taken again from the memory it found,
 * with the factor folded into the memory (St times (REAL)C, C = 1: the
 * memory a call started there would load) and the decay direct; the steps
 * after it lazy again from C = 1. The rule reads only the step and the
 * memory it finds, as the rest of the lazy decay, so a call split
 * anywhere (one part lazy throughout, the other taking the step again)
 * gives the one call's bits: a second run of the whole call with the
 * decay direct would not (a split's first part, finite lazily, keeps its
 * lazy bits). The lazy steps before the first failure are the first run's
 * (non-finite memory stays non-finite, so the first failure is the first
 * non-finite step). A step not finite with the decay direct either is an
 * overflow: the rest of the call runs direct, and the state is stored so
 * that the call's scan names the element. Costs a copy of the work
 * memory a step, on a path only a memory within 2^8 of float's largest
 * takes. */
static falcon_status RS(rec_checked)(const RS(falcon_head) *h)
{
    rec_head c, keep;
    const falcon_status s = RS(rec_open)(&c, h);
    if (s) return s;
    size_t kept_bytes;
    void *kept = h->work->get(c.mem_used, &kept_bytes);
    if (!kept) {
        RS(rec_close)(&c, 0);
        return FALCON_E_NOMEM;
    }
    const int64_t m = h->m;
    for (int64_t t = 0; t < h->T; t++) {
        if (!c.lazy) { /* an overflow: the rest direct, as reported */
            RS(rec_steps)(&c, t, h->T);
            break;
        }
        keep = c;
        memcpy(kept, c.mem, c.mem_used);
        RS(rec_steps)(&c, t, t + 1);
        if (RS(rec_finite)(&c)) continue;
        c = keep;
        memcpy(c.mem, kept, c.mem_used);
        for (int64_t r0 = 0; r0 < m; r0 += c.mt) RS(rec_fold)(&c, r0, RS(rec_tile_width)(&c, r0), (REAL)c.C);
        c.C = 1;
        c.lazy = 0;
        RS(rec_steps)(&c, t, t + 1);
        c.lazy = RS(rec_finite)(&c);
    }
    h->work->put(kept, kept_bytes);
    return RS(rec_close)(&c, 1) ? FALCON_OK : FALCON_E_OVERFLOW;
}

falcon_status FW(fw_recurrent)(const RS(falcon_head) *heads, int64_t count)
{
    enum { GROUP_MAX = FALCON_HEAD_GROUP_MAX };
    const RS(falcon_head) *group[GROUP_MAX] = {NULL};
    int again[GROUP_MAX] = {0};
    if (count > GROUP_MAX) count = GROUP_MAX; /* callers respect the limit */
    for (int64_t i = 0; i < count; i++) group[i] = &heads[i];
    falcon_status s = RS(rec_group)(group, count, again);
    if (s == FALCON_E_NOMEM) return s;
    for (int64_t i = 0; i < count; i++) {
        if (!again[i]) continue;
        const falcon_status s2 = RS(rec_checked)(&heads[i]);
        if (s2 == FALCON_E_NOMEM) return s2;
        if (s2 != FALCON_OK) s = s2;
    }
    return s;
}
