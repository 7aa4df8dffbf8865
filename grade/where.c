/* Where a failing result went wrong: the first bad step and its head (see
 * where.h and docs/cases.md, "Where a case failed"). */
#include <math.h>
#include <stdlib.h>
#include "where.h"

/* The largest magnitude in r and in x - r: the scale that keeps the sums of
 * squares below from overflowing (a float64 result may hold 1e300). */
static double scale_of(const double *x, const double *r, int64_t count)
{
    double s = 0;
    for (int64_t i = 0; i < count; i++) {
        const double a = fabs(r[i]), d = fabs(x[i] - r[i]);
        if (a > s) s = a;
        if (d > s && isfinite(d)) s = d;
    }
    return s > 0 ? s : 1;
}

/* Step t's squared error (scaled by 1/s), over every batch row and head;
 * *worst the (b, h), as b H + h, with the largest. */
static double step_error(const double *x, const double *r, const int64_t dim[4], int64_t t, double s,
                         int64_t *worst)
{
    const int64_t T = dim[1], H = dim[2], m = dim[3];
    double best = -1, sum = 0;
    for (int64_t b = 0; b < dim[0]; b++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t at = ((b * T + t) * H + h) * m;
            double e = 0;
            for (int64_t j = 0; j < m; j++) {
                const double d = (x[at + j] - r[at + j]) / s;
                e += d * d;
            }
            sum += e;
            if (e > best) best = e, *worst = b * H + h;
        }
    return sum;
}

int check_where_first_bad(const double *x, const double *r, const int64_t dim[4], double u, double thr,
                          check_where *w)
{
    w->step = w->batch = w->head = w->seq = w->seq_step = -1;
    const int64_t count = dim[0] * dim[1] * dim[2] * dim[3];
    if (count <= 0) return -1;
    const double s = scale_of(x, r, count);
    double r2 = 0, d2 = 0;
    for (int64_t i = 0; i < count; i++) r2 += (r[i] / s) * (r[i] / s);
    for (int64_t t = 0; t < dim[1]; t++) {
        int64_t worst = 0;
        d2 += step_error(x, r, dim, t, s, &worst);
        const double err = (r2 > 0 ? sqrt(d2 / r2) : sqrt(d2) * s) / u; /* absolute when the reference is 0 */
        if (!(err <= thr)) {
            w->step = t, w->batch = worst / dim[2], w->head = worst % dim[2];
            return 0;
        }
    }
    return -1;
}
