/* The gradient gate's engine (grad-gate.h): cotangents, the carried state,
 * a kernel's gradients, the MPFR reference's with its absolute sweep, and
 * the errors. The reference is called head by head, directly, so that
 * nothing under test stands between the gate and it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grad-gate.h"
#include "falcon_ref.h"

static const char *const tensor_names[GG_COUNT] = {"dq", "dk", "dv", "dbeta", "dalpha",
                                                   "dgain", "dS0", "dprev_key", "dhist_k", "dhist_v"};

const char *gate_grad_name(int tensor)
{
    return tensor >= 0 && tensor < GG_COUNT ? tensor_names[tensor] : "unknown";
}

/* ---- cotangents ---- */

/* Uniform in (-1, 1), exact in the precision. */
static double cotangent(uint64_t *s, falcon_precision prec)
{
    const double x = (double)(gate_next_u64(s) >> 11) * 0x1.0p-53 * 2 - 1;
    return prec == FALCON_FP64 ? x : (double)(float)x;
}

int gate_cotangents_make(const gate_case *c, falcon_precision prec, gate_cotangents *ct)
{
    return gate_cotangents_make_heads(c, c->B * c->H, prec, ct);
}

int gate_cotangents_make_heads(const gate_case *c, int64_t heads, falcon_precision prec, gate_cotangents *ct)
{
    const int64_t nout = c->B * c->T * c->H * c->m, nS = heads * c->m * c->n;
    const size_t es = prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    ct->dO = malloc(es * (size_t)(nout + 1));
    ct->dO64 = malloc(sizeof(double) * (size_t)(nout + 1));
    ct->dS = malloc(sizeof(double) * (size_t)(nS + 1));
    if (!ct->dO || !ct->dO64 || !ct->dS) {
        gate_cotangents_free(ct);
        return -1;
    }
    uint64_t s = c->seed * 0xD1B54A32D192ED03ull + 0x5EED;
    for (int64_t i = 0; i < nout; i++) {
        ct->dO64[i] = cotangent(&s, prec);
        if (prec == FALCON_FP64) ((double *)ct->dO)[i] = ct->dO64[i];
        else ((float *)ct->dO)[i] = (float)ct->dO64[i];
    }
    for (int64_t i = 0; i < nS; i++) ct->dS[i] = cotangent(&s, prec);
    return 0;
}

void gate_cotangents_free(gate_cotangents *ct)
{
    free(ct->dO);
    free(ct->dO64);
    free(ct->dS);
    ct->dO = ct->dO64 = ct->dS = NULL;
}

/* ---- results ---- */

void gate_grad_result_free(gate_grad_result *r)
{
    for (int t = 0; t < GG_COUNT; t++) {
        free(r->x[t]);
        r->x[t] = NULL;
    }
}

/* The element count of each tensor the case has (0: absent). */
static void tensor_counts(const gate_grad_case *g, int64_t count[GG_COUNT])
{
    const gate_case *c = &g->c;
    const int64_t rows = c->B * c->T * c->H, heads = c->B * c->H, keep = c->window - 1;
    const int carried = g->carried > 0;
    const int64_t k[GG_COUNT] = {
        rows * c->n, rows * c->n, rows * c->m, rows,
        c->decay != GATE_DECAY_NONE ? rows : 0,
        falcon_variant_has_gain(c->variant) ? rows * c->n : 0,
        heads * c->m * c->n,
        carried ? heads * c->n : 0,
        carried ? heads * keep * c->n : 0,
        carried ? heads * keep * c->m : 0,
    };
    memcpy(count, k, sizeof k);
}

static int result_alloc(const gate_grad_case *g, gate_grad_result *r)
{
    memset(r, 0, sizeof *r);
    tensor_counts(g, r->count);
    for (int t = 0; t < GG_COUNT; t++) {
        r->cond[t] = 1;
        if (r->count[t] && !(r->x[t] = calloc((size_t)r->count[t], sizeof(double)))) {
            gate_grad_result_free(r);
            return -1;
        }
    }
    return 0;
}

/* ---- the carried state ---- */

falcon_status gate_grad_state(const gate_grad_case *g, const gate_data *d, falcon_state **state)
{
    *state = NULL;
    if (g->carried <= 0) return FALCON_OK;
    gate_case first = g->c;
    first.T = g->carried;
    first.seed = g->c.seed + 0x1000;
    gate_data fd;
    if (gate_data_make(&first, d->prec, &fd)) return FALCON_E_NOMEM;
    /* tf32/bf16: the reference runs their data in fp32 (it computes exactly) */
    const falcon_precision run = gate_operand_drop(d->prec) ? FALCON_FP32 : d->prec;
    falcon_config cfg = gate_config(&first, FALCON_FORM_RECURRENT, FALCON_BACKEND_MPFR, run);
    size_t es = d->prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    void *out = malloc(es * (size_t)(first.B * first.T * first.H * first.m + 1));
    falcon_status s = out ? falcon_state_create(first.B * first.H, first.n, first.m, first.window, state)
                          : FALCON_E_NOMEM;
    if (!s) s = falcon_run(&cfg, &fd.in, *state, out);
    if (s) {
        falcon_state_free(*state);
        *state = NULL;
    }
    free(out);
    gate_data_free(&fd);
    return s;
}

/* ---- a kernel's gradients ---- */

falcon_status gate_grad_run(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                            falcon_form form, falcon_backend backend, const falcon_state *state,
                            gate_grad_result *r)
{
    return gate_grad_run_with(g, d, ct, form, backend, state, falcon_backward, r);
}

falcon_status gate_grad_run_with(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                 falcon_form form, falcon_backend backend, const falcon_state *state,
                                 gate_backward_fn backward, gate_grad_result *r)
{
    if (result_alloc(g, r)) return FALCON_E_NOMEM;
    const size_t es = d->prec == FALCON_FP64 ? sizeof(double) : sizeof(float);
    void *typed[GG_DS0] = {NULL};
    falcon_status s = FALCON_OK;
    for (int t = 0; t < GG_DS0 && !s; t++)
        if (r->count[t] && !(typed[t] = malloc(es * (size_t)r->count[t]))) s = FALCON_E_NOMEM;
    const falcon_grads grads = {typed[GG_DQ], typed[GG_DK], typed[GG_DV], typed[GG_DBETA], typed[GG_DALPHA],
                                typed[GG_DGAIN], r->x[GG_DS0], r->x[GG_DPREV], r->x[GG_DHK], r->x[GG_DHV]};
    const falcon_config cfg = gate_config(&g->c, form, backend, d->prec);
    if (!s) s = backward(&cfg, &d->in, state, ct->dO, ct->dS, &grads);
    for (int t = 0; t < GG_DS0 && !s; t++)
        for (int64_t i = 0; i < r->count[t]; i++) r->x[t][i] = falcon_load_test(typed[t], d->prec, i);
    for (int t = 0; t < GG_DS0; t++) free(typed[t]);
    if (s) gate_grad_result_free(r);
    return s;
}

/* ---- the reference ---- */

/* One head's gradients, contiguous, in the reference's shapes. */
typedef struct head_grads {
    double *buf;
    falcon_ref_grads g;
} head_grads;

static int head_grads_alloc(const gate_case *c, head_grads *h)
{
    const int64_t T = c->T, n = c->n, m = c->m, keep = c->window - 1;
    const int64_t total = 3 * T * n + T * m + 2 * T + m * n + n + keep * (n + m);
    if (!(h->buf = calloc((size_t)total + 1, sizeof(double)))) return -1;
    double *p = h->buf;
    h->g.dq = p, p += T * n;
    h->g.dk = p, p += T * n;
    h->g.dgain = p, p += T * n;
    h->g.dv = p, p += T * m;
    h->g.dbeta = p, p += T;
    h->g.dalpha = p, p += T;
    h->g.dS0 = p, p += m * n;
    h->g.dprev_key = p, p += n;
    h->g.dhist_k = p, p += keep * n;
    h->g.dhist_v = p;
    return 0;
}

/* Head hh's rows [T][w] of a [B][T][H][w] tensor, from or to the contiguous one. */
static void rows_copy(const gate_case *c, int64_t hh, int64_t w, double *tensor, double *rows, int to_tensor)
{
    for (int64_t t = 0; t < c->T; t++) {
        double *at = tensor + ((hh / c->H * c->T + t) * c->H + hh % c->H) * w;
        if (to_tensor) memcpy(at, rows + t * w, sizeof(double) * (size_t)w);
        else memcpy(rows + t * w, at, sizeof(double) * (size_t)w);
    }
}

/* Put one head's gradients into the result's tensors. */
static void scatter_head(const gate_grad_case *g, int64_t hh, const falcon_ref_grads *h, int64_t hist_len,
                         gate_grad_result *r)
{
    const gate_case *c = &g->c;
    const int64_t n = c->n, m = c->m, keep = c->window - 1;
    const double *rows[GG_DS0] = {h->dq, h->dk, h->dv, h->dbeta, h->dalpha, h->dgain};
    const int64_t width[GG_DS0] = {n, n, m, 1, 1, n};
    for (int t = 0; t < GG_DS0; t++)
        if (r->count[t]) rows_copy(c, hh, width[t], r->x[t], (double *)rows[t], 1);
    memcpy(r->x[GG_DS0] + hh * m * n, h->dS0, sizeof(double) * (size_t)(m * n));
    if (r->count[GG_DPREV]) memcpy(r->x[GG_DPREV] + hh * n, h->dprev_key, sizeof(double) * (size_t)n);
    if (r->count[GG_DHK]) {
        memcpy(r->x[GG_DHK] + hh * keep * n, h->dhist_k, sizeof(double) * (size_t)(hist_len * n));
        memcpy(r->x[GG_DHV] + hh * keep * m, h->dhist_v, sizeof(double) * (size_t)(hist_len * m));
    }
}

/* Both sweeps of one head into r and r_abs. */
static falcon_status reference_head(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                    const falcon_state_view *view, int64_t hh, double *inbuf, double *dO,
                                    head_grads *hg, head_grads *ha, gate_grad_result *r,
                                    gate_grad_result *r_abs)
{
    const gate_case *c = &g->c;
    const falcon_ref_opts ro = {
        .variant = c->variant, .align = c->align, .phi = c->phi, .eps = gate_eps(c, d->prec),
        .window = c->window, .chunk = c->T > 0 ? c->T : 1, .bits = 256,
    };
    falcon_ref_head rh;
    falcon_ref_head_gather(&d->in64, FALCON_FP64, view, hh, inbuf, &rh);
    rows_copy(c, hh, c->m, ct->dO64, dO, 0);
    falcon_ref_grads want = hg->g, want_abs = ha->g;
    if (!rh.alpha) want.dalpha = want_abs.dalpha = NULL;
    if (!rh.gain) want.dgain = want_abs.dgain = NULL;
    if (!rh.prev_key) {
        memset(hg->g.dprev_key, 0, sizeof(double) * (size_t)c->n);
        memset(ha->g.dprev_key, 0, sizeof(double) * (size_t)c->n);
        want.dprev_key = want_abs.dprev_key = NULL;
    }
    const falcon_status s = falcon_ref_backward(&ro, &rh, dO, ct->dS + hh * c->m * c->n, &want, &want_abs);
    if (!s) {
        scatter_head(g, hh, &hg->g, rh.hist_len, r);
        scatter_head(g, hh, &ha->g, rh.hist_len, r_abs);
    }
    return s;
}

/* ||x||_F without overflow or underflow of the squares. */
double gate_frobenius(const double *x, int64_t count)
{
    double scale = 0, sum = 0;
    for (int64_t i = 0; i < count; i++)
        if (fabs(x[i]) > scale) scale = fabs(x[i]);
    if (scale == 0 || !isfinite(scale)) return scale;
    for (int64_t i = 0; i < count; i++) sum += (x[i] / scale) * (x[i] / scale);
    return scale * sqrt(sum);
}

falcon_status gate_grad_reference(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                  const falcon_state *state, gate_grad_result *r)
{
    gate_grad_result r_abs;
    const falcon_status s = gate_grad_reference_abs(g, d, ct, state, r, &r_abs);
    if (!s) gate_grad_result_free(&r_abs);
    return s;
}

falcon_status gate_grad_reference_abs(const gate_grad_case *g, const gate_data *d, const gate_cotangents *ct,
                                      const falcon_state *state, gate_grad_result *r, gate_grad_result *r_abs_out)
{
    const gate_case *c = &g->c;
    gate_grad_result r_abs;
    if (result_alloc(g, r)) return FALCON_E_NOMEM;
    if (result_alloc(g, &r_abs)) {
        gate_grad_result_free(r);
        return FALCON_E_NOMEM;
    }
    const falcon_state_view view = state ? falcon_state_get_view(state) : (falcon_state_view){0};
    double *inbuf = malloc(sizeof(double) * (falcon_ref_head_doubles(&d->in64) + 1));
    double *dO = malloc(sizeof(double) * (size_t)(c->T * c->m + 1));
    head_grads hg = {0}, ha = {0};
    falcon_status s = inbuf && dO && !head_grads_alloc(c, &hg) && !head_grads_alloc(c, &ha) ? FALCON_OK
                                                                                           : FALCON_E_NOMEM;
    for (int64_t hh = 0; hh < c->B * c->H && !s; hh++)
        s = reference_head(g, d, ct, state ? &view : NULL, hh, inbuf, dO, &hg, &ha, r, &r_abs);
    for (int t = 0; t < GG_COUNT && !s; t++) {
        r->cond[t] = falcon_ref_grad_cond(r->x[t], r_abs.x[t], (size_t)r->count[t]);
        r->abs_norm[t] = gate_frobenius(r_abs.x[t], r->count[t]);
    }
    free(inbuf);
    free(dO);
    free(hg.buf);
    free(ha.buf);
    if (s) {
        gate_grad_result_free(&r_abs);
        gate_grad_result_free(r);
    } else {
        *r_abs_out = r_abs;
    }
    return s;
}

/* ---- errors and thresholds ---- */

void gate_grad_compare(const gate_grad_result *r, const gate_grad_result *ref, falcon_precision prec,
                       double err_u[GG_COUNT])
{
    const double u = gate_unit_roundoff(prec);
    for (int t = 0; t < GG_COUNT; t++) {
        err_u[t] = 0;
        if (!r->count[t]) continue;
        if (isinf(ref->cond[t])) /* X_ref = 0 exactly, its terms not */
            err_u[t] = gate_frobenius(r->x[t], r->count[t]) / ref->abs_norm[t] / u;
        else
            err_u[t] = gate_relerr(r->x[t], ref->x[t], r->count[t]) / u;
    }
}

/* The bound K_g kappa_X (2 + sqrt(depth)) u, depth as the forward gate's
 * (gate_threshold, whose K is 6); K_g = 8 puts the largest error of the
 * full table over 8 seeds at a third of its threshold (gate/THRESHOLDS.md,
 * "Gradients"). */
#define GATE_GRAD_K 8.0
#define GATE_FORWARD_K 6.0

/* tf32/bf16 (the chunk form's operand formats), in units of u_op:
 * K_op (2 + sqrt(depth) u / u_op) kappa_X, the forward's operand-format
 * bound (gate_threshold) times the tensor's conditioning. Each term of a
 * gradient is a chain of products whose operands were rounded once each,
 * independently, so their relative errors add in quadrature along the chain
 * and across the terms as the sum itself grows; the fp32 accumulation is
 * the sqrt(depth) u term. gate/THRESHOLDS.md, "Gradients: tf32 and bf16". */
#define GATE_GRAD_K_OP 6.0
static double grad_threshold_operands(const gate_case *c, falcon_form form, falcon_precision prec, double cond)
{
    const double bound = gate_threshold(c, form, prec) / GATE_FORWARD_K; /* 2 + sqrt(depth) u / u_op */
    return GATE_GRAD_K_OP * bound * (cond > 1 && isfinite(cond) ? cond : 1);
}

double gate_grad_threshold(const gate_case *c, falcon_form form, falcon_precision prec, int tensor, double cond)
{
    (void)tensor;
    if (gate_operand_drop(prec)) return grad_threshold_operands(c, form, prec, cond);
    const double base = gate_threshold(c, form, prec) / GATE_FORWARD_K;
    /* an infinite kappa: the error is already relative to ||X_abs|| */
    return GATE_GRAD_K * base * (cond > 1 && isfinite(cond) ? cond : 1);
}
