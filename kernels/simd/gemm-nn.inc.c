/* C = beta*C + A B, SIMD: the axpy form of the scalar kernel (each row of C
 * a sum of rows of B) with a register tile of AX_MR rows x AX_NV vectors
 * (axpy.inc.c). The scalar kernel skips zero coefficients (the causal
 * mask); here each row block runs only over the k range where some of its
 * coefficients are nonzero, which drops the masked triangle. */
static void VNAME(gemm_nn)(int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                           const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc)
{
    if (M <= 0 || N <= 0) return;
    const VNAME(ax_args) g = {
        .P = A, .rs = lda, .cs = 1, .B = B, .ldb = ldb, .C = C, .ldc = ldc,
        .read_c = beta != 0, .do_scale = beta != 1, .scale = beta,
    };
    VNAME(axpy)(&g, 1, M, N, K);
}
