#include "ukernels-scalar.inc.c"
