/*
 * Checkpoints: the whole carried state of a falcon_state in a directory.
 *
 * Format (version 2). The directory holds a text manifest and seven .npy
 * files, all float64 little-endian C order (written by falcon_npy_write):
 *
 *   falcon-checkpoint.txt   exactly these lines, in this order:
 *                             format falcon-checkpoint 2
 *                             heads H
 *                             n N
 *                             m M
 *                             window W
 *   S.npy         [H, M, N]     the memory of each head
 *   prev_key.npy  [H, N]        the previous raw key (prefix alignment)
 *   has_prev.npy  [H]           1 where prev_key is set, else 0
 *   hist_k.npy    [H, W-1, N]   the last W-1 raw example keys, oldest first
 *   hist_v.npy    [H, W-1, M]   their values
 *   hist_len.npy  [H]           how many history rows are in use, an integer in [0, W-1]
 *   scale.npy     [H]           the lazy decay factor of S, in [2^-8, 1] (how the fp32
 *                               recurrent form continues S bit for bit: docs/math.md section 8)
 *
 * Heads are numbered b*Hb + h for a [B][T][Hb][D] batch. Rows of prev_key
 * and of the history that are not in use are saved as they are and must
 * still be finite. Loading checks every array against the manifest (shape,
 * finite values, has_prev in {0, 1}, hist_len an integer in range); it also
 * takes float32 arrays, converted exactly. Version 1 (the same without
 * scale.npy) still loads, with every scale 1.
 *
 * Saving is atomic (src/outputs.c): the arrays and the manifest are
 * written into a new directory next to the target and fsynced, then the new
 * directory is swapped with the old one (renameat2 RENAME_EXCHANGE) or
 * renamed into place, under an exclusive flock on the parent directory, and
 * the old one is removed. A failure at any point leaves the old checkpoint
 * as it was. An existing target must be a directory holding only the files
 * above (an earlier checkpoint) or nothing. Loading holds the same lock
 * shared, so it never reads parts of two checkpoints, and checks each
 * array's shape from its header before reading its data.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "../kernels/framework/head.h"

#define MANIFEST "falcon-checkpoint.txt"
#define FORMAT_LINE "format falcon-checkpoint 2"
#define FORMAT_LINE_V1 "format falcon-checkpoint 1"
enum { MANIFEST_MAX = 4096, NUM_ARRAYS = 7, NUM_ARRAYS_V1 = 6 };

typedef enum { KIND_REAL, KIND_FLAG, KIND_COUNT, KIND_SCALE } entry_kind;

/* One array of the layout: its file, shape and where it lives in the state. */
typedef struct entry {
    const char *file;
    entry_kind kind;
    int ndim;
    int64_t shape[3];
    double *real;     /* KIND_REAL, KIND_SCALE */
    uint8_t *flag;    /* KIND_FLAG: has_prev */
    int64_t *count;   /* KIND_COUNT: hist_len */
} entry;

/* The layout of a state, shared by save and load so that they cannot disagree. */
static void layout(const falcon_state *s, entry e[NUM_ARRAYS])
{
    const int64_t H = s->heads;
    const entry table[NUM_ARRAYS] = {
        {"S.npy", KIND_REAL, 3, {H, s->m, s->n}, s->S, NULL, NULL},
        {"prev_key.npy", KIND_REAL, 2, {H, s->n, 0}, s->prev_key, NULL, NULL},
        {"has_prev.npy", KIND_FLAG, 1, {H, 0, 0}, NULL, s->has_prev, NULL},
        {"hist_k.npy", KIND_REAL, 3, {H, s->keep, s->n}, s->hist_k, NULL, NULL},
        {"hist_v.npy", KIND_REAL, 3, {H, s->keep, s->m}, s->hist_v, NULL, NULL},
        {"hist_len.npy", KIND_COUNT, 1, {H, 0, 0}, NULL, NULL, s->hist_len},
        {"scale.npy", KIND_SCALE, 1, {H, 0, 0}, s->scale, NULL, NULL},
    };
    memcpy(e, table, sizeof table);
}

static int64_t entry_count(const entry *e)
{
    int64_t c = 1;
    for (int i = 0; i < e->ndim; i++) c *= e->shape[i];
    return c;
}

/* "dir/file" in a new buffer (NULL when out of memory). */
static char *join(const char *dir, const char *file)
{
    const size_t size = strlen(dir) + strlen(file) + 2;
    char *p = malloc(size);
    if (p) snprintf(p, size, "%s/%s", dir, file);
    return p;
}

/* The rule id of the failure just recorded, into buf (32 bytes hold any):
 * a failure re-stated with the checkpoint's name keeps its rule. */
static const char *rule_of_last(char *buf, size_t size)
{
    snprintf(buf, size, "%s", falcon_last_error_info()->rule);
    return buf;
}

/* Re-state the failure just recorded with the file it concerns in front
 * (once: an .npy reader's message that starts with the same quoted path
 * keeps only what follows it). */
static falcon_status in_file(falcon_status s, const char *path)
{
    char detail[512], rule[32];
    const char *d = falcon_last_error();
    const size_t len = strlen(path);
    if (d[0] == '\'' && !strncmp(d + 1, path, len) && !strncmp(d + 1 + len, "': ", 3)) d += len + 4;
    snprintf(detail, sizeof detail, "%s", d);
    return falcon_fail_in(path, rule_of_last(rule, sizeof rule), s, "checkpoint '%s': %s", path, detail);
}

/* ---- save ---- */

/* One array of the layout as the array saved (flags and counts go out as
 * float64, converted into *tmp, which the caller frees). */
static falcon_status entry_array(const entry *e, falcon_array *a, double **tmp)
{
    *a = (falcon_array){FALCON_DTYPE_F64, e->ndim, {0}, entry_count(e), e->real};
    memcpy(a->shape, e->shape, sizeof e->shape);
    *tmp = NULL;
    if (e->kind == KIND_FLAG || e->kind == KIND_COUNT) {
        *tmp = malloc(sizeof(double) * (size_t)(a->count + 1));
        if (!*tmp) return falcon_fail_in(e->file, "out-of-memory",
                                         FALCON_E_NOMEM, "checkpoint '%s': out of memory", e->file);
        for (int64_t i = 0; i < a->count; i++) (*tmp)[i] = e->kind == KIND_FLAG ? e->flag[i] : (double)e->count[i];
        a->data = *tmp;
    }
    return FALCON_OK;
}

static falcon_status save_entry(const entry *e, const char *path)
{
    falcon_array a;
    double *tmp;
    falcon_status s = entry_array(e, &a, &tmp);
    if (!s) s = falcon_npy_write_new(path, &a);
    free(tmp);
    return s;
}

/* The manifest's text into buf (256 bytes hold it); its length. */
static size_t manifest_text(const falcon_state *s, char *buf, size_t size)
{
    return (size_t)snprintf(buf, size, FORMAT_LINE "\nheads %lld\nn %lld\nm %lld\nwindow %lld\n", (long long)s->heads,
                            (long long)s->n, (long long)s->m, (long long)s->window);
}

static falcon_status save_manifest(const falcon_state *s, const char *path)
{
    char text[256];
    const void *parts[1] = {text};
    const size_t sizes[1] = {manifest_text(s, text, sizeof text)};
    return falcon_write_new_file(path, parts, sizes, 1);
}

/* internal.h: the same files as bytes, through the same layout and
 * conversions as a save, so the two cannot disagree. */
int falcon_checkpoint_encode(const falcon_state *state, falcon_checkpoint_file_fn fn, void *ctx)
{
    entry e[NUM_ARRAYS];
    layout(state, e);
    int rc = 0;
    for (int i = 0; !rc && i < NUM_ARRAYS; i++) {
        falcon_array a;
        double *tmp;
        char *bytes = NULL;
        size_t len = 0;
        rc = entry_array(&e[i], &a, &tmp) || falcon_npy_encode(&a, &bytes, &len) ? -1 : fn(ctx, e[i].file, bytes, len);
        free(tmp);
        free(bytes);
    }
    char text[256];
    return rc ? rc : fn(ctx, MANIFEST, text, manifest_text(state, text, sizeof text));
}

/* Paths of the arrays, then the manifest's; *paths[i] NULL if out of memory. */
static int make_paths(const char *dir, const entry e[NUM_ARRAYS], char *paths[NUM_ARRAYS + 1])
{
    int ok = 1;
    for (int i = 0; i <= NUM_ARRAYS; i++) ok &= (paths[i] = join(dir, i < NUM_ARRAYS ? e[i].file : MANIFEST)) != NULL;
    return ok;
}

static void free_paths(char *paths[NUM_ARRAYS + 1])
{
    for (int i = 0; i <= NUM_ARRAYS; i++) free(paths[i]);
}

/* The files of a checkpoint directory: the only names a directory that
 * --checkpoint-out replaces may hold. */
static const char *const checkpoint_names[] = {"S.npy",        "prev_key.npy", "has_prev.npy", "hist_k.npy",
                                               "hist_v.npy",   "hist_len.npy", "scale.npy",    MANIFEST,
                                               NULL};

falcon_status falcon_outputs_checkpoint(falcon_outputs *tx, const char *what, const char *dir, int *slot)
{
    if (!tx || !what || !dir || !slot) return falcon_fail(FALCON_E_ARGUMENT, "outputs_checkpoint: NULL argument");
    falcon_status s = falcon_outputs_dir(tx, what, dir, checkpoint_names, slot);
    return s ? in_file(s, dir) : FALCON_OK;
}

falcon_status falcon_checkpoint_save_to(falcon_outputs *tx, int slot, const falcon_state *state)
{
    const char *dir = falcon_outputs_temp(tx, slot), *name = falcon_outputs_path(tx, slot);
    if (!state || !dir) return falcon_fail(FALCON_E_ARGUMENT, "checkpoint_save_to: NULL %s", state ? "slot" : "state");
    entry e[NUM_ARRAYS];
    char *paths[NUM_ARRAYS + 1];
    layout(state, e);
    falcon_status s = make_paths(dir, e, paths) ? FALCON_OK
                                               : falcon_fail_in(name, "out-of-memory",
                                                                FALCON_E_NOMEM, "checkpoint '%s': out of memory", name);
    for (int i = 0; !s && i < NUM_ARRAYS; i++) s = save_entry(&e[i], paths[i]);
    if (!s) s = save_manifest(state, paths[NUM_ARRAYS]);
    free_paths(paths);
    /* Messages name the checkpoint, not its temporary directory. */
    if (s) {
        char detail[512], rule[32];
        const char *d = falcon_last_error(), *p = strstr(d, ": cannot ");
        snprintf(detail, sizeof detail, "%s", p ? p + 2 : d);
        s = falcon_fail_in(name, rule_of_last(rule, sizeof rule), s, "checkpoint '%s': %s", name, detail);
    }
    return s;
}

falcon_status falcon_checkpoint_save(const falcon_state *state, const char *dir)
{
    if (!state || !dir) return falcon_fail(FALCON_E_ARGUMENT, "checkpoint_save: NULL %s", state ? "dir" : "state");
    falcon_outputs *tx;
    int slot;
    falcon_status s = falcon_outputs_begin(&tx);
    if (s) return s;
    if ((s = falcon_outputs_checkpoint(tx, "checkpoint", dir, &slot)) || (s = falcon_checkpoint_save_to(tx, slot, state))) {
        falcon_outputs_abort(tx);
        return s;
    }
    return falcon_outputs_commit(tx);
}

/* ---- load ---- */

typedef struct manifest {
    int64_t heads, n, m, window;
    int version;
} manifest;

static falcon_status read_manifest_text(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f && errno == ENOENT)
        return falcon_fail_in(path, "checkpoint-format",
                              FALCON_E_FORMAT, "checkpoint '%s': missing: not a falcon checkpoint (or its save failed)",
                              path);
    if (!f) return falcon_fail_in(path, "io",
                                  FALCON_E_IO, "checkpoint '%s': cannot open it: %s", path, strerror(errno));
    const size_t got = fread(buf, 1, size - 1, f);
    const int bad = ferror(f), more = !bad && fgetc(f) != EOF;
    fclose(f);
    if (bad) return falcon_fail_in(path, "io", FALCON_E_IO, "checkpoint '%s': cannot read it", path);
    if (more)
        return falcon_fail_in(path, "checkpoint-format", FALCON_E_FORMAT,
                              "checkpoint '%s': longer than %zu bytes: not a manifest", path, size - 1);
    buf[got] = '\0';
    return FALCON_OK;
}

/* One "key <integer>" line at *text; advances past its newline. */
static falcon_status parse_line(const char *path, int line, char **text, const char *key, int64_t *value)
{
    char *end = strchr(*text, '\n');
    if (end) *end = '\0';
    const size_t klen = strlen(key);
    char *num = *text + klen + 1, *stop = NULL;
    int ok = !strncmp(*text, key, klen) && (*text)[klen] == ' ' && *num >= '0' && *num <= '9';
    errno = 0;
    if (ok) *value = strtoll(num, &stop, 10);
    if (!ok || errno || *stop != '\0')
        return falcon_fail_in(path, "checkpoint-format",
                              FALCON_E_FORMAT, "checkpoint '%s': line %d is '%.40s', expected '%s <integer>'", path,
                              line, *text, key);
    *text = end ? end + 1 : *text + strlen(*text);
    return FALCON_OK;
}

static falcon_status parse_manifest(const char *path, char *text, manifest *m)
{
    const size_t flen = strlen(FORMAT_LINE); /* the same length as version 1's */
    m->version = !strncmp(text, FORMAT_LINE, flen) ? 2 : !strncmp(text, FORMAT_LINE_V1, flen) ? 1 : 0;
    if (!m->version || (text[flen] != '\n' && text[flen] != '\0'))
        return falcon_fail_in(path, "checkpoint-format",
                              FALCON_E_FORMAT, "checkpoint '%s': the first line must be '" FORMAT_LINE
                              "' or '" FORMAT_LINE_V1 "' (another version, or not a falcon checkpoint)", path);
    text += flen + (text[flen] == '\n');
    const char *keys[4] = {"heads", "n", "m", "window"};
    int64_t *values[4] = {&m->heads, &m->n, &m->m, &m->window};
    for (int i = 0; i < 4; i++) {
        falcon_status s = parse_line(path, i + 2, &text, keys[i], values[i]);
        if (s) return s;
    }
    if (*text != '\0')
        return falcon_fail_in(path, "checkpoint-format",
                              FALCON_E_FORMAT, "checkpoint '%s': unexpected text after the window line", path);
    return FALCON_OK;
}

/* The rule one value of an array breaks, or NULL. */
static const char *value_rule(const entry *e, double x, int64_t keep, char *buf, size_t size)
{
    if (!isfinite(x)) return "must be finite";
    if (e->kind == KIND_FLAG && x != 0 && x != 1) return "must be 0 or 1";
    if (e->kind == KIND_SCALE && !(x >= FALCON_LAZY_SCALE_MIN && x <= 1)) return "must be in [2^-8, 1]";
    if (e->kind == KIND_COUNT && (x != floor(x) || x < 0 || x > (double)keep)) {
        snprintf(buf, size, "must be an integer in [0, %lld] (window - 1)", (long long)keep);
        return buf;
    }
    return NULL;
}

static falcon_status check_shape(const entry *e, const falcon_array *a, const char *path, const manifest *m)
{
    int same = a->ndim == e->ndim;
    for (int i = 0; same && i < e->ndim; i++) same = a->shape[i] == e->shape[i];
    if (same) return FALCON_OK;
    char got[200], want[200];
    return falcon_fail_in(path, "checkpoint-format", FALCON_E_FORMAT,
                          "checkpoint '%s': shape %s but the manifest (heads %lld, n %lld, m %lld, window %lld) "
                          "needs %s", path, falcon_shape_repr(a->shape, a->ndim, got, sizeof got),
                          (long long)m->heads, (long long)m->n, (long long)m->m, (long long)m->window,
                          falcon_shape_repr(e->shape, e->ndim, want, sizeof want));
}

static falcon_status check_values(const entry *e, const falcon_array *a, const char *path, const manifest *m)
{
    const double *x = a->data;
    const int64_t per_head = a->count / m->heads;
    for (int64_t i = 0; i < a->count; i++) {
        char text[64];
        const char *rule = value_rule(e, x[i], m->window - 1, text, sizeof text);
        if (rule)
            return falcon_blame_at(falcon_fail(FALCON_E_FORMAT, "checkpoint '%s': element %lld (head %lld) = %g %s",
                                               path, (long long)i, (long long)(i / per_head), x[i], rule),
                                   path, "checkpoint-value", i, -1, i / per_head);
    }
    return FALCON_OK;
}

/* Read one array of the layout into the state: its shape is checked from
 * the header before any data is read, every value before any is stored. */
static falcon_status load_entry(const entry *e, const char *path, const manifest *m)
{
    falcon_npy_reader *r;
    falcon_array a;
    falcon_status s = falcon_npy_open(path, &r, &a);
    if (s) return in_file(s, path);
    if ((s = check_shape(e, &a, path, m))) {
        falcon_npy_close(r);
        return s;
    }
    a.data = malloc(sizeof(double) * (size_t)(a.count + 1));
    if (!a.data) s = falcon_fail_in(path, "out-of-memory", FALCON_E_NOMEM, "checkpoint '%s': out of memory", path);
    else if ((s = falcon_npy_read_range(r, 0, a.count, FALCON_DTYPE_F64, a.data))) s = in_file(s, path);
    falcon_npy_close(r);
    if (!s && !(s = check_values(e, &a, path, m))) {
        const double *x = a.data;
        for (int64_t i = 0; i < a.count; i++) {
            if (e->kind == KIND_REAL || e->kind == KIND_SCALE) e->real[i] = x[i];
            else if (e->kind == KIND_FLAG) e->flag[i] = (uint8_t)x[i];
            else e->count[i] = (int64_t)x[i];
        }
    }
    free(a.data);
    return s;
}

static falcon_status load_arrays(const char *dir, falcon_state *st, const manifest *m)
{
    entry e[NUM_ARRAYS];
    char *paths[NUM_ARRAYS + 1];
    layout(st, e);
    falcon_status s = make_paths(dir, e, paths) ? FALCON_OK
                                               : falcon_fail_in(dir, "out-of-memory",
                                                                FALCON_E_NOMEM, "checkpoint '%s': out of memory", dir);
    const int arrays = m->version == 1 ? NUM_ARRAYS_V1 : NUM_ARRAYS; /* version 1: every scale 1 */
    for (int i = 0; i < arrays && !s; i++) s = load_entry(&e[i], paths[i], m);
    free_paths(paths);
    return s;
}

/* A shared lock on the directory that holds the checkpoint (a saver takes it
 * exclusively while it swaps a checkpoint there): a load never reads half of
 * one checkpoint and half of the next. Best effort: -1 when it cannot be had. */
static int lock_parent_shared(const char *dir)
{
    char *real = realpath(dir, NULL);
    if (!real) return -1;
    char *slash = strrchr(real, '/');
    if (slash == real) slash[1] = '\0';
    else if (slash) *slash = '\0';
    const int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(real);
    while (fd >= 0 && flock(fd, LOCK_SH) != 0 && errno == EINTR) continue;
    return fd;
}

/* The checkpoint's directory must be one. */
static falcon_status dir_ok(const char *dir)
{
    struct stat st;
    const int err = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
    return err ? falcon_fail_in(dir, "io",
                                FALCON_E_IO, "checkpoint '%s': cannot open the directory: %s", dir, strerror(err))
               : FALCON_OK;
}

falcon_status falcon_checkpoint_shape(const char *dir, int64_t *heads, int64_t *n, int64_t *m, int64_t *window)
{
    if (!dir || !heads || !n || !m || !window) return falcon_fail(FALCON_E_ARGUMENT, "checkpoint_shape: NULL argument");
    if (dir_ok(dir)) return FALCON_E_IO;
    char text[MANIFEST_MAX];
    manifest mf;
    char *path = join(dir, MANIFEST);
    falcon_status s = !path ? falcon_fail_in(dir, "out-of-memory",
                                             FALCON_E_NOMEM, "checkpoint '%s': out of memory", dir)
                            : read_manifest_text(path, text, sizeof text);
    if (!s) s = parse_manifest(path, text, &mf);
    free(path);
    if (!s) *heads = mf.heads, *n = mf.n, *m = mf.m, *window = mf.window;
    return s;
}

falcon_status falcon_checkpoint_load(const char *dir, falcon_state **out)
{
    if (!dir || !out) return falcon_fail(FALCON_E_ARGUMENT, "checkpoint_load: NULL %s", dir ? "output" : "dir");
    if (dir_ok(dir)) return FALCON_E_IO;
    char text[MANIFEST_MAX];
    manifest m;
    falcon_state *state = NULL;
    const int lockfd = lock_parent_shared(dir);
    char *path = join(dir, MANIFEST);
    falcon_status s = !path ? falcon_fail_in(dir, "out-of-memory",
                                             FALCON_E_NOMEM, "checkpoint '%s': out of memory", dir)
                            : read_manifest_text(path, text, sizeof text);
    if (!s && !(s = parse_manifest(path, text, &m)) &&
        (s = falcon_state_create(m.heads, m.n, m.m, m.window, &state)))
        s = in_file(s == FALCON_E_NOMEM ? s : FALCON_E_FORMAT, path);
    if (!s && (s = load_arrays(dir, state, &m))) falcon_state_free(state);
    if (!s) state->memory_f32 = 0; /* any finite double: a run below fp64 checks it */
    if (lockfd >= 0) close(lockfd);
    free(path);
    if (!s) *out = state;
    return s;
}
