/* The AVX-512F backend's table for one precision (see real.h). The kernels
 * are the shared SIMD sources of kernels/simd (written against the vec-*.h
 * abstraction) compiled over vec-avx512.h's 512-bit vectors and tile
 * sizes. Built twice (backend.mk):
 *   f32-avx512.c, f64-avx512.c: native, -mavx512f -mavx2 -mfma, the tables
 *     falcon_uk_avx512_f32/_f64 that src/backends.c selects after a CPU check;
 *   f32-avx512-simde.c, f64-avx512-simde.c: FALCON_AVX512_SIMDE, SIMDe
 *     emulation under -mavx2 -mfma, the tables falcon_uk_avx512emu_f32/_f64
 *     ("avx512-simde") that the tests run on any AVX2 machine. */
#include <stdint.h>
#include "../ukernel.h"
#include "../framework/real.h"
#include "vec-avx512.h"

#include "../simd/gemm-nt.inc.c"
#include "../simd/axpy.inc.c"
#include "../simd/gemm-nn.inc.c"
#include "../simd/rank-update.inc.c"
#include "../simd/trsm.inc.c"
#include "../simd/update-read.inc.c"

#ifdef FALCON_AVX512_SIMDE
extern const RS(falcon_uk) RS(falcon_uk_avx512emu);
const RS(falcon_uk) RS(falcon_uk_avx512emu) = {
    "avx512-simde",
#else
extern const RS(falcon_uk) RS(falcon_uk_avx512);
const RS(falcon_uk) RS(falcon_uk_avx512) = {
    "avx512",
#endif
    VNAME(gemm_nt),
    VNAME(gemm_nn),
    VNAME(rank_update),
    VNAME(trsm_unit_lower),
    VNAME(update_read),
};
