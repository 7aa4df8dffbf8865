/* Where a failing result went wrong (grade/where.c): `falcon check`'s
 * per-step analysis of a case whose outputs exceed their threshold. */
#ifndef FALCON_GRADE_WHERE_H
#define FALCON_GRADE_WHERE_H

#include <stdint.h>

/* The first bad step and the head that contributes most to its error; -1
 * each when there is none. */
typedef struct check_where {
    int64_t step, batch, head;
    int64_t seq, seq_step; /* a packed case's: the sequence of step, and its step there; else -1 */
} check_where;

/* x (the result) and r (the reference), both of shape dim = [B,T,H,m] (the
 * outputs, in every layout). The error accumulated by step t is the error
 * of the steps 0..t over the norm of the whole reference,
 * ||x[:, :t+1] - r[:, :t+1]||_F / ||r||_F (absolute when r is 0), in units
 * u: it grows with t up to the case's out error, so it exceeds thr (the
 * case's out threshold) at some step exactly when the outputs fail, and
 * never for outputs within it. The first bad step is the first t where it
 * does: the step by which the error has outgrown what the whole run may
 * hold; its (batch, head) is the pair whose m outputs at step t have the
 * largest error. 0 and *w filled; -1 (*w all -1) when none exceeds thr. */
int check_where_first_bad(const double *x, const double *r, const int64_t dim[4], double u, double thr,
                          check_where *w);

#endif
