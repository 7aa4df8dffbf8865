/* The AVX2+FMA backend's table for one precision (see real.h): the shared
 * SIMD sources of kernels/simd over vec-avx2.h's 256-bit vectors. This file
 * and the kernels it includes are compiled with -mavx2 -mfma (backend.mk)
 * and reached only through src/backends.c, after a CPU check. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include "vec-avx2.h"

#include "../simd/gemm-nt.inc.c"
#include "../simd/axpy.inc.c"
#include "../simd/gemm-nn.inc.c"
#include "../simd/rank-update.inc.c"
#include "../simd/trsm.inc.c"
#include "../simd/update-read.inc.c"

extern const RS(falcon_uk) RS(falcon_uk_avx2);
const RS(falcon_uk) RS(falcon_uk_avx2) = {
    "avx2",
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(update_read),
    VNAME(dot2_copy),
};
