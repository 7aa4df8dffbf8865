/*
 * The chunk backward's causal products (backward-blocked.inc.c): Kz, Qz,
 * dO R^T and lambda R^T are read only on and below a staircase, and are
 * computed in row panels up to it. Included after bb_nt and the block's
 * types.
 */
/* Rows [0, M) of C = A B^T where row i is read up to column lim[i] only
 * (-1: not at all): panels of FALCON_BW_PANEL rows, each as wide as its
 * last needed column rounded up to FALCON_BW_PANEL_COLS (capped at N). The
 * products whose result is causal (Kz, Qz, dO R^T, lambda R^T) skip the
 * triangle no one reads, as the forward's kq_product; every element
 * computed is the same whatever the panel. The sizes are the flop model's
 * (flops.h), which counts these calls exactly; the column rounding is the
 * same count for both precisions. */
#include "flops.h"
#define BW_PANEL FALCON_BW_PANEL
#define BW_PANEL_COLS FALCON_BW_PANEL_COLS

static void RS(bb_nt_panels)(const RS(falcon_uk) *uk, int64_t M, int64_t N, int64_t K, const REAL *A,
                             int64_t lda, const REAL *B, int64_t ldb, REAL *C, int64_t ldc, const int64_t *lim)
{
    for (int64_t i0 = 0; i0 < M; i0 += BW_PANEL) {
        const int64_t rows = M - i0 < BW_PANEL ? M - i0 : BW_PANEL;
        int64_t last = -1;
        for (int64_t i = i0; i < i0 + rows; i++) last = lim[i] > last ? lim[i] : last;
        if (last < 0) continue;
        int64_t cols = (last + BW_PANEL_COLS) / BW_PANEL_COLS * BW_PANEL_COLS;
        RS(bb_nt)(uk, rows, cols < N ? cols : N, K, A + i0 * lda, lda, B, ldb, C + i0 * ldc, ldc);
    }
}

/* The columns each row of a causal product is read up to (bb_nt_panels):
 * Kz's row l up to l and to the newest example of the steps before any
 * step whose window holds l (the system's couplings), Qz's row j up to
 * step j's newest example (the read weights). */
static void RS(bb_lim_kz)(const bb_blk *b)
{
    const bb_work *w = b->w;
    int64_t before = -1; /* the newest example of the steps before term p's */
    for (int64_t l = 0; l < b->G; l++) w->lim[l] = l;
    for (int64_t j = 0; j < b->Lc; j++) {
        for (int64_t p = w->first[j]; p < w->first[j + 1]; p++)
            if (before > w->lim[w->term_l[p]]) w->lim[w->term_l[p]] = before;
        for (int64_t p = w->first[j]; p < w->first[j + 1]; p++) before = w->term_l[p] > before ? w->term_l[p] : before;
    }
}

static void RS(bb_lim_qz)(const bb_blk *b)
{
    const bb_work *w = b->w;
    int64_t newest = -1;
    for (int64_t j = 0; j < b->Lc; j++) {
        for (int64_t p = w->first[j]; p < w->first[j + 1]; p++) newest = w->term_l[p] > newest ? w->term_l[p] : newest;
        w->lim[j] = newest;
    }
}
