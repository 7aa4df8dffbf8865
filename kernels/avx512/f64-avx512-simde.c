#define FALCON_AVX512_SIMDE 1
#include "ukernels-avx512.inc.c"
