/*
 * flops.c: the flop count per form, as the library computes it.
 *
 * When kernels/framework/flops.h (the framework's own nominal count, kept
 * next to the kernels it describes) is present, it is the count; the
 * fallback below is the same model, kept so bench/ builds without it.
 *
 * Products are counted 2 flops per multiply-add, dense, as the kernels run
 * them (the causally masked halves of Q Z^T and of the output product
 * included), except the unit lower-triangular solve, counted triangular.
 * O(n), O(m) and O(L^2) scalar work (normalisers, decay rows, feature maps)
 * is left out: it is small next to the products. k is the number of examples
 * in a step's window (W once the window is full).
 *
 * Recurrent, per step: 2 m n (k + 1) [S (x_1..x_k, q)] + 2 m n k [rank-k write]
 *   (W = 1: 2 (2 m n) + 2 m n = 6 m n; the A variants the same: the
 *   library forms S x for them too)
 * Chunk, per block of L steps with G = L + W - 1 examples, P = L W terms:
 *   2 ( L G n  [Q Z^T]  + L m n [S_0 q]  + L P m [output]  + m n G [state]
 *       + regression only: G G n [X Z^T] + G m n [S_0 x] + P P m / 2 [trsm] )
 *   (W = 1: 2 (L^2 n + L m n + L^2 n + L m n + L^2 m / 2 + L^2 m + m n L))
 * Masked-parallel: the chunk count with L = min(T, 4096 / W) (the library
 * splits longer calls into blocks of 4096 / W steps).
 */
#include "flops.h"

#if defined(__has_include)
#if __has_include("../kernels/framework/flops.h")
#include "../kernels/framework/flops.h"
#define FB_HAVE_FRAMEWORK_FLOPS 1
#endif
#endif

#ifndef FB_HAVE_FRAMEWORK_FLOPS
/* The same model as kernels/framework/flops.h (see the top of this file). */
static double falcon_flops(falcon_form form, int regression, int64_t T, int64_t n, int64_t m,
                           int64_t W, int64_t L)
{
    const double dn = (double)n, dm = (double)m;
    double total = 0;
    if (form == FALCON_FORM_RECURRENT) {
        for (int64_t t = 0; t < T; t++) {
            const double k = (double)(t + 1 < W ? t + 1 : W);
            total += 2 * dm * dn * (k + 1) + 2 * dm * dn * k;
        }
        return total;
    }
    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const double l = (double)(T - c0 < L ? T - c0 : L), g = l + (double)(W - 1), p = l * (double)W;
        double f = l * g * dn + l * dm * dn + l * p * dm + dm * dn * g;
        if (regression) f += g * g * dn + g * dm * dn + p * p * dm / 2;
        total += 2 * f;
    }
    return total;
}
#endif

const char *fb_flops_source(void)
{
#ifdef FB_HAVE_FRAMEWORK_FLOPS
    return "kernels/framework/flops.h";
#else
    return "bench/flops.c (kernels/framework/flops.h absent)";
#endif
}

double fb_flops(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m)
{
    const int64_t W = falcon_variant_has_window(cfg->variant) ? cfg->window : 1;
    int64_t L = cfg->form == FALCON_FORM_CHUNK ? cfg->chunk : falcon_parallel_block(W);
    if (cfg->form == FALCON_FORM_PARALLEL && L > T) L = T > 0 ? T : 1;
    return (double)H * falcon_flops(cfg->form, falcon_variant_is_regression(cfg->variant), T, n, m, W, L);
}

double fb_bytes(const falcon_config *cfg, int64_t T, int64_t H, int64_t n, int64_t m)
{
    const double size = cfg->precision == FALCON_FP32 ? 4 : 8;
    /* q, k, v, beta, alpha (+ gain) in; o out. */
    double per_step = 2.0 * n + m + 2 + m + (falcon_variant_has_gain(cfg->variant) ? n : 0);
    return (double)H * ((double)T * per_step * size + 2.0 * m * n * 8);
}
