/*
 * The CUDA backend, C side: what the library calls (falcon_cuda_run_view,
 * falcon_cuda_backward_view, falcon_cuda_available, falcon_cuda_describe),
 * the conversion of the carried state to fp32 and back (and of the
 * backward's cotangent dS_T and state gradients), and the plans (threads
 * per block, workspace layout) shared by the GPU and the CPU emulation. Compiled only when nvcc exists
 * (mk/cuda.mk); otherwise src/stubs/cuda.c stands in.
 *
 * Policy: the backend computes in fp32 with fp32 accumulation. An fp64 run
 * is refused with FALCON_E_UNAVAILABLE rather than silently computed in
 * fp32. Inputs are the caller's fp32 arrays, copied to the device as they
 * are; the state (double) is converted to fp32 here and the final memory
 * converted back. The window / previous-key bookkeeping of the state is
 * the library's after a successful run. Only the public API is used here:
 * the state arrives as a view, and errors return as a status and a message.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_api.h"

/* ---- the plan ---- */

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

typedef struct plan_item {
    int id;
    int64_t floats;
    int optional; /* dropped (not placed in global memory) when it does not fit on chip */
} plan_item;

int fc_plan(fc_problem *pb, int64_t smem_bytes, int threads, char *msg, size_t len)
{
    const int64_t n = pb->n, m = pb->m, W = pb->W;
    int nth = threads > 0 ? threads : (m * n >= 8192 ? 512 : 256);
    if (nth > FC_MAX_THREADS) nth = FC_MAX_THREADS;
    if (nth < 1) nth = 1;
    pb->nth = nth;
    memset(&pb->lay, 0, sizeof pb->lay);

    plan_item items[FC_NBUF];
    int count = 0;
    if (pb->form == FC_FORM_RECURRENT) {
        /* Column slices: enough (row, vector, slice) items for the block, at
         * least 8 columns per slice. Rows padded so that the slices of
         * consecutive rows fall in different shared-memory banks. */
        int G = 1;
        while (G < 32 && n >= 16 * G && (m + 1) * 2 * G < 4 * (int64_t)nth) G *= 2;
        pb->G = G;
        pb->lds = pb->ldv = round_up(n, 32) + G;
        pb->ldx = n;
        plan_item list[] = {
            {FC_BUF_S, m * pb->lds, 0},
            {FC_BUF_SC, 2 * (2 + 2 * W), 0},
            {FC_BUF_V, 2 * (W + 1) * pb->ldv, 0},
            {FC_BUF_ZS, pb->has_gain ? 2 * pb->ldv : 0, 0},
            {FC_BUF_Y, 2 * W * m, 0},
            {FC_BUF_PART, (m + 1) * (W + 1) * G, 0},
            {FC_BUF_E, W * m, 0},
        };
        count = (int)(sizeof list / sizeof list[0]);
        memcpy(items, list, sizeof list);
    } else {
        /* Odd row strides: a warp reading one column of many rows hits
         * distinct banks. */
        const int64_t L = pb->L, Gmax = L + W - 1, Pmax = L * W;
        pb->G = 1;
        pb->lds = pb->ldx = n | 1;
        pb->ldv = n;
        plan_item list[] = {
            {FC_BUF_TERMS, 2 * Pmax + L + 1, 0},
            {FC_BUF_S, m * pb->lds, 0},
            {FC_BUF_R, Pmax * m, 0},
            {FC_BUF_A, pb->regression ? Pmax * Pmax : 0, 0},
            {FC_BUF_F, (L + 1) * (L + 1), 0},
            {FC_BUF_QZ, L * Gmax, 0},
            {FC_BUF_KZ, pb->regression ? Gmax * Gmax : 0, 0},
            {FC_BUF_U, Gmax * m, 0},
            {FC_BUF_O, L * m, 0},
            {FC_BUF_QS, L * pb->ldx, 1},
            {FC_BUF_XS, Gmax * pb->ldx, 1},
            {FC_BUF_ZGS, pb->has_gain ? Gmax * pb->ldx : 0, 1},
            /* last: read and written once a block (and on a cut) */
            {FC_BUF_SCUT, pb->regression ? m * pb->lds + nth : 0, 0},
        };
        count = (int)(sizeof list / sizeof list[0]);
        memcpy(items, list, sizeof list);
    }

    /* Kernels index within a buffer with int. */
    for (int i = 0; i < count; i++)
        if (items[i].floats >= INT32_MAX / 2) {
            snprintf(msg, len,
                     "a per-head work buffer needs %lld floats (n = %lld, m = %lld, window = %lld, "
                     "steps per block = %lld): beyond the cuda backend's 2^30 limit",
                     (long long)items[i].floats, (long long)n, (long long)m, (long long)W,
                     (long long)pb->L);
            return FC_ERR_TOO_LARGE;
        }

    /* Greedy placement in priority order: on chip while it fits. */
    const int64_t budget = smem_bytes / (int64_t)sizeof(float);
    int64_t on = 0, off = 0;
    for (int i = 0; i < count; i++) {
        fc_buf *b = &pb->lay.buf[items[i].id];
        const int64_t size = round_up(items[i].floats, 4);
        if (size == 0) continue;
        if (on + size <= budget) {
            b->where = FC_SHARED;
            b->off = on;
            on += size;
        } else if (!items[i].optional) {
            b->where = FC_GLOBAL;
            b->off = off;
            off += size;
        }
    }
    pb->lay.smem_floats = on;
    pb->lay.glob_floats = off;
    return FC_OK;
}

/* ---- the library entry points ---- */

static pthread_once_t describe_once = PTHREAD_ONCE_INIT;
static char describe_buf[512];
static void describe_init(void) { fc_dev_describe(describe_buf, sizeof describe_buf); }

int falcon_cuda_available(void) { return fc_dev_usable(NULL, 0); }

const char *falcon_cuda_describe(void)
{
    pthread_once(&describe_once, describe_init);
    return describe_buf;
}

falcon_status falcon_cuda_run_view(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   char *why, size_t len)
{
    return falcon_cuda_run_with(cfg, in, state, memory, out, fc_dev_exec, why, len);
}

/* A message into why (as the library's errors read), and the status. */
__attribute__((format(printf, 4, 5)))
static falcon_status fail(falcon_status s, char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return s;
}

/* The backend computes in fp32 only (forward and backward). */
static falcon_status fp32_only(const falcon_config *cfg, char *why, size_t len)
{
    if (cfg->precision == FALCON_FP32) return FALCON_OK;
    return fail(FALCON_E_UNAVAILABLE, why, len,
                "backend cuda computes in fp32 only: precision %s is not supported "
                "(run fp32 on cuda, or fp64 on a CPU backend)",
                falcon_precision_name(cfg->precision));
}

/* A call's problem: shapes, options, the caller's fp32 inputs, and the
 * carried state converted to fp32 into a new buffer (returned; the caller
 * frees it) that also has room for `extra` floats of the caller's, at
 * *extra_at. NULL: out of host memory. */
static float *problem_make(const falcon_config *cfg, const falcon_inputs *in, const falcon_state_view *state,
                           int64_t extra, fc_problem *pb, float **extra_at)
{
    const int64_t heads = in->B * in->H, n = in->n, m = in->m, keep = state->keep;
    float *S0 = malloc(sizeof(float) * (size_t)(heads * m * n + heads * n + heads * keep * (n + m) + extra + 1));
    if (!S0) return NULL;
    float *pk = S0 + heads * m * n, *hk = pk + heads * n;
    float *hv = hk + heads * keep * n;
    *extra_at = hv + heads * keep * m;
    for (int64_t i = 0; i < heads * m * n; i++) S0[i] = (float)state->S[i];
    for (int64_t i = 0; i < heads * n; i++) pk[i] = (float)state->prev_key[i];
    for (int64_t i = 0; i < heads * keep * n; i++) hk[i] = (float)state->hist_k[i];
    for (int64_t i = 0; i < heads * keep * m; i++) hv[i] = (float)state->hist_v[i];

    memset(pb, 0, sizeof *pb);
    pb->B = in->B; pb->T = in->T; pb->H = in->H; pb->n = n; pb->m = m; pb->heads = heads;
    pb->W = cfg->window; pb->keep = keep; pb->Emax = keep + in->T;
    pb->form = cfg->form == FALCON_FORM_RECURRENT ? FC_FORM_RECURRENT : FC_FORM_BLOCKED;
    pb->L = cfg->form == FALCON_FORM_CHUNK ? falcon_chunk_block(cfg->chunk, cfg->window)
                                           : falcon_parallel_block(cfg->window);
    if (pb->L > in->T) pb->L = in->T;
    pb->regression = falcon_variant_is_regression(cfg->variant);
    pb->prefix = cfg->align == FALCON_ALIGN_PREFIX;
    pb->phi = (int)cfg->phi;
    pb->has_gain = in->gain != NULL;
    pb->has_alpha = in->alpha != NULL;
    pb->eps = (float)cfg->eps;
    pb->q = in->q; pb->k = in->k; pb->v = in->v; pb->beta = in->beta;
    pb->alpha = in->alpha; pb->gain = in->gain;
    pb->S0 = S0; pb->prev_key = pk; pb->has_prev = state->has_prev;
    pb->hist_k = hk; pb->hist_v = hv; pb->hist_len = state->hist_len;
    return S0;
}

static falcon_status exec_failed(int r, char *why, size_t len, const char *msg)
{
    return fail(r == FC_ERR_NOMEM ? FALCON_E_NOMEM : FALCON_E_UNAVAILABLE, why, len, "backend cuda: %s", msg);
}

falcon_status falcon_cuda_run_with(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   fc_executor exec, char *why, size_t len)
{
    falcon_status s = fp32_only(cfg, why, len);
    if (s || in->T == 0) return s;
    const int64_t mn_all = in->B * in->H * in->m * in->n;
    fc_problem pb;
    float *Sf;
    float *buf = problem_make(cfg, in, state, mn_all, &pb, &Sf);
    if (!buf) return fail(FALCON_E_NOMEM, why, len, "backend cuda: out of host memory");
    char msg[512] = "";
    const int r = exec(&pb, (float *)out, Sf, msg, sizeof msg);
    if (r == FC_OK)
        for (int64_t i = 0; i < mn_all; i++) memory[i] = (double)Sf[i];
    else
        s = exec_failed(r, why, len, msg);
    free(buf);
    return s;
}

/* ---- the backward pass (fc_backward.h) ---- */

int fc_bw_plan(fc_grad_problem *gp, int threads, char *msg, size_t len)
{
    fc_problem *pb = &gp->f;
    const int64_t n = pb->n, m = pb->m, wide = n > m ? n : m;
    int nth = threads > 0 ? threads : (int)round_up(wide, 32);
    if (nth > FC_MAX_THREADS) nth = FC_MAX_THREADS;
    if (nth < 1) nth = 1;
    pb->nth = nth;
    pb->backward = 1;
    gp->ws = fc_bw_ws_floats(n, m, pb->W, gp->c, gp->nseg);
    if (m * n >= INT32_MAX / 2 || pb->W * wide >= INT32_MAX / 2) {
        snprintf(msg, len, "the backward's memory of %lld x %lld (window %lld) is beyond the cuda backend's "
                 "2^30 limit", (long long)m, (long long)n, (long long)pb->W);
        return FC_ERR_TOO_LARGE;
    }
    return FC_OK;
}

/* The checkpoint spacing: asked (> 0), or about sqrt(T) (as the CPU's). */
static int64_t bw_spacing(int64_t T, int64_t asked)
{
    if (asked > 0) return asked < T ? asked : T;
    int64_t c = 1;
    while ((c + 1) * (c + 1) <= T) c++;
    return c;
}

/* The state's gradients (fp32 from the kernel) into the caller's doubles. */
static void widen(double *to, const float *from, int64_t count)
{
    for (int64_t i = 0; to && i < count; i++) to[i] = (double)from[i];
}

falcon_status falcon_cuda_backward_with(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, fc_bw_executor exec,
                                        char *why, size_t len)
{
    falcon_status s = fp32_only(cfg, why, len);
    if (s || in->T == 0) return s;
    const int64_t heads = in->B * in->H, n = in->n, m = in->m, mn = heads * m * n;
    const int64_t keep = state->keep, rows = in->B * in->T * in->H, zeros = dO ? 0 : rows * m;
    fc_grad_problem gp;
    float *x;
    float *buf = problem_make(cfg, in, state, zeros + 2 * mn + heads * (n + keep * (n + m)), &gp.f, &x);
    if (!buf) return fail(FALCON_E_NOMEM, why, len, "backend cuda: out of host memory");
    memset(x, 0, sizeof(float) * (size_t)zeros);
    gp.dO = dO ? (const float *)dO : x;
    float *dS = x + zeros;
    for (int64_t i = 0; i < mn; i++) dS[i] = dS_T ? (float)dS_T[i] : 0.0f;
    gp.dS = dS;
    gp.dS0 = dS + mn;
    gp.dprev = gp.dS0 + mn;
    gp.dhk = gp.dprev + heads * n;
    gp.dhv = gp.dhk + heads * keep * n;
    gp.dq = grads->dq; gp.dk = grads->dk; gp.dv = grads->dv; gp.dbeta = grads->dbeta;
    gp.dalpha = in->alpha ? grads->dalpha : NULL;
    gp.dgain = in->gain ? grads->dgain : NULL;
    gp.c = bw_spacing(in->T, checkpoint);
    gp.nseg = (in->T + gp.c - 1) / gp.c;
    gp.ws = 0;
    char msg[512] = "";
    const int r = exec(&gp, msg, sizeof msg);
    if (r == FC_OK) {
        widen(grads->dS0, gp.dS0, mn);
        widen(grads->dprev_key, gp.dprev, heads * n);
        widen(grads->dhist_k, gp.dhk, heads * keep * n);
        widen(grads->dhist_v, gp.dhv, heads * keep * m);
    } else {
        s = exec_failed(r, why, len, msg);
    }
    free(buf);
    return s;
}

falcon_status falcon_cuda_backward_view(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, char *why, size_t len)
{
    return falcon_cuda_backward_with(cfg, in, state, dO, dS_T, grads, checkpoint, fc_dev_bw_exec, why, len);
}
