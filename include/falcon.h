/*
 * falcon.h: libfalcon's compute API.
 *
 * Falcon recurrences are normalized first-order updates of a fast-weight
 * memory S (m x n), one step per token, read with the query after the write.
 * This header exposes: a configuration, inputs for one sequence or a
 * [B][T][H][D] batch, the carried state, the three equal forms, the backends,
 * the precisions and error codes. Files (.npy, output transactions,
 * checkpoints) are in falcon_io.h; tuning and the reference's attachment in
 * falcon_advanced.h. No function here does any I/O.
 *
 * Every entry point validates its arguments before it touches anything the
 * caller owns: on error it returns a non-zero falcon_status, leaves output
 * buffers and the state untouched, and falcon_last_error() names the tensor,
 * the index and the rule that failed. The one error found after computing
 * is FALCON_E_OVERFLOW (valid inputs whose results are not finite): the
 * state is still untouched, but the output buffer has then been written
 * and its contents are unspecified.
 */
#ifndef FALCON_H
#define FALCON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FALCON_VERSION "0.1.0"
/* The version of the library linked at run time (FALCON_VERSION is the
 * header's): a program built against one header and run with another
 * libfalcon.so can tell. */
const char *falcon_version(void);

typedef enum falcon_status {
    FALCON_OK = 0,
    FALCON_E_ARGUMENT,    /* a null pointer or an unknown enum value */
    FALCON_E_SHAPE,       /* sizes disagree, or T/n/m/B/H out of range */
    FALCON_E_RANGE,       /* a value outside its allowed range (beta, alpha, gain, eps, W, C) */
    FALCON_E_NONFINITE,   /* NaN or infinity in an input */
    FALCON_E_UNAVAILABLE, /* backend not compiled in, or the CPU/GPU lacks it */
    FALCON_E_NOMEM,       /* allocation failed */
    FALCON_E_OVERFLOW,    /* the result was not finite (outputs unspecified, state kept) */
    FALCON_E_IO,          /* a file could not be opened, read or written */
    FALCON_E_FORMAT       /* a file is malformed */
} falcon_status;

typedef enum falcon_variant {
    FALCON_1 = 0, /* scalar NLMS */
    FALCON_2,     /* per-column gains */
    FALCON_3,     /* sliding-window mini-batch NLMS */
    FALCON_1A,    /* inner-product twins of the above */
    FALCON_2A,
    FALCON_3A
} falcon_variant;

typedef enum falcon_align {
    FALCON_ALIGN_PREFIX = 0, /* step t learns (phi(k_{t-1}), v_t) */
    FALCON_ALIGN_SAME        /* step t learns (phi(k_t), v_t) */
} falcon_align;

typedef enum falcon_phi {
    FALCON_PHI_IDENTITY = 0,
    FALCON_PHI_RELU,
    FALCON_PHI_ELU1,  /* x + 1 for x > 0, exp(x) otherwise */
    FALCON_PHI_L2NORM /* x / ||x||, 0 for x = 0 */
} falcon_phi;

typedef enum falcon_form {
    FALCON_FORM_RECURRENT = 0,
    FALCON_FORM_CHUNK,
    FALCON_FORM_PARALLEL
} falcon_form;

typedef enum falcon_backend {
    FALCON_BACKEND_AUTO = 0, /* the best backend this machine has */
    FALCON_BACKEND_SCALAR,
    FALCON_BACKEND_AVX2,
    FALCON_BACKEND_AVX512,
    FALCON_BACKEND_CUDA,
    FALCON_BACKEND_MPFR, /* high-precision reference, rounded to the run's precision */
    FALCON_BACKEND_COUNT /* not a backend: one more than the last (for loops over them) */
} falcon_backend;

/*
 * The run's arithmetic. FALCON_TF32 and FALCON_BF16 are what tensor cores
 * compute: fp32 data, state and accumulation, with the operands of the
 * chunk form's matrix products rounded (to nearest even) to tf32 (10
 * fraction bits) or bf16 (7) before each product. Only the chunk form on
 * the CPU kernel backends runs them; errors are measured in units of the
 * operand format's roundoff (2^-11, 2^-8). Their element type is float.
 */
typedef enum falcon_precision {
    FALCON_FP32 = 0,
    FALCON_FP64,
    FALCON_TF32,
    FALCON_BF16
} falcon_precision;

/* Limits checked by validation. */
#define FALCON_MAX_DIM     16384   /* n and m */
#define FALCON_MAX_WINDOW  4096
#define FALCON_MAX_CHUNK   4096
#define FALCON_CHUNK_AUTO  0 /* chunk: picked from the shapes (falcon_chunk_auto) */
#define FALCON_MAX_THREADS 1024

typedef struct falcon_config {
    falcon_variant variant;
    falcon_align align;
    falcon_phi phi;
    falcon_form form;
    falcon_backend backend;
    falcon_precision precision;
    double eps;        /* normaliser floor, > 0 (default 1e-6) */
    int64_t window;    /* W >= 1; must be 1 unless the variant is Falcon-3/3A */
    int64_t chunk;     /* C in [1, FALCON_MAX_CHUNK], chunk form only, or FALCON_CHUNK_AUTO */
    int mpfr_bits;     /* mpfr backend precision, >= 64 (default 256) */
    int threads;       /* heads run in parallel; 0 = OpenMP's default */
} falcon_config;

/* Defaults: Falcon-1, prefix, identity, recurrent, auto, fp32, eps 1e-6,
 * window 1, chunk FALCON_CHUNK_AUTO, 256 bits, threads 0. */
void falcon_config_default(falcon_config *cfg);

/* Which query/key head value head h reads when H value heads share
 * H_qk = qk_heads query/key heads (G = H / H_qk value heads each). */
typedef enum falcon_head_map {
    FALCON_HEADS_INTERLEAVED = 0, /* h / G: each q/k head repeated G times in a row
                                     (torch repeat_interleave; fla, FlashInfer) */
    FALCON_HEADS_TILED            /* h % H_qk: the q/k heads tiled G times (torch repeat) */
} falcon_head_map;

/*
 * Inputs for B x H independent sequences in the [B][T][H][D] layout of the
 * PyTorch linear-attention libraries; one sequence is B = H = 1 ([T][D]).
 * The element type is double for FALCON_FP64 and float for the others.
 * The fields after gain are zero for a plain batch (a designated or
 * positional initializer that stops at gain gives one).
 *
 * Packed variable-length batch (fla's cu_seqlens): B = 1 and seqs >= 1
 * offsets after 0 = cu_seqlens[0] <= ... <= cu_seqlens[seqs] = T; sequence
 * i is steps [cu_seqlens[i], cu_seqlens[i + 1]) of the packed tensors (a
 * length may be 0) and owns state heads i * H .. i * H + H - 1, so nothing
 * flows from one sequence into the next. Its results equal those of
 * running each sequence alone, bit for bit, in every backend and form.
 *
 * Grouped heads: q and k hold qk_heads heads ([B][T][qk_heads][n]) that
 * the H value heads share through head_map; v, beta, alpha, gain, the
 * outputs and the state are per value head. The results equal those of
 * the plain call with q and k repeated to H heads, bit for bit; their
 * gradients are summed over the value heads that share them (in double,
 * in head order, rounded once).
 */
typedef struct falcon_inputs {
    int64_t B, T, H; /* T >= 0, B, H >= 1 */
    int64_t n, m;    /* key/query width, value width */
    const void *q;     /* [B][T][H_qk][n], H_qk = qk_heads (H when 0) */
    const void *k;     /* [B][T][H_qk][n] */
    const void *v;     /* [B][T][H][m] */
    const void *beta;  /* [B][T][H] */
    const void *alpha; /* [B][T][H], or NULL for no decay */
    const void *gain;  /* [B][T][H][n]; required by Falcon-2/2A, NULL otherwise */
    const int64_t *cu_seqlens; /* [seqs + 1], or NULL: B sequences of T steps */
    int64_t seqs;              /* sequences packed, with cu_seqlens; 0 without */
    int64_t qk_heads;          /* H_qk, dividing H; 0: H (one q/k head per value head) */
    falcon_head_map head_map;  /* with qk_heads < H */
} falcon_inputs;

/* One sequence: B = H = 1. */
falcon_inputs falcon_inputs_sequence(int64_t T, int64_t n, int64_t m,
                                     const void *q, const void *k, const void *v,
                                     const void *beta, const void *alpha,
                                     const void *gain);

/* The state heads a call's inputs carry: seqs x H for a packed batch,
 * B x H otherwise (-1 for NULL, or a count outside [0, 2^24]). */
int64_t falcon_inputs_state_heads(const falcon_inputs *in);

/*
 * The carried state of `heads` = B*H sequences (seqs*H packed): memory S [heads][m][n], the
 * previous raw key (prefix alignment) and the last W-1 raw examples (window
 * variants). Stored in double whatever the run precision (an fp32 value is
 * exact in double). A fresh state has S = 0, no previous key, no history.
 */
typedef struct falcon_state falcon_state;

falcon_status falcon_state_create(int64_t heads, int64_t n, int64_t m,
                                  int64_t window, falcon_state **out);
void falcon_state_free(falcon_state *state);
falcon_status falcon_state_reset(falcon_state *state);
falcon_status falcon_state_copy(const falcon_state *src, falcon_state **out);
/* A new state holding heads [first, first + count) of src: its memory,
 * previous keys, window history and lazy decay factors, bit for bit (a
 * packed batch's sequence i is heads [i H, i H + H)). FALCON_E_SHAPE when
 * the range is not within src's heads. */
falcon_status falcon_state_slice(const falcon_state *src, int64_t first, int64_t count, falcon_state **out);

/* Read-only view of a state's contents. */
typedef struct falcon_state_view {
    int64_t heads, n, m, window;
    int64_t keep;            /* history capacity: window - 1 */
    const double *S;         /* [heads][m][n] */
    const double *prev_key;  /* [heads][n], raw (before phi) */
    const uint8_t *has_prev; /* [heads] */
    const double *hist_k;    /* [heads][keep][n], oldest first, raw keys */
    const double *hist_v;    /* [heads][keep][m] */
    const int64_t *hist_len; /* [heads], <= keep */
} falcon_state_view;

falcon_state_view falcon_state_get_view(const falcon_state *state);
/* Replace the memory of every head ([heads][m][n], finite). */
falcon_status falcon_state_set_memory(falcon_state *state, const double *S);
/*
 * Whether a state can carry a run of precision p. A state holds double, but
 * a run below fp64 holds its memory in float32 and its carried keys and
 * values as the run's inputs (float32, or tf32/bf16 operands), so a value
 * that does not fit there (from an fp64 run, falcon_state_set_memory or a
 * checkpoint) is bad input: FALCON_E_RANGE names the array (S, prev_key,
 * hist_k, hist_v), the head and the element. falcon_run and falcon_validate
 * check it too, before anything is written.
 */
falcon_status falcon_state_check(const falcon_state *state, falcon_precision p);

/*
 * Run the recurrence over the inputs, carrying `state` (which may be NULL
 * for a fresh state that is not returned). `out` receives the reads
 * o_t = S_t phi(q_t), [B][T][H][m] in the run's precision. Running a
 * sequence in one call equals, to rounding, running it in any split into
 * segments with the same state carried.
 */
falcon_status falcon_run(const falcon_config *cfg, const falcon_inputs *in,
                         falcon_state *state, void *out);
/* falcon_run for inputs that are steps [t0, t0 + in->T) of a longer
 * sequence run in segments: what falcon_validate_from checks, checked once,
 * with messages that count steps from t0 (t0 >= 0); the results do not
 * depend on t0. A failure of those checks has their statuses (ARGUMENT,
 * SHAPE, RANGE, NONFINITE); the run's own are UNAVAILABLE, NOMEM and
 * OVERFLOW. falcon_run is falcon_run_from with t0 = 0. */
falcon_status falcon_run_from(const falcon_config *cfg, const falcon_inputs *in,
                              falcon_state *state, void *out, int64_t t0);

/*
 * A call on a pool of states, as servers keep them: `pool` holds P slots of
 * H heads each (P x H heads); sequence i of the call (batch row i, or packed
 * sequence i) starts from slot slots[i] and its final state is stored back
 * there, or, for slots[i] = -1, starts from a fresh state that is not kept.
 * Every other slot stays as it was, bit for bit, and on any error the whole
 * pool does. The results are those of falcon_run with a state holding the
 * indexed slots in the call's order. Rules: slot-range (an index outside
 * [-1, P)), slot-twice (two sequences given one slot), state-shape (a pool
 * whose heads are not a multiple of H, or other n, m).
 */
falcon_status falcon_run_pool(const falcon_config *cfg, const falcon_inputs *in, falcon_state *pool,
                              const int64_t *slots, void *out);

/*
 * Gradients of one call (docs/math.md section 12). For the call
 * falcon_run(cfg, in, state, out), with cotangents dO of its reads and dS_T
 * of its end memory, the gradients of L = <O, dO> + <S_T, dS_T> with
 * respect to every input and to the carried state. Tensors are in the
 * inputs' [B][T][H][D] layout and element type; the state's gradients are
 * double, in the state's layout.
 */
typedef struct falcon_grads {
    void *dq, *dk;     /* [B][T][H][n] */
    void *dv;          /* [B][T][H][m] */
    void *dbeta;       /* [B][T][H] */
    void *dalpha;      /* [B][T][H]: required when in->alpha is given, else NULL */
    void *dgain;       /* [B][T][H][n]: required for Falcon-2/2A, else NULL */
    double *dS0;       /* [heads][m][n], or NULL: not wanted */
    double *dprev_key; /* [heads][n] (0 for a head without one), or NULL */
    double *dhist_k;   /* [heads][window - 1][n] (0 past a head's history), or NULL */
    double *dhist_v;   /* [heads][window - 1][m], or NULL */
} falcon_grads;

/*
 * dO: [B][T][H][m] in the run's element type, or NULL for 0; dS_T:
 * [heads][m][n] double, or NULL for 0; state: the carried state the call
 * starts from (NULL: a fresh one); it is read, never changed. Validation is
 * falcon_run's plus the cotangents (finite, and dS_T within the run's
 * precision) and the gradient buffers (present exactly as above): all of it
 * before anything is written. FALCON_E_OVERFLOW: a gradient was not finite
 * (the gradient buffers' contents are then unspecified).
 */
falcon_status falcon_backward(const falcon_config *cfg, const falcon_inputs *in,
                              const falcon_state *state, const void *dO, const double *dS_T,
                              const falcon_grads *grads);

/*
 * Steps per block of the masked-parallel form for window W: 4096 / W (at
 * least 1), so that its explicit T x T-like matrices stay bounded. A longer
 * call runs block after block with the state carried, which is why a stream
 * cut into segments of a multiple of this length gives the outputs of one
 * call bit for bit. -1 when W is outside [1, FALCON_MAX_WINDOW].
 */
int64_t falcon_parallel_block(int64_t window);
/* Steps per block of the chunk form: the chunk C, but at most 4096 / W (at
 * least 1), so that a block holds at most max(4096, W) terms and its work
 * memory is bounded as the masked-parallel form's is, whatever C, W and T
 * are. -1 when C or W is out of range. */
int64_t falcon_chunk_block(int64_t chunk, int64_t window);
/* The chunk size FALCON_CHUNK_AUTO stands for: the fastest of 8 .. 256
 * by a cost model of the chunk form (README, "Choosing the chunk size"),
 * from the key and value widths and the window; deterministic, so a run's
 * results do not depend on timings. */
int64_t falcon_chunk_auto(int64_t n, int64_t m, int64_t window);
/* The chunk size a run uses: chunk itself, or falcon_chunk_auto's choice
 * for FALCON_CHUNK_AUTO. */
int64_t falcon_chunk_of(int64_t chunk, int64_t n, int64_t m, int64_t window);

/* Validation alone (what falcon_run checks before it computes). */
falcon_status falcon_validate(const falcon_config *cfg, const falcon_inputs *in,
                              const falcon_state *state);
/* The same for inputs that are steps [t0, t0 + in->T) of a longer sequence
 * run in segments: messages count steps from t0 (t0 >= 0). */
falcon_status falcon_validate_from(const falcon_config *cfg, const falcon_inputs *in,
                                   const falcon_state *state, int64_t t0);

/* Backends. */
int falcon_backend_available(falcon_backend backend); /* 1 if usable here */
falcon_backend falcon_backend_resolve(falcon_backend backend); /* AUTO -> best */
/* How a backend is built here, e.g. "avx512 (simde emulation)". */
const char *falcon_backend_describe(falcon_backend backend);

/* Names <-> enums (the CLI spellings). Parsers return -1 on unknown names. */
const char *falcon_variant_name(falcon_variant v);
const char *falcon_align_name(falcon_align a);
const char *falcon_phi_name(falcon_phi p);
const char *falcon_form_name(falcon_form f);
const char *falcon_backend_name(falcon_backend b);
const char *falcon_precision_name(falcon_precision p);
int falcon_variant_parse(const char *s);
int falcon_align_parse(const char *s);
int falcon_phi_parse(const char *s);
int falcon_form_parse(const char *s);
int falcon_backend_parse(const char *s);
int falcon_precision_parse(const char *s);

/* Variant properties. */
int falcon_variant_is_regression(falcon_variant v); /* Falcon-1/2/3 */
int falcon_variant_has_gain(falcon_variant v);      /* Falcon-2/2A */
int falcon_variant_has_window(falcon_variant v);    /* Falcon-3/3A */

/* Errors. */
const char *falcon_status_name(falcon_status s);
/* Detail of the last failure in this thread (tensor, index, rule). */
const char *falcon_last_error(void);

/*
 * The same failure as fields, for programs that act on it (a CLI that puts
 * the file of the tensor in front, a grader): no caller need parse the
 * message. Strings are never NULL ("" when not known) and stay valid until
 * the next failure in this thread; numbers are -1 when not known.
 *
 * input: what the failure concerns: a tensor of falcon_inputs (q, k, v,
 * beta, alpha, gain, cu_seqlens; "inputs" for the struct), a size (T, B,
 * H, n, m, t0, seqs, qk_heads, head_map,
 * "B x H", "B x T x H x max(n, m)"; heads, window for a state), a config
 * field (config.variant ... config.threads; "config" for the struct), out,
 * a state array (S, prev_key, hist_k, hist_v; "state" for the state), a
 * cotangent or gradient buffer of falcon_backward (dO, dS_T; grads, dq, dk,
 * dv, dbeta, dalpha, dgain), or the path of a file (.npy reading,
 * checkpoints).
 *
 * rule: a stable id of the rule that failed. Inputs: finite, operand-range,
 * beta-range (regression), beta-ip-range (inner product), alpha-range,
 * gain-range, null, gain-required, gain-unexpected. Sizes: T-range,
 * heads-range, n-range, m-range, too-many-heads, too-many-elements,
 * t0-range. Layouts: cu-seqlens-batch (B != 1), cu-seqlens-range (seqs,
 * or an offset out of order; index: the offset), qk-heads-range (input
 * qk_heads), unknown-enum (input head_map). Config: unknown-enum, format-form, format-backend, eps-range,
 * window-range, window-falcon1, chunk-range, mpfr-bits, threads-range.
 * State: state-shape, state-window, state-fit (a value beyond the run's
 * precision; dS_T too), state-finite. Gradients: grad-required (a buffer
 * the call needs is NULL), grad-unexpected (one it has no use for). Run: backend-unavailable, out-of-memory,
 * overflow. Files: io (cannot open, read or write), npy-format (a
 * malformed or unsupported header or data), npy-f32-fit (a float64 value
 * beyond float32), checkpoint-format, checkpoint-value. "" for the rest.
 */
typedef struct falcon_error_info {
    falcon_status status; /* FALCON_OK before the first failure */
    const char *input;
    const char *rule;
    int64_t index;        /* flat element index within input */
    int64_t t;            /* step, counted from t0 as the message does */
    int64_t head;         /* b * H + h */
    const char *message;  /* falcon_last_error() */
} falcon_error_info;
/* This thread's last failure; never NULL. */
const falcon_error_info *falcon_last_error_info(void);

#ifdef __cplusplus
}
#endif

#endif /* FALCON_H */
