/*
 * The CUDA backend, device side: the kernels (thin wrappers over fc_core.h
 * and fc_backward.h, which the CPU emulation compiles too) and the
 * executors that move a problem (forward or backward) to the GPU and back. fp32 only. Built for sm_80 and sm_90 with
 * compute_90 PTX (mk/cuda.mk); needs a device of compute capability >= 8.0.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include "cuda_api.h"

#define FC_PREP_THREADS 256

/* Prep passes: x over the items of a head, y over heads (grid-stride both). */
__global__ void __launch_bounds__(FC_PREP_THREADS) fc_k_prep_examples(const __grid_constant__ fc_problem pb)
{
    for (int64_t hd = blockIdx.y; hd < pb.heads; hd += gridDim.y)
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < pb.Emax;
             e += (int64_t)gridDim.x * blockDim.x)
            fc_prep_example(&pb, hd, e);
}

__global__ void __launch_bounds__(FC_PREP_THREADS) fc_k_prep_steps(const __grid_constant__ fc_problem pb)
{
    for (int64_t hd = blockIdx.y; hd < pb.heads; hd += gridDim.y)
        for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < pb.T;
             t += (int64_t)gridDim.x * blockDim.x)
            fc_prep_step(&pb, hd, t);
}

extern __shared__ float4 fc_smem4[]; /* 16-byte aligned dynamic shared memory */

__global__ void __launch_bounds__(FC_MAX_THREADS) fc_k_recurrent(const __grid_constant__ fc_problem pb)
{
    fc_recurrent_head(&pb, pb.head0 + blockIdx.x, blockIdx.x, (float *)fc_smem4, (int)blockDim.x);
}

__global__ void __launch_bounds__(FC_MAX_THREADS) fc_k_blocked(const __grid_constant__ fc_problem pb)
{
    fc_blocked_head(&pb, pb.head0 + blockIdx.x, blockIdx.x, (float *)fc_smem4, (int)blockDim.x);
}

/* The backward pass, one block per head (fc_backward.h; global workspace only). */
__global__ void __launch_bounds__(FC_MAX_THREADS) fc_k_backward(const __grid_constant__ fc_grad_problem gp)
{
    fc_bw_head(&gp, gp.f.head0 + blockIdx.x, blockIdx.x, (int)blockDim.x);
}

/* Peak fp32 rate: 8 independent FMA chains per thread. */
__global__ void __launch_bounds__(256) fc_k_fma_peak(float *sink, int iters, float b, float c)
{
    float a[8];
    for (int i = 0; i < 8; i++) a[i] = (float)(threadIdx.x + i) * 1e-3f;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) a[i] = fmaf(a[i], b, c);
    }
    float s = 0;
    for (int i = 0; i < 8; i++) s += a[i];
    if (s == 12345.0f) sink[0] = s; /* keeps the chains alive */
}

/* ---- device queries ---- */

static const char *const fc_targets = "sm_80, sm_90 + compute_90 PTX";

extern "C" int fc_dev_usable(char *why, size_t len)
{
    int count = 0, dev = 0, major = 0, minor = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        if (why) {
            if (e == cudaErrorInsufficientDriver)
                snprintf(why, len, "no NVIDIA driver is loaded, or it is older than this CUDA %d.%d runtime "
                         "(cudaGetDeviceCount: %s)", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                         cudaGetErrorString(e));
            else if (e == cudaErrorNoDevice)
                snprintf(why, len, "no CUDA device is present (cudaGetDeviceCount: %s)", cudaGetErrorString(e));
            else
                snprintf(why, len, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        }
        cudaGetLastError();
        return 0;
    }
    if (count == 0) {
        if (why) snprintf(why, len, "no CUDA device is present");
        return 0;
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess) {
        if (why) snprintf(why, len, "querying the device: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (major < 8) {
        if (why)
            snprintf(why, len, "device %d has compute capability %d.%d; this build needs >= 8.0 (%s)",
                     dev, major, minor, fc_targets);
        return 0;
    }
    return 1;
}

extern "C" void fc_dev_describe(char *buf, size_t len)
{
    char why[256];
    if (!fc_dev_usable(why, sizeof why)) {
        snprintf(buf, len, "cuda (compiled in for %s, fp32 only; no usable GPU here: %s)", fc_targets,
                 why);
        return;
    }
    int dev = 0, sms = 0, smem = 0;
    cudaDeviceProp p;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        cudaGetLastError();
        snprintf(buf, len, "cuda (device %d, fp32)", dev);
        return;
    }
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    snprintf(buf, len, "cuda (fp32; device %d: %s, cc %d.%d, %d SMs, %d KiB shared per block; built for %s)",
             dev, p.name, p.major, p.minor, sms, smem / 1024, fc_targets);
}

/* ---- the executor ---- */

static int fc_timing = 0;
static double fc_last_ms = 0;
extern "C" void fc_dev_set_timing(int on) { fc_timing = on; }
extern "C" double fc_dev_last_kernel_ms(void) { return fc_last_ms; }

/* Grid of a prep pass: enough blocks for the items of a head times heads,
 * capped (the kernels stride over the rest). */
static dim3 fc_grid(int64_t items, int64_t heads, int threads)
{
    int64_t x = (items + threads - 1) / threads, y = heads;
    if (x > 4096) x = 4096;
    if (y > 65535) y = 65535;
    while (x > 1 && x * y > (1 << 18)) x = (x + 1) / 2;
    return dim3((unsigned)(x < 1 ? 1 : x), (unsigned)(y < 1 ? 1 : y), 1);
}

#define FC_CK(what, call)                                                                       \
    do {                                                                                        \
        cudaError_t e_ = (call);                                                                \
        if (e_ != cudaSuccess) {                                                                \
            rc = e_ == cudaErrorMemoryAllocation ? FC_ERR_NOMEM : FC_ERR_UNAVAILABLE;           \
            snprintf(msg, len, "%s: %s", what, cudaGetErrorString(e_));                         \
            cudaGetLastError();                                                                 \
            goto done;                                                                          \
        }                                                                                       \
    } while (0)

/* Device copy of a host array of count elements (at least one element). */
template <typename T>
static cudaError_t fc_upload(T **dst, const T *src, int64_t count)
{
    cudaError_t e = cudaMalloc((void **)dst, sizeof(T) * (size_t)(count > 0 ? count : 1));
    if (e != cudaSuccess || !src || count <= 0) return e;
    return cudaMemcpy(*dst, src, sizeof(T) * (size_t)count, cudaMemcpyHostToDevice);
}

/* The device allocations of one call, freed together. */
typedef struct fc_dev_allocs {
    void *p[32];
    int count;
} fc_dev_allocs;

static void fc_dev_free_all(fc_dev_allocs *al)
{
    for (int i = 0; i < al->count; i++) cudaFree(al->p[i]);
    al->count = 0;
}

/* A device array of count elements (at least one), a copy of src when
 * given; recorded in al. */
template <typename T>
static cudaError_t fc_dev_array(fc_dev_allocs *al, T **dst, const T *src, int64_t count)
{
    *dst = 0;
    if (al->count == (int)(sizeof al->p / sizeof al->p[0])) return cudaErrorMemoryAllocation;
    cudaError_t e = fc_upload(dst, src, count);
    if (*dst) al->p[al->count++] = (void *)*dst;
    return e;
}

/* pb's inputs and carried state copied to the device and its features
 * allocated there; pb's pointers then point to the device copies. */
static int fc_dev_problem(fc_problem *pb, fc_dev_allocs *al, char *msg, size_t len)
{
    int rc = FC_OK;
    const int64_t rows = pb->B * pb->T * pb->H, heads = pb->heads, n = pb->n, m = pb->m;
    float *d_q = 0, *d_k = 0, *d_v = 0, *d_beta = 0, *d_alpha = 0, *d_gain = 0;
    float *d_S0 = 0, *d_pk = 0, *d_hk = 0, *d_hv = 0, *d_feat = 0;
    uint8_t *d_hp = 0;
    int64_t *d_hl = 0;
    const int64_t nX = heads * pb->Emax * n, nZ = pb->has_gain ? nX : 0, nxz = 3 * heads * pb->Emax;
    const int64_t nQ = heads * pb->T * n, neta = 2 * heads * pb->T;
    FC_CK("copying q to the device", fc_dev_array(al, &d_q, pb->q, rows * n));
    FC_CK("copying k to the device", fc_dev_array(al, &d_k, pb->k, rows * n));
    FC_CK("copying v to the device", fc_dev_array(al, &d_v, pb->v, rows * m));
    FC_CK("copying beta to the device", fc_dev_array(al, &d_beta, pb->beta, rows));
    if (pb->alpha) FC_CK("copying alpha to the device", fc_dev_array(al, &d_alpha, pb->alpha, rows));
    if (pb->gain) FC_CK("copying the gains to the device", fc_dev_array(al, &d_gain, pb->gain, rows * n));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_S0, pb->S0, heads * m * n));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_pk, pb->prev_key, heads * n));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_hp, pb->has_prev, heads));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_hk, pb->hist_k, heads * pb->keep * n));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_hv, pb->hist_v, heads * pb->keep * m));
    FC_CK("copying the state to the device", fc_dev_array(al, &d_hl, pb->hist_len, heads));
    FC_CK("allocating device features", fc_dev_array(al, &d_feat, (const float *)0, nX + nZ + nxz + nQ + neta));
    pb->q = d_q; pb->k = d_k; pb->v = d_v; pb->beta = d_beta; pb->alpha = d_alpha; pb->gain = d_gain;
    pb->S0 = d_S0; pb->prev_key = d_pk; pb->has_prev = d_hp; pb->hist_k = d_hk; pb->hist_v = d_hv;
    pb->hist_len = d_hl;
    pb->X = d_feat;
    pb->Z = pb->has_gain ? d_feat + nX : 0;
    pb->xz = d_feat + nX + nZ;
    pb->Qf = pb->xz + nxz;
    pb->eta = pb->Qf + nQ;
done:
    return rc;
}

/* Global workspace of per_head floats for as many heads at once as 80% of
 * the free device memory holds (*wave, at most heads); what names the
 * problem in the message when not even one fits. */
static int fc_dev_scratch(fc_dev_allocs *al, int64_t per_head_floats, int64_t heads, int64_t *wave, float **scr,
                          const char *what, char *msg, size_t len)
{
    int rc = FC_OK;
    size_t free_b = 0, total_b = 0;
    const size_t per_head = sizeof(float) * (size_t)per_head_floats;
    size_t usable;
    *wave = heads;
    *scr = 0;
    if (per_head_floats <= 0) return FC_OK;
    FC_CK("cudaMemGetInfo", cudaMemGetInfo(&free_b, &total_b));
    usable = free_b / 10 * 8;
    if (per_head > usable) {
        snprintf(msg, len, "one head's global workspace needs %.1f MiB but the device has %.1f MiB free (%s)",
                 per_head / 1048576.0, free_b / 1048576.0, what);
        return FC_ERR_NOMEM;
    }
    if ((int64_t)(usable / per_head) < *wave) *wave = (int64_t)(usable / per_head);
    FC_CK("allocating the device workspace", fc_dev_array(al, scr, (const float *)0, per_head_floats * *wave));
done:
    return rc;
}

/* The prep passes (fc_core.h): examples, then steps. */
static cudaError_t fc_dev_prep(const fc_problem &pb)
{
    fc_k_prep_examples<<<fc_grid(pb.Emax, pb.heads, FC_PREP_THREADS), FC_PREP_THREADS>>>(pb);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    fc_k_prep_steps<<<fc_grid(pb.T, pb.heads, FC_PREP_THREADS), FC_PREP_THREADS>>>(pb);
    return cudaGetLastError();
}

extern "C" int fc_dev_exec(fc_problem *hp, float *out, float *S_out, char *msg, size_t len)
{
    int rc = FC_OK, dev = 0, optin = 0;
    fc_problem pb = *hp;
    const int64_t rows = pb.B * pb.T * pb.H, heads = pb.heads, n = pb.n, m = pb.m;
    fc_dev_allocs al;
    float *d_out = 0, *d_S = 0;
    cudaEvent_t ev0 = 0, ev1 = 0;
    int64_t wave = heads;
    size_t smem_bytes = 0;
    void (*kern)(fc_problem) = 0;
    char what[200];

    al.count = 0;
    if (!fc_dev_usable(msg, len)) return FC_ERR_UNAVAILABLE;
    FC_CK("cudaGetDevice", cudaGetDevice(&dev));
    FC_CK("cudaDeviceGetAttribute", cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    rc = fc_plan(&pb, optin, 0, msg, len);
    if (rc) return rc;
    smem_bytes = sizeof(float) * (size_t)pb.lay.smem_floats;

    if ((rc = fc_dev_problem(&pb, &al, msg, len))) goto done;
    FC_CK("allocating device outputs", fc_dev_array(&al, &d_out, (const float *)0, rows * m));
    FC_CK("allocating device outputs", fc_dev_array(&al, &d_S, (const float *)0, heads * m * n));
    pb.out = d_out;
    pb.S = d_S;

    /* global workspace for what does not fit on chip, in waves of heads */
    snprintf(what, sizeof what, "n = %lld, m = %lld, window = %lld, steps per block = %lld", (long long)n,
             (long long)m, (long long)pb.W, (long long)pb.L);
    if ((rc = fc_dev_scratch(&al, pb.lay.glob_floats, heads, &wave, &pb.scratch, what, msg, len))) goto done;

    kern = pb.form == FC_FORM_RECURRENT ? fc_k_recurrent : fc_k_blocked;
    FC_CK("cudaFuncSetAttribute", cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes));
    if (fc_timing) {
        FC_CK("cudaEventCreate", cudaEventCreate(&ev0));
        FC_CK("cudaEventCreate", cudaEventCreate(&ev1));
        FC_CK("cudaEventRecord", cudaEventRecord(ev0));
    }
    FC_CK("launching the prep passes", fc_dev_prep(pb));
    for (int64_t h0 = 0; h0 < heads; h0 += wave) {
        pb.head0 = h0;
        const unsigned blocks = (unsigned)(heads - h0 < wave ? heads - h0 : wave);
        kern<<<blocks, pb.nth, smem_bytes>>>(pb);
        FC_CK(pb.form == FC_FORM_RECURRENT ? "launching the recurrent kernel" : "launching the chunk kernel",
              cudaGetLastError());
    }
    if (fc_timing) FC_CK("cudaEventRecord", cudaEventRecord(ev1));
    FC_CK("running the kernels", cudaDeviceSynchronize());
    if (fc_timing) {
        float ms = 0;
        FC_CK("cudaEventElapsedTime", cudaEventElapsedTime(&ms, ev0, ev1));
        fc_last_ms = ms;
    }
    FC_CK("copying the memory back", cudaMemcpy(S_out, d_S, sizeof(float) * (size_t)(heads * m * n), cudaMemcpyDeviceToHost));
    FC_CK("copying the outputs back", cudaMemcpy(out, d_out, sizeof(float) * (size_t)(rows * m), cudaMemcpyDeviceToHost));

done:
    fc_dev_free_all(&al);
    if (ev0) cudaEventDestroy(ev0);
    if (ev1) cudaEventDestroy(ev1);
    return rc;
}

/* Every gradient array and its length in floats: one list for the
 * allocation and the copy back. */
#define FC_GRADS(X)                                                                       \
    X(dq, rows * n) X(dk, rows * n) X(dv, rows * m) X(dbeta, rows) X(dalpha, rows)          \
    X(dgain, rows * n) X(dS0, heads * m * n) X(dprev, heads * n) X(dhk, heads * keep * n)  \
    X(dhv, heads * keep * m)
/* A device array for a host gradient array of count floats (NULL: none). */
#define FC_GRAD_OUT(name, count) \
    if (hp->name) FC_CK("allocating device gradients", fc_dev_array(&al, &d.name, (const float *)0, count));
#define FC_GRAD_BACK(name, count) \
    if (hp->name) FC_CK("copying the gradients back", \
                        cudaMemcpy(hp->name, d.name, sizeof(float) * (size_t)(count), cudaMemcpyDeviceToHost));

extern "C" int fc_dev_bw_exec(fc_grad_problem *hp, char *msg, size_t len)
{
    int rc = FC_OK;
    fc_grad_problem d = *hp;
    fc_dev_allocs al;
    const int64_t rows = d.f.B * d.f.T * d.f.H, heads = d.f.heads, n = d.f.n, m = d.f.m, keep = d.f.keep;
    int64_t wave = heads;
    float *d_dO = 0, *d_dS = 0;
    char what[200];

    al.count = 0;
    if (!fc_dev_usable(msg, len)) return FC_ERR_UNAVAILABLE;
    if ((rc = fc_bw_plan(&d, 0, msg, len))) return rc;
    if ((rc = fc_dev_problem(&d.f, &al, msg, len))) goto done;
    FC_CK("copying the cotangents to the device", fc_dev_array(&al, &d_dO, hp->dO, rows * m));
    FC_CK("copying the cotangents to the device", fc_dev_array(&al, &d_dS, hp->dS, heads * m * n));
    d.dO = d_dO;
    d.dS = d_dS;
    FC_GRADS(FC_GRAD_OUT)
    snprintf(what, sizeof what, "the backward's checkpoints: n = %lld, m = %lld, T = %lld, every %lld steps",
             (long long)n, (long long)m, (long long)d.f.T, (long long)d.c);
    if ((rc = fc_dev_scratch(&al, d.ws, heads, &wave, &d.f.scratch, what, msg, len))) goto done;

    FC_CK("launching the prep passes", fc_dev_prep(d.f));
    for (int64_t h0 = 0; h0 < heads; h0 += wave) {
        d.f.head0 = h0;
        const unsigned blocks = (unsigned)(heads - h0 < wave ? heads - h0 : wave);
        fc_k_backward<<<blocks, d.f.nth>>>(d);
        FC_CK("launching the backward kernel", cudaGetLastError());
    }
    FC_CK("running the backward kernels", cudaDeviceSynchronize());
    FC_GRADS(FC_GRAD_BACK)

done:
    fc_dev_free_all(&al);
    return rc;
}

extern "C" double fc_dev_fp32_peak(void)
{
    int dev = 0, sms = 0;
    float *sink = 0, ms = 0;
    cudaEvent_t a, b;
    const int iters = 1 << 14, threads = 256;
    if (!fc_dev_usable(NULL, 0) || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaMalloc((void **)&sink, sizeof(float)) != cudaSuccess)
        return 0;
    const int blocks = sms * 8;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    fc_k_fma_peak<<<blocks, threads>>>(sink, 256, 0.999f, 1e-3f); /* warm up */
    cudaEventRecord(a);
    fc_k_fma_peak<<<blocks, threads>>>(sink, iters, 0.999f, 1e-3f);
    cudaEventRecord(b);
    const cudaError_t e = cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaFree(sink);
    if (e != cudaSuccess || ms <= 0) {
        cudaGetLastError();
        return 0;
    }
    return 2.0 * 8.0 * iters * (double)blocks * threads / (ms * 1e-3);
}
