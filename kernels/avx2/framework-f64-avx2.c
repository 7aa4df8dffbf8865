#define FALCON_FW_ISA avx2
#include "../framework/framework.inc.c"
