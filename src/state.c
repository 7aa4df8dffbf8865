/* The carried state: memory, previous key and window history per head. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "../kernels/framework/head.h"
#include "../kernels/common/falcon_math.h"

/* A state of these shapes; its memory zero, or left as the kept block held
 * it when the caller writes all of it next (falcon_state_copy, on every
 * falcon_run: zeroing it first was a second pass over the memory). */
static falcon_status state_new(int64_t heads, int64_t n, int64_t m, int64_t window, int zero_memory,
                               falcon_state **out)
{
    if (!out) return falcon_fail_in("state", "null", FALCON_E_ARGUMENT, "state: the output pointer is NULL");
    if (heads < 1 || heads > (1 << 24))
        return falcon_fail_in("heads", "heads-range",
                              FALCON_E_SHAPE, "state: heads = %lld must be in [1, 2^24]", (long long)heads);
    if (n < 1 || n > FALCON_MAX_DIM || m < 1 || m > FALCON_MAX_DIM)
        return falcon_fail_in(n < 1 || n > FALCON_MAX_DIM ? "n" : "m",
                              n < 1 || n > FALCON_MAX_DIM ? "n-range" : "m-range",
                              FALCON_E_SHAPE, "state: n = %lld, m = %lld must be in [1, %d]",
                              (long long)n, (long long)m, FALCON_MAX_DIM);
    if (window < 1 || window > FALCON_MAX_WINDOW)
        return falcon_fail_in("window", "window-range", FALCON_E_RANGE, "state: window = %lld must be in [1, %d]",
                              (long long)window, FALCON_MAX_WINDOW);
    falcon_state *s = calloc(1, sizeof *s);
    if (!s) return falcon_fail_in("state", "out-of-memory", FALCON_E_NOMEM, "state: out of memory");
    s->heads = heads; s->n = n; s->m = m; s->window = window; s->keep = window - 1;
    s->memory_f32 = 1;
    /* The memory: the array every run copies (falcon_run works on a copy
     * and swaps it in), so it comes from the kept work memory: a stream
     * of short calls then maps no page anew (src/work-memory.c). */
    const size_t S_bytes = sizeof(double) * (size_t)(heads * m * n);
    s->S = falcon_work_get(S_bytes, &s->S_bytes);
    if (s->S && zero_memory) memset(s->S, 0, S_bytes);
    s->prev_key = calloc((size_t)(heads * n), sizeof(double));
    s->has_prev = calloc((size_t)heads, 1);
    s->hist_k = calloc((size_t)(heads * s->keep * n + 1), sizeof(double));
    s->hist_v = calloc((size_t)(heads * s->keep * m + 1), sizeof(double));
    s->hist_len = calloc((size_t)heads, sizeof(int64_t));
    s->scale = malloc(sizeof(double) * (size_t)heads);
    if (!s->S || !s->prev_key || !s->has_prev || !s->hist_k || !s->hist_v || !s->hist_len || !s->scale) {
        falcon_state_free(s);
        return falcon_fail_in("state", "out-of-memory",
                              FALCON_E_NOMEM, "state: out of memory for %lld heads of %lld x %lld",
                              (long long)heads, (long long)m, (long long)n);
    }
    for (int64_t h = 0; h < heads; h++) s->scale[h] = 1;
    *out = s;
    return FALCON_OK;
}

falcon_status falcon_state_create(int64_t heads, int64_t n, int64_t m, int64_t window,
                                  falcon_state **out)
{
    return state_new(heads, n, m, window, 1, out);
}

void falcon_state_free(falcon_state *s)
{
    if (!s) return;
    falcon_work_put(s->S, s->S_bytes);
    free(s->prev_key); free(s->has_prev);
    free(s->hist_k); free(s->hist_v); free(s->hist_len); free(s->scale);
    free(s);
}

falcon_status falcon_state_reset(falcon_state *s)
{
    if (!s) return falcon_fail_in("state", "null", FALCON_E_ARGUMENT, "state is NULL");
    memset(s->S, 0, sizeof(double) * (size_t)(s->heads * s->m * s->n));
    s->memory_f32 = 1;
    for (int64_t h = 0; h < s->heads; h++) s->scale[h] = 1;
    memset(s->has_prev, 0, (size_t)s->heads);
    memset(s->hist_len, 0, sizeof(int64_t) * (size_t)s->heads);
    return FALCON_OK;
}

falcon_status falcon_state_copy(const falcon_state *src, falcon_state **out)
{
    if (!src || !out) return falcon_fail_in("state", "null", FALCON_E_ARGUMENT, "state copy: NULL argument");
    return falcon_state_clone(src, 1, out);
}

falcon_status falcon_state_clone(const falcon_state *src, int copy_memory, falcon_state **out)
{
    falcon_state *d;
    falcon_status st = state_new(src->heads, src->n, src->m, src->window, 0, &d);
    if (st) return st;
    int64_t H = src->heads;
    if (copy_memory) memcpy(d->S, src->S, sizeof(double) * (size_t)(H * src->m * src->n));
    memcpy(d->prev_key, src->prev_key, sizeof(double) * (size_t)(H * src->n));
    memcpy(d->has_prev, src->has_prev, (size_t)H);
    memcpy(d->hist_k, src->hist_k, sizeof(double) * (size_t)(H * src->keep * src->n));
    memcpy(d->hist_v, src->hist_v, sizeof(double) * (size_t)(H * src->keep * src->m));
    memcpy(d->hist_len, src->hist_len, sizeof(int64_t) * (size_t)H);
    memcpy(d->scale, src->scale, sizeof(double) * (size_t)H);
    d->memory_f32 = src->memory_f32;
    *out = d;
    return FALCON_OK;
}

void falcon_state_take(falcon_state *dst, falcon_state *src)
{
    falcon_state tmp = *dst;
    *dst = *src;
    *src = tmp;
    falcon_state_free(src);
}

falcon_state_view falcon_state_get_view(const falcon_state *s)
{
    falcon_state_view v;
    memset(&v, 0, sizeof v);
    if (!s) return v;
    v.heads = s->heads; v.n = s->n; v.m = s->m; v.window = s->window; v.keep = s->keep;
    v.S = s->S; v.prev_key = s->prev_key; v.has_prev = s->has_prev;
    v.hist_k = s->hist_k; v.hist_v = s->hist_v; v.hist_len = s->hist_len;
    return v;
}

const double *falcon_state_scale(const falcon_state *s) { return s ? s->scale : NULL; }

falcon_status falcon_state_set_memory(falcon_state *s, const double *S)
{
    if (!s || !S) return falcon_fail_in(!s ? "state" : "S", "null",
                                        FALCON_E_ARGUMENT, "state_set_memory: NULL argument");
    int64_t count = s->heads * s->m * s->n;
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(S[i]))
            return falcon_blame_at(falcon_fail(FALCON_E_NONFINITE, "S[%lld] = %g: the memory must be finite",
                                               (long long)i, S[i]),
                                   "S", "state-finite", i, -1, i / (s->m * s->n));
    memcpy(s->S, S, sizeof(double) * (size_t)count);
    for (int64_t h = 0; h < s->heads; h++) s->scale[h] = 1;
    s->memory_f32 = 0;
    return FALCON_OK;
}

void falcon_state_advance(falcon_state *st, const falcon_config *cfg, const falcon_inputs *in,
                          int64_t b, int64_t h)
{
    const int64_t head = b * in->H + h, n = st->n, m = st->m, T = in->T, keep = st->keep;
    if (T == 0) return;
    const int prefix = cfg->align == FALCON_ALIGN_PREFIX;
    falcon_examples ex = falcon_examples_make(st->hist_len[head], prefix, st->has_prev[head],
                                              st->window);
    double *hk = st->hist_k + head * keep * n, *hv = st->hist_v + head * keep * m;
    double *pk = st->prev_key + head * n;
    /* Row offsets of step t's key and value in the [B][T][H][D] tensors. */
#define KEY_AT(t) ((((b) * T + (t)) * in->H + h) * n)
#define VAL_AT(t) ((((b) * T + (t)) * in->H + h) * m)
    const int64_t total = falcon_examples_after(&ex, T);
    const int64_t kept = total < keep ? total : keep;
    /* The new history may read the old one: build it in order, oldest first,
     * which only ever reads old rows at or after the one being written. */
    for (int64_t i = 0; i < kept; i++) {
        const int64_t e = total - kept + i;
        if (e < ex.carried) {
            if (e != i) {
                memmove(hk + i * n, hk + e * n, sizeof(double) * (size_t)n);
                memmove(hv + i * m, hv + e * m, sizeof(double) * (size_t)m);
            }
            continue;
        }
        const int64_t t = falcon_step_of_example(&ex, e);
        for (int64_t c = 0; c < m; c++) hv[i * m + c] = falcon_load(in->v, cfg->precision, VAL_AT(t) + c);
        if (prefix && t == 0)
            memmove(hk + i * n, pk, sizeof(double) * (size_t)n);
        else
            for (int64_t c = 0; c < n; c++)
                hk[i * n + c] = falcon_load(in->k, cfg->precision, KEY_AT(prefix ? t - 1 : t) + c);
    }
    st->hist_len[head] = kept;
    for (int64_t c = 0; c < n; c++) pk[c] = falcon_load(in->k, cfg->precision, KEY_AT(T - 1) + c);
    st->has_prev[head] = 1;
#undef KEY_AT
#undef VAL_AT
}

/* Heads [h0, h0 + part->heads) of whole, copied into part or back (same
 * n, m, window): a packed batch runs each sequence on its heads alone
 * (src/layout.c). */
static void copy_heads(falcon_state *dst, int64_t dh, const falcon_state *src, int64_t sh, int64_t count)
{
    const int64_t mn = src->m * src->n, n = src->n, m = src->m, keep = src->keep;
    memcpy(dst->S + dh * mn, src->S + sh * mn, sizeof(double) * (size_t)(count * mn));
    memcpy(dst->prev_key + dh * n, src->prev_key + sh * n, sizeof(double) * (size_t)(count * n));
    memcpy(dst->has_prev + dh, src->has_prev + sh, (size_t)count);
    memcpy(dst->hist_k + dh * keep * n, src->hist_k + sh * keep * n, sizeof(double) * (size_t)(count * keep * n));
    memcpy(dst->hist_v + dh * keep * m, src->hist_v + sh * keep * m, sizeof(double) * (size_t)(count * keep * m));
    memcpy(dst->hist_len + dh, src->hist_len + sh, sizeof(int64_t) * (size_t)count);
    memcpy(dst->scale + dh, src->scale + sh, sizeof(double) * (size_t)count);
}

void falcon_state_heads_get(const falcon_state *whole, int64_t h0, falcon_state *part)
{
    copy_heads(part, 0, whole, h0, part->heads);
    part->memory_f32 = whole->memory_f32;
}

void falcon_state_heads_copy(falcon_state *dst, int64_t dh, const falcon_state *src, int64_t sh, int64_t count)
{
    copy_heads(dst, dh, src, sh, count);
    dst->memory_f32 = dst->memory_f32 && src->memory_f32;
}

void falcon_state_heads_put(falcon_state *whole, int64_t h0, const falcon_state *part)
{
    falcon_state_heads_copy(whole, h0, part, 0, part->heads);
}

falcon_status falcon_state_slice(const falcon_state *src, int64_t first, int64_t count, falcon_state **out)
{
    if (!src || !out) return falcon_fail_in("state", "null", FALCON_E_ARGUMENT, "state_slice: a NULL pointer");
    if (first < 0 || count < 1 || first > src->heads - count)
        return falcon_fail_in("heads", "heads-range", FALCON_E_SHAPE,
                              "state_slice: heads [%lld, %lld + %lld) are not within the state's %lld",
                              (long long)first, (long long)first, (long long)count, (long long)src->heads);
    const falcon_status s = state_new(count, src->n, src->m, src->window, 0, out);
    if (s) return s;
    falcon_state_heads_get(src, first, *out);
    return FALCON_OK;
}
