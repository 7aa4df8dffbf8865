/*
 * blas.c: OpenBLAS on the GEMM shapes of a chunk block (bench/blas.h), the
 * yardstick next to the probed peak. Compiled with FB_HAVE_OPENBLAS when
 * mk/bench.mk finds OpenBLAS (pkg-config openblas); without it only the
 * "unavailable" answers are built.
 */
#include <stdlib.h>
#include <string.h>
#include "blas.h"

#ifndef FB_HAVE_OPENBLAS

int fb_blas_available(void) { return 0; }
void fb_blas_retarget(void) {}
const char *fb_blas_describe(void) { return "unavailable: built without OpenBLAS (pkg-config openblas; Debian libopenblas-dev)"; }
fb_blas_work *fb_blas_new(int fp64, int64_t n, int64_t m, int64_t C)
{
    (void)fp64, (void)n, (void)m, (void)C;
    return NULL;
}
void fb_blas_run(fb_blas_work *w) { (void)w; }
double fb_blas_flops(const fb_blas_work *w)
{
    (void)w;
    return 0;
}
void fb_blas_free(fb_blas_work *w) { (void)w; }
double fb_blas_measure(fb_blas_work *w, int reps, double min_s)
{
    (void)w, (void)reps, (void)min_s;
    return 0;
}

#else

#include <stdio.h>
#include <strings.h>
#include <unistd.h>
#include <cblas.h>
#include "../kernels/framework/flops.h"
#include "clock.h"
#include "median.h"

int fb_blas_available(void)
{
    static int once;
    if (!once) openblas_set_num_threads(1), once = 1;
    return 1;
}

/* Set in the environment of the program executed again by fb_blas_retarget:
 * the core OpenBLAS had taken the CPU for. */
#define FROM_ENV "FALCON_BENCH_OPENBLAS_DETECTED"

const char *fb_blas_describe(void)
{
    static char buf[512];
    fb_blas_available();
    const char *cfg = openblas_get_config(), *core = openblas_get_corename(), *from = getenv(FROM_ENV);
    const char *forced = getenv("OPENBLAS_CORETYPE");
    int at = snprintf(buf, sizeof buf, "%s%s, core %s, %d thread%s", strncmp(cfg ? cfg : "", "OpenBLAS", 8) ? "OpenBLAS " : "",
                      cfg ? cfg : "?", core ? core : "?", openblas_get_num_threads(),
                      openblas_get_num_threads() == 1 ? "" : "s");
    if (at > 0 && (size_t)at < sizeof buf && forced && from && from[0])
        snprintf(buf + at, sizeof buf - (size_t)at, " (OPENBLAS_CORETYPE=%s set by falcon-bench: OpenBLAS took "
                 "this CPU for %s)", forced, from);
    else if (at > 0 && (size_t)at < sizeof buf && forced)
        snprintf(buf + at, sizeof buf - (size_t)at, " (OPENBLAS_CORETYPE=%s from the environment)", forced);
    /* openblas_get_config ends with a space. */
    for (char *p; (p = strstr(buf, " ,"));) memmove(p, p + 1, strlen(p));
    return buf;
}

/* Cores of OpenBLAS without AVX2: a fallback on a CPU that has it. */
static int pre_avx2(const char *core)
{
    static const char *const old[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge",
                                      "Katmai", "Coppermine", "Northwood", "Banias", "Atom", "Generic",
                                      "Barcelona", "Opteron", "Opteron_SSE3", "Bobcat", "Bulldozer"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        if (core && !strcasecmp(core, old[i])) return 1;
    return 0;
}

__attribute__((constructor)) static void retarget_early(void) { fb_blas_retarget(); }

void fb_blas_retarget(void)
{
#if defined(__x86_64__)
    const char *core = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE") || getenv(FROM_ENV) || !pre_avx2(core)) return;
    __builtin_cpu_init();
    const char *want = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")
                           ? "SkylakeX"
                       : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell"
                                                                                          : NULL;
    if (!want) return;
    /* The arguments as the program was started (NUL-separated). */
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    static char cmd[65536];
    const size_t len = fread(cmd, 1, sizeof cmd - 1, f);
    const int whole = feof(f);
    fclose(f);
    if (!len || !whole) return;
    cmd[len] = 0;
    size_t argc = 0;
    for (size_t i = 0; i < len; i++) argc += cmd[i] == 0;
    char **argv = calloc(argc + 1, sizeof *argv);
    if (!argv) return;
    for (size_t i = 0, k = 0; i < len && k < argc; i += strlen(cmd + i) + 1) argv[k++] = cmd + i;
    if (setenv(FROM_ENV, core, 1) || setenv("OPENBLAS_CORETYPE", want, 1)) {
        free(argv);
        return;
    }
    fflush(stdout), fflush(stderr);
    execv("/proc/self/exe", argv);
    /* Still here: go on with OpenBLAS's choice, and say so. */
    unsetenv("OPENBLAS_CORETYPE"), unsetenv(FROM_ENV);
    free(argv);
    fprintf(stderr, "falcon-bench: could not run again with OPENBLAS_CORETYPE=%s: the yardstick uses %s kernels\n",
            want, core);
#endif
}

struct fb_blas_work {
    int fp64;
    int64_t n, m, C;
    /* chunk: xq [2C][n], z [C][n], s [m][n], sacc [m][n] (the rank update's
     * target: S itself would feed back into the next block's products and
     * grow without bound), lt [C][C] (unit lower), wm [C][C], p1 [2C][C],
     * p2 [2C][m], o [C][m]. square: a, b, c [n][n]. */
    void *xq, *z, *s, *sacc, *lt, *wm, *p1, *p2, *o;
};

/* Seeded values in [-scale, scale] (an LCG; the figures do not depend on them). */
static void *fill(int fp64, int64_t count, double scale, uint64_t seed)
{
    void *p = malloc((size_t)(count > 0 ? count : 1) * (fp64 ? 8 : 4));
    if (!p) return NULL;
    uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < count; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const double v = scale * ((double)(x >> 11) / 9007199254740992.0 * 2 - 1);
        if (fp64) ((double *)p)[i] = v;
        else ((float *)p)[i] = (float)v;
    }
    return p;
}

void fb_blas_free(fb_blas_work *w)
{
    if (!w) return;
    free(w->xq), free(w->z), free(w->s), free(w->sacc), free(w->lt), free(w->wm), free(w->p1), free(w->p2),
        free(w->o);
    free(w);
}

fb_blas_work *fb_blas_new(int fp64, int64_t n, int64_t m, int64_t C)
{
    fb_blas_work *w = calloc(1, sizeof *w);
    if (!w || n < 1 || C < 0 || (C > 0 && m < 1)) {
        free(w);
        return NULL;
    }
    fb_blas_available();
    w->fp64 = fp64, w->n = n, w->m = C ? m : n, w->C = C;
    if (!C) { /* square: a = xq, b = z, c = p1 */
        w->xq = fill(fp64, n * n, 1, 1), w->z = fill(fp64, n * n, 1, 2), w->p1 = fill(fp64, n * n, 0, 3);
        if (!w->xq || !w->z || !w->p1) fb_blas_free(w), w = NULL;
        return w;
    }
    const double sn = 1 / (double)n, sc = 0.5 / (double)C;
    w->xq = fill(fp64, 2 * C * n, 1, 4), w->z = fill(fp64, C * n, sn, 5), w->s = fill(fp64, m * n, 1, 6);
    w->sacc = fill(fp64, m * n, 0, 7), w->lt = fill(fp64, C * C, sc, 8), w->wm = fill(fp64, C * C, 1, 9);
    w->p1 = fill(fp64, 2 * C * C, 0, 10), w->p2 = fill(fp64, 2 * C * m, 0, 11), w->o = fill(fp64, C * m, 0, 12);
    if (!w->xq || !w->z || !w->s || !w->sacc || !w->lt || !w->wm || !w->p1 || !w->p2 || !w->o) {
        fb_blas_free(w);
        return NULL;
    }
    /* (I + A): unit diagonal (trsm is told so), strictly lower part small. */
    for (int64_t i = 0; i < C; i++)
        for (int64_t j = i; j < C; j++) {
            if (fp64) ((double *)w->lt)[i * C + j] = i == j;
            else ((float *)w->lt)[i * C + j] = (float)(i == j);
        }
    return w;
}

double fb_blas_flops(const fb_blas_work *w)
{
    if (!w->C) return 2.0 * (double)w->n * (double)w->n * (double)w->n;
    return falcon_flops(FALCON_FORM_CHUNK, 1, w->C, w->n, w->m, 1, w->C);
}

/* One body for both precisions: G is cblas_s or cblas_d, T float or double. */
#define BLOCK(G, T)                                                                                           \
    do {                                                                                                      \
        const int n = (int)w->n, m = (int)w->m, C = (int)w->C;                                                \
        if (!C) {                                                                                             \
            G##gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, (T *)w->xq, n, (T *)w->z, n, 0,   \
                    (T *)w->p1, n);                                                                           \
            break;                                                                                            \
        }                                                                                                     \
        G##gemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2 * C, C, n, 1, (T *)w->xq, n, (T *)w->z, n, 0,     \
                (T *)w->p1, C);                                                                               \
        G##gemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2 * C, m, n, 1, (T *)w->xq, n, (T *)w->s, n, 0,     \
                (T *)w->p2, m);                                                                               \
        G##trsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, C, m, 1, (T *)w->lt, C,       \
                (T *)w->p2, m);                                                                               \
        G##gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, m, C, 1, (T *)w->wm, C, (T *)w->p2, m, 0,      \
                (T *)w->o, m);                                                                                \
        G##gemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, C, 1, (T *)w->p2, m, (T *)w->z, n, 1,         \
                (T *)w->sacc, n);                                                                             \
    } while (0)

void fb_blas_run(fb_blas_work *w)
{
    if (w->fp64) BLOCK(cblas_d, double);
    else BLOCK(cblas_s, float);
}

double fb_blas_measure(fb_blas_work *w, int reps, double min_s)
{
    enum { MAXREP = 15 };
    double g[MAXREP];
    if (reps < 1) reps = 1;
    if (reps > MAXREP) reps = MAXREP;
    fb_blas_run(w); /* warm: pages touched, OpenBLAS's buffers allocated */
    for (int r = 0; r < reps; r++) {
        int64_t calls = 0;
        const double t0 = fb_thread_cpu_seconds();
        double t;
        do {
            fb_blas_run(w);
            calls++;
        } while ((t = fb_thread_cpu_seconds() - t0) < min_s);
        g[r] = fb_blas_flops(w) * (double)calls / t * 1e-9;
    }
    return fb_median(g, (size_t)reps);
}

#endif
