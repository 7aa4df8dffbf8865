/*
 * falcon_io.h: libfalcon's files: .npy arrays (whole or in ranges), output
 * transactions (the outputs of one command, all or nothing) and checkpoints
 * of a carried state. The compute API (falcon.h) does no I/O; these
 * functions are what the falcon tools write and read with.
 */
#ifndef FALCON_IO_H
#define FALCON_IO_H

#include "falcon.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- .npy files (little-endian float16/float32/float64, C order) ---- */
/* float16 files are read (converted exactly to float32 or float64), never
 * written: a `want` or a written array is F32 or F64. */
typedef enum falcon_dtype { FALCON_DTYPE_F32 = 0, FALCON_DTYPE_F64, FALCON_DTYPE_F16 } falcon_dtype;

#define FALCON_NPY_MAX_NDIM 8

typedef struct falcon_array {
    falcon_dtype dtype;
    int ndim;
    int64_t shape[FALCON_NPY_MAX_NDIM];
    int64_t count; /* product of shape */
    void *data;    /* count elements of dtype */
} falcon_array;

/* Read a whole file, converted to `want`. */
falcon_status falcon_npy_read(const char *path, falcon_dtype want, falcon_array *out);
/* Write atomically: a temporary name in the same directory, then rename. */
falcon_status falcon_npy_write(const char *path, const falcon_array *a);
void falcon_array_free(falcon_array *a);
/* The bytes of the .npy file falcon_npy_write writes for `a`, in a new
 * buffer (*bytes, free it; *len bytes): for a writer that stores files its
 * own way, or a reader that compares a file with what it should hold. */
falcon_status falcon_npy_encode(const falcon_array *a, char **bytes, size_t *len);
/* The index in a shape of flat element `flat`, as "[2,1]" (flat 7 of shape
 * (3, 3)), into buf (size bytes); returns buf. For messages. */
const char *falcon_npy_unravel(int64_t flat, const int64_t *shape, int ndim, char *buf, size_t size);

/*
 * Files larger than memory, in pieces. A reader checks the header and the
 * file's size when it opens (every rule of falcon_npy_read but the values),
 * then reads ranges of elements at computed offsets (pread): a regular file
 * is never held in memory. Any other file (a pipe) is read whole at open.
 */
typedef struct falcon_npy_reader falcon_npy_reader;
/* `info` receives the file's dtype, ndim, shape and count; its data is NULL. */
falcon_status falcon_npy_open(const char *path, falcon_npy_reader **reader, falcon_array *info);
/* Elements [first, first + count) in C order, converted to `want`, into dst
 * (float64 -> float32 refuses finite values that would become infinite). */
falcon_status falcon_npy_read_range(falcon_npy_reader *reader, int64_t first, int64_t count,
                                    falcon_dtype want, void *dst);
void falcon_npy_close(falcon_npy_reader *reader);

/* A writer puts the header of `a` (its dtype and shape; a->data is not used)
 * into a temporary file next to `path`; ranges of elements then go in at
 * their offsets (pwrite), in any order; commit renames the file onto `path`
 * once every element was written. Readers of `path` never see a partial file. */
typedef struct falcon_npy_writer falcon_npy_writer;
falcon_status falcon_npy_create(const char *path, const falcon_array *a, falcon_npy_writer **writer);
/* Elements [first, first + count) in C order from src, in the array's dtype. */
falcon_status falcon_npy_write_range(falcon_npy_writer *writer, int64_t first, int64_t count,
                                     const void *src);
/* Rename onto the path; frees the writer, also on failure (which removes the temporary file). */
falcon_status falcon_npy_commit(falcon_npy_writer *writer);
/* Remove the temporary file and free the writer (NULL is ignored). */
void falcon_npy_abort(falcon_npy_writer *writer);
/* The temporary file's name, e.g. for a signal handler that removes it. */
const char *falcon_npy_writer_temp(const falcon_npy_writer *writer);

/*
 * ---- output transactions: the outputs of one command, all or nothing ----
 * Declare every output (and the inputs they must not replace) before
 * computing: each path is checked (a file output: new, a regular file or a
 * symlink to one, which is followed, never replaced; a directory output:
 * new, or a directory holding only its declared names; no output the same
 * as an input or another output) and gets a temporary next to its target.
 * Write into the temporaries, then commit: all are fsynced and renamed onto
 * their targets together (files in order, directories swapped last, every
 * signal blocked meanwhile); if any step fails, every target keeps its old
 * bytes and the temporaries are removed. src/outputs.c has the details.
 */
typedef struct falcon_outputs falcon_outputs;
falcon_status falcon_outputs_begin(falcon_outputs **tx);
/* An input file (or input directory) that no output may be (or be inside). */
falcon_status falcon_outputs_input(falcon_outputs *tx, const char *what, const char *path);
falcon_status falcon_outputs_input_dir(falcon_outputs *tx, const char *what, const char *path);
/* An input directory tree: no output may be anywhere below it. */
falcon_status falcon_outputs_input_tree(falcon_outputs *tx, const char *what, const char *path);
/* A file output; `what` names it in messages ("--out"). *slot: its number. */
falcon_status falcon_outputs_file(falcon_outputs *tx, const char *what, const char *path, int *slot);
/* A directory output replaced as a whole; `names` (NULL-terminated) are the
 * only files it holds. An existing directory there must be empty or an
 * earlier one: regular files of those names only, among them the last name
 * (a save writes it last). */
falcon_status falcon_outputs_dir(falcon_outputs *tx, const char *what, const char *path,
                                 const char *const *names, int *slot);
/* The temporary to write: a file (also open as falcon_outputs_fd) or an empty directory. */
const char *falcon_outputs_temp(const falcon_outputs *tx, int slot);
int falcon_outputs_fd(const falcon_outputs *tx, int slot);
const char *falcon_outputs_path(const falcon_outputs *tx, int slot);
/* Done writing a file output: flush it to disk and close its descriptor
 * now rather than at the commit, so that a transaction of many files holds
 * no descriptor per file. falcon_outputs_fd is -1 after; the commit still
 * renames it. A failure here also fails the commit. */
falcon_status falcon_outputs_close(falcon_outputs *tx, int slot);
/* Commit every output, or none; frees tx either way. */
falcon_status falcon_outputs_commit(falcon_outputs *tx);
/* Remove every temporary and free tx (NULL is ignored). */
void falcon_outputs_abort(falcon_outputs *tx);
/* For a program: every catchable terminating signal (and exit()) removes
 * the temporaries of transactions in progress, then terminates as the
 * signal would; SIGXFSZ is ignored, so that a write past the file-size limit
 * fails (EFBIG) and is reported. */
void falcon_outputs_clean_on_signals(void);
/* An .npy output of a transaction: as falcon_npy_create, writing into the
 * slot's temporary; falcon_npy_commit then only finishes the file (the
 * transaction's commit renames it) and falcon_npy_abort leaves the temporary
 * to the transaction. */
falcon_status falcon_npy_create_output(falcon_outputs *tx, int slot, const falcon_array *a,
                                       falcon_npy_writer **writer);

/* ---- checkpoints: the whole carried state in a directory ---- */
/* Save atomically: a new directory next to `dir`, swapped in by rename. */
falcon_status falcon_checkpoint_save(const falcon_state *state, const char *dir);
/* The files falcon_checkpoint_save writes for `state`, as bytes:
 * fn(ctx, file name, bytes, length) for each, in the order of a save, until
 * one returns non-zero. Returns 0, fn's non-zero return, or -1 when out of
 * memory (falcon_last_error says so). For a writer that stores them its own
 * way (a case set, synced once). */
typedef int (*falcon_checkpoint_file_fn)(void *ctx, const char *name, const void *bytes, size_t len);
int falcon_checkpoint_encode(const falcon_state *state, falcon_checkpoint_file_fn fn, void *ctx);
/* Load; every array's shape is checked before its data is read. */
falcon_status falcon_checkpoint_load(const char *dir, falcon_state **out);
/* A checkpoint's dimensions, from its manifest alone (nothing allocated):
 * to compare with a run before loading it. */
falcon_status falcon_checkpoint_shape(const char *dir, int64_t *heads, int64_t *n, int64_t *m, int64_t *window);
/* A checkpoint as an output of a transaction, and its contents. */
falcon_status falcon_outputs_checkpoint(falcon_outputs *tx, const char *what, const char *dir, int *slot);
falcon_status falcon_checkpoint_save_to(falcon_outputs *tx, int slot, const falcon_state *state);

#ifdef __cplusplus
}
#endif

#endif /* FALCON_IO_H */
