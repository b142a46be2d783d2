/* #PINIO_MEMORY_AUTO's cold rule (issue 40): a cold file is mapped with its
 * page cache filled when fresh memory's first touch is slower than the
 * storage, else read O_DIRECT into the arena; the report says which, with
 * both figures. The figures are given (first_touch_gbps, storage_gbps),
 * so nothing here depends on how fast this machine is; the probe itself
 * is checked only for giving a figure and keeping it. On disk and tmpfs,
 * every byte checked. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "src/load/load_internal.h"
#include "src/load/touch_internal.h"
#include "tests/load/load_helpers.h"

#define NT 17

/* A cold load whose rule sees the figures `touch` and `storage` (GB/s). */
static pinio_load_opts cold_opts(double touch, double storage)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.first_touch_gbps = touch;
    o.storage_gbps = storage;
    o.cache = PINIO_CACHE_COLD;
    return o;
}

static pinio_memory_mode loaded(const char *f, const pinio_load_opts *o, pinio_load_report *r,
                                char *why, size_t wsize)
{
    pinio_checkpoint *cp = load_ok(f, o, r);
    check_all(cp, NT);
    const char *w = NULL;
    pinio_memory_mode m = pinio_checkpoint_file_memory(cp, 0, &w);
    snprintf(why, wsize, "%s", w ? w : "");
    pinio_checkpoint_release(cp);
    return m;
}

/* Slow touch: mapped, its page cache filled, nothing read by the engine
 * and no segment of its own (the page cache is the node's). Fast touch:
 * O_DIRECT into the arena. The why names both figures either way. */
static void both_ways(void)
{
    char *f = path_in("m.safetensors");
    gen(f, 3u << 20, NT, 1);
    pinio_load_report r;
    char why[128];
    pinio_load_opts slow = cold_opts(0.25, 2.0);
    cr_assert_eq(loaded(f, &slow, &r, why, sizeof(why)), PINIO_MEMORY_MAPPED, "%s", why);
    cr_assert_str_eq(why, "cold: first touch 0.25 GB/s given < storage ~2.00 GB/s given: "
                          "page cache filled, mapped");
    cr_assert(strstr(r.modes, why), "%s", r.modes);
    cr_assert_eq(r.files_filled, 1, "%s", r.cache);
    cr_assert_eq(r.read_bytes + r.arena_bytes, 0, "a mapped file is not read by the engine");
    cr_assert_eq(r.files_share_read + r.files_shared, 0, "%s", r.share);

    pinio_load_opts fast = cold_opts(8.0, 2.0);
    fast.share = PINIO_SHARE_OFF; /* the arena's reads, not a segment's */
    cr_assert_eq(loaded(f, &fast, &r, why, sizeof(why)), PINIO_MEMORY_PINNED, "%s", why);
    cr_assert_str_eq(why, "cold: first touch 8.00 GB/s given >= storage ~2.00 GB/s given: "
                          "O_DIRECT into the arena");
    cr_assert_eq(r.files_filled + r.files_mapped, 0, "%s", r.modes);
    cr_assert_geq(r.read_bytes, r.bytes);
    cr_assert_gt(r.arena_bytes, 0);
}

Test(firsttouch, slow_maps_fast_reads_direct_on_disk, .init = disk_setup, .fini = teardown)
{
    both_ways();
}

Test(firsttouch, slow_maps_fast_reads_direct_on_tmpfs, .init = shm_setup, .fini = teardown)
{
    both_ways();
}

/* A fast touch with sharing on: pinned, so coop.c may take the file into
 * a segment (which pays the same first touch); bytes right either way. */
Test(firsttouch, fast_touch_with_sharing_stays_pinned, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 3u << 20, NT, 1);
    pinio_load_opts o = cold_opts(8.0, 2.0);
    pinio_load_report r;
    char why[128];
    cr_assert_eq(loaded(f, &o, &r, why, sizeof(why)), PINIO_MEMORY_PINNED, "%s", why);
    cr_assert_eq(r.files_mapped, 0, "%s", r.modes);
}

/* Whatever the figures say, what asks for the arena keeps it, and says so. */
Test(firsttouch, what_needs_the_arena_keeps_it, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 3u << 20, NT, 1);
    static const struct {
        const char *name, *why;
    } cases[] = {
        { "dma", "a DMA consumer waits" },
        { "pinned", "--memory pinned" },
        { "verify", "verify hashes the reads as they land" },
        { "node", "a NUMA node was asked for" },
        { "register", "register_arena" },
        { "backend", "backend direct forced" },
        { "align", "tensors not aligned as asked in the file" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pinio_load_opts o = cold_opts(0.25, 2.0);
        const char *n = cases[i].name;
        if (!strcmp(n, "dma"))
            o.consumer = PINIO_CONSUMER_DMA;
        else if (!strcmp(n, "pinned"))
            o.memory = PINIO_MEMORY_PINNED;
        else if (!strcmp(n, "verify"))
            o.verify = true;
        else if (!strcmp(n, "node"))
            o.node = 0;
        else if (!strcmp(n, "register"))
            o.register_arena = true;
        else if (!strcmp(n, "backend"))
            o.backend = PINIO_BACKEND_DIRECT;
        else
            o.tensor_align = 4096;
        pinio_load_report r;
        char why[128];
        cr_assert_eq(loaded(f, &o, &r, why, sizeof(why)), PINIO_MEMORY_PINNED, "%s: %s", n, why);
        cr_assert(strstr(why, cases[i].why), "%s: %s", n, why);
    }
}

/* A selection that leaves most of the file unread: the populate would
 * read the holes, so the arena reads the selected bytes only. */
Test(firsttouch, a_sparse_selection_reads_direct, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 3u << 20, NT, 1);
    pinio_load_opts o = cold_opts(0.25, 2.0);
    const pinio_tensor *first = NULL, *last = NULL;
    {
        pinio_load_opts all = cold_opts(0.25, 2.0);
        pinio_checkpoint *cp = load_ok(f, &all, NULL);
        for (size_t i = 0; i < NT; i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
            if (!first || t->file_offset < first->file_offset)
                first = t;
            if (!last || t->file_offset > last->file_offset)
                last = t;
        }
        static char a[128], b[128];
        snprintf(a, sizeof(a), "%s", first->name);
        snprintf(b, sizeof(b), "%s", last->name);
        pinio_checkpoint_release(cp);
        const char *const filters[] = { a, b };
        o.filters = filters;
        o.nfilters = 2;
        o.filters_exact = true;
        pinio_checkpoint *sp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &sp, &d), 0, "%s", d.msg);
        const char *why = NULL;
        cr_assert_eq(pinio_checkpoint_file_memory(sp, 0, &why), PINIO_MEMORY_PINNED, "%s", why);
        cr_assert(strstr(why, "the selection leaves gaps"), "%s", why);
        for (size_t i = 0; i < 2; i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(sp, i);
            cr_assert(pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL), "%s", t->name);
        }
        pinio_checkpoint_release(sp);
    }
}

Test(firsttouch, bad_figures_are_refused_by_name, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 1u << 20, NT, 1);
    const double bad[] = { -1.0, NAN, INFINITY };
    for (size_t i = 0; i < 3; i++)
        for (int which = 0; which < 2; which++) {
            pinio_load_opts o = cold_opts(which ? 1.0 : bad[i], which ? bad[i] : 1.0);
            pinio_checkpoint *cp = NULL;
            pinio_diag d = { 0 };
            cr_assert_eq(load1(f, &o, &cp, &d), -EINVAL);
            cr_assert_null(cp);
            cr_assert(strstr(d.msg, which ? "storage_gbps" : "first_touch_gbps"), "%s", d.msg);
        }
}

/* The measured figures: the probe gives one once and keeps it (any size
 * decides from then on); a cold read of 64 MiB or more becomes the
 * storage's figure. Only that the figures exist and where they came from:
 * their values are the machine's. */
Test(firsttouch, the_probe_runs_once_and_a_cold_read_is_noted)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    pinio__rates r;
    cr_assert_not(pinio__rates_get(&o, 1u << 20, &r), "a small file does not pay the probe");
    cr_assert(pinio__rates_get(&o, PINIO__TOUCH_MIN_BYTES, &r));
    cr_assert_str_eq(r.touch_from, "measured");
    cr_assert_gt(r.touch_gbps, 0);
    cr_assert_str_eq(r.storage_from, "assumed");
    double touch = r.touch_gbps;
    cr_assert(pinio__rates_get(&o, 1u << 20, &r), "measured once: free for any size now");
    cr_assert_eq(r.touch_gbps, touch, "the same figure, not a second probe");

    pinio_load_report rep = { 0 };
    rep.files_mapped = rep.files_filled = 1;
    rep.mapped_bytes = 128u << 20;
    rep.fill_seconds = 0.1;
    pinio__storage_note(&rep);
    cr_assert(pinio__rates_get(&o, 1u << 20, &r));
    cr_assert_str_eq(r.storage_from, "last read");
    cr_assert_float_eq(r.storage_gbps, (double)(128u << 20) / 0.1 / 1e9, 1e-9);
    /* A hot mapping is memory speed, not the storage's: not noted. */
    rep.files_filled = 0;
    rep.fill_seconds = 0.001;
    pinio__storage_note(&rep);
    cr_assert(pinio__rates_get(&o, 1u << 20, &r));
    cr_assert_float_eq(r.storage_gbps, (double)(128u << 20) / 0.1 / 1e9, 1e-9);
    o.storage_gbps = 3.0;
    cr_assert(pinio__rates_get(&o, 1u << 20, &r));
    cr_assert_str_eq(r.storage_from, "given");
}
