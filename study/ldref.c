/*
 * The study's cheap reference: docs/math.md section 1 in long double, one step at
 * a time, state carried between calls (see study.h for why long double).
 * Written from docs/math.md, not from the kernels or reference/, so that it is
 * an independent check; the study measures it against MPFR.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "study.h"

int ldref_init(ldref *r, falcon_variant v, falcon_align a, int64_t n, int64_t m, int64_t W, double eps)
{
    memset(r, 0, sizeof *r);
    r->variant = v, r->align = a, r->n = n, r->m = m, r->W = W, r->eps = eps;
    r->S = calloc((size_t)(m * n), sizeof *r->S);
    r->r = calloc((size_t)(W * m), sizeof *r->r);
    r->xz = calloc((size_t)(2 * W * n), sizeof *r->xz);
    r->ql = calloc((size_t)n, sizeof *r->ql);
    r->prev = calloc((size_t)n, sizeof *r->prev);
    r->hk = calloc((size_t)(W * n), sizeof *r->hk);
    r->hv = calloc((size_t)(W * m), sizeof *r->hv);
    if (r->S && r->r && r->xz && r->ql && r->prev && r->hk && r->hv) return 0;
    ldref_free(r);
    return -1;
}

void ldref_free(ldref *r)
{
    free(r->S), free(r->r), free(r->xz), free(r->ql), free(r->prev), free(r->hk), free(r->hv);
    memset(r, 0, sizeof *r);
}

long double ldref_unit_roundoff(void) { return LDBL_EPSILON / 2; }

/* One step: forget, write over the window E_t, read. Two passes over S
 * (forget + residuals, then write + read), with independent partial sums:
 * a long double dot product is otherwise bound by the x87 add latency. */
static void step(ldref *r, const double *q, const double *k, const double *v, double beta,
                 const double *alpha, const double *g, long double *o)
{
    const int64_t n = r->n, m = r->m;
    long double *restrict S = r->S, *restrict res = r->r, *restrict xz = r->xz, *restrict ql = r->ql;
    /* This step's example, then E_t = the history's last examples + it. */
    const double *x = r->align == FALCON_ALIGN_SAME ? k : r->has_prev ? r->prev : NULL;
    int64_t cnt = 0;
    long double eta = 0;
    if (x) {
        memcpy(r->hk + r->hlen * n, x, sizeof(double) * (size_t)n);
        memcpy(r->hv + r->hlen * m, v, sizeof(double) * (size_t)m);
        cnt = r->hlen + 1;
        /* Keys x_l and write directions z_l = g * x_l (Falcon-2/2A), and
         * eta = beta / (eps + SUM x.z). */
        long double den = r->eps;
        for (int64_t l = 0; l < cnt; l++)
            for (int64_t i = 0; i < n; i++) {
                const long double xi = r->hk[l * n + i], zi = g ? xi * g[i] : xi;
                xz[2 * l * n + i] = xi, xz[(2 * l + 1) * n + i] = zi;
                den += xi * zi;
            }
        eta = beta / den;
    }
    const int reg = falcon_variant_is_regression(r->variant);
    for (int64_t i = 0; i < n; i++) ql[i] = q[i];
    for (int64_t a = 0; a < m; a++) {
        long double *restrict row = S + a * n;
        if (alpha)
            for (int64_t i = 0; i < n; i++) row[i] *= *alpha;
        /* Every residual against Sbar, before any write of the window lands. */
        for (int64_t l = 0; l < cnt; l++) {
            long double s0 = 0, s1 = 0;
            const long double *xl = xz + 2 * l * n;
            if (reg) {
                int64_t i = 0;
                for (; i + 1 < n; i += 2) s0 += row[i] * xl[i], s1 += row[i + 1] * xl[i + 1];
                if (i < n) s0 += row[i] * xl[i];
            }
            res[l * m + a] = eta * (r->hv[l * m + a] - (s0 + s1));
        }
    }
    for (int64_t a = 0; a < m; a++) {
        long double *restrict row = S + a * n, s0 = 0, s1 = 0;
        for (int64_t l = 0; l < cnt; l++) {
            const long double ra = res[l * m + a], *zl = xz + (2 * l + 1) * n;
            for (int64_t i = 0; i < n; i++) row[i] += ra * zl[i];
        }
        int64_t i = 0;
        for (; i + 1 < n; i += 2) s0 += row[i] * ql[i], s1 += row[i + 1] * ql[i + 1];
        if (i < n) s0 += row[i] * ql[i];
        o[a] = s0 + s1;
    }
    if (x) { /* keep the last W-1 examples (none for the non-window variants) */
        r->hlen = cnt < r->W ? cnt : r->W - 1;
        if (r->hlen < cnt && r->hlen > 0) {
            memmove(r->hk, r->hk + n, sizeof(double) * (size_t)(r->hlen * n));
            memmove(r->hv, r->hv + m, sizeof(double) * (size_t)(r->hlen * m));
        }
    }
    memcpy(r->prev, k, sizeof(double) * (size_t)n);
    r->has_prev = 1;
}
void ldref_run(ldref *r, const falcon_inputs *in, long double *out)
{
    const double *q = in->q, *k = in->k, *v = in->v, *beta = in->beta, *alpha = in->alpha, *g = in->gain;
    const int64_t n = r->n, m = r->m;
    for (int64_t t = 0; t < in->T; t++)
        step(r, q + t * n, k + t * n, v + t * m, beta[t], alpha ? alpha + t : NULL, g ? g + t * n : NULL,
             out + t * m);
}

long double study_relerr(const double *x, const long double *ref, int64_t count)
{
    long double num = 0, den = 0;
    for (int64_t i = 0; i < count; i++) {
        const long double d = x[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return study_norm_ratio(num, den);
}
