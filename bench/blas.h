/*
 * blas.h: the benchmark's yardstick, the tuned BLAS (OpenBLAS) on the GEMM
 * shapes of one chunk-form block, on one thread. What the kernels' fraction
 * of peak is to be read against: "BLAS-achievable" is the fraction of the
 * probed FMA peak that OpenBLAS reaches on the same products.
 *
 * One block of C steps of one head (Falcon-1/2, window 1), row-major, the
 * calls of kernels/framework/flops.h's model:
 *     gemm  [X;Q] Z^T       2C x C x n      (Kz and Qz)
 *     gemm  [X;Q] S^T       2C x m x n      (U and S0q)
 *     trsm  (I + A) R = RHS C x C lower triangle, m columns (in place on the
 *                           X rows of the previous product)
 *     gemm  W R             C x m x C       (dense, as the model counts it)
 *     gemm  S += R^T Z      m x n x C       (the end-of-block rank update)
 * whose flops are exactly the model's count of one block,
 * falcon_flops(chunk, regression, C, n, m, 1, C) = 4C^2 n + 6Cmn + 3C^2 m.
 * Operands are one head's, so they stay in cache across repeated blocks.
 *
 * Built without OpenBLAS (mk/bench.mk finds none through pkg-config, or
 * OPENBLAS=0), fb_blas_available() is 0 and nothing else may be called.
 */
#ifndef FALCON_BENCH_BLAS_H
#define FALCON_BENCH_BLAS_H

#include <stdint.h>

/* 1 when the benchmark was built with OpenBLAS. Sets it to one thread. */
int fb_blas_available(void);
/* "OpenBLAS <config>, core <name>, 1 thread", or why it is unavailable. */
const char *fb_blas_describe(void);

/* OpenBLAS picks its kernels once, when it is loaded, by the CPU's model, and
 * one that does not know the CPU takes it for an old core (Debian 12's 0.3.21
 * takes a Xeon of model 207 for a Prescott: SSE3 kernels on an AVX-512
 * machine), which would make the yardstick a strawman. Then, unless
 * OPENBLAS_CORETYPE is set already, this sets it to the newest core of
 * OpenBLAS's that the CPU's flags allow (SkylakeX with AVX-512, Haswell with
 * AVX2 and FMA) and executes the program again with the same arguments
 * (/proc/self/cmdline); it returns when there is nothing to do or the exec
 * failed. OPENBLAS_CORETYPE=... in the environment keeps OpenBLAS's choice.
 * It runs by itself before main() (a constructor of bench/blas.c; shared
 * libraries, OpenBLAS among them, are initialised first), so that nothing has
 * been printed or measured yet. */
void fb_blas_retarget(void);

typedef struct fb_blas_work fb_blas_work;

/* The operands of one chunk block (C > 0) of widths n, m, or of a plain
 * square GEMM n x n x n (C = 0, m ignored), in fp64 or fp32, filled with
 * seeded values. NULL when out of memory. */
fb_blas_work *fb_blas_new(int fp64, int64_t n, int64_t m, int64_t C);
/* One block (or one square GEMM). */
void fb_blas_run(fb_blas_work *w);
/* Its flops (an FMA = 2). */
double fb_blas_flops(const fb_blas_work *w);
void fb_blas_free(fb_blas_work *w);

/* GFLOPS of fb_blas_run on w by the calling thread's CPU clock (the probe's
 * clock): the median of `reps` timings of at least min_s seconds each. */
double fb_blas_measure(fb_blas_work *w, int reps, double min_s);

#endif
