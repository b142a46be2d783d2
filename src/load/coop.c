/*
 * Node-local sharing: processes that load the same local file, or the same
 * version of an s3:// object, at the same time read it from storage once.
 * No daemon: the registry is a folder (/dev/shm), a segment's name is the
 * file's identity, and the locks are fcntl OFD locks on the segment itself,
 * which the kernel drops when their holder dies.
 *
 *   segment  pinio-share-<dev>-<ino>-<size>-<mtime s>.<ns>
 *            [0, 4096) header: magic, identity, file range [lo, hi),
 *                      state (FILLING, then COMPLETE), reader's pid, claim;
 *                      an object's identity text at 512
 *            [4096, 4096 + hi - lo) the file's bytes [lo, hi)
 *   byte 0   exclusive while the segment is claimed, allocated and read;
 *            taken briefly by a joiner, a last user and a sweeper, so that
 *            each of them sees the segment's state settled
 *   byte 1   shared by every process using the segment
 *   byte 2   shared by a process waiting for byte 0: it asks a reader
 *            that reads alone (state ALONE) for a segment
 *
 * Why a reader reads alone first: shared memory gets 4 KiB pages where
 * private memory gets huge pages (shmem_enabled "never", Debian's
 * default), and a lone process reading into a segment took twice a
 * private load. The claimed segment holds only its header (state ALONE)
 * while the file is read into private memory, faulted ahead of the reads
 * as the arena is; once the reads landed, a reader that was asked (byte 2
 * held) makes the segment, copies the bytes into it and marks it COMPLETE;
 * one that was not removes the claim. PINIO_SHARE=eager makes the segment
 * at once, for processes started apart.
 *
 * Why the name carries the identity: a file replaced or rewritten at the
 * same path has another inode or modification time (an object replaced,
 * another ETag), so its readers meet another segment and never the old
 * bytes; the header repeats it, checked before a byte is mapped.
 *
 * Why no partial bytes are ever seen: COMPLETE is stored (release order)
 * only after the engine's reads landed and it checked the file unchanged;
 * a joiner reads the state holding byte 0, which a reader holds from its
 * claim to its marker. A reader that dies leaves FILLING behind and byte 0
 * free: the next process to take byte 0 reads the file again over it.
 *
 * Why a joiner is ready moments after its reader: while it waits for byte
 * 0 it maps the segment being read and populates and locks its pages
 * (early()), so that little is left at the marker, not a pass over the
 * whole segment (a quarter second per GiB here, per joiner).
 * It takes no byte before it holds byte 0 and sees COMPLETE, as any joiner;
 * a takeover meanwhile (a new `claim` in the header) only means it
 * populates again what the truncation took out of its mapping.
 *
 * Why nothing is left behind: the last user (byte 1 exclusive, taken while
 * holding byte 0, so no joiner slips in between) unlinks the segment; where
 * every user died, any later load sweeps the folder's segments that nobody
 * holds. Before unlinking, the name is checked to still be this inode: only
 * a holder of an inode's byte 0 unlinks it, so the name cannot move on
 * meanwhile.
 *
 * Why memory is counted first: a tmpfs page that cannot be allocated is a
 * SIGBUS on first touch (the round-3 audit); the folder's free space and
 * the memory the cgroup still allows are checked, then posix_fallocate
 * allocates every page before a byte is written. A segment that does not fit
 * is a private read of the file, said in the report.
 *
 * Trust: a segment is used only when this user owns it (the folder is
 * world-writable: another user's file of the same name could hold any
 * bytes), and never through a symbolic link.
 *
 * Deadlock: a process waits for another's byte 0 only while holding no
 * byte 0 itself (files are taken one at a time, each read before the next
 * is looked at), so two loads of the same shards never wait on each other.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "src/load/coop_internal.h"

#define HEAD 4096u
/* An object's identity text (ident_text()) in the header page, from here. */
#define IDENT_AT 512u
#define IDENT_MAX (HEAD - IDENT_AT)
#define PREFIX "pinio-share-"
#define MAGIC "PINIOSH1"
#define STATE_FILLING 0u
#define STATE_COMPLETE 0x434f4d50u /* "COMP": a zeroed page is never complete */
/* Claimed and read into the reader's private memory; no segment yet. */
#define STATE_ALONE 0x414c4f4eu /* "ALON" */
/* The lock bytes: claimed, used, asked for (see the comment on top). */
#define BYTE_WANT 2
#define HUGE ((size_t)2 << 20)
/* A name taken away by a sweeper between open and lock is tried again;
 * more than this many times in a row is contention worth a private read. */
#define ATTEMPTS 16
/* What a joiner populates of a segment being read between two looks at
 * byte 0: a few milliseconds of page-table work, so that the marker is
 * noticed about as soon as the 5 ms poll would. */
#define EARLY_STEP ((size_t)32 << 20)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

typedef struct seg_head {
    char magic[8];
    uint64_t dev, ino, size;
    int64_t mtime_s;
    uint32_t mtime_ns;
    _Atomic uint32_t state;
    uint64_t lo, hi;
    int32_t pid;
    /* New at every claim (0 in a segment of an older pinio): a joiner that
     * mapped the segment while it was read learns from it whether a
     * takeover truncated the pages it populated meanwhile. */
    uint64_t claim;
} seg_head;

/* What the view's free callback needs to let go of a segment. */
typedef struct seg {
    int fd;
    bool failed; /* a reader's segment left incomplete: removed at once */
    char path[];
} seg;

static const char *share_dir(void)
{
    const char *d = getenv("PINIO_SHARE_DIR");
    return d && *d ? d : "/dev/shm";
}

static bool share_env_off(void)
{
    const char *v = getenv("PINIO_SHARE");
    return v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "no") == 0 ||
                 strcmp(v, "false") == 0);
}

static int ofd_lock(int fd, short type, off_t at, bool wait)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };
    return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

/* The name still names this inode (only then may it be unlinked). */
static bool still_named(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && a.st_nlink > 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* The last reference to a segment's memory: unmapped, then the segment
 * removed when no other process uses it. Waiting for byte 0 is brief: on a
 * complete segment only joiners, last users and sweepers take it. */
static void seg_free(void *cookie, void *ptr, size_t len)
{
    seg *s = cookie;
    munmap(ptr, len);
    if (s->failed || (ofd_lock(s->fd, F_WRLCK, 0, true) == 0 &&
                      ofd_lock(s->fd, F_WRLCK, 1, false) == 0)) {
        if (still_named(s->fd, s->path))
            unlink(s->path);
    }
    close(s->fd); /* drops both locks at once */
    free(s);
}

/* PINIO_SHARE=eager: every file this process claims is read into a
 * segment at once, as if others were waiting (processes started apart). */
static bool share_env_eager(void)
{
    const char *v = getenv("PINIO_SHARE");
    return v && strcmp(v, "eager") == 0;
}

static void anon_free(void *cookie, void *ptr, size_t len)
{
    (void)cookie;
    munmap(ptr, len);
}

/* Segments nobody holds (every user died): removed. Ours, open through
 * another descriptor, hold byte 1 and are left alone. */
static void sweep(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, PREFIX, strlen(PREFIX)) != 0 || strcmp(e->d_name, keep) == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
            continue;
        if (ofd_lock(fd, F_WRLCK, 0, false) == 0 && ofd_lock(fd, F_WRLCK, 1, false) == 0 &&
            still_named(fd, path))
            unlink(path);
        close(fd);
    }
    closedir(d);
}

/* Whether `need` bytes of segment fit: the folder's free space and the
 * memory the cgroup (and the machine) still allow. */
static bool fits(const char *dir, uint64_t need, char *why, size_t n)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < need) {
        snprintf(why, n, "%s has %llu bytes free, the segment needs %llu", dir,
                 (unsigned long long)((uint64_t)sv.f_bavail * sv.f_frsize),
                 (unsigned long long)need);
        return false;
    }
    pinio_memavail ma;
    if (pinio_mem_available(NULL, &ma) == 0 && ma.bytes < need) {
        snprintf(why, n, "%s leaves %llu bytes, the segment needs %llu", ma.source,
                 (unsigned long long)ma.bytes, (unsigned long long)need);
        return false;
    }
    return true;
}

/* ---- identity --------------------------------------------------------- */

/* An object's identity, the version its reads are pinned to (If-Match):
 * the store's endpoint, bucket, key, ETag and size, as text (n bytes at
 * most, NUL included). -1 when it does not fit. Why the ETag: a replaced
 * object has another one, so its loads meet another segment, as a
 * rewritten file's do through its modification time. */
static int ident_text(const pinio__pfile *pf, char *t, size_t n)
{
    int k = snprintf(t, n, "s3 %s\nbucket %s\nkey %s\netag %s\nsize %llu",
                     pinio__s3_endpoint(pf->s3), pf->bucket, pf->key, pf->ver.etag,
                     (unsigned long long)pf->ver.size);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static uint64_t fnv1a(const char *t, uint64_t h)
{
    for (; *t; t++)
        h = (h ^ (uint8_t)*t) * 0x100000001b3ull;
    return h;
}

/* The identity a segment's name and header carry: a local file's own; an
 * object's text hashed into the same fields (device 0, which no local file
 * has), the text itself in the header, compared before a byte is mapped
 * (head_mismatch()), so a collision of the hashes shares nothing. */
static void ident_of(const pinio__pfile *pf, const char *text, pinio__file_id *id)
{
    if (!pf->pub.object) {
        *id = pf->id;
        return;
    }
    memset(id, 0, sizeof(*id));
    id->ino = fnv1a(text, 0xcbf29ce484222325ull);
    id->mtime_s = (int64_t)(fnv1a(text, 0x84222325cbf29ce4ull) >> 1);
    id->size = pf->ver.size;
}

/* ---- selection -------------------------------------------------------- */

/* File f's reads, [*first, *end) of the plan's (a file's reads are
 * consecutive), and whether they cover [lo, hi) without a gap. */
static bool file_reads(const pinio_plan *plan, uint32_t f, size_t *first, size_t *end)
{
    size_t i = 0, n = plan->layout.nreads;
    while (i < n && plan->layout.reads[i].file != f)
        i++;
    size_t j = i;
    bool whole = true;
    while (j < n && plan->layout.reads[j].file == f) {
        if (j > i && plan->layout.reads[j].offset !=
                         plan->layout.reads[j - 1].offset + plan->layout.reads[j - 1].len)
            whole = false;
        j++;
    }
    *first = i;
    *end = j;
    return whole;
}

static const char *refused(const pinio_plan *plan, uint32_t f, const pinio_load_opts *o)
{
    if (o->share == PINIO_SHARE_OFF)
        return "sharing off (the share option)";
    if (share_env_off())
        return "sharing off (PINIO_SHARE=0)";
    if (plan->files[f].pub.object) {
        char t[IDENT_MAX];
        if (!plan->files[f].ver.etag[0])
            return "an object the store sent no ETag for: nothing names its version";
        if (ident_text(&plan->files[f], t, sizeof(t)) < 0)
            return "an object whose name is too long for a segment's header";
    }
    if (o->arena)
        return "a kept arena was given";
    if (o->node >= 0)
        return "a NUMA node was asked for: a segment is not placed";
    if (o->register_arena)
        return "register_arena: the reads go to the registered arena";
    if (o->verify)
        return "verify hashes the reads as they land in this process";
    if (o->backend != PINIO_BACKEND_AUTO)
        return "a backend forced: this process's reads were asked for";
    size_t selected = 0;
    for (size_t i = 0; i < plan->ntensors; i++) {
        const pinio_plan_tensor *t = &plan->tensors[i];
        if (t->file != f)
            continue;
        selected++;
        if (t->sliced)
            return "slices of it: each process reads its own";
        if (o->tensor_align > 1 && t->nbytes && (t->file_offset & (o->tensor_align - 1)))
            return "tensor_align asks for a move in this process's memory";
    }
    /* A part of a file (a filter, a safe_open tensor) is not what the
     * others of the node load: its segment would serve nobody and cost a
     * registry round per call. */
    if (selected < pinio_st_count(plan->files[f].st))
        return "a part of the file selected (filters): each process reads its own";
    size_t a, b;
    if (!file_reads(plan, f, &a, &b))
        return "the file's reads leave gaps";
    return NULL;
}

void pinio__coop_select(const pinio_plan *plan, const pinio_load_opts *o, pinio__fmem *fm)
{
    for (size_t f = 0; f < plan->nfiles; f++) {
        fm[f].coop = false;
        fm[f].share_why[0] = '\0';
        if (fm[f].mode != PINIO_MEMORY_PINNED)
            continue;
        size_t a, b;
        file_reads(plan, (uint32_t)f, &a, &b);
        if (a == b)
            continue; /* nothing read: nothing to share */
        const char *why = refused(plan, (uint32_t)f, o);
        if (why)
            snprintf(fm[f].share_why, sizeof(fm[f].share_why), "%s", why);
        else
            fm[f].coop = true;
    }
}

/* ---- one file --------------------------------------------------------- */

/* ALONE: claimed, read into private memory; becomes READER when another
 * process asked for the file meanwhile (publish()). */
typedef enum { GOT_PRIVATE, GOT_SHARED, GOT_READER, GOT_ALONE } got_kind;

typedef struct coop_file {
    const pinio_plan *plan;
    uint32_t f;
    const pinio_load_opts *o;
    pinio__file_id id;     /* the file's identity (ident_of()) */
    char text[IDENT_MAX];  /* an object's identity text, else "" */
    uint64_t lo, hi;       /* the file range this load reads (its reads' extent) */
    uint64_t seg_lo;       /* the range the memory holds starts here */
    uint8_t *mem;          /* the mapping (header included for a segment) */
    size_t len;
    pinio_view view;       /* the whole mapping */
    seg *s;                /* a segment's: the view's free callback cookie */
    got_kind got;
    int pid;               /* shared: the process that read it */
    seg_head *head;        /* reader: the header in the mapping */
    int reg_fd;            /* alone: the claimed segment, byte 0 held, header only */
    char reg_path[4096 + 160];
    bool publish_failed;   /* alone: asked for, but no segment could be made (why) */
    bool reading_seen;
    bool locked;           /* the memory is mlocked already (see lock_mem) */
    /* Another process's segment mapped while it is read (early()):
     * [0, done) populated, `claim` its header's claim then. */
    struct {
        uint8_t *p;
        size_t len, done;
        uint64_t claim;
        bool locked;       /* mlock2 MLOCK_ONFAULT: locked as populated */
        bool off;          /* the kernel cannot: not tried again */
        bool said;         /* PINIO_SHARE_EARLY told */
    } pre;
    bool early_used;       /* shared: the early mapping became the view */
    char why[160];         /* private: why */
} coop_file;

/* The reason a file is read privately (the report's share line). */
static void why_set(coop_file *c, const char *fmt, ...) PINIO_PRINTF(2, 3);
static void why_set(coop_file *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
}

static void hook(const coop_file *c, pinio_share_stage st)
{
    if (c->o->share_hook)
        c->o->share_hook(c->o->share_hook_ctx, c->plan->files[c->f].path, st);
}

/* Whether RLIMIT_MEMLOCK leaves room to lock `len` bytes. */
static bool may_lock(size_t len)
{
    pinio_sysinfo si;
    pinio_sys_probe(&si);
    return si.registrable == PINIO_UNLIMITED || si.registrable >= len;
}

/* Why a segment's header `h` (of the segment `fd`, which `st` describes)
 * is not file c->f's with this load's range, or NULL. */
static const char *head_mismatch(const coop_file *c, int fd, const seg_head *h,
                                 const struct stat *st)
{
    const pinio__file_id *id = &c->id;
    if (h->dev != id->dev || h->ino != id->ino || h->size != id->size ||
        h->mtime_s != id->mtime_s || h->mtime_ns != id->mtime_ns)
        return "describes another file";
    if (c->text[0]) {
        char t[IDENT_MAX];
        size_t n = strlen(c->text) + 1;
        if (pread(fd, t, n, IDENT_AT) != (ssize_t)n || memcmp(t, c->text, n) != 0)
            return "describes another object";
    }
    if (c->lo < h->lo || c->hi > h->hi || h->hi - h->lo > (uint64_t)st->st_size - HEAD)
        return "holds another range of the file";
    return NULL;
}

static void pre_drop(coop_file *c)
{
    if (c->pre.p)
        munmap(c->pre.p, c->pre.len);
    bool off = c->pre.off;
    memset(&c->pre, 0, sizeof(c->pre));
    c->pre.off = off;
}

/* While another process reads the file into the segment `fd`: the segment
 * mapped and populated a step at a time, locked as it is populated, so that
 * the page-table work (a quarter second per GiB here, per process) is done
 * by the time the reader marks it complete, not after. Not behind the
 * reader's progress: its reads land per read, and one read may be the whole
 * file. Ahead of the reader is right too: the pages exist from its
 * fallocate on, the first fault of each (the reader's or this one's) zeroes
 * it under the page's lock before either maps it, and a shared mapping
 * shows the reads as they land. Not a byte is
 * looked at here: join() checks the complete segment under byte 0 as for
 * any joiner, and a takeover's truncation only takes pages out of this
 * mapping (a populate over them fails with EFAULT, never SIGBUS).
 * Returns whether it populated a step (then the poll needs no sleep). */
static bool early(coop_file *c, int fd)
{
    if (c->pre.off)
        return false;
    if (!c->pre.p) {
        struct stat st;
        seg_head h;
        if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < HEAD ||
            pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
            memcmp(h.magic, MAGIC, sizeof(h.magic)) != 0 || head_mismatch(c, fd, &h, &st))
            return false; /* not allocated yet, or not this load's: looked at again */
        size_t len = HEAD + (size_t)(h.hi - h.lo);
        void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            c->pre.off = true;
            return false;
        }
        c->pre.p = p;
        c->pre.len = len;
        c->pre.claim = h.claim;
        c->pre.locked = may_lock(len) && mlock2(p, len, MLOCK_ONFAULT) == 0;
    }
    if (c->pre.done == c->pre.len)
        return false;
    size_t n = c->pre.len - c->pre.done < EARLY_STEP ? c->pre.len - c->pre.done : EARLY_STEP;
    if (madvise(c->pre.p + c->pre.done, n, MADV_POPULATE_READ) != 0) {
        /* EFAULT: truncated by a takeover, mapped again once reallocated;
         * anything else (an older kernel): the join populates instead. */
        if (errno != EFAULT)
            c->pre.off = true;
        pre_drop(c);
        return false;
    }
    c->pre.done += n;
    if (!c->pre.said) {
        c->pre.said = true;
        hook(c, PINIO_SHARE_EARLY);
    }
    return true;
}

/* Byte 0 of `fd`, waited for. While another process holds it, byte
 * BYTE_WANT is held shared: what tells a reader reading alone that this
 * process asks for the file (wanted()). */
static int wait_lock0(coop_file *c, int fd)
{
    bool want = false;
    for (;;) {
        int rc = ofd_lock(fd, F_WRLCK, 0, false);
        if (rc != -EAGAIN && rc != -EACCES) {
            if (want) {
                struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
                                    .l_start = BYTE_WANT, .l_len = 1 };
                fcntl(fd, F_OFD_SETLK, &fl);
            }
            return rc;
        }
        if (!want && ofd_lock(fd, F_RDLCK, BYTE_WANT, false) == 0) {
            want = true;
            hook(c, PINIO_SHARE_WANTING);
        }
        if (c->o->stop && c->o->stop(c->o->stop_ctx))
            return -ECANCELED;
        /* Another process is reading the file (seconds): a 5 ms poll
         * costs nothing beside it and keeps the stop request honoured. */
        if (!early(c, fd))
            nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
    }
}

static int wrap_seg(coop_file *c, int fd, const char *path, uint8_t *p, size_t len, bool ro)
{
    seg *s = malloc(sizeof(*s) + strlen(path) + 1);
    if (!s)
        return -ENOMEM;
    s->fd = fd;
    s->failed = false;
    strcpy(s->path, path);
    int rc = pinio_view_wrap(&c->view, p, len, seg_free, s, ro ? PINIO_VIEW_READONLY : 0);
    if (rc < 0) {
        free(s);
        return rc;
    }
    c->mem = p;
    c->len = len;
    c->s = s;
    return 0;
}

/* A complete segment, lock 0 held: mapped when it holds this load's range
 * of this very file. Returns 1 when mapped (`fd` then owned by the view). */
static int join(coop_file *c, int fd, const char *path, const seg_head *h, struct stat *st)
{
    const char *bad = head_mismatch(c, fd, h, st);
    if (bad) {
        why_set(c, "the segment %s %s", path, bad);
        return 0;
    }
    hook(c, PINIO_SHARE_JOINING);
    int rc = ofd_lock(fd, F_RDLCK, 1, false);
    if (rc < 0) {
        why_set(c, "cannot lock the segment: %s", pinio_strerror(rc));
        return 0;
    }
    size_t len = HEAD + (size_t)(h->hi - h->lo);
    uint8_t *p;
    size_t from = 0;
    if (c->pre.p && c->pre.len == len) {
        /* Mapped while it was read: what a takeover since then truncated
         * (another claim) is populated again, the rest is in place. */
        p = c->pre.p;
        from = h->claim && h->claim == c->pre.claim ? c->pre.done : 0;
        c->locked = c->pre.locked;
        c->pre.p = NULL;
        c->early_used = true;
    } else {
        pre_drop(c);
        p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            why_set(c, "cannot map the segment: %s", pinio_strerror(-errno));
            return 0;
        }
        /* mlock populates as it locks: one pass over the page tables,
         * where MAP_POPULATE and then mlock made two. */
        c->locked = may_lock(len) && mlock(p, len) == 0;
        if (c->locked)
            from = len;
    }
    /* Unpopulated pages would only fault on touch (correct bytes still);
     * the lock is what would be missing, so it is not claimed then. */
    if (from < len && madvise(p + from, len - from, MADV_POPULATE_READ) != 0)
        c->locked = false;
    if (wrap_seg(c, fd, path, p, len, true) < 0) {
        munmap(p, len);
        why_set(c, "out of memory");
        return 0;
    }
    c->seg_lo = h->lo;
    c->pid = h->pid;
    c->got = GOT_SHARED;
    struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    fcntl(fd, F_OFD_SETLK, &fl);
    return 1;
}

/* The segment of a file this process claimed (lock 0 held, its header
 * written): allocated whole, then mapped as c's memory. Returns 1 when
 * made, 0 with c->why. */
static int seg_make(coop_file *c, int fd, const char *path)
{
    uint64_t need = HEAD + (c->hi - c->lo);
    int rc = 0;
    if (!fits(share_dir(), need, c->why, sizeof(c->why)))
        return 0;
    if (ftruncate(fd, (off_t)need) != 0 || (rc = posix_fallocate(fd, 0, (off_t)need)) != 0) {
        why_set(c, "cannot allocate the %llu-byte segment in %s: %s",
                 (unsigned long long)need, share_dir(), strerror(rc ? rc : errno));
        return 0;
    }
    if ((rc = ofd_lock(fd, F_RDLCK, 1, false)) < 0) {
        why_set(c, "cannot lock the segment: %s", pinio_strerror(rc));
        return 0;
    }
    void *p = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        why_set(c, "cannot map the segment: %s", pinio_strerror(-errno));
        return 0;
    }
    if (wrap_seg(c, fd, path, p, (size_t)need, false) < 0) {
        munmap(p, (size_t)need);
        why_set(c, "out of memory");
        return 0;
    }
    /* Locked as the reads (or the copy) fault the pages in (every page is
     * written: the header, then the bytes without a gap): no second pass
     * over them. */
    c->locked = may_lock((size_t)need) && mlock2(p, (size_t)need, MLOCK_ONFAULT) == 0;
    seg_head *h = p;
    h->pid = (int32_t)getpid();
    atomic_store_explicit(&h->state, STATE_FILLING, memory_order_relaxed);
    c->head = h;
    c->seg_lo = c->lo;
    c->got = GOT_READER;
    hook(c, PINIO_SHARE_ALLOCATED);
    return 1;
}

/* A new or stale segment, lock 0 held: claimed for this load's range, its
 * header written (the identity, state ALONE), nothing allocated. The file
 * is then read into private memory, and a segment made of it only where
 * another process asked for it meanwhile (publish()). Why not read into the
 * segment at once: shared memory gets 4 KiB pages where private memory gets
 * transparent huge pages (shmem_enabled "never", Debian's default), so a
 * process that turns out to be alone paid an allocation pass
 * (posix_fallocate), a fault per 4 KiB page under O_DIRECT's page pinning
 * and their undoing: about twice a private read (doc/measurements.md,
 * "Issue 40: a lone process through the segment"). PINIO_SHARE=eager makes
 * the segment at once (processes started apart, each after the last
 * finished). Returns 1 when claimed (lock 0 still held; `fd` then
 * c->reg_fd, or the view's once a segment is made). */
static int claim_alone(coop_file *c, int fd, const char *dir, const char *path)
{
    hook(c, PINIO_SHARE_CLAIMED);
    pre_drop(c); /* a dead reader's segment, mapped while it read */
    uint64_t need = HEAD + (c->hi - c->lo);
    /* A stale segment's pages are given back before the room is counted. */
    if (ftruncate(fd, 0) != 0) {
        why_set(c, "cannot truncate the stale segment %s: %s", path, pinio_strerror(-errno));
        return 0;
    }
    /* Counted now, though nothing is allocated yet: a segment that could
     * not be made is said at once, not to the processes that came to wait. */
    if (!fits(dir, need, c->why, sizeof(c->why)))
        return 0;
    _Alignas(8) uint8_t page[HEAD];
    memset(page, 0, sizeof(page));
    seg_head *h = (seg_head *)(void *)page;
    const pinio__file_id *id = &c->id;
    memcpy(h->magic, MAGIC, sizeof(h->magic));
    h->dev = id->dev;
    h->ino = id->ino;
    h->size = id->size;
    h->mtime_s = id->mtime_s;
    h->mtime_ns = id->mtime_ns;
    h->lo = c->lo;
    h->hi = c->hi;
    h->pid = (int32_t)getpid();
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    h->claim = ((uint64_t)getpid() << 40) ^
               ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
    h->claim += !h->claim;
    atomic_store_explicit(&h->state, STATE_ALONE, memory_order_relaxed);
    memcpy(page + IDENT_AT, c->text, strlen(c->text) + 1);
    /* Written through the file, not a mapping: a process that maps the
     * segment early (early()) does so only once it has its full size
     * (seg_make()), when the header is in place. */
    if (pwrite(fd, page, HEAD, 0) != (ssize_t)HEAD) {
        why_set(c, "cannot write the segment %s: %s", path, pinio_strerror(-errno));
        return 0;
    }
    if (share_env_eager())
        return seg_make(c, fd, path);
    c->reg_fd = fd;
    snprintf(c->reg_path, sizeof(c->reg_path), "%s", path);
    c->got = GOT_ALONE;
    return 1;
}

/* Finds, waits for or claims file c->f's segment. 0 with c->got set
 * (PRIVATE with c->why when it cannot be shared), or -ECANCELED. */
static int acquire(coop_file *c)
{
    const pinio__file_id *id = &c->id;
    const char *dir = share_dir();
    char name[160], path[4096 + 160];
    snprintf(name, sizeof(name), PREFIX "%llx-%llx-%llx-%llx.%09u", (unsigned long long)id->dev,
             (unsigned long long)id->ino, (unsigned long long)id->size,
             (unsigned long long)id->mtime_s, id->mtime_ns);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    c->got = GOT_PRIVATE;
    if (c->plan->files[c->f].pub.object && !c->text[0]) {
        why_set(c, "the object's identity does not fit a segment's header");
        return 0;
    }
    sweep(dir, name);
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            why_set(c, "cannot open %s: %s", path, pinio_strerror(-errno));
            return 0;
        }
        int rc = wait_lock0(c, fd);
        if (rc < 0) {
            pre_drop(c);
            close(fd);
            if (rc == -ECANCELED)
                return rc;
            why_set(c, "cannot lock %s: %s", path, pinio_strerror(rc));
            return 0;
        }
        if (!still_named(fd, path)) { /* removed while we waited: another round */
            pre_drop(c);
            close(fd);
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_uid != geteuid()) {
            /* Another user's file of that name could hold any bytes: it
             * is never mapped, nor written. */
            why_set(c, "%s belongs to another user", path);
            pre_drop(c);
            close(fd);
            return 0;
        }
        seg_head h;
        bool complete = (uint64_t)st.st_size >= HEAD &&
                        pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
                        memcmp(h.magic, MAGIC, sizeof(h.magic)) == 0 &&
                        atomic_load_explicit(&h.state, memory_order_acquire) == STATE_COMPLETE;
        int got = complete ? join(c, fd, path, &h, &st) : claim_alone(c, fd, dir, path);
        if (got == 1)
            return 0;
        /* Not usable: a claimed segment is removed (nobody else holds it,
         * we hold byte 0 and it is still named); another's complete one is
         * left to its users. */
        pre_drop(c);
        if (!complete && still_named(fd, path))
            unlink(path);
        close(fd);
        return 0;
    }
    why_set(c, "the segment %s was removed %d times while waiting for it",
             path, ATTEMPTS);
    return 0;
}

/* ---- reading ---------------------------------------------------------- */

static int coop_claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    coop_file *c = ctx;
    *mem = c->mem + (c->got == GOT_READER ? HEAD : 0) + (r->offset - c->seg_lo);
    return 0;
}

static int coop_landed(void *ctx, size_t i, const pinio_plan_read *r, void *mem)
{
    (void)i;
    (void)r;
    (void)mem;
    coop_file *c = ctx;
    if (c->got != GOT_READER && c->got != GOT_ALONE)
        return 0;
    if (!c->reading_seen) {
        c->reading_seen = true;
        hook(c, PINIO_SHARE_READING);
    }
    return 0;
}

static const pinio_dest_ops coop_dest = {
    .size = sizeof(pinio_dest_ops),
    .claim = coop_claim,
    .landed = coop_landed,
};

/* Private memory for the file's range: where no segment could be had, or
 * read alone first (claim_alone()). Aligned to and advised for huge pages,
 * as the arena is: with THP "madvise" an anonymous mapping gets 4 KiB pages
 * otherwise, the cost claim_alone() avoids. */
static int private_mem(coop_file *c, pinio_diag *diag)
{
    size_t len = (size_t)(c->hi - c->lo);
    pinio_memavail ma;
    if (pinio_mem_available(NULL, &ma) == 0 && ma.bytes < len) {
        pinio_diag_set_at(diag, -ENOMEM, c->plan->files[c->f].path, c->lo,
                          "reading it needs %zu bytes but only %llu are available (%s), and "
                          "it was not shared (%s): select fewer tensors (--filter) or free "
                          "memory", len, (unsigned long long)ma.bytes, ma.source,
                          c->why[0] ? c->why : "read alone first");
        pinio_diag_set_index(diag, c->f);
        return -ENOMEM;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t whole = (len + page - 1) & ~(page - 1);
    uint8_t *raw = mmap(NULL, whole + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (raw == MAP_FAILED)
        return -ENOMEM;
    uint8_t *p = (uint8_t *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + whole + HUGE > p + whole)
        munmap(p + whole, (size_t)(raw + whole + HUGE - (p + whole)));
    (void)madvise(p, whole, MADV_HUGEPAGE); /* advice: 4 KiB pages without THP */
    int rc = pinio_view_wrap(&c->view, p, len, anon_free, NULL, 0);
    if (rc < 0) {
        munmap(p, len);
        return rc;
    }
    c->mem = p;
    c->len = len;
    c->seg_lo = c->lo;
    return 0;
}

/* Whether another process waits for the file this one read alone: it
 * holds byte BYTE_WANT of the claimed segment (wait_lock0()). */
static bool wanted(const coop_file *c)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = BYTE_WANT,
                        .l_len = 1 };
    return fcntl(c->reg_fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* Another process asked for the file this one read alone: a segment made
 * of the private memory, which it then replaces (one copy of the bytes on
 * the node, not two). The copy is the price of having read privately,
 * paid only where the file turned out to be shared. False when no
 * segment could be made (c->why): the private memory stays. */
static bool publish(coop_file *c)
{
    pinio_view priv = c->view;
    uint8_t *src = c->mem;
    size_t len = c->len;
    memset(&c->view, 0, sizeof(c->view));
    if (seg_make(c, c->reg_fd, c->reg_path) != 1) {
        c->view = priv;
        c->mem = src;
        c->len = len;
        return false;
    }
    c->reg_fd = -1; /* the view's now */
    memcpy(c->mem + HEAD, src, len);
    pinio_view_release(&priv);
    return true;
}

/* The claim of a file read alone given up, its header-only segment
 * removed (lock 0 held: only its holder unlinks it), so that a process
 * that came to wait finds the name gone and claims the file anew. */
static void reg_drop(coop_file *c)
{
    if (c->reg_fd < 0)
        return;
    if (still_named(c->reg_fd, c->reg_path))
        unlink(c->reg_path);
    close(c->reg_fd);
    c->reg_fd = -1;
}

static void mark_failed(coop_file *c)
{
    if (c->got == GOT_READER && c->s)
        c->s->failed = true; /* removed at once by the free callback, never joined */
}

/* Locks the file's memory when RLIMIT_MEMLOCK leaves room: mlock of a
 * shared mapping locks the segment's pages for this process as it does an
 * arena's. A segment is locked already (join(), claim()) where it could. */
static bool lock_mem(const coop_file *c)
{
    if (c->got != GOT_PRIVATE && c->got != GOT_ALONE)
        return c->locked;
    return may_lock(c->len) && mlock(c->mem, c->len) == 0;
}

/* Reads [a, b) of the plan into c's memory (a segment being read or
 * private memory). */
static int read_into(coop_file *c, pinio_plan *plan, const pinio_exec_opts *eo0, size_t a,
                     size_t b, pinio__exec_tally_fn tally, bool *first, pinio_load_report *rep,
                     pinio_diag *diag)
{
    pinio_exec_opts eo = *eo0;
    eo.first_read = a;
    eo.nreads = b - a;
    pinio_exec_report er;
    /* Private memory is faulted in ahead of the reads, as the arena is:
     * without it each read faults and zeroes its huge pages on the
     * engine's thread, one after another, and a lone reader took about
     * twice the arena's time with the same page count. */
    pinio__faulter fa = {0};
    if (c->got == GOT_PRIVATE || c->got == GOT_ALONE)
        pinio__faulter_start(&fa, c->mem, c->len);
    int rc = pinio_plan_execute(plan, &coop_dest, c, &eo, &er, diag);
    pinio__faulter_stop(&fa);
    if (rc == 0)
        tally(&er, rep, first);
    return rc;
}

static int one_file(pinio_plan *plan, uint32_t f, const pinio_load_opts *o,
                    const pinio_exec_opts *eo, pinio__fmem *m, pinio__exec_tally_fn tally,
                    bool *first, pinio_load_report *rep, pinio_diag *diag)
{
    size_t a, b;
    file_reads(plan, f, &a, &b);
    coop_file c = { .plan = plan, .f = f, .o = o, .reg_fd = -1 };
    if (plan->files[f].pub.object && ident_text(&plan->files[f], c.text, sizeof(c.text)) < 0)
        c.text[0] = '\0'; /* refused() did not select it: acquire() says so */
    ident_of(&plan->files[f], c.text, &c.id);
    c.lo = plan->layout.reads[a].offset;
    c.hi = plan->layout.reads[b - 1].offset + plan->layout.reads[b - 1].len;
    int rc = acquire(&c);
    if (rc == 0 && (c.got == GOT_PRIVATE || c.got == GOT_ALONE))
        rc = private_mem(&c, diag);
    if (rc == 0 && c.got != GOT_SHARED)
        rc = read_into(&c, plan, eo, a, b, tally, first, rep, diag);
    if (rc < 0) {
        mark_failed(&c);
        reg_drop(&c);
        pinio_view_release(&c.view);
        return rc;
    }
    bool published = false;
    if (c.got == GOT_ALONE) {
        /* Every read landed and the engine found the file unchanged. Asked
         * for meanwhile (a process waits on byte 0): a segment for it. Not
         * asked for: the claim given up; one that asks from now on reads
         * the file itself (reads only once with PINIO_SHARE=eager). */
        if (wanted(&c)) {
            published = publish(&c);
            c.publish_failed = !published;
        }
        reg_drop(&c);
    }
    if (c.got == GOT_READER) {
        /* Every read landed and the engine found the file unchanged: the
         * marker, then byte 0 for the joiners waiting on it. */
        atomic_store_explicit(&c.head->state, STATE_COMPLETE, memory_order_release);
        hook(&c, PINIO_SHARE_COMPLETE);
        struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
        fcntl(c.s->fd, F_OFD_SETLK, &fl);
    }
    m->map_pinned = lock_mem(&c);
    size_t skip = c.got == GOT_PRIVATE || c.got == GOT_ALONE ? 0 : HEAD;
    rc = pinio_view_slice(&c.view, skip, c.len, &m->map);
    pinio_view_release(&c.view);
    if (rc < 0)
        return rc;
    m->map_off = c.seg_lo;
    if (c.got == GOT_PRIVATE) {
        m->share_why[0] = '\0';
        pinio__appendf(m->share_why, sizeof(m->share_why), "private: %s", c.why);
    } else if (c.got == GOT_ALONE) {
        m->alone = true;
        m->share_why[0] = '\0';
        if (c.publish_failed)
            pinio__appendf(m->share_why, sizeof(m->share_why),
                           "read here alone: asked for, not shared: %s", c.why);
        else
            snprintf(m->share_why, sizeof(m->share_why),
                     "read here alone: no other process asked for it while it read");
    } else {
        rep->share_bytes += c.len;
        if (c.got == GOT_SHARED) {
            m->shared_in = true;
            rep->files_shared++;
            snprintf(m->share_why, sizeof(m->share_why), "shared: read by process %d%s", c.pid,
                     c.early_used ? ", mapped while it read" : "");
        } else {
            rep->files_share_read++;
            snprintf(m->share_why, sizeof(m->share_why), "read here, for the node's other loads%s",
                     published ? " (asked for while it read alone)" : "");
        }
    }
    return 0;
}

/* The report's share line: per file, or once for all when they agree. */
static void share_line(const pinio_plan *plan, const pinio__fmem *fm, pinio_load_report *rep)
{
    rep->share[0] = '\0';
    for (size_t f = 0; f < plan->nfiles; f++) {
        const char *w = fm[f].mode == PINIO_MEMORY_MAPPED ? "mapped: the page cache is shared"
                        : fm[f].coop                    ? fm[f].share_why
                        : fm[f].share_why[0]            ? NULL
                                                        : "nothing read";
        char buf[128];
        if (!w) {
            snprintf(buf, sizeof(buf), "private: %s", fm[f].share_why);
            w = buf;
        }
        if (plan->nfiles == 1)
            snprintf(rep->share, sizeof(rep->share), "%s", w);
        else
            pinio__appendf(rep->share, sizeof(rep->share), "%sfile %zu %s", f ? "; " : "", f, w);
    }
}

int pinio__coop_run(pinio_plan *plan, const pinio_load_opts *o, const pinio_exec_opts *eo,
                    pinio__fmem *fm, pinio__exec_tally_fn tally, bool *first,
                    pinio_load_report *rep, pinio_diag *diag)
{
    int rc = 0;
    /* The coop files in the staggered order (exec.c, pinio__file_at). */
    size_t ncoop = 0, *order = malloc((plan->nfiles ? plan->nfiles : 1) * sizeof(*order));
    if (!order)
        return -ENOMEM;
    for (size_t f = 0; f < plan->nfiles; f++)
        if (fm[f].coop)
            order[ncoop++] = f;
    uint64_t rank = 0;
    uint32_t ranks = 0;
    bool rotated = pinio__files_rotated(eo, &rank, &ranks);
    for (size_t k = 0; k < ncoop && rc == 0; k++) {
        size_t f = order[rotated ? pinio__file_at(k, ncoop, rank, ranks) : k];
        rc = one_file(plan, (uint32_t)f, o, eo, &fm[f], tally, first, rep, diag);
    }
    free(order);
    share_line(plan, fm, rep);
    return rc;
}

void pinio__coop_memory_line(const pinio_plan *plan, const pinio__fmem *fm,
                             pinio_load_report *rep)
{
    /* Segments, then the files read alone into private memory. */
    for (int alone = 0; alone < 2; alone++) {
        uint64_t bytes = 0;
        bool all = true;
        for (size_t f = 0; f < plan->nfiles; f++)
            if (fm[f].coop && fm[f].map.len && fm[f].alone == (alone == 1)) {
                bytes += fm[f].map.len;
                all = all && fm[f].map_pinned;
            }
        if (!bytes)
            continue;
        pinio_sysinfo si;
        pinio_sys_probe(&si);
        const char *lock = all ? "locked in RAM (mlock)"
                           : si.registrable != PINIO_UNLIMITED && si.registrable < bytes
                               ? "not locked: RLIMIT_MEMLOCK is smaller than them; raise it with "
                                 "ulimit -l or grant CAP_IPC_LOCK"
                               : "not locked: mlock failed";
        pinio__appendf(rep->memory, sizeof(rep->memory),
                       "; %llu bytes in %s (see share), %s, not registered with io_uring (read "
                       "by plain O_DIRECT)",
                       (unsigned long long)bytes,
                       alone ? "memory of their own, read alone" : "segments of their own", lock);
    }
}
