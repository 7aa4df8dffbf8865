/*
 * `falcon cases export DIR`: the gate's cases as files any implementation
 * can run, each with the MPFR reference's outputs and final state and the
 * thresholds that judge them (format: docs/cases.md).
 *
 * One directory per (case, form): the thresholds depend on the form (the
 * blocked forms sum over a block's terms). The inputs and the reference of
 * a form's copy differ only by its value scale (form_value_scale). The whole set is written into a temporary directory beside DIR and
 * renamed onto DIR at the end: DIR is either complete or absent, and an
 * existing DIR is never touched.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "grade.h"
#include "set.h"
#include "export-layout.h"
#include "gate.h"
#include "design.h"
#include "export-grad.h"
#include "../util/paths.h"
#include "../util/signals.h"
#include "../util/files.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: falcon cases export DIR [--profile quick|full] [--variant V] [--form F]\n"
            "                               [--align A] [--phi P] [--decay R]\n"
            "                               [--precision fp32|fp64|bf16|fp16]\n"
            "                               [--layout falcon|fla|ggml] [--scale S] [--quiet]\n"
            "Writes the gate's cases into the new directory DIR: per case and form the\n"
            "inputs (.npy), the initial state (a checkpoint and state0.npy), the MPFR\n"
            "reference's outputs and final state (float64 .npy), the thresholds in units\n"
            "of roundoff (case.json), and index.json listing them. An implementation\n"
            "writes RDIR/<case>/out.npy (and state.npy) and `falcon check DIR --results\n"
            "RDIR` judges it. The quick profile takes seconds; full adds the gate's whole\n"
            "table and long cases (T = 10^4, every decay regime). The same arguments write\n"
            "the same bytes; index.json records them, and `falcon check` re-derives the set\n"
            "from them and refuses one that differs (an edited threshold or reference).\n"
            "Case names start with the profile's letter: q0001-... (quick), f0001-... (full).\n"
            "  --precision  the inputs' values are exact in this format (default fp32)\n"
            "  --layout     falcon (the library's), fla (PyTorch libraries: state [B,H,K,V]),\n"
            "               ggml (ggml_gated_delta_net: n = m cases, reads scaled 1/sqrt(S))\n"
            "  --scale      the read scale of the fla layout (default 1/sqrt(n))\n"
            "  --decay      none, mild, random, strong, extreme, reset-slow or mix\n"
            "  --grad       also seeded cotangents (dO.npy, dS_T.npy), the MPFR reference's\n"
            "               gradients (ref_dq.npy, ...) and their thresholds (falcon layout)\n");
}

/* ---- the case list: grade/design.c ---- */

/* What a case is there to catch, from its properties. */
static void describe_stress(const export_case *e, char *buf, size_t size)
{
    static const char *const regimes[GATE_DECAY_COUNT] = {
        "no decay", "mild decay: alpha uniform in [0.98, 1]", "random decay: alpha uniform in [0.5, 1]",
        "strong decay: alpha = 0.5 (the product underflows)",
        "extreme decay: the smallest normal number every 5th step, 0.9 otherwise",
        "a near-reset (the smallest normal number) at T/3, then alpha = 0.999",
        "a mixture of 1, mild, 0.5 and the smallest normal number"};
    const gate_case *c = &e->c;
    size_t at = (size_t)snprintf(buf, size, "%s", regimes[c->decay]);
#define ADD(cond, text) \
    if ((cond) && at < size) at += (size_t)snprintf(buf + at, size - at, "; %s", text)
    ADD(e->carried, "a carried state: non-zero memory, previous key and window history");
    ADD(c->T == 0, "no steps (T = 0): outputs are empty, the state is unchanged");
    ADD(c->T == 1, "a single step");
    ADD(c->window > c->T && c->T > 0, "a window longer than the sequence");
    ADD(c->T > 0 && c->T % c->chunk != 0, "T not a multiple of the chunk");
    ADD(c->key_scale != 1, "small keys: x.x is close to eps, so the normaliser's floor matters");
    ADD(c->B * c->H > 1, "a [B][T][H][D] batch of several heads");
    ADD(c->phi != FALCON_PHI_IDENTITY, "a feature map on keys and queries");
    ADD(c->n != c->m, "n != m (the memory is not square)");
    ADD(c->T > 1000, "a long sequence (past step 1000)");
    ADD(c->T >= 2 * c->chunk, "several chunk boundaries (64, 128, ...)");
    ADD(c->B > 1, "several batch rows: each has its own inputs and state");
    ADD(e->beta_edges, "beta exactly 0 (no write, but the step's key is still the next previous key) and 2; "
                       "key and query entries exactly 0");
    ADD(e->subnormal, "subnormal keys and queries, which l2norm scales to unit length");
    ADD(e->memory_log2, "a large carried memory that the regression steps project away");
    ADD(e->seqs, "a packed batch (cu_seqlens): sequences of 0, 1, 9, 0, 3 and 16 steps, each on its own state "
                 "(nothing may flow from one into the next)");
    ADD(e->qk_heads && e->head_map == FALCON_HEADS_INTERLEAVED,
        "grouped heads: value head h reads q/k head h / (H / qk_heads) (interleaved)");
    ADD(e->qk_heads && e->head_map == FALCON_HEADS_TILED, "grouped heads: value head h reads q/k head h % qk_heads "
                                                          "(tiled)");
    ADD(c->phi == FALCON_PHI_ELU1 && !e->carried && c->align == FALCON_ALIGN_PREFIX,
        "a fresh prefix state: step 1 has no example (elu1 of a zero key would be 1)");
#undef ADD
}

/* ---- writing one case ---- */

typedef struct case_data {
    gate_data d;
    falcon_state *init; /* the initial state (fresh, or carried) */
    gate_result ref;
    double eps;         /* as the reference used it */
    int has_grad;       /* --grad: grad holds the cotangents and the reference's gradients */
    grad_export grad;
    case_layout lay;    /* a packed case's offsets, which d's inputs point to */
} case_data;

static void case_data_free(case_data *k)
{
    gate_data_free(&k->d);
    falcon_state_free(k->init);
    gate_result_free(&k->ref);
    if (k->has_grad) grad_export_free(&k->grad);
}

/* Round every input (both buffers) to the inputs' format; -1 if a value
 * does not fit it or a decay factor would become 0. */
static int round_inputs(gate_data *d, const gate_case *c, grade_unit u)
{
    const int64_t rows = c->B * c->T * c->H;
    const int64_t count = 3 * rows * c->n + rows * c->m + 2 * rows;
    double *x = d->buf64;
    float *y = d->buf;
    for (int64_t i = 0; i < count; i++) {
        double r;
        if (grade_round(x[i], u, &r)) return -1;
        x[i] = r;
        y[i] = (float)r;
    }
    const double *alpha = d->in64.alpha;
    for (int64_t i = 0; alpha && i < rows; i++)
        if (alpha[i] <= 0) return -1;
    return 0;
}

/* A state from a few warm-up steps of the same generator (the mpfr backend,
 * rounded to the inputs' format): the memory, previous key and window
 * history an implementation must load before the case's first step. */
static falcon_status carried_state(const export_case *e, grade_unit u, falcon_state **out)
{
    const gate_case *c = &e->c;
    gate_case w = *c;
    w.B = layout_state_heads(e) / c->H; /* a packed case's sequences warm up as batch rows */
    w.T = 7;
    w.seed = c->seed + 77777;
    w.decay = GATE_DECAY_RANDOM; /* the case's own regime may not fit the inputs' format in fp64 (extreme) */
    gate_data d;
    if (gate_data_make(&w, FALCON_FP64, &d)) return FALCON_E_NOMEM;
    falcon_status s = u == GRADE_FP64 ? FALCON_OK : round_inputs(&d, &w, u) ? FALCON_E_RANGE : FALCON_OK;
    const int64_t heads = layout_state_heads(e), size = heads * c->m * c->n;
    double *S = malloc(sizeof(double) * (size_t)(size + 1) + sizeof(double) * (size_t)(w.T * heads * c->m));
    if (!s && !S) s = FALCON_E_NOMEM;
    if (!s) s = falcon_state_create(heads, c->n, c->m, c->window, out);
    if (!s) {
        falcon_config cfg = gate_config(&w, FALCON_FORM_RECURRENT, FALCON_BACKEND_MPFR, FALCON_FP64);
        s = falcon_run(&cfg, &d.in64, *out, S + size + 1);
        const double *now = falcon_state_get_view(*out).S;
        for (int64_t i = 0; !s && i < size; i++)
            if (grade_round(ldexp(now[i], e->memory_log2), u, &S[i])) s = FALCON_E_RANGE;
        if (!s) s = falcon_state_set_memory(*out, S);
        if (s) {
            falcon_state_free(*out);
            *out = NULL;
        }
    }
    free(S);
    gate_data_free(&d);
    return s;
}

/* Set element i of the generated inputs to x, rounded to the data's
 * precision (fp32 data keeps the float and its exact double). */
static void set_input(gate_data *d, int64_t i, double x)
{
    if (d->prec == FALCON_FP64) {
        ((double *)d->buf)[i] = ((double *)d->buf64)[i] = x;
    } else {
        const float f = (float)x;
        ((float *)d->buf)[i] = f;
        ((double *)d->buf64)[i] = (double)f;
    }
}

/* What the generator does not draw (design.h): betas of exactly 1, or 0
 * at every fifth step and 2 two steps later, with every other entry of the
 * keys and queries exactly 0 at the step between (where the feature maps
 * meet their branch point); keys and queries of every fourth step scaled
 * into the subnormal range of the precision. */
static void edit_inputs(const export_case *e, grade_unit u, gate_data *d)
{
    const gate_case *c = &e->c;
    const double *x = d->buf64; /* element i of q, k, beta: at (tensor - x) + i in both buffers */
    const int64_t rows = c->B * c->T * c->H, n = c->n, q0 = (const double *)d->in64.q - x,
                  k0 = (const double *)d->in64.k - x, beta0 = (const double *)d->in64.beta - x;
    /* Below the smallest normal number of the inputs' format, above its
     * smallest subnormal for most values: fp64 2^-1022, fp32 and bf16
     * 2^-126 (bf16's subnormals reach 2^-133), fp16 2^-14 (2^-24). */
    const int tiny = u == GRADE_FP64 ? -1030 : u == GRADE_FP16 ? -16 : -130;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = (r / c->H) % c->T;
        if (e->unit_beta) set_input(d, beta0 + r, 1.0);
        if (e->beta_edges && t % 5 == 1) set_input(d, beta0 + r, 0.0);
        if (e->beta_edges && t % 5 == 3) set_input(d, beta0 + r, 2.0);
        for (int64_t i = 0; e->beta_edges && t % 5 == 2 && i < n; i += 2) { /* phi at exactly 0 */
            set_input(d, q0 + r * n + i, 0.0);
            set_input(d, k0 + r * n + i, 0.0);
        }
        for (int64_t i = 0; e->subnormal && t % 4 == 2 && i < n; i++) {
            set_input(d, q0 + r * n + i, ldexp(x[q0 + r * n + i], tiny));
            set_input(d, k0 + r * n + i, ldexp(x[k0 + r * n + i], tiny));
        }
    }
}

/* Inputs, initial state and reference of one case; 1 if the case cannot be
 * written in the inputs' format (skipped), -1 on failure. */
static int case_data_make(const export_case *e, grade_unit u, int grad, case_data *k)
{
    memset(k, 0, sizeof *k);
    const falcon_precision prec = u == GRADE_FP64 ? FALCON_FP64 : FALCON_FP32;
    if (gate_data_make(&e->c, prec, &k->d)) return -1;
    k->eps = gate_eps(&e->c, prec);
    if (layout_share(e, &k->d)) return -1;
    edit_inputs(e, u, &k->d);
    if (u != GRADE_FP64 && u != GRADE_FP32 &&
        (round_inputs(&k->d, &e->c, u) || grade_round(k->eps, u, &k->eps) || k->eps <= 0))
        return 1;
    layout_apply(e, &k->d, &k->lay);
    falcon_status s = e->carried ? carried_state(e, u, &k->init)
                                 : falcon_state_create(layout_state_heads(e), e->c.n, e->c.m, e->c.window, &k->init);
    if (s == FALCON_E_RANGE) return 1;
    if (s) return -1;
    gate_case c = e->c;
    c.eps = k->eps; /* already in the inputs' format */
    if (layout_is_plain(e) ? gate_reference_from(&c, &k->d, k->init, &k->ref)
                           : layout_reference(e, &c, &k->d, k->init, &k->ref))
        return -1;
    const grad_layout lay = {layout_state_heads(e) / c.H, layout_qk_heads(e), layout_threshold_case(e).T,
                             layout_grad_reference, e};
    if (grad && grad_export_make(&c, e->carried, &k->d, k->init, u, layout_is_plain(e) ? NULL : &lay, &k->grad))
        return -1;
    k->has_grad = grad;
    return 0;
}

/* A case whose reference outputs and final memory are all zero cannot
 * fail a result that is zero too: the design has none (design.c). */
static int reference_is_zero(const gate_result *r)
{
    for (int64_t i = 0; i < r->out_count; i++)
        if (r->out[i] != 0) return 0;
    for (int64_t i = 0; i < r->state_count; i++)
        if (r->S[i] != 0) return 0;
    return 1;
}

/* ---- the value scale of a form's copy ----
 * Every form's copy of a configuration has the same keys, queries, betas,
 * decays and gains, but its values (v, the initial memory and the window's
 * value history) are the configuration's times 2^form, and so are its
 * reference outputs and memory. The recurrence is linear in the values and
 * the memory together, and a power of two scales them exactly, so the
 * errors in units of roundoff and the thresholds are the same in every
 * copy; but a result written for one form and copied into another form's
 * folder (a harness that runs one form and files it under all three) is
 * off by a factor of 2 or 4 and fails. Where a scaled value would not fit
 * the set's format, the copy keeps the scale 1. */
static int scaled_fit(const double *x, int64_t count, double c, grade_unit u)
{
    double r;
    for (int64_t i = 0; i < count; i++)
        if (grade_round(c * x[i], u, &r) || r != c * x[i]) return 0;
    return 1;
}

static double form_value_scale(const export_case *e, const case_data *k, falcon_form form, grade_unit u)
{
    const gate_case *c = &e->c;
    const double s = ldexp(1.0, (int)form);
    const falcon_state_view st = falcon_state_get_view(k->init);
    const int64_t rows = c->B * c->T * c->H, heads = layout_state_heads(e);
    const int ok = scaled_fit(k->d.in64.v, rows * c->m, s, u) && scaled_fit(st.S, heads * c->m * c->n, s, u) &&
                   scaled_fit(st.hist_v, heads * st.keep * c->m, s, u) &&
                   scaled_fit(k->ref.out, rows * c->m, s, GRADE_FP64) &&
                   scaled_fit(k->ref.S, heads * c->m * c->n, s, GRADE_FP64);
    return ok ? s : 1.0;
}

/* dir/name, an array of x in the type dt, through the sink. */
static int write_npy(set_sink *sink, const char *dir, const char *name, falcon_dtype dt, int ndim,
                     const int64_t *shape, const double *x)
{
    char rel[4200];
    snprintf(rel, sizeof rel, "%s/%s", dir, name);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) count *= shape[i];
    falcon_array a = {dt, ndim, {0}, count, NULL};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    float *f = NULL;
    if (dt == FALCON_DTYPE_F32) {
        f = malloc(sizeof(float) * (size_t)(count + 1));
        if (!f) return cli_error("'%s': out of memory", rel);
        for (int64_t i = 0; i < count; i++) f[i] = (float)x[i];
        a.data = f;
    } else {
        a.data = (void *)x;
    }
    const int rc = sink_npy(sink, rel, &a);
    free(f);
    return rc;
}

/* A [B][H][m][n] memory in the layout's order (fla: [B][H][n][m]). */
static void state_in_layout(const double *S, int64_t heads, int64_t m, int64_t n, grade_layout l, double *out)
{
    for (int64_t h = 0; h < heads; h++)
        for (int64_t a = 0; a < m; a++)
            for (int64_t i = 0; i < n; i++) {
                const double x = S[(h * m + a) * n + i];
                if (l == GRADE_LAYOUT_FLA) out[(h * n + i) * m + a] = x;
                else out[(h * m + a) * n + i] = x;
            }
}

static json_t *shape_json(int ndim, const int64_t *shape)
{
    json_t *a = json_array();
    for (int i = 0; i < ndim; i++) json_array_append_new(a, json_integer(shape[i]));
    return a;
}

/* case.json's "inputs": the files of a case's inputs. */
static json_t *inputs_json(const falcon_inputs *in)
{
    json_t *inputs = json_object();
    json_object_set_new(inputs, "q", json_string("q.npy"));
    json_object_set_new(inputs, "k", json_string("k.npy"));
    json_object_set_new(inputs, "v", json_string("v.npy"));
    json_object_set_new(inputs, "beta", json_string("beta.npy"));
    json_object_set_new(inputs, "alpha", in->alpha ? json_string("alpha.npy") : json_null());
    json_object_set_new(inputs, "gain", in->gain ? json_string("gain.npy") : json_null());
    if (in->cu_seqlens) json_object_set_new(inputs, "cu_seqlens", json_string("cu_seqlens.npy"));
    return inputs;
}

/* index.json's row of one (case, form). */
static json_t *index_row(const char *name, const gate_case *c, falcon_form form)
{
    json_t *row = json_object();
    json_object_set_new(row, "name", json_string(name));
    json_object_set_new(row, "dir", json_string(name));
    json_object_set_new(row, "variant", json_string(falcon_variant_name(c->variant)));
    json_object_set_new(row, "form", json_string(falcon_form_name(form)));
    json_object_set_new(row, "align", json_string(falcon_align_name(c->align)));
    json_object_set_new(row, "phi", json_string(falcon_phi_name(c->phi)));
    json_object_set_new(row, "decay", json_string(gate_decay_name(c->decay)));
    return row;
}

/* The directory of one (case, form); `name` receives its name. */
static int write_case(set_sink *sink, int index, const export_case *e, const case_data *k, falcon_form form,
                      const export_opts *o, double scale, char *name, size_t name_size, json_t *list)
{
    const gate_case *c = &e->c;
    /* The profile's letter first: a name means one case in every set. */
    char inv[24] = "";
    if (e->inv_group) snprintf(inv, sizeof inv, "-invariance%d", e->inv_group);
    snprintf(name, name_size, "%c%04d-%s-%s-%s-%s-%s%s%s%s%s", o->profile ? 'f' : 'q', index,
             falcon_variant_name(c->variant), falcon_align_name(c->align), falcon_phi_name(c->phi),
             gate_decay_name(c->decay), falcon_form_name(form), e->carried ? "-carried" : "",
             e->seqs ? "-packed" : "", !e->qk_heads ? "" : e->head_map ? "-grouped-tiled" : "-grouped-interleaved", inv);
    const char *dir = name; /* inside the set */
    char path[4200];
    if (sink_dir(sink, dir)) return 2;
    const falcon_dtype dt = o->precision == GRADE_FP64 ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
    const int64_t B = c->B, T = c->T, H = c->H, n = c->n, m = c->m, heads = layout_state_heads(e);
    const int64_t sh_qk[4] = {B, T, layout_qk_heads(e), n}, sh_n[4] = {B, T, H, n}, sh_m[4] = {B, T, H, m},
                  sh_1[3] = {B, T, H};
    const int64_t sh_S[4] = {heads / H, H, o->layout == GRADE_LAYOUT_FLA ? n : m,
                             o->layout == GRADE_LAYOUT_FLA ? m : n};
    const falcon_inputs *in = &k->d.in64;
    const double vs = form_value_scale(e, k, form, o->precision);
    double *buf = malloc(sizeof(double) * (size_t)(2 * heads * m * n + B * T * H * m + 1));
    int rc = buf ? 0 : cli_error("out of memory");
    falcon_state *init = NULL;
    if (!rc && gate_state_scaled(k->init, vs, &init)) rc = cli_error("%s", falcon_last_error());
    if (!rc) {
        for (int64_t i = 0; i < B * T * H * m; i++) buf[i] = vs * ((const double *)in->v)[i];
        rc = write_npy(sink, dir, "q.npy", dt, 4, sh_qk, in->q) || write_npy(sink, dir, "k.npy", dt, 4, sh_qk, in->k) ||
             (in->cu_seqlens && layout_write_offsets(sink, dir, in)) ||
             write_npy(sink, dir, "v.npy", dt, 4, sh_m, buf) || write_npy(sink, dir, "beta.npy", dt, 3, sh_1, in->beta) ||
             (in->alpha && write_npy(sink, dir, "alpha.npy", dt, 3, sh_1, in->alpha)) ||
             (in->gain && write_npy(sink, dir, "gain.npy", dt, 4, sh_n, in->gain))
                 ? 2
                 : 0;
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/state0", dir);
        rc = sink_checkpoint(sink, path, init);
    }
    if (!rc) {
        state_in_layout(falcon_state_get_view(init).S, heads, m, n, o->layout, buf);
        rc = write_npy(sink, dir, "state0.npy", dt, 4, sh_S, buf);
    }
    if (!rc) {
        for (int64_t i = 0; i < heads * m * n; i++) buf[i] = vs * k->ref.S[i];
        state_in_layout(buf, heads, m, n, o->layout, buf + heads * m * n);
        rc = write_npy(sink, dir, "ref_state.npy", FALCON_DTYPE_F64, 4, sh_S, buf + heads * m * n);
    }
    if (!rc) {
        for (int64_t i = 0; i < B * T * H * m; i++) buf[i] = scale * (vs * k->ref.out[i]);
        rc = write_npy(sink, dir, "ref_out.npy", FALCON_DTYPE_F64, 4, sh_m, buf);
    }
    falcon_state_free(init);
    free(buf);
    if (rc) return rc;

    const falcon_precision fp = o->precision == GRADE_FP64 ? FALCON_FP64 : FALCON_FP32;
    const gate_case tc = layout_threshold_case(e); /* a packed case's: its longest sequence's */
    const double thr_S = gate_threshold(&tc, form, fp), thr_O = gate_threshold_out(&tc, form, fp, k->ref.read_cond);
    char stress[512];
    describe_stress(e, stress, sizeof stress);
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(name));
    json_object_set_new(j, "variant", json_string(falcon_variant_name(c->variant)));
    json_object_set_new(j, "form", json_string(falcon_form_name(form)));
    json_object_set_new(j, "align", json_string(falcon_align_name(c->align)));
    json_object_set_new(j, "phi", json_string(falcon_phi_name(c->phi)));
    json_object_set_new(j, "eps", json_real(k->eps));
    json_object_set_new(j, "window", json_integer(c->window));
    json_object_set_new(j, "chunk", json_integer(c->chunk));
    json_object_set_new(j, "parallel_block", json_integer(falcon_parallel_block(c->window)));
    json_object_set_new(j, "B", json_integer(B));
    json_object_set_new(j, "T", json_integer(T));
    json_object_set_new(j, "H", json_integer(H));
    json_object_set_new(j, "n", json_integer(n));
    json_object_set_new(j, "m", json_integer(m));
    json_object_set_new(j, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(j, "decay", json_string(gate_decay_name(c->decay)));
    json_object_set_new(j, "carried_state", json_boolean(e->carried));
    layout_json(e, j);
    layout_invariance_json(e, j);
    json_object_set_new(j, "stresses", json_string(stress));
    json_object_set_new(j, "layout", json_string(grade_layout_name(o->layout)));
    json_object_set_new(j, "scale", json_real(scale));
    json_object_set_new(j, "value_scale", json_real(vs));
    json_object_set_new(j, "precision", json_string(grade_unit_name(o->precision)));
    json_object_set_new(j, "inputs", inputs_json(in));
    json_object_set_new(j, "state_in", json_string("state0"));
    json_object_set_new(j, "state_in_npy", json_string("state0.npy"));
    json_t *ref = json_object();
    json_object_set_new(ref, "out", json_string("ref_out.npy"));
    json_object_set_new(ref, "state", json_string("ref_state.npy"));
    json_object_set_new(ref, "read_cond", json_real(k->ref.read_cond));
    json_object_set_new(ref, "mpfr_bits", json_integer(256));
    json_object_set_new(j, "reference", ref);
    json_t *thr = json_object();
    json_object_set_new(thr, "out_u", json_real(thr_O));
    json_object_set_new(thr, "state_u", json_real(thr_S));
    json_object_set_new(j, "thresholds", thr);
    json_t *expected = json_object();
    json_object_set_new(expected, "out", shape_json(4, sh_m));
    json_object_set_new(expected, "state", shape_json(4, sh_S));
    json_object_set_new(j, "expected", expected);
    if (k->has_grad) {
        gate_case gc = *c;
        gc.eps = k->eps;
        rc = grad_export_write(sink, dir, &gc, form, o->precision, vs, &k->grad, j);
    }
    snprintf(path, sizeof path, "%s/case.json", dir);
    if (!rc) rc = sink_json(sink, path, j);
    json_decref(j);
    if (!rc) rc = sink_only(sink, dir); /* nothing else in the case's folder */
    if (rc) return rc;

    json_array_append_new(list, index_row(name, c, form));
    return 0;
}

/* ---- signals ---- */

/* A terminating signal is noted, the export stops between two cases, removes
 * its temporary directory and then terminates as the signal would: nothing
 * of a killed export is left behind (a SIGKILL leaves DIR.tmp-*, never a
 * partial DIR). Installed by the falcon command, not by a library caller. */
static volatile sig_atomic_t stop_signal;
static void note_signal(int sig) { stop_signal = sig; }
static int catching;

/* The same signals as the output transactions catch (src/outputs.c). */
void falcon_grade_export_catch_signals(void)
{
    falcon_catch_terminating_signals(note_signal);
    catching = 1;
}

static void die_of_signal(int sig)
{
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ---- options ---- */

static int parse_enum(const char *opt, const char *arg, int (*parse)(const char *), int *out)
{
    *out = parse(arg);
    return *out < 0 ? cli_error("cases export: %s %s: unknown value (see falcon cases export --help)", opt, arg) : 0;
}

static int decay_parse(const char *s)
{
    for (int d = 0; d < GATE_DECAY_COUNT; d++)
        if (!strcmp(s, gate_decay_name((gate_decay)d))) return d;
    return -1;
}

static int profile_parse(const char *s) { return !strcmp(s, "quick") ? 0 : !strcmp(s, "full") ? 1 : -1; }

static int parse_args(int argc, char **argv, export_opts *o, int *help)
{
    static const opt_def defs[] = {
        {"profile", 'p', 1}, {"variant", 'v', 1}, {"form", 'f', 1}, {"align", 'a', 1}, {"phi", 'P', 1},
        {"decay", 'd', 1}, {"precision", 'u', 1}, {"layout", 'l', 1}, {"scale", 's', 1}, {"quiet", 'q', 0},
        {"help", 'h', 0}, {"grad", 'g', 0}, {NULL, 0, 0}};
    *o = (export_opts){NULL, 0, -1, -1, -1, -1, -1, GRADE_FP32, GRADE_LAYOUT_FALCON, 0, 0, 0, 0};
    *help = 0;
    opt_scan sc;
    opt_begin(&sc, argc, argv, "falcon cases export", defs, OPT_POSITIONALS);
    int ch, rc = 0, u, ndir = 0;
    char *end;
    while (!rc && (ch = opt_next(&sc)) != OPT_END) {
        const char *optarg = sc.value;
        switch (ch) {
        case 'p': rc = parse_enum("--profile", optarg, profile_parse, &o->profile); break;
        case 'v': rc = parse_enum("--variant", optarg, falcon_variant_parse, &o->variant); break;
        case 'f': rc = parse_enum("--form", optarg, falcon_form_parse, &o->form); break;
        case 'a': rc = parse_enum("--align", optarg, falcon_align_parse, &o->align); break;
        case 'P': rc = parse_enum("--phi", optarg, falcon_phi_parse, &o->phi); break;
        case 'd': rc = parse_enum("--decay", optarg, decay_parse, &o->decay); break;
        case 'u':
            rc = parse_enum("--precision", optarg, grade_unit_parse, &u);
            if (!rc && u == GRADE_TF32)
                rc = cli_error("cases export: --precision tf32: tf32 rounds matrix-product operands, not "
                               "inputs: export fp32 inputs and check with --precision tf32");
            o->precision = (grade_unit)u;
            break;
        case 'l': rc = parse_enum("--layout", optarg, grade_layout_parse, &u), o->layout = (grade_layout)u; break;
        case 's':
            o->scale = strtod(optarg, &end);
            if (*end || !(o->scale > 0) || !isfinite(o->scale))
                rc = cli_error("cases export: --scale %s: must be a positive number", optarg);
            break;
        case 'q': o->quiet = 1; break;
        case 'g': o->grad = 1; break;
        case 'h': *help = 1; return 0;
        case OPT_POSITIONAL: o->dir = optarg, ndir++; break;
        default: rc = CLI_FAIL; break; /* OPT_ERROR: reported */
        }
    }
    if (rc) return rc;
    if (ndir != 1)
        return cli_error("cases export: %s", !ndir ? "no directory given (falcon cases export DIR)"
                                                   : "give one directory");
    if (!*o->dir) return cli_error("cases export: the directory name is empty");
    if (o->grad && o->layout != GRADE_LAYOUT_FALCON)
        return cli_error("cases export: --grad with --layout %s: not yet (the gradients are exported in the falcon "
                         "layout only)", grade_layout_name(o->layout));
    if (o->scale && o->layout != GRADE_LAYOUT_FLA)
        return cli_error("cases export: --scale is for the fla layout (falcon reads are unscaled, "
                           "ggml's are 1/sqrt(S))");
    return 0;
}

/* DIR may be absent or an empty directory, nothing else. An empty one
 * stays until the finished set is renamed onto it (rename replaces an empty
 * directory), so an export that fails or is killed leaves it as it was;
 * *mode: its permissions, for the set (-1: DIR is absent). */
static int check_target(const char *dir, int *mode)
{
    struct stat st;
    *mode = -1;
    if (lstat(dir, &st)) return 0;
    if (!S_ISDIR(st.st_mode))
        return cli_error("cases export: '%s' exists and is not a directory: choose a new directory", dir);
    DIR *d = opendir(dir);
    int empty = d != NULL;
    for (struct dirent *e; d && empty && (e = readdir(d));) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    if (d) closedir(d);
    if (!empty)
        return cli_error("cases export: '%s' exists and is not empty: export writes a new directory "
                           "(remove it, or choose another)", dir);
    *mode = (int)(st.st_mode & 07777);
    return 0;
}

static int keep(const export_case *e, const export_opts *o)
{
    const gate_case *c = &e->c;
    return (o->variant < 0 || (int)c->variant == o->variant) && (o->align < 0 || (int)c->align == o->align) &&
           (o->phi < 0 || (int)c->phi == o->phi) && (o->decay < 0 || (int)c->decay == o->decay);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Only the temporary directory this command made holds what it removes
 * (FTW_PHYS: a symbolic link is removed, never followed). */
static void remove_tree(const char *dir)
{
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
        fprintf(stderr, "falcon: warning: could not remove '%s'\n", dir);
}

/* The mkdtemp template of the set's temporary directory: beside DIR, cut
 * to NAME_MAX as every output's temporary is (src/outputs.c), from DIR
 * without its trailing slashes ("DIR/" names DIR, not a name inside it). */
static char *temp_dir_name(const char *dir)
{
    char *bare = strdup(dir);
    if (!bare) return NULL;
    for (size_t len = strlen(bare); len > 1 && bare[len - 1] == '/'; len--) bare[len - 1] = '\0';
    char *tmp = falcon_path_beside(bare, ".tmp-XXXXXX");
    free(bare);
    return tmp;
}

/* set.h. Every case in the order of grade_design_cases, then index.json; a
 * terminating signal (noted by the export's handler) stops it between two
 * cases. */
int grade_export_write(const export_opts *o, set_sink *sink, int *written, int *skipped)
{
    export_case *cases;
    const int ncase = grade_design_cases(o->profile, &cases);
    if (ncase < 0) return cli_error("out of memory");
    json_t *list = json_array();
    int rc = list ? 0 : cli_error("out of memory");
    *written = *skipped = 0;
    for (int i = 0; i < ncase && !rc; i++) {
        if (o->progress) fprintf(stderr, "\rcases export: configuration %d of %d, %d cases written", i + 1, ncase, *written);
        if (stop_signal) {
            rc = cli_error("cases export: interrupted by signal %d: '%s' was not written", (int)stop_signal, o->dir);
            break;
        }
        if (!keep(&cases[i], o)) continue;
        /* ggml_gated_delta_net has neither packed sequences nor a head
         * mapping (docs/cases.md, "Packed batches and grouped heads") */
        if (!layout_is_plain(&cases[i]) && o->layout == GRADE_LAYOUT_GGML) continue;
        if (o->layout == GRADE_LAYOUT_GGML) cases[i].c.m = cases[i].c.n; /* ggml's memory is square */
        case_data k;
        const int made = case_data_make(&cases[i], o->precision, o->grad, &k);
        if (made < 0) rc = cli_error("cases export: case %d: %s", i + 1, falcon_last_error());
        if (!made && reference_is_zero(&k.ref))
            rc = cli_error("cases export: case %d: the reference is all zeros, so a result of zeros would pass "
                           "(a defect of the case list)", i + 1);
        *skipped += made > 0;
        const int64_t n = cases[i].c.n;
        double scale = o->layout == GRADE_LAYOUT_FALCON ? 1.0
                     : o->layout == GRADE_LAYOUT_GGML   ? 1.0 / sqrt((double)n)
                     : o->scale                         ? o->scale
                                                        : 1.0 / sqrt((double)n);
        for (int f = 0; f < 3 && !rc && !made; f++) {
            if (o->form >= 0 && f != o->form) continue;
            char name[256];
            rc = write_case(sink, i + 1, &cases[i], &k, (falcon_form)f, o, scale, name, sizeof name, list);
            *written += !rc;
        }
        if (made >= 0) case_data_free(&k);
    }
    free(cases);
    if (o->progress) fputc('\n', stderr);
    if (!rc && *written == 0) rc = cli_error("cases export: no case matches the filters");
    if (!rc) {
        json_t *index = json_object();
        json_object_set_new(index, "format", json_string("falcon-cases"));
        json_object_set_new(index, "version", json_integer(1));
        json_object_set_new(index, "falcon_version", json_string(FALCON_VERSION));
        json_object_set_new(index, "profile", json_string(o->profile ? "full" : "quick"));
        json_object_set_new(index, "layout", json_string(grade_layout_name(o->layout)));
        json_object_set_new(index, "precision", json_string(grade_unit_name(o->precision)));
        json_object_set_new(index, "export", grade_export_record(o)); /* how to make it again */
        json_object_set_new(index, "count", json_integer(*written));
        json_object_set_new(index, "cases", json_incref(list));
        rc = sink_json(sink, "index.json", index);
        json_decref(index);
    }
    json_decref(list);
    if (!rc) rc = sink_only(sink, ""); /* nothing beside the cases and the index */
    return rc ? 2 : 0;
}

int falcon_grade_export_main(int argc, char **argv)
{
    export_opts o;
    int help;
    int rc = parse_args(argc, argv, &o, &help);
    if (rc) return rc;
    if (help) {
        usage(stdout);
        return 0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int old_mode;
    if ((rc = check_target(o.dir, &old_mode))) return rc;
    char *tmp = temp_dir_name(o.dir);
    if (!tmp) return cli_error("out of memory");
    if (!mkdtemp(tmp)) {
        rc = cli_error("cases export: cannot create the directory '%s' beside '%s': %s", tmp, o.dir,
                       strerror(errno));
        free(tmp);
        return rc;
    }
    int written = 0, skipped = 0;
    o.progress = !o.quiet && isatty(STDERR_FILENO); /* the full set takes minutes */
    set_sink *sink = sink_open(tmp, 0, "");
    rc = sink ? grade_export_write(&o, sink, &written, &skipped) : cli_error("out of memory");
    if (!rc) rc = sink_sync(sink);
    sink_close(sink);
    if (!rc && stop_signal) rc = cli_error("cases export: interrupted by signal %d: '%s' was not written",
                                             (int)stop_signal, o.dir);
    if (!rc && old_mode >= 0 && chmod(tmp, (mode_t)old_mode))
        rc = cli_error("cases export: cannot give the set the mode of '%s'", o.dir);
    if (!rc && rename(tmp, o.dir))
        rc = cli_error("cases export: cannot rename the finished set onto '%s' (it appeared meanwhile?)", o.dir);
    if (rc) remove_tree(tmp);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!rc && !o.quiet)
        printf("exported %d cases (%s profile, %s inputs, %s layout) to %s in %.1f s%s\n", written,
               o.profile ? "full" : "quick", grade_unit_name(o.precision), grade_layout_name(o.layout), o.dir,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
               skipped ? "; some cases were left out: their values do not fit the inputs' format" : "");
    free(tmp);
    if (catching && stop_signal) die_of_signal(stop_signal);
    return rc;
}
