/*
 * Cold mapped files: whether their page cache is filled by readahead at
 * depth before the mapping's populate, and the fill itself.
 *
 * Why only on network and FUSE file systems (pinio_mapped_fill's AUTO
 * rule): the populate's fault readahead keeps one window in flight, so it
 * runs at one request's latency per window. On a local disk that is the
 * disk's speed already, and the populate builds large folios that a
 * separate fill does not (readahead(2) and fadvise allocate small ones, so
 * the populate after them maps 4 KiB pages: 0.13-0.25 s of page-table work
 * per 512 MiB). On storage where each request waits (a network, a FUSE
 * daemon) the fault path waits once per window while the storage could
 * serve many windows at once. Measured on a cold file (ext4: 512 MiB,
 * FUSE: 256 MiB), mapped and then every byte touched (Linux 6.18, shared
 * 2-CPU VM, ext4 on a virtio disk; doc/measurements.md has the runs):
 *
 *   ext4, read_ahead_kb 8192: populate alone 1.70-1.80 GB/s; readahead(2)
 *     per window, then populate 0.89-1.24; io_uring buffered 4 MiB reads at
 *     depth 8 into a reused buffer, then populate 1.17-1.43.
 *   ext4, read_ahead_kb 128: populate alone 0.62-0.94; readahead(2) per
 *     window 0.60-0.81; io_uring buffered reads 0.50-0.62.
 *   FUSE with 500 us per read request (bench/slowfs): populate alone
 *     0.33 GB/s; readahead(2) per 128 KiB window 1.28 (3.9x); the same as
 *     IORING_OP_FADVISE at depth 64, 1.28; io_uring buffered reads at depth
 *     8, 0.95 (2.9x, and a copy). pinio's load with this fill against
 *     mmap faulting there (bench/load_vs_peers PART=slow, 512 MiB, VM
 *     load 8-10): 2.87 (2.19-3.11) and 2.92 (2.09-3.33), 5 runs each.
 *
 * Hence readahead(2), one call per readahead window, from this thread: on
 * such file systems readahead is asynchronous (FUSE, NFS, Ceph and Lustre
 * send the requests and return), so the calls run ahead of the I/O and
 * the depth is the file system's own limit on requests in flight (FUSE's
 * max_background, NFS's slot table); the call blocks only when that is
 * full. A window, because the kernel clamps one readahead(2) to the file's
 * readahead window (force_page_cache_ra()): a larger call reads its first
 * window only. The fill is a hint: it reads through the descriptor, never
 * a mapped byte, stops quietly at the end of a truncated file, and its
 * failure leaves the populate to do the work; the populate and the
 * identity check after it decide the load's outcome as before.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "src/base/fs.h"
#include "src/load/load_internal.h"

/* The readahead window of the device `fd`'s file lives on, in bytes: what
 * one readahead(2) reads at most. 128 KiB (the kernel's default) when the
 * bdi does not say. */
static uint64_t ra_window(int fd)
{
    struct stat st;
    uint64_t kb = 128;
    char p[64];
    if (fstat(fd, &st) == 0) {
        snprintf(p, sizeof(p), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
                 minor(st.st_dev));
        FILE *f = fopen(p, "re");
        unsigned long long v;
        if (f && fscanf(f, "%llu", &v) == 1)
            kb = v;
        if (f)
            fclose(f);
    }
    return kb << 10;
}

void pinio__fill_decide(int fd, pinio_mapped_fill policy, pinio__fill *out)
{
    memset(out, 0, sizeof(*out));
    if (policy == PINIO_FILL_FAULT) {
        snprintf(out->why, sizeof(out->why), "mapped_fill FAULT");
        return;
    }
    /* Network and FUSE file systems: their requests wait on something
     * other than a local block device (pinio_fs.network). */
    pinio_fs kind;
    const char *fs = pinio__fs_probe_fd(fd, &kind) == 0 && kind.network ? kind.name : NULL;
    if (policy == PINIO_FILL_AUTO && !fs) {
        snprintf(out->why, sizeof(out->why), "a local file system");
        return;
    }
    out->window = ra_window(fd);
    if (!out->window) {
        snprintf(out->why, sizeof(out->why), "readahead disabled (read_ahead_kb 0)");
        return;
    }
    out->ahead = true;
    snprintf(out->why, sizeof(out->why), "%s, %llu KiB windows",
             fs ? fs : "mapped_fill AHEAD", (unsigned long long)(out->window >> 10));
}

void pinio__fill_run(int fd, uint64_t lo, uint64_t hi, const pinio__fill *f)
{
    for (uint64_t off = lo; f->ahead && off < hi; off += f->window)
        if (readahead(fd, (off_t)off, (size_t)(hi - off < f->window ? hi - off : f->window)) < 0)
            return; /* a hint refused: the populate reads it in */
}
