#define FALCON_REAL_F32 1
#include "framework.inc.c"
