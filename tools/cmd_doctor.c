/* `pinio doctor`: what pinio finds on this machine and what it will do, with
 * what to change for every "no". Every line comes from a probe that ran now. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "util.h"

/* Output: the same facts as "key: value  (advice)" lines or one JSON object. */
struct out {
    bool json;
    bool first;
};

/* One fact. `raw` is the JSON value (already JSON: a number, true/false or a
 * quoted string made by the caller), `text` what a person reads, `advice` the
 * fix when the answer is a "no" (or NULL). */
static void fact(struct out *o, const char *key, const char *raw, const char *text,
                 const char *advice)
{
    if (o->json) {
        printf("%s", o->first ? "{" : ",");
        cli_json_str(key, strlen(key));
        printf(":%s", raw);
        if (advice) {
            printf(",");
            char k[96];
            snprintf(k, sizeof(k), "%s_advice", key);
            cli_json_str(k, strlen(k));
            printf(":");
            cli_json_str(advice, strlen(advice));
        }
    } else {
        printf("%-22s %s\n", key, text);
        if (advice)
            printf("%-22s   -> %s\n", "", advice);
    }
    o->first = false;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof(bufs[0]), f, ap);
    va_end(ap);
    return b;
}

static char *quoted(const char *s)
{
    static char bufs[4][600];
    static int next;
    char *b = bufs[next++ % 4];
    size_t k = 0;
    b[k++] = '"';
    for (; *s && k < sizeof(bufs[0]) - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            b[k++] = '\\';
            b[k++] = (char)c;
        } else if (c >= 0x20) {
            b[k++] = (char)c;
        }
    }
    b[k++] = '"';
    b[k] = '\0';
    return b;
}

static const char *bytes_text(uint64_t v)
{
    if (v == PINIO_UNLIMITED)
        return "unlimited";
    if (v >= (1ull << 30))
        return fmt("%.1f GiB", (double)v / (double)(1ull << 30));
    if (v >= (1ull << 20))
        return fmt("%.1f MiB", (double)v / (double)(1ull << 20));
    return fmt("%llu KiB", (unsigned long long)(v >> 10));
}

/* Polled completions (pinio bench --iopoll) need a device with poll
 * queues: the block device's queue/io_poll says 1. A partition has no
 * queue of its own; its disk is the parent directory in sysfs. */
static void probe_poll(struct out *o, const char *sysfs, const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return;
    dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    char link[PATH_MAX], real[PATH_MAX], file[PATH_MAX + 32];
    snprintf(link, sizeof link, "%s/dev/block/%u:%u", sysfs, major(dev), minor(dev));
    if (!realpath(link, real)) {
        fact(o, "polled_io", "null", "unknown (no block device in sysfs for this path)", NULL);
        return;
    }
    snprintf(file, sizeof file, "%s/partition", real);
    if (access(file, F_OK) == 0) {
        char *slash = strrchr(real, '/');
        if (slash)
            *slash = 0;
    }
    const char *name = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
    snprintf(file, sizeof file, "%s/queue/io_poll", real);
    FILE *f = fopen(file, "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    if (v < 0)
        fact(o, "polled_io", "null", fmt("unknown (%s has no queue/io_poll)", name), NULL);
    else if (v)
        fact(o, "polled_io", "true", fmt("yes (%s has poll queues: --iopoll can run)", name),
             NULL);
    else
        fact(o, "polled_io", "false", fmt("no (%s has no poll queues)", name),
             "pinio bench --iopoll fails here; NVMe gets poll queues with the nvme.poll_queues=N "
             "module parameter (virtual disks usually have none)");
}

static const char *bytes_json(uint64_t v)
{
    return v == PINIO_UNLIMITED ? "null" : fmt("%llu", (unsigned long long)v);
}

/* O_DIRECT on the file system of `path`: open a file there with O_DIRECT and
 * read an aligned block. A directory gets a scratch file (removed again). */
static void probe_direct(struct out *o, pinio_ring *ring, const char *path)
{
    struct stat st;
    char scratch[4096] = "";
    const char *target = path;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(scratch, sizeof(scratch), "%s/.pinio-doctor-XXXXXX", path);
        int fd = mkstemp(scratch);
        if (fd < 0) {
            fact(o, "o_direct", "null", fmt("unknown: cannot create a scratch file in %s", path),
                 "give a file on that file system: pinio doctor PATH/TO/FILE");
            return;
        }
        static char block[65536];
        memset(block, 0x5a, sizeof(block));
        ssize_t w = write(fd, block, sizeof(block));
        close(fd);
        if (w != (ssize_t)sizeof(block)) {
            unlink(scratch);
            fact(o, "o_direct", "null", "unknown: cannot write a scratch file", NULL);
            return;
        }
        target = scratch;
    }
    pinio_ring_file *f = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_ring_file_open(ring, target, &f, &d);
    if (rc < 0) {
        fact(o, "o_direct", "null", fmt("unknown: %s", d.msg), NULL);
    } else {
        /* One aligned read proves the file system accepts O_DIRECT reads
         * (some refuse only at the first read). */
        void *buf = NULL;
        if (posix_memalign(&buf, 4096, 4096) == 0) {
            pinio_ring_read(ring, f, 0, buf, 4096, NULL);
            free(buf);
        }
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(f, &fi);
        if (fi.direct)
            fact(o, "o_direct", "true",
                 fmt("yes, memory alignment %u, offset alignment %u (from %s)", fi.mem_align,
                     fi.offset_align, fi.align_source),
                 NULL);
        else
            fact(o, "o_direct", "false", fmt("no: %s", fi.reason),
                 "pinio reads this file system buffered (tmpfs and some FUSE file systems refuse "
                 "O_DIRECT); keep checkpoints on a block-device file system for cold loads");
        if (o->json) {
            fact(o, "dio_mem_align", fmt("%u", fi.mem_align), "", NULL);
            fact(o, "dio_offset_align", fmt("%u", fi.offset_align), "", NULL);
        }
        pinio_ring_file_close(f);
    }
    if (scratch[0])
        unlink(scratch);
}

/* The NUMA distance between two nodes (sysfs nodeA/distance), or -1. */
static int node_distance(const char *sysfs, int a, int b)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/devices/system/node/node%d/distance", sysfs, a);
    FILE *f = fopen(p, "r");
    int v = -1;
    for (int i = 0; f && i <= b; i++)
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
    if (f)
        fclose(f);
    return v;
}

/* GPUs of one API, found as its sink finds them (libcuda.so.1 or
 * PINIO_CUDA_LIB; libamdhip64.so or PINIO_HIP_LIB). */
static void probe_gpus(struct out *o, const char *api, const char *sysfs, int path_node)
{
    pinio_gpu_device devs[16];
    size_t n = 0;
    int ver = 0;
    pinio_diag d = { 0 };
    bool cuda = strcmp(api, "cuda") == 0;
    if (pinio_gpu_devices(api, devs, 16, &n, &ver, &d) < 0) {
        fact(o, api, "false", fmt("no: %s", d.msg),
             cuda ? "pinio load --device cuda:N needs the NVIDIA driver's libcuda.so.1; "
                    "PINIO_CUDA_LIB names it where it lives elsewhere (NixOS, WSL, Apptainer)"
                  : "pinio load --device hip:N needs ROCm's libamdhip64.so; PINIO_HIP_LIB "
                    "names it where it lives elsewhere");
        return;
    }
    fact(o, api, "true",
         fmt("%zu device%s, driver %d.%d", n, n == 1 ? "" : "s", ver / 1000, ver % 1000 / 10),
         NULL);
    for (size_t i = 0; i < n && i < 16; i++) {
        const pinio_gpu_device *g = &devs[i];
        int dist = g->node >= 0 && path_node >= 0 ? node_distance(sysfs, g->node, path_node) : -1;
        fact(o, fmt("%s:%d", api, g->index),
             fmt("{\"name\":%s,\"pci_bus_id\":%s,\"memory\":%llu,\"node\":%d,"
                 "\"distance_to_path\":%d}",
                 quoted(g->name), quoted(g->pci_bus_id), (unsigned long long)g->memory, g->node,
                 dist),
             fmt("%s, %s, %s, NUMA node %d, distance %d to PATH's node", g->name, g->pci_bus_id,
                 bytes_text(g->memory), g->node, dist),
             g->node < 0 ? "the GPU's node is unknown (VM?): pass --node N to place the "
                           "staging by hand" : NULL);
    }
}

static int run_doctor(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct out o = { .json = false, .first = true };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (c == 'j') {
            o.json = true;
        } else if (c == 'h') {
            printf("usage: pinio doctor [PATH] [--json]\n"
                   "\n"
                   "Reports what pinio finds on this machine and what it will do: kernel,\n"
                   "io_uring and the setup flags it accepts, RLIMIT_MEMLOCK and CAP_IPC_LOCK\n"
                   "(how much memory can be registered), NUMA nodes, the node of PATH's device\n"
                   "and whether pinned memory is placed there, O_DIRECT support and alignment\n"
                   "on PATH's file system, transparent huge pages, cachestat(2), the CUDA and\n"
                   "HIP devices (name, PCI bus id, memory, NUMA node, distance to PATH's node).\n"
                   "Every \"no\" comes with what to do about it. PATH defaults to the current\n"
                   "directory.\n");
            return 0;
        } else {
            return cli_getopt_error("doctor", c, argv);
            return 2;
        }
    }
    if (argc - optind > 1) {
        cli_usage("doctor", "one PATH at most");
        return 2;
    }
    const char *path = optind < argc ? argv[optind] : ".";
    /* Non-blocking open + fstat: a FIFO's open() would wait for a writer
     * forever, and the probes below open the path again (O_DIRECT). Only
     * what they can use passes: a directory, a regular file, a block device. */
    struct stat pst;
    int pfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (pfd < 0 || fstat(pfd, &pst) != 0) {
        fprintf(stderr, "pinio doctor: %s: %s\n", path, pinio_strerror(-errno));
        if (pfd >= 0)
            close(pfd);
        return 1;
    }
    close(pfd);
    if (!S_ISDIR(pst.st_mode) && !S_ISREG(pst.st_mode) && !S_ISBLK(pst.st_mode)) {
        fprintf(stderr,
                "pinio doctor: %s: not a regular file (nor a directory or block device)\n", path);
        return 1;
    }

    pinio_sysinfo si;
    pinio_sys_probe(&si);
    fact(&o, "pinio", quoted(pinio_version()), pinio_version(), NULL);
    fact(&o, "kernel", quoted(si.kernel_release), si.kernel_release, NULL);

    /* io_uring: the ring's own setup ladder tells the truth. */
    pinio_ring *ring = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_ring_create(&ring, NULL, &d);
    pinio_ring_info ri;
    memset(&ri, 0, sizeof(ri));
    if (rc == 0)
        pinio_ring_get_info(ring, &ri);
    if (rc < 0) {
        fact(&o, "io_uring", "false", fmt("no: %s", d.msg), NULL);
    } else if (ri.backend == PINIO_BACKEND_PREAD) {
        fact(&o, "io_uring", "false", fmt("no (%s): %s", pinio_strerror(ri.setup_error), ri.reason),
             si.io_uring_disabled > 0 ?
                 "sysctl kernel.io_uring_disabled=0 (as root) re-enables it; pinio uses pread threads meanwhile" :
                 "io_uring is blocked (seccomp in a container runtime?); allow io_uring_setup/enter/register, "
                 "pinio uses pread threads meanwhile");
    } else {
        char flags[256];
        pinio_ring_flags_format(ri.setup_flags, flags, sizeof(flags));
        fact(&o, "io_uring", "true", "yes", NULL);
        fact(&o, "ring_flags", quoted(flags),
             fmt("%s (sq %u, cq %u)", flags, ri.sq_entries, ri.cq_entries), NULL);
    }
    if (si.io_uring_disabled >= 0)
        fact(&o, "io_uring_disabled", fmt("%d", si.io_uring_disabled),
             fmt("%d (kernel.io_uring_disabled)", si.io_uring_disabled), NULL);

    /* Memory locking. */
    fact(&o, "memlock_limit", bytes_json(si.memlock_soft),
         fmt("%s soft, %s hard (RLIMIT_MEMLOCK)", bytes_text(si.memlock_soft),
             bytes_text(si.memlock_hard)),
         NULL);
    fact(&o, "cap_ipc_lock", si.cap_ipc_lock ? "true" : "false",
         si.cap_ipc_lock ? "yes: registered memory is not charged to the memlock limit" : "no",
         NULL);
    bool small = si.registrable != PINIO_UNLIMITED && si.registrable < (1ull << 30);
    fact(&o, "registrable", bytes_json(si.registrable),
         fmt("%s can be pinned and registered now", bytes_text(si.registrable)),
         small ? "raise the limit to register a whole checkpoint: 'ulimit -l unlimited' (needs a "
                 "raised hard limit), 'memlock' in /etc/security/limits.conf, LimitMEMLOCK= for "
                 "systemd services, --ulimit memlock=-1 for containers; or grant CAP_IPC_LOCK. "
                 "Without it pinio reads into unregistered memory (a little more CPU per read)" :
                 NULL);

    /* NUMA. */
    pinio_topo *topo = NULL;
    int nodes = -1, file_node = PINIO_NODE_UNKNOWN;
    if (pinio_topo_open(&topo, NULL) == 0) {
        nodes = pinio_topo_node_count(topo);
        pinio_topo_node_of_file(topo, path, &file_node, NULL);
    }
    fact(&o, "numa_nodes", fmt("%d", nodes), fmt("%d", nodes), NULL);
    fact(&o, "path", quoted(path), path, NULL);
    fact(&o, "path_node", fmt("%d", file_node),
         file_node >= 0 ? fmt("%d (the device's NUMA node)", file_node) :
                          "unknown (no block device in sysfs, or firmware gives no proximity)",
         file_node < 0 && nodes > 1 ?
             "pinio places memory on the loading thread's node; pass --node N to choose" : NULL);

    /* Pool placement, verified page by page after pinning. */
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.placement = file_node >= 0 ? PINIO_POOL_NODE : PINIO_POOL_LOCAL;
    po.node = file_node >= 0 ? file_node : 0;
    po.topo = topo;
    if (ring && ri.backend != PINIO_BACKEND_PREAD)
        po.registrar = pinio_ring_registrar(ring);
    pinio_pool *pool = NULL;
    if (pinio_pool_create(&pool, &po, NULL) == 0) {
        pinio_view v = { 0 };
        pinio_pool_region_info info;
        if (pinio_pool_alloc(pool, 2u << 20, 0, &v, &info) == 0) {
            fact(&o, "pool_node", fmt("%d", info.node), fmt("%d", info.node), NULL);
            fact(&o, "pool_placement", quoted(pinio_pool_verify_name(info.verify)),
                 fmt("%s (found on node %d)", pinio_pool_verify_name(info.verify), info.found_node),
                 info.verify == PINIO_POOL_VERIFY_MISPLACED ?
                     "the node is short of free memory; free some or choose another --node" : NULL);
            pinio_pool_stats ps;
            pinio_pool_get_stats(pool, &ps);
            fact(&o, "pool_registered", info.reg == PINIO_POOL_REG_OK ? "true" : "false",
                 info.reg == PINIO_POOL_REG_OK ? "yes (READ_FIXED into pinned memory)" :
                                                 fmt("no: %s", ps.fallback_reason[0] ?
                                                                   ps.fallback_reason : "no ring"),
                 NULL);
            pinio_view_release(&v);
        }
        pinio_pool_unregister(pool);
        pinio_pool_destroy(pool);
    }

    if (ring)
        probe_direct(&o, ring, path);
    probe_poll(&o, topo ? pinio_topo_sysfs_root(topo) : "/sys", path);

    fact(&o, "thp", quoted(si.thp_enabled), si.thp_enabled[0] ? si.thp_enabled : "unknown",
         !strcmp(si.thp_enabled, "never") ?
             "transparent huge pages are off: faulting large arenas costs more; "
             "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled" : NULL);
    fact(&o, "cachestat", si.has_cachestat ? "true" : "false",
         si.has_cachestat ? "yes (page-cache residency without mapping files)" :
                            "no (Linux < 6.5): pinio uses mmap + mincore instead",
         NULL);
    probe_gpus(&o, "cuda", topo ? pinio_topo_sysfs_root(topo) : "/sys", file_node);
    probe_gpus(&o, "hip", topo ? pinio_topo_sysfs_root(topo) : "/sys", file_node);
    if (o.json)
        printf("}\n");
    pinio_ring_destroy(ring);
    pinio_topo_close(topo);
    return 0;
}

const struct pinio_cmd pinio_cmd_doctor = {
    .name = "doctor",
    .summary = "report what pinio finds on this machine and what it will do",
    .run = run_doctor,
};
