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
 *  3. fc_recurrent_head or fc_blocked_head, one block per head.
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
    float *eta;   /* [heads][T][2]: c = eta sigma and sigma (falcon_math.h) */
    /* results */
    float *out; /* [B][T][H][m] */
    float *S;   /* [heads][m][n] */
    /* workspace */
    fc_layout lay;
    float *scratch; /* lay.glob_floats per head of the current wave */
    int64_t head0;  /* first head of the current wave */
    int emu_reverse; /* emulation only: run each phase's threads last to first */
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
        eta = falcon_eta_scaled_f32(pb->beta[row], pb->eps, sigma, xz[3 * e + 2], sum);
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

/* ---- register-tiled products for the chunk form ----
 * Thread tid's share of C[i][j] = A_i . B_j (i < M, j < N, length K): 4 x 4
 * tiles, each element summed over K in order. A tile's rows and columns are
 * strided (i = it + u * TM, j = jt + v * TN), so the threads of a warp read
 * consecutive rows of B (distinct banks with an odd stride) and share rows of
 * A (broadcast). */
FC_DEV void fc_nt_tiles(const float *A, int lda, const float *B, int ldb, int M, int N, int K,
                        float *C, int ldc, int tid, int nth)
{
    const int TM = (M + 3) / 4, TN = (N + 3) / 4;
    for (int t = tid; t < TM * TN; t += nth) {
        const int it = t / TN, jt = t % TN;
        const float *a[4], *b[4];
        float acc[4][4];
        for (int u = 0; u < 4; u++) {
            const int i = it + u * TM < M ? it + u * TM : it, j = jt + u * TN < N ? jt + u * TN : jt;
            a[u] = A + i * lda;
            b[u] = B + j * ldb;
            for (int v = 0; v < 4; v++) acc[u][v] = 0;
        }
        for (int c = 0; c < K; c++) {
            float av[4], bv[4];
            for (int u = 0; u < 4; u++) av[u] = a[u][c];
            for (int v = 0; v < 4; v++) bv[v] = b[v][c];
            for (int u = 0; u < 4; u++)
                for (int v = 0; v < 4; v++) acc[u][v] += av[u] * bv[v];
        }
        for (int u = 0; u < 4; u++)
            for (int v = 0; v < 4; v++)
                if (it + u * TM < M && jt + v * TN < N) C[(it + u * TM) * ldc + jt + v * TN] = acc[u][v];
    }
}

/* Thread tid's share of the largest magnitude of S (m x n at stride lds),
 * on the bits (falcon_mag_bits_f32), into mx[tid]. */
FC_DEV void fc_amax_part(const float *S, int lds, int m, int n, uint32_t *mx, int tid, int nth)
{
    uint32_t a = 0;
    for (int i = tid; i < m * n; i += nth) {
        const uint32_t b = falcon_mag_bits_f32(S[(i / n) * lds + i % n]);
        a = b > a ? b : a;
    }
    mx[tid] = a;
}

/* The largest of the threads' shares (uniform: every thread reads all). */
FC_DEV float fc_amax_all(const uint32_t *mx, int nth)
{
    uint32_t a = 0;
    for (int t = 0; t < nth; t++) a = mx[t] > a ? mx[t] : a;
    return falcon_mag_of_bits_f32(a);
}

/* The length of the next segment of a top-level block [s, s + len) from
 * c0, a boundary of the segments run so far: the halving (len / 2 first)
 * descended to the largest segment that starts at c0, which is the one
 * the CPU framework's recursion (blk_run) tries next. */
FC_DEV int fc_next_segment(int64_t s, int len, int64_t c0)
{
    while (c0 != s) {
        const int h = len / 2;
        if (c0 < s + h) {
            len = h;
        } else {
            s += h;
            len -= h;
        }
    }
    return len;
}

/* ---- the chunk-parallel form (and the masked-parallel form: one block of
 * up to falcon_parallel_block(W) steps) ----
 * As kernels/framework/blocked.inc.c, per block of Lc steps: terms (step j,
 * example l in E_j) ordered by step; products between examples formed once;
 * the unit lower-triangular system (I + A) R = RHS solved by forward
 * substitution, one thread per value column; then
 *   o_j = sum_p F[j+1][j_p+1] (q_j . z_p) r_p + F[j+1][0] q_j . S0
 *   S_L = F[L][0] S0 + sum_l Rg_l z_l^T,  Rg_l = sum_{p: l_p = l} F[L][j_p+1] r_p,
 * over the scaled keys x'_l, directions z'_l and pseudo-values r'_p = s_l r_p
 * (falcon_math.h; the right-hand side takes c rho_l (y_l - F s_l S0 x'_l), the
 * system row c rho_l s_l F (x'_l . z'_l')).
 * F comes from running products of the alphas, one column per thread, the
 * same multiplications in the same order as falcon_decay_row_advance (in
 * double, rounded to float for use): no factor spans more than one block and
 * none is a quotient of cumulative products (docs/math.md section 8).
 * A regression block whose end state cancels a large start memory
 * (falcon_block_cancels, falcon_math.h) is run again from its start memory,
 * kept in SC, as two halves, each checked the same way, down to single
 * steps: the segments of kernels/framework/blocked.inc.c's blk_run, taken
 * without recursion (fc_next_segment). The largest magnitudes are reduced
 * through mx, read by every thread after a barrier; the one of the memory
 * the next segment starts from is carried in a uniform variable. */
/* One head of the chunk form while it runs (fc_blocked_head): its buffers,
 * inputs and example bookkeeping, set up once (fc_blk_open), and the
 * segment being run, set between barriers (fc_blk_segment): uniform, the
 * same in every thread. */
typedef struct fc_blk {
    const fc_problem *pb;
    int64_t hd, T;
    int n, m, lds, ldx, Gmax, Pmax, ldf, nth;
    float *S, *F, *KZ, *QZ, *U, *O, *R, *A, *XS, *ZGS, *QS, *SC;
    int *term_l, *term_j, *first; /* first[j]: step j's first term, first[Lc] = P */
    uint32_t *mx;                 /* regression: the threads' largest magnitudes */
    const float *X, *Z;           /* the head's keys and directions */
    falcon_examples ex;
    /* the segment: steps [c0, c0 + Lc), examples [g_lo, g_lo + G), P terms */
    int64_t c0, g_lo;
    int Lc, G, P;
    const float *xg, *zg, *qf; /* its keys, directions and queries, staged or global */
    int ldxg, ldzg, ldq;
} fc_blk;

FC_DEV void fc_blk_open(fc_blk *b, const fc_problem *pb, int64_t hd, int64_t slot, float *smem, int nth)
{
    const int m = (int)pb->m, W = (int)pb->W, L = (int)pb->L;
    b->pb = pb, b->hd = hd, b->T = pb->T, b->nth = nth;
    b->n = (int)pb->n, b->m = m, b->lds = (int)pb->lds, b->ldx = (int)pb->ldx;
    b->Gmax = L + W - 1, b->Pmax = L * W, b->ldf = L + 1;
    b->S = fc_buf_ptr(pb, FC_BUF_S, smem, slot);
    b->term_l = (int *)fc_buf_ptr(pb, FC_BUF_TERMS, smem, slot);
    b->term_j = b->term_l + b->Pmax, b->first = b->term_j + b->Pmax;
    b->F = fc_buf_ptr(pb, FC_BUF_F, smem, slot);
    b->KZ = fc_buf_ptr(pb, FC_BUF_KZ, smem, slot);
    b->QZ = fc_buf_ptr(pb, FC_BUF_QZ, smem, slot);
    b->U = fc_buf_ptr(pb, FC_BUF_U, smem, slot);
    b->O = fc_buf_ptr(pb, FC_BUF_O, smem, slot);
    b->R = fc_buf_ptr(pb, FC_BUF_R, smem, slot);
    b->A = fc_buf_ptr(pb, FC_BUF_A, smem, slot);
    b->XS = fc_buf_ptr(pb, FC_BUF_XS, smem, slot);
    b->ZGS = pb->has_gain ? fc_buf_ptr(pb, FC_BUF_ZGS, smem, slot) : (float *)0;
    b->QS = fc_buf_ptr(pb, FC_BUF_QS, smem, slot);
    b->SC = pb->regression ? fc_buf_ptr(pb, FC_BUF_SCUT, smem, slot) : (float *)0;
    b->mx = b->SC ? (uint32_t *)(b->SC + m * b->lds) : (uint32_t *)0;
    b->X = pb->X + hd * pb->Emax * b->n;
    b->Z = pb->has_gain ? pb->Z + hd * pb->Emax * b->n : b->X;
    b->ex = fc_head_examples(pb, hd);
}

/* The segment [c0, c0 + Lc): the examples its windows reach, [g_lo,
 * g_lo + G), and where its keys, directions and queries are read from. */
FC_DEV void fc_blk_segment(fc_blk *b, int64_t c0, int Lc)
{
    const fc_problem *pb = b->pb;
    const falcon_examples ex = b->ex;
    const int n = b->n, ldx = b->ldx;
    const int64_t t_first = c0 > ex.shift ? c0 : ex.shift;
    int64_t g_lo = 0;
    int G = 0;
    if (t_first < c0 + Lc) {
        g_lo = falcon_window_first(&ex, falcon_example_of_step(&ex, t_first));
        G = (int)(falcon_example_of_step(&ex, c0 + Lc - 1) - g_lo + 1);
    }
    b->c0 = c0, b->Lc = Lc, b->g_lo = g_lo, b->G = G;
    b->xg = b->XS ? b->XS : b->X + g_lo * n;
    b->ldxg = b->XS ? ldx : n;
    b->zg = pb->has_gain ? (b->ZGS ? b->ZGS : b->Z + g_lo * n) : b->xg;
    b->ldzg = pb->has_gain ? (b->ZGS ? ldx : n) : b->ldxg;
    b->qf = b->QS ? b->QS : pb->Qf + (b->hd * b->T + c0) * n;
    b->ldq = b->QS ? ldx : n;
}

/* Thread tid's share of the segment's first phase: the terms (thread 0),
 * the decay columns of F, the staged rows and the start memory SC. */
FC_DEV void fc_blk_stage(const fc_blk *b, int tid)
{
    const fc_problem *pb = b->pb;
    const int64_t hd = b->hd, T = b->T, c0 = b->c0, g_lo = b->g_lo;
    const int n = b->n, m = b->m, lds = b->lds, ldx = b->ldx, ldf = b->ldf, Lc = b->Lc, G = b->G, nth = b->nth;
    int *const term_l = b->term_l, *const term_j = b->term_j, *const first = b->first;
    float *const F = b->F, *const XS = b->XS, *const ZGS = b->ZGS, *const QS = b->QS, *const SC = b->SC;
    const float *const X = b->X, *const Z = b->Z, *const S = b->S;
    if (tid == 0) {
        int P = 0;
        for (int j = 0; j < Lc; j++) {
            first[j] = P;
            const int64_t e = falcon_example_of_step(&b->ex, c0 + j);
            if (e < 0) continue;
            for (int64_t l = falcon_window_first(&b->ex, e); l <= e; l++) {
                term_l[P] = (int)(l - g_lo);
                term_j[P] = j;
                P++;
            }
        }
        first[Lc] = P;
    }
    for (int jc = tid; jc <= Lc; jc += nth) {
        double f = 1.0;
        F[jc * ldf + jc] = 1.0f;
        for (int i = jc + 1; i <= Lc; i++) {
            if (pb->has_alpha) f *= (double)pb->alpha[fc_row(pb, hd, c0 + i - 1)];
            F[i * ldf + jc] = (float)f;
        }
    }
    if (XS)
        for (int i = tid; i < G * n; i += nth) XS[(i / n) * ldx + i % n] = X[g_lo * n + i];
    if (ZGS)
        for (int i = tid; i < G * n; i += nth) ZGS[(i / n) * ldx + i % n] = Z[g_lo * n + i];
    if (QS)
        for (int i = tid; i < Lc * n; i += nth)
            QS[(i / n) * ldx + i % n] = pb->Qf[(hd * T + c0) * n + i];
    if (pb->regression && Lc > 1)
        for (int i = tid; i < m * n; i += nth) SC[(i / n) * lds + i % n] = S[(i / n) * lds + i % n];
}

/* Thread tid's share of the products: QZ = Q Z^T, O = Q S0^T, KZ = X Z^T,
 * U = X S0^T. */
FC_DEV void fc_blk_products(const fc_blk *b, int tid)
{
    const int n = b->n, m = b->m, lds = b->lds, Gmax = b->Gmax, Lc = b->Lc, G = b->G, nth = b->nth;
    fc_nt_tiles(b->qf, b->ldq, b->zg, b->ldzg, Lc, G, n, b->QZ, Gmax, tid, nth);
    fc_nt_tiles(b->qf, b->ldq, b->S, lds, Lc, m, n, b->O, m, tid, nth);
    if (b->pb->regression) {
        fc_nt_tiles(b->xg, b->ldxg, b->zg, b->ldzg, G, G, n, b->KZ, Gmax, tid, nth);
        fc_nt_tiles(b->xg, b->ldxg, b->S, lds, G, m, n, b->U, m, tid, nth);
    }
}

/* Thread tid's share of the right-hand sides R and the system matrix A. */
FC_DEV void fc_blk_system(const fc_blk *b, int tid)
{
    const fc_problem *pb = b->pb;
    const int64_t hd = b->hd, T = b->T, c0 = b->c0, g_lo = b->g_lo;
    const int m = b->m, ldf = b->ldf, Gmax = b->Gmax, P = b->P, nth = b->nth;
    const int *const term_l = b->term_l, *const term_j = b->term_j, *const first = b->first;
    const float *const F = b->F, *const U = b->U, *const KZ = b->KZ;
    float *const R = b->R, *const A = b->A;
    for (int it = tid; it < P * m; it += nth) {
        const int p = it / m, c = it % m, j = term_j[p], l = term_l[p];
        const float y = fc_value_row(pb, hd, &b->ex, g_lo + l)[c];
        const float *es = pb->eta + 2 * (hd * T + c0 + j);
        const float sl = pb->xz[3 * (hd * pb->Emax + g_lo + l) + 1], et = es[0] * (sl / es[1]);
        R[p * m + c] = pb->regression ? et * (y - F[(j + 1) * ldf] * (sl * U[l * m + c])) : et * y;
    }
    if (pb->regression)
        for (int it = tid; it < P * P; it += nth) {
            const int p = it / P, q2 = it % P, j = term_j[p];
            if (q2 >= first[j]) continue;
            const float *es = pb->eta + 2 * (hd * T + c0 + j);
            const float sl = pb->xz[3 * (hd * pb->Emax + g_lo + term_l[p]) + 1];
            const float et = es[0] * ((sl / es[1]) * sl);
            A[p * P + q2] = et * F[(j + 1) * ldf + term_j[q2] + 1] * KZ[term_l[p] * Gmax + term_l[q2]];
        }
}

/* Thread tid's share of the forward substitution, one value column per
 * thread. */
FC_DEV void fc_blk_solve(const fc_blk *b, int tid)
{
    const int m = b->m, P = b->P, nth = b->nth;
    const int *const term_j = b->term_j, *const first = b->first;
    const float *const A = b->A;
    float *const R = b->R;
    for (int c = tid; c < m; c += nth)
        for (int p = 0; p < P; p++) {
            const int f = first[term_j[p]];
            float x = R[p * m + c];
            for (int q2 = 0; q2 < f; q2++) x -= A[p * P + q2] * R[q2 * m + c];
            R[p * m + c] = x;
        }
}

/* Thread tid's share of the outputs: 4 x 4 tiles, 4 consecutive steps x 4
 * strided columns. */
FC_DEV void fc_blk_outputs(const fc_blk *b, int tid)
{
    const fc_problem *pb = b->pb;
    const int m = b->m, ldf = b->ldf, Gmax = b->Gmax, Lc = b->Lc, nth = b->nth;
    const int *const term_l = b->term_l, *const term_j = b->term_j, *const first = b->first;
    const float *const F = b->F, *const QZ = b->QZ, *const R = b->R, *const O = b->O;
    const int TJ = (Lc + 3) / 4, TC = (m + 3) / 4;
    for (int t = tid; t < TJ * TC; t += nth) {
        const int j0 = (t / TC) * 4, ct = t % TC;
        const int nj = Lc - j0 < 4 ? Lc - j0 : 4;
        int lim[4], col[4];
        float acc[4][4];
        for (int u = 0; u < 4; u++) {
            lim[u] = u < nj ? first[j0 + u + 1] : 0;
            col[u] = ct + u * TC < m ? ct + u * TC : ct;
            for (int v = 0; v < 4; v++) acc[u][v] = 0;
        }
        const int pend = first[j0 + nj];
        for (int p = 0; p < pend; p++) {
            const int jp = term_j[p] + 1, lp = term_l[p];
            float r[4];
            for (int v = 0; v < 4; v++) r[v] = R[p * m + col[v]];
            for (int u = 0; u < 4; u++)
                if (p < lim[u]) { /* lim = 0 beyond the block's last step */
                    const float w = F[(j0 + u + 1) * ldf + jp] * QZ[(j0 + u) * Gmax + lp];
                    for (int v = 0; v < 4; v++) acc[u][v] += w * r[v];
                }
        }
        for (int u = 0; u < 4; u++) {
            if (u >= nj) break;
            const float f0 = F[(j0 + u + 1) * ldf];
            float *o = pb->out + fc_row(pb, b->hd, b->c0 + j0 + u) * m;
            for (int v = 0; v < 4; v++)
                if (ct + v * TC < m) o[ct + v * TC] = acc[u][v] + f0 * O[(j0 + u) * m + ct + v * TC];
        }
    }
}

/* Thread tid's share of the pseudo-values gathered per example into U:
 * Rg_l = sum_{p: l_p = l} F[L][j_p+1] r_p. */
FC_DEV void fc_blk_gather(const fc_blk *b, int tid)
{
    const falcon_examples ex = b->ex;
    const int64_t c0 = b->c0, g_lo = b->g_lo;
    const int m = b->m, ldf = b->ldf, Lc = b->Lc, G = b->G, nth = b->nth;
    const int *const first = b->first;
    const float *const F = b->F, *const R = b->R;
    float *const U = b->U;
    for (int it = tid; it < G * m; it += nth) {
        const int l = it / m, c = it % m;
        const int64_t la = g_lo + l, s = falcon_step_of_example(&ex, la);
        const float *FL = F + Lc * ldf;
        float acc = 0;
        for (int j = s > c0 ? (int)(s - c0) : 0; j < Lc; j++) {
            const int64_t e = falcon_example_of_step(&ex, c0 + j);
            if (e < 0) continue;
            const int64_t wf = falcon_window_first(&ex, e);
            if (wf > la) break;
            const int p = first[j] + (int)(la - wf);
            acc += FL[j + 1] * R[p * m + c];
        }
        U[l * m + c] = acc;
    }
}

/* Thread tid's share of S = F[L][0] S0 + sum_l Rg_l z_l^T (4 x 4 tiles of
 * strided rows and columns). */
FC_DEV void fc_blk_end_state(const fc_blk *b, int tid)
{
    const int n = b->n, m = b->m, lds = b->lds, G = b->G, ldzg = b->ldzg, nth = b->nth;
    const float *const U = b->U, *const zg = b->zg;
    float *const S = b->S;
    const float d = b->F[b->Lc * b->ldf];
    const int TR = (m + 3) / 4, TC = (n + 3) / 4;
    for (int t = tid; t < TR * TC; t += nth) {
        const int rt = t / TC, ct = t % TC;
        int row[4], col[4];
        float acc[4][4];
        for (int u = 0; u < 4; u++) {
            row[u] = rt + u * TR < m ? rt + u * TR : rt;
            col[u] = ct + u * TC < n ? ct + u * TC : ct;
        }
        for (int u = 0; u < 4; u++)
            for (int v = 0; v < 4; v++) {
                float x = S[row[u] * lds + col[v]];
                if (d != 1.0f) x *= d;
                acc[u][v] = x;
            }
        for (int g = 0; g < G; g++) {
            float e[4], z[4];
            for (int u = 0; u < 4; u++) e[u] = U[g * m + row[u]];
            for (int v = 0; v < 4; v++) z[v] = zg[g * ldzg + col[v]];
            for (int u = 0; u < 4; u++)
                for (int v = 0; v < 4; v++) acc[u][v] += e[u] * z[v];
        }
        for (int u = 0; u < 4; u++)
            for (int v = 0; v < 4; v++)
                if (rt + u * TR < m && ct + v * TC < n) S[row[u] * lds + col[v]] = acc[u][v];
    }
}

FC_DEV void fc_blocked_head(const fc_problem *pb, int64_t hd, int64_t slot, float *smem, int nth)
{
    fc_blk b;
    fc_blk_open(&b, pb, hd, slot, smem, nth);
    const int n = b.n, m = b.m, lds = b.lds, L = (int)pb->L;
    const int64_t T = pb->T;
    float *S = b.S, *SC = b.SC;
    uint32_t *mx = b.mx;
    const float *S0 = pb->S0 + hd * (int64_t)m * n;
    float *Sout = pb->S + hd * (int64_t)m * n;

    FC_LOAD_S(S, lds)
    float a0 = 0; /* regression: the largest magnitude of the memory S */
    if (pb->regression) {
        FC_PHASE
        fc_amax_part(S, lds, m, n, mx, tid, nth);
        FC_PHASE_END
        a0 = fc_amax_all(mx, nth);
    }
    int64_t top = 0; /* the top-level block [top, top + L) */
    int Lc = (int)(T < L ? T : L);
    for (int64_t c0 = 0; c0 < T;) {
        fc_blk_segment(&b, c0, Lc);
        /* terms (one thread), decay columns, staged rows */
        FC_PHASE
        fc_blk_stage(&b, tid);
        FC_PHASE_END
        b.P = b.first[Lc];
        FC_PHASE
        fc_blk_products(&b, tid);
        FC_PHASE_END
        FC_PHASE
        fc_blk_system(&b, tid);
        FC_PHASE_END
        if (pb->regression) {
            FC_PHASE
            fc_blk_solve(&b, tid);
            FC_PHASE_END
        }
        FC_PHASE
        fc_blk_outputs(&b, tid);
        fc_blk_gather(&b, tid);
        FC_PHASE_END
        FC_PHASE
        fc_blk_end_state(&b, tid);
        FC_PHASE_END

        /* the cut: a cancelling block restored and run again as halves */
        if (pb->regression) {
            const float dL = b.F[Lc * b.ldf]; /* read before the barrier below: F is rewritten after it */
            FC_PHASE
            fc_amax_part(S, lds, m, n, mx, tid, nth);
            FC_PHASE_END
            const float a1 = fc_amax_all(mx, nth);
            if (Lc > 1 && falcon_block_cancels(dL, a0, a1)) {
                FC_PHASE
                for (int i = tid; i < m * n; i += nth) S[(i / n) * lds + i % n] = SC[(i / n) * lds + i % n];
                FC_PHASE_END
                Lc /= 2;
                continue;
            }
            a0 = a1;
        }
        c0 += Lc;
        if (c0 >= T) break;
        if (c0 - top >= L) top = c0;
        const int Ltop = (int)(T - top < L ? T - top : L);
        Lc = fc_next_segment(top, Ltop, c0);
    }
    FC_STORE_S(S, lds)
}

#endif
