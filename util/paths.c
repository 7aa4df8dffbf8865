/* Path helpers of the library and the tools that write beside it (see
 * util/paths.h). Plain POSIX: nothing of libfalcon. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "paths.h"

int falcon_plain_name(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

char *falcon_path_beside(const char *target, const char *suffix)
{
    const char *slash = strrchr(target, '/');
    const size_t base = strlen(slash ? slash + 1 : target), room = NAME_MAX - strlen(suffix);
    const size_t keep = strlen(target) - (base > room ? base - room : 0);
    char *p = malloc(keep + strlen(suffix) + 1);
    if (p) snprintf(p, keep + strlen(suffix) + 1, "%.*s%s", (int)keep, target, suffix);
    return p;
}

int falcon_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

