/* `pinio doctor`: what pinio finds on this machine for one path, what it
 * will do there, and a verdict: full speed (exit 0) or degraded (exit 1),
 * each reason with what to change. Every fact comes from a probe that ran
 * now; the facts are gathered first, then judged, then written as text or
 * as one JSON object (doc/json/doctor.schema.json), so both say the same. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "doctor_fs.h"
#include "jw.h"
#include "util.h"

/* Below this much registrable memory a checkpoint of any size is mostly
 * read into unregistered memory (plain READ instead of READ_FIXED). */
#define REGISTRABLE_MIN (1ull << 30)
#define MAX_GPUS 16
#define MAX_FINDINGS 16

/* A reason for "degraded", or a note that does not change the verdict. */
struct finding {
    const char *code; /* stable, snake_case: scripts match on it */
    char message[768];
    char advice[512];
};

struct gpus {
    const char *api;
    bool ok;
    char error[sizeof(((pinio_diag *)0)->msg)];
    int driver;
    size_t n;
    pinio_gpu_device dev[MAX_GPUS];
    int distance[MAX_GPUS];
};

struct facts {
    const char *path;
    pinio_sysinfo si;
    int fs_rc;
    pinio_fs fs;
    struct doctor_mount mount; /* doctor_fs.c: the mount holding the path */
    /* O_DIRECT, as the engine found it on a file of PATH's file system */
    int dio;                 /* 1 yes, 0 refused, -1 not probed */
    char dio_why[sizeof(((pinio_diag *)0)->msg)];
    pinio_ring_file_info fi;
    int bq_rc;
    pinio_block_queue bq;
    unsigned dev_major, dev_minor;
    /* io_uring */
    int ring_rc;
    char ring_err[sizeof(((pinio_diag *)0)->msg)];
    pinio_ring_info ri;
    char flags[256];
    int ops_rc;
    pinio_ring_ops ops;
    pinio_ring_opts engine;
    pinio_memavail mem;
    pinio_hugepages hp;
    /* NUMA and the pool */
    int nodes, path_node;
    bool pool_ok;
    pinio_pool_region_info pool;
    char pool_reason[512];
    struct gpus gpu[2];
    struct finding reasons[MAX_FINDINGS], notes[MAX_FINDINGS];
    size_t nreasons, nnotes;
};

static void add(struct finding *list, size_t *n, const char *code, const char *advice,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(struct finding *list, size_t *n, const char *code, const char *advice,
                const char *fmt, ...)
{
    if (*n == MAX_FINDINGS)
        return;
    struct finding *f = &list[(*n)++];
    f->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    snprintf(f->advice, sizeof f->advice, "%s", advice ? advice : "");
}

#define REASON(F, code, advice, ...) add((F)->reasons, &(F)->nreasons, code, advice, __VA_ARGS__)
#define NOTE(F, code, advice, ...) add((F)->notes, &(F)->nnotes, code, advice, __VA_ARGS__)

static const char *bytes_text(char *buf, size_t n, uint64_t v)
{
    if (v == PINIO_UNLIMITED)
        return "unlimited";
    return cli_human_bytes(buf, n, v);
}

/* ---- probes ------------------------------------------------------------- */

/* O_DIRECT on the file system of `path`, asked of the engine itself: open a
 * file there (a scratch file for a directory) and read one aligned block
 * (some file systems refuse only at the first read). */
static void probe_direct(struct facts *f, pinio_ring *ring)
{
    struct stat st;
    char scratch[PATH_MAX] = "";
    const char *target = f->path;
    f->dio = -1;
    if (stat(f->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(scratch, sizeof scratch, "%s/.pinio-doctor-XXXXXX", f->path);
        int fd = mkstemp(scratch);
        static char block[65536];
        memset(block, 0x5a, sizeof block);
        if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block) {
            snprintf(f->dio_why, sizeof f->dio_why, "cannot write a scratch file in %s: %s",
                     f->path, pinio_strerror(-errno));
            if (fd >= 0) {
                close(fd);
                unlink(scratch);
            }
            return;
        }
        close(fd);
        target = scratch;
    }
    pinio_ring_file *rf = NULL;
    pinio_diag d = { 0 };
    if (pinio_ring_file_open(ring, target, &rf, &d) < 0) {
        snprintf(f->dio_why, sizeof f->dio_why, "%s", d.msg);
    } else {
        void *buf = NULL;
        if (posix_memalign(&buf, 4096, 4096) == 0) {
            pinio_ring_read(ring, rf, 0, buf, 4096, NULL);
            free(buf);
        }
        pinio_ring_file_get_info(rf, &f->fi);
        f->dio = f->fi.direct;
        snprintf(f->dio_why, sizeof f->dio_why, "%s", f->fi.direct ? "" : f->fi.reason);
        pinio_ring_file_close(rf);
    }
    if (scratch[0])
        unlink(scratch);
}

/* The NUMA distance between two nodes (sysfs nodeA/distance), or -1. */
static int node_distance(const char *sysfs, int a, int b)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/devices/system/node/node%d/distance", sysfs, a);
    FILE *fp = fopen(p, "r");
    int v = -1;
    for (int i = 0; fp && i <= b; i++)
        if (fscanf(fp, "%d", &v) != 1)
            v = -1;
    if (fp)
        fclose(fp);
    return v;
}

/* GPUs of one API, found as its sink finds them (libcuda.so.1 or
 * PINIO_CUDA_LIB; libamdhip64.so or PINIO_HIP_LIB). */
static void probe_gpus(struct gpus *g, const char *api, const char *sysfs, int path_node)
{
    pinio_diag d = { 0 };
    g->api = api;
    g->ok = pinio_gpu_devices(api, g->dev, MAX_GPUS, &g->n, &g->driver, &d) == 0;
    snprintf(g->error, sizeof g->error, "%s", g->ok ? "" : d.msg);
    if (!g->ok || g->n > MAX_GPUS)
        g->n = g->ok ? MAX_GPUS : 0;
    for (size_t i = 0; i < g->n; i++)
        g->distance[i] = g->dev[i].node >= 0 && path_node >= 0 ?
                             node_distance(sysfs, g->dev[i].node, path_node) : -1;
}

/* The pool as a load builds it: placed on PATH's node, registered with the
 * ring, verified page by page after pinning. */
static void probe_pool(struct facts *f, pinio_topo *topo, pinio_ring *ring)
{
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.placement = f->path_node >= 0 ? PINIO_POOL_NODE : PINIO_POOL_LOCAL;
    po.node = f->path_node >= 0 ? f->path_node : 0;
    po.topo = topo;
    if (ring && f->ri.backend != PINIO_BACKEND_PREAD)
        po.registrar = pinio_ring_registrar(ring);
    pinio_pool *pool = NULL;
    pinio_diag d = { 0 };
    if (pinio_pool_create(&pool, &po, &d) < 0) {
        snprintf(f->pool_reason, sizeof f->pool_reason, "%s", d.msg);
        return;
    }
    pinio_view v = { 0 };
    if (pinio_pool_alloc(pool, 2u << 20, 0, &v, &f->pool) == 0) {
        f->pool_ok = true;
        pinio_pool_stats ps;
        pinio_pool_get_stats(pool, &ps);
        snprintf(f->pool_reason, sizeof f->pool_reason, "%s",
                 f->pool.reg == PINIO_POOL_REG_OK ? "" :
                 ps.fallback_reason[0] ? ps.fallback_reason :
                 "no io_uring to register with");
        pinio_view_release(&v);
    } else {
        snprintf(f->pool_reason, sizeof f->pool_reason, "cannot allocate 2 MiB of pinned memory");
    }
    pinio_pool_unregister(pool);
    pinio_pool_destroy(pool);
}

static void probe_all(struct facts *f, const char *root, const struct stat *pst)
{
    pinio_sys_probe(&f->si);
    f->fs_rc = pinio_fs_probe(f->path, &f->fs);
    doctor_fs_mount(f->path, root, &f->mount);

    pinio_topo *topo = NULL;
    pinio_topo_opts to;
    pinio_topo_opts_default(&to);
    char sysfs[PATH_MAX];
    if (root) {
        snprintf(sysfs, sizeof sysfs, "%s/sys", root);
        to.sysfs_root = sysfs;
    }
    f->nodes = -1;
    f->path_node = PINIO_NODE_UNKNOWN;
    if (pinio_topo_open(&topo, &to) == 0) {
        f->nodes = pinio_topo_node_count(topo);
        pinio_topo_node_of_file(topo, f->path, &f->path_node, NULL);
    }
    const char *sys = topo ? pinio_topo_sysfs_root(topo) : "/sys";

    dev_t dev = S_ISBLK(pst->st_mode) ? pst->st_rdev : pst->st_dev;
    f->dev_major = major(dev);
    f->dev_minor = minor(dev);
    f->bq_rc = pinio_block_queue_probe(sys, f->dev_major, f->dev_minor, &f->bq);

    /* io_uring: the ring's own setup ladder tells the truth. */
    pinio_ring *ring = NULL;
    pinio_diag d = { 0 };
    f->ring_rc = pinio_ring_create(&ring, NULL, &d);
    if (f->ring_rc == 0) {
        pinio_ring_get_info(ring, &f->ri);
        pinio_ring_flags_format(f->ri.setup_flags, f->flags, sizeof f->flags);
    } else {
        snprintf(f->ring_err, sizeof f->ring_err, "%s", d.msg);
    }
    bool uring = f->ring_rc == 0 && f->ri.backend != PINIO_BACKEND_PREAD;
    f->ops_rc = uring ? pinio_ring_probe_ops(&f->ops) : -ENOSYS;
    pinio_ring_opts_default(&f->engine);

    pinio_mem_available(root, &f->mem);
    pinio_hugepages_probe(root, &f->hp);
    probe_pool(f, topo, ring);
    f->dio = -1;
    if (ring)
        probe_direct(f, ring);
    probe_gpus(&f->gpu[0], "cuda", sys, f->path_node);
    probe_gpus(&f->gpu[1], "hip", sys, f->path_node);
    pinio_ring_destroy(ring);
    pinio_topo_close(topo);
}

/* ---- the verdict -------------------------------------------------------- */

static void fs_note(void *ctx, const char *code, const char *advice, const char *msg)
{
    NOTE((struct facts *)ctx, code, advice, "%s", msg);
}

static void judge(struct facts *f)
{
    char a[32], b[32], c[32];
    bool uring = f->ring_rc == 0 && f->ri.backend != PINIO_BACKEND_PREAD;
    if (f->ring_rc < 0) {
        REASON(f, "io_uring_unavailable", "see the message; pinio cannot read without a ring",
               "no I/O engine: %s", f->ring_err);
    } else if (!uring) {
        REASON(f, "io_uring_unavailable",
               f->si.io_uring_disabled > 0 ?
                   "sysctl kernel.io_uring_disabled=0 (as root) re-enables it" :
                   "io_uring is blocked (a container runtime's seccomp profile?): allow "
                   "io_uring_setup, io_uring_enter and io_uring_register",
               "io_uring unavailable: %s", f->ri.reason);
    } else if (f->ops_rc < 0) {
        REASON(f, "io_uring_opcodes_unknown", "a kernel of 5.6 or later answers the probe",
               "the kernel does not say which io_uring opcodes it has (%s)",
               pinio_strerror(f->ops_rc));
    } else if (!f->ops.read || !f->ops.read_fixed) {
        REASON(f, "io_uring_opcodes_missing",
               "a kernel of 5.6 or later has both; a sandbox (gVisor) may filter them",
               "io_uring lacks %s%s%s", f->ops.read ? "" : "READ",
               !f->ops.read && !f->ops.read_fixed ? " and " : "",
               f->ops.read_fixed ? "" : "READ_FIXED");
    }

    if (f->fs_rc == 0 && f->fs.memory) {
        NOTE(f, "page_cache_is_storage", NULL,
             "%s keeps files in memory: there is no device to read from and nothing to drop "
             "(--cache cold reads what is already cached); pinio reads it buffered or maps it",
             f->fs.name);
    } else if (f->dio == 0) {
        REASON(f, "o_direct_refused",
               "pinio reads through the page cache here (one more copy, cold loads evict "
               "other data); keep checkpoints on a local block-device file system (ext4, "
               "xfs) for O_DIRECT",
               "%s refuses O_DIRECT: %s", f->fs.name, f->dio_why);
    } else if (f->dio < 0) {
        NOTE(f, "o_direct_unknown", "give a file on that file system: pinio doctor PATH/TO/FILE",
             "O_DIRECT not probed: %s", f->dio_why[0] ? f->dio_why : "no I/O engine");
    }

    const char *memlock_advice =
        "raise RLIMIT_MEMLOCK: 'ulimit -l unlimited' (needs a raised hard limit), a 'memlock' "
        "line in /etc/security/limits.conf, LimitMEMLOCK=infinity for systemd services, "
        "--ulimit memlock=-1 for containers; or grant CAP_IPC_LOCK";
    if (uring && f->pool_ok && f->pool.reg != PINIO_POOL_REG_OK)
        REASON(f, "memory_not_registered", memlock_advice,
               "pinned memory could not be registered with io_uring (reads use READ into "
               "unregistered memory, a page walk per request): %s", f->pool_reason);
    else if (uring && f->si.registrable < REGISTRABLE_MIN)
        REASON(f, "memlock_too_small", memlock_advice,
               "RLIMIT_MEMLOCK lets this process register %s (soft %s, hard %s, no "
               "CAP_IPC_LOCK): a checkpoint beyond that is read into unregistered memory",
               bytes_text(a, sizeof a, f->si.registrable),
               bytes_text(b, sizeof b, f->si.memlock_soft),
               bytes_text(c, sizeof c, f->si.memlock_hard));
    if (!f->pool_ok)
        REASON(f, "no_pinned_memory", "free memory, or lower the memory cgroup's pressure",
               "pinned memory: %s", f->pool_reason);
    else if (f->pool.verify == PINIO_POOL_VERIFY_MISPLACED)
        REASON(f, "memory_misplaced", "free memory on that node, or choose another with --node N",
               "pinned memory landed on node %d instead of %d (the node is short of free memory)",
               f->pool.found_node, f->pool.node);

    if (f->path_node < 0 && f->nodes > 1)
        NOTE(f, "path_node_unknown", "pass --node N to place memory by hand",
             "the NUMA node of PATH's device is unknown: memory goes on the loading thread's node");
    if (!strcmp(f->hp.thp_enabled, "never"))
        NOTE(f, "thp_off", "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
             "transparent huge pages are off: faulting large arenas costs more and registered "
             "memory takes one segment per 4 KiB page");
    if (!f->si.has_cachestat)
        NOTE(f, "no_cachestat", NULL,
             "no cachestat(2) (Linux < 6.5): pinio measures page-cache residency with mmap + "
             "mincore");
    if (f->bq_rc == 0 && f->bq.rotational == 1)
        NOTE(f, "rotational", NULL,
             "%s says it is rotational: a spinning disk gives about 200 MB/s however pinio "
             "reads (virtual disks often say so whatever backs them)", f->bq.disk);
    if (f->bq_rc == 0 && f->bq.max_sectors_kb > 0 &&
        (uint64_t)f->bq.max_sectors_kb * 1024 < f->engine.request_size)
        NOTE(f, "requests_split",
             f->bq.max_hw_sectors_kb > f->bq.max_sectors_kb ?
                 "raise queue/max_sectors_kb up to max_hw_sectors_kb (as root) for fewer, larger "
                 "requests" : NULL,
             "%s splits pinio's %s requests into %lld KiB ones (max_sectors_kb)", f->bq.disk,
             cli_human_bytes(a, sizeof a, f->engine.request_size),
             (long long)f->bq.max_sectors_kb);
    doctor_fs_advise(&f->mount, f->fs_rc == 0 ? &f->fs : NULL, fs_note, f);
}

/* ---- text --------------------------------------------------------------- */

static void line(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *key, const char *fmt, ...)
{
    printf("%-18s ", key);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static const char *yes_no_unknown(int v)
{
    return v > 0 ? "yes" : v == 0 ? "no" : "unknown";
}

static void text_gpus(const struct gpus *g)
{
    if (!g->ok) {
        line(g->api, "no: %s", g->error);
        return;
    }
    line(g->api, "%zu device%s, driver %d.%d", g->n, g->n == 1 ? "" : "s", g->driver / 1000,
         g->driver % 1000 / 10);
    for (size_t i = 0; i < g->n; i++) {
        char a[32], k[32];
        snprintf(k, sizeof k, "%s:%d", g->api, g->dev[i].index);
        line(k, "%s, %s, %s, NUMA node %d, distance %d to PATH's node", g->dev[i].name,
             g->dev[i].pci_bus_id, cli_human_bytes(a, sizeof a, g->dev[i].memory),
             g->dev[i].node, g->distance[i]);
    }
}

static void text_findings(const char *title, const struct finding *l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("  %s %s: %s\n", title, l[i].code, l[i].message);
        if (l[i].advice[0])
            printf("    -> %s\n", l[i].advice);
    }
}

static void text(const struct facts *f)
{
    char a[32], b[32], c[32];
    line("pinio", "%s, liburing %s, Linux %s", pinio_version(), pinio_liburing_version(),
         f->si.kernel_release);
    line("path", "%s", f->path);
    if (f->fs_rc == 0)
        line("file system", "%s: %s", f->fs.name,
             f->fs.memory ? "in memory (nothing to drop, no O_DIRECT needed)" :
             f->dio > 0 ? "O_DIRECT reads" : f->dio == 0 ? "buffered reads (O_DIRECT refused)" :
                          "O_DIRECT unknown");
    char mnt[640];
    doctor_fs_describe(&f->mount, mnt, sizeof mnt);
    line("mount", "%s", mnt);
    if (f->dio > 0)
        line("o_direct", "yes, memory alignment %u, offset alignment %u (from %s)",
             f->fi.mem_align, f->fi.offset_align, f->fi.align_source);
    else
        line("o_direct", "%s%s%s", f->dio == 0 ? "no" : "unknown", f->dio_why[0] ? ": " : "",
             f->dio_why);
    if (f->bq_rc == 0) {
        const pinio_block_queue *q = &f->bq;
        char via[80] = "";
        if (strcmp(q->device, q->disk))
            snprintf(via, sizeof via, " (under %s%s)", q->device,
                     q->members > 1 ? ", first of its members" : "");
        line("block device", "%s%s%s%s%s", q->disk, via, q->model[0] ? ": '" : "", q->model,
             q->model[0] ? "'" : "");
        line("queue", "scheduler %s, nr_requests %lld, max_sectors_kb %lld (hw %lld), "
             "read_ahead_kb %lld", q->scheduler[0] ? q->scheduler : "?",
             (long long)q->nr_requests, (long long)q->max_sectors_kb,
             (long long)q->max_hw_sectors_kb, (long long)q->read_ahead_kb);
        line("block size", "%lld logical, %lld physical; rotational %s",
             (long long)q->logical_block_size, (long long)q->physical_block_size,
             yes_no_unknown(q->rotational));
        line("polled_io", "%s", q->io_poll > 0 ? "yes (poll queues: --iopoll can run)" :
                                q->io_poll == 0 ? "no (no poll queues: pinio bench --iopoll "
                                                  "fails; NVMe gets them with nvme.poll_queues=N)" :
                                                  "unknown (no queue/io_poll)");
    } else {
        line("block device", "none in sysfs for %u:%u (%s)", f->dev_major, f->dev_minor,
             pinio_strerror(f->bq_rc));
    }
    if (f->ring_rc == 0 && f->ri.backend != PINIO_BACKEND_PREAD)
        line("io_uring", "yes: %s (sq %u, cq %u)", f->flags, f->ri.sq_entries, f->ri.cq_entries);
    else
        line("io_uring", "no: %s", f->ring_rc < 0 ? f->ring_err : f->ri.reason);
    if (f->ops_rc == 0)
        line("opcodes", "READ %s, READ_FIXED %s, WRITE %s, WRITE_FIXED %s",
             f->ops.read ? "yes" : "no", f->ops.read_fixed ? "yes" : "no",
             f->ops.write ? "yes" : "no", f->ops.write_fixed ? "yes" : "no");
    else
        line("opcodes", "not probed (%s)", pinio_strerror(f->ops_rc));
    line("engine defaults", "queue depth %u, requests of %s, %u pread threads",
         f->engine.queue_depth, cli_human_bytes(a, sizeof a, f->engine.request_size),
         f->engine.pread_threads);
    line("memlock", "%s soft, %s hard; CAP_IPC_LOCK %s; %s registrable now",
         bytes_text(a, sizeof a, f->si.memlock_soft), bytes_text(b, sizeof b, f->si.memlock_hard),
         f->si.cap_ipc_lock ? "yes" : "no", bytes_text(c, sizeof c, f->si.registrable));
    line("memory", "MemAvailable %s; memory cgroup limit %s (%s left)",
         f->mem.meminfo == PINIO_UNLIMITED ? "unknown" : bytes_text(a, sizeof a, f->mem.meminfo),
         bytes_text(b, sizeof b, f->mem.cgroup_limit), bytes_text(c, sizeof c, f->mem.cgroup));
    line("hugepages", "%lld free of %lld (%s pages); THP %s, defrag %s", (long long)f->hp.free,
         (long long)f->hp.total, f->hp.page_bytes ? cli_human_bytes(a, sizeof a, f->hp.page_bytes) : "?",
         f->hp.thp_enabled[0] ? f->hp.thp_enabled : "unknown",
         f->hp.thp_defrag[0] ? f->hp.thp_defrag : "unknown");
    char node[16] = "unknown";
    if (f->path_node >= 0)
        snprintf(node, sizeof node, "%d", f->path_node);
    line("numa", "%d node%s; PATH's device on node %s", f->nodes, f->nodes == 1 ? "" : "s", node);
    if (f->pool_ok)
        line("pool", "node %d, %s (found on node %d), %s", f->pool.node,
             pinio_pool_verify_name(f->pool.verify), f->pool.found_node,
             f->pool.reg == PINIO_POOL_REG_OK ? "registered (READ_FIXED into pinned memory)" :
                                                "not registered");
    else
        line("pool", "no: %s", f->pool_reason);
    line("cachestat", "%s", f->si.has_cachestat ? "yes" : "no");
    text_gpus(&f->gpu[0]);
    text_gpus(&f->gpu[1]);
    if (f->nreasons)
        line("verdict", "degraded on %s: %zu reason%s", f->path, f->nreasons,
             f->nreasons == 1 ? "" : "s");
    else
        line("verdict", "full speed on %s", f->path);
    text_findings("reason", f->reasons, f->nreasons);
    text_findings("note", f->notes, f->nnotes);
}

/* ---- JSON --------------------------------------------------------------- */

/* A byte count, or the documented string "unlimited". */
static void j_bytes(jw *w, const char *key, uint64_t v)
{
    if (v == PINIO_UNLIMITED)
        jw_kstr(w, key, "unlimited");
    else
        jw_ku64(w, key, v);
}

/* A number that may be unknown (negative): null. */
static void j_opt(jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    if (v < 0)
        jw_null(w);
    else
        jw_i64(w, v);
}

static void j_tristate(jw *w, const char *key, int v)
{
    jw_key(w, key);
    if (v < 0)
        jw_null(w);
    else
        jw_bool(w, v);
}

static void j_findings(jw *w, const char *key, const struct finding *l, size_t n)
{
    jw_key(w, key);
    jw_arr(w);
    for (size_t i = 0; i < n; i++) {
        jw_obj(w);
        jw_kstr(w, "code", l[i].code);
        jw_kstr(w, "message", l[i].message);
        jw_kstr(w, "advice", l[i].advice[0] ? l[i].advice : NULL);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

static void j_gpus(jw *w, const struct gpus *g)
{
    jw_key(w, g->api);
    jw_obj(w);
    jw_kbool(w, "available", g->ok);
    jw_kstr(w, "reason", g->ok ? NULL : g->error);
    j_opt(w, "driver_version", g->ok ? g->driver : -1);
    jw_key(w, "devices");
    jw_arr(w);
    for (size_t i = 0; i < g->n; i++) {
        const pinio_gpu_device *d = &g->dev[i];
        jw_obj(w);
        jw_ki64(w, "index", d->index);
        jw_kstr(w, "name", d->name);
        jw_kstr(w, "pci_bus_id", d->pci_bus_id);
        jw_ku64(w, "memory_bytes", d->memory);
        j_opt(w, "numa_node", d->node);
        j_opt(w, "distance_to_path", g->distance[i]);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_obj_end(w);
}

static void json(const struct facts *f)
{
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, "doctor");
    jw_kstr(&w, "path", f->path);
    jw_kstr(&w, "verdict", f->nreasons ? "degraded" : "full_speed");
    j_findings(&w, "reasons", f->reasons, f->nreasons);
    j_findings(&w, "notes", f->notes, f->nnotes);
    jw_kstr(&w, "kernel", f->si.kernel_release);
    jw_kstr(&w, "liburing_version", pinio_liburing_version());

    jw_key(&w, "file_system");
    jw_obj(&w);
    jw_kstr(&w, "type", f->fs_rc == 0 ? f->fs.name : NULL);
    jw_kbool(&w, "in_memory", f->fs_rc == 0 && f->fs.memory);
    jw_kbool(&w, "network", f->fs_rc == 0 && f->fs.network);
    j_tristate(&w, "o_direct", f->dio);
    jw_kstr(&w, "o_direct_reason", f->dio_why[0] ? f->dio_why : NULL);
    j_opt(&w, "dio_mem_align_bytes", f->dio > 0 ? (int64_t)f->fi.mem_align : -1);
    j_opt(&w, "dio_offset_align_bytes", f->dio > 0 ? (int64_t)f->fi.offset_align : -1);
    jw_kstr(&w, "dio_align_source", f->dio > 0 ? f->fi.align_source : NULL);
    jw_kstr(&w, "reads", f->fs_rc == 0 && f->fs.memory ? "page_cache" :
                         f->dio > 0 ? "o_direct" : f->dio == 0 ? "buffered" : NULL);
    jw_obj_end(&w);

    jw_key(&w, "block_device");
    if (f->bq_rc == 0) {
        const pinio_block_queue *q = &f->bq;
        jw_obj(&w);
        jw_kstr(&w, "device", q->device);
        jw_kstr(&w, "disk", q->disk);
        jw_ku64(&w, "members", q->members);
        jw_kstr(&w, "model", q->model[0] ? q->model : NULL);
        jw_kstr(&w, "scheduler", q->scheduler[0] ? q->scheduler : NULL);
        j_opt(&w, "nr_requests", q->nr_requests);
        j_opt(&w, "max_sectors_kb", q->max_sectors_kb);
        j_opt(&w, "max_hw_sectors_kb", q->max_hw_sectors_kb);
        j_opt(&w, "logical_block_size_bytes", q->logical_block_size);
        j_opt(&w, "physical_block_size_bytes", q->physical_block_size);
        j_opt(&w, "read_ahead_kb", q->read_ahead_kb);
        j_tristate(&w, "rotational", q->rotational);
        j_tristate(&w, "polled_io", q->io_poll);
        jw_obj_end(&w);
    } else {
        jw_null(&w);
    }

    bool uring = f->ring_rc == 0 && f->ri.backend != PINIO_BACKEND_PREAD;
    jw_key(&w, "io_uring");
    jw_obj(&w);
    jw_kbool(&w, "available", uring);
    jw_kstr(&w, "reason", uring ? NULL : f->ring_rc < 0 ? f->ring_err : f->ri.reason);
    jw_key(&w, "setup_flags");
    jw_arr(&w);
    if (uring) {
        /* pinio_ring_flags_format() joins with '|'; JSON wants a list. */
        char flags[sizeof f->flags];
        snprintf(flags, sizeof flags, "%s", f->flags);
        for (char *tok = strtok(flags, "|"); tok; tok = strtok(NULL, "|"))
            jw_str(&w, tok);
    }
    jw_arr_end(&w);
    j_opt(&w, "sq_entries", uring ? (int64_t)f->ri.sq_entries : -1);
    j_opt(&w, "cq_entries", uring ? (int64_t)f->ri.cq_entries : -1);
    j_opt(&w, "io_uring_disabled", f->si.io_uring_disabled);
    jw_key(&w, "opcodes");
    if (f->ops_rc == 0) {
        jw_obj(&w);
        jw_kbool(&w, "read", f->ops.read);
        jw_kbool(&w, "read_fixed", f->ops.read_fixed);
        jw_kbool(&w, "write", f->ops.write);
        jw_kbool(&w, "write_fixed", f->ops.write_fixed);
        jw_obj_end(&w);
    } else {
        jw_null(&w);
    }
    jw_obj_end(&w);

    jw_key(&w, "engine");
    jw_obj(&w);
    jw_ku64(&w, "queue_depth", f->engine.queue_depth);
    jw_ku64(&w, "request_size_bytes", f->engine.request_size);
    jw_ku64(&w, "pread_threads", f->engine.pread_threads);
    jw_obj_end(&w);

    jw_key(&w, "memlock");
    jw_obj(&w);
    j_bytes(&w, "soft_bytes", f->si.memlock_soft);
    j_bytes(&w, "hard_bytes", f->si.memlock_hard);
    jw_kbool(&w, "cap_ipc_lock", f->si.cap_ipc_lock);
    j_bytes(&w, "registrable_bytes", f->si.registrable);
    jw_ku64(&w, "locked_bytes", f->si.vm_locked);
    jw_ku64(&w, "pinned_bytes", f->si.vm_pinned);
    jw_obj_end(&w);

    jw_key(&w, "memory");
    jw_obj(&w);
    j_bytes(&w, "mem_available_bytes", f->mem.meminfo);
    j_bytes(&w, "cgroup_limit_bytes", f->mem.cgroup_limit);
    j_bytes(&w, "cgroup_available_bytes", f->mem.cgroup);
    jw_kstr(&w, "bound_by", f->mem.source);
    jw_obj_end(&w);

    jw_key(&w, "hugepages");
    jw_obj(&w);
    j_opt(&w, "total", f->hp.total);
    j_opt(&w, "free", f->hp.free);
    j_opt(&w, "page_bytes", f->hp.page_bytes ? (int64_t)f->hp.page_bytes : -1);
    jw_kstr(&w, "thp_enabled", f->hp.thp_enabled[0] ? f->hp.thp_enabled : NULL);
    jw_kstr(&w, "thp_defrag", f->hp.thp_defrag[0] ? f->hp.thp_defrag : NULL);
    jw_obj_end(&w);

    jw_key(&w, "numa");
    jw_obj(&w);
    jw_ki64(&w, "nodes", f->nodes);
    j_opt(&w, "path_node", f->path_node);
    jw_obj_end(&w);

    jw_key(&w, "pool");
    jw_obj(&w);
    jw_kbool(&w, "allocated", f->pool_ok);
    j_opt(&w, "node", f->pool_ok ? f->pool.node : -1);
    j_opt(&w, "found_node", f->pool_ok ? f->pool.found_node : -1);
    jw_kstr(&w, "placement", f->pool_ok ? pinio_pool_verify_name(f->pool.verify) : NULL);
    jw_kbool(&w, "registered", f->pool_ok && f->pool.reg == PINIO_POOL_REG_OK);
    jw_kstr(&w, "reason", f->pool_reason[0] ? f->pool_reason : NULL);
    jw_obj_end(&w);

    jw_kbool(&w, "cachestat", f->si.has_cachestat);
    jw_key(&w, "gpus");
    jw_obj(&w);
    j_gpus(&w, &f->gpu[0]);
    j_gpus(&w, &f->gpu[1]);
    jw_obj_end(&w);
    jw_obj_end(&w);
    jw_finish(&w); /* a failed write is main.c's to report */
}

/* ---- object stores: s3://, gs://, az:// ---------------------------------- */

/* Whether PATH names an object rather than a local path; the https:// form
 * is Azure's (https://ACCOUNT.blob.core.windows.net/...), and the probe says
 * so when it is not. */
static bool object_url(const char *p)
{
    return !strncmp(p, "s3://", 5) || !strncmp(p, "gs://", 5) || !strncmp(p, "az://", 5) ||
           !strncmp(p, "https://", 8);
}

/* The store a URL names; NULL for an https:// URL that is no Azure account's. */
static const char *store_of(const char *url)
{
    if (!strncmp(url, "https://", 8))
        return strstr(url, ".blob.core.windows.net/") ? "azure" : NULL;
    return !strncmp(url, "s3://", 5) ? "s3" : !strncmp(url, "gs://", 5) ? "gcs" : "azure";
}

static void object_json(const char *url, const pinio_s3_probe *p, const char *expires)
{
    jw w;
    jw_init(&w, stdout);
    jw_begin(&w, "doctor");
    jw_kstr(&w, "path", url);
    jw_kstr(&w, "store", store_of(url));
    jw_kstr(&w, "verdict", p->config_rc || p->head_rc ? "not_reachable" : "reachable");
    jw_key(&w, "credentials");
    jw_obj(&w);
    jw_kstr(&w, "source", p->config_rc ? NULL : p->source);
    jw_kstr(&w, "key_id_last4", p->key_hint[0] ? p->key_hint : NULL);
    jw_kstr(&w, "expires", expires);
    jw_kstr(&w, "error", p->config_rc ? p->config_msg : NULL);
    jw_obj_end(&w);
    bool cfg = !p->config_rc;
    jw_kstr(&w, "region", cfg && p->region[0] ? p->region : NULL);
    jw_kstr(&w, "endpoint", cfg && p->endpoint[0] ? p->endpoint : NULL);
    jw_kstr(&w, "addressing", cfg && p->addressing[0] ? p->addressing : NULL);
    jw_key(&w, "tls_trust");
    jw_obj(&w);
    jw_kstr(&w, "cainfo", cfg && p->cainfo[0] ? p->cainfo : NULL);
    jw_kstr(&w, "capath", cfg && p->capath[0] ? p->capath : NULL);
    jw_obj_end(&w);
    jw_key(&w, "object");
    jw_obj(&w);
    jw_kbool(&w, "reachable", cfg && !p->head_rc);
    jw_key(&w, "size_bytes");
    if (cfg && !p->head_rc)
        jw_u64(&w, p->size);
    else
        jw_null(&w);
    jw_kstr(&w, "etag", cfg && !p->head_rc && p->etag[0] ? p->etag : NULL);
    jw_kstr(&w, "error", cfg && p->head_rc ? p->head_msg : NULL);
    jw_obj_end(&w);
    jw_obj_end(&w);
    jw_finish(&w);
}

/* The store as a load would meet it: which credential source answered
 * (never a secret; an access key id's last 4 characters at most), region,
 * endpoint, TLS trust, and the object's HEAD. Exit 0 reachable, 1 not. */
static int doctor_object(const char *url, bool as_json)
{
    pinio_s3_probe p;
    int rc = pinio_s3_probe_object(url, &p);
    char when[64] = "never";
    time_t t = (time_t)p.expires;
    struct tm tm;
    if (p.expires && gmtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (as_json) {
        object_json(url, &p, p.key_hint[0] && p.expires ? when : NULL);
        return rc ? 1 : 0;
    }
    printf("object       %s\n", url);
    if (p.config_rc) {
        printf("credentials  FAILED: %s\n", p.config_msg);
        printf("verdict      not reachable: the configuration failed (above)\n");
        return 1;
    }
    printf("credentials  %s%s\n", p.source,
           strcmp(p.source, "none") == 0 ? ": anonymous (unsigned requests)" : "");
    if (p.key_hint[0])
        printf("key id       ...%s (expires %s)\n", p.key_hint, when);
    if (p.region[0])
        printf("region       %s\n", p.region);
    printf("endpoint     %s (addressing %s)\n", p.endpoint[0] ? p.endpoint : "(none)",
           p.addressing);
    printf("tls trust    %s%s%s\n", p.cainfo[0] ? p.cainfo : p.capath[0] ? "" : "libcurl's default",
           p.cainfo[0] && p.capath[0] ? ", " : "", p.capath);
    if (p.head_rc) {
        printf("object HEAD  FAILED: %s\n", p.head_msg);
        printf("verdict      not reachable\n");
        return 1;
    }
    printf("object HEAD  %llu bytes, ETag %s\n", (unsigned long long)p.size,
           p.etag[0] ? p.etag : "(none)");
    printf("verdict      reachable\n");
    return rc ? 1 : 0;
}

/* ---- the command -------------------------------------------------------- */

static void help(void)
{
    printf("usage: pinio doctor [PATH] [--json] [--root DIR]\n"
           "\n"
           "Reports what pinio finds on this machine for PATH (default: the current\n"
           "directory) and what it will do there: the file system and whether pinio reads\n"
           "it with O_DIRECT; the block device's queue (scheduler, nr_requests,\n"
           "max_sectors_kb, block sizes, read-ahead, rotational, model; a partition or a\n"
           "dm/md device is followed to its disk); io_uring, its setup flags and the\n"
           "opcodes pinio uses, the liburing version; RLIMIT_MEMLOCK (soft and hard) and\n"
           "CAP_IPC_LOCK; MemAvailable and the memory cgroup's limit (v1 or v2); the huge\n"
           "page pool and THP; NUMA nodes and where pinned memory lands; the engine's\n"
           "defaults; the CUDA and HIP devices.\n"
           "\n"
           "Then a verdict: 'full speed' (exit 0), or 'degraded' (exit 1) with each\n"
           "reason (io_uring blocked, O_DIRECT refused, memory that cannot be registered,\n"
           "...) and what to do about it. Notes give advice that does not change it.\n"
           "\n"
           "PATH s3://BUCKET/KEY, gs://BUCKET/OBJECT or az://CONTAINER/BLOB (or\n"
           "https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB) reports the store\n"
           "instead: which credential source answered (an access key id's last 4\n"
           "characters at most, never a secret or a token), the region, endpoint and\n"
           "TLS trust used, and the object's HEAD (size, ETag); exit 0 when it is\n"
           "reachable, 1 with the failure otherwise (--json: the same as one object).\n"
           "\n"
           "  --json       one JSON object (doc/json/doctor.schema.json)\n"
           "  --root DIR   read the /proc and /sys facts from DIR/proc and DIR/sys (a\n"
           "               copy of another machine's, or a test tree); io_uring, O_DIRECT,\n"
           "               limits and the pool are still probed live\n"
           "  -h, --help   this help\n"
           "\n"
           "Exit status: 0 full speed, 1 degraded or PATH unusable, 2 usage error.\n");
}

static int run_doctor(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "root", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    bool as_json = false;
    const char *root = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'j') {
            as_json = true;
        } else if (c == 'r') {
            root = optarg;
        } else if (c == 'h') {
            help();
            return 0;
        } else {
            return cli_getopt_error("doctor", c, argv);
        }
    }
    if (argc - optind > 1)
        return cli_usage("doctor", "one PATH at most");
    static struct facts f; /* large; one per process */
    memset(&f, 0, sizeof f);
    f.path = optind < argc ? argv[optind] : ".";
    /* Every probe here is of a local path (its file system, O_DIRECT, the
     * block queue, its NUMA node); an object has none of them. */
    if (object_url(f.path)) {
        if (root)
            return cli_usage("doctor", "%s: an object store's report takes no --root", f.path);
        return doctor_object(f.path, as_json);
    }
    /* Non-blocking open + fstat: a FIFO's open() would wait for a writer
     * forever, and the probes below open the path again (O_DIRECT). Only
     * what they can use passes: a directory, a regular file, a block device. */
    struct stat pst;
    int pfd = open(f.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int err = pfd < 0 || fstat(pfd, &pst) != 0 ? -errno : 0;
    if (pfd >= 0)
        close(pfd);
    if (!err && !S_ISDIR(pst.st_mode) && !S_ISREG(pst.st_mode) && !S_ISBLK(pst.st_mode))
        err = -EINVAL;
    if (err) {
        const char *what = err == -EINVAL ? "not a regular file (nor a directory or block device)" :
                                            pinio_strerror(err);
        if (as_json)
            jw_error("doctor", err, what, f.path, -1);
        fprintf(stderr, "pinio doctor: %s: %s\n", f.path, what);
        return 1;
    }
    probe_all(&f, root, &pst);
    judge(&f);
    if (as_json)
        json(&f);
    else
        text(&f);
    return f.nreasons ? 1 : 0;
}

const struct pinio_cmd pinio_cmd_doctor = {
    .name = "doctor",
    .summary = "report what pinio finds for a path and whether it runs at full speed there",
    .run = run_doctor,
};
