/* S = a*S + E Z (E [m][k]), SIMD: decay and rank-k write fused in one pass over S.
 * k <= 2 (the recurrent step, windows of 1 or 2) streams S two rows at a
 * time: per vector of S one load, the scale, k products with Z's vectors
 * (loaded once for both rows) and one aligned store. Larger k (the chunk
 * form's end-of-block update) is a GEMM: the register tiles of axpy.inc.c
 * with coefficient E[r][k] for row r. Either way each element is the sum
 * of the k terms from the last to the first (k <= 2: the last one's
 * product, then one FMA; larger k: from 0, one FMA per k, as axpy.inc.c;
 * update_read's pass does the same, update-read.inc.c says why), then S
 * added: fma(a, S, sum), or S + sum when a = 1 (decay_add, axpy.inc.c);
 * but k = 1 with a = 1 is fma(e, z, S) (ru_plain, axpy.inc.c).
 * The decay's product a*S is never rounded on its own: a near-reset decay
 * (the smallest normal number) would make it subnormal, and x86 cores
 * take a microcode assist for each vector operation with a subnormal
 * result or multiplicand (docs/performance.md, "SIMD kernels: subnormal
 * products"). Inside the FMA the product is exact and the sum is normal
 * again. */
/* One vector x of row r: the k terms (zA, zB: Z's vectors), then x. One
 * term and no decay (a = 1) is one FMA, s + e z rounded once (ru_plain). */
#define RU_VEC(x, r, zA, zB)                                                                   \
    do {                                                                                       \
        if (VNAME(ru_plain)(kk, scale)) {                                                      \
            x = v_fma(e0[r], zA, x);                                                           \
        } else {                                                                               \
            const vreal p_ = kk > 1 ? v_fma(e0[r], zA, v_mul(e1[r], zB)) : v_mul(e0[r], zA); \
            x = VNAME(decay_add)(scale, av, x, p_);                                            \
        }                                                                                      \
    } while (0)

/* Rows r0 .. r0+rows-1 (rows = 1 or 2, sharing the loads of Z). The stores
 * are aligned to the vector size whatever S's alignment (a split store
 * costs about twice an aligned one): the main loop starts at the first
 * aligned column, and the columns before and after it are covered by one
 * unaligned vector at each end, computed from the original values before
 * the main loop stores anything and stored after it, so the columns they
 * share with the main loop receive the same values twice. Each element's
 * arithmetic is the same in every case. */
VINLINE void VNAME(ru_stream_rows)(const int rows, const int kk, const int scale, int64_t r0,
                                   int64_t n, vreal av, REAL *S, int64_t lds, const REAL *E,
                                   int64_t lde, const REAL *Z, int64_t ldz)
{
    REAL *s[2] = {S + r0 * lds, S + (r0 + 1) * lds};
    const REAL *z1 = Z + ldz;
    vreal e0[2], e1[2];
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++) {
        e0[r] = v_set1(E[(r0 + r) * lde]);
        e1[r] = v_set1(kk > 1 ? E[(r0 + r) * lde + 1] : 0);
    }
    if (n < VL) {
        const vmask tm = v_mask(n);
        const vreal za = v_load_mask(Z, tm), zb = kk > 1 ? v_load_mask(z1, tm) : za;
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++) {
            vreal x = v_load_mask(s[r], tm);
            RU_VEC(x, r, za, zb);
            v_store_mask(s[r], tm, x);
        }
        return;
    }
    const int64_t p = (int64_t)((VL - ((uintptr_t)s[0] / sizeof(REAL)) % VL) % VL);
    const int64_t jend = p + (n - p) / VL * VL;
    vreal head[2] = {v_zero(), v_zero()}, tail[2] = {v_zero(), v_zero()};
    if (p > 0) {
        const vreal za = v_loadu(Z), zb = kk > 1 ? v_loadu(z1) : za;
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++) {
            head[r] = v_loadu(s[r]);
            RU_VEC(head[r], r, za, zb);
        }
    }
    if (jend < n) {
        const vreal za = v_loadu(Z + n - VL), zb = kk > 1 ? v_loadu(z1 + n - VL) : za;
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++) {
            tail[r] = v_loadu(s[r] + n - VL);
            RU_VEC(tail[r], r, za, zb);
        }
    }
#pragma GCC unroll 2
    for (int64_t j = p; j < jend; j += VL) {
        const vreal za = v_loadu(Z + j), zb = kk > 1 ? v_loadu(z1 + j) : za;
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++) {
            vreal x = v_loadu(s[r] + j);
            RU_VEC(x, r, za, zb);
            v_storeu(s[r] + j, x);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++) {
        if (p > 0) v_storeu(s[r], head[r]);
        if (jend < n) v_storeu(s[r] + n - VL, tail[r]);
    }
}
/* Every row made of whole aligned vectors (the framework's padded work
 * matrices): no head or tail, and nothing to set up per row but the
 * coefficients. At n = 64 the per-row set-up of the general path cost as
 * much as the row itself. */
VINLINE void VNAME(ru_stream_aligned)(const int kk, const int scale, int64_t m, int64_t n, vreal av,
                                      REAL *S, int64_t lds, const REAL *E, int64_t lde,
                                      const REAL *Z, int64_t ldz)
{
    const REAL *z1 = Z + ldz;
    for (int64_t r = 0; r < m; r++) {
        REAL *s = S + r * lds;
        const vreal e0[1] = {v_set1(E[r * lde])}, e1[1] = {v_set1(kk > 1 ? E[r * lde + 1] : 0)};
#pragma GCC unroll 4
        for (int64_t j = 0; j < n; j += VL) {
            vreal x = v_loadu(s + j);
            RU_VEC(x, 0, v_loadu(Z + j), v_loadu(z1 + j));
            v_storeu(s + j, x);
        }
    }
}
#undef RU_VEC

VINLINE void VNAME(ru_stream)(const int kk, const int scale, int64_t m, int64_t n, REAL a, REAL *S,
                              int64_t lds, const REAL *E, int64_t lde, const REAL *Z, int64_t ldz)
{
    const vreal av = v_set1(a);
    if (n % VL == 0 && lds % VL == 0 && (uintptr_t)S % (VL * sizeof(REAL)) == 0) {
        VNAME(ru_stream_aligned)(kk, scale, m, n, av, S, lds, E, lde, Z, ldz);
        return;
    }
    int64_t r = 0;
    for (; r + 2 <= m; r += 2) VNAME(ru_stream_rows)(2, kk, scale, r, n, av, S, lds, E, lde, Z, ldz);
    if (r < m) VNAME(ru_stream_rows)(1, kk, scale, r, n, av, S, lds, E, lde, Z, ldz);
}

static void VNAME(rank_update)(int64_t m, int64_t n, int64_t k, REAL a, REAL *S, int64_t lds,
                               const REAL *E, int64_t lde, const REAL *Z, int64_t ldz)
{
    if (m <= 0 || n <= 0 || (k <= 0 && a == 1)) return;
    if (k == 1 || k == 2) {
        if (a != 1) {
            if (k == 1) VNAME(ru_stream)(1, 1, m, n, a, S, lds, E, lde, Z, ldz);
            else VNAME(ru_stream)(2, 1, m, n, a, S, lds, E, lde, Z, ldz);
        } else {
            if (k == 1) VNAME(ru_stream)(1, 0, m, n, a, S, lds, E, lde, Z, ldz);
            else VNAME(ru_stream)(2, 0, m, n, a, S, lds, E, lde, Z, ldz);
        }
        return;
    }
    const VNAME(ax_args) g = {
        .P = E, .rs = lde, .cs = 1, .B = Z, .ldb = ldz, .C = S, .ldc = lds,
        .read_c = 1, .do_scale = a != 1, .scale = a,
    };
    VNAME(axpy)(&g, 0, m, n, k > 0 ? k : 0);
}
