/*
 * Mapped mode: a file's selected range mapped read-only and shared, its
 * pages populated, tensors viewing the page cache with no copy. The mapping
 * is a refcounted view (munmap with the last reference), so tensors outlive
 * the checkpoint, and a rename or unlink of the path (the mapping holds the
 * inode).
 *
 * Never a SIGBUS in here: nothing below reads a mapped byte. MAP_POPULATE
 * stops quietly at the end of file where a load would fault, so a file
 * truncated since its header was validated only leaves pages unpopulated,
 * and the identity check after populating turns that into PINIO_ECHANGED
 * before any tensor is handed out. (verify.c hashes mapped files through
 * the descriptor for the same reason.)
 *
 * Cold files: the populate itself reads them in, by the fault path's
 * readahead, which on a local disk is the fastest way found to fill the
 * page cache for a mapping. A cold 256 MiB file, mapped and then every
 * page touched (Linux 6.18, shared 2-CPU VM, ext4, 3 runs each): MAP_POPULATE
 * alone 1.25-1.45 GB/s; POSIX_FADV_WILLNEED over the range first
 * 0.48-0.65 GB/s (the kernel clamps it to one readahead window, so the
 * populate read the rest); 4 threads of MADV_POPULATE_READ over 8 MiB
 * chunks 0.77-1.01 GB/s; 4 threads of 8 MiB buffered preads, then
 * populate, 0.36 GB/s. The fault path's readahead builds large folios,
 * which the others do not. Where each request waits on a network or a
 * FUSE daemon, the fault path's one window in flight is the limit, and
 * fill.c reads ahead at depth first (its comment has the rule and the
 * measurements). (Auto picks pinned mode, O_DIRECT into the arena, for
 * a cold file, unless fresh memory's first touch is slower than the
 * storage: modes.c.)
 */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "src/load/load_internal.h"

static void unmap_cb(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    munmap(ptr, len);
}

/* The file range the selected tensors of file `f` cover: [*lo, *hi). */
static bool tensor_range(const pinio_plan *plan, uint32_t f, uint64_t *lo, uint64_t *hi)
{
    bool any = false;
    for (size_t i = 0; i < plan->ntensors; i++) {
        const pinio_plan_tensor *t = &plan->tensors[i];
        if (t->file != f || !t->nbytes)
            continue;
        if (!any || t->file_offset < *lo)
            *lo = t->file_offset;
        if (!any || t->file_offset + t->nbytes > *hi)
            *hi = t->file_offset + t->nbytes;
        any = true;
    }
    return any;
}

static int map_one(pinio_plan *plan, uint32_t f, pinio__fmem *m, bool priv,
                   pinio_load_report *rep, pinio_diag *diag)
{
    pinio__pfile *pf = &plan->files[f];
    uint64_t lo = 0, hi = 0;
    if (!tensor_range(plan, f, &lo, &hi))
        return 0; /* nothing selected: no mapping */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    m->map_off = lo & ~(page - 1);
    size_t len = (size_t)(hi - m->map_off);
    double t0 = pinio__now_s();
    pinio__fill_run(pf->fd, m->map_off, hi, &m->fill); /* a no-op unless decided (cold files) */
    /* Private: populated read-only, then made writable, because populating
     * a writable private mapping breaks copy-on-write on every page (a copy
     * of the whole range) where read-only it maps the page-cache pages. */
    void *p = mmap(NULL, len, PROT_READ, (priv ? MAP_PRIVATE : MAP_SHARED) | MAP_POPULATE, pf->fd,
                   (off_t)m->map_off);
    if (!pf->pub.hot)
        rep->fill_seconds += pinio__now_s() - t0;
    if (p != MAP_FAILED && priv && mprotect(p, len, PROT_READ | PROT_WRITE) != 0) {
        int e = errno;
        munmap(p, len);
        p = MAP_FAILED;
        errno = e;
    }
    if (p == MAP_FAILED) {
        int e = -errno;
        pinio_diag_set_at(diag, e, pf->path, m->map_off, "cannot map %zu bytes: %s", len,
                          pinio_strerror(e));
        pinio_diag_set_index(diag, f);
        return e;
    }
    int rc = pinio_view_wrap(&m->map, p, len, unmap_cb, NULL, priv ? 0 : PINIO_VIEW_READONLY);
    if (rc < 0) {
        munmap(p, len);
        return rc;
    }
    rep->mapped_bytes += len;
    /* The populate ran against whatever the file is now: only a file still
     * of the validated size and times has every page behind the mapping. */
    return pinio__plan_check_unchanged(plan, f, diag);
}

int pinio__map_files(pinio_plan *plan, pinio__fmem *fm, bool lock, bool priv, pinio_load_report *rep,
                     pinio_diag *diag)
{
    int rc = 0;
    uint64_t locked = 0;
    for (size_t f = 0; f < plan->nfiles && rc == 0; f++)
        if (fm[f].mode == PINIO_MEMORY_MAPPED)
            rc = map_one(plan, (uint32_t)f, &fm[f], priv, rep, diag);
    if (rc == 0 && priv && rep->mapped_bytes)
        pinio__appendf(rep->modes, sizeof(rep->modes), "; mapped private (copy-on-write)%s",
                       lock ? "; mapped pages not locked: the kernel locks a writable private "
                              "mapping by copying every page" : "");
    /* Never mlock a private one: locking (or later making writable) a
     * locked private mapping breaks copy-on-write on every page, a copy of
     * the whole range, which is what mapping it was to avoid. */
    if (rc == 0 && lock && !priv && rep->mapped_bytes) {
        pinio_sysinfo si;
        pinio_sys_probe(&si);
        bool room = si.registrable == PINIO_UNLIMITED || si.registrable >= rep->mapped_bytes;
        for (size_t f = 0; room && f < plan->nfiles; f++)
            if (fm[f].map.len && mlock(fm[f].map.ptr, fm[f].map.len) == 0)
                locked += fm[f].map.len;
        pinio__appendf(rep->modes, sizeof(rep->modes), "; mapped pages %s",
                       locked == rep->mapped_bytes ? "locked (mlock)"
                       : room ? "not all locked: mlock failed"
                              : "not locked: RLIMIT_MEMLOCK too small");
    }
    return rc;
}

void pinio__fmem_release(pinio__fmem *fm, size_t n)
{
    for (size_t f = 0; fm && f < n; f++)
        pinio_view_release(&fm[f].map);
}
