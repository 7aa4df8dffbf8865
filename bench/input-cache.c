/* falcon-bench's inputs kept a few sets at a time (bench/input-cache.h). */
#include <stdio.h>
#include <unistd.h>
#include "input-cache.h"
#include "../gate/gate.h" /* the decay regimes (gate_decay_alpha) */

/* A few input sets kept at once, up to a budget of bytes: with random
 * interleaving consecutive repetitions are of other shapes, and drawing
 * the largest sets again each time cost seconds of the quick report. */
enum { CACHE_SETS = 8 };
static struct cached_inputs {
    fb_inputs in;
    int decay;     /* the regime in.alpha holds (-1: as fb_inputs_make drew it) */
    uint64_t used; /* the cache's clock at its last use; 0: an empty slot */
    double bytes;
} cache[CACHE_SETS];
static uint64_t cache_clock;
static double cache_budget; /* bytes: min(2 GiB, an eighth of the memory) */

void fb_inputs_cache_free(void)
{
    for (int i = 0; i < CACHE_SETS; i++) fb_inputs_free(&cache[i].in), cache[i].used = 0;
}

/* alpha of a decay entry: the gate's regime (gate/gate.c), the same values
 * for every backend and machine (one stream per head, seeded by the head);
 * the regime's own pattern in t (extreme: every 5th step) in every head. */
void fb_alpha_set_decay(void *alpha, int64_t T, int64_t H, falcon_precision prec, int d)
{
    for (int64_t hd = 0; hd < H; hd++) {
        uint64_t s = 0x6465636179ull + (uint64_t)hd;
        for (int64_t t = 0; t < T; t++) {
            const double a = gate_decay_alpha((gate_decay)d, &s, t, T, prec);
            if (prec == FALCON_FP32) ((float *)alpha)[t * H + hd] = (float)a;
            else ((double *)alpha)[t * H + hd] = a;
        }
    }
}

static void inputs_set_decay(fb_inputs *in, int d) { fb_alpha_set_decay(in->alpha, in->T, in->H, in->prec, d); }

static double inputs_bytes(int64_t T, int64_t H, int64_t n, int64_t m, falcon_precision prec)
{
    return (double)(T * H) * (double)(3 * n + 2 * m + 2) * (prec == FALCON_FP32 ? 4.0 : 8.0);
}

/* A slot for a set of `need` bytes: the least recently used sets freed
 * until it fits the budget (or the cache is empty). */
static struct cached_inputs *inputs_slot(double need)
{
    for (;;) {
        double held = 0;
        struct cached_inputs *lru = NULL, *free_slot = NULL;
        for (int i = 0; i < CACHE_SETS; i++) {
            if (!cache[i].used) { free_slot = free_slot ? free_slot : &cache[i]; continue; }
            held += cache[i].bytes;
            if (!lru || cache[i].used < lru->used) lru = &cache[i];
        }
        if (free_slot && (held + need <= cache_budget || !lru)) return free_slot;
        fb_inputs_free(&lru->in), lru->used = 0;
    }
}

const fb_inputs *fb_inputs_get(int64_t T, int64_t H, int64_t n, int64_t m, falcon_precision prec, int has_gain,
                               int decay, char *why, size_t len)
{
    struct cached_inputs *e = NULL;
    for (int i = 0; i < CACHE_SETS && !e; i++) {
        const fb_inputs *in = &cache[i].in;
        if (cache[i].used && in->T == T && in->H == H && in->n == n && in->m == m && in->prec == prec &&
            in->has_gain >= has_gain)
            e = &cache[i];
    }
    if (!e) {
        const double need = inputs_bytes(T, H, n, m, prec);
        const double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (have > 0 && need > 0.5 * have) {
            snprintf(why, len, "inputs need %.1f GiB, over half of this machine's memory", need / (1 << 30));
            return NULL;
        }
        if (cache_budget == 0) cache_budget = have > 0 && have / 8 < 2.0 * (1 << 30) ? have / 8 : 2.0 * (1 << 30);
        e = inputs_slot(need);
        if (fb_inputs_make(&e->in, T, H, n, m, prec, has_gain)) {
            snprintf(why, len, "out of memory for the inputs");
            return NULL;
        }
        e->decay = -1, e->bytes = need;
    }
    e->used = ++cache_clock;
    if (e->decay != decay) {
        if (decay >= 0) inputs_set_decay(&e->in, decay); /* only alpha changes */
        else fb_inputs_alpha_redraw(&e->in);
        e->decay = decay;
    }
    return &e->in;
}
