#define FALCON_REAL_F32 1
#define FALCON_FW_ISA avx512
#include "../framework/framework.inc.c"
