#include "framework.inc.c"
