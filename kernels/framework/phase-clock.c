/*
 * The record behind the chunk driver's phase clock
 * (kernels/framework/phase-clock.h): one for the process, shared by every
 * driver (ISA and precision) and thread. Blocks add into it atomically at
 * their end; begin and end are the benchmark's, between calls. The
 * histograms give each phase's median a block, which a block the host
 * interrupts does not move (the mean it does).
 */
#include <string.h>
#include "phase-clock.h"

int falcon_phase_clock_switch;

const char *const falcon_phase_names[FW_PH_COUNT] = {"copy",   "prefetch", "pack",        "products", "terms",
                                                     "system", "solve",    "out product", "out rows", "end state"};

static struct {
    unsigned long long total[FW_PH_COUNT], blocks;
    unsigned long long hist[FW_PH_COUNT][FW_PH_BINS];
    const char *isa, *prec;
} rec;

int falcon_phase_bin(unsigned long long v)
{
    if (v < (1ull << FW_PH_BIN_BITS)) return (int)v;
    const int b = 63 - __builtin_clzll(v);
    return ((b - FW_PH_BIN_BITS + 1) << FW_PH_BIN_BITS) + (int)((v >> (b - FW_PH_BIN_BITS)) & ((1u << FW_PH_BIN_BITS) - 1));
}

double falcon_phase_bin_value(int k)
{
    if (k < (1 << FW_PH_BIN_BITS)) return k;
    const int e = (k >> FW_PH_BIN_BITS) - 1, f = k & ((1 << FW_PH_BIN_BITS) - 1);
    return ((double)((1 << FW_PH_BIN_BITS) + f) + 0.5) * (double)(1ull << e);
}

/* The first bin at which half the blocks have been seen. */
static double median_of(const unsigned long long *hist)
{
    unsigned long long n = 0, seen = 0;
    for (int k = 0; k < FW_PH_BINS; k++) n += hist[k];
    for (int k = 0; k < FW_PH_BINS; k++)
        if ((seen += hist[k]) * 2 >= n && n > 0) return falcon_phase_bin_value(k);
    return 0;
}

void falcon_phase_clock_begin(void)
{
    __atomic_store_n(&falcon_phase_clock_switch, 0, __ATOMIC_SEQ_CST);
    memset(&rec, 0, sizeof rec);
    __atomic_store_n(&falcon_phase_clock_switch, 1, __ATOMIC_SEQ_CST);
}

void falcon_phase_clock_add_block(const unsigned long long t[FW_PH_COUNT], const char *isa, const char *prec)
{
    for (int i = 0; i < FW_PH_COUNT; i++) {
        __atomic_fetch_add(&rec.total[i], t[i], __ATOMIC_RELAXED);
        __atomic_fetch_add(&rec.hist[i][falcon_phase_bin(t[i])], 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&rec.blocks, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&rec.isa, isa, __ATOMIC_RELAXED); /* the driver of the last block */
    __atomic_store_n(&rec.prec, prec, __ATOMIC_RELAXED);
}

void falcon_phase_clock_end(falcon_phase_summary *s)
{
    __atomic_store_n(&falcon_phase_clock_switch, 0, __ATOMIC_SEQ_CST);
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->blocks = rec.blocks;
    s->isa = rec.isa ? rec.isa : "none";
    s->prec = rec.prec ? rec.prec : "none";
    for (int i = 0; i < FW_PH_COUNT; i++) {
        s->total[i] = (double)rec.total[i];
        s->mean[i] = rec.blocks ? (double)rec.total[i] / (double)rec.blocks : 0;
        s->median[i] = median_of(rec.hist[i]);
    }
}
