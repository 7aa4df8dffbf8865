/*
 * Packed variable-length batches and grouped heads (falcon.h,
 * falcon_inputs), lowered to plain [B][T][H][D] calls of the library:
 * grouped q and k are repeated to one head per value head, and each packed
 * sequence runs as a call of its own on its heads of the state. Every
 * backend and form so takes these layouts, with the results of the calls a
 * caller would make by hand, bit for bit; the gradients of shared q and k
 * heads are the one step added: sums over the value heads that read them.
 *
 * The calls arrive validated (falcon_run_from, falcon_backward), their
 * backend available; what a sequence's call can still report (OVERFLOW,
 * NOMEM) is passed on with the sequence named and its indices made the
 * packed call's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

int falcon_inputs_plain(const falcon_inputs *in)
{
    return !in->cu_seqlens && (in->qk_heads == 0 || in->qk_heads == in->H);
}

int64_t falcon_qk_heads(const falcon_inputs *in) { return in->qk_heads > 0 ? in->qk_heads : in->H; }

int64_t falcon_qk_head_of(const falcon_inputs *in, int64_t h)
{
    const int64_t Hq = falcon_qk_heads(in), G = in->H / Hq;
    return in->head_map == FALCON_HEADS_TILED ? h % Hq : h / G;
}

static size_t elem_size(falcon_precision p) { return p == FALCON_FP64 ? sizeof(double) : sizeof(float); }

/* q or k, [B][T][H_qk][n], repeated to [B][T][H][n] through the map; NULL
 * when memory is short. */
static void *repeat_heads(const falcon_inputs *in, const void *x, size_t es)
{
    const int64_t H = in->H, Hq = falcon_qk_heads(in), rows = in->B * in->T, n = in->n;
    const size_t row = (size_t)n * es;
    char *out = malloc((size_t)(rows * H) * row + 1);
    if (!out) return NULL;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++)
            memcpy(out + (size_t)(r * H + h) * row, (const char *)x + (size_t)(r * Hq + falcon_qk_head_of(in, h)) * row,
                   row);
    return out;
}

/* The gradient of a shared q/k head, [B][T][H_qk][n]: the sum of the
 * gradients of the value heads that read it (wide, [B][T][H][n]), in
 * double and head order, rounded once. OVERFLOW when a sum leaves the
 * range of the run's precision. */
static falcon_status sum_heads(const falcon_inputs *in, const void *wide, void *dst, falcon_precision p,
                               const char *name)
{
    const int64_t H = in->H, Hq = falcon_qk_heads(in), rows = in->B * in->T, n = in->n;
    double *acc = calloc((size_t)(Hq * n), sizeof(double));
    if (!acc) return falcon_fail_in("", "out-of-memory", FALCON_E_NOMEM, "out of memory summing %s", name);
    falcon_status s = FALCON_OK;
    for (int64_t r = 0; r < rows && !s; r++) {
        memset(acc, 0, sizeof(double) * (size_t)(Hq * n));
        for (int64_t h = 0; h < H; h++) {
            double *a = acc + falcon_qk_head_of(in, h) * n;
            for (int64_t i = 0; i < n; i++) a[i] += falcon_load(wide, p, (r * H + h) * n + i);
        }
        for (int64_t i = 0; i < Hq * n && !s; i++) {
            const int64_t at = r * Hq * n + i;
            if (p == FALCON_FP64) ((double *)dst)[at] = acc[i];
            else ((float *)dst)[at] = (float)acc[i];
            if (!isfinite(falcon_load(dst, p, at)))
                s = falcon_blame_at(falcon_fail(FALCON_E_OVERFLOW, "%s[%lld] is not finite: the sum over the "
                                                "value heads sharing it left the range of %s", name,
                                                (long long)at, falcon_precision_name(p)),
                                    name, "overflow", at, r % in->T, (r / in->T) * Hq + i / n);
        }
    }
    free(acc);
    return s;
}

/* Sequence i of a packed batch as a call of its own: B = 1 and its steps
 * of the packed tensors. */
static falcon_inputs sequence_of(const falcon_inputs *in, int64_t i, size_t es)
{
    const int64_t t0 = in->cu_seqlens[i], H = in->H;
    falcon_inputs sub = *in;
    sub.T = in->cu_seqlens[i + 1] - t0;
    sub.cu_seqlens = NULL;
    sub.seqs = 0;
    const size_t at = (size_t)(t0 * H) * es;
    sub.q = (const char *)in->q + at * (size_t)in->n;
    sub.k = (const char *)in->k + at * (size_t)in->n;
    sub.v = (const char *)in->v + at * (size_t)in->m;
    sub.beta = (const char *)in->beta + at;
    sub.alpha = in->alpha ? (const char *)in->alpha + at : NULL;
    sub.gain = in->gain ? (const char *)in->gain + at * (size_t)in->n : NULL;
    return sub;
}

/* Where sequence i's part of an array a failure names begins in the packed
 * call's: rows of the packed tensors (out and the inputs' gradients), or
 * heads of the state's arrays; -1 for the others. */
static int64_t packed_offset(const char *name, const falcon_inputs *in, int64_t window, int64_t i)
{
    const int64_t n = in->n, m = in->m, keep = window - 1, rows = in->cu_seqlens[i] * in->H, h0 = i * in->H;
    static const char *const names[] = {"out", "dv", "dq", "dk", "dgain", "dbeta", "dalpha",
                                        "S", "dS0", "dprev_key", "dhist_k", "dhist_v"};
    const int64_t per[] = {rows * m, rows * m, rows * n, rows * n, rows * n, rows, rows,
                           h0 * m * n, h0 * m * n, h0 * n, h0 * keep * n, h0 * keep * m};
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++)
        if (!strcmp(name, names[j])) return per[j];
    return -1;
}

/* A failure of sequence i's call, told of the packed call: the sequence
 * named, and its step, head and element index made the packed call's. */
static falcon_status as_packed(falcon_status s, const falcon_inputs *in, int64_t window, int64_t i)
{
    const falcon_error_info *e = falcon_last_error_info();
    char input[64], rule[64], message[400];
    snprintf(input, sizeof input, "%s", e->input);
    snprintf(rule, sizeof rule, "%s", e->rule);
    snprintf(message, sizeof message, "%s", e->message);
    const int64_t t0 = in->cu_seqlens[i], h0 = i * in->H, offset = packed_offset(input, in, window, i);
    const int64_t index = e->index >= 0 && offset >= 0 ? e->index + offset : -1;
    const int64_t t = e->t >= 0 ? e->t + t0 : -1, head = e->head >= 0 ? e->head + h0 : -1;
    falcon_fail(s, "sequence %lld of the packed batch (steps [%lld, %lld), state heads [%lld, %lld)): %s",
                (long long)i, (long long)t0, (long long)in->cu_seqlens[i + 1], (long long)h0,
                (long long)(h0 + in->H), message);
    return falcon_blame_at(s, input, rule, index, t, head);
}

static falcon_status run_packed(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state, void *out)
{
    const size_t es = elem_size(cfg->precision);
    falcon_state *work = NULL, *seq = NULL;
    falcon_status s = state ? falcon_state_copy(state, &work)
                            : falcon_state_create(falcon_inputs_state_heads(in), in->n, in->m, cfg->window, &work);
    if (!s) s = falcon_state_create(in->H, in->n, in->m, cfg->window, &seq);
    for (int64_t i = 0; !s && i < in->seqs; i++) {
        const falcon_inputs sub = sequence_of(in, i, es);
        if (sub.T == 0) continue;
        falcon_state_heads_get(work, i * in->H, seq);
        s = falcon_run_from(cfg, &sub, seq, (char *)out + (size_t)(in->cu_seqlens[i] * in->H * in->m) * es, 0);
        if (s) s = as_packed(s, in, cfg->window, i);
        else falcon_state_heads_put(work, i * in->H, seq);
    }
    falcon_state_free(seq);
    if (!s && state) falcon_state_take(state, work);
    else falcon_state_free(work);
    return s;
}

/* The repeated q and k of grouped inputs into *flat (plain heads); *q,
 * *k the buffers to free. */
static falcon_status flatten_heads(const falcon_inputs *in, size_t es, falcon_inputs *flat, void **q, void **k)
{
    *flat = *in;
    *q = *k = NULL;
    if (in->qk_heads == 0 || in->qk_heads == in->H) return FALCON_OK;
    *q = repeat_heads(in, in->q, es);
    *k = repeat_heads(in, in->k, es);
    if (!*q || !*k)
        return falcon_fail_in("", "out-of-memory", FALCON_E_NOMEM, "out of memory repeating grouped q/k heads");
    flat->q = *q;
    flat->k = *k;
    flat->qk_heads = 0;
    return FALCON_OK;
}

falcon_status falcon_run_layout(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state, void *out,
                                int64_t t0)
{
    falcon_inputs flat;
    void *q, *k;
    falcon_status s = flatten_heads(in, elem_size(cfg->precision), &flat, &q, &k);
    if (!s) s = in->cu_seqlens ? run_packed(cfg, &flat, state, out) : falcon_run_from(cfg, &flat, state, out, t0);
    free(q);
    free(k);
    return s;
}

/* The gradients of sequence i: its rows of the packed tensors, its heads
 * of the state's. */
static falcon_grads grads_of(const falcon_inputs *in, const falcon_grads *g, int64_t i, int64_t window, size_t es)
{
    const int64_t H = in->H, n = in->n, m = in->m, keep = window - 1, h0 = i * H;
    const size_t at = (size_t)(in->cu_seqlens[i] * H) * es;
    falcon_grads sub = {
        .dq = g->dq ? (char *)g->dq + at * (size_t)n : NULL,
        .dk = g->dk ? (char *)g->dk + at * (size_t)n : NULL,
        .dv = g->dv ? (char *)g->dv + at * (size_t)m : NULL,
        .dbeta = g->dbeta ? (char *)g->dbeta + at : NULL,
        .dalpha = g->dalpha ? (char *)g->dalpha + at : NULL,
        .dgain = g->dgain ? (char *)g->dgain + at * (size_t)n : NULL,
        .dS0 = g->dS0 ? g->dS0 + h0 * m * n : NULL,
        .dprev_key = g->dprev_key ? g->dprev_key + h0 * n : NULL,
        .dhist_k = g->dhist_k ? g->dhist_k + h0 * keep * n : NULL,
        .dhist_v = g->dhist_v ? g->dhist_v + h0 * keep * m : NULL,
    };
    return sub;
}

static falcon_status backward_packed(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *state,
                                     const void *dO, const double *dS_T, const falcon_grads *grads)
{
    const size_t es = elem_size(cfg->precision);
    const int64_t H = in->H, mn = in->m * in->n;
    falcon_state *seq = NULL;
    falcon_status s = state ? falcon_state_create(H, in->n, in->m, cfg->window, &seq) : FALCON_OK;
    for (int64_t i = 0; !s && i < in->seqs; i++) {
        const falcon_inputs sub = sequence_of(in, i, es);
        const falcon_grads g = grads_of(in, grads, i, cfg->window, es);
        if (seq) falcon_state_heads_get(state, i * H, seq);
        const void *dO_i = dO ? (const char *)dO + (size_t)(in->cu_seqlens[i] * H * in->m) * es : NULL;
        s = falcon_backward(cfg, &sub, seq, dO_i, dS_T ? dS_T + i * H * mn : NULL, &g);
        if (s) s = as_packed(s, in, cfg->window, i);
    }
    falcon_state_free(seq);
    return s;
}

falcon_status falcon_backward_layout(const falcon_plan *plan, const falcon_inputs *in, const falcon_state *state,
                                     const void *dO, const double *dS_T, const falcon_grads *grads)
{
    const falcon_config *cfg = &plan->cfg0;
    const size_t es = elem_size(cfg->precision);
    falcon_inputs flat;
    void *q, *k, *dq = NULL, *dk = NULL;
    falcon_status s = flatten_heads(in, es, &flat, &q, &k);
    falcon_grads g = *grads;
    if (!s && q && in->T > 0) { /* grouped: the value heads' gradients of q and k, summed below */
        const size_t bytes = (size_t)(in->B * in->T * in->H * in->n) * es;
        dq = malloc(bytes);
        dk = malloc(bytes);
        if (!dq || !dk) s = falcon_fail_in("", "out-of-memory", FALCON_E_NOMEM, "out of memory for grouped dq/dk");
        g.dq = dq;
        g.dk = dk;
    }
    if (!s) s = in->cu_seqlens ? backward_packed(cfg, &flat, state, dO, dS_T, &g)
                               : falcon_backward(cfg, &flat, state, dO, dS_T, &g);
    if (!s && dq && (s = sum_heads(in, dq, grads->dq, cfg->precision, "dq")) == FALCON_OK)
        s = sum_heads(in, dk, grads->dk, cfg->precision, "dk");
    free(q);
    free(k);
    free(dq);
    free(dk);
    return s;
}

/* ---- state pools (falcon_run_pool) ---- */

/* The pool's slot indices: each in [-1, P), none given twice. */
static falcon_status check_slots(const falcon_inputs *in, const falcon_state *pool, const int64_t *slots,
                                 int64_t count)
{
    if (!pool || !slots) return falcon_fail_in(!pool ? "state" : "slots", "null", FALCON_E_ARGUMENT,
                                               "run_pool: %s is NULL", !pool ? "the pool" : "slots");
    if (pool->heads % in->H || pool->n != in->n || pool->m != in->m)
        return falcon_fail_in("state", "state-shape", FALCON_E_SHAPE,
                              "run_pool: the pool has %lld heads of m = %lld, n = %lld: it needs slots of H = %lld "
                              "heads of m = %lld, n = %lld", (long long)pool->heads, (long long)pool->m,
                              (long long)pool->n, (long long)in->H, (long long)in->m, (long long)in->n);
    const int64_t P = pool->heads / in->H;
    for (int64_t i = 0; i < count; i++) {
        if (slots[i] < -1 || slots[i] >= P)
            return falcon_blame_at(falcon_fail(FALCON_E_RANGE, "slots[%lld] = %lld: a slot of the pool's %lld, or "
                                               "-1 for a fresh state", (long long)i, (long long)slots[i],
                                               (long long)P), "slots", "slot-range", i, -1, -1);
        for (int64_t j = 0; j < i && slots[i] >= 0; j++)
            if (slots[j] == slots[i])
                return falcon_blame_at(falcon_fail(FALCON_E_RANGE, "slots[%lld] = slots[%lld] = %lld: two "
                                                   "sequences cannot both write one slot", (long long)j,
                                                   (long long)i, (long long)slots[i]), "slots", "slot-twice", i,
                                       -1, -1);
    }
    return FALCON_OK;
}

falcon_status falcon_run_pool(const falcon_config *cfg, const falcon_inputs *in, falcon_state *pool,
                              const int64_t *slots, void *out)
{
    falcon_status s = falcon_validate(cfg, in, NULL); /* the inputs first: then their counts are sane */
    if (s) return s;
    const int64_t count = in->cu_seqlens ? in->seqs : in->B, H = in->H;
    if ((s = check_slots(in, pool, slots, count))) return s;
    falcon_state *work = NULL;
    s = falcon_state_create(count * H, in->n, in->m, pool->window, &work);
    for (int64_t i = 0; !s && i < count; i++) /* the indexed slots gathered in the call's order */
        if (slots[i] >= 0) falcon_state_heads_copy(work, i * H, pool, slots[i] * H, H);
    if (!s) s = falcon_run(cfg, in, work, out);
    for (int64_t i = 0; !s && i < count; i++) /* and scattered back: no other slot is touched */
        if (slots[i] >= 0) falcon_state_heads_copy(pool, slots[i] * H, work, i * H, H);
    falcon_state_free(work);
    return s;
}
