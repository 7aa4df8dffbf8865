#include "ukernels-avx512.inc.c"
