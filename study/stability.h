/*
 * The long-sequence stability study, the learning-quality curves and the
 * benchmark-to-gnuplot converter. Entry points for the `falcon` CLI
 * (argv[0] is the command's name, then its options); each returns the
 * process exit status: 0 done, 1 a run failed, 2 bad usage or I/O.
 *
 *   falcon stability [--profile quick|full] [--out DIR] [--backend NAME] ...
 *   falcon stability --learning [--profile quick|full] [--out DIR] ...
 *   falcon bench-dat BENCH.json [--compare COMPARE.dat] --out DIR
 */
#ifndef FALCON_STUDY_STABILITY_H
#define FALCON_STUDY_STABILITY_H

int falcon_stability_main(int argc, char **argv);
int falcon_benchdat_main(int argc, char **argv);

#endif
