/*
 * The CUDA backend's backward pass (fp32), docs/math.md section 12, written
 * as the forward is (fc_core.h): plain C in phases, compiled by nvcc into
 * fc_k_backward (cuda_kernels.cu) and by the C compiler into the CPU
 * emulation (verify/cuda/cuda_emulate.c).
 *
 * Algorithm: the recurrent reverse sweep of
 * kernels/framework/backward-recurrent.inc.c, whose header has the reverse
 * step's formulas with scaled keys (x = s x', z = s tau z'', sigma, rho,
 * nu = sigma tau / N), for every variant, alignment, feature map, decay,
 * window, carried previous key and history. The chunk and masked-parallel
 * forms compute the same function, so their gradients come from this same
 * sweep (a blocked backward on the GPU is future work). Accumulation in
 * fp32 throughout.
 *
 * Inputs. The forward's prep passes (fc_prep_example, fc_prep_step with
 * pb->backward set) give each example's x', z'', s, tau and x'.z'', each
 * step's phi(q) and nu (not c = beta nu: dbeta needs nu at beta = 0) and
 * sigma: the shared math of falcon_math.h, nothing derived again here.
 *
 * Decomposition: one thread block per head; its workspace is a per-head
 * slice of global memory (fc_bw_ws). Given a step's keys and normaliser,
 * each row of S evolves on its own in every variant (regression: e_r = y_r -
 * alpha s (S_r . x'), inner product: e_r = y_r), so a thread that owns rows
 * r = tid, tid + nth, ... runs the checkpoint sweep and a segment's
 * recomputation for its rows with no barrier at all. A reverse step is four
 * phases:
 *   A (columns)  du = S_t^T dO_t
 *   B (rows)     G += dO_t phi(q_t)^T; per row: p_i, e_i, a_i = G z''_i,
 *                de_i = w_i a_i, the row's share of D = SUM rho_i e_i.a_i
 *                and of dalpha = <G, S_{t-1}> - SUM s_i de_i.p_i; the
 *                examples' dy; thread 0: dq = J^T du
 *   C (columns)  D (the rows' shares summed in order, by every thread:
 *                the same bits everywhere); G^T e_i, S_{t-1}^T de_i, the
 *                examples' dx, Falcon-2/2A's dgain
 *   D (elements) G <- alpha (G - SUM s_i de_i x'_i^T); thread 0: dbeta,
 *                dalpha, and the step's own example finished (dk = J^T dx of
 *                its raw key, dv = dy, its ring slots cleared)
 * Memory: checkpoints before every c-th step (c about sqrt(T)) and one
 * segment's c states, recomputed from its checkpoint when the reverse sweep
 * reaches it: (T / c + c + 1) m n floats per head.
 */
#ifndef FALCON_CUDA_BACKWARD_H
#define FALCON_CUDA_BACKWARD_H

/* The backward problem: the forward's (inputs, state, features, threads,
 * scratch) plus cotangents and gradients, all fp32; [B][T][H][D] tensors
 * and per-head state gradients [heads][...]. */
typedef struct fc_grad_problem {
    fc_problem f;
    const float *dO;                              /* [B][T][H][m] (zeros where the caller has none) */
    const float *dS;                              /* [heads][m][n] (zeros likewise) */
    float *dq, *dk, *dv, *dbeta, *dalpha, *dgain; /* dalpha, dgain: NULL without alpha, gains */
    float *dS0;                                   /* [heads][m][n] */
    float *dprev;                                 /* [heads][n] */
    float *dhk, *dhv;                             /* [heads][W - 1][n|m] */
    int64_t c, nseg;                              /* checkpoint spacing, segments */
    int64_t ws;                                   /* workspace floats per head */
} fc_grad_problem;

/* One head's workspace (global memory). */
typedef struct fc_bw_ws {
    float *ckpt;         /* [nseg][m n]: S before steps 0, c, 2c, ... */
    float *seg;          /* [c][m n]: a segment's states after each of its steps */
    float *G;            /* [m n]: the adjoint of the memory */
    float *E, *A;        /* [W][m]: the window's residuals e_i, and de_i */
    float *Dp, *Ap;      /* [m]: the rows' shares of D and dalpha */
    float *du;           /* [n]: S_t^T dO_t */
    float *ringx, *ringy; /* [W][n], [W][m]: the examples' dx, dy (slot e % W) */
} fc_bw_ws;

FC_DEV int64_t fc_bw_ws_floats(int64_t n, int64_t m, int64_t W, int64_t c, int64_t nseg)
{
    return (nseg + c + 1) * m * n + 3 * W * m + 2 * m + n + W * n;
}

FC_DEV fc_bw_ws fc_bw_ws_of(const fc_grad_problem *gp, int64_t slot)
{
    const int64_t mn = gp->f.m * gp->f.n, W = gp->f.W, m = gp->f.m;
    fc_bw_ws w;
    w.ckpt = gp->f.scratch + slot * gp->ws;
    w.seg = w.ckpt + gp->nseg * mn;
    w.G = w.seg + gp->c * mn;
    w.E = w.G + mn;
    w.A = w.E + W * m;
    w.ringy = w.A + W * m;
    w.Dp = w.ringy + W * m;
    w.Ap = w.Dp + m;
    w.du = w.Ap + m;
    w.ringx = w.du + gp->f.n;
    return w;
}

/* A step's uniform data (the same in every thread). */
typedef struct fc_bw_step {
    int64_t t, row, first, e; /* step, its row in [B][T][H], the window's oldest example, its own (-1: none) */
    int k;                    /* examples in the window */
    float alpha, beta, nu, sigma, tau;
    const float *X, *Z; /* the window's x' and z'' rows [k][n] (features) */
    const float *xz;    /* the oldest example's (x'.z'', s, tau); example i at xz + 3 i */
} fc_bw_step;

FC_DEV void fc_bw_step_get(const fc_problem *pb, int64_t hd, const falcon_examples *ex, int64_t t, fc_bw_step *st)
{
    int64_t first;
    st->k = fc_rec_window(ex, t, &first);
    st->t = t;
    st->first = first;
    st->e = falcon_example_of_step(ex, t);
    st->row = fc_row(pb, hd, t);
    st->alpha = pb->has_alpha ? pb->alpha[st->row] : 1.0f;
    st->beta = pb->beta[st->row];
    const int64_t item = hd * pb->T + t, base = hd * pb->Emax + first;
    st->nu = pb->eta[2 * item];
    st->sigma = pb->eta[2 * item + 1];
    st->X = pb->X + base * pb->n;
    st->Z = pb->has_gain ? pb->Z + base * pb->n : st->X;
    st->xz = pb->xz + 3 * base;
    st->tau = st->k > 0 ? st->xz[3 * (st->k - 1) + 2] : 1.0f;
}

/* Row r of step t forwards: out = alpha in + SUM_i w_i e_i z''_i (out may
 * be in), w_i = beta nu rho_i; E[i][r] holds w_i e_i. */
FC_DEV void fc_bw_forward_row(const fc_problem *pb, int64_t hd, const falcon_examples *ex, const fc_bw_step *st,
                              const float *in, float *out, float *E, int r)
{
    const int n = (int)pb->n, m = (int)pb->m;
    const float bn = st->beta * st->nu;
    for (int i = 0; i < st->k; i++) {
        const float *x = st->X + (int64_t)i * n;
        float p = 0;
        for (int c = 0; c < n; c++) p += in[c] * x[c];
        const float y = fc_value_row(pb, hd, ex, st->first + i)[r], s = st->xz[3 * i + 1];
        const float e = pb->regression ? y - st->alpha * (s * p) : y;
        E[i * m + r] = bn * (s / st->sigma) * e;
    }
    for (int c = 0; c < n; c++) {
        float v = st->alpha * in[c];
        for (int i = 0; i < st->k; i++) v += E[i * m + r] * st->Z[(int64_t)i * n + c];
        out[c] = v;
    }
}

FC_DEV float fc_bw_sum(const float *v, int count)
{
    float s = 0;
    for (int i = 0; i < count; i++) s += v[i];
    return s;
}

/* Phase B, row r: the read's G += dO_t u^T, then the row's share of the
 * write's adjoints (see the header). */
FC_DEV void fc_bw_row(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, const fc_bw_step *st,
                      const float *S0, const fc_bw_ws *w, int r)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m, W = (int)pb->W;
    float *G = w->G + (int64_t)r * n;
    const float *S = S0 + (int64_t)r * n, *u = pb->Qf + (hd * pb->T + st->t) * n;
    const float dO = gp->dO[st->row * m + r], bn = st->beta * st->nu;
    for (int c = 0; c < n; c++) G[c] += dO * u[c];
    float gs = 0, D = 0;
    if (pb->has_alpha)
        for (int c = 0; c < n; c++) gs += G[c] * S[c];
    for (int i = 0; i < st->k; i++) {
        const float *x = st->X + (int64_t)i * n, *z = st->Z + (int64_t)i * n;
        float p = 0, a = 0;
        for (int c = 0; c < n; c++) p += S[c] * x[c];
        for (int c = 0; c < n; c++) a += G[c] * z[c];
        const float y = fc_value_row(pb, hd, ex, st->first + i)[r], s = st->xz[3 * i + 1], rho = s / st->sigma;
        const float e = pb->regression ? y - st->alpha * (s * p) : y, de = (bn * rho) * a;
        D += rho * (e * a);
        w->E[i * m + r] = e;
        w->A[i * m + r] = de;
        w->ringy[((st->first + i) % W) * m + r] += de;
        if (pb->regression) gs -= s * (de * p);
    }
    w->Dp[r] = D;
    w->Ap[r] = gs;
}

/* Phase C, column c: G^T e_i, S_{t-1}^T de_i, and the examples' dx (and
 * dgain) as bw_key_adjoint forms them. */
FC_DEV void fc_bw_col(const fc_grad_problem *gp, const fc_bw_step *st, const float *S0, const fc_bw_ws *w, int c,
                      float D)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m, W = (int)pb->W;
    const float bn = st->beta * st->nu;
    if (st->k == 0 && gp->dgain) gp->dgain[st->row * n + c] = 0;
    for (int i = 0; i < st->k; i++) {
        float ge = 0, sd = 0;
        for (int r = 0; r < m; r++) ge += w->E[i * m + r] * w->G[(int64_t)r * n + c];
        if (pb->regression)
            for (int r = 0; r < m; r++) sd += w->A[i * m + r] * S0[(int64_t)r * n + c];
        const float s = st->xz[3 * i + 1], rho = s / st->sigma;
        const float eta = bn / st->sigma / st->tau, cz = -D * bn * st->nu * rho, cx = cz / st->tau;
        const float x = st->X[(int64_t)i * n + c], z = st->Z[(int64_t)i * n + c];
        const float dz = eta * ge + cx * x;
        float *dx = w->ringx + ((st->first + i) % W) * n + c;
        *dx += pb->regression ? -st->alpha * sd + cz * z : cz * z;
        if (!pb->has_gain) {
            *dx += dz;
            continue;
        }
        gp->dgain[st->row * n + c] = (s * x) * dz;
        *dx += pb->gain[st->row * n + c] * dz;
    }
}

/* Raw key of example e and where its gradient goes (dk of its step, the
 * previous key's, or the history's). */
FC_DEV float *fc_bw_key_grad(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, int64_t e)
{
    const fc_problem *pb = &gp->f;
    if (e < ex->carried) return gp->dhk + (hd * pb->keep + e) * pb->n;
    const int64_t t = falcon_step_of_example(ex, e);
    if (!pb->prefix) return gp->dk + fc_row(pb, hd, t) * pb->n;
    return t == 0 ? gp->dprev + hd * pb->n : gp->dk + fc_row(pb, hd, t - 1) * pb->n;
}

/* Example e's gradients out of its ring slots (dk = J^T dx of its raw key,
 * dv = dy), the slots cleared for the example W before it. */
FC_DEV void fc_bw_example_out(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, int64_t e,
                              float *dv, const fc_bw_ws *w)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m, W = (int)pb->W;
    float *dx = w->ringx + (e % W) * n, *dy = w->ringy + (e % W) * m;
    falcon_phi_vjp_f32(pb->phi, fc_key_row(pb, hd, ex, e), dx, fc_bw_key_grad(gp, hd, ex, e), n);
    for (int r = 0; r < m; r++) dv[r] = dy[r];
    for (int c = 0; c < n; c++) dx[c] = 0;
    for (int r = 0; r < m; r++) dy[r] = 0;
}

/* Phase D's one-thread part: dbeta, dalpha, the step's own example. */
FC_DEV void fc_bw_finish(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, const fc_bw_step *st,
                         const fc_bw_ws *w)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m;
    gp->dbeta[st->row] = st->k > 0 ? st->nu * fc_bw_sum(w->Dp, m) : 0.0f;
    if (gp->dalpha) gp->dalpha[st->row] = fc_bw_sum(w->Ap, m);
    if (pb->prefix && st->t == pb->T - 1)
        for (int c = 0; c < n; c++) gp->dk[st->row * n + c] = 0;
    float *dv = gp->dv + st->row * m;
    if (st->e >= 0)
        fc_bw_example_out(gp, hd, ex, st->e, dv, w);
    else
        for (int r = 0; r < m; r++) dv[r] = 0;
}

/* Step t backwards, S0 = S_{t-1}, S1 = S_t: the four phases. */
FC_DEV void fc_bw_reverse_step(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, int64_t t,
                               const float *S0, const float *S1, const fc_bw_ws *w, int nth)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m;
    fc_bw_step st;
    fc_bw_step_get(pb, hd, ex, t, &st);
    const float *dO = gp->dO + st.row * m;

    FC_PHASE /* A: du = S_t^T dO_t */
    for (int c = tid; c < n; c += nth) {
        float s = 0;
        for (int r = 0; r < m; r++) s += dO[r] * S1[(int64_t)r * n + c];
        w->du[c] = s;
    }
    FC_PHASE_END

    FC_PHASE /* B: rows; dq */
    if (tid == 0) falcon_phi_vjp_f32(pb->phi, pb->q + st.row * n, w->du, gp->dq + st.row * n, n);
    for (int r = tid; r < m; r += nth) fc_bw_row(gp, hd, ex, &st, S0, w, r);
    FC_PHASE_END

    FC_PHASE /* C: columns */
    if (tid < n) {
        const float D = fc_bw_sum(w->Dp, m);
        for (int c = tid; c < n; c += nth) fc_bw_col(gp, &st, S0, w, c, D);
    }
    FC_PHASE_END

    FC_PHASE /* D: G <- alpha (G - SUM s_i de_i x'_i^T); scalars and the example */
    if (pb->regression && st.k > 0) {
        for (int it = tid; it < m * n; it += nth) {
            const int r = it / n, c = it % n;
            float g = st.alpha * w->G[it];
            for (int i = 0; i < st.k; i++)
                g += (-st.alpha * (st.xz[3 * i + 1] * w->A[i * m + r])) * st.X[(int64_t)i * n + c];
            w->G[it] = g;
        }
    } else if (st.alpha != 1.0f) {
        for (int it = tid; it < m * n; it += nth) w->G[it] *= st.alpha;
    }
    if (tid == 0) fc_bw_finish(gp, hd, ex, &st, w);
    FC_PHASE_END
}

/* The carried examples' dhist_k, dhist_v (0 past the history), and
 * dprev_key where no example used it (same alignment, or no previous key). */
FC_DEV void fc_bw_state_grads(const fc_grad_problem *gp, int64_t hd, const falcon_examples *ex, const fc_bw_ws *w)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m;
    for (int64_t l = 0; l < pb->keep; l++) {
        float *dv = gp->dhv + (hd * pb->keep + l) * m, *dk = gp->dhk + (hd * pb->keep + l) * n;
        if (l < ex->carried) {
            fc_bw_example_out(gp, hd, ex, l, dv, w);
            continue;
        }
        for (int c = 0; c < n; c++) dk[c] = 0;
        for (int r = 0; r < m; r++) dv[r] = 0;
    }
    if (!(pb->prefix && pb->has_prev[hd]))
        for (int c = 0; c < n; c++) gp->dprev[hd * n + c] = 0;
}

/* One head's backward pass (T >= 1). */
FC_DEV void fc_bw_head(const fc_grad_problem *gp, int64_t hd, int64_t slot, int nth)
{
    const fc_problem *pb = &gp->f;
    const int n = (int)pb->n, m = (int)pb->m, W = (int)pb->W;
    const int64_t mn = (int64_t)m * n, T = pb->T, cs = gp->c;
    const fc_bw_ws w = fc_bw_ws_of(gp, slot);
    const falcon_examples ex = fc_head_examples(pb, hd);
    const float *S0 = pb->S0 + hd * mn, *dS = gp->dS + hd * mn;

    FC_PHASE /* the first checkpoint, G = dS_T, the rings cleared */
    for (int64_t i = tid; i < mn; i += nth) {
        w.ckpt[i] = S0[i];
        w.G[i] = dS[i];
    }
    for (int i = tid; i < W * n; i += nth) w.ringx[i] = 0;
    for (int i = tid; i < W * m; i += nth) w.ringy[i] = 0;
    FC_PHASE_END

    FC_PHASE /* the checkpoints: each thread's rows through every step */
    for (int r = tid; r < m; r += nth)
        for (int64_t s = 1; s < gp->nseg; s++) {
            float *row = w.ckpt + s * mn + (int64_t)r * n;
            for (int c = 0; c < n; c++) row[c] = row[c - mn];
            for (int64_t t = (s - 1) * cs; t < s * cs; t++) {
                fc_bw_step st;
                fc_bw_step_get(pb, hd, &ex, t, &st);
                fc_bw_forward_row(pb, hd, &ex, &st, row, row, w.E, r);
            }
        }
    FC_PHASE_END

    for (int64_t s = gp->nseg - 1; s >= 0; s--) {
        const int64_t t0 = s * cs, t1 = T - t0 < cs ? T : t0 + cs;
        const float *start = w.ckpt + s * mn;
        /* state j of the segment (before step t0 + j): start, then seg[j - 1] */
#define FC_BW_STATE(j) ((j) == 0 ? start : w.seg + ((j) - 1) * mn)
        FC_PHASE /* the segment's states again, row by row */
        for (int r = tid; r < m; r += nth)
            for (int64_t t = t0; t < t1; t++) {
                fc_bw_step st;
                fc_bw_step_get(pb, hd, &ex, t, &st);
                fc_bw_forward_row(pb, hd, &ex, &st, FC_BW_STATE(t - t0) + (int64_t)r * n,
                                  w.seg + (t - t0) * mn + (int64_t)r * n, w.E, r);
            }
        FC_PHASE_END
        for (int64_t t = t1 - 1; t >= t0; t--)
            fc_bw_reverse_step(gp, hd, &ex, t, FC_BW_STATE(t - t0), FC_BW_STATE(t - t0 + 1), &w, nth);
#undef FC_BW_STATE
    }

    FC_PHASE /* dS0 = G; the history's and the previous key's gradients */
    for (int64_t i = tid; i < mn; i += nth) gp->dS0[hd * mn + i] = w.G[i];
    if (tid == 0) fc_bw_state_grads(gp, hd, &ex, &w);
    FC_PHASE_END
}

#endif
