/*
 * A case set as `falcon cases export` makes it, shared by the export and by
 * `falcon check`'s verification of a set (docs/cases.md, "A trusted set").
 *
 * Every file of a set goes through one sink: in write mode it is written
 * under a new directory; in verify mode its bytes are compared with the
 * file of that name in an existing set, in memory. The export and the
 * verification run the same code (grade_export_write), so a set verifies
 * exactly when it is, byte for byte, what the export with its recorded
 * arguments writes.
 */
#ifndef FALCON_GRADE_SET_H
#define FALCON_GRADE_SET_H

#include <jansson.h>
#include "grade.h"
#include "falcon_io.h"

/* The arguments of an export: all that decides the set's bytes. */
typedef struct export_opts {
    const char *dir;
    int profile;          /* 0 quick, 1 full */
    int variant, form, align, phi, decay; /* -1: all */
    grade_unit precision; /* the inputs' values are exact in it */
    grade_layout layout;
    double scale;         /* 0: the layout's default */
    int quiet;
    int progress;         /* a "case i of N" line on stderr (a terminal) */
    int grad;             /* --grad: cotangents, reference gradients and their thresholds too */
} export_opts;

typedef struct set_sink set_sink;

/* A sink over the directory `root`: verify 0 writes into it (a new, empty
 * directory), 1 compares with the set there; `args` (copied) is the
 * export's arguments as a command line, for the messages. NULL when out of
 * memory. */
set_sink *sink_open(const char *root, int verify, const char *args);
void sink_close(set_sink *s);

/* `rel` is a path inside root ("index.json", "<case>/q.npy"). Each returns
 * 0, or 2 after one cli_error line; in verify mode the line names the case
 * (rel's first part) and the file, and says how to re-export. */
int sink_dir(set_sink *s, const char *rel);
int sink_file(set_sink *s, const char *rel, const void *bytes, size_t len);
int sink_npy(set_sink *s, const char *rel, const falcon_array *a);
int sink_json(set_sink *s, const char *rel, json_t *j); /* indented, as the export writes it, and a newline */
int sink_checkpoint(set_sink *s, const char *rel, const falcon_state *state);
/* Write mode: every file written so far on disk, in one syncfs (a set of
 * thousands of files synced one by one took 25 s on a disk). Verify mode:
 * nothing to do. 0, or 2 after cli_error. */
int sink_sync(set_sink *s);
/* Verify mode: the directory rel ("" for root) holds nothing but what the
 * sink was given under it since it was opened. Write mode: nothing to do. */
int sink_only(set_sink *s, const char *rel);

/* Every file of the set `o` describes, through the sink (grade/export.c);
 * *written: the cases written, *skipped: configurations left out because
 * their values do not fit the inputs' format. 0, or 2 after cli_error. */
int grade_export_write(const export_opts *o, set_sink *sink, int *written, int *skipped);

/* The record of the export's arguments in index.json ("export"), and back;
 * the command line that repeats it, into buf. (grade/verify-set.c) */
json_t *grade_export_record(const export_opts *o);
void grade_export_command(const export_opts *o, char *buf, size_t size);

/* `falcon check`: the set in `dir`, whose index.json is `index`, must be
 * what the export its index records writes with this version. 0, or 2
 * after one cli_error line. */
int grade_verify_set(const char *dir, json_t *index);

#endif
