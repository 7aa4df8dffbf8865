/*
 * One library call decoded from fuzz bytes, for the API harnesses
 * (fuzz_api.c: falcon_run; fuzz_backward.c: falcon_backward): a
 * configuration (every field, out-of-range values included), sizes (tiny
 * valid ones, or invalid ones: 0, negative, over the limits), which optional
 * tensors are there, a state (none, fresh, carried, or of the wrong size)
 * and the values (mostly in range, or special: NaN, infinities, signed
 * zeros, subnormals, the limits of the ranges, huge values, or raw bit
 * patterns). Invalid sizes come with a one-element buffer per tensor:
 * validation must refuse them before reading any.
 */
#ifndef FALCON_FUZZ_CALL_H
#define FALCON_FUZZ_CALL_H

#include <float.h>
#include <math.h>
#include "fuzz.h"
#include "falcon.h"

enum { MAX_SMALL = 8 };

/* Values a field may take: mostly valid, some not. */
static const int variants[] = {FALCON_1, FALCON_2, FALCON_3, FALCON_1A, FALCON_2A, FALCON_3A, 6, -1};
static const int64_t windows[] = {1, 2, 3, 4, 9, 0, -1, 4097};
static const int64_t chunks[] = {1, 2, 3, 8, 64, 0, -2, 4097};
static const int threads[] = {0, 1, 2, 3, -1, 1025};
static const int bits[] = {64, 200, 63, 65537};
static const int64_t sizes_B[] = {1, 1, 2, 3, 0, -1};
static const int64_t sizes_T[] = {0, 1, 2, 3, 5, 8, 13, 21, -1};
static const int64_t sizes_H[] = {1, 1, 2, 0};
static const int64_t sizes_nm[] = {1, 2, 3, 5, 8, 4, 0, -1, 16385};
static const double specials[] = {0.0, -0.0, 1.0, 2.0, 0x1.0000000000001p1, 0x1.000002p1, -1e-300, 1e-300,
                                  DBL_MIN, FLT_MIN, 0x1p-149, 4.9e-324, 1e38, 3.5e38, 1e300, DBL_MAX,
                                  INFINITY, -INFINITY, NAN, -NAN, 0.5, 1.0 - 0x1p-53, 1.0 + 0x1p-52, -1.0};
static const double eps_values[] = {1e-6, 0.0, -1.0, 1e-300, 1e-46, 1e-45, INFINITY, NAN, 1e300, 1.0, 4e38};

typedef enum { V_FREE, V_BETA, V_ALPHA, V_GAIN } value_kind;

/* A value: mostly one in the tensor's usual range, sometimes a special one
 * or raw bits. */
static inline double take_value(fuzz_bytes *b, value_kind kind)
{
    const uint8_t u = fuzz_u8(b);
    if (u < 200) {
        switch (kind) {
        case V_BETA: return u / 100.0;          /* [0, 2) */
        case V_ALPHA: return 0.5 + u / 400.0;   /* [0.5, 1) */
        case V_GAIN: return u / 100.0;
        default: return (u - 100) / 25.0;      /* [-4, 4) */
        }
    }
    if (u < 250) return specials[(u - 200) % (sizeof specials / sizeof specials[0])];
    return fuzz_f64_bits(b);
}

static inline void fill(fuzz_bytes *b, void *p, falcon_precision prec, int64_t count, value_kind kind)
{
    for (int64_t i = 0; i < count; i++) {
        const double x = b->left ? take_value(b, kind) : (kind == V_ALPHA ? 0.9 : 0.25);
        if (prec == FALCON_FP32) ((float *)p)[i] = (float)x;
        else ((double *)p)[i] = x;
    }
}

typedef struct tensors {
    void *q, *k, *v, *beta, *alpha, *gain;
} tensors;

static inline void free_tensors(tensors *t)
{
    free(t->q), free(t->k), free(t->v), free(t->beta), free(t->alpha), free(t->gain);
}

static inline int valid_sizes(int64_t B, int64_t T, int64_t H, int64_t n, int64_t m)
{
    return B >= 1 && T >= 0 && H >= 1 && n >= 1 && n <= MAX_SMALL && m >= 1 && m <= MAX_SMALL;
}

/* A decoded call. */
typedef struct fuzz_call {
    falcon_config cfg;
    falcon_precision prec; /* the element type: FP64 or FP32 */
    size_t es;
    int valid;             /* sizes a run could take */
    int64_t rows;          /* B * T * H when valid, else 0 */
    uint8_t flags;         /* the raw choices (harnesses read more of them) */
    int state_kind;        /* none, fresh, carried, mismatched */
    int null_out;
    tensors t;
    falcon_inputs in;
} fuzz_call;

static inline falcon_config fuzz_decode_config(fuzz_bytes *b)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = (falcon_variant)FUZZ_PICK(b, variants);
    cfg.align = (falcon_align)(fuzz_u8(b) % 3);
    cfg.phi = (falcon_phi)(fuzz_u8(b) % 5);
    cfg.form = (falcon_form)(fuzz_u8(b) % 4);
    /* Every backend of the enum, the test-only one after it (the value
     * FALCON_BACKEND_COUNT, which the library accepts), and the values just
     * outside them: -1 and COUNT + 1. */
    cfg.backend = (falcon_backend)(fuzz_u8(b) % (FALCON_BACKEND_COUNT + 3) - 1);
    /* fp32, fp64, tf32, bf16, and the value just outside */
    cfg.precision = (falcon_precision)(fuzz_u8(b) % 5);
    const uint8_t eps_mode = fuzz_u8(b) % 4;
    cfg.eps = eps_mode == 0 ? 1e-6 : eps_mode == 1 ? FUZZ_PICK(b, eps_values)
            : eps_mode == 2 ? fuzz_f64_bits(b) : fuzz_u8(b) / 64.0;
    cfg.window = FUZZ_PICK(b, windows);
    cfg.chunk = FUZZ_PICK(b, chunks);
    cfg.mpfr_bits = FUZZ_PICK(b, bits);
    cfg.threads = FUZZ_PICK(b, threads);
    /* The slow backends get fewer steps. */
    if (cfg.backend == FALCON_BACKEND_MPFR && cfg.mpfr_bits > 256) cfg.mpfr_bits = 256;
    return cfg;
}

static inline void fuzz_decode_tensors(fuzz_bytes *b, fuzz_call *c, int64_t n, int64_t m)
{
    const size_t es = c->es;
    const int64_t rows = c->rows, wn = c->valid ? n : 0, wm = c->valid ? m : 0;
    tensors *t = &c->t;
    t->q = malloc(es * (size_t)(rows * wn + 1));
    t->k = malloc(es * (size_t)(rows * wn + 1));
    t->v = malloc(es * (size_t)(rows * wm + 1));
    t->beta = malloc(es * (size_t)(rows + 1));
    t->alpha = malloc(es * (size_t)(rows + 1));
    t->gain = malloc(es * (size_t)(rows * wn + 1));
    FUZZ_CHECK(t->q && t->k && t->v && t->beta && t->alpha && t->gain, "malloc");
    const falcon_precision prec = c->prec;
    if (c->valid) {
        /* Interleaved per step, so that short inputs still vary every tensor's first steps. */
        for (int64_t r = 0; r < rows; r++) {
            fill(b, (char *)t->q + es * (size_t)(r * n), prec, n, V_FREE);
            fill(b, (char *)t->k + es * (size_t)(r * n), prec, n, V_FREE);
            fill(b, (char *)t->v + es * (size_t)(r * m), prec, m, V_FREE);
            fill(b, (char *)t->beta + es * (size_t)r, prec, 1, V_BETA);
            fill(b, (char *)t->alpha + es * (size_t)r, prec, 1, V_ALPHA);
            fill(b, (char *)t->gain + es * (size_t)(r * n), prec, n, V_GAIN);
        }
    } else {
        fill(b, t->q, prec, 1, V_FREE), fill(b, t->k, prec, 1, V_FREE), fill(b, t->v, prec, 1, V_FREE);
        fill(b, t->beta, prec, 1, V_BETA), fill(b, t->alpha, prec, 1, V_ALPHA), fill(b, t->gain, prec, 1, V_GAIN);
    }
}

static inline void fuzz_decode_call(fuzz_bytes *b, fuzz_call *c)
{
    c->cfg = fuzz_decode_config(b);
    const int64_t B = FUZZ_PICK(b, sizes_B), T = FUZZ_PICK(b, sizes_T), H = FUZZ_PICK(b, sizes_H);
    const int64_t n = FUZZ_PICK(b, sizes_nm), m = FUZZ_PICK(b, sizes_nm);
    c->flags = fuzz_u8(b);
    /* Usually the tensors the variant takes; sometimes not. */
    const falcon_variant v = c->cfg.variant;
    const int has_gain = c->flags & 1 ? !falcon_variant_has_gain(v) : falcon_variant_has_gain(v);
    const int has_alpha = (c->flags >> 1) & 1;
    c->state_kind = (c->flags >> 2) % 4;
    c->null_out = (c->flags >> 4) == 15;
    c->prec = c->cfg.precision == FALCON_FP64 ? FALCON_FP64 : FALCON_FP32;
    c->es = c->prec == FALCON_FP32 ? 4 : 8;
    c->valid = valid_sizes(B, T, H, n, m);
    c->rows = c->valid ? B * T * H : 0;
    fuzz_decode_tensors(b, c, n, m);
    const falcon_inputs in = {.B = B, .T = T, .H = H, .n = n, .m = m, .q = c->t.q, .k = c->t.k,
                              .v = c->t.v, .beta = c->t.beta, .alpha = has_alpha ? c->t.alpha : NULL,
                              .gain = has_gain ? c->t.gain : NULL};
    c->in = in;
}

/* The call's state: none, fresh, carried (a first run on the same inputs),
 * or the wrong size. */
static inline falcon_state *fuzz_call_state(const fuzz_call *c)
{
    falcon_state *st = NULL;
    const falcon_inputs *in = &c->in;
    const int64_t W = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window : 1;
    if (c->state_kind && c->valid) {
        const int64_t sn = c->state_kind == 3 ? in->n + 1 : in->n;
        FUZZ_CHECK(falcon_state_create(in->B * in->H, sn, in->m, W, &st) == FALCON_OK, "state: %s",
                   falcon_last_error());
        if (c->state_kind == 2 && in->T > 0) {
            void *warm = malloc(c->es * (size_t)(c->rows * in->m));
            falcon_run(&c->cfg, in, st, warm); /* may fail: the state then stays fresh */
            free(warm);
        }
    }
    return st;
}

static inline int fuzz_same_state(const falcon_state *a, const falcon_state *b)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const size_t H = (size_t)x.heads, n = (size_t)x.n, m = (size_t)x.m, keep = (size_t)x.keep;
    return !memcmp(x.S, y.S, sizeof(double) * H * m * n) && !memcmp(x.has_prev, y.has_prev, H) &&
           !memcmp(x.prev_key, y.prev_key, sizeof(double) * H * n) &&
           !memcmp(x.hist_len, y.hist_len, sizeof(int64_t) * H) &&
           !memcmp(x.hist_k, y.hist_k, sizeof(double) * H * keep * n) &&
           !memcmp(x.hist_v, y.hist_v, sizeof(double) * H * keep * m);
}

#endif
