#define FALCON_REAL_F32 1
#define FALCON_FW_ISA avx512
#define FW_PART_RECURRENT 1
#include "../framework/framework.inc.c"
