/*
 * The backend registry: the one list of backends. Each row names the
 * backend, its CPU check, its micro-kernel tables with the framework drivers
 * that go with them and its input scan (CPU backends), or the function that
 * runs a call (cuda, mpfr). A backend the build leaves out keeps its row with
 * only its name, so asking for it is an "unavailable" error, never a crash or
 * a wrong table. Adding a SIMD ISA: README, "Adding a backend".
 */
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include "internal.h"
#include "backends.h"
#include "../kernels/avx2/cpu-avx2.h"
#include "../kernels/avx512/cpu-avx512.h"

/* A row's two pairs: the tables falcon_uk_ID_{f32,f64} with the framework
 * build FW_{f32,f64}. RULE: where the fp32 recurrent form's decay is direct
 * (NULL: never); fp64 has none, its decay is always direct. */
#define CPU_RULE(ID, FW, RULE)                                                                  \
    .f32 = {&falcon_uk_##ID##_f32, &FW##_f32, RULE}, .f64 = {&falcon_uk_##ID##_f64, &FW##_f64, NULL}
#define CPU(ID, FW) CPU_RULE(ID, FW, NULL)
/* The tables for a 256-bit datapath, falcon_uk_half_ID_{f32,f64}. */
#define CPU_HALF(ID, FW)                                                                     \
    .f32_half = {&falcon_uk_half_##ID##_f32, &FW##_f32, NULL},                                   \
    .f64_half = {&falcon_uk_half_##ID##_f64, &FW##_f64, NULL}

static int always(void) { return 1; }

/* Read once: every call asks (the table of its precision, the decay rule,
 * the input scan), and CPUID traps to the hypervisor in a virtual machine
 * (docs/performance.md, "SIMD backends"). Racing first calls read the same
 * value. */
unsigned falcon_cpu_amd_family(void)
{
    static atomic_int memo = -1;
    int v = atomic_load_explicit(&memo, memory_order_relaxed);
    if (v < 0) {
        v = 0;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        unsigned a, b, c, d;
        if (__builtin_cpu_is("amd") && __get_cpuid(1, &a, &b, &c, &d)) {
            const unsigned base = (a >> 8) & 0xf;
            v = (int)(base == 0xf ? base + ((a >> 20) & 0xff) : base);
        }
#endif
        atomic_store_explicit(&memo, v, memory_order_relaxed);
    }
    return (unsigned)v;
}

static _Atomic int direct_decay_forced = -1;

void falcon_set_direct_decay(int mode) { direct_decay_forced = mode < 0 ? -1 : mode > 0; }

int falcon_direct_decay(int (*rule)(void))
{
    const int forced = direct_decay_forced;
    return forced >= 0 ? forced : rule != NULL && rule();
}

extern const falcon_drivers_f32 falcon_fw_f32;
extern const falcon_drivers_f64 falcon_fw_f64;

static const falcon_backend_info registry[] = {
    [FALCON_BACKEND_AUTO] = {.name = "auto", .usable = always},
    [FALCON_BACKEND_SCALAR] = {.name = "scalar", .usable = always, .what = "scalar (portable C)",
                               .auto_rank = 1, CPU(scalar, falcon_fw)},
#ifdef FALCON_HAVE_AVX2
    [FALCON_BACKEND_AVX2] = {.name = "avx2", .usable = falcon_cpu_has_avx2, .what = "avx2+fma (native)",
                             .lacking = "avx2+fma (compiled in; this CPU lacks it)", .auto_rank = 2,
                             CPU(avx2, falcon_fw_avx2), .scan = &falcon_scan_avx2},
#else
    [FALCON_BACKEND_AVX2] = {.name = "avx2"},
#endif
#ifdef FALCON_HAVE_AVX512
    [FALCON_BACKEND_AVX512] = {.name = "avx512", .usable = falcon_cpu_has_avx512, .what = "avx512f (native)",
                               .lacking = "avx512f (compiled in; this CPU lacks it)", .auto_rank = 3,
                               CPU_RULE(avx512, falcon_fw_avx512, falcon_cpu_avx512_direct_decay),
                               .half_width = falcon_cpu_avx512_half_width, CPU_HALF(avx512, falcon_fw_avx512),
                               .scan = &falcon_scan_avx512, .scan_half = &falcon_scan_avx2,
                               .what_half = "avx512f (native; a 256-bit datapath: the recurrent "
                                            "update in 2-vector column blocks)",
                               .what_direct = "avx512f (native; the fp32 recurrent form decays its memory "
                                              "directly: lazy decay measured slower on this core)"},
#else
    [FALCON_BACKEND_AVX512] = {.name = "avx512"},
#endif
    [FALCON_BACKEND_CUDA] = {.name = "cuda", .usable = falcon_cuda_available,
                             .describe = falcon_cuda_describe, .run = falcon_cuda_run},
    [FALCON_BACKEND_MPFR] = {.name = "mpfr", .usable = falcon_mpfr_available, .what = "mpfr reference",
                             .lacking = "mpfr (no reference attached: link libfalcon-ref)", .run = falcon_mpfr_run},
    /* The AVX-512 kernels emulated on AVX2 test their logic, not speed: the
     * baseline drivers (so the gate runs both builds of the framework), and
     * never chosen by auto. */
#ifdef FALCON_HAVE_AVX512_SIMDE
    [FALCON_BACKEND_AVX512_SIMDE] = {.name = "avx512-simde", .usable = falcon_cpu_has_avx2,
                                     .what = "avx512f kernels emulated by SIMDe on avx2",
                                     .lacking = "avx512-simde (needs avx2; this CPU lacks it)",
                                     CPU(avx512emu, falcon_fw), .half_width = falcon_cpu_avx512_half_width,
                                     CPU_HALF(avx512emu, falcon_fw)},
#else
    [FALCON_BACKEND_AVX512_SIMDE] = {.name = "avx512-simde"},
#endif
};
_Static_assert(sizeof registry / sizeof registry[0] == FALCON_BACKEND_ROWS,
               "one row in the registry per falcon_backend value, public or test-only");

static unsigned hidden_mask; /* tests only: falcon_backend_hide */

const falcon_backend_info *falcon_backend_info_of(falcon_backend b)
{
    return (unsigned)b < FALCON_BACKEND_ROWS ? &registry[b] : NULL;
}

void falcon_backend_hide(falcon_backend b, int hidden)
{
    if ((unsigned)b >= FALCON_BACKEND_ROWS) return;
    hidden_mask = hidden ? hidden_mask | 1u << b : hidden_mask & ~(1u << b);
}

int falcon_backend_available(falcon_backend b)
{
    const falcon_backend_info *be = falcon_backend_info_of(b);
    return be && be->usable && !(hidden_mask >> b & 1) && be->usable();
}

falcon_backend falcon_backend_resolve(falcon_backend b)
{
    if (b != FALCON_BACKEND_AUTO) return b;
    falcon_backend best = FALCON_BACKEND_SCALAR;
    for (int i = 0; i < FALCON_BACKEND_ROWS; i++)
        if (registry[i].auto_rank > registry[best].auto_rank && falcon_backend_available((falcon_backend)i))
            best = (falcon_backend)i;
    return best;
}

const falcon_cpu_f32 *falcon_backend_cpu_f32(const falcon_backend_info *be)
{
    return be->half_width && be->half_width() ? &be->f32_half : &be->f32;
}

const falcon_cpu_f64 *falcon_backend_cpu_f64(const falcon_backend_info *be)
{
    return be->half_width && be->half_width() ? &be->f64_half : &be->f64;
}

const falcon_scan *falcon_backend_scan(const falcon_backend_info *be)
{
    return be->scan_half && be->half_width && be->half_width() ? be->scan_half : be->scan;
}

const char *falcon_backend_describe(falcon_backend b)
{
    if (b == FALCON_BACKEND_AUTO) return falcon_backend_describe(falcon_backend_resolve(b));
    const falcon_backend_info *be = falcon_backend_info_of(b);
    if (!be || !be->usable) return "not compiled in";
    if (hidden_mask >> b & 1) return "hidden (a test made it unavailable)";
    if (be->describe) return be->describe();
    if (!be->usable() && be->lacking) return be->lacking;
    if (be->what_half && be->half_width && be->half_width()) return be->what_half;
    return be->what_direct && falcon_direct_decay(be->f32.direct_decay) ? be->what_direct : be->what;
}

const char *falcon_backend_name(falcon_backend b)
{
    const falcon_backend_info *be = falcon_backend_info_of(b);
    return be ? be->name : "unknown";
}

int falcon_backend_parse(const char *s)
{
    for (int i = 0; s && i < FALCON_BACKEND_ROWS; i++)
        if (!strcmp(s, registry[i].name)) return i;
    return -1;
}
