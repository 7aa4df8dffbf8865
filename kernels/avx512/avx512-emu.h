/* The AVX-512 micro-kernels compiled against SIMDe (emulated with AVX2+FMA),
 * so tests can run the AVX-512 kernel logic on machines without AVX-512:
 * pass &falcon_uk_avx512emu_f32 / _f64 as a falcon_head's uk. Requires an
 * AVX2+FMA CPU. Present when the build defines FALCON_HAVE_AVX512_SIMDE
 * (mk/simd.mk: x86-64 with SIMDe's headers installed). */
#ifndef FALCON_AVX512_EMU_H
#define FALCON_AVX512_EMU_H

#include "../ukernel.h"

extern const falcon_uk_f32 falcon_uk_avx512emu_f32;
extern const falcon_uk_f64 falcon_uk_avx512emu_f64;

#endif
