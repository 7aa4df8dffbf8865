/* The chunk backward's own sums (backward-blocked.inc.c includes it, once
 * per precision and ISA). */
/* The driver's dot products and finiteness sums run in BB_LANES
 * independent partial sums, added pairwise at the end: one running sum is
 * a chain of dependent adds (the compiler may not reorder it), and the
 * block's dots over m and the final check over every gradient were a
 * fifth of the driver's own time. The order is fixed, so the result is
 * deterministic; its rounding error is bounded as the sequential sum's. */
#define BB_LANES 8

static REAL RS(bb_lanes_sum)(REAL *s)
{
    for (int w = BB_LANES / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++) s[k] += s[k + w];
    return s[0];
}

static REAL RS(bb_dot)(const REAL *a, const REAL *b, int64_t n)
{
    REAL s[BB_LANES] = {0};
    int64_t i = 0;
    for (; i + BB_LANES <= n; i += BB_LANES)
        for (int k = 0; k < BB_LANES; k++) s[k] += a[i + k] * b[i + k];
    for (int k = 0; i < n; i++, k++) s[k] += a[i] * b[i];
    return RS(bb_lanes_sum)(s);
}

/* SUM (x_i - x_i): 0 when every x_i is finite, NaN otherwise. */
static REAL RS(bb_nonfinite)(const REAL *x, int64_t n)
{
    REAL s[BB_LANES] = {0};
    int64_t i = 0;
    for (; i + BB_LANES <= n; i += BB_LANES)
        for (int k = 0; k < BB_LANES; k++) s[k] += x[i + k] - x[i + k];
    for (int k = 0; i < n; i++, k++) s[k] += x[i] - x[i];
    return RS(bb_lanes_sum)(s);
}
