/*
 * The gradients of a case set (export-grad.h, docs/cases.md "Gradients").
 *
 * The value scale of a form's copy (export.c) multiplies v, the initial
 * memory and the value history by s = 1, 2 or 4; the cotangents stay as
 * they are. O and S_T are linear in the values and the memory together, so
 * L is homogeneous of degree 1 in them: the gradients with respect to the
 * values and the memory (dv, dS0, dhist_v) are of degree 0 and unchanged,
 * every other gradient (dq, dk, dbeta, dalpha, dgain, dprev_key, dhist_k) is
 * of degree 1 and scales by s. A power of two scales a double exactly; the
 * conditioning kappa_X and the thresholds do not change.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export-grad.h"

static const char *const ref_files[GG_COUNT] = {
    "ref_dq.npy", "ref_dk.npy", "ref_dv.npy", "ref_dbeta.npy", "ref_dalpha.npy",
    "ref_dgain.npy", "ref_dS0.npy", "ref_dprev_key.npy", "ref_dhist_k.npy", "ref_dhist_v.npy"};
static const char *const result_files[GG_COUNT] = {
    "dq.npy", "dk.npy", "dv.npy", "dbeta.npy", "dalpha.npy",
    "dgain.npy", "dS0.npy", "dprev_key.npy", "dhist_k.npy", "dhist_v.npy"};
/* Degree 1 in the values and the memory (scaled by s), or 0 (above). */
static const int scales_with_values[GG_COUNT] = {1, 1, 0, 1, 1, 1, 0, 1, 1, 0};

const char *grad_ref_file(int t) { return t >= 0 && t < GG_COUNT ? ref_files[t] : "?"; }
const char *grad_result_file(int t) { return t >= 0 && t < GG_COUNT ? result_files[t] : "?"; }

int grad_tensor_of_file(const char *file)
{
    for (int t = 0; t < GG_COUNT; t++)
        if (!strcmp(file, result_files[t])) return t;
    return -1;
}

/* The cotangents times `scale` (a power of two), exact in the unit: fp32
 * and fp64 values in (-1, 1) are already, bf16 and fp16 are rounded (in
 * (-1, 1) they always fit). */
static void scale_cotangents(const gate_case *c, int64_t rows, grade_unit u, double scale, gate_cotangents *ct)
{
    const int64_t nout = c->B * c->T * c->H * c->m, nS = rows * c->H * c->m * c->n;
    for (int64_t i = 0; i < nout + nS; i++) {
        double *x = i < nout ? &ct->dO64[i] : &ct->dS[i - nout], r = 0;
        grade_round(scale * *x, u, &r);
        *x = r;
        if (i < nout && u == GRADE_FP64) ((double *)ct->dO)[i] = r;
        else if (i < nout) ((float *)ct->dO)[i] = (float)r;
    }
}

/* Whether every gradient, times 16 (the largest value scale 4, and room for
 * a kernel's rounding), is finite in the unit. */
static int grads_fit(const gate_grad_result *r, grade_unit u)
{
    for (int t = 0; t < GG_COUNT; t++)
        for (int64_t i = 0; i < r->count[t]; i++) {
            double y;
            if (grade_round(16 * r->x[t][i], u, &y)) return 0;
        }
    return 1;
}

/* The power of two that brings the largest gradient into the unit's range:
 * the exact gradients of l2norm on subnormal keys exceed fp32's (1/|k|). */
static double fitting_scale(const gate_grad_result *r, grade_unit u)
{
    double big = 0, y;
    for (int t = 0; t < GG_COUNT; t++)
        for (int64_t i = 0; i < r->count[t]; i++) big = fmax(big, fabs(r->x[t][i]));
    int k = 0;
    while (k < 1000 && grade_round(16 * ldexp(big, -k), u, &y)) k++;
    return ldexp(1.0, -k);
}

falcon_status grad_export_make(const gate_case *c, int carried, const gate_data *d, const falcon_state *init,
                               grade_unit u, const grad_layout *layout, grad_export *g)
{
    memset(g, 0, sizeof *g);
    g->rows = layout ? layout->rows : c->B;
    g->qk_heads = layout ? layout->qk_heads : c->H;
    g->threshold_T = layout ? layout->threshold_T : c->T;
    if (gate_cotangents_make_heads(c, g->rows * c->H, d->prec, &g->ct)) return FALCON_E_NOMEM;
    g->cot_scale = 1;
    scale_cotangents(c, g->rows, u, 1, &g->ct);
    const gate_grad_case gc = {*c, carried ? 1 : 0}; /* carried: the state's own gradients exist */
#define REFERENCE()                                                                          \
    (layout ? layout->reference(layout->ctx, &gc, d, &g->ct, init, &g->ref)                    \
            : gate_grad_reference(&gc, d, &g->ct, init, &g->ref))
    falcon_status s = REFERENCE();
    if (!s && !grads_fit(&g->ref, u)) { /* scaled down, and the reference again on the cotangents as they are */
        g->cot_scale = fitting_scale(&g->ref, u);
        gate_grad_result_free(&g->ref);
        scale_cotangents(c, g->rows, u, g->cot_scale, &g->ct);
        s = REFERENCE();
    }
#undef REFERENCE
    if (s) gate_cotangents_free(&g->ct);
    return s;
}

void grad_export_free(grad_export *g)
{
    gate_cotangents_free(&g->ct);
    gate_grad_result_free(&g->ref);
}

/* The shape of tensor t in the falcon layout; the number of dimensions.
 * The state's gradients have g's rows (a packed case's sequences). */
static int tensor_shape(const gate_case *c, const grad_export *g, int t, int64_t shape[4])
{
    const int64_t T = c->T, H = c->H, n = c->n, m = c->m, keep = c->window - 1, R = g->rows;
    const int64_t B = t >= GG_DS0 ? R : c->B;
    switch (t) {
    case GG_DQ: case GG_DK: shape[0] = B, shape[1] = T, shape[2] = g->qk_heads, shape[3] = n; return 4;
    case GG_DGAIN: shape[0] = B, shape[1] = T, shape[2] = H, shape[3] = n; return 4;
    case GG_DV: shape[0] = B, shape[1] = T, shape[2] = H, shape[3] = m; return 4;
    case GG_DBETA: case GG_DALPHA: shape[0] = B, shape[1] = T, shape[2] = H; return 3;
    case GG_DS0: shape[0] = B, shape[1] = H, shape[2] = m, shape[3] = n; return 4;
    case GG_DPREV: shape[0] = B, shape[1] = H, shape[2] = n; return 3;
    case GG_DHK: shape[0] = B, shape[1] = H, shape[2] = keep, shape[3] = n; return 4;
    default: shape[0] = B, shape[1] = H, shape[2] = keep, shape[3] = m; return 4;
    }
}

static json_t *shape_json(int ndim, const int64_t *shape)
{
    json_t *a = json_array();
    for (int i = 0; i < ndim; i++) json_array_append_new(a, json_integer(shape[i]));
    return a;
}

/* dir/name through the sink: count values x times s, in dt (F32: exact). */
static int put_npy(set_sink *sink, const char *dir, const char *name, falcon_dtype dt, int ndim,
                   const int64_t *shape, const double *x, double s)
{
    char rel[4200];
    snprintf(rel, sizeof rel, "%s/%s", dir, name);
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) count *= shape[i];
    const size_t es = dt == FALCON_DTYPE_F32 ? sizeof(float) : sizeof(double);
    void *buf = malloc(es * (size_t)(count + 1));
    if (!buf) return cli_error("'%s': out of memory", rel);
    for (int64_t i = 0; i < count; i++)
        if (dt == FALCON_DTYPE_F32) ((float *)buf)[i] = (float)(s * x[i]);
        else ((double *)buf)[i] = s * x[i];
    falcon_array a = {dt, ndim, {0}, count, buf};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    const int rc = sink_npy(sink, rel, &a);
    free(buf);
    return rc;
}

/* One gradient's entry of case.json: its files, shape, threshold and how
 * the threshold was formed (gate_grad_threshold, the gradient gate's). */
static json_t *tensor_json(const gate_case *c, falcon_form form, falcon_precision fp, int t, const grad_export *g,
                           double s)
{
    int64_t shape[4];
    const int nd = tensor_shape(c, g, t, shape);
    const double kappa = g->ref.cond[t];
    gate_case tc = *c; /* the thresholds count the longest sequence's steps */
    tc.T = g->threshold_T;
    const double base = gate_grad_threshold(&tc, form, fp, t, 1), thr = gate_grad_threshold(&tc, form, fp, t, kappa);
    json_t *e = json_object();
    json_object_set_new(e, "reference", json_string(ref_files[t]));
    json_object_set_new(e, "result", json_string(result_files[t]));
    json_object_set_new(e, "shape", shape_json(nd, shape));
    json_object_set_new(e, "threshold_u", json_real(thr));
    json_object_set_new(e, "kappa", isfinite(kappa) ? json_real(kappa) : json_null());
    json_object_set_new(e, "base_u", json_real(base));
    json_object_set_new(e, "abs_norm", json_real(s * g->ref.abs_norm[t]));
    json_object_set_new(e, "formed",
                        json_string(isfinite(kappa)
                                        ? "base_u * max(kappa, 1): K_g (2 + sqrt(depth)) kappa_X u, K_g = 8 "
                                          "(gate/THRESHOLDS.md, Gradients)"
                                        : "base_u: the reference is exactly 0 but its terms are not (kappa "
                                          "infinite): the error is ||X|| / abs_norm, relative to the terms that "
                                          "cancelled"));
    return e;
}

int grad_export_write(set_sink *sink, const char *dir, const gate_case *c, falcon_form form, grade_unit u,
                      double vs, const grad_export *g, json_t *j)
{
    const falcon_dtype dt = u == GRADE_FP64 ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
    const falcon_precision fp = u == GRADE_FP64 ? FALCON_FP64 : FALCON_FP32;
    const int64_t sh_m[4] = {c->B, c->T, c->H, c->m}, sh_S[4] = {g->rows, c->H, c->m, c->n};
    int rc = put_npy(sink, dir, "dO.npy", dt, 4, sh_m, g->ct.dO64, 1) ||
             put_npy(sink, dir, "dS_T.npy", FALCON_DTYPE_F64, 4, sh_S, g->ct.dS, 1);
    json_t *grads = json_object();
    for (int t = 0; t < GG_COUNT && !rc; t++) {
        if (!g->ref.count[t]) continue;
        int64_t shape[4];
        const int nd = tensor_shape(c, g, t, shape);
        const double s = scales_with_values[t] ? vs : 1;
        rc = put_npy(sink, dir, ref_files[t], FALCON_DTYPE_F64, nd, shape, g->ref.x[t], s);
        if (!rc) json_object_set_new(grads, gate_grad_name(t), tensor_json(c, form, fp, t, g, s));
    }
    json_t *cot = json_object();
    json_object_set_new(cot, "dO", json_string("dO.npy"));
    json_object_set_new(cot, "dS_T", json_string("dS_T.npy"));
    json_object_set_new(cot, "scale", json_real(g->cot_scale));
    json_object_set_new(j, "cotangents", cot);
    json_object_set_new(j, "gradients", grads);
    return rc ? 2 : 0;
}
