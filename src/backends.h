/*
 * The backend registry (src/backends.c): one row per value of
 * falcon_backend says everything the library knows about that backend: its
 * name, whether this build and machine can run it, how it is built, and what
 * runs a call: for a CPU backend the micro-kernel tables together with the
 * build of the framework that drives them, one pair per precision; for the
 * others a function that runs the whole call.
 */
#ifndef FALCON_BACKENDS_H
#define FALCON_BACKENDS_H
#include "../kernels/framework/head.h"
#include "falcon.h"

/* Backends for the tests, past the public ones (include/falcon.h), so
 * that one changes no ABI: selectable by value and by name (the CLI's
 * --backend), never by auto. FALCON_BACKEND_ROWS: the registry's rows,
 * public and test-only; a loop over every backend runs to it. */
#define FALCON_BACKEND_AVX512_SIMDE ((falcon_backend)FALCON_BACKEND_COUNT) /* "avx512-simde" */
#define FALCON_BACKEND_ROWS (FALCON_BACKEND_COUNT + 1)

/* A CPU backend in one precision: its micro-kernels and the framework's
 * drivers compiled for the same ISA (or the baseline build). */
/* direct_decay: where it says 1 (or NULL: never), the fp32 recurrent form
 * decays its memory directly instead of lazily (recurrent.inc.c; the
 * rule, src/backends.c; falcon_direct_decay applies the tests' override).
 * NULL in fp64, whose decay is always direct. */
typedef struct falcon_cpu_f32 {
    const falcon_uk_f32 *uk;
    const falcon_drivers_f32 *fw;
    int (*direct_decay)(void);
} falcon_cpu_f32;
typedef struct falcon_cpu_f64 {
    const falcon_uk_f64 *uk;
    const falcon_drivers_f64 *fw;
    int (*direct_decay)(void);
} falcon_cpu_f64;

/* The input check's vector scan on a backend's ISA (src/finite-scan.c):
 * 0 when some element of p[0..count) is not finite. */
typedef struct falcon_scan {
    int (*f32)(const uint32_t *p, int64_t count);
    int (*f64)(const uint64_t *p, int64_t count);
} falcon_scan;
extern const falcon_scan falcon_scan_avx2, falcon_scan_avx512;

typedef struct falcon_backend_info {
    const char *name;          /* the CLI spelling */
    int (*usable)(void);       /* built in and this machine can run it; NULL: not built in */
    const char *what;          /* falcon_backend_describe when usable ... */
    const char *lacking;       /* ... and when built in but not usable here */
    const char *(*describe)(void); /* instead of the two strings, where the backend says */
    int auto_rank;             /* auto picks the usable backend of highest rank; 0: never */
    falcon_cpu_f32 f32;        /* CPU backends (uk NULL for the others) */
    falcon_cpu_f64 f64;
    /* Where half_width() says so, these tables instead (the same results):
     * AVX-512 on a 256-bit datapath; what_half describes the backend then. */
    int (*half_width)(void);
    falcon_cpu_f32 f32_half;
    falcon_cpu_f64 f64_half;
    const char *what_half;
    const char *what_direct; /* instead of what, where f32's direct_decay says 1 */
    /* The input scan on this ISA (NULL: none of its own), and where
     * half_width() says so, scan_half instead (falcon_backend_scan). */
    const falcon_scan *scan, *scan_half;
    /* The other backends run a whole call on the working copy of the state. */
    falcon_status (*run)(const falcon_config *cfg, const falcon_inputs *in, falcon_state *work,
                         void *out);
} falcon_backend_info;

/* falcon_run's CPU path in one precision: every head of the call through
 * the backend's micro-kernels and framework build (src/run_cpu.inc.c, built
 * once per precision by run-cpu-f32.c and run-cpu-f64.c). */
falcon_status falcon_run_cpu_f32(const falcon_config *cfg, const falcon_inputs *in, falcon_state *st,
                                 const double *S_in, void *out, const falcon_cpu_f32 *cpu);
falcon_status falcon_run_cpu_f64(const falcon_config *cfg, const falcon_inputs *in, falcon_state *st,
                                 const double *S_in, void *out, const falcon_cpu_f64 *cpu);

/* falcon_backward's CPU path in one precision: every head through the
 * drivers' backward for the form (src/backward_cpu.inc.c, built for both
 * precisions by src/backward-cpu.c). */
falcon_status falcon_backward_cpu_f32(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *st,
                                      const void *dO, const double *dS_T, const falcon_grads *gr,
                                      const falcon_cpu_f32 *cpu);
falcon_status falcon_backward_cpu_f64(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *st,
                                      const void *dO, const double *dS_T, const falcon_grads *gr,
                                      const falcon_cpu_f64 *cpu);

/* The row of backend b; NULL for a value that names no backend. */
const falcon_backend_info *falcon_backend_info_of(falcon_backend b);
/* The kernels and drivers a CPU backend runs on this machine. */
const falcon_cpu_f32 *falcon_backend_cpu_f32(const falcon_backend_info *be);
const falcon_cpu_f64 *falcon_backend_cpu_f64(const falcon_backend_info *be);

/* The input scan a CPU backend runs on this machine; NULL: none of its own. */
const falcon_scan *falcon_backend_scan(const falcon_backend_info *be);

/* For tests: hide backend b (falcon_backend_available then says 0 and auto
 * skips it) or show it again, so the unavailable paths can be tested on a
 * machine that has every backend. Not thread-safe; tests run it alone. */
void falcon_backend_hide(falcon_backend b, int hidden);

#endif
