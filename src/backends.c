/*
 * The backend registry: the one list of backends. Each row names the
 * backend, its CPU check, its micro-kernel tables with the framework drivers
 * that go with them (CPU backends), or the function that runs a call (cuda,
 * mpfr). A backend the build leaves out keeps its row with only its name, so
 * asking for it is an "unavailable" error, never a crash or a wrong table.
 * Adding a backend: its enum value in include/falcon.h, its row here, its
 * folder under kernels/ (README, "Adding a backend").
 */
#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include "internal.h"
#include "backends.h"

/* Declares backend ID's tables falcon_uk_ID_{f32,f64}; CPU(ID, FW) fills a
 * row's two pairs with them and the framework build FW_{f32,f64}. */
#define DECLARE_UK(ID)                        \
    extern const falcon_uk_f32 falcon_uk_##ID##_f32; \
    extern const falcon_uk_f64 falcon_uk_##ID##_f64;
#define DECLARE_FW(FW)                               \
    extern const falcon_drivers_f32 FW##_f32;        \
    extern const falcon_drivers_f64 FW##_f64;
/* RULE: where the fp32 recurrent form's decay is direct (NULL: never).
 * fp64 has none: its decay is always direct (no lazy decay there). */
#define CPU_RULE(ID, FW, RULE)                                                                  \
    .f32 = {&falcon_uk_##ID##_f32, &FW##_f32, RULE}, .f64 = {&falcon_uk_##ID##_f64, &FW##_f64, NULL}
#define CPU(ID, FW) CPU_RULE(ID, FW, NULL)
#define CPU_HALF(ID, FW)                                                                     \
    .f32_half = {&falcon_uk_##ID##_half_f32, &FW##_f32, NULL},                                   \
    .f64_half = {&falcon_uk_##ID##_half_f64, &FW##_f64, NULL}

static int always(void) { return 1; }

/* Under an ISA check: the backend's code may not run before it said yes. */
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

/* The CPU's AMD family (0 on other vendors), read once: every call asks
 * (the table of its precision, the decay rule below, and the input check's
 * choice of scan, finite-scan.c), and CPUID traps to the hypervisor in a
 * virtual machine: 8 us of a 51 us call of one step for 8 heads in the
 * Zen 5 VM measured. Racing first calls read the same value. */
static unsigned cpu_amd_family(void)
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

/* AVX-512 on a 256-bit datapath: AMD's family 19h (Zen 4) runs each 512-bit
 * FMA as two 256-bit halves, one a cycle, where two-pipe cores (Sapphire
 * Rapids) run two. Zen 5 (family 1Ah) has the full width in its server and
 * desktop parts and keeps the two-pipe tables: on a Zen 5 server core the
 * narrow ones measured within 4% of them either way (recurrent, fp32 and
 * fp64, n = m = 64 and 128), no gain worth a second rule. */
int falcon_cpu_avx512_half_width(void) { return cpu_amd_family() == 0x19; }

/* 1 on a CPU where the fp32 recurrent form's lazy decay (recurrent.inc.c)
 * made the full-width AVX-512 tables slower: AMD family 1Ah (Zen 5). There
 * the pass over the memory is held by its 512-bit stores, not its vector
 * operations, and the lazy step, which saves one FMA an element, measured
 * 0.91-0.96 times the tokens/s of the direct decay (Falcon-1, fp32,
 * n = m = 64 and 128, 8 heads; medians of 5, 8 and 6 alternating rounds),
 * while AVX2 on the same core gained 1.19-1.23. Sapphire Rapids, whose
 * adds share the FMA ports, keeps the lazy decay (unmeasured there). The
 * 256-bit datapath's tables (Zen 4) keep it: 1.07-1.17 there. */
static __attribute__((unused)) int cpu_avx512_direct_decay(void) { return cpu_amd_family() == 0x1a; }

static _Atomic int direct_decay_forced = -1;

void falcon_set_direct_decay(int mode) { direct_decay_forced = mode < 0 ? -1 : mode > 0; }

int falcon_direct_decay(int (*rule)(void))
{
    const int forced = direct_decay_forced;
    return forced >= 0 ? forced : rule != NULL && rule();
}

DECLARE_FW(falcon_fw)
#ifdef FALCON_HAVE_AVX2
DECLARE_UK(avx2)
DECLARE_FW(falcon_fw_avx2)
#endif
#ifdef FALCON_HAVE_AVX512
DECLARE_UK(avx512)
DECLARE_UK(avx512_half)
DECLARE_FW(falcon_fw_avx512)
#endif
#ifdef FALCON_HAVE_AVX512_SIMDE
DECLARE_UK(avx512emu)
DECLARE_UK(avx512emu_half)
#endif

static const falcon_backend_info registry[] = {
    [FALCON_BACKEND_AUTO] = {.name = "auto", .usable = always},
    [FALCON_BACKEND_SCALAR] = {.name = "scalar", .usable = always, .what = "scalar (portable C)",
                               .auto_rank = 1, CPU(scalar, falcon_fw)},
#ifdef FALCON_HAVE_AVX2
    [FALCON_BACKEND_AVX2] = {.name = "avx2", .usable = cpu_has_avx2, .what = "avx2+fma (native)",
                             .lacking = "avx2+fma (compiled in; this CPU lacks it)", .auto_rank = 2,
                             CPU(avx2, falcon_fw_avx2)},
#else
    [FALCON_BACKEND_AVX2] = {.name = "avx2"},
#endif
#ifdef FALCON_HAVE_AVX512
    [FALCON_BACKEND_AVX512] = {.name = "avx512", .usable = cpu_has_avx512, .what = "avx512f (native)",
                               .lacking = "avx512f (compiled in; this CPU lacks it)", .auto_rank = 3,
                               CPU_RULE(avx512, falcon_fw_avx512, cpu_avx512_direct_decay),
                               .half_width = falcon_cpu_avx512_half_width, CPU_HALF(avx512, falcon_fw_avx512),
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
    [FALCON_BACKEND_AVX512_SIMDE] = {.name = "avx512-simde", .usable = cpu_has_avx2,
                                     .what = "avx512f kernels emulated by SIMDe on avx2",
                                     .lacking = "avx512-simde (needs avx2; this CPU lacks it)",
                                     CPU(avx512emu, falcon_fw), .half_width = falcon_cpu_avx512_half_width,
                                     CPU_HALF(avx512emu, falcon_fw)},
#else
    [FALCON_BACKEND_AVX512_SIMDE] = {.name = "avx512-simde"},
#endif
};
_Static_assert(sizeof registry / sizeof registry[0] == FALCON_BACKEND_COUNT,
               "one row in the registry per falcon_backend value");

static unsigned hidden_mask; /* tests only: falcon_backend_hide */

const falcon_backend_info *falcon_backend_info_of(falcon_backend b)
{
    return (unsigned)b < FALCON_BACKEND_COUNT ? &registry[b] : NULL;
}

void falcon_backend_hide(falcon_backend b, int hidden)
{
    if ((unsigned)b >= FALCON_BACKEND_COUNT) return;
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
    for (int i = 0; i < FALCON_BACKEND_COUNT; i++)
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
    for (int i = 0; s && i < FALCON_BACKEND_COUNT; i++)
        if (!strcmp(s, registry[i].name)) return i;
    return -1;
}
