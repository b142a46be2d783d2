/* FILE bytes read through the io_uring engine (pinio_fileio, controller.h;
 * pinio_bytes_read_io / pinio_bytes_read_bulk, bytes.h).
 *
 * Every body runs on ext4 (/tmp) and on tmpfs (/dev/shm), whose O_DIRECT and
 * alignment differ. The reference is always plain pread(2) of the path. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "pinio/bytes.h"
#include "pinio/fileio.h"
#include "pinio/pool.h"
#include "src/bytes/file_internal.h"
#include "tests/uring/helpers.h"

#define SETUP_SINGLE_ISSUER (1u << 12) /* IORING_SETUP_SINGLE_ISSUER */

typedef struct env {
    pinio_ring *ring;
    pinio_fileio *io;
    pinio_pool *pool; /* registered with `ring` */
    char path[4096];
    uint64_t size;
} env;

static void env_open(env *e, const char *dir, uint64_t size, uint64_t seed)
{
    memset(e, 0, sizeof *e);
    e->size = size;
    cr_assert_eq(t_make_file(dir, size, seed, e->path, sizeof e->path), 0, "temp file in %s", dir);
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_create(&e->ring, NULL, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_fileio_create(&e->io, e->ring), 0);
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.registrar = pinio_ring_registrar(e->ring);
    po.slab_size = 2u << 20; /* fits the default 8 MiB RLIMIT_MEMLOCK with the staging area */
    cr_assert_eq(pinio_pool_create(&e->pool, &po, &d), 0, "%s", d.msg);
}

/* Teardown in the order the headers ask: regions (released by the test),
 * the pool's registrations, the context, then the ring. */
static void env_close(env *e)
{
    pinio_pool_unregister(e->pool);
    pinio_pool_destroy(e->pool);
    pinio_fileio_destroy(e->io);
    pinio_ring_destroy(e->ring);
    unlink(e->path);
}

static bool ring_registers(const env *e)
{
    pinio_ring_info ri;
    pinio_ring_get_info(e->ring, &ri);
    return ri.backend == PINIO_BACKEND_FIXED_DIRECT;
}

/* A pool region of `len` bytes; its writable address goes to *dst. */
static pinio_view region(env *e, size_t len, uint8_t **dst, bool *registered)
{
    pinio_view v;
    pinio_pool_region_info ri;
    cr_assert_eq(pinio_pool_alloc(e->pool, len, 4096, &v, &ri), 0);
    *dst = ri.data;
    *registered = ri.reg == PINIO_POOL_REG_OK;
    return v;
}

static void assert_same_as_pread(const char *path, uint64_t off, const uint8_t *got, size_t len)
{
    uint8_t *ref = malloc(len ? len : 1);
    cr_assert(ref);
    cr_assert_eq(t_pread_all(path, off, ref, len), (ssize_t)len);
    for (size_t i = 0; i < len; i++)
        if (got[i] != ref[i])
            cr_assert_fail("%s: byte %zu of %zu at file offset %llu differs", path, i, len,
                           (unsigned long long)off);
    free(ref);
}

/* A window cut by splits into three parts; each part read into a pool region
 * registered with the ring. The middle part starts at a 4 KiB file offset,
 * has a 4 KiB multiple length and lands at a page-aligned address, so the
 * engine reads it with READ_FIXED straight into the region: fixed_ops grows
 * and staged_ops does not. */
static void window_into_pool(const char *dir)
{
    env e;
    env_open(&e, dir, (1u << 20) + 777, 11);
    if (!ring_registers(&e)) {
        env_close(&e);
        cr_skip_test("buffer registration unavailable on this machine (no READ_FIXED)");
    }
    pinio_file *f;
    pinio_diag d = {0};
    cr_assert_eq(pinio_file_open(&f, e.path, &d), 0, "%s", d.msg);
    const uint64_t w0 = 1000;                   /* window start, unaligned */
    const size_t wlen = (size_t)e.size - w0;    /* to the (unaligned) end of file */
    const size_t cut1 = 8192 - (size_t)w0;      /* part 2 starts at file offset 8192 */
    const size_t cut2 = cut1 + 64 * 4096;       /* part 2 is 256 KiB */
    pinio_bytes *p1, *p2, *p3;
    cr_assert_eq(pinio_bytes_from_file(&p1, f, w0, wlen, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_bytes_split(p1, cut1, PINIO_ACCESS_ZERO_COPY, &p2, &d), 0, "%s", d.msg);
    cr_assert_eq(pinio_bytes_split(p2, cut2 - cut1, PINIO_ACCESS_ZERO_COPY, &p3, &d), 0, "%s",
                 d.msg);
    pinio_bytes *parts[3] = {p1, p2, p3};
    uint64_t starts[3] = {w0, w0 + cut1, w0 + cut2};

    for (int k = 0; k < 3; k++) {
        size_t len = pinio_bytes_len(parts[k]);
        uint8_t *dst;
        bool reg;
        pinio_view v = region(&e, len, &dst, &reg);
        cr_assert(reg, "pool region not registered with the ring");
        memset(dst, T_POISON, len);
        pinio_ring_info a, b;
        pinio_ring_get_info(e.ring, &a);
        cr_assert_eq(pinio_bytes_read_io(parts[k], e.io, 0, dst, len, &d), 0, "%s", d.msg);
        pinio_ring_get_info(e.ring, &b);
        assert_same_as_pread(e.path, starts[k], dst, len);
        /* Byte-identical to the pread path of the same bytes. */
        uint8_t *viapread = malloc(len);
        cr_assert_eq(pinio_bytes_read(parts[k], 0, viapread, len, &d), 0, "%s", d.msg);
        cr_assert_eq(memcmp(viapread, dst, len), 0, "ring and pread paths differ");
        free(viapread);
        cr_assert_gt(b.fixed_ops, a.fixed_ops, "part %d: no READ_FIXED", k);
        if (k == 1)
            cr_assert_eq(b.staged_ops, a.staged_ops,
                         "aligned part went through staging instead of straight into the region");
        pinio_view_release(&v);
    }
    cr_assert_eq(pinio_fileio_open_files(e.io), 1, "one ring file per pinio_file");
    uint64_t calls, bytes;
    pinio__file_stats(f, &calls, &bytes);
    cr_assert_eq(bytes, 2 * (uint64_t)wlen, "ring and pread reads are both accounted");
    for (int k = 0; k < 3; k++)
        pinio_bytes_free(parts[k]);
    pinio_file_release(f);
    env_close(&e);
}

Test(fileio, window_into_pool_ext4)
{
    window_into_pool("/tmp");
}

Test(fileio, window_into_pool_tmpfs)
{
    window_into_pool("/dev/shm");
}

/* Random unaligned windows and split points, into unaligned addresses of a
 * registered region and of the heap; zero-length parts and the file tail. */
static void unaligned_windows(const char *dir)
{
    env e;
    env_open(&e, dir, 300000 + 13, 23);
    pinio_file *f;
    pinio_diag d = {0};
    cr_assert_eq(pinio_file_open(&f, e.path, &d), 0, "%s", d.msg);
    uint8_t *pooled;
    bool reg;
    pinio_view v = region(&e, 1u << 20, &pooled, &reg);
    uint8_t *heap = malloc(1u << 20);
    cr_assert(heap);
    uint64_t s = 99;
    for (int it = 0; it < 200; it++) {
        uint64_t off = t_rand(&s) % e.size;
        size_t len = (size_t)(t_rand(&s) % (e.size - off + 1));
        if (it % 10 == 0)
            len = (size_t)(e.size - off); /* up to the unaligned end of file */
        pinio_bytes *b, *r;
        cr_assert_eq(pinio_bytes_from_file(&b, f, off, len, &d), 0, "%s", d.msg);
        size_t cut = len ? (size_t)(t_rand(&s) % (len + 1)) : 0;
        cr_assert_eq(pinio_bytes_split(b, cut, PINIO_ACCESS_ZERO_COPY, &r, &d), 0);
        size_t sub = len - cut ? (size_t)(t_rand(&s) % (len - cut)) : 0;
        size_t sublen = len - cut - sub;
        uint8_t *dst = (it & 1 ? pooled : heap) + (t_rand(&s) % 4096);
        memset(dst, T_POISON, sublen + 1);
        cr_assert_eq(pinio_bytes_read_io(r, e.io, sub, dst, sublen, &d), 0, "it %d: %s", it,
                     d.msg);
        assert_same_as_pread(e.path, off + cut + sub, dst, sublen);
        cr_assert_eq(dst[sublen], T_POISON, "it %d: byte past the range written", it);
        cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, dst, cut, &d), 0, "%s", d.msg);
        assert_same_as_pread(e.path, off, dst, cut);
        cr_assert_eq(pinio_bytes_read_io(r, e.io, sub, dst, sublen + 1, &d), -ERANGE,
                     "range past len refused");
        pinio_bytes_free(b);
        pinio_bytes_free(r);
    }
    free(heap);
    pinio_view_release(&v);
    pinio_file_release(f);
    env_close(&e);
}

Test(fileio, unaligned_windows_ext4)
{
    unaligned_windows("/tmp");
}

Test(fileio, unaligned_windows_tmpfs)
{
    unaligned_windows("/dev/shm");
}

/* Many windows of two files into many destinations in one call; a bad
 * request fails alone; non-file bytes are copied without the ring. */
static void bulk(const char *dir)
{
    env e;
    env_open(&e, dir, 200000, 5);
    char path2[4096];
    cr_assert_eq(t_make_file(dir, 150001, 6, path2, sizeof path2), 0);
    pinio_file *f1, *f2;
    cr_assert_eq(pinio_file_open(&f1, e.path, NULL), 0);
    cr_assert_eq(pinio_file_open(&f2, path2, NULL), 0);
    enum { N = 40 };
    pinio_bytes *bs[N];
    pinio_bytes_req reqs[N];
    uint64_t offs[N];
    uint8_t *dst;
    bool reg;
    pinio_view v = region(&e, N * 8192, &dst, &reg);
    uint64_t s = 7;
    for (int i = 0; i < N; i++) {
        pinio_file *f = i % 2 ? f2 : f1;
        uint64_t size = pinio_file_size(f);
        size_t len = 1 + (size_t)(t_rand(&s) % 8000);
        offs[i] = t_rand(&s) % (size - len);
        if (i == 7) {
            cr_assert_eq(pinio_bytes_from_data(&bs[i], "native bytes", 12, 0), 0);
            len = 12;
        } else {
            cr_assert_eq(pinio_bytes_from_file(&bs[i], f, offs[i], len, NULL), 0);
        }
        reqs[i] = (pinio_bytes_req){.bytes = bs[i], .offset = 0, .len = len,
                                    .dst = dst + (size_t)i * 8192 + (size_t)i, .result = 1};
    }
    reqs[13].len = pinio_bytes_len(bs[13]) + 1; /* past len: -ERANGE, alone */
    reqs[21].len = 0;                            /* nothing to do */
    pinio_ring_info a, b;
    pinio_ring_get_info(e.ring, &a);
    pinio_diag d = {0};
    cr_assert_eq(pinio_bytes_read_bulk(e.io, reqs, N, &d), -ERANGE);
    cr_assert(strstr(d.msg, "request 13"), "diag names the failing request: %s", d.msg);
    pinio_ring_get_info(e.ring, &b);
    for (int i = 0; i < N; i++) {
        if (i == 13) {
            cr_assert_eq(reqs[i].result, -ERANGE);
            continue;
        }
        cr_assert_eq(reqs[i].result, 0, "request %d: %d", i, reqs[i].result);
        if (i == 7)
            cr_assert_eq(memcmp(reqs[i].dst, "native bytes", 12), 0);
        else
            assert_same_as_pread(i % 2 ? path2 : e.path, offs[i], reqs[i].dst, reqs[i].len);
    }
    cr_assert_gt(b.plain_ops + b.fixed_ops, a.plain_ops + a.fixed_ops);
    cr_assert_eq(pinio_fileio_open_files(e.io), 2);

    /* io NULL: the pread path, same bytes. */
    uint8_t *ref = malloc(8192);
    pinio_bytes_req one = {.bytes = bs[3], .len = reqs[3].len, .dst = ref};
    cr_assert_eq(pinio_bytes_read_bulk(NULL, &one, 1, NULL), 0);
    cr_assert_eq(memcmp(ref, reqs[3].dst, one.len), 0);
    free(ref);

    for (int i = 0; i < N; i++)
        pinio_bytes_free(bs[i]);
    pinio_view_release(&v);
    pinio_file_release(f1);
    pinio_file_release(f2);
    unlink(path2);
    env_close(&e);
}

Test(fileio, bulk_ext4)
{
    bulk("/tmp");
}

Test(fileio, bulk_tmpfs)
{
    bulk("/dev/shm");
}

/* The file shrinks after pinio_file_open, before and after its ring file
 * was opened (cached with the old size): PINIO_ECHANGED naming the path and
 * the offset where the file now ends. */
static void shrunk(const char *dir, bool cached)
{
    env e;
    env_open(&e, dir, 64 * 4096, 3);
    pinio_file *f;
    pinio_diag d = {0};
    cr_assert_eq(pinio_file_open(&f, e.path, &d), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 10 * 4096 + 5, 40 * 4096, &d), 0);
    uint8_t *dst = malloc(40 * 4096);
    if (cached)
        cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, dst, 100, &d), 0, "%s", d.msg);
    const uint64_t now = 30 * 4096 + 123;
    cr_assert_eq(truncate(e.path, (off_t)now), 0);
    int rc = pinio_bytes_read_io(b, e.io, 0, dst, 40 * 4096, &d);
    cr_assert_eq(rc, PINIO_ECHANGED, "got %d (%s)", rc, d.msg);
    cr_assert_eq(d.code, PINIO_ECHANGED);
    cr_assert(strstr(d.msg, e.path), "diag names the path: %s", d.msg);
    char at[64];
    snprintf(at, sizeof at, "offset %llu", (unsigned long long)now);
    cr_assert(strstr(d.msg, at), "diag names the end offset %llu: %s", (unsigned long long)now,
              d.msg);
    free(dst);
    pinio_bytes_free(b);
    pinio_file_release(f);
    env_close(&e);
}

Test(fileio, shrunk_ext4)
{
    shrunk("/tmp", false);
}

Test(fileio, shrunk_cached_ext4)
{
    shrunk("/tmp", true);
}

Test(fileio, shrunk_tmpfs)
{
    shrunk("/dev/shm", false);
}

Test(fileio, shrunk_cached_tmpfs)
{
    shrunk("/dev/shm", true);
}

/* The path is renamed over after pinio_file_open: the ring must read the
 * file that was opened (its inode), as the pread path does. */
Test(fileio, renamed_over_reads_the_open_file)
{
    env e;
    env_open(&e, "/tmp", 50000, 41);
    pinio_file *f;
    cr_assert_eq(pinio_file_open(&f, e.path, NULL), 0);
    uint8_t *want = malloc(50000), *got = malloc(50000);
    cr_assert_eq(t_pread_all(e.path, 0, want, 50000), 50000);
    char other[4096];
    cr_assert_eq(t_make_file("/tmp", 50000, 42, other, sizeof other), 0);
    cr_assert_eq(rename(other, e.path), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 0, 50000, NULL), 0);
    pinio_diag d = {0};
    cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, got, 50000, &d), 0, "%s", d.msg);
    cr_assert_eq(memcmp(got, want, 50000), 0, "read the file now at the path, not the open one");
    free(want);
    free(got);
    pinio_bytes_free(b);
    pinio_file_release(f);
    env_close(&e);
}

/* A materialized (and mutated) window is not re-read from the file. */
Test(fileio, materialized_window_is_not_reread)
{
    env e;
    env_open(&e, "/tmp", 20000, 8);
    pinio_file *f;
    cr_assert_eq(pinio_file_open(&f, e.path, NULL), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 100, 10000, NULL), 0);
    uint8_t *p;
    cr_assert_eq(pinio_bytes_data_mut(b, PINIO_ACCESS_COPY, &p, NULL), 0);
    memset(p, 0x5c, 10000);
    pinio_ring_info a, c;
    pinio_ring_get_info(e.ring, &a);
    uint8_t got[10000];
    cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, got, sizeof got, NULL), 0);
    pinio_ring_get_info(e.ring, &c);
    for (size_t i = 0; i < sizeof got; i++)
        cr_assert_eq(got[i], 0x5c, "byte %zu: the mutation was lost", i);
    cr_assert_eq(c.fixed_ops + c.plain_ops, a.fixed_ops + a.plain_ops, "no ring read");
    pinio_bytes_free(b);
    pinio_file_release(f);
    env_close(&e);
}

/* Entries whose file nobody else holds are closed when the next file is
 * opened: descriptors do not pile up over many files. */
static int count_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    cr_assert(dir);
    int n = 0;
    while (readdir(dir))
        n++;
    closedir(dir);
    return n;
}

Test(fileio, cache_drops_released_files)
{
    env e;
    env_open(&e, "/tmp", 10000, 9);
    uint8_t buf[100];
    int fds0 = 0;
    for (int i = 0; i < 200; i++) {
        pinio_file *f;
        pinio_bytes *b;
        cr_assert_eq(pinio_file_open(&f, e.path, NULL), 0);
        cr_assert_eq(pinio_bytes_from_file(&b, f, 0, 100, NULL), 0);
        pinio_file_release(f); /* the window keeps the file alive */
        cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, buf, 100, NULL), 0);
        pinio_bytes_free(b);
        cr_assert_leq(pinio_fileio_open_files(e.io), 1, "released files are dropped");
        if (i == 1)
            fds0 = count_fds();
    }
    cr_assert_eq(count_fds(), fds0, "descriptors leak");
    env_close(&e);
}

/* ---- threads ------------------------------------------------------------ */

typedef struct other_thread {
    pinio_bytes *b;
    pinio_fileio *io;
    uint8_t *dst;
    int rc;
    pinio_diag d;
} other_thread;

static void *read_elsewhere(void *arg)
{
    other_thread *t = arg;
    t->rc = pinio_bytes_read_io(t->b, t->io, 0, t->dst, 8192, &t->d);
    return NULL;
}

/* A SINGLE_ISSUER ring used from another thread: -EPERM with a message that
 * says why, for a file not yet opened on the ring and for a cached one, and
 * nothing reaches the kernel: the owner's next read does not issue stale
 * reads into the other thread's destination. */
static void other_thread_refused(bool cached)
{
    env e;
    env_open(&e, "/tmp", 65536, 12);
    pinio_ring_info ri;
    pinio_ring_get_info(e.ring, &ri);
    if (!(ri.setup_flags & SETUP_SINGLE_ISSUER)) {
        env_close(&e);
        cr_skip_test("the kernel refused IORING_SETUP_SINGLE_ISSUER: any thread may read");
    }
    pinio_file *f;
    cr_assert_eq(pinio_file_open(&f, e.path, NULL), 0);
    pinio_bytes *b;
    cr_assert_eq(pinio_bytes_from_file(&b, f, 4096, 8192, NULL), 0);
    uint8_t *mine = malloc(8192);
    if (cached)
        cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, mine, 8192, NULL), 0);
    other_thread t = {.b = b, .io = e.io, .dst = malloc(8192)};
    memset(t.dst, T_POISON, 8192);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, read_elsewhere, &t), 0);
    pthread_join(th, NULL);
    cr_assert_eq(t.rc, -EPERM, "got %d (%s)", t.rc, t.d.msg);
    cr_assert(strstr(t.d.msg, "thread"), "diag says why: %s", t.d.msg);
    cr_assert(strstr(t.d.msg, e.path), "diag names the path: %s", t.d.msg);

    pinio_diag d = {0};
    cr_assert_eq(pinio_bytes_read_io(b, e.io, 0, mine, 8192, &d), 0, "%s", d.msg);
    assert_same_as_pread(e.path, 4096, mine, 8192);
    for (size_t i = 0; i < 8192; i++)
        cr_assert_eq(t.dst[i], T_POISON, "a refused read was issued later (byte %zu)", i);
    free(t.dst);
    free(mine);
    pinio_bytes_free(b);
    pinio_file_release(f);
    env_close(&e);
}

Test(fileio, other_thread_refused_new_file)
{
    other_thread_refused(false);
}

Test(fileio, other_thread_refused_cached_file)
{
    other_thread_refused(true);
}

/* The engine's own entry point refuses too (pinio_ring_read), and a ring
 * without SINGLE_ISSUER (the pread backend) serves any thread. */
typedef struct raw_read {
    pinio_ring *ring;
    pinio_ring_file *rf;
    uint8_t buf[4096];
    int64_t rc;
} raw_read;

static void *raw_read_elsewhere(void *arg)
{
    raw_read *t = arg;
    t->rc = pinio_ring_read(t->ring, t->rf, 0, t->buf, sizeof t->buf, NULL);
    return NULL;
}

Test(fileio, engine_refuses_other_thread_pread_backend_does_not)
{
    char path[4096];
    cr_assert_eq(t_make_file("/tmp", 8192, 77, path, sizeof path), 0);
    for (int pass = 0; pass < 2; pass++) {
        pinio_ring_opts o;
        pinio_ring_opts_default(&o);
        if (pass)
            o.backend = PINIO_BACKEND_PREAD;
        raw_read t = {.rc = 1};
        cr_assert_eq(pinio_ring_create(&t.ring, &o, NULL), 0);
        cr_assert_eq(pinio_ring_file_open(t.ring, path, &t.rf, NULL), 0);
        pinio_ring_info ri;
        pinio_ring_get_info(t.ring, &ri);
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, raw_read_elsewhere, &t), 0);
        pthread_join(th, NULL);
        if (ri.setup_flags & SETUP_SINGLE_ISSUER)
            cr_assert_eq(t.rc, -EPERM, "pass %d: got %lld", pass, (long long)t.rc);
        else
            cr_assert_eq(t.rc, 4096, "pass %d (%s): got %lld", pass, ri.reason, (long long)t.rc);
        pinio_ring_file_close(t.rf);
        pinio_ring_destroy(t.ring);
    }
    unlink(path);
}

/* Every rung of the ladder, forced: bulk reads of random windows equal
 * pread, on ext4 and tmpfs. */
Test(fileio, every_backend_matches_pread)
{
    static const pinio_backend backends[] = {PINIO_BACKEND_FIXED_DIRECT, PINIO_BACKEND_DIRECT,
                                             PINIO_BACKEND_BUFFERED, PINIO_BACKEND_PREAD};
    static const char *dirs[] = {"/tmp", "/dev/shm"};
    for (size_t di = 0; di < 2; di++) {
        char path[4096];
        cr_assert_eq(t_make_file(dirs[di], 100000 + 3, 31, path, sizeof path), 0);
        pinio_file *f;
        cr_assert_eq(pinio_file_open(&f, path, NULL), 0);
        for (size_t bi = 0; bi < sizeof backends / sizeof backends[0]; bi++) {
            pinio_ring_opts o;
            pinio_ring_opts_default(&o);
            o.backend = backends[bi];
            pinio_ring *ring;
            pinio_diag d = {0};
            int rc = pinio_ring_create(&ring, &o, &d);
            if (rc && backends[bi] == PINIO_BACKEND_FIXED_DIRECT)
                continue; /* registration refused here: the DIRECT rung covers it */
            cr_assert_eq(rc, 0, "%s: %s", pinio_backend_name(backends[bi]), d.msg);
            pinio_fileio *io;
            cr_assert_eq(pinio_fileio_create(&io, ring), 0);
            enum { N = 16 };
            pinio_bytes *bs[N];
            pinio_bytes_req reqs[N];
            uint64_t offs[N];
            uint8_t *buf = malloc(N * 10000);
            uint64_t s = 1000 + bi;
            for (int i = 0; i < N; i++) {
                size_t len = (size_t)(t_rand(&s) % 9000);
                offs[i] = t_rand(&s) % (100003 - len);
                cr_assert_eq(pinio_bytes_from_file(&bs[i], f, offs[i], len, NULL), 0);
                reqs[i] = (pinio_bytes_req){.bytes = bs[i], .len = len,
                                            .dst = buf + i * 10000 + (size_t)(i % 3)};
            }
            cr_assert_eq(pinio_bytes_read_bulk(io, reqs, N, &d), 0, "%s: %s",
                         pinio_backend_name(backends[bi]), d.msg);
            for (int i = 0; i < N; i++) {
                assert_same_as_pread(path, offs[i], reqs[i].dst, reqs[i].len);
                pinio_bytes_free(bs[i]);
            }
            free(buf);
            pinio_fileio_destroy(io);
            pinio_ring_destroy(ring);
        }
        pinio_file_release(f);
        unlink(path);
    }
}
