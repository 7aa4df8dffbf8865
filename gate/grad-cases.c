/* The gradient gate's case table (grad-gate.h): every variant x alignment x
 * decay on and off, every feature map, the decay regimes of docs/math.md
 * section 8 (extreme, reset-slow, mix), a carried state (previous key and
 * window history, so dprev_key and the history's gradients are judged),
 * batches, keys small enough that eps matters, and T = 1. The full profile
 * adds larger shapes and more seeds of each. */
#include <stdlib.h>
#include "grad-gate.h"

typedef struct grad_shape {
    int64_t B, T, H, n, m, window, chunk, carried;
    double key_scale;
    int phis;      /* run relu, elu1, l2norm on this shape (else identity) */
    int stress;    /* run the stress regimes on this shape */
    int full_only; /* only in the full profile */
} grad_shape;

static const grad_shape shapes[] = {
    {1, 37, 1, 5, 7, 3, 8, 0, 1.0, 0, 0, 0},   /* T % C != 0, n != m */
    {1, 24, 1, 6, 5, 2, 5, 0, 1.0, 1, 0, 0},   /* feature maps */
    {1, 40, 1, 8, 8, 3, 16, 0, 1.0, 0, 1, 0},  /* decay regimes */
    {1, 20, 1, 4, 5, 3, 6, 5, 1.0, 0, 0, 0},   /* carried previous key and history */
    {2, 12, 3, 4, 5, 3, 5, 0, 1.0, 0, 0, 0},   /* [B][T][H][D] batch */
    {1, 24, 1, 6, 5, 2, 5, 0, 1e-3, 0, 0, 0},  /* x.x ~ eps */
    {1, 1, 1, 4, 3, 3, 4, 0, 1.0, 0, 0, 0},    /* T = 1 */
    {1, 96, 1, 16, 12, 4, 16, 7, 1.0, 1, 1, 1},/* larger, several chunks, carried */
};
static const gate_decay stress[] = {GATE_DECAY_EXTREME, GATE_DECAY_RESET_SLOW, GATE_DECAY_MIX};

static gate_grad_case make(const grad_shape *sh, falcon_variant v, falcon_align a, falcon_phi phi, gate_decay d,
                           uint64_t seed)
{
    gate_grad_case g = {
        .c = {.variant = v, .align = a, .phi = phi, .decay = d, .B = sh->B, .T = sh->T, .H = sh->H,
              .n = sh->n, .m = sh->m, .window = falcon_variant_has_window(v) ? sh->window : 1,
              .chunk = sh->chunk, .eps = 1e-6, .key_scale = sh->key_scale, .seed = seed},
        .carried = sh->carried,
    };
    return g;
}

/* The cases of one shape and variant into c (count advanced). */
static void shape_cases(const grad_shape *sh, falcon_variant v, int seeds, uint64_t *seed, gate_grad_case *c,
                        int *count)
{
    for (int k = 0; k < seeds; k++)
        for (int a = 0; a < 2; a++) {
            if (sh->stress) {
                for (size_t d = 0; d < sizeof stress / sizeof stress[0]; d++)
                    c[(*count)++] = make(sh, v, (falcon_align)a, FALCON_PHI_IDENTITY, stress[d], (*seed)++);
            } else if (sh->phis) {
                for (int p = FALCON_PHI_RELU; p <= FALCON_PHI_L2NORM; p++)
                    c[(*count)++] = make(sh, v, (falcon_align)a, (falcon_phi)p, GATE_DECAY_RANDOM, (*seed)++);
            } else {
                for (int dec = 0; dec < 2; dec++)
                    c[(*count)++] = make(sh, v, (falcon_align)a, FALCON_PHI_IDENTITY,
                                         dec ? GATE_DECAY_RANDOM : GATE_DECAY_NONE, (*seed)++);
            }
        }
}

int gate_grad_cases(int profile, gate_grad_case **out)
{
    const int nshape = (int)(sizeof shapes / sizeof shapes[0]), seeds = profile ? 3 : 1;
    gate_grad_case *c = malloc(sizeof *c * (size_t)(6 * nshape * seeds * 2 * 3));
    if (!c) return -1;
    int count = 0;
    uint64_t seed = 7001;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int s = 0; s < nshape; s++)
            if (profile || !shapes[s].full_only) shape_cases(&shapes[s], (falcon_variant)v, seeds, &seed, c, &count);
    *out = c;
    return count;
}
