/* The framework for one precision: the example sources, then both drivers. */
#include <stdlib.h>
#include <string.h>
#include "../common/falcon_math.h"
#include "real.h"
#include "head.h"

#include "examples.inc.c"
#include "recurrent.inc.c"
#include "blocked.inc.c"
