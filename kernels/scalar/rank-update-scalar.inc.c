/* S = a*S + E^T Z: the decay and the rank-k write fused into one pass over
 * the memory, row by row. */
static void RS(rank_update_scalar)(int64_t m, int64_t n, int64_t k, REAL a, REAL *S, int64_t lds,
                                   const REAL *E, int64_t lde, const REAL *Z, int64_t ldz)
{
    for (int64_t r = 0; r < m; r++) {
        REAL *s = S + r * lds;
        if (a != 1)
            for (int64_t c = 0; c < n; c++) s[c] *= a;
        for (int64_t i = 0; i < k; i++) {
            REAL e = E[i * lde + r];
            const REAL *z = Z + i * ldz;
            for (int64_t c = 0; c < n; c++)
                s[c] += e * z[c];
        }
    }
}
