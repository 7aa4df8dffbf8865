/* Internals shared by the study's sources (not part of the library's API). */
#ifndef FALCON_STUDY_H
#define FALCON_STUDY_H

#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include "falcon.h"
#include "../util/opts.h" /* the option scanner and cli_error of every command */

/*
 * The long-double reference (ldref.c): docs/math.md section 1 step by step, identity phi,
 * with its own carried state in long double. It is the study's cheap
 * reference beyond the lengths MPFR can afford: on x86 its unit roundoff is
 * 2^-64, 2048 times below fp64's, and the study checks it against MPFR on
 * the lengths both run. Its outputs stay in long double, so that comparing
 * an fp64 kernel with it adds no rounding of the reference itself.
 */
typedef struct ldref {
    falcon_variant variant;
    falcon_align align;
    int64_t n, m, W;
    long double eps;
    long double *S;        /* [m][n] */
    long double *r;        /* [W][m] eta * residual (or eta * y) per example */
    long double *xz, *ql;  /* [W][2][n] keys and write directions; [n] query */
    double *prev;          /* [n] previous raw key (prefix alignment) */
    int has_prev;
    double *hk, *hv;       /* last W-1 examples, oldest first: [W-1][n], [W-1][m] */
    int64_t hlen;
} ldref;

int ldref_init(ldref *r, falcon_variant v, falcon_align a, int64_t n, int64_t m, int64_t W, double eps);
void ldref_free(ldref *r);
/* Run in->T steps of one sequence (double inputs, B = H = 1); out [T][m]. */
void ldref_run(ldref *r, const falcon_inputs *in, long double *out);
/* The unit roundoff of long double on this machine. */
long double ldref_unit_roundoff(void);

/* Normwise relative error of a double result against a long double
 * reference (absolute if the reference is 0); long double's exponent range
 * needs no scaling. */
long double study_relerr(const double *x, const long double *ref, int64_t count);
/* sqrt(num / den): a normwise relative error from its sums of squares
 * (absolute, sqrt(num), when the reference is 0). */
static inline long double study_norm_ratio(long double num, long double den)
{
    return den > 0 ? sqrtl(num / den) : sqrtl(num);
}

/* Least squares of log(err) = log(c) + p log(T) over the points with
 * err > 0; at = c * Tx^p. npts < 2 leaves p, c, at NaN. */
typedef struct loglog_fit {
    double p, c, at;
    int npts;
} loglog_fit;
loglog_fit study_fit(const double *T, const double *err, int count, double Tx);

/* Checkpoint grid 1-2-5 per decade from lo to hi (inclusive if on the grid,
 * and hi itself always last). Returns the count written (<= cap). */
int study_grid(int64_t lo, int64_t hi, int64_t *out, int cap);

/* `falcon stability --learning` (learning.c): argv as falcon_stability_main. */
int study_learning_main(int argc, char **argv);
/* `falcon stability --grad` (stab-grad.c): the gradients' errors against T. */
int study_grad_main(int argc, char **argv);
/* --profile quick|full: 0 quick, 1 full, -1 with a message. */
int study_parse_profile(const char *s);
/* Parse an integer option value (1e6 accepted); -1 with a message. */
int study_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
/* The integer options of a study command: the option's id, its range, where
 * its value goes. study_int_option parses the value of the option sc just
 * read (with id) if it is one of the rows: 1 done, -1 bad (with a
 * message), 0 not an integer option. */
typedef struct study_int_opt {
    int id;
    int64_t lo, hi, *to;
} study_int_opt;
int study_int_option(const opt_scan *sc, int id, const study_int_opt *rows, int count);

/* mkdir -p; 0 or -1 with a message on stderr. */
int study_mkdir(const char *path);
/* The files a command writes at its end are one report set (an output
 * transaction): study_open gives dir/name's temporary for writing (NULL
 * with a message on stderr), study_close closes it (-1 with a message
 * naming the file on a write error), and study_reports_end(ok) renames the
 * whole set onto its names when ok (-1 with a message if that fails), or
 * removes the temporaries: the earlier files stay as they were. */
FILE *study_open(const char *dir, const char *name, char *path, size_t pathlen);
int study_close(FILE *f);
int study_reports_end(int ok);
/* An input of the command, which no report may replace (-1 with a message). */
int study_reports_input(const char *what, const char *path);
/* The report files dir/names[i] (NULL-terminated) checked as outputs when
 * the command starts, so that a path that can never be written fails
 * before the computing does (-1 with a message). kind names the command
 * in the folder's record (util.c, RECORD): a set removes only its own
 * kind's earlier files. */
int study_reports_check(const char *dir, const char *kind, const char *const *names);
/* FNV-1a over n bytes, continuing from h (STUDY_FNV_BASIS to start): the
 * hashes of saved states, build identities and benchmark cases. */
#define STUDY_FNV_BASIS 1469598103934665603u
uint64_t study_fnv1a(uint64_t h, const void *x, size_t n);
/* JSON number: finite values, else null. */
void study_json_num(FILE *f, double x);
/* JSON string, quoted and escaped. */
void study_json_str(FILE *f, const char *s);

#endif
