/* The cuda backend when the library is built without CUDA (no nvcc, or
 * NVCC=/nonexistent as the sanitizer and fuzzing builds do; mk/cuda.mk). */
#include <stdio.h>
#include "../internal.h"

int falcon_cuda_available(void) { return 0; }
const char *falcon_cuda_describe(void) { return "cuda (not compiled in)"; }
falcon_status falcon_cuda_run_view(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   char *why, size_t len)
{
    (void)cfg; (void)in; (void)state; (void)memory; (void)out;
    snprintf(why, len, "backend cuda: this build has no CUDA support");
    return FALCON_E_UNAVAILABLE;
}
falcon_status falcon_cuda_backward_view(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, char *why, size_t len)
{
    (void)cfg; (void)in; (void)state; (void)dO; (void)dS_T; (void)grads; (void)checkpoint;
    snprintf(why, len, "backend cuda: this build has no CUDA support");
    return FALCON_E_UNAVAILABLE;
}
