/*
 * The seam between the C side of the CUDA backend (kernels/cuda/cuda_host.c,
 * compiled by the C compiler, which knows the library's state and error
 * conventions) and the CUDA side (kernels/cuda/cuda_kernels.cu, compiled by
 * nvcc, which knows only fp32 arrays). An executor takes a problem whose
 * input pointers are host arrays, runs it somewhere, and returns the reads
 * and the final memory as host fp32 arrays. Two executors exist: the GPU
 * (fc_dev_exec) and, for tests only, a sequential emulation of the same
 * kernel code on the CPU (verify/cuda/cuda_emulate.c).
 */
#ifndef FALCON_CUDA_API_H
#define FALCON_CUDA_API_H

#include <stddef.h>
#include <stdint.h>
#include "falcon.h"
#include "fc_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Executor results (the C side maps them to falcon_status). */
enum { FC_OK = 0, FC_ERR_UNAVAILABLE = 1, FC_ERR_NOMEM = 2, FC_ERR_TOO_LARGE = 3 };

/* Run pb (host input pointers; features, outputs and workspace unset):
 * out [B][T][H][m] and S_out [heads][m][n] are host fp32 arrays. On error,
 * returns FC_ERR_* with a message in msg and leaves out and S_out unwritten. */
typedef int (*fc_executor)(fc_problem *pb, float *out, float *S_out, char *msg, size_t len);

/* Choose threads per block, column slices and the workspace layout for a
 * device whose blocks can have smem_bytes of dynamic shared memory.
 * threads = 0 picks the default. Returns FC_OK or FC_ERR_TOO_LARGE (msg). */
int fc_plan(fc_problem *pb, int64_t smem_bytes, int threads, char *msg, size_t len);

/* The backward (fc_backward.h): run gp (host input, cotangent and gradient
 * pointers, gp->c and gp->nseg set; features and workspace unset) and
 * write its gradients into those host arrays. Errors as fc_executor's. */
typedef int (*fc_bw_executor)(fc_grad_problem *gp, char *msg, size_t len);

/* The backward's plan: threads per block (threads = 0: one per row or
 * column of the wider side, in warps, at most FC_MAX_THREADS) and the
 * per-head global workspace. FC_OK or FC_ERR_TOO_LARGE (msg). */
int fc_bw_plan(fc_grad_problem *gp, int threads, char *msg, size_t len);

/* ---- the GPU (kernels/cuda/cuda_kernels.cu) ---- */
/* 1 if a device of compute capability >= 8.0 is current; else 0 and why. */
int fc_dev_usable(char *why, size_t len);
/* One line on the device in use (or why there is none). */
void fc_dev_describe(char *buf, size_t len);
int fc_dev_exec(fc_problem *pb, float *out, float *S_out, char *msg, size_t len);
int fc_dev_bw_exec(fc_grad_problem *gp, char *msg, size_t len);
/* Measured fp32 FMA throughput of the device in FLOP/s (2 per FMA), or 0. */
double fc_dev_fp32_peak(void);
/* Nonzero: fc_dev_exec times the kernels and stores the last run's kernel
 * milliseconds (prep + main, no copies) in *ms. For benchmarks. */
void fc_dev_set_timing(int on);
double fc_dev_last_kernel_ms(void);

/* ---- the C side (kernels/cuda/cuda_host.c) ---- */
/* The backend's entry (falcon_cuda_run_view) with a chosen executor: checks
 * what the CUDA backend supports, converts the carried state (a view) to
 * fp32, runs, writes out (fp32) and memory ([heads][m][n], double). On
 * error, a status and a message in why. The library passes fc_dev_exec;
 * tests pass the emulator. */
falcon_status falcon_cuda_run_with(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   fc_executor exec, char *why, size_t len);
/* The backend as the library calls it (src/whole-call.c). */
falcon_status falcon_cuda_run_view(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   char *why, size_t len);
/* The backward pass (falcon_backward on the cuda backend) with a chosen
 * executor: fp32 only; grads as falcon_backward takes them (validated by
 * it), dO NULL or dS_T NULL for 0; checkpoint: the spacing of the memory's
 * checkpoints in steps (0: about sqrt(T)). T = 0 is falcon_backward's own
 * (nothing is done here). On error, a status and a message in why. */
falcon_status falcon_cuda_backward_with(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, fc_bw_executor exec,
                                        char *why, size_t len);
/* The backward as the library calls it (src/backward.c): the GPU. */
falcon_status falcon_cuda_backward_view(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, char *why, size_t len);
int falcon_cuda_available(void);
const char *falcon_cuda_describe(void);

#ifdef __cplusplus
}
#endif

#endif
