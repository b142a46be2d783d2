/*
 * System facts: kernel, memlock, THP and page-cache residency.
 *
 * Why each probe asks the kernel rather than trusting headers: pinio is built
 * on one machine and run on others (cluster images are old, kernels newer),
 * so cachestat(2) and CAP_IPC_LOCK are checked by calling them.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pinio/sys.h"
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
