/*
 * Output transactions' internals, shared by their sources (src/outputs.c
 * declares and checks outputs, src/outputs-commit.c commits them,
 * src/outputs-signals.c holds the signal registry). The contract is at the
 * head of src/outputs.c.
 */
#ifndef FALCON_OUTPUTS_INTERNAL_H
#define FALCON_OUTPUTS_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>
#include "internal.h"

#define FALCON_HIDDEN __attribute__((visibility("hidden")))

/* Outputs grow as declared (a study writes a file per curve), and so does
 * the signal registry: blocks of entries that a handler can walk, linked
 * once complete and never freed. */
enum { MAX_INPUTS = 32, MAX_NAMES = 16, REG_BLOCK = 1024 };

/* The signal registry (src/outputs-signals.c): paths the handler removes. */
enum { REG_FREE = 0, REG_FILE = 1, REG_DIR = 2 };
/* Registers path (REG_FILE or REG_DIR): its index, or -1 without memory
 * (the path is then not cleaned on a signal). path must outlive the entry. */
FALCON_HIDDEN int falcon_reg_add(const char *path, int kind);
/* Drops entry *i (none when -1) and sets *i to -1. */
FALCON_HIDDEN void falcon_reg_drop(int *i);

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

/* The directory part of a canonical path (malloc'd), or NULL. */
FALCON_HIDDEN char *falcon_parent_of(const char *canon);
/* fsync and close a file slot's temporary once: 0 or an errno. */
FALCON_HIDDEN int falcon_sync_slot(out_slot *s);

#endif
