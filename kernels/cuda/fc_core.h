/*
 * The CUDA backend's kernel code, written once in plain C and compiled twice:
 * by nvcc as device code (kernels/cuda/cuda_kernels.cu) and by the C compiler
 * as a sequential emulation (verify/cuda/cuda_emulate.c) that the CPU tests
 * run, so that every index, bound and formula below is exercised without a
 * GPU.
 *
 * Execution model. Each head (one sequence) is one thread block of `nth`
 * threads. A head's code is a sequence of PHASES separated by block barriers:
 *     FC_PHASE  ...body using tid in [0, nth)...  FC_PHASE_END
 * On the GPU the body runs once per thread and FC_PHASE_END is
 * __syncthreads(); in the emulation the body runs for tid = 0..nth-1 in turn
 * (or nth-1..0: a phase whose result depends on that order has a race).
 * Everything outside phases is uniform (the same value in every thread).
 * No state lives in registers across a barrier; shared data sits in the
 * head's workspace buffers (fc_layout), each of which is placed in shared
 * memory when it fits the device's budget and in a per-head slice of global
 * scratch otherwise (generic pointers make both look the same).
 *
 * Pipeline for one call (all fp32, fp32 accumulation):
 *  1. fc_prep_example, one thread per (head, example): phi of the example's
 *     key (carried history first, then the sequence's own; which step
 *     reveals which example is falcon_math.h's bookkeeping), z = g * x for
 *     Falcon-2/2A, and x.z; if x.z is out of range, x is stored divided by
 *     its scale s (falcon_key_scale: x = s x') and z', x'.z' taken again.
 *  2. fc_prep_step, one thread per (head, step): phi(q_t) and the scaled
 *     normaliser c_t = eta_t sigma_t (falcon_eta_scaled, the window's x'.z'
 *     summed oldest first), with sigma_t the window's largest scale.
 *  3. fc_recurrent_head or fc_blocked_head, one block per head (the
 *     backward: fc_bw_head, fc_backward.h).
 * The examples of a head are one contiguous array (carried, then own), so
 * step t's window E_t is the row range [window_first(e_t), e_t].
 */
#ifndef FALCON_CUDA_CORE_H
#define FALCON_CUDA_CORE_H

#include <stdint.h>
#include "../common/falcon_math.h"

#ifdef __CUDACC__
#define FC_DEV static __device__ __forceinline__
#define FC_PHASE { const int tid = (int)threadIdx.x;
#define FC_PHASE_END } __syncthreads();
#else
#define FC_DEV static inline
#define FC_PHASE                                                   \
    for (int fc_i_ = 0; fc_i_ < nth; fc_i_++) {                    \
        const int tid = pb->emu_reverse ? nth - 1 - fc_i_ : fc_i_;
#define FC_PHASE_END }
#endif

#define FC_MAX_THREADS 512

/* Workspace buffers of one head (sizes in floats; see fc_plan). */
enum {
    /* recurrent form */
    FC_BUF_S,    /* memory S [m][lds] */
    FC_BUF_V,    /* the step's vectors, two steps (double buffer): window keys */
                 /* x_first..x_e, then phi(q_t) [2][W+1][ldv] */
    FC_BUF_ZS,   /* Falcon-2/2A: the step's write direction z = g * x [2][ldv] */
    FC_BUF_Y,    /* the window's targets y_first..y_e [2][W][m] */
    FC_BUF_SC,   /* the step's alpha, c = eta sigma, then per window example */
                 /* its scale s_i and c rho_i [2][2 + 2W] */
    FC_BUF_PART, /* partial dot products [(m+1)][W+1][G] */
    FC_BUF_E,    /* scaled errors eta * e_i [W][m] */
    /* chunk / parallel forms (FC_BUF_S as above) */
    FC_BUF_TERMS, /* ints: term_l [Pmax], term_j [Pmax], first [L+1] */
    FC_BUF_F,     /* decay factors F[i][j] = alpha_{j+1}..alpha_i [L+1][L+1] */
    FC_BUF_KZ,    /* x_l . z_l' [Gmax][Gmax] (regression) */
    FC_BUF_QZ,    /* phi(q_j) . z_l [L][Gmax] */
    FC_BUF_U,     /* x_l . S0_c [Gmax][m], then the gathered pseudo-values Rg */
    FC_BUF_O,     /* phi(q_j) . S0_c [L][m] */
    FC_BUF_R,     /* pseudo-values [Pmax][m] */
    FC_BUF_A,     /* the strictly lower system matrix [Pmax][Pmax] (regression) */
    FC_BUF_XS,    /* optional on-chip copies of the block's keys, write */
    FC_BUF_ZGS,   /* directions and queries [Gmax|L][ldx]; read from the */
    FC_BUF_QS,    /* global feature arrays when they do not fit */
    FC_BUF_SCUT,  /* regression: S at the block's start [m][lds], then the */
                  /* threads' largest magnitudes (bits) [nth] (fc_blocked_head) */
    FC_NBUF
};
enum { FC_NOWHERE = 0, FC_SHARED = 1, FC_GLOBAL = 2 };
enum { FC_FORM_RECURRENT = 0, FC_FORM_BLOCKED = 1 };

typedef struct fc_buf {
    int64_t off; /* floats from the start of its region */
    int where;   /* FC_NOWHERE, FC_SHARED, FC_GLOBAL */
} fc_buf;

typedef struct fc_layout {
    fc_buf buf[FC_NBUF];
    int64_t smem_floats; /* dynamic shared memory per block */
    int64_t glob_floats; /* global scratch per head */
} fc_layout;

typedef struct fc_problem {
    /* shapes and options */
    int64_t B, T, H, n, m, heads;
    int64_t W, keep; /* window; history capacity W - 1 */
    int64_t Emax;    /* example rows per head: keep + T */
    int64_t L;       /* steps per block of the chunk / parallel forms */
    int form;        /* FC_FORM_RECURRENT, FC_FORM_BLOCKED */
    int regression, prefix, phi, has_gain, has_alpha;
    float eps;
    int nth;                 /* threads per block */
    int G;                   /* recurrent: column slices per dot product */
    int64_t lds, ldv, ldx;   /* leading dimensions of on-chip S, V, staged rows */
    /* inputs, [B][T][H][D] */
    const float *q, *k, *v, *beta, *alpha, *gain; /* alpha, gain may be NULL */
    /* carried state */
    const float *S0;       /* [heads][m][n] */
    const float *prev_key; /* [heads][n] */
    const uint8_t *has_prev;
    const float *hist_k, *hist_v; /* [heads][keep][n|m] */
    const int64_t *hist_len;
    /* features written by the prep passes */
    float *X, *Z; /* [heads][Emax][n]; Z only for Falcon-2/2A */
    float *xz;    /* [heads][Emax][3]: x'.z', the scale s of x = s x' and the */
                  /* scale tau of Falcon-2/2A's z = s tau z'' (falcon_math.h) */
    float *Qf;    /* [heads][T][n] */
    float *eta;   /* [heads][T][2]: c = eta sigma (backward: nu) and sigma (falcon_math.h) */
    /* results */
    float *out; /* [B][T][H][m] */
    float *S;   /* [heads][m][n] */
    /* workspace */
    fc_layout lay;
    float *scratch; /* lay.glob_floats per head of the current wave */
    int64_t head0;  /* first head of the current wave */
    int emu_reverse; /* emulation only: run each phase's threads last to first */
    int backward;    /* fc_prep_step stores nu = c / beta for the backward (fc_backward.h) */
} fc_problem;

/* ---- per-head helpers ---- */

FC_DEV float *fc_buf_ptr(const fc_problem *pb, int id, float *smem, int64_t slot)
{
    const fc_buf *b = &pb->lay.buf[id];
    if (b->where == FC_SHARED) return smem + b->off;
    if (b->where == FC_GLOBAL) return pb->scratch + slot * pb->lay.glob_floats + b->off;
    return (float *)0;
}

/* Row of step t of head hd in a [B][T][H][D] tensor (multiply by D). */
FC_DEV int64_t fc_row(const fc_problem *pb, int64_t hd, int64_t t)
{
    const int64_t b = hd / pb->H, h = hd % pb->H;
    return (b * pb->T + t) * pb->H + h;
}

FC_DEV falcon_examples fc_head_examples(const fc_problem *pb, int64_t hd)
{
    return falcon_examples_make(pb->hist_len[hd], pb->prefix, pb->has_prev[hd] != 0, pb->W);
}

/* Raw key and value of example e of head hd. */
FC_DEV const float *fc_key_row(const fc_problem *pb, int64_t hd, const falcon_examples *ex, int64_t e)
{
    if (e < ex->carried) return pb->hist_k + (hd * pb->keep + e) * pb->n;
    const int64_t t = falcon_step_of_example(ex, e);
    if (!pb->prefix) return pb->k + fc_row(pb, hd, t) * pb->n;
    return t == 0 ? pb->prev_key + hd * pb->n : pb->k + fc_row(pb, hd, t - 1) * pb->n;
}

FC_DEV const float *fc_value_row(const fc_problem *pb, int64_t hd, const falcon_examples *ex, int64_t e)
{
    if (e < ex->carried) return pb->hist_v + (hd * pb->keep + e) * pb->m;
    return pb->v + fc_row(pb, hd, falcon_step_of_example(ex, e)) * pb->m;
}

/* ---- prep passes (one thread per item) ---- */

/* example e of head hd */
FC_DEV void fc_prep_example(const fc_problem *pb, int64_t hd, int64_t e)
{
    const int64_t item = hd * pb->Emax + e, n = pb->n;
    const falcon_examples ex = fc_head_examples(pb, hd);
    if (e >= falcon_examples_after(&ex, pb->T)) return;
    float *x = pb->X + item * n;
    falcon_featurize_f32(pb->phi, fc_key_row(pb, hd, &ex, e), x, n);
    float s = 0, sc = 1, tau = 1, tau2; /* Falcon-2/2A: tau, z's scale (falcon_gain_direction, then z's own) */
    for (int pass = 0; pass < 2; pass++) {
        s = 0;
        if (pb->has_gain) { /* W = 1: no carried examples, the step is this call's */
            const float *g = pb->gain + fc_row(pb, hd, falcon_step_of_example(&ex, e)) * n;
            float *z = pb->Z + item * n;
            tau = falcon_gain_direction_f32(g, x, z, n); /* z = g x / tau */
            for (int64_t i = 0; i < n; i++) s += x[i] * z[i];
        } else {
            for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
        }
        /* x.z out of range: store x scaled, x = sc x', and take it again */
        if (pass > 0 || falcon_xz_in_range_f32(s) || (sc = falcon_key_scale_f32(x, n)) == 1) break;
    }
    /* Falcon-2/2A: z' scaled on its own too if x'.z' still is out of range */
    if (pb->has_gain && !falcon_xz_in_range_f32(s) && (tau2 = falcon_key_scale_f32(pb->Z + item * n, n)) != 1) {
        tau *= tau2;
        const float *z = pb->Z + item * n;
        s = 0;
        for (int64_t i = 0; i < n; i++) s += x[i] * z[i];
    }
    pb->xz[3 * item] = s;
    pb->xz[3 * item + 1] = sc;
    pb->xz[3 * item + 2] = tau;
}

/* step t of head hd; after fc_prep_example. */
FC_DEV void fc_prep_step(const fc_problem *pb, int64_t hd, int64_t t)
{
    const int64_t item = hd * pb->T + t, n = pb->n;
    const int64_t row = fc_row(pb, hd, t);
    falcon_featurize_f32(pb->phi, pb->q + row * n, pb->Qf + item * n, n);
    const falcon_examples ex = fc_head_examples(pb, hd);
    const int64_t e = falcon_example_of_step(&ex, t);
    float eta = 0, sigma = 1;
    if (e >= 0) {
        const float *xz = pb->xz + 3 * hd * pb->Emax;
        const int64_t lf = falcon_window_first(&ex, e);
        float sum = 0;
        sigma = xz[3 * lf + 1];
        for (int64_t l = lf + 1; l <= e; l++)
            if (xz[3 * l + 1] > sigma) sigma = xz[3 * l + 1];
        for (int64_t l = lf; l <= e; l++) {
            const float rho = xz[3 * l + 1] / sigma;
            sum += rho * rho * xz[3 * l];
        }
        eta = pb->backward ? falcon_nu_scaled_f32(pb->eps, sigma, xz[3 * e + 2], sum)
                           : falcon_eta_scaled_f32(pb->beta[row], pb->eps, sigma, xz[3 * e + 2], sum);
    }
    pb->eta[2 * item] = eta;
    pb->eta[2 * item + 1] = sigma;
}

/* ---- load / store the memory of one head ---- */

#define FC_LOAD_S(S, lds)                                                   \
    FC_PHASE                                                                \
    for (int i = tid; i < m * n; i += nth) S[(i / n) * (lds) + i % n] = S0[i]; \
    FC_PHASE_END

#define FC_STORE_S(S, lds)                                                  \
    FC_PHASE                                                                \
    for (int i = tid; i < m * n; i += nth) Sout[i] = S[(i / n) * (lds) + i % n]; \
    FC_PHASE_END

/* ---- the recurrent form ----
 * Per step, as kernels/framework/recurrent.inc.c: P = S_{t-1} [x'_1..x'_k, q]
 * (partial dots over G column slices, then summed), e_i = c rho_i (y_i -
 * a s_i P_i) (inner product: c rho_i y_i), o = a P_q + sum_i (z'_i . q) e_i,
 * then S_t = a S_{t-1} + sum_i e_i z'_i^T in one pass (scales: falcon_math.h). Three barriers per step:
 * the next step's vectors, targets, alpha and eta are fetched from global
 * memory into the other half of double buffers during the update pass, so
 * no phase waits on global memory except for its own output. */

/* Step t's window: k examples first..first+k-1 (k = 0: no example). */
FC_DEV int fc_rec_window(const falcon_examples *ex, int64_t t, int64_t *first)
{
    const int64_t e = falcon_example_of_step(ex, t);
    *first = e >= 0 ? falcon_window_first(ex, e) : 0;
    return e >= 0 ? (int)(e - *first + 1) : 0;
}

/* Thread tid's share of fetching step tn's data into buffer half tn & 1. */
FC_DEV void fc_rec_fetch(const fc_problem *pb, int64_t hd, const falcon_examples *ex, int64_t tn,
                         float *V, float *Zs, float *Y, float *SC, int tid, int nth)
{
    const int n = (int)pb->n, m = (int)pb->m, ldv = (int)pb->ldv, W = (int)pb->W;
    const int h = (int)(tn & 1);
    int64_t first;
    const int k = fc_rec_window(ex, tn, &first);
    const float *X = pb->X + (hd * pb->Emax + first) * n;
    const float *q = pb->Qf + (hd * pb->T + tn) * n;
    float *Vb = V + h * (W + 1) * ldv, *Yb = Y + h * W * m;
    for (int i = tid; i < (k + 1) * n; i += nth) {
        const int r = i / n, c = i % n;
        Vb[r * ldv + c] = r < k ? X[r * n + c] : q[c];
    }
    if (pb->has_gain && k > 0)
        for (int c = tid; c < n; c += nth) Zs[h * ldv + c] = pb->Z[(hd * pb->Emax + first) * n + c];
    for (int i = tid; i < k * m; i += nth) Yb[i] = fc_value_row(pb, hd, ex, first + i / m)[i % m];
    float *SCb = SC + h * (2 + 2 * W);
    const float c = pb->eta[2 * (hd * pb->T + tn)], sigma = pb->eta[2 * (hd * pb->T + tn) + 1];
    if (tid == 0) {
        SCb[0] = pb->has_alpha ? pb->alpha[fc_row(pb, hd, tn)] : 1.0f;
        SCb[1] = c;
    }
    for (int i = tid; i < k; i += nth) {
        const float s = pb->xz[3 * (hd * pb->Emax + first + i) + 1];
        SCb[2 + i] = s;
        SCb[2 + W + i] = c * (s / sigma);
    }
}

FC_DEV void fc_recurrent_head(const fc_problem *pb, int64_t hd, int64_t slot, float *smem, int nth)
{
    const int n = (int)pb->n, m = (int)pb->m, G = pb->G, W = (int)pb->W;
    const int lds = (int)pb->lds, ldv = (int)pb->ldv;
    const int64_t T = pb->T;
    float *S = fc_buf_ptr(pb, FC_BUF_S, smem, slot);
    float *V = fc_buf_ptr(pb, FC_BUF_V, smem, slot);
    float *Zs = pb->has_gain ? fc_buf_ptr(pb, FC_BUF_ZS, smem, slot) : V;
    float *Y = fc_buf_ptr(pb, FC_BUF_Y, smem, slot);
    float *SC = fc_buf_ptr(pb, FC_BUF_SC, smem, slot);
    float *part = fc_buf_ptr(pb, FC_BUF_PART, smem, slot);
    float *E = fc_buf_ptr(pb, FC_BUF_E, smem, slot);
    const float *S0 = pb->S0 + hd * (int64_t)m * n;
    float *Sout = pb->S + hd * (int64_t)m * n;
    const falcon_examples ex = fc_head_examples(pb, hd);

    FC_PHASE
    for (int i = tid; i < m * n; i += nth) S[(i / n) * lds + i % n] = S0[i];
    fc_rec_fetch(pb, hd, &ex, 0, V, Zs, Y, SC, tid, nth);
    FC_PHASE_END
    for (int64_t t = 0; t < T; t++) {
        const int h = (int)(t & 1);
        int64_t first;
        const int k = fc_rec_window(&ex, t, &first), kp1 = k + 1;
        const float *SCb = SC + h * (2 + 2 * W);
        const float a = SCb[0];
        const float *Vb = V + h * (W + 1) * ldv, *Yb = Y + h * W * m;
        const float *Zb = pb->has_gain ? Zs + h * ldv : Vb; /* z_i = row i of Zb (gain: k = 1) */
        float *out = pb->out + fc_row(pb, hd, t) * m;

        /* partial dots: rows r < m are S_r . v_i; row m holds z_i . q */
        FC_PHASE
        for (int it = tid; it < (m + 1) * kp1 * G; it += nth) {
            const int cs = it % G, rest = it / G, i = rest % kp1, r = rest / kp1;
            if (r == m && i == k) continue;
            const float *u = r < m ? S + r * lds : Vb + k * ldv;
            const float *w = r < m ? Vb + i * ldv : Zb + i * ldv;
            float s = 0;
            for (int c = cs; c < n; c += G) s += u[c] * w[c];
            part[it] = s;
        }
        FC_PHASE_END

        /* errors and the read, one row of S per thread */
        FC_PHASE
        for (int r = tid; r < m; r += nth) {
            const float *pr = part + r * kp1 * G, *pz = part + m * kp1 * G;
            float pq = 0;
            for (int cs = 0; cs < G; cs++) pq += pr[k * G + cs];
            float acc = a * pq;
            for (int i = 0; i < k; i++) {
                float p = 0, zq = 0;
                for (int cs = 0; cs < G; cs++) p += pr[i * G + cs];
                for (int cs = 0; cs < G; cs++) zq += pz[i * G + cs];
                const float y = Yb[i * m + r];
                const float err = SCb[2 + W + i] * (pb->regression ? y - a * (SCb[2 + i] * p) : y);
                E[i * m + r] = err;
                acc += zq * err;
            }
            out[r] = acc;
        }
        FC_PHASE_END

        /* S = a S + sum_i e_i z_i^T; the next step's data into the other half */
        FC_PHASE
        for (int it = tid; it < m * n; it += nth) {
            const int r = it / n, c = it % n;
            float s = S[r * lds + c];
            if (a != 1.0f) s *= a;
            for (int i = 0; i < k; i++) s += E[i * m + r] * Zb[i * ldv + c];
            S[r * lds + c] = s;
        }
        if (t + 1 < T) fc_rec_fetch(pb, hd, &ex, t + 1, V, Zs, Y, SC, tid, nth);
        FC_PHASE_END
    }
    FC_STORE_S(S, lds)
}

#include "fc_blocked.h"
#include "fc_backward.h"

#endif
