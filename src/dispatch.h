#ifndef FALCON_DISPATCH_H
#define FALCON_DISPATCH_H
#include "../kernels/ukernel.h"
#include "falcon.h"
const falcon_uk_f32 *falcon_uk_table_f32(falcon_backend b);
const falcon_uk_f64 *falcon_uk_table_f64(falcon_backend b);
#endif
