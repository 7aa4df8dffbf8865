/*
 * One library call decoded from fuzz bytes, for the API harnesses
 * (fuzz_api.c: falcon_run; fuzz_backward.c: falcon_backward): a
 * configuration (every field, out-of-range values included), sizes (tiny
 * valid ones, or invalid ones: 0, negative, over the limits), which optional
 * tensors are there, the layout (plain, a packed batch, grouped q/k heads
 * or both, each valid or with one defect), a state (none, fresh, carried,
 * or of the wrong size) and the values (mostly in range, or special: NaN,
 * infinities, signed zeros, subnormals, the limits of the ranges, huge
 * values, or raw bit patterns). Invalid sizes or layouts come with a
 * one-element buffer per tensor: validation must refuse them before
 * reading any. Valid ones get tensors of exactly the layout's size (q and k
 * with qk_heads heads), so that a read past them is a sanitizer report.
 *
 * Byte order: configuration, B, T, H, n, m, flags, the layout byte (0: a
 * plain call and no layout byte more, so inputs written before the layouts
 * existed decode as they did with a 0 inserted after their flags), the
 * layout's bytes, the values.
 */
#ifndef FALCON_FUZZ_CALL_H
#define FALCON_FUZZ_CALL_H

#include <float.h>
#include <math.h>
#include "fuzz.h"
#include "falcon.h"

enum { MAX_SMALL = 8, MAX_SEQS = 6 };

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


static inline int valid_sizes(int64_t B, int64_t T, int64_t H, int64_t n, int64_t m)
{
    return B >= 1 && T >= 0 && H >= 1 && n >= 1 && n <= MAX_SMALL && m >= 1 && m <= MAX_SMALL;
}

/* A decoded call. */
typedef struct fuzz_call {
    falcon_config cfg;
    falcon_precision prec; /* the element type: FP64 or FP32 */
    size_t es;
    int sizes_ok;          /* sizes a run could take */
    int layout_ok;         /* and a layout it could: what the library must accept (fuzz_check_layout_verdict) */
    int valid;             /* both: the tensors have their full sizes */
    int64_t rows;          /* B * T * H (value heads) when valid, else 0 */
    int64_t qrows;         /* B * T * H_qk (q and k) when valid, else 0 */
    int64_t heads;         /* the state's heads (falcon_inputs_state_heads) when the sizes are valid, else 0 */
    uint8_t flags;         /* the raw choices (harnesses read more of them) */
    uint8_t layout;        /* the layout byte */
    int state_kind;        /* none, fresh, carried, mismatched */
    int warm_ok;           /* a carried state's first run succeeded (else the state is fresh) */
    int null_out;
    tensors t;
    int64_t *cu;           /* the offsets (in.cu_seqlens, or NULL after a defect), exactly as many as decoded */
    falcon_inputs in;
} fuzz_call;

static inline void fuzz_free_call(fuzz_call *c)
{
    tensors *t = &c->t;
    free(t->q), free(t->k), free(t->v), free(t->beta), free(t->alpha), free(t->gain);
    free(c->cu);
}

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

static inline void fuzz_decode_tensors(fuzz_bytes *b, fuzz_call *c)
{
    const size_t es = c->es;
    const int64_t rows = c->rows, qrows = c->qrows, n = c->in.n, m = c->in.m;
    const int64_t wn = c->valid ? n : 0, wm = c->valid ? m : 0;
    tensors *t = &c->t;
    t->q = malloc(es * (size_t)(qrows * wn + 1));
    t->k = malloc(es * (size_t)(qrows * wn + 1));
    t->v = malloc(es * (size_t)(rows * wm + 1));
    t->beta = malloc(es * (size_t)(rows + 1));
    t->alpha = malloc(es * (size_t)(rows + 1));
    t->gain = malloc(es * (size_t)(rows * wn + 1));
    FUZZ_CHECK(t->q && t->k && t->v && t->beta && t->alpha && t->gain, "malloc");
    const falcon_precision prec = c->prec;
    if (c->valid) {
        /* Interleaved per step and head, so that short inputs still vary
         * every tensor's first steps; q and k of head h come before the
         * others' of head h while h < H_qk (the plain order when H_qk = H). */
        const int64_t steps = c->in.B * c->in.T, H = c->in.H, Hq = c->in.qk_heads > 0 ? c->in.qk_heads : H;
        for (int64_t st = 0; st < steps; st++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t r = st * H + h, rq = st * Hq + h;
                if (h < Hq) {
                    fill(b, (char *)t->q + es * (size_t)(rq * n), prec, n, V_FREE);
                    fill(b, (char *)t->k + es * (size_t)(rq * n), prec, n, V_FREE);
                }
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

/* A packed batch (mode 1, 2: valid; 3: one defect): seqs in [1, MAX_SEQS]
 * and offsets from 0 to T that never decrease (zero lengths included),
 * then the defect: an offset below the one before it (or negative), a
 * first offset above 0, a last one that is not T, B = 2 or 3, seqs 0 or
 * -1, too many sequences for the head limit, or seqs without offsets. A
 * valid batch has B = 1 (B <= 0 stays a size error). Returns whether the
 * layout is valid. */
static inline int fuzz_decode_packed(fuzz_bytes *b, fuzz_call *c, int64_t *B, int64_t T, int mode)
{
    const int64_t seqs = 1 + fuzz_u8(b) % MAX_SEQS, span = T > 0 ? T : 0;
    int64_t *cu = c->cu = malloc(sizeof(int64_t) * (size_t)(seqs + 1));
    FUZZ_CHECK(cu != NULL, "malloc");
    cu[0] = 0;
    for (int64_t i = 1; i < seqs; i++) cu[i] = cu[i - 1] + fuzz_u8(b) % (span - cu[i - 1] + 1);
    cu[seqs] = T;
    c->in.cu_seqlens = cu;
    c->in.seqs = seqs;
    if (*B >= 1) *B = 1;
    if (mode != 3) return 1;
    const uint8_t d = fuzz_u8(b);
    const int64_t i = 1 + (d >> 3) % seqs; /* an offset after the first */
    switch (d % 7) {
    case 0: cu[i] = cu[i - 1] - 1 - (d >> 7); break;
    case 1: cu[0] = 1 + (d >> 3) % 4; break;
    case 2: cu[seqs] = d & 8 ? T + 1 : T - 1; break;
    case 3: *B = *B >= 1 ? 2 + (d >> 3) % 2 : *B; break;
    case 4: c->in.seqs = -(int64_t)((d >> 3) % 2); break;
    case 5: c->in.seqs = d & 8 ? INT64_MAX : (1 << 24) + 1; break; /* no offset may be read */
    default: c->in.cu_seqlens = NULL, c->in.seqs = 1 + (d >> 3) % 3; break;
    }
    return 0;
}

/* Grouped heads (mode 1, 2: valid; 3: one defect): the picked H becomes
 * qk_heads and the value heads H * G, G in [1, 4] (sometimes qk_heads 0,
 * meaning H); the defect: qk_heads above H, negative, not dividing H, or
 * head_map out of range. Returns whether the layout is valid. */
static inline int fuzz_decode_grouped(fuzz_bytes *b, fuzz_call *c, int64_t *H, int mode)
{
    const uint8_t u = fuzz_u8(b);
    const int64_t Hq = *H;
    *H = Hq * (1 + u % 4);
    c->in.qk_heads = (u >> 2) % 5 ? Hq : 0;
    c->in.head_map = (c->layout >> 4) & 1 ? FALCON_HEADS_TILED : FALCON_HEADS_INTERLEAVED;
    if (mode != 3) return 1;
    const uint8_t d = fuzz_u8(b);
    switch (d % 4) {
    case 0: c->in.qk_heads = d & 8 ? INT64_MAX : *H + 1 + (d >> 4); break;
    case 1: c->in.qk_heads = -1 - (d >> 4); break;
    case 2: c->in.qk_heads = *H >= 3 ? *H - 1 : *H + 1; break; /* H - 1 divides no H >= 3 */
    default: c->in.head_map = (falcon_head_map)(d & 8 ? -1 - (d >> 4) : 2 + (d >> 4)); break;
    }
    return 0;
}

/* The layout byte: bits 0-1 packed (0: none, 1-2: valid, 3: a defect),
 * bits 2-3 grouped (likewise), bit 4 head_map tiled, bit 5 a mismatched
 * state (kind 3) off in its heads rather than in n. Sets layout_ok. */
static inline void fuzz_decode_layout(fuzz_bytes *b, fuzz_call *c, int64_t *B, int64_t T, int64_t *H)
{
    const int packed = c->layout & 3, grouped = (c->layout >> 2) & 3;
    c->layout_ok = 1;
    if (grouped) c->layout_ok &= fuzz_decode_grouped(b, c, H, grouped);
    if (packed) c->layout_ok &= fuzz_decode_packed(b, c, B, T, packed);
}

static inline void fuzz_decode_call(fuzz_bytes *b, fuzz_call *c)
{
    memset(c, 0, sizeof *c);
    c->cfg = fuzz_decode_config(b);
    int64_t B = FUZZ_PICK(b, sizes_B);
    const int64_t T = FUZZ_PICK(b, sizes_T);
    int64_t H = FUZZ_PICK(b, sizes_H);
    const int64_t n = FUZZ_PICK(b, sizes_nm), m = FUZZ_PICK(b, sizes_nm);
    c->flags = fuzz_u8(b);
    c->layout = fuzz_u8(b);
    fuzz_decode_layout(b, c, &B, T, &H);
    /* Usually the tensors the variant takes; sometimes not. */
    const falcon_variant v = c->cfg.variant;
    const int has_gain = c->flags & 1 ? !falcon_variant_has_gain(v) : falcon_variant_has_gain(v);
    const int has_alpha = (c->flags >> 1) & 1;
    c->state_kind = (c->flags >> 2) % 4;
    c->null_out = (c->flags >> 4) == 15;
    c->prec = c->cfg.precision == FALCON_FP64 ? FALCON_FP64 : FALCON_FP32;
    c->es = c->prec == FALCON_FP32 ? 4 : 8;
    c->sizes_ok = valid_sizes(B, T, H, n, m);
    c->valid = c->sizes_ok && c->layout_ok;
    c->in.B = B, c->in.T = T, c->in.H = H, c->in.n = n, c->in.m = m;
    const int64_t Hq = c->in.qk_heads > 0 ? c->in.qk_heads : H;
    c->rows = c->valid ? B * T * H : 0;
    c->qrows = c->valid ? B * T * Hq : 0;
    /* A state for the sizes (seqs x H packed); one of B x H where the
     * sequences are too few or too many to count heads by. */
    const int sane = !c->in.cu_seqlens || (c->in.seqs >= 1 && c->in.seqs <= MAX_SEQS);
    c->heads = !c->sizes_ok ? 0 : sane ? falcon_inputs_state_heads(&c->in) : B * H;
    fuzz_decode_tensors(b, c);
    c->in.q = c->t.q, c->in.k = c->t.k, c->in.v = c->t.v, c->in.beta = c->t.beta;
    c->in.alpha = has_alpha ? c->t.alpha : NULL;
    c->in.gain = has_gain ? c->t.gain : NULL;
}

/* The call's state, when the sizes are valid (the layout need not be: a
 * refused call must leave it as it was): none, fresh, carried (a first run
 * on the same inputs; warm_ok says whether it succeeded), or mismatched:
 * n + 1, or with layout bit 5 the wrong head count (B x H for a packed
 * batch of another count of sequences, the packing forgotten; else one
 * head more). */
static inline falcon_state *fuzz_call_state(fuzz_call *c)
{
    falcon_state *st = NULL;
    const falcon_inputs *in = &c->in;
    const int64_t W = c->cfg.window >= 1 && c->cfg.window <= 16 ? c->cfg.window : 1;
    if (!c->state_kind || !c->sizes_ok) return NULL;
    int64_t heads = c->heads, sn = in->n;
    if (c->state_kind == 3 && (c->layout >> 5) & 1)
        heads = in->cu_seqlens && in->B * in->H != heads ? in->B * in->H : heads + 1;
    else if (c->state_kind == 3)
        sn = in->n + 1;
    FUZZ_CHECK(falcon_state_create(heads, sn, in->m, W, &st) == FALCON_OK, "state: %s", falcon_last_error());
    if (c->state_kind == 2 && in->T > 0) {
        void *warm = malloc(c->es * (size_t)(c->rows * in->m) + 1);
        /* may fail: the state then stays fresh */
        c->warm_ok = falcon_run(&c->cfg, in, st, warm) == FALCON_OK;
        free(warm);
    }
    return st;
}

/* The library refuses exactly the layouts the decoder made invalid, given
 * valid sizes: an invalid one with some status (a configuration error may
 * come first), a valid one never naming a field of the layouts. s: what
 * falcon_validate returned. */
static inline void fuzz_check_layout_verdict(const fuzz_call *c, falcon_status s)
{
    if (!c->sizes_ok) return;
    const char *input = falcon_last_error_info()->input;
    const int named = s && (!strcmp(input, "cu_seqlens") || !strcmp(input, "seqs") || !strcmp(input, "qk_heads") ||
                            !strcmp(input, "head_map"));
    if (!c->layout_ok)
        FUZZ_CHECK(s != FALCON_OK, "a layout with a defect was accepted (seqs %lld, qk_heads %lld, head_map %d, B %lld)",
                   (long long)c->in.seqs, (long long)c->in.qk_heads, (int)c->in.head_map, (long long)c->in.B);
    else
        FUZZ_CHECK(!named, "a valid layout was refused: %s", falcon_last_error());
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
