/* The mpfr backend (falcon_advanced.h, falcon_reference_run): each head's
 * inputs copied exactly into double arrays (falcon_ref_head_gather), run
 * through the MPFR reference, and rounded to the run's precision (outputs
 * and memory; below fp64 the memory to float32, as the kernels keep it).
 * The masked-parallel form is the chunk equations with one chunk per call. */
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "falcon_advanced.h"
#include "falcon_ref.h"
#include "ref_backward.h"

static falcon_status run_head(const falcon_config *cfg, const falcon_inputs *in,
                              const falcon_state_view *view, double *memory, void *out, int64_t hh)
{
    const int64_t T = in->T, n = in->n, m = in->m, b = hh / in->H, h = hh % in->H;
    const falcon_precision prec = cfg->precision;
    double *buf = malloc(sizeof(double) * (falcon_ref_head_doubles(in) + (size_t)(T * m + m * n)));
    if (!buf) return FALCON_E_NOMEM;
    falcon_ref_head rh;
    falcon_ref_head_gather(in, prec, view, hh, buf, &rh);
    double *o = buf + falcon_ref_head_doubles(in), *S = o + T * m;
    falcon_ref_opts ro = {
        .variant = cfg->variant, .align = cfg->align, .phi = cfg->phi,
        .eps = prec != FALCON_FP64 ? (double)(float)cfg->eps : cfg->eps,
        .window = cfg->window,
        .chunk = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(cfg->chunk, cfg->window) : (T > 0 ? T : 1),
        .bits = cfg->mpfr_bits,
    };
    falcon_status s = cfg->form == FALCON_FORM_RECURRENT ? falcon_ref_recurrent(&ro, &rh, o, S)
                                                         : falcon_ref_chunk(&ro, &rh, o, S);
    if (!s) {
        /* The memory too is a result of the run: below fp64 it is rounded
         * to float32 as the kernels hold it, so that a memory beyond the
         * fp32 range is an overflow here as it is there (falcon_run scans
         * for it) and the next call of the stream starts from what an fp32
         * state can hold. (The head's memory was gathered into rh above.) */
        double *Sh = memory + hh * m * n;
        for (int64_t i = 0; i < m * n; i++) Sh[i] = prec != FALCON_FP64 ? (double)(float)S[i] : S[i];
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < m; c++) {
                int64_t at = ((b * T + t) * in->H + h) * m + c;
                if (prec != FALCON_FP64) ((float *)out)[at] = (float)o[t * m + c];
                else ((double *)out)[at] = o[t * m + c];
            }
    }
    free(buf);
    return s;
}

/* fn(ctx, hh) for every head, OpenMP over heads: the status of the first
 * head (in order) that failed, whatever the schedule. Shared by the mpfr
 * backend's forward run and its backward door (ref_backend_grad.c). */
falcon_status fref_each_head(int threads, int64_t heads, fref_head_fn fn, void *ctx)
{
    falcon_status result = FALCON_OK;
    int64_t failed_head = INT64_MAX;
    if (threads <= 0) threads = omp_get_max_threads();
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(dynamic, 1)
        for (int64_t hh = 0; hh < heads; hh++) {
            falcon_status s = fn(ctx, hh);
            if (s) {
#pragma omp critical(falcon_mpfr_status)
                if (hh < failed_head) failed_head = hh, result = s;
            }
        }
        /* MPFR caches constants (log 2, ...) per thread, and an OpenMP
         * thread may end (a team of another size follows) without freeing
         * them: a leak per thread, which LeakSanitizer reports. */
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    return result;
}

typedef struct run_ctx {
    const falcon_config *cfg;
    const falcon_inputs *in;
    const falcon_state_view *view;
    double *memory;
    void *out;
} run_ctx;

static falcon_status run_one(void *p, int64_t hh)
{
    const run_ctx *c = p;
    return run_head(c->cfg, c->in, c->view, c->memory, c->out, hh);
}

static falcon_status reference_run(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *view, double *memory, void *out)
{
    run_ctx c = {cfg, in, view, memory, out};
    return fref_each_head(cfg->threads, in->B * in->H, run_one, &c);
}

void falcon_reference_attach(void)
{
    falcon_backend_attach_reference(reference_run);
    falcon_backend_attach_reference_grad(fref_reference_grad);
}
