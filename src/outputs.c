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
#include "internal.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* Outputs grow as declared (a study writes a file per curve), and so does
 * the signal registry: blocks of entries that a handler can walk, linked
 * once complete and never freed. */
enum { MAX_INPUTS = 32, MAX_NAMES = 16, REG_BLOCK = 1024 };

/* ---- the signal registry: paths a handler removes (async-signal-safe) ---- */

enum { REG_FREE = 0, REG_FILE = 1, REG_DIR = 2 };
typedef struct reg_block {
    struct {
        const char *path;
        volatile sig_atomic_t kind;
    } e[REG_BLOCK];
    struct reg_block *volatile next;
} reg_block;
static reg_block registry;

static reg_block *reg_block_of(int i)
{
    reg_block *b = &registry;
    for (; b && i >= REG_BLOCK; i -= REG_BLOCK) b = b->next;
    return b;
}

static int reg_free_from; /* no free entry below this index */
/* Threads save at once (a study's streams): adding and dropping entries
 * take this lock; the handler only reads, and never waits on it. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returns the entry's index, or -1 when no memory is left for a new block
 * (the path is then not cleaned on a signal). */
static int reg_add_locked(const char *path, int kind)
{
    int base = 0;
    reg_block *b = &registry;
    for (; b->next && base + REG_BLOCK <= reg_free_from; b = b->next) base += REG_BLOCK;
    for (;; b = b->next, base += REG_BLOCK) {
        for (int i = 0; i < REG_BLOCK; i++)
            if (b->e[i].kind == REG_FREE) {
                b->e[i].path = path;
                __atomic_signal_fence(__ATOMIC_SEQ_CST);
                b->e[i].kind = kind;
                reg_free_from = base + i + 1;
                return base + i;
            }
        if (!b->next) {
            reg_block *nb = calloc(1, sizeof *nb);
            if (!nb) return -1;
            __atomic_signal_fence(__ATOMIC_SEQ_CST); /* zeroed before a handler can see it */
            b->next = nb;
        }
    }
}

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

static int reg_add(const char *path, int kind)
{
    pthread_mutex_lock(&reg_lock);
    const int i = reg_add_locked(path, kind);
    pthread_mutex_unlock(&reg_lock);
    return i;
}

static void reg_drop(int *i)
{
    pthread_mutex_lock(&reg_lock);
    reg_block *b = *i >= 0 ? reg_block_of(*i) : NULL;
    if (b) b->e[*i % REG_BLOCK].kind = REG_FREE;
    if (b && *i < reg_free_from) reg_free_from = *i;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&reg_lock);
    *i = -1;
}

static void reg_clean(void)
{
    for (reg_block *b = &registry; b; b = b->next)
        for (int i = 0; i < REG_BLOCK; i++)
            if (b->e[i].kind == REG_FILE) unlink(b->e[i].path);
    for (reg_block *b = &registry; b; b = b->next)
        for (int i = 0; i < REG_BLOCK; i++)
            if (b->e[i].kind == REG_DIR) rmdir(b->e[i].path);
}

static void on_signal(int sig)
{
    /* errno as the interrupted code left it: unlink, rmdir and raise may
     * set it, and the handler returns before the signal it raised ends the
     * process (a handler that spoils errno is a fault of its own). */
    const int saved = errno;
    reg_clean();
    signal(sig, SIG_DFL);
    raise(sig); /* blocked in the handler: delivered on return, with the default action */
    errno = saved;
}

static void on_exit_clean(void) { reg_clean(); }

/* Every signal whose default action terminates the process and that can be caught. */
static const int term_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT,   SIGBUS,  SIGFPE,
                                   SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,   SIGXCPU, SIGVTALRM,
                                   SIGPROF, SIGIO,   SIGPWR,  SIGSYS,
#ifdef SIGSTKFLT
                                   SIGSTKFLT,
#endif
};

void falcon_catch_terminating_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof term_signals / sizeof term_signals[0]; i++) {
        struct sigaction old;
        /* Only signals left at their default: an ignored one stays ignored
         * (nohup, a background job's SIGINT), a handler already there (a
         * sanitizer's SIGSEGV) stays in charge. */
        if (sigaction(term_signals[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            sigaction(term_signals[i], &sa, NULL);
    }
    for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            sigaction(s, &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN); /* a write past the size limit fails with EFBIG, and is reported */
}

static void clean_on_signals_once(void)
{
    atexit(on_exit_clean);
    falcon_catch_terminating_signals(on_signal);
}

/* Once per process, whichever threads call it first (a plain flag let two
 * first calls both register, or one return before the handlers were in). */
void falcon_outputs_clean_on_signals(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, clean_on_signals_once);
}

/* ---- the transaction ---- */

typedef struct out_slot {
    char *what;        /* "--out", for messages */
    char *path;        /* as given */
    char *target;      /* what is replaced: the path, or the file a symlink names */
    char *canon;       /* realpath of the target's directory + "/" + its name */
    char *temp;        /* the temporary file or directory */
    char *backup;      /* the old target, hard-linked, during commit */
    char *children[MAX_NAMES]; /* a directory's known files inside its temporary */
    const char *names[MAX_NAMES];
    int nnames;
    int is_dir, fd, lockfd, exists, reg, reg_children[MAX_NAMES];
    int synced;        /* a file closed early (falcon_outputs_close): on disk */
    uint64_t name_hash; /* of canon's last name (check_aliases) */
    int done;          /* renamed (1) or swapped (2) during commit */
    int existed;       /* the target existed when the commit began */
    dev_t dev;
    ino_t ino;
    mode_t mode;       /* an existing target's permission bits, which its replacement keeps */
} out_slot;

typedef struct in_entry {
    char *what, *canon;
    int is_dir, exists;
    dev_t dev;
    ino_t ino;
} in_entry;

/* A parent directory the commit locks: a directory output's lockfd, or a
 * descriptor of a file output's directory opened for the commit (own). */
typedef struct parent_lock {
    dev_t dev;
    ino_t ino;
    int fd, own, slot;
} parent_lock;

struct falcon_outputs {
    out_slot *out;
    int nout, cap;
    in_entry in[MAX_INPUTS];
    int nin;
    parent_lock *locks;
    int nlocks;
};

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

int falcon_plain_name(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/* See internal.h. */
char *falcon_path_beside(const char *target, const char *suffix)
{
    const char *slash = strrchr(target, '/');
    const size_t base = strlen(slash ? slash + 1 : target), room = NAME_MAX - strlen(suffix);
    const size_t keep = strlen(target) - (base > room ? base - room : 0);
    char *p = malloc(keep + strlen(suffix) + 1);
    if (p) snprintf(p, keep + strlen(suffix) + 1, "%.*s%s", (int)keep, target, suffix);
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
static char *parent_of(const char *canon)
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
    for (int i = 0; i < s->nnames; i++) reg_drop(&s->reg_children[i]);
    reg_drop(&s->reg);
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
    char *p = parent_of(canon);
    const int in = p && dir && !strcmp(p, dir);
    free(p);
    return in;
}

/* The same file or directory as a path names, where strings can differ:
 * a bind mount shows one directory under two names, so entries that do not
 * exist yet are compared by their directory's (device, inode) and name
 * (falcon_same_file: internal.h). */
int falcon_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

static int same_entry(const char *a, const char *b)
{
    if (!a || !b) return 0;
    if (!strcmp(a, b)) return 1;
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    if (!na || !nb || strcmp(na, nb)) return 0;
    char *pa = parent_of(a), *pb = parent_of(b);
    const int same = falcon_same_file(pa, pb);
    free(pa);
    free(pb);
    return same;
}

/* canon directly in dir, by name or by the directory's identity. */
static int in_dir(const char *canon, const char *dir)
{
    if (inside(canon, dir)) return 1;
    char *p = canon ? parent_of(canon) : NULL;
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
    for (char *p = parent_of(canon); p && !under;) {
        struct stat st;
        under = stat(p, &st) == 0 && st.st_dev == d.st_dev && st.st_ino == d.st_ino;
        char *up = strcmp(p, "/") && strchr(p, '/') ? parent_of(p) : NULL;
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
    s->reg = reg_add(s->temp, REG_FILE); /* before it exists: see TEMP_FIRST */
    s->fd = made_file(mkostemp(s->temp, O_CLOEXEC));
    if (s->fd < 0) {
        const int err = errno;
        reg_drop(&s->reg);
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
    char *parent = parent_of(s->canon);
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
    s->reg = reg_add(s->temp, REG_DIR); /* before it exists: see TEMP_FIRST */
    const int made = made_dir(mkdtemp(s->temp)) != NULL;
    if (!made) {
        const int err = errno;
        reg_drop(&s->reg);
        free(s->temp);
        s->temp = NULL;
        return slot_fail(s, falcon_fail(FALCON_E_IO, "'%s': cannot create the directory: %s", path, strerror(err)));
    }
    for (int i = 0; i < s->nnames; i++) {
        sprintf(s->children[i], "%s/%s", s->temp, s->names[i]);
        s->reg_children[i] = reg_add(s->children[i], REG_FILE);
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
static int sync_file(out_slot *s)
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
    const int err = sync_file(s);
    return err ? falcon_fail(FALCON_E_IO, "'%s': cannot write it: %s", s->path, strerror(err)) : FALCON_OK;
}

const char *falcon_outputs_path(const falcon_outputs *tx, int slot)
{
    const out_slot *s = get(tx, slot);
    return s ? s->path : NULL;
}

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
            char *parent = parent_of(s->canon);
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
            const int err = sync_file(s);
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
            for (int j = 0; j < s->nnames; j++) reg_drop(&s->reg_children[j]);
            reg_drop(&s->reg);
            free(s->temp);
            s->temp = NULL;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* 5. Durable names, and the replaced directories removed. */
    for (int i = 0; i < tx->nout; i++) {
        out_slot *s = &tx->out[i];
        char *parent = parent_of(s->canon);
        if (parent) fsync_path(parent);
        free(parent);
    }
    falcon_outputs_abort(tx); /* removes what is left at the temporary names, unlocks */
    return FALCON_OK;
}
