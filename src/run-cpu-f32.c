/* falcon_run's CPU path in fp32: src/run_cpu.inc.c compiled for float. */
#define FALCON_REAL_F32 1
#include <stdlib.h>
#include <omp.h>
#include "internal.h"
#include "backends.h"
#include "../kernels/framework/real.h"
#include "run_cpu.inc.c"
