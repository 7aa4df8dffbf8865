/*
 * The micro-kernel interface: the only code a CPU backend (scalar, AVX2,
 * AVX-512) provides. The framework (kernels/framework) expresses every
 * variant and form through these five operations, so the variant logic is
 * written once and an ISA only swaps the inner loops (BLIS-style).
 * Matrices are row-major with explicit leading dimensions.
 */
#ifndef FALCON_UKERNEL_H
#define FALCON_UKERNEL_H

#include <stdint.h>

#define FALCON_UK_DECLARE(R, SFX)                                                        \
    typedef struct falcon_uk_##SFX {                                                   \
        const char *name;                                                              \
        /* C[M][N] = beta*C + A[M][K] * B[N][K]^T (beta = 0: C is not read) */          \
        void (*gemm_nt)(int64_t M, int64_t N, int64_t K, const R *A, int64_t lda,      \
                        const R *B, int64_t ldb, R beta, R *C, int64_t ldc);           \
        /* C[M][N] = beta*C + A[M][K] * B[K][N] (beta = 0: C is not read) */            \
        void (*gemm_nn)(int64_t M, int64_t N, int64_t K, const R *A, int64_t lda,      \
                        const R *B, int64_t ldb, R beta, R *C, int64_t ldc);           \
        /* S[m][n] = a*S + E[m][k] Z[k][n]: decay plus rank-k write (E's row r */      \
        /* holds the k coefficients of S's row r: the chunk block's Z^T)        */      \
        void (*rank_update)(int64_t m, int64_t n, int64_t k, R a, R *S, int64_t lds,   \
                            const R *E, int64_t lde, const R *Z, int64_t ldz);         \
        /* X[P][m] <- (I + L)^{-1} X, L[P][P] strictly lower (diagonal, upper unread) */ \
        void (*trsm_unit_lower)(int64_t P, int64_t m, const R *L, int64_t ldl, R *X,   \
                                int64_t ldx);                                          \
        /* S as rank_update (k = 0, a = 1: unchanged), then P[r][n] = X[r][m] S   */  \
        /* with the new S, in one pass over S; P is not read. Each P element is */  \
        /* 0, then one FMA per row of S, every row (zeros included), in an    */  \
        /* order that depends only on r. f != 1 first multiplies S by f (each */  \
        /* element rounded: bit for bit S *= f on its own, then the call with */  \
        /* f = 1): a lazy decay's fold, made in the same pass.                */  \
        void (*update_read)(int64_t m, int64_t n, int64_t k, R a, R f, R *S, int64_t lds, \
                            const R *E, int64_t lde, const R *Z, int64_t ldz, int64_t r, \
                            const R *X, int64_t ldx, R *P, int64_t ldp);               \
        /* B's row 1 (B + ldb) = src[0..K), then C[0..2) = A[0..K) B^T: the  */  \
        /* recurrent step's [z.x, z.q] with q copied as it is read; bit for   */  \
        /* bit the copy, then gemm_nt(1, 2, K, A, K, B, ldb, 0, C, 2).        */  \
        void (*dot2_copy)(int64_t K, const R *A, R *B, int64_t ldb, const R *src, R *C);  \
        /* The largest blocks the kernels tile a dimension by: rows, and    */  \
        /* columns in elements (the 1- and 2-row axpy tiles take twice      */  \
        /* tile_cols): the tests run each dimension to 2 x its block + 1.   */  \
        int tile_rows, tile_cols;                                                      \
    } falcon_uk_##SFX;

FALCON_UK_DECLARE(float, f32)
FALCON_UK_DECLARE(double, f64)

/* Each backend defines falcon_uk_<backend>_<f32|f64>; src/backends.c
 * (the registry) refers only to the ones the build compiled in. */
extern const falcon_uk_f32 falcon_uk_scalar_f32;
extern const falcon_uk_f64 falcon_uk_scalar_f64;

#endif
