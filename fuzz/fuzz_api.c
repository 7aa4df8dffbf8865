/*
 * Fuzzing the API's validation and runs: the input decodes into a
 * configuration (every field, out-of-range values included), sizes (tiny
 * valid ones, or invalid ones: 0, negative, over the limits), which optional
 * tensors are there, a state (none, fresh, carried, or of the wrong size) and
 * the values (mostly in range, or special: NaN, infinities, signed zeros,
 * subnormals, the limits of the ranges, huge values, or raw bit patterns).
 *
 * Invariants (docs/math.md section 10 and the README's promises):
 *   - falcon_validate and falcon_run agree: a configuration or input that
 *     validation refuses, falcon_run refuses with the same status;
 *   - a failed run leaves the state exactly as it was, and the output buffer
 *     too unless the failure is FALCON_E_OVERFLOW (found after the kernels
 *     wrote the reads; falcon.h documents the outputs as unspecified then),
 *     and says why (a non-empty message);
 *   - a successful run leaves finite outputs and a finite memory, and writes
 *     nothing past the output;
 *   - the recurrent form split into two calls with the state carried gives
 *     bitwise the same outputs and state as one call (one sequence; the CPU
 *     kernels' backends).
 * Invalid sizes come with a one-element buffer per tensor: validation must
 * refuse them before reading any.
 */
#include <float.h>
#include <math.h>
#include "fuzz.h"
#include "falcon.h"
#include "../gate/inputs-steps.h"

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
static double take_value(fuzz_bytes *b, value_kind kind)
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

static void fill(fuzz_bytes *b, void *p, falcon_precision prec, int64_t count, value_kind kind)
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

static void free_tensors(tensors *t)
{
    free(t->q), free(t->k), free(t->v), free(t->beta), free(t->alpha), free(t->gain);
}

static int valid_sizes(int64_t B, int64_t T, int64_t H, int64_t n, int64_t m)
{
    return B >= 1 && T >= 0 && H >= 1 && n >= 1 && n <= MAX_SMALL && m >= 1 && m <= MAX_SMALL;
}

static int same_state(const falcon_state *a, const falcon_state *b)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const size_t H = (size_t)x.heads, n = (size_t)x.n, m = (size_t)x.m, keep = (size_t)x.keep;
    return !memcmp(x.S, y.S, sizeof(double) * H * m * n) && !memcmp(x.has_prev, y.has_prev, H) &&
           !memcmp(x.prev_key, y.prev_key, sizeof(double) * H * n) &&
           !memcmp(x.hist_len, y.hist_len, sizeof(int64_t) * H) &&
           !memcmp(x.hist_k, y.hist_k, sizeof(double) * H * keep * n) &&
           !memcmp(x.hist_v, y.hist_v, sizeof(double) * H * keep * m);
}

/* One sequence split at t: bitwise what one call gave. */
static void check_split(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *start,
                        const unsigned char *out, const falcon_state *end, int64_t t)
{
    const size_t es = cfg->precision == FALCON_FP32 ? 4 : 8;
    falcon_state *st;
    FUZZ_CHECK(falcon_state_copy(start, &st) == FALCON_OK, "copy");
    unsigned char *part = malloc(es * (size_t)(in->T * in->m) + 1);
    FUZZ_CHECK(part != NULL, "malloc");
    const falcon_inputs a = inputs_steps(in, es, 0, t), b = inputs_steps(in, es, t, in->T);
    const falcon_status s1 = falcon_run(cfg, &a, st, part);
    FUZZ_CHECK(s1 == FALCON_OK, "first part of a split: %s", falcon_last_error());
    const falcon_status s2 = falcon_run(cfg, &b, st, part + es * (size_t)(t * in->m));
    FUZZ_CHECK(s2 == FALCON_OK, "second part of a split: %s", falcon_last_error());
    FUZZ_CHECK(!memcmp(part, out, es * (size_t)(in->T * in->m)), "split at t=%lld: outputs differ from one call",
               (long long)t);
    FUZZ_CHECK(same_state(st, end), "split at t=%lld: state differs from one call", (long long)t);
    free(part);
    falcon_state_free(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes b = {data, size};
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.variant = (falcon_variant)FUZZ_PICK(&b, variants);
    cfg.align = (falcon_align)(fuzz_u8(&b) % 3);
    cfg.phi = (falcon_phi)(fuzz_u8(&b) % 5);
    cfg.form = (falcon_form)(fuzz_u8(&b) % 4);
    /* Every backend of the enum, the test-only one after it (the value
     * FALCON_BACKEND_COUNT, which the library accepts), and the values just
     * outside them: -1 and COUNT + 1. */
    cfg.backend = (falcon_backend)(fuzz_u8(&b) % (FALCON_BACKEND_COUNT + 3) - 1);
    /* fp32, fp64, tf32, bf16, and the value just outside */
    cfg.precision = (falcon_precision)(fuzz_u8(&b) % 5);
    const uint8_t eps_mode = fuzz_u8(&b) % 4;
    cfg.eps = eps_mode == 0 ? 1e-6 : eps_mode == 1 ? FUZZ_PICK(&b, eps_values)
            : eps_mode == 2 ? fuzz_f64_bits(&b) : fuzz_u8(&b) / 64.0;
    cfg.window = FUZZ_PICK(&b, windows);
    cfg.chunk = FUZZ_PICK(&b, chunks);
    cfg.mpfr_bits = FUZZ_PICK(&b, bits);
    cfg.threads = FUZZ_PICK(&b, threads);
    const int64_t B = FUZZ_PICK(&b, sizes_B), T = FUZZ_PICK(&b, sizes_T), H = FUZZ_PICK(&b, sizes_H);
    const int64_t n = FUZZ_PICK(&b, sizes_nm), m = FUZZ_PICK(&b, sizes_nm);
    const uint8_t flags = fuzz_u8(&b);
    /* Usually the tensors the variant takes; sometimes not. */
    const int has_gain = flags & 1 ? !falcon_variant_has_gain(cfg.variant) : falcon_variant_has_gain(cfg.variant);
    const int has_alpha = (flags >> 1) & 1;
    const int state_kind = (flags >> 2) % 4; /* none, fresh, carried, mismatched */
    const int null_out = (flags >> 4) == 15;
    /* The slow backends get fewer steps. */
    if (cfg.backend == FALCON_BACKEND_MPFR && cfg.mpfr_bits > 256) cfg.mpfr_bits = 256;

    const falcon_precision prec = cfg.precision == FALCON_FP64 ? FALCON_FP64 : FALCON_FP32;
    const size_t es = prec == FALCON_FP32 ? 4 : 8;
    const int valid = valid_sizes(B, T, H, n, m);
    const int64_t rows = valid ? B * T * H : 0;
    tensors t;
    t.q = malloc(es * (size_t)(rows * (valid ? n : 0) + 1));
    t.k = malloc(es * (size_t)(rows * (valid ? n : 0) + 1));
    t.v = malloc(es * (size_t)(rows * (valid ? m : 0) + 1));
    t.beta = malloc(es * (size_t)(rows + 1));
    t.alpha = malloc(es * (size_t)(rows + 1));
    t.gain = malloc(es * (size_t)(rows * (valid ? n : 0) + 1));
    FUZZ_CHECK(t.q && t.k && t.v && t.beta && t.alpha && t.gain, "malloc");
    if (valid) {
        /* Interleaved per step, so that short inputs still vary every tensor's first steps. */
        for (int64_t r = 0; r < rows; r++) {
            fill(&b, (char *)t.q + es * (size_t)(r * n), prec, n, V_FREE);
            fill(&b, (char *)t.k + es * (size_t)(r * n), prec, n, V_FREE);
            fill(&b, (char *)t.v + es * (size_t)(r * m), prec, m, V_FREE);
            fill(&b, (char *)t.beta + es * (size_t)r, prec, 1, V_BETA);
            fill(&b, (char *)t.alpha + es * (size_t)r, prec, 1, V_ALPHA);
            fill(&b, (char *)t.gain + es * (size_t)(r * n), prec, n, V_GAIN);
        }
    } else {
        fill(&b, t.q, prec, 1, V_FREE), fill(&b, t.k, prec, 1, V_FREE), fill(&b, t.v, prec, 1, V_FREE);
        fill(&b, t.beta, prec, 1, V_BETA), fill(&b, t.alpha, prec, 1, V_ALPHA), fill(&b, t.gain, prec, 1, V_GAIN);
    }
    const falcon_inputs in = {B, T, H, n, m, t.q, t.k, t.v, t.beta, has_alpha ? t.alpha : NULL,
                              has_gain ? t.gain : NULL};

    /* The state: none, fresh, carried (a first run on the same inputs), or
     * the wrong size. */
    falcon_state *st = NULL;
    const int64_t W = cfg.window >= 1 && cfg.window <= 16 ? cfg.window : 1;
    if (state_kind && valid) {
        const int64_t sn = state_kind == 3 ? n + 1 : n;
        FUZZ_CHECK(falcon_state_create(B * H, sn, m, W, &st) == FALCON_OK, "state: %s", falcon_last_error());
        if (state_kind == 2 && T > 0) {
            void *warm = malloc(es * (size_t)(rows * m));
            falcon_run(&cfg, &in, st, warm); /* may fail: the state then stays fresh */
            free(warm);
        }
    }
    falcon_state *before = NULL;
    if (st) FUZZ_CHECK(falcon_state_copy(st, &before) == FALCON_OK, "copy");

    const size_t out_bytes = es * (size_t)(rows * (valid ? m : 0));
    unsigned char *out = malloc(out_bytes + 16);
    FUZZ_CHECK(out != NULL, "malloc");
    memset(out, 0xA5, out_bytes + 16);

    const falcon_status sv = falcon_validate(&cfg, &in, st);
    if (sv) FUZZ_CHECK(*falcon_last_error(), "validation failed without a message");
    const falcon_status sr = falcon_run(&cfg, &in, st, null_out ? NULL : out);
    if (sv) FUZZ_CHECK(sr == sv, "validate says %s, run says %s (%s)", falcon_status_name(sv),
                       falcon_status_name(sr), falcon_last_error());
    for (size_t i = 0; i < 16; i++) FUZZ_CHECK(out[out_bytes + i] == 0xA5, "wrote past the output");
    if (sr) {
        FUZZ_CHECK(*falcon_last_error(), "a failed run without a message");
        /* (An overflow is found after the kernels wrote the reads: the header
         * documents the outputs as unspecified then; the state is kept.) */
        for (size_t i = 0; sr != FALCON_E_OVERFLOW && i < out_bytes; i++)
            FUZZ_CHECK(out[i] == 0xA5, "a failed run (%s: %s) wrote out byte %zu", falcon_status_name(sr),
                       falcon_last_error(), i);
        if (st) FUZZ_CHECK(same_state(st, before), "a failed run changed the state");
    } else {
        FUZZ_CHECK(!null_out || T == 0, "a run with T > 0 and no output buffer succeeded");
        for (int64_t i = 0; i < rows * m; i++) {
            const double x = prec == FALCON_FP32 ? ((float *)out)[i] : ((double *)out)[i];
            FUZZ_CHECK(isfinite(x), "a successful run left out[%lld] = %g", (long long)i, x);
        }
        if (st) {
            const falcon_state_view sv2 = falcon_state_get_view(st);
            for (int64_t i = 0; i < sv2.heads * sv2.m * sv2.n; i++)
                FUZZ_CHECK(isfinite(sv2.S[i]), "a successful run left S[%lld] = %g", (long long)i, sv2.S[i]);
            /* (The mpfr backend keeps S in MPFR inside a call and rounds it
             * at the end: a split rounds once more, so it is not bitwise.) */
            if (cfg.form == FALCON_FORM_RECURRENT && B == 1 && H == 1 && T >= 2 &&
                cfg.backend != FALCON_BACKEND_MPFR && cfg.backend != FALCON_BACKEND_CUDA)
                check_split(&cfg, &in, before, out, st, 1 + (int64_t)(flags >> 6) % (T - 1));
        }
    }
    free(out);
    falcon_state_free(st);
    falcon_state_free(before);
    free_tensors(&t);
    return 0;
}
