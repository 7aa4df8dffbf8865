/* Small helpers of the study: the log-log fit, the checkpoint grid, files. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "study.h"
#include "falcon_io.h"

loglog_fit study_fit(const double *T, const double *err, int count, double Tx)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int k = 0;
    for (int i = 0; i < count; i++) {
        if (!(err[i] > 0) || !isfinite(err[i])) continue;
        const double x = log(T[i]), y = log(err[i]);
        sx += x, sy += y, sxx += x * x, sxy += x * y, k++;
    }
    loglog_fit f = {NAN, NAN, NAN, k};
    const double det = k * sxx - sx * sx;
    if (k < 2 || !(det > 0)) return f;
    f.p = (k * sxy - sx * sy) / det;
    const double logc = (sy - f.p * sx) / k;
    f.c = exp(logc);
    f.at = exp(logc + f.p * log(Tx));
    return f;
}

int study_grid(int64_t lo, int64_t hi, int64_t *out, int cap)
{
    static const int mant[] = {1, 2, 5};
    int k = 0;
    for (int64_t dec = 1; dec <= hi && k < cap; dec *= 10)
        for (int i = 0; i < 3 && k < cap; i++) {
            const int64_t t = mant[i] * dec;
            if (t >= lo && t < hi) out[k++] = t;
        }
    if (k < cap && hi >= lo) out[k++] = hi;
    return k;
}

/* Create a directory and its missing parents; each that exists must be a
 * directory (a regular file in the way fails here, before the study runs). */
int study_mkdir(const char *path)
{
    char buf[4096];
    if (!*path) {
        fprintf(stderr, "falcon: error: --out: the path is empty\n");
        return -1;
    }
    if (strlen(path) >= sizeof buf) {
        fprintf(stderr, "falcon: error: --out: the path is longer than %zu bytes\n", sizeof buf - 1);
        return -1;
    }
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        const char c = *p;
        if (c != '/' && c) continue;
        *p = 0;
        struct stat st;
        if (mkdir(buf, 0777) && errno != EEXIST) {
            fprintf(stderr, "falcon: error: cannot create directory %s: %s\n", buf, strerror(errno));
            return -1;
        }
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "falcon: error: cannot create directory %s: %s\n", buf,
                    errno == 0 || !S_ISDIR(st.st_mode) ? "it exists and is not a directory" : strerror(errno));
            return -1;
        }
        if (!c) return 0;
        *p = c;
    }
}

/* The report set: one output transaction for the files a command writes
 * at its end (src/outputs.c), so that a failure or a signal before the
 * commit leaves every earlier report as it was, a symlink is followed and
 * a device refused, and the set changes as a whole. Streams keep their own
 * transactions (they are saved as they finish). */
static falcon_outputs *reports;
static struct {
    FILE *f;
    char path[4096];
    int slot; /* in reports: closed there too when the FILE is */
} open_files[8];

/* The sets' record: ROOT/.falcon-reports lists, a line each as
 * "KIND:NAME", the files of the last set each kind of command (its
 * study_reports_check's kind) wrote there, relative to ROOT. When a set is
 * committed, the files the old record gives to the same kind that the new
 * set does not write are removed: they are this command's own earlier
 * outputs (a curve of another profile), which the plots would otherwise
 * draw with the new ones. A file another kind's line names, or one the
 * record names without a kind (written before kinds were recorded), or
 * one the record does not name, is never removed: commands of different
 * kinds may share a folder. */
#define RECORD ".falcon-reports"
static char root[4096];
static char kind[32]; /* the set's kind: "stability", "learning", "bench-dat" */
static char *written; /* the set's files, relative, one a line */
static size_t written_len;

static void note_written(const char *path)
{
    const size_t r = strlen(root);
    if (!*root || strncmp(path, root, r) || path[r] != '/') return;
    const size_t add = strlen(path + r + 1) + 1;
    char *grown = realloc(written, written_len + add + 1);
    if (!grown) return;
    written = grown;
    memcpy(written + written_len, path + r + 1, add - 1);
    written[written_len + add - 1] = '\n';
    written_len += add;
    written[written_len] = '\0';
}

/* A recorded name that stays inside ROOT: relative, no "..", plain characters. */
static int recorded_name_ok(const char *e)
{
    if (!*e || *e == '/' || strstr(e, "..")) return 0;
    for (const char *c = e; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("._-=/+", *c))) return 0;
    return 1;
}

static int in_written(const char *e)
{
    const size_t n = strlen(e);
    for (const char *p = written; p && *p;) {
        const char *nl = strchr(p, '\n');
        if ((size_t)(nl - p) == n && !strncmp(p, e, n)) return 1;
        p = nl + 1;
    }
    return 0;
}

/* The next line of a record (*p advances past it), split at its first ':'
 * into kind and name, each copied and cut to its buffer: 1 for a line of a
 * kind, 0 for one without (or too long), -1 at the end. */
static int record_next(const char **p, char *k, size_t klen, char *e, size_t elen)
{
    if (!*p || !**p) return -1;
    const char *line = *p, *nl = strchr(line, '\n');
    const size_t n = nl ? (size_t)(nl - line) : strlen(line);
    *p = line + n + (nl != NULL);
    const char *colon = memchr(line, ':', n);
    const size_t kn = colon ? (size_t)(colon - line) : 0, en = colon ? n - kn - 1 : 0;
    if (!colon || kn >= klen || en >= elen) return 0;
    memcpy(k, line, kn), k[kn] = '\0';
    memcpy(e, colon + 1, en), e[en] = '\0';
    return 1;
}

/* Does the old record give name e to a kind other than this set's? */
static int other_kind_has(const char *old, const char *e)
{
    char k[sizeof kind], name[4096];
    for (int r; (r = record_next(&old, k, sizeof k, name, sizeof name)) >= 0;)
        if (r && strcmp(k, kind) && !strcmp(name, e)) return 1;
    return 0;
}

/* The new record: the old one's lines of other kinds whose files this set
 * does not write (still theirs), then this set's files. */
static void write_record(FILE *f, const char *old)
{
    char k[sizeof kind], e[4096];
    for (int r; (r = record_next(&old, k, sizeof k, e, sizeof e)) >= 0;)
        if (r && strcmp(k, kind) && recorded_name_ok(e) && !in_written(e)) fprintf(f, "%s:%s\n", k, e);
    for (const char *p = written; p && *p;) {
        const char *nl = strchr(p, '\n');
        fprintf(f, "%s:%.*s\n", kind, (int)(nl - p), p);
        p = nl + 1;
    }
}

/* After a commit: remove what the old record gives to this set's kind and
 * the new set lacks, unless another kind's line names it too. */
static void drop_stale(const char *old)
{
    char path[8300], k[sizeof kind], e[4096];
    struct stat st;
    const char *p = old;
    for (int r; (r = record_next(&p, k, sizeof k, e, sizeof e)) >= 0;) {
        if (!r || strcmp(k, kind) || !recorded_name_ok(e) || in_written(e) || other_kind_has(old, e)) continue;
        snprintf(path, sizeof path, "%s/%s", root, e);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) unlink(path);
    }
}

FILE *study_open(const char *dir, const char *name, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/%s", dir, name);
    note_written(path);
    int slot = -1;
    if ((!reports && falcon_outputs_begin(&reports)) || falcon_outputs_file(reports, name, path, &slot)) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        return NULL;
    }
    const int fd = dup(falcon_outputs_fd(reports, slot)); /* the transaction keeps its own to fsync */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "falcon: error: cannot write %s: %s\n", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    for (size_t i = 0; i < sizeof open_files / sizeof open_files[0]; i++)
        if (!open_files[i].f) {
            open_files[i].f = f;
            open_files[i].slot = slot;
            snprintf(open_files[i].path, sizeof open_files[i].path, "%s", path);
            break;
        }
    return f;
}

int study_reports_input(const char *what, const char *path)
{
    if ((!reports && falcon_outputs_begin(&reports)) || falcon_outputs_input(reports, what, path)) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        return -1;
    }
    return 0;
}

int study_reports_check(const char *dir, const char *set_kind, const char *const *names)
{
    falcon_outputs *tx;
    char path[4096];
    int slot, rc = 0;
    if (study_mkdir(dir) || falcon_outputs_begin(&tx)) return -1;
    snprintf(root, sizeof root, "%s", dir); /* the set's root and kind, for its record */
    snprintf(kind, sizeof kind, "%s", set_kind);
    for (int i = 0; names[i] && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (falcon_outputs_file(tx, names[i], path, &slot)) {
            fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
            rc = -1;
        }
    }
    falcon_outputs_abort(tx); /* only a check: the set is written at the end */
    return rc;
}

int study_close(FILE *f)
{
    const char *path = "a report";
    int slot = -1;
    for (size_t i = 0; i < sizeof open_files / sizeof open_files[0]; i++)
        if (open_files[i].f == f) {
            open_files[i].f = NULL;
            path = open_files[i].path;
            slot = open_files[i].slot;
        }
    const int bad = ferror(f);
    const int err = errno;
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "falcon: error: cannot write %s: %s\n", path, strerror(bad ? err : errno));
        return -1;
    }
    /* The transaction's own descriptor too: a set of a thousand files
     * would otherwise hold a thousand until the commit (ulimit -n). */
    if (slot >= 0 && falcon_outputs_close(reports, slot) != FALCON_OK) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        return -1;
    }
    return 0;
}

int study_reports_end(int ok)
{
    char path[4200], *old = NULL;
    int rc = 0;
    if (reports && ok && *root) { /* the record goes with the set */
        snprintf(path, sizeof path, "%s/" RECORD, root);
        FILE *rf = fopen(path, "r");
        if (rf) {
            old = calloc(1, 1 << 20);
            if (old) {
                old[fread(old, 1, (1 << 20) - 1, rf)] = '\0';
                char *end = strrchr(old, '\n'); /* a line cut by the limit is not read as a shorter name */
                if (end) end[1] = '\0';
                else *old = '\0';
            }
            fclose(rf);
        }
        FILE *f = study_open(root, RECORD, path, sizeof path);
        if (!f) ok = 0, rc = -1;
        else {
            write_record(f, old);
            if (study_close(f)) ok = 0, rc = -1;
        }
    }
    falcon_outputs *tx = reports;
    reports = NULL;
    if (tx && !ok) falcon_outputs_abort(tx);
    if (tx && ok && falcon_outputs_commit(tx)) {
        fprintf(stderr, "falcon: error: %s\n", falcon_last_error());
        rc = -1;
    } else if (tx && ok && old) {
        drop_stale(old);
    }
    free(old);
    free(written);
    written = NULL, written_len = 0, *root = '\0', *kind = '\0';
    return rc;
}

void study_json_num(FILE *f, double x)
{
    if (isfinite(x)) fprintf(f, "%.6g", x);
    else fputs("null", f);
}

int study_parse_profile(const char *s)
{
    if (!strcmp(s, "quick")) return 0;
    if (!strcmp(s, "full")) return 1;
    fprintf(stderr, "falcon: error: --profile %s: must be quick or full\n", s);
    return -1;
}

int study_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    const double x = strtod(s, &end); /* accepts 1e6 */
    if (end == s || *end || !(x >= (double)lo && x <= (double)hi) || x != floor(x)) {
        fprintf(stderr, "falcon: error: %s %s: must be an integer in [%lld, %lld]\n", opt, s, (long long)lo,
                (long long)hi);
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

int study_int_option(const opt_scan *sc, int id, const study_int_opt *rows, int count)
{
    for (int k = 0; k < count; k++)
        if (rows[k].id == id) {
            char opt[64];
            snprintf(opt, sizeof opt, "--%s", sc->opt->name);
            return study_parse_i64(opt, sc->value, rows[k].lo, rows[k].hi, rows[k].to) ? -1 : 1;
        }
    return 0;
}

void study_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

uint64_t study_fnv1a(uint64_t h, const void *x, size_t n)
{
    const unsigned char *c = x;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211u;
    return h;
}
