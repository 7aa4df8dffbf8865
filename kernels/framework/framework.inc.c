/*
 * The framework for one precision: the example sources, then both drivers.
 *
 * Compiled once per precision for the baseline ISA (framework-f32.c,
 * framework-f64.c: the driver table falcon_fw_f32, _f64; recurrent-f32.c,
 * recurrent-f64.c: its recurrent driver) and, on x86-64, once more per
 * SIMD backend with that backend's flags and FALCON_FW_ISA (mk/simd.mk:
 * falcon_fw_avx2_f32, ...), so that
 * the framework's own O(m) and O(n) loops are vectorized for the CPU the
 * backend's micro-kernels run on. The registry (src/backends.c) pairs each
 * backend's kernels with its drivers.
 * The sources are the same: plain C, compiled without reassociation or
 * contraction (-ffp-contract=off), so every instantiation does the same
 * arithmetic, and the reductions all go through the micro-kernels.
 *
 * One translation unit holds one precision, so the types private to it
 * (carver, example_src, rec_head) are plain names; only what must coexist
 * with the other precision elsewhere (falcon_head_f32, the micro-kernel
 * tables) carries RS()'s suffix, and the drivers FW()'s.
 */
#include <stdlib.h>
#include <string.h>
#include "../common/falcon_math.h"
#include "real.h"
#include "head.h"

/* FW(name): the name of a driver for this precision and ISA. */
#ifdef FALCON_REAL_F32
#define FW_PREC f32
#else
#define FW_PREC f64
#endif
#define FW_CAT_(a, b, c) a##_##b##_##c
#define FW_CAT(a, b, c) FW_CAT_(a, b, c)
#define FW_CAT2_(a, b) a##_##b
#define FW_CAT2(a, b) FW_CAT2_(a, b)
#ifdef FALCON_FW_ISA
#define FW(name) FW_CAT(name, FALCON_FW_ISA, FW_PREC)
#else
#define FW(name) FW_CAT2(name, FW_PREC)
#endif

/* The recurrent driver, defined in its own translation unit (below). */
falcon_status FW(fw_recurrent)(const RS(falcon_head) *heads, int64_t count);

#include "examples.inc.c"
/* Two translation units a build (precision, ISA): with FW_PART_RECURRENT
 * the recurrent driver (recurrent-<prec>[-<isa>].c), else the blocked one
 * and the table of both (framework-<prec>[-<isa>].c). Apart, a change to
 * one driver rebuilds its own six objects only, about half of what one
 * unit of both took (a seeded bug's rebuild in verify/mutants.sh). */
#ifdef FW_PART_RECURRENT
#include "recurrent.inc.c"
#else
#include "blocked.inc.c"
#include "backward-recurrent.inc.c"
#include "backward-blocked.inc.c"

#ifdef FALCON_FW_ISA
#define FW_STR_(x) #x
#define FW_STR(x) FW_STR_(x)
#define FW_ISA_NAME FW_STR(FALCON_FW_ISA)
#else
#define FW_ISA_NAME "baseline"
#endif
const RS(falcon_drivers) FW(falcon_fw) = {
    .isa = FW_ISA_NAME,
    .recurrent = FW(fw_recurrent),
    .blocked = FW(falcon_blocked),
    .backward_recurrent = FW(fw_backward_recurrent),
    .backward_blocked = FW(falcon_backward_blocked),
};
#endif
