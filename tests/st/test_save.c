/* pinio_save: the reference writer's exact bytes (expected images written out
 * by hand from its rules), the same bytes as a `pinio gen` file for the same
 * tensors, a round trip through the strict parser on /var/tmp (O_DIRECT) and
 * /dev/shm (buffered), and every rejected input leaving no file behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "pinio/gen.h"
#include "pinio/safetensors.h"
#include "pinio/save.h"

#include "st_util.h"

static char *tmpdir(const char *base)
{
    char *d = malloc(256);
    cr_assert_eq(t_tmpdir(base, "save", d, 256), 0);
    return d;
}

/* Removes every file in `d`, then `d`; returns how many files there were. */
static int rm_dir(char *d)
{
    int n = 0;
    DIR *dir = opendir(d);
    cr_assert_not_null(dir);
    struct dirent *e;
    char p[512];
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
        unlink(p);
        n++;
    }
    closedir(dir);
    rmdir(d);
    free(d);
    return n;
}

static uint8_t *header_of(const pinio_save_tensor *ts, size_t n, const pinio_save_opts *o,
                          size_t *order, size_t *len)
{
    uint8_t *h = NULL;
    pinio_diag d;
    int r = pinio_save_header(ts, n, o, order, &h, len, &d);
    cr_assert_eq(r, 0, "pinio_save_header: %s", d.msg);
    return h;
}

static void expect_header(const uint8_t *h, size_t len, const char *json)
{
    size_t j = strlen(json);
    cr_assert_eq(len, 8 + j, "header %zu bytes, want %zu: %.*s", len, 8 + j, (int)(len - 8),
                 h + 8);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)h[i] << (8 * i);
    cr_assert_eq(n, j);
    cr_assert(!memcmp(h + 8, json, j), "got %.*s\nwant %s", (int)j, h + 8, json);
}

Test(save, reference_bytes_one_tensor)
{
    /* upstream test_simple: np.zeros((2, 2), int32) -> this header: 60 bytes + 4 spaces */
    int32_t data[4] = {0};
    uint64_t shape[2] = {2, 2};
    pinio_save_tensor t = {"test", 0, PINIO_DTYPE_I32, 2, shape, data, sizeof(data)};
    size_t len, order[1];
    uint8_t *h = header_of(&t, 1, NULL, order, &len);
    expect_header(h, len, "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}    ");
    cr_assert_eq(order[0], 0);
    free(h);
}

Test(save, empty_and_scalar)
{
    size_t len;
    uint8_t *h = header_of(NULL, 0, NULL, NULL, &len);
    expect_header(h, len, "{}      ");
    free(h);
    float one = 1.0f;
    uint64_t zero_shape[2] = {0, 3};
    pinio_save_tensor ts[2] = {
        {"s", 0, PINIO_DTYPE_F32, 0, NULL, &one, 4},
        {"e", 0, PINIO_DTYPE_F32, 2, zero_shape, NULL, 0},
    };
    h = header_of(ts, 2, NULL, NULL, &len);
    expect_header(h, len, "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                          "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}    ");
    free(h);
}

Test(save, order_dtype_descending_then_name)
{
    uint8_t b[8] = {0};
    uint64_t s1[1] = {1}, s2[1] = {2}, s4[1] = {4};
    /* given in an order the writer must change: U8 "a", F32 "z", F32 "b", BF16 "c", F64 "y" */
    pinio_save_tensor ts[5] = {
        {"a", 0, PINIO_DTYPE_U8, 1, s1, b, 1},
        {"z", 0, PINIO_DTYPE_F32, 1, s1, b, 4},
        {"b", 0, PINIO_DTYPE_F32, 1, s2, b, 8},
        {"c", 0, PINIO_DTYPE_BF16, 1, s4, b, 8},
        {"y", 0, PINIO_DTYPE_F64, 1, s1, b, 8},
    };
    size_t len, order[5];
    uint8_t *h = header_of(ts, 5, NULL, order, &len);
    size_t want[5] = {4, 2, 1, 3, 0}; /* F64 y, F32 b, F32 z, BF16 c, U8 a */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(order[i], want[i], "position %d: %zu", i, order[i]);
    expect_header(h, len,
                  "{\"y\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                  "\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]},"
                  "\"c\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[20,28]},"
                  "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[28,29]}}       ");
    free(h);
}

Test(save, metadata_first_and_serde_escapes)
{
    uint8_t b = 7;
    uint64_t s1[1] = {1};
    pinio_save_tensor t = {"q\"\\\n\x01\x7f/\xc3\xa9", 0, PINIO_DTYPE_U8, 1, s1, &b, 1};
    pinio_st_kv md[2] = {{"format", 0, "pt", 0}, {"k\t", 0, "v", 0}};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = md;
    o.nmetadata = 2;
    size_t len;
    uint8_t *h = header_of(&t, 1, &o, NULL, &len);
    expect_header(h, len,
                  "{\"__metadata__\":{\"format\":\"pt\",\"k\\t\":\"v\"},"
                  "\"q\\\"\\\\\\n\\u0001\x7f/\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],"
                  "\"data_offsets\":[0,1]}}  ");
    free(h);
}

Test(save, rejects_bad_input)
{
    uint8_t b[8] = {0};
    uint64_t s2[1] = {2}, s3[1] = {3}, big[2] = {UINT64_MAX, 2};
    struct { pinio_save_tensor t[2]; size_t n; int err; size_t index; } cases[] = {
        {{{"x", 0, PINIO_DTYPE_F32, 1, s2, b, 4}}, 1, -EINVAL, 0},          /* nbytes */
        {{{"__metadata__", 0, PINIO_DTYPE_U8, 1, s2, b, 2}}, 1, -EINVAL, 0},
        {{{"\xff", 0, PINIO_DTYPE_U8, 1, s2, b, 2}}, 1, -EINVAL, 0},        /* UTF-8 */
        {{{"x", 0, PINIO_DTYPE_F4, 1, s3, b, 1}}, 1, -EINVAL, 0},           /* 12 bits */
        {{{"x", 0, PINIO_DTYPE_U8, 2, big, b, 0}}, 1, -EINVAL, 0},          /* overflow */
        {{{"x", 0, PINIO_DTYPE_U8, 1, s2, NULL, 2}}, 1, -EINVAL, 0},        /* NULL data */
        {{{"x", 0, PINIO_DTYPE_COUNT, 1, s2, b, 2}}, 1, -EINVAL, 0},
        {{{"a", 0, PINIO_DTYPE_U8, 1, s2, b, 2}, {"a", 0, PINIO_DTYPE_U8, 1, s2, b, 2}}, 2,
         -EINVAL, 1},                                                       /* duplicate */
    };
    char *dir = tmpdir("/var/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/out.safetensors", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pinio_diag d;
        int r = pinio_save(path, cases[i].t, cases[i].n, NULL, NULL, &d);
        cr_assert_eq(r, cases[i].err, "case %zu: %d (%s)", i, r, d.msg);
        cr_assert_eq(d.index, cases[i].index, "case %zu: index %zu", i, d.index);
        cr_assert(strstr(d.msg, "tensor"), "case %zu: %s", i, d.msg);
    }
    pinio_st_kv dup[2] = {{"k", 0, "1", 0}, {"k", 0, "2", 0}};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = dup;
    o.nmetadata = 2;
    cr_assert_eq(pinio_save(path, NULL, 0, &o, NULL, NULL), -EINVAL);
    cr_assert_eq(rm_dir(dir), 0, "a failed save left a file behind");
}

static void round_trip(const char *base, pinio_direct_policy direct)
{
    char *dir = tmpdir(base);
    char path[300];
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    /* Sizes that make the O_DIRECT path stage across chunk boundaries and end unaligned. */
    size_t n1 = (9u << 20) + 3, n2 = 4097;
    uint8_t *a = malloc(n1), *c = malloc(n2);
    pinio_gen_fill(1, "a", 0, a, n1);
    pinio_gen_fill(1, "c", 0, c, n2);
    uint64_t sa[1] = {n1}, sc[1] = {n2};
    pinio_save_tensor ts[2] = {{"c", 0, PINIO_DTYPE_U8, 1, sc, c, n2},
                               {"a", 0, PINIO_DTYPE_I8, 1, sa, a, n1}};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.direct = direct;
    o.no_sync = true;
    pinio_save_result res;
    pinio_diag d;
    /* an old file under the name is replaced whole */
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "old", 3), 3);
    close(fd);
    int r = pinio_save(path, ts, 2, &o, &res, &d);
    cr_assert_eq(r, 0, "%s", d.msg);
    size_t len;
    uint8_t *img = st_read_all(path, &len);
    cr_assert_eq(len, res.file_bytes);
    cr_assert_eq(res.data_bytes, n1 + n2);
    pinio_st *st;
    cr_assert_eq(pinio_st_parse(&st, img, len, len, path, 0, &d), 0, "%s", d.msg);
    const pinio_st_tensor *ta = pinio_st_find(st, "a", 1), *tc = pinio_st_find(st, "c", 1);
    cr_assert(ta && tc);
    cr_assert_eq(ta->begin, 0, "I8 sorts before U8 (descending enum order)");
    cr_assert(!memcmp(img + ta->file_offset, a, n1));
    cr_assert(!memcmp(img + tc->file_offset, c, n2));
    cr_assert_eq(pinio_st_data_offset(st) % 8, 0);
    if (direct == PINIO_DIRECT_OFF)
        cr_assert(!res.direct);
    cr_log_info("%s: %s", base, res.io_path);
    pinio_st_free(st);
    free(img);
    free(a);
    free(c);
    cr_assert_eq(rm_dir(dir), 1, "only the saved file remains (no temporary)");
}

Test(save, round_trip_var_tmp) { round_trip("/var/tmp", PINIO_DIRECT_AUTO); }
Test(save, round_trip_dev_shm) { round_trip("/dev/shm", PINIO_DIRECT_AUTO); }
Test(save, round_trip_buffered) { round_trip("/var/tmp", PINIO_DIRECT_OFF); }

Test(save, same_bytes_as_gen)
{
    /* Two BF16 tensors whose gen order is also the reference's name order. */
    char *dir = tmpdir("/var/tmp");
    char gpath[300], spath[300];
    snprintf(gpath, sizeof(gpath), "%s/g.safetensors", dir);
    snprintf(spath, sizeof(spath), "%s/s.safetensors", dir);
    pinio_gen_opts go;
    pinio_gen_opts_default(&go);
    go.size = 1 << 20;
    go.tensors = 2;
    go.seed = 42;
    pinio_diag d;
    cr_assert_eq(pinio_gen_write(gpath, &go, NULL, &d), 0, "%s", d.msg);
    size_t glen;
    uint8_t *g = st_read_all(gpath, &glen);
    pinio_st *st;
    cr_assert_eq(pinio_st_parse(&st, g, glen, glen, gpath, 0, &d), 0, "%s", d.msg);
    size_t n = pinio_st_count(st);
    cr_assert_eq(n, 2);
    pinio_save_tensor ts[2];
    for (size_t i = 0; i < n; i++) {
        const pinio_st_tensor *t = pinio_st_at(st, n - 1 - i); /* reversed: the writer sorts */
        ts[i] = (pinio_save_tensor){t->name, t->name_len, t->dtype, t->rank, t->shape,
                                    g + t->file_offset, t->nbytes};
    }
    pinio_st_kv md[2] = {{"format", 0, "pt", 0}, {PINIO_GEN_SEED_KEY, 0, "42", 0}};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = md;
    o.nmetadata = 2;
    cr_assert_eq(pinio_save(spath, ts, 2, &o, NULL, &d), 0, "%s", d.msg);
    size_t slen;
    uint8_t *s = st_read_all(spath, &slen);
    cr_assert_eq(slen, glen);
    cr_assert(!memcmp(s, g, glen), "pinio_save and pinio gen differ");
    pinio_st_free(st);
    free(s);
    free(g);
    cr_assert_eq(rm_dir(dir), 2);
}

Test(save, missing_folder_names_the_path)
{
    uint8_t b = 0;
    uint64_t s1[1] = {1};
    pinio_save_tensor t = {"x", 0, PINIO_DTYPE_U8, 1, s1, &b, 1};
    pinio_diag d;
    int r = pinio_save("/var/tmp/pinio-save-no-such-dir/x.safetensors", &t, 1, NULL, NULL, &d);
    cr_assert_eq(r, -ENOENT);
    cr_assert(strstr(d.msg, "/var/tmp/pinio-save-no-such-dir/x.safetensors"), "%s", d.msg);
}

/* A one-tensor save of `nbytes` bytes of 0x5A to `path`; returns its result. */
static int save_u8(const char *path, size_t nbytes, pinio_diag *d)
{
    uint8_t *b = malloc(nbytes ? nbytes : 1);
    cr_assert_not_null(b);
    memset(b, 0x5A, nbytes);
    uint64_t s1[1] = {nbytes};
    pinio_save_tensor t = {"x", 0, PINIO_DTYPE_U8, 1, s1, b, nbytes};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.no_sync = true;
    int r = pinio_save(path, &t, 1, &o, NULL, d);
    free(b);
    return r;
}

static void write_file(const char *path, const char *s, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
    cr_assert_eq(fchmod(fd, mode), 0);
    close(fd);
}

static bool file_is(const char *path, const char *s)
{
    size_t len;
    uint8_t *img = st_read_all(path, &len);
    bool same = len == strlen(s) && !memcmp(img, s, len);
    free(img);
    return same;
}

/* The dtype-first write order puts the two "a" apart (I16, I8, U8). */
Test(save, duplicate_names_apart_in_write_order)
{
    uint8_t b[2] = {0};
    uint64_t s1[1] = {1}, s2[1] = {2};
    pinio_save_tensor ts[3] = {{"a", 0, PINIO_DTYPE_U8, 1, s2, b, 2},
                               {"b", 0, PINIO_DTYPE_I8, 1, s2, b, 2},
                               {"a", 0, PINIO_DTYPE_I16, 1, s1, b, 2}};
    char *dir = tmpdir("/var/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/out.safetensors", dir);
    pinio_diag d;
    int r = pinio_save(path, ts, 3, NULL, NULL, &d);
    cr_assert_eq(r, -EINVAL, "saved a file with \"a\" twice: %d %s", r, d.msg);
    cr_assert_eq(d.index, 2);
    cr_assert(strstr(d.msg, "twice"), "%s", d.msg);
    uint8_t *h = NULL;
    size_t hl;
    cr_assert_eq(pinio_save_header(ts, 3, NULL, NULL, &h, &hl, NULL), -EINVAL);
    cr_assert_eq(rm_dir(dir), 0);
}

/* What the reader refuses the writer refuses first, and the file already
 * under the name stays as it was. */
Test(save, refuses_what_the_reader_refuses)
{
    char *dir = tmpdir("/var/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/out.safetensors", dir);
    write_file(path, "good", 0644);
    uint8_t b[2] = {0};
    uint64_t s2[1] = {2};
    pinio_save_tensor nul = {"a\0b", 3, PINIO_DTYPE_U8, 1, s2, b, 2};
    pinio_diag d;
    int r = pinio_save(path, &nul, 1, NULL, NULL, &d);
    cr_assert_eq(r, -EINVAL, "a name with a NUL was saved: %d %s", r, d.msg);
    cr_assert(strstr(d.msg, "NUL"), "%s", d.msg);
    /* A header over the format's 100 MB limit, by one metadata value. */
    size_t vlen = PINIO_ST_HEADER_MAX + 1;
    char *v = malloc(vlen);
    cr_assert_not_null(v);
    memset(v, 'x', vlen);
    pinio_st_kv md = {"k", 0, v, vlen};
    pinio_save_opts o;
    pinio_save_opts_default(&o);
    o.metadata = &md;
    o.nmetadata = 1;
    pinio_save_tensor ok = {"a", 0, PINIO_DTYPE_U8, 1, s2, b, 2};
    r = pinio_save(path, &ok, 1, &o, NULL, &d);
    free(v);
    cr_assert_eq(r, -EFBIG, "a header over the limit was saved: %d %s", r, d.msg);
    cr_assert(strstr(d.msg, "limit"), "%s", d.msg);
    cr_assert(file_is(path, "good"), "the good file was replaced");
    cr_assert_eq(rm_dir(dir), 1, "a refused save left a temporary");
}

Test(save, keeps_the_mode_of_the_file_it_replaces)
{
    char *dir = tmpdir("/var/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/out.safetensors", dir);
    write_file(path, "old", 0600);
    pinio_diag d;
    cr_assert_eq(save_u8(path, 16, &d), 0, "%s", d.msg);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600, "mode %04o after the save", st.st_mode & 07777);
    cr_assert_eq(getxattr(path, "user.pinio.save", NULL, 0), -1, "the temporary's mark stayed");
    cr_assert_eq(rm_dir(dir), 1);
}

/* A symlink is written through (as open(2) for writing would): the link
 * stays, the file it names gets the new bytes. */
Test(save, writes_through_a_symlink)
{
    char *dir = tmpdir("/var/tmp");
    char real[300], link[300], dangling[300];
    snprintf(real, sizeof(real), "%s/real.safetensors", dir);
    snprintf(link, sizeof(link), "%s/link.safetensors", dir);
    snprintf(dangling, sizeof(dangling), "%s/dangling.safetensors", dir);
    write_file(real, "old", 0640);
    cr_assert_eq(symlink("real.safetensors", link), 0);
    pinio_diag d;
    cr_assert_eq(save_u8(link, 16, &d), 0, "%s", d.msg);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the symlink was replaced by a regular file");
    cr_assert_eq(stat(real, &st), 0);
    cr_assert_eq(st.st_size, 8 + 56 + 16, "the linked file holds %lld bytes",
                 (long long)st.st_size);
    cr_assert_eq(st.st_mode & 07777, 0640);
    /* A link to nothing: refused, naming the link, nothing created. */
    cr_assert_eq(symlink("nothing", dangling), 0);
    int r = save_u8(dangling, 16, &d);
    cr_assert_eq(r, -ENOENT, "%d %s", r, d.msg);
    cr_assert(strstr(d.msg, "dangling.safetensors"), "%s", d.msg);
    cr_assert_eq(rm_dir(dir), 3);
}

/* As a non-root user (uid 65534 in a child), a read-only file is refused
 * (EACCES, as the reference writer's open fails) though its folder is
 * writable; root may replace it, as root may write it. */
Test(save, refuses_a_read_only_file_for_a_user)
{
    char *dir = tmpdir("/var/tmp");
    cr_assert_eq(chmod(dir, 0777), 0);
    char path[300];
    snprintf(path, sizeof(path), "%s/ro.safetensors", dir);
    write_file(path, "keep", 0444);
    cr_assert_eq(chown(path, 65534, 65534), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        free(dir); /* the parent's to remove */
        if (setgid(65534) || setuid(65534))
            _exit(3);
        pinio_diag d;
        int r = save_u8(path, 16, &d);
        _exit(r == -EACCES && strstr(d.msg, "read-only") && strstr(d.msg, "ro.safetensors")
                  ? 0 : r == 0 ? 1 : 2);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "as uid 65534: exit %d (1: the read-only file was replaced)", WEXITSTATUS(status));
    cr_assert(file_is(path, "keep"));
    if (geteuid() == 0) {
        pinio_diag d;
        cr_assert_eq(save_u8(path, 16, &d), 0, "root: %s", d.msg);
    }
    cr_assert_eq(rm_dir(dir), 1);
}

/* The progress callback of a writer that dies mid-write: the process ends
 * there, as a kill would end it (an exit, so valgrind's child log stays
 * clean), its temporary half written. */
static int die_mid_write(void *ctx, const pinio_progress *p)
{
    (void)ctx;
    (void)p;
    _exit(5);
}

/* A writer that dies mid-write leaves its temporary; a later save removes
 * it once it is a minute old (the stale rule of gen and bench,
 * src/base/stale.h), and a save never follows a link planted under its own
 * temporary's name. */
Test(save, a_killed_writers_temporary_is_removed_later)
{
    char *dir = tmpdir("/var/tmp");
    char path[300];
    snprintf(path, sizeof(path), "%s/out.safetensors", dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        free(dir); /* the parent's to remove */
        size_t n = 20 << 20;
        uint8_t *b = calloc(1, n);
        uint64_t s1[1] = {n};
        pinio_save_tensor t = {"x", 0, PINIO_DTYPE_U8, 1, s1, b, n};
        pinio_save_opts o;
        pinio_save_opts_default(&o);
        o.progress = die_mid_write;
        pinio_save(path, &t, 1, &o, NULL, NULL);
        _exit(4);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 5, "the writer did not die mid-write");
    DIR *dd = opendir(dir);
    struct dirent *e;
    char left[600] = "";
    while ((e = readdir(dd)))
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(left, sizeof(left), "%s/%s", dir, e->d_name);
    closedir(dd);
    cr_assert(left[0], "the killed writer left no temporary");
    cr_assert(access(path, F_OK) != 0, "the killed writer published a file");
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, left, old, 0), 0);
    /* A link planted where this process's temporary goes is never followed. */
    char planted[600], victim[300];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(planted, sizeof(planted), "%s/.out.safetensors.pinio-save-%ld.tmp", dir,
             (long)getpid());
    write_file(victim, "victim", 0644);
    cr_assert_eq(symlink(victim, planted), 0);
    pinio_diag d;
    int r = save_u8(path, 16, &d);
    cr_assert_eq(r, -EEXIST, "%d %s", r, d.msg);
    cr_assert(file_is(victim, "victim"), "the planted link was followed");
    cr_assert(access(left, F_OK) != 0, "the stale temporary %s is still there", left);
    cr_assert_eq(unlink(planted), 0);
    cr_assert_eq(save_u8(path, 16, &d), 0, "%s", d.msg);
    cr_assert_eq(rm_dir(dir), 2, "out.safetensors and victim, nothing else");
}
