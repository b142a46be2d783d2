/*
 * System facts: kernel, memlock, THP and page-cache residency.
 *
 * Why each probe asks the kernel rather than trusting headers: pinio is built
 * on one machine and run on others (cluster images are old, kernels newer),
 * so cachestat(2) and CAP_IPC_LOCK are checked by calling them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "src/base/fs.h"
#include "src/base/mem.h"
#include "src/base/sys_internal.h"

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture (Linux 6.5) */
#endif

struct pinio_cachestat_range {
    uint64_t off;
    uint64_t len;
};

struct pinio_cachestat {
    uint64_t nr_cache;
    uint64_t nr_dirty;
    uint64_t nr_writeback;
    uint64_t nr_evicted;
    uint64_t nr_recently_evicted;
};

static int read_small_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, size - 1);
    int err = n < 0 ? -errno : 0;
    close(fd);
    if (err)
        return err;
    buf[n] = '\0';
    return (int)n;
}

/* "/proc/self/status" value of `key` (in kB there) as bytes; 0 if absent. */
static uint64_t status_kb(const char *status, const char *key)
{
    const char *p = strstr(status, key);
    unsigned long long kb = 0;
    if (p && sscanf(p + strlen(key), " %llu", &kb) == 1)
        return (uint64_t)kb * 1024;
    return 0;
}

static bool has_cap_ipc_lock(void)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) != 0)
        return false;
    return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1u;
}

static uint64_t rlim_bytes(rlim_t v)
{
    return v == RLIM_INFINITY ? PINIO_UNLIMITED : (uint64_t)v;
}

int pinio_sys_probe(pinio_sysinfo *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    out->io_uring_disabled = -1;

    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(out->kernel_release, sizeof(out->kernel_release), "%s", u.release);
        sscanf(u.release, "%d.%d", &out->kernel_major, &out->kernel_minor);
    }

    char buf[4096];
    if (read_small_file("/proc/sys/kernel/io_uring_disabled", buf, sizeof(buf)) > 0)
        out->io_uring_disabled = (int)strtol(buf, NULL, 10);

    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        out->memlock_soft = rlim_bytes(rl.rlim_cur);
        out->memlock_hard = rlim_bytes(rl.rlim_max);
    }
    out->cap_ipc_lock = has_cap_ipc_lock();
    if (read_small_file("/proc/self/status", buf, sizeof(buf)) > 0) {
        out->vm_locked = status_kb(buf, "VmLck:");
        out->vm_pinned = status_kb(buf, "VmPin:");
    }
    if (out->cap_ipc_lock || out->memlock_soft == PINIO_UNLIMITED) {
        out->registrable = PINIO_UNLIMITED;
    } else {
        uint64_t used = out->vm_locked + out->vm_pinned;
        out->registrable = used < out->memlock_soft ? out->memlock_soft - used : 0;
    }

    /* The active mode is the bracketed word: "always [madvise] never". */
    if (read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) > 0) {
        char *l = strchr(buf, '['), *r = l ? strchr(l, ']') : NULL;
        if (l && r && (size_t)(r - l - 1) < sizeof(out->thp_enabled))
            snprintf(out->thp_enabled, sizeof(out->thp_enabled), "%.*s", (int)(r - l - 1), l + 1);
    }

    /* cachestat on an invalid fd: EBADF proves the syscall exists, ENOSYS that it doesn't. */
    struct pinio_cachestat_range range = { 0, 0 };
    struct pinio_cachestat cs;
    errno = 0;
    long r = syscall(__NR_cachestat, -1, &range, &cs, 0);
    out->has_cachestat = !(r < 0 && errno == ENOSYS);

    out->page_size = sysconf(_SC_PAGESIZE);
    out->cpus_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return 0;
}

/* mincore over bounded windows: a whole 100 GB checkpoint must not need a
 * 100 GB mapping or a 25 M-entry vector at once. */
#define MINCORE_WINDOW ((uint64_t)256 << 20)

int pinio__residency_mincore(int fd, uint64_t off, uint64_t len, uint64_t *cached)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char vec[MINCORE_WINDOW / 4096];
    uint64_t start = off & ~((uint64_t)page - 1);
    uint64_t end = off + len;
    uint64_t total = 0;
    for (uint64_t w = start; w < end; w += MINCORE_WINDOW) {
        size_t wlen = (size_t)(end - w < MINCORE_WINDOW ? end - w : MINCORE_WINDOW);
        void *map = mmap(NULL, wlen, PROT_READ, MAP_SHARED, fd, (off_t)w);
        if (map == MAP_FAILED)
            return -errno;
        size_t pages = (wlen + (size_t)page - 1) / (size_t)page;
        int rc = mincore(map, wlen, vec);
        int err = rc ? -errno : 0;
        munmap(map, wlen);
        if (err)
            return err;
        for (size_t i = 0; i < pages; i++) {
            if (!(vec[i] & 1))
                continue;
            /* Count only the part of the page inside [off, end). */
            uint64_t ps = w + (uint64_t)i * (uint64_t)page, pe = ps + (uint64_t)page;
            if (ps < off)
                ps = off;
            if (pe > end)
                pe = end;
            total += pe - ps;
        }
    }
    *cached = total;
    return 0;
}

int pinio_file_residency(int fd, uint64_t offset, uint64_t len, pinio_residency *out)
{
    struct stat st;
    if (!out)
        return -EINVAL;
    if (fstat(fd, &st) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    uint64_t size = (uint64_t)st.st_size;
    if (offset >= size) {
        *out = (pinio_residency){ .range_bytes = 0, .cached_bytes = 0,
                                  .method = PINIO_RESIDENCY_CACHESTAT };
        return 0;
    }
    if (len == 0 || len > size - offset)
        len = size - offset;

    struct pinio_cachestat_range range = { offset, len };
    struct pinio_cachestat cs;
    if (syscall(__NR_cachestat, fd, &range, &cs, 0) == 0) {
        /* cachestat counts whole pages touching the range; clamp to the range. */
        uint64_t bytes = cs.nr_cache * (uint64_t)sysconf(_SC_PAGESIZE);
        *out = (pinio_residency){ .range_bytes = len, .cached_bytes = bytes < len ? bytes : len,
                                  .method = PINIO_RESIDENCY_CACHESTAT };
        return 0;
    }
    uint64_t cached = 0;
    int rc = pinio__residency_mincore(fd, offset, len, &cached);
    if (rc < 0)
        return rc;
    *out = (pinio_residency){ .range_bytes = len, .cached_bytes = cached,
                              .method = PINIO_RESIDENCY_MINCORE };
    return 0;
}

int pinio_file_drop_cache(int fd)
{
    /* DONTNEED skips dirty pages, so write them back first or a freshly
     * written file would stay hot. */
    if (fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS)
        return -errno;
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    return rc ? -rc : 0;
}

/* ---- memory available ------------------------------------------------- */

#define MEM_PATH 4096

/* The first number in root + path, or PINIO_UNLIMITED ("max", missing, or
 * v1's "no limit" near 2^63). */
static uint64_t read_u64(const char *root, const char *path)
{
    char p[2 * MEM_PATH];
    snprintf(p, sizeof(p), "%s%s", root, path);
    FILE *f = fopen(p, "re");
    if (!f)
        return PINIO_UNLIMITED;
    unsigned long long v = 0;
    int n = fscanf(f, "%llu", &v);
    fclose(f);
    return n == 1 && v < ((uint64_t)1 << 62) ? (uint64_t)v : PINIO_UNLIMITED;
}

/* The value of a "key value" or "key: value" line (memory.stat,
 * /proc/meminfo) times `unit`; 0 when absent. */
static uint64_t stat_key(const char *root, const char *path, const char *key, uint64_t unit)
{
    char p[2 * MEM_PATH], line[256];
    snprintf(p, sizeof(p), "%s%s", root, path);
    FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    size_t kl = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && (line[kl] == ' ' || line[kl] == ':')) {
            v = strtoull(line + kl + 1, NULL, 10) * unit;
            break;
        }
    fclose(f);
    return v;
}

typedef struct cg_files {
    const char *mount, *limit, *usage, *inactive;
} cg_files;

static const cg_files CG_V1 = { "/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                                "memory.usage_in_bytes", "total_inactive_file" };
static const cg_files CG_V2 = { "/sys/fs/cgroup", "memory.max", "memory.current",
                                "inactive_file" };

/* The memory cgroup's path from /proc/self/cgroup (v1's memory line wins
 * over v2's 0:: line): the files to read, or NULL without either. */
static const cg_files *cgroup_of(const char *root, char *path, size_t n)
{
    char p[MEM_PATH + 32], line[MEM_PATH];
    snprintf(p, sizeof(p), "%s/proc/self/cgroup", root);
    FILE *f = fopen(p, "re");
    if (!f)
        return NULL;
    const cg_files *which = NULL;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c = strchr(line, ':'), *d = c ? strchr(c + 1, ':') : NULL;
        if (!d)
            continue;
        bool v1 = strncmp(c, ":memory:", 8) == 0, v2 = c == line + 1 && line[0] == '0' && d == c + 1;
        if ((v1 || (v2 && !which)) && strlen(d + 1) < n) {
            snprintf(path, n, "%s", strcmp(d + 1, "/") == 0 ? "" : d + 1);
            which = v1 ? &CG_V1 : &CG_V2;
        }
    }
    fclose(f);
    return which;
}

/* Room in the memory cgroup: the tightest limit from the process's cgroup up
 * to the mount's root, minus that cgroup's usage, its inactive page cache
 * counted as free. A container often sees its own cgroup as the mount's
 * root while /proc/self/cgroup names the host's path, so the path is tried
 * whole, then without its leading components. */
static void cgroup_room(const char *root, pinio_memavail *m)
{
    char path[MEM_PATH];
    const cg_files *cg = cgroup_of(root, path, sizeof(path));
    if (!cg)
        return;
    const char *sub = path;
    char dir[2 * MEM_PATH], file[2 * MEM_PATH + 64];
    for (;;) {
        snprintf(dir, sizeof(dir), "%s%s", cg->mount, sub);
        snprintf(file, sizeof(file), "%s%s/%s", root, dir, cg->limit);
        if (access(file, F_OK) == 0 || !*sub)
            break;
        const char *next = strchr(sub + 1, '/');
        sub = next ? next : "";
    }
    size_t mount_len = strlen(cg->mount);
    for (;;) {
        snprintf(file, sizeof(file), "%s/%s", dir, cg->limit);
        uint64_t l = read_u64(root, file);
        if (l != PINIO_UNLIMITED && l < m->cgroup_limit) {
            snprintf(file, sizeof(file), "%s/%s", dir, cg->usage);
            uint64_t u = read_u64(root, file);
            snprintf(file, sizeof(file), "%s/memory.stat", dir);
            uint64_t cache = stat_key(root, file, cg->inactive, 1);
            u = u == PINIO_UNLIMITED ? 0 : u - (cache < u ? cache : u);
            m->cgroup_limit = l;
            m->cgroup = u >= l ? 0 : l - u;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < mount_len)
            break;
        *slash = '\0';
    }
    m->source = cg == &CG_V1 ? "cgroup v1 memory.limit_in_bytes" : "cgroup v2 memory.max";
}

int pinio_mem_available(const char *root, pinio_memavail *out)
{
    if (!out)
        return -EINVAL;
    if (!root || strcmp(root, "/") == 0)
        root = "";
    *out = (pinio_memavail){ .meminfo = PINIO_UNLIMITED, .cgroup = PINIO_UNLIMITED,
                             .cgroup_limit = PINIO_UNLIMITED };
    uint64_t b = stat_key(root, "/proc/meminfo", "MemAvailable", 1024);
    if (b)
        out->meminfo = b;
    cgroup_room(root, out);
    const char *cg = out->source;
    out->bytes = out->meminfo;
    out->source = "MemAvailable";
    if (out->cgroup < out->bytes) {
        out->bytes = out->cgroup;
        out->source = cg;
    }
    return 0;
}

int pinio__mem_check(uint64_t need, const char *what, const char *advice, pinio_diag *diag)
{
    pinio_memavail ma;
    if (pinio_mem_available(NULL, &ma) != 0 || need <= ma.bytes)
        return 0;
    pinio_diag_set(diag, -ENOMEM, "%s needs %llu bytes but only %llu are available (%s): %s",
                   what, (unsigned long long)need, (unsigned long long)ma.bytes, ma.source,
                   advice);
    return -ENOMEM;
}

/* ---- file system, block queue, huge pages -------------------------------- */

/* statfs magics (linux/magic.h; ZFS, GPFS, Lustre, BeeGFS and 9p are not
 * there: out-of-tree or spelled in their own headers). */
static const struct fs_kind {
    uint64_t magic;
    const char *name;
    bool memory, network;
} fs_kinds[] = {
    { 0xEF53, "ext4", false, false },      { 0x58465342, "xfs", false, false },
    { 0x9123683E, "btrfs", false, false }, { 0xF2F52010, "f2fs", false, false },
    { 0x2fc12fc1, "zfs", false, false },   { 0x01021994, "tmpfs", true, false },
    { 0x858458f6, "ramfs", true, false },  { 0x958458f6, "hugetlbfs", true, false },
    { 0x794c7630, "overlay", false, false }, { 0x6969, "nfs", false, true },
    { 0xFF534D42, "cifs", false, true },   { 0xFE534D42, "smb2", false, true },
    { 0x01021997, "9p", false, true },     { 0x00c36400, "ceph", false, true },
    { 0x0BD00BD0, "lustre", false, true }, { 0x47504653, "gpfs", false, true },
    { 0x19830326, "beegfs", false, true }, { 0x65735546, "fuse", false, true },
    { 0x20030528, "orangefs", false, true }, { 0x6B414653, "afs", false, true },
    { 0x2011BAB0, "exfat", false, false }, { 0x4d44, "vfat", false, false },
    { 0x73717368, "squashfs", false, false }, { 0xE0F5E1E2, "erofs", false, false },
};

static void fs_of(const struct statfs *sf, pinio_fs *out)
{
    pinio_fs r = { .magic = (uint64_t)(unsigned long)sf->f_type };
    snprintf(r.name, sizeof(r.name), "unknown");
    for (size_t i = 0; i < sizeof(fs_kinds) / sizeof(fs_kinds[0]); i++)
        if (fs_kinds[i].magic == (r.magic & 0xffffffffu)) {
            snprintf(r.name, sizeof(r.name), "%s", fs_kinds[i].name);
            r.memory = fs_kinds[i].memory;
            r.network = fs_kinds[i].network;
        }
    *out = r;
}

int pinio_fs_probe(const char *path, pinio_fs *out)
{
    struct statfs sf;
    if (!path || !out)
        return -EINVAL;
    if (statfs(path, &sf) != 0)
        return -errno;
    fs_of(&sf, out);
    return 0;
}

int pinio__fs_probe_fd(int fd, pinio_fs *out)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return -errno;
    fs_of(&sf, out);
    return 0;
}

/* Copies what fits of `src`, cut (not an error: names here are short). */
static void copy_cut(char *dst, size_t n, const char *src)
{
    size_t l = strnlen(src, n - 1);
    memcpy(dst, src, l);
    dst[l] = '\0';
}

/* One sysfs attribute: its first line, trailing blanks cut; "" if absent. */
static void read_attr(const char *dir, const char *name, char *buf, size_t n)
{
    char p[2 * MEM_PATH];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    buf[0] = '\0';
    if (read_small_file(p, buf, n) < 0) {
        buf[0] = '\0';
        return;
    }
    buf[strcspn(buf, "\n")] = '\0';
    for (size_t l = strlen(buf); l && (buf[l - 1] == ' ' || buf[l - 1] == '\t'); l--)
        buf[l - 1] = '\0';
}

static int64_t read_attr_i64(const char *dir, const char *name)
{
    char b[64], *end;
    read_attr(dir, name, b, sizeof(b));
    long long v = strtoll(b, &end, 10);
    return end == b ? -1 : (int64_t)v;
}

static void base_name(const char *dir, char *out, size_t n)
{
    const char *s = strrchr(dir, '/');
    copy_cut(out, n, s ? s + 1 : dir);
}

/* The first entry of dir/slaves by name (a dm/md member), or "" and 0. */
static unsigned first_member(const char *dir, char *first, size_t n)
{
    char p[2 * MEM_PATH];
    snprintf(p, sizeof(p), "%s/slaves", dir);
    first[0] = '\0';
    DIR *d = opendir(p);
    if (!d)
        return 0;
    unsigned count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        count++;
        if (!first[0] || strcmp(e->d_name, first) < 0)
            copy_cut(first, n, e->d_name);
    }
    closedir(d);
    return count;
}

int pinio_block_queue_probe(const char *sysfs_root, unsigned major, unsigned minor,
                            pinio_block_queue *out)
{
    if (!out)
        return -EINVAL;
    char link[MEM_PATH], dir[MEM_PATH];
    snprintf(link, sizeof(link), "%s/dev/block/%u:%u", sysfs_root ? sysfs_root : "/sys", major,
             minor);
    if (!realpath(link, dir))
        return -ENODEV;
    pinio_block_queue q = { .nr_requests = -1, .max_sectors_kb = -1, .max_hw_sectors_kb = -1,
                            .logical_block_size = -1, .physical_block_size = -1,
                            .read_ahead_kb = -1, .rotational = -1, .io_poll = -1 };
    base_name(dir, q.device, sizeof(q.device));
    /* A partition, and the members of a dm/md device, have no queue of
     * their own that says anything about the hardware (dm's says
     * "none"): the disk underneath does. */
    for (int depth = 0;; depth++) {
        char p[2 * MEM_PATH], member[256];
        snprintf(p, sizeof(p), "%s/partition", dir);
        if (access(p, F_OK) == 0) {
            char *slash = strrchr(dir, '/');
            if (slash && slash != dir)
                *slash = '\0';
        }
        unsigned m = first_member(dir, member, sizeof(member));
        if (!m)
            break;
        if (depth == 0)
            q.members = m;
        if (depth >= 16)
            return -ELOOP;
        snprintf(p, sizeof(p), "%s/slaves/%s", dir, member);
        if (!realpath(p, dir))
            return -ENODEV;
    }
    base_name(dir, q.disk, sizeof(q.disk));
    char qdir[MEM_PATH + 16], sched[256];
    snprintf(qdir, sizeof(qdir), "%s/queue", dir);
    /* "mq-deadline kyber [none]": the active one is in brackets. */
    read_attr(qdir, "scheduler", sched, sizeof(sched));
    char *l = strchr(sched, '['), *r = l ? strchr(l, ']') : NULL;
    if (l && r) {
        *r = '\0';
        copy_cut(q.scheduler, sizeof(q.scheduler), l + 1);
    } else
        copy_cut(q.scheduler, sizeof(q.scheduler), sched);
    q.nr_requests = read_attr_i64(qdir, "nr_requests");
    q.max_sectors_kb = read_attr_i64(qdir, "max_sectors_kb");
    q.max_hw_sectors_kb = read_attr_i64(qdir, "max_hw_sectors_kb");
    q.logical_block_size = read_attr_i64(qdir, "logical_block_size");
    q.physical_block_size = read_attr_i64(qdir, "physical_block_size");
    q.read_ahead_kb = read_attr_i64(qdir, "read_ahead_kb");
    q.rotational = (int)read_attr_i64(qdir, "rotational");
    q.io_poll = (int)read_attr_i64(qdir, "io_poll");
    read_attr(dir, "device/model", q.model, sizeof(q.model));
    *out = q;
    return 0;
}

int pinio_hugepages_probe(const char *root, pinio_hugepages *out)
{
    if (!out)
        return -EINVAL;
    if (!root || strcmp(root, "/") == 0)
        root = "";
    *out = (pinio_hugepages){ .total = -1, .free = -1 };
    char p[MEM_PATH + 64], buf[256];
    snprintf(p, sizeof(p), "%s/proc/meminfo", root);
    FILE *f = fopen(p, "re");
    while (f && fgets(buf, sizeof(buf), f)) {
        unsigned long long v;
        if (sscanf(buf, "HugePages_Total: %llu", &v) == 1)
            out->total = (int64_t)v;
        else if (sscanf(buf, "HugePages_Free: %llu", &v) == 1)
            out->free = (int64_t)v;
        else if (sscanf(buf, "Hugepagesize: %llu", &v) == 1)
            out->page_bytes = (uint64_t)v * 1024;
    }
    if (f)
        fclose(f);
    /* The active mode is the bracketed word: "always [madvise] never". */
    static const char *const files[] = { "enabled", "defrag" };
    for (int i = 0; i < 2; i++) {
        char *dst = i ? out->thp_defrag : out->thp_enabled;
        snprintf(p, sizeof(p), "%s/sys/kernel/mm/transparent_hugepage", root);
        read_attr(p, files[i], buf, sizeof(buf));
        char *l = strchr(buf, '['), *r = l ? strchr(l, ']') : NULL;
        if (l && r && (size_t)(r - l - 1) < sizeof(out->thp_enabled))
            snprintf(dst, sizeof(out->thp_enabled), "%.*s", (int)(r - l - 1), l + 1);
    }
    return 0;
}
