/* A kept arena over 1,000 loads of checkpoints of different sizes: after
 * the largest has been loaded once, the arena never grows, and the
 * process's resident memory, descriptors, pinned and locked pages stay
 * where they were. Suite 'integration' (plain and ASan, not valgrind: a
 * thousand loads under valgrind take minutes). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "pinio/load.h"
#include "tests/common/proc.h"
#include "tests/load/load_helpers.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define FILES 8
#define LOADS 1000
#define WARMUP 16

typedef struct usage {
    long rss_kb, pin_kb, lck_kb;
    int fds;
} usage;

static usage now(void)
{
    usage u = { t_status_kib("VmRSS:"), t_status_kib("VmPin:"), t_status_kib("VmLck:"),
                (int)t_count_fds() };
    cr_assert(u.rss_kb >= 0 && u.pin_kb >= 0 && u.lck_kb >= 0 && u.fds > 0, "/proc/self");
    return u;
}

Test(arena_soak, thousand_loads_no_growth, .init = disk_setup, .fini = teardown, .timeout = 300)
{
    char paths[FILES][512];
    size_t tensors[FILES];
    for (int i = 0; i < FILES; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/m%d.safetensors", tmpdir, i);
        tensors[i] = 3 + (size_t)i * 2;
        gen(paths[i], (uint64_t)(256 + 256 * i) << 10, tensors[i], 1);
    }
    pinio_arena *a = NULL;
    cr_assert_eq(pinio_arena_create(&a), 0);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.arena = a;
    usage base = { 0 };
    size_t size = 0;
    for (int n = 0; n < LOADS; n++) {
        /* The largest first, then a scattered order of all sizes. */
        int i = n == 0 ? FILES - 1 : (n * 5) % FILES;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(paths[i], &o, &cp, &d), 0, "load %d: %s", n, d.msg);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        cr_assert(r.arena_grown == (n == 0), "load %d of file %d: %s", n, i, r.memory);
        if (n % 97 == 0)
            check_all(cp, tensors[i]);
        else
            cr_assert_eq(pinio_checkpoint_count(cp), tensors[i]);
        pinio_checkpoint_release(cp);
        if (n == 0)
            size = pinio_arena_size(a);
        cr_assert_eq(pinio_arena_size(a), size, "load %d", n);
        if (n == WARMUP)
            base = now();
    }
    usage end = now();
    cr_assert_eq(end.fds, base.fds, "descriptors: %d -> %d", base.fds, end.fds);
    cr_assert_eq(end.pin_kb, base.pin_kb, "VmPin: %ld -> %ld kB", base.pin_kb, end.pin_kb);
    cr_assert_eq(end.lck_kb, base.lck_kb, "VmLck: %ld -> %ld kB", base.lck_kb, end.lck_kb);
#ifndef UNDER_ASAN
    /* Under ASan freed heap sits in its quarantine by design: not a leak. */
    cr_assert_leq(end.rss_kb, base.rss_kb + 1024, "VmRSS: %ld -> %ld kB", base.rss_kb,
                  end.rss_kb);
#endif
    cr_log_info("1000 loads: VmRSS %ld -> %ld kB, VmPin %ld -> %ld kB, VmLck %ld -> %ld kB, "
                "fds %d -> %d, arena %zu bytes",
                base.rss_kb, end.rss_kb, base.pin_kb, end.pin_kb, base.lck_kb, end.lck_kb,
                base.fds, end.fds, size);
    pinio_arena_release(a);
}
