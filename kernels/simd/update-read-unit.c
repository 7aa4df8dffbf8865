/* A SIMD backend's update_read for one precision, in a unit of its own
 * (its table is ukernels.c): over the ISA's vector header FALCON_VEC_H,
 * in column blocks of V_UR_NV vectors (unset: the axpy tile's), and where
 * the header sets V_HALF_UR_NV once more in blocks of that many, for the
 * table of a 256-bit datapath. mk/simd.mk builds it once per ISA and
 * precision, with the ISA's flags. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include FALCON_VEC_H
#include "update-read.h"

#include "axpy.inc.c"

UR_PROTOTYPE(VNAME(update_read));
#ifdef V_UR_NV
#define UR_NV V_UR_NV
#endif
#define UR_LINKAGE
#include "update-read.inc.c"

#ifdef V_HALF_UR_NV
UR_PROTOTYPE(VNAME(half_update_read));
#define UR_NV V_HALF_UR_NV
#define UR_ZREG V_HALF_UR_ZREG
#define UR_NAME(x) VNAME(half_##x)
#define UR_LINKAGE
#include "update-read.inc.c"
#endif
