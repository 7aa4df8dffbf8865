/* Forward substitution for (I + L) X = X0, L strictly lower triangular. The
 * pseudo-value systems are block-sparse (terms of one step do not couple),
 * so zero entries are skipped. */
static void RS(trsm_unit_lower_scalar)(int64_t P, int64_t m, const REAL *L, int64_t ldl, REAL *X,
                                       int64_t ldx)
{
    for (int64_t p = 1; p < P; p++) {
        REAL *x = X + p * ldx;
        for (int64_t q = 0; q < p; q++) {
            REAL l = L[p * ldl + q];
            if (l == 0) continue;
            const REAL *y = X + q * ldx;
            if (RS(tiny)(l))
                RS(axpy_row_wide)(m, -l, y, x);
            else
                RS(axpy_row)(m, -l, y, x); /* x - l y and x + (-l) y round alike */
        }
    }
}
