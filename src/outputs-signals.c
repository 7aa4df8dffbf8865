/*
 * Output transactions: the signal registry. falcon_outputs_clean_on_signals
 * makes every catchable terminating signal, and exit(), remove the
 * temporaries registered here (see "Signals" and TEMP_FIRST at the head of
 * src/outputs.c).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "outputs-internal.h"
#include "../util/signals.h"

/* Paths a handler removes (async-signal-safe). */
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

int falcon_reg_add(const char *path, int kind)
{
    pthread_mutex_lock(&reg_lock);
    const int i = reg_add_locked(path, kind);
    pthread_mutex_unlock(&reg_lock);
    return i;
}

void falcon_reg_drop(int *i)
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

