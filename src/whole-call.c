/* The whole-call backends' rows (src/backends.c): the MPFR reference, which
 * a program attaches (falcon_advanced.h; the reference is libfalcon-ref),
 * and CUDA (kernels/cuda). Each runs on a view of the working copy of the
 * state and writes its memory; the keys, history and commit are falcon_run's. */
#include <stdatomic.h>
#include "internal.h"

static _Atomic(falcon_reference_run) attached;

void falcon_backend_attach_reference(falcon_reference_run run) { atomic_store(&attached, run); }

int falcon_mpfr_available(void) { return atomic_load(&attached) != NULL; }

falcon_status falcon_mpfr_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    const falcon_reference_run run = atomic_load(&attached);
    if (!run)
        return falcon_fail(FALCON_E_UNAVAILABLE, "backend mpfr: no reference attached (link libfalcon-ref)");
    const falcon_state_view view = falcon_state_get_view(work);
    return run(cfg, in, &view, work->S, out);
}

falcon_status falcon_cuda_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    const falcon_state_view view = falcon_state_get_view(work);
    char why[640] = "";
    const falcon_status s = falcon_cuda_run_view(cfg, in, &view, work->S, out, why, sizeof why);
    return s ? falcon_fail(s, "%s", why) : FALCON_OK;
}
