/* The avx2 backend's CPU check and what its build defines (mk/simd.mk),
 * for its row in the registry (src/backends.c), which runs none of its
 * code before falcon_cpu_has_avx2() said yes. Baseline code: the
 * registry is compiled without the ISA's flags. */
#ifndef FALCON_CPU_AVX2_H
#define FALCON_CPU_AVX2_H
#include "../ukernel.h"
#include "../framework/head.h"

extern const falcon_uk_f32 falcon_uk_avx2_f32;
extern const falcon_uk_f64 falcon_uk_avx2_f64;
extern const falcon_drivers_f32 falcon_fw_avx2_f32;
extern const falcon_drivers_f64 falcon_fw_avx2_f64;

static inline int falcon_cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}
#endif
