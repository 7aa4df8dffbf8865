/* A SIMD backend's micro-kernel table for one precision (FALCON_REAL_F32:
 * fp32): the shared sources of this folder over the ISA's vector header,
 * FALCON_VEC_H, compiled with the ISA's flags (mk/simd.mk builds it once
 * per ISA and precision). Reached only through src/backends.c, after the
 * ISA's CPU check. update_read is compiled apart (update-read-unit.c): its
 * instances took most of the table's compile time. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include FALCON_VEC_H
#include "update-read.h"

#include "gemm-nt.inc.c"
#include "axpy.inc.c"
#include "gemm-nn.inc.c"
#include "rank-update.inc.c"
#include "trsm.inc.c"

#define UK_MAX(a, b) ((a) > (b) ? (a) : (b))
/* The tile limits the tests read (falcon_uk's tile_rows, tile_cols). */
#define UK_TILE_ROWS UK_MAX(UK_MAX(AX_MR, TR_MR), 4 * NT_MR)
#define UK_TILE_COLS(UR_NV) (VL * UK_MAX(UK_MAX(AX_NV, TR_NV), UR_NV))

#ifdef V_UR_NV
#define UK_UR_NV V_UR_NV
#else
#define UK_UR_NV AX_NV
#endif

UR_PROTOTYPE(VNAME(update_read));
extern const RS(falcon_uk) VNAME(falcon_uk);
const RS(falcon_uk) VNAME(falcon_uk) = {
    V_ISA_NAME,
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(update_read),
    VNAME(dot2_copy),
    UK_TILE_ROWS,
    UK_TILE_COLS(UK_UR_NV),
};

#ifdef V_HALF_UR_NV
/* The table for a 256-bit datapath (src/backends.c chooses): update_read
 * in narrower column blocks, the same bits. */
UR_PROTOTYPE(VNAME(half_update_read));
extern const RS(falcon_uk) VNAME(falcon_uk_half);
const RS(falcon_uk) VNAME(falcon_uk_half) = {
    V_ISA_NAME,
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(half_update_read),
    VNAME(dot2_copy),
    UK_TILE_ROWS,
    UK_TILE_COLS(V_HALF_UR_NV),
};
#endif
