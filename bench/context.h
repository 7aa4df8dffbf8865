/* falcon-bench: the run's context in the JSON (bench/context.c). */
#ifndef FALCON_BENCH_CONTEXT_H
#define FALCON_BENCH_CONTEXT_H

#include <stddef.h>
#include <stdint.h>
#include "falcon.h"
#include "probe.h"

/* What the run knows of itself when its cases are registered. */
typedef struct fb_run_facts {
    const char *sweep; /* default, goals or full */
    int simde;         /* the avx512-simde entries are in */
    int ncpu;          /* CPUs online */
    int probe_asked;   /* 0: --no-probe; 1 with probe NULL: it ran and failed */
    const fb_probe *probe; /* NULL: no peak or roofline counters */
    const falcon_backend *backends; /* the CPU backends benchmarked */
    int nbackends;
    int checks_once;   /* --checks-once: side checks in each case's first repetition only */
    int scalar_reps;   /* --scalar-reps: the scalar backend's repetitions (0: as the others) */
} fb_run_facts;

/* Adds the falcon_* context entries (fb_add_context) of the run. */
void fb_add_run_context(const fb_run_facts *r);

/* A shape of the OpenBLAS yardstick (bench/blas.h): C = 0, the square
 * product n x n x n. */
typedef struct fb_blas_shape {
    int fp64;
    int64_t n, m, C;
} fb_blas_shape;

/* Adds the falcon_blas* context entries: the yardstick's fraction of the
 * probed peak on each shape, timed now. */
void fb_add_blas_context(const fb_run_facts *r, const fb_blas_shape *shapes, size_t count);

#endif
