/* Concurrency (run under ThreadSanitizer): threads allocate from one pool
 * and hand regions to other threads that release them, while the pool's
 * owner queries it, drops the registrar and finally destroys it with regions
 * still in flight. Every slab must be unregistered once and unmapped. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/pool.h"

#define THREADS 4
#define ROUNDS 300

static atomic_int reg_live, reg_total, unreg_total;

static int reg(void *ctx, void *addr, size_t len, int *slot)
{
    (void)ctx;
    (void)addr;
    (void)len;
    *slot = atomic_fetch_add(&reg_total, 1);
    atomic_fetch_add(&reg_live, 1);
    return 0;
}

static void unreg(void *ctx, int slot)
{
    (void)ctx;
    (void)slot;
    atomic_fetch_add(&unreg_total, 1);
    atomic_fetch_sub(&reg_live, 1);
}

static pinio_pool *pool;
static pinio_view handed[THREADS][ROUNDS];
static atomic_int failures;

static void *allocator(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        size_t len = 1000 + (size_t)((id * 7919 + i * 104729) % 300000);
        pinio_pool_region_info info;
        if (pinio_pool_alloc(pool, len, 0, &handed[id][i], &info) != 0) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        memset(info.data, id, len); /* TSan flags overlapping regions */
    }
    return NULL;
}

static void *releaser(void *arg)
{
    int id = (int)(intptr_t)arg;
    /* Release another thread's regions, in reverse order. */
    for (int i = ROUNDS - 1; i >= 0; i--) {
        pinio_view *v = &handed[(id + 1) % THREADS][i];
        if (v->len && v->ptr[v->len - 1] != (uint8_t)((id + 1) % THREADS))
            atomic_fetch_add(&failures, 1);
        pinio_view_release(v);
    }
    return NULL;
}

int main(void)
{
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.slab_size = 4 << 20;
    o.prefault = false;
    o.registrar = (pinio_pool_registrar){ .ctx = NULL, .reg = reg, .unreg = unreg };
    if (pinio_pool_create(&pool, &o, NULL) != 0) {
        puts("numa_pool_threads: pool_create failed");
        return 1;
    }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, allocator, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pinio_pool_stats st;
    pinio_pool_get_stats(pool, &st);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, releaser, (void *)(intptr_t)i);
    pinio_pool_unregister(pool); /* races with slab frees on the releasers */
    pinio_pool_destroy(pool);     /* with regions still held by them */
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    int ok = atomic_load(&failures) == 0 && atomic_load(&reg_live) == 0 &&
             atomic_load(&unreg_total) == atomic_load(&reg_total) && st.slabs_created > 1;
    printf("numa_pool_threads: %zu slabs, %d registered, %d unregistered, %d failures: %s\n",
           st.slabs_created, atomic_load(&reg_total), atomic_load(&unreg_total),
           atomic_load(&failures), ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
