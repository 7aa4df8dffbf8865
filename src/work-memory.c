/*
 * The CPU drivers' work memory (kernels/framework/head.h): large blocks
 * kept between calls.
 *
 * A block of at least falcon_work_keep_min bytes (32 MiB, glibc's largest
 * mmap threshold) is mapped by malloc on every request and unmapped on
 * every free, so each call faults all its pages in again. Smaller blocks
 * malloc keeps and reuses by itself. A fault costs about 0.25 us on bare
 * metal and 15 us in the virtual machines measured (Zen 5, 2026): the
 * masked-parallel form of T = 4096 (one block of 4096 steps: its system,
 * W and products, about 300 MB for n = m = 128) spent 0.82 s a call on
 * them against 0.14 s of arithmetic for one head. So a freed large block
 * goes to one of a few slots instead, and the next request that fits takes
 * it back: its pages are already there.
 *
 * Nothing depends on the contents: the drivers write every element before
 * they read it, whatever a block held (the tests compare the outputs of
 * reused blocks with fresh ones bit for bit). The slots hold at most
 * FALCON_WORK_SLOTS blocks, the largest freed, and falcon_work_keep_max
 * bytes in all (1 GiB: a block larger is freed as before);
 * falcon_work_memory_release returns them (and the process's exit does).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "../kernels/framework/head.h"

#define FALCON_WORK_SLOTS 4
#define FALCON_WORK_ALIGN 64

size_t falcon_work_keep_min = (size_t)32 << 20;
size_t falcon_work_keep_max = (size_t)1 << 30;

static struct {
    void *p;
    size_t bytes;
} slot[FALCON_WORK_SLOTS];
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

void *falcon_work_get(size_t bytes, size_t *have)
{
    if (bytes == 0) bytes = FALCON_WORK_ALIGN;
    if (bytes >= falcon_work_keep_min) {
        /* the smallest kept block that holds it */
        int best = -1;
        pthread_mutex_lock(&slot_lock);
        for (int i = 0; i < FALCON_WORK_SLOTS; i++)
            if (slot[i].p && slot[i].bytes >= bytes && (best < 0 || slot[i].bytes < slot[best].bytes)) best = i;
        void *p = NULL;
        if (best >= 0) {
            p = slot[best].p;
            *have = slot[best].bytes;
            slot[best].p = NULL;
            slot[best].bytes = 0;
        }
        pthread_mutex_unlock(&slot_lock);
        if (p) return p;
    }
    void *p = NULL;
    if (posix_memalign(&p, FALCON_WORK_ALIGN, bytes)) return NULL;
    *have = bytes;
    return p;
}

void falcon_work_put(void *p, size_t have)
{
    if (!p) return;
    if (have >= falcon_work_keep_min) {
        /* into an empty slot, or in place of the smallest kept block if
         * that is smaller: the next large call is the likelier to fit */
        void *drop = p;
        pthread_mutex_lock(&slot_lock);
        int low = 0;
        size_t total = 0;
        for (int i = 0; i < FALCON_WORK_SLOTS; i++) total += slot[i].p ? slot[i].bytes : 0;
        for (int i = 1; i < FALCON_WORK_SLOTS; i++)
            if (!slot[i].p || (slot[low].p && slot[i].bytes < slot[low].bytes)) low = i;
        const size_t after = total - (slot[low].p ? slot[low].bytes : 0) + have;
        if ((!slot[low].p || slot[low].bytes < have) && after <= falcon_work_keep_max) {
            drop = slot[low].p;
            slot[low].p = p;
            slot[low].bytes = have;
        }
        pthread_mutex_unlock(&slot_lock);
        p = drop;
    }
    free(p);
}

size_t falcon_work_memory_kept(void)
{
    size_t total = 0;
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < FALCON_WORK_SLOTS; i++) total += slot[i].p ? slot[i].bytes : 0;
    pthread_mutex_unlock(&slot_lock);
    return total;
}

void falcon_work_memory_release(void)
{
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < FALCON_WORK_SLOTS; i++) {
        free(slot[i].p);
        slot[i].p = NULL;
        slot[i].bytes = 0;
    }
    pthread_mutex_unlock(&slot_lock);
}

/* At exit (or when a shared library is unloaded): no block outlives the
 * process's own teardown, so leak checkers see none. */
__attribute__((destructor)) static void falcon_work_memory_at_exit(void) { falcon_work_memory_release(); }
