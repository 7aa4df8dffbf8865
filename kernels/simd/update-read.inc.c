/* The recurrent step's two passes over the memory fused into one, SIMD:
 *     S = a*S + E[k][m]^T Z[k][n]       (rank_update, element for element)
 *     P[r][n] = X[r][m] S               (with the new S)
 * In column blocks of UR_NV vectors: each row of S is loaded once,
 * updated, stored, and while it is in registers added into the UR_R rows
 * of P it feeds (P[i] += X[i][row] * row), so S is read and written once
 * per step instead of read twice and written once. Z's vectors of the
 * block stay in registers for k <= 2 (the recurrent step's windows of 1
 * or 2), or k <= UR_ZREG where a table sets it. Rows of P past UR_R are read after the pass by the axpy tiles
 * (axpy.inc.c), untrimmed, which add the same FMAs in the same order.
 * Each element of S: the k terms from the last to the first, then S
 * added (fma(a, S, terms), or S + terms; one term without decay:
 * fma(e, z, S), ru_plain in axpy.inc.c), as rank_update; of P: 0, then
 * one FMA per row of S in order, every row (the rows after the pass: from
 * the last row to the first, as the axpy tiles add). The terms, for
 * k <= 2 (the registers' path): the last one's product, then one FMA for
 * the other; for k > 2: from 0, one FMA each (the axpy tiles' sum, which
 * rank_update uses there). The product is the value an FMA from 0 gives,
 * but for the sign of an exact zero (-0 stays -0, where 0 + -0 is +0),
 * which reaches S only where S itself holds -0. It is not for accuracy
 * but for the issue slots: an FMA overwrites one of its inputs, and here
 * the coefficient, Z's vector and the zero are all used again, so each
 * FMA from 0 needed a register copy first; the product writes a fresh
 * one (docs/performance.md, "SIMD kernels: update_read's first term"). */
/* Rows of P added in the pass ([x; q] of a window of one), and the width
 * of a column block: by default the axpy tile's, whose register budget it
 * shares (UR_R x UR_NV accumulators, UR_NV row vectors, 2 x UR_NV of Z).
 * A backend may include this file once more with UR_NV and UR_NAME set,
 * for another port model (update-read-unit.c, V_HALF_UR_NV). Every
 * element's sequence of operations is the same whatever the width. */
#define UR_R 2
/* Write terms whose Z vectors stay in registers (k <= UR_ZREG); more are
 * loaded per row. */
#ifndef UR_ZREG
#define UR_ZREG 2
#endif
#ifndef UR_NV
#define UR_NV AX_NV
#endif
#ifndef UR_NAME
#define UR_NAME(x) VNAME(x)
#endif
/* update_read's linkage: external where a backend compiles it in a unit of
 * its own and its table in another (update-read-unit.c, ukernels.c). */
#ifndef UR_LINKAGE
#define UR_LINKAGE static
#endif

VINLINE void UR_NAME(ur_block)(const int nv, const int masked, vmask tm, const int kk, const int scale,
                             const int fold, const int rr, int64_t m, int64_t j0, vreal av, vreal fv,
                             REAL *S, int64_t lds,
                             const REAL *E, int64_t lde, const REAL *Z, int64_t ldz,
                             const REAL *X, int64_t ldx, REAL *P, int64_t ldp)
{
    vreal acc[UR_R][UR_NV], zv[UR_ZREG][UR_NV];
#pragma GCC unroll 4
    for (int i = 0; i < rr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[i][v] = v_zero();
#pragma GCC unroll 4
    for (int i = 0; i < UR_ZREG; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            const REAL *z = Z + i * ldz + j0 + v * VL;
            zv[i][v] = i >= kk ? v_zero() : masked && v == nv - 1 ? v_load_mask(z, tm) : v_loadu(z);
        }
    for (int64_t row = 0; row < m; row++) {
        REAL *s = S + row * lds + j0;
        vreal x[UR_NV], p[UR_NV];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            x[v] = masked && v == nv - 1 ? v_load_mask(s + v * VL, tm) : v_loadu(s + v * VL);
            if (fold) x[v] = v_mul(fv, x[v]); /* the pending fold, rounded as S *= f */
            p[v] = v_zero();
        }
        vreal e1 = v_zero(); /* ru_plain: the term's coefficient */
        if (VNAME(ru_plain)(kk, scale)) {
            e1 = v_set1(E[row]);
        } else if (kk <= 2) {
#pragma GCC unroll 2
            for (int i = kk - 1; i >= 0; i--) {
                const vreal e = v_set1(E[i * lde + row]);
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) p[v] = i == kk - 1 ? v_mul(e, zv[i][v]) : v_fma(e, zv[i][v], p[v]);
            }
        } else if (kk <= UR_ZREG) { /* the sum from 0 as below, Z from registers */
#pragma GCC unroll 4
            for (int i = kk - 1; i >= 0; i--) { /* the last term first, as below */
                const vreal e = v_set1(E[i * lde + row]);
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) p[v] = v_fma(e, zv[i][v], p[v]);
            }
        } else {
            for (int i = kk - 1; i >= 0; i--) {
                const vreal e = v_set1(E[i * lde + row]);
                const REAL *z = Z + i * ldz + j0;
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++)
                    p[v] = v_fma(e, masked && v == nv - 1 ? v_load_mask(z + v * VL, tm) : v_loadu(z + v * VL), p[v]);
            }
        }
        if (kk > 0 || scale) /* else S stays as it is: a read only */
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) {
                x[v] = VNAME(ru_plain)(kk, scale) ? v_fma(e1, zv[0][v], x[v]) : VNAME(decay_add)(scale, av, x[v], p[v]);
                if (masked && v == nv - 1) v_store_mask(s + v * VL, tm, x[v]);
                else v_storeu(s + v * VL, x[v]);
            }
#pragma GCC unroll 4
        for (int i = 0; i < rr; i++) {
            const vreal c = v_set1(X[i * ldx + row]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[i][v] = v_fma(c, x[v], acc[i][v]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < rr; i++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            REAL *p = P + i * ldp + j0 + v * VL;
            if (masked && v == nv - 1) v_store_mask(p, tm, acc[i][v]);
            else v_storeu(p, acc[i][v]);
        }
}

/* All column blocks for one (k class, scale, rows of P) instance. */
VINLINE void UR_NAME(ur_sweep)(const int kk2, const int scale, const int fold, const int rr, int64_t m,
                             int64_t n, int64_t k, vreal av, vreal fv, REAL *S, int64_t lds,
                             const REAL *E, int64_t lde,
                             const REAL *Z, int64_t ldz, const REAL *X, int64_t ldx, REAL *P,
                             int64_t ldp)
{
    /* kk2: k as a constant up to 2 (or UR_ZREG); one more stands for any larger k */
    const int kk = kk2 <= (UR_ZREG > 2 ? UR_ZREG : 2) ? kk2 : (int)k;
    const vmask none = v_mask(0);
    int64_t j = 0;
    for (; j + UR_NV * VL <= n; j += UR_NV * VL)
        UR_NAME(ur_block)(UR_NV, 0, none, kk, scale, fold, rr, m, j, av, fv, S, lds, E, lde, Z, ldz, X, ldx, P, ldp);
    /* a tail of 2 vectors keeps half the chains rather than a quarter */
    if (UR_NV > 2 && j + 2 * VL <= n) {
        UR_NAME(ur_block)(2, 0, none, kk, scale, fold, rr, m, j, av, fv, S, lds, E, lde, Z, ldz, X, ldx, P, ldp);
        j += 2 * VL;
    }
    for (; j + VL <= n; j += VL)
        UR_NAME(ur_block)(1, 0, none, kk, scale, fold, rr, m, j, av, fv, S, lds, E, lde, Z, ldz, X, ldx, P, ldp);
    if (j < n)
        UR_NAME(ur_block)(1, 1, v_mask(n - j), kk, scale, fold, rr, m, j, av, fv, S, lds, E, lde, Z, ldz, X, ldx, P, ldp);
}

/* One instance per (k class, scale, fold) for rr rows of P in the pass: k
 * as a constant up to UR_KMAX, the rest one instance. */
#define UR_KMAX (UR_ZREG > 2 ? UR_ZREG : 2)
#define UR_SW(KK, SC, FO, RR)                                                                          \
    UR_NAME(ur_sweep)(KK, SC, FO, RR, m, n, k, av, fv, S, lds, E, lde, Z, ldz, X, ldx, P, ldp)
#define UR_KS1(SC, FO, RR)                                                                             \
    do {                                                                                               \
        if (k == 0) UR_SW(0, SC, FO, RR);                                                              \
        else if (k == 1) UR_SW(1, SC, FO, RR);                                                         \
        else if (k == 2) UR_SW(2, SC, FO, RR);                                                         \
        else if (UR_KMAX >= 3 && k == 3) UR_SW(3, SC, FO, RR);                                         \
        else if (UR_KMAX >= 4 && k == 4) UR_SW(4, SC, FO, RR);                                         \
        else UR_SW(UR_KMAX + 1, SC, FO, RR);                                                           \
    } while (0)
#define UR_KS(RR)                                                                                      \
    do {                                                                                               \
        if (a != 1 && f != 1) UR_KS1(1, 1, RR);                                                        \
        else if (a != 1) UR_KS1(1, 0, RR);                                                             \
        else UR_KS1(0, 0, RR);                                                                         \
    } while (0)

UR_LINKAGE void UR_NAME(update_read)(int64_t m, int64_t n, int64_t k, REAL a, REAL f, REAL *S, int64_t lds,
                               const REAL *E, int64_t lde, const REAL *Z, int64_t ldz, int64_t r,
                               const REAL *X, int64_t ldx, REAL *P, int64_t ldp)
{
    if (n <= 0) return;
    if (k < 0) k = 0;
    if (r < 0) r = 0;
    /* The fold rides in the pass where the decay does (a lazy decay folds
     * only before a near reset, whose a is far below 1); with a = 1 it is
     * a pass of its own, so that the instances without a decay stay as
     * they are. */
    if (f != 1 && a == 1) {
        for (int64_t row = 0; row < m; row++)
            for (int64_t c = 0; c < n; c++) S[row * lds + c] *= f;
        f = 1;
    }
    const vreal av = v_set1(a), fv = v_set1(f);
    /* rows of P added in the pass: up to UR_R */
    if (m > 0 && r >= 2) UR_KS(2);
    else if (m > 0 && r == 1) UR_KS(1);
    else if (m > 0 && (k > 0 || a != 1)) UR_KS(0);
    const int64_t done = r < UR_R ? r : UR_R;
    if (r > done) {
        /* the rest of P from the new S, by the axpy tiles with every row */
        const VNAME(ax_args) g = {
            .P = X + done * ldx, .rs = ldx, .cs = 1, .B = S, .ldb = lds, .C = P + done * ldp, .ldc = ldp,
            .read_c = 0, .do_scale = 0, .scale = 1,
        };
        VNAME(axpy)(&g, 0, r - done, n, m);
    }
    if (m <= 0) /* no rows of S: P is zero */
        for (int64_t i = 0; i < done; i++)
            for (int64_t c = 0; c < n; c++) P[i * ldp + c] = 0;
}
#undef UR_KS
#undef UR_KS1
#undef UR_SW
#undef UR_KMAX
#undef UR_ZREG
#undef UR_R
#undef UR_NV
#undef UR_NAME
#undef UR_LINKAGE
