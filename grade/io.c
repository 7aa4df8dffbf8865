/* Safe file writes of the grading commands (see grade.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "grade.h"

static const char *kind_of(mode_t m)
{
    return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a directory" : "not a regular file";
}

int grade_write_file(const char *path, const char *data, size_t len)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_error("'%s': is %s: an output replaces only a regular file of its own", path,
                           kind_of(st.st_mode));
    const size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return cli_error("'%s': out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp-XXXXXX", 12);
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        const int e = errno;
        free(tmp);
        return cli_error("'%s': cannot create a temporary file beside it: %s", path, strerror(e));
    }
    const mode_t mask = umask(0);
    umask(mask);
    size_t done = 0;
    int e = 0;
    while (done < len && !e) {
        const ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno != EINTR) e = errno;
        else if (n > 0) done += (size_t)n;
    }
    if (!e && fchmod(fd, 0666 & ~mask)) e = errno;
    if (!e && fsync(fd)) e = errno;
    if (close(fd) && !e) e = errno;
    if (!e && rename(tmp, path)) e = errno;
    if (e) unlink(tmp);
    free(tmp);
    return e ? cli_error("'%s': cannot write it: %s", path, strerror(e)) : 0;
}
