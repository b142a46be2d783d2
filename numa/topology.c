/*
 * NUMA topology from sysfs.
 *
 * Why sysfs and not libnuma: libnuma answers "which nodes and CPUs exist"
 * but nothing about devices, and it always reads the real /sys, so a test
 * could not describe a four-node machine. Every answer here is read on
 * demand from a redirectable root; nothing is cached, so a handle stays
 * immutable and thread-safe.
 *
 * Layout facts this relies on (Documentation/ABI/testing/sysfs-dev,
 * sysfs-block, sysfs-bus-pci):
 * - /sys/dev/block/MAJ:MIN is a symlink to the device directory under
 *   /sys/devices; its realpath follows the bus hierarchy, so walking up the
 *   path passes through the PCI function that owns the disk.
 * - a partition directory contains a `partition` file and sits inside its
 *   disk's directory.
 * - dm and md list their members in `slaves/` (symlinks to the members'
 *   directories, partitions included); a multipath NVMe head node lists its
 *   controller paths in `multipath/` and lives under the virtual
 *   nvme-subsystem, which has no numa_node of its own.
 * - PCI functions (and NVMe controllers) have `numa_node`; firmware without
 *   proximity information (most VMs) makes it -1.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "pinio/numa.h"
#include "src/base/opts.h"
#include "numa/numa_internal.h"

/* dm on md on dm ... is legal; a loop in a corrupt or fake tree is not. */
#define MAX_STACK_DEPTH 16

struct pinio_topo {
    char root[PATH_MAX];
};

static const char *default_root(void)
{
    /* secure_getenv: a setuid program must not let its caller redirect the
     * topology (and with it the pool's placement decisions). */
    const char *env = secure_getenv(PINIO_SYSFS_ROOT_ENV);
    return (env && *env) ? env : "/sys";
}

static const char *root_of(const pinio_topo *t)
{
    return t ? t->root : default_root();
}

void pinio_topo_opts_init(pinio_topo_opts *opts, size_t size)
{
    pinio_topo_opts d;
    memset(&d, 0, sizeof(d));
    if (!opts)
        return;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

int pinio_topo_open(pinio_topo **out, const pinio_topo_opts *opts)
{
    if (!out)
        return -EINVAL;
    pinio_topo_opts def;
    pinio_topo_opts_default(&def);
    if (pinio__opts_copy(&def, sizeof(def), opts, "pinio_topo options", NULL) < 0)
        return -EINVAL;
    opts = &def;
    const char *root = opts->sysfs_root ? opts->sysfs_root : default_root();
    /* Relative roots would change meaning with the working directory. */
    if (root[0] != '/')
        return -EINVAL;
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/')
        n--;
    pinio_topo *t = malloc(sizeof(*t));
    if (!t)
        return -ENOMEM;
    if (n >= sizeof(t->root)) {
        free(t);
        return -ENAMETOOLONG;
    }
    memcpy(t->root, root, n);
    t->root[n] = '\0';
    *out = t;
    return 0;
}

void pinio_topo_close(pinio_topo *topo)
{
    free(topo);
}

const char *pinio_topo_sysfs_root(const pinio_topo *topo)
{
    return root_of(topo);
}

/* ---- small file helpers ------------------------------------------------ */

static int join(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int join(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return (n < 0 || (size_t)n >= size) ? -ENAMETOOLONG : 0;
}

/* Reads a small sysfs attribute, NUL-terminated, trailing whitespace cut. */
static int read_attr(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n;
    do
        n = read(fd, buf, size - 1);
    while (n < 0 && errno == EINTR);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (err)
        return err;
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        n--;
    buf[n] = '\0';
    return (int)n;
}

/* A decimal integer attribute such as numa_node ("-1", "0", "3"). */
static int read_int_attr(const char *path, long *val)
{
    char buf[32];
    int rc = read_attr(path, buf, sizeof(buf));
    if (rc < 0)
        return rc;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (end == buf || *end || errno)
        return -EINVAL;
    *val = v;
    return 0;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- cpulists ------------------------------------------------------------ */

/* Next "a" or "a-b" element of a cpulist; returns 1 with a range, 0 at the
 * end, -EINVAL on junk. Grammar: elements joined by single commas, optional
 * trailing whitespace (the newline). The kernel prints no stride syntax in
 * cpulist files (bitmap_print_to_pagebuf uses "%*pbl"), so none is accepted. */
static int cpulist_next(const char **sp, bool first, unsigned long *lo, unsigned long *hi)
{
    const char *s = *sp;
    if (!first && *s == ',') {
        s++;
        if (!isdigit((unsigned char)*s))
            return -EINVAL; /* "1," or "1,,2": a comma needs an element */
    } else if (!first || !isdigit((unsigned char)*s)) {
        while (isspace((unsigned char)*s))
            s++;
        return *s ? -EINVAL : 0;
    }
    char *end;
    errno = 0;
    *lo = strtoul(s, &end, 10);
    if (errno || *lo > INT_MAX)
        return -EINVAL;
    *hi = *lo;
    s = end;
    if (*s == '-') {
        s++;
        if (!isdigit((unsigned char)*s))
            return -EINVAL;
        *hi = strtoul(s, &end, 10);
        if (errno || *hi > INT_MAX || *hi < *lo)
            return -EINVAL;
        s = end;
    }
    *sp = s;
    return 1;
}

int pinio__cpulist_parse(const char *s, uint64_t *mask, size_t nwords)
{
    if (!s)
        return -EINVAL;
    if (mask)
        memset(mask, 0, nwords * sizeof(*mask));
    long count = 0;
    unsigned long lo, hi;
    int rc;
    for (bool first = true; (rc = cpulist_next(&s, first, &lo, &hi)) > 0; first = false) {
        if (!mask) {
            count += (long)(hi - lo + 1);
            if (count > INT_MAX)
                return -ERANGE;
            continue;
        }
        if (hi / 64 >= nwords)
            return -ERANGE;
        for (unsigned long c = lo; c <= hi; c++) {
            uint64_t bit = UINT64_C(1) << (c % 64);
            if (!(mask[c / 64] & bit))
                count++;
            mask[c / 64] |= bit;
        }
    }
    return rc < 0 ? rc : (int)count;
}

int pinio__cpulist_contains(const char *s, unsigned cpu)
{
    if (!s || pinio__cpulist_parse(s, NULL, 0) < 0)
        return 0;
    unsigned long lo, hi;
    for (bool first = true; cpulist_next(&s, first, &lo, &hi) > 0; first = false)
        if (cpu >= lo && cpu <= hi)
            return 1;
    return 0;
}

/* ---- nodes and CPUs ---------------------------------------------------- */

/* "node12" -> 12; anything else (nodeX, node, node01x) -> -1. */
static int node_dir_id(const char *name)
{
    if (strncmp(name, "node", 4) != 0 || !isdigit((unsigned char)name[4]))
        return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    return (*end || v > INT_MAX / 2) ? -1 : (int)v;
}

int pinio_topo_node_count(const pinio_topo *topo)
{
    char path[PATH_MAX];
    if (join(path, sizeof(path), "%s/devices/system/node", root_of(topo)) < 0)
        return 1;
    DIR *d = opendir(path);
    if (!d)
        return 1; /* CONFIG_NUMA=n: one node, node 0 */
    int max = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int id = node_dir_id(e->d_name);
        if (id > max)
            max = id;
    }
    closedir(d);
    return max < 0 ? 1 : max + 1;
}

/* Up to 64 KiB: a cpulist of 8192 CPUs in the worst layout still fits. */
#define CPULIST_MAX 65536

static int read_cpulist(const pinio_topo *topo, int node, char **out)
{
    char path[PATH_MAX];
    int rc = join(path, sizeof(path), "%s/devices/system/node/node%d/cpulist", root_of(topo), node);
    if (rc < 0)
        return rc;
    char *buf = malloc(CPULIST_MAX);
    if (!buf)
        return -ENOMEM;
    rc = read_attr(path, buf, CPULIST_MAX);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

int pinio_topo_node_of_cpu(const pinio_topo *topo, int cpu, int *node)
{
    if (cpu < 0 || !node)
        return -EINVAL;
    int count = pinio_topo_node_count(topo);
    for (int n = 0; n < count; n++) {
        char *list;
        int rc = read_cpulist(topo, n, &list);
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0)
            continue; /* a hole in the node ids, or a node without cpulist */
        int hit = pinio__cpulist_contains(list, (unsigned)cpu);
        free(list);
        if (hit) {
            *node = n;
            return 0;
        }
    }
    *node = PINIO_NODE_UNKNOWN;
    return 0;
}

int pinio_topo_node_cpus(const pinio_topo *topo, int node, uint64_t *mask, size_t nwords)
{
    if (node < 0 || (!mask && nwords))
        return -EINVAL;
    char *list;
    int rc = read_cpulist(topo, node, &list);
    if (rc < 0)
        return rc == -ENOENT || rc == -ENOTDIR ? -ENOENT : rc;
    rc = pinio__cpulist_parse(list, mask, nwords);
    free(list);
    return rc;
}

int pinio_topo_current_node(const pinio_topo *topo, int *node)
{
    if (!node)
        return -EINVAL;
    unsigned cpu, knode;
    if (getcpu(&cpu, &knode) != 0)
        return -errno;
    int rc = pinio_topo_node_of_cpu(topo, (int)cpu, node);
    if (rc < 0)
        return rc;
    /* On the real sysfs a CPU missing from every cpulist means a kernel
     * without NUMA node directories; the kernel's own answer is then right. */
    if (*node == PINIO_NODE_UNKNOWN && strcmp(root_of(topo), "/sys") == 0)
        *node = (int)knode;
    return 0;
}

/* ---- block devices ------------------------------------------------------- */

struct walk {
    const char *root_real; /* realpath of the sysfs root: the walk stops there */
    size_t root_len;
    pinio_diag *diag;
};

static int node_of_devdir(const struct walk *w, const char *dir, int depth, int *node);

/* Common node of the members listed in dir/sub (slaves/ or multipath/).
 * Returns 1 with *node set when the directory has members, 0 when it has
 * none (not a stacked device), or a negative error. */
static int node_of_members(const struct walk *w, const char *dir, const char *sub, int depth,
                           int *node)
{
    char path[PATH_MAX];
    int rc = join(path, sizeof(path), "%s/%s", dir, sub);
    if (rc < 0)
        return rc;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int members = 0, common = PINIO_NODE_UNKNOWN;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char link[PATH_MAX];
        rc = join(link, sizeof(link), "%s/%s", path, e->d_name);
        if (rc < 0)
            break;
        char *member = realpath(link, NULL);
        int mnode = PINIO_NODE_UNKNOWN;
        if (member) {
            rc = node_of_devdir(w, member, depth + 1, &mnode);
            free(member);
            if (rc < 0)
                break;
        } else if (errno == ENOMEM) {
            rc = -ENOMEM;
            break;
        }
        /* A member we cannot place makes the whole set unknown: claiming the
         * node of the others would put half the I/O on the wrong socket. */
        if (members == 0)
            common = mnode;
        else if (mnode != common)
            common = PINIO_NODE_UNKNOWN;
        members++;
    }
    closedir(d);
    if (rc < 0)
        return rc;
    if (members == 0)
        return 0;
    *node = common;
    return 1;
}

static int node_of_devdir(const struct walk *w, const char *dir_in, int depth, int *node)
{
    if (depth > MAX_STACK_DEPTH) {
        pinio_diag_set(w->diag, -ELOOP, "%s: block devices stacked deeper than %d levels",
                         dir_in, MAX_STACK_DEPTH);
        return -ELOOP;
    }
    char dir[PATH_MAX], path[PATH_MAX];
    if (join(dir, sizeof(dir), "%s", dir_in) < 0)
        return -ENAMETOOLONG;

    /* A partition's queue, slaves and device link belong to its disk. */
    if (join(path, sizeof(path), "%s/partition", dir) < 0)
        return -ENAMETOOLONG;
    if (exists(path)) {
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir)
            *slash = '\0';
    }

    static const char *const stacks[] = { "slaves", "multipath" };
    for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
        int rc = node_of_members(w, dir, stacks[i], depth, node);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }

    /* The disk's own device link first (t/io_uring reads
     * /sys/block/X/device/numa_node), then up the bus path. */
    long v;
    if (join(path, sizeof(path), "%s/device/numa_node", dir) < 0)
        return -ENAMETOOLONG;
    int rc = read_int_attr(path, &v);
    for (size_t len = strlen(dir); rc < 0;) {
        if (rc != -ENOENT && rc != -ENOTDIR && rc != -EINVAL) {
            pinio_diag_set(w->diag, rc, "%s: %s", path, pinio_strerror(rc));
            return rc;
        }
        if (len <= w->root_len || len <= 1)
            break;
        if (join(path, sizeof(path), "%.*s/numa_node", (int)len, dir) < 0)
            return -ENAMETOOLONG;
        rc = read_int_attr(path, &v);
        if (rc == 0)
            break;
        while (len > 0 && dir[len - 1] != '/')
            len--;
        if (len > 0)
            len--; /* drop the slash */
    }
    *node = (rc == 0 && v >= 0 && v <= INT_MAX) ? (int)v : PINIO_NODE_UNKNOWN;
    return 0;
}

int pinio_topo_node_of_dev(const pinio_topo *topo, unsigned major, unsigned minor, int *node,
                           pinio_diag *diag)
{
    if (!node)
        return -EINVAL;
    const char *root = root_of(topo);
    char path[PATH_MAX];
    int rc = join(path, sizeof(path), "%s/dev/block/%u:%u", root, major, minor);
    if (rc < 0)
        return rc;
    char *dir = realpath(path, NULL);
    if (!dir) {
        if (errno == ENOMEM)
            return -ENOMEM;
        /* Major 0 (tmpfs, overlayfs, btrfs subvolumes) and devices unknown to
         * this sysfs have no entry: there is no device to place. */
        *node = PINIO_NODE_UNKNOWN;
        return 0;
    }
    char *root_real = realpath(root, NULL);
    struct walk w = { .root_real = root_real ? root_real : root, .diag = diag };
    w.root_len = strlen(w.root_real);
    rc = node_of_devdir(&w, dir, 0, node);
    free(root_real);
    free(dir);
    return rc;
}

static int node_of_stat(const pinio_topo *topo, const struct stat *st, int *node, pinio_diag *diag)
{
    dev_t dev = S_ISBLK(st->st_mode) ? st->st_rdev : st->st_dev;
    return pinio_topo_node_of_dev(topo, major(dev), minor(dev), node, diag);
}

int pinio_topo_node_of_file(const pinio_topo *topo, const char *path, int *node, pinio_diag *diag)
{
    if (!path || !node)
        return -EINVAL;
    struct stat st;
    if (stat(path, &st) != 0) {
        int err = -errno;
        pinio_diag_set(diag, err, "%s: stat: %s", path, pinio_strerror(err));
        return err;
    }
    return node_of_stat(topo, &st, node, diag);
}

int pinio_topo_node_of_fd(const pinio_topo *topo, int fd, int *node, pinio_diag *diag)
{
    if (!node)
        return -EINVAL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        pinio_diag_set(diag, err, "fd %d: fstat: %s", fd, pinio_strerror(err));
        return err;
    }
    return node_of_stat(topo, &st, node, diag);
}

/* ---- PCI ----------------------------------------------------------------- */

static int hex_field(const char *s, size_t len, unsigned long max, unsigned long *out)
{
    if (len == 0 || len > 8)
        return -EINVAL;
    unsigned long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isxdigit((unsigned char)s[i]))
            return -EINVAL;
        v = v * 16 + (unsigned long)(isdigit((unsigned char)s[i]) ? s[i] - '0'
                                                                  : tolower((unsigned char)s[i]) - 'a' + 10);
    }
    if (v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Canonical sysfs spelling "dddd:bb:dd.f" (domain printed %04x, as the
 * kernel's pci_name() does, so 8-digit NVML domains shrink to 4). */
static int pci_canonical(const char *id, char *out, size_t size)
{
    const char *dot = strrchr(id, '.');
    if (!dot)
        return -EINVAL;
    const char *c2 = NULL, *c1 = NULL; /* last and second-to-last colon */
    for (const char *p = id; p < dot; p++)
        if (*p == ':') {
            c1 = c2;
            c2 = p;
        }
    if (!c2)
        return -EINVAL;
    unsigned long domain = 0, bus, dev, fn;
    const char *bus_start = c1 ? c1 + 1 : id;
    if (c1 && hex_field(id, (size_t)(c1 - id), 0xffffffffUL, &domain) < 0)
        return -EINVAL;
    if (hex_field(bus_start, (size_t)(c2 - bus_start), 0xff, &bus) < 0 ||
        hex_field(c2 + 1, (size_t)(dot - c2 - 1), 0x1f, &dev) < 0 ||
        hex_field(dot + 1, strlen(dot + 1), 7, &fn) < 0)
        return -EINVAL;
    return join(out, size, "%04lx:%02lx:%02lx.%lx", domain, bus, dev, fn);
}

int pinio_topo_node_of_pci(const pinio_topo *topo, const char *bus_id, int *node, pinio_diag *diag)
{
    if (!bus_id || !node)
        return -EINVAL;
    char id[64];
    if (pci_canonical(bus_id, id, sizeof(id)) < 0) {
        pinio_diag_set(diag, -EINVAL, "'%s': not a PCI bus id (expected dddd:bb:dd.f)", bus_id);
        return -EINVAL;
    }
    char dir[PATH_MAX], path[PATH_MAX];
    if (join(dir, sizeof(dir), "%s/bus/pci/devices/%s", root_of(topo), id) < 0 ||
        join(path, sizeof(path), "%s/numa_node", dir) < 0)
        return -ENAMETOOLONG;
    if (!exists(dir)) {
        pinio_diag_set(diag, -ENODEV, "%s: no such PCI device", dir);
        return -ENODEV;
    }
    long v;
    int rc = read_int_attr(path, &v);
    if (rc == -ENOENT) {
        *node = PINIO_NODE_UNKNOWN; /* CONFIG_NUMA=n kernels have no attribute */
        return 0;
    }
    if (rc < 0) {
        pinio_diag_set(diag, -EIO, "%s: unreadable (%s)", path, pinio_strerror(rc));
        return -EIO;
    }
    *node = (v >= 0 && v <= INT_MAX) ? (int)v : PINIO_NODE_UNKNOWN;
    return 0;
}
