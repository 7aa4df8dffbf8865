/*
 * The sink every file of a case set goes through (grade/set.h): written
 * under a new directory by the export, or compared byte for byte with an
 * existing set by `falcon check`, in memory (no temporary file).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "set.h"
#include "../util/paths.h"
#include "../util/signals.h"
#include "../util/files.h"

struct set_sink {
    char *root, *args;
    int verify;
    char **seen; /* verify: every rel given so far */
    size_t nseen, cap;
};

set_sink *sink_open(const char *root, int verify, const char *args)
{
    set_sink *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->root = strdup(root);
    s->args = strdup(args ? args : "");
    s->verify = verify;
    if (!s->root || !s->args) {
        sink_close(s);
        return NULL;
    }
    return s;
}

void sink_close(set_sink *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->nseen; i++) free(s->seen[i]);
    free(s->seen);
    free(s->root);
    free(s->args);
    free(s);
}

/* root/rel into buf; 0, or 2 when it does not fit. */
static int full_path(const set_sink *s, const char *rel, char *buf, size_t size)
{
    const int n = snprintf(buf, size, "%s%s%s", s->root, *rel ? "/" : "", rel);
    return n >= 0 && (size_t)n < size ? 0 : cli_error("'%s/%s': path too long", s->root, rel);
}

/* The case a path of the set belongs to (its first part), for messages;
 * "check" for the set's own files. */
static void case_of(const char *rel, char *buf, size_t size)
{
    const char *slash = strchr(rel, '/');
    if (!slash) snprintf(buf, size, "check");
    else snprintf(buf, size, "%.*s", (int)(slash - rel), rel);
}

/* The one line a verification failure prints: `how` says what is wrong. */
static int refuse(const set_sink *s, const char *rel, const char *how)
{
    char name[256], path[4400];
    case_of(rel, name, sizeof name);
    snprintf(path, sizeof path, "%s%s%s", s->root, *rel ? "/" : "", rel);
    return cli_error("%s: '%s': %s `falcon cases export %s` writes (an edited set, or another version's): "
                     "re-export it, or pass --trust-set to judge it as it is", name, path, how, s->args);
}

static int remember(set_sink *s, const char *rel)
{
    if (s->nseen == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 64;
        char **p = realloc(s->seen, cap * sizeof *p);
        if (!p) return cli_error("out of memory");
        s->seen = p;
        s->cap = cap;
    }
    if (!(s->seen[s->nseen] = strdup(rel))) return cli_error("out of memory");
    s->nseen++;
    return 0;
}

int sink_dir(set_sink *s, const char *rel)
{
    char path[4400];
    if (full_path(s, rel, path, sizeof path)) return 2;
    if (!s->verify) return mkdir(path, 0777) ? cli_error("'%s': cannot create it: %s", path, strerror(errno)) : 0;
    struct stat st;
    if (lstat(path, &st)) return refuse(s, rel, "missing: a directory that");
    if (!S_ISDIR(st.st_mode)) return refuse(s, rel, "not a directory, but a directory in what");
    return remember(s, rel);
}

/* Verify mode: the regular file `path` holds exactly `len` bytes equal to
 * `bytes`. Read in pieces, compared as they come. */
static int same_bytes(set_sink *s, const char *rel, const char *path, const char *bytes, size_t len)
{
    struct stat st;
    if (lstat(path, &st)) return refuse(s, rel, "missing: a file that");
    if (!S_ISREG(st.st_mode)) return refuse(s, rel, "not a regular file, but a file in what");
    if ((size_t)st.st_size != len) return refuse(s, rel, "differs from what");
    const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return cli_error("'%s': cannot open it: %s", path, strerror(errno));
    char piece[1 << 16];
    size_t at = 0;
    int same = 1;
    while (same && at < len) {
        const ssize_t n = read(fd, piece, len - at < sizeof piece ? len - at : sizeof piece);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) same = 0; /* shorter than it said */
        else same = !memcmp(piece, bytes + at, (size_t)n), at += (size_t)n;
    }
    if (same && read(fd, piece, 1) != 0) same = 0; /* it grew meanwhile */
    close(fd);
    return same ? 0 : refuse(s, rel, "differs from what");
}

int sink_file(set_sink *s, const char *rel, const void *bytes, size_t len)
{
    char path[4400];
    if (full_path(s, rel, path, sizeof path)) return 2;
    if (s->verify) return same_bytes(s, rel, path, bytes, len) || remember(s, rel) ? 2 : 0;
    const void *parts[1] = {bytes};
    const size_t sizes[1] = {len};
    /* Not synced one by one: sink_sync syncs the whole set once. */
    const int err = falcon_file_write_new(path, parts, sizes, 1, 0);
    if (!err) return 0;
    return cli_error("'%s': cannot %s it: %s", path, err < 0 ? "create" : "write", strerror(err < 0 ? -err : err));
}

int sink_npy(set_sink *s, const char *rel, const falcon_array *a)
{
    char *bytes;
    size_t len;
    if (falcon_npy_encode(a, &bytes, &len)) return cli_error("'%s': %s", rel, falcon_last_error());
    const int rc = sink_file(s, rel, bytes, len);
    free(bytes);
    return rc;
}

int sink_json(set_sink *s, const char *rel, json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    if (!text) return cli_error("'%s': out of memory", rel);
    const size_t len = strlen(text);
    char *withnl = realloc(text, len + 2);
    if (!withnl) {
        free(text);
        return cli_error("'%s': out of memory", rel);
    }
    withnl[len] = '\n';
    const int rc = sink_file(s, rel, withnl, len + 1);
    free(withnl);
    return rc;
}

typedef struct checkpoint_ctx {
    set_sink *s;
    const char *dir;
} checkpoint_ctx;

static int checkpoint_file(void *ctx, const char *name, const void *bytes, size_t len)
{
    const checkpoint_ctx *c = ctx;
    char rel[4400];
    snprintf(rel, sizeof rel, "%s/%s", c->dir, name);
    return sink_file(c->s, rel, bytes, len);
}

int sink_checkpoint(set_sink *s, const char *rel, const falcon_state *state)
{
    if (sink_dir(s, rel)) return 2;
    checkpoint_ctx ctx = {s, rel};
    const int rc = falcon_checkpoint_encode(state, checkpoint_file, &ctx);
    if (rc < 0) return cli_error("'%s': %s", rel, falcon_last_error());
    return rc ? 2 : sink_only(s, rel);
}

/* Whether rel was given, the latest first (a case's own files are). */
static int seen(const set_sink *s, const char *rel)
{
    for (size_t i = s->nseen; i-- > 0;)
        if (!strcmp(s->seen[i], rel)) return 1;
    return 0;
}

int sink_only(set_sink *s, const char *rel)
{
    if (!s->verify) return 0;
    char path[4400], entry[4400];
    if (full_path(s, rel, path, sizeof path)) return 2;
    DIR *d = opendir(path);
    if (!d) return cli_error("'%s': cannot open it as a directory: %s", path, strerror(errno));
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(entry, sizeof entry, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        if (!seen(s, entry)) rc = refuse(s, entry, "an extra file: it is not in what");
    }
    closedir(d);
    return rc;
}

int sink_sync(set_sink *s)
{
    if (s->verify) return 0;
    const int fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = fd < 0 || syncfs(fd) ? errno : 0;
    if (fd >= 0) close(fd);
    return err ? cli_error("'%s': cannot sync the set to disk: %s", s->root, strerror(err)) : 0;
}
