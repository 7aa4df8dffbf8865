/*
 * A build-time clock on the phases of the chunk driver's block
 * (blocked.inc.c), for finding where a call's time goes on a machine
 * whose profiler has no hardware counters (a VM: sampling on the timer
 * smears a stall over the instructions after it). Off unless the build
 * defines FW_PHASE_CLOCK (make OPT="-O2 -DFW_PHASE_CLOCK"); then each
 * driver instance (ISA and precision) that ran prints, at exit, the time
 * per block of each phase and its share, on stderr. The clock is the
 * time-stamp counter on x86-64 (a few tens of cycles a read, 15 reads a
 * block: about 0.3% of a block of 64 steps at n = m = 128), else
 * CLOCK_MONOTONIC.
 * Next to each phase's mean a block it prints its median a block, which
 * a block the host interrupts does not move. On a shared host the whole
 * machine's speed still varies between runs (Zen 3, one build: the
 * products' median 157k to 214k ticks), so compare a phase between builds
 * as its ratio to the products' median of the same run, over several
 * alternating runs. Each block's phase times go into a histogram of 64
 * bins per doubling (the median to about 1%) when the block ends
 * (FW_PHASE_BLOCK_END).
 * The mark and the block's times are per thread; a block's end adds them
 * into the shared totals atomically. Nothing here changes a result.
 */
#ifndef FALCON_PHASE_CLOCK_H
#define FALCON_PHASE_CLOCK_H

enum {
    FW_PH_COPY,         /* the block's keys and queries featurized into [X; Q] */
    FW_PH_PREFETCH,     /* the next (head, block)'s rows, between phases */
    FW_PH_PRODUCTS,     /* [X; Q] Z^T and [X; Q] S^T (and rescaled keys) */
    FW_PH_TERMS,        /* terms, eta per step */
    FW_PH_SYSTEM,       /* decay rows, residuals, the system A and W */
    FW_PH_SOLVE,        /* the triangular solve */
    FW_PH_OUT_PRODUCT,  /* W R */
    FW_PH_OUT_ROWS,     /* the caller's output rows written and checked */
    FW_PH_END_STATE,    /* the memory's decay and rank update */
    FW_PH_COUNT
};

#ifdef FW_PHASE_CLOCK
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#define FW_CLOCK_UNIT "TSC ticks"
static inline unsigned long long fw_clock_now(void) { return __rdtsc(); }
#else
#define FW_CLOCK_UNIT "ns"
static inline unsigned long long fw_clock_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}
#endif

enum { FW_PH_BIN_BITS = 6, FW_PH_BINS = 64 << FW_PH_BIN_BITS };
static unsigned long long fw_phase_total[FW_PH_COUNT], fw_phase_blocks;
static unsigned long long fw_phase_hist[FW_PH_COUNT][FW_PH_BINS];
static const char *fw_phase_isa, *fw_phase_prec;
static _Thread_local unsigned long long fw_phase_last, fw_phase_block[FW_PH_COUNT];

/* Bin of a time v: its leading bit's position, then the next
 * FW_PH_BIN_BITS bits (v < 2^FW_PH_BIN_BITS: v itself). */
static inline int fw_phase_bin(unsigned long long v)
{
    if (v < (1ull << FW_PH_BIN_BITS)) return (int)v;
    const int b = 63 - __builtin_clzll(v);
    return ((b - FW_PH_BIN_BITS + 1) << FW_PH_BIN_BITS) + (int)((v >> (b - FW_PH_BIN_BITS)) & ((1u << FW_PH_BIN_BITS) - 1));
}

/* The middle of bin k's range of times. */
static double fw_phase_bin_value(int k)
{
    if (k < (1 << FW_PH_BIN_BITS)) return k;
    const int e = (k >> FW_PH_BIN_BITS) - 1, f = k & ((1 << FW_PH_BIN_BITS) - 1);
    return ((double)((1 << FW_PH_BIN_BITS) + f) + 0.5) * (double)(1ull << e);
}

static double fw_phase_median(int ph)
{
    unsigned long long n = 0, seen = 0;
    for (int k = 0; k < FW_PH_BINS; k++) n += fw_phase_hist[ph][k];
    for (int k = 0; k < FW_PH_BINS; k++)
        if ((seen += fw_phase_hist[ph][k]) * 2 >= n && n > 0) return fw_phase_bin_value(k);
    return 0;
}

static void fw_phase_report(void)
{
    static const char *const name[FW_PH_COUNT] = {"copy",  "prefetch",    "products",  "terms",    "system",
                                                  "solve", "out product", "out rows", "end state"};
    double all = 0;
    for (int i = 0; i < FW_PH_COUNT; i++) all += (double)fw_phase_total[i];
    if (fw_phase_blocks == 0 || all <= 0) return;
    fprintf(stderr, "phase clock, chunk driver, %s %s: %llu blocks, %s a block (mean, share of the mean, median)\n",
            fw_phase_isa, fw_phase_prec, fw_phase_blocks, FW_CLOCK_UNIT);
    for (int i = 0; i < FW_PH_COUNT; i++)
        fprintf(stderr, "  %-12s %9.0f  %5.1f%%  %9.0f\n", name[i], (double)fw_phase_total[i] / (double)fw_phase_blocks,
                100.0 * (double)fw_phase_total[i] / all, fw_phase_median(i));
}

/* At a block's start; isa and prec name the instance. */
#define FW_PHASE_START(isa, prec)                                                          \
    do {                                                                             \
        static int fw_registered_;                                                   \
        if (!__atomic_exchange_n(&fw_registered_, 1, __ATOMIC_RELAXED)) {           \
            fw_phase_isa = (isa), fw_phase_prec = (prec);                            \
            atexit(fw_phase_report);                                                 \
        }                                                                            \
        __atomic_fetch_add(&fw_phase_blocks, 1, __ATOMIC_RELAXED);                  \
        fw_phase_last = fw_clock_now();                                              \
    } while (0)
/* The time since the last mark goes to phase ph. */
#define FW_PHASE_END(ph)                                                             \
    do {                                                                             \
        const unsigned long long fw_now_ = fw_clock_now();                           \
        fw_phase_block[ph] += fw_now_ - fw_phase_last;                               \
        fw_phase_last = fw_now_;                                                     \
    } while (0)
/* After a block's last phase: its times into the totals and histograms. */
#define FW_PHASE_BLOCK_END()                                                         \
    do {                                                                             \
        for (int fw_i_ = 0; fw_i_ < FW_PH_COUNT; fw_i_++) {                          \
            __atomic_fetch_add(&fw_phase_total[fw_i_], fw_phase_block[fw_i_], __ATOMIC_RELAXED); \
            __atomic_fetch_add(&fw_phase_hist[fw_i_][fw_phase_bin(fw_phase_block[fw_i_])], 1, __ATOMIC_RELAXED); \
            fw_phase_block[fw_i_] = 0;                                               \
        }                                                                            \
    } while (0)
#else
#define FW_PHASE_START(isa, prec) ((void)0)
#define FW_PHASE_END(ph) ((void)0)
#define FW_PHASE_BLOCK_END() ((void)0)
#endif

#endif
