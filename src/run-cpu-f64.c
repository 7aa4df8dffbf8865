/* falcon_run's CPU path in fp64: src/run_cpu.inc.c compiled for double. */
#include <stdlib.h>
#include <omp.h>
#include "internal.h"
#include "backends.h"
#include "../kernels/framework/real.h"
#include "run_cpu.inc.c"
