/* falcon-bench: the run's context in the JSON (bench/context.c). */
#ifndef FALCON_BENCH_CONTEXT_H
#define FALCON_BENCH_CONTEXT_H

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
} fb_run_facts;

/* Adds the falcon_* context entries (fb_add_context) of the run. */
void fb_add_run_context(const fb_run_facts *r);

#endif
