/* The recurrent step's update and read in one pass over the memory: each
 * row of S is updated (as rank_update, element for element) and at once
 * added into every row of P it feeds, P[i][:] += X[i][row] * S[row][:], so
 * that the read uses the new S. Every coefficient is used, zeros included.
 * f != 1 first folds a lazy decay's factor into the row. */
static void RS(update_read_scalar)(int64_t m, int64_t n, int64_t k, REAL a, REAL f, REAL *S, int64_t lds,
                                   const REAL *E, int64_t lde, const REAL *Z, int64_t ldz, int64_t r,
                                   const REAL *X, int64_t ldx, REAL *P, int64_t ldp)
{
    for (int64_t i = 0; i < r; i++)
        for (int64_t c = 0; c < n; c++) P[i * ldp + c] = 0;
    for (int64_t row = 0; row < m; row++) {
        REAL *s = S + row * lds;
        if (f != 1) RS(scale_row)(n, f, s); /* the pending fold, as S *= f */
        if (k > 0 || a != 1) RS(update_row)(row, n, k, a, s, E, 1, lde, Z, ldz);
        for (int64_t i = 0; i < r; i++) {
            RS(axpy_row)(n, X[i * ldx + row], s, P + i * ldp);
        }
    }
}
