/* gen -> parse -> verify every byte: single files and sharded checkpoints,
 * every dtype, on /tmp and /dev/shm. The generator itself is checked against
 * fixed values so a change to its output cannot go unnoticed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "pinio/gen.h"
#include "pinio/safetensors.h"
#include "src/st/json_internal.h"
#include "tests/common/helpers.h"

#include "st_util.h"

static char *tmpdir(const char *base)
{
    char *d = malloc(256);
    cr_assert_not_null(d);
    cr_assert_eq(t_tmpdir(base, "gen", d, 256), 0);
    return d;
}

/* Parses `path`, checks every tensor byte against the generator, returns the
 * tensor count and adds the data bytes to *bytes. */
static size_t verify_file(const char *path, uint64_t seed, uint64_t *bytes)
{
    pinio_st *st;
    pinio_diag d;
    cr_assert_eq(pinio_st_open(&st, path, PINIO_ST_REJECT_UNKNOWN_FIELDS, &d), 0, "%s", d.msg);
    const char *s = pinio_st_metadata_get(st, PINIO_GEN_SEED_KEY);
    cr_assert_not_null(s);
    cr_assert_eq(strtoull(s, NULL, 10), seed);
    cr_assert_eq(pinio_st_data_offset(st) % 8, 0, "header padded to 8");
    size_t len;
    uint8_t *img = st_read_all(path, &len);
    cr_assert_eq(len, pinio_st_file_size(st));
    for (size_t i = 0; i < pinio_st_count(st); i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        uint64_t bad = 0;
        cr_assert(pinio_gen_verify(seed, t->name, 0, img + t->file_offset, t->nbytes, &bad),
                  "%s: byte %llu differs", t->name, (unsigned long long)bad);
        cr_assert(strncmp(t->name, "model.layers.", 13) == 0, "%s", t->name);
        *bytes += t->nbytes;
    }
    size_t n = pinio_st_count(st);
    free(img);
    pinio_st_free(st);
    return n;
}

Test(gen, generator_is_fixed_and_offset_independent)
{
    /* splitmix64 with key FNV1a("w") ^ 7: pinned values, so the content of
     * checkpoints generated today stays verifiable by later builds. */
    uint8_t a[64], b[64];
    pinio_gen_fill(7, "w", 0, a, sizeof(a));
    uint64_t w0 = 0;
    for (int i = 7; i >= 0; i--)
        w0 = w0 << 8 | a[i];
    uint64_t h = (0xcbf29ce484222325ull ^ 'w') * 0x100000001b3ull;
    uint64_t z = (h ^ 7) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    cr_assert_eq(w0, z ^ (z >> 31));
    /* Any window equals the same bytes of the whole. */
    for (size_t off = 0; off < 20; off++)
        for (size_t len = 0; off + len <= 64; len += 7) {
            memset(b, 0, sizeof(b));
            pinio_gen_fill(7, "w", off, b, len);
            cr_assert_eq(memcmp(a + off, b, len), 0, "off %zu len %zu", off, len);
            cr_assert(pinio_gen_verify(7, "w", off, a + off, len, NULL));
        }
    /* Names and seeds give different streams; verify finds the first bad byte. */
    pinio_gen_fill(8, "w", 0, b, sizeof(b));
    cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
    pinio_gen_fill(7, "x", 0, b, sizeof(b));
    cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
    a[37] ^= 1;
    uint64_t bad = 0;
    cr_assert(!pinio_gen_verify(7, "w", 0, a, sizeof(a), &bad));
    cr_assert_eq(bad, 37);
    cr_assert(!pinio_gen_verify(7, "w", 5, a + 5, 40, &bad));
    cr_assert_eq(bad, 37);
}

static void round_trip_single(const char *base)
{
    char *dir = tmpdir(base);
    char path[300];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    pinio_dtype all[PINIO_DTYPE_COUNT];
    for (unsigned i = 0; i < PINIO_DTYPE_COUNT; i++)
        all[i] = (pinio_dtype)i;
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = 3u << 20;
    o.tensors = 2 * PINIO_DTYPE_COUNT + 1;
    o.dtypes = all;
    o.ndtypes = PINIO_DTYPE_COUNT;
    o.seed = 42;
    pinio_gen_result res;
    pinio_diag d;
    cr_assert_eq(pinio_gen_write(path, &o, &res, &d), 0, "%s", d.msg);
    cr_assert_eq(res.tensors, o.tensors);
    cr_assert_eq(res.files, 1);
    cr_assert(res.data_bytes <= o.size && res.data_bytes + 8 * o.tensors >= o.size,
              "%llu", (unsigned long long)res.data_bytes);
    uint64_t bytes = 0;
    cr_assert_eq(verify_file(path, 42, &bytes), o.tensors);
    cr_assert_eq(bytes, res.data_bytes);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq((uint64_t)sb.st_size, res.file_bytes);

    /* Every dtype is present, with matching shapes (the parse checked sizes). */
    pinio_st *st;
    cr_assert_eq(pinio_st_open(&st, path, 0, NULL), 0);
    unsigned seen = 0;
    for (size_t i = 0; i < pinio_st_count(st); i++)
        seen |= 1u << pinio_st_at(st, i)->dtype;
    cr_assert_eq(seen, (1u << PINIO_DTYPE_COUNT) - 1);
    pinio_st_free(st);

    /* Same options, same bytes. */
    char path2[300];
    snprintf(path2, sizeof(path2), "%s/again.safetensors", dir);
    cr_assert_eq(pinio_gen_write(path2, &o, NULL, NULL), 0);
    size_t l1, l2;
    uint8_t *a = st_read_all(path, &l1), *b = st_read_all(path2, &l2);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(a, b, l1), 0);
    free(a);
    free(b);
    unlink(path);
    unlink(path2);
    cr_assert_eq(rmdir(dir), 0, "temp files left behind in %s", dir);
    free(dir);
}

Test(gen, round_trip_single_tmp)
{
    round_trip_single("/tmp");
}

Test(gen, round_trip_single_shm)
{
    round_trip_single("/dev/shm");
}

Test(gen, round_trip_sharded)
{
    char *dir = tmpdir("/tmp");
    pinio_dtype dts[] = {PINIO_DTYPE_BF16, PINIO_DTYPE_F32, PINIO_DTYPE_F4, PINIO_DTYPE_F6_E2M3};
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = 1u << 20;
    o.tensors = 30;
    o.dtypes = dts;
    o.ndtypes = 4;
    o.shards = 4;
    o.seed = 0xdeadbeef;
    pinio_gen_result res;
    pinio_diag d;
    cr_assert_eq(pinio_gen_write(dir, &o, &res, &d), 0, "%s", d.msg);
    cr_assert_eq(res.files, 4);

    /* Read the index with the strict JSON parser: weight_map must name each
     * tensor once, pointing at the shard that holds it. */
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", dir, PINIO_GEN_INDEX_NAME);
    size_t ilen;
    char *idx = (char *)st_read_all(path, &ilen);
    pinio__json j;
    pinio__json_init(&j, idx, ilen);
    pinio__json_str k, v;
    bool first = true, f2;
    uint64_t total = 0;
    size_t mapped = 0;
    char names[64][96], shards[64][64];
    cr_assert_eq(pinio__json_object_begin(&j), 0);
    while (pinio__json_object_next(&j, &first, &k) == 1) {
        if (pinio__json_str_eq(&k, "metadata", 8)) {
            f2 = true;
            cr_assert_eq(pinio__json_object_begin(&j), 0);
            while (pinio__json_object_next(&j, &f2, &k) == 1) {
                cr_assert(pinio__json_str_eq(&k, "total_size", 10));
                cr_assert_eq(pinio__json_u64(&j, &total), 0);
            }
        } else {
            cr_assert(pinio__json_str_eq(&k, "weight_map", 10));
            f2 = true;
            cr_assert_eq(pinio__json_object_begin(&j), 0);
            while (pinio__json_object_next(&j, &f2, &k) == 1) {
                cr_assert_eq(pinio__json_string(&j, &v), 0);
                cr_assert(mapped < 64 && k.len < 96 && v.len < 64);
                pinio__json_str_decode(&k, names[mapped]);
                pinio__json_str_decode(&v, shards[mapped]);
                mapped++;
            }
        }
    }
    cr_assert_eq(pinio__json_finish(&j), 0, "%s at %zu", j.err_what, j.err_off);
    free(idx);
    cr_assert_eq(total, res.data_bytes);
    cr_assert_eq(mapped, 30);

    uint64_t bytes = 0;
    size_t count = 0;
    for (unsigned s = 1; s <= 4; s++) {
        char name[64];
        cr_assert_eq(pinio_gen_shard_name(name, sizeof(name), s, 4), 0);
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        count += verify_file(path, o.seed, &bytes);
        pinio_st *st;
        cr_assert_eq(pinio_st_open(&st, path, 0, NULL), 0);
        for (size_t i = 0; i < pinio_st_count(st); i++) {
            const pinio_st_tensor *t = pinio_st_at(st, i);
            size_t m = 0;
            while (m < mapped && strcmp(names[m], t->name))
                m++;
            cr_assert(m < mapped, "%s not in weight_map", t->name);
            cr_assert_str_eq(shards[m], name);
        }
        pinio_st_free(st);
        unlink(path);
    }
    cr_assert_eq(count, 30);
    cr_assert_eq(bytes, res.data_bytes);
    snprintf(path, sizeof(path), "%s/%s", dir, PINIO_GEN_INDEX_NAME);
    unlink(path);
    cr_assert_eq(rmdir(dir), 0);
    free(dir);
}

Test(gen, edge_sizes_and_errors)
{
    char *dir = tmpdir("/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/z.safetensors", dir);
    /* Size 0: every tensor is empty, still a valid file. More shards than
     * tensors: some shards hold none. */
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.tensors = 3;
    pinio_gen_result res;
    cr_assert_eq(pinio_gen_write(path, &o, &res, NULL), 0);
    uint64_t bytes = 0;
    cr_assert_eq(verify_file(path, 0, &bytes), 3);
    cr_assert_eq(bytes, 0);
    unlink(path);

    snprintf(path, sizeof(path), "%s/sh", dir);
    o.size = 1000;
    o.tensors = 2;
    o.shards = 3;
    cr_assert_eq(pinio_gen_write(path, &o, &res, NULL), 0);
    size_t count = 0;
    for (unsigned s = 1; s <= 3; s++) {
        char name[64], p2[400];
        pinio_gen_shard_name(name, sizeof(name), s, 3);
        snprintf(p2, sizeof(p2), "%s/%s", path, name);
        count += verify_file(p2, 0, &bytes);
        unlink(p2);
    }
    cr_assert_eq(count, 2);
    char p3[400];
    snprintf(p3, sizeof(p3), "%s/%s", path, PINIO_GEN_INDEX_NAME);
    unlink(p3);
    cr_assert_eq(rmdir(path), 0);

    /* Errors name the path; an invalid dtype is refused up front. */
    pinio_diag d;
    pinio_gen_opts_default(&o);
    o.size = 100;
    cr_assert_eq(pinio_gen_write("/nonexistent/dir/x.safetensors", &o, NULL, &d), -ENOENT);
    cr_assert(strstr(d.msg, "/nonexistent/dir/x.safetensors"), "%s", d.msg);
    pinio_dtype bad = PINIO_DTYPE_COUNT;
    o.dtypes = &bad;
    o.ndtypes = 1;
    cr_assert_eq(pinio_gen_write(path, &o, NULL, &d), -EINVAL);

    /* Issue 37 item 17: a size too small for one element per tensor gave
     * "4 tensors, 0 data bytes" and success. Size 0 (above) asks for empty
     * tensors on purpose; a nonzero size that cannot give every tensor an
     * element is refused, saying how many bytes would. */
    pinio_dtype f32 = PINIO_DTYPE_F32;
    o.dtypes = &f32;
    o.tensors = 4;
    snprintf(path, sizeof(path), "%s/s.safetensors", dir);
    const uint64_t small[] = { 1, 3, 15 };
    for (size_t i = 0; i < 3; i++) {
        o.size = small[i];
        cr_assert_eq(pinio_gen_write(path, &o, NULL, &d), -EINVAL, "size %llu",
                     (unsigned long long)small[i]);
        cr_assert_not_null(strstr(d.msg, "at least 16 bytes"), "%s", d.msg);
        cr_assert_eq(access(path, F_OK), -1, "nothing written");
    }
    o.size = 16;
    cr_assert_eq(pinio_gen_write(path, &o, &res, &d), 0, "%s", d.msg);
    cr_assert_eq(res.data_bytes, 16);
    unlink(path);
    cr_assert_eq(rmdir(dir), 0);
    free(dir);
}

Test(gen, write_error_reported)
{
    /* A full disk cannot be staged unprivileged; RLIMIT_FSIZE makes write(2)
     * fail the same way mid-file (EFBIG instead of ENOSPC), which exercises
     * the path: error with path and offset, no temp file left behind.
     * Criterion runs each test in its own process, so the limit stays here. */
    char *dir = tmpdir("/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/x.safetensors", dir);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1u << 20, 1u << 20};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = 8u << 20;
    pinio_diag d;
    int r = pinio_gen_write(path, &o, NULL, &d);
    cr_assert_eq(r, -EFBIG, "%d %s", r, d.msg);
    cr_assert(strstr(d.msg, dir), "%s", d.msg);
    cr_assert(strstr(d.msg, "write at offset"), "%s", d.msg);
    cr_assert_eq(rmdir(dir), 0, "temp file left behind");

    if (geteuid() != 0) { /* root may write into a read-only directory */
        free(dir);
        dir = tmpdir("/tmp");
        cr_assert_eq(chmod(dir, 0500), 0);
        snprintf(path, sizeof(path), "%s/x.safetensors", dir);
        o.size = 100;
        cr_assert_eq(pinio_gen_write(path, &o, NULL, &d), -EACCES);
        cr_assert(strstr(d.msg, dir), "%s", d.msg);
        chmod(dir, 0700);
        cr_assert_eq(rmdir(dir), 0);
    }
    free(dir);
}

/* A symlink planted at the temporary's name (PATH.tmpPID: the pid is no
 * secret) is never followed: the file it names keeps its bytes, and the
 * link is left alone. Both the single file and a sharded checkpoint's
 * index. */
Test(gen, planted_symlink_at_temporary_not_followed)
{
    char *dir = tmpdir("/tmp");
    char victim[300], path[300], tmp[400];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "victim", 6), 6);
    close(fd);
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = 4096;
    o.tensors = 2;
    for (int sharded = 0; sharded < 2; sharded++) {
        if (sharded) {
            snprintf(path, sizeof(path), "%s/sh", dir);
            cr_assert_eq(mkdir(path, 0755), 0);
            snprintf(tmp, sizeof(tmp), "%s/%s.tmp%ld", path, PINIO_GEN_INDEX_NAME, (long)getpid());
            o.shards = 2;
        } else {
            snprintf(path, sizeof(path), "%s/x.safetensors", dir);
            snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid());
        }
        cr_assert_eq(symlink(victim, tmp), 0);
        pinio_diag d = { 0 };
        int r = pinio_gen_write(path, &o, NULL, &d);
        cr_assert_eq(r, -EEXIST, "%d %s", r, d.msg);
        cr_assert(strstr(d.msg, tmp), "%s", d.msg);
        char buf[16] = { 0 };
        fd = open(victim, O_RDONLY);
        cr_assert_eq(read(fd, buf, sizeof(buf)), 6);
        close(fd);
        cr_assert_str_eq(buf, "victim");
        struct stat st;
        cr_assert_eq(lstat(tmp, &st), 0);
        cr_assert(S_ISLNK(st.st_mode), "the planted link was replaced");
        cr_assert_eq(unlink(tmp), 0);
        if (sharded) {
            for (unsigned s = 1; s <= 2; s++) {
                char name[64], p2[400];
                pinio_gen_shard_name(name, sizeof(name), s, 2);
                snprintf(p2, sizeof(p2), "%s/%s", path, name);
                unlink(p2);
            }
            cr_assert_eq(rmdir(path), 0, "files left in %s", path);
        }
    }
    cr_assert_eq(unlink(victim), 0);
    cr_assert_eq(rmdir(dir), 0, "files left in %s", dir);
    free(dir);
}
