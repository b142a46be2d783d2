/* SHA-256 of checkpoint files while their bytes arrive (src/hash.c).
 *
 * The loader verifies a file by hashing it whole: the part it did not read
 * into the arena (the header, or all of it for a filtered load) through
 * pread, and the data section from the arena. Hashing used to start after
 * the last read; SHA-256 runs at about 1.7 GB/s on one core, as slow as the
 * reads themselves, so it nearly doubled a verified load. Hasher threads
 * now follow the reads: the loader tells them how far each file's bytes
 * have arrived, and each hashes one file up to there while later reads are
 * in flight (one SHA-256 stream cannot be split, so several threads help
 * checkpoints of several files). */
#ifndef PINIO_SRC_HASH_INTERNAL_H
#define PINIO_SRC_HASH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

typedef struct pinio__hash_file {
    const char *path; /* for messages */
    int fd;           /* bytes before mem_from are read from here */
    /* An object file (a pinio__pfile of plan_internal.h): those bytes come
     * by ranged GETs instead (fd is -1). */
    const struct pinio__pfile *obj;
    uint64_t size;    /* bytes to hash: [0, size) */
    /* Bytes [mem_from, size) are hashed from `mem` (file byte mem_from at
     * mem[0]) once pinio__hasher_advance() says they arrived; mem_from ==
     * size and mem NULL: the whole file is read with pread. */
    uint64_t mem_from;
    const uint8_t *mem;
    /* Or, when nsegs > 0 (mem_from and mem unused): the file as segments in
     * offset order covering [0, size), each from memory (file byte `off` at
     * mem[0], hashed once pinio__hasher_advance() passed its end) or, with
     * mem NULL, read with pread. */
    const struct pinio__hash_seg *segs;
    size_t nsegs;
    uint8_t sha[32]; /* the digest, after pinio__hasher_finish() returned 0 */
} pinio__hash_file;

typedef struct pinio__hash_seg {
    uint64_t off, len;
    const uint8_t *mem;
} pinio__hash_seg;

typedef struct pinio__hasher pinio__hasher;

/* Starts hashing `files` (which must outlive the hasher) on up to
 * `threads` threads (never more than files), each taking the next file in
 * order; what they do not get to, or everything with 0 threads, is hashed
 * inside pinio__hasher_finish(). Returns 0 or -ENOMEM. */
int pinio__hasher_start(pinio__hasher **out, pinio__hash_file *files, size_t n, unsigned threads);

/* Bytes [mem_from, upto) of file `i` are in memory and stay unchanged.
 * Values that do not move forward are ignored. */
void pinio__hasher_advance(pinio__hasher *h, size_t i, uint64_t upto);

/* Every read is done: hashes what is left, joins the threads, frees `h`.
 * Returns 0 with every digest set, or the first error (a failed pread:
 * `diag` names the file and offset). */
int pinio__hasher_finish(pinio__hasher *h, pinio_diag *diag);

/* The reads failed: stops at the next chunk, joins, frees. NULL is a no-op. */
void pinio__hasher_abort(pinio__hasher *h);

#endif
