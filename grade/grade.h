/*
 * The grading layer: judge any implementation of the Falcon recurrences,
 * ours or anyone's, against the MPFR reference.
 *
 *   falcon cases export DIR   writes case sets: inputs, the initial state,
 *                             the reference's outputs and final state, the
 *                             thresholds (grade/export.c)
 *   falcon check DIR --results RDIR
 *                             reads what an implementation wrote for each
 *                             case and prints the gate's table (grade/check.c)
 *
 * It sits above the library: it uses the public API (falcon.h), the MPFR
 * reference (reference/falcon_ref.h) and the gate's engine (gate/gate.h:
 * case table, seeded inputs, thresholds), never a kernel under test. The
 * file format is described in docs/cases.md.
 */
#ifndef FALCON_GRADE_H
#define FALCON_GRADE_H

#include <stddef.h>
#include <stdint.h>
#include "falcon.h"
#include "../util/opts.h"

/* The precisions an implementation can be judged in (units of roundoff). */
typedef enum grade_unit {
    GRADE_FP64 = 0, /* u = 2^-53 */
    GRADE_FP32,     /* u = 2^-24 */
    GRADE_TF32,     /* u = 2^-11: fp32 range, 10 explicit mantissa bits */
    GRADE_BF16,     /* u = 2^-8: fp32 range, 7 explicit mantissa bits */
    GRADE_FP16,     /* u = 2^-11, range about 6e-8 .. 65504 */
    GRADE_UNIT_COUNT
} grade_unit;

const char *grade_unit_name(grade_unit u);
int grade_unit_parse(const char *s); /* -1 if unknown */
double grade_unit_roundoff(grade_unit u);
/* x rounded to the nearest value of the unit's format (ties to even). 0 when
 * that is finite, -1 when x is outside the format's finite range. Subnormal
 * results are kept (fp16, and the fp32-range formats below 2^-126). */
int grade_round(double x, grade_unit u, double *out);

/* File layouts of case sets and results (docs/cases.md). */
typedef enum grade_layout {
    GRADE_LAYOUT_FALCON = 0, /* the library's: state [B][H][m][n] */
    GRADE_LAYOUT_FLA,        /* PyTorch linear-attention libraries: state [B][H][K][V] */
    GRADE_LAYOUT_GGML,       /* ggml_gated_delta_net: n = m, read scale 1/sqrt(S) */
    GRADE_LAYOUT_COUNT
} grade_layout;

const char *grade_layout_name(grade_layout l);
int grade_layout_parse(const char *s);

/* The commands; argv[0] is the command's name. They return the exit status:
 * 0 success (check: every case passed or was skipped), 1 (check) a case
 * failed, 2 bad usage or bad input, with one "falcon: error:" line. */
int falcon_grade_export_main(int argc, char **argv);
int falcon_grade_check_main(int argc, char **argv);
/* For the falcon program: a terminating signal during an export removes its
 * temporary directory, then ends the process as the signal would. */
void falcon_grade_export_catch_signals(void);

/* ---- shared by export and check ---- */

/* Messages are cli_error's "falcon: error: <message>" line (util/opts.h),
 * as every command's; arguments are read with its option scanner. The
 * files of a case set are written and verified through grade/set.h. */

#endif
