/* pinio_load end to end: generated checkpoints loaded through every engine
 * backend, on a disk file system and on tmpfs, every byte checked against the
 * generator; selection (filters, index allowlist), verification, errors,
 * files changed underneath a load, fault injection and release orders. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/load.h"
#include "pinio/sys.h"
#include "src/load/plan_internal.h"
#include "tests/common/limits.h"
#include "tests/load/load_helpers.h"

static bool fm(const char *const *filters, size_t n, const char *name)
{
    return pinio__filter_match(filters, n, name, strlen(name));
}

static void roundtrip_all_backends(void)
{
    char *f = path_in("m.safetensors");
    gen(f, 6u << 20, 23, 1);
    static const pinio_backend backends[] = { PINIO_BACKEND_AUTO, PINIO_BACKEND_FIXED_DIRECT,
                                              PINIO_BACKEND_DIRECT, PINIO_BACKEND_BUFFERED,
                                              PINIO_BACKEND_PREAD };
    static const pinio_cache_policy caches[] = { PINIO_CACHE_COLD, PINIO_CACHE_HOT,
                                                 PINIO_CACHE_AUTO };
    for (size_t b = 0; b < 5; b++)
        for (size_t c = 0; c < 3; c++) {
            pinio_load_opts o;
            pinio_load_opts_default(&o);
            o.backend = backends[b];
            o.cache = caches[c];
            o.queue_depth = 4;
            o.request_size = 64u << 10; /* many pieces per read: exercises batching */
            pinio_checkpoint *cp = NULL;
            pinio_diag d = { 0 };
            int rc = load1(f, &o, &cp, &d);
            cr_assert_eq(rc, 0, "backend %s cache %zu: %s", pinio_backend_name(backends[b]), c,
                         d.msg);
            check_all(cp, 23);
            pinio_checkpoint_release(cp);
        }
}

Test(load, roundtrip_every_backend_on_disk, .init = disk_setup, .fini = teardown)
{
    roundtrip_all_backends();
}

Test(load, roundtrip_every_backend_on_tmpfs, .init = shm_setup, .fini = teardown)
{
    roundtrip_all_backends();
}

Test(load, direct_on_and_off, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 1u << 20, 7, 1);
    for (int pol = 0; pol < 3; pol++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_PINNED; /* the read policy is under test, not mapping */
        o.direct = (pinio_direct_policy)pol;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
        check_all(cp, 7);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        if (o.direct == PINIO_DIRECT_OFF)
            cr_assert_eq(r.files_buffered, 1);
        pinio_checkpoint_release(cp);
    }
}

Test(load, hot_file_is_read_buffered_cold_with_o_direct, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 5, 1);
    /* freshly written: in the page cache; read (pinned), not mapped */
    pinio_load_opts pinned;
    pinio_load_opts_default(&pinned);
    pinned.memory = PINIO_MEMORY_PINNED;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &pinned, &cp, &d), 0, "%s", d.msg);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.files_buffered, 1, "cache: %s", r.cache);
    cr_assert_not_null(strstr(r.cache, "page cache"));
    pinio_checkpoint_release(cp);

    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.files_direct, 1, "cache: %s", r.cache);
    check_all(cp, 5);
    pinio_checkpoint_release(cp);
    /* O_DIRECT did not fill the cache: auto now chooses O_DIRECT too */
    cr_assert_eq(load1(f, NULL, &cp, &d), 0, "%s", d.msg);
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.files_direct, 1, "cache: %s", r.cache);
    pinio_checkpoint_release(cp);
}

/* A mapped file is never read by the engine: the cache line says what
 * happened to its pages (filled by the mapping's readahead when cold, used
 * as they were when hot), never O_DIRECT; the struct agrees. */
Test(load, cache_line_of_a_mapped_load_says_what_happened, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 5, 1);
    for (int hot = 0; hot < 2; hot++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_MAPPED;
        o.cache = hot ? PINIO_CACHE_HOT : PINIO_CACHE_COLD;
        o.mapped_fill = PINIO_FILL_FAULT; /* the same line on any file system */
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(f, &o, &r);
        check_all(cp, 5);
        cr_assert_eq(r.files_mapped, 1, "%s", r.modes);
        cr_assert_eq(r.files_direct + r.files_buffered, 0);
        cr_assert_eq(r.files_filled, hot ? 0u : 1u);
        cr_assert_null(strstr(r.cache, "O_DIRECT"), "%s", r.cache);
        cr_assert_not_null(strstr(r.cache, hot ? "m.safetensors: mapped, already in the page cache, --cache hot"
                                               : "m.safetensors: mapped, page cache filled by the "
                                                 "mapping's readahead (mapped_fill FAULT), "
                                                 "cache dropped"),
                           "%s", r.cache);
        pinio_checkpoint_release(cp);
    }
    /* and a pinned cold load still says O_DIRECT */
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_PINNED;
    o.cache = PINIO_CACHE_COLD;
    pinio_load_report r;
    pinio_checkpoint *cp = load_ok(f, &o, &r);
    cr_assert_eq(r.files_filled, 0);
    cr_assert_not_null(strstr(r.cache, "m.safetensors: O_DIRECT, cache dropped"), "%s", r.cache);
    pinio_checkpoint_release(cp);
}

/* The report grows like the options: a caller built against an older,
 * smaller struct gets its prefix and not a byte past it; a newer, larger
 * one gets zeros past the library's fields. */
Test(load, an_older_smaller_report_struct_is_never_written_past, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 3, 1);
    pinio_load_report full;
    pinio_checkpoint *cp = load_ok(f, NULL, &full);
    cr_assert_eq(full.struct_size, sizeof(full));
    cr_assert_eq(full.tensors, 3);

    /* An older header's struct: up to `bytes`, the guard after it. */
    size_t old = offsetof(pinio_load_report, bytes) + sizeof(full.bytes);
    unsigned char buf[sizeof(pinio_load_report) + 64];
    memset(buf, 0xA5, sizeof(buf));
    pinio_checkpoint_report_sized(cp, (pinio_load_report *)buf, old);
    for (size_t i = old; i < sizeof(buf); i++)
        cr_assert_eq(buf[i], 0xA5, "byte %zu past the caller's %zu-byte struct written", i, old);
    pinio_load_report got;
    memcpy(&got, buf, old);
    cr_assert_eq(got.struct_size, old);
    cr_assert_eq(got.tensors, 3);
    cr_assert_eq(got.bytes, full.bytes);

    /* A newer header's larger struct: our fields, then zeros. */
    memset(buf, 0xA5, sizeof(buf));
    pinio_checkpoint_report_sized(cp, (pinio_load_report *)buf, sizeof(buf));
    memcpy(&got, buf, sizeof(got));
    cr_assert_eq(got.struct_size, sizeof(got));
    cr_assert_eq(got.files_filled, full.files_filled);
    for (size_t i = sizeof(got); i < sizeof(buf); i++)
        cr_assert_eq(buf[i], 0);
    /* Too small to hold even the size: nothing written. */
    memset(buf, 0xA5, sizeof(buf));
    pinio_checkpoint_report_sized(cp, (pinio_load_report *)buf, sizeof(size_t) - 1);
    cr_assert_eq(buf[0], 0xA5);
    pinio_checkpoint_release(cp);
}

/* Time to ready covers the whole call: never less than `seconds` (which
 * ends when the checkpoint is built), in every memory mode, and without
 * the page dropping of --cache cold (as `seconds`). No bound on either. */
Test(load, ready_seconds_spans_the_call, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 3, 1);
    static const pinio_memory_mode modes[] = { PINIO_MEMORY_AUTO, PINIO_MEMORY_PINNED,
                                               PINIO_MEMORY_MAPPED };
    for (size_t m = 0; m < 3; m++)
        for (int cold = 0; cold < 2; cold++) {
            pinio_load_opts o;
            pinio_load_opts_default(&o);
            o.memory = modes[m];
            o.cache = cold ? PINIO_CACHE_COLD : PINIO_CACHE_AUTO;
            pinio_load_report r;
            pinio_checkpoint *cp = load_ok(f, &o, &r);
            cr_assert_gt(r.ready_seconds, 0.0, "mode %zu cold %d", m, cold);
            cr_assert_geq(r.ready_seconds, r.seconds, "mode %zu cold %d: ready %.9f < %.9f", m,
                          cold, r.ready_seconds, r.seconds);
            pinio_checkpoint_release(cp);
        }
}

Test(load, sharded_directory_index_and_file_list, .init = disk_setup, .fini = teardown)
{
    char *dir = path_in("sharded");
    gen(dir, 3u << 20, 17, 3);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(dir, NULL, &cp, &d), 0, "%s", d.msg);
    check_all(cp, 17);
    cr_assert_eq(pinio_checkpoint_file_count(cp), 3);
    pinio_checkpoint_release(cp);

    char idx[600];
    snprintf(idx, sizeof(idx), "%s/%s", dir, PINIO_GEN_INDEX_NAME);
    cr_assert_eq(load1(idx, NULL, &cp, &d), 0, "%s", d.msg);
    check_all(cp, 17);
    pinio_checkpoint_release(cp);

    char s[3][600];
    const char *paths[3];
    for (unsigned i = 0; i < 3; i++) {
        char name[64];
        pinio_gen_shard_name(name, sizeof(name), i + 1, 3);
        snprintf(s[i], sizeof(s[i]), "%s/%s", dir, name);
        paths[i] = s[i];
    }
    cr_assert_eq(pinio_load(paths, 3, NULL, &cp, &d), 0, "%s", d.msg);
    check_all(cp, 17);
    pinio_checkpoint_release(cp);
}

Test(load, filters_select_before_io, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 8u << 20, 40, 1);
    const char *filters[] = { "model.layers.1", "*.q_proj.weight" };
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.filters = filters;
    o.nfilters = 2;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
    size_t n = pinio_checkpoint_count(cp);
    cr_assert_gt(n, 0);
    cr_assert_lt(n, 40);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.skipped + n, 40);
    for (size_t i = 0; i < n; i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        cr_assert(fm(filters, 2, t->name));
        cr_assert(pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL));
    }
    /* holes of skipped tensors were not read (up to the small merge gap) */
    cr_assert_lt(r.read_bytes, (8u << 20) * 3 / 4, "read %llu", (unsigned long long)r.read_bytes);
    pinio_checkpoint_release(cp);
}

Test(load, filter_matching_rules)
{
    const char *f1[] = { "model.layers.1" };
    cr_assert(fm(f1, 1, "model.layers.1"));
    cr_assert(fm(f1, 1, "model.layers.1.mlp.up_proj.weight"));
    cr_assert_not(fm(f1, 1, "model.layers.10.mlp.up_proj.weight"));
    const char *f2[] = { "model.layers.1." };
    cr_assert(fm(f2, 1, "model.layers.1.x"));
    const char *f3[] = { "*.weight", "lm_head?bias" };
    cr_assert(fm(f3, 2, "a.b.weight"));
    cr_assert(fm(f3, 2, "lm_head.bias"));
    cr_assert_not(fm(f3, 2, "a.b.bias"));
    cr_assert(fm(NULL, 0, "anything"));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(load, index_is_a_per_shard_allowlist, .init = disk_setup, .fini = teardown)
{
    char *dir = path_in("sh");
    gen(dir, 1u << 20, 6, 2);
    /* the index names only two tensors; the others are ignored and counted */
    pinio_st *st = NULL;
    char shard1[600];
    snprintf(shard1, sizeof(shard1), "%s/model-00001-of-00002.safetensors", dir);
    cr_assert_eq(pinio_st_open(&st, shard1, 0, NULL), 0);
    char idx[2048];
    snprintf(idx, sizeof(idx),
             "{\"metadata\":{\"total_size\":1},\"weight_map\":{\"%s\":"
             "\"model-00001-of-00002.safetensors\",\"%s\":\"model-00001-of-00002.safetensors\"}}",
             pinio_st_at(st, 0)->name, pinio_st_at(st, 2)->name);
    char *ipath = path_in("sh/model.safetensors.index.json");
    write_file(ipath, idx);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(dir, NULL, &cp, &d), 0, "%s", d.msg);
    check_all(cp, 2);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.unindexed, 1, "shard 1 has 3 tensors, 2 are indexed");
    pinio_checkpoint_release(cp);

    /* a tensor the index maps to a shard that lacks it */
    snprintf(idx, sizeof(idx),
             "{\"weight_map\":{\"no.such.tensor\":\"model-00001-of-00002.safetensors\"}}");
    write_file(ipath, idx);
    cr_assert_eq(load1(dir, NULL, &cp, &d), -ENOENT);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "no.such.tensor"), "%s", d.msg);

    /* a shard that does not exist */
    snprintf(idx, sizeof(idx), "{\"weight_map\":{\"%s\":\"missing.safetensors\"}}",
             pinio_st_at(st, 0)->name);
    write_file(ipath, idx);
    cr_assert_eq(load1(dir, NULL, &cp, &d), -ENOENT);
    cr_assert_not_null(strstr(d.msg, "missing.safetensors"), "%s", d.msg);

    /* a shard outside the index's folder */
    snprintf(idx, sizeof(idx), "{\"weight_map\":{\"x\":\"../../etc/passwd\"}}");
    write_file(ipath, idx);
    cr_assert_eq(load1(dir, NULL, &cp, &d), PINIO_EFORMAT);

    /* the same tensor twice in weight_map; malformed JSON */
    snprintf(idx, sizeof(idx),
             "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"a\":"
             "\"model-00001-of-00002.safetensors\"}}");
    write_file(ipath, idx);
    cr_assert_eq(load1(dir, NULL, &cp, &d), PINIO_EFORMAT);
    cr_assert_not_null(strstr(d.msg, "DuplicateKey"), "%s", d.msg);
    write_file(ipath, "{\"weight_map\":{}}");
    cr_assert_eq(load1(dir, NULL, &cp, &d), PINIO_EFORMAT);
    cr_assert_not_null(strstr(d.msg, "weight_map is empty"), "%s", d.msg);
    write_file(ipath, "{\"weight_map\":{\"a\":1}}");
    cr_assert_eq(load1(dir, NULL, &cp, &d), PINIO_EFORMAT);
    cr_assert_not_null(strstr(d.msg, "model.safetensors.index.json"), "%s", d.msg);
    pinio_st_free(st);
}

Test(load, same_tensor_in_two_files_is_an_error, .init = disk_setup, .fini = teardown)
{
    char *a = path_in("a.safetensors"), *b = path_in("b.safetensors");
    gen(a, 1u << 20, 4, 1);
    gen(b, 1u << 20, 4, 1);
    const char *paths[] = { a, b };
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_load(paths, 2, NULL, &cp, &d), -EEXIST);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "a.safetensors"), "%s", d.msg);
}

Test(load, bad_inputs_name_the_file, .init = disk_setup, .fini = teardown)
{
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(path_in("nope.safetensors"), NULL, &cp, &d), -ENOENT);
    cr_assert_not_null(strstr(d.msg, "nope.safetensors"));
    cr_assert_eq(load1(tmpdir, NULL, &cp, &d), -ENOENT, "empty directory");
    cr_assert_not_null(strstr(d.msg, "no *.safetensors"), "%s", d.msg);
    char *fifo = path_in("fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(load1(fifo, NULL, &cp, &d), -EINVAL);
    cr_assert_not_null(strstr(d.msg, "fifo"), "%s", d.msg);
    char *bad = path_in("bad.safetensors");
    write_file(bad, "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}        ");
    cr_assert_eq(load1(bad, NULL, &cp, &d), PINIO_EFORMAT);
    cr_assert_not_null(strstr(d.msg, "bad.safetensors"), "%s", d.msg);
    cr_assert_null(cp);
    cr_assert_eq(pinio_load(NULL, 0, NULL, &cp, &d), -EINVAL);
}

static void truncate_half(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size / 2), 0);
}

static void append_bytes(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "trailing", 8), 8);
    close(fd);
}

/* Same size, other bytes: the last page of the data section inverted in
 * place (no truncate, no rename). */
static void flip_last_page(const char *path)
{
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    uint8_t page[4096];
    off_t at = st.st_size - (off_t)sizeof(page);
    cr_assert_eq(pread(fd, page, sizeof(page), at), (ssize_t)sizeof(page));
    for (size_t i = 0; i < sizeof(page); i++)
        page[i] = (uint8_t)~page[i];
    cr_assert_eq(pwrite(fd, page, sizeof(page), at), (ssize_t)sizeof(page));
    close(fd);
}

static int heap_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = (uint8_t *)ctx + r->dest_offset;
    return 0;
}

static const pinio_dest_ops heap_dest = { .size = sizeof(pinio_dest_ops), .claim = heap_claim };

/* The load's two halves with a change in between: what a writer replacing
 * the checkpoint underneath a running load does. */
static int plan_change_execute(const char *f, pinio_cache_policy cache, void (*change)(const char *),
                               bool check_bytes, pinio_diag *d)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = cache;
    pinio_plan *p = NULL;
    int rc = pinio_plan_create(&p, &f, 1, &po, d);
    cr_assert_eq(rc, 0, "%s", d->msg);
    change(f);
    if (cache == PINIO_CACHE_COLD)
        cr_assert_eq(pinio_plan_drop_cache(p, NULL, d), 0, "%s", d->msg);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    uint8_t *mem = aligned_alloc(4096, pi.dest_bytes);
    cr_assert_not_null(mem);
    rc = pinio_plan_execute(p, &heap_dest, mem, NULL, NULL, d);
    for (size_t i = 0; check_bytes && i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        cr_assert(pinio_gen_verify(SEED, t->name, 0, mem + t->dest_offset, t->nbytes, NULL),
                  "tensor %s holds the validated file's bytes", t->name);
    }
    free(mem);
    pinio_plan_free(p);
    return rc;
}

static void changed_underneath(void (*change)(const char *))
{
    char *f = path_in("m.safetensors");
    for (int cold = 0; cold < 2; cold++) {
        gen(f, 2u << 20, 9, 1);
        pinio_diag d = { 0 };
        int rc = plan_change_execute(f, cold ? PINIO_CACHE_COLD : PINIO_CACHE_HOT, change, false,
                                     &d);
        cr_assert_eq(rc, PINIO_ECHANGED, "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, "m.safetensors"), "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, "changed"), "%s", d.msg);
        cr_assert_eq(d.index, 0, "the diagnostic's index is the changed file's");
    }
}

Test(load, file_truncated_after_header_is_an_error, .init = disk_setup, .fini = teardown)
{
    changed_underneath(truncate_half);
}

Test(load, file_extended_after_header_is_an_error, .init = disk_setup, .fini = teardown)
{
    changed_underneath(append_bytes);
}

Test(load, file_rewritten_in_place_at_the_same_size_is_an_error, .init = disk_setup,
     .fini = teardown)
{
    /* Only the size was compared once: torn tensors and success. */
    changed_underneath(flip_last_page);
}

static void rename_other_over(const char *path)
{
    char *other = path_in("other.safetensors");
    gen(other, 2u << 20, 9, 1);
    flip_last_page(other);
    cr_assert_eq(rename(other, path), 0);
}

Test(load, a_file_renamed_over_the_path_is_not_the_one_read, .init = disk_setup, .fini = teardown)
{
    /* The plan reads through the descriptors it validated: every byte is
     * the validated file's, whatever the path names now; and the validated
     * file was unlinked underneath (its status change time moved), which
     * the end-of-load check reports as the path naming another file. */
    char *f = path_in("m.safetensors");
    for (int cold = 0; cold < 2; cold++) {
        gen(f, 2u << 20, 9, 1);
        pinio_diag d = { 0 };
        int rc = plan_change_execute(f, cold ? PINIO_CACHE_COLD : PINIO_CACHE_HOT,
                                     rename_other_over, true, &d);
        cr_assert_eq(rc, PINIO_ECHANGED, "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, "the path now names another file"), "%s", d.msg);
        cr_assert_not_null(strstr(d.msg, f), "%s", d.msg);
    }
}

static void sha256_file(const char *path, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    FILE *f = fopen(path, "rb");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        EVP_DigestUpdate(c, buf, n);
    fclose(f);
    EVP_DigestFinal_ex(c, md, &len);
    EVP_MD_CTX_free(c);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

Test(load, verify_sha256_whole_and_filtered, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 3u << 20, 11, 1);
    char want[65];
    sha256_file(f, want);
    const char *filters[] = { "model.layers.0" };
    for (int filtered = 0; filtered < 2; filtered++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.verify = true;
        const char *exp[] = { want };
        o.expected_sha256 = exp;
        o.nexpected = 1;
        o.filters = filtered ? filters : NULL;
        o.nfilters = filtered ? 1 : 0;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
        cr_assert_str_eq(pinio_checkpoint_sha256(cp, 0), want);
        pinio_checkpoint_release(cp);
    }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.verify = true;
    const char *wrong[] = { "0000000000000000000000000000000000000000000000000000000000000000" };
    o.expected_sha256 = wrong;
    o.nexpected = 1;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), PINIO_EFORMAT);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "sha256 mismatch"), "%s", d.msg);
}

static int count_progress(void *ctx, const pinio_progress *p)
{
    (void)p;
    ++*(int *)ctx;
    return 0;
}

/* Shards hashed while they are read: the first shard is in the page cache
 * (read buffered, in the second pass) and the others are not (O_DIRECT,
 * first pass), so the hasher, which goes in file order, waits on the first
 * while the others arrive. Every digest equals a plain SHA-256 of the file,
 * with and without a progress callback (two ways of batching the reads). */
Test(load, verify_sharded_hot_and_cold, .init = disk_setup, .fini = teardown)
{
    char *dir = path_in("vshards");
    gen(dir, 6u << 20, 23, 3);
    for (int with_progress = 0; with_progress < 2; with_progress++) {
        char names[3][600];
        const char *paths[3];
        for (unsigned i = 0; i < 3; i++) {
            char name[64];
            pinio_gen_shard_name(name, sizeof(name), i + 1, 3);
            snprintf(names[i], sizeof(names[i]), "%s/%s", dir, name);
            paths[i] = names[i];
            int fd = open(names[i], O_RDONLY);
            cr_assert_geq(fd, 0);
            fdatasync(fd); /* dirty pages cannot be dropped */
            if (i == 0) {
                char buf[65536];
                while (read(fd, buf, sizeof(buf)) > 0) {
                }
            } else {
                posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            }
            close(fd);
        }
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_PINNED; /* the cached shard is read, not mapped */
        o.verify = true;
        int calls = 0;
        if (with_progress) {
            o.progress = count_progress;
            o.progress_ctx = &calls;
        }
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(pinio_load(paths, 3, &o, &cp, &d), 0, "%s", d.msg);
        check_all(cp, 23);
        cr_assert_eq(pinio_checkpoint_file_count(cp), 3);
        for (size_t i = 0; i < 3; i++) {
            char want[65];
            sha256_file(pinio_checkpoint_file(cp, i), want);
            cr_assert_str_eq(pinio_checkpoint_sha256(cp, i), want, "%s",
                             pinio_checkpoint_file(cp, i));
        }
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        cr_assert(r.verified);
        cr_assert_eq(r.files_buffered, 1, "the cached shard is read buffered (%zu buffered, %zu direct)",
                     r.files_buffered, r.files_direct);
        cr_assert_eq(r.files_direct, 2);
        cr_assert(!with_progress || calls > 1, "%d progress calls", calls);
        pinio_checkpoint_release(cp);
    }
}

Test(load, eio_fails_the_load_with_file_and_offset, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 8, 1);
    setenv("PINIO_FAULTS", "eio@3", 1);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    o.request_size = 64u << 10;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), -EIO, "%s", d.msg);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "m.safetensors"), "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "offset"), "%s", d.msg);
    unsetenv("PINIO_FAULTS");
}

/* Silent corruption in flight (one byte flipped in a completed read, after
 * the device said all was well): the digest computed while reading differs
 * from the file's, so a load that was told the right digest fails with a
 * mismatch naming the file and returns nothing; unverified, the same load
 * would hand out a wrong byte. */
Test(load, verify_catches_a_byte_flipped_in_flight, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 8, 1);
    char want[65];
    sha256_file(f, want);
    static const char *specs[] = { "corrupt@2", "corrupt@9" };
    for (size_t i = 0; i < 2; i++) {
        setenv("PINIO_FAULTS", specs[i], 1);
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.request_size = 256u << 10;
        o.verify = true;
        const char *exp[] = { want };
        o.expected_sha256 = exp;
        o.nexpected = 1;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &cp, &d), PINIO_EFORMAT, "%s: %s", specs[i], d.msg);
        cr_assert_null(cp);
        cr_assert(strstr(d.msg, "sha256 mismatch") && strstr(d.msg, "m.safetensors"), "%s",
                  d.msg);
    }
    unsetenv("PINIO_FAULTS");
}

/* A filtered load hashes what landed where it landed, and reads again only
 * what it did not load: a byte flipped in flight in a selected tensor fails
 * the digest (it used to pass: the file was hashed by re-reading it whole). */
Test(load, verify_of_a_filtered_load_hashes_the_bytes_that_landed, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 8, 1);
    char want[65];
    sha256_file(f, want);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, NULL, &cp, &d), 0, "%s", d.msg);
    char n1[128], n5[128];
    snprintf(n1, sizeof(n1), "%s", pinio_checkpoint_tensor(cp, 1)->name);
    snprintf(n5, sizeof(n5), "%s", pinio_checkpoint_tensor(cp, 5)->name);
    pinio_checkpoint_release(cp);
    const char *filters[] = { n1, n5 };
    const char *exp[] = { want };
    for (int corrupt = 0; corrupt < 2; corrupt++) {
        if (corrupt)
            setenv("PINIO_FAULTS", "corrupt@1", 1);
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.request_size = 256u << 10;
        o.filters = filters;
        o.nfilters = 2;
        o.verify = true;
        o.expected_sha256 = exp;
        o.nexpected = 1;
        cp = NULL;
        memset(&d, 0, sizeof(d));
        int rc = load1(f, &o, &cp, &d);
        unsetenv("PINIO_FAULTS");
        if (corrupt) {
            cr_assert_eq(rc, PINIO_EFORMAT, "a flipped byte in a loaded tensor: %s", d.msg);
            cr_assert_not_null(strstr(d.msg, "sha256 mismatch"), "%s", d.msg);
            cr_assert_null(cp);
            continue;
        }
        cr_assert_eq(rc, 0, "%s", d.msg);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        cr_assert(r.verified);
        cr_assert_geq(r.verify_landed_bytes, r.bytes, "every loaded byte hashed as it landed");
        cr_assert_gt(r.verify_reread_bytes, 0, "the unselected tensors were read again");
        struct stat st;
        cr_assert_eq(stat(f, &st), 0);
        cr_assert_eq(r.verify_landed_bytes + r.verify_reread_bytes, (uint64_t)st.st_size,
                     "each byte of the file hashed once");
        cr_assert_str_eq(pinio_checkpoint_sha256(cp, 0), want);
        pinio_checkpoint_release(cp);
    }
}

Test(load, short_and_eagain_faults_still_give_correct_bytes, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 4u << 20, 8, 1);
    static const char *specs[] = { "short@2x5", "eagain@1x8", "seed=5,rate=0.3", "regnomem" };
    for (size_t i = 0; i < 4; i++) {
        setenv("PINIO_FAULTS", specs[i], 1);
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.request_size = 64u << 10;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s: %s", specs[i], d.msg);
        check_all(cp, 8);
        pinio_checkpoint_release(cp);
    }
    unsetenv("PINIO_FAULTS");
}

Test(load, tensors_outlive_the_checkpoint_in_any_order, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 2u << 20, 6, 1);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, NULL, &cp, &d), 0, "%s", d.msg);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    pinio_bytes *b[6];
    char names[6][128];
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, i, &b[i]), 0);
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        snprintf(names[i], sizeof(names[i]), "%s", t->name);
        pinio_property want = r.files_mapped       ? PINIO_PROP_FILE
                              : r.locked || r.registered ? PINIO_PROP_PINNED
                                                         : PINIO_PROP_NATIVE;
        cr_assert_eq(pinio_bytes_property(b[i]), want, "where the bytes live");
        cr_assert_eq(pinio_bytes_len(b[i]), t->nbytes);
        const uint8_t *p = NULL;
        cr_assert_eq(pinio_bytes_data(b[i], PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
        cr_assert_eq(p, t->data, "a tensor's bytes view the arena or mapping, no copy");
    }
    cr_assert_eq(pinio_checkpoint_tensor_bytes(cp, 6, &b[0]), -ERANGE);
    pinio_bytes_free(b[0]);            /* before the checkpoint */
    pinio_checkpoint_release(cp);      /* between */
    for (size_t i = 1; i < 6; i++) {   /* after: the arena is still alive */
        const uint8_t *p = NULL;
        cr_assert_eq(pinio_bytes_data(b[i], PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
        cr_assert(pinio_gen_verify(SEED, names[i], 0, p, pinio_bytes_len(b[i]), NULL));
        pinio_bytes_free(b[i]);
    }
}

Test(load, resident_peak_memory_is_selected_bytes_plus_a_little, .init = disk_setup,
     .fini = teardown)
{
    if (getenv("PINIO_UNDER_VALGRIND")) {
        teardown(); /* Criterion runs no .fini after a skip */
        cr_skip_test("valgrind's own memory makes peak RSS meaningless; checked in the other stages");
    }
    char *f = path_in("m.safetensors");
    gen(f, 96u << 20, 48, 1);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long before = ru.ru_maxrss; /* KiB */
    const char *filters[] = { "model.layers.0", "model.layers.1" };
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.filters = filters;
    o.nfilters = 2;
    o.cache = PINIO_CACHE_COLD;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    getrusage(RUSAGE_SELF, &ru);
    long grown = (ru.ru_maxrss - before) * 1024;
    cr_assert_lt(r.bytes, 96u << 20);
    cr_assert_leq(grown, (long)r.bytes + (64l << 20), "peak grew %ld for %llu selected bytes",
                  grown, (unsigned long long)r.bytes);
    pinio_checkpoint_release(cp);
}

struct prog {
    uint64_t last, total;
    int calls;
    int cancel_at;
};

static int on_progress(void *ctx, const pinio_progress *pg)
{
    struct prog *p = ctx;
    uint64_t done = pg->done_bytes, total = pg->total_bytes;
    cr_assert_geq(done, p->last, "progress never goes back");
    p->last = done;
    p->total = total;
    return ++p->calls == p->cancel_at;
}

Test(load, progress_callback_sees_all_bytes_and_can_cancel, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 64u << 20, 30, 1); /* batches of 1/16 of the load, at least 16 MiB: 4 calls */
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_PINNED; /* progress counts reads */
    struct prog p = { 0 };
    o.progress = on_progress;
    o.progress_ctx = &p;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
    cr_assert_geq(p.calls, 3);
    cr_assert_eq(p.last, p.total);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(p.total, r.read_bytes);
    pinio_checkpoint_release(cp);

    struct prog q = { .cancel_at = 1 };
    o.progress_ctx = &q;
    cr_assert_eq(load1(f, &o, &cp, &d), -ECANCELED);
    cr_assert_null(cp);
}

Test(load, arena_placement_verified_and_locked, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 40u << 20, 12, 1); /* large enough for the fault-ahead thread */
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    o.node = 0;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, &o, &cp, &d), 0, "%s", d.msg);
    check_all(cp, 12);
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    cr_assert_eq(r.node, 0);
    cr_assert(r.node_verified, "pages of the arena found on node 0 after the load");
    pinio_sysinfo si;
    pinio_sys_probe(&si);
    if (si.registrable == PINIO_UNLIMITED || si.registrable >= r.arena_bytes)
        cr_assert(r.locked, "%s", r.memory);
    pinio_checkpoint_release(cp);
}

/* The non-root path: no CAP_IPC_LOCK and a 64 KiB memlock limit. The load
 * still succeeds with correct bytes and says why the arena is not locked. */
Test(load, small_memlock_without_cap_ipc_lock, .init = disk_setup, .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 8u << 20, 9, 1);
    pid_t pid = t_fork_unprivileged(65536);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        pinio_checkpoint *cp = NULL;
        pinio_diag d = { 0 };
        if (load1(f, &o, &cp, &d) != 0)
            _exit(12);
        pinio_load_report r;
        pinio_checkpoint_report(cp, &r);
        if (r.locked || !strstr(r.memory, "RLIMIT_MEMLOCK"))
            _exit(13);
        for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
            if (!pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL))
                _exit(14);
        }
        pinio_checkpoint_release(cp);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}

Test(load, headers_metadata_and_bytes_by_name_without_reparsing, .init = disk_setup,
     .fini = teardown)
{
    char *f = path_in("m.safetensors");
    gen(f, 1u << 20, 5, 1);
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(f, NULL, &cp, &d), 0, "%s", d.msg);
    /* The file is gone: what follows comes from the load, not the disk. */
    cr_assert_eq(unlink(f), 0);
    char seed[32];
    snprintf(seed, sizeof(seed), "%d", SEED);
    cr_assert_str_eq(pinio_checkpoint_metadata(cp, PINIO_GEN_SEED_KEY), seed);
    cr_assert_str_eq(pinio_checkpoint_metadata(cp, "format"), "pt");
    cr_assert_null(pinio_checkpoint_metadata(cp, "no such key"));
    const pinio_st *h = pinio_checkpoint_header(cp, 0);
    cr_assert_not_null(h);
    cr_assert_eq(pinio_st_count(h), 5);
    cr_assert_null(pinio_checkpoint_header(cp, 1));

    const pinio_tensor *t = pinio_checkpoint_tensor(cp, 3);
    pinio_bytes *b = NULL;
    cr_assert_eq(pinio_checkpoint_get_bytes(cp, t->name, &b), 0);
    cr_assert_eq(pinio_bytes_len(b), t->nbytes);
    const uint8_t *p = NULL;
    cr_assert_eq(pinio_bytes_data(b, PINIO_ACCESS_ZERO_COPY, &p, NULL), 0);
    cr_assert_eq(p, t->data, "by name, the same zero-copy view as by index");
    cr_assert_eq(pinio_checkpoint_get_bytes(cp, "model.none", &b), -ENOENT);
    cr_assert_eq(pinio_checkpoint_get_bytes(cp, NULL, &b), -EINVAL);

    /* The arena is read-only: a write goes to a copy. */
    uint8_t *w = NULL;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_ZERO_COPY, &w, NULL), PINIO_EWOULD_COPY);
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_COPY, &w, NULL), 0);
    cr_assert_neq(w, t->data, "copy-on-write");
    memset(w, 0xA5, (size_t)t->nbytes);
    cr_assert(pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL),
              "the arena still holds the file's bytes");
    pinio_bytes_free(b);
    pinio_checkpoint_release(cp);
}
