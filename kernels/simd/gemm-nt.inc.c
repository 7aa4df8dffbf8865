/* C = beta*C + A B^T, SIMD (written against the vec-*.h abstraction, so the
 * AVX-512 backend compiles this same file). Both operands run along K, so
 * each C element is a dot product: a register tile of mr rows of A x nr
 * rows of B keeps one vector accumulator per element, streams K with FMAs
 * (a masked last vector for the K tail), and reduces horizontally once at
 * the end with v_reduce4. Every element is computed by the same sequence
 * (lane-wise FMAs along K in order, then a fixed reduction tree) whatever
 * tile or tail it falls in, so results depend neither on M, N nor on the
 * alignment of the pointers.
 *
 * Tile shapes keep NT_MR*NT_NR accumulators: nr = NT_NR rows of B with
 * NT_MR rows of A (per K step, nr + mr loads feed mr*nr FMAs); for N tails
 * nr = 2 and 1 with 2x and 4x the rows of A. The recurrent form's S*[x q] (N = 2) thus
 * streams S once, 2*NT_MR rows at a time, two accumulators per row. Row
 * tails go down by powers of two. */
_Static_assert(NT_NR == 4, "gemm_nt tiles assume NT_NR == 4");
_Static_assert((NT_MR & (NT_MR - 1)) == 0, "NT_MR must be a power of two");

/* copy (dot2_copy, below; a compile-time constant, 0 for gemm_nt): B's
 * row 1 is read from src instead and stored into dst as it is loaded. */
VINLINE void VNAME(nt_tile)(const int mr, const int nr, int64_t K, const REAL *A, int64_t lda,
                            const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc, const int copy,
                            const REAL *src, REAL *dst)
{
    vreal acc[NT_MR * NT_NR + 3];
#pragma GCC unroll 64
    for (int u = 0; u < mr * nr + 3; u++) acc[u] = v_zero();
    int64_t k = 0;
#pragma GCC unroll 2
    for (; k + VL <= K; k += VL) {
        vreal b[NT_NR];
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) {
            if (copy && j == 1) {
                b[j] = v_loadu(src + k);
                v_storeu(dst + k, b[j]);
            } else {
                b[j] = v_loadu(B + j * ldb + k);
            }
            V_KEEP(b[j]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            vreal a = v_loadu(A + i * lda + k);
            if (nr > 1) V_KEEP(a);
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) acc[i * nr + j] = v_fma(a, b[j], acc[i * nr + j]);
        }
    }
    if (k < K) {
        const vmask km = v_mask(K - k);
        vreal b[NT_NR];
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) {
            if (copy && j == 1) {
                b[j] = v_load_mask(src + k, km);
                v_store_mask(dst + k, km, b[j]);
            } else {
                b[j] = v_load_mask(B + j * ldb + k, km);
            }
        }
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++) {
            const vreal a = v_load_mask(A + i * lda + k, km);
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) acc[i * nr + j] = v_fma(a, b[j], acc[i * nr + j]);
        }
    }
    if (beta == 0 && (nr == 4 || ldc == nr)) {
        /* each group of four sums is contiguous in C: a row of the tile
         * (nr = 4), or consecutive rows of a C whose rows are the tile's */
#pragma GCC unroll 16
        for (int u = 0; u < mr * nr; u += 4) {
            if (u + 4 <= mr * nr) {
                v_reduce4(acc[u], acc[u + 1], acc[u + 2], acc[u + 3],
                          nr == 4 ? C + (u / 4) * ldc : C + u);
            } else {
                REAL s[4];
                v_reduce4(acc[u], acc[u + 1], acc[u + 2], acc[u + 3], s);
                /* 1 to 3 sums left (u + 4 > mr nr): written out, as GCC at
                 * -O1 does not see that a loop over them stops at 3 */
                C[u] = s[0];
                if (u + 1 < mr * nr) C[u + 1] = s[1];
                if (u + 2 < mr * nr) C[u + 2] = s[2];
            }
        }
        return;
    }
    REAL s[NT_MR * NT_NR + 3];
#pragma GCC unroll 16
    for (int u = 0; u < mr * nr; u += 4) v_reduce4(acc[u], acc[u + 1], acc[u + 2], acc[u + 3], s + u);
    if (beta == 0) {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) C[i * ldc + j] = s[i * nr + j];
    } else {
#pragma GCC unroll 16
        for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) C[i * ldc + j] = beta * C[i * ldc + j] + s[i * nr + j];
    }
}

/* All M rows of A against nr rows of B: tiles of mr0 rows, then tails. */
VINLINE void VNAME(nt_rows)(const int nr, const int mr0, int64_t M, int64_t K, const REAL *A,
                            int64_t lda, const REAL *B, int64_t ldb, REAL beta, REAL *C,
                            int64_t ldc)
{
    int64_t i = 0;
    for (; i + mr0 <= M; i += mr0)
        VNAME(nt_tile)(mr0, nr, K, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc, 0, NULL, NULL);
    if (mr0 > 8 && M - i >= 8) {
        VNAME(nt_tile)(8, nr, K, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc, 0, NULL, NULL);
        i += 8;
    }
    if (mr0 > 4 && M - i >= 4) {
        VNAME(nt_tile)(4, nr, K, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc, 0, NULL, NULL);
        i += 4;
    }
    if (mr0 > 2 && M - i >= 2) {
        VNAME(nt_tile)(2, nr, K, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc, 0, NULL, NULL);
        i += 2;
    }
    if (mr0 > 1 && M - i >= 1)
        VNAME(nt_tile)(1, nr, K, A + i * lda, lda, B, ldb, beta, C + i * ldc, ldc, 0, NULL, NULL);
}

static void VNAME(gemm_nt)(int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                           const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc)
{
    int64_t j = 0;
    /* B's NT_NR-row panel stays in L1 while the rows of A stream past it. */
    for (; j + 4 <= N; j += 4)
        VNAME(nt_rows)(4, NT_MR, M, K, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
    if (N - j >= 2) {
        VNAME(nt_rows)(2, 2 * NT_MR, M, K, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
        j += 2;
    }
    if (N - j >= 1) VNAME(nt_rows)(1, 4 * NT_MR, M, K, A, lda, B + j * ldb, ldb, beta, C + j, ldc);
}

/* gemm_nt(1, 2) with B's row 1 copied in from src as it is loaded
 * (kernels/ukernel.h): the same tile, so the same bits as the copy followed
 * by gemm_nt. The recurrent step calls it once per step; as featurize and
 * gemm_nt it read q twice and went through the tile dispatch
 * (docs/performance.md, "SIMD kernels: dot2_copy"). */
static void VNAME(dot2_copy)(int64_t K, const REAL *A, REAL *B, int64_t ldb, const REAL *src, REAL *C)
{
    VNAME(nt_tile)(1, 2, K, A, K, B, ldb, 0, C, 2, 1, src, B + ldb);
}
