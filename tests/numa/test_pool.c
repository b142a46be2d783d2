/* The pinned pool with a fake registrar: placement on node 0 (policy and
 * page location), bump allocation, slab lifetime in every release order,
 * dedicated slabs, the 1 GiB cap, registrar failures and the fallback
 * reason, unregister-before-engine-teardown, argument checks. */
#include <criterion/criterion.h>
#include <errno.h>
#include <numaif.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fake_sysfs.h"
#include "pinio/pool.h"
#include "pinio/bytes.h"
#include "pinio/sys.h"
#include "tests/common/helpers.h"

#define MiB ((size_t)1 << 20)

/* ---- a registrar that records calls ---------------------------------------- */

struct fake_reg {
    int fail_with;   /* returned by reg when non-zero */
    int reg_calls, unreg_calls, live;
    size_t lens[16];
    void *addrs[16];
    int unreg_slots[16];
};

static int fake_reg_fn(void *ctx, void *addr, size_t len, int *slot)
{
    struct fake_reg *f = ctx;
    int i = f->reg_calls++;
    if (i < 16) {
        f->lens[i] = len;
        f->addrs[i] = addr;
    }
    if (f->fail_with)
        return f->fail_with;
    f->live++;
    *slot = 100 + i;
    return 0;
}

static void fake_unreg_fn(void *ctx, int slot)
{
    struct fake_reg *f = ctx;
    if (f->unreg_calls < 16)
        f->unreg_slots[f->unreg_calls] = slot;
    f->unreg_calls++;
    f->live--;
}

static pinio_pool *make_pool(struct fake_reg *f, size_t slab, bool prefault, pinio_pool_placement pl)
{
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.placement = pl;
    o.node = 0;
    o.slab_size = slab;
    o.prefault = prefault;
    if (f)
        o.registrar = (pinio_pool_registrar){ .ctx = f, .reg = fake_reg_fn, .unreg = fake_unreg_fn };
    pinio_pool *p = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_pool_create(&p, &o, &d);
    cr_assert_eq(rc, 0, "pool_create: %d %s", rc, d.msg);
    return p;
}

/* Whether the page at `addr` is still mapped, from /proc/self/maps (probing
 * with a syscall on a possibly unmapped address is an error to valgrind). */
static bool mapped(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    uintptr_t a = (uintptr_t)addr;
    unsigned long lo, hi;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
            found = true;
    fclose(f);
    return found;
}

/* ---- options and arguments ------------------------------------------------ */

Test(pool, defaults)
{
    pinio_pool_opts o;
    memset(&o, 0xa5, sizeof(o));
    pinio_pool_opts_default(&o);
    cr_assert_eq(o.placement, PINIO_POOL_ANY);
    cr_assert_eq(o.slab_size, PINIO_POOL_SLAB_DEFAULT);
    cr_assert(o.prefault && o.huge_pages && !o.strict);
    cr_assert_null(o.registrar.reg);
    cr_assert_eq(o.struct_size, sizeof(o));
}

Test(pool, create_rejects_bad_options)
{
    pinio_pool_opts o;
    pinio_pool *p = (pinio_pool *)0x1;
    pinio_diag d = { 0 };

    pinio_pool_opts_default(&o);
    o.struct_size = 0; /* not from pinio_pool_opts_default() */
    cr_assert_eq(pinio_pool_create(&p, &o, &d), -EINVAL);
    cr_assert_not_null(strstr(d.msg, "struct_size"), "%s", d.msg);

    pinio_pool_opts_default(&o);
    o.registrar.reg = fake_reg_fn;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), -EINVAL, "reg without unreg");

    pinio_pool_opts_default(&o);
    o.placement = PINIO_POOL_NODE;
    o.node = 4000;
    cr_assert_eq(pinio_pool_create(&p, &o, &d), -EINVAL);
    cr_assert_not_null(strstr(d.msg, "4000"), "%s", d.msg);
    o.node = -2;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), -EINVAL);

    pinio_pool_opts_default(&o);
    o.placement = PINIO_POOL_FILE_NODE;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), -EINVAL, "FILE_NODE without a file");
    o.file = "/nonexistent/pinio-pool";
    cr_assert_eq(pinio_pool_create(&p, &o, &d), -ENOENT);
    cr_assert_not_null(strstr(d.msg, "/nonexistent/pinio-pool"), "%s", d.msg);

    pinio_pool_opts_default(&o);
    o.placement = (pinio_pool_placement)42;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), -EINVAL);
    cr_assert_eq(p, (pinio_pool *)0x1, "untouched on failure");
}

Test(pool, alloc_rejects_bad_arguments)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view v = { 0 };
    cr_assert_eq(pinio_pool_alloc(p, 100, 3, &v, NULL), -EINVAL, "align not a power of two");
    cr_assert_eq(pinio_pool_alloc(p, 100, 4 * MiB, &v, NULL), -EINVAL, "align above 2 MiB");
    cr_assert_eq(pinio_pool_alloc(p, PINIO_POOL_SLAB_MAX + 1, 0, &v, NULL), -EINVAL);
    cr_assert_null(v.ptr, "untouched on failure");
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs_created, 0, "nothing mapped for a refused request");

    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 0, 0, &v, &info), 0);
    cr_assert_eq(v.len, 0);
    cr_assert_null(v.ref, "empty regions hold no reference");
    cr_assert_eq(pinio_pool_alloc(p, 1, 2 * MiB, &v, NULL), 0);
    cr_assert_eq((uintptr_t)v.ptr % (2 * MiB), 0);
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}

/* ---- placement --------------------------------------------------------------- */

static void check_policy(const void *addr, int want_mode)
{
    int mode = -1;
    unsigned long mask[16] = { 0 };
    long rc = get_mempolicy(&mode, mask, sizeof(mask) * 8, (void *)addr, MPOL_F_ADDR);
    if (rc != 0 && (errno == ENOSYS || errno == EPERM))
        cr_skip_test("get_mempolicy unavailable here (%d)", errno);
    cr_assert_eq(rc, 0);
    cr_assert_eq(mode, want_mode, "VMA policy %d, want %d", mode, want_mode);
    cr_assert_eq(mask[0], 1UL, "policy nodemask must be node 0 alone");
    int node = -1;
    rc = get_mempolicy(&node, NULL, 0, (void *)addr, MPOL_F_NODE | MPOL_F_ADDR);
    cr_assert_eq(rc, 0);
    cr_assert_eq(node, 0, "page is on node %d", node);
}

Test(pool, placement_verified_on_node0)
{
    pinio_pool *p = make_pool(NULL, 4 * MiB, true, PINIO_POOL_NODE);
    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 123456, 0, &v, &info), 0);
    cr_assert_eq(info.node, 0);
    cr_assert_eq(info.verify, PINIO_POOL_VERIFY_OK, "verify: %s", pinio_pool_verify_name(info.verify));
    cr_assert_eq(info.found_node, 0);
    cr_assert_eq(info.reg, PINIO_POOL_REG_NONE);
    cr_assert_eq(info.slot, -1);
    /* move_pages alone would pass on a one-node machine without any mbind;
     * the VMA policy shows the pool really placed the memory. */
    check_policy(v.ptr, MPOL_PREFERRED);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.node, 0);
    cr_assert_not_null(strstr(st.placement, "node 0"), "%s", st.placement);
    cr_assert_eq(st.slabs_misplaced, 0);
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}

Test(pool, strict_binds)
{
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.placement = PINIO_POOL_NODE;
    o.node = 0;
    o.strict = true;
    o.slab_size = 2 * MiB;
    pinio_pool *p;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), 0);
    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &v, &info), 0);
    cr_assert_eq(info.verify, PINIO_POOL_VERIFY_OK);
    check_policy(v.ptr, MPOL_BIND);
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}

Test(pool, no_prefault_reports_not_present)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, false, PINIO_POOL_NODE);
    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &v, &info), 0);
    cr_assert_eq(info.verify, PINIO_POOL_VERIFY_NOT_PRESENT, "%s", pinio_pool_verify_name(info.verify));
    cr_assert_eq(info.found_node, -1);
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}

Test(pool, any_placement_is_not_checked)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, true, PINIO_POOL_ANY);
    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &v, &info), 0);
    cr_assert_eq(info.verify, PINIO_POOL_VERIFY_NOT_ASKED);
    cr_assert_eq(info.node, -1);
    cr_assert_geq(info.found_node, 0, "pages are somewhere once prefaulted");
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}

Test(pool, local_and_file_placement)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, true, PINIO_POOL_LOCAL);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_geq(st.node, 0);
    cr_assert_not_null(strstr(st.placement, "calling thread"), "%s", st.placement);
    pinio_pool_destroy(p);

    /* tmpfs: no device, so the pool falls back to the thread's node and says so. */
    char shm[256];
    cr_assert_eq(t_tmpname("/dev/shm", "pool", shm, sizeof shm), 0);
    int fd = mkstemp(shm);
    cr_assert_geq(fd, 0);
    close(fd);
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.placement = PINIO_POOL_FILE_NODE;
    o.file = shm;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), 0);
    pinio_pool_get_stats(p, &st);
    cr_assert_geq(st.node, 0);
    cr_assert_not_null(strstr(st.placement, "has no block device"), "%s", st.placement);
    pinio_pool_destroy(p);

    /* A fake topology that puts the file's device on node 0. */
    const char *root = fake_sysfs_build();
    cr_assert_not_null(root);
    struct stat sb;
    cr_assert_eq(stat(shm, &sb), 0);
    cr_assert_eq(fake_sysfs_add_disk(root, major(sb.st_dev), minor(sb.st_dev), "0000:f0:02.0", 0), 0);
    pinio_topo_opts to;
    pinio_topo_opts_default(&to);
    to.sysfs_root = root;
    pinio_topo *topo;
    cr_assert_eq(pinio_topo_open(&topo, &to), 0);
    o.topo = topo;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), 0);
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.node, 0);
    cr_assert_not_null(strstr(st.placement, "device of"), "%s", st.placement);
    pinio_pool_destroy(p);
    pinio_topo_close(topo);
    fake_sysfs_remove(root);
    unlink(shm);
}

/* ---- allocation ------------------------------------------------------------- */

Test(pool, bump_allocation_and_alignment)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view a, b, c;
    pinio_pool_region_info ia, ib, ic;
    cr_assert_eq(pinio_pool_alloc(p, 100, 0, &a, &ia), 0);
    cr_assert_eq(pinio_pool_alloc(p, 100, 0, &b, &ib), 0);
    cr_assert_eq(pinio_pool_alloc(p, 10, 64, &c, &ic), 0);
    cr_assert_eq((uintptr_t)a.ptr % 4096, 0, "default alignment is 4096 (O_DIRECT)");
    cr_assert_eq(b.ptr, a.ptr + 4096, "next region at the next 4 KiB boundary");
    cr_assert_eq(c.ptr, b.ptr + 128, "64-byte alignment after 100 bytes");
    cr_assert_eq(ia.slab_base, ib.slab_base);
    cr_assert_eq(ib.offset, 4096);
    cr_assert_eq(ia.data, (uint8_t *)a.ptr);
    cr_assert_eq(a.len, 100);
    memset(ia.data, 0xa1, 100);
    memset(ib.data, 0xb2, 100);
    memset(ic.data, 0xc3, 10);
    cr_assert_eq(a.ptr[99], 0xa1);
    cr_assert_eq(b.ptr[0], 0xb2, "regions do not overlap");
    cr_assert_eq(c.ptr[9], 0xc3);
    cr_assert_eq(b.ptr[100], 0, "fresh slab memory is zero");

    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs, 1);
    cr_assert_eq(st.bytes_mapped, 2 * MiB);
    cr_assert_eq(st.bytes_handed_out, 210);

    /* Exactly what is left fits in the same slab; one byte more does not. */
    size_t left = 2 * MiB - 8192;
    pinio_view d, e;
    pinio_pool_region_info id, ie;
    cr_assert_eq(pinio_pool_alloc(p, left, 0, &d, &id), 0);
    cr_assert_eq(id.slab_base, ia.slab_base);
    cr_assert_eq(id.offset, 8192);
    cr_assert_eq(pinio_pool_alloc(p, 1, 0, &e, &ie), 0);
    cr_assert_neq(ie.slab_base, ia.slab_base, "a full slab is followed by a new one");
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs, 2);
    cr_assert_eq(st.slabs_created, 2);

    /* The full slab lives on only through its regions. */
    pinio_view_release(&a);
    pinio_view_release(&b);
    pinio_view_release(&c);
    cr_assert(mapped(id.slab_base));
    pinio_view_release(&d);
    cr_assert(!mapped(id.slab_base), "full slab unmapped with its last region");
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs, 1);
    cr_assert_eq(st.bytes_mapped, 2 * MiB);
    pinio_view_release(&e);
    cr_assert(mapped(ie.slab_base), "the current slab is also held by the pool");
    pinio_pool_destroy(p);
    cr_assert(!mapped(ie.slab_base));
}

Test(pool, query_finds_live_slabs_only)
{
    pinio_pool *p = make_pool(NULL, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view a;
    pinio_pool_region_info ia, q;
    cr_assert_eq(pinio_pool_alloc(p, 5000, 0, &a, &ia), 0);
    cr_assert_eq(pinio_pool_query(p, a.ptr + 10, 100, &q), 0);
    cr_assert_eq(q.slab_base, ia.slab_base);
    cr_assert_eq(q.offset, 10);
    cr_assert_eq(q.data, (uint8_t *)a.ptr + 10);
    cr_assert_eq(pinio_pool_query(p, (uint8_t *)ia.slab_base + 2 * MiB - 1, 2, &q), -ENOENT,
                 "range past the slab end");
    int local;
    cr_assert_eq(pinio_pool_query(p, &local, 1, &q), -ENOENT);
    cr_assert_eq(pinio_pool_query(p, NULL, 1, &q), -EINVAL);
    pinio_view_release(&a);
    pinio_pool_destroy(p);
}

/* ---- lifetime: every release order ----------------------------------------- */

Test(pool, release_views_then_destroy)
{
    struct fake_reg f = { 0 };
    pinio_pool *p = make_pool(&f, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view a, b;
    pinio_pool_region_info ia;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &a, &ia), 0);
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &b, NULL), 0);
    cr_assert_eq(ia.reg, PINIO_POOL_REG_OK);
    cr_assert_eq(ia.slot, 100);
    cr_assert_eq(f.reg_calls, 1);
    cr_assert_eq(f.addrs[0], ia.slab_base);
    cr_assert_eq(f.lens[0], 2 * MiB);
    pinio_view_release(&a);
    pinio_view_release(&b);
    cr_assert_eq(f.unreg_calls, 0, "the pool still holds its current slab");
    cr_assert(mapped(ia.slab_base));
    pinio_pool_destroy(p);
    cr_assert_eq(f.unreg_calls, 1);
    cr_assert_eq(f.unreg_slots[0], 100);
    cr_assert(!mapped(ia.slab_base));
}

Test(pool, destroy_then_release_views_in_any_order)
{
    for (int order = 0; order < 2; order++) {
        struct fake_reg f = { 0 };
        pinio_pool *p = make_pool(&f, 2 * MiB, true, PINIO_POOL_ANY);
        pinio_view a, b, a2;
        pinio_pool_region_info ia;
        cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &a, &ia), 0);
        cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &b, NULL), 0);
        memset(ia.data, 0x5a, 4096);
        cr_assert_eq(pinio_view_slice(&a, 10, 20, &a2), 0);
        pinio_pool_destroy(p);
        cr_assert_eq(f.unreg_calls, 0, "regions keep the slab registered after destroy");
        cr_assert(mapped(ia.slab_base));
        pinio_view *first = order ? &b : &a, *second = order ? &a : &b;
        pinio_view_release(first);
        cr_assert_eq(f.unreg_calls, 0);
        pinio_view_release(second);
        cr_assert_eq(f.unreg_calls, 0, "a slice of a region holds the slab too");
        cr_assert_eq(a2.ptr[0], 0x5a, "memory intact while referenced");
        pinio_view_release(&a2);
        cr_assert_eq(f.unreg_calls, 1, "unregistered exactly once, with the last view");
        cr_assert_eq(f.live, 0);
        cr_assert(!mapped(ia.slab_base));
    }
}

static void *release_on_thread(void *arg)
{
    pinio_view_release(arg);
    return NULL;
}

static void release_elsewhere(pinio_view *v)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, release_on_thread, v), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
}

Test(pool, views_released_on_other_threads_after_destroy)
{
    /* Each slab's free callback runs on whichever thread drops the last
     * reference; the pool state must outlive the handle until then. */
    struct fake_reg f = { 0 };
    pinio_pool *p = make_pool(&f, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view v[3];
    pinio_pool_region_info info[3];
    cr_assert_eq(pinio_pool_alloc(p, MiB, 0, &v[0], &info[0]), 0);
    cr_assert_eq(pinio_pool_alloc(p, MiB + 4096, 0, &v[1], &info[1]), 0); /* new slab */
    cr_assert_eq(pinio_pool_alloc(p, 8 * MiB, 0, &v[2], &info[2]), 0);    /* dedicated */
    cr_assert_neq(info[0].slab_base, info[1].slab_base);
    cr_assert_eq(info[2].slab_size, 8 * MiB);
    pinio_pool_destroy(p);
    cr_assert_eq(f.reg_calls, 3);
    cr_assert_eq(f.unreg_calls, 0);
    release_elsewhere(&v[1]);
    cr_assert_eq(f.unreg_calls, 1);
    release_elsewhere(&v[2]);
    release_elsewhere(&v[0]);
    cr_assert_eq(f.unreg_calls, 3);
    for (int i = 0; i < 3; i++)
        cr_assert(!mapped(info[i].slab_base));
}

Test(pool, dedicated_slab_for_large_regions)
{
    struct fake_reg f = { 0 };
    pinio_pool *p = make_pool(&f, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view small1, big, small2;
    pinio_pool_region_info i1, ib, i2;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &small1, &i1), 0);
    cr_assert_eq(pinio_pool_alloc(p, 5 * MiB + 1, 0, &big, &ib), 0);
    cr_assert_eq(ib.slab_size, 6 * MiB, "rounded up to 2 MiB");
    cr_assert_eq(ib.offset, 0);
    cr_assert_eq(big.len, 5 * MiB + 1);
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &small2, &i2), 0);
    cr_assert_eq(i2.slab_base, i1.slab_base, "a large request leaves the current slab in use");
    cr_assert(pinio_view_is_unique(&big), "only the region holds a dedicated slab");
    pinio_view_release(&big);
    cr_assert(!mapped(ib.slab_base), "dedicated slab freed with its region, pool alive");
    cr_assert_eq(f.unreg_calls, 1);
    pinio_view_release(&small1);
    pinio_view_release(&small2);
    pinio_pool_destroy(p);
    cr_assert_eq(f.unreg_calls, 2);
}

Test(pool, slab_cap_is_one_gib)
{
    /* prefault and huge pages off: the gigabyte is mapped but never touched. */
    struct fake_reg f = { 0 };
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.slab_size = (size_t)4 << 30; /* asks for more than the kernel can register */
    o.prefault = false;
    o.huge_pages = false;
    o.registrar = (pinio_pool_registrar){ .ctx = &f, .reg = fake_reg_fn, .unreg = fake_unreg_fn };
    pinio_pool *p;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), 0);

    pinio_view v, w;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, PINIO_POOL_SLAB_MAX + 1, 0, &v, NULL), -EINVAL);
    cr_assert_eq(f.reg_calls, 0);
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &v, &info), 0);
    cr_assert_eq(info.slab_size, PINIO_POOL_SLAB_MAX, "slab_size is capped at 1 GiB");
    /* The memlock pre-check may skip the registrar (no CAP_IPC_LOCK, small
     * limit); when it is called, it sees exactly 1 GiB. */
    if (info.reg == PINIO_POOL_REG_OK)
        cr_assert_eq(f.lens[0], PINIO_POOL_SLAB_MAX);
    else
        cr_assert_eq(info.reg, PINIO_POOL_REG_OVER_MEMLOCK);
    cr_assert_eq(pinio_pool_alloc(p, PINIO_POOL_SLAB_MAX, 0, &w, &info), 0, "a full 1 GiB region");
    cr_assert_eq(info.slab_size, PINIO_POOL_SLAB_MAX);
    cr_assert_eq(w.len, PINIO_POOL_SLAB_MAX);
    if (info.reg == PINIO_POOL_REG_OK)
        cr_assert_eq(f.lens[1], PINIO_POOL_SLAB_MAX);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs, 2);
    cr_assert_eq(st.bytes_mapped, (uint64_t)2 << 30);
    pinio_view_release(&w);
    pinio_view_release(&v);
    pinio_pool_destroy(p);
    cr_assert_eq(f.live, 0);
}

/* ---- registration failures ----------------------------------------------- */

static void check_fallback(int err, const char *name, bool memlock_hint)
{
    struct fake_reg f = { .fail_with = err };
    pinio_pool *p = make_pool(&f, 2 * MiB, true, PINIO_POOL_ANY);
    pinio_view v;
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 8192, 0, &v, &info), 0, "registration failure is not fatal");
    cr_assert_eq(info.reg, PINIO_POOL_REG_FAILED);
    cr_assert_eq(info.reg_error, err);
    cr_assert_eq(info.slot, -1);
    memset(info.data, 0x77, 8192);
    cr_assert_eq(v.ptr[8191], 0x77, "unregistered memory is still usable");
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs_fallback, 1);
    cr_assert_eq(st.slabs_registered, 0);
    cr_assert_eq(st.bytes_registered, 0);
    cr_assert_not_null(strstr(st.fallback_reason, name), "%s", st.fallback_reason);
    if (memlock_hint) {
        cr_assert_not_null(strstr(st.fallback_reason, "RLIMIT_MEMLOCK"), "%s", st.fallback_reason);
        cr_assert_not_null(strstr(st.fallback_reason, "ulimit -l"), "%s", st.fallback_reason);
        cr_assert_not_null(strstr(st.fallback_reason, "limits.conf"), "%s", st.fallback_reason);
        cr_assert_not_null(strstr(st.fallback_reason, "CAP_IPC_LOCK"), "%s", st.fallback_reason);
    }
    pinio_view_release(&v);
    pinio_pool_destroy(p);
    cr_assert_eq(f.unreg_calls, 0, "a slab that was never registered is never unregistered");
}

Test(pool, registrar_enomem_falls_back)
{
    check_fallback(-ENOMEM, "ENOMEM", true);
}

Test(pool, registrar_eperm_falls_back)
{
    check_fallback(-EPERM, "EPERM", true);
}

Test(pool, registrar_other_error_falls_back)
{
    check_fallback(-EFAULT, "EFAULT", false);
}

Test(pool, unregister_before_engine_teardown)
{
    struct fake_reg f = { 0 };
    pinio_pool *p = make_pool(&f, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view a, b;
    pinio_pool_region_info ia, ib, q;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &a, &ia), 0);
    cr_assert_eq(ia.reg, PINIO_POOL_REG_OK);
    pinio_pool_unregister(p);
    cr_assert_eq(f.unreg_calls, 1);
    cr_assert_eq(pinio_pool_query(p, a.ptr, a.len, &q), 0);
    cr_assert_eq(q.reg, PINIO_POOL_REG_NONE);
    cr_assert_eq(q.slot, -1);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.bytes_registered, 0);
    cr_assert_eq(pinio_pool_alloc(p, 3 * MiB, 0, &b, &ib), 0);
    cr_assert_eq(ib.reg, PINIO_POOL_REG_NONE, "no registration after the registrar is dropped");
    cr_assert_eq(f.reg_calls, 1);
    pinio_view_release(&a);
    pinio_view_release(&b);
    pinio_pool_destroy(p);
    cr_assert_eq(f.unreg_calls, 1, "never unregistered twice");
}

/* Above 1 GiB a region is adjacent slabs over one reserved range: one
 * contiguous array, two registrable buffers, freed together. Nothing is
 * prefaulted, so only the touched pages cost memory. */
Test(pool, contiguous_region_above_one_gib)
{
    pinio_pool *p = make_pool(NULL, 0, false, PINIO_POOL_NODE);
    const size_t len = PINIO_POOL_SLAB_MAX + 4 * MiB;
    pinio_view v;
    pinio_pool_region_info ri;
    cr_assert_eq(pinio_pool_alloc_contig(p, len, &v, &ri), 0);
    uint8_t *base = ri.data;
    cr_assert_eq((const uint8_t *)base, v.ptr);
    cr_assert_eq(v.len, len);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs, 2);

    /* both sides of the slab boundary and the last byte are one array */
    base[0] = 1;
    base[PINIO_POOL_SLAB_MAX - 1] = 2;
    base[PINIO_POOL_SLAB_MAX] = 3;
    base[len - 1] = 4;
    pinio_pool_region_info a, b;
    cr_assert_eq(pinio_pool_query(p, base, 1, &a), 0);
    cr_assert_eq(pinio_pool_query(p, base + PINIO_POOL_SLAB_MAX, 1, &b), 0);
    cr_assert_eq(a.slab_base, (void *)base);
    cr_assert_eq(a.slab_size, PINIO_POOL_SLAB_MAX);
    cr_assert_eq(b.slab_base, (void *)(base + PINIO_POOL_SLAB_MAX));
    /* a read must not straddle the boundary: no single slab holds it */
    cr_assert_eq(pinio_pool_query(p, base + PINIO_POOL_SLAB_MAX - 1, 2, &a), -ENOENT);

    /* placement is checked over the pages a range really has */
    pinio_pool_region_info vi;
    cr_assert_eq(pinio_pool_verify_range(p, base, 4096, &vi), 0);
    cr_assert_eq(vi.verify, PINIO_POOL_VERIFY_OK, "%s", pinio_pool_verify_name(vi.verify));
    cr_assert_eq(pinio_pool_verify_range(p, base, len, &vi), 0);
    cr_assert_eq(vi.verify, PINIO_POOL_VERIFY_NOT_PRESENT, "%s", pinio_pool_verify_name(vi.verify));

    pinio_pool_destroy(p);
    cr_assert(mapped(base + PINIO_POOL_SLAB_MAX), "the region keeps its slabs after destroy");
    cr_assert_eq(base[PINIO_POOL_SLAB_MAX - 1], 2);
    pinio_view_release(&v);
    cr_assert_not(mapped(base));
    cr_assert_not(mapped(base + PINIO_POOL_SLAB_MAX));
}

/* The public contiguous-region contract at its edges: up to one slab it is
 * pinio_pool_alloc(); above, every slab is registered on its own and `reg`
 * says OK only when all are; releasing the view unregisters them all;
 * verify_range knows only live slabs of its pool. */
Test(pool, contig_contract_edges)
{
    struct fake_reg f = { 0 };
    pinio_pool *p = make_pool(&f, 2 * MiB, false, PINIO_POOL_ANY);
    pinio_view v;
    pinio_pool_region_info ri;
    cr_assert_eq(pinio_pool_alloc_contig(NULL, 4096, &v, &ri), -EINVAL);
    cr_assert_eq(pinio_pool_alloc_contig(p, 4096, NULL, &ri), -EINVAL);

    cr_assert_eq(pinio_pool_alloc_contig(p, 0, &v, &ri), 0);
    cr_assert_eq(v.len, 0);
    cr_assert_null(v.ref, "len 0: no reference");

    cr_assert_eq(pinio_pool_alloc_contig(p, 3 * MiB, &v, &ri), 0);
    cr_assert_eq(ri.slab_size, 4 * MiB, "one dedicated slab, as pinio_pool_alloc gives");
    cr_assert_eq(((uintptr_t)v.ptr) % 4096, 0);
    cr_assert_eq(ri.reg, PINIO_POOL_REG_OK);
    cr_assert_eq(f.reg_calls, 1);
    pinio_view_release(&v);
    cr_assert_eq(f.unreg_calls, 1);

    const size_t len = PINIO_POOL_SLAB_MAX + 2 * MiB;
    cr_assert_eq(pinio_pool_alloc_contig(p, len, &v, &ri), 0);
    pinio_sysinfo si;
    bool fits = pinio_sys_probe(&si) == 0 && si.registrable >= PINIO_POOL_SLAB_MAX;
    cr_assert_eq(ri.reg, fits ? PINIO_POOL_REG_OK : PINIO_POOL_REG_OVER_MEMLOCK, "%d", ri.reg);
    cr_assert_eq(ri.slab_base, (const void *)v.ptr, "the first slab starts the range");

    pinio_pool_region_info vi;
    const uint8_t *base = v.ptr;
    cr_assert_eq(pinio_pool_verify_range(p, base + PINIO_POOL_SLAB_MAX, 4096, &vi), 0);
    cr_assert_eq(vi.slab_base, (const void *)(base + PINIO_POOL_SLAB_MAX), "the slab holding addr");
    cr_assert_eq(vi.verify, PINIO_POOL_VERIFY_NOT_ASKED, "no node asked for");
    int local = 0;
    cr_assert_eq(pinio_pool_verify_range(p, &local, 4, &vi), -ENOENT, "not a slab of this pool");
    cr_assert_eq(pinio_pool_verify_range(p, NULL, 4, &vi), -EINVAL);
    cr_assert_eq(pinio_pool_verify_range(p, base, 4, NULL), -EINVAL);

    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.slabs_registered, (size_t)f.live, "every slab the registrar took");
    cr_assert(!fits || st.slabs_registered == 2, "%zu", st.slabs_registered);
    pinio_view_release(&v);
    cr_assert_eq(f.live, 0, "every registered slab unregistered with the view");
    cr_assert_eq(pinio_pool_verify_range(p, base, 4096, &vi), -ENOENT, "released: gone");
    pinio_pool_destroy(p);
}

/* The seed's staging use: pinned bytes filled in place from a file window,
 * then handed on; a write after the hand-on copies, never reaching the
 * other holder. */
Test(pool, pinned_bytes_are_written_in_place_then_handed_on)
{
    pinio_pool *p = make_pool(NULL, 4 << 20, false, PINIO_POOL_ANY);
    char path[300];
    cr_assert_eq(t_tmpfile("/var/tmp", "poolbytes", NULL, 1 << 20, 9, path, sizeof(path)), 0);
    pinio_file *file = NULL;
    cr_assert_eq(pinio_file_open(&file, path, NULL), 0);
    pinio_bytes *win = NULL;
    cr_assert_eq(pinio_bytes_from_file(&win, file, 4096, 65536, NULL), 0);

    pinio_bytes *b = NULL;
    cr_assert_eq(pinio_pool_alloc_bytes(p, 65536, 0, &b), 0);
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_PINNED);
    uint8_t *w = NULL;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &w, NULL), 0,
                 "the only holder writes in place");
    pinio_pool_region_info ri;
    cr_assert_eq(pinio_pool_query(p, w, 65536, &ri), 0, "the bytes are the pool's memory");
    cr_assert_eq(pinio_bytes_read(win, 0, w, 65536, NULL), 0, "a file window read into it");
    cr_assert(t_pattern_check(w, 65536, 9, 4096, NULL));

    pinio_bytes *handed = NULL;
    cr_assert_eq(pinio_bytes_clone(b, PINIO_ACCESS_ZERO_COPY, &handed, NULL), 0);
    const uint8_t *r = NULL;
    cr_assert_eq(pinio_bytes_data(handed, PINIO_ACCESS_ZERO_COPY, &r, NULL), 0);
    cr_assert_eq(r, w, "handed on without a copy");
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &w, NULL), PINIO_EWOULD_COPY,
                 "shared now: a write must copy");
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_COPY, &w, NULL), 0);
    memset(w, 0, 65536);
    cr_assert(t_pattern_check(r, 65536, 9, 4096, NULL), "the other holder keeps the file's bytes");
    cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_NATIVE, "the copy is heap memory");
    cr_assert_eq(pinio_bytes_property(handed), PINIO_PROP_PINNED);
    uint8_t *hw = NULL;
    cr_assert_eq(pinio_bytes_data_mut(handed, PINIO_ACCESS_ZERO_COPY, &hw, NULL), 0,
                 "alone again: the other holder writes in place");
    cr_assert_eq(hw, r);
    pinio_pool_destroy(p);             /* the bytes outlive the pool */
    cr_assert(t_pattern_check(r, 65536, 9, 4096, NULL));
    pinio_bytes_free(handed);
    pinio_bytes_free(b);
    pinio_bytes_free(win);
    pinio_file_release(file);
    unlink(path);
    cr_assert_eq(pinio_pool_alloc_bytes(NULL, 1, 0, &b), -EINVAL);
}
