/*
 * Output transactions: the commit (see "Commit" at the head of
 * src/outputs.c): temporaries synced, parents locked, signals blocked, the
 * renames in declaration order, undone if one fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "outputs-internal.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif


static int fsync_path(const char *path)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int r = fsync(fd);
    const int err = errno;
    close(fd);
    errno = err;
    return r;
}

/* A copy of the file `from` (its bytes and mode) in the open, empty file fd. */
static int copy_into(int fd, const char *from)
{
    const int src = open(from, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (src < 0) return -1;
    int r = fstat(src, &st);
    char buf[1 << 16];
    for (ssize_t got; r == 0 && (got = read(src, buf, sizeof buf)) != 0;) {
        if (got < 0 && errno == EINTR) continue;
        r = got < 0 ? -1 : falcon_write_full(fd, buf, (size_t)got);
    }
    if (r == 0) r = fchmod(fd, st.st_mode & 07777);
    if (r == 0) r = fsync(fd);
    const int err = errno;
    close(src);
    errno = err;
    return r;
}

/* The old target kept under a new name next to it, to be renamed back if
 * the commit fails: a hard link, or where none can be made (a file at its
 * link limit, a file system without them, the kernel's protected_hardlinks
 * on someone else's file) a copy. NULL if neither could be made: the
 * commit then stops before it replaces the target. */
static char *make_backup(const char *target)
{
    for (int tries = 0; tries < 8; tries++) {
        char *name = falcon_path_beside(target, ".old-XXXXXX");
        if (!name) return NULL;
        const int fd = mkostemp(name, O_CLOEXEC);
        if (fd < 0) {
            free(name);
            return NULL;
        }
        close(fd);
        unlink(name);
        if (link(target, name) == 0) return name;
        const int again = errno == EEXIST;
        free(name);
        if (!again) break;
    }
    char *name = falcon_path_beside(target, ".old-XXXXXX");
    const int fd = name ? mkostemp(name, O_CLOEXEC) : -1;
    if (fd < 0) {
        free(name);
        return NULL;
    }
    const int r = copy_into(fd, target), err = errno;
    if (close(fd) != 0 || r != 0) {
        unlink(name);
        free(name);
        errno = r != 0 ? err : errno;
        return NULL;
    }
    return name;
}

/* Swap two directories: renameat2(RENAME_EXCHANGE), or, where the file
 * system lacks it, three renames through a name beside the first. */
static int swap_dirs(const char *a, const char *b)
{
    if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
    char *aside = falcon_path_beside(a, ".swap");
    int r = -1;
    if (aside && rename(b, aside) == 0) {
        if (rename(a, b) == 0) r = rename(aside, a);
        else rename(aside, b);
    }
    const int err = errno;
    free(aside);
    errno = err;
    return r;
}

/* Undo the renames of slots [0, upto), newest first. */
static void roll_back(falcon_outputs *tx, int upto)
{
    for (int i = upto - 1; i >= 0; i--) {
        out_slot *s = &tx->out[i];
        if (s->done == 1 && !s->is_dir) {
            if (s->backup) {
                if (rename(s->backup, s->target) == 0) {
                    free(s->backup);
                    s->backup = NULL;
                }
            } else if (!s->existed) { /* a file that existed is never replaced without a backup */
                unlink(s->target);
            }
        } else if (!s->is_dir && s->backup) {
            unlink(s->backup); /* its own rename failed or never came: the target is as it was */
            free(s->backup);
            s->backup = NULL;
        } else if (s->done == 2) {
            swap_dirs(s->temp, s->target);
        } else if (s->done == 1 && s->is_dir) {
            rename(s->target, s->temp); /* the new directory goes back to its temporary name */
        }
        s->done = 0;
    }
}

static falcon_status commit_fail(falcon_outputs *tx, const out_slot *s, const char *what, int err)
{
    const falcon_status st = falcon_fail(FALCON_E_IO, "%s: '%s': cannot %s: %s", s->what, s->path, what, strerror(err));
    falcon_outputs_abort(tx);
    return st;
}

static int parent_lock_order(const void *a, const void *b)
{
    const parent_lock *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* One committer at a time per parent directory: every output's parent is
 * locked (flock, exclusive), each directory once (two descriptors of one
 * directory in one process would wait on each other), in the order of
 * (device, inode), so that two commits sharing several parents never each
 * hold one the other waits for. So two runs writing the same --out and
 * --state-out commit one after the other, never a mixture, and concurrent
 * savers of one checkpoint are serialised (falcon_checkpoint_load holds
 * the same lock shared). A file output's directory is opened here, not
 * when it is declared, so that a set of a thousand files does not hold a
 * thousand descriptors; one that cannot be opened (no read permission) is
 * written unlocked, as before. A failure aborts the transaction. */
static falcon_status lock_parents(falcon_outputs *tx)
{
    if (!(tx->locks = calloc((size_t)tx->nout + 1, sizeof *tx->locks))) {
        const falcon_status st = falcon_fail(FALCON_E_NOMEM, "out of memory");
        falcon_outputs_abort(tx);
        return st;
    }
    for (int i = 0; i < tx->nout; i++) {
        const out_slot *s = &tx->out[i];
        int fd = s->lockfd;
        if (!s->is_dir) {
            char *parent = falcon_parent_of(s->canon);
            fd = parent ? open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            free(parent);
            if (fd < 0) continue;
        }
        struct stat st;
        int seen = fstat(fd, &st) != 0;
        for (int j = 0; j < tx->nlocks && !seen; j++) seen = tx->locks[j].dev == st.st_dev && tx->locks[j].ino == st.st_ino;
        if (seen) {
            if (!s->is_dir) close(fd);
            continue;
        }
        tx->locks[tx->nlocks++] = (parent_lock){st.st_dev, st.st_ino, fd, !s->is_dir, i};
    }
    qsort(tx->locks, (size_t)tx->nlocks, sizeof *tx->locks, parent_lock_order);
    for (int j = 0; j < tx->nlocks; j++)
        while (flock(tx->locks[j].fd, LOCK_EX) != 0)
            if (errno != EINTR) return commit_fail(tx, &tx->out[tx->locks[j].slot], "lock the directory it is in", errno);
    return FALCON_OK;
}

falcon_status falcon_outputs_commit(falcon_outputs *tx)
{
    if (!tx) return falcon_fail(FALCON_E_ARGUMENT, "outputs_commit: NULL");
    /* 1. Everything on disk before anything is renamed. */
    for (int i = 0; i < tx->nout; i++) {
        out_slot *s = &tx->out[i];
        if (!s->is_dir) {
            const int err = falcon_sync_slot(s);
            if (err) return commit_fail(tx, s, "write it", err);
        } else if (fsync_path(s->temp) != 0) {
            return commit_fail(tx, s, "write it", errno);
        }
    }
    /* 2. One committer at a time per parent directory (lock_parents). */
    const falcon_status locked = lock_parents(tx);
    if (locked) return locked;
    /* 3. The renames, with every signal blocked: files in order, then directories. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    falcon_status st = FALCON_OK;
    int k = 0;
    for (int pass = 0; pass < 2 && !st; pass++)
        for (k = 0; k < tx->nout && !st; k++) {
            out_slot *s = &tx->out[k];
            if (s->is_dir != pass) continue;
            struct stat sb;
            const int exists = lstat(s->target, &sb) == 0;
            if (!s->is_dir) {
                s->existed = exists;
                if (exists && !(s->backup = make_backup(s->target)))
                    st = falcon_fail(FALCON_E_IO, "%s: '%s': cannot keep the old file to put back if the run fails "
                                     "(neither a hard link nor a copy next to it): %s", s->what, s->path, strerror(errno));
                else if (rename(s->temp, s->target) == 0) s->done = 1;
                else st = falcon_fail(FALCON_E_IO, "%s: '%s': cannot rename the temporary file onto it: %s", s->what, s->path,
                                      strerror(errno));
            } else if (exists) {
                if (swap_dirs(s->temp, s->target) == 0) s->done = 2;
                else st = falcon_fail(FALCON_E_IO, "%s: '%s': cannot swap the new directory in: %s", s->what, s->path,
                                      strerror(errno));
            } else {
                if (rename(s->temp, s->target) == 0) s->done = 1;
                else st = falcon_fail(FALCON_E_IO, "%s: '%s': cannot rename the temporary directory onto it: %s",
                                      s->what, s->path, strerror(errno));
            }
        }
    if (st) {
        roll_back(tx, tx->nout);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        falcon_outputs_abort(tx);
        return st;
    }
    /* 4. Committed. The backups go; a replaced directory now sits at the
     * temporary name and stays registered, so that a signal removes it. */
    for (int i = 0; i < tx->nout; i++) {
        out_slot *s = &tx->out[i];
        if (s->backup) unlink(s->backup);
        if (!s->is_dir || s->done == 1) {
            for (int j = 0; j < s->nnames; j++) falcon_reg_drop(&s->reg_children[j]);
            falcon_reg_drop(&s->reg);
            free(s->temp);
            s->temp = NULL;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* 5. Durable names, and the replaced directories removed. */
    for (int i = 0; i < tx->nout; i++) {
        out_slot *s = &tx->out[i];
        char *parent = falcon_parent_of(s->canon);
        if (parent) fsync_path(parent);
        free(parent);
    }
    falcon_outputs_abort(tx); /* removes what is left at the temporary names, unlocks */
    return FALCON_OK;
}
