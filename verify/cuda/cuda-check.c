/*
 * cuda-check: the CUDA backend's own checks.
 *
 *   cuda-check emulate      (CPU) the kernels run in the CPU emulation
 *                           (cuda_emulate.c) on the gate's case table and
 *                           larger shapes, judged by the gate's thresholds
 *                           against the MPFR reference; plus races, block
 *                           sizes and shared-memory budgets down to none
 *                           (cuda-check-gate.c); then the backward kernel
 *                           through the gradient gate (cuda-check-grad.c).
 *   cuda-check emulate-grad (CPU) the backward's part of emulate alone: the
 *                           gradient gate's quick table (cuda-check-grad.c).
 *   cuda-check unavailable  (no GPU) the cuda backend reports itself
 *                           unavailable and falcon_run refuses it cleanly.
 *   cuda-check device [quick]  (GPU) the same cases on the GPU through
 *                           falcon_run, and the backward's through
 *                           falcon_backward (quick: one larger case per
 *                           variant and form, one backward case per
 *                           variant, for compute-sanitizer).
 *   cuda-check bench [T]    (GPU) tokens/s and fraction of the measured fp32
 *                           FMA peak, recurrent and chunk forms.
 *   cuda-check auto         device if a GPU is usable, else unavailable.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../../src/internal.h"
#include "../../kernels/cuda/cuda_api.h"
#include "cuda_check.h"
#include "cuda_emulate.h"
#include "../../kernels/framework/flops.h"

#define GATE_FLOOR 32.0
#define GATE_FACTOR 4.0
#define U32 5.9604644775390625e-08 /* 2^-24 */

/* Benchmark inputs: any values in range will do. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

static int mode_unavailable(void)
{
    int bad = 0;
    const int avail = falcon_backend_available(FALCON_BACKEND_CUDA);
    printf("falcon_backend_available(cuda) = %d\n", avail);
    printf("falcon_backend_describe(cuda) = %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
    if (avail) {
        printf("a GPU is usable here: run `cuda-check device`\n");
        return 1;
    }
    float q[4] = {1, 0, 0, 1}, k[4] = {0, 1, 1, 0}, v[2] = {1, 2}, beta[2] = {1, 1};
    float o[2] = {42, 42};
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.backend = FALCON_BACKEND_CUDA;
    falcon_inputs in = falcon_inputs_sequence(2, 2, 1, q, k, v, beta, NULL, NULL);
    falcon_status s = falcon_run(&cfg, &in, NULL, o);
    printf("falcon_run(backend cuda): %s: %s\n", falcon_status_name(s), falcon_last_error());
    if (s != FALCON_E_UNAVAILABLE || o[0] != 42 || o[1] != 42) bad++;
    /* the backend entry point itself, below falcon_run's availability check */
    falcon_state *st;
    falcon_state_create(1, 2, 1, 1, &st);
    s = falcon_cuda_run(&cfg, &in, st, o);
    printf("falcon_cuda_run: %s: %s\n", falcon_status_name(s), falcon_last_error());
    if (s != FALCON_E_UNAVAILABLE || o[0] != 42) bad++;
    falcon_state_free(st);
    if (falcon_backend_resolve(FALCON_BACKEND_AUTO) == FALCON_BACKEND_CUDA) bad++;
    printf("%s\n", bad ? "UNAVAILABLE CHECK FAILED" : "UNAVAILABLE CHECK PASSED");
    return bad ? 1 : 0;
}

/* ---- benchmark ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int mode_bench(int64_t Tmax)
{
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        printf("no usable GPU: %s\n", falcon_backend_describe(FALCON_BACKEND_CUDA));
        return 2;
    }
    const double peak = fc_dev_fp32_peak();
    printf("device: %s\nmeasured fp32 FMA peak: %.1f TFLOP/s\n", falcon_backend_describe(FALCON_BACKEND_CUDA),
           peak * 1e-12);
    const int64_t Hs[] = {16, 64}, dims[] = {64, 128};
    const int64_t rows_max = 64 * Tmax, nmax = 128;
    float *q = malloc(sizeof(float) * (size_t)(rows_max * nmax)), *k = malloc(sizeof(float) * (size_t)(rows_max * nmax));
    float *v = malloc(sizeof(float) * (size_t)(rows_max * nmax)), *o = malloc(sizeof(float) * (size_t)(rows_max * nmax));
    float *beta = malloc(sizeof(float) * (size_t)rows_max), *alpha = malloc(sizeof(float) * (size_t)rows_max);
    if (!q || !k || !v || !o || !beta || !alpha) {
        printf("out of host memory for T = %lld\n", (long long)Tmax);
        return 2;
    }
    for (int64_t i = 0; i < rows_max * nmax; i++) {
        q[i] = (float)(urand() * 2 - 1);
        k[i] = (float)(urand() * 2 - 1);
        v[i] = (float)(urand() * 2 - 1);
    }
    for (int64_t i = 0; i < rows_max; i++) {
        beta[i] = (float)(0.2 + urand());
        alpha[i] = (float)(0.98 + 0.02 * urand());
    }
    fc_dev_set_timing(1);
    printf("\n%-10s %5s %7s %5s %10s %10s %12s %10s %8s\n", "form", "heads", "T", "n=m", "kernel ms", "wall ms",
           "tokens/s", "GFLOP/s", "%peak");
    for (int fi = 0; fi < 2; fi++)
        for (int hi = 0; hi < 2; hi++)
            for (int di = 0; di < 2; di++) {
                const falcon_form form = fi ? FALCON_FORM_CHUNK : FALCON_FORM_RECURRENT;
                const int64_t H = Hs[hi], d = dims[di], T = Tmax;
                falcon_config cfg;
                falcon_config_default(&cfg);
                cfg.backend = FALCON_BACKEND_CUDA;
                cfg.form = form;
                cfg.chunk = 64;
                falcon_inputs in = falcon_inputs_sequence(T, d, d, q, k, v, beta, alpha, NULL);
                in.H = H;
                falcon_state *st;
                falcon_state_create(H, d, d, 1, &st);
                /* warm-up on a short prefix, then the timed run */
                falcon_inputs warm = in;
                warm.T = T < 256 ? T : 256;
                falcon_status s = falcon_cuda_run(&cfg, &warm, st, o);
                falcon_state_reset(st);
                const double t0 = now_s();
                if (!s) s = falcon_cuda_run(&cfg, &in, st, o);
                const double wall = (now_s() - t0) * 1e3;
                const double ms = fc_dev_last_kernel_ms();
                falcon_state_free(st);
                if (s) {
                    printf("%-10s %5lld %7lld %5lld   failed: %s\n", falcon_form_name(form), (long long)H,
                           (long long)T, (long long)d, falcon_last_error());
                    continue;
                }
                const double fl = falcon_flops(form, 1, T, d, d, 1, cfg.chunk) * H; /* Falcon-1, W = 1 */
                printf("%-10s %5lld %7lld %5lld %10.2f %10.1f %12.3e %10.1f %7.2f%%\n", falcon_form_name(form),
                       (long long)H, (long long)T, (long long)d, ms, wall, H * T / (ms * 1e-3),
                       fl / (ms * 1e-3) * 1e-9, peak > 0 ? 100.0 * fl / (ms * 1e-3) / peak : 0.0);
            }
    printf("(kernel ms: prep + main kernels by CUDA events, no copies; wall ms includes the host<->device copies;\n"
           " GFLOP/s: the nominal count of kernels/framework/flops.h, multiply-add = 2; %%peak against the measured\n"
           " FMA peak)\n");
    free(q); free(k); free(v); free(o); free(beta); free(alpha);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines survive a timeout's kill */
    const char *mode = argc > 1 ? argv[1] : "auto";
    if (!strcmp(mode, "emulate")) return cuda_check_emulate();
    if (!strcmp(mode, "emulate-grad")) return cuda_check_grad_emulate();
    if (!strcmp(mode, "unavailable")) return mode_unavailable();
    if (!strcmp(mode, "device")) return cuda_check_device(argc > 2 && !strcmp(argv[2], "quick"));
    if (!strcmp(mode, "bench")) return mode_bench(argc > 2 ? atoll(argv[2]) : 65536);
    if (!strcmp(mode, "auto"))
        return falcon_backend_available(FALCON_BACKEND_CUDA) ? cuda_check_device(0) : mode_unavailable();
    fprintf(stderr, "usage: %s emulate | emulate-grad | unavailable | device [quick] | bench [T] | auto\n", argv[0]);
    return 2;
}
