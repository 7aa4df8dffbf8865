#define FW_PART_RECURRENT 1
#include "framework.inc.c"
