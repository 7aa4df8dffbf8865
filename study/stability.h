/*
 * The long-sequence stability study, the learning-quality curves and the
 * benchmark-to-gnuplot converter. Entry points for the `falcon` CLI and
 * build/falcon-study (argv[0] is the command's name, then its options);
 * each returns the process exit status: 0 done, 1 a run failed, 2 bad usage
 * or I/O. falcon_stability_main is the study's one entry point: `falcon
 * stability` and `falcon-study stability` both call it.
 *
 *   falcon stability [--profile quick|full] [--out DIR] [--backend NAME] ...
 *   falcon stability --learning [--profile quick|full] [--out DIR] ...
 *   falcon stability --grad [--profile quick|full] [--out DIR] ...
 *   falcon-study bench-dat BENCH.json --out DIR
 */
#ifndef FALCON_STUDY_STABILITY_H
#define FALCON_STUDY_STABILITY_H

#include <stddef.h>

int falcon_stability_main(int argc, char **argv);
/* falcon-study merge [--out DIR] SHARD_DIR... */
int falcon_stability_merge_main(int argc, char **argv);

/* One study, for launchers that run its streams elsewhere (study-mpi.c):
 * stab_open parses `stability` options (0 and *out set, or the exit status
 * with *out NULL: --help, bad usage); stab_order lists the streams by
 * decreasing estimated cost; stab_prepare reads a finished stream back with
 * --resume (1) or clears its old files (0); stab_run_one runs a stream
 * (save: write its result file); stab_bytes and stab_store carry a stream's
 * results between processes (rc: the run's status); stab_finish writes the
 * outputs and returns the exit status. */
typedef struct study_stab study_stab;
int stab_open(int argc, char **argv, int quiet, study_stab **out);
int stab_count(const study_stab *st);
void stab_order(const study_stab *st, int *order);
int stab_mine(const study_stab *st, int i);
int stab_prepare(study_stab *st, int i);
int stab_run_one(study_stab *st, int i, int save);
const void *stab_bytes(const study_stab *st, int i, size_t *len);
int stab_store(study_stab *st, int i, const void *bytes, size_t len, int rc);
int stab_finish(study_stab *st);
void stab_close(study_stab *st);
int falcon_benchdat_main(int argc, char **argv);

#endif
