/*
 * The recurrent form (SPEC 1.2), one head, one precision. Each step is two
 * passes over the memory whatever the variant:
 *   1. P = S_{t-1} [x_1 .. x_k, phi(q_t)]^T       (gemm_nt, k = |E_t|)
 *   2. S_t = alpha S_{t-1} + sum_i eta e_i z_i^T  (rank_update, decay fused)
 * with e_i = y_i - alpha P_i (regression) or y_i (inner product), and the
 * read o_t = alpha P_q + eta sum_i (z_i . q) e_i taken from pass 1, which
 * equals S_t phi(q_t) without a third pass. Decay is applied to S directly
 * (no lazy scale), so it needs no renormalization.
 */
falcon_status RS(falcon_recurrent)(const RS(falcon_head) *h)
{
    const int64_t n = h->n, m = h->m, W = h->window;
    const RS(falcon_uk) *uk = h->uk;
    RS(example_src) src;
    if (RS(examples_open)(&src, h)) return FALCON_E_NOMEM;

    /* X: the window's keys oldest first, then phi(q) as row k. */
    size_t count = (size_t)(m * n + (W + 1) * n + W * m + n + m * (W + 1) + W * m + W + W);
    REAL *buf = malloc(sizeof(REAL) * count);
    if (!buf) {
        RS(examples_close)(&src);
        return FALCON_E_NOMEM;
    }
    REAL *S = buf, *X = S + m * n, *Y = X + (W + 1) * n, *Zg = Y + W * m;
    REAL *P = Zg + n, *E = P + m * (W + 1), *xz = E + W * m, *zq = xz + W;
    RS(load_memory)(S, h->S, m * n);

    int64_t cnt = 0; /* examples in the window */
    for (int64_t e = 0; e < src.ex.carried; e++) { /* at most W - 1 carried */
        const REAL *key, *val;
        RS(example_get)(&src, e, &key, &val);
        RS_FEATURIZE(h->phi, key, X + cnt * n, n);
        memcpy(Y + cnt * m, val, sizeof(REAL) * (size_t)m);
        xz[cnt] = RS(dot)(X + cnt * n, X + cnt * n, n);
        cnt++;
    }

    for (int64_t t = 0; t < h->T; t++) {
        const REAL a = h->alpha ? h->alpha[t * h->lds] : (REAL)1;
        const int64_t e = falcon_example_of_step(&src.ex, t);
        if (e >= 0) {
            if (cnt == W) { /* slide the window by one */
                memmove(X, X + n, sizeof(REAL) * (size_t)((W - 1) * n));
                memmove(Y, Y + m, sizeof(REAL) * (size_t)((W - 1) * m));
                memmove(xz, xz + 1, sizeof(REAL) * (size_t)(W - 1));
                cnt--;
            }
            const REAL *key, *val;
            RS(example_get)(&src, e, &key, &val);
            RS_FEATURIZE(h->phi, key, X + cnt * n, n);
            memcpy(Y + cnt * m, val, sizeof(REAL) * (size_t)m);
            xz[cnt] = RS(dot)(X + cnt * n, X + cnt * n, n);
            cnt++;
        }
        const int64_t k = e >= 0 ? cnt : 0;
        REAL *xq = X + k * n;
        RS_FEATURIZE(h->phi, h->q + t * h->ldk, xq, n);
        uk->gemm_nt(m, k + 1, n, S, n, X, n, 0, P, k + 1);

        REAL *o = h->out + t * h->ldo;
        if (k == 0) {
            for (int64_t r = 0; r < m; r++) o[r] = a * P[r * (k + 1)];
            uk->rank_update(m, n, 0, a, S, n, E, m, X, n);
            continue;
        }
        const REAL *Z = X;
        REAL xzsum = 0;
        if (h->gain) { /* Falcon-2/2A: W = 1, z = g_t * x */
            RS(write_direction)(h->gain + t * h->ldk, X, Zg, n);
            Z = Zg;
            xzsum = RS(dot)(X, Zg, n);
        } else {
            for (int64_t i = 0; i < k; i++) xzsum += xz[i];
        }
        const REAL eta = FALCON_ETA(h->beta[t * h->lds], h->eps, xzsum);
        for (int64_t i = 0; i < k; i++) zq[i] = RS(dot)(Z + i * n, xq, n);
        for (int64_t r = 0; r < m; r++) {
            const REAL *pr = P + r * (k + 1);
            REAL acc = a * pr[k];
            for (int64_t i = 0; i < k; i++) {
                REAL err = h->regression ? Y[i * m + r] - a * pr[i] : Y[i * m + r];
                E[i * m + r] = eta * err;
                acc += zq[i] * E[i * m + r];
            }
            o[r] = acc;
        }
        uk->rank_update(m, n, k, a, S, n, E, m, Z, n);
    }
    RS(store_memory)(h->S, S, m * n);
    free(buf);
    RS(examples_close)(&src);
    return FALCON_OK;
}
