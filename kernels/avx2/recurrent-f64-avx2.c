#define FALCON_FW_ISA avx2
#define FW_PART_RECURRENT 1
#include "../framework/framework.inc.c"
