/* falcon_run: validate, pick the backend, run every head on a working copy
 * of the state, check the result is finite, then commit the state. */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include "internal.h"
#include "backends.h"

int falcon_threads(const falcon_config *cfg)
{
    return cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
}

int64_t falcon_parallel_block(int64_t window)
{
    if (window < 1 || window > FALCON_MAX_WINDOW) return -1;
    /* At most 4096 terms per block: the explicit masked matrices then take
     * at most 4 x 4096^2 reals (512 MiB in fp64) per running head. */
    int64_t L = 4096 / window;
    return L < 1 ? 1 : L;
}

int64_t falcon_chunk_block(int64_t chunk, int64_t window)
{
    const int64_t cap = falcon_parallel_block(window);
    if (cap < 0 || chunk < 1 || chunk > FALCON_MAX_CHUNK) return -1;
    return chunk < cap ? chunk : cap;
}

/* The same threads as the run: at 2 threads over 8 heads the serial part
 * of a call (validation, this check) is what separates 2x from 1.8x. */
static int all_finite(const void *p, falcon_precision prec, int64_t count, int threads, int64_t *bad)
{
    if (falcon_all_finite_fast(p, prec, count, threads)) return 1;
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(falcon_load(p, prec, i))) {
            *bad = i;
            return 0;
        }
    return 1;
}

falcon_status falcon_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state,
                         void *out)
{
    falcon_status s = falcon_validate(cfg, in, state);
    if (s) return s;
    if (in->T > 0 && !out) return falcon_fail(FALCON_E_ARGUMENT, "out is NULL");
    const falcon_backend backend = falcon_backend_resolve(cfg->backend);
    if (!falcon_backend_available(backend))
        return falcon_fail(FALCON_E_UNAVAILABLE, "backend %s is not available here: %s",
                           falcon_backend_name(backend), falcon_backend_describe(backend));

    /* No steps: nothing to compute and the state stays as it is. (The
     * tensors and out may be NULL then: no backend may offset them.) */
    if (in->T == 0) return FALCON_OK;

    falcon_state *work;
    s = state ? falcon_state_copy(state, &work)
              : falcon_state_create(in->B * in->H, in->n, in->m, cfg->window, &work);
    if (s) return s;

    /* The backend's row: a whole-call function, or the micro-kernels and
     * drivers of a CPU backend for the run's precision. */
    const falcon_backend_info *be = falcon_backend_info_of(backend);
    if (be->run)
        s = be->run(cfg, in, work, out);
    else if (cfg->precision == FALCON_FP32)
        s = falcon_run_cpu_f32(cfg, in, work, out, &be->f32);
    else
        s = falcon_run_cpu_f64(cfg, in, work, out, &be->f64);
    if (s == FALCON_E_NOMEM) s = falcon_fail(s, "out of memory in the %s backend", falcon_backend_name(backend));

    int64_t bad;
    const int threads = falcon_threads(cfg);
    if (!s && !all_finite(out, cfg->precision, in->B * in->T * in->H * in->m, threads, &bad))
        s = falcon_fail(FALCON_E_OVERFLOW,
                        "out[%lld] is not finite: the recurrence overflowed its precision "
                        "(inputs too large for %s); the state was left unchanged",
                        (long long)bad, falcon_precision_name(cfg->precision));
    if (!s && !all_finite(work->S, FALCON_FP64, work->heads * work->m * work->n, threads, &bad))
        s = falcon_fail(FALCON_E_OVERFLOW, "S[%lld] is not finite: the memory overflowed; the state was left unchanged",
                        (long long)bad);
    if (s) {
        falcon_state_free(work);
        return s;
    }
    for (int64_t b = 0; b < in->B; b++)
        for (int64_t h = 0; h < in->H; h++) falcon_state_advance(work, cfg, in, b, h);
    if (state)
        falcon_state_take(state, work);
    else
        falcon_state_free(work);
    return FALCON_OK;
}
