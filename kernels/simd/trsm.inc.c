/* X <- (I + L)^{-1} X, L strictly lower, SIMD forward substitution. Rows
 * are solved TR_MR at a time, in column blocks of TR_NV vectors held in
 * registers: first the rows above the block (each loaded once for the TR_MR
 * rows), then the small triangle inside the block, from registers. Every
 * element accumulates x -= l*y over q in increasing order, as the scalar
 * kernel does (fused here). The systems are block-sparse (the terms of
 * one step do not couple): each row block runs only over the q range
 * where some of its coefficients are nonzero, found once for the block
 * (nonzero_range, axpy.inc.c, included before this file), and inside the
 * triangle each zero coefficient is skipped. A test per q on all the
 * block's coefficients, repeated for every column block, cost more than
 * the solve's FMAs (docs/performance.md, "SIMD kernels: the solve's
 * ranges"). A zero
 * coefficient inside the range changes x by nothing (at most the sign of
 * a zero). */
_Static_assert(TR_MR >= 4 && TR_MR <= 8, "trsm row tails assume 4 <= TR_MR <= 8");

VINLINE void VNAME(tr_tile)(const int mr, const int nv, const int masked, vmask tm, int64_t p0,
                            int64_t q0, int64_t q1, const REAL *L, int64_t ldl, REAL *X, int64_t ldx)
{
    vreal acc[TR_MR][TR_NV];
    const REAL *l = L + p0 * ldl;
    REAL *x = X + p0 * ldx;
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            acc[i][v] = masked && v == nv - 1 ? v_load_mask(x + i * ldx + v * VL, tm)
                                              : v_loadu(x + i * ldx + v * VL);
    for (int64_t q = q0; q < q1; q++) {
        const REAL *y = X + q * ldx;
        vreal yv[TR_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            yv[v] = masked && v == nv - 1 ? v_load_mask(y + v * VL, tm) : v_loadu(y + v * VL);
            if (mr > 1) V_KEEP(yv[v]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            const vreal cv = v_set1(l[i * ldl + q]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[i][v] = v_fnma(cv, yv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 1; i < mr; i++)
#pragma GCC unroll 8
        for (int q = 0; q < i; q++) {
            const REAL c = l[i * ldl + p0 + q];
            if (c == 0) continue;
            const vreal cv = v_set1(c);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[i][v] = v_fnma(cv, acc[q][v], acc[i][v]);
        }
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            REAL *xi = x + i * ldx + v * VL;
            if (masked && v == nv - 1)
                v_store_mask(xi, tm, acc[i][v]);
            else
                v_storeu(xi, acc[i][v]);
        }
}

VINLINE void VNAME(tr_rows)(const int mr, int64_t p0, int64_t m, const REAL *L, int64_t ldl,
                            REAL *X, int64_t ldx)
{
    /* [q0, q1): outside it, rows p0 .. p0 + mr - 1 are zero left of p0 */
    int64_t q0, q1;
    VNAME(nonzero_range)(L + p0 * ldl, ldl, 1, mr, p0, &q0, &q1);
    const vmask none = v_mask(0);
    int64_t j = 0;
    for (; j + TR_NV * VL <= m; j += TR_NV * VL)
        VNAME(tr_tile)(mr, TR_NV, 0, none, p0, q0, q1, L, ldl, X + j, ldx);
    if (TR_NV > 2 && m - j >= 2 * VL) {
        VNAME(tr_tile)(mr, 2, 0, none, p0, q0, q1, L, ldl, X + j, ldx);
        j += 2 * VL;
    }
    if (TR_NV > 1 && m - j >= VL) {
        VNAME(tr_tile)(mr, 1, 0, none, p0, q0, q1, L, ldl, X + j, ldx);
        j += VL;
    }
    if (j < m) VNAME(tr_tile)(mr, 1, 1, v_mask(m - j), p0, q0, q1, L, ldl, X + j, ldx);
}

static void VNAME(trsm_unit_lower)(int64_t P, int64_t m, const REAL *L, int64_t ldl, REAL *X,
                                   int64_t ldx)
{
    if (P <= 1 || m <= 0) return;
    int64_t p = 0;
    for (; p + TR_MR <= P; p += TR_MR) VNAME(tr_rows)(TR_MR, p, m, L, ldl, X, ldx);
    if (TR_MR > 4 && P - p >= 4) {
        VNAME(tr_rows)(4, p, m, L, ldl, X, ldx);
        p += 4;
    }
    if (P - p >= 2) {
        VNAME(tr_rows)(2, p, m, L, ldl, X, ldx);
        p += 2;
    }
    if (P - p >= 1) VNAME(tr_rows)(1, p, m, L, ldl, X, ldx);
}
