/* The AVX2+FMA backend's table for one precision (see real.h). This file
 * and the kernels it includes are compiled with -mavx2 -mfma (backend.mk)
 * and reached only through src/backends.c, after a CPU check. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include "vec-avx2.h"

#include "gemm-nt-avx2.inc.c"
#include "axpy-avx2.inc.c"
#include "gemm-nn-avx2.inc.c"
#include "rank-update-avx2.inc.c"
#include "trsm-avx2.inc.c"

extern const RS(falcon_uk) RS(falcon_uk_avx2);
const RS(falcon_uk) RS(falcon_uk_avx2) = {
    "avx2",
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
};
