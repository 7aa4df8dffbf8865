/*
 * side-checks.h: the counters a benchmark body measures after its timed
 * loop with calls of its own (the input check's share, the phase shares,
 * the paired ratios), kept so that a repetition that does not measure them
 * again sets the kept values instead.
 *
 * Why every repetition must set them: Google Benchmark (1.7) takes the
 * names of a case's aggregate counters from its repetition 0, and with
 * random interleaving the repetition that measured may be another one;
 * a counter set in one repetition only can vanish from the medians. A kept
 * value set again has the median it was measured with.
 */
#ifndef FALCON_BENCH_SIDE_CHECKS_H
#define FALCON_BENCH_SIDE_CHECKS_H

#include <stdio.h>
#include "gbench-shim.h"

enum { FB_SIDE_MAX = 24 };

typedef struct fb_side {
    int n;
    char name[FB_SIDE_MAX][40];
    double value[FB_SIDE_MAX];
} fb_side;

/* Sets the counter (FB_DEFAULT) and, with keep non-NULL, keeps it. */
static inline void fb_side_set(fb_state *st, fb_side *keep, const char *name, double value)
{
    fb_state_set_counter(st, name, value, FB_DEFAULT);
    if (!keep || keep->n == FB_SIDE_MAX) return;
    snprintf(keep->name[keep->n], sizeof keep->name[0], "%s", name);
    keep->value[keep->n++] = value;
}

/* Sets every kept counter again. */
static inline void fb_side_replay(fb_state *st, const fb_side *kept)
{
    for (int i = 0; i < kept->n; i++) fb_state_set_counter(st, kept->name[i], kept->value[i], FB_DEFAULT);
}

#endif
