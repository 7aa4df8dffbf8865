/* Path helpers shared by the library's output transactions (src/) and the
 * grading layer (grade/): no state, nothing of libfalcon. */
#ifndef FALCON_UTIL_PATHS_H
#define FALCON_UTIL_PATHS_H

/* One file name, no path: not empty, no '/', not "." or "..". What an
 * output directory's files and a case set's folders must be. */
int falcon_plain_name(const char *s);
/* Do two paths name one file or directory (their device and inode,
 * symlinks followed: a link, hard or symbolic, or a bind mount)? 0 when
 * either cannot be reached or is NULL. */
int falcon_same_file(const char *a, const char *b);
/* A name beside `target` for its temporary or backup: target + suffix, the
 * last name cut so that the whole stays within NAME_MAX (a 250-byte name
 * must still get a temporary next to it). The target's last name must not
 * end in '/'. Freed by the caller; NULL when out of memory. */
char *falcon_path_beside(const char *target, const char *suffix);

#endif
