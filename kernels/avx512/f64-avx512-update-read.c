#define UK_UPDATE_READ_UNIT 1
#include "ukernels-avx512.inc.c"
