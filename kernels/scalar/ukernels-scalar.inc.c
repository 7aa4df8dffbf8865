/* The scalar backend's table for one precision (see real.h). */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"

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
};
