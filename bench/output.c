/*
 * falcon-bench --out=FILE: the results JSON written the way every output of
 * the suite is (the library's output transaction, src/outputs.c): FILE is
 * checked before anything runs (a directory, a device or a symlink to one
 * is refused; a symlink to a file is followed, never replaced), Google
 * Benchmark writes into a temporary beside it, and FILE is replaced only by
 * a run that measured at least one case. A failed, interrupted or empty run
 * (a filter that matches nothing) leaves FILE as it was and no temporary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "falcon.h"
#include "falcon_io.h"
#include "gbench-shim.h"

static falcon_outputs *tx;
static int slot = -1;
static char *flags[2];
static char **args; /* the argv handed on, until fb_out_end */

int fb_out_begin(int *argc, char ***argv)
{
    if (*argc == 2 && !strcmp((*argv)[1], "--version")) { /* before Google Benchmark takes the flags */
        printf("falcon-bench %s\n", falcon_version());
        exit(0);
    }
    const char *path = NULL;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        if (strncmp((*argv)[i], "--out=", 6) == 0) path = (*argv)[i] + 6;
        else (*argv)[out++] = (*argv)[i];
    }
    *argc = out;
    (*argv)[out] = NULL;
    if (!path) return 0;
    if (!path[0]) {
        fprintf(stderr, "falcon-bench: --out wants a file name\n");
        return 2;
    }
    falcon_outputs_clean_on_signals();
    if (falcon_outputs_begin(&tx) || falcon_outputs_file(tx, "--out", path, &slot)) {
        fprintf(stderr, "falcon-bench: %s\n", falcon_last_error());
        falcon_outputs_abort(tx);
        tx = NULL;
        return 2;
    }
    /* The temporary stays open until the commit, which syncs it through
     * this descriptor whoever wrote it. */
    const char *temp = falcon_outputs_temp(tx, slot);
    const size_t len = strlen(temp) + sizeof "--benchmark_out=";
    flags[0] = malloc(len);
    args = malloc(sizeof(char *) * (size_t)(out + 3));
    if (!flags[0] || !args) {
        fprintf(stderr, "falcon-bench: out of memory\n");
        return 2;
    }
    snprintf(flags[0], len, "--benchmark_out=%s", temp);
    flags[1] = "--benchmark_out_format=json";
    memcpy(args, *argv, sizeof(char *) * (size_t)out);
    args[out] = flags[0];
    args[out + 1] = flags[1];
    args[out + 2] = NULL;
    *argv = args;
    *argc = out + 2;
    return 0;
}

/* 1 when the file holds a measured case (Google Benchmark writes a
 * "run_type" per entry; --benchmark_list_tests writes none). */
static int has_a_run(const char *temp)
{
    static const char key[] = "\"run_type\"";
    enum { KEEP = sizeof key - 2 }; /* a key split across two reads */
    FILE *f = fopen(temp, "rb");
    if (!f) return 0;
    char buf[4096 + 1];
    size_t have = 0, got;
    int found = 0;
    while (!found && (got = fread(buf + have, 1, sizeof buf - 1 - have, f)) > 0) {
        have += got;
        buf[have] = 0;
        found = strstr(buf, key) != NULL;
        if (have > KEEP) {
            memmove(buf, buf + have - KEEP, KEEP);
            have = KEEP;
        }
    }
    fclose(f);
    return found;
}

int fb_out_end(size_t ran)
{
    if (!tx) return 0;
    const char *path = falcon_outputs_path(tx, slot);
    char *shown = strdup(path);
    int rc = 0;
    if (ran == 0 || !has_a_run(falcon_outputs_temp(tx, slot))) {
        fprintf(stderr, "falcon-bench: no case ran (does --benchmark_filter match any?): '%s' kept as it was\n",
                shown ? shown : path);
        falcon_outputs_abort(tx);
        rc = 1;
    } else if (falcon_outputs_commit(tx)) {
        fprintf(stderr, "falcon-bench: %s\n", falcon_last_error());
        rc = 2;
    } else {
        fprintf(stderr, "wrote %s\n", shown ? shown : "the results");
    }
    tx = NULL;
    free(shown);
    free(flags[0]);
    free(args);
    return rc;
}
