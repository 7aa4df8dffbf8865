/*
 * Internals of `falcon stability` shared by its sources (not an API):
 * stab-stream.c runs a stream, stab-resume.c saves and reads streams back,
 * stab-report.c writes the report set, stability.c is the command (options,
 * the study's streams and their share, merge).
 */
#ifndef FALCON_STUDY_STAB_H
#define FALCON_STUDY_STAB_H

#include <stddef.h>
#include <stdint.h>
#include "gate.h"
#include "study.h"

#define MAXPTS 64
#define MAXCURVE 16
#define MAXSTREAM 64
#define EPS 0x1p-20 /* exactly representable in fp32 and fp64: kernels and references see one eps */
/* The masked-parallel form runs at most 4096 terms per block (README), so
 * its error grows within a block and levels off beyond one: a power law
 * fitted below that length says nothing about 10^9 tokens. */
#define PARALLEL_NOTE                                                                              \
    "the parallel form runs at most 4096 terms per block: its error grows within a block and levels " \
    "off beyond one, so its fit does not extrapolate past T of about 4096"

typedef struct params {
    const char *profile, *out;
    int64_t n, m, W, C, tmax, tmax_par, tmpfr, seg;
    int64_t tfit;     /* the fits use the points T <= tfit; the later ones test the fit (beyond_fit) */
    /* The curves of the backends other than the most capable one (auto's
     * choice, or --backend's) stop at tmax_other: they answer whether the
     * backends agree, which a decade less shows; the most capable one's
     * curves, which the report's tables and fits read, run to tmax. */
    int64_t tmax_other;
    int formats;      /* fp32 Falcon-1/3 streams also run the chunk form in tf32 and bf16 */
    int only_backend; /* -1: all */
    int nstream;      /* the streams, in output order */
    falcon_precision sprec[MAXSTREAM];
    falcon_variant svar[MAXSTREAM];
    gate_decay sdecay[MAXSTREAM];
    int skipmask;     /* bit b: gate_backends[b] has no curves (stab_skip_reason) */
    int resume;       /* --resume: finished streams are read back, the others continue from their state */
    int plan;         /* --plan: print the study's planned work and run nothing */
    double every;     /* seconds between two saves of a stream's state (--checkpoint-every) */
    const char *build; /* the build of the results reported: the shards' (merge); NULL: this one */
} params;

/* The points of a curve past the fit's range (T > tfit): the last one
 * measured against the fit's value there, and the slope of those points
 * (with the last point inside the range). p held when the measured value
 * is within a factor BEYOND_HELD of the extrapolation. */
#define BEYOND_HELD 2.0

/* The tensor-core operand formats of the ladder (docs/math.md section 11). */
extern const falcon_precision stab_operand_formats[2];

typedef struct beyond_fit {
    int npts;                      /* points past the range; 0: none */
    double T, measured, extrapolated, p;
} beyond_fit;

typedef struct curve {
    falcon_backend backend;
    falcon_form form;
    falcon_precision prec; /* the stream's, or tf32/bf16 on an fp32 stream's inputs */
    int64_t tmax;
    falcon_state *st;
    long double num, den;
    int npts, ref[MAXPTS]; /* ref: 0 MPFR, 1 long double */
    double T[MAXPTS], out_u[MAXPTS], S_u[MAXPTS];
    loglog_fit fo, fs;
    beyond_fit bo, bs; /* the points past the fit's range against the fit */
    char error[200];
} curve;

typedef struct stream {
    falcon_precision prec;
    falcon_variant variant;
    gate_decay decay;
    int ncurve, ncheck, failed;
    curve c[MAXCURVE];
    /* long double reference vs MPFR, in units of long double's roundoff */
    double cT[MAXPTS], c_out[MAXPTS], c_S[MAXPTS];
    double seconds, cpu_seconds; /* wall and this thread's CPU time (of this process's part, when resumed) */
    int64_t mpfr_steps;          /* the MPFR reference's steps (of this process's part): tmpfr, once each */
} stream;

typedef struct run_key {
    char magic[24];
    uint32_t key_size, stream_size, ld_size, pad;
    char profile[16];
    int64_t n, m, W, C, tmax, tmax_par, tmpfr, seg, tfit, tmax_other;
    int32_t only_backend, skipmask, nstream, index, formats, pad2;
    int32_t list[MAXSTREAM][3];
    char build[512]; /* stab_build_identity */
} run_key;

/* Version 2 added the build; files of version 1 name none, and are taken
 * for another build's. */
#define KEY_MAGIC "falcon stability 2"
#define KEY_MAGIC_NO_BUILD "falcon stability 1"

/* Where a stream is: the next segment to run and the accumulators that are
 * not in the stream itself. */
typedef struct position {
    int64_t t, seg;
    int ci, pad;
    long double cnum, cden;
} position;

/* ---- stab-stream.c ---- */

/* The wall clock of the study's timings (omp_get_wtime). */
double stab_seconds(void);
/* Runs stream idx: every curve of it to its length, from its saved state
 * with --resume. Past the MPFR range its state is saved every P->every
 * seconds. 0, or -1 (no memory, or a save failed). */
int stab_run_stream(const params *P, stream *s, int idx, uint64_t seed);

/* ---- stab-resume.c: saved streams (see the file's head) ---- */

/* This build's identity, as results and states record it. */
void stab_build_identity(char *id, size_t len);
/* Is a saved key not this run's? Then why is in buf. */
int stab_key_mismatch(const run_key *key, const run_key *want, char *buf, size_t len);
void stab_make_key(const params *P, int index, run_key *k);
/* OUT/sub/NNNsuffix, or OUT/sub/cKK/NNN for curve k >= 0. */
void stab_path_of(const params *P, char *path, size_t len, const char *sub, int idx, const char *suffix, int k);
/* The same curves, in the same order, with the same lengths. */
int stab_same_stream(const stream *a, const stream *b);
/* A result's counts index its arrays within bounds. */
int stab_result_ok(const stream *s);
/* Save stream idx's whole state as one output transaction: 0 or -1. */
int stab_save_state(const params *P, int idx, const stream *s, const position *pos, const ldref *ld);
/* Continue stream idx from its saved state: 1 done, 0 no usable state (a
 * message says why when one exists), -1 no memory. */
int stab_load_state(const params *P, int idx, stream *s, position *pos, ldref *ld);
/* Remove stream idx's resume state (the state file first). */
void stab_drop_state(const params *P, int idx, int ncurve);
/* Remove the temporaries a killed process left of stream idx only. */
void stab_drop_temps(const params *P, int idx);
/* A finished stream's results, atomically: 0 or -1 with a message. */
int stab_save_result(const params *P, int idx, const stream *s);
/* Read a result file: its key and stream. 0, or -1 with why. */
int stab_load_result(const char *path, run_key *key, stream *s, const char **why);

/* ---- stab-report.c: the report set and the summary ---- */

/* precision_variant_decay_backend_form: a curve's file name. */
void stab_curve_name(const stream *s, const curve *k, char *buf, size_t len);
/* Why a kernel backend of the gate's table has no curves, or NULL. */
const char *stab_skip_reason(const params *P, falcon_backend be);
/* Prints the summary and writes the report set from every stream's
 * results: 0 done, 1 a stream failed, 2 the reports were not written. */
int stab_report(const params *P, const stream *ss, int nomem, double secs);

#endif
