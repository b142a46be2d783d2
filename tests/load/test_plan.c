/* The public plan (pinio/plan.h): built without tensor I/O, executed into
 * destinations the test chooses: heap memory, a sub-range of the reads (an
 * MPI stripe), a destination that refuses or fails, an ops table of an older,
 * smaller size, memory registered with the engine, and reads cut at a
 * segment (a staging slot). Every byte is checked against the generator. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/load.h"
#include "pinio/plan.h"
#include "tests/common/helpers.h"

#define SEED 23

static char dir[256];
static char path[300];

static void setup_file(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "plan", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 6u << 20;
    g.tensors = 12;
    g.seed = SEED;
    cr_assert_eq(pinio_gen_write(path, &g, NULL, NULL), 0);
}

static void setup_shards(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "plan", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/ck", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 6u << 20;
    g.tensors = 12;
    g.shards = 3;
    g.seed = SEED;
    cr_assert_eq(pinio_gen_write(path, &g, NULL, NULL), 0);
}

static void teardown(void)
{
    cr_assert_eq(t_rm_rf(dir), 0);
}

/* A heap destination that records what the executor asked of it. */
typedef struct heap {
    uint8_t *mem;
    size_t claims, landed;
    size_t last_landed;     /* read index of the last landed call + 1 */
    bool out_of_order;
    size_t fail_claim_at;   /* SIZE_MAX: never */
    size_t fail_landed_at;
} heap;

static int heap_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    heap *h = ctx;
    if (i == h->fail_claim_at)
        return -ENOSPC;
    h->claims++;
    *mem = h->mem + r->dest_offset;
    return 0;
}

static int heap_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    heap *h = ctx;
    cr_assert_eq(mem, h->mem + r->dest_offset, "landed where it was claimed");
    if (i == h->fail_landed_at)
        return -EPIPE;
    if (i + 1 <= h->last_landed)
        h->out_of_order = true;
    h->last_landed = i + 1;
    h->landed++;
    return 0;
}

static const pinio_dest_ops heap_ops = { .size = sizeof(pinio_dest_ops), .claim = heap_claim,
                                         .landed = heap_landed };

static pinio_plan *make_plan(const pinio_plan_opts *po)
{
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    const char *paths[] = { path };
    cr_assert_eq(pinio_plan_create(&p, paths, 1, po, &d), 0, "%s", d.msg);
    return p;
}

static heap heap_for(const pinio_plan *p)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    heap h = { .fail_claim_at = SIZE_MAX, .fail_landed_at = SIZE_MAX };
    h.mem = aligned_alloc(4096, pi.dest_bytes ? pi.dest_bytes : 4096);
    cr_assert_not_null(h.mem);
    return h;
}

static void check_tensors(const pinio_plan *p, const uint8_t *mem)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    for (size_t i = 0; i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        uint64_t bad = 0;
        cr_assert(pinio_gen_verify(SEED, t->name, 0, mem + t->dest_offset, t->nbytes, &bad),
                  "tensor %s wrong at byte %llu", t->name, (unsigned long long)bad);
    }
}

Test(plan, built_without_reads_then_executed_into_the_heap, .init = setup_shards,
     .fini = teardown)
{
    pinio_plan *p = make_plan(NULL);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert_eq(pi.files, 3);
    cr_assert_eq(pi.tensors, 12);
    cr_assert_not_null(pi.index_path);
    cr_assert_geq(pi.read_bytes, pi.bytes);
    cr_assert_eq(pi.dest_bytes % pi.align, 0);
    for (size_t i = 0; i < pi.files; i++) {
        const pinio_plan_file *f = pinio_plan_file_at(p, i);
        cr_assert_not_null(f->header);
        cr_assert_not_null(strstr(f->path, dir));
    }
    cr_assert_null(pinio_plan_file_at(p, pi.files));
    cr_assert_null(pinio_plan_tensor_at(p, pi.tensors));
    cr_assert_null(pinio_plan_read_at(p, pi.reads));
    for (size_t i = 0; i < pi.reads; i++) {
        const pinio_plan_read *r = pinio_plan_read_at(p, i);
        cr_assert_eq(r->offset % pi.align, 0);
        cr_assert_eq(r->dest_offset % pi.align, 0);
        cr_assert_leq(r->need, r->len);
    }
    heap h = heap_for(p);
    pinio_exec_report rep;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, &rep, &d), 0, "%s", d.msg);
    cr_assert_eq(h.claims, pi.reads);
    cr_assert_eq(h.landed, pi.reads);
    cr_assert_not(h.out_of_order, "landed in read order");
    cr_assert_eq(rep.read_bytes, pi.read_bytes);
    cr_assert_eq(rep.files_direct + rep.files_buffered, 3);
    cr_assert_gt(strlen(rep.io_path), 0);
    check_tensors(p, h.mem);
    free(h.mem);
    pinio_plan_free(p);
}

Test(plan, stripes_executed_apart_fill_the_same_destination, .init = setup_file,
     .fini = teardown)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.segment = 512 << 10; /* reads cut at 512 KiB: something to stripe */
    pinio_plan *p = make_plan(&po);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert_geq(pi.reads, 4);
    heap h = heap_for(p);
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    size_t half = pi.reads / 2;
    eo.first_read = 0;
    eo.nreads = half;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, &eo, NULL, &d), 0, "%s", d.msg);
    cr_assert_eq(h.landed, half);
    eo.first_read = half;
    eo.nreads = 0; /* to the end */
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, &eo, NULL, &d), 0, "%s", d.msg);
    cr_assert_eq(h.landed, pi.reads);
    check_tensors(p, h.mem);

    eo.first_read = pi.reads;
    eo.nreads = 1;
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, &eo, NULL, &d), -EINVAL,
                 "a stripe past the plan");
    free(h.mem);
    pinio_plan_free(p);
}

Test(plan, a_destination_that_refuses_or_fails_stops_the_execution, .init = setup_file,
     .fini = teardown)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.segment = 512 << 10;
    pinio_plan *p = make_plan(&po);
    heap h = heap_for(p);
    h.fail_claim_at = 2;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, NULL, &d), -ENOSPC);
    cr_assert_not_null(strstr(d.msg, "read 2"), "%s", d.msg);
    cr_assert_eq(h.landed, 0, "nothing was read: the claims come first in a batch");

    h = (heap){ .mem = h.mem, .fail_claim_at = SIZE_MAX, .fail_landed_at = 1 };
    memset(&d, 0, sizeof(d));
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, NULL, &d), -EPIPE);
    cr_assert_eq(h.landed, 1, "stopped at the failing read");
    cr_assert_not_null(strstr(d.msg, "read 1"), "%s", d.msg);
    free(h.mem);
    pinio_plan_free(p);
}

static int trap_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    (void)ctx, (void)i, (void)r, (void)mem;
    cr_assert_fail("an entry past the ops table's size was called");
    return 0;
}

Test(plan, an_older_smaller_ops_table_is_read_up_to_its_size, .init = setup_file,
     .fini = teardown)
{
    pinio_plan *p = make_plan(NULL);
    heap h = heap_for(p);
    pinio_dest_ops old = { .size = offsetof(pinio_dest_ops, landed), .claim = heap_claim,
                           .landed = trap_landed };
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_execute(p, &old, &h, NULL, NULL, &d), 0, "%s", d.msg);
    check_tensors(p, h.mem);
    pinio_dest_ops none = { .size = sizeof(size_t), .claim = heap_claim };
    cr_assert_eq(pinio_plan_execute(p, &none, &h, NULL, NULL, &d), -EINVAL,
                 "a table without claim");
    free(h.mem);
    pinio_plan_free(p);
}

Test(plan, registered_memory_is_read_by_read_fixed_and_reported, .init = setup_file,
     .fini = teardown)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = PINIO_CACHE_COLD;
    pinio_plan *p = make_plan(&po);
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_drop_cache(p, NULL, &d), 0, "%s", d.msg);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    heap h = heap_for(p);
    pinio_mem_region reg = { h.mem, (size_t)pi.dest_bytes };
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    eo.regions = &reg;
    eo.nregions = 1;
    pinio_exec_report rep;
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, &eo, &rep, &d), 0, "%s", d.msg);
    check_tensors(p, h.mem);
    /* Root here: registration cannot be refused for lack of memlock. */
    cr_assert_eq(rep.regions_registered, 1);
    if (rep.files_direct) {
        cr_assert_eq(rep.backend, PINIO_BACKEND_FIXED_DIRECT, "%s", rep.io_path);
        cr_assert_gt(rep.fixed_ops, 0);
        cr_assert_not_null(strstr(rep.io_path, "registered memory (READ_FIXED)"), "%s",
                           rep.io_path);
    }
    /* Without regions: the same reads, never reported as registered. */
    pinio_exec_report plain;
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, &plain, &d), 0, "%s", d.msg);
    cr_assert_neq(plain.backend, PINIO_BACKEND_FIXED_DIRECT, "%s", plain.io_path);
    cr_assert_null(strstr(plain.io_path, "(READ_FIXED)"), "%s", plain.io_path);
    free(h.mem);
    pinio_plan_free(p);
}

/* A ring that cannot start (a request size the engine refuses) fails the
 * execute before any region was registered: an error, not a crash in the
 * cleanup of registrations that never happened. */
Test(plan, a_ring_that_cannot_start_fails_cleanly_with_regions, .init = setup_file,
     .fini = teardown)
{
    pinio_plan *p = make_plan(NULL);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    heap h = heap_for(p);
    pinio_mem_region reg = { h.mem, (size_t)pi.dest_bytes };
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    eo.regions = &reg;
    eo.nregions = 1;
    eo.request_size = 3;
    pinio_diag d = { 0 };
    cr_assert_lt(pinio_plan_execute(p, &heap_ops, &h, &eo, NULL, &d), 0);
    cr_assert_neq(d.msg[0], 0, "the failure says why");
    free(h.mem);
    pinio_plan_free(p);
}

Test(plan, reads_never_cross_a_segment, .init = setup_file,
     .fini = teardown)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.segment = 256 << 10;
    pinio_plan *p = make_plan(&po);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    for (size_t i = 0; i < pi.reads; i++) {
        const pinio_plan_read *r = pinio_plan_read_at(p, i);
        cr_assert_eq(r->dest_offset / po.segment, (r->dest_offset + r->len - 1) / po.segment,
                     "read %zu crosses a segment", i);
    }
    heap h = heap_for(p);
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, NULL, &d), 0, "%s", d.msg);
    check_tensors(p, h.mem);
    free(h.mem);
    pinio_plan_free(p);

    po.segment = 3000; /* not a power of two */
    const char *paths[] = { path };
    cr_assert_eq(pinio_plan_create(&p, paths, 1, &po, &d), -EINVAL);
    cr_assert_null(p);
}

Test(plan, each_file_keeps_its_validated_descriptor, .init = setup_file, .fini = teardown)
{
    struct stat before, now;
    cr_assert_eq(stat(path, &before), 0);
    pinio_plan *p = make_plan(NULL);
    const pinio_plan_file *f = pinio_plan_file_at(p, 0);
    cr_assert_geq(f->fd, 0);
    /* Another file renamed over the path: the descriptor still names the
     * validated one, for whoever rereads through it (--verify). */
    char other[300];
    snprintf(other, sizeof(other), "%s/other", dir);
    cr_assert_eq(t_tmpfile(dir, "other", "x", 1, 0, other, sizeof(other)), 0);
    cr_assert_eq(rename(other, path), 0);
    cr_assert_eq(fstat(f->fd, &now), 0);
    cr_assert_eq(now.st_ino, before.st_ino);
    cr_assert_eq((uint64_t)now.st_size, f->size);
    pinio_plan_free(p);
}

/* pinio_plan_derive(): another selection over the files a plan validated. */

/* Overwrites the first `n` bytes of `fd`'s file with spaces, then puts its
 * modification time back: the header bytes are garbage now, the size and
 * modification time what the plan validated (only the status change time
 * moves). */
static void clobber_header_keep_mtime(int fd, size_t n)
{
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char *junk = malloc(n);
    cr_assert_not_null(junk);
    memset(junk, ' ', n);
    cr_assert_eq(pwrite(fd, junk, n, 0), (ssize_t)n);
    free(junk);
    struct timespec ts[2] = { st.st_atim, st.st_mtim };
    cr_assert_eq(futimens(fd, ts), 0);
}

Test(plan, a_derived_plan_selects_again_without_reading_the_header, .init = setup_file,
     .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    const pinio_plan_tensor *t0 = pinio_plan_tensor_at(base, 0);
    const pinio_plan_tensor *t5 = pinio_plan_tensor_at(base, 5);
    char keep0[128], keep5[128];
    snprintf(keep0, sizeof(keep0), "%s", t0->name);
    snprintf(keep5, sizeof(keep5), "%s", t5->name);
    /* The header read again now would fail to parse: the plans below have
     * the base's, copied. */
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    clobber_header_keep_mtime(fd, 16);
    close(fd);
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    const char *filters[] = { keep5, keep0 };
    po.filters = filters;
    po.nfilters = 2;
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_derive(&p, base, &po, &d), 0, "%s", d.msg);
    pinio_plan *all = NULL;
    cr_assert_eq(pinio_plan_derive(&all, base, NULL, &d), 0, "%s", d.msg);
    pinio_plan_free(base); /* the derived plans hold descriptors and headers of their own */
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert_eq(pi.tensors, 2);
    cr_assert_eq(pi.skipped, 10);
    cr_assert_str_eq(pinio_plan_tensor_at(p, 0)->name, keep0, "file order");
    cr_assert_str_eq(pinio_plan_tensor_at(p, 1)->name, keep5);
    cr_assert_str_eq(pinio_plan_file_at(p, 0)->path, path);
    cr_assert_eq(pinio_st_count(pinio_plan_file_at(p, 0)->header), 12);
    pinio_plan_get_info(all, &pi);
    cr_assert_eq(pi.tensors, 12);
    pinio_plan *plans[] = { p, all };
    for (size_t k = 0; k < 2; k++) {
        heap h = heap_for(plans[k]);
        cr_assert_eq(pinio_plan_execute(plans[k], &heap_ops, &h, NULL, NULL, &d), 0, "%s",
                     d.msg);
        check_tensors(plans[k], h.mem);
        free(h.mem);
        pinio_plan_free(plans[k]);
    }
}

Test(plan, a_derived_plan_reads_the_validated_file_whatever_the_path_names,
     .init = setup_file, .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    char other[300];
    cr_assert_eq(t_tmpfile(dir, "other", "x", 1, 0, other, sizeof(other)), 0);
    cr_assert_eq(rename(other, path), 0); /* its status change time moves, nothing else */
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_derive(&p, base, NULL, &d), 0, "%s", d.msg);
    heap h = heap_for(p);
    cr_assert_eq(pinio_plan_execute(p, &heap_ops, &h, NULL, NULL, &d), 0, "%s", d.msg);
    check_tensors(p, h.mem);
    free(h.mem);
    pinio_plan_free(p);
    pinio_plan_free(base);
}

Test(plan, a_derived_plan_refuses_a_file_rewritten_since_it_was_validated,
     .init = setup_file, .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    /* the same size, a new modification time */
    struct timespec ts[2] = { st.st_atim, { st.st_mtim.tv_sec - 100, 0 } };
    cr_assert_eq(futimens(fd, ts), 0);
    pinio_plan *p = (pinio_plan *)1;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_derive(&p, base, NULL, &d), PINIO_ECHANGED);
    cr_assert_null(p);
    cr_assert_not_null(strstr(d.msg, path), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "modification time"), "%s", d.msg);
    /* another size */
    cr_assert_eq(ftruncate(fd, st.st_size + 4096), 0);
    cr_assert_eq(pinio_plan_derive(&p, base, NULL, &d), PINIO_ECHANGED);
    cr_assert_not_null(strstr(d.msg, "size"), "%s", d.msg);
    close(fd);
    pinio_plan_free(base);
}

Test(plan, derive_refuses_a_plan_with_an_index_and_bad_arguments, .init = setup_shards,
     .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_derive(&p, base, NULL, &d), -ENOTSUP);
    cr_assert_null(p);
    cr_assert_not_null(strstr(d.msg, "index"), "%s", d.msg);
    cr_assert_eq(pinio_plan_derive(&p, NULL, NULL, &d), -EINVAL);
    cr_assert_eq(pinio_plan_derive(NULL, base, NULL, &d), -EINVAL);
    pinio_plan_free(base);
}

Test(plan, load_derived_loads_the_selection_of_the_validated_file, .init = setup_file,
     .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    char name[128];
    snprintf(name, sizeof(name), "%s", pinio_plan_tensor_at(base, 3)->name);
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    clobber_header_keep_mtime(fd, 16);
    close(fd);
    for (int m = 0; m < 2; m++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        const char *filters[] = { name };
        o.filters = filters;
        o.nfilters = 1;
        o.memory = m ? PINIO_MEMORY_MAPPED : PINIO_MEMORY_PINNED;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(pinio_load_derived(base, &o, &cp, &d), 0, "%s", d.msg);
        cr_assert_eq(pinio_checkpoint_count(cp), 1);
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, 0);
        cr_assert_str_eq(t->name, name);
        uint64_t bad = 0;
        cr_assert(pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, &bad), "byte %llu",
                  (unsigned long long)bad);
        cr_assert_str_eq(pinio_checkpoint_file(cp, 0), path);
        pinio_checkpoint_release(cp);
    }
    pinio_checkpoint *cp = (pinio_checkpoint *)1;
    cr_assert_eq(pinio_load_derived(NULL, NULL, &cp, NULL), -EINVAL);
    cr_assert_null(cp);
    pinio_plan_free(base);
}

/* A checkpoint of one file finds each tensor by name (its name index is
 * taken from the header's order, not sorted again), whole or filtered. */
Test(plan, a_loaded_file_finds_every_tensor_by_name, .init = setup_file, .fini = teardown)
{
    pinio_plan *base = make_plan(NULL);
    const char *some[6];
    char names[12][128];
    for (size_t i = 0; i < 12; i++)
        snprintf(names[i], sizeof(names[i]), "%s", pinio_plan_tensor_at(base, i)->name);
    for (size_t i = 0; i < 6; i++)
        some[i] = names[11 - 2 * i]; /* every other one, backwards */
    for (int filtered = 0; filtered < 2; filtered++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.filters = filtered ? some : NULL;
        o.nfilters = filtered ? 6 : 0;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(pinio_load_derived(base, &o, &cp, &d), 0, "%s", d.msg);
        size_t n = pinio_checkpoint_count(cp);
        cr_assert_eq(n, filtered ? 6 : 12);
        for (size_t i = 0; i < n; i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
            cr_assert_eq(pinio_checkpoint_find(cp, t->name), t, "%s", t->name);
        }
        for (size_t i = 0; i < 12; i++)
            cr_assert_eq(pinio_checkpoint_find(cp, names[i]) != NULL, !filtered || i % 2 == 1,
                         "%s", names[i]);
        cr_assert_null(pinio_checkpoint_find(cp, "no.such.tensor"));
        pinio_checkpoint_release(cp);
    }
    pinio_plan_free(base);
}
