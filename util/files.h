/* Writing whole files, for the library (src/) and the grading layer. */
#ifndef FALCON_UTIL_FILES_H
#define FALCON_UTIL_FILES_H
#include <stddef.h>

/* Write all of buf to fd, through short writes and EINTR: 0, or -1 with
 * errno set (EIO where a write makes no progress and says nothing). */
int falcon_write_full(int fd, const void *buf, size_t len);
/* Write `count` buffers to a new file `path` (it must not exist) and fsync
 * it, unless `sync` is 0 (a writer of many files that syncs them together).
 * 0; -errno when it cannot be created; errno when it cannot be written, the
 * file then removed. */
int falcon_file_write_new(const char *path, const void *const *parts, const size_t *sizes, int count, int sync);

#endif
