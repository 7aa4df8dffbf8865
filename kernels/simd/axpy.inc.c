/* The axpy-form register tile shared by gemm_nn and rank_update (SIMD,
 * vec-*.h abstraction): rows of C are sums of rows of B,
 *     C[i][:] = sum_{k0 <= k < k1} P[i*rs + k*cs] * B[k][:]  (+ C[i][:], or
 *               + scale*C[i][:] in one FMA: see rank-update.inc.c)
 * A tile of mr rows x nv vectors keeps its accumulators in registers over
 * the whole k range: per k it loads nv vectors of B, broadcasts mr
 * coefficients and issues mr*nv FMAs, so C is read and written once.
 * Columns past N are a masked last vector. Each element sees the same
 * sequence (from 0, one FMA per k from the last k to the first, then C)
 * whatever tile it falls in. The framework orders terms oldest first, so
 * the sum starts with the newest, least decayed ones: a sum that started
 * with terms scaled by a near-reset decay would be subnormal for a while,
 * and each FMA on it a microcode assist on x86. */
/* A decayed memory plus the step's write, s' = a s + terms (scale) or
 * s + terms: one FMA, so the tiny product of a near-reset decay is exact
 * inside it and never rounded to a subnormal number on its own
 * (rank-update.inc.c). Every SIMD kernel that writes the memory uses it. */
VINLINE vreal VNAME(decay_add)(const int scale, vreal a, vreal s, vreal terms)
{
    return scale ? v_fma(a, s, terms) : v_add(s, terms);
}

/* The recurrent step's write of one term without decay (Falcon-1/2 and
 * the A variants with no alpha, or alpha = 1): s + e z as one FMA instead
 * of a product and an add, in rank_update and update_read alike (they
 * must agree bit for bit, update-read.inc.c): one rounding fewer, and in
 * update_read three vector operations an element instead of four (the
 * product, the add, the two reads; docs/performance.md, "SIMD kernels: the
 * plain write"). The sign of an
 * exact zero is the add's: s + e z with e z = +-0 exact gives what
 * s + (e z) gives. With a decay the product a s must stay inside an FMA
 * (decay_add), so that case keeps its product of the terms. */
VINLINE int VNAME(ru_plain)(const int kk, const int scale) { return kk == 1 && !scale; }

typedef struct VNAME(ax_args) {
    const REAL *P; /* coefficient of (row i, k) at P[i*rs + k*cs] */
    int64_t rs, cs;
    const REAL *B; /* B[k][:] at B + k*ldb */
    int64_t ldb;
    REAL *C;
    int64_t ldc;
    int read_c;   /* 0: C is not read (init 0) */
    int do_scale; /* with read_c: init = scale*C */
    REAL scale;
} VNAME(ax_args);

VINLINE void VNAME(ax_tile)(const int mr, const int nv, const int masked, vmask tm,
                            const VNAME(ax_args) *g, int64_t i0, int64_t j0, int64_t k0,
                            int64_t k1)
{
    /* Locals: the vector stores may alias anything, *g included. */
    const int64_t ldc = g->ldc, rs = g->rs, cs = g->cs, ldb = g->ldb;
    REAL *const c = g->C + i0 * ldc + j0;
    const REAL *const p = g->P + i0 * rs;
    const REAL *const b = g->B + j0;
    vreal acc[AX_MR][2 * AX_NV];
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[i][v] = v_zero();
    for (int64_t k = k1 - 1; k >= k0; k--) { /* newest first: see above */
        vreal bv[2 * AX_NV];
        const REAL *bk = b + k * ldb, *pk = p + k * cs;
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            bv[v] = masked && v == nv - 1 ? v_load_mask(bk + v * VL, tm) : v_loadu(bk + v * VL);
            /* in a register: folded into each row's FMA, B is loaded mr times */
            if (mr > 1) V_KEEP(bv[v]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vreal a = v_set1(pk[i * rs]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[i][v] = v_fma(a, bv[v], acc[i][v]);
        }
    }
    const int read_c = g->read_c, do_scale = g->do_scale;
    const vreal sc = v_set1(g->scale);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            REAL *ci = c + i * ldc + v * VL;
            if (read_c) {
                const vreal c0 = masked && v == nv - 1 ? v_load_mask(ci, tm) : v_loadu(ci);
                acc[i][v] = VNAME(decay_add)(do_scale, sc, c0, acc[i][v]);
            }
            if (masked && v == nv - 1)
                v_store_mask(ci, tm, acc[i][v]);
            else
                v_storeu(ci, acc[i][v]);
        }
}

/* One block of mr rows across all N columns. Blocks of one or two rows
 * (the recurrent form's [x; q] S^T) take tiles twice as wide, so that
 * they still keep ports x latency independent FMAs in flight (on AVX2,
 * 2 x 2 vectors left three quarters of the FMA slots empty). */
VINLINE void VNAME(ax_rows)(const int mr, const VNAME(ax_args) *g, int64_t i0, int64_t N,
                            int64_t k0, int64_t k1)
{
    const vmask none = v_mask(0);
    int64_t j = 0;
    if (mr <= 2)
        for (; j + 2 * AX_NV * VL <= N; j += 2 * AX_NV * VL)
            VNAME(ax_tile)(mr, 2 * AX_NV, 0, none, g, i0, j, k0, k1);
    for (; j + AX_NV * VL <= N; j += AX_NV * VL) VNAME(ax_tile)(mr, AX_NV, 0, none, g, i0, j, k0, k1);
    if (AX_NV > 2 && N - j >= 2 * VL) {
        VNAME(ax_tile)(mr, 2, 0, none, g, i0, j, k0, k1);
        j += 2 * VL;
    }
    if (AX_NV > 1 && N - j >= VL) {
        VNAME(ax_tile)(mr, 1, 0, none, g, i0, j, k0, k1);
        j += VL;
    }
    if (j < N) VNAME(ax_tile)(mr, 1, 1, v_mask(N - j), g, i0, j, k0, k1);
}

/* The k range [k0, k1) outside of which the coefficients P[i*rs + k*cs]
 * of rows i in [0, mr), k in [0, K), are all zero (k0 = k1 = 0: all are).
 * The axpy tiles and the triangular solve (trsm.inc.c) skip the rest. */
static void VNAME(nonzero_range)(const REAL *P, int64_t rs, int64_t cs, int64_t mr, int64_t K, int64_t *k0,
                                 int64_t *k1)
{
    int64_t lo = K, hi = 0;
    for (int64_t i = 0; i < mr; i++) {
        const REAL *p = P + i * rs;
        int64_t a = 0, b = K;
        while (a < lo && p[a * cs] == 0) a++;      /* first nonzero, or lo */
        while (b > hi && p[(b - 1) * cs] == 0) b--; /* last nonzero + 1, or hi */
        if (a < lo) lo = a;
        if (b > hi) hi = b;
    }
    *k0 = lo < hi ? lo : 0;
    *k1 = lo < hi ? hi : 0;
}

/* The k range of rows [i0, i0 + mr) (trim = 0: the whole [0, K)). */
static void VNAME(ax_range)(const VNAME(ax_args) *g, int trim, int64_t i0, int64_t mr, int64_t K,
                            int64_t *k0, int64_t *k1)
{
    if (!trim) {
        *k0 = 0;
        *k1 = K;
        return;
    }
    VNAME(nonzero_range)(g->P + i0 * g->rs, g->rs, g->cs, mr, K, k0, k1);
}

static void VNAME(axpy)(const VNAME(ax_args) *g, int trim, int64_t M, int64_t N, int64_t K)
{
    int64_t i = 0, k0, k1;
    for (; i + AX_MR <= M; i += AX_MR) {
        VNAME(ax_range)(g, trim, i, AX_MR, K, &k0, &k1);
        VNAME(ax_rows)(AX_MR, g, i, N, k0, k1);
    }
    if (AX_MR > 4 && M - i >= 4) {
        VNAME(ax_range)(g, trim, i, 4, K, &k0, &k1);
        VNAME(ax_rows)(4, g, i, N, k0, k1);
        i += 4;
    }
    if (AX_MR > 2 && M - i >= 2) {
        VNAME(ax_range)(g, trim, i, 2, K, &k0, &k1);
        VNAME(ax_rows)(2, g, i, N, k0, k1);
        i += 2;
    }
    if (AX_MR > 1 && M - i >= 1) {
        VNAME(ax_range)(g, trim, i, 1, K, &k0, &k1);
        VNAME(ax_rows)(1, g, i, N, k0, k1);
    }
}
