/*
 * What the fuzzing harnesses share: the libFuzzer entry point and a reader
 * that takes typed values off the front of the input (zeros once it is
 * used up, so that every input decodes to something).
 *
 * Each harness (fuzz/fuzz_*.c) is linked two ways (mk/fuzz.mk): with
 * libFuzzer (clang -fsanitize=fuzzer) to search, and with fuzz/replay.c, a
 * main() that runs given files and directories once each, to replay the
 * seed corpora and the regressions under `make check` (any compiler).
 *
 * A harness reports a broken invariant with FUZZ_CHECK, which prints the
 * condition and aborts: libFuzzer saves the input as a crash.
 */
#ifndef FALCON_FUZZ_H
#define FALCON_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

typedef struct fuzz_bytes {
    const uint8_t *p;
    size_t left;
} fuzz_bytes;

static inline uint8_t fuzz_u8(fuzz_bytes *b)
{
    if (!b->left) return 0;
    b->left--;
    return *b->p++;
}

static inline uint64_t fuzz_u64(fuzz_bytes *b)
{
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)fuzz_u8(b) << (8 * i);
    return x;
}

static inline double fuzz_f64_bits(fuzz_bytes *b)
{
    const uint64_t x = fuzz_u64(b);
    double d;
    memcpy(&d, &x, sizeof d);
    return d;
}

/* A fresh directory /tmp/falcon-fuzz-<name>-XXXXXX in dir[size], removed at
 * exit by `cleanup` (which empties and removes it); aborts if it cannot. */
static inline void fuzz_tmpdir(char *dir, size_t size, const char *name, void (*cleanup)(void))
{
    snprintf(dir, size, "/tmp/falcon-fuzz-%s-XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    atexit(cleanup);
}

/* One of `count` values, chosen by the next byte. */
#define FUZZ_PICK(b, table) ((table)[fuzz_u8(b) % (sizeof(table) / sizeof((table)[0]))])

#endif
