/*
 * A clock on the phases of the chunk driver's block (blocked.inc.c), for
 * finding where a call's time goes on any machine, a virtual one included
 * (its profiler, sampling on the timer without hardware counters, smears a
 * stall over the instructions after it). It is in every build and off
 * until falcon_phase_clock_begin (kernels/framework/phase-clock.c) switches it on: the
 * benchmark does, for a few calls of each chunk case after its timed ones,
 * and reports the driver's share of a call from them (driver_fraction,
 * bench/cases.c; falcon-bench --phases prints every phase). Off, a block
 * pays one load of the switch and a predictable branch a phase. On, a
 * block reads the clock once a phase: the time-stamp counter on x86-64 (a
 * few tens of cycles a read, 15 reads a block: about 0.3% of a block of
 * 64 steps at n = m = 128), else CLOCK_MONOTONIC. A block's phase times
 * are kept in the block's own clock and added into the shared record
 * (totals and a histogram a phase, for the median) once, at its end.
 * Nothing here changes a result.
 */
#ifndef FALCON_PHASE_CLOCK_H
#define FALCON_PHASE_CLOCK_H

enum {
    FW_PH_COPY,         /* the block's keys and queries featurized into [X; Q] (or found in place) */
    FW_PH_PREFETCH,     /* the next (head, block)'s rows, between phases */
    FW_PH_PACK,         /* Zt = Z^T packed: with direct operands, the keys' first read */
    FW_PH_PRODUCTS,     /* [X; Q] Z^T and [X; Q] S^T (and rescaled keys) */
    FW_PH_TERMS,        /* terms, eta per step */
    FW_PH_SYSTEM,       /* decay rows, residuals, the system A and W */
    FW_PH_SOLVE,        /* the triangular solve */
    FW_PH_OUT_PRODUCT,  /* W R */
    FW_PH_OUT_ROWS,     /* the caller's output rows written and checked */
    FW_PH_END_STATE,    /* the memory's decay and rank update */
    FW_PH_COUNT
};

/* 1 for the phases that are the driver's own loops, 0 for those that are
 * micro-kernel calls (the end state's also holds the scaling of R before
 * the rank update, a pass over L rows). */
#define FW_PH_IS_DRIVER(ph)                                                                        \
    ((ph) == FW_PH_COPY || (ph) == FW_PH_PREFETCH || (ph) == FW_PH_PACK || (ph) == FW_PH_TERMS || \
     (ph) == FW_PH_SYSTEM || (ph) == FW_PH_OUT_ROWS)

#if defined(__x86_64__)
#include <x86intrin.h>
#define FW_CLOCK_UNIT "TSC ticks"
static inline unsigned long long falcon_phase_clock_now(void) { return __rdtsc(); }
#else
#include <time.h>
#define FW_CLOCK_UNIT "ns"
static inline unsigned long long falcon_phase_clock_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}
#endif

/* What the record holds since falcon_phase_clock_begin: per phase, the
 * mean and median time a block (clock units) and the total. */
typedef struct falcon_phase_summary {
    unsigned long long blocks;
    const char *isa, *prec; /* the driver of the last block ("none": no block) */
    double mean[FW_PH_COUNT], median[FW_PH_COUNT], total[FW_PH_COUNT];
} falcon_phase_summary;

extern int falcon_phase_clock_switch; /* read through falcon_phase_clock_on */
static inline int falcon_phase_clock_on(void) { return __atomic_load_n(&falcon_phase_clock_switch, __ATOMIC_RELAXED); }
/* Empties the record and switches the clock on; the caller makes sure no
 * call is running (the benchmark: between calls). */
void falcon_phase_clock_begin(void);
/* Switches it off and summarizes the record (NULL: only off). */
void falcon_phase_clock_end(falcon_phase_summary *s);
/* One block's phase times into the record (the marks' fw_phase_block_end). */
void falcon_phase_clock_add_block(const unsigned long long t[FW_PH_COUNT], const char *isa, const char *prec);
/* The phase names, for printing. */
extern const char *const falcon_phase_names[FW_PH_COUNT];

/* The histogram's bins: 64 a doubling (a median to about 1%). Bin of a
 * time v: its leading bit's position, then the next FW_PH_BIN_BITS bits
 * (v < 2^FW_PH_BIN_BITS: v itself); the middle of bin k's range. */
enum { FW_PH_BIN_BITS = 6, FW_PH_BINS = 64 << FW_PH_BIN_BITS };
int falcon_phase_bin(unsigned long long v);
double falcon_phase_bin_value(int k);

/* The marks, in blk_block: fw_phase_start at a block's start (isa and
 * prec name the driver), fw_phase_end(ph) gives the time since the last
 * mark to phase ph, fw_phase_block_end after the last phase. A block's
 * clock lives in its own context (blk_ctx), so every phase function can
 * mark. */
typedef struct fw_phase_clock {
    int on;
    const char *isa, *prec;
    unsigned long long t[FW_PH_COUNT], last;
} fw_phase_clock;

static inline void fw_phase_start(fw_phase_clock *k, const char *isa, const char *prec)
{
    k->on = falcon_phase_clock_on();
    k->isa = isa, k->prec = prec;
    for (int ph = 0; ph < FW_PH_COUNT; ph++) k->t[ph] = 0;
    k->last = k->on ? falcon_phase_clock_now() : 0;
}

static inline void fw_phase_end(fw_phase_clock *k, int ph)
{
    if (k->on) {
        const unsigned long long now = falcon_phase_clock_now();
        k->t[ph] += now - k->last;
        k->last = now;
    }
}

static inline void fw_phase_block_end(const fw_phase_clock *k)
{
    if (k->on) falcon_phase_clock_add_block(k->t, k->isa, k->prec);
}

#endif
