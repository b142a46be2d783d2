/*
 * The file sink: every input file of the plan copied, whole, under a
 * directory: what `pinio stage` does before a job, at storage speed.
 *
 *   open:   per file (and the index, when the plan has one), a temporary
 *           next to its target, created O_EXCL|O_NOFOLLOW (a name planted
 *           there, a symlink above all, is refused, never followed) and
 *           marked as stage's, after removing what a killed stage left
 *           (src/base/stale.h); O_DIRECT where the file system takes it
 *   chunk:  the bytes the plan did not read before this chunk (header,
 *           holes) copied from the plan's descriptor, then the chunk
 *           queued to the writer thread, which writes it from its slot;
 *           with verify, both folded into the file's checksum
 *   slot_wait: until every write from that slot is done
 *   finish: the tail, truncate to size, fsync; the index copied the same
 *           way; with verify, every temporary read back and compared;
 *           then the checkpoint published as one step (below)
 *   close:  after a failure the temporaries and the folders made go
 *
 * Publication: nothing is renamed until every temporary is complete,
 * durable and (with verify) read back. Then the existing targets (only
 * with `overwrite`) are set aside as .pinio-stage-old-PID-NAME, the index
 * first, and the new files renamed into place, the index last, so that
 * no moment has an index naming shards of another checkpoint. A rename
 * that fails undoes the others: the new files go back to their
 * temporaries and the old ones to their names. Only if an undo fails too,
 * or the process dies within the renames, is an old file left under its
 * set-aside name; the error names it, and pinio never removes it.
 *
 * Names: a shard keeps its place relative to its index (a weight_map entry
 * "sub/x.safetensors" lands in DIR/sub/), so the copied index names the
 * copies; other files keep their base name, read from the descriptor for
 * a path under /proc/self/fd or /dev/fd (whose base name is a number).
 *
 * Why the chunk is written rounded up to 4 KiB: O_DIRECT wants whole
 * blocks, and the slot holds the read's full aligned length (the plan's
 * reads are multiples of its alignment, at least 4 KiB). Bytes past the
 * chunk's `len` are overwritten by what follows, or cut by the final
 * truncate. One descriptor per file: O_DIRECT is switched off (fcntl)
 * around the unaligned fills, so that a checkpoint of many shards needs
 * few descriptors.
 *
 * Why a writer thread: the stream fetches its next batch while this one
 * is written (the stream halves its batches for a sink with slot_wait),
 * so a download and the disk overlap instead of taking turns, and every
 * batch but the first no longer waits for the writes of the one before.
 * One thread, jobs in the order the chunks came: a chunk's O_DIRECT write
 * rounded up to a block may run past its end into the next chunk's
 * bytes, which must land after it. A fill (header, hole, tail) runs on
 * the caller's thread, after the file's queued writes are done: it turns
 * O_DIRECT off on the descriptor they share, and may overwrite the
 * rounded-up end of the last one. The first failed write is kept and
 * returned by the next chunk, slot_wait or finish; the jobs after it are
 * dropped. Each side keeps its own checksum of a file (`sum`: fills,
 * `wsum`: the writer's), added up once the file's writes are done.
 *
 * The checksum is a position-keyed sum over 64-bit words: the sum of
 * key(word index) x word, with odd keys. It is taken only with verify,
 * the one reader of it: it passes over every byte copied, and a stage
 * without verify paid that on the writer thread for nothing. It is linear in each word, so a
 * word split between a chunk and a hole-fill adds up the same, and the
 * read back can cut the file anywhere. It catches lost, shifted and
 * corrupted words; it is no defence against an adversary (SHA-256 is
 * pinio_load --verify's job).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/sink.h"
#include "src/base/stale.h"
#include "src/s3/client.h"
#include "uring/faults.h"

#define BLOCK 4096u
#define COPY_BUF ((size_t)8 << 20)
/* The mark of stage's temporaries, by which a later stage knows them. */
#define STAGE_XATTR "user.pinio.stage"
#define TMP_PREFIX ".pinio-stage-"
#define OLD_PREFIX ".pinio-stage-old-"

typedef struct out_file {
    char *dst, *tmp, *old; /* target; temporary; where an existing target is set aside */
    int fd;                /* the temporary, read-write; O_DIRECT while `direct` */
    bool direct;
    int src;               /* the plan's validated descriptor (not ours), or the index's */
    bool own_src;          /* `src` is ours to close (the index) */
    const char *src_path;
    uint64_t size;         /* source size: the copy's size */
    uint64_t written;      /* bytes [0, written) are in place */
    uint64_t sum;          /* of the fills (the caller's thread) */
    uint64_t wsum;         /* of the chunks (the writer's), read once `pending` is 0 */
    size_t pending;        /* writes queued or in progress (under the writer's lock) */
    bool created;          /* `tmp` is ours (O_EXCL made it) */
    bool aside, in_place;  /* publication: old target set aside; new file renamed in */
} out_file;

/* A chunk to write: `wlen` bytes from `data` at `off` (`len` rounded up
 * to a block under O_DIRECT), `len` of them in the checksum. */
typedef struct wjob {
    size_t file;
    const uint8_t *data;
    size_t len, wlen;
    uint64_t off;
    unsigned slot;
    uint64_t waits, slot_waited; /* writer.waits and .waited[slot] when queued */
} wjob;

/* stagewritehold (uring/faults.h): where the held write stands. */
enum { HOLD_OFF, HOLD_ARMED, HOLD_HELD, HOLD_DONE };

typedef struct writer {
    pthread_t thread;
    bool started, quit;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* a job queued or done, the hold's state changed, quit */
    wjob *q;               /* a ring of `cap` jobs, `len` of them from `head` */
    size_t cap, head, len;
    size_t *pending;       /* per slot: its writes queued or in progress */
    uint64_t *waited;      /* per slot: `waits` when the stream last waited for it */
    unsigned nslots;
    uint64_t waits;        /* slot_wait calls so far */
    int err;               /* the first failed write (its words in `diag`) */
    pinio_diag diag;
    int hold;              /* HOLD_*; the held job's slot and `waits` when queued: */
    unsigned hold_slot;
    uint64_t hold_from;
    const char *hold_path; /* and its file and offset, for the message */
    uint64_t hold_off;
} writer;

/* stagewritehold: job `k`, queued after the held one, is a read the
 * stream claimed (waited for its slot) after it had handed the held
 * chunk over: fetched while that write was not done. */
static bool hold_answered(const writer *w, const wjob *k)
{
    return k->slot != w->hold_slot && k->slot_waited > w->hold_from;
}

typedef struct filesink {
    pinio_sink_file_cfg cfg;
    char *dir;
    const pinio_plan *plan;
    out_file *f;
    size_t n;              /* files opened so far (the index last, when there is one) */
    size_t nfiles;         /* the plan's files; f[nfiles] is the index when n > nfiles */
    char **made;           /* folders made for subfolder shards, outermost first */
    size_t nmade;
    uint8_t *buf;          /* COPY_BUF, 4 KiB aligned */
    bool published;
    pinio__faults *faults; /* PINIO_FAULTS (uring/faults.h): stagecorrupt, stagerename */
    uint64_t renames;      /* publication renames so far, for stagerename@N */
    writer w;
} filesink;

static inline uint64_t key(uint64_t w)
{
    w = (w + 1) * 0x9E3779B97F4A7C15ull;
    w ^= w >> 29;
    return w | 1;
}

/* Adds bytes [off, off + len) of a file, held at `p`, to `*sum`. */
static void sum_add(uint64_t *sum, uint64_t off, const uint8_t *p, size_t len)
{
    uint64_t s = *sum;
    while (len && (off & 7)) { /* leading bytes in their lanes */
        s += key(off >> 3) * ((uint64_t)*p << (8 * (off & 7)));
        off++, p++, len--;
    }
    for (; len >= 8; off += 8, p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        s += key(off >> 3) * w;
    }
    for (; len; off++, p++, len--)
        s += key(off >> 3) * ((uint64_t)*p << (8 * (off & 7)));
    *sum = s;
}

static int fail(pinio_diag *diag, int rc, const char *path, uint64_t off, const char *what)
{
    pinio_diag_set_at(diag, rc, path, off, "file sink: %s: %s", what, pinio_strerror(rc));
    return rc;
}

static int write_all(int fd, const uint8_t *p, size_t len, uint64_t off, const char *path,
                     pinio_diag *diag)
{
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(diag, n < 0 ? -errno : -EIO, path, off, "write");
        p += n, off += (uint64_t)n, len -= (size_t)n;
    }
    return 0;
}

/* Sets or clears O_DIRECT on the temporary (the unaligned fills go
 * buffered). */
static int set_direct(out_file *f, bool on, pinio_diag *diag)
{
    int fl = fcntl(f->fd, F_GETFL);
    if (fl < 0 || fcntl(f->fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) != 0)
        return fail(diag, -errno, f->dst, PINIO_DIAG_NO_OFFSET,
                    on ? "turn O_DIRECT back on" : "turn O_DIRECT off");
    return 0;
}

/* Copies source bytes [f->written, upto) that the plan did not read. */
static int fill_to(filesink *s, out_file *f, uint64_t upto, pinio_diag *diag)
{
    if (f->written >= upto)
        return 0;
    int rc = f->direct ? set_direct(f, false, diag) : 0;
    while (rc == 0 && f->written < upto) {
        size_t want = upto - f->written < COPY_BUF ? (size_t)(upto - f->written) : COPY_BUF;
        size_t i = (size_t)(f - s->f);
        /* A plan file through the plan (a descriptor, or an object's ranged
         * GETs pinned to the validated version); the index by its own. */
        int64_t n = i < s->nfiles ? pinio_plan_file_read(s->plan, i, s->buf, want, f->written, diag)
                                  : pread(f->src, s->buf, want, (off_t)f->written);
        if (i >= s->nfiles && n < 0 && errno == EINTR)
            continue;
        if (n < 0 && i < s->nfiles) {
            rc = (int)n;
            break;
        }
        if (n <= 0) {
            rc = fail(diag, n < 0 ? -errno : PINIO_ECHANGED, f->src_path, f->written,
                      n < 0 ? "read" : "source shorter than when it was planned");
            break;
        }
        rc = write_all(f->fd, s->buf, (size_t)n, f->written, f->tmp, diag);
        if (rc < 0)
            break;
        if (s->cfg.verify)
            sum_add(&f->sum, f->written, s->buf, (size_t)n);
        f->written += (uint64_t)n;
    }
    if (f->direct) {
        int d = set_direct(f, true, diag);
        rc = rc ? rc : d;
    }
    return rc;
}

/* With the lock held: the held write (stagewritehold) goes on. `overlap`
 * false: the stream waited for it instead of reading on, which the fault
 * is there to catch, so the stage fails saying so. */
static void hold_release(writer *w, bool overlap)
{
    if (w->hold != HOLD_HELD)
        return;
    w->hold = HOLD_DONE;
    if (!overlap && !w->err) {
        w->err = -EDEADLK;
        pinio_diag_set_at(&w->diag, w->err, w->hold_path, w->hold_off,
                          "file sink: stagewritehold: the stream waited for the held write "
                          "(slot %u) before it read into another slot: its reads do not "
                          "overlap the writes", w->hold_slot);
    }
    pthread_cond_broadcast(&w->cv);
}

static void *writer_main(void *arg)
{
    filesink *s = arg;
    writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->len && !w->quit)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->len)
            break;
        wjob j = w->q[w->head];
        /* stagewritehold: the first write from a slot the stream had
         * reused is held until a job queued after it answers for the
         * overlap (hold_answered), maybe one queued already. */
        if (w->hold == HOLD_ARMED && j.slot_waited && !w->err) {
            w->hold = HOLD_HELD;
            w->hold_slot = j.slot;
            w->hold_from = j.waits;
            w->hold_path = s->f[j.file].tmp;
            w->hold_off = j.off;
            for (size_t k = 1; k < w->len && w->hold == HOLD_HELD; k++)
                if (hold_answered(w, &w->q[(w->head + k) % w->cap]))
                    w->hold = HOLD_DONE;
            pthread_cond_broadcast(&w->cv); /* a waiter there already: no overlap */
            while (w->hold == HOLD_HELD && !w->quit)
                pthread_cond_wait(&w->cv, &w->mu);
        }
        w->head = (w->head + 1) % w->cap;
        w->len--;
        bool skip = w->err != 0; /* after a failure, or a stop: dropped */
        pthread_mutex_unlock(&w->mu);
        out_file *f = &s->f[j.file];
        pinio_diag d = { .offset = PINIO_DIAG_NO_OFFSET };
        int rc = skip ? 0 : write_all(f->fd, j.data, j.wlen, j.off, f->tmp, &d);
        if (!skip && rc == 0 && s->cfg.verify)
            sum_add(&f->wsum, j.off, j.data, j.len);
        pthread_mutex_lock(&w->mu);
        if (rc < 0 && !w->err) {
            w->err = rc;
            w->diag = d;
        }
        w->pending[j.slot]--;
        f->pending--;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Until `*count` (a slot's or a file's writes, under the lock) is 0; then
 * the first failed write, if any. `slot`: the slot waited for, or -1. */
static int writer_wait(filesink *s, const size_t *count, int slot, pinio_diag *diag)
{
    writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    if (slot >= 0)
        w->waited[slot] = ++w->waits;
    /* While a write is held, every write not done is at or behind it; the
     * hold may begin while this waits (the writer wakes it then). */
    while (*count) {
        if (w->hold == HOLD_HELD)
            hold_release(w, false);
        else
            pthread_cond_wait(&w->cv, &w->mu);
    }
    int rc = w->err;
    if (rc && diag)
        *diag = w->diag;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Queues a chunk's write, or answers the first failed write. */
static int writer_queue(filesink *s, out_file *f, const wjob *j, pinio_diag *diag)
{
    writer *w = &s->w;
    pthread_mutex_lock(&w->mu);
    int rc = w->err;
    if (rc && diag)
        *diag = w->diag;
    if (rc == 0 && w->len == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        wjob *q = malloc(cap * sizeof(*q));
        if (q) {
            for (size_t i = 0; i < w->len; i++)
                q[i] = w->q[(w->head + i) % w->cap];
            free(w->q);
            w->q = q;
            w->cap = cap;
            w->head = 0;
        } else {
            rc = fail(diag, -ENOMEM, f->tmp, j->off, "queue the write");
        }
    }
    if (rc == 0) {
        wjob *k = &w->q[(w->head + w->len++) % w->cap];
        *k = *j;
        k->waits = w->waits;
        k->slot_waited = w->waited[j->slot];
        w->pending[j->slot]++;
        f->pending++;
        if (w->hold == HOLD_HELD && hold_answered(w, k))
            hold_release(w, true);
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

static int writer_start(filesink *s, unsigned nslots, pinio_diag *diag)
{
    writer *w = &s->w;
    w->nslots = nslots;
    w->pending = calloc(nslots ? nslots : 1, sizeof(*w->pending));
    w->waited = calloc(nslots ? nslots : 1, sizeof(*w->waited));
    if (!w->pending || !w->waited)
        return -ENOMEM;
    if (s->faults && s->faults->stagewritehold)
        w->hold = HOLD_ARMED;
    int e = pthread_create(&w->thread, NULL, writer_main, s);
    if (e) {
        pinio_diag_set_at(diag, -e, s->dir, PINIO_DIAG_NO_OFFSET,
                          "file sink: cannot start its writer thread: %s", pinio_strerror(-e));
        return -e;
    }
    w->started = true;
    return 0;
}

/* The thread ended; what was still queued (only after a failure: the
 * stream waits for every slot first) is dropped, not written. */
static void writer_stop(filesink *s)
{
    writer *w = &s->w;
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->quit = true;
        if (!w->err)
            w->err = -ECANCELED;
        w->hold = w->hold == HOLD_HELD ? HOLD_DONE : w->hold;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        w->started = false;
    }
    free(w->q);
    free(w->pending);
    free(w->waited);
}

static char *join(const char *dir, const char *name, const char *prefix)
{
    size_t n = strlen(dir) + strlen(name) + strlen(prefix) + 32;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s%s", dir, prefix, name);
    return p;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* `path` with `prefix` put before its base name: DIR/sub/PREFIXx. */
static char *beside(const char *path, const char *prefix)
{
    const char *b = base_name(path);
    size_t dl = (size_t)(b - path);
    size_t n = strlen(path) + strlen(prefix) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%.*s%s%s", (int)dl, path, prefix, b);
    return p;
}

/* The name input `i` takes under the target directory, written to `out`:
 * a shard's path relative to its index's folder; else the base name, the
 * real one for a path under /proc/self/fd or /dev/fd. */
static int name_of(filesink *s, const pinio_plan_file *pf, char *out, size_t n,
                   pinio_diag *diag)
{
    pinio_plan_info pi;
    pinio_plan_get_info(s->plan, &pi);
    const char *rel = NULL;
    if (pi.index_path) {
        const char *slash = strrchr(pi.index_path, '/');
        size_t dl = slash ? (size_t)(slash - pi.index_path) + 1 : 0;
        if (strncmp(pf->path, pi.index_path, dl) == 0)
            rel = pf->path + dl;
    }
    if (rel) {
        /* A weight_map entry: no way out of the target, no odd parts. */
        for (const char *c = rel;; c += strcspn(c, "/") + 1) {
            size_t len = strcspn(c, "/");
            if (!len || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
                return fail(diag, -EINVAL, pf->path, PINIO_DIAG_NO_OFFSET,
                            "shard name is not a plain path under the index's folder");
            if (!c[len])
                break;
        }
        snprintf(out, n, "%s", rel);
        return 0;
    }
    if (strncmp(pf->path, "/proc/", 6) != 0 && strncmp(pf->path, "/dev/fd/", 8) != 0) {
        snprintf(out, n, "%s", base_name(pf->path));
        return 0;
    }
    char link[64], real[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", pf->fd);
    ssize_t len = readlink(link, real, sizeof(real) - 1);
    if (len > 0)
        real[len] = '\0';
    if (len <= 0 || real[0] != '/' || strstr(real, " (deleted)"))
        return fail(diag, -EINVAL, pf->path, PINIO_DIAG_NO_OFFSET,
                    "cannot tell the file's name to copy it under (give its path instead)");
    snprintf(out, n, "%s", base_name(real));
    return 0;
}

/* Makes the folders of `rel` under the target directory, remembering the
 * ones it made (removed again after a failure). */
static int make_dirs(filesink *s, const char *rel, pinio_diag *diag)
{
    for (const char *c = strchr(rel, '/'); c; c = strchr(c + 1, '/')) {
        char *d = malloc(strlen(s->dir) + (size_t)(c - rel) + 2);
        char **m = realloc(s->made, (s->nmade + 1) * sizeof(*m));
        if (m)
            s->made = m;
        if (!d || !m) {
            free(d);
            return -ENOMEM;
        }
        sprintf(d, "%s/%.*s", s->dir, (int)(c - rel), rel);
        if (mkdir(d, 0755) == 0) {
            s->made[s->nmade++] = d;
            continue;
        }
        int e = errno;
        struct stat st;
        int rc = e != EEXIST ? -e : stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
        if (rc < 0)
            fail(diag, rc, d, PINIO_DIAG_NO_OFFSET, "create the shard's folder");
        free(d);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Target, temporary and set-aside names of `rel`; the temporary created
 * (after the stale ones of a killed stage are removed) and marked. */
static int open_out(filesink *s, out_file *f, const char *rel, pinio_diag *diag)
{
    f->fd = -1;
    char pre[48], old[64];
    snprintf(pre, sizeof(pre), TMP_PREFIX "%ld-", (long)getpid());
    snprintf(old, sizeof(old), OLD_PREFIX "%ld-", (long)getpid());
    f->dst = join(s->dir, rel, "");
    f->tmp = f->dst ? beside(f->dst, pre) : NULL;
    f->old = f->dst ? beside(f->dst, old) : NULL;
    char *sweep = f->dst ? beside(f->dst, TMP_PREFIX) : NULL;
    char *suffix = malloc(strlen(base_name(rel)) + 2);
    if (!f->tmp || !f->old || !sweep || !suffix) {
        free(sweep);
        free(suffix);
        return -ENOMEM;
    }
    sprintf(suffix, "-%s", base_name(rel));
    /* DIR/.pinio-stage-<pid>-NAME: the prefix as base, the name as suffix */
    *strrchr(sweep, '/') = '\0';
    char *sweep_path = join(sweep, TMP_PREFIX, "");
    if (sweep_path)
        pinio__remove_stale(sweep_path, "", suffix, STAGE_XATTR);
    free(sweep_path);
    free(sweep);
    free(suffix);
    struct stat st;
    if (!s->cfg.overwrite && lstat(f->dst, &st) == 0)
        return fail(diag, -EEXIST, f->dst, PINIO_DIAG_NO_OFFSET,
                    "target exists (overwrite it with --force)");
    if (lstat(f->dst, &st) == 0 && S_ISDIR(st.st_mode))
        return fail(diag, -EISDIR, f->dst, PINIO_DIAG_NO_OFFSET,
                    "target exists and is a folder, not a file");
    /* O_EXCL never follows a symlink planted at the name, nor reuses a
     * file there; O_NOFOLLOW says so twice. */
    f->fd = open(f->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int e = -errno;
        return fail(diag, e, f->tmp, PINIO_DIAG_NO_OFFSET,
                    e == -EEXIST ? "create the temporary: something already has its name"
                                 : "create the temporary");
    }
    f->created = true;
    (void)pinio__stale_mark(f->fd, STAGE_XATTR); /* best effort: unmarked is never swept */
    if (s->cfg.direct != PINIO_DIRECT_OFF) {
        int fl = fcntl(f->fd, F_GETFL);
        f->direct = fl >= 0 && fcntl(f->fd, F_SETFL, fl | O_DIRECT) == 0;
        if (!f->direct && s->cfg.direct == PINIO_DIRECT_ON)
            return fail(diag, -errno, f->dst, PINIO_DIAG_NO_OFFSET,
                        errno == EINVAL ? "the target's file system refuses O_DIRECT"
                                        : "set O_DIRECT");
    }
    return 0;
}

static int open_file(filesink *s, size_t i, pinio_diag *diag)
{
    const pinio_plan_file *pf = pinio_plan_file_at(s->plan, i);
    out_file *f = &s->f[i];
    char rel[4096];
    f->src = pf->fd;
    f->src_path = pf->path;
    f->size = pf->size;
    int rc = name_of(s, pf, rel, sizeof(rel), diag);
    for (size_t j = 0; rc == 0 && j < i; j++)
        if (strcmp(s->f[j].dst + strlen(s->dir) + 1, rel) == 0)
            rc = fail(diag, -EINVAL, pf->path, PINIO_DIAG_NO_OFFSET,
                      "two inputs would be copied to the same name");
    if (rc == 0)
        rc = make_dirs(s, rel, diag);
    return rc ? rc : open_out(s, f, rel, diag);
}

/* The index: copied as it is (its shards keep their relative names). */
static int open_index(filesink *s, const char *path, pinio_diag *diag)
{
    out_file *f = &s->f[s->nfiles];
    f->fd = -1;
    const void *image;
    size_t len;
    if (pinio_plan_get_index_image(s->plan, &image, &len) == 0) {
        /* An index that was an object: the image the plan parsed, through
         * a memory file, so that it is copied and checked as a file is. */
        f->src = memfd_create("pinio-stage-index", MFD_CLOEXEC);
        if (f->src >= 0 && pwrite(f->src, image, len, 0) != (ssize_t)len) {
            close(f->src);
            f->src = -1;
            errno = errno ? errno : EIO;
        }
    } else {
        f->src = open(path, O_RDONLY | O_CLOEXEC);
    }
    f->own_src = f->src >= 0;
    f->src_path = path;
    struct stat st;
    if (f->src < 0 || fstat(f->src, &st) != 0)
        return fail(diag, -errno, path, PINIO_DIAG_NO_OFFSET, "open the index");
    f->size = (uint64_t)st.st_size;
    return open_out(s, f, base_name(path), diag);
}

static void file_close(void *priv, bool ok)
{
    filesink *s = priv;
    writer_stop(s); /* before the descriptors it writes to go */
    for (size_t i = 0; i < s->n; i++) {
        out_file *f = &s->f[i];
        if (f->fd >= 0)
            close(f->fd);
        if (f->own_src)
            close(f->src);
        if (!ok && !s->published && f->created)
            unlink(f->tmp); /* a name O_EXCL gave us, not one found there */
        free(f->dst);
        free(f->tmp);
        free(f->old);
    }
    for (size_t i = s->nmade; !ok && !s->published && i-- > 0;)
        (void)rmdir(s->made[i]); /* when empty */
    for (size_t i = 0; i < s->nmade; i++)
        free(s->made[i]);
    free(s->made);
    free(s->f);
    free(s->buf);
    free(s->dir);
    free(s->faults);
    pthread_mutex_destroy(&s->w.mu);
    pthread_cond_destroy(&s->w.cv);
}

static int file_open(void *priv, const void *cfg, const pinio_sink_setup *su, pinio_diag *diag)
{
    filesink *s = priv;
    const pinio_sink_file_cfg *c = cfg;
    if (!c || !c->dir) {
        pinio_diag_set(diag, -EINVAL, "file sink: no target directory (pinio_sink_file_cfg.dir)");
        return -EINVAL;
    }
    int r = pinio__s3_refuse_write(c->dir, diag);
    if (r < 0)
        return r;
    struct stat st;
    if (stat(c->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int rc = stat(c->dir, &st) != 0 ? -errno : -ENOTDIR;
        return fail(diag, rc, c->dir, PINIO_DIAG_NO_OFFSET, "target directory");
    }
    pinio_plan_slice_info si;
    pinio_plan_get_slice_info(su->plan, &si);
    for (size_t i = 0; si.sliced && pinio_plan_tensor_at(su->plan, i); i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(su->plan, i);
        if (t->sliced) {
            pinio_diag_set_at(diag, -EINVAL, pinio_plan_file_at(su->plan, t->file)->path,
                              PINIO_DIAG_NO_OFFSET,
                              "file sink: tensor '%s' is sliced (split), and the file sink "
                              "copies whole files", t->name);
            return -EINVAL;
        }
    }
    s->cfg = *c;
    s->plan = su->plan;
    int rc = pinio__faults_parse(getenv("PINIO_FAULTS"), &s->faults, diag);
    if (rc < 0)
        return rc;
    pthread_mutex_init(&s->w.mu, NULL);
    pthread_cond_init(&s->w.cv, NULL);
    pinio_plan_info pi;
    pinio_plan_get_info(su->plan, &pi);
    s->nfiles = pi.files;
    s->dir = strdup(c->dir);
    s->f = calloc(pi.files + 1, sizeof(*s->f));
    rc = s->dir && s->f && posix_memalign((void **)&s->buf, BLOCK, COPY_BUF) == 0 ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < pi.files; i++) {
        s->n = i + 1;
        rc = open_file(s, i, diag);
    }
    if (rc == 0 && pi.index_path) {
        s->n = pi.files + 1;
        rc = open_index(s, pi.index_path, diag);
    }
    if (rc == 0)
        rc = writer_start(s, su->nslots, diag);
    if (rc < 0)
        file_close(s, false);
    return rc;
}

static int file_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *diag)
{
    filesink *s = priv;
    out_file *f = &s->f[c->file];
    int rc = 0;
    if (f->written < c->file_offset) { /* a fill: after the file's writes */
        rc = writer_wait(s, &f->pending, -1, diag);
        if (rc == 0)
            rc = fill_to(s, f, c->file_offset, diag);
        if (rc < 0)
            return rc;
    }
    wjob j = { .file = c->file, .data = c->data, .len = c->len, .wlen = c->len,
               .off = c->file_offset, .slot = c->slot };
    if (f->direct) /* whole blocks; the slot holds them (see the banner) */
        j.wlen = (j.len + BLOCK - 1) / BLOCK * BLOCK;
    rc = writer_queue(s, f, &j, diag);
    if (rc == 0)
        f->written = c->file_offset + c->len;
    return rc;
}

static int file_slot_wait(void *priv, unsigned slot, pinio_diag *diag)
{
    filesink *s = priv;
    if (slot >= s->w.nslots) {
        pinio_diag_set(diag, -EINVAL, "file sink: no slot %u (the ring has %u)", slot,
                       s->w.nslots);
        return -EINVAL;
    }
    return writer_wait(s, &s->w.pending[slot], (int)slot, diag);
}

/* stagecorrupt@N: one byte of the N-th copy inverted on disk, after its
 * checksum was taken (what a bad disk or a bad write path would do). */
static int fault_corrupt(filesink *s, size_t i, out_file *f)
{
    if (!s->faults || s->faults->stagecorrupt != i + 1 || !f->size)
        return 0;
    uint8_t b;
    off_t at = (off_t)(f->size / 2);
    int rc = f->direct ? set_direct(f, false, NULL) : 0;
    bool ok = rc == 0 && pread(f->fd, &b, 1, at) == 1 && (b ^= 0xff, pwrite(f->fd, &b, 1, at) == 1) &&
              fsync(f->fd) == 0;
    return ok ? 0 : -EIO;
}

/* Reads the temporary of `f` back whole and compares its checksum with
 * the one of the bytes that streamed. */
static int verify_one(filesink *s, const out_file *f, pinio_diag *diag)
{
    int fd = open(f->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT);
    if (fd < 0 && errno == EINVAL) {
        fd = open(f->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) /* the copy's own pages would answer from the cache */
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    if (fd < 0)
        return fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "open for verification");
    struct stat a, b;
    if (fstat(fd, &a) != 0 || fstat(f->fd, &b) != 0 || a.st_ino != b.st_ino ||
        a.st_dev != b.st_dev) {
        close(fd);
        return fail(diag, PINIO_ECHANGED, f->tmp, PINIO_DIAG_NO_OFFSET,
                    "the temporary was replaced before its verification");
    }
    uint64_t sum = 0, off = 0;
    int rc = 0;
    while (off < f->size) {
        ssize_t n = pread(fd, s->buf, COPY_BUF, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = fail(diag, n < 0 ? -errno : -EIO, f->tmp, off, "read back");
            break;
        }
        sum_add(&sum, off, s->buf, (size_t)n);
        off += (uint64_t)n;
    }
    close(fd);
    if (rc == 0 && sum != f->sum) {
        rc = -EIO;
        pinio_diag_set_at(diag, rc, f->dst, PINIO_DIAG_NO_OFFSET,
                          "file sink: verification failed: the copy's checksum %016llx differs "
                          "from the source's %016llx; nothing was published",
                          (unsigned long long)sum, (unsigned long long)f->sum);
    }
    return rc;
}

/* A publication rename, or the -EIO of a stagerename@N fault. */
static int rename_counted(filesink *s, const char *from, const char *to, unsigned flags)
{
    s->renames++;
    if (s->faults && s->faults->stagerename == s->renames) {
        errno = EIO;
        return -1;
    }
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, flags);
}

/* Undoes a publication that failed part way: the new files back to their
 * temporaries (close removes them), the old ones back to their names. An
 * undo that fails is added to `diag`'s message: the old file is then kept
 * under its set-aside name. */
static void unpublish(filesink *s, pinio_diag *diag)
{
    for (size_t i = s->n; i-- > 0;) {
        out_file *f = &s->f[i];
        if (f->in_place && (rename(f->dst, f->tmp) == 0 || unlink(f->dst) == 0))
            f->in_place = false;
    }
    for (size_t i = 0; i < s->n; i++) {
        out_file *f = &s->f[i];
        if (!f->aside)
            continue;
        if (!f->in_place && renameat2(AT_FDCWD, f->old, AT_FDCWD, f->dst, RENAME_NOREPLACE) == 0) {
            f->aside = false;
        } else if (diag) {
            size_t k = strnlen(diag->msg, sizeof(diag->msg) - 1);
            snprintf(diag->msg + k, sizeof(diag->msg) - k,
                     "; the previous %s could not be put back: it is kept as %s", f->dst, f->old);
        }
    }
}

/* The order of publication: shards, then the index (f[nfiles]) last. The
 * old files are set aside in the reverse order: the index first. */
static int publish(filesink *s, pinio_diag *diag)
{
    int rc = 0;
    for (size_t k = s->n; rc == 0 && k-- > 0;) {
        out_file *f = &s->f[k];
        struct stat st;
        if (!s->cfg.overwrite || lstat(f->dst, &st) != 0)
            continue;
        if (rename_counted(s, f->dst, f->old, RENAME_NOREPLACE) == 0)
            f->aside = true;
        else
            rc = fail(diag, -errno, f->dst, PINIO_DIAG_NO_OFFSET, "set the old file aside");
    }
    for (size_t k = 0; rc == 0 && k < s->n; k++) {
        out_file *f = &s->f[k];
        /* NOREPLACE: a file that appeared at the name meanwhile stays. */
        if (rename_counted(s, f->tmp, f->dst, RENAME_NOREPLACE) == 0)
            f->in_place = true;
        else
            rc = fail(diag, -errno, f->dst, PINIO_DIAG_NO_OFFSET,
                      errno == EEXIST ? "rename into place: a file appeared there meanwhile"
                                      : "rename into place");
    }
    if (rc < 0) {
        unpublish(s, diag);
        return rc;
    }
    s->published = true;
    return 0;
}

/* fsyncs every folder a file of the copy lives in, once each. */
static int sync_dirs(filesink *s, pinio_diag *diag)
{
    for (size_t i = 0; i < s->n; i++) {
        const char *d = s->f[i].dst;
        size_t dl = (size_t)(base_name(d) - d);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = (size_t)(base_name(s->f[j].dst) - s->f[j].dst) == dl &&
                   strncmp(s->f[j].dst, d, dl) == 0;
        if (seen)
            continue;
        char *dir = strndup(d, dl);
        int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        int rc = fd >= 0 && fsync(fd) == 0 ? 0 : dir ? -errno : -ENOMEM;
        if (fd >= 0)
            close(fd);
        if (rc < 0)
            fail(diag, rc, dir ? dir : s->dir, PINIO_DIAG_NO_OFFSET, "fsync directory");
        free(dir);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int file_finish(void *priv, pinio_diag *diag)
{
    filesink *s = priv;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->n; i++) {
        out_file *f = &s->f[i];
        rc = writer_wait(s, &f->pending, -1, diag);
        f->sum += f->wsum; /* the writer is done with this file */
        f->wsum = 0;
        if (rc == 0)
            rc = fill_to(s, f, f->size, diag);
        if (rc == 0 && ftruncate(f->fd, (off_t)f->size) != 0)
            rc = fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "truncate");
        if (rc == 0 && fsync(f->fd) != 0)
            rc = fail(diag, -errno, f->tmp, PINIO_DIAG_NO_OFFSET, "fsync");
        if (rc == 0)
            rc = fault_corrupt(s, i, f);
    }
    /* Verified before anything is published: a copy that does not read
     * back as it streamed never replaces a good file. */
    for (size_t i = 0; rc == 0 && s->cfg.verify && i < s->n; i++)
        rc = verify_one(s, &s->f[i], diag);
    if (rc == 0)
        rc = publish(s, diag);
    if (rc == 0)
        rc = sync_dirs(s, diag);
    /* Durable: the set-aside old files can go. */
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        if (s->f[i].aside && unlink(s->f[i].old) == 0)
            s->f[i].aside = false;
    return rc;
}

const pinio_sink pinio_sink_file = {
    .name = "file",
    .description = "copies every input file under a directory (temporaries, verified, then "
                   "published as one step)",
    .priv_size = sizeof(filesink),
    .open = file_open,
    .chunk = file_chunk,
    .slot_wait = file_slot_wait,
    .finish = file_finish,
    .close = file_close,
};
