/* falcon_backward's CPU path: src/backward_cpu.inc.c compiled for float,
 * then for double. */
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>
#include "internal.h"
#include "backends.h"

#define FALCON_REAL_F32 1
#include "../kernels/framework/real.h"
#include "backward_cpu.inc.c"
#undef FALCON_REAL_F32
#include "../kernels/framework/real.h"
#include "backward_cpu.inc.c"
