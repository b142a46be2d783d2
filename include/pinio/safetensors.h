/**
 * @file safetensors.h
 * @brief pinio_st: parse and validate a safetensors header, then look tensors up.
 *
 * Format: `[u64 LE N][N bytes of UTF-8 JSON][data section]`. The JSON object
 * maps tensor names to `{"dtype", "shape", "data_offsets": [BEGIN, END]}`
 * (offsets relative to the data section, which starts at file offset 8 + N)
 * and may hold `"__metadata__"`, a string → string map.
 *
 * Validation follows the reference implementation (`read_metadata` +
 * `Metadata::validate`) rule by rule, and is stricter where it is lenient.
 * A rejection returns #PINIO_EFORMAT and fills the optional #pinio_diag with
 * one line `FILE: Rule: detail`, where `Rule` is one of (reference names):
 *
 * | Rule | meaning |
 * |---|---|
 * | HeaderTooSmall | the file is shorter than 8 bytes |
 * | HeaderTooLarge | N > #PINIO_ST_HEADER_MAX (10^8 bytes) |
 * | InvalidHeaderLength | 8 + N is beyond the end of the file |
 * | InvalidHeader | the header is not valid UTF-8 (names the byte offset) |
 * | InvalidHeaderDeserialization | bad JSON, or not the expected shape: top level not an object, tensor entry not an object, missing/duplicate field, unknown dtype, dim or offset not a non-negative 64-bit integer, data_offsets not a pair, `__metadata__` not a string → string map |
 * | DuplicateKey | the same tensor name or metadata key twice (stricter than the reference) |
 * | InvalidHeaderDeserialization | also stricter than the reference: a tensor entry written as a JSON array (`[dtype, shape, offsets]`, which serde accepts for a struct), a dtype written as an enum object (`{"F32": null}`), a tensor name holding a NUL (`\u0000`; the diagnostic names its byte), all refused so that every pinio path (loader, CLI, bindings) can treat names as C strings and entries one way |
 * | InvalidOffset | after sorting by (BEGIN, END), a tensor does not start where the previous one ended, or END < BEGIN: a gap, overlap or reversed range |
 * | ValidationOverflow | the element or bit count overflows 64 bits |
 * | MisalignedSlice | a sub-byte dtype whose bit count is not a multiple of 8 |
 * | TensorInvalidInfo | END − BEGIN differs from dtype × shape |
 * | MetadataIncompleteBuffer | 8 + N + data end differs from the file size (truncated file, or trailing bytes) |
 *
 * Unknown fields inside a tensor entry are ignored, as the reference does,
 * unless #PINIO_ST_REJECT_UNKNOWN_FIELDS is given; as in the reference
 * (serde_json), what they hold is still checked: nesting of at most 127
 * levels counting the top-level object, and no number that overflows a
 * 64-bit float (`1e400`, a 400-digit integer). So whatever pinio accepts,
 * the reference accepts.
 *
 * Memory: nothing is allocated in proportion to a size the file claims
 * before that claim is checked: N is checked against the cap and the file
 * size before the header buffer is allocated, and the parsed tables grow
 * with the JSON actually read.
 *
 * Threads: a parsed #pinio_st is immutable; any number of threads may call
 * the accessors concurrently. Parsing touches no global state.
 */
#ifndef PINIO_SAFETENSORS_H
#define PINIO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The largest header the reference accepts: 10^8 bytes (not 100 MiB). */
#define PINIO_ST_HEADER_MAX 100000000u

/**
 * Element types, in the reference's enum order (which its writer uses, in
 * descending order, to keep tensors naturally aligned).
 */
typedef enum pinio_dtype {
    PINIO_DTYPE_BOOL,
    PINIO_DTYPE_F4,        /**< 4-bit float (MXFP4) */
    PINIO_DTYPE_F6_E2M3,   /**< 6-bit float (MXFP6) */
    PINIO_DTYPE_F6_E3M2,   /**< 6-bit float (MXFP6) */
    PINIO_DTYPE_U8,
    PINIO_DTYPE_I8,
    PINIO_DTYPE_F8_E5M2,
    PINIO_DTYPE_F8_E4M3,
    PINIO_DTYPE_F8_E8M0,
    PINIO_DTYPE_F8_E4M3FNUZ,
    PINIO_DTYPE_F8_E5M2FNUZ,
    PINIO_DTYPE_I16,
    PINIO_DTYPE_U16,
    PINIO_DTYPE_F16,
    PINIO_DTYPE_BF16,
    PINIO_DTYPE_I32,
    PINIO_DTYPE_U32,
    PINIO_DTYPE_F32,
    PINIO_DTYPE_C64,       /**< complex of two f32 */
    PINIO_DTYPE_F64,
    PINIO_DTYPE_I64,
    PINIO_DTYPE_U64,
    PINIO_DTYPE_COUNT      /**< number of dtypes (not a dtype) */
} pinio_dtype;

/** The dtype's safetensors name ("BF16", "F8_E4M3", ...); "?" when out of range. */
PINIO_API const char *pinio_dtype_name(pinio_dtype dt);

/** Bits per element (4, 6, 8, 16, 32 or 64); 0 when out of range. */
PINIO_API unsigned pinio_dtype_bits(pinio_dtype dt);

/**
 * Looks a dtype up by its exact (case-sensitive) safetensors name of `len` bytes.
 * @return 0 and `*out` set, or -EINVAL for an unknown name (`*out` untouched).
 */
PINIO_API int pinio_dtype_from_name(const char *name, size_t len, pinio_dtype *out);

/** Flags for the parse functions. */
enum pinio_st_flags {
    /** Reject fields other than dtype/shape/data_offsets in a tensor entry
     *  (the JSON schema's `additionalProperties: false`; the reference ignores them). */
    PINIO_ST_REJECT_UNKNOWN_FIELDS = 1u << 0,
    /** Accept bytes after the last tensor's data (fastsafetensors' leniency;
     *  the reference rejects them as MetadataIncompleteBuffer). */
    PINIO_ST_ALLOW_TRAILING_BYTES = 1u << 1,
};

/** A parsed, validated header. Opaque; free with pinio_st_free(). */
typedef struct pinio_st pinio_st;

/**
 * One tensor. Every pointer points into the #pinio_st it came from and is
 * valid until pinio_st_free().
 */
typedef struct pinio_st_tensor {
    const char *name;      /**< decoded UTF-8, NUL-terminated (never holds a NUL: refused when parsed) */
    size_t name_len;       /**< bytes, without the terminating NUL */
    pinio_dtype dtype;
    unsigned rank;         /**< number of dims; 0 for a scalar (one element) */
    const uint64_t *shape; /**< `rank` dims (non-NULL even when rank is 0) */
    uint64_t nelems;       /**< product of the dims (1 for a scalar) */
    uint64_t begin, end;   /**< data_offsets, relative to the data section */
    uint64_t nbytes;       /**< end - begin == nelems × bits / 8 */
    uint64_t file_offset;  /**< absolute: 8 + N + begin */
    /** The largest power of two dividing file_offset, capped at 4096: the
     *  alignment this tensor's bytes have in the file. safetensors guarantees
     *  none, so a loader must check it rather than assume it. */
    uint64_t align;
} pinio_st_tensor;

/** One `__metadata__` entry; pointers valid until pinio_st_free(). */
typedef struct pinio_st_kv {
    const char *key;       /**< NUL-terminated */
    size_t key_len;
    const char *value;     /**< NUL-terminated */
    size_t value_len;
} pinio_st_kv;

/**
 * Checks rules HeaderTooSmall, HeaderTooLarge and InvalidHeaderLength from
 * the file's first bytes and its size, so a caller knows how much to read.
 *
 * @param prefix  the file's first `min(file_size, 8)` bytes.
 * @param file_size  the file size in bytes.
 * @param path  file name for the diagnostic (NULL: "<buffer>").
 * @param header_len  on success, N.
 * @return 0, or PINIO_EFORMAT (diag filled). Allocates nothing.
 */
PINIO_API int pinio_st_header_len(const void *prefix, uint64_t file_size, const char *path,
                                  uint64_t *header_len, pinio_diag *diag);

/**
 * Parses and validates a header already in memory.
 *
 * @param buf  the file's first `len` bytes: `len` must be at least 8 + N
 *             (pinio_st_header_len() tells N), or all of the file when smaller.
 *             Only bytes [0, 8 + N) are read; the buffer is not kept.
 * @param file_size  the whole file's size (rules InvalidHeaderLength and
 *             MetadataIncompleteBuffer compare against it).
 * @param path  file name for diagnostics (NULL: "<buffer>"); not kept.
 * @param flags  a combination of #pinio_st_flags.
 * @return 0 with `*out` owning a new #pinio_st (free it with pinio_st_free());
 *         PINIO_EFORMAT for an invalid header; -EINVAL when `len` is shorter
 *         than 8 + N though the file is long enough (a caller error);
 *         -ENOMEM. On failure `*out` is set to NULL, nothing is left allocated,
 *         and the diag (if any) holds one line.
 */
PINIO_API int pinio_st_parse(pinio_st **out, const void *buf, size_t len, uint64_t file_size,
                             const char *path, unsigned flags, pinio_diag *diag);

/**
 * Reads and parses the header of an open file (with pread; the file offset
 * is not used or moved). The descriptor stays the caller's, open.
 *
 * @return as pinio_st_parse(), plus a negative errno for I/O (fstat, pread)
 *         and -EISDIR / -EINVAL for a directory / a file that is not regular.
 */
PINIO_API int pinio_st_read_fd(pinio_st **out, int fd, const char *path, unsigned flags,
                               pinio_diag *diag);

/** Opens `path` read-only and calls pinio_st_read_fd(); closes it before returning. */
PINIO_API int pinio_st_open(pinio_st **out, const char *path, unsigned flags, pinio_diag *diag);

/** Frees a parsed header and everything its accessors returned. NULL is a no-op. */
PINIO_API void pinio_st_free(pinio_st *st);

/** Number of tensors. */
PINIO_API size_t pinio_st_count(const pinio_st *st);

/**
 * The tensor at position `i` in file order: sorted by (begin, end), ties
 * (zero-length tensors at one offset) in header order. NULL when `i` is out of range.
 */
PINIO_API const pinio_st_tensor *pinio_st_at(const pinio_st *st, size_t i);

/**
 * Finds a tensor by its exact name of `len` bytes (O(log n): a sorted index).
 * @return the tensor, or NULL when there is none.
 */
PINIO_API const pinio_st_tensor *pinio_st_find(const pinio_st *st, const char *name, size_t len);

/** The position of `t` (from this #pinio_st) in file order. */
PINIO_API size_t pinio_st_position(const pinio_st *st, const pinio_st_tensor *t);

/** Number of `__metadata__` entries. */
PINIO_API size_t pinio_st_metadata_count(const pinio_st *st);

/** Metadata entry `i`, in header order; NULL when out of range. */
PINIO_API const pinio_st_kv *pinio_st_metadata_at(const pinio_st *st, size_t i);

/** The value of metadata key `key` (NUL-terminated), or NULL when absent. */
PINIO_API const char *pinio_st_metadata_get(const pinio_st *st, const char *key);

/** N: the JSON header's length in bytes (whitespace padding included). */
PINIO_API uint64_t pinio_st_header_size(const pinio_st *st);

/** File offset where the data section starts: 8 + N. */
PINIO_API uint64_t pinio_st_data_offset(const pinio_st *st);

/** Bytes of tensor data: the last tensor's end (0 without tensors). */
PINIO_API uint64_t pinio_st_data_size(const pinio_st *st);

/** The file size the header was validated against. */
PINIO_API uint64_t pinio_st_file_size(const pinio_st *st);

/* ---- index files ------------------------------------------------------ */

/** The largest index file accepted (the same cap as a header). */
#define PINIO_ST_INDEX_MAX PINIO_ST_HEADER_MAX

/**
 * A parsed `model.safetensors.index.json`: `{"metadata": {...},
 * "weight_map": {"tensor name": "shard file", ...}}` (other top-level keys
 * are ignored, as transformers does). Rejected with #PINIO_EFORMAT and a
 * diagnostic naming the file and byte: invalid UTF-8 or JSON, no
 * weight_map or an empty one (loading nothing would hide a broken index),
 * a value that is not a string, a tensor listed twice (DuplicateKey), a
 * shard name that is empty, absolute, has an empty or ".." component
 * ("a//b", "a/", "../b"; "model..v2.safetensors" is fine: components are
 * compared, not substrings) or holds a NUL (a shard must live in the
 * index's folder; symlinks are the opener's to confine). "." components
 * are dropped, so "./a" and "a" are one shard. A tensor name holding a NUL
 * is refused, as in a header. Parsing is
 * O(n log n) in the entries. Opaque; immutable once parsed (any thread may
 * call the accessors).
 */
typedef struct pinio_st_index pinio_st_index;

/** One weight_map entry; pointers valid until pinio_st_index_free(). */
typedef struct pinio_st_index_entry {
    const char *name; /**< decoded UTF-8, NUL-terminated (never holds a NUL) */
    size_t name_len;
    size_t shard;     /**< index for pinio_st_index_shard() */
} pinio_st_index_entry;

/**
 * Parses the index image `buf[0, len)` as if read from `path` (shard paths
 * resolve in its folder; nothing is opened).
 * @return 0 with `*out` owning the index (pinio_st_index_free());
 *         #PINIO_EFORMAT (`diag` names `path` and the byte), -ENOMEM. On
 *         failure `*out` is NULL and nothing stays allocated.
 */
PINIO_API int pinio_st_index_parse(pinio_st_index **out, const void *buf, size_t len,
                                   const char *path, pinio_diag *diag);

/**
 * Reads `path` (a regular file of at most #PINIO_ST_INDEX_MAX bytes) and
 * parses it. @return as pinio_st_index_parse(), plus the negative errno of
 * open/read, -EINVAL for a path that is not a regular file.
 */
PINIO_API int pinio_st_index_open(pinio_st_index **out, const char *path, pinio_diag *diag);

/** Frees the index and everything its accessors returned. NULL is a no-op. */
PINIO_API void pinio_st_index_free(pinio_st_index *ix);

/** The path the index was parsed as. */
PINIO_API const char *pinio_st_index_path(const pinio_st_index *ix);

/** Number of weight_map entries. */
PINIO_API size_t pinio_st_index_count(const pinio_st_index *ix);

/** Entry `i` in name order (bytewise, shorter first on a tie); NULL when out of range. */
PINIO_API const pinio_st_index_entry *pinio_st_index_at(const pinio_st_index *ix, size_t i);

/** The entry for the exact name of `len` bytes (O(log n)), or NULL. */
PINIO_API const pinio_st_index_entry *pinio_st_index_find(const pinio_st_index *ix,
                                                          const char *name, size_t len);

/** Number of distinct shards. */
PINIO_API size_t pinio_st_index_shard_count(const pinio_st_index *ix);

/**
 * Shard `i` as a path: the index's folder joined with the shard's name
 * (`dir/name`, or the bare name when the index path has no folder).
 * Shards are numbered in the order the weight_map first names them.
 * NULL when out of range.
 */
PINIO_API const char *pinio_st_index_shard(const pinio_st_index *ix, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_SAFETENSORS_H */
