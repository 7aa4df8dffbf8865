/*
 * The blocked forms' backward pass (docs/math.md sections 7.2 and 12), one
 * head, one precision: the adjoint of the chunk block's algebra, block by
 * block in reverse, each block's forward quantities computed again from the
 * memory it started from. Included by framework.inc.c after blocked.inc.c,
 * whose block lengths (RS(block_length): no factor between two steps of a
 * block below 2^-100 / 2^-996) and decay helpers it shares.
 *
 * ---- The block and its adjoint ----
 * Local steps i = 1..L from memory S0; F[i][j] = alpha_{j+1} ... alpha_i
 * (F[i][i] = 1). Term p = (step j, example l of E_j): x_p, y_p, z_p,
 * eta_j = beta_j / N_j, N_j = eps + SUM_{l in E_j} x_l.z_l, u_i = phi(q_i).
 *   e_p   = y_p - F[j][0] S0 x_p                 (regression; residual)
 *   (I + A) R = RHS,  RHS_p = eta_j e_p,  A[p][p'] = eta_j F[j][j'] (z_p'.x_p), j' < j
 *   R_p   = eta_j y_p                            (inner product: A = 0)
 *   o_i   = F[i][0] S0 u_i + SUM_{p: j <= i} W[i][p] r_p,  W[i][p] = F[i][j] (z_p.u_i)
 *   S_L   = F[L][0] S0 + SUM_p F[L][j] r_p z_p^T.
 * Given dO (the block's output rows) and G_L = dL/dS_L:
 *   dR      = W^T dO + [F[L][j] G_L z_p]_p
 *   lambda  = (I + A)^{-T} dR        (regression; dR itself for the A variants)
 *   dA[p][p'] = -lambda_p . r_p'  (j' < j),   dRHS_p = lambda_p
 * and then, with C[p][p'] = dA[p][p'] eta_j F[j][j'] the adjoint of z_p'.x_p
 * and V[i][p] = F[i][j] (dO_i . r_p) that of z_p.u_i:
 *   du_i   = F[i][0] S0^T dO_i + SUM_p V[i][p] z_p
 *   dz_p  += SUM_i V[i][p] u_i + F[L][j] G_L^T r_p + SUM_q C[q][p] x_q
 *   dx_p  += SUM_p' C[p][p'] z_p' - eta_j F[j][0] S0^T lambda_p
 *   dy_p  += eta_j lambda_p
 *   deta_j = SUM_{p of j} (lambda_p . e_p + SUM_p' dA[p][p'] F[j][j'] (z_p'.x_p))
 *            (inner product: SUM_{p of j} dR_p . y_p)
 *   dbeta_j = deta_j / N_j,  dN_j = -deta_j eta_j / N_j: dx_l += dN_j z_l, dz_l += dN_j x_l
 *   dS0    = F[L][0] G_L + SUM_i F[i][0] dO_i u_i^T - SUM_p eta_j F[j][0] lambda_p x_p^T,
 * the adjoint carried into the previous block. Terms of one example are
 * summed per example before the products (a window repeats an example in up
 * to W terms), z = g * x gives dx += g * dz and dgain = x * dz, and phi's
 * Jacobian (section 12.1) takes dx to the raw key, du to the query.
 *
 * ---- The decays ----
 * Each factor F[i][j] has an adjoint D[i][j], summed from every place it
 * appears: the reads (z_p.u_i)(dO_i.r_p) and dO_i.(S0 u_i) at j = 0, the
 * couplings dA eta_j (z_p'.x_p), the residuals -eta_j lambda_p.(S0 x_p) at
 * j = 0, the end state r_p.(G_L z_p) and <G_L, S0>. A factor contains
 * alpha_r for j < r <= i, and F[i][j] = F[r-1][j] alpha_r F[i][r], so
 *   dalpha_r = SUM_{i >= r} F[i][r] N_r[i],   N_r[i] = SUM_{j < r} F[r-1][j] D[i][j],
 *   N_1[i] = D[i][0],   N_{r+1}[i] = alpha_r N_r[i] + D[i][r]:
 * products of alphas and adjoints only, never a quotient by alpha (a
 * near-reset alpha at the smallest normal number, which can only be a
 * block's first, gets a finite, accurate dalpha_1 = SUM_i F[i][1] D[i][0])
 * and never a factor across a block boundary (docs/math.md section 8).
 *
 * ---- Recomputation ----
 * A forward sweep keeps the memory at the start of every block when there
 * are at most BW_STORE_ALL blocks, else at every s-th block (s = ceil(sqrt
 * of the count)) and all of the last segment's; the reverse sweep recomputes
 * a segment's starts from its checkpoint, then runs its blocks backwards:
 * memory (count / s + s) m n, one forward sweep more.
 *
 * ---- tf32/bf16 operands (docs/math.md section 12, "Operand formats in the
 * backward pass") ----
 * Every operand of every matrix product is rounded to the format, as a
 * tensor core reads it, and the products accumulate in fp32: the block's
 * forward quantities exactly as the forward rounds them (X, Z, Q, a copy
 * of S0, R after the solve, W, Rg), and the adjoints' products (a copy of
 * dO, a copy of G_L, lambda's copy for lambda R^T, Wg, Cg, Ln, and the
 * coefficients of the dS0 rank updates). The transposed solve stays fp32,
 * as the forward's solve does; so do the decay adjoints' dot products,
 * the elementwise steps and every running sum.
 *
 * ---- The edges of the range (docs/math.md section 12) ----
 * The block algebra holds keys unscaled and blocks whole. Where the
 * forward chunk kernel does not (an example it stores scaled, its x.z out
 * of the normaliser's range: keys or Falcon-2's gains far from 1; a
 * regression block that cancels the memory the first sweep carries, or the
 * adjoint the reverse sweep carries, which it would cut into halves), the
 * head's gradients come from the recurrent backward, run from the start
 * (backward-edges.inc.c: the forward's own tests).
 */
/* Up to 64 blocks (T = 4096 at C = 64) every block start is kept: 64 m n
 * values, 4 MiB at n = m = 128 in fp32, where the checkpointed sweep would
 * compute 7 of every 8 blocks' forward quantities a third time. */
#define BW_STORE_ALL 64

/* The work buffers of one head's backward pass (one allocation). */
typedef struct bb_work {
    int64_t L, Gmax, Pmax, ldn, ldm, ldg, ldp, ldl, ldd;
    void *mem;
    size_t mem_bytes;
    /* forward quantities of the block */
    REAL *X, *Zb, *Q, *Kz, *Qz, *U, *S0q, *E, *R, *A, *Wm, *Rg, *eta, *N;
    /* adjoints */
    REAL *dOb, *PP, *dR, *GZ, *Wg, *WgT, *Cg, *CgT, *dX, *dZ, *dY, *Ln, *Ln1, *dQ, *tmp, *MT, *vec;
    double *row, *rowL, *f0, *f1, *D, *Nacc, *col;
    int64_t *term_l, *term_j, *first, *lim;
    const REAL **yrow;
    /* memories: the running one, the adjoint, checkpoints and a segment */
    REAL *S, *Gad, *ckpt, *seg;
    int64_t *starts, nb, segl;
    /* tf32/bf16: rounded copies of S0, G_L and dO, and the keys in fp32 for dgain */
    REAL *S0r, *Gr, *dOr, *Xf;
} bb_work;

/* One block while it runs: its place, its examples and its terms. */
typedef struct bb_blk {
    const RS(falcon_grad_head) *g;
    const RS(falcon_head) *h;
    const RS(falcon_uk) *uk;
    const example_src *src;
    const bb_work *w;
    int64_t c0, Lc, n, m, g_lo, G, P;
    const REAL *Z; /* the write directions: X, or Zb with gains */
    int drop;      /* tf32/bf16: fraction bits the products' operands drop (0: fp32, fp64) */
    const REAL *S0p, *Gp, *dOp; /* S0, G_L and dO as the products read them */
    int edge; /* the head met an edge of the range (backward-edges.inc.c) */
} bb_blk;

static int RS(bb_open)(bb_work *w, const RS(falcon_head) *h, int64_t L, int64_t nb)
{
    const int64_t n = h->n, m = h->m, W = h->window, Gmax = L + W - 1, Pmax = L * W;
    const int reg = h->regression;
    int64_t segl = nb <= BW_STORE_ALL ? nb : 1;
    while (segl * segl < nb) segl++;
    const int64_t nck = (nb + segl - 1) / segl;
    memset(w, 0, sizeof *w);
    *w = (bb_work){.L = L, .Gmax = Gmax, .Pmax = Pmax, .ldn = RS(padded)(n), .ldm = RS(padded)(m),
                   .ldg = RS(padded)(Gmax), .ldp = RS(padded)(Pmax), .ldl = RS(padded)(L), .ldd = L + 1,
                   .nb = nb, .segl = segl};
    const int64_t ldn = w->ldn, ldm = w->ldm, ldg = w->ldg, ldp = w->ldp, ldl = w->ldl;
    const size_t r = sizeof(REAL), d = sizeof(double), Mx = (size_t)(m * ldn);
    const int64_t big = Gmax > L ? Gmax : L;
    carver cv = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        w->X = RS(carve)(&cv, r * (size_t)(Gmax * ldn));
        w->Zb = RS(carve)(&cv, h->gain ? r * (size_t)(Gmax * ldn) : 0);
        w->Q = RS(carve)(&cv, r * (size_t)(L * ldn));
        w->Kz = RS(carve)(&cv, r * (size_t)(Gmax * ldg));
        w->Qz = RS(carve)(&cv, r * (size_t)(L * ldg));
        w->U = RS(carve)(&cv, reg ? r * (size_t)(Gmax * ldm) : 0);
        w->S0q = RS(carve)(&cv, r * (size_t)(L * ldm));
        w->E = RS(carve)(&cv, reg ? r * (size_t)(Pmax * ldm) : 0);
        w->R = RS(carve)(&cv, r * (size_t)(Pmax * ldm));
        w->A = RS(carve)(&cv, reg ? r * (size_t)(Pmax * ldp) : 0);
        w->Wm = RS(carve)(&cv, r * (size_t)(L * ldp));
        w->Rg = RS(carve)(&cv, r * (size_t)(Gmax * ldm));
        w->eta = RS(carve)(&cv, r * (size_t)L);
        w->N = RS(carve)(&cv, r * (size_t)L);
        w->dOb = RS(carve)(&cv, r * (size_t)(L * ldm));
        w->PP = RS(carve)(&cv, r * (size_t)(Pmax * (reg ? ldp : ldl)));
        w->dR = RS(carve)(&cv, r * (size_t)(Pmax * ldm));
        w->GZ = RS(carve)(&cv, r * (size_t)(Pmax > Gmax ? Pmax * ldm : Gmax * ldm));
        w->Wg = RS(carve)(&cv, r * (size_t)(L * ldg));
        w->WgT = RS(carve)(&cv, r * (size_t)(Gmax * ldl));
        w->Cg = RS(carve)(&cv, r * (size_t)(Gmax * ldg));
        w->CgT = RS(carve)(&cv, r * (size_t)(Gmax * ldg));
        w->dX = RS(carve)(&cv, r * (size_t)(Gmax * ldn));
        w->dZ = RS(carve)(&cv, r * (size_t)(Gmax * ldn));
        w->dY = RS(carve)(&cv, r * (size_t)(Gmax * ldm));
        w->Ln = RS(carve)(&cv, r * (size_t)(Gmax * ldm));
        w->Ln1 = RS(carve)(&cv, r * (size_t)(Gmax * ldm));
        w->dQ = RS(carve)(&cv, r * (size_t)(L * ldn));
        w->tmp = RS(carve)(&cv, r * (size_t)(big * ldn));
        w->MT = RS(carve)(&cv, r * (size_t)(m * (ldg > ldl ? ldg : ldl)));
        w->vec = RS(carve)(&cv, r * (size_t)(2 * ldn));
        w->row = RS(carve)(&cv, d * (size_t)(L + 1));
        w->rowL = RS(carve)(&cv, d * (size_t)(L + 1));
        w->f0 = RS(carve)(&cv, d * (size_t)(L + 1));
        w->f1 = RS(carve)(&cv, d * (size_t)(L + 1));
        w->D = RS(carve)(&cv, d * (size_t)((L + 1) * (L + 1)));
        w->Nacc = RS(carve)(&cv, d * (size_t)(L + 1));
        w->col = RS(carve)(&cv, d * (size_t)(L + 1));
        w->term_l = RS(carve)(&cv, sizeof(int64_t) * (size_t)Pmax);
        w->term_j = RS(carve)(&cv, sizeof(int64_t) * (size_t)Pmax);
        w->first = RS(carve)(&cv, sizeof(int64_t) * (size_t)(L + 1));
        w->lim = RS(carve)(&cv, sizeof(int64_t) * (size_t)(Pmax > Gmax ? Pmax : Gmax));
        w->yrow = RS(carve)(&cv, sizeof(const REAL *) * (size_t)Gmax);
        w->S = RS(carve)(&cv, r * Mx);
        w->Gad = RS(carve)(&cv, r * Mx);
        w->ckpt = RS(carve)(&cv, r * Mx * (size_t)nck);
        w->seg = RS(carve)(&cv, r * Mx * (size_t)segl);
        w->starts = RS(carve)(&cv, sizeof(int64_t) * (size_t)(nb + 1));
        const int drop = h->operand_drop != 0;
        w->S0r = RS(carve)(&cv, drop ? r * Mx : 0);
        w->Gr = RS(carve)(&cv, drop ? r * Mx : 0);
        w->dOr = RS(carve)(&cv, drop ? r * (size_t)(L * ldm) : 0);
        w->Xf = RS(carve)(&cv, drop && h->gain ? r * (size_t)(Gmax * ldn) : 0);
        if (pass == 0) {
            cv.base = h->work->get(cv.used, &w->mem_bytes);
            cv.used = 0;
            if (!cv.base) return 1;
            w->mem = cv.base;
        }
    }
    return 0;
}

/* C = beta C + A B and A B^T through the micro-kernels, with the empty
 * products of a block without examples (K = 0) made explicit. */
static void RS(bb_nn)(const RS(falcon_uk) *uk, int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                      const REAL *B, int64_t ldb, REAL beta, REAL *C, int64_t ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K > 0) {
        uk->gemm_nn(M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
}

static void RS(bb_nt)(const RS(falcon_uk) *uk, int64_t M, int64_t N, int64_t K, const REAL *A, int64_t lda,
                      const REAL *B, int64_t ldb, REAL *C, int64_t ldc)
{
    if (M <= 0 || N <= 0) return;
    if (K > 0) {
        uk->gemm_nt(M, N, K, A, lda, B, ldb, 0, C, ldc);
        return;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0;
}

#include "backward-panels.inc.c"

static void RS(bb_zero)(REAL *x, int64_t rows, int64_t cols, int64_t ld)
{
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) x[i * ld + j] = 0;
}

/* tf32/bf16: x (rows x cols at stride ld) rounded to the operand format in
 * place (blocked.inc.c's round_operand); nothing in fp32 and fp64. */
static void RS(bb_round)(const bb_blk *b, REAL *x, int64_t rows, int64_t cols, int64_t ld)
{
    if (b->drop) RS(round_operand)(x, rows, cols, ld, b->drop);
}

/* x as a product reads it: x itself, or under tf32/bf16 its rounded copy
 * in `copy` (x stays fp32 for the rest of the algebra). */
static const REAL *RS(bb_operand)(const bb_blk *b, const REAL *x, REAL *copy, int64_t rows, int64_t cols,
                                  int64_t ld)
{
    if (!b->drop) return x;
    for (int64_t r = 0; r < rows; r++) memcpy(copy + r * ld, x + r * ld, sizeof(REAL) * (size_t)cols);
    RS(bb_round)(b, copy, rows, cols, ld);
    return copy;
}

#include "backward-sums.inc.c"
#include "backward-edges.inc.c"

/* The examples the block's windows reach, [g_lo, g_lo + G) (as the
 * forward's blk_ctx_open), packed: featurized keys X, their values' rows,
 * the directions Zb = g_t * x with gains (the step that reveals an example
 * is the one that writes it: W = 1), and the featurized queries Q. */
static void RS(bb_pack)(bb_blk *b)
{
    const RS(falcon_head) *h = b->h;
    const example_src *srcp = b->src;
    const bb_work *w = b->w;
    const int64_t c0 = b->c0, Lc = b->Lc, n = b->n, ldn = w->ldn;
    int64_t t_first = c0 > srcp->ex.shift ? c0 : srcp->ex.shift, G = 0, g_lo = 0;
    if (t_first < c0 + Lc) {
        g_lo = falcon_window_first(&srcp->ex, falcon_example_of_step(&srcp->ex, t_first));
        G = falcon_example_of_step(&srcp->ex, c0 + Lc - 1) - g_lo + 1;
    }
    b->g_lo = g_lo, b->G = G;
    for (int64_t l = 0; l < G; l++) {
        const REAL *key;
        RS(example_get)(srcp, g_lo + l, &key, &w->yrow[l]);
        RS(falcon_featurize)(h->phi, key, w->X + l * ldn, n);
        if (h->gain) {
            const REAL *gr = h->gain + falcon_step_of_example(&srcp->ex, g_lo + l) * h->ldk;
            for (int64_t c = 0; c < n; c++) w->Zb[l * ldn + c] = gr[c] * w->X[l * ldn + c];
        }
    }
    b->Z = h->gain ? w->Zb : w->X;
    for (int64_t j = 0; j < Lc; j++) RS(falcon_featurize)(h->phi, h->q + (c0 + j) * h->ldk, w->Q + j * ldn, n);
    /* tf32/bf16: the forward's operands, z = g * x from the fp32 key */
    if (b->drop && h->gain) memcpy(w->Xf, w->X, sizeof(REAL) * (size_t)(G * ldn));
    RS(bb_round)(b, w->X, G, n, ldn);
    if (h->gain) RS(bb_round)(b, w->Zb, G, n, ldn);
    RS(bb_round)(b, w->Q, Lc, n, ldn);
}

/* Terms ordered by step (term p: example term_l[p] of step term_j[p],
 * first[j] step j's first). */
static void RS(bb_terms)(bb_blk *b)
{
    const bb_work *w = b->w;
    int64_t P = 0;
    for (int64_t j = 0; j < b->Lc; j++) {
        w->first[j] = P;
        const int64_t e = falcon_example_of_step(&b->src->ex, b->c0 + j);
        for (int64_t l = e < 0 ? 0 : falcon_window_first(&b->src->ex, e); l <= e; l++)
            w->term_l[P] = l - b->g_lo, w->term_j[P] = j, P++;
    }
    w->first[b->Lc] = P;
    b->P = P;
}

/* N_j and eta_j = beta_j / N_j (FALCON_ETA, the window's dot products
 * oldest first). */
static void RS(bb_normalisers)(const bb_blk *b)
{
    const RS(falcon_head) *h = b->h;
    const bb_work *w = b->w;
    for (int64_t j = 0; j < b->Lc; j++) {
        w->eta[j] = 0, w->N[j] = 1;
        if (w->first[j + 1] == w->first[j]) continue;
        REAL sum = 0;
        for (int64_t p = w->first[j]; p < w->first[j + 1]; p++) sum += w->Kz[w->term_l[p] * w->ldg + w->term_l[p]];
        w->N[j] = h->eps + sum;
        w->eta[j] = FALCON_ETA(h->beta[(b->c0 + j) * h->lds], h->eps, sum);
    }
}

/* Row i of F from row i - 1 (the forward's falcon_decay_row_advance), and
 * f0[i] = F[i][0], f1[i] = F[i][1] (i >= 1): the decay from the block's
 * first step on, without its own alpha. dS0 is formed with f1 and times
 * alpha_1 once at the end: every term of it carries alpha_1, and after a
 * near-reset first step F[i][0] is flushed to 0 (below the smallest
 * normal), which would drop every term but the first step's. */
static void RS(bb_decay_row)(const bb_blk *b, int64_t i)
{
    const RS(falcon_head) *h = b->h;
    const double alpha = h->alpha ? (double)h->alpha[(b->c0 + i - 1) * h->lds] : 1.0;
    falcon_decay_row_advance(b->w->row, i, alpha);
    b->w->f0[i] = b->w->row[0];
    b->w->f1[i] = b->w->row[1];
}

/* Step j's rows once row j + 1 of F is in place: residuals E, right-hand
 * sides (or the A variants' pseudo-values) in R, the rows of A, and (reads)
 * row j of the read weights W. */
static void RS(bb_step_rows)(const bb_blk *b, int64_t j, int reads)
{
    const RS(falcon_head) *h = b->h;
    const bb_work *w = b->w;
    const int64_t m = b->m, ldm = w->ldm, ldg = w->ldg, ldp = w->ldp, i = j + 1;
    const int64_t *first = w->first, *tl = w->term_l, *tj = w->term_j;
    const double *row = w->row;
    const REAL eta = w->eta[j];
    for (int64_t p = first[j]; p < first[i]; p++) {
        const int64_t l = tl[p];
        const REAL *y = w->yrow[l];
        REAL *r = w->R + p * ldm;
        if (!h->regression) {
            for (int64_t c = 0; c < m; c++) r[c] = eta * y[c];
            continue;
        }
        REAL *e = w->E + p * ldm;
        const REAL *u = w->U + l * ldm;
        for (int64_t c = 0; c < m; c++) {
            e[c] = y[c] - RS(decay_mul)(row[0], u[c]);
            r[c] = eta * e[c];
        }
        REAL *a = w->A + p * ldp;
        for (int64_t q = 0; q < first[j]; q++) a[q] = eta * (REAL)row[tj[q] + 1] * w->Kz[l * ldg + tl[q]];
        for (int64_t q = first[j]; q < p; q++) a[q] = 0;
    }
    if (!reads) return;
    REAL *wr = w->Wm + j * ldp;
    for (int64_t p = 0; p < first[i]; p++) wr[p] = (REAL)row[tj[p] + 1] * b->w->Qz[j * ldg + tl[p]];
    for (int64_t p = first[i]; p < b->P; p++) wr[p] = 0;
}

/* The block's forward quantities from the memory S0 ([m][n], rows ldn):
 * the products, terms, system, pseudo-values R and, per example, the end
 * state's decayed pseudo-values Rg = SUM_{p of l} F[L][j] r_p. reads = 0
 * (the sweeps, which want the end state only) leaves out what only the
 * reads use: Qz, S0q and the read weights W. */
static void RS(bb_forward)(bb_blk *b, const REAL *S0, int reads)
{
    const bb_work *w = b->w;
    const RS(falcon_uk) *uk = b->uk;
    const int64_t n = b->n, m = b->m, Lc = b->Lc, ldn = w->ldn, ldm = w->ldm, ldg = w->ldg;
    RS(bb_pack)(b);
    const int64_t G = b->G;
    const REAL *S0p = b->S0p = RS(bb_operand)(b, S0, w->S0r, m, n, ldn);
    RS(bb_terms)(b);
    RS(bb_lim_kz)(b);
    RS(bb_nt_panels)(uk, G, G, n, w->X, ldn, b->Z, ldn, w->Kz, ldg, w->lim);
    RS(bb_edge_keys)(b);
    if (reads) {
        RS(bb_lim_qz)(b);
        RS(bb_nt_panels)(uk, Lc, G, n, w->Q, ldn, b->Z, ldn, w->Qz, ldg, w->lim);
        RS(bb_nt)(uk, Lc, m, n, w->Q, ldn, S0p, ldn, w->S0q, ldm);
    }
    if (b->h->regression) RS(bb_nt)(uk, G, m, n, w->X, ldn, S0p, ldn, w->U, ldm);
    RS(bb_normalisers)(b);
    w->row[0] = 1.0, w->f0[0] = 1.0;
    for (int64_t i = 1; i <= Lc; i++) {
        RS(bb_decay_row)(b, i);
        RS(bb_step_rows)(b, i - 1, reads);
    }
    memcpy(w->rowL, w->row, sizeof(double) * (size_t)(Lc + 1));
    if (b->h->regression && b->P > 0) uk->trsm_unit_lower(b->P, m, w->A, w->ldp, w->R, ldm);
    RS(bb_round)(b, w->R, b->P, m, ldm); /* the forward's operands after the solve: R, W, Rg */
    RS(bb_round)(b, w->Wm, Lc, b->P, w->ldp);
    RS(bb_zero)(w->Rg, G, m, ldm);
    for (int64_t p = 0; p < b->P; p++) {
        const REAL d = (REAL)w->rowL[w->term_j[p] + 1];
        REAL *rg = w->Rg + w->term_l[p] * ldm;
        const REAL *rp = w->R + p * ldm;
        for (int64_t c = 0; c < m; c++) rg[c] += d * rp[c];
    }
    RS(bb_round)(b, w->Rg, G, m, ldm);
}

/* S <- S_L = F[L][0] S + Rg^T Z, in place. */
static void RS(bb_end_state)(const bb_blk *b, REAL *S)
{
    const bb_work *w = b->w;
    const int64_t n = b->n, m = b->m, G = b->G, ldn = w->ldn, ldg = w->ldg;
    const REAL a = RS(memory_decay)(S, ldn, m, n, w->f0[b->Lc]);
    if (G == 0) {
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) S[r * ldn + c] *= a;
        return;
    }
    RS(transpose)(w->MT, ldg, w->Rg, w->ldm, G, m);
    b->uk->rank_update(m, n, G, a, S, ldn, w->MT, ldg, b->Z, ldn);
}

/* Step j's adjoints once row j + 1 of F is in place (the header's
 * equations): its read weights' V into Wg (per example) and D, its terms'
 * dy, the residuals' share of dx and dS0 (Ln), C into Cg (per example
 * pair), D, and dbeta_j with the normaliser's share on Cg's diagonal. */
static void RS(bb_step_adjoint)(const bb_blk *b, int64_t j)
{
    const RS(falcon_head) *h = b->h;
    const bb_work *w = b->w;
    const int64_t m = b->m, ldm = w->ldm, ldg = w->ldg, ldp = w->ldp, ldd = w->ldd, i = j + 1;
    const int64_t *first = w->first, *tl = w->term_l, *tj = w->term_j;
    const double *row = w->row;
    double *Di = w->D + i * ldd;
    const REAL *dor = w->Wm + j * ldp; /* dO_j . r_p, in Wm's place */
    for (int64_t p = 0; p < first[i]; p++) {
        w->Wg[j * ldg + tl[p]] += (REAL)row[tj[p] + 1] * dor[p];
        Di[tj[p] + 1] += (double)w->Qz[j * ldg + tl[p]] * (double)dor[p];
    }
    Di[0] += (double)RS(bb_dot)(w->dOb + j * ldm, w->S0q + j * ldm, m);
    const REAL eta = w->eta[j];
    double deta = 0;
    for (int64_t p = first[j]; p < first[i]; p++) {
        const int64_t l = tl[p];
        const REAL *lam = w->dR + p * ldm; /* lambda_p (dR_p for the A variants) */
        REAL *dy = w->dY + l * ldm;
        for (int64_t c = 0; c < m; c++) dy[c] += eta * lam[c];
        if (!h->regression) {
            deta += (double)RS(bb_dot)(lam, w->yrow[l], m);
            continue;
        }
        deta += (double)RS(bb_dot)(lam, w->E + p * ldm, m);
        REAL *ln = w->Ln + l * ldm;
        REAL *ln1 = w->Ln1 + l * ldm;
        for (int64_t c = 0; c < m; c++) ln[c] -= RS(decay_mul)(row[0], eta * lam[c]);
        for (int64_t c = 0; c < m; c++) ln1[c] -= RS(decay_mul)(row[1], eta * lam[c]);
        Di[0] -= (double)eta * (double)RS(bb_dot)(lam, w->U + l * ldm, m);
        const REAL *lr = w->PP + p * ldp; /* lambda_p . r_q */
        for (int64_t q = 0; q < first[j]; q++) {
            const REAL dA = -lr[q], f = (REAL)row[tj[q] + 1], kz = w->Kz[l * ldg + tl[q]];
            deta += (double)dA * (double)f * (double)kz;
            w->Cg[l * ldg + tl[q]] += dA * eta * f;
            Di[tj[q] + 1] += (double)dA * (double)eta * (double)kz;
        }
    }
    REAL dbeta = 0;
    if (first[i] > first[j]) {
        const REAL N = w->N[j], dN = (REAL)(-deta * (double)eta / (double)N);
        dbeta = (REAL)(deta / (double)N);
        for (int64_t p = first[j]; p < first[i]; p++) w->Cg[tl[p] * ldg + tl[p]] += dN;
    }
    b->g->dbeta[(b->c0 + j) * h->lds] = dbeta;
}

/* dR = W^T dO + F[L][j] G_L z_p, the end state's decay adjoints, then
 * the reads' dO_i . r_p into Wm's place. */
static void RS(bb_dR)(const bb_blk *b, const REAL *S0, const REAL *Gad)
{
    const bb_work *w = b->w;
    const int64_t n = b->n, m = b->m, Lc = b->Lc, P = b->P, ldn = w->ldn, ldm = w->ldm;
    double *DL = w->D + Lc * w->ldd;
    RS(transpose)(w->PP, w->ldl, w->Wm, w->ldp, Lc, P);
    RS(bb_nn)(b->uk, P, m, Lc, w->PP, w->ldl, b->dOp, ldm, 0, w->dR, ldm);
    RS(bb_nt)(b->uk, b->G, m, n, b->Z, ldn, b->Gp, ldn, w->GZ, ldm);
    for (int64_t p = 0; p < P; p++) {
        const REAL d = (REAL)w->rowL[w->term_j[p] + 1];
        const REAL *gz = w->GZ + w->term_l[p] * ldm;
        REAL *dr = w->dR + p * ldm;
        DL[w->term_j[p] + 1] += (double)RS(bb_dot)(w->R + p * ldm, gz, m);
        for (int64_t c = 0; c < m; c++) dr[c] += d * gz[c];
    }
    double gs = 0;
    for (int64_t r = 0; r < m; r++) gs += (double)RS(bb_dot)(Gad + r * ldn, S0 + r * ldn, n);
    DL[0] += gs;
    for (int64_t j = 0; j < Lc; j++) w->lim[j] = w->first[j + 1] - 1; /* step j reads terms up to its own */
    RS(bb_nt_panels)(b->uk, Lc, P, m, b->dOp, ldm, w->R, ldm, w->Wm, w->ldp, w->lim);
}

/* lambda = (I + A)^{-T} dR in dR's place, then lambda R^T into PP: with J
 * the reversal of the terms, (I + A)^T = J (I + J A^T J) J, and J A^T J is
 * strictly lower again: A anti-transposed in place (its strictly lower
 * part maps onto itself), the rows of dR reversed, the unit lower solve. */
static void RS(bb_lambda)(const bb_blk *b)
{
    const bb_work *w = b->w;
    const int64_t m = b->m, P = b->P, ldm = w->ldm, ldp = w->ldp;
    REAL *A = w->A;
    for (int64_t a = 0; a < P; a++)
        for (int64_t c = 0; c < a && a + c < P - 1; c++) {
            REAL *x = A + a * ldp + c, *y = A + (P - 1 - c) * ldp + (P - 1 - a);
            const REAL t = *x;
            *x = *y, *y = t;
        }
    for (int64_t p = 0; p < P; p++) memcpy(w->GZ + (P - 1 - p) * ldm, w->dR + p * ldm, sizeof(REAL) * (size_t)m);
    b->uk->trsm_unit_lower(P, m, A, ldp, w->GZ, ldm);
    for (int64_t p = 0; p < P; p++) memcpy(w->dR + p * ldm, w->GZ + (P - 1 - p) * ldm, sizeof(REAL) * (size_t)m);
    const REAL *lam = RS(bb_operand)(b, w->dR, w->GZ, P, m, ldm);
    for (int64_t p = 0; p < P; p++) w->lim[p] = w->first[w->term_j[p]] - 1; /* the earlier steps' terms */
    RS(bb_nt_panels)(b->uk, P, P, m, lam, ldm, w->R, ldm, w->PP, ldp, w->lim);
}

/* Example l's dx (featurized) and dy to its raw key's and value's
 * gradients: the carried history's, the previous key's (prefix, first
 * step) or the sequence's rows. */
static void RS(bb_add_example)(const bb_blk *b, int64_t l, const REAL *dx, const REAL *dy)
{
    const RS(falcon_grad_head) *g = b->g;
    const RS(falcon_head) *h = b->h;
    const int64_t e = b->g_lo + l, n = b->n, m = b->m;
    const REAL *key, *val;
    RS(example_get)(b->src, e, &key, &val);
    REAL *dk = b->w->vec;
    RS(falcon_phi_vjp)(h->phi, key, dx, dk, n);
    if (e < b->src->ex.carried) {
        for (int64_t c = 0; g->dhist_k && c < n; c++) g->dhist_k[e * n + c] += (double)dk[c];
        for (int64_t c = 0; g->dhist_v && c < m; c++) g->dhist_v[e * m + c] += (double)dy[c];
        return;
    }
    const int64_t t = falcon_step_of_example(&b->src->ex, e);
    for (int64_t c = 0; c < m; c++) g->dv[t * h->ldv + c] += dy[c];
    if (h->prefix && t == 0) {
        for (int64_t c = 0; g->dprev_key && c < n; c++) g->dprev_key[c] += (double)dk[c];
        return;
    }
    REAL *dst = g->dk + (h->prefix ? t - 1 : t) * h->ldk;
    for (int64_t c = 0; c < n; c++) dst[c] += dk[c];
}

/* The block's products of adjoints: dq rows, dz and dx per example (then
 * the gains' share and the raw keys' and values' gradients), and the
 * adjoint of the block's start memory in Gad's place. */
static void RS(bb_products)(const bb_blk *b, REAL *Gad)
{
    const RS(falcon_head) *h = b->h;
    const RS(falcon_uk) *uk = b->uk;
    const bb_work *w = b->w;
    const int64_t n = b->n, m = b->m, Lc = b->Lc, G = b->G, ldn = w->ldn, ldm = w->ldm, ldg = w->ldg, ldl = w->ldl;
    RS(bb_round)(b, w->Wg, Lc, G, ldg); /* the adjoints' operands (tf32/bf16) */
    RS(bb_round)(b, w->Cg, G, G, ldg);
    if (h->regression) RS(bb_round)(b, w->Ln, G, m, ldm);
    RS(bb_nn)(uk, Lc, n, G, w->Wg, ldg, b->Z, ldn, 0, w->dQ, ldn);
    RS(bb_nn)(uk, Lc, n, m, b->dOp, ldm, b->S0p, ldn, 0, w->tmp, ldn);
    for (int64_t j = 0; j < Lc; j++) {
        REAL *dq = w->dQ + j * ldn;
        for (int64_t c = 0; c < n; c++) dq[c] += RS(decay_mul)(w->f0[j + 1], w->tmp[j * ldn + c]);
        RS(falcon_phi_vjp)(h->phi, h->q + (b->c0 + j) * h->ldk, dq, b->g->dq + (b->c0 + j) * h->ldk, n);
    }
    if (G > 0) {
        RS(transpose)(w->WgT, ldl, w->Wg, ldg, Lc, G);
        RS(bb_nn)(uk, G, n, Lc, w->WgT, ldl, w->Q, ldn, 0, w->dZ, ldn);
        RS(bb_nn)(uk, G, n, m, w->Rg, ldm, b->Gp, ldn, 1, w->dZ, ldn);
        RS(transpose)(w->CgT, ldg, w->Cg, ldg, G, G);
        RS(bb_nn)(uk, G, n, G, w->CgT, ldg, w->X, ldn, 1, w->dZ, ldn);
        RS(bb_nn)(uk, G, n, G, w->Cg, ldg, b->Z, ldn, 0, w->dX, ldn);
        if (h->regression) RS(bb_nn)(uk, G, n, m, w->Ln, ldm, b->S0p, ldn, 1, w->dX, ldn);
    }
    /* dS0 = alpha_1 (F[L][1] G_L + SUM_i F[i][1] dO_i u_i^T + Ln1^T X) */
    const REAL a = RS(memory_decay)(Gad, ldn, m, n, w->f1[Lc]);
    for (int64_t j = 0; j < Lc; j++)
        for (int64_t c = 0; c < m; c++) w->MT[c * ldl + j] = RS(decay_mul)(w->f1[j + 1], w->dOb[j * ldm + c]);
    RS(bb_round)(b, w->MT, m, Lc, ldl);
    uk->rank_update(m, n, Lc, a, Gad, ldn, w->MT, ldl, w->Q, ldn);
    if (h->regression && G > 0) {
        RS(transpose)(w->MT, ldg, w->Ln1, ldm, G, m);
        RS(bb_round)(b, w->MT, m, G, ldg);
        uk->rank_update(m, n, G, 1, Gad, ldn, w->MT, ldg, w->X, ldn);
    }
    const REAL alpha1 = h->alpha ? h->alpha[b->c0 * h->lds] : 1; /* gradual underflow: rounded once */
    for (int64_t r = 0; alpha1 != 1 && r < m; r++)
        for (int64_t c = 0; c < n; c++) Gad[r * ldn + c] *= alpha1;
    for (int64_t l = 0; l < G; l++) {
        REAL *dx = w->dX + l * ldn;
        const REAL *dz = w->dZ + l * ldn, *x = (b->drop && h->gain ? w->Xf : w->X) + l * ldn;
        if (h->gain) {
            const int64_t t = falcon_step_of_example(&b->src->ex, b->g_lo + l);
            const REAL *gr = h->gain + t * h->ldk;
            REAL *dg = b->g->dgain + t * h->ldk;
            for (int64_t c = 0; c < n; c++) dg[c] = x[c] * dz[c], dx[c] += gr[c] * dz[c];
        } else {
            for (int64_t c = 0; c < n; c++) dx[c] += dz[c];
        }
        RS(bb_add_example)(b, l, dx, w->dY + l * ldm);
    }
}

/* dalpha of the block's steps from the factors' adjoints D (the header's
 * recurrence): running products and sums only. */
static void RS(bb_dalpha)(const bb_blk *b)
{
    const RS(falcon_head) *h = b->h;
    if (!h->alpha || !b->g->dalpha) return;
    const bb_work *w = b->w;
    const int64_t Lc = b->Lc, ldd = w->ldd;
    double *Nr = w->Nacc;
    for (int64_t i = 1; i <= Lc; i++) Nr[i] = w->D[i * ldd];
    for (int64_t r = 1; r <= Lc; r++) {
        const double ar = (double)h->alpha[(b->c0 + r - 1) * h->lds];
        double s = 0, f = 1; /* f = F[i][r] */
        for (int64_t i = r; i <= Lc; i++) {
            s += f * Nr[i];
            if (i < Lc) f *= (double)h->alpha[(b->c0 + i) * h->lds];
        }
        b->g->dalpha[(b->c0 + r - 1) * h->lds] = (REAL)s;
        for (int64_t i = r + 1; i <= Lc; i++) Nr[i] = ar * Nr[i] + w->D[i * ldd + r];
    }
}

/* One block's backward pass from its start memory S0, with Gad the
 * adjoint of its end memory on entry and of S0 on return. */
static void RS(bb_block)(bb_blk *b, const REAL *S0, REAL *Gad)
{
    const RS(falcon_grad_head) *g = b->g;
    const bb_work *w = b->w;
    const int64_t m = b->m, Lc = b->Lc, ldm = w->ldm, ldg = w->ldg;
    RS(bb_forward)(b, S0, 1);
    const int64_t G = b->G; /* the block's, once packed */
    for (int64_t j = 0; j < Lc; j++)
        for (int64_t c = 0; c < m; c++) w->dOb[j * ldm + c] = g->dO ? g->dO[(b->c0 + j) * b->h->ldo + c] : 0;
    for (int64_t i = 0; i < (Lc + 1) * w->ldd; i++) w->D[i] = 0;
    b->dOp = RS(bb_operand)(b, w->dOb, w->dOr, Lc, m, ldm);
    b->Gp = RS(bb_operand)(b, Gad, w->Gr, m, b->n, w->ldn);
    RS(bb_dR)(b, S0, Gad);
    if (b->h->regression && b->P > 0) RS(bb_lambda)(b);
    RS(bb_zero)(w->Wg, Lc, G, ldg);
    RS(bb_zero)(w->Cg, G, G, ldg);
    RS(bb_zero)(w->dY, G, m, ldm);
    RS(bb_zero)(w->Ln, G, m, ldm);
    RS(bb_zero)(w->Ln1, G, m, ldm);
    w->row[0] = 1.0;
    for (int64_t i = 1; i <= Lc; i++) {
        RS(bb_decay_row)(b, i);
        RS(bb_step_adjoint)(b, i - 1);
    }
    RS(bb_products)(b, Gad);
    RS(bb_dalpha)(b);
}

/* Every gradient the pass accumulates into, zeroed first. */
static void RS(bb_clear)(const RS(falcon_grad_head) *g)
{
    const RS(falcon_head) *h = &g->f;
    const int64_t n = h->n, m = h->m, keep = h->window - 1;
    for (int64_t t = 0; t < h->T; t++) {
        for (int64_t c = 0; c < n; c++) {
            g->dq[t * h->ldk + c] = 0, g->dk[t * h->ldk + c] = 0;
            if (g->dgain) g->dgain[t * h->ldk + c] = 0;
        }
        for (int64_t c = 0; c < m; c++) g->dv[t * h->ldv + c] = 0;
        g->dbeta[t * h->lds] = 0;
        if (g->dalpha) g->dalpha[t * h->lds] = 0;
    }
    if (g->dprev_key) memset(g->dprev_key, 0, sizeof(double) * (size_t)n);
    if (g->dhist_k) memset(g->dhist_k, 0, sizeof(double) * (size_t)(keep * n));
    if (g->dhist_v) memset(g->dhist_v, 0, sizeof(double) * (size_t)(keep * m));
}

/* 1 when every gradient written is finite. */
static int RS(bb_finite)(const RS(falcon_grad_head) *g, const REAL *Gad, int64_t ldn)
{
    const RS(falcon_head) *h = &g->f;
    const int64_t n = h->n, m = h->m;
    REAL ck = 0;
    for (int64_t t = 0; t < h->T; t++) {
        ck += RS(bb_nonfinite)(g->dq + t * h->ldk, n) + RS(bb_nonfinite)(g->dk + t * h->ldk, n);
        if (g->dgain) ck += RS(bb_nonfinite)(g->dgain + t * h->ldk, n);
        ck += RS(bb_nonfinite)(g->dv + t * h->ldv, m);
        ck += g->dbeta[t * h->lds] - g->dbeta[t * h->lds];
        if (g->dalpha) ck += g->dalpha[t * h->lds] - g->dalpha[t * h->lds];
    }
    for (int64_t r = 0; r < m; r++) ck += RS(bb_nonfinite)(Gad + r * ldn, n);
    return ck == 0;
}

/* The blocks' starts (RS(block_length): blocks of L steps, ended early
 * before a near-reset); returns their count. starts may be NULL. */
static int64_t RS(bb_blocks)(const RS(falcon_head) *h, int64_t L, int64_t *starts)
{
    int64_t nb = 0;
    for (int64_t c0 = 0; c0 < h->T; c0 += RS(block_length)(h, c0, L)) {
        if (starts) starts[nb] = c0;
        nb++;
    }
    if (starts) starts[nb] = h->T;
    return nb;
}

static void RS(bb_run_forward)(bb_blk *b, int64_t k, REAL *S)
{
    b->c0 = b->w->starts[k];
    b->Lc = b->w->starts[k + 1] - b->c0;
    RS(bb_forward)(b, S, 0);
    RS(bb_end_state)(b, S);
}

/* The sweeps (the header's "Recomputation"): forward, keeping the
 * checkpoints and the last segment's starts, then segment by segment in
 * reverse, each segment's starts recomputed from its checkpoint (the last
 * one's are kept), its blocks run backwards. An edge of the range (the
 * header's) met in a block's keys, or in the memories of the first sweep
 * or the adjoints of the reverse one, stops them with b->edge set. */
static void RS(bb_sweeps)(bb_blk *b)
{
    const bb_work *w = b->w;
    const int64_t nb = w->nb, segl = w->segl, nseg = (nb + segl - 1) / segl, last0 = (nseg - 1) * segl;
    const size_t Mx = (size_t)(b->m * w->ldn), bytes = sizeof(REAL) * Mx;
    const int reg = b->h->regression;
    double aS = reg ? RS(memory_amax)(w->S, w->ldn, b->m, b->n) : 0, aG = 0;
    for (int64_t k = 0; k < nb; k++) {
        if (k % segl == 0) memcpy(w->ckpt + (size_t)(k / segl) * Mx, w->S, bytes);
        if (k >= last0) memcpy(w->seg + (size_t)(k - last0) * Mx, w->S, bytes);
        if (k + 1 < nb) {
            RS(bb_run_forward)(b, k, w->S);
            RS(bb_edge_cancel)(b, w->S, &aS);
        }
        if (b->edge) return;
    }
    if (reg) aG = RS(memory_amax)(w->Gad, w->ldn, b->m, b->n);
    for (int64_t s = nseg - 1; s >= 0; s--) {
        const int64_t k0 = s * segl, k1 = k0 + segl < nb ? k0 + segl : nb;
        if (s < nseg - 1) {
            memcpy(w->S, w->ckpt + (size_t)s * Mx, bytes);
            for (int64_t k = k0; k < k1; k++) {
                memcpy(w->seg + (size_t)(k - k0) * Mx, w->S, bytes);
                if (k + 1 < k1) RS(bb_run_forward)(b, k, w->S);
            }
        }
        for (int64_t k = k1 - 1; k >= k0; k--) {
            b->c0 = w->starts[k];
            b->Lc = w->starts[k + 1] - b->c0;
            RS(bb_block)(b, w->seg + (size_t)(k - k0) * Mx, w->Gad);
            RS(bb_edge_cancel)(b, w->Gad, &aG);
            if (b->edge) return;
        }
    }
}

/* The blocked forms' backward pass of one head (head.h), blocks of L
 * steps: gradients into g's tensors, dS0 the adjoint of the memory the
 * call starts from. */
static falcon_status FW(falcon_backward_blocked)(const RS(falcon_grad_head) *g, int64_t L)
{
    const RS(falcon_head) *h = &g->f;
    const int64_t n = h->n, m = h->m, T = h->T;
    if (L > T) L = T > 0 ? T : 1;
    if (L < 1) L = 1;
    RS(bb_clear)(g);
    const int64_t nb = RS(bb_blocks)(h, L, NULL);
    bb_work w;
    example_src src;
    if (RS(bb_open)(&w, h, L, nb)) return FALCON_E_NOMEM;
    if (RS(examples_open)(&src, h)) {
        h->work->put(w.mem, w.mem_bytes);
        return FALCON_E_NOMEM;
    }
    RS(bb_blocks)(h, L, w.starts);
    const double *S_start = h->S_in ? h->S_in : h->S;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            w.S[r * w.ldn + c] = (REAL)S_start[r * n + c];
            w.Gad[r * w.ldn + c] = g->dS_T ? (REAL)g->dS_T[r * n + c] : 0;
        }
    bb_blk b = {.g = g, .h = h, .uk = h->uk, .src = &src, .w = &w, .n = n, .m = m, .drop = h->operand_drop};
    if (nb > 0) RS(bb_sweeps)(&b);
    if (b.edge) { /* the header's "The edges of the range" */
        RS(examples_close)(&src);
        h->work->put(w.mem, w.mem_bytes);
        return FW(fw_backward_recurrent)(g);
    }
    if (g->dS0)
        for (int64_t r = 0; r < m; r++)
            for (int64_t c = 0; c < n; c++) g->dS0[r * n + c] = (double)w.Gad[r * w.ldn + c];
    const int finite = RS(bb_finite)(g, w.Gad, w.ldn);
    RS(examples_close)(&src);
    h->work->put(w.mem, w.mem_bytes);
    return finite ? FALCON_OK : FALCON_E_OVERFLOW;
}
