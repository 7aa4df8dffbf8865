/*
 * ukernels.c: each CPU backend's micro-kernels (kernels/ukernel.h) on their
 * own, on the shapes the drivers give them, with the same operands call
 * after call, so in L1 or L2: the rate a kernel reaches when nothing
 * around it waits on memory, to read the forms' figures against (a form
 * below its kernels' rates is losing time in its driver or on the
 * caller's rows, not in the kernels).
 *
 * Names: ukernel/<kernel>/<backend>/<precision>/<shape>, e.g.
 *   ukernel/update_read/avx512/fp32/m:64/n:64/k:1/r:2   a recurrent step of
 *       Falcon-1, n = m = 64: one example written, [x; q] read (a decay
 *       of 0.99: the direct decay's step, four vector operations an
 *       element); .../r:2/a:1 the same without the decay (the fp32 lazy
 *       decay's step: fma(e, z, S), three operations an element)
 *   ukernel/gemm_nn/avx512/fp32/M:128/N:128/K:128        a chunk block's
 *       [X; Q] S^T (C = 64, n = m = 128)
 *   ukernel/rank_update/avx512/fp32/m:128/n:128/k:64     its end state
 *   ukernel/trsm_unit_lower/avx512/fp32/P:64/m:128       its triangular solve,
 *       timed with the copy of its right-hand side (each call overwrites it;
 *       solved again in place it would grow without bound)
 *   ukernel/gemm_nt/avx512/fp32/M:1/N:2/K:64             a step's [z.x, z.q]
 *   ukernel/dot2_copy/avx512/fp32/K:64                   the same with q's
 *       copy made as it is read (what the recurrent step calls)
 * Counters: GFLOPS (2 a multiply-add, as kernels/framework/flops.h counts
 * them: update_read 2 m n (k + r) with the decay fused, trsm P^2 m) and
 * peak_fraction (over the probed per-core peak of the precision). The
 * tables are the ones the backend runs on this machine (AVX-512 on a
 * 256-bit datapath: its half-width tables).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/backends.h"
#include "gbench-shim.h"
#include "ukernels.h"
#include "clock.h"

typedef enum { UK_UPDATE_READ, UK_GEMM_NN, UK_RANK_UPDATE, UK_TRSM, UK_GEMM_NT, UK_DOT2_COPY } uk_kernel;
static const char *const kernel_name[] = {"update_read", "gemm_nn", "rank_update", "trsm_unit_lower", "gemm_nt",
                                          "dot2_copy"};
/* the shape's names, in the order of ukcase.d */
static const char *const shape_key[][4] = {
    {"m", "n", "k", "r"}, {"M", "N", "K", NULL}, {"m", "n", "k", NULL}, {"P", "m", NULL, NULL}, {"M", "N", "K", NULL},
    {"K", NULL, NULL, NULL}};

typedef struct ukcase {
    char name[128];
    uk_kernel kernel;
    int fp64;
    const falcon_uk_f32 *f32;
    const falcon_uk_f64 *f64;
    int64_t d[4];
    int plain; /* update_read with a = 1 (the name's /a:1), else a = 0.99 */
    double flops, peak;
} ukcase;

static struct {
    ukcase **cases;
    size_t count, cap;
} u;

typedef struct operand {
    int64_t rows, cols;
} operand;

/* Rows start on cache lines, as the drivers' work arrays do. */
static int64_t ld_of(int64_t cols, int fp64)
{
    const int64_t per = fp64 ? 8 : 16;
    return (cols + per - 1) / per * per;
}

/* The kernel's matrices in its argument order; the count. */
static int operands(const ukcase *c, operand *o)
{
    const int64_t *d = c->d;
    switch (c->kernel) {
    case UK_UPDATE_READ: /* S[m][n], E[k][m], Z[k][n], X[r][m], P[r][n] */
        o[0] = (operand){d[0], d[1]}, o[1] = (operand){d[2], d[0]}, o[2] = (operand){d[2], d[1]};
        o[3] = (operand){d[3], d[0]}, o[4] = (operand){d[3], d[1]};
        return 5;
    case UK_GEMM_NN: /* A[M][K], B[K][N], C[M][N] */
        o[0] = (operand){d[0], d[2]}, o[1] = (operand){d[2], d[1]}, o[2] = (operand){d[0], d[1]};
        return 3;
    case UK_RANK_UPDATE: /* S[m][n], E[m][k], Z[k][n] */
        o[0] = (operand){d[0], d[1]}, o[1] = (operand){d[0], d[2]}, o[2] = (operand){d[2], d[1]};
        return 3;
    case UK_TRSM: /* L[P][P], X[P][m], the right-hand side kept */
        o[0] = (operand){d[0], d[0]}, o[1] = (operand){d[0], d[1]}, o[2] = (operand){d[0], d[1]};
        return 3;
    case UK_GEMM_NT: /* A[M][K], B[N][K], C[M][N] */
        o[0] = (operand){d[0], d[2]}, o[1] = (operand){d[1], d[2]}, o[2] = (operand){d[0], d[1]};
        return 3;
    case UK_DOT2_COPY: /* A[1][K], B[2][K], src[1][K], C[1][2] */
        o[0] = (operand){1, d[0]}, o[1] = (operand){2, d[0]}, o[2] = (operand){1, d[0]}, o[3] = (operand){1, 2};
        return 4;
    }
    return 0;
}

/* The timed loop in one precision. Memories decay (a = 0.99) under small
 * writes, so they stay of order one however many calls run; without the
 * decay (plain) they wander as a random walk of steps of order 1e-3,
 * far from float's limits in any run's count of calls. */
#define UK_LOOP(UK, R)                                                                                     \
    do {                                                                                                   \
        R *p[5];                                                                                           \
        int64_t ld[5];                                                                                     \
        for (int i = 0; i < no; i++) p[i] = buf[i], ld[i] = ld_of(o[i].cols, c->fp64);                    \
        const int64_t *d = c->d;                                                                           \
        switch (c->kernel) {                                                                               \
        case UK_UPDATE_READ:                                                                               \
            while (fb_state_keep_running(st))                                                              \
                UK->update_read(d[0], d[1], d[2], c->plain ? (R)1 : (R)0.99, (R)1, p[0], ld[0], p[1], ld[1], p[2],  \
                                ld[2], d[3], p[3], ld[3], p[4], ld[4]);                                    \
            break;                                                                                         \
        case UK_GEMM_NN:                                                                                   \
            while (fb_state_keep_running(st)) UK->gemm_nn(d[0], d[1], d[2], p[0], ld[0], p[1], ld[1], 0, p[2], ld[2]); \
            break;                                                                                         \
        case UK_RANK_UPDATE:                                                                               \
            while (fb_state_keep_running(st))                                                              \
                UK->rank_update(d[0], d[1], d[2], (R)0.99, p[0], ld[0], p[1], ld[1], p[2], ld[2]);         \
            break;                                                                                         \
        case UK_TRSM:                                                                                      \
            while (fb_state_keep_running(st)) {                                                            \
                memcpy(p[1], p[2], sizeof(R) * (size_t)(o[1].rows * ld[1]));                               \
                UK->trsm_unit_lower(d[0], d[1], p[0], ld[0], p[1], ld[1]);                                 \
            }                                                                                              \
            break;                                                                                         \
        case UK_GEMM_NT:                                                                                   \
            while (fb_state_keep_running(st)) UK->gemm_nt(d[0], d[1], d[2], p[0], ld[0], p[1], ld[1], 0, p[2], ld[2]); \
            break;                                                                                         \
        case UK_DOT2_COPY:                                                                                 \
            while (fb_state_keep_running(st)) UK->dot2_copy(d[0], p[0], p[1], ld[1], p[2], p[3]);           \
            break;                                                                                         \
        }                                                                                                  \
    } while (0)

static void body(fb_state *st, void *user)
{
    const ukcase *c = user;
    operand o[5];
    const int no = operands(c, o);
    const size_t es = c->fp64 ? sizeof(double) : sizeof(float);
    void *buf[5] = {NULL};
    uint64_t s = 0x756b65726e656c ^ (uint64_t)c->kernel;
    int ok = 1;
    for (int i = 0; i < no && ok; i++) {
        const int64_t count = o[i].rows * ld_of(o[i].cols, c->fp64);
        ok = posix_memalign(&buf[i], 64, (size_t)count * es + 64) == 0;
        for (int64_t j = 0; ok && j < count; j++) { /* a seeded LCG: values in [-0.1, 0.1) */
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const double x = ((double)(s >> 11) * 0x1.0p-53 - 0.5) / 5;
            if (c->fp64) ((double *)buf[i])[j] = x;
            else ((float *)buf[i])[j] = (float)x;
        }
    }
    if (!ok) {
        fb_state_skip_with_error(st, "no memory for the operands");
    } else {
        const double t0 = fb_wall_seconds();
        if (c->fp64) UK_LOOP(c->f64, double);
        else UK_LOOP(c->f32, float);
        const double elapsed = fb_wall_seconds() - t0;
        const int64_t iters = fb_state_iterations(st);
        fb_state_set_counter(st, "GFLOPS", c->flops * 1e-9, FB_RATE | FB_ITER_INVARIANT);
        if (c->peak > 0 && iters > 0 && elapsed > 0)
            fb_state_set_counter(st, "peak_fraction", c->flops * 1e-9 * (double)iters / elapsed / c->peak,
                                 FB_DEFAULT);
    }
    for (int i = 0; i < no; i++) free(buf[i]);
}

static double flops_of(uk_kernel k, const int64_t *d)
{
    const double a = (double)d[0], b = (double)d[1], e = (double)d[2];
    switch (k) {
    case UK_UPDATE_READ: return 2 * a * b * (e + (double)d[3]);
    case UK_RANK_UPDATE:
    case UK_GEMM_NN:
    case UK_GEMM_NT: return 2 * a * b * e;
    case UK_TRSM: return a * a * b;
    case UK_DOT2_COPY: return 4 * a;
    }
    return 0;
}

static int add(falcon_backend b, uk_kernel k, int fp64, const int64_t *d, int plain, const double *peak)
{
    const falcon_backend_info *be = falcon_backend_info_of(b);
    if (!be || !be->f32.uk || !falcon_backend_available(b)) return 0;
    ukcase *c = calloc(1, sizeof *c);
    if (!c) return -1;
    *c = (ukcase){.kernel = k, .fp64 = fp64, .f32 = falcon_backend_cpu_f32(be)->uk,
                  .f64 = falcon_backend_cpu_f64(be)->uk, .plain = plain, .flops = flops_of(k, d),
                  .peak = peak[fp64]};
    int len = snprintf(c->name, sizeof c->name, "ukernel/%s/%s/%s", kernel_name[k], be->name, fp64 ? "fp64" : "fp32");
    for (int i = 0; i < 4 && shape_key[k][i]; i++) {
        c->d[i] = d[i];
        len += snprintf(c->name + len, sizeof c->name - (size_t)len, "/%s:%lld", shape_key[k][i], (long long)d[i]);
    }
    if (plain) snprintf(c->name + len, sizeof c->name - (size_t)len, "/a:1");
    if (u.count == u.cap) {
        const size_t nc = u.cap ? 2 * u.cap : 64;
        ukcase **cs = realloc(u.cases, nc * sizeof *cs);
        if (!cs) {
            free(c);
            return -1;
        }
        u.cases = cs, u.cap = nc;
    }
    u.cases[u.count++] = c;
    return fb_register(c->name, body, c);
}

int fb_ukernels_register(const falcon_backend *bs, int nb, int full, double peak_f32, double peak_f64)
{
    /* the default set: the Falcon-1 recurrent step and the chunk block's
     * kernels at the base point (n = m = 128, C = 64; n = m = 64 for the step) */
    static const struct {
        uk_kernel k;
        int64_t d[4];
        int full_only, plain;
    } shapes[] = {
        {UK_UPDATE_READ, {64, 64, 1, 2}, 0, 0},
        {UK_UPDATE_READ, {64, 64, 1, 2}, 0, 1}, /* the same without the decay (/a:1) */
        {UK_GEMM_NN, {128, 128, 128, 0}, 0, 0},
        {UK_RANK_UPDATE, {128, 128, 64, 0}, 0, 0},
        {UK_TRSM, {64, 128, 0, 0}, 0, 0},
        {UK_GEMM_NT, {1, 2, 64, 0}, 0, 0},
        {UK_DOT2_COPY, {64, 0, 0, 0}, 0, 0},
        /* full: the step of n = m = 128 and of Falcon-3 (W = 4: 4 examples
         * written, 5 rows read), the block's [X; Q] Z^T, the end state of
         * n = m = 64 */
        {UK_UPDATE_READ, {128, 128, 1, 2}, 1, 0},
        {UK_UPDATE_READ, {64, 64, 4, 5}, 1, 0},
        {UK_GEMM_NN, {128, 64, 128, 0}, 1, 0},
        {UK_RANK_UPDATE, {64, 64, 64, 0}, 1, 0},
    };
    const double peak[2] = {peak_f32, peak_f64};
    int rc = 0;
    for (int b = 0; b < nb; b++)
        for (int fp64 = 0; fp64 < 2; fp64++)
            for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
                if (full || !shapes[i].full_only) rc |= add(bs[b], shapes[i].k, fp64, shapes[i].d, shapes[i].plain, peak);
    return rc ? -1 : 0;
}

void fb_ukernels_free(void)
{
    for (size_t i = 0; i < u.count; i++) free(u.cases[i]);
    free(u.cases);
    memset(&u, 0, sizeof u);
}
