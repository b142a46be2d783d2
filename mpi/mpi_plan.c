/*
 * pinio_mpi_load's phase 1 (mpi_load.c runs the others): the arguments
 * that shape the job agreed, each rank's own headers read and its plan
 * built, every rank's files and plan against rank 0's.
 *
 * This file uses the public pinio API only (scripts/check-layers).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/mpi.h"
#include "pinio/safetensors.h"
#include "mpi_internal.h"

/* The smallest stripe segment: below it a read costs more than it moves. */
#define SEGMENT_MIN ((uint64_t)256 << 10)

/* A growable byte buffer: a rank's header image, the arguments hashed. */
typedef struct blob {
    uint8_t *b;
    size_t len, cap;
} blob;

static int blob_put(blob *x, const void *p, size_t n)
{
    if (x->len + n > x->cap) {
        size_t cap = x->cap ? x->cap : 4096;
        while (cap < x->len + n)
            cap *= 2;
        uint8_t *nb = realloc(x->b, cap);
        if (!nb)
            return -ENOMEM;
        x->b = nb;
        x->cap = cap;
    }
    memcpy(x->b + x->len, p, n);
    x->len += n;
    return 0;
}

static int blob_u64(blob *x, uint64_t v)
{
    return blob_put(x, &v, sizeof(v));
}

static int blob_str(blob *x, const char *s)
{
    return blob_put(x, s, strlen(s) + 1);
}

/* The first `len` bytes of `path` into `x` (len 0: the whole file). */
static int blob_file(blob *x, const char *path, uint64_t len, pinio_diag *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        pinio_diag_set_at(d, rc, path, PINIO_DIAG_NO_OFFSET, "cannot open: %s",
                          pinio_strerror(rc));
        return rc;
    }
    if (len == 0) {
        off_t end = lseek(fd, 0, SEEK_END);
        len = end > 0 ? (uint64_t)end : 0;
    }
    int rc = blob_u64(x, len);
    for (uint64_t off = 0; rc == 0 && off < len;) {
        char buf[1 << 16];
        size_t want = len - off < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);
        ssize_t got = pread(fd, buf, want, (off_t)off);
        if (got <= 0) {
            rc = got < 0 ? -errno : PINIO_ECHANGED;
            pinio_diag_set_at(d, rc, path, off, "reading the header: %s",
                              got < 0 ? pinio_strerror(rc) : "file shorter than its header");
            break;
        }
        rc = blob_put(x, buf, (size_t)got);
        off += (uint64_t)got;
    }
    close(fd);
    return rc;
}

/*
 * Each rank, its own inputs: resolved and validated as a plan would (a
 * probe plan: its diagnostics are the ones a single-process load gives),
 * then each file's header bytes and the index read into one image:
 *   u64 align, u64 segment, u64 nfiles, str index_path ("" none), [u64 len, bytes],
 *   nfiles x (str path, u64 len, bytes)
 */
static int read_headers(job *j, const char *const *paths, size_t npaths, blob *x)
{
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = j->o.cache;
    po.direct = j->o.direct;
    pinio_plan *probe = NULL;
    int rc = pinio_plan_create(&probe, paths, npaths, &po, &j->local);
    if (rc < 0)
        return rc;
    pinio_plan_info pi;
    pinio_plan_get_info(probe, &pi);
    /* Stripes are runs of whole reads, and a plan of one file is often one
     * read: a segment (reads never cross a multiple of it) of about a
     * eighth of a rank's share gives every rank reads to take, and keeps
     * the stripes within half a read (1/16 of a share) of balanced. */
    uint64_t seg = pi.align > SEGMENT_MIN ? pi.align : SEGMENT_MIN;
    while (seg < REGION_MAX && seg * 8 * (uint64_t)j->n < pi.read_bytes)
        seg *= 2;
    rc = blob_u64(x, pi.align);
    if (rc == 0)
        rc = blob_u64(x, seg);
    if (rc == 0)
        rc = blob_u64(x, pi.files);
    if (rc == 0)
        rc = blob_str(x, pi.index_path ? pi.index_path : "");
    if (rc == 0 && pi.index_path)
        rc = blob_file(x, pi.index_path, 0, &j->local);
    for (size_t i = 0; rc == 0 && i < pi.files; i++) {
        const pinio_plan_file *f = pinio_plan_file_at(probe, i);
        rc = blob_str(x, f->path);
        if (rc == 0)
            rc = blob_file(x, f->path, 8 + pinio_st_header_size(f->header), &j->local);
        if (rc < 0)
            pinio_diag_set_index(&j->local, i);
    }
    pinio_plan_free(probe);
    return rc;
}

/* A cursor over a rank's header image. */
typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

static bool cur_u64(cursor *c, uint64_t *v)
{
    if ((size_t)(c->end - c->p) < sizeof(*v))
        return false;
    memcpy(v, c->p, sizeof(*v));
    c->p += sizeof(*v);
    return true;
}

static const char *cur_str(cursor *c)
{
    const uint8_t *z = memchr(c->p, 0, (size_t)(c->end - c->p));
    if (!z)
        return NULL;
    const char *s = (const char *)c->p;
    c->p = z + 1;
    return s;
}

static const void *cur_bytes(cursor *c, uint64_t *len)
{
    if (!cur_u64(c, len) || *len > (uint64_t)(c->end - c->p))
        return NULL;
    const void *b = c->p;
    c->p += *len;
    return b;
}

/* Every rank: the plan from its image; `split`: with the TP split rules
 * (this rank's slices). */
static int plan_from_image(job *j, const blob *x, const char *const *shard_filters,
                           size_t nshard, bool split, pinio_plan **out)
{
    cursor c = { x->b, x->b + x->len };
    uint64_t align = 0, seg = 0, nfiles = 0, ilen = 0;
    const char *ipath = NULL;
    const void *index = NULL;
    bool ok = cur_u64(&c, &align) && cur_u64(&c, &seg) && cur_u64(&c, &nfiles) && (ipath = cur_str(&c)) != NULL &&
              nfiles > 0 && nfiles <= x->len;
    if (ok && *ipath)
        ok = (index = cur_bytes(&c, &ilen)) != NULL;
    j->has_index = ok && *ipath;
    if (j->has_index)
        pinio__mpi_sha256(index, (size_t)ilen, j->index_sha);
    pinio_plan_header *h = ok ? calloc((size_t)nfiles, sizeof(*h)) : NULL;
    for (size_t i = 0; h && ok && i < nfiles; i++) {
        uint64_t len = 0;
        ok = (h[i].path = cur_str(&c)) != NULL && (h[i].bytes = cur_bytes(&c, &len)) != NULL;
        h[i].len = (size_t)len;
    }
    if (!ok || !h) {
        free(h);
        pinio_diag_set(&j->local, ok ? -ENOMEM : -EPROTO, "the broadcast header image is %s",
                       ok ? "too large for memory" : "malformed");
        return ok ? -ENOMEM : -EPROTO;
    }
    /* A shard with its own filters: they are this rank's selection. */
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = nshard ? shard_filters : j->o.filters;
    po.nfilters = nshard ? nshard : j->o.nfilters;
    po.cache = j->o.cache;
    po.direct = j->o.direct;
    po.align = align; /* rank 0's: the same layout on every rank whatever its cache */
    po.segment = seg;
    if (split) {
        /* Its reads never run (the whole plan's stripes are read): only
         * its slices' shapes and places count, so no hole is read through. */
        po.split = j->o.split;
        po.nsplit = j->o.nsplit;
        po.rank = (uint32_t)j->rank;
        po.world = (uint32_t)j->n;
        po.max_overread = -1;
    }
    int rc = pinio_plan_create_from_headers(out, h, (size_t)nfiles, index, (size_t)ilen,
                                            *ipath ? ipath : NULL, &po, &j->local);
    free(h);
    return rc;
}

/* Rank 0's `len` bytes of `buf` into every rank's `buf`, agreed. */
static int bcast_agreed(job *j, void *buf, int len, const char *what)
{
    int e = MPI_Bcast(buf, len, MPI_BYTE, 0, j->comm);
    return pinio__mpi_agree(j, e == MPI_SUCCESS ? 0 : pinio__mpi_fail(j, e, what));
}

/*
 * The arguments that shape the job, each hashed, against rank 0's: the
 * ranks must cut the same plan into the same stripes and enter the same
 * collectives, so a difference fails here, before any file is read,
 * naming the argument. What may differ per rank does not enter: the paths
 * (a rank may read a node-local copy: its files' identity is checked
 * instead), the shard filters themselves, the engine's settings.
 */
enum { ARG_POLICY, ARG_FILTERS, ARG_SHARD, ARG_SPLIT, ARG_VERIFY, ARG_N };

static int args_agreed(job *j)
{
    static const char *const what[ARG_N] = {
        "policy and its options (--mpi, --exchange, --piece, --node-ranks)",
        "filters (--filter)",
        "use of shard filters (--shard-filter on some ranks only)",
        "split rules or world (--split, --world)",
        "verify options (--verify, --sha256)",
    };
    uint8_t mine[ARG_N][PINIO_MPI_SHA_LEN], theirs[ARG_N][PINIO_MPI_SHA_LEN];
    blob x[ARG_N] = { { 0 } };
    int rc = 0;
    uint64_t pol[4] = { (uint64_t)j->o.policy, (uint64_t)j->o.exchange, j->o.bcast_piece,
                        (uint64_t)j->o.node_ranks };
    rc |= blob_put(&x[ARG_POLICY], pol, sizeof(pol));
    rc |= blob_u64(&x[ARG_FILTERS], j->o.nfilters);
    for (size_t i = 0; i < j->o.nfilters; i++)
        rc |= blob_str(&x[ARG_FILTERS], j->o.filters[i] ? j->o.filters[i] : "");
    rc |= blob_u64(&x[ARG_SHARD], j->o.nshard_filters > 0);
    /* The world as given (0: the communicator's), so that a rank counting
     * other ranks is named here rather than by its plan. */
    rc |= blob_u64(&x[ARG_SPLIT], j->o.world ? j->o.world : (uint32_t)j->n);
    rc |= blob_u64(&x[ARG_SPLIT], j->o.nsplit);
    for (size_t i = 0; i < j->o.nsplit; i++) {
        rc |= blob_str(&x[ARG_SPLIT], j->o.split[i].pattern ? j->o.split[i].pattern : "");
        rc |= blob_u64(&x[ARG_SPLIT], (uint64_t)(int64_t)j->o.split[i].dim);
    }
    rc |= blob_u64(&x[ARG_VERIFY], j->o.verify);
    rc |= blob_u64(&x[ARG_VERIFY], j->o.verify ? j->o.nexpected : 0);
    for (size_t i = 0; j->o.verify && i < j->o.nexpected; i++) {
        char low[2 * PINIO_MPI_SHA_LEN + 2] = "-"; /* a NULL entry: skip the file */
        const char *e = j->o.expected_sha256[i];
        for (size_t k = 0; e && e[k] && k + 1 < sizeof(low); k++)
            low[k] = (char)(e[k] >= 'A' && e[k] <= 'F' ? e[k] - 'A' + 'a' : e[k]), low[k + 1] = 0;
        rc |= blob_str(&x[ARG_VERIFY], low);
    }
    for (int k = 0; k < ARG_N; k++) {
        pinio__mpi_sha256(x[k].b ? x[k].b : (const uint8_t *)"", x[k].len, mine[k]);
        free(x[k].b);
    }
    if (rc)
        pinio_diag_set(&j->local, rc = -ENOMEM, "no memory to compare the arguments");
    rc = pinio__mpi_agree(j, rc);
    memcpy(theirs, mine, sizeof(mine));
    if (rc == 0)
        rc = bcast_agreed(j, theirs, (int)sizeof(theirs), "MPI_Bcast (arguments)");
    for (int k = 0; rc == 0 && k < ARG_N; k++)
        if (memcmp(mine[k], theirs[k], PINIO_MPI_SHA_LEN) != 0) {
            pinio_diag_set(&j->local, -EINVAL, "its %s differ from rank 0's", what[k]);
            return pinio__mpi_agree(j, -EINVAL);
        }
    return rc == 0 ? pinio__mpi_agree(j, 0) : rc;
}

/* Each file's identity and the index's against rank 0's: the bytes this
 * rank will read are the bytes rank 0 would. */
typedef struct ident_head {
    uint64_t files, has_index;
    uint8_t index[PINIO_MPI_SHA_LEN];
} ident_head;

static int idents_agreed(job *j, const pinio_plan *plan, const char *first_path)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    pinio__mpi_ident *mine = calloc(pi.files, sizeof(*mine)), *theirs = NULL;
    int rc = mine ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < pi.files; i++)
        rc = pinio__mpi_ident_file(plan, i, &mine[i], &j->local);
    rc = pinio__mpi_agree(j, rc);
    ident_head h = { pi.files, j->has_index, { 0 } }, h0;
    memcpy(h.index, j->index_sha, sizeof(h.index));
    h0 = h;
    if (rc == 0)
        rc = bcast_agreed(j, &h0, (int)sizeof(h0), "MPI_Bcast (file identities)");
    if (rc == 0) {
        theirs = j->rank == 0 ? mine : calloc(h0.files ? h0.files : 1, sizeof(*theirs));
        rc = pinio__mpi_agree(j, theirs ? 0 : -ENOMEM);
    }
    if (rc == 0)
        rc = bcast_agreed(j, theirs, (int)(h0.files * sizeof(*theirs)),
                          "MPI_Bcast (file identities)");
    int local = 0;
    if (rc == 0 && h0.files != h.files) {
        pinio_diag_set_at(&j->local, local = PINIO_ECHANGED, first_path, PINIO_DIAG_NO_OFFSET,
                          "resolves to %llu file(s) where rank 0's inputs resolve to %llu: not "
                          "the checkpoint rank 0 reads",
                          (unsigned long long)h.files, (unsigned long long)h0.files);
    } else if (rc == 0 && (h0.has_index != h.has_index ||
                           memcmp(h0.index, h.index, sizeof(h.index)) != 0)) {
        pinio_diag_set_at(&j->local, local = PINIO_ECHANGED,
                          pi.index_path ? pi.index_path : first_path, PINIO_DIAG_NO_OFFSET,
                          "%s: not the checkpoint rank 0 reads",
                          h.has_index && h0.has_index ? "its index differs from rank 0's"
                          : h.has_index ? "an index where rank 0 has none"
                                        : "no index where rank 0 has one");
    }
    for (size_t i = 0; rc == 0 && local == 0 && i < pi.files; i++) {
        const char *why = mine[i].size != theirs[i].size ? "size"
                          : memcmp(mine[i].head, theirs[i].head, PINIO_MPI_SHA_LEN) ? "header"
                          : memcmp(mine[i].sample, theirs[i].sample, PINIO_MPI_SHA_LEN) ? "data"
                                                                                        : NULL;
        if (!why)
            continue;
        const pinio_plan_file *f = pinio_plan_file_at(plan, i);
        if (why[0] == 's')
            pinio_diag_set_at(&j->local, local = PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                              "%llu bytes where rank 0's file has %llu: not the file rank 0 "
                              "reads",
                              (unsigned long long)mine[i].size,
                              (unsigned long long)theirs[i].size);
        else
            pinio_diag_set_at(&j->local, local = PINIO_ECHANGED, f->path, PINIO_DIAG_NO_OFFSET,
                              "its %s differs from rank 0's file (%s): a stale or different copy",
                              why, why[0] == 'h' ? "SHA-256 of the header bytes"
                                                 : "SHA-256 of 16 blocks spread over the file");
        pinio_diag_set_index(&j->local, i);
    }
    if (theirs != mine)
        free(theirs);
    free(mine);
    return rc == 0 ? pinio__mpi_agree(j, local) : rc;
}

/* The plan's digest against rank 0's: the same reads at the same places
 * and the same tensors, so that the stripes and the exchange match. After
 * the arguments and the files agreed it cannot differ; it is checked
 * because a difference would be silent (wrong bytes or a hang). */
static int plan_agreed(job *j, const pinio_plan *p)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    blob x = { 0 };
    uint64_t head[4] = { pi.files, pi.tensors, pi.reads, pi.dest_bytes };
    int rc = blob_put(&x, head, sizeof(head));
    for (size_t i = 0; rc == 0 && i < pi.reads; i++) {
        const pinio_plan_read *r = pinio_plan_read_at(p, i);
        uint64_t v[5] = { r->file, r->offset, r->len, r->need, r->dest_offset };
        rc = blob_put(&x, v, sizeof(v));
    }
    for (size_t i = 0; rc == 0 && i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        uint64_t v[5] = { t->name_len, t->file, t->file_offset, t->nbytes, t->dest_offset };
        rc = blob_put(&x, v, sizeof(v));
        if (rc == 0)
            rc = blob_put(&x, t->name, t->name_len);
    }
    uint8_t mine[PINIO_MPI_SHA_LEN], theirs[PINIO_MPI_SHA_LEN];
    pinio__mpi_sha256(x.b ? x.b : (const uint8_t *)"", x.len, mine);
    free(x.b);
    if (rc < 0)
        pinio_diag_set(&j->local, rc, "no memory to compare the plans");
    rc = pinio__mpi_agree(j, rc);
    memcpy(theirs, mine, sizeof(mine));
    if (rc == 0)
        rc = bcast_agreed(j, theirs, (int)sizeof(theirs), "MPI_Bcast (plan digest)");
    if (rc < 0)
        return rc;
    int local = 0;
    if (memcmp(mine, theirs, sizeof(mine)) != 0)
        pinio_diag_set(&j->local, local = -EINVAL,
                       "its plan (%zu tensors, %zu reads) differs from rank 0's", pi.tensors,
                       pi.reads);
    return pinio__mpi_agree(j, local);
}

/* Phase 1: the arguments agreed; each rank its own headers and plan, with
 * rank 0's alignment; the files and the plans agreed. */
int pinio__mpi_plan_phase(job *j, const char *const *paths, size_t npaths, pinio_plan **plan,
                          pinio_plan **slices, uint64_t *header_bytes)
{
    blob x = { 0 };
    int rc = args_agreed(j);
    if (rc == 0)
        rc = pinio__mpi_agree(j, read_headers(j, paths, npaths, &x));
    /* The image starts with u64 align, u64 segment: rank 0's for all, so
     * that every rank lays out the same reads whatever its file system.
     * With them, whether rank 0 follows the job's progress (every rank
     * then reports its reads to it). */
    uint64_t as[3] = { 0, 0, j->o.progress != NULL };
    if (rc == 0) {
        memcpy(as, x.b, 2 * sizeof(uint64_t));
        rc = bcast_agreed(j, as, (int)sizeof(as), "MPI_Bcast (alignment)");
        memcpy(x.b, as, 2 * sizeof(uint64_t));
        j->job_progress = as[2] != 0;
    }
    if (rc == 0) {
        const char *const *sf = j->own_filters ? j->o.shard_filters : NULL;
        size_t ns = j->own_filters ? j->o.nshard_filters : 0;
        rc = pinio__mpi_agree(j, plan_from_image(j, &x, sf, ns, false, plan));
    }
    if (rc == 0)
        rc = idents_agreed(j, *plan, paths[0]);
    if (rc == 0 && !j->own_filters)
        rc = plan_agreed(j, *plan);
    if (rc == 0 && j->o.verify && j->o.nexpected) {
        pinio_plan_info pi;
        pinio_plan_get_info(*plan, &pi);
        int local = 0;
        if (j->o.nexpected != pi.files)
            pinio_diag_set(&j->local, local = PINIO_EDIGESTS,
                           "%zu expected SHA-256 digest(s) for %zu file(s)", j->o.nexpected,
                           pi.files);
        rc = pinio__mpi_agree(j, local);
    }
    /* A split rule's dimension out of range is the same error on every
     * rank (the rules and the files agreed): rank 0 names it. */
    if (rc == 0 && slices)
        rc = pinio__mpi_agree(j, plan_from_image(j, &x, NULL, 0, true, slices));
    if (rc < 0) {
        pinio_plan_free(*plan);
        *plan = NULL;
    }
    *header_bytes = x.len;
    free(x.b);
    return rc;
}
