/*
 * The plan: inputs resolved (inputs.c), every header validated through the
 * descriptor the data will be read from (inputs.c), the selection applied
 * (select.c), the page-cache policy decided (cache.c), and the wanted
 * ranges laid out into aligned, merged reads (layout.c). No tensor data is
 * read here; execution is exec.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/base/opts.h"
#include "src/load/plan_internal.h"
#include "src/st/clone.h"

/* Holes up to this size between wanted ranges are read through rather than
 * skipped: one request costs more than reading 256 KiB, and the bound keeps
 * peak memory within "selected bytes + a little". */
#define MERGE_GAP_DEFAULT ((uint64_t)256 << 10)

/* One registered io_uring buffer holds at most 1 GiB. */
#define SEGMENT_DEFAULT ((uint64_t)1 << 30)

/* With slices, holes read through cost at most 1/32 of the slices' bytes:
 * a few percent over the bytes asked for, the requests saved where the
 * holes are small (another rank's short rows, a small tensor left out). */
#define OVERREAD_DEFAULT (1.0 / 32)

void pinio_plan_opts_init(pinio_plan_opts *opts, size_t size)
{
    pinio_plan_opts d;
    memset(&d, 0, sizeof(d));
    d.cache = PINIO_CACHE_AUTO;
    d.direct = PINIO_DIRECT_AUTO;
    pinio__opts_init(opts, size, &d, sizeof(d));
}

void pinio_plan_free(pinio_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nfiles; i++) {
        if (p->files[i].fd >= 0)
            close(p->files[i].fd);
        pinio_st_free(p->files[i].st);
        free(p->files[i].path);
        free(p->files[i].bucket);
        free(p->files[i].key);
        free(p->files[i].prefix);
    }
    pinio__s3_close(p->s3);
    free(p->index_image);
    free(p->files);
    free(p->tensors);
    free(p->first_range);
    free(p->slice_dims);
    pinio__layout_free(&p->layout);
    pinio_st_index_free(p->index);
    free(p);
}

static bool pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static int lay_out(pinio_plan *p, pinio_diag *diag)
{
    const pinio_plan_opts *o = &p->opts;
    uint64_t align = o->align ? o->align : 4096;
    if (!o->align)
        for (size_t i = 0; i < p->nfiles; i++)
            if (!p->files[i].pub.hot && p->files[i].dio_align > align)
                align = p->files[i].dio_align;
    uint64_t seg = o->segment ? o->segment : SEGMENT_DEFAULT;
    pinio__range *ranges = NULL;
    size_t nranges = 0;
    int rc = pinio__slice_ranges(p, &ranges, &nranges);
    if (rc < 0)
        return rc;
    uint64_t budget = UINT64_MAX;
    if (p->slicing) {
        double f = o->max_overread == 0 ? OVERREAD_DEFAULT : o->max_overread;
        double b = f < 0 ? 0 : f * (double)p->info.bytes;
        budget = b >= 1.8e19 ? UINT64_MAX - 1 : (uint64_t)b;
    }
    rc = pinio__layout_build_capped(ranges, nranges, align,
                                    o->merge_gap ? o->merge_gap : MERGE_GAP_DEFAULT, seg, budget,
                                    &p->layout);
    free(ranges);
    if (rc < 0) {
        pinio_diag_set(diag, rc, "planning the reads failed: %s", pinio_strerror(rc));
        return rc;
    }
    for (size_t i = 0; i < p->ntensors; i++)
        p->tensors[i].dest_offset = p->layout.range_dest_off[p->first_range[i]];
    for (size_t i = 0; i < p->layout.nreads; i++)
        p->info.read_bytes += p->layout.reads[i].len;
    p->sinfo.read_bytes = p->info.read_bytes;
    p->sinfo.overread_bytes = p->info.read_bytes - p->info.bytes;
    p->sinfo.hole_bytes = p->layout.hole_bytes;
    p->sinfo.hole_budget = budget;
    p->info.dest_bytes = p->layout.dest_size;
    p->info.reads = p->layout.nreads;
    p->info.align = align;
    return 0;
}

/* The slices and split rules, checked before any file is opened; what
 * depends on a tensor's shape is checked when it is sliced (slice.c). */
static int slicing_take(const pinio_plan_opts *o, const char *fn, pinio_diag *diag)
{
    if ((o->nslices && !o->slices) || (o->nsplit && !o->split)) {
        pinio_diag_set(diag, -EINVAL, "%s: invalid arguments", fn);
        return -EINVAL;
    }
    if (o->nsplit && (o->world < 1 || o->rank >= o->world)) {
        pinio_diag_set(diag, -EINVAL, "%s: split rules want rank < world and world >= 1, not "
                       "rank %u of world %u", fn, o->rank, o->world);
        return -EINVAL;
    }
    if (!(o->max_overread == o->max_overread)) { /* NaN */
        pinio_diag_set(diag, -EINVAL, "%s: max_overread is not a number", fn);
        return -EINVAL;
    }
    for (size_t i = 0; i < o->nsplit; i++)
        if (!o->split[i].pattern) {
            pinio_diag_set(diag, -EINVAL, "%s: split rule %zu has no pattern", fn, i);
            return -EINVAL;
        }
    for (size_t i = 0; i < o->nslices; i++) {
        const pinio_slice *sl = &o->slices[i];
        const char *why = !sl->name                        ? "has no name"
                          : sl->kind > PINIO_SLICE_BOX     ? "has an unknown kind"
                          : sl->kind == PINIO_SLICE_CHUNK &&
                                  (sl->world < 1 || sl->rank >= sl->world)
                              ? "wants rank < world and world >= 1"
                          : sl->kind == PINIO_SLICE_BOX && sl->ndim && (!sl->start || !sl->stop)
                              ? "has no start or stop"
                              : NULL;
        if (why) {
            pinio_diag_set(diag, -EINVAL, "%s: slice %zu (%s) %s", fn, i,
                           sl->name ? sl->name : "?", why);
            return -EINVAL;
        }
    }
    return 0;
}

/* The options of both constructors: copied up to the caller's size, then
 * checked. */
static int opts_take(pinio_plan_opts *o, const pinio_plan_opts *opts, const char *fn,
                     pinio_diag *diag)
{
    pinio_plan_opts_default(o);
    int rc = pinio__opts_copy(o, sizeof(*o), opts, "pinio_plan options", diag);
    if (rc < 0)
        return rc;
    if (o->nfilters && !o->filters) {
        pinio_diag_set(diag, -EINVAL, "%s: invalid arguments", fn);
        return -EINVAL;
    }
    if (o->cache > PINIO_CACHE_HOT || o->direct > PINIO_DIRECT_OFF ||
        (o->align && (!pow2(o->align) || o->align > ((uint64_t)1 << 30))) ||
        (o->segment && (!pow2(o->segment) || o->segment < (o->align ? o->align : 4096)))) {
        pinio_diag_set(diag, -EINVAL, "%s: invalid options (align %llu, segment %llu)", fn,
                       (unsigned long long)o->align, (unsigned long long)o->segment);
        return -EINVAL;
    }
    return slicing_take(o, fn, diag);
}

/* The plan's copy of the options: the selection, slices and split rules
 * are read during the call only. */
static void keep_opts(pinio_plan *p, const pinio_plan_opts *o)
{
    p->opts = *o;
    p->opts.filters = NULL;
    p->opts.nfilters = 0;
    p->opts.slices = NULL;
    p->opts.nslices = 0;
    p->opts.split = NULL;
    p->opts.nsplit = 0;
    p->opts.stop = NULL; /* the call's: its context may not outlive it */
    p->opts.stop_ctx = NULL;
}

/* What follows the files' validation, for every constructor: select, slice,
 * decide the cache policy, lay out. Takes `p` whatever happens. */
static int finish(pinio_plan **out, pinio_plan *p, const pinio_plan_opts *o, pinio_diag *diag)
{
    int rc = pinio__select(p, o->filters, o->nfilters, o->filters_exact, diag);
    if (rc == 0)
        rc = pinio__slice_resolve(p, o, diag);
    if (rc == 0) {
        pinio__cache_decide(p);
        rc = lay_out(p, diag);
    }
    if (rc < 0) {
        pinio_plan_free(p);
        return rc;
    }
    p->info.files = p->nfiles;
    p->info.tensors = p->ntensors;
    p->info.index_path = p->index ? pinio_st_index_path(p->index) : NULL;
    *out = p;
    return 0;
}

/* Everything after the inputs are known: open and validate each file (its
 * header read through the descriptor, or parsed from `hdrs[i]`; an object's
 * through `s3`, opened here when NULL), select, decide the cache policy, lay
 * out. `named[i]`: the caller named file i itself (NULL: every file, as
 * pinio_plan_create_from_headers' caller does). Takes `index`, `s3` and
 * `paths[]` (each string, not the array) whatever happens. */
static int build(pinio_plan **out, const pinio_plan_opts *o, pinio_st_index *index,
                 pinio__s3 *s3, char **paths, const bool *named, const pinio_plan_header *hdrs,
                 size_t n, pinio_diag *diag)
{
    pinio_plan *p = calloc(1, sizeof(*p));
    if (!p || !(p->files = calloc(n ? n : 1, sizeof(*p->files)))) {
        free(p);
        pinio__s3_close(s3);
        pinio_st_index_free(index);
        for (size_t i = 0; i < n; i++)
            free(paths[i]);
        return -ENOMEM;
    }
    keep_opts(p, o);
    p->index = index;
    p->s3 = s3;
    const char *shard_of = index ? pinio_st_index_path(index) : NULL;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        pinio__pfile *f = &p->files[p->nfiles++];
        f->fd = -1;
        f->path = paths[i];
        paths[i] = NULL;
        bool object = pinio__s3_is_url(f->path);
        if (rc == 0 && object && !p->s3 && (rc = pinio__s3_open(&p->s3, NULL, diag)) == 0)
            pinio__s3_set_stop(p->s3, o->stop, o->stop_ctx);
        if (rc == 0 && object) {
            rc = pinio__obj_open(p->s3, f, hdrs ? hdrs[i].bytes : NULL, hdrs ? hdrs[i].len : 0,
                                 diag);
            if (rc < 0)
                pinio_diag_set_index(diag, i);
        } else if (rc == 0) {
            rc = pinio__pfile_open(f, shard_of, !named || named[i], hdrs ? hdrs[i].bytes : NULL,
                                   hdrs ? hdrs[i].len : 0, diag);
            if (rc == -EMFILE)
                pinio__diag_nofile(diag, f->path, n);
            if (rc < 0)
                pinio_diag_set_index(diag, i);
        }
    }
    if (p->s3) /* the objects are open: the call's stop request ends here */
        pinio__s3_set_stop(p->s3, NULL, NULL);
    if (rc < 0) {
        pinio_plan_free(p);
        return rc;
    }
    return finish(out, p, o, diag);
}

int pinio_plan_create(pinio_plan **out, const char *const *paths, size_t npaths,
                      const pinio_plan_opts *opts, pinio_diag *diag)
{
    if (out)
        *out = NULL;
    pinio_plan_opts o;
    int rc = opts_take(&o, opts, "pinio_plan_create", diag);
    if (rc < 0)
        return rc;
    if (!out || !paths || npaths == 0) {
        pinio_diag_set(diag, -EINVAL, "pinio_plan_create: %s",
                       npaths ? "invalid arguments" : "no input paths");
        return -EINVAL;
    }
    pinio__inputs in;
    rc = pinio__inputs_resolve(&in, paths, npaths, o.stop, o.stop_ctx, diag);
    if (rc < 0)
        return rc;
    char *image = in.index_image;
    size_t image_len = in.index_len;
    in.index_image = NULL;
    rc = build(out, &o, in.index, in.s3, in.paths, in.named, NULL, in.n, diag);
    in.index = NULL;
    in.s3 = NULL;
    if (rc == 0) {
        (*out)->index_image = image;
        (*out)->index_len = image_len;
    } else {
        free(image);
    }
    in.n = 0; /* build took every path */
    pinio__inputs_free(&in);
    return rc;
}

int pinio_plan_create_from_headers(pinio_plan **out, const pinio_plan_header *files, size_t nfiles,
                                   const void *index, size_t index_len, const char *index_path,
                                   const pinio_plan_opts *opts, pinio_diag *diag)
{
    if (out)
        *out = NULL;
    pinio_plan_opts o;
    int rc = opts_take(&o, opts, "pinio_plan_create_from_headers", diag);
    if (rc < 0)
        return rc;
    bool bad = !out || (nfiles && !files) || (index && !index_path);
    for (size_t i = 0; !bad && i < nfiles; i++)
        bad = !files[i].path || !files[i].bytes;
    if (bad || nfiles == 0) {
        pinio_diag_set(diag, -EINVAL, "pinio_plan_create_from_headers: %s",
                       nfiles ? "invalid arguments" : "no input files");
        return -EINVAL;
    }
    pinio_st_index *ix = NULL;
    if (index) {
        rc = pinio_st_index_parse(&ix, index, index_len, index_path, diag);
        if (rc < 0)
            return rc;
        /* The index decides the shards and their order; files given in
         * another order would give this process another layout than the
         * one that read the headers. */
        bool same = pinio_st_index_shard_count(ix) == nfiles;
        for (size_t i = 0; same && i < nfiles; i++)
            same = strcmp(pinio_st_index_shard(ix, i), files[i].path) == 0;
        if (!same) {
            pinio_diag_set_at(diag, -EINVAL, index_path, PINIO_DIAG_NO_OFFSET,
                              "the %zu files given are not this index's %zu shards in order",
                              nfiles, pinio_st_index_shard_count(ix));
            pinio_st_index_free(ix);
            return -EINVAL;
        }
    }
    char **paths = calloc(nfiles, sizeof(*paths));
    for (size_t i = 0; paths && i < nfiles; i++)
        if (!(paths[i] = strdup(files[i].path))) {
            for (size_t k = 0; k < i; k++)
                free(paths[k]);
            free(paths);
            paths = NULL;
        }
    if (!paths) {
        pinio_st_index_free(ix);
        return -ENOMEM;
    }
    rc = build(out, &o, ix, NULL, paths, NULL, files, nfiles, diag);
    free(paths);
    return rc;
}

/* File `b` of a base plan, again: its descriptor duplicated (the same open
 * file, whatever the path names now), its header copied, its identity
 * taken now. Its content must be what `b` validated: a size or a
 * modification time that moved means the header no longer describes it.
 * The status change time alone may move: unlinking the file (a rename
 * over its path) does that and leaves its bytes as they were. */
static int derive_file(pinio__pfile *f, const pinio__pfile *b, pinio_diag *diag)
{
    f->path = strdup(b->path);
    if (!f->path)
        return -ENOMEM;
    f->fd = fcntl(b->fd, F_DUPFD_CLOEXEC, 0);
    int rc = f->fd < 0 ? -errno : 0;
    if (rc < 0) {
        pinio_diag_set_at(diag, rc, b->path, PINIO_DIAG_NO_OFFSET,
                          "cannot duplicate the validated descriptor: %s", pinio_strerror(rc));
        return rc;
    }
    if ((rc = pinio__st_clone(&f->st, b->st)) < 0)
        return rc;
    if ((rc = pinio__file_id_get(f->fd, &f->id)) < 0) {
        pinio_diag_set_at(diag, rc, b->path, PINIO_DIAG_NO_OFFSET, "statx: %s",
                          pinio_strerror(rc));
        return rc;
    }
    if (f->id.size != b->id.size || f->id.mtime_s != b->id.mtime_s ||
        f->id.mtime_ns != b->id.mtime_ns) {
        pinio_diag_set_at(diag, PINIO_ECHANGED, b->path, PINIO_DIAG_NO_OFFSET,
                          "file changed since its header was validated: %s moved (rewritten "
                          "in place?)",
                          f->id.size != b->id.size ? "its size" : "its modification time");
        return PINIO_ECHANGED;
    }
    f->dio_align = b->dio_align;
    pinio__pfile_publish(f);
    return 0;
}

int pinio_plan_derive(pinio_plan **out, const pinio_plan *base, const pinio_plan_opts *opts,
                      pinio_diag *diag)
{
    if (out)
        *out = NULL;
    pinio_plan_opts o;
    int rc = opts_take(&o, opts, "pinio_plan_derive", diag);
    if (rc < 0)
        return rc;
    if (!out || !base) {
        pinio_diag_set(diag, -EINVAL, "pinio_plan_derive: invalid arguments");
        return -EINVAL;
    }
    if (base->index || base->s3) {
        pinio_diag_set(diag, -ENOTSUP, "pinio_plan_derive: the base plan %s: build the plan "
                       "with pinio_plan_create() instead",
                       base->index ? "has an index (its allowlist is not carried over)"
                                   : "reads objects (s3://), which have no descriptor");
        return -ENOTSUP;
    }
    pinio_plan *p = calloc(1, sizeof(*p));
    if (!p || !(p->files = calloc(base->nfiles ? base->nfiles : 1, sizeof(*p->files)))) {
        free(p);
        return -ENOMEM;
    }
    keep_opts(p, &o);
    for (size_t i = 0; i < base->nfiles && rc == 0; i++) {
        pinio__pfile *f = &p->files[p->nfiles++];
        f->fd = -1;
        rc = derive_file(f, &base->files[i], diag);
        if (rc < 0)
            pinio_diag_set_index(diag, i);
    }
    if (rc < 0) {
        pinio_plan_free(p);
        return rc;
    }
    return finish(out, p, &o, diag);
}

void pinio_plan_get_info(const pinio_plan *p, pinio_plan_info *out)
{
    *out = p->info;
}

const pinio_st_index *pinio_plan_get_index(const pinio_plan *p)
{
    return p ? p->index : NULL;
}

int pinio_plan_get_index_image(const pinio_plan *p, const void **bytes, size_t *len)
{
    if (!p || !p->index_image)
        return -ENOENT;
    *bytes = p->index_image;
    *len = p->index_len;
    return 0;
}

const pinio_plan_file *pinio_plan_file_at(const pinio_plan *p, size_t i)
{
    return p && i < p->nfiles ? &p->files[i].pub : NULL;
}

const pinio_plan_tensor *pinio_plan_tensor_at(const pinio_plan *p, size_t i)
{
    return p && i < p->ntensors ? &p->tensors[i] : NULL;
}

const pinio_plan_read *pinio_plan_read_at(const pinio_plan *p, size_t i)
{
    return p && i < p->layout.nreads ? &p->layout.reads[i] : NULL;
}

int64_t pinio_plan_file_read(const pinio_plan *p, size_t i, void *buf, size_t len, uint64_t off,
                             pinio_diag *diag)
{
    if (!p || i >= p->nfiles) {
        pinio_diag_set(diag, -ERANGE, "pinio_plan_file_read: no file %zu", i);
        return -ERANGE;
    }
    const pinio__pfile *f = &p->files[i];
    if (f->pub.object)
        return pinio__obj_pread(f, buf, len, off, diag);
    for (;;) {
        ssize_t r = pread(f->fd, buf, len, (off_t)off);
        if (r >= 0)
            return r;
        if (errno != EINTR) {
            int rc = -errno;
            pinio_diag_set_at(diag, rc, f->path, off, "read failed: %s", pinio_strerror(rc));
            return rc;
        }
    }
}

int pinio__plan_check_unchanged(const pinio_plan *p, size_t i, pinio_diag *diag)
{
    const pinio__pfile *f = &p->files[i];
    pinio__file_id now;
    int rc = pinio__file_id_get(f->fd, &now);
    if (rc < 0) {
        pinio_diag_set_at(diag, rc, f->path, PINIO_DIAG_NO_OFFSET, "statx: %s", pinio_strerror(rc));
        return rc;
    }
    const char *what = NULL;
    if (now.size != f->id.size)
        what = "its size";
    else if (now.mtime_s != f->id.mtime_s || now.mtime_ns != f->id.mtime_ns)
        what = "its modification time";
    else if (now.ctime_s != f->id.ctime_s || now.ctime_ns != f->id.ctime_ns)
        what = "its status change time";
    if (!what)
        return 0;
    /* Only the status change time moved: unlinking the validated file (a
     * rename over its path, or remove-and-create) does that. The bytes read
     * are still the validated file's, but the path the caller asked for now
     * names another file (or none): say so rather than "rewritten", and
     * fail all the same, so no caller gets the old checkpoint silently. */
    bool only_ctime = now.size == f->id.size && now.mtime_s == f->id.mtime_s &&
                      now.mtime_ns == f->id.mtime_ns;
    pinio__file_id at_path;
    int gone = only_ctime ? pinio__file_id_at(f->path, &at_path) : 0;
    if (only_ctime &&
        (gone == -ENOENT || (gone == 0 && (at_path.dev != f->id.dev || at_path.ino != f->id.ino))))
        pinio_diag_set_at(diag, PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                          "file changed while loading: the path %s since its header was "
                          "validated (renamed over or replaced?); the new file was not loaded",
                          gone == -ENOENT ? "was removed" : "now names another file");
    else if (now.size != f->id.size)
        pinio_diag_set_at(diag, PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                          "file changed while loading: size was %llu, now %llu",
                          (unsigned long long)f->id.size, (unsigned long long)now.size);
    else
        pinio_diag_set_at(diag, PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                          "file changed while loading: %s moved since its header was validated "
                          "(rewritten in place?)",
                          what);
    pinio_diag_set_index(diag, i);
    return PINIO_ECHANGED;
}
