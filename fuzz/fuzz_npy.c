/*
 * Fuzzing the .npy reader: the input is the file. It is read
 *   - as a regular file (a memfd, opened by path as /proc/self/fd/N): header,
 *     size checks, then pread at offsets;
 *   - as a stream (a pipe, opened the same way) when it fits a pipe's buffer:
 *     the path that reads a file of unknown size;
 * each converted to float32 and to float64, whole (falcon_npy_read) and in
 * ranges (falcon_npy_open + falcon_npy_read_range). Invariants: every way
 * agrees on success or failure; a failure leaves the output untouched and
 * names the file; a success gives count = product of the shape, and an
 * array that falcon_npy_write writes and falcon_npy_read reads back equal.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fuzz.h"
#include "falcon.h"
#include "falcon_io.h"

static char tmpdir[64];

static void remove_tmpdir(void) { rmdir(tmpdir); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_tmpdir(tmpdir, sizeof tmpdir, "npy", remove_tmpdir);
    return 0;
}

/* A memfd holding the bytes; *path names it. */
static int make_memfd(const uint8_t *data, size_t size, char *path, size_t len)
{
    const int fd = memfd_create("npy", MFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
    for (size_t done = 0; done < size;) {
        const ssize_t w = write(fd, data + done, size - done);
        FUZZ_CHECK(w > 0, "write: %s", strerror(errno));
        done += (size_t)w;
    }
    snprintf(path, len, "/proc/self/fd/%d", fd);
    return fd;
}

/* A pipe holding the bytes, its write end closed (so reading ends), or -1
 * when they do not fit its buffer. */
static int make_pipe(const uint8_t *data, size_t size, char *path, size_t len)
{
    int p[2];
    FUZZ_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    const int cap = fcntl(p[1], F_GETPIPE_SZ);
    if (cap < 0 || size > (size_t)cap) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (size) FUZZ_CHECK(write(p[1], data, size) == (ssize_t)size, "pipe write: %s", strerror(errno));
    close(p[1]);
    snprintf(path, len, "/proc/self/fd/%d", p[0]);
    return p[0];
}

static size_t dsize(falcon_dtype d) { return d == FALCON_DTYPE_F32 ? 4 : 8; }

/* Read `path` whole; returns the status, and the array on success. */
static falcon_status read_whole(const char *path, falcon_dtype want, falcon_array *a)
{
    memset(a, 0x5A, sizeof *a);
    falcon_array before = *a;
    const falcon_status s = falcon_npy_read(path, want, a);
    if (s) {
        FUZZ_CHECK(!memcmp(a, &before, sizeof *a), "a failed read wrote its output");
        FUZZ_CHECK(strstr(falcon_last_error(), path) != NULL, "message does not name the file: %s",
                   falcon_last_error());
        return s;
    }
    int64_t count = 1;
    FUZZ_CHECK(a->ndim >= 0 && a->ndim <= FALCON_NPY_MAX_NDIM, "ndim %d", a->ndim);
    for (int i = 0; i < a->ndim; i++) {
        FUZZ_CHECK(a->shape[i] >= 0, "negative dim");
        count *= a->shape[i];
    }
    FUZZ_CHECK(count == a->count && a->dtype == want && a->data, "count %lld vs %lld", (long long)count,
               (long long)a->count);
    return s;
}

/* The same through a reader, in a few ranges; must agree with `whole`. */
static void read_ranges(const char *path, falcon_dtype want, falcon_status whole_status, const falcon_array *whole)
{
    falcon_npy_reader *r;
    falcon_array info;
    falcon_status s = falcon_npy_open(path, &r, &info);
    if (s) {
        FUZZ_CHECK(whole_status != FALCON_OK, "open failed but read succeeded: %s", falcon_last_error());
        FUZZ_CHECK(s == whole_status, "open says %s, read says %s", falcon_status_name(s),
                   falcon_status_name(whole_status));
        return;
    }
    FUZZ_CHECK(info.data == NULL, "info has data");
    const int64_t n = info.count;
    /* Only values can fail after a successful open (float32 overflow). */
    if (whole_status != FALCON_OK) FUZZ_CHECK(whole_status == FALCON_E_RANGE || whole_status == FALCON_E_NOMEM,
                                              "open succeeded but read failed with %s: %s",
                                              falcon_status_name(whole_status), falcon_last_error());
    if (n <= (1 << 20)) {
        const size_t es = dsize(want);
        unsigned char *buf = malloc((size_t)n * es + 8);
        FUZZ_CHECK(buf != NULL, "malloc");
        memset(buf, 0x77, (size_t)n * es + 8);
        const int64_t cut = n / 3;
        falcon_status s1 = falcon_npy_read_range(r, 0, cut, want, buf);
        falcon_status s2 = falcon_npy_read_range(r, cut, n - cut, want, buf + (size_t)cut * es);
        if (whole_status == FALCON_OK) {
            FUZZ_CHECK(!s1 && !s2, "ranges failed where the whole read did not: %s", falcon_last_error());
            FUZZ_CHECK(!memcmp(buf, whole->data, (size_t)n * es), "ranges differ from the whole read");
        } else {
            FUZZ_CHECK(s1 || s2, "ranges succeeded where the whole read failed");
        }
        for (int i = 0; i < 8; i++) FUZZ_CHECK(buf[(size_t)n * es + (size_t)i] == 0x77, "wrote past the range");
        free(buf);
    }
    /* Ranges outside the array are refused. */
    FUZZ_CHECK(falcon_npy_read_range(r, n, 1, want, &info) == FALCON_E_ARGUMENT, "read past the end");
    FUZZ_CHECK(falcon_npy_read_range(r, -1, 1, want, &info) == FALCON_E_ARGUMENT, "read before the start");
    FUZZ_CHECK(falcon_npy_read_range(r, 0, -1, want, &info) == FALCON_E_ARGUMENT, "negative count");
    falcon_npy_close(r);
}

/* Write what was read, read it back: the same array. */
static void round_trip(const falcon_array *a)
{
    if (a->count > (1 << 20)) return;
    char path[128];
    snprintf(path, sizeof path, "%s/a.npy", tmpdir);
    FUZZ_CHECK(falcon_npy_write(path, a) == FALCON_OK, "write: %s", falcon_last_error());
    falcon_array b;
    FUZZ_CHECK(falcon_npy_read(path, a->dtype, &b) == FALCON_OK, "re-read: %s", falcon_last_error());
    FUZZ_CHECK(b.ndim == a->ndim && b.count == a->count && !memcmp(b.shape, a->shape, sizeof(int64_t) * (size_t)a->ndim),
               "shape changed in a round trip");
    FUZZ_CHECK(!memcmp(b.data, a->data, (size_t)a->count * dsize(a->dtype)), "data changed in a round trip");
    falcon_array_free(&b);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tmpdir[0]) LLVMFuzzerInitialize(NULL, NULL);
    char path[64];
    falcon_status reg[2];
    for (int w = 0; w < 2; w++) {
        const falcon_dtype want = w ? FALCON_DTYPE_F64 : FALCON_DTYPE_F32;
        const int fd = make_memfd(data, size, path, sizeof path);
        falcon_array a;
        reg[w] = read_whole(path, want, &a);
        read_ranges(path, want, reg[w], &a);
        if (!reg[w]) round_trip(&a);
        close(fd);

        /* The same bytes as a stream: the same verdict. */
        const int pfd = make_pipe(data, size, path, sizeof path);
        if (pfd >= 0) {
            falcon_array b;
            const falcon_status s = read_whole(path, want, &b);
            close(pfd);
            FUZZ_CHECK(s == reg[w], "stream says %s, file says %s", falcon_status_name(s), falcon_status_name(reg[w]));
            if (!s) {
                FUZZ_CHECK(b.ndim == a.ndim && b.count == a.count &&
                               !memcmp(b.data, a.data, (size_t)a.count * dsize(want)),
                           "stream and file give different arrays");
                falcon_array_free(&b);
            }
        }
        if (!reg[w]) falcon_array_free(&a);
    }
    /* float32 is the stricter reading (overflow), never the looser one. */
    FUZZ_CHECK(!(reg[0] == FALCON_OK && reg[1] != FALCON_OK), "float32 read succeeded, float64 failed");
    return 0;
}
