#define FALCON_REAL_F32 1
#define UK_UPDATE_READ_UNIT 1
#include "ukernels-avx2.inc.c"
