/* The CPU emulation of the CUDA backend's kernels (tests only). */
#ifndef FALCON_CUDA_EMULATE_H
#define FALCON_CUDA_EMULATE_H

#include "../../kernels/cuda/cuda_api.h"

/* Settings of the emulated device: shared memory per block (bytes), threads
 * per block (0: the plan's default), and the order of threads in a phase. */
extern int64_t fc_emu_smem_bytes;
extern int fc_emu_threads;
extern int fc_emu_reverse;
/* The layout and block size the last emulated run used. */
extern fc_layout fc_emu_last_layout;
extern int fc_emu_last_threads;

int fc_emu_exec(fc_problem *pb, float *out, float *S_out, char *msg, size_t len);
/* The backward (fc_backward.h): workspace and features poisoned as above. */
int fc_emu_bw_exec(fc_grad_problem *gp, char *msg, size_t len);

#endif
