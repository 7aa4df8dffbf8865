#define FALCON_REAL_F32 1
#include "ukernels-avx512.inc.c"
