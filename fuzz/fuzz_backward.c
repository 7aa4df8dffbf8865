/*
 * Fuzzing falcon_backward: the input decodes into one call (fuzz/call.h:
 * configuration, sizes, layout, tensors, values, state), then cotangents (dO of the
 * reads, dS_T of the end memory: present or NULL, values as the inputs',
 * specials included) and which gradient buffers are given (usually the
 * ones the call needs; sometimes one missing or one too many).
 *
 * Invariants (include/falcon.h, docs/math.md sections 10 and 12):
 *   - what falcon_validate refuses, falcon_backward refuses with the same
 *     status (its own checks of the cotangents and buffers come after),
 *     and it refuses exactly the layouts the decoder made invalid;
 *   - the state is never changed;
 *   - a failure writes no gradient byte (unless FALCON_E_OVERFLOW, found
 *     after computing) and says why;
 *   - a success leaves every gradient finite and writes nothing past a buffer;
 *   - a successful packed or grouped call's gradients are its plain calls'
 *     (fuzz/layout.h) bit for bit, each packed sequence's in its rows and
 *     heads, and a shared q/k head's the sum of its value heads', added in
 *     double in head order and rounded once (falcon.h).
 */
#include "call.h"
#include "layout.h"

enum { NGRAD = 10, GUARD = 16 };

typedef struct grad_bufs {
    unsigned char *p[NGRAD];
    size_t bytes[NGRAD];
} grad_bufs;

/* Buffer sizes of each gradient: tensors in the element type (dq and dk
 * q's: qk_heads heads), the state's in double (seqs x H heads packed). */
static void grad_sizes(const fuzz_call *c, size_t bytes[NGRAD])
{
    const falcon_inputs *in = &c->in;
    const int64_t rows = c->rows, qrows = c->qrows, heads = c->valid ? c->heads : 0;
    const int64_t n = c->valid ? in->n : 0, m = c->valid ? in->m : 0;
    const int64_t keep = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window - 1 : 0;
    const size_t es = c->es, d = sizeof(double);
    const size_t b[NGRAD] = {es * (size_t)(qrows * n), es * (size_t)(qrows * n), es * (size_t)(rows * m),
                             es * (size_t)rows, es * (size_t)rows, es * (size_t)(rows * n),
                             d * (size_t)(heads * m * n), d * (size_t)(heads * n),
                             d * (size_t)(heads * keep * n), d * (size_t)(heads * keep * m)};
    memcpy(bytes, b, sizeof b);
}

/* Which buffers are given: the needed ones (alpha's and gain's when those
 * inputs are), the state's three at random; sometimes one flipped. */
static void grad_alloc(fuzz_bytes *b, const fuzz_call *c, grad_bufs *g)
{
    grad_sizes(c, g->bytes);
    int given[NGRAD] = {1, 1, 1, 1, c->in.alpha != NULL, c->in.gain != NULL, 1, 1, 1, 1};
    const uint8_t u = fuzz_u8(b); /* bits 4-7: the state's four; bit 3: flip tensor (u & 7) % 6 */
    for (int i = 6; i < NGRAD; i++) given[i] = (u >> (i - 2)) & 1;
    if (u & 8) given[(u & 7) % 6] = !given[(u & 7) % 6];
    for (int i = 0; i < NGRAD; i++) {
        g->p[i] = given[i] ? malloc(g->bytes[i] + GUARD) : NULL;
        if (given[i]) {
            FUZZ_CHECK(g->p[i] != NULL, "malloc");
            memset(g->p[i], 0xA5, g->bytes[i] + GUARD);
        }
    }
}

static void check_untouched(const grad_bufs *g, int whole, const char *why)
{
    for (int i = 0; i < NGRAD; i++) {
        if (!g->p[i]) continue;
        for (size_t j = whole ? 0 : g->bytes[i]; j < g->bytes[i] + GUARD; j++)
            FUZZ_CHECK(g->p[i][j] == 0xA5, "%s: gradient %d byte %zu written", why, i, j);
    }
}

static void check_finite(const fuzz_call *c, const grad_bufs *g)
{
    for (int i = 0; i < NGRAD; i++) {
        if (!g->p[i]) continue;
        const int typed = i < 6 && c->prec == FALCON_FP32;
        const size_t count = g->bytes[i] / (typed ? 4 : 8);
        for (size_t j = 0; j < count; j++) {
            const double x = typed ? ((const float *)g->p[i])[j] : ((const double *)g->p[i])[j];
            FUZZ_CHECK(isfinite(x), "a successful backward left gradient %d[%zu] = %g", i, j, x);
        }
    }
}

/* Gradient j of the layout call against plain call `one`'s (plain, rows
 * and heads of one), at step t0 and head h0 of the layout call's buffers:
 * the same bytes, or for dq and dk of grouped heads the sums over the value
 * heads that read each q/k head. */
static void compare_grad(const fuzz_call *c, int j, const void *plain, const grad_bufs *g, const falcon_inputs *one,
                         int64_t t0, int64_t h0, int64_t i)
{
    const falcon_inputs *in = &c->in;
    const int64_t H = in->H, Hq = in->qk_heads > 0 ? in->qk_heads : H, n = in->n, m = in->m, rows = one->B * one->T;
    const int64_t keep = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window - 1 : 0, heads = one->B * H;
    const int64_t width[NGRAD] = {n, n, m, 1, 1, n, m * n, n, keep * n, keep * m};
    const size_t es = j < 6 ? c->es : sizeof(double);
    if (j >= 2 || Hq == H) {
        const int64_t count = (j < 6 ? rows * H : heads) * width[j], at = (j < 6 ? t0 * H : h0) * width[j];
        FUZZ_CHECK(!memcmp(plain, g->p[j] + es * (size_t)at, es * (size_t)count), "gradient %d of sequence %lld "
                   "differs from its plain call's", j, (long long)i);
        return;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t qh = 0; qh < Hq; qh++)
            for (int64_t x = 0; x < n; x++) {
                double sum = 0;
                for (int64_t h = 0; h < H; h++)
                    if ((in->head_map == FALCON_HEADS_TILED ? h % Hq : h / (H / Hq)) == qh)
                        sum += c->prec == FALCON_FP32 ? ((const float *)plain)[(r * H + h) * n + x]
                                                      : ((const double *)plain)[(r * H + h) * n + x];
                const int64_t at = ((t0 + r) * Hq + qh) * n + x;
                const int same = c->prec == FALCON_FP32 ? ((const float *)g->p[j])[at] == (float)sum
                                                        : ((const double *)g->p[j])[at] == sum;
                FUZZ_CHECK(same, "%s[%lld] of sequence %lld is not the sum of its value heads' (%s heads)",
                           j ? "dk" : "dq", (long long)at, (long long)i,
                           in->head_map == FALCON_HEADS_TILED ? "tiled" : "interleaved");
            }
}

/* A successful packed or grouped backward against its plain calls (q and
 * k repeated, each packed sequence alone with its cotangents), with the
 * buffers the call was given; a carried state is replayed as in
 * fuzz_check_layout_plain. */
static void check_layout_grads(const fuzz_call *c, const void *dO, const double *dS, const grad_bufs *g,
                               int stateful)
{
    const falcon_inputs *in = &c->in;
    falcon_inputs flat = *in;
    void *q = fuzz_repeat_heads(c, in->q), *k = fuzz_repeat_heads(c, in->k);
    flat.q = q, flat.k = k, flat.qk_heads = 0;
    const int64_t seqs = in->cu_seqlens ? in->seqs : 1, H = in->H, n = in->n, m = in->m;
    const int64_t W = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window : 1;
    size_t wide[NGRAD];
    memcpy(wide, g->bytes, sizeof wide);
    wide[0] = wide[1] = c->es * (size_t)(c->rows * n); /* dq, dk: one per value head */
    for (int64_t i = 0; i < seqs; i++) {
        const int64_t t0 = in->cu_seqlens ? in->cu_seqlens[i] : 0, h0 = in->cu_seqlens ? i * H : 0;
        const falcon_inputs one = in->cu_seqlens ? fuzz_steps(&flat, c->es, t0, in->cu_seqlens[i + 1]) : flat;
        void *p[NGRAD];
        for (int j = 0; j < NGRAD; j++) {
            p[j] = g->p[j] ? malloc(wide[j] + 1) : NULL;
            FUZZ_CHECK(!g->p[j] || p[j], "malloc");
        }
        falcon_state *st = NULL;
        if (stateful) FUZZ_CHECK(falcon_state_create(one.B * H, n, m, W, &st) == FALCON_OK, "state");
        if (st && c->warm_ok) {
            void *warm = malloc(c->es * (size_t)(c->rows * m) + 1);
            FUZZ_CHECK(warm && falcon_run(&c->cfg, &one, st, warm) == FALCON_OK, "sequence %lld's warm-up",
                       (long long)i);
            free(warm);
        }
        const falcon_grads pg = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]};
        const void *dO_i = dO ? (const char *)dO + c->es * (size_t)(t0 * H * m) : NULL;
        const falcon_status s = falcon_backward(&c->cfg, &one, st, dO_i, dS ? dS + h0 * m * n : NULL, &pg);
        FUZZ_CHECK(s == FALCON_OK, "sequence %lld's plain backward failed where the layout call's succeeded: %s",
                   (long long)i, falcon_last_error());
        for (int j = 0; j < NGRAD; j++)
            if (p[j] && (j >= 6 || one.T > 0)) compare_grad(c, j, p[j], g, &one, t0, h0, i);
        for (int j = 0; j < NGRAD; j++) free(p[j]);
        falcon_state_free(st);
    }
    free(q);
    free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes b = {data, size};
    fuzz_call c;
    fuzz_decode_call(&b, &c);
    falcon_state *st = fuzz_call_state(&c), *before = NULL;
    if (st) FUZZ_CHECK(falcon_state_copy(st, &before) == FALCON_OK, "copy");
    const falcon_inputs *in = &c.in;
    const int64_t heads = c.valid ? c.heads : 0, mn = c.valid ? in->m * in->n : 0;
    const uint8_t which = fuzz_u8(&b);
    void *dO = malloc(c.es * (size_t)(c.rows * (c.valid ? in->m : 0) + 1));
    double *dS = malloc(sizeof(double) * (size_t)(heads * mn + 1));
    FUZZ_CHECK(dO && dS, "malloc");
    fill(&b, dO, c.prec, c.rows * (c.valid ? in->m : 0), V_FREE);
    fill(&b, dS, FALCON_FP64, heads * mn, V_FREE);
    grad_bufs g;
    grad_alloc(&b, &c, &g);
    const falcon_grads grads = {g.p[0], g.p[1], g.p[2], g.p[3], g.p[4], g.p[5], (double *)g.p[6],
                                (double *)g.p[7], (double *)g.p[8], (double *)g.p[9]};

    const falcon_status sv = falcon_validate(&c.cfg, in, st);
    fuzz_check_layout_verdict(&c, sv);
    const falcon_status sb = falcon_backward(&c.cfg, in, st, which & 1 ? NULL : dO, which & 2 ? NULL : dS, &grads);
    if (sv) FUZZ_CHECK(sb == sv, "validate says %s, backward says %s (%s)", falcon_status_name(sv),
                       falcon_status_name(sb), falcon_last_error());
    if (st) FUZZ_CHECK(fuzz_same_state(st, before), "falcon_backward changed the state");
    if (sb) {
        FUZZ_CHECK(*falcon_last_error(), "a failed backward without a message");
        check_untouched(&g, sb != FALCON_E_OVERFLOW, falcon_status_name(sb));
    } else {
        check_untouched(&g, 0, "a successful backward");
        check_finite(&c, &g);
        if (!fuzz_layout_plain(in) && in->T > 0)
            check_layout_grads(&c, which & 1 ? NULL : dO, which & 2 ? NULL : dS, &g, st != NULL);
    }
    for (int i = 0; i < NGRAD; i++) free(g.p[i]);
    free(dO);
    free(dS);
    falcon_state_free(st);
    falcon_state_free(before);
    fuzz_free_call(&c);
    return 0;
}
