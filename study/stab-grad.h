/*
 * Internals of `falcon stability --grad` (not an API): stab-grad.c runs the
 * streams, stab-grad-report.c writes the report set and the summary.
 */
#ifndef FALCON_STUDY_STAB_GRAD_H
#define FALCON_STUDY_STAB_GRAD_H

#include "grad-gate.h"
#include "study.h"

#define GMAXPTS 24
#define GMAXSTREAM 32
/* The gradient tensors of a fresh call of Falcon-1, -3 and -1A: the
 * gradient gate's dq, dk, dv, dbeta, dalpha (decay regimes only) and dS0. */
enum { GT_DQ, GT_DK, GT_DV, GT_DBETA, GT_DALPHA, GT_DS0, GT_COUNT };
extern const int grad_gate_index[GT_COUNT]; /* gate_grad_tensor of each */
/* The fp32 forms measured: recurrent and chunk. */
#define GFORMS 2
extern const falcon_form grad_forms[GFORMS];

/* The stand-in's share of the fp32 errors it measures: its own error
 * against MPFR (in fp32's u) must stay below this at every length both
 * ran and at the longest T, by its fit extrapolated there. By the triangle
 * inequality a measured fp32 error is then within about STANDIN_SHARE u of
 * the one MPFR would give. */
#define STANDIN_SHARE 0.01

typedef struct gparams {
    const char *profile, *out;
    int64_t n, W, C, tmax, tmpfr;
    int threads, plan;
    falcon_backend backend;     /* the kernels' (auto: the most capable here) */
    falcon_precision standin;   /* the stand-in's precision: fp64 (fp32 only to see it refused) */
    int nstream;
    falcon_variant svar[GMAXSTREAM];
    gate_decay sdecay[GMAXSTREAM];
} gparams;

typedef struct gstream {
    falcon_variant variant;
    gate_decay decay;
    int npts, nmpfr; /* points measured; the first nmpfr against MPFR, the rest against the stand-in */
    double T[GMAXPTS];
    double err[GFORMS][GT_COUNT][GMAXPTS]; /* fp32 kernels, units of fp32's u; NaN: tensor absent */
    double kappa[GT_COUNT][GMAXPTS];       /* the reference's kappa_X (MPFR points; NaN beyond) */
    double rms[GT_COUNT][GMAXPTS];         /* ||X_ref||_F / sqrt(count): the gradient's size */
    double sd_err[GT_COUNT][GMAXPTS];      /* the stand-in against MPFR, units of fp64's u */
    double sd_thr[GT_COUNT][GMAXPTS];      /* the gradient gate's fp64 threshold there (for scale) */
    double sd_bound;                       /* the stand-in's error at tmax, fp32's u (extrapolated) */
    int standin;                           /* 1 accepted, 0 refused or not checked, -1 not needed */
    loglog_fit fit[GFORMS][GT_COUNT];
    char error[300];                       /* why the stream stopped short (empty: it did not) */
    double seconds, cpu_seconds;
} gstream;

/* The lengths of a stream: 1 and 3 per decade from 100, and tmax last. */
int grad_grid(int64_t tmax, int64_t *T, int cap);
/* Runs stream s: every length of the grid, the stand-in judged after the
 * last MPFR length. 0 done (s->error says if it stopped short), -1 no memory. */
int grad_run_stream(const gparams *P, gstream *s);
/* The summary and the report set (grad.json, fits.dat, standin.dat,
 * curves/VARIANT_DECAY.dat): 0 done, 1 a stream failed, 2 not written. */
int grad_report(const gparams *P, const gstream *ss, double secs);

#endif
