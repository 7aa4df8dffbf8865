/* X <- (I + L)^{-1} X, L strictly lower, SIMD forward substitution. Rows
 * are solved TR_MR at a time, in column blocks of TR_NV vectors held in
 * registers: first the rows above the block (each loaded once for the TR_MR
 * rows), then the small triangle inside the block, from registers. Every
 * element accumulates x -= l*y over q in increasing order, as the scalar
 * kernel does (fused here). A row q is skipped when the block's
 * coefficients on it are all zero, and inside the triangle each zero
 * coefficient is skipped: the systems are block-sparse. */
_Static_assert(TR_MR == 4, "trsm row tails assume TR_MR == 4");

VINLINE void VNAME(tr_tile)(const int mr, const int nv, const int masked, vmask tm, int64_t p0,
                            const REAL *L, int64_t ldl, REAL *X, int64_t ldx)
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
    for (int64_t q = 0; q < p0; q++) {
        REAL c[TR_MR];
        int nz = 0;
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            c[i] = l[i * ldl + q];
            nz |= c[i] != 0;
        }
        if (!nz) continue;
        const REAL *y = X + q * ldx;
        vreal yv[TR_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            yv[v] = masked && v == nv - 1 ? v_load_mask(y + v * VL, tm) : v_loadu(y + v * VL);
#pragma GCC unroll 8
        for (int i = 0; i < mr; i++) {
            const vreal cv = v_set1(c[i]);
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
    const vmask none = v_mask(0);
    int64_t j = 0;
    for (; j + TR_NV * VL <= m; j += TR_NV * VL) VNAME(tr_tile)(mr, TR_NV, 0, none, p0, L, ldl, X + j, ldx);
    if (TR_NV > 2 && m - j >= 2 * VL) {
        VNAME(tr_tile)(mr, 2, 0, none, p0, L, ldl, X + j, ldx);
        j += 2 * VL;
    }
    if (TR_NV > 1 && m - j >= VL) {
        VNAME(tr_tile)(mr, 1, 0, none, p0, L, ldl, X + j, ldx);
        j += VL;
    }
    if (j < m) VNAME(tr_tile)(mr, 1, 1, v_mask(m - j), p0, L, ldl, X + j, ldx);
}

static void VNAME(trsm_unit_lower)(int64_t P, int64_t m, const REAL *L, int64_t ldl, REAL *X,
                                   int64_t ldx)
{
    if (P <= 1 || m <= 0) return;
    int64_t p = 0;
    for (; p + TR_MR <= P; p += TR_MR) VNAME(tr_rows)(TR_MR, p, m, L, ldl, X, ldx);
    if (P - p >= 2) {
        VNAME(tr_rows)(2, p, m, L, ldl, X, ldx);
        p += 2;
    }
    if (P - p >= 1) VNAME(tr_rows)(1, p, m, L, ldl, X, ldx);
}
