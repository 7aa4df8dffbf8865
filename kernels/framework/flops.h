/*
 * Nominal floating-point work of the CPU framework's forms, for throughput
 * figures (GFLOP/s, fraction of the FMA peak). Header-only; needs only
 * <stdint.h> and falcon.h's enum, so benchmarks can include it.
 *
 * Counted: the products of the micro-kernel calls, 2 flops per
 * multiply-add; the O(m) and O(n) vector work around them (residuals,
 * normalisers, decay factors, feature maps) is left out.
 *
 * Recurrent form, per step with k = |E_t| examples (k = W once the window
 * is full; k = 1 for Falcon-1/2 and the A variants without a window):
 *     S [x_1 .. x_k, q]^T      2 m n (k + 1)      (W = 1: 2 (2 m n))
 *     S += sum_i e_i z_i^T     2 m n k            (W = 1: 2 m n, decay fused)
 *   so Falcon-1 costs 6 m n per step.
 *
 * Chunk / masked-parallel form, per block of L steps with G = L + W - 1
 * examples and P = L W terms (W = 1: G = P = L):
 *     Qz  = Q Z^T              2 L G n
 *     S0q = Q S_0^T            2 L m n
 *     Kz  = X Z^T              2 G G n            (regression only)
 *     U   = X S_0^T            2 G m n            (regression only)
 *     trsm (I + A) R = RHS     2 P P m / 2        (regression only)
 *     O   = Wm R               2 L P m
 *     S  += Rg^T Z             2 m n G
 *   Dense counts: Kz, Qz and the output product also cover the causally
 *   masked half, which the chunk form skips: the output product's
 *   micro-kernel tiles stop at the mask (work actually done about L P m),
 *   and Kz and Qz are computed in row panels only up to the columns the
 *   block reads (blocked.inc.c, kq_product: about 0.72 of the dense work
 *   for W = 1, C = 64). The figures stay comparable across n, m, C and
 *   across versions; the work done is less than counted, so a fraction of
 *   peak computed from these counts is a nominal rate, and tokens/s is the
 *   measure of speed.
 *   The masked-parallel form is the chunk form with one block of
 *   L = min(T, 4096 / W) steps (falcon_parallel_block in src/run.c).
 */
#ifndef FALCON_FLOPS_H
#define FALCON_FLOPS_H

#include <stdint.h>
#include "falcon.h"

/* Flops of one head (sequence) of T steps. regression: Falcon-1/2/3 (1) or an
 * A variant (0). W: window (1 unless Falcon-3/3A). L: block length (the
 * chunk form's block, falcon_chunk_block: the chunk size, at most 4096 / W;
 * the masked-parallel block for the parallel form; unused for the
 * recurrent form). Steps that reveal no example (the first
 * step of a fresh state under prefix alignment) are counted as full steps. */
static inline double falcon_flops(falcon_form form, int regression, int64_t T, int64_t n,
                                  int64_t m, int64_t W, int64_t L)
{
    const double dn = (double)n, dm = (double)m;
    if (W < 1) W = 1;
    if (form == FALCON_FORM_RECURRENT) {
        double total = 0;
        /* the window fills over the first W - 1 steps, then stays at W */
        for (int64_t t = 0; t < T && t < W; t++)
            total += 2 * dm * dn * (double)(t + 2) + 2 * dm * dn * (double)(t + 1);
        if (T > W) total += (double)(T - W) * (2 * dm * dn * (double)(W + 1) + 2 * dm * dn * (double)W);
        return total;
    }
    if (L < 1) L = 1;
    double total = 0;
    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const double l = (double)(T - c0 < L ? T - c0 : L);
        const double g = l + (double)(W - 1), p = l * (double)W;
        double f = l * g * dn + l * dm * dn + l * p * dm + dm * dn * g;
        if (regression) f += g * g * dn + g * dm * dn + p * p * dm / 2;
        total += 2 * f;
    }
    return total;
}

#endif
