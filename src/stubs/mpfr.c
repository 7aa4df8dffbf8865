/* The mpfr backend when the library is built without MPFR (make MPFR=0):
 * used by kernels/cuda/device-check.sh on GPU machines without libmpfr-dev,
 * where the CUDA check then compares against the scalar fp64 backend. */
#include "../internal.h"

int falcon_mpfr_available(void) { return 0; }

falcon_status falcon_mpfr_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    (void)cfg; (void)in; (void)work; (void)out;
    return falcon_fail(FALCON_E_UNAVAILABLE, "backend mpfr: this build has no MPFR (libmpfr-dev missing)");
}
