#define FALCON_FW_ISA avx512
#include "../framework/framework.inc.c"
