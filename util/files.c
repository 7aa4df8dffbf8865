/* Writing whole files (see util/files.h). Plain POSIX: nothing of libfalcon. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "files.h"

int falcon_write_full(int fd, const void *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, (const char *)buf + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO; /* no progress and no reason given */
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    return 0;
}

int falcon_file_write_new(const char *path, const void *const *parts, const size_t *sizes, int count, int sync)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return -errno;
    int err = 0;
    for (int i = 0; !err && i < count; i++) err = falcon_write_full(fd, parts[i], sizes[i]) ? errno : 0;
    if (!err && sync && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (err) unlink(path);
    return err;
}
