/* Pools and slabs created and destroyed a thousand times, registered with a
 * real io_uring ring when one is available: no growth in open descriptors,
 * resident memory or pinned memory (a leaked slab, pin or registration would
 * show in one of them). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pinio/pool.h"
#include "pinio/sys.h"
#include "uring_reg.h"

#define MiB ((size_t)1 << 20)
#define CYCLES 1000

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static uint64_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    unsigned long long kb = 0;
    size_t klen = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, key, klen) && line[klen] == ':')
            sscanf(line + klen + 1, "%llu", &kb);
    fclose(f);
    return kb;
}

static void cycle(const pinio_pool_registrar *reg, int i)
{
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.placement = (i % 3 == 0) ? PINIO_POOL_NODE : PINIO_POOL_ANY;
    o.node = 0;
    o.slab_size = 2 * MiB;
    if (reg)
        o.registrar = *reg;
    pinio_pool *p;
    cr_assert_eq(pinio_pool_create(&p, &o, NULL), 0);
    pinio_view v[4];
    pinio_pool_region_info info;
    cr_assert_eq(pinio_pool_alloc(p, 4096, 0, &v[0], &info), 0);
    cr_assert_eq(pinio_pool_alloc(p, MiB, 0, &v[1], NULL), 0);
    cr_assert_eq(pinio_pool_alloc(p, 2 * MiB, 0, &v[2], NULL), 0); /* second slab */
    cr_assert_eq(pinio_pool_alloc(p, 3 * MiB, 0, &v[3], NULL), 0); /* dedicated slab */
    ((uint8_t *)v[3].ptr)[0] = (uint8_t)i;
    if (i % 2)
        pinio_pool_destroy(p);
    for (int k = 0; k < 4; k++)
        pinio_view_release(&v[(k + i) % 4]);
    if (!(i % 2))
        pinio_pool_destroy(p);
}

Test(pool_cycles, thousand_pools_leave_nothing_behind, .timeout = 300)
{
    struct uring_reg u;
    bool have_ring = uring_reg_init(&u) == 0;
    pinio_pool_registrar reg = have_ring ? uring_reg_registrar(&u) : (pinio_pool_registrar){ 0 };
    const pinio_pool_registrar *r = have_ring ? &reg : NULL;

    for (int i = 0; i < 20; i++) /* warm up malloc arenas and page tables */
        cycle(r, i);
    int fds = count_fds();
    uint64_t rss = status_kb("VmRSS"), pin = status_kb("VmPin");
    for (int i = 0; i < CYCLES; i++)
        cycle(r, i);
    int fds_after = count_fds();
    uint64_t rss_after = status_kb("VmRSS"), pin_after = status_kb("VmPin");
    cr_log_info("fds %d -> %d, VmRSS %llu -> %llu kB, VmPin %llu -> %llu kB, ring %s, %d regs",
                fds, fds_after, (unsigned long long)rss, (unsigned long long)rss_after,
                (unsigned long long)pin, (unsigned long long)pin_after, have_ring ? "yes" : "no",
                have_ring ? u.reg_calls : 0);
    cr_assert_eq(fds_after, fds, "descriptors leaked");
    cr_assert_eq(pin_after, pin, "pinned memory leaked");
    /* Each cycle maps 7 MiB: one leaked slab per cycle would add gigabytes. */
    cr_assert_leq(rss_after, rss + 8192, "VmRSS grew from %llu to %llu kB", (unsigned long long)rss,
                  (unsigned long long)rss_after);
    if (have_ring) {
        /* Registrations can fall back under a small memlock limit, but
         * some must have happened, and none may be left. */
        cr_assert_gt(u.unreg_calls, 0, "no slab was ever registered (%d attempts)", u.reg_calls);
        for (int s = 0; s < URING_REG_SLOTS; s++)
            cr_assert(!u.used[s], "slot %d still registered", s);
        uring_reg_exit(&u);
    }
}
