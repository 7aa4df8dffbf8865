/* The scalar backend's table for one precision (see real.h). */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"

/* Without an FMA instruction every product is rounded on its own, and a
 * coefficient scaled by a near-reset decay makes subnormal products: a
 * microcode assist on x86 for each. A coefficient below 2^-100 (fp32;
 * 2^-996 in fp64) has its products and sums taken in the wider type, where
 * they are normal, and rounded once. */
#ifdef FALCON_REAL_F32
typedef double RS(wide);
#define SCALAR_TINY 0x1p-100f
#else
typedef long double RS(wide);
#define SCALAR_TINY 0x1p-996
#endif
static inline int RS(tiny)(REAL c) { return c < SCALAR_TINY && c > -SCALAR_TINY; }

/* The row operations every kernel here but gemm_nt (dot products) is made
 * of: y += x v and s *= a, four elements a step with the four loads ahead
 * of the four stores (the rows never overlap). Each element gets one
 * multiply and one add, in the order the one-element loop gave it, so the
 * bits are the same; the compiler may turn the step into vector
 * instructions (SSE2 in the x86-64 baseline, no FMA), which it did not do
 * to the one-element loops, since their rows might overlap. update_read's
 * passes over a row are not fused into one sweep: the short loops inside
 * it cost more than the loads and stores it saves (docs/performance.md,
 * "Scalar kernels: row operations"). */
static inline void RS(axpy_row)(int64_t n, REAL x, const REAL *restrict v, REAL *restrict y)
{
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
        const REAL v0 = v[c], v1 = v[c + 1], v2 = v[c + 2], v3 = v[c + 3];
        const REAL y0 = y[c] + x * v0, y1 = y[c + 1] + x * v1, y2 = y[c + 2] + x * v2, y3 = y[c + 3] + x * v3;
        y[c] = y0, y[c + 1] = y1, y[c + 2] = y2, y[c + 3] = y3;
    }
    for (; c < n; c++) y[c] += x * v[c];
}

/* y += x v with each product and sum in the wider type, rounded once:
 * for a tiny coefficient x (RS(tiny)), whose products would be subnormal. */
static inline void RS(axpy_row_wide)(int64_t n, REAL x, const REAL *restrict v, REAL *restrict y)
{
    const RS(wide) w = x;
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
        const RS(wide) v0 = v[c], v1 = v[c + 1], v2 = v[c + 2], v3 = v[c + 3];
        const REAL y0 = (REAL)(y[c] + w * v0), y1 = (REAL)(y[c + 1] + w * v1), y2 = (REAL)(y[c + 2] + w * v2),
                   y3 = (REAL)(y[c + 3] + w * v3);
        y[c] = y0, y[c + 1] = y1, y[c + 2] = y2, y[c + 3] = y3;
    }
    for (; c < n; c++) y[c] = (REAL)(y[c] + w * v[c]);
}

static inline void RS(scale_row)(int64_t n, REAL a, REAL *restrict s)
{
    int64_t c = 0;
    for (; c + 4 <= n; c += 4) {
        const REAL s0 = s[c] * a, s1 = s[c + 1] * a, s2 = s[c + 2] * a, s3 = s[c + 3] * a;
        s[c] = s0, s[c + 1] = s1, s[c + 2] = s2, s[c + 3] = s3;
    }
    for (; c < n; c++) s[c] *= a;
}

#include "gemm-nt-scalar.inc.c"
#include "gemm-nn-scalar.inc.c"
#include "rank-update-scalar.inc.c"
#include "trsm-scalar.inc.c"
#include "update-read-scalar.inc.c"

const RS(falcon_uk) RS(falcon_uk_scalar) = {
    "scalar",
    RS(gemm_nt_scalar),
    RS(gemm_nn_scalar),
    RS(rank_update_scalar),
    RS(trsm_unit_lower_scalar),
    RS(update_read_scalar),
    RS(dot2_copy_scalar),
    1, 4, /* rows one at a time, columns unrolled by 4 */
};
#undef SCALAR_TINY
