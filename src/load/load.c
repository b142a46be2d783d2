/*
 * pinio_load: checkpoint loading (resident mode).
 *
 *   resolve inputs -> parse + validate every header -> select tensors
 *   (index allowlist, filters) -> plan aligned reads -> pinned arena ->
 *   engine bulk reads (O_DIRECT when cold, buffered when hot) -> check every
 *   wanted byte arrived and no file changed -> tensors as views.
 *
 * Nothing is handed out from a failed load: the checkpoint is built in
 * private and only returned once every check has passed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinio/load.h"
#include "pinio/pool.h"
#include "pinio/sys.h"
#include "src/numa/numa_internal.h"
#include "src/load/hash_internal.h"
#include "src/st/json_internal.h"
#include "src/load/load_internal.h"
#include "src/load/layout_internal.h"
#include "src/base/opts.h"
#include "src/base/view_internal.h"

/* A file whose wanted range is at least this cached is read buffered: the
 * page cache serves it at memory speed, roughly 10x O_DIRECT from a virtual
 * disk (PERFORMANCE.md), and O_DIRECT would bypass those pages. */
#define HOT_FRACTION 0.9

/* Holes up to this size between wanted ranges are read through rather than
 * skipped: one request costs more than reading 256 KiB, and the bound keeps
 * peak memory within "selected bytes + a little". */
#define MERGE_GAP ((uint64_t)256 << 10)

/* Largest request handed to the engine (it cuts it further into
 * request_size pieces); the granularity of progress reports. */
#define PIECE ((uint64_t)16 << 20)

/* Index files are small JSON maps; the cap stops a hostile one from making
 * us allocate without bound (same cap as a safetensors header). */
#define INDEX_MAX PINIO_ST_HEADER_MAX

typedef struct ld_file {
    char *path;
    pinio_st *st;
    int fd;                  /* plain descriptor: header, residency, size checks, hashing */
    uint64_t size;
    bool hot;                /* read through the page cache */
    pinio_ring_file *rf;     /* on the direct or the buffered ring */
    uint8_t sha[32];
    char sha_hex[65];
    bool hashed;
} ld_file;

typedef struct ld_index_entry {
    char *name;
    uint32_t shard;
    bool found;
} ld_index_entry;

struct pinio_checkpoint {
    ld_file *files;
    size_t nfiles;
    pinio_tensor *tensors;
    size_t ntensors;
    size_t *by_name;         /* tensor indexes sorted by name */
    char *names;             /* all tensor names, NUL-separated */
    uint64_t *shapes;        /* all dims */
    pinio_view arena;
    pinio_load_report report;
};

/* Appends to a NUL-terminated buffer, truncating silently: report lines. */
static void appendf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void appendf(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strnlen(buf, size);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void pinio_load_opts_default(pinio_load_opts *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->struct_size = sizeof(*opts);
    opts->node = PINIO_NODE_AUTO;
    opts->direct = PINIO_DIRECT_AUTO;
    opts->backend = PINIO_BACKEND_AUTO;
    opts->cache = PINIO_CACHE_AUTO;
}

/* ---- filters ---------------------------------------------------------- */

bool pinio__filter_match(const char *const *filters, size_t n, const char *name)
{
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        const char *f = filters[i];
        if (strpbrk(f, "*?[")) {
            if (fnmatch(f, name, 0) == 0)
                return true;
            continue;
        }
        size_t fl = strlen(f);
        if (strncmp(name, f, fl) != 0)
            continue;
        /* exact, or a prefix ending at a component boundary */
        if (name[fl] == '\0' || name[fl] == '.' || (fl && f[fl - 1] == '.'))
            return true;
    }
    return false;
}

/* ---- inputs ----------------------------------------------------------- */

typedef struct ld_inputs {
    char **paths;            /* shard paths in resolution order */
    size_t n, cap;
    ld_index_entry *index;   /* sorted by name; NULL without an index */
    size_t nindex;
    char *index_path;
} ld_inputs;

static int push_path(ld_inputs *in, char *p)
{
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 8;
        char **np = realloc(in->paths, cap * sizeof(*np));
        if (!np) {
            free(p);
            return -ENOMEM;
        }
        in->paths = np;
        in->cap = cap;
    }
    in->paths[in->n++] = p;
    return 0;
}

static char *join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + nl + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl + 1);
    return p;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t sl = strlen(s), xl = strlen(suffix);
    return sl >= xl && strcmp(s + sl - xl, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_index(const void *a, const void *b)
{
    return strcmp(((const ld_index_entry *)a)->name, ((const ld_index_entry *)b)->name);
}

static int read_whole(const char *path, size_t cap, char **out, size_t *len, pinio_diag *diag)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = -errno;
        pinio_diag_set(diag, e, "%s: cannot open: %s", path, pinio_strerror(e));
        return e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        pinio_diag_set(diag, -EINVAL, "%s: not a regular file", path);
        return -EINVAL;
    }
    if ((uint64_t)st.st_size > cap) {
        close(fd);
        pinio_diag_set(diag, PINIO_EFORMAT, "%s: index file too large (%lld bytes, limit %zu)", path,
              (long long)st.st_size, cap);
        return PINIO_EFORMAT;
    }
    size_t sz = (size_t)st.st_size;
    char *buf = malloc(sz + 1);
    if (!buf) {
        close(fd);
        return -ENOMEM;
    }
    size_t got = 0;
    while (got < sz) {
        ssize_t r = pread(fd, buf + got, sz - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? -errno : PINIO_ECHANGED;
            pinio_diag_set(diag, e, "%s: read failed at offset %zu: %s", path, got, pinio_strerror(e));
            free(buf);
            close(fd);
            return e;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[sz] = '\0';
    *out = buf;
    *len = sz;
    return 0;
}

static int find_shard(ld_inputs *in, const char *path, uint32_t *idx)
{
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->paths[i], path) == 0) {
            *idx = (uint32_t)i;
            return 0;
        }
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    int rc = push_path(in, copy);
    if (rc == 0)
        *idx = (uint32_t)(in->n - 1);
    return rc;
}

/* `{"metadata": {...}, "weight_map": {"tensor": "shard file", ...}}`; other
 * top-level keys are ignored, as transformers does. */
static int parse_index_buf(ld_inputs *in, const char *path, const char *buf, size_t len,
                           pinio_diag *diag)
{
    int rc;
    char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return -ENOMEM;
    size_t bad = 0;
    if (!pinio__utf8_check(buf, len, &bad)) {
        pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: invalid UTF-8 at byte %zu", path, bad);
        rc = PINIO_EFORMAT;
        goto out;
    }
    pinio__json j;
    pinio__json_init(&j, buf, len);
    bool first = true, have_map = false;
    pinio__json_str key;
    size_t cap = 0;
    if (pinio__json_peek(&j) != PINIO__JSON_OBJECT) {
        pinio__json_fail(&j, j.pos, "top level is not an object");
        goto json_err;
    }
    pinio__json_object_begin(&j);
    while ((rc = pinio__json_object_next(&j, &first, &key)) == 1) {
        if (!pinio__json_str_eq(&key, "weight_map", 10)) {
            if (pinio__json_skip(&j) < 0)
                goto json_err;
            continue;
        }
        if (have_map) {
            pinio__json_fail(&j, j.pos, "duplicate key weight_map");
            goto json_err;
        }
        have_map = true;
        if (pinio__json_peek(&j) != PINIO__JSON_OBJECT) {
            pinio__json_fail(&j, j.pos, "weight_map is not an object");
            goto json_err;
        }
        pinio__json_object_begin(&j);
        bool mfirst = true;
        pinio__json_str name, shard;
        while ((rc = pinio__json_object_next(&j, &mfirst, &name)) == 1) {
            size_t at = j.pos;
            if (pinio__json_peek(&j) != PINIO__JSON_STRING) {
                pinio__json_fail(&j, at, "weight_map value is not a string");
                goto json_err;
            }
            if (pinio__json_string(&j, &shard) < 0)
                goto json_err;
            char *sname = malloc(shard.len + 1);
            char *tname = malloc(name.len + 1);
            if (!sname || !tname) {
                free(sname);
                free(tname);
                rc = -ENOMEM;
                goto out;
            }
            pinio__json_str_decode(&shard, sname);
            pinio__json_str_decode(&name, tname);
            /* Shards live next to the index; an absolute path or ".." would let
             * an index point anywhere on the machine. */
            if (sname[0] == '/' || strstr(sname, "..") || strlen(sname) != shard.len) {
                pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: tensor '%s' maps to shard '%s' outside the index's folder",
                      path, tname, sname);
                free(sname);
                free(tname);
                rc = PINIO_EFORMAT;
                goto out;
            }
            char *spath = join(dir, sname);
            free(sname);
            uint32_t sidx = 0;
            rc = spath ? find_shard(in, spath, &sidx) : -ENOMEM;
            free(spath);
            if (rc < 0) {
                free(tname);
                goto out;
            }
            if (in->nindex == cap) {
                cap = cap ? cap * 2 : 256;
                ld_index_entry *ni = realloc(in->index, cap * sizeof(*ni));
                if (!ni) {
                    free(tname);
                    rc = -ENOMEM;
                    goto out;
                }
                in->index = ni;
            }
            in->index[in->nindex++] = (ld_index_entry){ .name = tname, .shard = sidx };
        }
        if (rc < 0)
            goto json_err;
    }
    if (rc < 0 || pinio__json_finish(&j) < 0)
        goto json_err;
    if (!have_map) {
        pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: no weight_map", path);
        rc = PINIO_EFORMAT;
        goto out;
    }
    if (in->nindex == 0) {
        /* Loading nothing and calling it success would hide a broken index. */
        pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: weight_map is empty", path);
        rc = PINIO_EFORMAT;
        goto out;
    }
    /* An empty weight_map leaves in->index NULL, and qsort's pointer is
     * declared nonnull even for zero elements (found by fuzz_index). */
    if (in->nindex > 1)
        qsort(in->index, in->nindex, sizeof(*in->index), cmp_index);
    for (size_t i = 1; i < in->nindex; i++)
        if (strcmp(in->index[i - 1].name, in->index[i].name) == 0) {
            pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: DuplicateKey: tensor '%s' listed twice in weight_map",
                  path, in->index[i].name);
            rc = PINIO_EFORMAT;
            goto out;
        }
    rc = 0;
    goto out;
json_err:
    pinio_diag_set(diag, PINIO_EFORMAT, "%s: index: invalid JSON at byte %zu: %s", path, j.err_off,
          j.err_what ? j.err_what : "syntax error");
    rc = PINIO_EFORMAT;
out:
    free(dir);
    return rc;
}

static int parse_index(ld_inputs *in, const char *path, pinio_diag *diag)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_whole(path, INDEX_MAX, &buf, &len, diag);
    if (rc < 0)
        return rc;
    rc = parse_index_buf(in, path, buf, len, diag);
    free(buf);
    return rc;
}

static int resolve_one(ld_inputs *in, const char *path, pinio_diag *diag)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = -errno;
        pinio_diag_set(diag, e, "%s: %s", path, pinio_strerror(e));
        return e;
    }
    if (S_ISDIR(st.st_mode)) {
        char *idx = join(path, "model.safetensors.index.json");
        if (!idx)
            return -ENOMEM;
        if (access(idx, F_OK) == 0) {
            if (in->index) {
                free(idx);
                pinio_diag_set(diag, -EINVAL, "%s: only one index file per load", path);
                return -EINVAL;
            }
            int rc = parse_index(in, idx, diag);
            in->index_path = idx;
            return rc;
        }
        free(idx);
        DIR *d = opendir(path);
        if (!d) {
            int e = -errno;
            pinio_diag_set(diag, e, "%s: %s", path, pinio_strerror(e));
            return e;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        int rc = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!ends_with(de->d_name, ".safetensors"))
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                char **nn = realloc(names, cap * sizeof(*nn));
                if (!nn) {
                    rc = -ENOMEM;
                    break;
                }
                names = nn;
            }
            if (!(names[n] = join(path, de->d_name))) {
                rc = -ENOMEM;
                break;
            }
            n++;
        }
        closedir(d);
        if (rc == 0 && n == 0) {
            pinio_diag_set(diag, -ENOENT, "%s: no *.safetensors files and no model.safetensors.index.json",
                  path);
            rc = -ENOENT;
        }
        if (rc == 0)
            qsort(names, n, sizeof(*names), cmp_str);
        size_t i = 0;
        for (; rc == 0 && i < n; i++)
            rc = push_path(in, names[i]);
        for (; i < n; i++)
            free(names[i]);
        free(names);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        pinio_diag_set(diag, -EINVAL, "%s: not a regular file or directory", path);
        return -EINVAL;
    }
    if (ends_with(path, ".json")) {
        if (in->index) {
            pinio_diag_set(diag, -EINVAL, "%s: only one index file per load", path);
            return -EINVAL;
        }
        in->index_path = strdup(path);
        if (!in->index_path)
            return -ENOMEM;
        return parse_index(in, path, diag);
    }
    char *copy = strdup(path);
    return copy ? push_path(in, copy) : -ENOMEM;
}

static void inputs_free(ld_inputs *in)
{
    for (size_t i = 0; i < in->n; i++)
        free(in->paths[i]);
    free(in->paths);
    for (size_t i = 0; i < in->nindex; i++)
        free(in->index[i].name);
    free(in->index);
    free(in->index_path);
}

int pinio__index_parse_buffer(const char *path, const char *data, size_t len, size_t *ntensors,
                              size_t *nshards, pinio_diag *diag)
{
    if (len > INDEX_MAX) {
        pinio_diag_set(diag, PINIO_EFORMAT, "%s: index file too large (%zu bytes, limit %zu)", path,
                       len, (size_t)INDEX_MAX);
        return PINIO_EFORMAT;
    }
    /* NUL-terminated like read_whole()'s buffer, so the parser sees what a
     * real load gives it; ASan still catches a read past the terminator. */
    char *buf = malloc(len + 1);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, data, len);
    buf[len] = '\0';
    ld_inputs in = { 0 };
    int rc = parse_index_buf(&in, path, buf, len, diag);
    if (rc == 0) {
        *ntensors = in.nindex;
        *nshards = in.n;
    }
    inputs_free(&in);
    free(buf);
    return rc;
}

static ld_index_entry *index_find(ld_inputs *in, const char *name)
{
    ld_index_entry key = { .name = (char *)name };
    if (in->nindex == 0) /* in->index may be NULL: bsearch's base is nonnull */
        return NULL;
    return bsearch(&key, in->index, in->nindex, sizeof(key), cmp_index);
}

/* ---- faulting the arena ahead of the reads ----------------------------- */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Chunks the helper faults at a time: two huge pages. */
#define FAULT_CHUNK ((size_t)4 << 20)

typedef struct ld_faulter {
    uint8_t *base;
    size_t len;
    atomic_bool stop;
    bool running;
    pthread_t thread;
} ld_faulter;

/* MADV_POPULATE_WRITE faults pages in without writing to them, so it is
 * safe while reads land in the same pages (a touch loop would not be: it
 * could overwrite bytes a read already placed). Kernels without it answer
 * EINVAL and the reads fault the pages themselves. */
static void *fault_ahead(void *arg)
{
    ld_faulter *f = arg;
    for (size_t off = 0; off < f->len; off += FAULT_CHUNK) {
        if (atomic_load_explicit(&f->stop, memory_order_relaxed))
            break;
        size_t n = f->len - off < FAULT_CHUNK ? f->len - off : FAULT_CHUNK;
        if (madvise(f->base + off, n, MADV_POPULATE_WRITE) != 0)
            break;
    }
    return NULL;
}

static void faulter_start(ld_faulter *f, uint8_t *base, size_t len)
{
    f->base = base;
    f->len = len;
    atomic_init(&f->stop, false);
    /* Below a few chunks a thread costs more than it saves; without a
     * second CPU the two would only take turns. */
    if (len < 4 * FAULT_CHUNK || sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    f->running = pthread_create(&f->thread, NULL, fault_ahead, f) == 0;
}

static void faulter_stop(ld_faulter *f)
{
    if (!f->running)
        return;
    atomic_store_explicit(&f->stop, true, memory_order_relaxed);
    pthread_join(f->thread, NULL);
    f->running = false;
}

/* ---- the load --------------------------------------------------------- */

void (*pinio__load_hook_after_headers)(void *ctx, const char *const *files, size_t n);
void *pinio__load_hook_ctx;

typedef struct ld_sel {
    uint32_t file;
    const pinio_st_tensor *t;
} ld_sel;

static void checkpoint_free(pinio_checkpoint *cp)
{
    if (!cp)
        return;
    for (size_t i = 0; i < cp->nfiles; i++) {
        free(cp->files[i].path);
        pinio_st_free(cp->files[i].st);
        if (cp->files[i].fd >= 0)
            close(cp->files[i].fd);
        pinio_ring_file_close(cp->files[i].rf);
    }
    free(cp->files);
    free(cp->tensors);
    free(cp->by_name);
    free(cp->names);
    free(cp->shapes);
    pinio_view_release(&cp->arena);
    free(cp);
}

void pinio_checkpoint_release(pinio_checkpoint *cp)
{
    checkpoint_free(cp);
}

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
    const pinio_checkpoint *cp = ctx;
    return strcmp(cp->tensors[*(const size_t *)a].name, cp->tensors[*(const size_t *)b].name);
}

/* What of file `fidx` can be hashed from the arena: when the plan reads
 * its whole data section as one contiguous run of the arena, the bytes
 * from the first read on come from memory and only the header is read
 * again; otherwise (a filtered load) the whole file is streamed. */
static pinio__hash_file hash_source(const ld_file *f, const pinio__plan *plan, uint32_t fidx,
                                    const uint8_t *arena)
{
    pinio__hash_file h = { .path = f->path, .fd = f->fd, .size = f->size, .mem_from = f->size };
    const pinio__read *first = NULL;
    uint64_t run_end = 0, arena_next = 0;
    bool contiguous = true;
    for (size_t i = 0; i < plan->nreads; i++) {
        const pinio__read *r = &plan->reads[i];
        if (r->file != fidx)
            continue;
        if (!first) {
            first = r;
        } else if (r->off != run_end || r->arena_off != arena_next) {
            contiguous = false;
        }
        run_end = r->off + r->len;
        arena_next = r->arena_off + r->len;
    }
    if (first && contiguous && run_end >= f->size && first->off < f->size) {
        h.mem_from = first->off;
        h.mem = arena + first->arena_off;
    }
    return h;
}

int pinio_load(const char *const *paths, size_t npaths, const pinio_load_opts *opts,
               pinio_checkpoint **out, pinio_diag *diag)
{
    pinio_load_opts defaults;
    pinio_load_opts_default(&defaults);
    if (out)
        *out = NULL;
    int crc = pinio__opts_copy(&defaults, sizeof(defaults), opts, "pinio_load options", diag);
    if (crc < 0)
        return crc;
    opts = &defaults;
    if (!out || !paths || npaths == 0) {
        pinio_diag_set(diag, -EINVAL, "pinio_load: %s",
                       !npaths ? "no input paths" : "invalid arguments");
        return -EINVAL;
    }
    double t0 = now_s();
    ld_inputs in = { 0 };
    pinio_checkpoint *cp = calloc(1, sizeof(*cp));
    ld_sel *sel = NULL;
    pinio__range *ranges = NULL;
    pinio__plan plan = { 0 };
    pinio_ring *ring_direct = NULL, *ring_buffered = NULL;
    pinio_pool *pool = NULL;
    ld_faulter faulter = { 0 };
    pinio__hash_file *hfiles = NULL;
    pinio__hasher *hasher = NULL;
    pinio_read_req *reqs = NULL;
    struct ld_need { uint32_t file; uint64_t bytes; } *need = NULL;
    int rc = cp ? 0 : -ENOMEM;

    for (size_t i = 0; rc == 0 && i < npaths; i++)
        rc = resolve_one(&in, paths[i], diag);
    if (rc < 0)
        goto fail;

    /* Headers: every file is validated before any data I/O. */
    cp->files = calloc(in.n, sizeof(*cp->files));
    if (!cp->files) {
        rc = -ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < in.n; i++) {
        ld_file *f = &cp->files[cp->nfiles++];
        f->fd = -1;
        f->path = in.paths[i];
        in.paths[i] = NULL;
        f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) {
            rc = -errno;
            if (in.index && rc == -ENOENT)
                pinio_diag_set(diag, rc, "%s: shard named by %s is missing", f->path, in.index_path);
            else
                pinio_diag_set(diag, rc, "%s: cannot open: %s", f->path, pinio_strerror(rc));
            goto fail;
        }
        rc = pinio_st_read_fd(&f->st, f->fd, f->path, 0, diag);
        if (rc < 0)
            goto fail;
        f->size = pinio_st_file_size(f->st);
    }

    if (pinio__load_hook_after_headers) {
        const char *names[64];
        size_t k = cp->nfiles < 64 ? cp->nfiles : 64;
        for (size_t i = 0; i < k; i++)
            names[i] = cp->files[i].path;
        pinio__load_hook_after_headers(pinio__load_hook_ctx, names, k);
    }

    /* Selection: the index is a per-shard allowlist; filters come next. */
    size_t total = 0;
    for (size_t i = 0; i < cp->nfiles; i++)
        total += pinio_st_count(cp->files[i].st);
    sel = malloc((total ? total : 1) * sizeof(*sel));
    if (!sel) {
        rc = -ENOMEM;
        goto fail;
    }
    size_t nsel = 0, names_len = 0, dims = 0;
    for (size_t i = 0; i < cp->nfiles; i++) {
        const pinio_st *st = cp->files[i].st;
        for (size_t k = 0; k < pinio_st_count(st); k++) {
            const pinio_st_tensor *t = pinio_st_at(st, k);
            if (in.index) {
                ld_index_entry *e = index_find(&in, t->name);
                if (!e || e->shard != i || strlen(t->name) != t->name_len) {
                    cp->report.unindexed++;
                    continue;
                }
                e->found = true;
            }
            if (!pinio__filter_match(opts->filters, opts->nfilters, t->name)) {
                cp->report.skipped++;
                continue;
            }
            sel[nsel++] = (ld_sel){ .file = (uint32_t)i, .t = t };
            names_len += t->name_len + 1;
            dims += t->rank;
        }
    }
    for (size_t i = 0; i < in.nindex; i++)
        if (!in.index[i].found) {
            pinio_diag_set(diag, -ENOENT, "%s: tensor '%s' is mapped to %s, which does not contain it",
                  in.index_path, in.index[i].name, cp->files[in.index[i].shard].path);
            rc = -ENOENT;
            goto fail;
        }

    /* Tensor table. */
    cp->tensors = calloc(nsel ? nsel : 1, sizeof(*cp->tensors));
    cp->by_name = malloc((nsel ? nsel : 1) * sizeof(*cp->by_name));
    cp->names = malloc(names_len ? names_len : 1);
    cp->shapes = malloc((dims ? dims : 1) * sizeof(*cp->shapes));
    ranges = malloc((nsel ? nsel : 1) * sizeof(*ranges));
    if (!cp->tensors || !cp->by_name || !cp->names || !cp->shapes || !ranges) {
        rc = -ENOMEM;
        goto fail;
    }
    char *np = cp->names;
    uint64_t *sp = cp->shapes;
    for (size_t i = 0; i < nsel; i++) {
        const pinio_st_tensor *t = sel[i].t;
        pinio_tensor *o = &cp->tensors[i];
        memcpy(np, t->name, t->name_len + 1);
        o->name = np;
        np += t->name_len + 1;
        memcpy(sp, t->shape, t->rank * sizeof(*sp));
        o->shape = sp;
        sp += t->rank;
        o->rank = t->rank;
        o->dtype = t->dtype;
        o->nbytes = t->nbytes;
        o->file = sel[i].file;
        o->file_offset = t->file_offset;
        ranges[i] = (pinio__range){ .file = sel[i].file, .off = t->file_offset, .len = t->nbytes };
        cp->by_name[i] = i;
        cp->report.bytes += t->nbytes;
    }
    cp->ntensors = nsel;
    qsort_r(cp->by_name, nsel, sizeof(*cp->by_name), cmp_by_name, cp);
    for (size_t i = 1; i < nsel; i++) {
        const pinio_tensor *a = &cp->tensors[cp->by_name[i - 1]], *b = &cp->tensors[cp->by_name[i]];
        if (strcmp(a->name, b->name) == 0) {
            pinio_diag_set(diag, -EEXIST, "tensor '%s' is in both %s and %s", a->name,
                  cp->files[a->file].path, cp->files[b->file].path);
            rc = -EEXIST;
            goto fail;
        }
    }

    /* Cache decisions, before any ring exists so that a cold drop is real. */
    char first_why[96] = "";
    bool mixed = false;
    for (size_t i = 0; i < cp->nfiles; i++) {
        ld_file *f = &cp->files[i];
        bool hot = false;
        const char *why = "";
        char whybuf[96];
        if (opts->direct == PINIO_DIRECT_OFF || opts->cache == PINIO_CACHE_HOT) {
            hot = true;
            why = opts->cache == PINIO_CACHE_HOT ? "--cache hot" : "O_DIRECT off";
        } else if (opts->cache == PINIO_CACHE_COLD) {
            double td = now_s();
            rc = pinio_file_drop_cache(f->fd);
            /* Preparing a measurement, not loading: a freshly written file
             * spends seconds in writeback here. Kept out of `seconds`. */
            cp->report.drop_seconds += now_s() - td;
            if (rc < 0) {
                pinio_diag_set(diag, rc, "%s: cannot drop cached pages: %s", f->path, pinio_strerror(rc));
                goto fail;
            }
            why = "cache dropped";
        } else if (opts->direct == PINIO_DIRECT_AUTO) {
            pinio_residency res;
            if (pinio_file_residency(f->fd, pinio_st_data_offset(f->st), 0, &res) == 0 &&
                res.range_bytes) {
                double frac = (double)res.cached_bytes / (double)res.range_bytes;
                hot = frac >= HOT_FRACTION;
                snprintf(whybuf, sizeof(whybuf), "%.0f%% in page cache (%s)", frac * 100.0,
                         res.method == PINIO_RESIDENCY_CACHESTAT ? "cachestat" : "mincore");
                why = whybuf;
            }
        }
        f->hot = hot;
        if (hot)
            cp->report.files_buffered++;
        else
            cp->report.files_direct++;
        if (cp->nfiles <= 2) {
            appendf(cp->report.cache, sizeof(cp->report.cache), "%s%s: %s%s%s", i ? "; " : "",
                    strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path,
                    hot ? "buffered" : "O_DIRECT", *why ? ", " : "", why);
        } else if (i == 0 || strcmp(why, first_why) != 0) {
            /* Many shards: one line per distinct reason, not per file. */
            if (i == 0)
                snprintf(first_why, sizeof(first_why), "%s", why);
            else
                mixed = true;
        }
    }
    if (cp->nfiles > 2)
        appendf(cp->report.cache, sizeof(cp->report.cache), "%zu files: %zu buffered, %zu O_DIRECT%s%s",
                cp->nfiles, cp->report.files_buffered, cp->report.files_direct,
                mixed ? "; reasons differ, e.g. " : "; ", first_why);

    /* Rings: one for O_DIRECT, one buffered for hot files. */
    pinio_ring_opts ro;
    pinio_ring_opts_default(&ro);
    if (opts->queue_depth)
        ro.queue_depth = opts->queue_depth;
    if (opts->request_size)
        ro.request_size = opts->request_size;
    ro.backend = opts->backend;
    uint64_t align = 4096;
    for (size_t i = 0; i < cp->nfiles; i++) {
        ld_file *f = &cp->files[i];
        pinio_ring **rp = f->hot ? &ring_buffered : &ring_direct;
        if (!*rp) {
            ro.direct = f->hot ? PINIO_DIRECT_OFF : opts->direct;
            pinio_diag rd = { 0 };
            rc = pinio_ring_create(rp, &ro, &rd);
            if (rc < 0) {
                /* The engine cannot know which checkpoint it was for. */
                pinio_diag_set(diag, rc, "%s: cannot set up the I/O engine: %s", f->path,
                               rd.msg[0] ? rd.msg : pinio_strerror(rc));
                goto fail;
            }
        }
        rc = pinio_ring_file_open(*rp, f->path, &f->rf, diag);
        if (rc < 0)
            goto fail;
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(f->rf, &fi);
        if (fi.offset_align > align)
            align = fi.offset_align;
        if (fi.mem_align > align)
            align = fi.mem_align;
    }

    rc = pinio__plan_build(ranges, nsel, align, MERGE_GAP, PINIO_POOL_SLAB_MAX, &plan);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "planning the reads failed: %s", pinio_strerror(rc));
        goto fail;
    }
    cp->report.arena_bytes = plan.arena_size;

    /* The arena: placed on the chosen node, but neither prefaulted nor
     * registered up front. Faulting in fresh anonymous memory runs at about
     * the speed of the disk here (0.6 s for 1 GiB on this VM), and
     * registration faults every page before the first read can start: a
     * 1 GiB cold load took 1.19-1.34 s that way and 0.87 s when the reads
     * fault pages in as they go (measured with pinio load --json, median
     * of alternating runs). A helper thread faults ahead of the reads on
     * another CPU; the pages are locked once they hold the data. */
    pinio_pool_opts po;
    pinio_pool_opts_default(&po);
    po.prefault = false;
    if (opts->node >= 0) {
        po.placement = PINIO_POOL_NODE;
        po.node = opts->node;
    } else if (opts->node == PINIO_NODE_AUTO && cp->nfiles) {
        po.placement = PINIO_POOL_FILE_NODE;
        po.file = cp->files[0].path;
    }
    rc = pinio_pool_create(&pool, &po, diag);
    if (rc < 0)
        goto fail;
    rc = pinio__pool_alloc_contig(pool, (size_t)plan.arena_size, &cp->arena, NULL);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "cannot allocate a %llu-byte arena: %s",
              (unsigned long long)plan.arena_size, pinio_strerror(rc));
        goto fail;
    }
    {
        pinio_pool_stats ps;
        pinio_pool_get_stats(pool, &ps);
        cp->report.node = ps.node;
    }
    faulter_start(&faulter, (uint8_t *)cp->arena.ptr, cp->arena.len);

    /* Reads: plan reads are cut into pieces of at most PIECE bytes so that
     * a bulk call can stop at a piece boundary for the progress callback. */
    uint8_t *arena = (uint8_t *)cp->arena.ptr;
    size_t npieces = 0;
    for (size_t i = 0; i < plan.nreads; i++)
        npieces += (size_t)((plan.reads[i].len + PIECE - 1) / PIECE);
    reqs = calloc(npieces ? npieces : 1, sizeof(*reqs));
    need = calloc(npieces ? npieces : 1, sizeof(*need));
    if (!reqs || !need) {
        rc = -ENOMEM;
        goto fail;
    }
    size_t npc = 0;
    for (size_t i = 0; i < plan.nreads; i++) {
        const pinio__read *r = &plan.reads[i];
        for (uint64_t off = 0; off < r->len; off += PIECE) {
            uint64_t len = r->len - off < PIECE ? r->len - off : PIECE;
            reqs[npc] = (pinio_read_req){ .file = cp->files[r->file].rf, .offset = r->off + off,
                                         .len = (size_t)len, .dst = arena + r->arena_off + off };
            need[npc].file = r->file;
            need[npc].bytes = r->need <= off ? 0 : (r->need - off < len ? r->need - off : len);
            npc++;
        }
        cp->report.read_bytes += r->len;
    }
    /* --verify: hasher threads follow the reads (src/hash_internal.h), one
     * file each at a time, one per CPU (at most 8: the reads need little
     * CPU, and on 2 CPUs 2 threads beat 1, 0.40 vs 0.49 s for 4 shards of
     * 256 MiB); with one CPU they would only take turns with the reads, so
     * the hashing runs after them. */
    if (opts->verify) {
        hfiles = calloc(cp->nfiles ? cp->nfiles : 1, sizeof(*hfiles));
        rc = hfiles ? 0 : -ENOMEM;
        for (size_t i = 0; rc == 0 && i < cp->nfiles; i++)
            hfiles[i] = hash_source(&cp->files[i], &plan, (uint32_t)i, arena);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned threads = cpus < 2 ? 0 : cpus > 8 ? 8 : (unsigned)cpus;
        if (rc == 0)
            rc = pinio__hasher_start(&hasher, hfiles, cp->nfiles, threads);
        if (rc < 0)
            goto fail;
    }
    /* Without a progress callback or a hasher to feed, the whole selection
     * is one bulk call, so the engine's queue never drains early; with one,
     * batches of 1/16 of the load (16 MiB to 1 GiB) cost one queue drain
     * each. */
    uint64_t batch_max = UINT64_MAX;
    if (opts->progress || hasher) {
        batch_max = cp->report.read_bytes / 16;
        batch_max = batch_max < PIECE ? PIECE : batch_max > ((uint64_t)1 << 30) ? (uint64_t)1 << 30 : batch_max;
    }
    double tio = now_s();
    uint64_t done_bytes = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        pinio_ring *ring = pass == 0 ? ring_direct : ring_buffered;
        if (!ring)
            continue;
        size_t i = 0;
        while (i < npc && rc == 0) {
            /* a run of consecutive pieces of this ring's files */
            size_t n = 0;
            uint64_t bytes = 0;
            while (i + n < npc && bytes < batch_max &&
                   cp->files[need[i + n].file].hot == (pass == 1)) {
                bytes += reqs[i + n].len;
                n++;
            }
            if (n == 0) {
                i++;
                continue;
            }
            pinio_read_req *batch = &reqs[i];
            rc = pinio_ring_read_bulk(ring, batch, n, diag);
            for (size_t k = 0; rc == 0 && k < n; k++) {
                if (batch[k].done < need[i + k].bytes) {
                    ld_file *f = &cp->files[need[i + k].file];
                    rc = PINIO_ECHANGED;
                    pinio_diag_set(diag, rc,
                          "%s: file changed while loading: expected %llu bytes at offset %llu, "
                          "got %zu (truncated after its header was read?)",
                          f->path, (unsigned long long)need[i + k].bytes,
                          (unsigned long long)batch[k].offset, batch[k].done);
                }
            }
            /* A file's pieces are consecutive and read in order, and each
             * file is read in one pass: its bytes up to the end of its last
             * piece in this batch have all arrived. */
            for (size_t k = 0; rc == 0 && hasher && k < n; k++)
                pinio__hasher_advance(hasher, need[i + k].file,
                                      batch[k].offset + batch[k].len);
            done_bytes += bytes;
            i += n;
            pinio_progress pg = { .done_bytes = done_bytes,
                                  .total_bytes = cp->report.read_bytes,
                                  .done_ops = i + n, .elapsed_s = now_s() - t0 };
            if (rc == 0 && opts->progress && opts->progress(opts->progress_ctx, &pg)) {
                rc = -ECANCELED;
                pinio_diag_set(diag, rc, "load canceled by the progress callback");
            }
        }
    }
    cp->report.io_seconds = now_s() - tio;
    faulter_stop(&faulter);
    if (rc < 0)
        goto fail;

    /* Placement is checked now that the pages exist, then the pages are
     * locked so that they stay put for the checkpoint's life (and for a
     * later cudaHostRegister) -- when the memlock budget allows it. */
    if (cp->arena.len) {
        pinio_pool_region_info vi;
        if (pinio__pool_verify_range(pool, cp->arena.ptr, cp->arena.len, &vi) == 0)
            cp->report.node_verified = vi.verify == PINIO_POOL_VERIFY_OK;
        pinio_sysinfo si;
        pinio_sys_probe(&si);
        if (si.registrable != PINIO_UNLIMITED && si.registrable < cp->arena.len) {
            snprintf(cp->report.memory, sizeof(cp->report.memory),
                     "not locked: the arena exceeds what RLIMIT_MEMLOCK still allows (%llu bytes); "
                     "raise it with ulimit -l or grant CAP_IPC_LOCK",
                     (unsigned long long)si.registrable);
        } else if (mlock(cp->arena.ptr, cp->arena.len) == 0) {
            cp->report.locked = true;
            snprintf(cp->report.memory, sizeof(cp->report.memory), "locked in RAM (mlock)");
        } else {
            int e = -errno;
            snprintf(cp->report.memory, sizeof(cp->report.memory), "not locked: mlock failed: %s",
                     pinio_strerror(e));
        }
    }

    /* A file extended, truncated or replaced after its header was read is
     * not the file the header described. */
    for (size_t i = 0; i < cp->nfiles; i++) {
        struct stat st;
        ld_file *f = &cp->files[i];
        if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size != f->size) {
            rc = PINIO_ECHANGED;
            pinio_diag_set(diag, rc, "%s: file changed while loading: size was %llu, now %lld", f->path,
                  (unsigned long long)f->size, (long long)st.st_size);
            goto fail;
        }
    }

    if (opts->verify) {
        double tv = now_s();
        rc = pinio__hasher_finish(hasher, diag);
        hasher = NULL;
        if (rc < 0)
            goto fail;
        for (size_t i = 0; i < cp->nfiles; i++) {
            ld_file *f = &cp->files[i];
            memcpy(f->sha, hfiles[i].sha, sizeof(f->sha));
            for (int b = 0; b < 32; b++)
                snprintf(f->sha_hex + 2 * b, 3, "%02x", f->sha[b]);
            f->hashed = true;
            const char *want = i < opts->nexpected && opts->expected_sha256 ?
                                   opts->expected_sha256[i] : NULL;
            if (want && strcasecmp(want, f->sha_hex) != 0) {
                rc = PINIO_EFORMAT;
                pinio_diag_set(diag, rc, "%s: sha256 mismatch: expected %s, got %s", f->path, want,
                      f->sha_hex);
                goto fail;
            }
        }
        cp->report.verified = true;
        cp->report.verify_seconds = now_s() - tv;
    }

    for (size_t i = 0; i < nsel; i++) {
        pinio_tensor *t = &cp->tensors[i];
        t->data = arena + plan.range_arena_off[i];
        t->align = pinio__addr_align(t->data);
        unsigned ebytes = pinio_dtype_bits(t->dtype) / 8;
        if (ebytes > 1 && t->align < ebytes && t->nbytes)
            cp->report.misaligned++;
    }

    /* Report. */
    pinio_ring_info info;
    pinio_ring *main_ring = ring_direct ? ring_direct : ring_buffered;
    cp->report.files = cp->nfiles;
    cp->report.tensors = nsel;
    if (main_ring) {
        pinio_ring_get_info(main_ring, &info);
        cp->report.backend = info.backend;
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(cp->files[0].rf, &fi);
        appendf(cp->report.io_path, sizeof(cp->report.io_path), "%s%s; %s",
                ring_direct ? "O_DIRECT io_uring reads into the NUMA-placed arena" :
                              "buffered io_uring reads (page cache)",
                info.backend == PINIO_BACKEND_PREAD ? " via pread threads" : "", info.reason);
        if (fi.reason[0])
            appendf(cp->report.io_path, sizeof(cp->report.io_path), "; %s", fi.reason);
    } else {
        snprintf(cp->report.io_path, sizeof(cp->report.io_path), "no data to read");
    }
    cp->report.seconds = now_s() - t0 - cp->report.drop_seconds;

    rc = 0;

fail:
    /* Close the engine side now: the arena (and the tensors) outlive it.
     * The pool must forget the ring before the ring goes. */
    if (rc < 0 && diag && diag->code == 0)
        pinio_diag_set(diag, rc, "load failed: %s", pinio_strerror(rc));
    faulter_stop(&faulter);
    pinio__hasher_abort(hasher); /* still there only when the load failed */
    if (pool) {
        pinio_pool_unregister(pool);
        pinio_pool_destroy(pool);
    }
    for (size_t i = 0; cp && i < cp->nfiles; i++) {
        ld_file *f = &cp->files[i];
        pinio_ring_file_close(f->rf);
        f->rf = NULL;
        if (rc == 0) { /* a loaded checkpoint keeps no file open */
            close(f->fd);
            f->fd = -1;
            pinio_st_free(f->st);
            f->st = NULL;
        }
    }
    pinio_ring_destroy(ring_direct);
    pinio_ring_destroy(ring_buffered);
    if (rc < 0)
        checkpoint_free(cp);
    else
        *out = cp;
    free(reqs);
    free(need);
    free(hfiles);
    pinio__plan_free(&plan);
    free(ranges);
    free(sel);
    inputs_free(&in);
    return rc;
}

size_t pinio_checkpoint_count(const pinio_checkpoint *cp)
{
    return cp ? cp->ntensors : 0;
}

const pinio_tensor *pinio_checkpoint_tensor(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->ntensors ? &cp->tensors[i] : NULL;
}

const pinio_tensor *pinio_checkpoint_find(const pinio_checkpoint *cp, const char *name)
{
    if (!cp || !name)
        return NULL;
    size_t lo = 0, hi = cp->ntensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(cp->tensors[cp->by_name[mid]].name, name);
        if (c == 0)
            return &cp->tensors[cp->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t pinio_checkpoint_file_count(const pinio_checkpoint *cp)
{
    return cp ? cp->nfiles : 0;
}

const char *pinio_checkpoint_file(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->nfiles ? cp->files[i].path : NULL;
}

const char *pinio_checkpoint_sha256(const pinio_checkpoint *cp, size_t i)
{
    return cp && i < cp->nfiles && cp->files[i].hashed ? cp->files[i].sha_hex : NULL;
}

void pinio_checkpoint_report(const pinio_checkpoint *cp, pinio_load_report *out)
{
    *out = cp->report;
}

int pinio_checkpoint_tensor_bytes(const pinio_checkpoint *cp, size_t i, pinio_bytes **out)
{
    if (!cp || !out)
        return -EINVAL;
    if (i >= cp->ntensors)
        return -ERANGE;
    const pinio_tensor *t = &cp->tensors[i];
    size_t start = (size_t)(t->data - cp->arena.ptr);
    pinio_view v;
    int rc = pinio_view_slice(&cp->arena, start, start + (size_t)t->nbytes, &v);
    if (rc < 0)
        return rc;
    rc = pinio_bytes_from_view(out, &v, PINIO_PROP_FILE);
    if (rc < 0)
        pinio_view_release(&v);
    return rc;
}
