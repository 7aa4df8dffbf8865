/*
 * The .npy format as the reader (npy-read.c) and the writer (npy-write.c)
 * both see it: the magic string, the header's limits, the element types and
 * positioned writes. The format and the reading rules: the top of npy-read.c.
 */
#ifndef FALCON_NPY_FORMAT_H
#define FALCON_NPY_FORMAT_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

/* The data bytes are used as they are: float32/float64 in host order. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "falcon's .npy reader and writer assume a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
enum {
    MAGIC_LEN = 6,
    PRELUDE_LEN = 8,          /* magic + version */
    MAX_HEADER = 1 << 20,     /* a float array's header is ~100 bytes; bounds a bogus length */
    HEADER_ALIGN = 64,        /* numpy pads magic + header to this */
    SHAPE_TEXT = 8 * 24 + 8,  /* "(d, d, ...)" for FALCON_NPY_MAX_NDIM 19-digit dims */
};
#define STREAM_CHUNK ((size_t)1 << 20) /* first read of a stream's data */

static inline size_t dtype_size(falcon_dtype d) { return d == FALCON_DTYPE_F16 ? 2 : d == FALCON_DTYPE_F32 ? 4 : 8; }
static inline const char *dtype_descr(falcon_dtype d)
{
    return d == FALCON_DTYPE_F16 ? "<f2" : d == FALCON_DTYPE_F32 ? "<f4" : "<f8";
}

/* Element count of a shape; -1 if it overflows int64. The product of the
 * non-zero dims is checked so that the answer does not depend on where a
 * zero dim sits. */
static inline int64_t shape_count(const int64_t *shape, int ndim)
{
    int64_t nonzero = 1, zero = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) zero = 1;
        else if (__builtin_mul_overflow(nonzero, shape[i], &nonzero)) return -1;
    }
    return zero ? 0 : nonzero;
}

/* pwrite until len bytes are written; 0, or -1 with errno. */
static inline int pwrite_full(int fd, const void *buf, size_t len, int64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + (int64_t)done));
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

#endif
