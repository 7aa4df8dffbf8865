/* Packed batches and grouped heads in a case set (export-layout.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export-layout.h"
#include "falcon_ref.h"     /* falcon_ref_grad_cond */

int layout_is_plain(const export_case *e) { return !e->seqs && !e->qk_heads; }

int64_t layout_state_heads(const export_case *e) { return (e->seqs ? e->seqs : e->c.B) * e->c.H; }

int64_t layout_qk_heads(const export_case *e) { return e->qk_heads ? e->qk_heads : e->c.H; }

/* The q/k head value head h reads (falcon.h, falcon_head_map). */
static int64_t qk_head_of(const export_case *e, int64_t h)
{
    const int64_t Hq = layout_qk_heads(e), G = e->c.H / Hq;
    return e->head_map == FALCON_HEADS_TILED ? h % Hq : h / G;
}

gate_case layout_threshold_case(const export_case *e)
{
    gate_case c = e->c;
    if (e->seqs) {
        int64_t len[GRADE_MAX_SEQS];
        grade_packed_lengths(e->seqs, c.T, len);
        c.T = 0;
        for (int i = 0; i < e->seqs; i++) c.T = len[i] > c.T ? len[i] : c.T;
    }
    return c;
}

/* One tensor's q/k heads kept: row r's head g from value head first[g],
 * moved down in place (a destination never passes its source). */
static void keep_qk_heads(const export_case *e, char *x, size_t es)
{
    const int64_t H = e->c.H, Hq = layout_qk_heads(e), rows = e->c.B * e->c.T;
    const size_t row = (size_t)e->c.n * es;
    int64_t first[64];
    for (int64_t g = 0; g < Hq; g++) first[g] = -1;
    for (int64_t h = H - 1; h >= 0; h--) first[qk_head_of(e, h)] = h;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < Hq; g++)
            memmove(x + (size_t)(r * Hq + g) * row, x + (size_t)(r * H + first[g]) * row, row);
}

void layout_apply(const export_case *e, gate_data *d, case_layout *l)
{
    const size_t es = d->prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    if (e->qk_heads) {
        keep_qk_heads(e, (char *)d->in.q, es), keep_qk_heads(e, (char *)d->in.k, es);
        keep_qk_heads(e, (char *)d->in64.q, sizeof(double)), keep_qk_heads(e, (char *)d->in64.k, sizeof(double));
        d->in.qk_heads = d->in64.qk_heads = e->qk_heads;
        d->in.head_map = d->in64.head_map = e->head_map;
    }
    if (e->seqs) {
        int64_t len[GRADE_MAX_SEQS];
        grade_packed_lengths(e->seqs, e->c.T, len);
        l->cu[0] = 0;
        for (int i = 0; i < e->seqs; i++) l->cu[i + 1] = l->cu[i] + len[i];
        d->in.cu_seqlens = d->in64.cu_seqlens = l->cu;
        d->in.seqs = d->in64.seqs = e->seqs;
    }
}

/* q or k of d (double) repeated to the value heads; NULL out of memory. */
static double *repeated(const export_case *e, const double *x)
{
    const int64_t H = e->c.H, Hq = layout_qk_heads(e), rows = e->c.B * e->c.T, n = e->c.n;
    double *out = malloc(sizeof(double) * (size_t)(rows * H * n + 1));
    for (int64_t r = 0; out && r < rows; r++)
        for (int64_t h = 0; h < H; h++)
            memcpy(out + (r * H + h) * n, x + (r * Hq + qk_head_of(e, h)) * n, sizeof(double) * (size_t)n);
    return out;
}

static double norm2(const double *x, int64_t count)
{
    double s = 0;
    for (int64_t i = 0; i < count; i++) s += x[i] * x[i];
    return s;
}

/* Sequence i of the packed inputs d (double) as a case of its own: B = 1,
 * its steps, and its heads of init in *part. */
static falcon_status packed_sequence(const gate_case *c, const gate_data *d,
                                     const falcon_state *init, int i, gate_case *ci, gate_data *di,
                                     falcon_state **part)
{
    const int64_t H = c->H, n = c->n, m = c->m, t0 = d->in64.cu_seqlens[i];
    *ci = *c;
    ci->T = d->in64.cu_seqlens[i + 1] - t0;
    *di = *d;
    falcon_inputs *in = &di->in64;
    in->T = ci->T, in->cu_seqlens = NULL, in->seqs = 0;
    in->q = (const double *)in->q + t0 * H * n, in->k = (const double *)in->k + t0 * H * n;
    in->v = (const double *)in->v + t0 * H * m, in->beta = (const double *)in->beta + t0 * H;
    if (in->alpha) in->alpha = (const double *)in->alpha + t0 * H;
    if (in->gain) in->gain = (const double *)in->gain + t0 * H * n;
    return falcon_state_slice(init, (int64_t)i * H, H, part);
}

/* The packed reference: sequence by sequence into r (out rows and state
 * heads at their packed places); read_cond from the sequences' sums. */
static falcon_status packed_reference(const export_case *e, const gate_case *c, const gate_data *d,
                                      const falcon_state *init, gate_result *r)
{
    const int64_t H = c->H, m = c->m, mn = c->m * c->n;
    r->out_count = c->T * H * m, r->state_count = e->seqs * H * mn;
    r->out = calloc((size_t)(r->out_count + 1), sizeof(double));
    r->S = calloc((size_t)(r->state_count + 1), sizeof(double));
    falcon_status s = r->out && r->S ? FALCON_OK : FALCON_E_NOMEM;
    double num = 0, den = 0;
    for (int i = 0; i < e->seqs && !s; i++) {
        gate_case ci;
        gate_data di;
        falcon_state *part = NULL;
        gate_result ri;
        s = packed_sequence(c, d, init, i, &ci, &di, &part);
        if (!s) s = gate_reference_from(&ci, &di, part, &ri);
        falcon_state_free(part);
        if (s) break;
        const int64_t t0 = d->in64.cu_seqlens[i];
        memcpy(r->out + t0 * H * m, ri.out, sizeof(double) * (size_t)ri.out_count);
        memcpy(r->S + i * H * mn, ri.S, sizeof(double) * (size_t)ri.state_count);
        const double o2 = norm2(ri.out, ri.out_count);
        num += ri.read_cond * ri.read_cond * o2, den += o2;
        gate_result_free(&ri);
    }
    r->read_cond = den > 0 ? sqrt(num / den) : 1.0;
    if (s) gate_result_free(r);
    return s;
}

falcon_status layout_reference(const export_case *e, const gate_case *c, const gate_data *d,
                               const falcon_state *init, gate_result *r)
{
    gate_data plain = *d;
    double *q = NULL, *k = NULL;
    if (e->qk_heads) {
        q = repeated(e, d->in64.q), k = repeated(e, d->in64.k);
        if (!q || !k) {
            free(q), free(k);
            return FALCON_E_NOMEM;
        }
        plain.in64.q = q, plain.in64.k = k, plain.in64.qk_heads = 0;
    }
    const falcon_status s = e->seqs ? packed_reference(e, c, &plain, init, r) : gate_reference_from(c, &plain, init, r);
    free(q), free(k);
    return s;
}

/* A .npy version 1.0 header for int64 [count]: magic, version, length,
 * then the dictionary padded with spaces to a 64-byte multiple. */
int layout_write_offsets(set_sink *sink, const char *dir, const falcon_inputs *in)
{
    char dict[128], rel[4200];
    const int len = snprintf(dict, sizeof dict, "{'descr': '<i8', 'fortran_order': False, 'shape': (%lld,), }",
                             (long long)(in->seqs + 1));
    const size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64, hlen = total - 10;
    unsigned char *bytes = calloc(1, total + sizeof(int64_t) * (size_t)(in->seqs + 1));
    if (!bytes) return cli_error("out of memory");
    memcpy(bytes, "\x93NUMPY\x01\x00", 8);
    bytes[8] = (unsigned char)(hlen & 0xff), bytes[9] = (unsigned char)(hlen >> 8);
    memset(bytes + 10, ' ', hlen);
    memcpy(bytes + 10, dict, (size_t)len);
    bytes[total - 1] = '\n';
    for (int64_t i = 0; i <= in->seqs; i++) { /* little-endian whatever the host */
        const uint64_t x = (uint64_t)in->cu_seqlens[i];
        for (int b = 0; b < 8; b++) bytes[total + (size_t)i * 8 + (size_t)b] = (unsigned char)(x >> (8 * b));
    }
    snprintf(rel, sizeof rel, "%s/cu_seqlens.npy", dir);
    const int rc = sink_file(sink, rel, bytes, total + sizeof(int64_t) * (size_t)(in->seqs + 1));
    free(bytes);
    return rc;
}

void layout_json(const export_case *e, json_t *j)
{
    if (e->seqs) {
        int64_t len[GRADE_MAX_SEQS], at = 0;
        grade_packed_lengths(e->seqs, e->c.T, len);
        json_t *cu = json_array();
        json_array_append_new(cu, json_integer(0));
        for (int i = 0; i < e->seqs; i++) json_array_append_new(cu, json_integer(at += len[i]));
        json_object_set_new(j, "seqs", json_integer(e->seqs));
        json_object_set_new(j, "cu_seqlens", cu); /* cu_seqlens.npy's values, for readers of case.json */
    }
    if (!e->qk_heads) return;
    json_object_set_new(j, "qk_heads", json_integer(e->qk_heads));
    json_object_set_new(j, "head_map", json_string(e->head_map == FALCON_HEADS_TILED ? "tiled" : "interleaved"));
}

/* ---- gradients ---- */

/* The tensor sizes of a layout case's gradients, q and k with Hx heads. */
static void grad_counts(const export_case *e, const gate_grad_case *gc, int64_t Hx, int64_t count[GG_COUNT])
{
    const gate_case *c = &gc->c;
    const int64_t rows = c->B * c->T, H = c->H, heads = layout_state_heads(e), keep = c->window - 1;
    const int carried = gc->carried > 0;
    const int64_t k[GG_COUNT] = {
        rows * Hx * c->n, rows * Hx * c->n, rows * H * c->m, rows * H,
        c->decay != GATE_DECAY_NONE ? rows * H : 0,
        falcon_variant_has_gain(c->variant) ? rows * H * c->n : 0,
        heads * c->m * c->n, carried ? heads * c->n : 0, carried ? heads * keep * c->n : 0,
        carried ? heads * keep * c->m : 0,
    };
    memcpy(count, k, sizeof k);
}

static int grad_alloc(const int64_t count[GG_COUNT], gate_grad_result *r)
{
    memset(r, 0, sizeof *r);
    memcpy(r->count, count, sizeof r->count);
    for (int t = 0; t < GG_COUNT; t++) {
        r->cond[t] = 1;
        if (count[t] && !(r->x[t] = calloc((size_t)count[t], sizeof(double)))) return -1;
    }
    return 0;
}

/* A piece's gradients (steps from t0, state heads from h0; q/k with one
 * head per value head) into the whole call's. */
static void grad_place(const gate_case *c, const gate_grad_result *p, int64_t t0, int64_t h0, gate_grad_result *r)
{
    const int64_t H = c->H, n = c->n, m = c->m, keep = c->window - 1;
    const int64_t at[GG_COUNT] = {t0 * H * n, t0 * H * n, t0 * H * m, t0 * H, t0 * H, t0 * H * n,
                                  h0 * m * n, h0 * n, h0 * keep * n, h0 * keep * m};
    for (int t = 0; t < GG_COUNT; t++)
        if (p->count[t] && r->x[t]) memcpy(r->x[t] + at[t], p->x[t], sizeof(double) * (size_t)p->count[t]);
}

/* dq or dk of the value heads ([rows][H][n]) summed into the q/k heads'
 * ([rows][H_qk][n]): a shared head's gradient, and (on X_abs) its terms. */
static void grad_sum_heads(const export_case *e, const double *wide, double *out)
{
    const int64_t H = e->c.H, Hq = layout_qk_heads(e), rows = e->c.B * e->c.T, n = e->c.n;
    memset(out, 0, sizeof(double) * (size_t)(rows * Hq * n));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++) out[(r * Hq + qk_head_of(e, h)) * n + i] += wide[(r * H + h) * n + i];
}

/* The pieces of the call (each packed sequence, or the whole call) through
 * the per-head reference on q and k repeated (plain), into x and a (X_abs). */
static falcon_status grad_pieces(const export_case *e, const gate_grad_case *gc, const gate_data *plain,
                                 const gate_cotangents *ct, const falcon_state *init, gate_grad_result *x,
                                 gate_grad_result *a)
{
    const int64_t H = gc->c.H, m = gc->c.m, n = gc->c.n;
    const size_t es = plain->prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    falcon_status s = FALCON_OK;
    for (int i = 0; i < (e->seqs ? e->seqs : 1) && !s; i++) {
        gate_grad_case gi = *gc;
        gate_data di = *plain;
        gate_cotangents ci = *ct;
        falcon_state *part = NULL;
        int64_t t0 = 0;
        if (e->seqs) {
            t0 = plain->in64.cu_seqlens[i];
            s = packed_sequence(&gc->c, plain, init, i, &gi.c, &di, &part);
            ci.dO = (char *)ct->dO + (size_t)(t0 * H * m) * es, ci.dO64 = ct->dO64 + t0 * H * m;
            ci.dS = ct->dS + (int64_t)i * H * m * n;
        }
        gate_grad_result p, pa;
        if (!s) s = gate_grad_reference_abs(&gi, &di, &ci, e->seqs ? part : init, &p, &pa);
        falcon_state_free(part);
        if (s) break;
        grad_place(&gc->c, &p, t0, (int64_t)i * H, x);
        grad_place(&gc->c, &pa, t0, (int64_t)i * H, a);
        gate_grad_result_free(&p), gate_grad_result_free(&pa);
    }
    return s;
}

falcon_status layout_grad_reference(const void *ctx, const gate_grad_case *gc, const gate_data *d,
                                    const gate_cotangents *ct, const falcon_state *init, gate_grad_result *r)
{
    const export_case *e = ctx;
    gate_data plain = *d;
    double *q = e->qk_heads ? repeated(e, d->in64.q) : NULL, *k = e->qk_heads ? repeated(e, d->in64.k) : NULL;
    if (q && k) plain.in64.q = q, plain.in64.k = k, plain.in64.qk_heads = 0;
    int64_t wide[GG_COUNT], want[GG_COUNT];
    grad_counts(e, gc, gc->c.H, wide);
    grad_counts(e, gc, layout_qk_heads(e), want);
    gate_grad_result x, a;
    falcon_status s = (e->qk_heads && (!q || !k)) || grad_alloc(wide, &x) || grad_alloc(wide, &a) ? FALCON_E_NOMEM
                                                                                              : FALCON_OK;
    if (!s) s = grad_pieces(e, gc, &plain, ct, init, &x, &a);
    if (!s && (s = grad_alloc(want, r) ? FALCON_E_NOMEM : FALCON_OK) == FALCON_OK) {
        for (int t = 0; t < GG_COUNT; t++) {
            if (!want[t]) continue;
            double *abs_t = a.x[t];
            if ((t == GG_DQ || t == GG_DK) && e->qk_heads) { /* x into r, the terms into a's wide buffer's head */
                grad_sum_heads(e, x.x[t], r->x[t]);
                grad_sum_heads(e, a.x[t], x.x[t]);
                abs_t = x.x[t];
            } else {
                memcpy(r->x[t], x.x[t], sizeof(double) * (size_t)want[t]);
            }
            r->cond[t] = falcon_ref_grad_cond(r->x[t], abs_t, (size_t)want[t]);
            r->abs_norm[t] = gate_frobenius(abs_t, want[t]);
        }
    }
    if (s) gate_grad_result_free(r);
    gate_grad_result_free(&x), gate_grad_result_free(&a);
    free(q), free(k);
    return s;
}

/* ---- batch invariance ---- */

/* Where a member holds its group's sequence: batch row, first step. */
static void shared_place(const export_case *e, int64_t *b, int64_t *t0)
{
    *b = e->seqs ? 0 : e->inv_row, *t0 = 0;
    if (!e->seqs) return;
    int64_t len[GRADE_MAX_SEQS];
    grade_packed_lengths(e->seqs, e->c.T, len);
    for (int i = 0; i < e->inv_row; i++) *t0 += len[i];
}

/* One tensor's rows of width w (elements of es bytes) of the sequence src
 * ([inv_T][H][w]) into dst ([B][T][H][w]) at batch row b from step t0. */
static void put_rows(const export_case *e, char *dst, const char *src, int64_t w, size_t es, int64_t b, int64_t t0)
{
    const int64_t H = e->c.H, T = e->c.T;
    const size_t row = (size_t)(H * w) * es;
    for (int64_t t = 0; t < e->inv_T; t++) memcpy(dst + (size_t)(b * T + t0 + t) * row, src + (size_t)t * row, row);
}

int layout_share(const export_case *e, gate_data *d)
{
    if (!e->inv_group) return 0;
    gate_case base = e->c;
    base.B = 1, base.T = e->inv_T, base.seed = e->inv_seed;
    gate_data s;
    if (gate_data_make(&base, d->prec, &s)) return -1;
    int64_t b, t0;
    shared_place(e, &b, &t0);
    const size_t es = d->prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    const falcon_inputs *from[2] = {&s.in, &s.in64}, *to[2] = {&d->in, &d->in64};
    for (int i = 0; i < 2; i++) {
        const size_t z = i ? sizeof(double) : es;
        put_rows(e, (char *)to[i]->q, from[i]->q, e->c.n, z, b, t0);
        put_rows(e, (char *)to[i]->k, from[i]->k, e->c.n, z, b, t0);
        put_rows(e, (char *)to[i]->v, from[i]->v, e->c.m, z, b, t0);
        put_rows(e, (char *)to[i]->beta, from[i]->beta, 1, z, b, t0);
        if (to[i]->alpha) put_rows(e, (char *)to[i]->alpha, from[i]->alpha, 1, z, b, t0);
        if (to[i]->gain) put_rows(e, (char *)to[i]->gain, from[i]->gain, e->c.n, z, b, t0);
    }
    gate_data_free(&s);
    return 0;
}

void layout_invariance_json(const export_case *e, json_t *j)
{
    if (!e->inv_group) return;
    int64_t b, t0;
    shared_place(e, &b, &t0);
    char group[32];
    snprintf(group, sizeof group, "b%d", e->inv_group);
    json_t *inv = json_object();
    json_object_set_new(inv, "group", json_string(group));
    json_object_set_new(inv, "b", json_integer(b));
    json_object_set_new(inv, "t0", json_integer(t0));
    json_object_set_new(inv, "t1", json_integer(t0 + e->inv_T));
    json_object_set_new(inv, "state_row", json_integer(e->inv_row));
    json_object_set_new(j, "invariance", inv);
}
