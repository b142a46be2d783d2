/**
 * @file save.h
 * @brief pinio_save: tensors in memory to a safetensors file, byte for byte
 *        what the reference writer produces.
 *
 * Layout (the reference writer's `prepare` + `serialize`, safetensors
 * 0.4-0.8): tensors sorted by dtype in *descending* enum order
 * (#pinio_dtype is the reference's order), ties by name (bytewise), laid
 * out back to back from data offset 0; the header is compact JSON
 * (serde_json's: no spaces, `"__metadata__"` first when there is any, then
 * each tensor as `{"dtype":..,"shape":[..],"data_offsets":[b,e]}`; strings
 * escaped as serde_json escapes them) padded with spaces to a multiple of 8,
 * so the data section starts 8-aligned and each tensor is naturally aligned.
 * Metadata entries are written in the caller's order (the reference's is a
 * hash map's: unspecified when there are two keys or more).
 *
 * Durability: the file is written under a temporary name in the target's
 * folder, fsync'ed, renamed over the target, and the folder fsync'ed, so a
 * crash leaves either the old file or the whole new one under the final
 * name, never a partial file; a reader that has the old file mapped keeps
 * its bytes (the reference writer does the same since its PR #764).
 *
 * The file it replaces: its permission bits are kept (set-id bits aside, as
 * a write would clear them), and its owner and group where the caller may
 * set them (root). A read-only file is refused (-EACCES) unless the caller
 * may write it anyway (root), as the reference writer's open(2) is; a
 * directory or other non-regular file is refused. A symlink is written
 * through, as open(2) would: the link stays, the file it names is replaced
 * (its temporary beside it); a link to nothing is refused (-ENOENT).
 *
 * The temporary is `DIR/.NAME.pinio-save-PID.tmp`, created O_EXCL |
 * O_NOFOLLOW (whatever is planted under that name is never followed or
 * truncated: the save fails with -EEXIST) and marked as the writer's
 * (xattr user.pinio.save). A writer killed mid-write leaves it; a later
 * save of the same file removes it by the rule gen and bench follow
 * (src/base/stale.h: marked, its process gone, a minute untouched).
 *
 * Every rule the reader enforces is checked before a byte is written (the
 * header goes through the reader's own parser): a file pinio_save writes is
 * never one pinio refuses to read (a NUL in a name, a header over
 * #PINIO_ST_HEADER_MAX, a name given twice, ...).
 *
 * I/O: where the file system accepts O_DIRECT the bytes go through a
 * page-aligned, page-locked (when RLIMIT_MEMLOCK allows) staging buffer
 * straight to storage, without filling the page cache with a checkpoint
 * that is not read back soon; elsewhere (tmpfs, or O_DIRECT refused at the
 * first write) plain buffered writes from the caller's memory.
 *
 * Threads: pinio_save() touches no global state; any number of threads may
 * save different files at once. The tensors' memory is only read.
 */
#ifndef PINIO_SAVE_H
#define PINIO_SAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/ring.h" /* pinio_direct_policy */
#include "pinio/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One tensor to save. Read during the call only. */
typedef struct pinio_save_tensor {
    const char *name;      /**< UTF-8, not "__metadata__", unique within a call */
    size_t name_len;       /**< bytes; 0 = strlen(name) */
    pinio_dtype dtype;
    unsigned rank;         /**< 0 for a scalar (one element) */
    const uint64_t *shape; /**< `rank` dims (may be NULL when rank is 0) */
    const void *data;      /**< `nbytes` bytes, little-endian, row-major; NULL only when 0 bytes */
    uint64_t nbytes;       /**< must equal the dims' product × the dtype's bits / 8 */
} pinio_save_tensor;

/** Options of pinio_save(). Start from pinio_save_opts_default(). */
typedef struct pinio_save_opts {
    size_t struct_size;         /**< sizeof(pinio_save_opts), set by the defaults function */
    /** `__metadata__` entries (keys unique, UTF-8), written in this order;
     *  none: no `__metadata__` key at all. Keys and values use their `_len`
     *  fields (0 = strlen). */
    const pinio_st_kv *metadata;
    size_t nmetadata;
    pinio_direct_policy direct; /**< AUTO: O_DIRECT where the file system takes it */
    /** Skip the fsync of the file and folder (tests and scratch files; the
     *  rename stays atomic but not durable across a crash). Default false. */
    bool no_sync;
    /** Optional: called after each staged chunk (every 8 MiB or so). */
    pinio_progress_fn progress;
    void *progress_ctx;
} pinio_save_opts;

/** Fills `*opts` with the defaults described field by field above. */
static inline void pinio_save_opts_default(pinio_save_opts *opts);

/**
 * What pinio_save_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_save_opts_init(pinio_save_opts *opts, size_t size);

static inline void pinio_save_opts_default(pinio_save_opts *opts)
{
    pinio_save_opts_init(opts, sizeof(*opts));
}

/** What a save did. */
typedef struct pinio_save_result {
    uint64_t file_bytes;   /**< bytes of the file: 8 + header + data */
    uint64_t header_bytes; /**< N: the JSON header with its padding */
    uint64_t data_bytes;   /**< tensor bytes */
    bool direct;           /**< the data went to storage with O_DIRECT */
    double seconds;        /**< wall time, fsync and rename included */
    char io_path[160];     /**< one line: how it was written and why */
} pinio_save_result;

/**
 * Builds the first 8 + N bytes of the file pinio_save() would write: the
 * length prefix and the padded JSON header. Nothing is written anywhere.
 *
 * @param order  optional, `n` entries: receives the tensors' indices in the
 *               order their bytes follow the header (a caller assembling the
 *               file in memory, like the reference's `serialize`, copies
 *               `ts[order[0]]`, `ts[order[1]]`, ... after the header).
 * @param out    on success a malloc'd buffer the caller frees (free()), of
 *               `*out_len` bytes. Untouched on failure.
 * @param diag   optional; names the tensor (and `diag->index` its index in `ts`).
 * @return 0; -EINVAL (a bad tensor: NULL or "__metadata__" or duplicate name,
 *         invalid UTF-8 or a NUL in a name, unknown dtype, NULL shape or data where needed,
 *         nbytes not matching dtype × shape, a sub-byte dtype whose bit count
 *         is not a multiple of 8; a bad metadata entry; anything else the
 *         reader would refuse), -EFBIG (a header over #PINIO_ST_HEADER_MAX),
 *         -EOVERFLOW (offsets past 2^64), -ENOMEM.
 */
PINIO_API int pinio_save_header(const pinio_save_tensor *ts, size_t n,
                                const pinio_save_opts *opts, size_t *order, uint8_t **out,
                                size_t *out_len, pinio_diag *diag);

/**
 * Writes `ts[0, n)` to a safetensors file at `path` (see the file comment:
 * the reference's bytes, temporary name + fsync + rename).
 *
 * @param res   optional, filled on success.
 * @param diag  optional; names the file and offset, or the tensor.
 * @return 0; as pinio_save_header(); -ECANCELED (progress callback);
 *         -ENOTSUP (an s3:// `path`: objects are read, never written);
 *         -EACCES (a read-only file), -EISDIR/-EINVAL (not a regular file),
 *         -ENOENT (a folder or a symlink's file missing), -EEXIST (the
 *         temporary's name is taken); open/write/fsync/rename's errno
 *         (ENOSPC, ...). On failure the temporary file is removed and `path`
 *         is untouched.
 */
PINIO_API int pinio_save(const char *path, const pinio_save_tensor *ts, size_t n,
                         const pinio_save_opts *opts, pinio_save_result *res,
                         pinio_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_SAVE_H */
