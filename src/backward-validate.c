/*
 * falcon_backward's own checks (docs/math.md sections 10 and 12), after
 * falcon_run's: the cotangents (dO finite in the run's element type, dS_T
 * finite and within the run's precision) and the gradient buffers (present
 * exactly where the call has such an input). Nothing is written before
 * they pass.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "internal.h"

/* dO: [B][T][H][m] in the run's element type, or NULL. */
static falcon_status check_dO(const falcon_plan *plan, const falcon_inputs *in, const void *dO)
{
    const falcon_precision p = plan->cfg.precision;
    const int64_t count = in->B * in->T * in->H * in->m;
    if (!dO || in->T == 0 || falcon_all_finite_fast(dO, p, count, plan->cfg.threads)) return FALCON_OK;
    for (int64_t i = 0; i < count; i++) {
        const double x = falcon_load(dO, p, i);
        if (isfinite(x)) continue;
        const int64_t row = i / in->m, h = row % in->H, t = (row / in->H) % in->T, b = row / (in->H * in->T);
        return falcon_blame_at(falcon_fail(FALCON_E_NONFINITE, "dO[%lld] = %g: cotangents must be finite",
                                           (long long)i, x),
                               "dO", "finite", i, t, b * in->H + h);
    }
    return FALCON_OK;
}

/* dS_T: [heads][m][n] double, or NULL; below fp64 each value must round
 * to a finite float, as a carried memory must (the kernels hold it so). */
static falcon_status check_dS_T(const falcon_plan *plan, const falcon_inputs *in, const double *dS_T)
{
    if (!dS_T) return FALCON_OK;
    const int64_t per = in->m * in->n, count = falcon_inputs_state_heads(in) * per;
    const int64_t bad = falcon_first_unfit(dS_T, count, 0x7ff0000000000000ull, 0);
    if (bad >= 0)
        return falcon_blame_at(falcon_fail(FALCON_E_NONFINITE, "dS_T[%lld] = %g: cotangents must be finite",
                                           (long long)bad, dS_T[bad]),
                               "dS_T", "finite", bad, -1, bad / per);
    if (plan->cfg.precision == FALCON_FP64) return FALCON_OK;
    const int64_t unfit = falcon_first_unfit(dS_T, count, falcon_f32_unfit_limit(), 0);
    if (unfit >= 0)
        return falcon_blame_at(falcon_fail(FALCON_E_RANGE, "dS_T[%lld] = %g does not fit in float32, the run's "
                                           "precision", (long long)unfit, dS_T[unfit]),
                               "dS_T", "state-fit", unfit, -1, unfit / per);
    return FALCON_OK;
}

/* A gradient buffer that must be given exactly when `wanted`. */
static falcon_status check_present(const char *name, const void *p, int wanted, const char *why)
{
    if (wanted && !p)
        return falcon_fail_in(name, "grad-required", FALCON_E_ARGUMENT, "grads.%s is NULL: %s", name, why);
    if (!wanted && p)
        return falcon_fail_in(name, "grad-unexpected", FALCON_E_ARGUMENT, "grads.%s given: %s", name, why);
    return FALCON_OK;
}

falcon_status falcon_backward_validate(const falcon_plan *plan, const falcon_inputs *in, const void *dO,
                                       const double *dS_T, const falcon_grads *grads)
{
    falcon_status s;
    if ((s = check_dO(plan, in, dO)) || (s = check_dS_T(plan, in, dS_T))) return s;
    if (!grads) return falcon_fail_in("grads", "null", FALCON_E_ARGUMENT, "grads is NULL");
    const char *null = in->T == 0 ? NULL
                       : !grads->dq ? "dq" : !grads->dk ? "dk" : !grads->dv ? "dv" : !grads->dbeta ? "dbeta" : NULL;
    if (null) return falcon_fail_in(null, "null", FALCON_E_ARGUMENT, "grads.%s is NULL", null);
    const int gains = falcon_variant_has_gain(plan->cfg.variant);
    if ((s = check_present("dalpha", grads->dalpha, in->alpha != NULL,
                           in->alpha ? "the inputs have a decay alpha" : "the inputs have no decay alpha")))
        return s;
    if (gains && in->T == 0) return FALCON_OK; /* no steps: no gains to differentiate */
    return check_present("dgain", grads->dgain, gains,
                         gains ? "the variant has per-column gains" : "the variant has no gains");
}
