/*
 * The library's per-call work memory, kept between calls: the CPU
 * drivers' blocks (kernels/framework/head.h) and the memory array of
 * every state (src/state.c), among them the copy each falcon_run works on.
 *
 * Freed to malloc, such a block goes back to the system: a block of 32 MiB
 * or more (glibc's largest mmap threshold) is unmapped, and smaller ones,
 * freed at the end of a call, leave a free top of the heap above the trim
 * threshold, which free returns too. The next call then faults every page
 * in again, which in a virtual machine costs short calls most of their
 * time (docs/performance.md, "Measurements behind the library's
 * choices"). So a freed block of at least falcon_work_keep_min bytes (16 KiB) goes to a
 * slot instead, and the next request it fits takes it back, its pages
 * still mapped.
 *
 * Nothing depends on the contents: every user writes what it reads (the
 * tests compare runs on reused blocks poisoned with NaN bytes with runs on
 * fresh ones, bit for bit). A request takes the smallest kept block that
 * holds it and is at most twice its size (a small request does not take a
 * large block another call needs). The slots hold at most
 * FALCON_WORK_SLOTS blocks, the largest freed, and falcon_work_keep_max
 * bytes in all (1 GiB; a block that would pass it is freed as before);
 * falcon_work_memory_release returns them, as the process's exit does.
 * Under AddressSanitizer nothing is kept (a kept block would hide a use
 * after its free), unless a test sets the threshold.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "internal.h"
#include "../kernels/framework/head.h"

#define FALCON_WORK_ALIGN 64

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FALCON_WORK_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(FALCON_WORK_UNDER_ASAN)
size_t falcon_work_keep_min = SIZE_MAX;
#else
size_t falcon_work_keep_min = (size_t)16 << 10;
#endif
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
            if (slot[i].p && slot[i].bytes >= bytes && slot[i].bytes / 2 <= bytes &&
                (best < 0 || slot[i].bytes < slot[best].bytes))
                best = i;
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

const falcon_work_memory falcon_work_library = {falcon_work_get, falcon_work_put};
