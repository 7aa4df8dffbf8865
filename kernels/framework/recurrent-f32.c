#define FALCON_REAL_F32 1
#define FW_PART_RECURRENT 1
#include "framework.inc.c"
