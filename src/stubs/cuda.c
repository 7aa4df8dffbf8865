/* The cuda backend when the library is built without CUDA (no nvcc, or
 * NVCC=/nonexistent as the sanitizer and fuzzing builds do; mk/cuda.mk). */
#include "../internal.h"

int falcon_cuda_available(void) { return 0; }
const char *falcon_cuda_describe(void) { return "cuda (not compiled in)"; }
falcon_status falcon_cuda_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    (void)cfg; (void)in; (void)work; (void)out;
    return falcon_fail(FALCON_E_UNAVAILABLE, "backend cuda: this build has no CUDA support");
}
