/*
 * Packed variable-length batches and grouped heads (falcon.h,
 * falcon_inputs): a packed call equals its sequences run one by one, each
 * on its own state, and a grouped call equals the plain call with q and k
 * repeated, bit for bit, in every backend (the reference too), form and
 * precision; the gradients likewise, those of shared q/k heads being the
 * sums of the repeated call's (in double, in head order, rounded once).
 * And the rules of the new fields.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gate.h"

enum { NN = 5, MM = 4, HH = 2, SEQS = 6, TT = 33 };
/* lengths 0, 1, 7, 0, 2 and 23: empty, one step, not a multiple of the
 * chunk (4 here), one much longer than the rest */
static const int64_t cu[SEQS + 1] = {0, 0, 1, 8, 8, 10, 33};

typedef struct tensors {
    void *q, *k, *v, *beta, *alpha, *gain;
} tensors;

static uint64_t rng = 1;
static double uniform(double lo, double hi)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53;
}

static void *fill(int64_t count, double lo, double hi, int f64)
{
    void *p = malloc(sizeof(double) * (size_t)count + 8);
    for (int64_t i = 0; i < count; i++) {
        if (f64) ((double *)p)[i] = uniform(lo, hi);
        else ((float *)p)[i] = (float)uniform(lo, hi);
    }
    return p;
}

static double load(const void *p, int f64, int64_t i) { return f64 ? ((const double *)p)[i] : ((const float *)p)[i]; }

/* Rows = B*T, heads per row qh (q, k) and H (the rest). */
static tensors make(int64_t rows, int64_t qh, int64_t H, int f64, int gains, uint64_t seed)
{
    rng = seed;
    tensors t = {
        .q = fill(rows * qh * NN, -1, 1, f64),
        .k = fill(rows * qh * NN, -1, 1, f64),
        .v = fill(rows * H * MM, -1, 1, f64),
        .beta = fill(rows * H, 0.2, 0.9, f64),
        .alpha = fill(rows * H, 0.8, 1.0, f64),
        .gain = gains ? fill(rows * H * NN, 0.5, 1.5, f64) : NULL,
    };
    return t;
}

static void drop(tensors *t)
{
    free(t->q), free(t->k), free(t->v), free(t->beta), free(t->alpha), free(t->gain);
}

static falcon_inputs inputs_of(const tensors *t, int64_t B, int64_t T, int64_t H)
{
    return (falcon_inputs){.B = B, .T = T, .H = H, .n = NN, .m = MM, .q = t->q, .k = t->k, .v = t->v,
                           .beta = t->beta, .alpha = t->alpha, .gain = t->gain};
}

static falcon_config config(falcon_backend be, int f64, falcon_form form, falcon_variant v)
{
    falcon_config c;
    falcon_config_default(&c);
    c.backend = be, c.precision = f64 ? FALCON_FP64 : FALCON_FP32, c.form = form, c.variant = v;
    c.window = falcon_variant_has_window(v) ? 3 : 1;
    c.chunk = 4;
    c.threads = 1;
    return c;
}

/* Every state array of heads [h0, h0 + count) of a equal to b's heads [0, count). */
static void expect_same_heads(const falcon_state *a, int64_t h0, const falcon_state *b, const char *what)
{
    const falcon_state_view x = falcon_state_get_view(a), y = falcon_state_get_view(b);
    const int64_t c = y.heads, mn = x.m * x.n;
    cr_expect(!memcmp(x.S + h0 * mn, y.S, sizeof(double) * (size_t)(c * mn)), "%s: S differs", what);
    cr_expect(!memcmp(x.has_prev + h0, y.has_prev, (size_t)c), "%s: has_prev differs", what);
    cr_expect(!memcmp(x.prev_key + h0 * x.n, y.prev_key, sizeof(double) * (size_t)(c * x.n)), "%s: prev_key", what);
    cr_expect(!memcmp(x.hist_len + h0, y.hist_len, sizeof(int64_t) * (size_t)c), "%s: hist_len differs", what);
    cr_expect(!memcmp(x.hist_k + h0 * x.keep * x.n, y.hist_k, sizeof(double) * (size_t)(c * x.keep * x.n)),
              "%s: hist_k differs", what);
}

/* The inputs of packed sequence i as a call of its own. */
static falcon_inputs sequence(const falcon_inputs *in, int64_t i, int f64)
{
    const size_t es = f64 ? 8 : 4, at = (size_t)(cu[i] * in->H) * es;
    falcon_inputs s = *in;
    s.T = cu[i + 1] - cu[i], s.cu_seqlens = NULL, s.seqs = 0;
    s.q = (const char *)in->q + at * NN, s.k = (const char *)in->k + at * NN;
    s.v = (const char *)in->v + at * MM, s.beta = (const char *)in->beta + at;
    s.alpha = (const char *)in->alpha + at, s.gain = in->gain ? (const char *)in->gain + at * NN : NULL;
    return s;
}

static void packed_case(falcon_backend be, int f64, falcon_form form, int variant)
{
    const falcon_variant v = (falcon_variant)variant;
    const falcon_config cfg = config(be, f64, form, v);
    char what[160];
    snprintf(what, sizeof what, "%s %s %s %s", falcon_backend_name(be), f64 ? "fp64" : "fp32",
             falcon_form_name(form), falcon_variant_name(v));
    tensors warm = make(TT, HH, HH, f64, falcon_variant_has_gain(v), 7), main = make(TT, HH, HH, f64,
                                                                                    falcon_variant_has_gain(v), 8);
    falcon_inputs w = inputs_of(&warm, 1, TT, HH), in = inputs_of(&main, 1, TT, HH);
    w.cu_seqlens = in.cu_seqlens = cu, w.seqs = in.seqs = SEQS;
    const size_t es = f64 ? 8 : 4;
    char *out = calloc(TT * HH * MM, es), *wout = calloc(TT * HH * MM, es), *one = calloc(TT * HH * MM, es);
    falcon_state *packed, *seq;
    cr_assert(falcon_state_create(SEQS * HH, NN, MM, cfg.window, &packed) == FALCON_OK);
    /* a carried state with memory, previous keys and history: a packed warm-up */
    cr_assert(falcon_run(&cfg, &w, packed, wout) == FALCON_OK, "%s: %s", what, falcon_last_error());
    cr_assert(falcon_run(&cfg, &in, packed, out) == FALCON_OK, "%s: %s", what, falcon_last_error());
    for (int64_t i = 0; i < SEQS; i++) {
        cr_assert(falcon_state_create(HH, NN, MM, cfg.window, &seq) == FALCON_OK);
        const falcon_inputs ws = sequence(&w, i, f64), s = sequence(&in, i, f64);
        cr_assert(falcon_run(&cfg, &ws, seq, one) == FALCON_OK, "%s", falcon_last_error());
        cr_expect(!memcmp(one, wout + (size_t)(cu[i] * HH * MM) * es, (size_t)(ws.T * HH * MM) * es),
                  "%s: warm-up outputs of sequence %lld differ", what, (long long)i);
        cr_assert(falcon_run(&cfg, &s, seq, one) == FALCON_OK, "%s", falcon_last_error());
        cr_expect(!memcmp(one, out + (size_t)(cu[i] * HH * MM) * es, (size_t)(s.T * HH * MM) * es),
                  "%s: outputs of sequence %lld differ", what, (long long)i);
        expect_same_heads(packed, i * HH, seq, what);
        falcon_state_free(seq);
    }
    falcon_state_free(packed);
    free(out), free(wout), free(one);
    drop(&warm), drop(&main);
}

/* The backends to compare: every kernel backend here, and the reference. */
static int backends(falcon_backend *be)
{
    int count = 0;
    for (int b = 0; b < gate_backend_count; b++)
        if (falcon_backend_available(gate_backends[b])) be[count++] = gate_backends[b];
    if (falcon_backend_available(FALCON_BACKEND_MPFR)) be[count++] = FALCON_BACKEND_MPFR;
    return count;
}

/* fn on every backend here (the reference too), precision (fp32, fp64),
 * form and `arg`: a variant (Falcon-3 and 2A: the window, the gains) or a
 * head mapping. */
typedef void (*layout_case_fn)(falcon_backend be, int f64, falcon_form form, int arg);
static void every_run(layout_case_fn fn, const int *args, int nargs)
{
    falcon_backend be[FALCON_BACKEND_ROWS + 1];
    const int nb = backends(be);
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < 2; p++)
            for (int f = 0; f < 3; f++)
                for (int a = 0; a < nargs; a++)
                    if (gate_backend_runs(be[b], (falcon_precision)p) || be[b] == FALCON_BACKEND_MPFR)
                        fn(be[b], p, (falcon_form)f, args[a]);
}
static const int variants[] = {FALCON_3, FALCON_2A};
static const int mappings[] = {FALCON_HEADS_INTERLEAVED, FALCON_HEADS_TILED};

Test(layouts, packed_equals_sequences_alone) { every_run(packed_case, variants, 2); }

/* q or k of qh heads repeated to H through the map. */
static void *repeat(const void *x, int64_t rows, int64_t qh, int64_t H, falcon_head_map map, int f64)
{
    const size_t es = f64 ? 8 : 4, row = NN * es;
    char *out = malloc((size_t)(rows * H) * row);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t g = map == FALCON_HEADS_TILED ? h % qh : h / (H / qh);
            memcpy(out + (size_t)(r * H + h) * row, (const char *)x + (size_t)(r * qh + g) * row, row);
        }
    return out;
}

/* A grouped call (2 q/k heads for 4 value heads under map) and the plain
 * call of the same inputs with q and k repeated to the value heads. */
enum { GB = 2, GT = 9, GH = 4, GQH = 2 };
typedef struct grouped {
    tensors t, wide;
    falcon_inputs in, plain;
} grouped;

static grouped grouped_make(falcon_head_map map, int f64, uint64_t seed)
{
    grouped g = {.t = make(GB * GT, GQH, GH, f64, 0, seed)};
    g.in = inputs_of(&g.t, GB, GT, GH);
    g.in.qk_heads = GQH, g.in.head_map = map;
    g.wide = g.t;
    g.wide.q = repeat(g.t.q, GB * GT, GQH, GH, map, f64), g.wide.k = repeat(g.t.k, GB * GT, GQH, GH, map, f64);
    g.plain = inputs_of(&g.wide, GB, GT, GH);
    return g;
}

static void grouped_free(grouped *g)
{
    free(g->wide.q), free(g->wide.k);
    drop(&g->t);
}

static void grouped_case(falcon_backend be, int f64, falcon_form form, int mapping)
{
    enum { B = GB, T = GT, H = GH, QH = GQH };
    const falcon_head_map map = (falcon_head_map)mapping;
    const falcon_config cfg = config(be, f64, form, FALCON_1);
    grouped g0 = grouped_make(map, f64, 11);
    const falcon_inputs in = g0.in, plain = g0.plain;
    const size_t es = f64 ? 8 : 4, bytes = (size_t)(B * T * H * MM) * es;
    void *o1 = malloc(bytes), *o2 = malloc(bytes);
    cr_assert(falcon_run(&cfg, &in, NULL, o1) == FALCON_OK, "%s", falcon_last_error());
    cr_assert(falcon_run(&cfg, &plain, NULL, o2) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(!memcmp(o1, o2, bytes), "%s %s %s map %d: grouped differs from repeated", falcon_backend_name(be),
              f64 ? "fp64" : "fp32", falcon_form_name(form), (int)map);
    free(o1), free(o2);
    grouped_free(&g0);
}

Test(layouts, grouped_equals_repeated) { every_run(grouped_case, mappings, 2); }

/* The two mappings differ: a kernel that reads one as the other is wrong. */
Test(layouts, mappings_differ)
{
    const falcon_config cfg = config(FALCON_BACKEND_SCALAR, 1, FALCON_FORM_RECURRENT, FALCON_1);
    tensors t = make(6, 2, 4, 1, 0, 12);
    falcon_inputs in = inputs_of(&t, 1, 6, 4);
    in.qk_heads = 2;
    double o1[6 * 4 * MM], o2[6 * 4 * MM];
    in.head_map = FALCON_HEADS_INTERLEAVED;
    cr_assert(falcon_run(&cfg, &in, NULL, o1) == FALCON_OK);
    in.head_map = FALCON_HEADS_TILED;
    cr_assert(falcon_run(&cfg, &in, NULL, o2) == FALCON_OK);
    cr_expect(memcmp(o1, o2, sizeof o1), "the mappings gave the same outputs");
    drop(&t);
}

/* Gradient buffers for B*T rows of qh q/k heads and H value heads, and
 * `heads` state heads, or NULL where the call has no such input. */
typedef struct gbufs {
    falcon_grads g;
    size_t bytes[10];
} gbufs;

static gbufs grads_make(int64_t rows, int64_t qh, int64_t H, int64_t heads, int64_t W, int f64, int gains)
{
    const size_t es = f64 ? 8 : 4, d = sizeof(double);
    gbufs b = {.bytes = {(size_t)(rows * qh * NN) * es, (size_t)(rows * qh * NN) * es, (size_t)(rows * H * MM) * es,
                         (size_t)(rows * H) * es, (size_t)(rows * H) * es, gains ? (size_t)(rows * H * NN) * es : 0,
                         (size_t)(heads * MM * NN) * d, (size_t)(heads * NN) * d,
                         (size_t)(heads * (W - 1) * NN) * d + d, (size_t)(heads * (W - 1) * MM) * d + d}};
    void **slot[10] = {&b.g.dq, &b.g.dk, &b.g.dv, &b.g.dbeta, &b.g.dalpha, &b.g.dgain,
                       (void **)&b.g.dS0, (void **)&b.g.dprev_key, (void **)&b.g.dhist_k, (void **)&b.g.dhist_v};
    for (int i = 0; i < 10; i++) *slot[i] = i != 5 || gains ? calloc(1, b.bytes[i] + 8) : NULL;
    return b;
}

static void grads_free(gbufs *b)
{
    free(b->g.dq), free(b->g.dk), free(b->g.dv), free(b->g.dbeta), free(b->g.dalpha), free(b->g.dgain);
    free(b->g.dS0), free(b->g.dprev_key), free(b->g.dhist_k), free(b->g.dhist_v);
}

static void packed_backward_case(falcon_backend be, int f64, falcon_form form, int variant)
{
    const falcon_variant v = (falcon_variant)variant;
    const falcon_config cfg = config(be, f64, form, v);
    const int gains = falcon_variant_has_gain(v);
    const int64_t W = cfg.window;
    char what[160];
    snprintf(what, sizeof what, "backward %s %s %s %s", falcon_backend_name(be), f64 ? "fp64" : "fp32",
             falcon_form_name(form), falcon_variant_name(v));
    tensors warm = make(TT, HH, HH, f64, gains, 17), main = make(TT, HH, HH, f64, gains, 18);
    falcon_inputs w = inputs_of(&warm, 1, TT, HH), in = inputs_of(&main, 1, TT, HH);
    w.cu_seqlens = in.cu_seqlens = cu, w.seqs = in.seqs = SEQS;
    const size_t es = f64 ? 8 : 4;
    rng = 19;
    void *dO = fill(TT * HH * MM, -1, 1, f64), *scratch = calloc(TT * HH * MM, es);
    double *dS = fill(SEQS * HH * MM * NN, -1, 1, 1);
    falcon_state *packed, *seq;
    cr_assert(falcon_state_create(SEQS * HH, NN, MM, W, &packed) == FALCON_OK);
    cr_assert(falcon_run(&cfg, &w, packed, scratch) == FALCON_OK, "%s: %s", what, falcon_last_error());
    gbufs all = grads_make(TT, HH, HH, SEQS * HH, W, f64, gains);
    cr_assert(falcon_backward(&cfg, &in, packed, dO, dS, &all.g) == FALCON_OK, "%s: %s", what, falcon_last_error());
    for (int64_t i = 0; i < SEQS; i++) {
        cr_assert(falcon_state_create(HH, NN, MM, W, &seq) == FALCON_OK);
        const falcon_inputs ws = sequence(&w, i, f64), s = sequence(&in, i, f64);
        cr_assert(falcon_run(&cfg, &ws, seq, scratch) == FALCON_OK, "%s", falcon_last_error());
        gbufs one = grads_make(s.T, HH, HH, HH, W, f64, gains);
        cr_assert(falcon_backward(&cfg, &s, seq, (char *)dO + (size_t)(cu[i] * HH * MM) * es,
                                  dS + i * HH * MM * NN, &one.g) == FALCON_OK, "%s", falcon_last_error());
        const size_t rows_at = (size_t)(cu[i] * HH) * es;
        const size_t at[10] = {rows_at * NN, rows_at * NN, rows_at * MM, rows_at, rows_at, rows_at * NN,
                               (size_t)(i * HH * MM * NN) * 8, (size_t)(i * HH * NN) * 8,
                               (size_t)(i * HH * (W - 1) * NN) * 8, (size_t)(i * HH * (W - 1) * MM) * 8};
        const void *mine[10] = {one.g.dq, one.g.dk, one.g.dv, one.g.dbeta, one.g.dalpha, one.g.dgain,
                                one.g.dS0, one.g.dprev_key, one.g.dhist_k, one.g.dhist_v};
        const void *whole[10] = {all.g.dq, all.g.dk, all.g.dv, all.g.dbeta, all.g.dalpha, all.g.dgain,
                                 all.g.dS0, all.g.dprev_key, all.g.dhist_k, all.g.dhist_v};
        static const char *const names[10] = {"dq", "dk", "dv", "dbeta", "dalpha", "dgain",
                                              "dS0", "dprev_key", "dhist_k", "dhist_v"};
        for (int j = 0; j < 10; j++) {
            const size_t len = j < 6 ? one.bytes[j] : one.bytes[j] - (j >= 8 ? 8 : 0);
            if (mine[j] && len)
                cr_expect(!memcmp(mine[j], (const char *)whole[j] + at[j], len), "%s: %s of sequence %lld differs",
                          what, names[j], (long long)i);
        }
        grads_free(&one);
        falcon_state_free(seq);
    }
    grads_free(&all);
    falcon_state_free(packed);
    free(dO), free(dS), free(scratch);
    drop(&warm), drop(&main);
}

Test(layouts, packed_backward_equals_sequences_alone) { every_run(packed_backward_case, variants, 2); }

/* Grouped: every gradient but dq and dk is the repeated call's; dq and dk
 * are its per-value-head gradients summed in double and rounded once. */
static void grouped_backward_case(falcon_backend be, int f64, falcon_form form, int mapping)
{
    enum { B = GB, T = GT, H = GH, QH = GQH };
    const falcon_head_map map = (falcon_head_map)mapping;
    const falcon_config cfg = config(be, f64, form, FALCON_1);
    grouped g0 = grouped_make(map, f64, 21);
    const falcon_inputs in = g0.in, plain = g0.plain;
    rng = 22;
    void *dO = fill(B * T * H * MM, -1, 1, f64);
    gbufs g = grads_make(B * T, QH, H, B * H, 1, f64, 0), r = grads_make(B * T, H, H, B * H, 1, f64, 0);
    cr_assert(falcon_backward(&cfg, &in, NULL, dO, NULL, &g.g) == FALCON_OK, "%s", falcon_last_error());
    cr_assert(falcon_backward(&cfg, &plain, NULL, dO, NULL, &r.g) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(!memcmp(g.g.dv, r.g.dv, g.bytes[2]) && !memcmp(g.g.dbeta, r.g.dbeta, g.bytes[3]) &&
              !memcmp(g.g.dalpha, r.g.dalpha, g.bytes[4]) && !memcmp(g.g.dS0, r.g.dS0, g.bytes[6]),
              "%s map %d: dv, dbeta, dalpha or dS0 differ from the repeated call's", falcon_backend_name(be), (int)map);
    for (int which = 0; which < 2; which++) {
        const void *got = which ? g.g.dk : g.g.dq, *wide_g = which ? r.g.dk : r.g.dq;
        for (int64_t row = 0; row < B * T; row++)
            for (int64_t j = 0; j < QH * NN; j++) {
                double sum = 0;
                for (int64_t h = 0; h < H; h++) {
                    const int64_t gh = map == FALCON_HEADS_TILED ? h % QH : h / (H / QH);
                    if (gh == j / NN) sum += load(wide_g, f64, (row * H + h) * NN + j % NN);
                }
                const double want = f64 ? sum : (double)(float)sum;
                cr_expect(load(got, f64, row * QH * NN + j) == want, "%s %s map %d: %s[%lld] = %.17g, want %.17g",
                          falcon_backend_name(be), falcon_form_name(form), (int)map, which ? "dk" : "dq",
                          (long long)(row * QH * NN + j), load(got, f64, row * QH * NN + j), want);
            }
    }
    grads_free(&g), grads_free(&r);
    free(dO);
    grouped_free(&g0);
}

Test(layouts, grouped_backward_sums_value_heads) { every_run(grouped_backward_case, mappings, 2); }

/* The rules of the new fields, each by its id, with nothing written. */
static void expect_rule(const falcon_inputs *in, const falcon_state *st, const char *input, const char *rule,
                        int64_t index)
{
    const falcon_config cfg = config(FALCON_BACKEND_SCALAR, 1, FALCON_FORM_RECURRENT, FALCON_1);
    double out[4 * TT * MM] = {0};
    const falcon_status s = falcon_run(&cfg, in, (falcon_state *)st, out);
    const falcon_error_info *e = falcon_last_error_info();
    cr_expect(s != FALCON_OK && !strcmp(e->input, input) && !strcmp(e->rule, rule) && e->index == index,
              "want %s/%s at %lld, got status %d %s/%s at %lld: %s", input, rule, (long long)index, (int)s, e->input,
              e->rule, (long long)e->index, falcon_last_error());
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) cr_expect(out[i] == 0, "out written on error");
}

Test(layouts, rules)
{
    tensors t = make(TT, HH, HH, 1, 0, 31);
    falcon_inputs in = inputs_of(&t, 1, TT, HH);
    int64_t bad[SEQS + 1];
    in.cu_seqlens = cu, in.seqs = SEQS;
    in.B = 2;
    expect_rule(&in, NULL, "cu_seqlens", "cu-seqlens-batch", -1);
    in.B = 1;
    memcpy(bad, cu, sizeof bad), bad[0] = 1, in.cu_seqlens = bad;
    expect_rule(&in, NULL, "cu_seqlens", "cu-seqlens-range", 0);
    memcpy(bad, cu, sizeof bad), bad[3] = 0;
    expect_rule(&in, NULL, "cu_seqlens", "cu-seqlens-range", 3);
    memcpy(bad, cu, sizeof bad), bad[SEQS] = TT - 1;
    expect_rule(&in, NULL, "cu_seqlens", "cu-seqlens-range", SEQS);
    memcpy(bad, cu, sizeof bad), bad[2] = TT + 1;
    expect_rule(&in, NULL, "cu_seqlens", "cu-seqlens-range", 2);
    in.cu_seqlens = cu, in.seqs = 0;
    expect_rule(&in, NULL, "seqs", "cu-seqlens-range", -1);
    in.cu_seqlens = NULL, in.seqs = 3;
    expect_rule(&in, NULL, "seqs", "cu-seqlens-range", -1);
    in.seqs = 0, in.qk_heads = 3;
    expect_rule(&in, NULL, "qk_heads", "qk-heads-range", -1);
    in.qk_heads = -1;
    expect_rule(&in, NULL, "qk_heads", "qk-heads-range", -1);
    in.qk_heads = 1, in.head_map = (falcon_head_map)7;
    expect_rule(&in, NULL, "head_map", "unknown-enum", -1);
    /* a packed batch carries seqs x H heads, not B x H */
    in.qk_heads = 0, in.head_map = FALCON_HEADS_INTERLEAVED, in.cu_seqlens = cu, in.seqs = SEQS;
    falcon_state *st;
    cr_assert(falcon_state_create(HH, NN, MM, 1, &st) == FALCON_OK);
    expect_rule(&in, st, "state", "state-shape", -1);
    falcon_state_free(st);
    cr_expect(falcon_inputs_state_heads(&in) == SEQS * HH);
    /* a grouped q names its own head: q[b=0,t=2,h=1] of 2 qk heads */
    in.cu_seqlens = NULL, in.seqs = 0, in.qk_heads = 1, in.H = 2, in.T = 4;
    ((double *)t.q)[(2 * 1 + 0) * NN + 3] = 1.0 / 0.0;
    expect_rule(&in, NULL, "q", "finite", (2 * 1 + 0) * NN + 3);
    drop(&t);
}

/* falcon_state_slice: a packed sequence's heads of a state, bit for bit;
 * a range past the state refused. */
Test(layouts, state_slice)
{
    const falcon_config cfg = config(FALCON_BACKEND_SCALAR, 1, FALCON_FORM_RECURRENT, FALCON_3);
    tensors t = make(TT, HH, HH, 1, 0, 41);
    falcon_inputs in = inputs_of(&t, 1, TT, HH);
    in.cu_seqlens = cu, in.seqs = SEQS;
    falcon_state *st, *part;
    double out[TT * HH * MM];
    cr_assert(falcon_state_create(SEQS * HH, NN, MM, cfg.window, &st) == FALCON_OK);
    cr_assert(falcon_run(&cfg, &in, st, out) == FALCON_OK, "%s", falcon_last_error());
    for (int64_t i = 0; i < SEQS; i++) {
        cr_assert(falcon_state_slice(st, i * HH, HH, &part) == FALCON_OK, "%s", falcon_last_error());
        expect_same_heads(st, i * HH, part, "slice");
        cr_expect(!memcmp(falcon_state_get_view(st).hist_v + i * HH * 2 * MM, falcon_state_get_view(part).hist_v,
                          sizeof(double) * HH * 2 * MM), "slice: hist_v differs");
        falcon_state_free(part);
    }
    cr_expect(falcon_state_slice(st, SEQS * HH - 1, 2, &part) == FALCON_E_SHAPE);
    cr_expect(falcon_state_slice(st, -1, 1, &part) == FALCON_E_SHAPE);
    cr_expect(falcon_state_slice(st, 0, 0, &part) == FALCON_E_SHAPE);
    falcon_state_free(st);
    drop(&t);
}

/* A pool: the indexed slots advance as a state of those slots would, a
 * sequence of slot -1 starts fresh and is not kept, every other slot keeps
 * its sentinel bits; bad slots are refused with the pool untouched. */
Test(layouts, state_pool)
{
    enum { P = 5 };
    const falcon_config cfg = config(FALCON_BACKEND_SCALAR, 0, FALCON_FORM_CHUNK, FALCON_3);
    tensors t = make(TT, HH, HH, 0, 0, 51);
    falcon_inputs in = inputs_of(&t, 1, TT, HH);
    in.cu_seqlens = cu, in.seqs = SEQS;
    const int64_t slots[SEQS] = {3, -1, 0, 4, -1, 1}; /* slot 2 is nobody's */
    double *S = malloc(sizeof(double) * P * HH * MM * NN);
    for (int64_t i = 0; i < P * HH * MM * NN; i++) S[i] = 0.25 + 0x1p-20 * (double)i; /* sentinels */
    falcon_state *pool, *before, *want, *part;
    cr_assert(falcon_state_create(P * HH, NN, MM, cfg.window, &pool) == FALCON_OK);
    cr_assert(falcon_state_set_memory(pool, S) == FALCON_OK);
    cr_assert(falcon_state_copy(pool, &before) == FALCON_OK);
    /* what a plain call gives: a state of the indexed slots in the call's order */
    cr_assert(falcon_state_create(SEQS * HH, NN, MM, cfg.window, &want) == FALCON_OK);
    double *W = calloc(SEQS * HH * MM * NN, sizeof(double));
    for (int i = 0; i < SEQS; i++)
        if (slots[i] >= 0) memcpy(W + i * HH * MM * NN, S + slots[i] * HH * MM * NN, sizeof(double) * HH * MM * NN);
    cr_assert(falcon_state_set_memory(want, W) == FALCON_OK);
    float o1[TT * HH * MM], o2[TT * HH * MM];
    cr_assert(falcon_run(&cfg, &in, want, o1) == FALCON_OK, "%s", falcon_last_error());
    cr_assert(falcon_run_pool(&cfg, &in, pool, slots, o2) == FALCON_OK, "%s", falcon_last_error());
    cr_expect(!memcmp(o1, o2, sizeof o1), "pool: outputs differ from the plain call's");
    for (int64_t i = 0; i < SEQS; i++)
        if (slots[i] >= 0) {
            cr_assert(falcon_state_slice(want, i * HH, HH, &part) == FALCON_OK);
            expect_same_heads(pool, slots[i] * HH, part, "pool slot");
            falcon_state_free(part);
        }
    const falcon_state_view a = falcon_state_get_view(pool), b = falcon_state_get_view(before);
    cr_expect(!memcmp(a.S + 2 * HH * MM * NN, b.S + 2 * HH * MM * NN, sizeof(double) * HH * MM * NN),
              "pool: slot 2, given to no sequence, changed");
    /* refused, the pool as it was */
    const int64_t twice[SEQS] = {3, -1, 0, 3, -1, 1}, out_of[SEQS] = {3, -1, 0, 5, -1, 1};
    cr_assert(falcon_state_copy(pool, &part) == FALCON_OK);
    cr_expect(falcon_run_pool(&cfg, &in, pool, twice, o2) == FALCON_E_RANGE &&
              !strcmp(falcon_last_error_info()->rule, "slot-twice") && falcon_last_error_info()->index == 3);
    cr_expect(falcon_run_pool(&cfg, &in, pool, out_of, o2) == FALCON_E_RANGE &&
              !strcmp(falcon_last_error_info()->rule, "slot-range"));
    expect_same_heads(pool, 0, part, "a refused pool call");
    falcon_state_free(part), falcon_state_free(pool), falcon_state_free(before), falcon_state_free(want);
    free(S), free(W);
    drop(&t);
}
