/* falcon_backward (docs/math.md section 12): validate everything, pick the
 * backend's backward for the form, run it on the caller's state (read
 * only), check that the gradients are finite. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "backends.h"

static _Atomic int64_t checkpoint_steps;

int64_t falcon_backward_checkpoint(void) { return checkpoint_steps; }
void falcon_set_backward_checkpoint(int64_t steps) { checkpoint_steps = steps > 0 ? steps : 0; }

/* UNAVAILABLE unless the resolved backend has a backward pass for the form
 * and precision. tf32 and bf16 take the fp32 kernels' chunk backward with
 * their operand model (docs/math.md 12.4); falcon_validate_plan has refused
 * them for the other forms and for the mpfr and cuda backends, with
 * falcon_run's rules. */
static falcon_status check_route(const falcon_plan *plan)
{
    const falcon_config *cfg = &plan->cfg;
    if (plan->backend == FALCON_BACKEND_MPFR) return FALCON_OK; /* falcon_mpfr_backward says if none is attached */
    if (plan->backend == FALCON_BACKEND_CUDA) return FALCON_OK; /* fp32, every form: falcon_cuda_backward_view */
    if (plan->row->run)
        return falcon_fail_in("config.backend", "backend-unavailable", FALCON_E_UNAVAILABLE,
                              "backend %s: no backward yet", plan->backend_name);
    const int recurrent = cfg->form == FALCON_FORM_RECURRENT;
    const int have = cfg->precision == FALCON_FP64
                         ? (recurrent ? falcon_backend_cpu_f64(plan->row)->fw->backward_recurrent != NULL
                                      : falcon_backend_cpu_f64(plan->row)->fw->backward_blocked != NULL)
                         : (recurrent ? falcon_backend_cpu_f32(plan->row)->fw->backward_recurrent != NULL
                                      : falcon_backend_cpu_f32(plan->row)->fw->backward_blocked != NULL);
    if (!have)
        return falcon_fail_in("config.form", "backend-unavailable", FALCON_E_UNAVAILABLE,
                              "the %s form has no backward pass in backend %s yet (%s)", plan->form,
                              plan->backend_name, plan->precision);
    return FALCON_OK;
}

/* No steps: L = <S_0, dS_T>, so dS0 = dS_T, and nothing else is used. */
static void no_steps(const falcon_inputs *in, int64_t window, const double *dS_T, const falcon_grads *g)
{
    const int64_t heads = in->B * in->H, mn = in->m * in->n, keep = window - 1;
    if (g->dS0) {
        if (dS_T) memcpy(g->dS0, dS_T, sizeof(double) * (size_t)(heads * mn));
        else memset(g->dS0, 0, sizeof(double) * (size_t)(heads * mn));
    }
    if (g->dprev_key) memset(g->dprev_key, 0, sizeof(double) * (size_t)(heads * in->n));
    if (g->dhist_k) memset(g->dhist_k, 0, sizeof(double) * (size_t)(heads * keep * in->n));
    if (g->dhist_v) memset(g->dhist_v, 0, sizeof(double) * (size_t)(heads * keep * in->m));
}

/* A whole-call backend's gradients scanned: OVERFLOW naming the first
 * buffer with a value that is not finite. */
falcon_status falcon_backward_scan(const falcon_plan *plan, const falcon_inputs *in, const falcon_grads *g)
{
    const falcon_precision p = plan->cfg.precision;
    const int64_t rows = in->B * in->T * in->H, heads = in->B * in->H, keep = plan->cfg.window - 1;
    const struct {
        const char *name;
        const void *p;
        falcon_precision prec;
        int64_t count;
    } bufs[] = {
        {"dq", g->dq, p, rows * in->n},          {"dk", g->dk, p, rows * in->n},
        {"dv", g->dv, p, rows * in->m},          {"dbeta", g->dbeta, p, rows},
        {"dalpha", g->dalpha, p, rows},          {"dgain", g->dgain, p, rows * in->n},
        {"dS0", g->dS0, FALCON_FP64, heads * in->m * in->n},
        {"dprev_key", g->dprev_key, FALCON_FP64, heads * in->n},
        {"dhist_k", g->dhist_k, FALCON_FP64, heads * keep * in->n},
        {"dhist_v", g->dhist_v, FALCON_FP64, heads * keep * in->m},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (!bufs[i].p || falcon_all_finite_fast(bufs[i].p, bufs[i].prec, bufs[i].count, plan->cfg.threads))
            continue;
        for (int64_t j = 0; j < bufs[i].count; j++)
            if (!isfinite(falcon_load(bufs[i].p, bufs[i].prec, j)))
                return falcon_blame_at(falcon_fail(FALCON_E_OVERFLOW, "%s[%lld] is not finite: a gradient left "
                                                   "the range of %s", bufs[i].name, (long long)j, plan->precision),
                                       bufs[i].name, "overflow", j, -1, -1);
    }
    return FALCON_OK;
}

static falcon_status run_backward(const falcon_plan *plan, const falcon_inputs *in, const falcon_state *state,
                                  const void *dO, const double *dS_T, const falcon_grads *grads)
{
    const falcon_config *cfg = &plan->cfg;
    if (plan->backend == FALCON_BACKEND_MPFR) {
        const falcon_status s = falcon_mpfr_backward(cfg, in, state, dO, dS_T, grads);
        return s ? s : falcon_backward_scan(plan, in, grads);
    }
    falcon_state *fresh = NULL;
    if (!state) {
        const falcon_status s = falcon_state_create(in->B * in->H, in->n, in->m, cfg->window, &fresh);
        if (s) return s;
        state = fresh;
    }
    if (plan->backend == FALCON_BACKEND_CUDA) {
        const falcon_state_view view = falcon_state_get_view(state);
        char why[640] = "";
        falcon_status s = falcon_cuda_backward_view(cfg, in, &view, dO, dS_T, grads, falcon_backward_checkpoint(),
                                                    why, sizeof why);
        falcon_state_free(fresh);
        if (s == FALCON_E_NOMEM) return falcon_fail_in("", "out-of-memory", s, "%s", why);
        if (s) return falcon_fail_in("config.backend", "backend-unavailable", s, "%s", why);
        return falcon_backward_scan(plan, in, grads);
    }
    falcon_status s = cfg->precision == FALCON_FP64
                          ? falcon_backward_cpu_f64(cfg, in, state, dO, dS_T, grads, falcon_backend_cpu_f64(plan->row))
                          : falcon_backward_cpu_f32(cfg, in, state, dO, dS_T, grads, falcon_backend_cpu_f32(plan->row));
    falcon_clean_upper();
    falcon_state_free(fresh);
    if (s == FALCON_E_NOMEM)
        return falcon_fail_in("", "out-of-memory", s, "out of memory in the %s backend's backward", plan->backend_name);
    if (s == FALCON_E_OVERFLOW)
        return falcon_fail_in("grads", "overflow", s, "a gradient was not finite: it left the range of %s",
                              plan->precision);
    return s;
}

falcon_status falcon_backward_plan(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *state,
                                   const void *dO, const double *dS_T, const falcon_grads *grads, falcon_plan *plan)
{
    falcon_status s = falcon_plan_make(cfg, in, plan);
    if (s || (s = falcon_validate_plan(plan, in, state, 0))) return s;
    return falcon_backward_validate(plan, in, dO, dS_T, grads);
}

falcon_status falcon_backward(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *state,
                              const void *dO, const double *dS_T, const falcon_grads *grads)
{
    falcon_plan plan;
    falcon_status s = falcon_backward_plan(cfg, in, state, dO, dS_T, grads, &plan);
    if (s) return s;
    if (!plan.available)
        return falcon_fail_in("config.backend", "backend-unavailable", FALCON_E_UNAVAILABLE,
                              "backend %s is not available here: %s", plan.backend_name,
                              falcon_backend_describe(plan.backend));
    if ((s = check_route(&plan))) return s;
    /* Packed sequences and grouped heads: plain calls (src/layout.c). */
    if (!falcon_inputs_plain(in)) return falcon_backward_layout(&plan, in, state, dO, dS_T, grads);
    if (in->T == 0) {
        no_steps(in, plan.cfg.window, dS_T, grads);
        return FALCON_OK;
    }
    return run_backward(&plan, in, state, dO, dS_T, grads);
}
