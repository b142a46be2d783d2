/**
 * @file gen.h
 * @brief Deterministic synthetic safetensors checkpoints, for tests, demos and benchmarks.
 *
 * Every byte of a generated tensor is a pure function of (seed, tensor name,
 * byte offset within the tensor): a counter-based generator (splitmix64 of
 * `(hash(name) ^ seed) + block`, one 64-bit block per 8 bytes, little-endian),
 * so a reader can check every byte it loaded with pinio_gen_verify() without
 * storing a reference copy, in any order and from any thread.
 *
 * Files written by pinio_gen_write() are laid out as the reference writer
 * (safetensors `save_file`) lays out its own: tensors sorted by dtype
 * descending in the format's enum order (the widest first), then by name,
 * tiled with no gap, the header padded with spaces to a multiple of 8, so
 * every tensor is naturally aligned; `__metadata__` holds `"format": "pt"`
 * and #PINIO_GEN_SEED_KEY → the seed in decimal, so the content can be
 * verified from the file alone.
 *
 * What is generated, by default, is a Llama-style decoder
 * (`model.embed_tokens.weight`, `model.layers.N.self_attn.{q,k,v,o}_proj.weight`,
 * `model.layers.N.mlp.{gate,up,down}_proj.weight`, the two layer norms,
 * `model.norm.weight`, `lm_head.weight`) with consistent shapes
 * (#pinio_gen_model); with a tensor count instead, that many tensors of equal
 * size named as the layers' tensors, in turn.
 */
#ifndef PINIO_GEN_H
#define PINIO_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"
#include "pinio/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The `__metadata__` key holding the generator seed (decimal string). */
#define PINIO_GEN_SEED_KEY "pinio_gen_seed"

/** The index file written next to the shards of a sharded checkpoint. */
#define PINIO_GEN_INDEX_NAME "model.safetensors.index.json"

/**
 * Writes the generated content of tensor `name` (NUL-terminated) for bytes
 * [offset, offset + len) of that tensor into `buf`. Never fails.
 */
PINIO_API void pinio_gen_fill(uint64_t seed, const char *name, uint64_t offset, void *buf,
                              size_t len);

/**
 * Checks `len` bytes at `buf` against the content of tensor `name` starting
 * at byte `offset` of that tensor.
 *
 * @param first_bad  optional: on a mismatch, the tensor-relative offset of the first wrong byte.
 * @return true when every byte matches.
 */
PINIO_API bool pinio_gen_verify(uint64_t seed, const char *name, uint64_t offset, const void *buf,
                                size_t len, uint64_t *first_bad);

/** What to generate. Start from pinio_gen_opts_default(). */
typedef struct pinio_gen_opts {
    size_t struct_size; /**< sizeof(pinio_gen_opts), set by pinio_gen_opts_default() */
    /** Tensor bytes in total (the data sections, headers excluded). Each
     *  tensor's size is rounded down to whole elements of its dtype (and to
     *  whole bytes for sub-byte dtypes), so the total may fall short by a few
     *  bytes per tensor; pinio_gen_result::data_bytes says the exact figure.
     *  With `tensors` set, 0 asks for empty tensors, and a nonzero size too
     *  small for one element of each is refused (-EINVAL, the diag saying
     *  how many bytes would do). */
    uint64_t size;
    /** Number of tensors of equal size; 0: the transformer of #pinio_gen_model instead. */
    size_t tensors;
    /** dtypes used in turn, tensor i getting dtypes[i % ndtypes]; NULL/0: BF16 only. */
    const pinio_dtype *dtypes;
    size_t ndtypes;
    /** 0 or 1: `out` is the path of one .safetensors file. K >= 2: `out` is
     *  a directory (created if missing) that receives
     *  model-0000i-of-0000K.safetensors (i from 1) and #PINIO_GEN_INDEX_NAME,
     *  tensors being dealt to shards in contiguous runs of equal count. */
    unsigned shards;
    uint64_t seed;
    /** Optional: called on the writing thread after each 4 MiB chunk written
     *  (data bytes); nonzero return stops with -ECANCELED, and the file
     *  being written is removed (shards already complete stay). */
    pinio_progress_fn progress;
    void *progress_ctx;
    /* The transformer's dimensions (used when `tensors` is 0); 0 = derived.
     * With `hidden` and `layers` both set, `size` may be 0 (else it is an
     * upper bound); otherwise the model is the widest that fits in `size`
     * with at least one layer per 128 hidden units (see pinio_gen_model_of()). */
    unsigned hidden;       /**< hidden size, a multiple of 8 (at most 2^20) */
    unsigned layers;       /**< decoder layers (at most 100000) */
    unsigned intermediate; /**< MLP width; 0 = 8/3 of hidden rounded up to 256 (8 below 256) */
    unsigned vocab;        /**< vocabulary; 0 = 32000 from hidden 1024 up, 32 x hidden below */
} pinio_gen_opts;

/** The shape of a generated transformer. */
typedef struct pinio_gen_model {
    unsigned hidden;       /**< embed and norm width; q_proj and o_proj are hidden x hidden */
    unsigned layers;
    unsigned intermediate; /**< gate_proj and up_proj: intermediate x hidden; down_proj the transpose */
    unsigned vocab;        /**< embed_tokens and lm_head: vocab x hidden */
    unsigned kv_dim;       /**< k_proj and v_proj: kv_dim x hidden (hidden / 4 from 1024 up, else hidden) */
} pinio_gen_model;

/**
 * The transformer pinio_gen_write() writes for `opts` (whose `tensors` must
 * be 0). Dimensions left at 0 are derived: without `hidden`, the widest of
 * 8192, 5120, 4096, 3072, 2048, 1536, 1024, 768, 512, 256, ..., 8 whose model
 * with `layers` layers (default: hidden / 128, at least 1) fits in `size`,
 * then as many layers as fit; a `size` too small for any gives the smallest
 * model (hidden 8, one layer), larger than `size`.
 * @return 0 and `*out`; -EINVAL (tensors set, hidden not a multiple of 8, a
 *         dimension over its bound, hidden and layers given and over a
 *         nonzero size) with the diag saying which.
 */
PINIO_API int pinio_gen_model_of(const pinio_gen_opts *opts, pinio_gen_model *out,
                                 pinio_diag *diag);

/** What pinio_gen_write() wrote. */
typedef struct pinio_gen_result {
    uint64_t data_bytes; /**< tensor bytes, all files together */
    uint64_t file_bytes; /**< bytes of the .safetensors files (headers included, index not) */
    size_t tensors;
    unsigned files;      /**< .safetensors files written */
} pinio_gen_result;

/** Defaults: size 0, tensors 0 (a transformer, every dimension derived), BF16, one file,
 *  seed 0, no progress. */
static inline void pinio_gen_opts_default(pinio_gen_opts *opts);

/**
 * What pinio_gen_opts_default() calls: fills the first `size` bytes of `*opts`
 * with the defaults (struct_size = `size`; fields past this library's
 * struct stay zero). Inline callers pass their header's sizeof, so a
 * program built against an older, smaller struct is never written past.
 */
PINIO_API void pinio_gen_opts_init(pinio_gen_opts *opts, size_t size);

static inline void pinio_gen_opts_default(pinio_gen_opts *opts)
{
    pinio_gen_opts_init(opts, sizeof(*opts));
}

/**
 * Writes a synthetic checkpoint at `out` (see pinio_gen_opts::shards).
 *
 * Each file (the index too) is written with plain buffered write(2) calls
 * of 4 MiB under a temporary name in the same directory (OUT.tmpPID, marked
 * with the user.pinio.gen extended attribute), fsync'ed, then renamed into
 * place and the directory fsync'ed, so a file at the final name is always
 * complete, after a crash too. Temporaries of the same OUT that a
 * killed gen left are removed first (marked, their process gone, untouched
 * for a minute).
 *
 * @param res  optional: what was written.
 * @return 0; -ENOTSUP for an s3:// `out` (objects are read, never
 *         written); -EINVAL for bad options (an invalid dtype, more than 99999
 *         shards, a header over #PINIO_ST_HEADER_MAX or an index over
 *         #PINIO_ST_INDEX_MAX bytes: what a reader would refuse is not
 *         written); a negative errno for I/O (ENOSPC, EACCES, ...) with the
 *         path and offset in the diag. On failure no temporary file is left;
 *         files of earlier shards that were complete stay.
 */
PINIO_API int pinio_gen_write(const char *out, const pinio_gen_opts *opts, pinio_gen_result *res,
                              pinio_diag *diag);

/**
 * Writes the file name of shard `i` (from 1) of `k` ("model-00001-of-00004.safetensors")
 * into `buf` of `cap` bytes. @return 0, or -ERANGE if it does not fit.
 */
PINIO_API int pinio_gen_shard_name(char *buf, size_t cap, unsigned i, unsigned k);

#ifdef __cplusplus
}
#endif

#endif /* PINIO_GEN_H */
