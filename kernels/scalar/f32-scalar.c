#define FALCON_REAL_F32 1
#include "ukernels-scalar.inc.c"
