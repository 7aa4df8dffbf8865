/* The `falcon` command: what its parts share. Uses only the public API. */
#ifndef FALCON_CLI_H
#define FALCON_CLI_H

#include <stdint.h>
#include <stdio.h>
#include "falcon.h"
#include "../util/opts.h" /* CLI_FAIL, cli_error and the option scanner */

/* How `falcon run` reads and writes batched arrays (the kernels take
 * [B][T][H][D]; the others are converted at the command's boundary):
 * falcon [B,T,H,D], state [B,H,m,n]; fla: the same inputs, state
 * [B,H,K,V] (the transpose) and reads times a scale; bhtd: head-first
 * [B,H,T,D] inputs and reads, state as falcon. */
typedef enum { CLI_LAYOUT_FALCON, CLI_LAYOUT_FLA, CLI_LAYOUT_BHTD, CLI_NUM_LAYOUTS } cli_layout;

/* Everything `falcon run` was asked for, as plain values. */
typedef struct cli_run_args {
    int variant, form, backend, precision, align, phi; /* enum values; variant and form -1 until given */
    int64_t window, chunk;
    int threads, mpfr_bits;
    int64_t segment; /* steps per segment; 0: chosen from the sizes */
    double eps;
    int layout;   /* cli_layout */
    double scale; /* fla's read scale; 0: not given (1/sqrt(n)) */
    const char *q, *k, *v, *beta, *alpha, *gain; /* input files (alpha, gain: NULL if absent) */
    const char *out, *state_out, *ckpt_in, *ckpt_out;
    const char *dO, *dS; /* falcon grad: the cotangents (dS: NULL if absent) */
    int verbose, progress, help;
} cli_run_args;

/* The commands that share the run's options: `falcon grad` takes the
 * configuration and inputs of `falcon run`, the cotangents, and --out DIR,
 * without the streaming, layout and state-output options. */
typedef enum { CLI_CMD_RUN, CLI_CMD_GRAD } cli_command;

/* Parse the options after `run` (argv[0] is "run" and is skipped): 0, or
 * CLI_FAIL after reporting the error. It only parses: no file is opened.
 * With --help, args->help is set and the other checks are skipped. */
int cli_parse_run(int argc, char **argv, cli_run_args *args);
/* The same for `cmd` (argv[0] is its name). */
int cli_parse_args(int argc, char **argv, cli_command cmd, cli_run_args *args);
/* The library configuration the options describe. */
falcon_config cli_config(const cli_run_args *args);
void cli_print_run_help(FILE *f);
void cli_print_help(FILE *f, cli_command cmd);

/* `falcon run ...`: returns the exit status. */
int cli_run(int argc, char **argv);
/* `falcon grad ...` (cli/grad_cmd.c): returns the exit status. */
int cli_grad(int argc, char **argv);

#endif
