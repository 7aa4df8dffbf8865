/*
 * The chunk-parallel (and masked-parallel) form of the CUDA kernels: the
 * register-tiled products, the block's context and its phases, one head a
 * thread block. Included at the end of fc_core.h, whose problem, buffers,
 * helpers and FC_DEV / FC_PHASE conventions it uses; compiled by nvcc and,
 * for the CPU emulation, by the C compiler.
 */
#ifndef FALCON_CUDA_BLOCKED_H
#define FALCON_CUDA_BLOCKED_H

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
