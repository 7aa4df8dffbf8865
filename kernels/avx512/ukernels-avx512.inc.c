/* The AVX-512F backend's table for one precision (see real.h). The kernels
 * are the shared SIMD sources of kernels/simd (written against the vec-*.h
 * abstraction) compiled over vec-avx512.h's 512-bit vectors and tile
 * sizes. Built twice (backend.mk):
 *   f32-avx512.c, f64-avx512.c: native, -mavx512f -mavx2 -mfma, the tables
 *     falcon_uk_avx512_f32/_f64 that src/backends.c selects after a CPU check;
 *   f32-avx512-simde.c, f64-avx512-simde.c: FALCON_AVX512_SIMDE, SIMDe
 *     emulation under -mavx2 -mfma, the tables falcon_uk_avx512emu_f32/_f64
 *     ("avx512-simde") that the tests run on any AVX2 machine;
 * each with its update_read in a unit of its own (*-update-read.c). */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include "vec-avx512.h"

/* update_read, in both shapes below, is compiled in a unit of its own
 * (f32-avx512-update-read.c, ...: UK_UPDATE_READ_UNIT), the tables and the
 * other kernels in this one, as for AVX2 (kernels/avx2/ukernels-avx2.inc.c
 * says why). */
#include "../simd/update-read.h"
UR_PROTOTYPE(VNAME(update_read));
UR_PROTOTYPE(VNAME(half_update_read));

#ifdef UK_UPDATE_READ_UNIT
#include "../simd/axpy.inc.c"
#define UR_LINKAGE
#include "../simd/update-read.inc.c"
/* update_read once more in column blocks of 2 vectors, for AVX-512 on a
 * 256-bit datapath (Zen 4: one 512-bit FMA a cycle, as AVX2's two 256-bit
 * ones). There 4-vector blocks left it 7-13% slower than these (fp32,
 * n = m = 64 and 128); with two 512-bit FMA pipes (Sapphire Rapids) the 2 x
 * 4 accumulators of a 4-vector block are what keeps both pipes busy
 * (ports x latency = 8), so that table keeps them. The same bits either way. */
#define UR_NV 2
/* With 2-vector blocks the Z vectors of up to 4 terms fit in registers
 * beside the rest (8 for Z, 4 accumulators, 4 for the row and its terms:
 * 16 of 32 registers), so a window of 3 or 4 does
 * not load them again for every row of the memory: Zen 4, Falcon-3
 * (W = 4), 8 heads, recurrent 1.07x (fp32 n = m = 64), 1.09x (fp64 64),
 * 1.11x (fp32 128); 4 alternating rounds. The 4-vector blocks would need
 * 16 for Z alone, 32 in all (and AVX2 has 16): those tables load them. */
#define UR_ZREG 4
#define UR_NAME(x) VNAME(half_##x)
#define UR_LINKAGE
#include "../simd/update-read.inc.c"

#else
#include "../simd/gemm-nt.inc.c"
#include "../simd/axpy.inc.c"
#include "../simd/gemm-nn.inc.c"
#include "../simd/rank-update.inc.c"
#include "../simd/trsm.inc.c"

#ifdef FALCON_AVX512_SIMDE
#define AVX512_TABLE(SFX) RS(falcon_uk_avx512emu##SFX)
#define AVX512_NAME "avx512-simde"
#else
#define AVX512_TABLE(SFX) RS(falcon_uk_avx512##SFX)
#define AVX512_NAME "avx512"
#endif
extern const RS(falcon_uk) AVX512_TABLE();
const RS(falcon_uk) AVX512_TABLE() = {
    AVX512_NAME,
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(update_read),
    VNAME(dot2_copy),
};
/* The table for a 256-bit datapath (src/backends.c chooses). */
extern const RS(falcon_uk) AVX512_TABLE(_half);
const RS(falcon_uk) AVX512_TABLE(_half) = {
    AVX512_NAME,
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(half_update_read),
    VNAME(dot2_copy),
};
#endif
