/*
 * flops.c: the flop count of a call, from the framework's own nominal count
 * (kernels/framework/flops.h, kept next to the kernels it describes, where
 * the model is written out), and the compulsory memory traffic.
 */
#include "flops.h"
#include "../kernels/framework/flops.h"

double fb_flops(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m)
{
    const int64_t W = falcon_variant_has_window(cfg->variant) ? cfg->window : 1;
    /* The blocks the run takes: a chunk above 4096 / W is cut to it, as
     * the masked-parallel form's single block is (a last block shorter
     * than L is counted as it is). */
    const int64_t L = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(falcon_chunk_of(cfg->chunk, n, m, W), W)
                                                     : falcon_parallel_block(W);
    return (double)H * falcon_flops(cfg->form, falcon_variant_is_regression(cfg->variant), T, n, m, W, L);
}

double fb_input_bytes(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m)
{
    const double size = cfg->precision == FALCON_FP32 ? 4 : 8;
    /* q, k, v, beta, alpha (+ gain) */
    const double per_step = 2.0 * n + m + 2 + (falcon_variant_has_gain(cfg->variant) ? n : 0);
    return (double)H * (double)T * per_step * size;
}

double fb_bytes(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m)
{
    const double size = cfg->precision == FALCON_FP32 ? 4 : 8;
    /* the inputs; o out; the state in and out, in double */
    return fb_input_bytes(cfg, T, H, n, m) + (double)H * ((double)T * m * size + 2.0 * m * n * 8);
}
