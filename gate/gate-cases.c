/* The gate's case table: every variant x alignment x decay on/off over
 * shapes that catch edge cases (n != m, T not a multiple of C, T = 0 and 1,
 * W > T, small keys where eps matters, batches), plus the decay regimes of
 * docs/math.md section 8 for every variant. */
#include <stdlib.h>
#include "gate.h"

typedef struct shape {
    int64_t B, T, H, n, m, window, chunk;
    double key_scale;
    int phi_cycle; /* run the non-identity feature maps on this shape */
} shape;

static const shape shapes[] = {
    {1, 37, 1, 5, 7, 3, 8, 1.0, 0},   /* T % C != 0, n != m */
    {1, 1, 1, 4, 3, 3, 4, 1.0, 0},    /* T = 1 */
    {1, 0, 1, 4, 3, 3, 4, 1.0, 0},    /* T = 0 */
    {1, 6, 1, 3, 4, 9, 4, 1.0, 0},    /* W > T */
    {1, 96, 1, 16, 12, 4, 16, 1.0, 1},/* feature maps, several chunks */
    {1, 24, 1, 6, 5, 2, 5, 1e-3, 0},  /* x.x ~ eps: the normaliser's floor matters */
    {2, 20, 3, 4, 5, 3, 6, 1.0, 0},   /* [B][T][H][D] batch */
};
static const gate_decay stress[] = {GATE_DECAY_MILD, GATE_DECAY_STRONG, GATE_DECAY_EXTREME,
                                    GATE_DECAY_RESET_SLOW, GATE_DECAY_MIX};

int gate_cases(int profile, gate_case **out)
{
    const int nshape = (int)(sizeof shapes / sizeof shapes[0]);
    const int nstress = (int)(sizeof stress / sizeof stress[0]);
    gate_case *c = malloc(sizeof *c * (size_t)(6 * 2 * 2 * nshape + 6 * 2 * nstress));
    if (!c) return -1;
    int count = 0;
    uint64_t seed = 1;
    for (int v = FALCON_1; v <= FALCON_3A; v++) {
        const int W = falcon_variant_has_window((falcon_variant)v);
        for (int a = 0; a < 2; a++)
            for (int dec = 0; dec < 2; dec++)
                for (int s = 0; s < nshape; s++) {
                    /* The quick profile keeps the first shape and the small keys. */
                    if (profile == 0 && s != 0 && s != 5) continue;
                    const shape *sh = &shapes[s];
                    gate_case k = {
                        .variant = (falcon_variant)v, .align = (falcon_align)a,
                        .phi = sh->phi_cycle ? (falcon_phi)(1 + (v + a) % 3) : FALCON_PHI_IDENTITY,
                        .decay = dec ? GATE_DECAY_RANDOM : GATE_DECAY_NONE,
                        .B = sh->B, .T = sh->T, .H = sh->H, .n = sh->n, .m = sh->m,
                        .window = W ? sh->window : 1, .chunk = sh->chunk,
                        .eps = 1e-6, .key_scale = sh->key_scale, .seed = seed++,
                    };
                    c[count++] = k;
                }
        for (int d = 0; d < nstress; d++)
            for (int a = 0; a < 2; a++) {
                if (profile == 0 && a == 1) continue;
                gate_case k = {
                    .variant = (falcon_variant)v, .align = (falcon_align)a, .phi = FALCON_PHI_IDENTITY,
                    .decay = stress[d], .B = 1, .T = 64, .H = 1, .n = 8, .m = 8,
                    .window = W ? 3 : 1, .chunk = 16, .eps = 1e-6, .key_scale = 1.0, .seed = seed++,
                };
                c[count++] = k;
            }
    }
    *out = c;
    return count;
}

int gate_cases_shape(int64_t T, int64_t n, int64_t m, gate_case **out)
{
    gate_case *c = malloc(sizeof *c * 12);
    if (!c) return -1;
    int count = 0;
    for (int v = FALCON_1; v <= FALCON_3A; v++)
        for (int d = 0; d < 2; d++) {
            gate_case k = {
                .variant = (falcon_variant)v, .align = FALCON_ALIGN_PREFIX, .phi = FALCON_PHI_IDENTITY,
                .decay = d ? GATE_DECAY_MILD : GATE_DECAY_NONE, .B = 1, .T = T, .H = 1, .n = n, .m = m,
                .window = falcon_variant_has_window((falcon_variant)v) ? 4 : 1, .chunk = 64,
                .eps = 1e-6, .key_scale = 1.0, .seed = 4096u + (uint64_t)count,
            };
            c[count++] = k;
        }
    *out = c;
    return count;
}

/* ---- the carried-memory family (gate.h) ---- */

/* Splitmix64 in (-1, 1), as the gate's inputs. */
static double carried_uniform(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 * 2 - 1;
}

gate_case gate_carried_case(falcon_variant v, gate_decay decay, int64_t T, int64_t n, int64_t m, int64_t chunk,
                            uint64_t seed)
{
    gate_case c = {v, FALCON_ALIGN_PREFIX, FALCON_PHI_IDENTITY, decay, 1, T, 1, n, m,
                   falcon_variant_has_window(v) ? 3 : 1, chunk > 0 ? chunk : 64, 1e-20, 1.0, seed};
    return c;
}

void gate_carried_inputs(const gate_case *c, gate_data *d)
{
    if (!falcon_variant_is_regression(c->variant)) return;
    for (int64_t t = 0; t < c->B * c->T * c->H; t++) {
        ((double *)d->in64.beta)[t] = 1.0;
        if (d->prec == FALCON_FP64)
            ((double *)d->in.beta)[t] = 1.0;
        else
            ((float *)d->in.beta)[t] = 1.0f;
    }
}

falcon_status gate_carried_state(const gate_case *c, falcon_precision prec, double scale, uint64_t seed,
                                 falcon_state **st)
{
    const int64_t heads = c->B * c->H, cells = heads * c->m * c->n;
    double *S = malloc(sizeof(double) * (size_t)cells);
    *st = NULL;
    if (!S) return FALCON_E_NOMEM;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int64_t i = 0; i < cells; i++) {
        const double x = scale * carried_uniform(&s);
        S[i] = prec == FALCON_FP64 ? x : (double)(float)x;
    }
    falcon_status r = falcon_state_create(heads, c->n, c->m, c->window, st);
    if (!r) r = falcon_state_set_memory(*st, S);
    if (r) {
        falcon_state_free(*st);
        *st = NULL;
    }
    free(S);
    return r;
}
