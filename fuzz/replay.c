/*
 * Replays inputs through a harness without libFuzzer: each argument is a
 * file, or a directory whose files are run in name order. Prints how many
 * ran; a broken invariant or a sanitizer report stops it (non-zero status).
 * `make fuzz-replay` runs the seed corpora and fuzz/regressions/ this way.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, size = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + size, 1, cap - size, f)) > 0;) {
        size += got;
        if (size == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory for %s\n", path);
        return -1;
    }
    /* libFuzzer hands over a buffer of exactly `size` bytes: so do we, so
     * that ASan sees a read past the end. */
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, size);
    free(buf);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(names, sizeof *names * (count + 1));
        if (!grown) break;
        names = grown;
        const size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[count] = malloc(len))) break;
        snprintf(names[count++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (count) qsort(names, count, sizeof *names, by_name);
    int ran = 0;
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            const int r = run_file(names[i]);
            if (r < 0) return -1;
            ran += r;
        }
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 1;
        }
        const int r = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        if (r < 0) return 1;
        total += r;
    }
    printf("%s: %d inputs replayed, no failure\n", argv[0], total);
    return 0;
}
