/* S = a*S + E Z (E [m][k]): the decay and the rank-k write fused into one pass over
 * the memory, row by row: the row scaled by a, then each term added in
 * order. Without an FMA instruction the product a*S is rounded on its own,
 * and a near-reset decay would make it subnormal (a microcode assist on
 * x86 for each one): below 2^-60 (fp32; 2^-500 in fp64) the row's element
 * is taken whole in the wider type, where that product is normal, and
 * rounded once; a tiny coefficient likewise (ukernels-scalar.inc.c). */
#ifdef FALCON_REAL_F32
#define SCALAR_TINY_DECAY 0x1p-60f
#else
#define SCALAR_TINY_DECAY 0x1p-500
#endif

/* Row r of S (s, n elements) updated in place; term i's coefficient is
 * E[r * ers + i * eks] (rank_update: E [m][k]; update_read: E [k][m]). */
static void RS(update_row)(int64_t r, int64_t n, int64_t k, REAL a, REAL *s, const REAL *E, int64_t ers,
                           int64_t eks, const REAL *Z, int64_t ldz)
{
    if (a < SCALAR_TINY_DECAY) { /* four elements at a time, as axpy_row */
        int64_t c = 0;
        for (; c + 4 <= n; c += 4) {
            RS(wide) t0 = (RS(wide))a * s[c], t1 = (RS(wide))a * s[c + 1], t2 = (RS(wide))a * s[c + 2],
                     t3 = (RS(wide))a * s[c + 3];
            for (int64_t i = 0; i < k; i++) {
                const RS(wide) e = E[r * ers + i * eks];
                const REAL *z = Z + i * ldz + c;
                t0 += e * z[0], t1 += e * z[1], t2 += e * z[2], t3 += e * z[3];
            }
            s[c] = (REAL)t0, s[c + 1] = (REAL)t1, s[c + 2] = (REAL)t2, s[c + 3] = (REAL)t3;
        }
        for (; c < n; c++) {
            RS(wide) t = (RS(wide))a * s[c];
            for (int64_t i = 0; i < k; i++) t += (RS(wide))E[r * ers + i * eks] * Z[i * ldz + c];
            s[c] = (REAL)t;
        }
        return;
    }
    if (a != 1) RS(scale_row)(n, a, s);
    for (int64_t i = 0; i < k; i++) {
        const REAL e = E[r * ers + i * eks];
        const REAL *z = Z + i * ldz;
        if (RS(tiny)(e))
            RS(axpy_row_wide)(n, e, z, s);
        else
            RS(axpy_row)(n, e, z, s);
    }
}
#undef SCALAR_TINY_DECAY

static void RS(rank_update_scalar)(int64_t m, int64_t n, int64_t k, REAL a, REAL *S, int64_t lds,
                                   const REAL *E, int64_t lde, const REAL *Z, int64_t ldz)
{
    for (int64_t r = 0; r < m; r++) RS(update_row)(r, n, k, a, S + r * lds, E, lde, 1, Z, ldz);
}
