/* falcon_run: validate, pick the backend, run every head on a working copy
 * of the state, check the result is finite, then commit the state. */
#include <math.h>
#include <stdlib.h>
#include <omp.h>
#include <unistd.h>
#include "internal.h"
#include "backends.h"

int falcon_threads(const falcon_config *cfg)
{
    return cfg->threads > 0 ? cfg->threads : omp_get_max_threads();
}

/* Read once: sysconf asks CPUID, which a virtual machine traps. Racing
 * first calls compute the same value. */
static _Atomic int64_t tile_bytes_fixed, tile_bytes_machine;

int64_t falcon_tile_bytes(void)
{
    const int64_t fixed = tile_bytes_fixed;
    if (fixed > 0) return fixed;
    int64_t b = tile_bytes_machine;
    if (b == 0) {
        const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
        b = l1 >= 4096 && l1 <= (1L << 24) ? (int64_t)l1 / 3 * 2 : 32 * 1024;
        tile_bytes_machine = b;
    }
    return b;
}

void falcon_set_tile_bytes(int64_t bytes) { tile_bytes_fixed = bytes > 0 ? bytes : 0; }

int64_t falcon_parallel_block(int64_t window)
{
    if (window < 1 || window > FALCON_MAX_WINDOW) return -1;
    /* At most 4096 terms per block: the explicit masked matrices then take
     * at most 4 x 4096^2 reals (512 MiB in fp64) per running head. */
    int64_t L = 4096 / window;
    return L < 1 ? 1 : L;
}

/* The adjoint of one block of T steps goes through a transposed solve of
 * T W terms whose rounding outgrows the gradient gate's sqrt(depth) model
 * on long undecayed sequences; blocks of the chunk form's size do not
 * (the figures: docs/math.md 12.5). */
int64_t falcon_parallel_backward_block(int64_t n, int64_t m, int64_t window)
{
    return falcon_chunk_block(falcon_chunk_of(FALCON_CHUNK_AUTO, n, m, window), window);
}

/* The chunk form's cost per step, in FMAs, with blocks of C steps and a
 * window of W: the products with the memory ([X; Q] S^T and the
 * end-of-block write, 3 n m) do not depend on C; the block's own system
 * and reads grow with it, about C W (2 n + m); and each block pays a fixed
 * cost, about n m (the memory's transposed copy passed once more, the
 * packing, the small products' start-up), spread over its C steps:
 *     cost(C) ~ 3 n m + C W (2 n + m) + k n m / C.
 * Its minimum is at C* = sqrt(k n m / (W (2 n + m))), with k = 7 fitted to
 * the measured best C (docs/performance.md, "Measurements behind the
 * library's choices"). C* is rounded to a power of two in [8, 256]. */
int64_t falcon_chunk_auto(int64_t n, int64_t m, int64_t window)
{
    if (n < 1) n = 1;
    if (m < 1) m = 1;
    if (window < 1) window = 1;
    const double c = sqrt(7.0 * (double)n * (double)m / ((double)window * (2.0 * (double)n + (double)m)));
    int64_t p = 8;
    while (p < 256 && (double)p * 1.4142135623730951 <= c) p *= 2; /* nearest power of two */
    return p;
}

int64_t falcon_chunk_of(int64_t chunk, int64_t n, int64_t m, int64_t window)
{
    return chunk == FALCON_CHUNK_AUTO ? falcon_chunk_auto(n, m, window) : chunk;
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

/* A result that is not finite at flat element `bad` of out ([B][T][H][m]):
 * its step (counted from t0) and head. */
static falcon_status blame_out(falcon_status s, const falcon_inputs *in, int64_t t0, int64_t bad)
{
    const int64_t row = bad / in->m, h = row % in->H, t = (row / in->H) % in->T, b = row / (in->H * in->T);
    return falcon_blame_at(s, "out", "overflow", bad, t0 + t, b * in->H + h);
}

falcon_status falcon_run(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state,
                         void *out)
{
    return falcon_run_from(cfg, in, state, out, 0);
}

falcon_status falcon_run_from(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state,
                              void *out, int64_t t0)
{
    /* The configuration resolved once (internal.h): what follows reads it. */
    falcon_plan plan;
    falcon_status s = falcon_plan_make(cfg, in, &plan);
    if (s || (s = falcon_validate_plan(&plan, in, state, t0))) return s;
    cfg = &plan.cfg;
    if (in->T > 0 && !out) return falcon_fail_in("out", "null", FALCON_E_ARGUMENT, "out is NULL");
    if (!plan.available)
        return falcon_fail_in("config.backend", "backend-unavailable", FALCON_E_UNAVAILABLE,
                              "backend %s is not available here: %s", plan.backend_name,
                              falcon_backend_describe(plan.backend));

    /* No steps: nothing to compute and the state stays as it is. (The
     * tensors and out may be NULL then: no backend may offset them.) */
    if (in->T == 0) return FALCON_OK;
    /* Packed sequences and grouped heads: plain calls (src/layout.c). */
    if (!falcon_inputs_plain(in)) return falcon_run_layout(&plan.cfg0, in, state, out, t0);

    /* The backend's row: a whole-call function, or the micro-kernels and
     * drivers of a CPU backend for the run's precision. */
    const falcon_backend_info *be = plan.row;
    /* Every head of the CPU recurrent form stores its memory into the
     * working copy (rec_close) after reading it from the caller's state,
     * which stays untouched: the copy need not start as one, a pass over
     * the memory less per call (a decode call's largest cost after the
     * kernels' own copies: docs/performance.md, "Decode calls"). */
    const double *S_in = state && !be->run && cfg->form == FALCON_FORM_RECURRENT ? state->S : NULL;
    falcon_state *work;
    s = state ? falcon_state_clone(state, !S_in, &work)
              : falcon_state_create(in->B * in->H, in->n, in->m, cfg->window, &work);
    if (s) return s;
    if (be->run)
        s = be->run(cfg, in, work, out);
    else if (cfg->precision != FALCON_FP64)
        s = falcon_run_cpu_f32(cfg, in, work, S_in, out, falcon_backend_cpu_f32(be));
    else
        s = falcon_run_cpu_f64(cfg, in, work, S_in, out, falcon_backend_cpu_f64(be));
    /* A backend's AVX code cleans the vector registers' upper halves on
     * return only where the compiler inserted it (-O2 and up): clean them
     * here, before the baseline code that follows and the caller's. */
    falcon_clean_upper();
    if (s == FALCON_E_NOMEM)
        s = falcon_fail_in("", "out-of-memory", s, "out of memory in the %s backend", plan.backend_name);

    /* The result must be finite. The CPU drivers check each output row as
     * they write it, and the memory as they store it, and answer
     * FALCON_E_OVERFLOW; a whole-call backend's results are scanned here.
     * Either way the scans name the first bad element. */
    int64_t bad;
    const int threads = plan.cfg.threads;
    const int drivers_saw = s == FALCON_E_OVERFLOW && !be->run, scan = (!s && be->run) || drivers_saw;
    if (scan && !all_finite(out, cfg->precision, in->B * in->T * in->H * in->m, threads, &bad))
        s = blame_out(falcon_fail(FALCON_E_OVERFLOW,
                                  "out[%lld] is not finite: the recurrence left the range of %s (inputs too large "
                                  "for it, or keys or gains so small against eps that a step's size underflows); "
                                  "the state was left unchanged",
                                  (long long)bad, plan.precision),
                      in, t0, bad);
    else if (scan && !all_finite(work->S, FALCON_FP64, work->heads * work->m * work->n, threads, &bad))
        s = falcon_blame_at(falcon_fail(FALCON_E_OVERFLOW,
                                        "S[%lld] is not finite: the memory left the range of its precision (inputs "
                                        "too large, or keys or gains so small against eps that a step's size "
                                        "underflows); the state was left unchanged",
                                        (long long)bad),
                            "S", "overflow", bad, -1, bad / (work->m * work->n));
    else if (drivers_saw) /* the scans must find what the drivers saw */
        s = falcon_fail_in("out", "overflow", FALCON_E_OVERFLOW,
                           "a result was not finite; the state was left unchanged");
    if (s) {
        falcon_state_free(work);
        return s;
    }
    for (int64_t b = 0; b < in->B; b++)
        for (int64_t h = 0; h < in->H; h++) falcon_state_advance(work, cfg, in, b, h);
    if (be->run) /* a whole-call backend stores the memory itself */
        for (int64_t h = 0; h < work->heads; h++) work->scale[h] = 1;
    /* below fp64 every backend stores a float32 memory (mpfr rounds it) */
    work->memory_f32 = cfg->precision != FALCON_FP64;
    if (state)
        falcon_state_take(state, work);
    else
        falcon_state_free(work);
    return FALCON_OK;
}
