/* slowfs: a read-only FUSE passthrough over a directory that answers every
 * read request only after a fixed delay, so that a local disk behaves like
 * latency-bound storage (a network or parallel file system): one request at
 * a time is slow, many in flight overlap. bench/load_vs_peers PART=slow
 * mounts it to compare a mapped load's fill at depth with mmap faulting.
 *
 *   slowfs BACKING_DIR MOUNTPOINT [FUSE options, e.g. -f -o max_threads=16]
 *   SLOWFS_DELAY_US   delay per read request in microseconds (default 500)
 *   SLOWFS_MAX_BACKGROUND  the mount's max_background (default: the kernel's,
 *                     12): asynchronous requests the kernel sends at once
 *   SLOWFS_BW_MBPS    bandwidth shared by all requests, in MB/s (default 0:
 *                     none): a request of n bytes takes its turn on one
 *                     pipe of that rate (a shared link or a server's
 *                     disks), after its delay, which requests still
 *                     overlap (bench/shared_fs)
 *
 * Multithreaded (libfuse's default loop, up to max_threads): requests in
 * flight sleep in parallel, as they would wait on a network. The kernel's page cache is
 * kept across opens (kernel_cache), so "cold" is the caller's business
 * (posix_fadvise DONTNEED through the mount), as on a local disk.
 *
 * At unmount it prints to stderr the number of read requests and their
 * mean size (the kernel's readahead or FUSE's max_read decides the sizes,
 * which decide what the delay costs), the most requests inside the daemon
 * at once (how deep the callers' reads reach it through FUSE: the kernel
 * sends at most max_background, 12 by default, of a mount's asynchronous
 * requests at a time), its CPU seconds, and the time from the first
 * request to the last reply (the rate while serving, apart from the
 * callers' own start). */
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static const char *backing;
static long delay_us = 500;
static double bw_bps;                 /* bytes per second, 0 = no cap */
static _Atomic unsigned long long nreads, nbytes;
/* Requests inside sf_read now, and the most at once: how deep the callers'
 * reads reach the file system through FUSE (bench/shared_fs prints it). */
static _Atomic unsigned inflight, inflight_max;
/* The first request's arrival and the last reply (CLOCK_MONOTONIC s, under
 * pipe_mu): the rate while serving, apart from the callers' own setup. */
static double first_req, last_reply;
/* The pipe: when it is free next (CLOCK_MONOTONIC seconds). */
static pthread_mutex_t pipe_mu = PTHREAD_MUTEX_INITIALIZER;
static double pipe_free;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    double d = t - now_s();
    if (d <= 0)
        return;
    struct timespec ts = { (time_t)d, (long)((d - (double)(time_t)d) * 1e9) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* n bytes through the shared pipe: each request reserves the next n /
 * rate seconds of it, so requests in flight together never pass more than
 * the rate, whatever their number (a token bucket without a burst). */
static void pipe_take(size_t n)
{
    if (bw_bps <= 0)
        return;
    pthread_mutex_lock(&pipe_mu);
    double t = now_s();
    double start = pipe_free > t ? pipe_free : t;
    pipe_free = start + (double)n / bw_bps;
    double end = pipe_free;
    pthread_mutex_unlock(&pipe_mu);
    sleep_until(end);
}

static int full(const char *path, char *out)
{
    int n = snprintf(out, PATH_MAX, "%s%s", backing, path);
    return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static void *sf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    /* The kernel sends a mount's asynchronous requests (readahead, O_DIRECT
     * through io_uring) max_background at a time, 12 by default; a daemon
     * may raise it (SLOWFS_MAX_BACKGROUND) to see whether that limit is
     * what bounds the callers' depth. */
    const char *mb = getenv("SLOWFS_MAX_BACKGROUND");
    if (mb && atoi(mb) > 0) {
        conn->max_background = (unsigned)atoi(mb);
        conn->congestion_threshold = conn->max_background * 3 / 4;
    }
    cfg->kernel_cache = 1;
    cfg->use_ino = 1;
    /* Sizes asked for every time (no delay on them): a file changed in the
     * backing directory is seen at once, as a load's change check needs. */
    cfg->attr_timeout = 0;
    return NULL;
}

static void sf_destroy(void *p)
{
    (void)p;
    unsigned long long n = nreads, b = nbytes;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    fprintf(stderr, "slowfs: %llu read requests, %llu bytes, %.0f bytes per request, "
            "%u in flight at most, %.3f s CPU, %.3f s from the first request to the last "
            "reply\n", n, b, n ? (double)b / (double)n : 0.0, (unsigned)inflight_max, cpu,
            last_reply > first_req ? last_reply - first_req : 0.0);
}

static int sf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    char p[PATH_MAX];
    if (fi)
        return fstat((int)fi->fh, st) < 0 ? -errno : 0;
    int rc = full(path, p);
    return rc ? rc : lstat(p, st) < 0 ? -errno : 0;
}

static int sf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags fl)
{
    (void)off, (void)fi, (void)fl;
    char p[PATH_MAX];
    int rc = full(path, p);
    if (rc)
        return rc;
    DIR *d = opendir(p);
    if (!d)
        return -errno;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st = { .st_ino = e->d_ino, .st_mode = (mode_t)e->d_type << 12 };
        if (fill(buf, e->d_name, &st, 0, 0))
            break;
    }
    closedir(d);
    return 0;
}

static int sf_open(const char *path, struct fuse_file_info *fi)
{
    if ((fi->flags & O_ACCMODE) != O_RDONLY)
        return -EROFS;
    char p[PATH_MAX];
    int rc = full(path, p);
    if (rc)
        return rc;
    /* O_DIRECT is dropped: the delay, not the backing disk's cache state,
     * is what this file system emulates. */
    int fd = open(p, O_RDONLY);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int sf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    pthread_mutex_lock(&pipe_mu);
    if (first_req == 0)
        first_req = now_s();
    pthread_mutex_unlock(&pipe_mu);
    unsigned now = ++inflight, seen = inflight_max;
    while (now > seen && !atomic_compare_exchange_weak(&inflight_max, &seen, now))
        ;
    struct timespec ts = { delay_us / 1000000, (delay_us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    ssize_t n = pread((int)fi->fh, buf, size, off);
    if (n < 0) {
        int e = errno;
        inflight--;
        return -e;
    }
    pipe_take((size_t)n);
    pthread_mutex_lock(&pipe_mu);
    last_reply = now_s();
    pthread_mutex_unlock(&pipe_mu);
    inflight--;
    nreads++;
    nbytes += (unsigned long long)n;
    return (int)n;
}

static int sf_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int sf_statfs(const char *path, struct statvfs *sv)
{
    char p[PATH_MAX];
    int rc = full(path, p);
    return rc ? rc : statvfs(p, sv) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
    .init = sf_init,
    .destroy = sf_destroy,
    .getattr = sf_getattr,
    .readdir = sf_readdir,
    .open = sf_open,
    .read = sf_read,
    .release = sf_release,
    .statfs = sf_statfs,
};

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: slowfs BACKING_DIR MOUNTPOINT [FUSE options]\n");
        return 2;
    }
    static char real[PATH_MAX];
    if (!realpath(argv[1], real)) {
        fprintf(stderr, "slowfs: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    backing = real;
    const char *d = getenv("SLOWFS_DELAY_US");
    if (d)
        delay_us = strtol(d, NULL, 10);
    const char *bw = getenv("SLOWFS_BW_MBPS");
    if (bw)
        bw_bps = strtod(bw, NULL) * 1e6;
    /* libfuse parses the rest: the mount point and its own options. */
    argv[1] = argv[0];
    return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
