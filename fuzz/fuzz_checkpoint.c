/*
 * Fuzzing the checkpoint loader: the input is decoded into a checkpoint
 * directory (src/checkpoint.c's format) that is mostly well formed, so that
 * the loader's checks past the first one are reached:
 *   - the manifest: the five lines with sizes from the input, or one line
 *     replaced by raw input bytes, or the whole file raw;
 *   - each of the six arrays: the shape the manifest implies, or one
 *     dimension off by one, or a dimension dropped, or float32, or missing,
 *     or raw input bytes as the file; values from the input, among them
 *     NaN, infinities, negatives, non-integers and out-of-range counts.
 * Invariants: a failed load leaves *out as it was and names the checkpoint; a
 * successful one gives a state whose every rule holds (finite reals,
 * has_prev in {0, 1}, hist_len in [0, W-1], the manifest's sizes), and a
 * save of it loads back bit for bit.
 */
#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz.h"
#include "falcon.h"
#include "falcon_io.h"

static char root[64];

static void remove_file(const char *dir, const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

static const char *const array_files[6] = {"S.npy",      "prev_key.npy", "has_prev.npy",
                                           "hist_k.npy", "hist_v.npy",   "hist_len.npy"};

static void clear_dir(const char *dir)
{
    for (int i = 0; i < 6; i++) remove_file(dir, array_files[i]);
    remove_file(dir, "scale.npy"); /* format 2's seventh array, which a save writes */
    remove_file(dir, "falcon-checkpoint.txt");
}

static void remove_root(void)
{
    char dir[96];
    snprintf(dir, sizeof dir, "%s/a", root);
    clear_dir(dir);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/b", root);
    clear_dir(dir);
    rmdir(dir);
    rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_tmpdir(root, sizeof root, "ckpt", remove_root);
    return 0;
}

static void write_raw(const char *path, const uint8_t *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f, "fopen %s: %s", path, strerror(errno));
    FUZZ_CHECK(fwrite(p, 1, len, f) == len || len == 0, "fwrite %s", path);
    fclose(f);
}

/* Up to `max` raw bytes off the front of the input (the count is the next byte). */
static size_t take_raw(fuzz_bytes *b, const uint8_t **p, size_t max)
{
    size_t len = fuzz_u8(b) % (max + 1);
    if (len > b->left) len = b->left;
    *p = b->p;
    b->p += len;
    b->left -= len;
    return len;
}

/* A value for an element of the given kind: mostly valid, sometimes not. */
static double value(fuzz_bytes *b, int kind, int64_t W)
{
    static const double odd[] = {NAN, INFINITY, -INFINITY, -1.0, 0.5, 2.0, 1e308, -0.0, 4097.0, 0x1p-1074};
    const uint8_t c = fuzz_u8(b);
    if (c >= 240) return odd[c % (sizeof odd / sizeof odd[0])];
    if (kind == 1) return (double)(c & 1);           /* has_prev */
    if (kind == 2) return (double)(c % (W > 1 ? W : 1)); /* hist_len in [0, W-1] */
    return ((double)c - 120.0) / 16.0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes b = {data, size};
    char dir[96];
    snprintf(dir, sizeof dir, "%s/a", root);
    mkdir(dir, 0777);
    clear_dir(dir);

    const int64_t H = 1 + fuzz_u8(&b) % 3, n = 1 + fuzz_u8(&b) % 4, m = 1 + fuzz_u8(&b) % 4,
                  W = 1 + fuzz_u8(&b) % 4, keep = W - 1;

    /* The manifest. */
    char path[160];
    snprintf(path, sizeof path, "%s/falcon-checkpoint.txt", dir);
    const uint8_t manifest_mode = fuzz_u8(&b) % 8;
    if (manifest_mode == 7) {
        const uint8_t *p;
        const size_t len = take_raw(&b, &p, 200);
        write_raw(path, p, len);
    } else if (manifest_mode != 6) { /* 6: no manifest */
        char lines[5][64];
        snprintf(lines[0], sizeof lines[0], "format falcon-checkpoint 1");
        snprintf(lines[1], sizeof lines[1], "heads %lld", (long long)H);
        snprintf(lines[2], sizeof lines[2], "n %lld", (long long)n);
        snprintf(lines[3], sizeof lines[3], "m %lld", (long long)m);
        snprintf(lines[4], sizeof lines[4], "window %lld", (long long)W);
        if (manifest_mode < 5) { /* one line replaced by raw bytes */
            const uint8_t *p;
            const size_t len = take_raw(&b, &p, 40);
            memcpy(lines[manifest_mode], p, len);
            lines[manifest_mode][len] = 0;
        }
        FILE *f = fopen(path, "wb");
        FUZZ_CHECK(f, "fopen %s", path);
        for (int i = 0; i < 5; i++) fprintf(f, "%s\n", lines[i]);
        fclose(f);
    }

    /* The arrays: shape [H, a, c] as the loader expects, then mutated. */
    const int64_t shapes[6][3] = {{H, m, n}, {H, n, 0}, {H, 0, 0}, {H, keep, n}, {H, keep, m}, {H, 0, 0}};
    const int ndims[6] = {3, 2, 1, 3, 3, 1};
    const int kinds[6] = {0, 0, 1, 0, 0, 2};
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, array_files[i]);
        const uint8_t mode = fuzz_u8(&b) % 16;
        if (mode == 15) continue; /* missing */
        if (mode == 14) {
            const uint8_t *p;
            const size_t len = take_raw(&b, &p, 255);
            write_raw(path, p, len);
            continue;
        }
        falcon_array a = {mode == 13 ? FALCON_DTYPE_F32 : FALCON_DTYPE_F64, ndims[i], {0}, 1, NULL};
        for (int d = 0; d < a.ndim; d++) a.shape[d] = shapes[i][d];
        if (mode == 12) a.shape[fuzz_u8(&b) % a.ndim] += 1;
        if (mode == 11 && a.ndim > 1) a.ndim--;
        for (int d = 0; d < a.ndim; d++) a.count *= a.shape[d];
        double *v = malloc(sizeof(double) * (size_t)(a.count + 1));
        FUZZ_CHECK(v, "malloc");
        for (int64_t e = 0; e < a.count; e++) v[e] = value(&b, kinds[i], W);
        if (a.dtype == FALCON_DTYPE_F32) {
            float *f = malloc(sizeof(float) * (size_t)(a.count + 1));
            FUZZ_CHECK(f, "malloc");
            for (int64_t e = 0; e < a.count; e++) f[e] = (float)v[e];
            a.data = f;
            FUZZ_CHECK(falcon_npy_write(path, &a) == FALCON_OK, "npy write: %s", falcon_last_error());
            free(f);
        } else {
            a.data = v;
            FUZZ_CHECK(falcon_npy_write(path, &a) == FALCON_OK, "npy write: %s", falcon_last_error());
        }
        free(v);
    }

    /* Load, and check what came back. */
    falcon_state *const sentinel = (falcon_state *)&b; /* never dereferenced */
    falcon_state *st = sentinel;
    const falcon_status s = falcon_checkpoint_load(dir, &st);
    if (s != FALCON_OK) {
        FUZZ_CHECK(st == sentinel, "a failed load changed *out (%s)", falcon_status_name(s));
        FUZZ_CHECK(strstr(falcon_last_error(), "checkpoint") != NULL, "the error does not name the checkpoint: %s",
                   falcon_last_error());
        clear_dir(dir);
        return 0;
    }
    FUZZ_CHECK(st != NULL && st != sentinel, "a successful load gave no state");
    const falcon_state_view v = falcon_state_get_view(st);
    FUZZ_CHECK(v.heads == H && v.n == n && v.m == m && v.window == W && v.keep == keep,
               "loaded sizes differ from the manifest");
    for (int64_t i = 0; i < H * m * n; i++) FUZZ_CHECK(isfinite(v.S[i]), "S[%lld] not finite", (long long)i);
    for (int64_t h = 0; h < H; h++) {
        FUZZ_CHECK(v.has_prev[h] <= 1, "has_prev[%lld] = %d", (long long)h, v.has_prev[h]);
        FUZZ_CHECK(v.hist_len[h] >= 0 && v.hist_len[h] <= keep, "hist_len[%lld] = %lld", (long long)h,
                   (long long)v.hist_len[h]);
    }
    for (int64_t i = 0; i < H * n; i++) FUZZ_CHECK(isfinite(v.prev_key[i]), "prev_key not finite");
    for (int64_t i = 0; i < H * keep * n; i++) FUZZ_CHECK(isfinite(v.hist_k[i]), "hist_k not finite");
    for (int64_t i = 0; i < H * keep * m; i++) FUZZ_CHECK(isfinite(v.hist_v[i]), "hist_v not finite");

    /* Save and load again: the same state, bit for bit. */
    char dir2[96];
    snprintf(dir2, sizeof dir2, "%s/b", root);
    clear_dir(dir2);
    FUZZ_CHECK(falcon_checkpoint_save(st, dir2) == FALCON_OK, "save: %s", falcon_last_error());
    falcon_state *st2 = NULL;
    FUZZ_CHECK(falcon_checkpoint_load(dir2, &st2) == FALCON_OK, "reload: %s", falcon_last_error());
    const falcon_state_view w = falcon_state_get_view(st2);
    FUZZ_CHECK(!memcmp(v.S, w.S, sizeof(double) * (size_t)(H * m * n)), "S differs after save + load");
    FUZZ_CHECK(!memcmp(v.prev_key, w.prev_key, sizeof(double) * (size_t)(H * n)), "prev_key differs");
    FUZZ_CHECK(!memcmp(v.has_prev, w.has_prev, (size_t)H), "has_prev differs");
    FUZZ_CHECK(!memcmp(v.hist_len, w.hist_len, sizeof(int64_t) * (size_t)H), "hist_len differs");
    FUZZ_CHECK(!memcmp(v.hist_k, w.hist_k, sizeof(double) * (size_t)(H * keep * n)), "hist_k differs");
    FUZZ_CHECK(!memcmp(v.hist_v, w.hist_v, sizeof(double) * (size_t)(H * keep * m)), "hist_v differs");
    falcon_state_free(st2);
    falcon_state_free(st);
    clear_dir(dir2);
    clear_dir(dir);
    return 0;
}
