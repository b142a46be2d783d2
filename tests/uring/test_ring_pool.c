/* The ring as the pool's registrar: slabs are registered through it, reads
 * into pool regions are READ_FIXED, and a slab released on another thread
 * (where the kernel refuses io_uring_register under SINGLE_ISSUER) leaves the
 * address lookup at once and its kernel slot is cleared by the ring's thread
 * at its next read. */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>

#include "helpers.h"
#include "pinio/pool.h"
#include "pinio/view.h"

static void *release_view(void *v)
{
    pinio_view_release(v);
    return NULL;
}

Test(pool, registrar_read_fixed_and_foreign_release)
{
    pinio_ring *r;
    cr_assert_eq(pinio_ring_create(&r, NULL, NULL), 0);
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    if (ri.backend != PINIO_BACKEND_FIXED_DIRECT)
        cr_skip_test("buffer registration unavailable here: %s", ri.reason);
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.slab_size = 4u << 20;
    po.registrar = pinio_ring_registrar(r);
    pinio_pool *pool;
    pinio_diag d = {0};
    cr_assert_eq(pinio_pool_create(&pool, &po, &d), 0, "%s", d.msg);

    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", 3u << 20, 11, path, sizeof path), 0);
    pinio_ring_file *f;
    cr_assert_eq(pinio_ring_file_open(r, path, &f, &d), 0, "%s", d.msg);

    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(pool, 3u << 20, 0, &v, &info), 0);
    cr_assert_eq(info.reg, PINIO_POOL_REG_OK, "slab registered through the ring (%d)",
                 info.reg_error);
    pinio_ring_get_info(r, &ri);
    unsigned regions = ri.regions;
    memset(info.data, T_POISON, 3u << 20);
    pinio_read_req q = {.file = f, .offset = 0, .len = 3u << 20, .dst = info.data};
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, &d), 0, "%s", d.msg);
    cr_assert_null(t_check_req(path, &q));
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.plain_ops, 0u, "every piece into the pool region is READ_FIXED");
    cr_assert_gt(ri.fixed_ops, 0u);

    /* Last reference dropped on another thread: the slab is unregistered
     * there (deferred) and unmapped. */
    pinio_pool_destroy(pool);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, release_view, &v), 0);
    pthread_join(t, NULL);
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.regions, regions - 1, "region left the lookup at once");

    /* Same address range, fresh unregistered memory: plain reads, right data. */
    uint8_t *m = t_map(1u << 20);
    memset(m, T_POISON, 1u << 20);
    pinio_read_req q2 = {.file = f, .offset = 4096, .len = 1u << 20, .dst = m};
    cr_assert_eq(pinio_ring_read_bulk(r, &q2, 1, &d), 0, "%s", d.msg);
    cr_assert_null(t_check_req(path, &q2));
    /* The drained slot is free again: a new registration can take it. */
    int slot;
    cr_assert_eq(pinio_ring_register_region(r, m, 1u << 20, &slot), 0);
    cr_assert_eq(pinio_ring_unregister_region(r, slot), 0);
    munmap(m, 1u << 20);
    pinio_ring_file_close(f);
    pinio_ring_destroy(r);
    unlink(path);
}
