/* C = beta*C + A B^T, portable scalar. Four columns of C share each load of
 * a row of A; four independent accumulators per column keep the FMA units
 * busy without reassociating more than a fixed, deterministic pattern. */
static void RS(gemm_nt_scalar)(int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                               const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++) {
        const REAL *a = A + i * lda;
        REAL *c = C + i * ldc;
        int64_t j = 0;
        for (; j + 4 <= N; j += 4) {
            const REAL *b0 = B + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
            REAL s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int64_t k = 0; k < K; k++) {
                REAL ak = a[k];
                s0 += ak * b0[k];
                s1 += ak * b1[k];
                s2 += ak * b2[k];
                s3 += ak * b3[k];
            }
            if (beta == 0) {
                c[j] = s0; c[j + 1] = s1; c[j + 2] = s2; c[j + 3] = s3;
            } else {
                c[j] = beta * c[j] + s0;
                c[j + 1] = beta * c[j + 1] + s1;
                c[j + 2] = beta * c[j + 2] + s2;
                c[j + 3] = beta * c[j + 3] + s3;
            }
        }
        for (; j < N; j++) {
            const REAL *b = B + j * ldb;
            REAL s = 0;
            for (int64_t k = 0; k < K; k++)
                s += a[k] * b[k];
            c[j] = beta == 0 ? s : beta * c[j] + s;
        }
    }
}

/* The copy, then the 1 x 2 product (kernels/ukernel.h). */
static void RS(dot2_copy_scalar)(int64_t K, const REAL *A, REAL *B, int64_t ldb, const REAL *src, REAL *C)
{
    for (int64_t k = 0; k < K; k++) B[ldb + k] = src[k];
    RS(gemm_nt_scalar)(1, 2, K, A, K, B, ldb, 0, C, 2);
}
