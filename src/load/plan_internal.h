/* The plan's private state, shared by the files of src/load/ (inputs,
 * selection, cache policy, plan, execution) and their white-box tests. */
#ifndef PINIO_SRC_LOAD_PLAN_INTERNAL_H
#define PINIO_SRC_LOAD_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/plan.h"
#include "pinio/safetensors.h"
#include "src/base/clock.h"
#include "src/load/layout_internal.h"
#include "src/s3/client.h"

/* What identifies a file's content from outside: if any of it differs
 * between validation and the end of the reads, the bytes read are not the
 * bytes the header described. */
typedef struct pinio__file_id {
    uint64_t dev, ino, size;
    int64_t mtime_s, ctime_s;
    uint32_t mtime_ns, ctime_ns;
} pinio__file_id;

typedef struct pinio__pfile {
    pinio_plan_file pub;
    char *path;
    int fd;                 /* the descriptor the header was validated through */
    pinio_st *st;
    pinio__file_id id;
    uint64_t dio_align;     /* statx's O_DIRECT offset/memory alignment, 0 when unknown */
    char why[96];           /* pub.cache_why */
    /* An object of an S3 store (pub.object; fd is -1): where it is, the
     * version the header was validated from (pinned by every request), and
     * the plan's client, which rereads (pinio__obj_pread) share. */
    char *bucket, *key;
    pinio__s3_meta ver;
    pinio__s3 *s3;
    uint8_t *prefix;        /* its first prefix_len bytes, fetched with the header */
    uint64_t prefix_len;
} pinio__pfile;

/* Resolved inputs: paths in resolution order, and the index if any. */
typedef struct pinio__inputs {
    char **paths;
    bool *named;            /* per path: the caller named this file itself */
    size_t n, cap;
    pinio_st_index *index;
    pinio__s3 *s3;          /* opened at the first s3:// input; the plan takes it */
    pinio_stop_fn stop;     /* the caller's stop request, for in->s3 while resolving */
    void *stop_ctx;
    char *index_image;      /* an object index's bytes (stage copies them) */
    size_t index_len;
} pinio__inputs;

struct pinio_plan {
    pinio__pfile *files;
    size_t nfiles;
    pinio_st_index *index;  /* NULL without an index */
    pinio_plan_tensor *tensors;
    size_t ntensors;
    pinio__layout layout;
    pinio_plan_info info;
    pinio_plan_opts opts;   /* filters, slices and split are not kept (NULL) */
    /* slice.c: per tensor, its first range in the layout (a strided slice's
     * runs are consecutive ranges, so their dest offsets are
     * layout.range_dest_off[first_range[i] + k]). */
    size_t *first_range;
    /* The sliced tensors' start[] and shape[] (rank each), which their
     * `start` and `shape` point into; a checkpoint takes it over. */
    uint64_t *slice_dims;
    bool slicing;           /* slices or split rules were given */
    pinio_plan_slice_info sinfo;
    pinio__s3 *s3;          /* the client of the object files; NULL without any */
    char *index_image;      /* an object index's bytes; NULL for a file index */
    size_t index_len;
};

/* inputs.c: files, directories and index files -> the file list. */
int pinio__inputs_resolve(pinio__inputs *in, const char *const *paths, size_t n,
                          pinio_stop_fn stop, void *stop_ctx, pinio_diag *diag);
void pinio__inputs_free(pinio__inputs *in);

/* hub.c: the Hugging Face hub cache. Whether `spec` has the shape of a
 * repo id (ORG/NAME[@REV]); its snapshot folder in the cache (HF_HUB_CACHE,
 * HF_HOME/hub, ~/.cache/huggingface/hub), malloc'ed into *out, or -ENOENT
 * naming where it looked; and, for a folder at or beneath a hub snapshot
 * (models--ORG--NAME/snapshots/REV[/SUB], taken through realpath), the
 * model folder its links may reach and the folder's path beneath it. */
bool pinio__hub_is_repo_id(const char *spec);
int pinio__hub_resolve(const char *spec, char **out, pinio_diag *diag);
bool pinio__hub_model_root(const char *dir, char *root, size_t n, char *prefix, size_t pn);

/* inputs.c: the error of a file that could not be opened for want of
 * descriptors (EMFILE), in a plan of `nfiles` files: the count, both
 * limits, and which of them must rise. */
void pinio__diag_nofile(pinio_diag *diag, const char *path, size_t nfiles);

/* inputs.c: opens `f->path` (regular files only; a FIFO does not block),
 * records its identity and validates its header through that descriptor,
 * or, when `header` is not NULL, parses those bytes (the file's first
 * `header_len`) against the descriptor's size instead of reading them.
 * `shard_of` names the index when the file is one of its shards. A file
 * pinio found (an index's shard, a folder's file, a repo id's) must resolve
 * beneath the index's folder, else its own (in a hub snapshot: the model's
 * folder; or a folder of PINIO_LINK_ROOTS): -EXDEV, said. A file the caller
 * `named` itself is opened as named, wherever its links lead, except in a
 * hub snapshot, whose links must stay in their model's folder. */
int pinio__pfile_open(pinio__pfile *f, const char *shard_of, bool named, const void *header,
                      size_t header_len, pinio_diag *diag);

/* inputs.c: fills `f->pub` from a file (not an object) opened and validated. */
void pinio__pfile_publish(pinio__pfile *f);

/* inputs.c: the file's identity now, through its descriptor. */
int pinio__file_id_get(int fd, pinio__file_id *id);
/* ... and of whatever `path` names now (symlinks followed). */
int pinio__file_id_at(const char *path, pinio__file_id *id);

/* select.c: the index allowlist, then the filters (`exact`: names, see
 * pinio_plan_opts::filters_exact), then one name per tensor across files.
 * Fills p->tensors (dest_offset still 0). */
bool pinio__filter_match(const char *const *filters, size_t n, const char *name, size_t len);
/* The same match for many names: the filters prepared once (sorted, every
 * one as a literal; `filters` must outlive the set). `exact`: a name
 * matches a filter it equals, nothing else. */
typedef struct pinio__filters {
    const char **lit, **glob;
    size_t nlit, nglob, n;
    uint64_t lens[4];       /* bit L: a literal filter of L bytes (L < 256) */
    bool long_lit;          /* a literal filter of 256 bytes or more */
    bool exact;
} pinio__filters;
int pinio__filters_prepare(pinio__filters *fs, const char *const *filters, size_t n, bool exact);
bool pinio__filters_match(const pinio__filters *fs, const char *name, size_t len);
void pinio__filters_free(pinio__filters *fs);
int pinio__select(pinio_plan *p, const char *const *filters, size_t nfilters, bool exact,
                  pinio_diag *diag);

/* slice.c: each selected tensor's slice, from `o`'s slices and split
 * rules (read during the call only): fills the tensors' slice fields, their
 * shape, nbytes and file_offset for slices, p->info.bytes and p->sinfo's
 * counts. -EINVAL / -ENOENT naming the tensor. */
int pinio__slice_resolve(pinio_plan *p, const pinio_plan_opts *o, pinio_diag *diag);

/* slice.c: the byte ranges the layout reads, one per tensor or one per run
 * of a strided slice, into a malloc'ed `*out` (`*n` of them); fills
 * p->first_range. 0 or -ENOMEM. */
int pinio__slice_ranges(pinio_plan *p, pinio__range **out, size_t *n);

/* cache.c: the page-cache policy per file (pub.hot, pub.cache_why). */
void pinio__cache_decide(pinio_plan *p);

/* plan.c: PINIO_ECHANGED unless file `i` is still what was validated. */
int pinio__plan_check_unchanged(const pinio_plan *p, size_t i, pinio_diag *diag);

/* object.c: the object source (s3:// inputs).
 *
 * Resolves one s3:// input into `in`: an object (KEY.safetensors), an
 * index (KEY.json, fetched and parsed), or a prefix (s3://B/P/ or a key
 * that is neither: listed; its model.safetensors.index.json when present,
 * else its *.safetensors objects in key order). Opens in->s3 first; sets
 * in->index (and its image), or returns the objects' URLs (malloc'ed, in a
 * malloc'ed array of *nout) for the caller to add. */
int pinio__obj_resolve(pinio__inputs *in, const char *url, char ***out, size_t *nout,
                       pinio_diag *diag);

/* Opens object file `f` (f->path an s3:// URL) through `s3` (kept in f->s3,
 * not owned): HEAD for its size and validators (f->ver), then its header
 * fetched pinned to that version and validated as a file's is (or `header`
 * parsed against the size, as pinio__pfile_open does). */
int pinio__obj_open(pinio__s3 *s3, pinio__pfile *f, const void *header, size_t header_len,
                    pinio_diag *diag);

/* Executes the object files' reads among [a, b): each claimed, cut into
 * ranges of 8-16 MiB, fetched at the client's concurrency in batches of at
 * most `batch_max` bytes / o->batch_reads reads, checked, then landed in
 * order. An object whose version some answer could not confirm (pinned by
 * its size alone, or answers without the validator) is asked again after
 * its reads (pinio__obj_recheck). `*done` counts bytes for the progress
 * callback (of `total`, since `t0`). Adds to rep's object counters and
 * writes its I/O path line, which says what pinned the versions, to
 * `line`. */
int pinio__obj_execute(pinio_plan *p, size_t a, size_t b, const pinio_dest_ops *ops, void *ctx,
                       const pinio_exec_opts *o, uint64_t batch_max, uint64_t *done,
                       uint64_t total, double t0, pinio_exec_report *rep, char *line,
                       size_t line_size, pinio_diag *diag);

/* Bytes [off, off + len) of object file `f` (clamped to its size), through
 * the plan's client (f->s3: its connections, its concurrency, its
 * counters) in ranges of 8 MiB at once; any thread may call it (the
 * hasher's rereads), taking turns with the load's reads; asked again
 * (pinio__obj_recheck) when an answer could not confirm the version.
 * Returns the bytes read or a negative code. */
int64_t pinio__obj_pread(const pinio__pfile *f, void *buf, size_t len, uint64_t off,
                         pinio_diag *diag);

/* HEAD of object file `f` again: 0 when it can still be the version its
 * header came from (pinio__s3_same), else PINIO_ECHANGED naming it. */
int pinio__obj_recheck(const pinio__pfile *f, pinio_diag *diag);

/* What pinned the object files' versions, the weakest of them ("etag",
 * "last-modified", "size"), or "" without objects. */
const char *pinio__obj_pinned_by(const pinio_plan *p);

/* exec.c: the piece a staggered read of `n` pieces starts at, for reader
 * `rank` of `ranks` (ranks 0: `rank` is any per-process number, taken
 * modulo n). Piece k of the read is then issued as (first + k) % n. */
uint64_t pinio__stagger_first(uint64_t n, uint64_t rank, uint32_t ranks);

/* exec.c: the k-th file (of `nfiles`) that reader `rank` of `ranks` reads
 * in the staggered order: from pinio__stagger_first(nfiles, rank, ranks)
 * on, wrapping around (ranks 0: `rank` is a per-process number). Each
 * file once for k in [0, nfiles). */
size_t pinio__file_at(size_t k, size_t nfiles, uint64_t rank, uint32_t ranks);

/* exec.c: whether execution options `o` ask for the staggered order
 * (PINIO_READ_ORDER resolved; an invalid value is no), and then this
 * reader's rank and ranks as pinio__file_at() takes them. */
bool pinio__files_rotated(const pinio_exec_opts *o, uint64_t *rank, uint32_t *ranks);

/* exec.c: the request size for cold reads of `bytes` from a network or
 * FUSE file system whose files state st_blksize `blksize`, and in *depth
 * the requests in flight (the rule is beside it): a power of two, 1 to 16
 * MiB, never below the file system's unit; depth 32 to 128. */
size_t pinio__netfs_sizes(uint64_t blksize, uint64_t bytes, unsigned *depth);

/* exec.c: the batch size a progress callback gets for `total` bytes: 1/16
 * of them, 16 MiB to 1 GiB. */
uint64_t pinio__batch_bytes_default(uint64_t total);


#endif
