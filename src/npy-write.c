/* .npy writing: version 1.0 headers as numpy writes them, and data in
 * ranges into the temporary file of an output transaction (the format and
 * its rules: the top of npy-read.c). */
#include "npy-format.h"
#include "../util/files.h"

/*
 * Write `count` buffers to a new file `path` (it must not exist: it lies in
 * a transaction's temporary directory) and fsync it, unless `sync` is 0 (a
 * writer of many files that syncs them together: falcon cases export). On
 * failure the file is removed. Shared with checkpoint.c (its manifest).
 */
falcon_status falcon_write_new_file(const char *path, const void *const *parts, const size_t *sizes, int count)
{
    return falcon_write_new_file_sync(path, parts, sizes, count, 1);
}

falcon_status falcon_write_new_file_sync(const char *path, const void *const *parts, const size_t *sizes, int count,
                                         int sync)
{
    const int err = falcon_file_write_new(path, parts, sizes, count, sync);
    if (err < 0) return falcon_fail(FALCON_E_IO, "'%s': cannot create it: %s", path, strerror(-err));
    if (err > 0) return falcon_fail(FALCON_E_IO, "'%s': cannot write it: %s", path, strerror(err));
    return FALCON_OK;
}

/* ---- writing ---- */

/* Files up to this many bytes of data: offsets stay far from overflowing off_t. */
#define MAX_DATA_BYTES ((int64_t)1 << 60)

static falcon_status check_layout(const falcon_array *a)
{
    if (a->dtype != FALCON_DTYPE_F32 && a->dtype != FALCON_DTYPE_F64)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_write: unknown dtype %d", (int)a->dtype);
    if (a->ndim < 0 || a->ndim > FALCON_NPY_MAX_NDIM)
        return falcon_fail(FALCON_E_SHAPE, "npy_write: ndim = %d must be in [0, %d]", a->ndim,
                           FALCON_NPY_MAX_NDIM);
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] < 0)
            return falcon_fail(FALCON_E_SHAPE, "npy_write: shape[%d] = %lld must be >= 0", i,
                               (long long)a->shape[i]);
    const int64_t count = shape_count(a->shape, a->ndim);
    if (count < 0 || count != a->count || count > MAX_DATA_BYTES / 8)
        return falcon_fail(FALCON_E_SHAPE, "npy_write: count = %lld but the shape holds %lld elements",
                           (long long)a->count, (long long)count);
    return FALCON_OK;
}

/* A version 1.0 header, padded with spaces and a newline so that the data
 * starts at a multiple of 64 bytes. Returns its total length. */
static size_t format_header(const falcon_array *a, char *buf, size_t size)
{
    char shape[SHAPE_TEXT];
    int len = snprintf(buf + 10, size - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                       dtype_descr(a->dtype), falcon_shape_repr(a->shape, a->ndim, shape, sizeof shape));
    size_t total = 10 + (size_t)len + 1; /* + newline */
    total = (total + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN;
    memset(buf + 10 + len, ' ', total - 10 - (size_t)len - 1);
    buf[total - 1] = '\n';
    memcpy(buf, NPY_MAGIC "\x01\x00", PRELUDE_LEN);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    return total;
}

/* A writer fills the temporary file of one slot of a transaction: its own
 * (falcon_npy_create: committed by falcon_npy_commit) or the caller's
 * (falcon_npy_create_output: committed with the caller's other outputs). */
struct falcon_npy_writer {
    int fd;               /* the transaction's: never closed here */
    falcon_outputs *own;  /* the writer's own transaction, or NULL */
    const falcon_outputs *tx;
    int slot;
    char *path;
    falcon_dtype dtype;
    int64_t count, written, data_off; /* written: elements covered by the ranges so far */
    int64_t *done;        /* the ranges written, merged: [done[2i], done[2i+1]) ascending */
    int64_t ndone, cap;
};

void falcon_npy_abort(falcon_npy_writer *w)
{
    if (!w) return;
    falcon_outputs_abort(w->own);
    free(w->done);
    free(w->path);
    free(w);
}

/* Add [a, b) to the ranges written, merging what it touches, so that a
 * range written twice counts once: commit needs every element covered. */
static int cover(falcon_npy_writer *w, int64_t a, int64_t b)
{
    if (a >= b) return 0;
    int64_t lo = 0, hi = w->ndone; /* first range whose end reaches a */
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (w->done[2 * mid + 1] < a) lo = mid + 1;
        else hi = mid;
    }
    int64_t j = lo; /* ranges [lo, j) touch [a, b) and merge into it */
    while (j < w->ndone && w->done[2 * j] <= b) {
        w->written -= w->done[2 * j + 1] - w->done[2 * j];
        if (w->done[2 * j] < a) a = w->done[2 * j];
        if (w->done[2 * j + 1] > b) b = w->done[2 * j + 1];
        j++;
    }
    if (j == lo) { /* touches none: a new range at lo */
        if (w->ndone == w->cap) {
            const int64_t cap = w->cap ? 2 * w->cap : 8;
            int64_t *d = realloc(w->done, sizeof(int64_t) * 2 * (size_t)cap);
            if (!d) return -1;
            w->done = d;
            w->cap = cap;
        }
        memmove(w->done + 2 * (lo + 1), w->done + 2 * lo, sizeof(int64_t) * 2 * (size_t)(w->ndone - lo));
        w->ndone++;
    } else if (j > lo + 1) { /* several became one */
        memmove(w->done + 2 * (lo + 1), w->done + 2 * j, sizeof(int64_t) * 2 * (size_t)(w->ndone - j));
        w->ndone -= j - lo - 1;
    }
    w->done[2 * lo] = a;
    w->done[2 * lo + 1] = b;
    w->written += b - a;
    return 0;
}

const char *falcon_npy_writer_temp(const falcon_npy_writer *w) { return w ? falcon_outputs_temp(w->tx, w->slot) : NULL; }

static falcon_status start_writer(falcon_outputs *tx, int slot, const falcon_array *a, falcon_outputs *own,
                                  falcon_npy_writer **out)
{
    const char *path = falcon_outputs_path(tx, slot);
    if (!path || falcon_outputs_fd(tx, slot) < 0) {
        falcon_outputs_abort(own);
        return falcon_fail(FALCON_E_ARGUMENT, "npy writer: slot %d is not a file output of the transaction", slot);
    }
    falcon_npy_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        falcon_outputs_abort(own);
        return falcon_fail(FALCON_E_NOMEM, "'%s': out of memory", path ? path : "output");
    }
    w->fd = falcon_outputs_fd(tx, slot);
    w->own = own;
    w->tx = tx;
    w->slot = slot;
    char header[SHAPE_TEXT + 2 * HEADER_ALIGN + 64];
    const size_t len = format_header(a, header, sizeof header);
    if (w->fd < 0 || pwrite_full(w->fd, header, len, 0) != 0) {
        const falcon_status s = falcon_fail(FALCON_E_IO, "'%s': cannot write it: %s", w->path,
                                            w->fd < 0 ? "not a file output" : strerror(errno));
        falcon_npy_abort(w);
        return s;
    }
    w->dtype = a->dtype;
    w->count = a->count;
    w->data_off = (int64_t)len;
    *out = w;
    return FALCON_OK;
}

falcon_status falcon_npy_create_output(falcon_outputs *tx, int slot, const falcon_array *a, falcon_npy_writer **out)
{
    if (!tx || !a || !out)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_create_output: NULL %s", !tx ? "transaction" : !a ? "array" : "writer");
    falcon_status s = check_layout(a);
    return s ? s : start_writer(tx, slot, a, NULL, out);
}

falcon_status falcon_npy_create(const char *path, const falcon_array *a, falcon_npy_writer **out)
{
    if (!path || !a || !out)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_create: NULL %s", !path ? "path" : !a ? "array" : "writer");
    falcon_status s = check_layout(a);
    if (s) return s;
    falcon_outputs *tx;
    int slot;
    if ((s = falcon_outputs_begin(&tx))) return s;
    if ((s = falcon_outputs_file(tx, "output", path, &slot))) {
        falcon_outputs_abort(tx);
        return s;
    }
    return start_writer(tx, slot, a, tx, out);
}

falcon_status falcon_npy_write_range(falcon_npy_writer *w, int64_t first, int64_t count, const void *src)
{
    if (!w || (count > 0 && !src))
        return falcon_fail(FALCON_E_ARGUMENT, "npy_write_range: NULL %s", w ? "source" : "writer");
    if (first < 0 || count < 0 || first > w->count - count)
        return falcon_fail(FALCON_E_ARGUMENT, "'%s': elements [%lld, %lld + %lld) are outside its %lld", w->path,
                           (long long)first, (long long)first, (long long)count, (long long)w->count);
    const size_t size = dtype_size(w->dtype);
    if (pwrite_full(w->fd, src, (size_t)count * size, w->data_off + first * (int64_t)size) != 0)
        return falcon_fail(FALCON_E_IO, "'%s': cannot write it: %s", w->path, strerror(errno));
    if (cover(w, first, first + count)) return falcon_fail(FALCON_E_NOMEM, "'%s': out of memory", w->path);
    return FALCON_OK;
}

falcon_status falcon_npy_commit(falcon_npy_writer *w)
{
    if (!w) return falcon_fail(FALCON_E_ARGUMENT, "npy_commit: NULL writer");
    falcon_status s = FALCON_OK;
    if (w->written != w->count)
        s = falcon_fail(FALCON_E_ARGUMENT, "'%s': %lld of its %lld elements were written", w->path,
                        (long long)w->written, (long long)w->count);
    if (!s && w->own) {
        s = falcon_outputs_commit(w->own); /* frees it, also on failure */
        w->own = NULL;
    }
    falcon_npy_abort(w);
    return s;
}

falcon_status falcon_npy_write(const char *path, const falcon_array *a)
{
    if (!path || !a) return falcon_fail(FALCON_E_ARGUMENT, "npy_write: NULL %s", path ? "array" : "path");
    falcon_status s = check_layout(a);
    if (s) return s;
    if (a->count > 0 && !a->data) return falcon_fail(FALCON_E_ARGUMENT, "npy_write: data is NULL");
    falcon_npy_writer *w;
    if ((s = falcon_npy_create(path, a, &w))) return s;
    if ((s = falcon_npy_write_range(w, 0, a->count, a->data))) {
        falcon_npy_abort(w);
        return s;
    }
    return falcon_npy_commit(w);
}

/* internal.h */
falcon_status falcon_npy_encode(const falcon_array *a, char **bytes, size_t *len)
{
    falcon_status s = check_layout(a);
    if (s) return s;
    if (a->count > 0 && !a->data) return falcon_fail(FALCON_E_ARGUMENT, "npy_encode: data is NULL");
    char header[SHAPE_TEXT + 2 * HEADER_ALIGN + 64];
    const size_t hlen = format_header(a, header, sizeof header);
    const size_t dlen = (size_t)a->count * dtype_size(a->dtype);
    char *b = malloc(hlen + dlen + 1);
    if (!b) return falcon_fail(FALCON_E_NOMEM, "npy_encode: out of memory");
    memcpy(b, header, hlen);
    if (dlen) memcpy(b + hlen, a->data, dlen);
    *bytes = b;
    *len = hlen + dlen;
    return FALCON_OK;
}

falcon_status falcon_npy_write_new(const char *path, const falcon_array *a)
{
    falcon_status s = check_layout(a);
    if (s) return s;
    if (a->count > 0 && !a->data) return falcon_fail(FALCON_E_ARGUMENT, "npy_write: data is NULL");
    char header[SHAPE_TEXT + 2 * HEADER_ALIGN + 64];
    const size_t len = format_header(a, header, sizeof header);
    const void *parts[2] = {header, a->data};
    const size_t sizes[2] = {len, (size_t)a->count * dtype_size(a->dtype)};
    return falcon_write_new_file(path, parts, sizes, 2);
}

void falcon_array_free(falcon_array *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
