/* The AVX2+FMA backend's table for one precision (see real.h): the shared
 * SIMD sources of kernels/simd over vec-avx2.h's 256-bit vectors. This file
 * and the kernels it includes are compiled with -mavx2 -mfma (backend.mk)
 * and reached only through src/backends.c, after a CPU check. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include "vec-avx2.h"

/* update_read is compiled in a unit of its own (f32-avx2-update-read.c,
 * f64-: UK_UPDATE_READ_UNIT), the table and the other kernels in this
 * one: its instances (each class of k, decay and rows of P, in four
 * column-block shapes, unrolled) took about four fifths of the table's
 * compile time, and a change to any one kernel rebuilt all six. */
#include "../simd/update-read.h"
UR_PROTOTYPE(VNAME(update_read));

#ifdef UK_UPDATE_READ_UNIT
#include "../simd/axpy.inc.c"
/* update_read in column blocks of 4 vectors, not the axpy tile's 2: its
 * accumulators gain one FMA per row of S each, so it takes ports x
 * latency = 2 x 4 = 8 of them (UR_R x UR_NV) to keep both FMA pipes busy;
 * with 2 x 2 each row waited on the chains. With 16 registers the block's
 * vectors of Z are then reloaded from L1 each row (the loads have slack).
 * Zen 3, fp32, Falcon-1 recurrent, 8 heads, T = 4096 (geometric mean of
 * per-round time ratios over 4 alternating rounds): 0.87 of the time at
 * n = m = 64 and 128, 0.88-0.90 for Falcon-3 (W = 4); fp64 within the
 * noise at n = 64, 0.95 at n = 128. The same bits either way. Blocks of
 * 3 vectors fit in the 16 registers without reloads, but leave a block of
 * one vector at n = 64 in fp64 and n = 128 (Zen 3, with the pass's first
 * term a product, Falcon-1 as above: n = 64 the same in fp32 and fp64,
 * n = 128 fp32 1.1 times slower than 4). */
#define UR_NV 4
#define UR_LINKAGE
#include "../simd/update-read.inc.c"

#else
#include "../simd/gemm-nt.inc.c"
#include "../simd/axpy.inc.c"
#include "../simd/gemm-nn.inc.c"
#include "../simd/rank-update.inc.c"
#include "../simd/trsm.inc.c"

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
#endif
