/*
 * The gate's engine: one table of cases, seeded inputs, the MPFR reference,
 * normwise relative errors in units of roundoff and the documented
 * thresholds. The Criterion tests (verify/test-*.c) and `falcon verify` both
 * run it, so the CLI prints exactly what CI checks.
 */
#ifndef FALCON_GATE_H
#define FALCON_GATE_H

#include <stdint.h>
#include <stdio.h>
#include "falcon.h"
#include "../src/backends.h" /* the test-only backends, FALCON_BACKEND_ROWS */

typedef enum gate_decay {
    GATE_DECAY_NONE = 0,  /* no alpha */
    GATE_DECAY_MILD,      /* alpha in [0.98, 1] */
    GATE_DECAY_RANDOM,    /* alpha in [0.5, 1] */
    GATE_DECAY_STRONG,    /* alpha = 0.5 */
    GATE_DECAY_EXTREME,   /* the smallest normal number every 5th step, 0.9 otherwise */
    GATE_DECAY_RESET_SLOW,/* one near-reset (smallest normal), then 0.999 */
    GATE_DECAY_MIX,       /* random mixture of 1, mild, strong and the smallest normal */
    GATE_DECAY_COUNT
} gate_decay;

typedef struct gate_case {
    falcon_variant variant;
    falcon_align align;
    falcon_phi phi;
    gate_decay decay;
    int64_t B, T, H, n, m;
    int64_t window, chunk;
    double eps;       /* rounded to the precision before use */
    double key_scale; /* keys scaled so that eps matters when small */
    uint64_t seed;
} gate_case;

/* Seeded inputs of one case in one precision (values exactly representable). */
typedef struct gate_data {
    falcon_precision prec;
    falcon_inputs in;   /* in the precision, for the kernels */
    falcon_inputs in64; /* the same values in double, for the reference */
    void *buf, *buf64;
} gate_data;

/* The generator behind every seeded value (splitmix64): the next number of
 * the stream *s, the same on every machine. */
uint64_t gate_next_u64(uint64_t *s);

int gate_data_make(const gate_case *c, falcon_precision prec, gate_data *d);
void gate_data_free(gate_data *d);
/* d's kernel inputs of steps [t0, t1), for a case of one sequence and one
 * head (B = H = 1): a segment of a split call. */
falcon_inputs gate_inputs_slice(const gate_data *d, int64_t t0, int64_t t1);

/* The run configuration of a case. */
falcon_config gate_config(const gate_case *c, falcon_form form, falcon_backend backend,
                          falcon_precision prec);

/* Result of one run: outputs and final memory in double. */
typedef struct gate_result {
    int64_t out_count, state_count;
    double *out, *S;
    /* Reference only: the condition number of the reads,
     * || (|S_t| |phi(q_t)|)_t ||_F / ||O||_F >= 1 (falcon_ref_reads);
     * cancellation in o = S q magnifies any error in S by this factor. */
    double read_cond;
} gate_result;

/* Every kernel backend: every backend but auto and mpfr (the reference); a
 * test runs those falcon_backend_available() reports and names the others
 * skipped. Read-only (set up before main). */
extern falcon_backend gate_backends[FALCON_BACKEND_ROWS];
extern int gate_backend_count;
/* 1 if backend b runs here in precision p (the cuda backend is fp32 only). */
int gate_backend_runs(falcon_backend b, falcon_precision p);
/* 1 if form f runs in precision p: tf32 and bf16 are the chunk form's. */
int gate_form_runs(falcon_form f, falcon_precision p);
/* The fp32 fraction bits precision p's operands drop (falcon_math.h): 13 tf32, 16 bf16, else 0. */
int gate_operand_drop(falcon_precision prec);
/* Every precision of the ladder, fp32 first. */
#define GATE_PRECISION_COUNT 4

/* Run a case through a backend/form on data `d` (state fresh unless given). */
falcon_status gate_run(const gate_case *c, const gate_data *d, falcon_form form,
                       falcon_backend backend, falcon_state *state, gate_result *r);
/* The same in precision prec, which must have d's element type (tf32, bf16
 * on fp32 data: the operands are rounded from the fp32 values). */
falcon_status gate_run_in(const gate_case *c, const gate_data *d, falcon_form form, falcon_backend backend,
                          falcon_precision prec, falcon_state *state, gate_result *r);
/* The MPFR recurrent reference for data d (256 bits), rounded to double,
 * with the read condition number computed from the reference's own S_t.
 * _from starts from a carried state (NULL: fresh). */
falcon_status gate_reference(const gate_case *c, const gate_data *d, gate_result *r);
falcon_status gate_reference_from(const gate_case *c, const gate_data *d, const falcon_state *init,
                                  gate_result *r);
/* The case's eps as a run in precision prec sees it (rounded to fp32 there). */
double gate_eps(const gate_case *c, falcon_precision prec);
void gate_result_free(gate_result *r);

/* Normwise relative error ||x - ref||_F / ||ref||_F (absolute if ref = 0). */
double gate_relerr(const double *x, const double *ref, int64_t count);
/* The unit roundoff of a precision: 2^-24 (fp32), 2^-53 (fp64), and of the
 * operand formats 2^-11 (tf32), 2^-8 (bf16). */
double gate_unit_roundoff(falcon_precision prec);

typedef struct gate_errors {
    double out_u, state_u; /* errors in units of roundoff */
} gate_errors;

gate_errors gate_compare(const gate_result *r, const gate_result *ref, falcon_precision prec);

/* The threshold (units of roundoff) of a case, form and precision; the
 * reasoning is in gate/THRESHOLDS.md. */
double gate_threshold(const gate_case *c, falcon_form form, falcon_precision prec);
/* The output threshold scales with the reads' condition number. */
double gate_threshold_out(const gate_case *c, falcon_form form, falcon_precision prec,
                          double read_cond);

/* The case table. profile 0 = quick (falcon verify), 1 = full (CI gate). */
int gate_cases(int profile, gate_case **cases);
/* One case per variant, with and without mild decay, at a given size
 * (prefix, identity, W = 4 for the window variants, C = 64). */
int gate_cases_shape(int64_t T, int64_t n, int64_t m, gate_case **cases);
const char *gate_decay_name(gate_decay d);

/* The carried-memory family (verify/test-carried-memory.c): a run from a
 * memory S_0 much larger than what its steps write. A case: prefix
 * alignment, identity map, W = 3 for the window variants, eps = 1e-20,
 * chunk C (0: the parallel form's, stored as 64). gate_carried_inputs sets
 * beta_t = 1 in both buffers of a regression variant (exact projections:
 * the most cancellation); gate_carried_state makes a state whose memory is
 * scale times uniform(-1, 1), exact in the precision. The chunk and
 * parallel forms' memory may reach GATE_CARRIED_FACTOR times the recurrent
 * form's error on the same input where that is above their threshold. */
#define GATE_CARRIED_FACTOR 4.0
gate_case gate_carried_case(falcon_variant v, gate_decay decay, int64_t T, int64_t n, int64_t m, int64_t chunk,
                            uint64_t seed);
void gate_carried_inputs(const gate_case *c, gate_data *d);
falcon_status gate_carried_state(const gate_case *c, falcon_precision prec, double scale, uint64_t seed,
                                 falcon_state **st);
/* alpha_t of a regime at step t of T (1 for none), drawing from the seeded
 * stream *s where the regime is random: the gate's inputs and the
 * benchmark's decay entries (bench/cases.c) take their decays from here. */
double gate_decay_alpha(gate_decay d, uint64_t *s, int64_t t, int64_t T, falcon_precision prec);
/* A one-line description, e.g. "falcon3 prefix identity W=3 T=37 n=5 m=7 C=8 decay=random". */
void gate_case_describe(const gate_case *c, char *buf, size_t size);

/* Element i of a typed array as double. */
static inline double falcon_load_test(const void *p, falcon_precision prec, int64_t i)
{
    return prec != FALCON_FP64 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* `falcon verify`: run the quick profile on every available backend and print
 * a table; returns the process exit status (0 all pass, 1 a failure, 2 usage). */
int falcon_gate_main(int argc, char **argv);

/* A copy of a state with its memory and value history times s (a power of
 * two: exact), for the grading layer's scaled form copies. */
falcon_status gate_state_scaled(const falcon_state *init, double s, falcon_state **out);

#endif
