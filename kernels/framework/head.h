/*
 * One head's problem as the framework sees it: strided views into the
 * caller's [B][T][H][D] tensors, the variant's parameters, this head's slice
 * of the carried state (double), and the micro-kernels to use. The framework
 * computes the outputs and the new memory S; the history bookkeeping of the
 * state (previous key, window) is done once, outside, by src/state.c.
 */
#ifndef FALCON_HEAD_H
#define FALCON_HEAD_H

#include "../ukernel.h"
#include "falcon.h"

#define FALCON_HEAD_DECLARE(R, SFX)                                                     \
    typedef struct falcon_head_##SFX {                                                 \
        int64_t T, n, m;                                                               \
        const R *q, *k, *gain; /* rows t at stride ldk; gain NULL unless Falcon-2/2A */ \
        int64_t ldk;                                                                   \
        const R *v;                                                                    \
        int64_t ldv;                                                                   \
        const R *beta, *alpha; /* stride lds; alpha NULL = no decay */                  \
        int64_t lds;                                                                   \
        R *out;                                                                        \
        int64_t ldo;                                                                   \
        int regression; /* Falcon-1/2/3: e = y - Sbar x; A variants: e = y */          \
        int prefix;     /* prefix alignment */                                         \
        int phi;                                                                       \
        R eps;                                                                         \
        int64_t window;                                                                \
        int operand_drop; /* chunk form, tf32/bf16: fraction bits its products' */    \
                          /* operands drop (falcon_math.h); 0: none             */    \
        double *S;               /* [m][n], read at start, written at end */           \
        const double *S_in;      /* recurrent form: [m][n] read at start instead  */   \
                                 /* of S (the caller's state, untouched), or NULL */   \
        double *scale;           /* the recurrent form's lazy decay factor of S  */    \
                                 /* (recurrent.inc.c); a driver that does not    */    \
                                 /* keep one stores 1                            */    \
        const double *prev_key;  /* [n] raw, or NULL */                                \
        const double *hist_k;    /* [hist_len][n] raw, oldest first */                 \
        const double *hist_v;    /* [hist_len][m] */                                   \
        int64_t hist_len;                                                              \
        const falcon_uk_##SFX *uk;                                                     \
        int64_t tile_bytes; /* recurrent form: L1 share for a column tile */         \
                            /* of the memory (falcon_tile_bytes)            */       \
        int direct_decay;   /* recurrent form: decay S directly, never lazily */      \
                            /* (src/backends.c says where)                  */       \
        const falcon_work_memory *work; /* the drivers' work memory */                \
    } falcon_head_##SFX;                                                               \
    /* One head's backward problem: the forward problem (f.out unused;    */            \
    /* the pass starts from f.S_in, or f.S when that is NULL, and writes  */            \
    /* no memory), its cotangents and its gradients. Rows as the inputs'. */            \
    typedef struct falcon_grad_head_##SFX {                                            \
        falcon_head_##SFX f;                                                           \
        const R *dO;          /* [T] rows at stride f.ldo, or NULL: 0 */               \
        const double *dS_T;   /* [m][n], or NULL: 0 */                                 \
        R *dq, *dk, *dgain;   /* stride f.ldk; dgain NULL unless f.gain */             \
        R *dv;                /* stride f.ldv */                                       \
        R *dbeta, *dalpha;    /* stride f.lds; dalpha NULL unless f.alpha */           \
        double *dS0;          /* [m][n], or NULL: not wanted */                        \
        double *dprev_key;    /* [n], or NULL: not wanted (0 without f.prev_key) */    \
        double *dhist_k;      /* [f.window - 1][n], or NULL (0 past f.hist_len) */     \
        double *dhist_v;      /* [f.window - 1][m], or NULL */                         \
        int64_t checkpoint;   /* recurrent: steps between the memories its sweep */   \
                              /* keeps (docs/math.md 12.2); 0: about sqrt(T)   */   \
    } falcon_grad_head_##SFX;                                                          \
    /* The drivers of one build of the framework (framework.inc.c): the     */       \
    /* baseline build falcon_fw_<prec>, and one per SIMD backend's ISA      */       \
    /* (falcon_fw_<isa>_<prec>, paired with its kernels in src/backends.c). */       \
    /* Both return FALCON_E_OVERFLOW when an output row they wrote or the  */       \
    /* memory they stored is not finite (checked as written), or NOMEM.     */       \
    typedef struct falcon_drivers_##SFX {                                              \
        const char *isa; /* "baseline", or the ISA (a backend's name) */               \
        /* Recurrent form: `count` (<= FALCON_HEAD_GROUP_MAX) heads of */         \
        /* the same T, run together in time blocks.                        */         \
        falcon_status (*recurrent)(const falcon_head_##SFX *heads, int64_t count);    \
        /* Chunk-parallel with blocks of L steps, `count` heads of the same */        \
        /* T a block of each in turn; the masked-parallel form is the same   */        \
        /* equations with one block over the whole call.                     */        \
        falcon_status (*blocked)(const falcon_head_##SFX *heads, int64_t count, int64_t L); \
        /* Backward passes (docs/math.md section 12) of one head: the       */        \
        /* recurrent form's reverse sweep, and the blocked forms' adjoint   */        \
        /* (blocks of L steps). NULL: the build has none (UNAVAILABLE).     */        \
        falcon_status (*backward_recurrent)(const falcon_grad_head_##SFX *g);          \
        falcon_status (*backward_blocked)(const falcon_grad_head_##SFX *g, int64_t L); \
    } falcon_drivers_##SFX;                                                            \
    extern const falcon_drivers_##SFX falcon_fw_##SFX;

/* Where a driver's work memory comes from, handed in with each head (the
 * library passes its own, src/work-memory.c): get returns at least `bytes`
 * (64-byte aligned, contents unspecified) and sets *have to the block's
 * size, which put takes back; NULL when memory is short. */
typedef struct falcon_work_memory {
    void *(*get)(size_t bytes, size_t *have);
    void (*put)(void *p, size_t have);
} falcon_work_memory;

/* The recurrent form's lazy decay factor (recurrent.inc.c) stays in
 * [FALCON_LAZY_SCALE_MIN, 1]; a checkpoint's scale.npy is checked against
 * it (src/checkpoint.c). */
#define FALCON_LAZY_SCALE_MIN 0x1p-8
/* Most heads one driver call runs together. */
#define FALCON_HEAD_GROUP_MAX 16

FALCON_HEAD_DECLARE(float, f32)
FALCON_HEAD_DECLARE(double, f64)

#endif
