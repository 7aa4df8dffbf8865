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
 *   - a success leaves every gradient finite and writes nothing past a buffer.
 */
#include "call.h"

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
    }
    for (int i = 0; i < NGRAD; i++) free(g.p[i]);
    free(dO);
    free(dS);
    falcon_state_free(st);
    falcon_state_free(before);
    fuzz_free_call(&c);
    return 0;
}
