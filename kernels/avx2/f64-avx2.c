#include "ukernels-avx2.inc.c"
