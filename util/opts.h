/*
 * The tools' one option scanner and their one error line.
 *
 * Every command (falcon run, verify, compare, stability, cases export,
 * check; falcon-study's stability, merge and bench-dat) reads its arguments
 * through opt_next, so that all take the same syntax and say the same words
 * about it:
 *   --name VALUE, --name=VALUE, --flag, -h (as --help), and positional
 *   arguments (a word not starting with '-', or "-" alone);
 *   "unknown option '--x' (see CMD --help)", "--x needs a value (see CMD
 *   --help)", "--x takes no value", "unexpected argument 'x' (see CMD
 *   --help)", and with OPT_ONCE "--x given twice".
 * Checking a value (a number, a name, a range) stays the command's: its
 * words are its own.
 *
 * It sits with the tools, above the library (it uses none of it): the CLI,
 * the gate's `falcon verify`, the grading layer (also a shared library),
 * the benchmark comparison and the study link util/opts.o without one
 * another.
 */
#ifndef FALCON_UTIL_OPTS_H
#define FALCON_UTIL_OPTS_H

#include <stdio.h>

/* Exit status of every failure a command reports (bad arguments, bad or
 * unreadable input files, a failed run, an unwritable output). */
#define CLI_FAIL 2

/* Print "falcon: error: <message>" as one line on stderr; returns CLI_FAIL. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Where cli_error prints (NULL: stderr); the fuzzing harness silences it. */
void cli_set_error_stream(FILE *f);
/* Whether a progress line is open on stderr (cli_error ends it first). */
void cli_progress_line(int open);

/* One option of a command; a table of them ends with {NULL}. */
typedef struct opt_def {
    const char *name; /* without the dashes */
    int id;           /* what opt_next returns for it: > 0 */
    int takes_value;  /* 0: a flag */
} opt_def;

/* opt_begin's flags. */
enum {
    OPT_POSITIONALS = 1, /* positional arguments are taken (else each is an error) */
    OPT_ONCE = 2         /* an option given twice is an error */
};

enum {
    OPT_END = 0,         /* no argument left */
    OPT_POSITIONAL = -1, /* a positional argument, in value */
    OPT_ERROR = -2       /* reported with cli_error */
};

typedef struct opt_scan {
    int argc;
    char **argv;
    int next;             /* argv index of the next argument (argv[0] is the command) */
    const char *cmd;      /* "falcon verify": the messages' "(see CMD --help)" */
    const opt_def *defs;
    int flags;            /* OPT_POSITIONALS, OPT_ONCE */
    unsigned long long seen; /* bit k: defs[k] was given (the first 64 rows) */
    const opt_def *opt;   /* the option just read */
    const char *value;    /* its value (NULL for a flag), or the positional argument */
} opt_scan;

/* Start scanning argv[1..argc-1]; flags: OPT_POSITIONALS, OPT_ONCE or 0. */
void opt_begin(opt_scan *s, int argc, char **argv, const char *cmd, const opt_def *defs, int flags);
/* The next argument: an option's id (s->opt, s->value set), OPT_POSITIONAL,
 * OPT_END, or OPT_ERROR after its message. */
int opt_next(opt_scan *s);
/* Whether the option with this id was given. */
int opt_given(const opt_scan *s, int id);

#endif
