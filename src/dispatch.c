/* Which backends exist in this build and on this machine, and which
 * micro-kernel table each CPU backend uses. */
#include "internal.h"
#include "dispatch.h"

#ifdef FALCON_HAVE_AVX2
extern const falcon_uk_f32 falcon_uk_avx2_f32;
extern const falcon_uk_f64 falcon_uk_avx2_f64;
#endif
#ifdef FALCON_HAVE_AVX512
extern const falcon_uk_f32 falcon_uk_avx512_f32;
extern const falcon_uk_f64 falcon_uk_avx512_f64;
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
#include "../kernels/avx512/avx512-emu.h"
#endif

static __attribute__((unused)) int cpu_has_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static __attribute__((unused)) int cpu_has_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

int falcon_backend_available(falcon_backend b)
{
    switch (b) {
    case FALCON_BACKEND_AUTO:
    case FALCON_BACKEND_SCALAR: return 1;
#ifdef FALCON_HAVE_AVX2
    case FALCON_BACKEND_AVX2: return cpu_has_avx2();
#endif
#ifdef FALCON_HAVE_AVX512
    case FALCON_BACKEND_AVX512: return cpu_has_avx512();
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
    case FALCON_BACKEND_AVX512_SIMDE: return cpu_has_avx2();
#endif
    case FALCON_BACKEND_CUDA: return falcon_cuda_available();
    case FALCON_BACKEND_MPFR: return falcon_mpfr_available();
    default: return 0;
    }
}

falcon_backend falcon_backend_resolve(falcon_backend b)
{
    if (b != FALCON_BACKEND_AUTO) return b;
    if (falcon_backend_available(FALCON_BACKEND_AVX512)) return FALCON_BACKEND_AVX512;
    if (falcon_backend_available(FALCON_BACKEND_AVX2)) return FALCON_BACKEND_AVX2;
    return FALCON_BACKEND_SCALAR;
}

const char *falcon_backend_describe(falcon_backend b)
{
    switch (b) {
    case FALCON_BACKEND_AUTO: return falcon_backend_describe(falcon_backend_resolve(b));
    case FALCON_BACKEND_SCALAR: return "scalar (portable C)";
#ifdef FALCON_HAVE_AVX2
    case FALCON_BACKEND_AVX2: return cpu_has_avx2() ? "avx2+fma (native)" : "avx2+fma (compiled in; this CPU lacks it)";
#endif
#ifdef FALCON_HAVE_AVX512
    case FALCON_BACKEND_AVX512: return cpu_has_avx512() ? "avx512f (native)" : "avx512f (compiled in; this CPU lacks it)";
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
    case FALCON_BACKEND_AVX512_SIMDE: return cpu_has_avx2() ? "avx512f kernels emulated by SIMDe on avx2" : "avx512-simde (needs avx2; this CPU lacks it)";
#endif
    case FALCON_BACKEND_CUDA: return falcon_cuda_describe();
    case FALCON_BACKEND_MPFR: return falcon_mpfr_available() ? "mpfr reference" : "mpfr (not compiled in)";
    default: return "not compiled in";
    }
}

/* The CPU tables (NULL for backends that are not CPU micro-kernel sets). */
const falcon_uk_f32 *falcon_uk_table_f32(falcon_backend b)
{
    switch (b) {
    case FALCON_BACKEND_SCALAR: return &falcon_uk_scalar_f32;
#ifdef FALCON_HAVE_AVX2
    case FALCON_BACKEND_AVX2: return &falcon_uk_avx2_f32;
#endif
#ifdef FALCON_HAVE_AVX512
    case FALCON_BACKEND_AVX512: return &falcon_uk_avx512_f32;
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
    case FALCON_BACKEND_AVX512_SIMDE: return &falcon_uk_avx512emu_f32;
#endif
    default: return 0;
    }
}

const falcon_uk_f64 *falcon_uk_table_f64(falcon_backend b)
{
    switch (b) {
    case FALCON_BACKEND_SCALAR: return &falcon_uk_scalar_f64;
#ifdef FALCON_HAVE_AVX2
    case FALCON_BACKEND_AVX2: return &falcon_uk_avx2_f64;
#endif
#ifdef FALCON_HAVE_AVX512
    case FALCON_BACKEND_AVX512: return &falcon_uk_avx512_f64;
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
    case FALCON_BACKEND_AVX512_SIMDE: return &falcon_uk_avx512emu_f64;
#endif
    default: return 0;
    }
}
