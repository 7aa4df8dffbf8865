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

/*
 * The backward pass (falcon_backward, docs/math.md section 12), counted as
 * its kernels call the micro-kernels (every call, 2 flops per multiply-add;
 * the unit lower solve of P terms P (P - 1) m, the multiply-adds it does),
 * the recomputation included. The plain loops around them (adjoints of the
 * O(L) decay factors, feature maps, the dx and dy rows) are left out, as
 * in falcon_flops. Same conventions: the window fills over the first W - 1
 * steps (recurrent), every block has G = L + W - 1 examples (blocked), and
 * keys stay in the normaliser's range (no rescaled products).
 *
 * Recurrent (backward-recurrent.inc.c), step t with k = min(t + 1, W)
 * examples. A forward step (the checkpoint sweep, and each segment's
 * states again):
 *     x.z per example              2 n k
 *     S [x_1 .. x_k]^T             2 m n k
 *     S = alpha S + sum e z^T      2 m n k
 *   and a reverse step:
 *     S_t^T dO, G += dO u^T        2 m n + 2 m n
 *     x.z per example              2 n k
 *     <G, S_{t-1}>                 2 m n              (with a decay)
 *     S [x]^T, G z, G^T e          3 (2 m n k)
 *     S^T de, G -= de x^T          2 (2 m n k)        (regression only)
 *   With c = floor(sqrt(T)) and ceil(T / c) segments, the sweep takes the
 *   steps before the last segment's start and the reverse sweep every step
 *   again: T + (ceil(T / c) - 1) c forward steps and T reverse ones.
 *
 * Blocked (backward-blocked.inc.c), a block of l steps, g = l + W - 1
 * examples, p = l W terms:
 *   its forward quantities without the reads (the sweeps):
 *     Kz = X Z^T 2 g g n (in panels: below),  U = X S0^T 2 g m n (reg),  the solve p (p - 1) m (reg),
 *     end state S = F S + Rg^T Z  2 m n g
 *   the block's own backward: the same products but the end state, and
 *     Qz = Q Z^T 2 l g n (panels),  S0q = Q S0^T 2 l m n;
 *     dR = W^T dO 2 p l m,  G Z^T 2 g m n,  dO R^T 2 l p m (panels);
 *     lambda: the solve p (p - 1) m and lambda R^T 2 p p m (reg, panels);
 *     dQ = Wg Z 2 l g n,  dO S0 2 l m n,  dZ: Wg^T Q 2 g l n, Rg G 2 g m n,
 *     Cg^T X 2 g g n,  dX: Cg Z 2 g g n, Ln S0 2 g m n (reg);
 *     dS0 = a G + M^T Q 2 m n l, + Ln1^T X 2 m n g (reg).
 *   Blocks: nb = ceil(T / L). Up to 64 blocks the sweep runs the first
 *   nb - 1 forward; beyond, with s = ceil(sqrt(nb)) blocks a segment, it
 *   also runs s - 1 of every segment but the last again. Those are full
 *   blocks (l = L); every block runs its own backward once.
 */
/*
 * The products whose result is causal (Kz = X Z^T, Qz = Q Z^T, dO R^T and
 * lambda R^T) are computed in panels of FALCON_BW_PANEL rows, each as wide
 * as its last row's needed column (+ 1), rounded up to FALCON_BW_PANEL_COLS
 * and capped at the dense width; a panel that needs no column is skipped
 * (backward-blocked.inc.c, bb_nt_panels). The columns row i needs, with
 * step j's examples j .. j + W - 1 and terms j W .. j W + W - 1 (a full
 * window, as above):
 *     Kz row l:   l, and j + W - 2 for the newest step j <= l (j >= 1)
 *                 whose window holds l (the couplings to earlier steps)
 *     Qz row j:   j + W - 1         dO R^T row j:  (j + 1) W - 1
 *     lambda R^T row p:  W floor(p / W) - 1 (the earlier steps' terms)
 */
#define FALCON_BW_PANEL 24
#define FALCON_BW_PANEL_COLS 16

enum { FALCON_BW_KZ, FALCON_BW_QZ, FALCON_BW_DOR, FALCON_BW_LR };

static inline int64_t falcon_bw_panel_lim(int which, int64_t i, int64_t L, int64_t W)
{
    if (which == FALCON_BW_QZ) return i + W - 1;
    if (which == FALCON_BW_DOR) return (i + 1) * W - 1;
    if (which == FALCON_BW_LR) return i / W * W - 1;
    const int64_t j = i < L - 1 ? i : L - 1; /* Kz */
    return j >= 1 && j + W - 2 > i ? j + W - 2 : i;
}

/* 2 K times the elements of an M x N causal product that the panels compute. */
static inline double falcon_bw_panel_flops(int which, int64_t M, int64_t N, double K, int64_t L, int64_t W)
{
    double f = 0;
    for (int64_t i0 = 0; i0 < M; i0 += FALCON_BW_PANEL) {
        const int64_t rows = M - i0 < FALCON_BW_PANEL ? M - i0 : FALCON_BW_PANEL;
        int64_t last = -1;
        for (int64_t i = i0; i < i0 + rows; i++) {
            const int64_t lim = falcon_bw_panel_lim(which, i, L, W);
            last = lim > last ? lim : last;
        }
        if (last < 0) continue;
        const int64_t cols = (last + FALCON_BW_PANEL_COLS) / FALCON_BW_PANEL_COLS * FALCON_BW_PANEL_COLS;
        f += 2 * (double)rows * (double)(cols < N ? cols : N) * K;
    }
    return f;
}

static inline double falcon_bw_block_fwd_flops(int regression, double l, double n, double m, double W)
{
    const double g = l + W - 1, p = l * W;
    const int64_t il = (int64_t)l, iW = (int64_t)W, ig = il + iW - 1;
    double f = falcon_bw_panel_flops(FALCON_BW_KZ, ig, ig, n, il, iW);
    if (regression) f += 2 * g * m * n + p * (p - 1) * m;
    return f;
}

static inline double falcon_bw_block_flops(int regression, double l, double n, double m, double W)
{
    const double g = l + W - 1, p = l * W;
    const int64_t il = (int64_t)l, iW = (int64_t)W, ig = il + iW - 1, ip = il * iW;
    double f = falcon_bw_block_fwd_flops(regression, l, n, m, W);
    f += falcon_bw_panel_flops(FALCON_BW_QZ, il, ig, n, il, iW) + 2 * l * m * n;
    f += 2 * p * l * m + 2 * g * m * n + falcon_bw_panel_flops(FALCON_BW_DOR, il, ip, m, il, iW);
    f += 2 * l * g * n + 2 * l * m * n + 2 * g * l * n + 2 * g * m * n + 4 * g * g * n + 2 * m * n * l;
    if (regression) f += p * (p - 1) * m + falcon_bw_panel_flops(FALCON_BW_LR, ip, ip, m, il, iW);
    if (regression) f += 2 * g * m * n + 2 * m * n * g;
    return f;
}

static inline double falcon_bw_recurrent_flops(int regression, int decay, int64_t T, double n, double m,
                                               int64_t W)
{
    int64_t c = 1;
    while ((c + 1) * (c + 1) <= T) c++;
    const int64_t fwd_extra = T > 0 ? ((T + c - 1) / c - 1) * c : 0; /* the sweep's steps */
    double total = 0;
    for (int64_t t = 0; t < T; t++) {
        const double k = (double)(t + 1 < W ? t + 1 : W);
        const double fwd = 2 * n * k + 4 * m * n * k;
        double rev = 4 * m * n + 2 * n * k + 6 * m * n * k;
        if (decay) rev += 2 * m * n;
        if (regression) rev += 4 * m * n * k;
        total += rev + fwd * (t < fwd_extra ? 2 : 1);
    }
    return total;
}

/* Flops of the backward pass of one head of T steps, arguments as
 * falcon_flops; decay: the call has one (alpha given). */
static inline double falcon_backward_flops(falcon_form form, int regression, int decay, int64_t T, int64_t n,
                                           int64_t m, int64_t W, int64_t L)
{
    const double dn = (double)n, dm = (double)m;
    if (W < 1) W = 1;
    if (form == FALCON_FORM_RECURRENT) return falcon_bw_recurrent_flops(regression, decay, T, dn, dm, W);
    if (T <= 0) return 0;
    if (L > T) L = T;
    if (L < 1) L = 1;
    const int64_t nb = (T + L - 1) / L;
    int64_t sweep = nb - 1;
    if (nb > 64) {
        int64_t s = 1;
        while (s * s < nb) s++;
        sweep += ((nb + s - 1) / s - 1) * (s - 1);
    }
    const double dW = (double)W, full = (double)L;
    const double end_state = 2 * dm * dn * (full + dW - 1);
    double total = (double)sweep * (falcon_bw_block_fwd_flops(regression, full, dn, dm, dW) + end_state);
    for (int64_t c0 = 0; c0 < T; c0 += L)
        total += falcon_bw_block_flops(regression, (double)(T - c0 < L ? T - c0 : L), dn, dm, dW);
    return total;
}

#endif
