/* The OS memory primitives (numa/prim.h): aligned mappings and
 * reservations, MAP_FIXED filling, bind -> populate -> where lands the pages
 * on the node asked for, node existence, running on a node. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <numaif.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "numa/prim.h"

#define MiB ((size_t)1 << 20)

Test(prim, map_is_aligned_writable_and_unmapped)
{
    for (size_t align = 4096; align <= 4 * PINIO__PRIM_HUGE_SIZE; align *= 8) {
        uint8_t *m = pinio__prim_map(3 * MiB, align, false);
        cr_assert_not_null(m);
        cr_assert_eq((uintptr_t)m % align, 0, "aligned to %zu", align);
        m[0] = 1;
        m[3 * MiB - 1] = 2;
        pinio__prim_unmap(m, 3 * MiB);
    }
    pinio__prim_unmap(NULL, 0); /* no-op */
    cr_assert_null(pinio__prim_map((size_t)1 << 62, 4096, false), "absurd size: NULL");
}

Test(prim, reserve_then_fill_with_map_fixed)
{
    uint8_t *r = pinio__prim_map(4 * MiB, PINIO__PRIM_HUGE_SIZE, true);
    cr_assert_not_null(r);
    cr_assert_eq((uintptr_t)r % PINIO__PRIM_HUGE_SIZE, 0);
    cr_assert_eq(pinio__prim_map_fixed(r + 2 * MiB, 2 * MiB), 0);
    r[2 * MiB] = 7; /* the filled half is writable */
    cr_assert_eq(r[2 * MiB], 7);
    void *page = r + 2 * MiB;
    int st = 0;
    int rc = pinio__prim_where(&page, 1, &st);
    if (rc == 0)
        cr_assert_geq(st, 0, "a touched page has a node");
    pinio__prim_unmap(r, 4 * MiB);
}

Test(prim, bind_populate_where)
{
    size_t len = 4 * MiB;
    uint8_t *m = pinio__prim_map(len, PINIO__PRIM_HUGE_SIZE, false);
    cr_assert_not_null(m);
    cr_assert_eq(pinio__prim_bind(m, len, -1, false), -EINVAL);
    cr_assert_eq(pinio__prim_bind(m, len, 1024, false), -EINVAL);
    int rc = pinio__prim_bind(m, len, 0, true);
    cr_assert(rc == 0 || rc == -EPERM || rc == -ENOSYS, "%d", rc);
    int hrc = pinio__prim_huge(m, len);
    cr_assert(hrc == 0 || hrc == -EINVAL, "%d", hrc);

    void *pages[2] = {m, m + len - 4096};
    int st[2] = {99, 99};
    if (pinio__prim_where(pages, 2, st) == 0)
        cr_assert(st[0] == -ENOENT && st[1] == -ENOENT, "not faulted yet: %d %d", st[0], st[1]);
    cr_assert_eq(pinio__prim_populate(m, len), 0);
    if (pinio__prim_where(pages, 2, st) == 0) {
        cr_assert_eq(st[0], 0, "populated on node 0");
        cr_assert_eq(st[1], 0);
    }
    pinio__prim_unmap(m, len);
}

Test(prim, nodes)
{
    cr_assert(pinio__prim_node_exists(0), "every system has node 0");
    cr_assert_not(pinio__prim_node_exists(-1));
    cr_assert_not(pinio__prim_node_exists(100000));
    cr_assert_eq(pinio__prim_run_on_node(100000), -EINVAL);
    cr_assert_eq(pinio__prim_run_on_node(-1), -EINVAL);

    cpu_set_t before, after;
    cr_assert_eq(sched_getaffinity(0, sizeof before, &before), 0);
    cr_assert_eq(pinio__prim_run_on_node(0), 0);
    cr_assert_eq(sched_getaffinity(0, sizeof after, &after), 0);
    cr_assert_gt(CPU_COUNT(&after), 0, "some CPU left to run on");
    cr_assert_eq(sched_setaffinity(0, sizeof before, &before), 0);
}

/* Issue 37 "Also": the policy calls go through libnuma's numaif.h wrappers
 * (no global state, no printing), not raw syscall(). This executable's own
 * mbind and move_pages stand in front of libnuma's (the static library's
 * calls bind to them), count, and pass the call on to libnuma. */
static atomic_int mbind_calls, move_pages_calls;

long mbind(void *addr, unsigned long len, int mode, const unsigned long *nodemask,
           unsigned long maxnode, unsigned flags)
{
    atomic_fetch_add(&mbind_calls, 1);
    long (*real)(void *, unsigned long, int, const unsigned long *, unsigned long, unsigned) =
        (long (*)(void *, unsigned long, int, const unsigned long *, unsigned long,
                  unsigned))dlsym(RTLD_NEXT, "mbind");
    return real ? real(addr, len, mode, nodemask, maxnode, flags) : (errno = ENOSYS, -1);
}

long move_pages(int pid, unsigned long count, void **pages, const int *nodes, int *status,
                int flags)
{
    atomic_fetch_add(&move_pages_calls, 1);
    long (*real)(int, unsigned long, void **, const int *, int *, int) =
        (long (*)(int, unsigned long, void **, const int *, int *, int))dlsym(RTLD_NEXT,
                                                                            "move_pages");
    return real ? real(pid, count, pages, nodes, status, flags) : (errno = ENOSYS, -1);
}

Test(prim, policy_calls_go_through_libnuma_s_wrappers)
{
    size_t len = 2 * MiB;
    uint8_t *m = pinio__prim_map(len, PINIO__PRIM_HUGE_SIZE, false);
    cr_assert_not_null(m);
    int rc = pinio__prim_bind(m, len, 0, false);
    cr_assert(rc == 0 || rc == -EPERM || rc == -ENOSYS, "%d", rc);
    cr_assert_eq(atomic_load(&mbind_calls), 1, "bind called mbind() %d times",
                 atomic_load(&mbind_calls));
    cr_assert_eq(pinio__prim_populate(m, len), 0);
    void *page = m;
    int st = 99;
    rc = pinio__prim_where(&page, 1, &st);
    cr_assert_eq(atomic_load(&move_pages_calls), 1, "where called move_pages() %d times",
                 atomic_load(&move_pages_calls));
    if (rc == 0)
        cr_assert_eq(st, 0, "populated on node 0, as libnuma's move_pages() says");
    pinio__prim_unmap(m, len);
}
