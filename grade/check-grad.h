/*
 * `falcon check` on a set exported with --grad: the gradients an
 * implementation wrote beside out.npy (dq.npy, ...), each judged against
 * the reference's with its threshold (docs/cases.md, "Gradients").
 */
#ifndef FALCON_GRADE_CHECK_GRAD_H
#define FALCON_GRADE_CHECK_GRAD_H

#include <jansson.h>
#include "grade.h"
#include "falcon_io.h"
#include "report.h"

/* check.c's reader: an .npy file of the shape `want` as doubles; finite: a
 * NaN or infinity is bad input. 0, or 2 after one error line. */
int check_read_array(const char *casename, const char *path, const char *label, json_t *want, int finite,
                     double **out, int64_t *count, falcon_dtype *dtype);

/* Whether `file` is the name of a gradient result (dq.npy, ..., dhist_v.npy). */
int check_is_grad_file(const char *file);

/* The gradients of the case `name` (case.json `c`, its folder cdir) in the
 * results folder rdir, in units u, into out->grad: each one the case has a
 * reference for and the results hold is judged; one the results hold and
 * the case has no reference for, or of the wrong shape, is refused. A
 * gradient with a NaN or an infinity fails. 0, or 2 after one error line. */
int check_grads(const char *name, const char *rdir, const char *cdir, json_t *c, double u, check_case *out);

#endif
