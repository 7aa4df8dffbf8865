/* The whole-call backends' rows (src/backends.c): the MPFR reference, which
 * a program attaches (falcon_advanced.h; the reference is libfalcon-ref),
 * and CUDA (kernels/cuda). Each runs on a view of the working copy of the
 * state and writes its memory; the keys, history and commit are falcon_run's. */
#include <stdatomic.h>
#include "internal.h"

static _Atomic(falcon_reference_run) attached;
static _Atomic(falcon_reference_grad) attached_grad;

void falcon_backend_attach_reference(falcon_reference_run run) { atomic_store(&attached, run); }
void falcon_backend_attach_reference_grad(falcon_reference_grad grad) { atomic_store(&attached_grad, grad); }

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

falcon_status falcon_mpfr_backward(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state *state, const void *dO, const double *dS_T,
                                   const falcon_grads *grads)
{
    const falcon_reference_grad grad = atomic_load(&attached_grad);
    if (!grad)
        return falcon_fail_in("config.backend", "backend-unavailable", FALCON_E_UNAVAILABLE,
                              "backend mpfr: no reference backward attached (link libfalcon-ref)");
    falcon_state *fresh = NULL;
    if (!state) {
        const falcon_status s = falcon_state_create(in->B * in->H, in->n, in->m, cfg->window, &fresh);
        if (s) return s;
        state = fresh;
    }
    const falcon_state_view view = falcon_state_get_view(state);
    const falcon_status s = grad(cfg, in, &view, dO, dS_T, grads);
    falcon_state_free(fresh);
    return s;
}

falcon_status falcon_cuda_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                              void *out)
{
    const falcon_state_view view = falcon_state_get_view(work);
    char why[640] = "";
    const falcon_status s = falcon_cuda_run_view(cfg, in, &view, work->S, out, why, sizeof why);
    return s ? falcon_fail(s, "%s", why) : FALCON_OK;
}
