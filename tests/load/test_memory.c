/* Memory modes of pinio_load: every mode x backend x cache state with
 * every byte checked; mapped tensors outliving the checkpoint, a rename and
 * an unlink; a file truncated between plan and mapping (PINIO_ECHANGED, no
 * SIGBUS) and after the load (what a user of mapped tensors gets); mixed
 * modes over shards; --align; kept arenas. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/load.h"
#include "pinio/sys.h"
#include "src/load/load_internal.h"
#include "tests/load/load_helpers.h"

static const pinio_backend backends[] = { PINIO_BACKEND_AUTO, PINIO_BACKEND_FIXED_DIRECT,
                                          PINIO_BACKEND_DIRECT, PINIO_BACKEND_BUFFERED,
                                          PINIO_BACKEND_PREAD };
static const pinio_cache_policy caches[] = { PINIO_CACHE_COLD, PINIO_CACHE_HOT,
                                             PINIO_CACHE_AUTO };
static const char *const mode_names[] = { "auto", "pinned", "mapped" };

/* The file's bytes must sit in a mapping at the page offset they have in
 * the file; the tensor's bytes carry the property of its mode. */
static void check_mode(pinio_checkpoint *cp, pinio_memory_mode want)
{
    const char *why = NULL;
    cr_assert_eq(pinio_checkpoint_file_memory(cp, 0, &why), want, "%s", why);
    cr_assert(why && why[0]);
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        pinio_bytes *b = NULL;
        cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, i, &b), 0);
        pinio_property p = pinio_bytes_property(b);
        if (want == PINIO_MEMORY_MAPPED) {
            cr_assert_eq(p, PINIO_PROP_FILE, "tensor %s", t->name);
            cr_assert_eq((uintptr_t)t->data & 4095, t->file_offset & 4095);
        } else {
            cr_assert_neq(p, PINIO_PROP_FILE, "tensor %s", t->name);
        }
        pinio_bytes_free(b);
    }
}

static void modes_matrix(void)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    char digest[3][65] = { { 0 } };
    for (int m = 0; m < 3; m++)
        for (size_t b = 0; b < 5; b++)
            for (size_t c = 0; c < 3; c++) {
                pinio_load_opts o;
                pinio_load_opts_default(&o);
                o.memory = (pinio_memory_mode)m;
                o.backend = backends[b];
                o.cache = caches[c];
                o.verify = b == 0; /* mapped files are hashed through the descriptor */
                o.queue_depth = 4;
                o.request_size = 64u << 10;
                pinio_checkpoint *cp = NULL;
                pinio_diag d = { 0 };
                int rc = load1(f, &o, &cp, &d);
                cr_assert_eq(rc, 0, "memory %s backend %s cache %zu: %s", mode_names[m],
                             pinio_backend_name(backends[b]), c, d.msg);
                check_all(cp, 23);
                pinio_load_report r;
                pinio_checkpoint_report(cp, &r);
                cr_assert_eq(r.files_mapped + r.files_pinned, 1);
                pinio_memory_mode got = r.files_mapped ? PINIO_MEMORY_MAPPED : PINIO_MEMORY_PINNED;
                if (m != PINIO_MEMORY_AUTO)
                    cr_assert_eq(got, (pinio_memory_mode)m, "%s", r.modes);
                else if (backends[b] != PINIO_BACKEND_AUTO || caches[c] == PINIO_CACHE_COLD)
                    cr_assert_eq(got, PINIO_MEMORY_PINNED, "%s", r.modes);
                else if (caches[c] == PINIO_CACHE_HOT)
                    cr_assert_eq(got, PINIO_MEMORY_MAPPED, "%s", r.modes);
                else { /* AUTO: the residency measured decides */
                    bool mapped = got == PINIO_MEMORY_MAPPED;
                    bool hot = strstr(r.modes, "hot (") != NULL;
                    cr_assert(mapped == hot, "%s", r.modes);
                }
                if (got == PINIO_MEMORY_MAPPED)
                    cr_assert_eq(r.files_buffered + r.files_direct, 0, "a mapped file is not read");
                else
                    cr_assert_eq(r.files_buffered + r.files_direct, 1);
                check_mode(cp, got);
                if (got == PINIO_MEMORY_MAPPED) {
                    cr_assert_eq(r.arena_bytes, 0);
                    cr_assert_gt(r.mapped_bytes, 0);
                    cr_assert_eq(r.read_bytes, 0, "a mapped file is not read");
                }
                if (o.verify) {
                    const char *h = pinio_checkpoint_sha256(cp, 0);
                    cr_assert_not_null(h);
                    if (digest[0][0])
                        cr_assert_str_eq(h, digest[0], "%s: the same file, the same digest",
                                         mode_names[m]);
                    snprintf(digest[0], sizeof(digest[0]), "%s", h);
                }
                pinio_checkpoint_release(cp);
            }
}

Test(memory, every_mode_backend_and_cache_on_disk, .init = disk_setup, .fini = teardown)
{
    modes_matrix();
}

Test(memory, every_mode_backend_and_cache_on_tmpfs, .init = shm_setup, .fini = teardown)
{
    modes_matrix();
}

static pinio_checkpoint *load_mode(const char *path, pinio_memory_mode m, uint64_t align)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = m;
    o.tensor_align = align;
    return load_ok(path, &o, NULL);
}

Test(memory, mapped_tensors_outlive_checkpoint_rename_and_unlink, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    char *g = path_in("renamed.safetensors");
    gen(f, 2u << 20, 6, 1);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_MAPPED;
    o.lock_mapped = true;
    pinio_checkpoint *cp = load_ok(f, &o, NULL);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert(strstr(r.modes, "; mapped pages locked (mlock)") ||
                  strstr(r.modes, "; mapped pages not locked: RLIMIT_MEMLOCK too small"),
              "lock_mapped is reported: %s", r.modes);
    pinio_bytes *b[6];
    char names[6][128];
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, i, &b[i]), 0);
        snprintf(names[i], sizeof(names[i]), "%s", pinio_checkpoint_tensor(cp, i)->name);
    }
    pinio_checkpoint_release(cp);
    cr_assert_eq(rename(f, g), 0);
    for (size_t i = 0; i < 6; i++) {
        const uint8_t *p = NULL;
        cr_assert_eq(pinio_bytes_data(b[i], PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
        cr_assert(pinio_gen_verify(SEED, names[i], 0, p, pinio_bytes_len(b[i]), NULL));
    }
    cr_assert_eq(unlink(g), 0);
    for (size_t i = 0; i < 6; i++) {
        const uint8_t *p = NULL;
        cr_assert_eq(pinio_bytes_data(b[i], PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
        cr_assert(pinio_gen_verify(SEED, names[i], 0, p, pinio_bytes_len(b[i]), NULL),
                  "%s after unlink", names[i]);
        /* A mutable access copies: the mapping is read-only. */
        uint8_t *w = NULL;
        cr_assert_eq(pinio_bytes_data_mut(b[i], PINIO_ACCESS_COPY, &w, NULL), 0);
        if (pinio_bytes_len(b[i]))
            w[0] ^= 1;
        pinio_bytes_free(b[i]);
    }
}

/* map_private: the mapping is copy-on-write and writable in place (what
 * Python's writable tensors need): a write changes this load's bytes only,
 * never the file, another load's tensors or the page cache. */
Test(memory, mapped_private_is_copy_on_write, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 6, 1);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_MAPPED;
    o.map_private = true;
    o.lock_mapped = true; /* ignored: locking would copy every page */
    pinio_load_report r;
    pinio_checkpoint *cp = load_ok(f, &o, &r);
    cr_assert_not_null(strstr(r.modes, "; mapped private (copy-on-write); mapped pages not "
                                       "locked"), "%s", r.modes);
    o.lock_mapped = false;
    o.map_private = false;
    pinio_checkpoint *shared = load_ok(f, &o, NULL);
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        if (!t->nbytes)
            continue;
        pinio_bytes *b = NULL;
        cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, i, &b), 0);
        cr_assert_eq(pinio_bytes_property(b), PINIO_PROP_FILE);
        const uint8_t *p = NULL;
        cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
        cr_assert_eq(p, t->data, "zero copy: the mapping itself");
        ((uint8_t *)p)[0] ^= 0xff; /* writable in place (SIGSEGV if it were not) */
        cr_assert(!pinio_gen_verify(SEED, t->name, 0, p, t->nbytes, NULL), "%s", t->name);
        ((uint8_t *)p)[0] ^= 0xff;
        ((uint8_t *)p)[t->nbytes - 1] ^= 0x5a; /* and stays changed, here only */
        const pinio_tensor *u = pinio_checkpoint_tensor(shared, i);
        cr_assert(pinio_gen_verify(SEED, u->name, 0, u->data, u->nbytes, NULL),
                  "%s: another load does not see the write", u->name);
        pinio_bytes_free(b);
    }
    pinio_checkpoint_release(shared);
    pinio_checkpoint_release(cp);
    o.map_private = false;
    o.memory = PINIO_MEMORY_PINNED;
    cp = load_ok(f, &o, NULL); /* the file itself is unchanged */
    check_all(cp, 6);
    pinio_checkpoint_release(cp);
}

/* The mapping step on its own, after the plan: the file is truncated in
 * between. The library must answer PINIO_ECHANGED naming the file, and the
 * process must still be alive (no SIGBUS): nothing reads a mapped byte. */
Test(memory, truncated_between_plan_and_mapping_is_echanged, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 6, 1);
    /* Cold also with the readahead at depth forced (fill.c): it reads
     * through the descriptor and stops at the new end of file. */
    for (int round = 0; round < 3; round++) {
        bool cold = round > 0;
        pinio_plan_opts po;
        pinio_plan_opts_default(&po);
        po.cache = cold ? PINIO_CACHE_COLD : PINIO_CACHE_HOT;
        pinio_plan *plan = NULL;
        pinio_diag d = { 0 };
        const char *paths[] = { f };
        cr_assert_eq(pinio_plan_create(&plan, paths, 1, &po, &d), 0, "%s", d.msg);
        cr_assert_eq(truncate(f, 1u << 20), 0);
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_MAPPED;
        o.mapped_fill = round == 2 ? PINIO_FILL_AHEAD : PINIO_FILL_FAULT;
        pinio__fmem fm[1];
        pinio__modes_decide(plan, &o, fm);
        cr_assert_eq(fm[0].mode, PINIO_MEMORY_MAPPED);
        cr_assert_eq(fm[0].fill.ahead, round == 2 && fm[0].fill.window > 0, "%s", fm[0].fill.why);
        pinio_load_report rep = { 0 };
        int rc = pinio__map_files(plan, fm, false, false, &rep, &d);
        cr_assert_eq(rc, PINIO_ECHANGED, "%d: %s", rc, d.msg);
        cr_assert_not_null(strstr(d.msg, "m.safetensors"), "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, "size"), "%s", d.msg);
        pinio__fmem_release(fm, 1);
        pinio_plan_free(plan);
        gen(f, 2u << 20, 6, 1); /* whole again for the next round */
    }
}

/* After a mapped load, truncating the file cuts its pages out of the
 * mapping: the library's own calls stay safe (nothing reads a mapped
 * byte), and a user touching a tensor past the new end gets SIGBUS, as
 * with any file mapping (load.h says so). */
static void on_sigbus(int sig)
{
    (void)sig;
    _exit(42);
}

Test(memory, truncated_after_a_mapped_load_is_sigbus_for_the_user_only, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 6, 1);
    pinio_checkpoint *cp = load_mode(f, PINIO_MEMORY_MAPPED, 0);
    size_t last = pinio_checkpoint_count(cp) - 1;
    const pinio_tensor *t = pinio_checkpoint_tensor(cp, last);
    pinio_bytes *b = NULL;
    cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, last, &b), 0);
    cr_assert_eq(truncate(f, 0), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* Caught, so that the child exits rather than dies (valgrind's
         * wrapper counts a death by signal as a failure). */
        struct sigaction sa = { .sa_handler = on_sigbus };
        sigaction(SIGBUS, &sa, NULL);
        volatile uint8_t x = t->data[t->nbytes - 1];
        (void)x;
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 42, "the user's touch: status %#x", st);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.files_mapped, 1);
    cr_assert_eq(pinio_checkpoint_find(cp, t->name), t);
    pinio_bytes_free(b);
    pinio_checkpoint_release(cp);
}

/* Three shards, one of them cold: AUTO maps the hot ones and reads the cold
 * one into an arena that holds only it; with --verify every digest is the
 * same as a pinned load's. */
Test(memory, mixed_modes_over_shards, .init = disk_setup, .fini = teardown)
{
    char *dir = path_in("sharded");
    gen(dir, 6u << 20, 23, 3);
    char shard[512];
    snprintf(shard, sizeof(shard), "%s/model-00002-of-00003.safetensors", dir);
    int fd = open(shard, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", shard);
    cr_assert_eq(pinio_file_drop_cache(fd), 0);
    close(fd);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.verify = true;
    for (int align = 0; align < 2; align++) {
        o.tensor_align = align ? 64 : 0;
        pinio_checkpoint *cp = NULL, *pinned = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(dir, &o, &cp, &d), 0, "%s", d.msg);
        check_all(cp, 23);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        cr_assert_eq(pinio_checkpoint_file_count(cp), 3);
        if (!align) {
            cr_assert_eq(r.files_mapped, 2, "%s", r.modes);
            cr_assert_eq(pinio_checkpoint_file_memory(cp, 1, NULL), PINIO_MEMORY_PINNED, "%s",
                         r.modes);
            cr_assert_not_null(strstr(r.modes, "cold"), "%s", r.modes);
        }
        for (size_t i = 0; align && i < pinio_checkpoint_count(cp); i++)
            cr_assert_eq((uintptr_t)pinio_checkpoint_tensor(cp, i)->data % 64, 0);
        pinio_load_opts po = o;
        po.memory = PINIO_MEMORY_PINNED;
        cr_assert_eq(load1(dir, &po, &pinned, &d), 0, "%s", d.msg);
        for (size_t i = 0; i < 3; i++)
            cr_assert_str_eq(pinio_checkpoint_sha256(cp, i), pinio_checkpoint_sha256(pinned, i));
        pinio_checkpoint_release(pinned);
        pinio_checkpoint_release(cp);
        fd = open(shard, O_RDONLY);
        cr_assert_eq(pinio_file_drop_cache(fd), 0);
        close(fd);
    }
}

Test(memory, every_tensor_aligned_on_request, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1); /* tensors tiled with no gap: most are not 64-aligned */
    static const uint64_t aligns[] = { 64, 4096 };
    for (int m = 0; m < 3; m++)
        for (size_t a = 0; a < 2; a++) {
            pinio_checkpoint *cp = load_mode(f, (pinio_memory_mode)m, aligns[a]);
            check_all(cp, 23);
            pinio_load_report r;
            pinio_checkpoint_report(cp, &r);
            for (size_t i = 0; i < 23; i++) {
                const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
                cr_assert_eq((uintptr_t)t->data % aligns[a], 0, "%s: %s at %p", mode_names[m],
                             t->name, (const void *)t->data);
                cr_assert_geq(t->align, aligns[a]);
            }
            /* A mapping cannot move a tensor: such a file is read pinned. */
            cr_assert_eq(r.files_pinned, 1, "%s", r.modes);
            if (m != PINIO_MEMORY_PINNED)
                cr_assert_not_null(strstr(r.modes, "aligned"), "%s", r.modes);
            cr_assert_gt(r.realigned, 0);
            cr_assert_eq(r.misaligned, 0);
            pinio_checkpoint_release(cp);
        }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    o.tensor_align = 48;
    cr_assert_eq(load1(f, &o, &cp, &d), -EINVAL);
    o.tensor_align = 8192;
    cr_assert_eq(load1(f, &o, &cp, &d), -EINVAL);
    cr_assert_null(cp);
}

Test(memory, kept_arena_reused_grown_and_busy, .init = disk_setup, .fini = teardown)
{
    char *small = path_in("small.safetensors"), *big = path_in("big.safetensors");
    gen(small, 1u << 20, 5, 1);
    gen(big, 5u << 20, 9, 1);
    pinio_arena *a = NULL;
    cr_assert_eq(pinio_arena_create(&a), 0);
    cr_assert_eq(pinio_arena_size(a), 0);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.arena = a;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    pinio_load_report r;
    static const struct { int file; bool grown; } steps[] = {
        { 0, true }, { 0, false }, { 1, true }, { 0, false }, { 1, false },
    };
    size_t size = 0;
    for (size_t s = 0; s < 5; s++) {
        cr_assert_eq(load1(steps[s].file ? big : small, &o, &cp, &d), 0, "%s", d.msg);
        check_all(cp, steps[s].file ? 9 : 5);
        pinio_checkpoint_report(cp, &r);
        cr_assert(r.arena_kept);
        cr_assert_eq(r.arena_grown, steps[s].grown, "step %zu: %s", s, r.memory);
        cr_assert_eq(r.files_pinned, 1, "a kept arena is asked for pinned memory: %s", r.modes);
        if (steps[s].grown)
            cr_assert_gt(pinio_arena_size(a), size);
        else
            cr_assert_eq(pinio_arena_size(a), size);
        size = pinio_arena_size(a);
        cr_assert_eq(r.arena_bytes, size);
        pinio_checkpoint_release(cp);
    }
    /* In use by a checkpoint, then by a tensor that outlived it. */
    cr_assert_eq(load1(small, &o, &cp, &d), 0, "%s", d.msg);
    pinio_checkpoint *cp2 = NULL;
    cr_assert_eq(load1(small, &o, &cp2, &d), -EBUSY);
    cr_assert_null(cp2);
    cr_assert_not_null(strstr(d.msg, "kept arena"), "%s", d.msg);
    pinio_bytes *b = NULL;
    cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, 0, &b), 0);
    pinio_checkpoint_release(cp);
    cr_assert_eq(load1(small, &o, &cp2, &d), -EBUSY);
    pinio_bytes_free(b);
    cr_assert_eq(load1(small, &o, &cp2, &d), 0, "%s", d.msg);
    /* Released before its checkpoint: the memory lives on with it. */
    pinio_arena_release(a);
    check_all(cp2, 5);
    pinio_checkpoint_release(cp2);
    cr_assert_eq(pinio_arena_create(NULL), -EINVAL);
    pinio_arena_release(NULL);
}

/* register_arena: the reads land by READ_FIXED when the engine registers
 * the arena (fresh or kept), and the report says so, or says why not. */
Test(memory, registered_arena_on_request, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    pinio_arena *a = NULL;
    cr_assert_eq(pinio_arena_create(&a), 0);
    for (int round = 0; round < 4; round++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.register_arena = round != 0;
        o.arena = round == 3 ? a : NULL;
        o.share = PINIO_SHARE_OFF; /* round 0: the arena's own line, not a shared segment's */
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
        check_all(cp, 23);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        if (!o.register_arena) {
            cr_assert(!r.registered);
            cr_assert_not_null(strstr(r.memory, "the default"), "%s", r.memory);
        } else if (r.registered) {
            cr_assert_gt(r.fixed_ops, 0);
            cr_assert_eq(r.backend, PINIO_BACKEND_FIXED_DIRECT);
            cr_assert_not_null(strstr(r.memory, "registered with io_uring slab by slab"), "%s",
                               r.memory);
        } else {
            cr_assert_not_null(strstr(r.memory, "no read went by READ_FIXED"), "%s", r.memory);
        }
        pinio_checkpoint_release(cp);
    }
    pinio_arena_release(a);
}

/* Slab by slab: a 40 MiB arena is 3 slabs of 16 MiB, faulted by the helper
 * and registered as the reads reach them. Every backend, every byte; only
 * the registered rung reads by READ_FIXED, and the report counts the slabs
 * or says why none was used. */
Test(memory, registered_slab_by_slab_every_backend, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 40u << 20, 19, 1);
    for (size_t b = 0; b < 5; b++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.memory = PINIO_MEMORY_PINNED;
        o.backend = backends[b];
        o.register_arena = true;
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(f, &o, &r);
        check_all(cp, 19);
        bool can = backends[b] == PINIO_BACKEND_AUTO || backends[b] == PINIO_BACKEND_FIXED_DIRECT;
        if (can && r.registered) {
            cr_assert_gt(r.fixed_ops, 0);
            cr_assert_not_null(strstr(r.memory, "of 3 slabs"), "%s", r.memory);
            cr_assert_not_null(strstr(r.io_path, "into registered memory (READ_FIXED)"), "%s",
                               r.io_path);
        } else {
            cr_assert(!can || strstr(r.io_path, "refused"), "%s", r.io_path);
            cr_assert(!r.registered, "%s", pinio_backend_name(backends[b]));
            cr_assert_not_null(strstr(r.memory, "no read went by READ_FIXED"), "%s", r.memory);
        }
        pinio_checkpoint_release(cp);
    }
}

/* A kernel without a sparse buffer table (injected through the engine's
 * fault hook: `sparseinval`, as a kernel before 5.19 answers): the load
 * falls back to plain O_DIRECT into the arena, every byte right, and both
 * report lines say why. */
Test(memory, registration_falls_back_without_a_sparse_table, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 20u << 20, 11, 1);
    cr_assert_eq(setenv("PINIO_FAULTS", "sparseinval", 1), 0);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    o.memory = PINIO_MEMORY_PINNED;
    o.register_arena = true;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    int rc = load1(f, &o, &cp, &d);
    unsetenv("PINIO_FAULTS");
    cr_assert_eq(rc, 0, "%s", d.msg);
    check_all(cp, 11);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert(!r.registered);
    cr_assert_eq(r.fixed_ops, 0);
    if (r.backend != PINIO_BACKEND_PREAD) /* no io_uring at all: nothing to refuse */
        cr_assert_not_null(strstr(r.io_path, "sparse buffer table refused (EINVAL)"), "%s",
                           r.io_path);
    cr_assert_not_null(strstr(r.memory, "no read went by READ_FIXED"), "%s", r.memory);
    pinio_checkpoint_release(cp);
}

/* AUTO's rule with a DMA consumer: every file pinned (a hot one too, which
 * a host consumer gets mapped), tensors in locked memory, the reason said;
 * a consumer out of range is -EINVAL before any I/O. */
Test(memory, auto_reads_pinned_for_a_dma_consumer, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    const pinio_cache_policy states[] = { PINIO_CACHE_HOT, PINIO_CACHE_COLD };
    for (size_t c = 0; c < 2; c++)
        for (int dma = 0; dma < 2; dma++) {
            pinio_load_opts o;
            pinio_load_opts_default(&o);
            cr_assert_eq(o.consumer, PINIO_CONSUMER_HOST, "the default");
            o.cache = states[c];
            o.consumer = dma ? PINIO_CONSUMER_DMA : PINIO_CONSUMER_HOST;
            pinio_checkpoint *cp = load_ok(f, &o, NULL);
            check_all(cp, 23);
            bool pinned = dma || states[c] == PINIO_CACHE_COLD;
            check_mode(cp, pinned ? PINIO_MEMORY_PINNED : PINIO_MEMORY_MAPPED);
            const char *why = NULL;
            pinio_checkpoint_file_memory(cp, 0, &why);
            cr_assert_eq(strstr(why, "a DMA consumer waits") != NULL, dma, "%s", why);
            pinio_checkpoint_release(cp);
        }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.consumer = (pinio_consumer)7;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), -EINVAL);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "consumer must be HOST or DMA"), "%s", d.msg);
}

/* A hot file read pinned goes through pread threads (parallel page-cache
 * copies) unless a backend is forced, and the I/O line says which ran and
 * why; every byte either way. */
Test(memory, hot_pinned_reads_go_to_pread_threads, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    for (int forced = 0; forced < 2; forced++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_HOT;
        o.memory = PINIO_MEMORY_PINNED;
        o.backend = forced ? PINIO_BACKEND_BUFFERED : PINIO_BACKEND_AUTO;
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(f, &o, &r);
        check_all(cp, 23);
        cr_assert_eq(r.files_buffered, 1);
        if (!forced) {
            cr_assert_eq(r.backend, PINIO_BACKEND_PREAD, "%s", r.io_path);
            cr_assert_not_null(strstr(r.io_path, "page-cache copies on 4 threads"), "%s",
                               r.io_path);
        } else {
            cr_assert_null(strstr(r.io_path, "page-cache copies on"), "%s", r.io_path);
        }
        pinio_checkpoint_release(cp);
    }
}

/* Whether residency can be measured as it is: valgrind does not know
 * cachestat(2), so pinio_file_residency() falls back to mapping the file
 * for mincore(2), and under valgrind that count is off both ways (valgrind
 * reads the head of every file it sees mapped, caching its first 16 KiB,
 * and counted none of a range readahead(2) had just brought in). The plain
 * and sanitizer stages check the counts; valgrind checks the code's
 * memory. */
static bool residency_exact(int fd)
{
    pinio_residency r;
    cr_assert_eq(pinio_file_residency(fd, 0, 0, &r), 0);
    return r.method == PINIO_RESIDENCY_CACHESTAT || !getenv("PINIO_UNDER_VALGRIND");
}

/* Drops the file's pages and asserts that none is left cached: a test of
 * the fill must start from a cold file. */
static void make_cold(const char *f)
{
    int fd = open(f, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", f);
    cr_assert_eq(pinio_file_drop_cache(fd), 0);
    pinio_residency r;
    cr_assert_eq(pinio_file_residency(fd, 0, 0, &r), 0);
    cr_assert(r.cached_bytes == 0 || !residency_exact(fd), "%s: %llu bytes still cached", f,
              (unsigned long long)r.cached_bytes);
    close(fd);
}

/* The fill on its own: readahead at depth over a cold range brings every
 * page of it into the page cache without mapping or reading a byte, and
 * nothing outside it. */
Test(memory, fill_ahead_brings_the_range_into_the_page_cache, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 8u << 20, 6, 1);
    make_cold(f);
    int fd = open(f, O_RDONLY);
    cr_assert_geq(fd, 0);
    pinio__fill fill;
    pinio__fill_decide(fd, PINIO_FILL_AHEAD, &fill);
    if (!fill.ahead) {
        close(fd);
        teardown(); /* Criterion runs no .fini after a skip */
        cr_skip_test("no readahead on this file system: %s", fill.why);
    }
    cr_assert_gt(fill.window, 0);
    cr_assert_not_null(strstr(fill.why, "KiB windows"), "%s", fill.why);
    pinio__fill_run(fd, 1u << 20, 5u << 20, &fill);
    /* readahead(2) may return before its reads complete: a page under
     * read is in the page cache already, which is what residency counts. */
    pinio_residency in, before, after;
    cr_assert_eq(pinio_file_residency(fd, 1u << 20, 4u << 20, &in), 0);
    cr_assert_eq(pinio_file_residency(fd, 0, 1u << 20, &before), 0);
    cr_assert_eq(pinio_file_residency(fd, 5u << 20, 0, &after), 0);
    cr_assert(in.cached_bytes == 4u << 20 || !residency_exact(fd), "filled %llu of 4 MiB",
              (unsigned long long)in.cached_bytes);
    cr_assert(before.cached_bytes + after.cached_bytes == 0 || !residency_exact(fd),
              "read outside the range: %llu bytes before, %llu after",
              (unsigned long long)before.cached_bytes, (unsigned long long)after.cached_bytes);
    /* FAULT, and AUTO on this local file system, leave it to the populate. */
    pinio__fill_decide(fd, PINIO_FILL_FAULT, &fill);
    cr_assert(!fill.ahead);
    cr_assert_str_eq(fill.why, "mapped_fill FAULT");
    close(fd);
}

/* The file systems where AUTO must leave the fill to the populate. */
static bool local_fs(const char *f)
{
    struct statfs sf;
    cr_assert_eq(statfs(f, &sf), 0);
    return sf.f_type == 0xEF53 /* ext2/3/4 */ || sf.f_type == 0x58465342 /* xfs */ ||
           sf.f_type == 0x9123683E /* btrfs */ || sf.f_type == 0x01021994 /* tmpfs */;
}

/* A cold file in mapped mode under each fill policy: every byte right, the
 * report saying how the page cache was filled, the fill counted. */
Test(memory, cold_mapped_under_each_fill_policy, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    static const pinio_mapped_fill fills[] = { PINIO_FILL_AUTO, PINIO_FILL_AHEAD,
                                               PINIO_FILL_FAULT };
    for (size_t k = 0; k < 3; k++)
        for (int priv = 0; priv < 2; priv++) {
            make_cold(f);
            pinio_load_opts o;
            pinio_load_opts_default(&o);
            o.memory = PINIO_MEMORY_MAPPED;
            o.mapped_fill = (uint8_t)fills[k];
            o.map_private = priv;
            pinio_load_report r;
            pinio_checkpoint *cp = load_ok(f, &o, &r);
            check_all(cp, 23);
            check_mode(cp, PINIO_MEMORY_MAPPED);
            cr_assert_eq(r.files_filled, 1, "%s", r.cache);
            cr_assert_gt(r.fill_seconds, 0);
            cr_assert_eq(r.read_bytes, 0, "a mapped file is not read by the engine");
            bool depth = strstr(r.cache, "page cache filled by readahead at depth (") != NULL;
            bool fault = strstr(r.cache, "page cache filled by the mapping's readahead (") != NULL;
            cr_assert(depth != fault, "%s", r.cache);
            cr_assert_eq(r.files_filled_ahead, depth, "%s", r.cache);
            if (fills[k] == PINIO_FILL_FAULT)
                cr_assert(strstr(r.cache, "(mapped_fill FAULT)"), "%s", r.cache);
            if (fills[k] == PINIO_FILL_AHEAD)
                cr_assert(depth || strstr(r.cache, "read_ahead_kb 0"), "%s", r.cache);
            if (fills[k] == PINIO_FILL_AUTO && local_fs(f))
                cr_assert(fault && strstr(r.cache, "(a local file system)"), "%s", r.cache);
            pinio_checkpoint_release(cp);
        }
    /* An unknown policy is refused before anything is opened. */
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.mapped_fill = PINIO_FILL_FAULT + 1;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), -EINVAL);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "mapped_fill"), "%s", d.msg);
}
