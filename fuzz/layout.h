/*
 * The plain calls a packed or grouped call stands for (include/falcon.h,
 * docs/math.md section 13), made by the harness from its own reading of
 * the header, not from src/layout.c: q and k repeated to one head per value
 * head through head_map, and each packed sequence run as a call of its own
 * on a state of H heads. A call that succeeded must equal them bit for bit:
 * its reads, and each sequence's heads of its state.
 */
#ifndef FALCON_FUZZ_LAYOUT_H
#define FALCON_FUZZ_LAYOUT_H

#include "call.h"

/* Whether the inputs are a plain call's: no offsets, one q/k head per value head. */
static inline int fuzz_layout_plain(const falcon_inputs *in)
{
    return !in->cu_seqlens && (in->qk_heads == 0 || in->qk_heads == in->H);
}

/* q or k, [B][T][H_qk][n], repeated to [B][T][H][n]: value head h reads
 * h / G (interleaved) or h % H_qk (tiled). */
static inline void *fuzz_repeat_heads(const fuzz_call *c, const void *x)
{
    const falcon_inputs *in = &c->in;
    const int64_t H = in->H, Hq = in->qk_heads > 0 ? in->qk_heads : H, G = H / Hq, rows = in->B * in->T;
    const size_t row = c->es * (size_t)in->n;
    char *out = malloc((size_t)(rows * H) * row + 1);
    FUZZ_CHECK(out != NULL, "malloc");
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t from = in->head_map == FALCON_HEADS_TILED ? h % Hq : h / G;
            memcpy(out + (size_t)(r * H + h) * row, (const char *)x + (size_t)(r * Hq + from) * row, row);
        }
    return out;
}

/* Steps [a, b) of B = 1 inputs with one q/k head per value head, as a plain call. */
static inline falcon_inputs fuzz_steps(const falcon_inputs *in, size_t es, int64_t a, int64_t b)
{
    falcon_inputs s = *in;
    const size_t at = es * (size_t)(a * in->H);
    s.T = b - a, s.cu_seqlens = NULL, s.seqs = 0, s.qk_heads = 0;
    s.q = (const char *)in->q + at * (size_t)in->n;
    s.k = (const char *)in->k + at * (size_t)in->n;
    s.v = (const char *)in->v + at * (size_t)in->m;
    s.beta = (const char *)in->beta + at;
    if (in->alpha) s.alpha = (const char *)in->alpha + at;
    if (in->gain) s.gain = (const char *)in->gain + at * (size_t)in->n;
    return s;
}

/* Heads [h0, h0 + b's heads) of a hold what b's do, every array. */
static inline int fuzz_same_heads(const falcon_state *a, int64_t h0, const falcon_state *b)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const size_t H = (size_t)y.heads, h = (size_t)h0, n = (size_t)x.n, m = (size_t)x.m, keep = (size_t)x.keep;
    return !memcmp(x.S + h * m * n, y.S, sizeof(double) * H * m * n) && !memcmp(x.has_prev + h, y.has_prev, H) &&
           !memcmp(x.prev_key + h * n, y.prev_key, sizeof(double) * H * n) &&
           !memcmp(x.hist_len + h, y.hist_len, sizeof(int64_t) * H) &&
           !memcmp(x.hist_k + h * keep * n, y.hist_k, sizeof(double) * H * keep * n) &&
           !memcmp(x.hist_v + h * keep * m, y.hist_v, sizeof(double) * H * keep * m);
}

/* A successful packed or grouped call (reads `out`, state `after` or
 * NULL) against its plain calls: each on a fresh state of its heads, run
 * once first where the call's state was carried (the carried state is a
 * first run of the same inputs, which the plain calls repeat). */
static inline void fuzz_check_layout_plain(const fuzz_call *c, const unsigned char *out, const falcon_state *after)
{
    const falcon_inputs *in = &c->in;
    falcon_inputs flat = *in;
    void *q = fuzz_repeat_heads(c, in->q), *k = fuzz_repeat_heads(c, in->k);
    flat.q = q, flat.k = k, flat.qk_heads = 0;
    const int64_t seqs = in->cu_seqlens ? in->seqs : 1, H = in->H, m = in->m;
    const int64_t W = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window : 1;
    unsigned char *part = malloc(c->es * (size_t)(c->rows * m) + 1);
    FUZZ_CHECK(part != NULL, "malloc");
    for (int64_t i = 0; i < seqs; i++) {
        const int64_t t0 = in->cu_seqlens ? in->cu_seqlens[i] : 0;
        const falcon_inputs one = in->cu_seqlens ? fuzz_steps(&flat, c->es, t0, in->cu_seqlens[i + 1]) : flat;
        const int64_t heads = one.B * H;
        const size_t bytes = c->es * (size_t)(one.B * one.T * H * m), at = c->es * (size_t)(t0 * H * m);
        falcon_state *st = NULL;
        if (after) FUZZ_CHECK(falcon_state_create(heads, in->n, m, W, &st) == FALCON_OK, "state");
        if (st && c->warm_ok)
            FUZZ_CHECK(falcon_run(&c->cfg, &one, st, part) == FALCON_OK, "the plain warm-up of sequence %lld "
                       "failed where the layout call's succeeded: %s", (long long)i, falcon_last_error());
        const falcon_status s = falcon_run(&c->cfg, &one, st, part);
        FUZZ_CHECK(s == FALCON_OK, "sequence %lld's plain call failed where the layout call succeeded: %s",
                   (long long)i, falcon_last_error());
        FUZZ_CHECK(!memcmp(part, out + at, bytes), "sequence %lld (steps from %lld, %s heads, qk_heads %lld): the "
                   "reads differ from its plain call's", (long long)i, (long long)t0,
                   in->head_map == FALCON_HEADS_TILED ? "tiled" : "interleaved", (long long)in->qk_heads);
        if (st) FUZZ_CHECK(fuzz_same_heads(after, i * heads, st), "sequence %lld: its state differs from its plain "
                           "call's", (long long)i);
        falcon_state_free(st);
    }
    free(part);
    free(q);
    free(k);
}

#endif
