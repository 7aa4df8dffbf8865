/*
 * falcon-bench: the run's context in the JSON (what a reader needs to
 * interpret the figures): the CPU, the build, the backends, the probe's
 * peaks and bandwidths.
 */
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "falcon.h"
#include "blas.h"
#include "buildinfo.h"
#include "context.h"
#include "gbench-shim.h"
#include "probe.h"

static void ctx(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ctx(const char *key, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fb_add_context(key, buf);
}

/* The first value of /proc/cpuinfo's field `key` (up to its colon), or
 * "" when absent. */
static void cpuinfo_field(const char *key, char *out, size_t len)
{
    out[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon && !strncmp(line, key, n) && strspn(line + n, " \t") == (size_t)(colon - line - n)) {
            snprintf(out, len, "%s", colon[1] == ' ' ? colon + 2 : colon + 1);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    }
    fclose(f);
}

static void cpu_model(char *out, size_t len)
{
    cpuinfo_field("model name", out, len);
    if (!out[0]) snprintf(out, len, "unknown");
}

/* What identifies the CPU where its name does not: a virtual machine often
 * shows a generic "Intel(R) Xeon(R) Processor" for several generations, which
 * family and model tell apart (6/143 Sapphire Rapids, 6/207 Emerald Rapids,
 * 25/17 Zen 4), and the caches the tile and chunk choices depend on. */
static void cpu_id(char *out, size_t len)
{
    char vendor[64], family[16], model[16], stepping[16];
    cpuinfo_field("vendor_id", vendor, sizeof vendor);
    cpuinfo_field("cpu family", family, sizeof family);
    cpuinfo_field("model", model, sizeof model);
    cpuinfo_field("stepping", stepping, sizeof stepping);
    snprintf(out, len, "%s family %s model %s stepping %s; L1d %ld KiB, L2 %ld KiB, L3 %ld KiB (per core/instance)",
             vendor[0] ? vendor : "?", family[0] ? family : "?", model[0] ? model : "?",
             stepping[0] ? stepping : "?", (long)(fb_cache_bytes(1) / 1024), (long)(fb_cache_bytes(2) / 1024),
             (long)(fb_cache_bytes(3) / 1024));
}

void fb_add_run_context(const fb_run_facts *r)
{
    char buf[512];
    cpu_model(buf, sizeof buf);
    ctx("falcon_cpu_model", "%s", buf);
    cpu_id(buf, sizeof buf);
    ctx("falcon_cpu_id", "%s", buf);
    buf[0] = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    static const char *const isa[] = {"avx2", "fma", "avx512f"};
    int have[3] = {__builtin_cpu_supports("avx2"), __builtin_cpu_supports("fma"), __builtin_cpu_supports("avx512f")};
    for (int i = 0; i < 3; i++)
        if (have[i]) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", buf[0] ? " " : "", isa[i]);
#endif
    ctx("falcon_isa", "%s", buf[0] ? buf : "none of avx2 fma avx512f");
    ctx("falcon_compiler", "%s", fb_build_cc);
    ctx("falcon_cflags", "%s", fb_build_cflags);
    ctx("falcon_shim_cxxflags", "%s", fb_build_cxxflags);
    ctx("falcon_git_revision", "%s", fb_build_git_revision);
    ctx("falcon_version", "%s", FALCON_VERSION);
    ctx("falcon_threads", "%d (OpenMP max threads; %d CPUs online)", omp_get_max_threads(), r->ncpu);
    ctx("falcon_sweep", "%s%s", r->sweep, r->simde ? " +avx512-simde" : "");
    ctx("falcon_side_checks", "%s", r->checks_once ? "each case's first repetition" : "every repetition");
    if (r->scalar_reps > 0) ctx("falcon_scalar_repetitions", "%d", r->scalar_reps);
    buf[0] = 0;
    for (int b = 0; b < r->nbackends; b++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", b ? "; " : "",
                 falcon_backend_name(r->backends[b]), falcon_backend_describe(r->backends[b]));
    ctx("falcon_backends", "%s; cuda=%s", buf, falcon_backend_describe(FALCON_BACKEND_CUDA));
    ctx("falcon_flop_model", "%s: dense products as the kernels run them, FMA = 2 flops, triangular "
        "solve counted triangular; parallel form = the chunk count with L = min(T, 4096/W)",
        "kernels/framework/flops.h");
    if (!r->probe) {
        ctx("falcon_probe", "%s: no peak or roofline counters",
            r->probe_asked ? "failed (no memory for its buffers, or a zero measurement)" : "skipped (--no-probe)");
        return;
    }
    const fb_probe *p = r->probe;
    ctx("falcon_peak_isa", "%s", p->best_isa);
    ctx("falcon_peak_fp32_gflops_per_core", "%.4g", p->f32_best);
    ctx("falcon_peak_fp64_gflops_per_core", "%.4g", p->f64_best);
    ctx("falcon_peak_fp32_gflops_per_isa", "scalar %.4g, avx2 %.4g, avx512 %.4g (0 = not on this CPU)",
        p->f32_scalar, p->f32_avx2, p->f32_avx512);
    ctx("falcon_peak_fp64_gflops_per_isa", "scalar %.4g, avx2 %.4g, avx512 %.4g (0 = not on this CPU)",
        p->f64_scalar, p->f64_avx2, p->f64_avx512);
    ctx("falcon_peak_gflops_all_threads", "fp32 %.4g, fp64 %.4g on %d threads (measured; peak_fraction "
        "uses per-core x threads)", p->f32_all, p->f64_all, p->threads);
    ctx("falcon_triad_gbs_1_thread", "%.4g", p->bw_1);
    ctx("falcon_triad_gbs_all_threads", "%.4g (%d threads; 3 arrays of %.0f MiB)", p->bw_all, p->threads,
        p->buffer_mib);
    ctx("falcon_read_gbs_1_thread", "%.4g", p->read_1);
    ctx("falcon_read_gbs_all_threads", "%.4g (%d threads; a streaming read of the same arrays)", p->read_all,
        p->threads);
}


/* The OpenBLAS yardstick by the thread's CPU clock (as the probe), into
 * the context: medians of 5 timings of at least 20 ms each. */
void fb_add_blas_context(const fb_run_facts *r, const fb_blas_shape *shapes, size_t count)
{
    fb_add_context("falcon_blas", fb_blas_describe());
    if (!fb_blas_available()) {
        fb_add_context("falcon_blas_achievable", "unavailable (built without OpenBLAS)");
        return;
    }
    if (!r->probe) {
        fb_add_context("falcon_blas_achievable", r->probe_asked ? "not measured (the probe failed: no peak to divide by)"
                                                               : "not measured (--no-probe: no peak to divide by)");
        return;
    }
    char chunk[4096] = "", square[512] = "";
    for (size_t k = 0; k < count; k++) {
        const fb_blas_shape *b = &shapes[k];
        fb_blas_work *w = fb_blas_new(b->fp64, b->n, b->m, b->C);
        if (!w) continue;
        const double gf = fb_blas_measure(w, 5, 0.02);
        fb_blas_free(w);
        const double frac = gf / (b->fp64 ? r->probe->f64_best : r->probe->f32_best);
        const char *prec = b->fp64 ? "fp64" : "fp32";
        char *buf = b->C ? chunk : square;
        const size_t len = b->C ? sizeof chunk : sizeof square, at = strlen(buf);
        if (b->C)
            snprintf(buf + at, len - at, "%s%s n=%lld m=%lld C=%lld: %.3f (%.4g GFLOPS)", at ? "; " : "", prec,
                     (long long)b->n, (long long)b->m, (long long)b->C, frac, gf);
        else
            snprintf(buf + at, len - at, "%s%s %lld^3: %.3f (%.4g GFLOPS)", at ? "; " : "", prec,
                     (long long)b->n, frac, gf);
        fprintf(stderr, "blas: %s\n", buf + at + (at ? 2 : 0));
    }
    fb_add_context("falcon_blas_achievable", chunk[0] ? chunk : "no chunk cases registered");
    if (square[0]) fb_add_context("falcon_blas_square", square);
    fb_add_context("falcon_blas_note", "fraction of the probed per-core peak that OpenBLAS reaches on 1 thread "
                                       "on the GEMMs of one chunk block (gemm [X;Q]Z^T, gemm [X;Q]S^T, trsm, "
                                       "gemm W R, gemm S += R^T Z), counted as the chunk flop model counts them; "
                                       "medians of 5 CPU-clock timings at startup; the blas/ entries time the same "
                                       "by the wall clock");
}
