/* The options convention (src/base/opts.h): a program built against an older,
 * smaller options struct keeps working, with defaults for the fields it does
 * not know; a newer, larger struct works while its unknown fields are zero.
 * Checked on the helper itself and through the public functions that take
 * options, with prefix structs laid out as an older header had them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "src/base/opts.h"
#include "tests/common/helpers.h"

typedef struct demo_opts {
    size_t struct_size;
    int a, a2;
    int b; /* "added later" */
} demo_opts;

static void demo_default(demo_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->struct_size = sizeof(*o);
    o->a = 7;
    o->b = 9;
}

Test(opts, older_caller_keeps_defaults_of_unknown_fields)
{
    demo_opts def;
    demo_default(&def);
    /* (A field added where the old struct had padding would receive the
     * padding's zero: that is why added fields must mean "default" when 0.) */
    struct { size_t struct_size; int a, a2; } old = { sizeof(old), 3, 4 };
    cr_assert_eq(pinio__opts_copy(&def, sizeof(def), &old, "demo", NULL), 0);
    cr_assert_eq(def.a, 3, "the caller's field is taken");
    cr_assert_eq(def.b, 9, "the field the caller does not know keeps its default");
    cr_assert_eq(def.struct_size, sizeof(def));
}

Test(opts, newer_caller_with_zero_tail_is_accepted_and_nonzero_tail_refused)
{
    struct { demo_opts known; int future; } newer;
    memset(&newer, 0, sizeof(newer));
    newer.known.struct_size = sizeof(newer);
    newer.known.a = 1;
    newer.known.b = 2;
    demo_opts def;
    demo_default(&def);
    cr_assert_eq(pinio__opts_copy(&def, sizeof(def), &newer, "demo", NULL), 0);
    cr_assert(def.a == 1 && def.b == 2 && def.struct_size == sizeof(def));

    newer.future = 5;
    demo_default(&def);
    pinio_diag d;
    cr_assert_eq(pinio__opts_copy(&def, sizeof(def), &newer, "demo", &d), -E2BIG);
    cr_assert_eq(def.a, 7, "defaults untouched on failure");
    cr_assert_not_null(strstr(d.msg, "does not know"), "%s", d.msg);
}

Test(opts, missing_size_and_null)
{
    demo_opts def;
    demo_default(&def);
    demo_opts zero;
    memset(&zero, 0, sizeof(zero));
    pinio_diag d;
    cr_assert_eq(pinio__opts_copy(&def, sizeof(def), &zero, "demo", &d), -EINVAL);
    cr_assert_not_null(strstr(d.msg, "_opts_default"), "%s", d.msg);
    cr_assert_eq(pinio__opts_copy(&def, sizeof(def), NULL, "demo", NULL), 0, "NULL: defaults");
    cr_assert_eq(def.a, 7);
}

/* pinio_load_opts as a first release had it: up to and including `node`. */
typedef struct old_load_opts {
    size_t struct_size;
    const char *const *filters;
    size_t nfilters;
    int node;
} old_load_opts;

Test(opts, pinio_load_with_an_older_smaller_struct)
{
    cr_assert_eq(offsetof(old_load_opts, node), offsetof(pinio_load_opts, node),
                 "the prefix matches today's layout");
    char dir[256];
    cr_assert_eq(t_tmpdir("/var/tmp", "opts", dir, sizeof(dir)), 0);
    char path[300];
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 1 << 20;
    g.tensors = 4;
    g.seed = 5;
    cr_assert_eq(pinio_gen_write(path, &g, NULL, NULL), 0);

    const char *filter = "t.1";
    /* What an old program's inline pinio_load_opts_default() compiles to:
     * today's init with the old size, so its tail padding is zeroed too. */
    old_load_opts old;
    memset(&old, 0xEE, sizeof(old)); /* stack garbage the library must not see */
    pinio_load_opts_init((pinio_load_opts *)&old, sizeof(old));
    cr_assert_eq(old.struct_size, sizeof(old));
    cr_assert_eq(old.node, PINIO_NODE_AUTO, "the defaults, up to the old size");
    old.filters = &filter;
    old.nfilters = 0;
    old.node = PINIO_NODE_ANY;
    const char *paths[] = { path };
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_load(paths, 1, (const pinio_load_opts *)&old, &cp, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    cr_assert_eq(pinio_checkpoint_count(cp), 4, "no filters given: all tensors");
    pinio_load_report rep;
    pinio_checkpoint_report(cp, &rep);
    cr_assert_eq(rep.node, -1, "the old struct's node is honoured");
    cr_assert(!rep.verified, "verify defaults to off");
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        cr_assert(pinio_gen_verify(5, t->name, 0, t->data, t->nbytes, NULL), "%s", t->name);
    }
    pinio_checkpoint_release(cp);
    unlink(path);
    rmdir(dir);
}

Test(opts, init_never_writes_past_an_older_callers_struct)
{
    /* An old program's struct lies in front of other data: the library's
     * init must stop at the size the program was built with. */
    struct { old_load_opts old; unsigned char after[sizeof(pinio_load_opts)]; } mem;
    memset(&mem, 0x5A, sizeof(mem));
    pinio_load_opts_init((pinio_load_opts *)&mem.old, sizeof(mem.old));
    for (size_t i = 0; i < sizeof(mem.after); i++)
        cr_assert_eq(mem.after[i], 0x5A, "byte %zu after the old struct was written", i);
    /* and a newer, larger struct gets zeros past what this library knows */
    struct { pinio_load_opts now; unsigned char future[32]; } big;
    memset(&big, 0x5A, sizeof(big));
    pinio_load_opts_init(&big.now, sizeof(big));
    cr_assert_eq(big.now.struct_size, sizeof(big));
    for (size_t i = 0; i < sizeof(big.future); i++)
        cr_assert_eq(big.future[i], 0, "future byte %zu", i);
    pinio_checkpoint *cp = NULL;
    const char *paths[] = { "/nonexistent/pinio.safetensors" };
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_load(paths, 1, &big.now, &cp, &d), -ENOENT,
                 "a larger struct with a zero tail is accepted: %s", d.msg);
}

Test(opts, ring_and_pool_with_older_smaller_structs)
{
    /* pinio_ring_opts without flags, pread_threads, max_files and faults */
    pinio_ring_opts full;
    pinio_ring_opts_default(&full);
    full.queue_depth = 8;
    full.struct_size = offsetof(pinio_ring_opts, flags);
    pinio_ring *r = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_ring_create(&r, &full, &d), 0, "%s", d.msg);
    pinio_ring_info info;
    pinio_ring_get_info(r, &info);
    cr_assert_eq(info.sq_entries, 8);
    pinio_ring_destroy(r);

    /* pinio_pool_opts up to the slab size */
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.slab_size = 4 << 20;
    po.prefault = false; /* past the prefix: ignored, so the default (true) holds */
    po.struct_size = offsetof(pinio_pool_opts, strict);
    pinio_pool *p = NULL;
    cr_assert_eq(pinio_pool_create(&p, &po, &d), 0, "%s", d.msg);
    pinio_view v;
    cr_assert_eq(pinio_pool_alloc(p, 1 << 20, 0, &v, NULL), 0);
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    cr_assert_eq(st.bytes_mapped, (uint64_t)4 << 20, "the old struct's slab size is used");
    pinio_view_release(&v);
    pinio_pool_destroy(p);
}
