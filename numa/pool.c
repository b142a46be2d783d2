/*
 * The pinned pool.
 *
 * Ownership graph: the pool handle and every live slab each hold one
 * reference on the pool state (`struct pinio_pool`, counted in `refs` under
 * `lock`); the pool holds one view (`whole`) on the slab it is filling;
 * every region is a slice of that view. A slab is freed by its view's free
 * callback, so "last region released" and "pool destroyed" can happen in
 * either order, on any thread. The state is freed with its last reference.
 *
 * Locking: one mutex guards the slab list, the counters and the current slab.
 * A view release that may drop a slab's last reference must happen outside
 * the mutex, because the free callback takes it.
 *
 * Placement order (why): pinned pages cannot migrate, so the NUMA policy must
 * be on the VMA before anything faults the pages in. MAP_POPULATE would fault
 * them before mbind, hence mmap -> mbind -> madvise -> populate -> register.
 * Each step is a primitive of numa/prim.h (system calls, libnuma's numaif.h
 * wrappers for the policy ones; not libnuma's numa_* layer, which may print
 * to stderr, and a library must not).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/pool.h"
#include "pinio/sys.h"
#include "src/base/opts.h"
#include "numa/numa_internal.h"
#include "numa/prim.h"

/* Slabs start on a 2 MiB boundary and are multiples of 2 MiB so that THP can
 * back all of them and the memlock charge (whole folios) equals their size. */
#define SLAB_ALIGN PINIO__PRIM_HUGE_SIZE

/* Pages whose node is checked per slab: first, last and evenly between. */
#define VERIFY_SAMPLES 16

struct slab {
    struct pinio_pool *pool;
    struct slab *prev, *next;
    uint8_t *base;
    size_t size;
    size_t used;        /* bump pointer; guarded by pool->lock */
    pinio_view whole;   /* the pool's reference while this is the current slab */
    pinio_pool_reg_state reg;
    int slot;
    int reg_error;
    pinio_pool_verify verify;
    int found_node;
    bool huge_pages;
};

struct pinio_pool {
    pthread_mutex_t lock;
    size_t refs;          /* handle (while not destroyed) + live slabs */
    bool has_registrar;
    pinio_pool_registrar registrar;
    struct slab *slabs;   /* live slabs, newest first */
    struct slab *current; /* slab being filled; `whole` holds the pool's reference */
    int node;             /* PINIO_NODE_UNKNOWN: no policy */
    bool strict, huge_pages, prefault;
    size_t slab_size;
    pinio_pool_stats stats;
};

void pinio_pool_opts_init(pinio_pool_opts *opts, size_t size)
{
    pinio_pool_opts d;
    memset(&d, 0, sizeof(d));
    if (!opts)
        return;
    d.placement = PINIO_POOL_ANY;
    d.node = PINIO_NODE_UNKNOWN;
    d.slab_size = PINIO_POOL_SLAB_DEFAULT;
    d.huge_pages = true;
    d.prefault = true;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

const char *pinio_pool_verify_name(pinio_pool_verify v)
{
    switch (v) {
    case PINIO_POOL_VERIFY_NOT_ASKED:
        return "not asked";
    case PINIO_POOL_VERIFY_OK:
        return "ok";
    case PINIO_POOL_VERIFY_MISPLACED:
        return "misplaced";
    case PINIO_POOL_VERIFY_NOT_PRESENT:
        return "not present";
    case PINIO_POOL_VERIFY_UNAVAILABLE:
        return "unavailable";
    }
    return "unknown";
}

/* ---- pool creation ----------------------------------------------------- */

static int resolve_node(const pinio_pool_opts *o, int *node, char *note, size_t note_size,
                        pinio_diag *diag)
{
    int rc, n = PINIO_NODE_UNKNOWN;
    switch (o->placement) {
    case PINIO_POOL_ANY:
        snprintf(note, note_size, "any node (no policy; pages land where first touched)");
        break;
    case PINIO_POOL_NODE:
        n = o->node;
        snprintf(note, note_size, "node %d (asked for)", n);
        break;
    case PINIO_POOL_FILE_NODE:
        if (!o->file) {
            pinio_diag_set(diag, -EINVAL, "pool: placement FILE_NODE needs options.file");
            return -EINVAL;
        }
        rc = pinio_topo_node_of_file(o->topo, o->file, &n, diag);
        if (rc < 0)
            return rc;
        if (n != PINIO_NODE_UNKNOWN) {
            snprintf(note, note_size, "node %d (device of %s)", n, o->file);
            break;
        }
        rc = pinio_topo_current_node(o->topo, &n);
        if (rc < 0)
            return rc;
        snprintf(note, note_size,
                 "node %d (calling thread's: %s has no block device or sysfs gives it no node)",
                 n, o->file);
        break;
    case PINIO_POOL_LOCAL:
        rc = pinio_topo_current_node(o->topo, &n);
        if (rc < 0)
            return rc;
        snprintf(note, note_size, n == PINIO_NODE_UNKNOWN
                                      ? "any node (calling thread's node unknown)"
                                      : "node %d (calling thread's)",
                 n);
        break;
    default:
        pinio_diag_set(diag, -EINVAL, "pool: unknown placement %d", (int)o->placement);
        return -EINVAL;
    }
    if (n != PINIO_NODE_UNKNOWN && (n < 0 || !pinio__prim_node_exists(n))) {
        pinio_diag_set(diag, -EINVAL, "pool: node %d does not exist on this system", n);
        return -EINVAL;
    }
    *node = n;
    return 0;
}

int pinio_pool_create(pinio_pool **out, const pinio_pool_opts *opts, pinio_diag *diag)
{
    if (!out)
        return -EINVAL;
    pinio_pool_opts def;
    pinio_pool_opts_default(&def);
    int rc = pinio__opts_copy(&def, sizeof(def), opts, "pinio_pool options", diag);
    if (rc < 0)
        return rc;
    opts = &def;
    if (!opts->registrar.reg != !opts->registrar.unreg) {
        pinio_diag_set(diag, -EINVAL, "pool: registrar needs both reg and unreg");
        return -EINVAL;
    }
    pinio_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    rc = resolve_node(opts, &p->node, p->stats.placement, sizeof(p->stats.placement), diag);
    if (rc < 0) {
        free(p);
        return rc;
    }
    rc = pthread_mutex_init(&p->lock, NULL);
    if (rc) {
        free(p);
        return -rc;
    }
    p->refs = 1;
    p->has_registrar = opts->registrar.reg != NULL;
    p->registrar = opts->registrar;
    p->strict = opts->strict;
    p->huge_pages = opts->huge_pages;
    p->prefault = opts->prefault;
    size_t ss = opts->slab_size ? opts->slab_size : PINIO_POOL_SLAB_DEFAULT;
    if (ss > PINIO_POOL_SLAB_MAX)
        ss = PINIO_POOL_SLAB_MAX;
    p->slab_size = (ss + SLAB_ALIGN - 1) & ~(SLAB_ALIGN - 1);
    p->stats.node = p->node;
    *out = p;
    return 0;
}

/* ---- slabs --------------------------------------------------------------- */

/* Drops one reference on the pool state; frees it with the last. Called
 * without the lock held. */
static void pool_unref(pinio_pool *p)
{
    pthread_mutex_lock(&p->lock);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (last) {
        pthread_mutex_destroy(&p->lock);
        free(p);
    }
}

/* Caller holds the lock. */
static void slab_unregister_locked(pinio_pool *p, struct slab *s)
{
    if (s->reg != PINIO_POOL_REG_OK)
        return;
    /* Unregister explicitly and before munmap: io_uring drops its page pins
     * (and the memlock charge) lazily at ring teardown otherwise, and the
     * next registration of the same user fails with ENOMEM meanwhile. */
    p->registrar.unreg(p->registrar.ctx, s->slot);
    s->reg = PINIO_POOL_REG_NONE;
    s->slot = -1;
    p->stats.slabs_registered--;
    p->stats.bytes_registered -= s->size;
}

/* pinio_view free callback: the slab's last reference is gone. */
static void slab_free(void *cookie, void *ptr, size_t len)
{
    struct slab *s = cookie;
    pinio_pool *p = s->pool;
    (void)ptr;
    (void)len;
    pthread_mutex_lock(&p->lock);
    slab_unregister_locked(p, s);
    if (s->prev)
        s->prev->next = s->next;
    else
        p->slabs = s->next;
    if (s->next)
        s->next->prev = s->prev;
    p->stats.slabs--;
    p->stats.bytes_mapped -= s->size;
    pthread_mutex_unlock(&p->lock);
    pinio__prim_unmap(s->base, s->size);
    free(s);
    pool_unref(p);
}

/* Where are sampled pages of [base, base+size)? (first, last and evenly
 * between) */
static void verify_pages(const uint8_t *base, size_t size, int want, pinio_pool_verify *verify,
                         int *found_node)
{
    void *pages[VERIFY_SAMPLES];
    int status[VERIFY_SAMPLES];
    long pagesz = sysconf(_SC_PAGESIZE);
    size_t npages = size / (size_t)pagesz;
    size_t n = npages < VERIFY_SAMPLES ? npages : VERIFY_SAMPLES;
    for (size_t i = 0; i < n; i++) {
        size_t pg = n == 1 ? 0 : i * (npages - 1) / (n - 1);
        pages[i] = (void *)(base + pg * (size_t)pagesz);
        status[i] = INT_MIN;
    }
    if (pinio__prim_where(pages, n, status) != 0) {
        *verify = PINIO_POOL_VERIFY_UNAVAILABLE;
        *found_node = PINIO_NODE_UNKNOWN;
        return;
    }
    bool absent = false, elsewhere = false;
    *found_node = PINIO_NODE_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        if (status[i] < 0) {
            absent = true;
            continue;
        }
        if (*found_node == PINIO_NODE_UNKNOWN)
            *found_node = status[i];
        if (status[i] != want)
            elsewhere = true;
    }
    if (want == PINIO_NODE_UNKNOWN)
        *verify = PINIO_POOL_VERIFY_NOT_ASKED;
    else if (elsewhere)
        *verify = PINIO_POOL_VERIFY_MISPLACED;
    else if (absent)
        *verify = PINIO_POOL_VERIFY_NOT_PRESENT;
    else
        *verify = PINIO_POOL_VERIFY_OK;
}

static void verify_placement(struct slab *s, int want)
{
    verify_pages(s->base, s->size, want, &s->verify, &s->found_node);
}

static const char how_to_raise[] =
    "raise it with `ulimit -l` (or `prlimit --memlock`), a memlock line in "
    "/etc/security/limits.conf, systemd LimitMEMLOCK=, or grant CAP_IPC_LOCK";

static void fmt_limit(char *buf, size_t size, uint64_t v)
{
    if (v == PINIO_UNLIMITED)
        snprintf(buf, size, "unlimited");
    else
        snprintf(buf, size, "%" PRIu64 " bytes", v);
}

/* Registers a new slab if the pool has a registrar and the budget allows.
 * Caller holds the lock. Never fails: a refusal is recorded. */
static void slab_register_locked(pinio_pool *p, struct slab *s)
{
    s->reg = PINIO_POOL_REG_NONE;
    s->slot = -1;
    s->reg_error = 0;
    if (!p->has_registrar)
        return;
    pinio_sysinfo si;
    bool known = pinio_sys_probe(&si) == 0;
    char lim[32];
    fmt_limit(lim, sizeof(lim), known ? si.memlock_soft : PINIO_UNLIMITED);
    if (known && si.registrable != PINIO_UNLIMITED && s->size > si.registrable) {
        s->reg = PINIO_POOL_REG_OVER_MEMLOCK;
        snprintf(p->stats.fallback_reason, sizeof(p->stats.fallback_reason),
                 "slab of %zu bytes not registered: RLIMIT_MEMLOCK is %s and this process "
                 "already has %" PRIu64 " bytes locked or pinned; %s",
                 s->size, lim, si.vm_locked + si.vm_pinned, how_to_raise);
    } else {
        int slot = -1;
        int rc = p->registrar.reg(p->registrar.ctx, s->base, s->size, &slot);
        if (rc == 0) {
            s->reg = PINIO_POOL_REG_OK;
            s->slot = slot;
            p->stats.slabs_registered++;
            p->stats.bytes_registered += s->size;
            return;
        }
        s->reg = PINIO_POOL_REG_FAILED;
        s->reg_error = rc < 0 ? rc : -EIO;
        if (rc == -ENOMEM || rc == -EPERM)
            snprintf(p->stats.fallback_reason, sizeof(p->stats.fallback_reason),
                     "registering a slab of %zu bytes failed with %s: over the memlock limit "
                     "(RLIMIT_MEMLOCK %s, charged per user across all its processes); %s",
                     s->size, pinio_err_name(rc), lim, how_to_raise);
        else
            snprintf(p->stats.fallback_reason, sizeof(p->stats.fallback_reason),
                     "registering a slab of %zu bytes failed with %s (%s); reads use "
                     "unregistered buffers",
                     s->size, pinio_err_name(s->reg_error), pinio_strerror(s->reg_error));
    }
    p->stats.slabs_fallback++;
}

/* Creates, places, registers and verifies a slab; on success it is linked
 * and `s->whole` holds its first reference. Caller holds the lock. */
static int slab_create_locked(pinio_pool *p, size_t size, uint8_t *at, struct slab **out)
{
    struct slab *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->pool = p;
    s->size = size;
    if (at) {
        /* Replace part of a PROT_NONE reservation (pinio_pool_alloc_contig). */
        s->base = pinio__prim_map_fixed(at, size) == 0 ? at : NULL;
    } else {
        s->base = pinio__prim_map(size, SLAB_ALIGN, false);
    }
    if (!s->base) {
        free(s);
        return -ENOMEM;
    }
    int rc = 0;
    if (p->node != PINIO_NODE_UNKNOWN) {
        /* MPOL_PREFERRED rather than MPOL_BIND by default: a full or
         * memory-less node then falls back instead of invoking the OOM
         * killer; the verification below tells the caller. */
        rc = pinio__prim_bind(s->base, size, p->node, p->strict);
        /* Seccomp profiles (Docker's default without CAP_SYS_NICE) refuse
         * mbind with EPERM, and CONFIG_NUMA=n kernels with ENOSYS: the
         * memory is still good, the check below will say where it went. */
        if (rc == -EPERM || rc == -ENOSYS)
            rc = 0;
    }
    if (rc == 0 && p->huge_pages)
        s->huge_pages = pinio__prim_huge(s->base, size) == 0;
    if (rc == 0 && p->prefault)
        rc = pinio__prim_populate(s->base, size);
    if (rc == 0)
        rc = pinio_view_wrap(&s->whole, s->base, size, slab_free, s, 0);
    if (rc < 0) {
        pinio__prim_unmap(s->base, size);
        free(s);
        return rc;
    }
    slab_register_locked(p, s);
    verify_placement(s, p->node);
    if (s->verify == PINIO_POOL_VERIFY_MISPLACED)
        p->stats.slabs_misplaced++;
    s->next = p->slabs;
    if (p->slabs)
        p->slabs->prev = s;
    p->slabs = s;
    p->refs++;
    p->stats.slabs++;
    p->stats.slabs_created++;
    p->stats.bytes_mapped += size;
    *out = s;
    return 0;
}

static void fill_info(const struct slab *s, size_t offset, pinio_pool_region_info *info)
{
    info->data = s->base + offset;
    info->slab_base = s->base;
    info->slab_size = s->size;
    info->offset = offset;
    info->reg = s->reg;
    info->slot = s->slot;
    info->reg_error = s->reg_error;
    info->node = s->pool->node;
    info->verify = s->verify;
    info->found_node = s->found_node;
    info->huge_pages = s->huge_pages;
}

/* ---- public -------------------------------------------------------------- */

int pinio_pool_alloc(pinio_pool *p, size_t len, size_t align, pinio_view *out,
                     pinio_pool_region_info *info)
{
    if (!p || !out)
        return -EINVAL;
    if (align == 0)
        align = PINIO_POOL_ALIGN_DEFAULT;
    if ((align & (align - 1)) || align > PINIO_POOL_ALIGN_MAX || len > PINIO_POOL_SLAB_MAX)
        return -EINVAL;
    if (len == 0) {
        *out = (pinio_view){ .ptr = (const uint8_t *)(uintptr_t)align, .len = 0, .ref = NULL };
        if (info)
            *info = (pinio_pool_region_info){ .data = NULL, .slot = -1, .reg = PINIO_POOL_REG_NONE,
                                              .node = p->node, .found_node = PINIO_NODE_UNKNOWN };
        return 0;
    }

    pinio_view retired = { 0 };
    pinio_view region;
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    struct slab *s = p->current;
    size_t off = s ? (s->used + align - 1) & ~(align - 1) : 0;
    if (!s || off > s->size || s->size - off < len) {
        size_t need = (len + SLAB_ALIGN - 1) & ~(SLAB_ALIGN - 1);
        struct slab *fresh;
        if (need > p->slab_size) {
            /* A request larger than a slab gets a slab of its own that only
             * the region references, so it is freed with the region and the
             * current slab keeps serving small requests. */
            rc = slab_create_locked(p, need, NULL, &fresh);
            if (rc == 0) {
                rc = pinio_view_slice(&fresh->whole, 0, len, &region);
                /* Cannot fail (0 <= len <= size); the slice now holds the
                 * slab, so dropping `whole` under the lock frees nothing. */
                pinio_view_release(&fresh->whole);
                fresh->used = len;
                if (info)
                    fill_info(fresh, 0, info);
            }
            p->stats.bytes_handed_out += rc == 0 ? len : 0;
            pthread_mutex_unlock(&p->lock);
            if (rc == 0)
                *out = region;
            return rc;
        }
        rc = slab_create_locked(p, p->slab_size, NULL, &fresh);
        if (rc < 0) {
            pthread_mutex_unlock(&p->lock);
            return rc;
        }
        if (s)
            retired = s->whole; /* released below, outside the lock */
        p->current = s = fresh;
        off = 0;
    }
    rc = pinio_view_slice(&s->whole, off, off + len, &region);
    if (rc == 0) {
        s->used = off + len;
        p->stats.bytes_handed_out += len;
        if (info)
            fill_info(s, off, info);
        *out = region;
    }
    pthread_mutex_unlock(&p->lock);
    pinio_view_release(&retired);
    return rc;
}

int pinio_pool_query(pinio_pool *p, const void *addr, size_t len, pinio_pool_region_info *info)
{
    if (!p || !addr || !info)
        return -EINVAL;
    const uint8_t *a = addr;
    int rc = -ENOENT;
    pthread_mutex_lock(&p->lock);
    for (struct slab *s = p->slabs; s; s = s->next) {
        if (a >= s->base && a < s->base + s->size && len <= (size_t)(s->base + s->size - a)) {
            fill_info(s, (size_t)(a - s->base), info);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void pinio_pool_unregister(pinio_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    for (struct slab *s = p->slabs; s; s = s->next)
        slab_unregister_locked(p, s);
    p->has_registrar = false;
    pthread_mutex_unlock(&p->lock);
}

void pinio_pool_get_stats(pinio_pool *p, pinio_pool_stats *out)
{
    pthread_mutex_lock(&p->lock);
    *out = p->stats;
    pthread_mutex_unlock(&p->lock);
}

void pinio_pool_destroy(pinio_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    pinio_view current = p->current ? p->current->whole : (pinio_view){ 0 };
    p->current = NULL;
    pthread_mutex_unlock(&p->lock);
    /* May free the slab (its callback takes the lock and drops the slab's
     * reference on the state); the handle's reference keeps the state alive
     * until pool_unref() below. */
    pinio_view_release(&current);
    pool_unref(p);
}

/* ---- contiguous regions above 1 GiB ------------------------------------ */

/* The slabs of one contiguous region: the region's free callback drops the
 * reference it holds on each. */
struct slab_group {
    size_t n;
    pinio_view parts[];
};

static void group_free(void *cookie, void *ptr, size_t len)
{
    struct slab_group *g = cookie;
    (void)ptr;
    (void)len;
    for (size_t i = 0; i < g->n; i++)
        pinio_view_release(&g->parts[i]);
    free(g);
}

int pinio_pool_alloc_contig(pinio_pool *p, size_t len, pinio_view *out,
                            pinio_pool_region_info *info)
{
    if (!p || !out)
        return -EINVAL;
    if (len <= PINIO_POOL_SLAB_MAX)
        return pinio_pool_alloc(p, len, PINIO_POOL_ALIGN_DEFAULT, out, info);

    /* One virtual range, reserved PROT_NONE, then filled by slabs of at most
     * 1 GiB mapped over it with MAP_FIXED: each slab is still a registered
     * buffer of its own (the kernel's per-buffer limit), and a tensor larger
     * than 1 GiB still sees one contiguous array. */
    size_t total = (len + SLAB_ALIGN - 1) & ~(SLAB_ALIGN - 1);
    size_t n = (total + PINIO_POOL_SLAB_MAX - 1) / PINIO_POOL_SLAB_MAX;
    struct slab_group *g = calloc(1, sizeof(*g) + n * sizeof(g->parts[0]));
    if (!g)
        return -ENOMEM;
    uint8_t *base = pinio__prim_map(total, SLAB_ALIGN, true);
    if (!base) {
        free(g);
        return -ENOMEM;
    }

    int rc = 0;
    bool all_registered = true;
    pthread_mutex_lock(&p->lock);
    for (size_t k = 0; k < n; k++) {
        size_t off = k * PINIO_POOL_SLAB_MAX;
        size_t size = total - off < PINIO_POOL_SLAB_MAX ? total - off : PINIO_POOL_SLAB_MAX;
        struct slab *s;
        rc = slab_create_locked(p, size, base + off, &s);
        if (rc < 0) {
            /* The rest of the reservation is still ours to unmap. */
            pinio__prim_unmap(base + off, total - off);
            break;
        }
        s->used = size;
        g->parts[g->n++] = s->whole; /* the group now holds the slab's reference */
        s->whole = (pinio_view){ 0 };
        if (s->reg != PINIO_POOL_REG_OK)
            all_registered = false;
        if (k == 0 && info)
            fill_info(s, 0, info);
    }
    if (rc == 0)
        p->stats.bytes_handed_out += len;
    pthread_mutex_unlock(&p->lock);
    if (rc == 0)
        rc = pinio_view_wrap(out, base, len, group_free, g, 0);
    if (rc < 0) {
        group_free(g, NULL, 0);
        return rc;
    }
    if (info && !all_registered && info->reg == PINIO_POOL_REG_OK)
        info->reg = PINIO_POOL_REG_OVER_MEMLOCK; /* some slab of the range is not registered */
    return 0;
}

int pinio_pool_verify_range(pinio_pool *p, const void *addr, size_t len,
                            pinio_pool_region_info *info)
{
    if (!p || !addr || !info)
        return -EINVAL;
    const uint8_t *a = addr, *end = a + len;
    bool found = false;
    pinio_pool_verify worst = PINIO_POOL_VERIFY_OK;
    pthread_mutex_lock(&p->lock);
    for (struct slab *s = p->slabs; s; s = s->next) {
        if (s->base >= end || s->base + s->size <= a)
            continue;
        /* Only the part of the slab inside the range: the rest of a shared
         * slab may never have been touched. */
        const uint8_t *lo = s->base > a ? s->base : a;
        const uint8_t *hi = s->base + s->size < end ? s->base + s->size : end;
        pinio_pool_verify v;
        int found_node;
        verify_pages(lo, (size_t)(hi - lo), p->node, &v, &found_node);
        if (v == PINIO_POOL_VERIFY_MISPLACED)
            p->stats.slabs_misplaced++;
        if (v != PINIO_POOL_VERIFY_OK && worst != PINIO_POOL_VERIFY_MISPLACED)
            worst = v;
        if (a >= s->base && a < s->base + s->size) {
            fill_info(s, (size_t)(a - s->base), info);
            info->found_node = found_node;
            found = true;
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (!found)
        return -ENOENT;
    info->verify = worst;
    return 0;
}
