/*
 * The chunk-parallel form (SPEC 2), one head, one precision, blocks of L
 * steps. Inside a block every pair (step j, example l in E_j) is a term p;
 * the pseudo-values R solve the unit lower-triangular system
 *     (I + A) R = RHS,  A[p][p'] = eta_j F[j][j'] (z_l' . x_l) for j' < j,
 *                       RHS_p   = eta_j (y_l - F[j][0] S_0 x_l)   (regression)
 *     R_p = eta_j y_l                                             (inner product)
 * then O = (F (.) Q Z^T) R + F[.][0] (.) Q S_0^T and
 *      S_L = F[L][0] S_0 + sum_p F[L][j] r_p z_l^T.
 * F[i][j] = alpha_{j+1} ... alpha_i comes one row at a time from
 * falcon_decay_row_advance: no product ever spans more than one block, and no
 * factor is a quotient of two cumulative products (SPEC section 3).
 * Products between examples (Q Z^T, X Z^T, X S_0^T) are formed once per
 * example pair and indexed by term, since a window repeats each example in
 * up to W terms.
 *
 * The masked-parallel form is this function with a single block spanning
 * the whole call (capped, see falcon_parallel_block in src/run.c): the same
 * explicit masked matrices, O(T^2) work.
 */
falcon_status RS(falcon_blocked)(const RS(falcon_head) *h, int64_t L)
{
    const int64_t n = h->n, m = h->m, W = h->window, T = h->T;
    const RS(falcon_uk) *uk = h->uk;
    if (L > T) L = T > 0 ? T : 1;
    const int64_t Gmax = L + W - 1, Pmax = L * W;

    RS(example_src) src;
    if (RS(examples_open)(&src, h)) return FALCON_E_NOMEM;
    size_t nreal = (size_t)(m * n + 2 * Gmax * n + Gmax + L * n + Gmax * Gmax + L * Gmax + L * m +
                            Gmax * m + Pmax * Pmax + Pmax * m + L * Pmax + Gmax * m + L * m + L);
    REAL *buf = malloc(sizeof(REAL) * nreal);
    double *row = malloc(sizeof(double) * (size_t)(2 * (L + 1)));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * Pmax + L + 1));
    const REAL **yrow = malloc(sizeof(REAL *) * (size_t)Gmax);
    if (!buf || !row || !idx || !yrow) {
        free(buf); free(row); free(idx); free(yrow);
        RS(examples_close)(&src);
        return FALCON_E_NOMEM;
    }
    REAL *S = buf, *Xg = S + m * n, *Zbuf = Xg + Gmax * n, *xz = Zbuf + Gmax * n;
    REAL *Qf = xz + Gmax, *Kz = Qf + L * n, *Qz = Kz + Gmax * Gmax, *S0q = Qz + L * Gmax;
    REAL *U = S0q + L * m, *A = U + Gmax * m, *R = A + Pmax * Pmax, *Wm = R + Pmax * m;
    REAL *Rg = Wm + L * Pmax, *O = Rg + Gmax * m, *eta = O + L * m;
    double *f0 = row + (L + 1);
    int64_t *term_l = idx, *term_j = idx + Pmax, *first = idx + 2 * Pmax;
    RS(load_memory)(S, h->S, m * n);

    for (int64_t c0 = 0; c0 < T; c0 += L) {
        const int64_t Lc = T - c0 < L ? T - c0 : L;

        /* The examples this block's windows reach: [g_lo, g_lo + G). */
        int64_t t_first = c0 > src.ex.shift ? c0 : src.ex.shift, G = 0, g_lo = 0;
        if (t_first < c0 + Lc) {
            int64_t e_first = falcon_example_of_step(&src.ex, t_first);
            g_lo = falcon_window_first(&src.ex, e_first);
            G = falcon_example_of_step(&src.ex, c0 + Lc - 1) - g_lo + 1;
        }
        const REAL *Zg = h->gain ? Zbuf : Xg;
        for (int64_t g = 0; g < G; g++) {
            const REAL *key;
            RS(example_get)(&src, g_lo + g, &key, &yrow[g]);
            RS_FEATURIZE(h->phi, key, Xg + g * n, n);
            if (h->gain) { /* W = 1: every example here was revealed in this block */
                int64_t t = falcon_step_of_example(&src.ex, g_lo + g);
                RS(write_direction)(h->gain + t * h->ldk, Xg + g * n, Zbuf + g * n, n);
            }
            xz[g] = RS(dot)(Xg + g * n, Zg + g * n, n);
        }
        for (int64_t j = 0; j < Lc; j++)
            RS_FEATURIZE(h->phi, h->q + (c0 + j) * h->ldk, Qf + j * n, n);

        /* Terms, ordered by step; eta per step from the shared normaliser. */
        int64_t P = 0;
        for (int64_t j = 0; j < Lc; j++) {
            first[j] = P;
            int64_t e = falcon_example_of_step(&src.ex, c0 + j);
            if (e < 0) continue;
            REAL sum = 0;
            for (int64_t l = falcon_window_first(&src.ex, e); l <= e; l++) {
                term_l[P] = l - g_lo;
                term_j[P] = j;
                P++;
                sum += xz[l - g_lo];
            }
            eta[j] = FALCON_ETA(h->beta[(c0 + j) * h->lds], h->eps, sum);
        }
        first[Lc] = P;

        uk->gemm_nt(Lc, G, n, Qf, n, Zg, n, 0, Qz, G);
        uk->gemm_nt(Lc, m, n, Qf, n, S, n, 0, S0q, m);
        if (h->regression) {
            uk->gemm_nt(G, G, n, Xg, n, Zg, n, 0, Kz, G);
            uk->gemm_nt(G, m, n, Xg, n, S, n, 0, U, m);
        }

        /* Row i of F gives the system rows of step i and output row i. */
        row[0] = 1.0;
        f0[0] = 1.0;
        for (int64_t i = 1; i <= Lc; i++) {
            const int64_t j = i - 1;
            falcon_decay_row_advance(row, i, h->alpha ? (double)h->alpha[(c0 + j) * h->lds] : 1.0);
            f0[i] = row[0];
            for (int64_t p = first[j]; p < first[i]; p++) {
                const int64_t l = term_l[p];
                const REAL *y = yrow[l];
                REAL *r = R + p * m, *a = A + p * P;
                if (!h->regression) {
                    for (int64_t c = 0; c < m; c++) r[c] = eta[j] * y[c];
                    continue;
                }
                const REAL d0 = (REAL)row[0];
                for (int64_t c = 0; c < m; c++) r[c] = eta[j] * (y[c] - d0 * U[l * m + c]);
                for (int64_t q = 0; q < first[j]; q++)
                    a[q] = eta[j] * (REAL)row[term_j[q] + 1] * Kz[l * G + term_l[q]];
                for (int64_t q = first[j]; q < P; q++) a[q] = 0;
            }
            REAL *w = Wm + j * P;
            for (int64_t p = 0; p < first[i]; p++)
                w[p] = (REAL)row[term_j[p] + 1] * Qz[j * G + term_l[p]];
            for (int64_t p = first[i]; p < P; p++) w[p] = 0;
        }
        if (h->regression) uk->trsm_unit_lower(P, m, A, P, R, m);

        uk->gemm_nn(Lc, m, P, Wm, P, R, m, 0, O, m);
        for (int64_t j = 0; j < Lc; j++) {
            REAL *o = h->out + (c0 + j) * h->ldo;
            const REAL d = (REAL)f0[j + 1];
            for (int64_t c = 0; c < m; c++) o[c] = O[j * m + c] + d * S0q[j * m + c];
        }

        /* End state: row is now F[Lc][.]; pseudo-values gathered per example. */
        for (int64_t i = 0; i < G * m; i++) Rg[i] = 0;
        for (int64_t p = 0; p < P; p++) {
            const REAL d = (REAL)row[term_j[p] + 1];
            REAL *rg = Rg + term_l[p] * m;
            for (int64_t c = 0; c < m; c++) rg[c] += d * R[p * m + c];
        }
        uk->rank_update(m, n, G, (REAL)f0[Lc], S, n, Rg, m, Zg, n);
    }
    RS(store_memory)(h->S, S, m * n);
    free(buf); free(row); free(idx); free(yrow);
    RS(examples_close)(&src);
    return FALCON_OK;
}
