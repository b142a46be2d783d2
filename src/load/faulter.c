/* Fresh memory faulted in ahead of the reads on a thread of its own: the
 * arena's (arena.c) and a node-local share's private memory (coop.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/load/load_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

/* Chunks the helper faults at a time: two huge pages. */
#define FAULT_CHUNK ((size_t)4 << 20)

/* MADV_POPULATE_WRITE faults pages in without writing to them, so it is
 * safe while reads land in the same pages (a touch loop would not be: it
 * could overwrite bytes a read already placed). Kernels without it answer
 * EINVAL and the reads fault the pages themselves. */
static void *fault_ahead(void *arg)
{
    pinio__faulter *f = arg;
    for (size_t off = 0; off < f->len; off += FAULT_CHUNK) {
        if (atomic_load_explicit(&f->stop, memory_order_relaxed))
            break;
        size_t n = f->len - off < FAULT_CHUNK ? f->len - off : FAULT_CHUNK;
        if (madvise(f->base + off, n, MADV_POPULATE_WRITE) != 0)
            break;
    }
    return NULL;
}

void pinio__faulter_start(pinio__faulter *f, uint8_t *base, size_t len)
{
    f->base = base;
    f->len = len;
    atomic_init(&f->stop, false);
    /* Below a few chunks a thread costs more than it saves; without a
     * second CPU the two would only take turns. */
    if (len < 4 * FAULT_CHUNK || sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    f->running = pthread_create(&f->thread, NULL, fault_ahead, f) == 0;
}

void pinio__faulter_stop(pinio__faulter *f)
{
    if (!f->running)
        return;
    atomic_store_explicit(&f->stop, true, memory_order_relaxed);
    pthread_join(f->thread, NULL);
    f->running = false;
}
