/*
 * .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
 * "\x93NUMPY", a version byte pair, a little-endian header length (2 bytes
 * in 1.0, 4 bytes in 2.0/3.0), then a Python dict literal
 * {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), } padded with
 * spaces and a newline, then the raw data in C order.
 *
 * Reading takes versions 1.0, 2.0 and 3.0 from files or streams and is
 * strict: only '<f2', '<f4' and '<f8' in C order, a header that parses completely
 * (exactly the three keys), at most FALCON_NPY_MAX_NDIM dims whose element
 * count fits int64, and exactly the data the shape asks for (a short file
 * and trailing bytes are both errors, so a truncated or concatenated file
 * is never taken for a good one). Narrowing float64 to float32 refuses
 * finite values that would become infinite, so such a file is reported as
 * itself rather than as a non-finite input later.
 *
 * Files larger than memory: a reader (falcon_npy_open) checks all of the
 * above but the values when it opens, from the header and the file's size,
 * then reads ranges of elements with pread at computed offsets; a regular
 * file is never held in memory (a pipe is read whole at open, as it cannot
 * be read out of order). falcon_npy_read is a reader that reads everything.
 *
 * Writing produces version 1.0 headers padded to a multiple of 64 bytes, as
 * numpy does, into the temporary file of an output transaction
 * (src/outputs.c: the path is checked first, a symlink followed, the file
 * fsynced and renamed onto its target only once complete): readers never
 * see a partial file. A writer (falcon_npy_create, or
 * falcon_npy_create_output for one output of a larger transaction) puts the
 * header in first and takes the data in ranges at their offsets (pwrite),
 * so an output need not fit in memory either.
 */
#include "npy-format.h"

/* An IEEE binary16 value, exactly (every float16 is a float32 and a double). */
static double half_to_double(uint16_t h)
{
    const int e = (h >> 10) & 31, f = h & 1023;
    const double v = e == 0 ? ldexp(f, -24) : e == 31 ? (f ? NAN : INFINITY) : ldexp(f + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

/* Python's repr of a shape tuple: "()", "(5,)", "(3, 4)". Used in headers and
 * messages; shared with checkpoint.c. 200 bytes hold any shape. */
const char *falcon_shape_repr(const int64_t *shape, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
    return buf;
}

/* ---- low-level i/o ---- */

/* Read up to len bytes, retrying short reads; returns the bytes read or -1. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* ---- header parsing ---- */

typedef struct npy_header {
    falcon_dtype dtype;
    int ndim;
    int64_t shape[FALCON_NPY_MAX_NDIM];
    int64_t count;
} npy_header;

typedef struct cursor {
    const char *p, *begin, *end;
    const char *path;
} cursor;

static falcon_status malformed(const cursor *c, const char *expected)
{
    return falcon_fail_in(c->path, "npy-format",
                          FALCON_E_FORMAT, "'%s': malformed .npy header at byte %d: expected %s",
                          c->path, (int)(c->p - c->begin), expected);
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

/* Is `ch` next after white space? */
static int peek(cursor *c, char ch)
{
    skip_space(c);
    return c->p < c->end && *c->p == ch;
}

/* Consume `ch` if it is next; returns whether it was. */
static int accept(cursor *c, char ch)
{
    if (!peek(c, ch)) return 0;
    c->p++;
    return 1;
}

/* A quoted Python string without escapes (all a float header needs). */
static falcon_status parse_string(cursor *c, char *buf, size_t size)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return malformed(c, "a quoted string");
    const char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote && *c->p != '\\' && n + 1 < size) buf[n++] = *c->p++;
    if (c->p >= c->end || *c->p != quote) return malformed(c, "a short string without escapes");
    c->p++;
    buf[n] = '\0';
    return FALCON_OK;
}

static falcon_status parse_bool(cursor *c, int *value)
{
    skip_space(c);
    const size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && !memcmp(c->p, "True", 4)) { c->p += 4; *value = 1; return FALCON_OK; }
    if (left >= 5 && !memcmp(c->p, "False", 5)) { c->p += 5; *value = 0; return FALCON_OK; }
    return malformed(c, "True or False");
}

static falcon_status parse_dim(cursor *c, int64_t *dim)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return malformed(c, "a non-negative integer dimension");
    int64_t v = 0;
    for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *c->p - '0', &v))
            return falcon_fail_in(c->path, "npy-format",
                                  FALCON_E_FORMAT, "'%s': a dimension of the shape overflows int64", c->path);
    *dim = v;
    return FALCON_OK;
}

/* "()", "(5,)", "(3, 4)", "(3, 4,)". "(5)" is the integer 5 in Python, not a tuple. */
static falcon_status parse_shape(cursor *c, npy_header *h)
{
    if (!accept(c, '(')) return malformed(c, "'(' starting the shape tuple");
    int comma = 0;
    h->ndim = 0;
    while (!accept(c, ')')) {
        if (h->ndim == FALCON_NPY_MAX_NDIM)
            return falcon_fail_in(c->path, "npy-format",
                                  FALCON_E_FORMAT, "'%s': the shape has more than %d dimensions",
                                  c->path, FALCON_NPY_MAX_NDIM);
        falcon_status s = parse_dim(c, &h->shape[h->ndim++]);
        if (s) return s;
        comma = accept(c, ',');
        if (!comma && !peek(c, ')')) return malformed(c, "',' or ')' in the shape tuple");
    }
    if (h->ndim == 1 && !comma) return malformed(c, "a tuple: one dimension is written (n,)");
    return FALCON_OK;
}

static falcon_status parse_descr(cursor *c, npy_header *h)
{
    char descr[32];
    if (peek(c, '['))
        return falcon_fail_in(c->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': the dtype is a structured (record) type: only float16 "
                              "'<f2', float32 '<f4' and float64 '<f8' are supported", c->path);
    falcon_status s = parse_string(c, descr, sizeof descr);
    if (s) return s;
    if (!strcmp(descr, "<f4")) h->dtype = FALCON_DTYPE_F32;
    else if (!strcmp(descr, "<f8")) h->dtype = FALCON_DTYPE_F64;
    else if (!strcmp(descr, "<f2")) h->dtype = FALCON_DTYPE_F16;
    else
        return falcon_fail_in(c->path, "npy-format", FALCON_E_FORMAT,
                              "'%s': dtype '%s' is not supported: only little-endian float16 '<f2', "
                              "float32 '<f4' and float64 '<f8'", c->path, descr);
    return FALCON_OK;
}

/* The whole header: exactly the three keys, in any order, then white space. */
static falcon_status parse_header(cursor *c, npy_header *h)
{
    enum { DESCR = 1, FORTRAN = 2, SHAPE = 4 };
    int seen = 0;
    if (!accept(c, '{')) return malformed(c, "'{' starting the header dict");
    while (!accept(c, '}')) {
        char key[32];
        falcon_status s = parse_string(c, key, sizeof key);
        if (s) return s;
        const int bit = !strcmp(key, "descr") ? DESCR : !strcmp(key, "fortran_order") ? FORTRAN
                      : !strcmp(key, "shape") ? SHAPE : 0;
        if (!bit || (seen & bit))
            return falcon_fail_in(c->path, "npy-format",
                                  FALCON_E_FORMAT, "'%s': malformed .npy header: %s key '%s'", c->path,
                                  bit ? "repeated" : "unexpected", key);
        seen |= bit;
        if (!accept(c, ':')) return malformed(c, "':' after a key");
        int fortran = 0;
        s = bit == DESCR ? parse_descr(c, h) : bit == SHAPE ? parse_shape(c, h) : parse_bool(c, &fortran);
        if (s) return s;
        if (fortran)
            return falcon_fail_in(c->path, "npy-format",
                                  FALCON_E_FORMAT, "'%s': fortran_order is True: only C-order arrays are supported",
                                  c->path);
        if (!accept(c, ',') && !peek(c, '}'))
            return malformed(c, "',' or '}' in the header dict");
    }
    skip_space(c);
    if (c->p != c->end) return malformed(c, "only padding after the header dict");
    if (seen != (DESCR | FORTRAN | SHAPE))
        return falcon_fail_in(c->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': malformed .npy header: missing key '%s'", c->path,
                              !(seen & DESCR) ? "descr" : !(seen & FORTRAN) ? "fortran_order" : "shape");
    return FALCON_OK;
}

/* ---- reading ---- */

typedef struct npy_file {
    int fd;
    const char *path;
    int regular;      /* a regular file: its size is known up front */
    int64_t size;     /* bytes, when regular */
    int64_t data_off; /* where the data starts */
} npy_file;

static falcon_status io_error(const char *path, const char *what, int err)
{
    return falcon_fail_in(path, "io", FALCON_E_IO, "'%s': cannot %s: %s", path, what, strerror(err));
}

static falcon_status npy_open(const char *path, npy_file *f)
{
    struct stat st;
    f->path = path;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return io_error(path, "open it", errno);
    const int err = fstat(f->fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (err) {
        close(f->fd);
        f->fd = -1;
        return io_error(path, "read it", err);
    }
    f->regular = S_ISREG(st.st_mode);
    f->size = (int64_t)st.st_size;
    return FALCON_OK;
}

/* Read exactly len bytes or name what was short. */
static falcon_status read_exact(const npy_file *f, void *buf, size_t len, const char *what)
{
    const ssize_t got = read_full(f->fd, buf, len);
    if (got < 0) return io_error(f->path, "read it", errno);
    if ((size_t)got < len)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': truncated: the file ends inside the %s", f->path, what);
    return FALCON_OK;
}

/* Magic, version and header length; leaves the file at the header text. */
static falcon_status read_prelude(npy_file *f, uint32_t *header_len)
{
    unsigned char pre[PRELUDE_LEN + 4];
    const ssize_t got = read_full(f->fd, pre, PRELUDE_LEN);
    if (got < 0) return io_error(f->path, "read it", errno);
    if (got < MAGIC_LEN || memcmp(pre, NPY_MAGIC, MAGIC_LEN) != 0)
        return falcon_fail_in(f->path, "npy-format", FALCON_E_FORMAT, "'%s': not a .npy file (%s)", f->path,
                              got ? "bad magic string" : "the file is empty");
    if (got < PRELUDE_LEN)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': truncated: the file ends inside the version", f->path);
    const int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': unsupported .npy version %d.%d (1.0, 2.0 and 3.0 are read)",
                              f->path, major, minor);
    const int len_bytes = major == 1 ? 2 : 4;
    falcon_status s = read_exact(f, pre + PRELUDE_LEN, (size_t)len_bytes, "header length");
    if (s) return s;
    *header_len = 0;
    for (int i = len_bytes - 1; i >= 0; i--) *header_len = *header_len << 8 | pre[PRELUDE_LEN + i];
    f->data_off = PRELUDE_LEN + len_bytes + (int64_t)*header_len;
    if (f->regular && f->data_off > f->size)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': header length %u is larger than the file (%lld bytes)",
                              f->path, *header_len, (long long)f->size);
    if (*header_len > MAX_HEADER)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': header length %u is over the limit of %d bytes", f->path,
                              *header_len, MAX_HEADER);
    return FALCON_OK;
}

static falcon_status read_header(npy_file *f, npy_header *h)
{
    uint32_t len = 0;
    falcon_status s = read_prelude(f, &len);
    if (s) return s;
    char *text = malloc(len + 1u);
    if (!text) return falcon_fail_in(f->path, "out-of-memory",
                                     FALCON_E_NOMEM, "'%s': out of memory for the header", f->path);
    if (!(s = read_exact(f, text, len, "header"))) {
        cursor c = {text, text, text + len, f->path};
        s = parse_header(&c, h);
    }
    free(text);
    if (s) return s;
    char shape[SHAPE_TEXT];
    h->count = shape_count(h->shape, h->ndim);
    if (h->count < 0)
        return falcon_fail_in(f->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': the element count of shape %s overflows int64", f->path,
                              falcon_shape_repr(h->shape, h->ndim, shape, sizeof shape));
    return FALCON_OK;
}

/* The data (`have` bytes, more after them if `extra`) must fill the rest of the file exactly. */
static falcon_status check_data_size(const npy_file *f, const npy_header *h, int64_t have, int extra)
{
    char shape[SHAPE_TEXT];
    const size_t size = dtype_size(h->dtype);
    const int short_file = h->count > have / (int64_t)size;
    if (!short_file && !extra && h->count * (int64_t)size == have) return FALCON_OK;
    if (short_file)
        return falcon_fail_in(f->path, "npy-format", FALCON_E_FORMAT,
                              "'%s': truncated data: shape %s of %s needs %lld elements, the file holds %lld",
                              f->path, falcon_shape_repr(h->shape, h->ndim, shape, sizeof shape),
                              dtype_descr(h->dtype), (long long)h->count, (long long)(have / (int64_t)size));
    return falcon_fail_in(f->path, "npy-format",
                          FALCON_E_FORMAT, "'%s': trailing bytes after the %lld elements of shape %s", f->path,
                          (long long)h->count, falcon_shape_repr(h->shape, h->ndim, shape, sizeof shape));
}

/* Read up to `bytes` into a buffer that grows with what arrives, so that a
 * stream (a pipe) claiming a huge shape fails as truncated, not as a huge
 * allocation. A regular file was size-checked and gets one allocation. */
static falcon_status read_growing(const npy_file *f, size_t bytes, char **buf, size_t *got)
{
    size_t cap = f->regular || bytes < STREAM_CHUNK ? bytes : STREAM_CHUNK;
    *got = 0;
    *buf = malloc(cap ? cap : 1);
    for (;;) {
        if (!*buf) return falcon_fail_in(f->path, "out-of-memory",
                                         FALCON_E_NOMEM, "'%s': out of memory for %zu bytes of data", f->path, cap);
        const ssize_t r = read_full(f->fd, *buf + *got, cap - *got);
        if (r < 0) return io_error(f->path, "read it", errno);
        *got += (size_t)r;
        if (*got < cap || cap == bytes) return FALCON_OK; /* end of file, or all of it */
        cap = cap > bytes / 2 ? bytes : 2 * cap;
        char *grown = realloc(*buf, cap);
        if (!grown) free(*buf);
        *buf = grown;
    }
}

/* The raw data, which must fill the rest of the file exactly. */
static falcon_status read_data(const npy_file *f, const npy_header *h, void **data)
{
    falcon_status s = f->regular ? check_data_size(f, h, f->size - f->data_off, 0) : FALCON_OK;
    if (s) return s;
    /* A stream may claim more bytes than memory (or size_t) holds: read what
     * arrives, so that a short one is reported as truncated, as a file is. */
    const size_t size = dtype_size(h->dtype);
    const size_t bytes = (uint64_t)h->count > SIZE_MAX / size ? SIZE_MAX : (size_t)h->count * size;
    char *buf, probe;
    size_t got;
    s = read_growing(f, bytes, &buf, &got);
    if (!s) {
        const ssize_t extra = read_full(f->fd, &probe, 1);
        s = extra < 0 ? io_error(f->path, "read it", errno) : check_data_size(f, h, (int64_t)got, extra > 0);
    }
    if (s) {
        free(buf);
        return s;
    }
    *data = buf;
    return FALCON_OK;
}

/* "[2,1]" for flat index 7 of shape (3, 3). */
const char *falcon_npy_unravel(int64_t flat, const int64_t *shape, int ndim, char *buf, size_t size)
{
    int64_t idx[FALCON_NPY_MAX_NDIM];
    for (int i = ndim - 1; i >= 0; i--) {
        idx[i] = flat % shape[i];
        flat /= shape[i];
    }
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "", (long long)idx[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- readers: ranges of elements at computed offsets ---- */

struct falcon_npy_reader {
    npy_file f;
    npy_header h;
    char *mem;  /* a stream's raw data, read whole at open; NULL for a regular file */
    char *path; /* a copy, for messages */
};

/* pread until len bytes or the end of the file; returns the bytes read or -1. */
static ssize_t pread_full(int fd, void *buf, size_t len, int64_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

falcon_status falcon_npy_open(const char *path, falcon_npy_reader **reader, falcon_array *info)
{
    if (!path || !reader || !info)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_open: NULL %s", !path ? "path" : !reader ? "reader" : "info");
    falcon_npy_reader *r = calloc(1, sizeof *r);
    char *copy = strdup(path);
    if (!r || !copy) {
        free(r);
        free(copy);
        return falcon_fail_in(path, "out-of-memory", FALCON_E_NOMEM, "'%s': out of memory", path);
    }
    r->path = copy;
    r->f.fd = -1;
    void *mem = NULL;
    falcon_status s = npy_open(copy, &r->f);
    if (!s) s = read_header(&r->f, &r->h);
    if (!s) s = r->f.regular ? check_data_size(&r->f, &r->h, r->f.size - r->f.data_off, 0)
                             : read_data(&r->f, &r->h, &mem);
    r->mem = mem;
    if (s) {
        falcon_npy_close(r);
        return s;
    }
    memset(info, 0, sizeof *info);
    info->dtype = r->h.dtype;
    info->ndim = r->h.ndim;
    memcpy(info->shape, r->h.shape, sizeof(int64_t) * (size_t)r->h.ndim);
    info->count = r->h.count;
    *reader = r;
    return FALCON_OK;
}

void falcon_npy_close(falcon_npy_reader *r)
{
    if (!r) return;
    if (r->f.fd >= 0) close(r->f.fd);
    free(r->mem);
    free(r->path);
    free(r);
}

/* Raw elements [first, first + count) in the file's dtype. */
static falcon_status fetch(const falcon_npy_reader *r, int64_t first, int64_t count, void *dst)
{
    const size_t size = dtype_size(r->h.dtype), bytes = (size_t)count * size;
    if (r->mem) {
        memcpy(dst, r->mem + (size_t)first * size, bytes);
        return FALCON_OK;
    }
    const int64_t off = r->f.data_off + first * (int64_t)size;
    const ssize_t got = pread_full(r->f.fd, dst, bytes, off);
    if (got < 0) return io_error(r->path, "read it", errno);
    if ((size_t)got < bytes)
        return falcon_fail_in(r->path, "npy-format",
                              FALCON_E_FORMAT, "'%s': truncated: the file ended at byte %lld while being read "
                              "(it changed after it was opened)", r->path, (long long)(off + got));
    return FALCON_OK;
}

/* Elements per piece of a converting read. */
enum { PIECE = 1 << 15 };

/* float64 -> float32 must not overflow: the index of the first finite value
 * that would, or -1 (non-finite values pass, for the validation to name). */
static int64_t first_overflow(const double *x, int64_t count)
{
    return falcon_first_unfit(x, count, falcon_f32_unfit_limit(), 1);
}

falcon_status falcon_npy_read_range(falcon_npy_reader *r, int64_t first, int64_t count, falcon_dtype want,
                                    void *dst)
{
    if (!r || (count > 0 && !dst))
        return falcon_fail(FALCON_E_ARGUMENT, "npy_read_range: NULL %s", r ? "destination" : "reader");
    if (want != FALCON_DTYPE_F32 && want != FALCON_DTYPE_F64)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_read_range: unknown dtype %d", (int)want);
    if (first < 0 || count < 0 || first > r->h.count - count)
        return falcon_fail_in(r->path, "",
                              FALCON_E_ARGUMENT, "'%s': elements [%lld, %lld + %lld) are outside its %lld", r->path,
                              (long long)first, (long long)first, (long long)count, (long long)r->h.count);
    if (want == r->h.dtype) return fetch(r, first, count, dst);
    double *piece = malloc(sizeof(double) * PIECE);
    if (!piece)
        return falcon_fail_in(r->path, "out-of-memory", FALCON_E_NOMEM, "'%s': out of memory converting to %s",
                              r->path, dtype_descr(want));
    falcon_status s = FALCON_OK;
    /* float16 widens exactly to either precision (non-finite values pass
     * through, for the validation to name). */
    for (int64_t done = 0; r->h.dtype == FALCON_DTYPE_F16 && done < count; done += PIECE) {
        const int64_t len = count - done < PIECE ? count - done : PIECE;
        if ((s = fetch(r, first + done, len, piece))) break;
        const uint16_t *x = (const uint16_t *)piece;
        for (int64_t i = 0; i < len; i++) {
            const double v = half_to_double(x[i]);
            if (want == FALCON_DTYPE_F64) ((double *)dst)[done + i] = v;
            else ((float *)dst)[done + i] = (float)v;
        }
    }
    if (r->h.dtype == FALCON_DTYPE_F16) {
        free(piece);
        return s;
    }
    /* Narrowing checks every value before it writes any, so that a failed
     * read leaves dst as it was (a second pass reads from the page cache). */
    for (int64_t done = 0; !s && want == FALCON_DTYPE_F32 && done < count; done += PIECE) {
        const int64_t len = count - done < PIECE ? count - done : PIECE;
        if ((s = fetch(r, first + done, len, piece))) break;
        const int64_t bad = first_overflow(piece, len);
        if (bad >= 0) {
            char at[SHAPE_TEXT];
            s = falcon_fail(FALCON_E_RANGE, "'%s': element %s = %g does not fit in float32", r->path,
                            falcon_npy_unravel(first + done + bad, r->h.shape, r->h.ndim, at, sizeof at), piece[bad]);
            falcon_blame_at(s, r->path, "npy-f32-fit", first + done + bad, -1, -1);
        }
    }
    for (int64_t done = 0; !s && done < count; done += PIECE) {
        const int64_t len = count - done < PIECE ? count - done : PIECE;
        if ((s = fetch(r, first + done, len, piece))) break;
        if (want == FALCON_DTYPE_F64) {
            const float *x = (const float *)piece;
            double *y = (double *)dst + done;
            for (int64_t i = 0; i < len; i++) y[i] = x[i];
        } else {
            /* The file may have changed between the passes: check again. */
            if (first_overflow(piece, len) >= 0) {
                s = falcon_fail_in(r->path, "npy-format", FALCON_E_FORMAT, "'%s': changed while being read", r->path);
                break;
            }
            float *y = (float *)dst + done;
            for (int64_t i = 0; i < len; i++) y[i] = (float)piece[i];
        }
    }
    free(piece);
    return s;
}

falcon_status falcon_npy_read(const char *path, falcon_dtype want, falcon_array *out)
{
    if (!path || !out) return falcon_fail(FALCON_E_ARGUMENT, "npy_read: NULL %s", path ? "output" : "path");
    if (want != FALCON_DTYPE_F32 && want != FALCON_DTYPE_F64)
        return falcon_fail(FALCON_E_ARGUMENT, "npy_read: unknown dtype %d", (int)want);
    falcon_npy_reader *r;
    falcon_array info;
    falcon_status s = falcon_npy_open(path, &r, &info);
    if (s) return s;
    void *data = NULL;
    if (info.count > (int64_t)(SIZE_MAX / 8)) /* only a stream gets here with such a shape */
        s = falcon_fail_in(path, "out-of-memory",
                           FALCON_E_NOMEM, "'%s': %lld elements do not fit in memory", path, (long long)info.count);
    else if (r->mem && want == r->h.dtype) /* a stream's data is already in memory */
        data = r->mem, r->mem = NULL;
    else if (!(data = malloc(info.count ? (size_t)info.count * dtype_size(want) : 1)))
        s = falcon_fail_in(path, "out-of-memory",
                           FALCON_E_NOMEM, "'%s': out of memory for %lld elements", path, (long long)info.count);
    else
        s = falcon_npy_read_range(r, 0, info.count, want, data);
    falcon_npy_close(r);
    if (s) {
        free(data);
        return s;
    }
    *out = info;
    out->dtype = want;
    out->data = data;
    return FALCON_OK;
}
