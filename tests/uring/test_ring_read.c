/* The same test bodies against every rung of the ladder (forced by option),
 * on ext4 (/var/tmp) and tmpfs (/dev/shm): data compared byte for byte with
 * pread at random offsets/lengths, unaligned, zero-length, at the tail, across
 * a 1 GiB boundary of a sparse file, in bulk. */
#include <criterion/criterion.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "helpers.h"
#include "uring/ring_internal.h"

#define FILE_SIZE ((3u << 20) + 777u) /* not a multiple of any block size */
#define ARENA (8u << 20)

typedef struct env {
    pinio_ring *ring;
    pinio_ring_file *file;
    char path[PATH_MAX];
    uint8_t *arena; /* destination memory: registered for FIXED_DIRECT */
    int slot;
    pinio_backend backend;
} env;

static const char *dir_or_skip(const char *dir)
{
    struct statfs st;
    if (statfs(dir, &st))
        cr_skip_test("%s not available", dir);
    return dir;
}

static void env_open(env *e, pinio_backend backend, const char *dir, uint64_t size)
{
    memset(e, 0, sizeof *e);
    e->backend = backend;
    e->slot = -1;
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.backend = backend;
    o.queue_depth = 8;
    o.request_size = 64 << 10; /* many pieces per request */
    pinio_diag d = {0};
    int ret = pinio_ring_create(&e->ring, &o, &d);
    cr_assert_eq(ret, 0, "ring create (%s): %s", pinio_backend_name(backend), d.msg);
    cr_assert_eq(t_make_file(dir_or_skip(dir), size, 42, e->path, sizeof e->path), 0);
    ret = pinio_ring_file_open(e->ring, e->path, &e->file, &d);
    cr_assert_eq(ret, 0, "file open: %s", d.msg);
    e->arena = t_map(ARENA);
    cr_assert_not_null(e->arena);
    if (backend == PINIO_BACKEND_FIXED_DIRECT)
        cr_assert_eq(pinio_ring_register_region(e->ring, e->arena, ARENA, &e->slot), 0);
}

static void env_close(env *e)
{
    if (e->slot >= 0)
        cr_assert_eq(pinio_ring_unregister_region(e->ring, e->slot), 0);
    pinio_ring_file_close(e->file);
    pinio_ring_destroy(e->ring);
    munmap(e->arena, ARENA);
    unlink(e->path);
}

static void check_backend(env *e, const char *dir)
{
    pinio_ring_info ri;
    pinio_ring_file_info fi;
    pinio_ring_get_info(e->ring, &ri);
    pinio_ring_file_get_info(e->file, &fi);
    switch (e->backend) {
    case PINIO_BACKEND_PREAD:
        cr_assert_eq(ri.backend, PINIO_BACKEND_PREAD);
        cr_assert_eq(ri.setup_flags, 0u);
        break;
    case PINIO_BACKEND_BUFFERED:
        cr_assert_eq(ri.backend, PINIO_BACKEND_BUFFERED);
        cr_assert(!fi.direct, "buffered backend must not use O_DIRECT");
        break;
    case PINIO_BACKEND_FIXED_DIRECT:
        cr_assert_eq(ri.backend, PINIO_BACKEND_FIXED_DIRECT);
        cr_assert_gt(ri.fixed_ops, 0u, "reads into registered memory must be READ_FIXED");
        /* fallthrough */
    case PINIO_BACKEND_DIRECT:
    case PINIO_BACKEND_AUTO:
        cr_assert_neq(ri.setup_flags & IORING_SETUP_CQSIZE, 0u);
        cr_assert_geq(ri.cq_entries, ri.sq_entries, "CQ must hold every request in flight");
        if (!strcmp(dir, "/var/tmp"))
            cr_assert(fi.direct, "ext4 supports O_DIRECT: %s", fi.reason);
        break;
    }
}

/* Random (offset, length, destination misalignment) reads, one at a time. */
static void body_random(pinio_backend backend, const char *dir)
{
    env e;
    env_open(&e, backend, dir, FILE_SIZE);
    uint64_t s = 1234;
    for (int i = 0; i < 150; i++) {
        uint64_t r = t_rand(&s);
        uint64_t off;
        size_t len;
        switch (i % 5) {
        case 0: /* fully aligned: zero-copy path */
            off = (t_rand(&s) % (FILE_SIZE / 4096)) * 4096;
            len = (size_t)((t_rand(&s) % 64) + 1) * 4096;
            break;
        case 1: /* tiny, inside one block */
            off = t_rand(&s) % FILE_SIZE;
            len = (size_t)(t_rand(&s) % 300);
            break;
        case 2: /* crossing or beyond end of file */
            off = FILE_SIZE - (t_rand(&s) % 20000);
            len = (size_t)(t_rand(&s) % 40000) + 1;
            break;
        default: /* anything */
            off = t_rand(&s) % FILE_SIZE;
            len = (size_t)(t_rand(&s) % (600u << 10));
            break;
        }
        size_t dst_off = (r & 1) ? 0 : (size_t)(t_rand(&s) % 8192); /* aligned or not */
        if (i % 5 == 0)
            dst_off = (size_t)(t_rand(&s) % 16) * 4096;
        cr_assert_leq(dst_off + len, ARENA);
        memset(e.arena + dst_off, T_POISON, len);
        pinio_read_req q = {.file = e.file, .offset = off, .len = len, .dst = e.arena + dst_off};
        pinio_diag d = {0};
        int ret = pinio_ring_read_bulk(e.ring, &q, 1, &d);
        cr_assert_eq(ret, 0, "%s %s read %d: %s", pinio_backend_name(backend), dir, i, d.msg);
        const char *bad = t_check_req(e.path, &q);
        cr_assert_null(bad, "%s %s read %d: %s", pinio_backend_name(backend), dir, i, bad);
    }
    check_backend(&e, dir);
    env_close(&e);
}

/* Many requests, one call: exercises batching, staging-slot contention and
 * the interleaving of several requests' pieces. */
static void body_bulk(pinio_backend backend, const char *dir)
{
    env e;
    env_open(&e, backend, dir, FILE_SIZE);
    enum { N = 48 };
    pinio_read_req q[N];
    uint64_t s = 99;
    size_t at = 0;
    for (int i = 0; i < N; i++) {
        uint64_t off = t_rand(&s) % (FILE_SIZE + 5000);
        size_t len = (size_t)(t_rand(&s) % (150u << 10));
        if (i % 7 == 0)
            len = 0;
        at += (size_t)(t_rand(&s) % 600); /* misaligned destinations too */
        if (i % 3 == 0)
            at = (at + 4095) & ~(size_t)4095;
        cr_assert_leq(at + len, ARENA);
        memset(e.arena + at, T_POISON, len);
        q[i] = (pinio_read_req){.file = e.file, .offset = off, .len = len, .dst = e.arena + at};
        at += len;
    }
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_read_bulk(e.ring, q, N, &d), 0, "%s", d.msg);
    for (int i = 0; i < N; i++) {
        const char *bad = t_check_req(e.path, &q[i]);
        cr_assert_null(bad, "%s %s req %d: %s", pinio_backend_name(backend), dir, i, bad);
    }
    env_close(&e);
}

/* Zero length, exactly at EOF, past EOF, the unaligned tail, whole file. */
static void body_edges(pinio_backend backend, const char *dir)
{
    env e;
    env_open(&e, backend, dir, FILE_SIZE);
    struct {
        uint64_t off;
        size_t len;
        int64_t want;
    } cases[] = {
        {0, 0, 0},
        {FILE_SIZE, 100, 0},
        {FILE_SIZE + 4096, 4096, 0},
        {FILE_SIZE - 777, 4096, 777},
        {FILE_SIZE - 1, 1, 1},
        {0, FILE_SIZE + 10000, FILE_SIZE},
        {4096, 4096, 4096},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(e.arena, T_POISON, cases[i].len);
        pinio_diag d = {0};
        int64_t got = pinio_ring_read(e.ring, e.file, cases[i].off, e.arena, cases[i].len, &d);
        cr_assert_eq(got, cases[i].want, "case %zu: got %lld: %s", i, (long long)got, d.msg);
        pinio_read_req q = {.file = e.file, .offset = cases[i].off, .len = cases[i].len,
                            .dst = e.arena, .done = (size_t)got};
        const char *bad = t_check_req(e.path, &q);
        cr_assert_null(bad, "case %zu: %s", i, bad);
    }
    env_close(&e);
}

/* Reads across the 1 GiB mark of a sparse file (holes read as zeros). */
static void body_sparse_1g(pinio_backend backend, const char *dir)
{
    const uint64_t G = 1ull << 30;
    uint64_t blocks[] = {G - 8192, G - 4096, G, G + 4096, G + (1u << 20)};
    env e;
    env_open(&e, backend, dir, 4096);
    char sp[PATH_MAX];
    cr_assert_eq(t_make_sparse(dir, G + (2u << 20), blocks, 5, sp, sizeof sp), 0);
    pinio_ring_file *f;
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_file_open(e.ring, sp, &f, &d), 0, "%s", d.msg);
    struct {
        uint64_t off;
        size_t len;
    } cases[] = {{G - 5000, 12000}, {G - 8192, 16384}, {G - 1, 2}, {G - 300000, 1500000},
                 {G + (2u << 20) - 100, 1000}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(e.arena + 3, T_POISON, cases[i].len);
        pinio_read_req q = {.file = f, .offset = cases[i].off, .len = cases[i].len,
                            .dst = e.arena + (i & 1 ? 3 : 0)};
        if (!(i & 1))
            memset(e.arena, T_POISON, cases[i].len);
        cr_assert_eq(pinio_ring_read_bulk(e.ring, &q, 1, &d), 0, "%s", d.msg);
        const char *bad = t_check_req(sp, &q);
        cr_assert_null(bad, "sparse case %zu: %s", i, bad);
    }
    pinio_ring_file_close(f);
    unlink(sp);
    env_close(&e);
}

#define FOR_BACKENDS(name, body)                                                               \
    Test(name, fixed_ext4) { body(PINIO_BACKEND_FIXED_DIRECT, "/var/tmp"); }                   \
    Test(name, fixed_tmpfs) { body(PINIO_BACKEND_FIXED_DIRECT, "/dev/shm"); }                  \
    Test(name, direct_ext4) { body(PINIO_BACKEND_DIRECT, "/var/tmp"); }                        \
    Test(name, direct_tmpfs) { body(PINIO_BACKEND_DIRECT, "/dev/shm"); }                       \
    Test(name, buffered_ext4) { body(PINIO_BACKEND_BUFFERED, "/var/tmp"); }                    \
    Test(name, buffered_tmpfs) { body(PINIO_BACKEND_BUFFERED, "/dev/shm"); }                   \
    Test(name, pread_ext4) { body(PINIO_BACKEND_PREAD, "/var/tmp"); }                          \
    Test(name, pread_tmpfs) { body(PINIO_BACKEND_PREAD, "/dev/shm"); }                         \
    Test(name, auto_ext4) { body(PINIO_BACKEND_AUTO, "/var/tmp"); }

FOR_BACKENDS(random, body_random)
FOR_BACKENDS(bulk, body_bulk)
FOR_BACKENDS(edges, body_edges)
FOR_BACKENDS(sparse_1g, body_sparse_1g)

/* A ring with 256 KiB requests (several pieces per region), faults from
 * `faults`, and a file of `size` pattern bytes open on it. */
static void region_setup(const char *faults, uint64_t size, uint64_t seed, pinio_ring **r,
                         pinio_ring_file **f, char *path)
{
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.request_size = 256 << 10;
    o.faults = faults;
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_create(r, &o, &d), 0, "%s", d.msg);
    cr_assert_eq(t_make_file("/var/tmp", size, seed, path, PATH_MAX), 0);
    cr_assert_eq(pinio_ring_file_open(*r, path, f, NULL), 0);
}

/* Reads whose pieces straddle two adjacent registered regions, or start in
 * registered memory and end outside it: READ_FIXED must stay inside one
 * iovec, so those pieces go unregistered, and the data is still right. */
Test(regions, straddle)
{
    pinio_ring *r;
    pinio_ring_file *f;
    char path[PATH_MAX];
    region_setup(NULL, 4u << 20, 5, &r, &f, path);
    uint8_t *m = t_map(4u << 20);
    int s1, s2;
    cr_assert_eq(pinio_ring_register_region(r, m, 1u << 20, &s1), 0);
    cr_assert_eq(pinio_ring_register_region(r, m + (1u << 20), 1u << 20, &s2), 0);
    cr_assert_neq(s1, s2);
    int s3;
    cr_assert_eq(pinio_ring_register_region(r, m + 4096, 8192, &s3), -EINVAL, "overlap refused");
    cr_assert_eq(pinio_ring_register_region(r, m, 0, &s3), -EINVAL);
    memset(m, T_POISON, 4u << 20);
    /* pieces: [896K, 1152K) straddles, [1152K, 1408K) inside the 2nd region,
     * ..., [2M+...) outside both */
    const size_t at = (1u << 20) - (128u << 10);
    pinio_read_req q = {.file = f, .offset = at, .len = 3u << 20, .dst = m + at};
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), 0);
    cr_assert_null(t_check_req(path, &q));
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    cr_assert_gt(ri.fixed_ops, 0u);
    cr_assert_gt(ri.plain_ops, 0u);
    cr_assert_eq(ri.regions, 3u, "staging + 2 regions");
    cr_assert_eq(pinio_ring_unregister_region(r, s1), 0);
    cr_assert_eq(pinio_ring_unregister_region(r, s1), -ENOENT);
    cr_assert_eq(pinio_ring_unregister_region(r, s2), 0);
    pinio_ring_file_close(f);
    pinio_ring_destroy(r);
    munmap(m, 4u << 20);
    unlink(path);
}

static bool ready_flag(void *ctx, const void *addr, size_t len)
{
    (void)addr;
    (void)len;
    return *(const bool *)ctx;
}

/* A lazy region: reads into it are plain while its pages are not ready, and
 * the read loop registers it at the first read once they are; the bytes are
 * right either way, and unregistering works registered or not. */
Test(regions, lazy_registered_at_first_read_once_ready)
{
    pinio_ring *r;
    pinio_ring_file *f;
    char path[PATH_MAX];
    region_setup(NULL, 2u << 20, 9, &r, &f, path);
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    if (ri.backend != PINIO_BACKEND_FIXED_DIRECT) {
        pinio_ring_file_close(f);
        pinio_ring_destroy(r);
        unlink(path);
        cr_skip_test("no registered buffers here: %s", ri.reason);
    }
    unsigned base = ri.regions; /* staging */
    uint8_t *m = t_map(4u << 20);
    bool ready = false;
    int s1, s2;
    cr_assert_eq(pinio_ring_register_region_lazy(r, m, 2u << 20, ready_flag, &ready, &s1), 0);
    cr_assert_eq(pinio_ring_register_region_lazy(r, m + (2u << 20), 2u << 20, ready_flag, &ready,
                                                 &s2), 0);
    cr_assert_eq(pinio_ring_register_region_lazy(r, m + 4096, 4096, NULL, NULL, &s2), -EINVAL,
                 "overlap refused");
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.regions, base, "reserved, not registered");
    memset(m, T_POISON, 4u << 20);
    pinio_read_req q = {.file = f, .offset = 0, .len = 2u << 20, .dst = m};
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), 0);
    cr_assert_null(t_check_req(path, &q));
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.fixed_ops, 0u, "not ready: plain reads");
    cr_assert_eq(ri.regions, base);
    ready = true;
    memset(m, T_POISON, 4u << 20);
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), 0);
    cr_assert_null(t_check_req(path, &q));
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.fixed_ops, 8u, "registered at its first read: every piece READ_FIXED");
    cr_assert_eq(ri.regions, base + 1, "only the region read into");
    cr_assert_eq(pinio_ring_unregister_region(r, s1), 0);
    cr_assert_eq(pinio_ring_unregister_region(r, s2), 0, "never registered: still released");
    pinio_ring_get_info(r, &ri);
    cr_assert_eq(ri.regions, base);
    pinio_ring_file_close(f);
    pinio_ring_destroy(r);
    munmap(m, 4u << 20);
    unlink(path);
}

/* Lazy regions where the kernel refuses buffer registration (regnomem) or
 * has no sparse buffer table (sparseinval, as before 5.19): the
 * reads stay plain, the bytes right, the reason said. */
Test(regions, lazy_refused_or_no_sparse_table)
{
    for (int k = 0; k < 2; k++) {
        pinio_ring *r;
        pinio_ring_file *f;
        char path[PATH_MAX];
        region_setup(k ? "sparseinval" : "regnomem", 1u << 20, 3, &r, &f, path);
        pinio_ring_info ri;
        pinio_ring_get_info(r, &ri);
        if (ri.setup_error) {
            pinio_ring_file_close(f);
            pinio_ring_destroy(r);
            unlink(path);
            cr_skip_test("no io_uring here: %s", ri.reason);
        }
        /* Both refusals leave the ring on plain O_DIRECT: the staging area's
         * own registration fails first under regnomem. */
        cr_assert_eq(ri.backend, PINIO_BACKEND_DIRECT, "%s", ri.reason);
        cr_assert_not_null(strstr(ri.reason, k ? "sparse buffer table refused (EINVAL)"
                                               : "buffer registration refused (ENOMEM)"),
                           "%s", ri.reason);
        uint8_t *m = t_map(1u << 20);
        int s;
        cr_assert_eq(pinio_ring_register_region_lazy(r, m, 1u << 20, NULL, NULL, &s),
                     k ? -EOPNOTSUPP : -ENOMEM);
        memset(m, T_POISON, 1u << 20);
        pinio_read_req q = {.file = f, .offset = 0, .len = 1u << 20, .dst = m};
        cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), 0);
        cr_assert_null(t_check_req(path, &q));
        pinio_ring_get_info(r, &ri);
        cr_assert_eq(ri.fixed_ops, 0u);
        pinio_ring_file_close(f);
        pinio_ring_destroy(r);
        munmap(m, 1u << 20);
        unlink(path);
    }
}

Test(api, bad_arguments)
{
    pinio_ring *r;
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.request_size = 3000;
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_create(&r, &o, &d), -EINVAL);
    cr_assert_neq(d.msg[0], 0);
    o.request_size = 1 << 20;
    o.queue_depth = 0;
    cr_assert_eq(pinio_ring_create(&r, &o, NULL), -EINVAL);
    cr_assert_eq(pinio_ring_create(&r, NULL, NULL), 0);
    pinio_ring_file *f;
    cr_assert_eq(pinio_ring_file_open(r, "/nonexistent/pinio", &f, &d), -ENOENT);
    cr_assert(strstr(d.msg, "/nonexistent/pinio"), "diag names the path: %s", d.msg);
    cr_assert_eq(pinio_ring_file_open(r, "/var/tmp", &f, NULL), -EISDIR);
    pinio_read_req q = {.file = NULL, .len = 1, .dst = &o};
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), -EINVAL);
    cr_assert_eq(pinio_ring_read_bulk(r, NULL, 0, NULL), 0);
    pinio_ring *other;
    cr_assert_eq(pinio_ring_create(&other, NULL, NULL), 0);
    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", 100, 1, path, sizeof path), 0);
    cr_assert_eq(pinio_ring_file_open(other, path, &f, NULL), 0);
    q.file = f;
    cr_assert_eq(pinio_ring_read_bulk(r, &q, 1, NULL), -EINVAL, "file of another ring");
    pinio_ring_destroy(other); /* closes f */
    pinio_ring_destroy(r);
    unlink(path);
    cr_assert_str_eq(pinio_backend_name(PINIO_BACKEND_PREAD), "pread");
}

/* A FIFO is refused at once (opening it must not wait for a writer), and the
 * descriptors of a file that is opened are blocking again: io_uring honours
 * O_NONBLOCK and would hand -EAGAIN back for a read that waits for the disk. */
Test(api, fifo_refused_without_blocking, .timeout = 20)
{
    char dir[256], fifo[300];
    cr_assert_eq(t_tmpdir("/var/tmp", "fifo", dir, sizeof dir), 0);
    snprintf(fifo, sizeof fifo, "%s/f.safetensors", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    pinio_ring *r;
    cr_assert_eq(pinio_ring_create(&r, NULL, NULL), 0);
    pinio_ring_file *f = NULL;
    pinio_diag d = {0};
    cr_expect_eq(pinio_ring_file_open(r, fifo, &f, &d), -EINVAL, "%s", d.msg);
    cr_expect(strstr(d.msg, "not a regular file") && strstr(d.msg, fifo), "%s", d.msg);
    cr_expect_null(f);
    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", 10000, 3, path, sizeof path), 0);
    cr_assert_eq(pinio_ring_file_open(r, path, &f, NULL), 0);
    cr_expect_eq(fcntl(f->fd_buf, F_GETFL) & O_NONBLOCK, 0, "buffered descriptor blocking");
    if (f->fd_direct >= 0)
        cr_expect_eq(fcntl(f->fd_direct, F_GETFL) & O_NONBLOCK, 0, "O_DIRECT descriptor blocking");
    pinio_ring_destroy(r);
    unlink(path);
    unlink(fifo);
    rmdir(dir);
}

/* O_DIRECT policy OFF forces buffered; ON on ext4 is O_DIRECT with statx alignment. */
Test(api, direct_policy)
{
    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", 10000, 3, path, sizeof path), 0);
    for (int pol = PINIO_DIRECT_AUTO; pol <= PINIO_DIRECT_OFF; pol++) {
        pinio_ring_opts o;
        pinio_ring_opts_default(&o);
        o.direct = (pinio_direct_policy)pol;
        pinio_ring *r;
        cr_assert_eq(pinio_ring_create(&r, &o, NULL), 0);
        pinio_ring_file *f;
        cr_assert_eq(pinio_ring_file_open(r, path, &f, NULL), 0);
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(f, &fi);
        cr_assert_eq(fi.size, 10000u);
        if (pol == PINIO_DIRECT_OFF) {
            cr_assert(!fi.direct);
            cr_assert_eq(fi.offset_align, 1u);
        } else {
            cr_assert(fi.direct, "%s", fi.reason);
            cr_assert_str_eq(fi.align_source, "statx");
            cr_assert_geq(fi.offset_align, 512u);
        }
        pinio_ring_destroy(r);
    }
    unlink(path);
}
