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
};
#undef SCALAR_TINY
