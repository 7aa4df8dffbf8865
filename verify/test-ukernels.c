/*
 * The micro-kernels alone: every table of the registry that runs here (each
 * CPU backend, fp32 and fp64, the scalar one included, and a backend's
 * tables for a 256-bit datapath, which must give the same bits) against the
 * operation evaluated in long double, outside the library.
 *
 * Sizes: each dimension in turn takes every value from 1 to 2 x tile + 1
 * while the other two take 1, 3 and their largest value, where tile is the
 * largest block any table that runs here tiles it by (each table says:
 * tile_rows, tile_cols): a vectorized dimension (gemm_nt's K, gemm_nn's and
 * rank_update's columns, trsm's columns) by tile_cols, 64 with fp32 AVX-512's
 * 4 vectors of 16 lanes; a row dimension by tile_rows, 16 there (4 x NT_MR).
 * Every leading dimension is wider than its rows by 0 to 3
 * elements, and every matrix starts at each element offset of a 64-byte
 * line in turn (every alignment a vector load can meet).
 *
 * Poison: everything a kernel may not read (padding between rows, the guard
 * cells around each matrix, C when beta = 0, the diagonal and upper part of
 * trsm's L) is NaN, so a tail that reads one element too many makes a NaN;
 * everything it may not write is compared bitwise before and after. A tail
 * that drops an element leaves out one term of at least 1/4 (fp32 inputs of
 * magnitude in [1/2, 1]) for gemm and rank_update, and of at least 1/(48 P)
 * for trsm (below), far above the error bound.
 *
 * Error bounds (Higham, Accuracy and Stability of Numerical Algorithms,
 * 3.1 and 8.1), with gamma(k) = k u / (1 - k u), whatever the order of the
 * sums and with or without FMA:
 *   gemm: |C - C*| <= gamma(K + 2) (|beta| |C0| + sum_k |A_ik| |B_kj|);
 *   rank_update: |S - S*| <= gamma(k + 2) (|a| |S0| + sum_i |E_ri| |Z_ic|);
 *   trsm: (I + L + dT) X = X0 with |dT| <= gamma(P) |I + L|, so
 *         |X - X*| <= gamma(P) |(I + L)^-1| |I + L| |X|;
 *   update_read: S as rank_update, and P = X S from the S it stored:
 *         |P - X S| <= gamma(m + 2) |X| |S|.
 * update_read must also give bitwise what the recurrent form assumes when
 * a call or a time block starts: the same S and P as rank_update followed
 * by update_read with nothing to write.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "../src/backends.h"

enum { GUARD = 64 };

/* ---- the tables that run here ---- */
typedef struct table {
    const char *name;
    int half; /* the backend's tables for a 256-bit datapath */
    const falcon_uk_f32 *f32;
    const falcon_uk_f64 *f64;
} table;

static int tables_here(table *t)
{
    int n = 0;
    for (int b = 0; b < FALCON_BACKEND_ROWS; b++) {
        const falcon_backend_info *be = falcon_backend_info_of((falcon_backend)b);
        if (be->f32.uk && falcon_backend_available((falcon_backend)b)) {
            t[n++] = (table){be->name, 0, be->f32.uk, be->f64.uk};
            /* the tables for a 256-bit datapath too, on every machine */
            if (be->f32_half.uk) t[n++] = (table){be->name, 1, be->f32_half.uk, be->f64_half.uk};
        }
    }
    return n;
}

/* ---- matrices in one precision, with poisoned padding and guards ---- */
typedef struct mat {
    int f32;
    int64_t rows, cols, ld, off, count; /* count: elements from base, guards included */
    unsigned char *base, *saved;
    void *p; /* element [0][0] */
} mat;

static size_t esize(int f32) { return f32 ? sizeof(float) : sizeof(double); }

static void mat_set(mat *a, int64_t i, int64_t j, double x)
{
    if (a->f32) ((float *)a->p)[i * a->ld + j] = (float)x;
    else ((double *)a->p)[i * a->ld + j] = x;
}

static double mat_get(const mat *a, int64_t i, int64_t j)
{
    return a->f32 ? (double)((const float *)a->p)[i * a->ld + j] : ((const double *)a->p)[i * a->ld + j];
}

/* rows x cols, leading dimension cols + pad, starting `off` elements past a
 * 64-byte boundary; every cell NaN. */
static mat mat_new(int f32, int64_t rows, int64_t cols, int64_t pad, int64_t off)
{
    mat a = {f32, rows, cols, cols + pad, off, 0, NULL, NULL, NULL};
    const size_t es = esize(f32);
    a.count = GUARD + off + rows * a.ld + GUARD;
    const size_t bytes = (es * (size_t)a.count + 63) / 64 * 64;
    a.base = aligned_alloc(64, bytes);
    a.saved = malloc(bytes);
    cr_assert(a.base && a.saved);
    for (int64_t i = 0; i < a.count; i++) {
        if (f32) ((float *)a.base)[i] = NAN;
        else ((double *)a.base)[i] = NAN;
    }
    a.p = a.base + es * (size_t)(GUARD + off);
    return a;
}

static void mat_free(mat *a)
{
    free(a->base);
    free(a->saved);
}

static void mat_save(mat *a) { memcpy(a->saved, a->base, esize(a->f32) * (size_t)a->count); }

/* A copy, poison included, saved (for an output each table starts from). */
static mat mat_clone(const mat *a)
{
    mat c = mat_new(a->f32, a->rows, a->cols, a->ld - a->cols, a->off);
    memcpy(c.base, a->base, esize(a->f32) * (size_t)a->count);
    mat_save(&c);
    return c;
}

/* Elements outside the rows x cols cells (all of them if !out) that changed. */
static int64_t mat_changed_outside(const mat *a, int out)
{
    const size_t es = esize(a->f32);
    const int64_t start = ((unsigned char *)a->p - a->base) / (int64_t)es;
    int64_t changed = 0;
    for (int64_t e = 0; e < a->count; e++) {
        const int64_t rel = e - start;
        if (out && rel >= 0 && rel / a->ld < a->rows && rel % a->ld < a->cols) continue;
        changed += memcmp(a->base + es * (size_t)e, a->saved + es * (size_t)e, es) != 0;
    }
    return changed;
}

/* ---- inputs: magnitudes in [1/2, 1], random signs, exact in fp32 ---- */
static uint64_t rng_state;

static double draw(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double mag = 0.5 + (double)(z >> 41) * 0x1p-24; /* 23 bits: exact in fp32 */
    return (z & 1) ? -mag : mag;
}

static void mat_fill(mat *a, double scale)
{
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < a->cols; j++) mat_set(a, i, j, scale * draw());
}

static double gamma_k(int f32, int64_t k)
{
    const double u = f32 ? 0x1p-24 : 0x1p-53;
    return (double)k * u / (1 - (double)k * u);
}

/* ---- one check: expected value and bound per output cell ---- */
typedef struct verdict {
    int64_t bad, changed;
    char first[200];
} verdict;

static void judge(verdict *v, const mat *out, const long double *want, const long double *bound)
{
    for (int64_t i = 0; i < out->rows; i++)
        for (int64_t j = 0; j < out->cols; j++) {
            const long double got = mat_get(out, i, j), w = want[i * out->cols + j];
            if (!(fabsl(got - w) <= bound[i * out->cols + j])) {
                if (!v->bad++)
                    snprintf(v->first, sizeof v->first, "[%lld][%lld] = %.9Lg, want %.9Lg (bound %.3Lg)",
                             (long long)i, (long long)j, got, w, bound[i * out->cols + j]);
            }
        }
    v->changed += mat_changed_outside(out, 1);
}

/* The sweep: dimension d in turn over 1..lim[d], the others over {1, 3, lim}. */
typedef void (*shape_fn)(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails);

static int64_t sweep(const int64_t lim[3], shape_fn fn, const table *t, int nt)
{
    int64_t fails = 0, idx = 0;
    for (int f32 = 1; f32 >= 0; f32--)
        for (int d = 0; d < 3; d++)
            for (int64_t x = 1; x <= lim[d]; x++)
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++) {
                        const int64_t pick[3] = {1, 3, 0};
                        int64_t dim[3];
                        const int o1 = (d + 1) % 3, o2 = (d + 2) % 3;
                        dim[d] = x;
                        dim[o1] = pick[a] ? pick[a] : lim[o1];
                        dim[o2] = pick[b] ? pick[b] : lim[o2];
                        if (dim[o1] > lim[o1] || dim[o2] > lim[o2]) continue;
                        if ((!pick[a] && lim[o1] <= 3) || (!pick[b] && lim[o2] <= 3)) continue; /* seen */
                        fn(f32, dim, idx++, t, nt, &fails);
                    }
    return fails;
}

static int64_t offset_of(int f32, int64_t idx, int64_t salt)
{
    return (idx + salt) % (int64_t)(64 / esize(f32));
}

static void report(int64_t *fails, const verdict *v, const char *what, const table *t, int f32)
{
    if (!v->bad && !v->changed) return;
    if ((*fails)++ < 8)
        cr_log_error("%s%s %s %s: %lld wrong, %lld written outside; first %s", t->name,
                     t->half ? " (half width)" : "", f32 ? "fp32" : "fp64", what, (long long)v->bad,
                     (long long)v->changed, v->bad ? v->first : "");
}

/* ---- gemm_nt and gemm_nn: C[M][N] = beta C + A B^T or A B ---- */
static void gemm_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails,
                       int transposed)
{
    const int64_t M = dim[0], N = dim[1], K = dim[2];
    mat A = mat_new(f32, M, K, idx % 4, offset_of(f32, idx, 0));
    mat B = transposed ? mat_new(f32, N, K, (idx / 4) % 4, offset_of(f32, idx, 5))
                       : mat_new(f32, K, N, (idx / 4) % 4, offset_of(f32, idx, 5));
    mat C0 = mat_new(f32, M, N, (idx + 1) % 4, offset_of(f32, idx, 11));
    mat_fill(&A, 1);
    mat_fill(&B, 1);
    long double *want = malloc(sizeof(long double) * (size_t)(2 * M * N));
    cr_assert(want);
    long double *bound = want + M * N;
    for (int with_beta = 0; with_beta < 2; with_beta++) {
        /* beta = 0: C stays NaN, and must not be read. */
        const double beta = with_beta ? -0.75 : 0.0;
        if (with_beta) mat_fill(&C0, 1);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                long double s = 0, s_abs = 0;
                for (int64_t k = 0; k < K; k++) {
                    const long double p = (long double)mat_get(&A, i, k) *
                                          (transposed ? mat_get(&B, j, k) : mat_get(&B, k, j));
                    s += p;
                    s_abs += fabsl(p);
                }
                if (with_beta) {
                    s += (long double)beta * mat_get(&C0, i, j);
                    s_abs += fabsl((long double)beta * mat_get(&C0, i, j));
                }
                want[i * N + j] = s;
                bound[i * N + j] = gamma_k(f32, K + 2) * s_abs;
            }
        mat_save(&A);
        mat_save(&B);
        for (int ti = 0; ti < nt; ti++) {
            mat C = mat_clone(&C0);
            if (f32) {
                void (*fn)(int64_t, int64_t, int64_t, const float *, int64_t, const float *, int64_t, float,
                           float *, int64_t) = transposed ? t[ti].f32->gemm_nt : t[ti].f32->gemm_nn;
                fn(M, N, K, A.p, A.ld, B.p, B.ld, (float)beta, C.p, C.ld);
            } else {
                void (*fn)(int64_t, int64_t, int64_t, const double *, int64_t, const double *, int64_t, double,
                           double *, int64_t) = transposed ? t[ti].f64->gemm_nt : t[ti].f64->gemm_nn;
                fn(M, N, K, A.p, A.ld, B.p, B.ld, beta, C.p, C.ld);
            }
            verdict v = {0};
            judge(&v, &C, want, bound);
            v.changed += mat_changed_outside(&A, 0) + mat_changed_outside(&B, 0);
            char what[160];
            snprintf(what, sizeof what, "%s M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld beta=%g",
                     transposed ? "gemm_nt" : "gemm_nn", (long long)M, (long long)N, (long long)K,
                     (long long)A.ld, (long long)B.ld, (long long)C.ld, beta);
            report(fails, &v, what, &t[ti], f32);
            mat_free(&C);
        }
    }
    free(want);
    mat_free(&A);
    mat_free(&B);
    mat_free(&C0);
}

static void gemm_nt_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails)
{
    gemm_shape(f32, dim, idx, t, nt, fails, 1);
}

static void gemm_nn_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails)
{
    gemm_shape(f32, dim, idx, t, nt, fails, 0);
}

/* The expected S' = a S0 + E Z of rank_update (E [m][k]), or a S0 + E^T Z
 * of update_read (E [k][m]: e_rows_k), in long double, and its bound, for
 * each of the m x n cells. */
static void rank_update_want(int f32, int64_t m, int64_t n, int64_t k, double a, const mat *E, int e_rows_k,
                             const mat *Z, const mat *S0, long double *want, long double *bound)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            long double s = (long double)a * mat_get(S0, r, c), s_abs = fabsl(s);
            for (int64_t i = 0; i < k; i++) {
                const double e = e_rows_k ? mat_get(E, i, r) : mat_get(E, r, i);
                const long double p = (long double)e * mat_get(Z, i, c);
                s += p;
                s_abs += fabsl(p);
            }
            want[r * n + c] = s;
            bound[r * n + c] = gamma_k(f32, k + 2) * s_abs;
        }
}

/* ---- rank_update: S[m][n] = a S + E[m][k] Z[k][n] ---- */
static void rank_update_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt,
                              int64_t *fails)
{
    const int64_t m = dim[0], n = dim[1], k = dim[2];
    const double a = idx % 2 ? 1.0 : 0.625;
    mat E = mat_new(f32, m, k > 0 ? k : 1, idx % 4, offset_of(f32, idx, 3));
    mat Z = mat_new(f32, k, n, (idx / 4) % 4, offset_of(f32, idx, 7));
    mat S0 = mat_new(f32, m, n, (idx + 2) % 4, offset_of(f32, idx, 13));
    mat_fill(&E, 1);
    mat_fill(&Z, 1);
    mat_fill(&S0, 1);
    long double *want = malloc(sizeof(long double) * (size_t)(2 * m * n));
    cr_assert(want);
    long double *bound = want + m * n;
    rank_update_want(f32, m, n, k, a, &E, 0, &Z, &S0, want, bound);
    mat_save(&E);
    mat_save(&Z);
    for (int ti = 0; ti < nt; ti++) {
        mat S = mat_clone(&S0);
        if (f32) t[ti].f32->rank_update(m, n, k, (float)a, S.p, S.ld, E.p, E.ld, Z.p, Z.ld);
        else t[ti].f64->rank_update(m, n, k, a, S.p, S.ld, E.p, E.ld, Z.p, Z.ld);
        verdict v = {0};
        judge(&v, &S, want, bound);
        v.changed += mat_changed_outside(&E, 0) + mat_changed_outside(&Z, 0);
        char what[160];
        snprintf(what, sizeof what, "rank_update m=%lld n=%lld k=%lld lds=%lld lde=%lld ldz=%lld a=%g",
                 (long long)m, (long long)n, (long long)k, (long long)S.ld, (long long)E.ld, (long long)Z.ld, a);
        report(fails, &v, what, &t[ti], f32);
        mat_free(&S);
    }
    free(want);
    mat_free(&E);
    mat_free(&Z);
    mat_free(&S0);
}

/* ---- trsm_unit_lower: X[P][m] <- (I + L)^-1 X ----
 * L's entries are at most 1/(4P) in magnitude (so |X| <= 4/3 and every
 * |X_q| >= 1/6 by induction over the rows), its diagonal and upper part NaN. */
static void trsm_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails)
{
    const int64_t P = dim[0], m = dim[1]; /* dim[2] is always 1 */
    mat L = mat_new(f32, P, P, idx % 4, offset_of(f32, idx, 1));
    mat X0 = mat_new(f32, P, m, (idx / 4) % 4, offset_of(f32, idx, 9));
    for (int64_t i = 0; i < P; i++)
        for (int64_t j = 0; j < i; j++) mat_set(&L, i, j, draw() / (4.0 * (double)P));
    mat_fill(&X0, 1);
    /* T = I + L and its inverse, in long double. */
    long double *T = calloc((size_t)(2 * P * P + P * m), sizeof(long double));
    cr_assert(T);
    long double *Ti = T + P * P, *want = Ti + P * P;
    for (int64_t i = 0; i < P; i++) {
        for (int64_t j = 0; j < i; j++) T[i * P + j] = mat_get(&L, i, j);
        T[i * P + i] = 1;
    }
    for (int64_t c = 0; c < P; c++)
        for (int64_t i = 0; i < P; i++) {
            long double s = i == c;
            for (int64_t j = 0; j < i; j++) s -= T[i * P + j] * Ti[j * P + c];
            Ti[i * P + c] = s;
        }
    for (int64_t i = 0; i < P; i++)
        for (int64_t c = 0; c < m; c++) {
            long double s = 0;
            for (int64_t j = 0; j <= i; j++) s += Ti[i * P + j] * mat_get(&X0, j, c);
            want[i * m + c] = s;
        }
    mat_save(&L);
    long double *bound = malloc(sizeof(long double) * (size_t)(2 * P * m));
    cr_assert(bound);
    long double *w = bound + P * m;
    for (int ti = 0; ti < nt; ti++) {
        mat X = mat_clone(&X0);
        if (f32) t[ti].f32->trsm_unit_lower(P, m, L.p, L.ld, X.p, X.ld);
        else t[ti].f64->trsm_unit_lower(P, m, L.p, L.ld, X.p, X.ld);
        /* gamma(P) |T^-1| (|T| |X|), with X the computed result. */
        for (int64_t i = 0; i < P; i++)
            for (int64_t c = 0; c < m; c++) {
                long double s = 0;
                for (int64_t j = 0; j <= i; j++) s += fabsl(T[i * P + j]) * fabsl((long double)mat_get(&X, j, c));
                w[i * m + c] = s;
            }
        for (int64_t i = 0; i < P; i++)
            for (int64_t c = 0; c < m; c++) {
                long double s = 0;
                for (int64_t j = 0; j <= i; j++) s += fabsl(Ti[i * P + j]) * w[j * m + c];
                bound[i * m + c] = gamma_k(f32, P) * s;
            }
        verdict v = {0};
        judge(&v, &X, want, bound);
        v.changed += mat_changed_outside(&L, 0);
        char what[160];
        snprintf(what, sizeof what, "trsm_unit_lower P=%lld m=%lld ldl=%lld ldx=%lld", (long long)P, (long long)m,
                 (long long)L.ld, (long long)X.ld);
        report(fails, &v, what, &t[ti], f32);
        mat_free(&X);
    }
    free(bound);
    free(T);
    mat_free(&L);
    mat_free(&X0);
}

/* a *= f, element by element in the matrix's precision (a float product
 * of two floats is exact in double, so rounding it once is float's) */
static void mat_scale(mat *a, double f)
{
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < a->cols; j++) mat_set(a, i, j, mat_get(a, i, j) * f);
}

/* update_read on (S, P), and on (S2, P2) the same write by rank_update
 * (its coefficients Et = E^T) followed by update_read with nothing to
 * write: the two must agree bit for bit (the recurrent form starts calls
 * and time blocks that way). A fold f != 1 is, on (S2, P2), S2 *= f first. */
static void update_read_both_ways(int f32, const table *t, int64_t m, int64_t n, int64_t k, double a, double f,
                                  int64_t r, const mat *E, const mat *Et, const mat *Z, const mat *X, mat *S, mat *P,
                                  mat *S2, mat *P2)
{
    if (f != 1) mat_scale(S2, f);
    if (f32) {
        t->f32->update_read(m, n, k, (float)a, (float)f, S->p, S->ld, E->p, E->ld, Z->p, Z->ld, r, X->p, X->ld, P->p,
                            P->ld);
        t->f32->rank_update(m, n, k, (float)a, S2->p, S2->ld, Et->p, Et->ld, Z->p, Z->ld);
        t->f32->update_read(m, n, 0, 1.0f, 1.0f, S2->p, S2->ld, E->p, E->ld, Z->p, Z->ld, r, X->p, X->ld, P2->p,
                            P2->ld);
    } else {
        t->f64->update_read(m, n, k, a, f, S->p, S->ld, E->p, E->ld, Z->p, Z->ld, r, X->p, X->ld, P->p, P->ld);
        t->f64->rank_update(m, n, k, a, S2->p, S2->ld, Et->p, Et->ld, Z->p, Z->ld);
        t->f64->update_read(m, n, 0, 1.0, 1.0, S2->p, S2->ld, E->p, E->ld, Z->p, Z->ld, r, X->p, X->ld, P2->p, P2->ld);
    }
}

/* ---- update_read: S[m][n] = a S + E[k][m]^T Z[k][n], then P[r][n] = X[r][m] S ----
 * r runs over 0..5 with the shape index: the rows the pass adds (up to 2)
 * and the rows after it. */
static void update_read_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt,
                              int64_t *fails)
{
    /* k = 0 (a read only, or the decay alone) for two in three of k = 3, 7, ...;
     * the third keeps them, k = 3 among them (a class of its own in the
     * half-width table, whose Z stays in registers up to k = 4) */
    const int64_t k = dim[2] % 4 == 3 && (idx / 6) % 3 ? 0 : dim[2];
    const int64_t m = dim[0], n = dim[1], r = idx % 6;
    const double a = idx % 2 ? 1.0 : 0.625;
    /* a lazy decay's fold in one shape in three, with the decay and without
     * (a pass of its own then): a factor with all its digits, so that the
     * products round */
    const double f = (idx / 7) % 3 == 1 ? (f32 ? (double)0.6561f : 0.6561) : 1.0;
    mat E = mat_new(f32, k > 0 ? k : 1, m, idx % 4, offset_of(f32, idx, 3));
    mat Z = mat_new(f32, k > 0 ? k : 1, n, (idx / 4) % 4, offset_of(f32, idx, 7));
    mat X = mat_new(f32, r > 0 ? r : 1, m, (idx / 2) % 4, offset_of(f32, idx, 2));
    mat S0 = mat_new(f32, m, n, (idx + 2) % 4, offset_of(f32, idx, 13));
    mat P0 = mat_new(f32, r > 0 ? r : 1, n, (idx + 3) % 4, offset_of(f32, idx, 6));
    mat_fill(&E, 1);
    mat_fill(&Z, 1);
    mat_fill(&X, 1);
    mat_fill(&S0, 1);
    mat_save(&P0); /* all NaN: P must not be read */
    mat Et = mat_new(f32, m, k > 0 ? k : 1, (idx + 1) % 4, offset_of(f32, idx, 5));
    for (int64_t i = 0; i < k; i++)
        for (int64_t q = 0; q < m; q++) mat_set(&Et, q, i, mat_get(&E, i, q));
    long double *want = malloc(sizeof(long double) * (size_t)(2 * m * n + 2 * (r + 1) * n));
    cr_assert(want);
    long double *bound = want + m * n, *pw = bound + m * n, *pb = pw + (r + 1) * n;
    mat S0f = mat_clone(&S0); /* the memory the write finds: S0 folded */
    mat_scale(&S0f, f);
    rank_update_want(f32, m, n, k, a, &E, 1, &Z, &S0f, want, bound);
    mat_free(&S0f);
    mat_save(&E);
    mat_save(&Z);
    mat_save(&X);
    mat firstS = {0}, firstP = {0}; /* a backend's first table's results */
    for (int ti = 0; ti < nt; ti++) {
        mat S = mat_clone(&S0), P = mat_clone(&P0), S2 = mat_clone(&S0), P2 = mat_clone(&P0);
        P.rows = P2.rows = r; /* the cells it must write */
        update_read_both_ways(f32, &t[ti], m, n, k, a, f, r, &E, &Et, &Z, &X, &S, &P, &S2, &P2);
        verdict v = {0};
        judge(&v, &S, want, bound);
        /* P against X times the S the kernel stored */
        for (int64_t i = 0; i < r; i++)
            for (int64_t c = 0; c < n; c++) {
                long double sum = 0, sum_abs = 0;
                for (int64_t q = 0; q < m; q++) {
                    const long double p = (long double)mat_get(&X, i, q) * mat_get(&S, q, c);
                    sum += p;
                    sum_abs += fabsl(p);
                }
                pw[i * n + c] = sum;
                pb[i * n + c] = gamma_k(f32, m + 2) * sum_abs;
            }
        judge(&v, &P, pw, pb);
        v.changed += mat_changed_outside(&E, 0) + mat_changed_outside(&Z, 0) + mat_changed_outside(&X, 0);
        /* bitwise the same as the write and the read apart */
        v.changed += memcmp(S.base, S2.base, esize(f32) * (size_t)S.count) != 0;
        v.changed += memcmp(P.base, P2.base, esize(f32) * (size_t)P.count) != 0;
        /* a backend's tables for either datapath: the same bits */
        if (t[ti].half)
            v.changed += memcmp(S.base, firstS.base, esize(f32) * (size_t)S.count) != 0 ||
                         memcmp(P.base, firstP.base, esize(f32) * (size_t)P.count) != 0;
        char what[200];
        snprintf(what, sizeof what,
                 "update_read m=%lld n=%lld k=%lld r=%lld lds=%lld lde=%lld ldz=%lld ldx=%lld ldp=%lld a=%g f=%g",
                 (long long)m, (long long)n, (long long)k, (long long)r, (long long)S.ld, (long long)E.ld,
                 (long long)Z.ld, (long long)X.ld, (long long)P.ld, a, f);
        report(fails, &v, what, &t[ti], f32);
        mat_free(&S2);
        mat_free(&P2);
        if (ti + 1 < nt && t[ti + 1].half) {
            mat_free(&firstS);
            mat_free(&firstP);
            firstS = S, firstP = P;
        } else {
            mat_free(&S);
            mat_free(&P);
        }
    }
    mat_free(&firstS);
    mat_free(&firstP);
    free(want);
    mat_free(&E);
    mat_free(&Et);
    mat_free(&Z);
    mat_free(&X);
    mat_free(&S0);
    mat_free(&P0);
}

/* ---- dot2_copy: B[1][:] = src, then C[0..2) = A B^T (1 x 2, K long) ----
 * Bit for bit the copy followed by the same table's gemm_nt(1, 2): the
 * recurrent step takes [z.x, z.q] from either. B's row 0 and everything
 * around row 1, A, src and C past its two cells must stay as they were. */
static void dot2_copy_shape(int f32, const int64_t dim[3], int64_t idx, const table *t, int nt, int64_t *fails)
{
    const int64_t K = dim[0];
    mat A = mat_new(f32, 1, K, 0, offset_of(f32, idx, 0));
    mat B0 = mat_new(f32, 2, K, idx % 4, offset_of(f32, idx, 5));
    mat src = mat_new(f32, 1, K, 0, offset_of(f32, idx, 9));
    mat C0 = mat_new(f32, 1, 2, 0, offset_of(f32, idx, 11));
    mat_fill(&A, 1);
    mat_fill(&src, 1);
    for (int64_t k = 0; k < K; k++) mat_set(&B0, 0, k, draw()); /* row 1 stays NaN: it must not be read */
    mat_save(&A);
    mat_save(&src);
    for (int ti = 0; ti < nt; ti++) {
        mat B = mat_clone(&B0), C = mat_clone(&C0), Bw = mat_clone(&B0), Cw = mat_clone(&C0);
        for (int64_t k = 0; k < K; k++) mat_set(&Bw, 1, k, mat_get(&src, 0, k));
        if (f32) {
            t[ti].f32->dot2_copy(K, A.p, B.p, B.ld, src.p, C.p);
            t[ti].f32->gemm_nt(1, 2, K, A.p, A.ld, Bw.p, Bw.ld, 0, Cw.p, 2);
        } else {
            t[ti].f64->dot2_copy(K, A.p, B.p, B.ld, src.p, C.p);
            t[ti].f64->gemm_nt(1, 2, K, A.p, A.ld, Bw.p, Bw.ld, 0, Cw.p, 2);
        }
        verdict v = {0};
        v.bad += memcmp(B.base, Bw.base, esize(f32) * (size_t)B.count) != 0;
        v.bad += memcmp(C.base, Cw.base, esize(f32) * (size_t)C.count) != 0;
        if (v.bad) snprintf(v.first, sizeof v.first, "not the copy then gemm_nt(1, 2), bit for bit");
        v.changed += mat_changed_outside(&A, 0) + mat_changed_outside(&src, 0) + mat_changed_outside(&C, 1);
        char what[160];
        snprintf(what, sizeof what, "dot2_copy K=%lld ldb=%lld", (long long)K, (long long)B.ld);
        report(fails, &v, what, &t[ti], f32);
        mat_free(&B);
        mat_free(&C);
        mat_free(&Bw);
        mat_free(&Cw);
    }
    mat_free(&A);
    mat_free(&B0);
    mat_free(&src);
    mat_free(&C0);
}

/* ---- update_read and rank_update at a memory element of -0 ----
 * The k <= 2 terms start from the last one's product (update-read.inc.c),
 * so an exact zero term of negative sign keeps a -0 element of S at -0,
 * as the scalar table's row update does (a * -0, then -0 + -0); a sum
 * started from +0 made it +0. Here E < 0 and Z's columns c % 4 == 0 are
 * zero: there S must come out -0 in every table, for k = 1 and 2, with
 * and without decay, bitwise the same from update_read as from
 * rank_update followed by update_read with nothing to write. n = 37
 * gives every table a masked tail. */
static void signed_zero_case(int f32, const table *t, int64_t k, double a, int64_t *fails)
{
    const int64_t m = 3, n = 37, r = 2;
    mat E = mat_new(f32, k, m, 1, 0), Z = mat_new(f32, k, n, 3, 5), X = mat_new(f32, r, m, 0, 2);
    mat S0 = mat_new(f32, m, n, 2, 7), P0 = mat_new(f32, r, n, 1, 3);
    for (int64_t i = 0; i < k; i++)
        for (int64_t c = 0; c < m; c++) mat_set(&E, i, c, -fabs(draw()));
    for (int64_t i = 0; i < k; i++)
        for (int64_t c = 0; c < n; c++) mat_set(&Z, i, c, c % 4 ? draw() : 0.0);
    mat_fill(&X, 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < n; c++) mat_set(&S0, i, c, c % 2 ? draw() : -0.0);
    mat Et = mat_new(f32, m, k, 2, 1);
    for (int64_t i = 0; i < k; i++)
        for (int64_t c = 0; c < m; c++) mat_set(&Et, c, i, mat_get(&E, i, c));
    mat S = mat_clone(&S0), P = mat_clone(&P0), S2 = mat_clone(&S0), P2 = mat_clone(&P0);
    update_read_both_ways(f32, t, m, n, k, a, 1, r, &E, &Et, &Z, &X, &S, &P, &S2, &P2);
    verdict v = {0};
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < n; c += 4) {
            const double x = mat_get(&S, i, c);
            if (x == 0 && signbit(x)) continue;
            if (!v.bad++)
                snprintf(v.first, sizeof v.first, "S[%lld][%lld] = %g, not -0", (long long)i, (long long)c, x);
        }
    if (memcmp(S.base, S2.base, esize(f32) * (size_t)S.count) || memcmp(P.base, P2.base, esize(f32) * (size_t)P.count))
        if (!v.bad++) snprintf(v.first, sizeof v.first, "not bitwise rank_update then the read");
    char what[120];
    snprintf(what, sizeof what, "update_read at S = -0, k=%lld a=%g", (long long)k, a);
    report(fails, &v, what, t, f32);
    mat_free(&E), mat_free(&Et), mat_free(&Z), mat_free(&X), mat_free(&S0), mat_free(&P0);
    mat_free(&S), mat_free(&P), mat_free(&S2), mat_free(&P2);
}

/* 2 x the largest block of any table by which a dimension of kind 'R'
 * (rows) or 'V' (vectorized columns) is tiled, + 1; '1' for one. */
static int64_t limit_of(char kind, const table *t, int nt)
{
    int64_t tile = 0;
    for (int i = 0; kind != '1' && i < nt; i++) {
        const int64_t f32 = kind == 'R' ? t[i].f32->tile_rows : t[i].f32->tile_cols;
        const int64_t f64 = kind == 'R' ? t[i].f64->tile_rows : t[i].f64->tile_cols;
        tile = f32 > tile ? f32 : tile;
        tile = f64 > tile ? f64 : tile;
    }
    return kind == '1' ? 1 : 2 * tile + 1;
}

/* kinds: each dimension's kind for limit_of. */
static void run_kernel(const char *kernel, const char kinds[3], shape_fn fn)
{
    table t[2 * FALCON_BACKEND_ROWS];
    const int nt = tables_here(t);
    cr_assert(nt >= 1 && !strcmp(t[0].name, "scalar"), "the scalar table runs everywhere");
    const int64_t lim[3] = {limit_of(kinds[0], t, nt), limit_of(kinds[1], t, nt), limit_of(kinds[2], t, nt)};
    rng_state = 0x5EED;
    const int64_t fails = sweep(lim, fn, t, nt);
    printf("ukernels %s: %d tables, sizes to %lld x %lld x %lld (", kernel, nt, (long long)lim[0], (long long)lim[1],
           (long long)lim[2]);
    for (int i = 0; i < nt; i++) printf("%s%s%s", i ? ", " : "", t[i].name, t[i].half ? " (half width)" : "");
    printf("), %lld shape(s) wrong\n", (long long)fails);
    cr_expect_eq(fails, 0, "%s: %lld shape(s) wrong or written outside their output", kernel, (long long)fails);
}

/* Dimensions: gemm (M, N, K), rank_update and update_read (m, n, k), trsm (P, m, -). */
Test(ukernels, gemm_nt) { run_kernel("gemm_nt", "RRV", gemm_nt_shape); }
Test(ukernels, gemm_nn) { run_kernel("gemm_nn", "RVR", gemm_nn_shape); }
Test(ukernels, rank_update) { run_kernel("rank_update", "RVR", rank_update_shape); }
Test(ukernels, trsm_unit_lower) { run_kernel("trsm_unit_lower", "RV1", trsm_shape); }
Test(ukernels, update_read) { run_kernel("update_read", "RVR", update_read_shape); }
Test(ukernels, dot2_copy) { run_kernel("dot2_copy", "V11", dot2_copy_shape); }
Test(ukernels, update_read_signed_zero)
{
    table t[2 * FALCON_BACKEND_ROWS];
    const int nt = tables_here(t);
    rng_state = 0x5160;
    int64_t fails = 0;
    for (int ti = 0; ti < nt; ti++)
        for (int f32 = 0; f32 < 2; f32++)
            for (int64_t k = 1; k <= 2; k++) {
                signed_zero_case(f32, &t[ti], k, 0.625, &fails);
                signed_zero_case(f32, &t[ti], k, 1.0, &fails);
            }
    printf("ukernels update_read at -0: %d tables, %lld case(s) wrong\n", nt, (long long)fails);
    cr_assert(fails == 0);
}
