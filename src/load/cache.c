/*
 * The page-cache policy of a plan: which files are read through the page
 * cache (hot) and which with O_DIRECT (cold), and why, decided before any
 * ring exists so that a cold drop is real.
 */
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/vfs.h>

#include "pinio/sys.h"
#include "src/load/plan_internal.h"

/* A file whose data section is at least this cached is read buffered: the
 * page cache serves it at memory speed, roughly 10x O_DIRECT from a virtual
 * disk (PERFORMANCE.md), and O_DIRECT would bypass those pages. */
#define HOT_FRACTION 0.9

/* A file of tmpfs or ramfs is its page cache: --cache cold has nothing to
 * drop there (DONTNEED is a no-op), and saying "cache dropped" would claim
 * a cold read that never happens. */
static bool in_memory_fs(int fd)
{
    struct statfs sf;
    return fstatfs(fd, &sf) == 0 &&
           (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

void pinio__cache_decide(pinio_plan *p)
{
    const pinio_plan_opts *o = &p->opts;
    for (size_t i = 0; i < p->nfiles; i++) {
        pinio__pfile *f = &p->files[i];
        bool hot = false;
        f->why[0] = '\0';
        if (f->pub.object) { /* no page cache between us and a store */
            snprintf(f->why, sizeof(f->why), "object storage: HTTP range reads");
            continue;
        }
        if (o->direct == PINIO_DIRECT_OFF || o->cache == PINIO_CACHE_HOT) {
            hot = true;
            snprintf(f->why, sizeof(f->why), "%s",
                     o->cache == PINIO_CACHE_HOT ? "--cache hot" : "O_DIRECT off");
        } else if (o->cache == PINIO_CACHE_COLD) {
            snprintf(f->why, sizeof(f->why), "%s",
                     in_memory_fs(f->fd) ? "tmpfs: the file lives in memory, no cache to drop"
                                         : "cache dropped");
        } else if (o->direct == PINIO_DIRECT_AUTO) {
            pinio_residency res;
            if (pinio_file_residency(f->fd, pinio_st_data_offset(f->st), 0, &res) == 0 &&
                res.range_bytes) {
                double frac = (double)res.cached_bytes / (double)res.range_bytes;
                hot = frac >= HOT_FRACTION;
                snprintf(f->why, sizeof(f->why), "%.0f%% in page cache (%s)", frac * 100.0,
                         res.method == PINIO_RESIDENCY_CACHESTAT ? "cachestat" : "mincore");
            }
        }
        f->pub.hot = hot;
        p->info.files_hot += hot;
    }
}

int pinio_plan_drop_cache(pinio_plan *p, double *seconds, pinio_diag *diag)
{
    double t0 = pinio__now_s();
    int rc = 0;
    for (size_t i = 0; i < p->nfiles && rc == 0; i++) {
        if (p->files[i].pub.object || in_memory_fs(p->files[i].fd))
            continue;
        rc = pinio_file_drop_cache(p->files[i].fd);
        if (rc < 0) {
            pinio_diag_set_at(diag, rc, p->files[i].path, PINIO_DIAG_NO_OFFSET,
                              "cannot drop cached pages: %s", pinio_strerror(rc));
            pinio_diag_set_index(diag, i);
        }
    }
    if (seconds)
        *seconds = pinio__now_s() - t0;
    return rc;
}
