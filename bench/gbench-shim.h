/*
 * gbench-shim.h: Google Benchmark seen from C.
 *
 * Every benchmark body of bench/ is C written against include/falcon.h; this
 * header is the whole contact with the C++ library, implemented in one small
 * file (bench/gbench-shim.cc, which also holds main()). A body looks like
 *
 *     static void body(fb_state *st, void *user) {
 *         setup();                            (not timed: before the loop)
 *         while (fb_state_keep_running(st)) work();
 *         fb_state_set_counter(st, "tokens_per_second", T, FB_RATE | FB_ITER_INVARIANT);
 *     }
 *     fb_register("name/with/args", body, user_pointer);
 */
#ifndef FALCON_GBENCH_SHIM_H
#define FALCON_GBENCH_SHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fb_state fb_state; /* a benchmark::State, opaque */
typedef void (*fb_fn)(fb_state *st, void *user);

/* Counter flags (mapped onto benchmark::Counter::Flags by the shim). */
enum {
    FB_DEFAULT = 0,
    FB_RATE = 1 << 0,           /* divided by the measured (real) time */
    FB_ITER_INVARIANT = 1 << 1, /* a per-iteration value: multiplied by the iterations */
    FB_AVG_ITERATIONS = 1 << 2, /* divided by the iterations */
    FB_INVERT = 1 << 3          /* 1/x, applied last */
};

/* Register a benchmark. Timing is wall-clock (UseRealTime): the library runs
 * heads on OpenMP threads, whose work the main thread's CPU time would miss.
 * `user` must outlive the run. Returns 0, or -1 on a null argument. */
int fb_register(const char *name, fb_fn fn, void *user);
/* The same with its own count of repetitions (0: --benchmark_repetitions). */
int fb_register_reps(const char *name, fb_fn fn, void *user, int repetitions);

/* The timing loop: true while more iterations are wanted. The clock starts at
 * the first call, so work done before it is not timed. */
int fb_state_keep_running(fb_state *st);
int64_t fb_state_iterations(const fb_state *st);
void fb_state_set_counter(fb_state *st, const char *name, double value, unsigned flags);
/* Mark the run failed (reported with the message, no timings); leave the loop. */
void fb_state_skip_with_error(fb_state *st, const char *msg);

/* A key/value pair for the "context" block of every report. */
void fb_add_context(const char *key, const char *value);

/*
 * Supplied by the C side (bench/cases.c), called by the shim's main():
 * fb_setup after Google Benchmark has taken its --benchmark_* flags; it takes
 * its own flags out of argv, registers the benchmarks and adds the context.
 * It returns -1 to go on, otherwise the exit status. fb_usage prints the
 * C side's flags after Google Benchmark's --help; fb_teardown frees.
 */
int fb_setup(int *argc, char **argv);
/* bench/output.c: --out=FILE, taken out of argv before Google Benchmark
 * sees it (replaced by its --benchmark_out flags on a temporary; argv may
 * become a new array); fb_out_end commits the file when a case ran. Both
 * return 0 or the exit status. A lone --version prints the version and
 * exits. */
int fb_out_begin(int *argc, char ***argv);
int fb_out_end(size_t ran);
void fb_usage(void);
void fb_teardown(void);

#ifdef __cplusplus
}
#endif

#endif
