/* The avx512 backend's CPU checks and what its build defines (mk/simd.mk),
 * for its rows in the registry (src/backends.c: avx512, and avx512-simde,
 * the same kernels against SIMDe), which run none of its code before
 * falcon_cpu_has_avx512() said yes. Baseline code: the registry is
 * compiled without the ISA's flags. Why each rule: docs/performance.md,
 * "SIMD backends". */
#ifndef FALCON_CPU_AVX512_H
#define FALCON_CPU_AVX512_H
#include "../ukernel.h"
#include "../framework/head.h"

extern const falcon_uk_f32 falcon_uk_avx512_f32, falcon_uk_half_avx512_f32;
extern const falcon_uk_f64 falcon_uk_avx512_f64, falcon_uk_half_avx512_f64;
extern const falcon_drivers_f32 falcon_fw_avx512_f32;
extern const falcon_drivers_f64 falcon_fw_avx512_f64;
/* the SIMDe build (FALCON_HAVE_AVX512_SIMDE) */
extern const falcon_uk_f32 falcon_uk_avx512emu_f32, falcon_uk_half_avx512emu_f32;
extern const falcon_uk_f64 falcon_uk_avx512emu_f64, falcon_uk_half_avx512emu_f64;

/* The CPU's AMD family, 0 on other vendors (src/backends.c, read once). */
unsigned falcon_cpu_amd_family(void);

static inline int falcon_cpu_has_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* AVX-512 on a 256-bit datapath, one 512-bit FMA a cycle: AMD family 19h
 * (Zen 4). There the tables falcon_uk_half_avx512_* run instead. */
static inline int falcon_cpu_avx512_half_width(void) { return falcon_cpu_amd_family() == 0x19; }

/* Where the fp32 recurrent form's lazy decay made the full-width tables
 * slower: AMD family 1Ah (Zen 5), whose pass over the memory is held by
 * its 512-bit stores. There it decays the memory directly. */
static inline int falcon_cpu_avx512_direct_decay(void) { return falcon_cpu_amd_family() == 0x1a; }
#endif
