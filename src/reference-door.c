/* The mpfr backend's row (src/backends.c) runs whatever reference a program
 * attached (falcon_advanced.h): the reference itself is libfalcon-ref. */
#include <stdatomic.h>
#include "internal.h"
#include "falcon_advanced.h"

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
