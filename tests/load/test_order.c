/* The staggered read order (issue 40): each read's 16 MiB pieces start at
 * a piece chosen by the reader's rank (or its pid) and wrap around. The
 * rotation covers every piece once with a different start per rank; loads
 * in either order are byte-exact, land each read once and in plan order
 * (the hasher relies on it, checked through --verify's digests), and a
 * bad PINIO_READ_ORDER is refused by name. The request size and depth for
 * network file systems follow their rule from the file system's unit and
 * the load's size. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinio/plan.h"
#include "src/load/plan_internal.h"
#include "tests/load/load_helpers.h"

Test(order, the_stagger_is_a_rotation_with_a_start_per_rank)
{
    static const uint64_t ns[] = { 1, 2, 3, 5, 16, 17, 64 };
    static const uint32_t groups[] = { 1, 2, 4, 8 };
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
        for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
            uint64_t n = ns[a];
            uint32_t ranks = groups[g];
            uint64_t starts[8];
            for (uint32_t r = 0; r < ranks; r++) {
                uint64_t first = pinio__stagger_first(n, r, ranks);
                cr_assert_lt(first, n);
                starts[r] = first;
                unsigned seen[64] = { 0 };
                for (uint64_t k = 0; k < n; k++)
                    seen[(first + k) % n]++;
                for (uint64_t k = 0; k < n; k++)
                    cr_assert_eq(seen[k], 1u, "n %llu rank %u of %u: piece %llu read %u times",
                                 (unsigned long long)n, r, ranks, (unsigned long long)k, seen[k]);
                for (uint32_t q = 0; q < r && n >= ranks; q++)
                    cr_assert_neq(starts[q], first, "n %llu: ranks %u and %u of %u start together",
                                  (unsigned long long)n, q, r, ranks);
            }
            cr_assert_eq(starts[0], 0u, "rank 0 reads in file order");
        }
    /* Independent processes: any number, taken modulo the pieces. */
    cr_assert_eq(pinio__stagger_first(16, 12345, 0), 12345u % 16);
    cr_assert_eq(pinio__stagger_first(1, 12345, 0), 0u);
}

/* Files in the staggered order: each reader takes every file once,
 * starting at pinio__stagger_first(nfiles, ...): an independent process at
 * its number modulo the files, a group's ranks spread evenly, rank 0 at the
 * first file. */
Test(order, files_rotate_with_a_start_per_reader)
{
    for (size_t n = 1; n <= 9; n++) {
        for (uint64_t rank = 0; rank < 20; rank++) {
            unsigned seen[9] = { 0 };
            for (size_t k = 0; k < n; k++)
                seen[pinio__file_at(k, n, rank, 0)]++;
            for (size_t f = 0; f < n; f++)
                cr_assert_eq(seen[f], 1u, "%zu files, process %llu: file %zu taken %u times", n,
                             (unsigned long long)rank, f, seen[f]);
            cr_assert_eq(pinio__file_at(0, n, rank, 0), rank % n, "process %llu starts at "
                         "its number modulo the %zu files", (unsigned long long)rank, n);
            cr_assert_eq(pinio__file_at(1, n, rank, 0), (rank + 1) % n);
        }
        /* Eight ranks over n files: starts rank * n / 8, file 0 for rank 0. */
        for (uint32_t r = 0; r < 8; r++)
            cr_assert_eq(pinio__file_at(0, n, r, 8), n > 1 ? r * n / 8 : 0);
    }
    cr_assert_eq(pinio__file_at(0, 0, 5, 0), 0u, "no files: nothing to rotate");
    /* 4 processes, 4 files: nobody starts where another does. */
    for (uint64_t a = 0; a < 4; a++)
        for (uint64_t b = a + 1; b < 4; b++)
            cr_assert_neq(pinio__file_at(0, 4, a, 0), pinio__file_at(0, 4, b, 0));
}

/* What one load in a child saw: the shards claimed for the node (paths, in
 * order), each execution's total (the progress callback's, in the order
 * they ran), the bytes per plan file, every tensor's bytes right. */
typedef struct seen {
    int rc, pid;
    char msg[sizeof(((pinio_diag *)0)->msg)];
    char claimed[3][512];
    size_t nclaimed;
    uint64_t totals[4], per_file[3], read_bytes;
    bool bytes_right;
} seen;

static void on_share(void *ctx, const char *path, pinio_share_stage st)
{
    seen *w = ctx;
    if (st == PINIO_SHARE_CLAIMED && w->nclaimed < 3)
        snprintf(w->claimed[w->nclaimed++], sizeof(w->claimed[0]), "%s", path);
}

static int on_progress(void *ctx, const pinio_progress *pg)
{
    seen *w = ctx;
    for (int k = 0; k < 4; k++)
        if (w->totals[k] == pg->total_bytes || w->totals[k] == 0) {
            w->totals[k] = pg->total_bytes;
            break;
        }
    return 0;
}

/* One cold pinned load of the 3-shard checkpoint, no criterion asserts
 * (it runs in a child). */
static void load_seen(bool shared, seen *w)
{
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD;
    o.memory = PINIO_MEMORY_PINNED;
    o.share = shared ? PINIO_SHARE_AUTO : PINIO_SHARE_OFF;
    o.share_hook = on_share;
    o.share_hook_ctx = w;
    o.progress = on_progress;
    o.progress_ctx = w;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    w->pid = (int)getpid();
    w->rc = load1(path_in("ck"), &o, &cp, &d);
    snprintf(w->msg, sizeof(w->msg), "%s", d.msg);
    if (w->rc < 0)
        return;
    w->bytes_right = pinio_checkpoint_count(cp) == 9;
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        w->bytes_right = w->bytes_right && t->file < 3 &&
                         pinio_gen_verify(SEED, t->name, 0, t->data, t->nbytes, NULL);
        if (t->file < 3)
            w->per_file[t->file] += t->nbytes;
    }
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    w->read_bytes = r.read_bytes;
    pinio_checkpoint_release(cp);
}

/* Loads sequential then staggered in a child process whose pid is not a
 * multiple of 3, so that its staggered order is never the plan's own (the
 * test fails without the rotation whatever its own pid). */
static void load_twice_in_a_child(bool shared, seen out[2])
{
    seen *w = mmap(NULL, 2 * sizeof(seen), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    cr_assert_neq(w, MAP_FAILED);
    int status = 0;
    for (int tries = 0; tries < 64; tries++) {
        memset(w, 0, 2 * sizeof(seen));
        pid_t c = fork();
        cr_assert_geq(c, 0);
        if (c == 0) {
            if (getpid() % 3 == 0)
                _exit(77);
            for (int stag = 0; stag < 2; stag++) {
                setenv("PINIO_READ_ORDER", stag ? "staggered" : "sequential", 1);
                load_seen(shared, &w[stag]);
            }
            _exit(0);
        }
        cr_assert_eq(waitpid(c, &status, 0), c);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 77)
            break;
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: %d", status);
    memcpy(out, w, 2 * sizeof(seen));
    munmap(w, 2 * sizeof(seen));
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(out[k].rc, 0, "%s", out[k].msg);
        cr_assert(out[k].bytes_right, "%s order: a tensor differs", k ? "staggered" : "sequential");
    }
}

static void shards_setup(void)
{
    disk_setup();
    gen(path_in("ck"), 12u << 20, 9, 3);
    setenv("PINIO_SHARE_DIR", tmpdir, 1);
}

static void shards_teardown(void)
{
    unsetenv("PINIO_SHARE_DIR");
    teardown();
}

/* A checkpoint of 3 shards, read by this process for the node (sharing):
 * sequential takes them in plan order; staggered from the one the
 * process's pid names on, so that processes loading it at once each read
 * another shard. The bytes are the same either way. */
Test(order, shared_files_are_taken_from_this_process_s_own_file_on, .init = shards_setup,
     .fini = shards_teardown)
{
    seen w[2];
    load_twice_in_a_child(true, w);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(w[k].nclaimed, 3u, "every shard read here for the node");
    size_t start = (size_t)w[1].pid % 3;
    for (size_t k = 0; k < 3; k++)
        cr_assert_str_eq(w[1].claimed[k], w[0].claimed[(start + k) % 3],
                         "staggered, pid %d: the shard taken %zu-th", w[1].pid, k);
}

/* The same checkpoint read privately (sharing off) from a local disk: one
 * execution in plan order either way. The files are rotated only on
 * network and FUSE file systems (load.c's run_start), where readers queue
 * on one file's server; here a split would be two executions for nothing,
 * and a fault plan's read count (tests/reliability's fault matrix) would
 * restart at the second, depending on the pid. */
Test(order, private_files_on_a_local_disk_are_one_execution_in_plan_order, .init = shards_setup,
     .fini = shards_teardown)
{
    seen w[2];
    load_twice_in_a_child(false, w);
    for (int stag = 0; stag < 2; stag++) {
        cr_assert_eq(w[stag].totals[0], w[stag].read_bytes, "%s, pid %d: one execution read it all",
                     stag ? "staggered" : "sequential", w[stag].pid);
        cr_assert_eq(w[stag].totals[1], 0u, "%s, pid %d: a second execution",
                     stag ? "staggered" : "sequential", w[stag].pid);
    }
}

/* Request sizes for network and FUSE file systems (exec.c's rule): whole
 * units of the file system, 16 MiB when the load gives 32 of them, halved
 * down to the unit for smaller loads with the depth raised to keep the
 * bytes outstanding; st_blksize below 64 KiB (a FUSE daemon's 4096, a
 * local-looking answer) is no unit and 1 MiB stands in. */
Test(order, network_requests_are_whole_units_sized_to_the_load)
{
    static const struct {
        uint64_t blksize, bytes;
        size_t req;
        unsigned depth;
    } cases[] = {
        { 4096, 1ull << 40, 16u << 20, 32 },          /* FUSE default: a large load */
        { 4096, 512ull << 20, 16u << 20, 32 },        /* 32 requests of 16 MiB exactly */
        { 4096, 511ull << 20, 8u << 20, 64 },         /* one byte short: halved */
        { 4096, 256ull << 20, 8u << 20, 64 },         /* bench/shared_fs's checkpoint */
        { 4096, 100ull << 20, 2u << 20, 128 },        /* depth capped at 128 */
        { 4096, 4096, 1u << 20, 128 },                /* never below the 1 MiB unit */
        { 0, 0, 1u << 20, 128 },                      /* nothing stated, nothing to read */
        { 1u << 20, 64ull << 20, 2u << 20, 128 },     /* NFS rsize/wsize 1 MiB */
        { 4u << 20, 64ull << 20, 4u << 20, 128 },     /* a 4 MiB object: never a part of one */
        { 4u << 20, 8ull << 30, 16u << 20, 32 },      /* four objects per request */
        { 3u << 20, 64ull << 20, 2u << 20, 128 },     /* not a power of two: rounded down */
        { 64u << 20, 1u << 20, 16u << 20, 32 },       /* a 64 MiB stripe: 16 MiB pieces of it */
        { 65536, 1u << 20, 64u << 10, 128 },          /* the smallest unit taken: 64 KiB */
        { 65535, 1u << 20, 1u << 20, 128 },           /* below it: 1 MiB */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned depth = 0;
        size_t req = pinio__netfs_sizes(cases[i].blksize, cases[i].bytes, &depth);
        cr_assert_eq(req, cases[i].req, "case %zu: blksize %llu, %llu bytes: %zu-byte requests",
                     i, (unsigned long long)cases[i].blksize,
                     (unsigned long long)cases[i].bytes, req);
        cr_assert_eq(depth, cases[i].depth, "case %zu: depth %u", i, depth);
        cr_assert_eq(req & (req - 1), 0u, "case %zu: the engine takes powers of two", i);
    }
}

typedef struct dest {
    uint8_t *mem;
    size_t landed, next;
    bool out_of_order;
} dest;

static int d_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = ((dest *)ctx)->mem + r->dest_offset;
    return 0;
}

static int d_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    dest *d = ctx;
    /* Landed means every piece is there: none still holds the fill
     * pattern (a 64-byte run of it is not in the generator's bytes). */
    static const uint8_t fill[64] = { [0 ... 63] = 0xA5 };
    for (uint64_t off = 0; off < r->need; off += 16u << 20) {
        uint64_t n = r->need - off < 64 ? r->need - off : 64;
        cr_assert_neq(memcmp((uint8_t *)mem + off, fill, n), 0,
                      "read %zu landed before its bytes at +%llu arrived", i,
                      (unsigned long long)off);
    }
    if (i != d->next)
        d->out_of_order = true;
    d->next = i + 1;
    d->landed++;
    return 0;
}

static const pinio_dest_ops ops = { .size = sizeof(pinio_dest_ops), .claim = d_claim,
                                    .landed = d_landed };

/* A 56 MiB checkpoint of 3 tensors: one read of 4 pieces. */
static void big_setup(void)
{
    disk_setup();
    gen(path_in("m.safetensors"), 56u << 20, 3, 1);
}

static void execute(pinio_read_order order, uint32_t rank, uint32_t ranks, uint64_t batch,
                    char io_path[256])
{
    const char *paths[] = { path_in("m.safetensors") };
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = PINIO_CACHE_COLD;
    pinio_plan *p = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(pinio_plan_create(&p, paths, 1, &po, &d), 0, "%s", d.msg);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    dest h = { .mem = aligned_alloc(4096, (pi.dest_bytes + 4095) & ~(uint64_t)4095) };
    cr_assert_not_null(h.mem);
    memset(h.mem, 0xA5, pi.dest_bytes);
    pinio_exec_opts eo;
    pinio_exec_opts_default(&eo);
    eo.read_order = order;
    eo.stagger_rank = rank;
    eo.stagger_ranks = ranks;
    eo.batch_bytes = batch;
    pinio_exec_report rep;
    cr_assert_eq(pinio_plan_execute(p, &ops, &h, &eo, &rep, &d), 0, "%s", d.msg);
    cr_assert_eq(h.landed, pi.reads, "every read landed once");
    cr_assert_not(h.out_of_order, "reads land in plan order");
    cr_assert_eq(rep.read_bytes, pi.read_bytes);
    for (size_t i = 0; i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        uint64_t bad = 0;
        cr_assert(pinio_gen_verify(SEED, t->name, 0, h.mem + t->dest_offset, t->nbytes, &bad),
                  "rank %u of %u: tensor %s wrong at byte %llu", rank, ranks, t->name,
                  (unsigned long long)bad);
    }
    snprintf(io_path, 256, "%s", rep.io_path);
    free(h.mem);
    pinio_plan_free(p);
}

Test(order, every_rank_and_process_reads_the_same_bytes, .init = big_setup, .fini = teardown)
{
    char line[256];
    for (uint32_t r = 0; r < 4; r++)
        for (int cut = 0; cut < 2; cut++) { /* one batch; batches cutting reads */
            execute(PINIO_READ_ORDER_STAGGERED, r, 4, cut ? 20u << 20 : 0, line);
            cr_assert_not_null(strstr(line, "staggered order, rank "), "%s", line);
        }
    execute(PINIO_READ_ORDER_STAGGERED, 7, 0, 0, line); /* an independent process: its pid */
    char want[64];
    snprintf(want, sizeof(want), "staggered order (process %d)", (int)getpid());
    cr_assert_not_null(strstr(line, want), "%s", line);
    execute(PINIO_READ_ORDER_SEQUENTIAL, 3, 4, 0, line);
    cr_assert_null(strstr(line, "staggered"), "%s", line);
}

Test(order, the_environment_chooses_and_a_bad_value_is_named, .init = big_setup,
     .fini = teardown)
{
    char line[256];
    setenv("PINIO_READ_ORDER", "sequential", 1);
    execute(PINIO_READ_ORDER_AUTO, 1, 4, 0, line);
    cr_assert_null(strstr(line, "staggered"), "%s", line);
    setenv("PINIO_READ_ORDER", "staggered", 1);
    execute(PINIO_READ_ORDER_AUTO, 1, 4, 0, line);
    cr_assert_not_null(strstr(line, "staggered order, rank 1 of 4"), "%s", line);

    setenv("PINIO_READ_ORDER", "random", 1);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.cache = PINIO_CACHE_COLD; /* read, not mapped from the page cache */
    o.memory = PINIO_MEMORY_PINNED;
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    cr_assert_eq(load1(path_in("m.safetensors"), &o, &cp, &d), -EINVAL);
    cr_assert_null(cp);
    cr_assert_not_null(strstr(d.msg, "PINIO_READ_ORDER=random"), "%s", d.msg);
    unsetenv("PINIO_READ_ORDER");
}

Test(order, a_verified_load_hashes_the_same_bytes_in_either_order, .init = big_setup,
     .fini = teardown)
{
    char hex[2][65];
    for (int k = 0; k < 2; k++) {
        setenv("PINIO_READ_ORDER", k ? "staggered" : "sequential", 1);
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.cache = PINIO_CACHE_COLD;
        o.memory = PINIO_MEMORY_PINNED;
        o.verify = true; /* batches of 16 MiB: the rotated read spans several */
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(path_in("m.safetensors"), &o, &r);
        check_all(cp, 3);
        cr_assert_eq(r.verified, true);
        cr_assert_eq(!!strstr(r.io_path, "staggered order"), k == 1, "%s", r.io_path);
        snprintf(hex[k], sizeof(hex[k]), "%s", pinio_checkpoint_sha256(cp, 0));
        pinio_checkpoint_release(cp);
    }
    unsetenv("PINIO_READ_ORDER");
    cr_assert_str_eq(hex[0], hex[1]);
}
