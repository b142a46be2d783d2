/* Files of a ring: opening them (descriptors, DIO alignment probing, a
 * file-table slot); ring.c closes them, as the ring owns their list. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ring_internal.h"

/* Bookworm's linux-libc-dev (6.1) has these; older headers do not. */
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#define PINIO_NO_STATX_DIO_FIELDS 1
#endif

static unsigned read_sysfs_uint(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned v = 0;
    if (fscanf(f, "%u", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

static bool pow2(unsigned v)
{
    return v && !(v & (v - 1));
}

/* statx DIOALIGN (6.1+) is definitive where the file system reports it. Else
 * the logical block size of the device: BLKSSZGET for a block device, the
 * sysfs queue attribute of the file system's device (or of its parent when the
 * device is a partition). tmpfs has no device and no DIOALIGN: page size. */
static void probe_align(pinio_ring_file *f, const struct statx *sx, bool is_blk, int fd)
{
#ifndef PINIO_NO_STATX_DIO_FIELDS
    if ((sx->stx_mask & STATX_DIOALIGN) && sx->stx_dio_offset_align) {
        f->mem_align = sx->stx_dio_mem_align;
        f->off_align = sx->stx_dio_offset_align;
        f->align_source = "statx";
        return;
    }
#endif
    unsigned lbs = 0;
    if (is_blk) {
        int v = 0;
        if (ioctl(fd, BLKSSZGET, &v) == 0 && v > 0)
            lbs = (unsigned)v;
        f->align_source = "blkssz";
    } else if (sx->stx_dev_major) {
        char p[96];
        snprintf(p, sizeof p, "/sys/dev/block/%u:%u/queue/logical_block_size", sx->stx_dev_major,
                 sx->stx_dev_minor);
        lbs = read_sysfs_uint(p);
        if (!lbs) {
            snprintf(p, sizeof p, "/sys/dev/block/%u:%u/../queue/logical_block_size",
                     sx->stx_dev_major, sx->stx_dev_minor);
            lbs = read_sysfs_uint(p);
        }
        f->align_source = "sysfs";
    }
    if (!pow2(lbs)) {
        lbs = 4096;
        f->align_source = "default";
    }
    f->mem_align = f->off_align = lbs;
}

static int slot_get(pinio_ring *r, int fd)
{
    if (!r->files_registered)
        return -1;
    unsigned n = r->opts.max_files * 2;
    for (unsigned i = 0; i < n; i++)
        if (!r->file_slot_used[i]) {
            if (io_uring_register_files_update(&r->ring, i, &fd, 1) != 1)
                return -1; /* plain descriptor then */
            r->file_slot_used[i] = 1;
            return (int)i;
        }
    return -1;
}

static int clear_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int pinio_ring_file_open(pinio_ring *r, const char *path, pinio_ring_file **out, pinio_diag *diag)
{
    if (!r || !path || !out)
        return -EINVAL;
    /* Off the owner thread the file-table update would fail (-EEXIST) and the
     * file would silently fall back to plain descriptors, then fail at read. */
    int ret = pinio__ring_check_thread(r, path, diag);
    if (ret)
        return ret;
    pinio_ring_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return -ENOMEM;
    }
    f->ring = r;
    f->fd_direct = f->fd_buf = f->fix_direct = f->fix_buf = -1;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
     * below). Cleared once the file is known to be regular or a block
     * device: io_uring honours it on reads, and would hand -EAGAIN back for
     * a buffered read that has to wait for the disk instead of waiting. */
    f->fd_buf = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f->fd_buf < 0) {
        ret = -errno;
        pinio_diag_set(diag, ret, "%s: open failed: %s", path, pinio_strerror(ret));
        goto fail;
    }
    struct statx sx;
    if (statx(f->fd_buf, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_DIOALIGN, &sx)) {
        ret = -errno;
        pinio_diag_set(diag, ret, "%s: statx failed: %s", path, pinio_strerror(ret));
        goto fail;
    }
    bool is_blk = S_ISBLK(sx.stx_mode);
    if (!S_ISREG(sx.stx_mode) && !is_blk) {
        ret = S_ISDIR(sx.stx_mode) ? -EISDIR : -EINVAL;
        pinio_diag_set(diag, ret, "%s: not a regular file or block device", path);
        goto fail;
    }
    if ((ret = clear_nonblock(f->fd_buf)) < 0) {
        pinio_diag_set(diag, ret, "%s: fcntl failed: %s", path, pinio_strerror(ret));
        goto fail;
    }
    f->size = sx.stx_size;
    if (is_blk) {
        uint64_t sz = 0;
        if (ioctl(f->fd_buf, BLKGETSIZE64, &sz) == 0)
            f->size = sz;
    }

    pinio_direct_policy pol = r->opts.direct;
    bool want = pol != PINIO_DIRECT_OFF &&
                !(pol == PINIO_DIRECT_AUTO && r->opts.backend == PINIO_BACKEND_BUFFERED);
    if (!want) {
        snprintf(f->reason, sizeof f->reason, "buffered by policy");
    } else {
        probe_align(f, &sx, is_blk, f->fd_buf);
#ifndef PINIO_NO_STATX_DIO_FIELDS
        if ((sx.stx_mask & STATX_DIOALIGN) && !sx.stx_dio_offset_align) {
            /* statx says definitively: no direct I/O on this file. */
            f->direct_error = -EINVAL;
            snprintf(f->reason, sizeof f->reason, "statx: file system does not support O_DIRECT");
        }
#endif
        if (!f->direct_error && (f->off_align > r->stage_size || !pow2(f->mem_align))) {
            f->direct_error = -EINVAL;
            snprintf(f->reason, sizeof f->reason, "DIO alignment %u/%u not supported",
                     f->mem_align, f->off_align);
        }
        if (!f->direct_error) {
            /* The path again (O_DIRECT cannot be set on fd_buf without
             * changing its reads): the same care, and it must be the same
             * file, not whatever was renamed over the path meanwhile. */
            f->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
            struct stat a;
            if (f->fd_direct < 0) {
                f->direct_error = -errno;
                snprintf(f->reason, sizeof f->reason, "O_DIRECT refused at open: %s",
                         pinio_err_name(f->direct_error));
            } else if (fstat(f->fd_direct, &a) != 0 || major(a.st_dev) != sx.stx_dev_major ||
                       minor(a.st_dev) != sx.stx_dev_minor || a.st_ino != sx.stx_ino) {
                ret = PINIO_ECHANGED;
                pinio_diag_set(diag, ret, "%s: replaced while being opened", path);
                goto fail;
            } else if ((ret = clear_nonblock(f->fd_direct)) < 0) {
                pinio_diag_set(diag, ret, "%s: fcntl failed: %s", path, pinio_strerror(ret));
                goto fail;
            }
        }
        if (f->direct_error && pol == PINIO_DIRECT_ON) {
            ret = -EINVAL;
            pinio_diag_set(diag, ret, "%s: O_DIRECT required but unavailable (%s)", path,
                              f->reason);
            goto fail;
        }
        f->direct = !f->direct_error;
        if (f->direct)
            snprintf(f->reason, sizeof f->reason, "O_DIRECT, alignment from %s", f->align_source);
    }
    if (!f->direct) {
        f->mem_align = f->off_align = 1;
        f->align_source = "buffered";
    }
    if (r->have_ring) {
        if (f->fd_direct >= 0)
            f->fix_direct = slot_get(r, f->fd_direct);
        f->fix_buf = slot_get(r, f->fd_buf);
    }
    f->next = r->files;
    r->files = f;
    *out = f;
    return 0;
fail:
    pinio_ring_file_close(f); /* not linked yet: only closes and frees */
    return ret;
}

void pinio_ring_file_get_info(const pinio_ring_file *f, pinio_ring_file_info *info)
{
    memset(info, 0, sizeof *info);
    info->size = f->size;
    info->direct = f->direct;
    info->mem_align = f->mem_align;
    info->offset_align = f->off_align;
    info->align_source = f->align_source;
    info->direct_error = f->direct_error;
    const pinio_ring *r = f->ring;
    if (r->backend == PINIO_BACKEND_PREAD)
        info->backend = PINIO_BACKEND_PREAD;
    else if (!f->direct)
        info->backend = PINIO_BACKEND_BUFFERED;
    else
        info->backend = PINIO_BACKEND_DIRECT;
    snprintf(info->reason, sizeof info->reason, "%s", f->reason);
}
