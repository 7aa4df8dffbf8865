/*
 * Output transactions: every file and directory one command writes is
 * declared first, written to a temporary next to its target, and committed
 * with the others at the end, or not at all.
 *
 * Declaring an output checks its path before anything is computed:
 *   - a file output is a new name in an existing directory, a regular file,
 *     or a symlink to a regular file (the link is followed: the file it names
 *     is replaced, the link stays); a directory, a device, a FIFO, a socket,
 *     a symlink to one of those or a dangling symlink is refused;
 *   - a directory output (a checkpoint) is new, or a directory holding only
 *     the names it is declared with (an earlier one of its kind): it is
 *     replaced as a whole, so nothing else may be inside;
 *   - no output is an input, another output, or inside a directory output or
 *     an input directory (same device and inode, or the same canonical path
 *     for names that do not exist yet).
 * Its temporary (a file "<target>.tmp-XXXXXX" or a directory of that name)
 * is created at once, so an unwritable place fails before the run too.
 *
 * Commit: every temporary file is fsynced and closed, every output's parent
 * directory is locked (flock, in a fixed order: concurrent commits to the
 * same files or checkpoint are serialised, never mixed;
 * falcon_checkpoint_load holds the same lock shared), every catchable
 * signal is blocked, and the temporaries are
 * renamed onto their targets in declaration order, files first and
 * directories last (an existing directory is swapped with its replacement by
 * renameat2(RENAME_EXCHANGE)). An existing target file is first hard-linked
 * to "<target>.old-XXXXXX", so that if a later rename fails every earlier one
 * is undone and each target holds its old bytes again. Then the backups and
 * the replaced directories are removed and the signals unblocked (a signal
 * that arrived meanwhile is then delivered: the commit is already whole).
 *
 * Residual window (no POSIX call renames several files at once): a SIGKILL,
 * a crash of the machine or an I/O error while undoing, inside the rename
 * sequence (microseconds), can leave some targets new and others old, and
 * "*.old-*" backups next to them.
 *
 * Signals: falcon_outputs_clean_on_signals() makes every catchable
 * terminating signal, and exit(), remove the temporaries of the transactions
 * in progress (the handler only calls unlink and rmdir on paths prepared
 * beforehand) and then terminate as the signal would; a signal that is
 * ignored or already has a handler when it is called is left so (see
 * TEMP_FIRST below for when a temporary is registered). SIGXFSZ is ignored
 * instead, so that a write over the file-size limit fails with EFBIG and is
 * reported like any other write error.
 *
 * TEMP_FIRST: a temporary is registered before mkostemp or mkdtemp makes it,
 * its template's buffer being the path the handler reads. Registered after,
 * a signal that arrived during the call, delivered as it returned, found the
 * new file unregistered and left it (the study's SIGTERM test once in CI).
 * verify/test-outputs.c holds it to this: a_signal_as_a_temporary_is_made
 * raises the signal from the hook below, as each kind of temporary's call
 * returns, every run; a_signal_while_temporaries_are_made_leaves_none sends
 * real signals at varied times (that one caught the file's order reversed in
 * nine runs of ten: at the 109th to 161st of its 300 signals).
 * Registered first, the handler unlinks a name that is the template, a
 * candidate that was never made, or the temporary: only a file of the same
 * "<target>.tmp-" and six letters, made by someone else, could be mistaken
 * for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "outputs-internal.h"
#include "../util/paths.h"


/* falcon_outputs_set_made_hook: called as mkostemp or mkdtemp returns,
 * around the call itself, so that nothing can come between the two; the
 * call's errno is kept for the caller's message. */
static void (*made_hook)(void);

void falcon_outputs_set_made_hook(void (*hook)(void)) { made_hook = hook; }

static void call_made_hook(void)
{
    const int err = errno;
    if (made_hook) made_hook();
    errno = err;
}

static int made_file(int fd)
{
    call_made_hook();
    return fd;
}

static char *made_dir(char *path)
{
    call_made_hook();
    return path;
}

/* ---- the transaction ---- */

falcon_status falcon_outputs_begin(falcon_outputs **tx)
{
    if (!tx) return falcon_fail(FALCON_E_ARGUMENT, "outputs_begin: NULL");
    *tx = calloc(1, sizeof **tx);
    return *tx ? FALCON_OK : falcon_fail(FALCON_E_NOMEM, "out of memory");
}

static char *cat3(const char *a, const char *b, const char *c)
{
    const size_t size = strlen(a) + strlen(b) + strlen(c) + 1;
    char *p = malloc(size);
    if (p) snprintf(p, size, "%s%s%s", a, b, c);
    return p;
}

/* realpath of path's directory + "/" + its last name; NULL with errno set. */
static char *canonical(const char *path)
{
    char *d = strdup(path), *b = strdup(path), *out = NULL;
    if (d && b) {
        char *dir = realpath(dirname(d), NULL);
        const char *base = basename(b);
        if (dir) out = cat3(dir, !strcmp(dir, "/") ? "" : "/", base);
        free(dir);
    } else {
        errno = ENOMEM;
    }
    const int err = errno;
    free(d);
    free(b);
    errno = err;
    return out;
}

/* The directory that holds a canonical path ("/a/b" -> "/a"), in a new buffer. */
char *falcon_parent_of(const char *canon)
{
    char *p = strdup(canon);
    if (!p) return NULL;
    char *slash = strrchr(p, '/');
    if (slash == p) slash[1] = '\0';
    else if (slash) *slash = '\0';
    return p;
}

static void free_slot(out_slot *s)
{
    if (s->fd >= 0) close(s->fd);
    if (s->lockfd >= 0) close(s->lockfd);
    for (int i = 0; i < s->nnames; i++) falcon_reg_drop(&s->reg_children[i]);
    falcon_reg_drop(&s->reg);
    for (int i = 0; i < s->nnames; i++) free(s->children[i]);
    free(s->what);
    free(s->path);
    free(s->target);
    free(s->canon);
    free(s->temp);
    free(s->backup);
    memset(s, 0, sizeof *s);
    s->fd = s->lockfd = s->reg = -1;
}

/* Remove a directory temporary: its known files, then itself. */
static void remove_dir_temp(out_slot *s)
{
    for (int i = 0; i < s->nnames; i++) unlink(s->children[i]);
    rmdir(s->temp);
}

void falcon_outputs_abort(falcon_outputs *tx)
{
    if (!tx) return;
    for (int i = 0; i < tx->nout; i++) {
        out_slot *s = &tx->out[i];
        if (s->temp && s->is_dir) remove_dir_temp(s);
        else if (s->temp) unlink(s->temp);
        free_slot(s);
    }
    for (int i = 0; i < tx->nin; i++) {
        free(tx->in[i].what);
        free(tx->in[i].canon);
    }
    for (int i = 0; i < tx->nlocks; i++)
        if (tx->locks[i].own) close(tx->locks[i].fd); /* the others close with their slots */
    free(tx->locks);
    free(tx->out);
    free(tx);
}

static falcon_status add_input(falcon_outputs *tx, const char *what, const char *path, int is_dir)
{
    if (!tx || !what || !path) return falcon_fail(FALCON_E_ARGUMENT, "outputs_input: NULL argument");
    if (tx->nin == MAX_INPUTS) return falcon_fail(FALCON_E_ARGUMENT, "outputs_input: more than %d inputs", MAX_INPUTS);
    in_entry *e = &tx->in[tx->nin];
    struct stat st;
    memset(e, 0, sizeof *e);
    e->exists = stat(path, &st) == 0;
    if (e->exists) e->dev = st.st_dev, e->ino = st.st_ino;
    e->is_dir = is_dir;
    char *real = e->exists ? realpath(path, NULL) : NULL;
    e->canon = real ? real : canonical(path);
    e->what = strdup(what);
    if (!e->what) {
        free(e->canon);
        return falcon_fail(FALCON_E_NOMEM, "out of memory");
    }
    tx->nin++;
    return FALCON_OK;
}

falcon_status falcon_outputs_input(falcon_outputs *tx, const char *what, const char *path)
{
    return add_input(tx, what, path, 0);
}

falcon_status falcon_outputs_input_dir(falcon_outputs *tx, const char *what, const char *path)
{
    return add_input(tx, what, path, 1);
}

falcon_status falcon_outputs_input_tree(falcon_outputs *tx, const char *what, const char *path)
{
    return add_input(tx, what, path, 2);
}

/* Is `canon` anywhere below the directory `dir`? */
static int below(const char *canon, const char *dir)
{
    const size_t n = dir ? strlen(dir) : 0;
    return canon && n && !strncmp(canon, dir, n) && (canon[n] == '/' || (n == 1 && dir[0] == '/'));
}

static falcon_status slot_fail(out_slot *s, falcon_status st)
{
    if (s->temp && s->is_dir) rmdir(s->temp);
    else if (s->temp) unlink(s->temp);
    free_slot(s);
    return st;
}

/* Is `canon` inside the directory `dir` (directly: outputs live one level down)? */
static int inside(const char *canon, const char *dir)
{
    char *p = falcon_parent_of(canon);
    const int in = p && dir && !strcmp(p, dir);
    free(p);
    return in;
}

/* The same file or directory as a path names, where strings can differ:
 * a bind mount shows one directory under two names, so entries that do not
 * exist yet are compared by their directory's (device, inode) and name
 * (falcon_same_file: util/paths.h). */
static int same_entry(const char *a, const char *b)
{
    if (!a || !b) return 0;
    if (!strcmp(a, b)) return 1;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    if (!na || !nb || strcmp(na, nb)) return 0;
    char *pa = falcon_parent_of(a), *pb = falcon_parent_of(b);
    const int same = falcon_same_file(pa, pb);
    free(pa);
    free(pb);
    return same;
}

/* canon directly in dir, by name or by the directory's identity. */
static int in_dir(const char *canon, const char *dir)
{
    if (inside(canon, dir)) return 1;
    char *p = canon ? falcon_parent_of(canon) : NULL;
    const int in = falcon_same_file(p, dir);
    free(p);
    return in;
}

/* canon anywhere below dir, by name or by identity (its ancestors walked up). */
static int under_dir(const char *canon, const char *dir)
{
    if (below(canon, dir)) return 1;
    if (!canon || !dir) return 0;
    struct stat d;
    if (stat(dir, &d) != 0) return 0;
    int under = 0;
    for (char *p = falcon_parent_of(canon); p && !under;) {
        struct stat st;
        under = stat(p, &st) == 0 && st.st_dev == d.st_dev && st.st_ino == d.st_ino;
        char *up = strcmp(p, "/") && strchr(p, '/') ? falcon_parent_of(p) : NULL;
        free(p);
        p = up;
    }
    return under;
}

/* FNV-1a of a path's last name ("/name"): same_entry holds only for
 * entries of one name, so outputs of other names are passed over on this
 * number, not on two string compares of long common prefixes (a set of
 * thousands of files compares each with every earlier one). */
static uint64_t last_name_hash(const char *canon)
{
    const char *p = canon ? strrchr(canon, '/') : NULL;
    uint64_t h = 1469598103934665603u;
    for (; p && *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
    return h;
}

/* The new slot against the inputs and the outputs declared before it. */
static falcon_status check_aliases(const falcon_outputs *tx, out_slot *s)
{
    s->name_hash = last_name_hash(s->canon);
    for (int i = 0; i < tx->nin; i++) {
        const in_entry *e = &tx->in[i];
        const int same = (s->exists && e->exists && s->dev == e->dev && s->ino == e->ino) ||
                         same_entry(e->canon, s->canon);
        if (same && !(s->is_dir && e->is_dir)) /* a checkpoint may be read and then replaced */
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': is also the input %s: an output never replaces an input",
                               s->path, e->what);
        if (!s->is_dir && e->is_dir && (in_dir(s->canon, e->canon) || (e->is_dir == 2 && under_dir(s->canon, e->canon))))
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': is inside the directory of the input %s", s->path, e->what);
        /* (an input checkpoint's directory too: the new one would change it) */
        if (s->is_dir && e->is_dir && !same && under_dir(s->canon, e->canon))
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': is inside the directory of the input %s", s->path, e->what);
        /* a directory output replaces all it holds: no input may be in it */
        if (s->is_dir && !same && under_dir(e->canon, s->canon))
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': holds the input %s ('%s'), and is replaced as a whole",
                               s->path, e->what, e->canon);
    }
    for (int i = 0; i < tx->nout; i++) {
        const out_slot *o = &tx->out[i];
        const int same = (s->exists && o->exists && s->dev == o->dev && s->ino == o->ino) ||
                         (o->name_hash == s->name_hash && same_entry(o->canon, s->canon));
        if (same)
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': is also the output %s: each output needs its own path",
                               s->path, o->what);
        if (o->is_dir && !s->is_dir && in_dir(s->canon, o->canon))
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': is inside the directory of %s, which is replaced as a whole",
                               s->path, o->what);
        if (s->is_dir && !o->is_dir && in_dir(o->canon, s->canon))
            return falcon_fail(FALCON_E_ARGUMENT, "'%s': holds the output %s, and is replaced as a whole",
                               s->path, o->what);
    }
    return FALCON_OK;
}

/* Resolve the target: the path, or the file a symlink at it names. */
static falcon_status resolve(out_slot *s, int want_dir)
{
    struct stat st;
    const char *path = s->path;
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            return falcon_fail(FALCON_E_IO, "'%s': cannot inspect it: %s", path, strerror(errno));
        s->target = strdup(path);
        return s->target ? FALCON_OK : falcon_fail(FALCON_E_NOMEM, "out of memory");
    }
    const int link = S_ISLNK(st.st_mode);
    if (link) {
        s->target = realpath(path, NULL);
        if (!s->target || stat(s->target, &st) != 0)
            return falcon_fail(FALCON_E_IO, "'%s': is a symlink to nothing that exists: an output follows a "
                               "symlink to its %s, it never replaces the link", path, want_dir ? "directory" : "file");
    } else if (!(s->target = strdup(path))) {
        return falcon_fail(FALCON_E_NOMEM, "out of memory");
    }
    const char *to = link ? "is a symlink to " : "";
    if (want_dir && !S_ISDIR(st.st_mode))
        return falcon_fail(FALCON_E_IO, "'%s': %sexists and is not a directory", path, link ? "is a symlink that " : "");
    if (!want_dir && S_ISDIR(st.st_mode))
        return falcon_fail(FALCON_E_IO, "'%s': %s%s: an output is written to a temporary file and renamed onto its "
                           "path", path, to, link ? "a directory" : "is a directory");
    if (!want_dir && !S_ISREG(st.st_mode))
        return falcon_fail(FALCON_E_IO, "'%s': %s%s", path, to,
                           link ? "something that is not a regular file (a device, pipe or socket): it is never "
                                  "replaced"
                                : "is not a regular file (a device, pipe or socket): it is never replaced");
    s->exists = 1;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->mode = st.st_mode & 0777;
    return FALCON_OK;
}

static falcon_status new_slot(falcon_outputs *tx, const char *what, const char *path, const int *slot,
                              out_slot **out)
{
    if (!tx || !what || !path || !slot) return falcon_fail(FALCON_E_ARGUMENT, "outputs: NULL argument");
    if (!*path) return falcon_fail(FALCON_E_ARGUMENT, "'': the path is empty");
    /* The last name must be a name: "dir/", "." or ".." would put the
     * temporary inside the target or name a directory that cannot be
     * renamed, which only the commit would find out. */
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    const char *last = path + len;
    while (last > path && last[-1] != '/') last--;
    const size_t lastlen = (size_t)(path + len - last);
    if (lastlen == 0 || (lastlen == 1 && last[0] == '.') || (lastlen == 2 && !strncmp(last, "..", 2)))
        return falcon_fail(FALCON_E_ARGUMENT, "'%s': an output path must end in its own name (not '.', '..' or '/')",
                           path);
    if (tx->nout == tx->cap) {
        const int cap = tx->cap ? 2 * tx->cap : 8;
        out_slot *grown = cap > tx->cap ? realloc(tx->out, sizeof *grown * (size_t)cap) : NULL;
        if (!grown) return falcon_fail(FALCON_E_NOMEM, "outputs: out of memory for %d outputs", cap);
        tx->out = grown;
        tx->cap = cap;
    }
    out_slot *s = &tx->out[tx->nout];
    memset(s, 0, sizeof *s);
    s->fd = s->lockfd = s->reg = -1;
    for (int i = 0; i < MAX_NAMES; i++) s->reg_children[i] = -1;
    if (!(s->what = strdup(what)) || !(s->path = strndup(path, len))) /* trailing slashes dropped */
        return slot_fail(s, falcon_fail(FALCON_E_NOMEM, "out of memory"));
    *out = s;
    return FALCON_OK;
}

falcon_status falcon_outputs_file(falcon_outputs *tx, const char *what, const char *path, int *slot)
{
    out_slot *s;
    falcon_status st = new_slot(tx, what, path, slot, &s);
    if (st) return st;
    if (path[strlen(path) - 1] == '/')
        return slot_fail(s, falcon_fail(FALCON_E_ARGUMENT, "'%s': ends in '/': a file output needs a file name", path));
    if ((st = resolve(s, 0))) return slot_fail(s, st);
    if (!(s->canon = canonical(s->target)))
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot create a temporary file next to it: %s", path,
                                        strerror(errno)));
    if ((st = check_aliases(tx, s))) return slot_fail(s, st);
    if (!(s->temp = falcon_path_beside(s->target, ".tmp-XXXXXX")))
        return slot_fail(s, falcon_fail(FALCON_E_NOMEM, "out of memory"));
    s->reg = falcon_reg_add(s->temp, REG_FILE); /* before it exists: see TEMP_FIRST */
    s->fd = made_file(mkostemp(s->temp, O_CLOEXEC));
    if (s->fd < 0) {
        const int err = errno;
        falcon_reg_drop(&s->reg);
        free(s->temp);
        s->temp = NULL;
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot create a temporary file next to it: %s", path,
                                        strerror(err)));
    }
    /* mkstemp makes the file 0600. A file that replaces another keeps its
     * permission bits (a private 0600 report stays private, as `>` would
     * leave it); a new one gets 0666 less the umask. Reading the umask
     * means setting it: set the strictest one meanwhile, so that a file
     * another thread creates in that instant is never more open than it
     * should be. */
    const mode_t mask = umask(077);
    umask(mask);
    if (fchmod(s->fd, s->exists ? s->mode : 0666 & ~mask) != 0)
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot set the mode of its temporary file: %s", path,
                                        strerror(errno)));
    *slot = tx->nout++;
    return FALCON_OK;
}

/* An existing directory output may hold only its declared names, each a
 * regular file, and if it holds any, the last of them, which a save writes
 * last: a folder of the user's that happens to hold one of the names (an
 * S.npy of their own) is not an earlier output, and a directory or a
 * symlink in it would not be removed with it (the swapped-out directory
 * would stay behind, holding what the user put there). */
static falcon_status check_dir_contents(const out_slot *s)
{
    DIR *d = opendir(s->target);
    if (!d) return falcon_fail(FALCON_E_IO, "'%s': cannot read the directory: %s", s->path, strerror(errno));
    falcon_status st = FALCON_OK;
    struct dirent *e;
    int any = 0, last = 0;
    while (!st && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        int known = 0;
        for (int i = 0; i < s->nnames && !known; i++) known = !strcmp(e->d_name, s->names[i]);
        struct stat sb;
        if (!known)
            st = falcon_fail(FALCON_E_IO, "'%s': holds '%.200s', which is not one of its files: the directory is "
                             "replaced as a whole, so it must be new, empty or an earlier one", s->path, e->d_name);
        else if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            st = falcon_fail(FALCON_E_IO, "'%s': holds '%.200s', which is not a regular file: the directory is "
                             "replaced as a whole, so it must be new, empty or an earlier one", s->path, e->d_name);
        any = 1;
        last |= known && s->nnames > 0 && !strcmp(e->d_name, s->names[s->nnames - 1]);
    }
    closedir(d);
    if (!st && any && !last)
        st = falcon_fail(FALCON_E_IO, "'%s': holds some of its files but not '%s', which every save writes last: "
                         "not an earlier one; the directory is replaced as a whole, so it must be new, empty or an "
                         "earlier one", s->path, s->names[s->nnames - 1]);
    return st;
}

falcon_status falcon_outputs_dir(falcon_outputs *tx, const char *what, const char *path, const char *const *names,
                                 int *slot)
{
    out_slot *s;
    falcon_status st = new_slot(tx, what, path, slot, &s);
    if (st) return st;
    s->is_dir = 1;
    while (names && names[s->nnames]) {
        if (s->nnames == MAX_NAMES) return slot_fail(s, falcon_fail(FALCON_E_ARGUMENT, "outputs_dir: too many names"));
        /* each is a file directly in the directory: a path would let the
         * clean-up remove a file outside it */
        const char *nm = names[s->nnames];
        if (!falcon_plain_name(nm))
            return slot_fail(s, falcon_fail(FALCON_E_ARGUMENT, "outputs_dir: '%s': a file name in the directory "
                                            "(no '/', not '.' or '..')", nm));
        s->names[s->nnames] = names[s->nnames];
        s->nnames++;
    }
    if ((st = resolve(s, 1))) return slot_fail(s, st);
    if (!(s->canon = canonical(s->target)))
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot create the directory: %s", path, strerror(errno)));
    if ((st = check_aliases(tx, s))) return slot_fail(s, st);
    if (s->exists && (st = check_dir_contents(s))) return slot_fail(s, st);
    char *parent = falcon_parent_of(s->canon);
    s->lockfd = parent ? open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    free(parent);
    if (s->lockfd < 0)
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot open the directory it is in: %s", path,
                                        strerror(errno)));
    for (int i = 0; i < s->nnames; i++)
        if (!(s->children[i] = malloc(strlen(s->target) + strlen(s->names[i]) + 16)))
            return slot_fail(s, falcon_fail(FALCON_E_NOMEM, "out of memory"));
    if (!(s->temp = falcon_path_beside(s->target, ".tmp-XXXXXX")))
        return slot_fail(s, falcon_fail(FALCON_E_NOMEM, "out of memory"));
    s->reg = falcon_reg_add(s->temp, REG_DIR); /* before it exists: see TEMP_FIRST */
    const int made = made_dir(mkdtemp(s->temp)) != NULL;
    if (!made) {
        const int err = errno;
        falcon_reg_drop(&s->reg);
        free(s->temp);
        s->temp = NULL;
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot create the directory: %s", path, strerror(err)));
    }
    for (int i = 0; i < s->nnames; i++) {
        sprintf(s->children[i], "%s/%s", s->temp, s->names[i]);
        s->reg_children[i] = falcon_reg_add(s->children[i], REG_FILE);
    }
    const mode_t mask = umask(077);
    umask(mask);
    if (chmod(s->temp, 0777 & ~mask) != 0)
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot set the mode of its temporary directory: %s",
                                        path, strerror(errno)));
    *slot = tx->nout++;
    return FALCON_OK;
}

static out_slot *get(const falcon_outputs *tx, int slot)
{
    return tx && slot >= 0 && slot < tx->nout ? (out_slot *)&tx->out[slot] : NULL;
}

const char *falcon_outputs_temp(const falcon_outputs *tx, int slot)
{
    const out_slot *s = get(tx, slot);
    return s ? s->temp : NULL;
}

int falcon_outputs_fd(const falcon_outputs *tx, int slot)
{
    const out_slot *s = get(tx, slot);
    return s && !s->is_dir ? s->fd : -1;
}

/* A file output's bytes to disk and its descriptor closed, once: 0, or the
 * errno of the fsync or close that failed (EIO for an earlier close that
 * did; the file is then never renamed into place). */
int falcon_sync_slot(out_slot *s)
{
    if (s->fd < 0) return s->synced ? 0 : EIO;
    const int bad = fsync(s->fd) != 0 ? errno : 0;
    const int closed = close(s->fd) != 0 ? errno : 0;
    s->fd = -1;
    s->synced = !bad && !closed;
    return bad ? bad : closed;
}

falcon_status falcon_outputs_close(falcon_outputs *tx, int slot)
{
    out_slot *s = get(tx, slot);
    if (!s || s->is_dir) return falcon_fail(FALCON_E_ARGUMENT, "outputs_close: no file output %d", slot);
    if (s->fd < 0 && !s->synced) return falcon_fail(FALCON_E_IO, "'%s': an earlier write of it failed", s->path);
    const int err = falcon_sync_slot(s);
    return err ? falcon_fail(FALCON_E_IO, "'%s': cannot write it: %s", s->path, strerror(err)) : FALCON_OK;
}

const char *falcon_outputs_path(const falcon_outputs *tx, int slot)
{
    const out_slot *s = get(tx, slot);
    return s ? s->path : NULL;
}

