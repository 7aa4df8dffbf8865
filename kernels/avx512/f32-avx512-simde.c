#define FALCON_AVX512_SIMDE 1
#define FALCON_REAL_F32 1
#include "ukernels-avx512.inc.c"
