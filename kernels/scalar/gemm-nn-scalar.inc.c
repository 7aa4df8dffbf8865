/* C = beta*C + A B, portable scalar: each row of C is a sum of rows of B
 * (axpy form), so the inner loop runs along contiguous memory. */
static void RS(gemm_nn_scalar)(int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                               const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++) {
        REAL *c = C + i * ldc;
        if (beta == 0)
            for (int64_t j = 0; j < N; j++) c[j] = 0;
        else if (beta != 1)
            RS(scale_row)(N, beta, c);
        for (int64_t k = K - 1; k >= 0; k--) { /* newest first, as the SIMD tiles */
            REAL aik = A[i * lda + k];
            if (aik == 0) continue; /* masked (causal) entries */
            const REAL *b = B + k * ldb;
            if (RS(tiny)(aik))
                RS(axpy_row_wide)(N, aik, b, c);
            else
                RS(axpy_row)(N, aik, b, c);
        }
    }
}
