/* Library internals shared by src/ (not installed). */
#ifndef FALCON_INTERNAL_H
#define FALCON_INTERNAL_H

#include "falcon.h"
#include "falcon_io.h"
#include "falcon_advanced.h"
#include "../util/files.h"
#include "../util/paths.h"
#include "../util/signals.h"

/* For a plain loop that GCC's -O2 leaves scalar (its vectorizer runs at
 * -O3 only in GCC 12): the portable range and finiteness scans. */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZED __attribute__((optimize("O3")))
#else
#define VECTORIZED
#endif

/* A call's configuration resolved once (falcon_plan_make, src/plan.c), for
 * everything after the configuration's own check to read: validation, the
 * backend's row and the drivers take it from here, and no module goes back
 * to the registry or the enums' name tables for a message. */
typedef struct falcon_plan {
    falcon_config cfg0;                    /* as the caller gave it */
    falcon_config cfg;                     /* chunk and threads (OpenMP's default for 0) resolved */
    falcon_backend backend;                /* auto resolved */
    const struct falcon_backend_info *row; /* its registry row */
    int available;                         /* the backend can run here */
    const char *variant, *form, *precision; /* names, for messages */
    const char *backend_asked, *backend_name; /* the backend asked for; the one resolved */
} falcon_plan;
/* Check the configuration and resolve it (validate.c): its enums first,
 * then its values, whose messages use the plan's names. */
falcon_status falcon_plan_make(const falcon_config *cfg, const falcon_inputs *in, falcon_plan *plan);
/* The resolution alone, the configuration's enums known good (plan.c). */
void falcon_plan_resolve(const falcon_config *cfg, const falcon_inputs *in, falcon_plan *plan);
/* What falcon_validate_from checks after the configuration (validate.c). */
falcon_status falcon_validate_plan(const falcon_plan *plan, const falcon_inputs *in, const falcon_state *state,
                                   int64_t t0);

/* The library's work memory (src/work-memory.c): falcon_work_get returns
 * at least `bytes` (64-byte aligned, contents unspecified) and sets *have to
 * the block's size, which falcon_work_put takes back. Blocks of
 * falcon_work_keep_min bytes or more are kept between calls (their pages
 * stay mapped), in up to FALCON_WORK_SLOTS slots and falcon_work_keep_max
 * bytes in all; smaller ones are malloc's. The CPU drivers get it handed
 * in as falcon_work_library (kernels/framework/head.h). */
#define FALCON_WORK_SLOTS 32
void *falcon_work_get(size_t bytes, size_t *have);
void falcon_work_put(void *p, size_t have);
extern size_t falcon_work_keep_min, falcon_work_keep_max;
extern const struct falcon_work_memory falcon_work_library;

struct falcon_state {
    int64_t heads, n, m, window, keep;
    double *S;          /* [heads][m][n], from falcon_work_get (kept between calls) */
    size_t S_bytes;     /* its block's size, for falcon_work_put */
    double *prev_key;   /* [heads][n] */
    uint8_t *has_prev;  /* [heads] */
    double *hist_k;     /* [heads][keep][n] */
    double *hist_v;     /* [heads][keep][m] */
    int64_t *hist_len;  /* [heads] */
    /* [heads]: the fp32 recurrent form's lazy decay factor, in [2^-8, 1]
     * (kernels/framework/recurrent.inc.c): S is the memory itself, scale
     * only tells that form how to continue bit for bit (it keeps S / scale);
     * 1 after every other run, set_memory, reset. */
    double *scale;
    /* 1 when every value of S is known to be a float32 value: zeros, or the
     * memory a run below fp64 stored (or a float times a float scale, within
     * float's range: the lazy decay's). A run below fp64 then need not check
     * that it fits (falcon_state_check); set_memory, a checkpoint and an
     * fp64 run clear it. */
    int memory_f32;
};

/* Record the detail of a failure for falcon_last_error(); returns s. Its
 * falcon_error_info has no input, rule or index until a blame below. */
falcon_status falcon_fail(falcon_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* falcon_fail with what the failure concerns: falcon_error_info's input
 * and rule id (a name, a path; ids in falcon.h). */
falcon_status falcon_fail_in(const char *input, const char *rule, falcon_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* After falcon_fail(_in): the input, rule, flat index, step and head of the
 * failure (-1: not known); returns s. */
falcon_status falcon_blame_at(falcon_status s, const char *input, const char *rule, int64_t index, int64_t t,
                              int64_t head);

/* Element i of a typed input as double. */
static inline double falcon_load(const void *p, falcon_precision prec, int64_t i)
{
    return prec != FALCON_FP64 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* The fraction bits of fp32 that a precision's matrix-product operands drop
 * (falcon_math.h): 13 for tf32, 16 for bf16, 0 otherwise; and the largest
 * input such an operand may hold (FLT_MAX, DBL_MAX for fp32, fp64). */
int falcon_operand_format(falcon_precision prec);
double falcon_operand_max(falcon_precision prec);

/* After a successful run of head (b, h): move the previous key and the
 * window history of that head forward over the call's T steps. */
void falcon_state_advance(falcon_state *st, const falcon_config *cfg, const falcon_inputs *in,
                          int64_t b, int64_t h);
/* A copy of src (non-NULL) into *out; its memory S left as the kept block
 * held it unless copy_memory (the caller writes all of it). */
falcon_status falcon_state_clone(const falcon_state *src, int copy_memory, falcon_state **out);
/* Move the contents of src into dst (same sizes) and free src. */
void falcon_state_take(falcon_state *dst, falcon_state *src);
/* Heads [h0, h0 + part->heads) of whole copied into part, or back from
 * it (the same n, m and window). */
void falcon_state_heads_get(const falcon_state *whole, int64_t h0, falcon_state *part);
void falcon_state_heads_put(falcon_state *whole, int64_t h0, const falcon_state *part);
/* count heads of src from head sh into dst from head dh (the same n, m and
 * window); dst's memory is float32-known only where both were. */
void falcon_state_heads_copy(falcon_state *dst, int64_t dh, const falcon_state *src, int64_t sh, int64_t count);

/* Packed batches and grouped heads (src/layout.c). plain: neither; the
 * q/k head value head h reads; falcon_run_from's and falcon_backward's
 * calls of such inputs, validated and their backend available, lowered to
 * plain calls of the library. */
int falcon_inputs_plain(const falcon_inputs *in);
int64_t falcon_qk_heads(const falcon_inputs *in);
int64_t falcon_qk_head_of(const falcon_inputs *in, int64_t h);
falcon_status falcon_run_layout(const falcon_config *cfg, const falcon_inputs *in, falcon_state *state, void *out,
                                int64_t t0);
falcon_status falcon_backward_layout(const falcon_plan *plan, const falcon_inputs *in, const falcon_state *state,
                                     const void *dO, const double *dS_T, const falcon_grads *grads);


/* npy-write.c: write buffers to a new file and fsync it (inside a transaction's
 * temporary directory); a whole .npy file the same way; Python's repr of a
 * shape (200 bytes hold any). */
falcon_status falcon_write_new_file(const char *path, const void *const *parts, const size_t *sizes, int count);
falcon_status falcon_write_new_file_sync(const char *path, const void *const *parts, const size_t *sizes, int count,
                                         int sync);
falcon_status falcon_npy_write_new(const char *path, const falcon_array *a);
const char *falcon_shape_repr(const int64_t *shape, int ndim, char *buf, size_t size);

/* 1 when all count elements are finite: a vectorized yes/no (threads share
 * large arrays); callers find and name the bad element only on a no. */
int falcon_all_finite_fast(const void *p, falcon_precision prec, int64_t count, int threads);
/* The same with a chosen vector body, for the tests: 0 the portable one,
 * 1 to falcon_finite_scan_isa() those of the CPU backends this machine
 * runs, narrowest first (1 AVX2, 2 AVX-512 where both run);
 * falcon_all_finite_fast takes falcon_finite_scan_pick()'s, the scan of
 * the registry's row that auto picks (finite-scan.c). */
int falcon_all_finite_isa(const void *p, falcon_precision prec, int64_t count, int threads, int isa);
int falcon_finite_scan_isa(void);
int falcon_finite_scan_pick(void);
/* backends.c: whether the fp32 recurrent form decays its memory directly
 * (no lazy decay) with a CPU backend whose rule is `rule` (falcon_cpu_f32's
 * direct_decay; NULL: never). falcon_set_direct_decay(mode) overrides
 * every rule for tests: 1 always, 0 never, -1 the rules again. */
int falcon_direct_decay(int (*rule)(void));
void falcon_set_direct_decay(int mode);
/* vzeroupper where the CPU has AVX: after code that may leave the upper
 * halves of the vector registers dirty (finite-scan.c, SCAN_CLEAN_UPPER). */
void falcon_clean_upper(void);

/* validate.c: the index of the first double of [x, x + count) whose
 * magnitude's bits are >= limit (NaN and the infinities too, unless
 * finite_only passes them over), or -1; with falcon_f32_unfit_limit(), the
 * values that round to infinity as a float (state checks, narrowing
 * reads). */
int64_t falcon_first_unfit(const double *x, int64_t count, uint64_t limit, int finite_only);
uint64_t falcon_f32_unfit_limit(void);

/* outputs.c: a function the transactions call as each temporary's mkostemp
 * or mkdtemp returns (NULL, the default: none). For tests: a signal raised
 * there is one delivered as that call returns, the moment TEMP_FIRST is
 * about (verify/test-outputs.c). */
void falcon_outputs_set_made_hook(void (*hook)(void));

/* The threads a call may use: cfg->threads, or OpenMP's default when 0. */
int falcon_threads(const falcon_config *cfg);

/* run.c: the L1 share, in bytes, for a column tile of the recurrent form's
 * memory (kernels/framework/recurrent.inc.c): two thirds of the L1 data
 * cache this CPU reports, 32 KiB when it reports none. The tile changes
 * no bits, only the speed. falcon_set_tile_bytes(b) fixes it for tests
 * (b > 0), or returns it to the machine's (b = 0). */
int64_t falcon_tile_bytes(void);
void falcon_set_tile_bytes(int64_t bytes);

/* Backends outside the CPU framework: the registry's whole-call rows
 * (src/whole-call.c), over the working copy of the state. */
falcon_status falcon_mpfr_run(const falcon_config *cfg, const falcon_inputs *in,
                              falcon_state *work, void *out);
/* The attached reference's backward pass (falcon_advanced.h), on a view
 * of the caller's state: UNAVAILABLE when none is attached. */
falcon_status falcon_mpfr_backward(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state *state, const void *dO, const double *dS_T,
                                   const falcon_grads *grads);
int falcon_mpfr_available(void);
/* falcon_backward's own checks (backward-validate.c): the cotangents and
 * the gradient buffers, after falcon_validate_plan. */
falcon_status falcon_backward_validate(const falcon_plan *plan, const falcon_inputs *in, const void *dO,
                                       const double *dS_T, const falcon_grads *grads);
/* backward.c: falcon_backward's whole validation (the plan, falcon_run's
 * rules, the cotangents and the gradient buffers), nothing written; the
 * plan in *plan. */
falcon_status falcon_backward_plan(const falcon_config *cfg, const falcon_inputs *in, const falcon_state *state,
                                   const void *dO, const double *dS_T, const falcon_grads *grads, falcon_plan *plan);
/* backward.c: the recurrent backward's checkpoint spacing in steps
 * (docs/math.md 12.2; 0: about sqrt(T), the default). It changes no
 * result beyond rounding; falcon_set_backward_checkpoint fixes it for
 * tests (0: the default again). */
int64_t falcon_backward_checkpoint(void);
/* Steps per block of the masked-parallel form's backward pass: the chunk
 * form's automatic blocks (falcon_chunk_of(FALCON_CHUNK_AUTO, ...)), not
 * the forward's one block of up to 4096 terms (docs/math.md 12.5). */
int64_t falcon_parallel_backward_block(int64_t n, int64_t m, int64_t window);
void falcon_set_backward_checkpoint(int64_t steps);
falcon_status falcon_cuda_run(const falcon_config *cfg, const falcon_inputs *in,
                              falcon_state *work, void *out);
/* The CUDA backend itself (kernels/cuda/cuda_host.c, or src/stubs/cuda.c):
 * public types only; an error comes back as a status and a message in why. */
falcon_status falcon_cuda_run_view(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state_view *state, double *memory, void *out,
                                   char *why, size_t len);
/* The CUDA backend's backward pass (kernels/cuda/cuda_host.c, or the
 * stub): a validated call, T >= 1; checkpoint as falcon_backward_checkpoint. */
falcon_status falcon_cuda_backward_view(const falcon_config *cfg, const falcon_inputs *in,
                                        const falcon_state_view *state, const void *dO, const double *dS_T,
                                        const falcon_grads *grads, int64_t checkpoint, char *why, size_t len);
/* backward.c: a whole-call backend's gradients checked finite (OVERFLOW
 * naming the first tensor that is not). */
falcon_status falcon_backward_scan(const falcon_plan *plan, const falcon_inputs *in, const falcon_grads *grads);
int falcon_cuda_available(void);
const char *falcon_cuda_describe(void);

#endif
