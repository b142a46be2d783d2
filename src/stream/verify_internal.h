/* --verify for a stream (verify.c): each input file's SHA-256 (the hub's
 * LFS object id) computed from the staging slots as the reads land. */
#ifndef PINIO_SRC_STREAM_VERIFY_INTERNAL_H
#define PINIO_SRC_STREAM_VERIFY_INTERNAL_H

#include "pinio/stream.h"

typedef struct pinio__sverify pinio__sverify;

/* One digest per file of `plan` (which must outlive it). 0 or -ENOMEM. */
int pinio__sverify_start(pinio__sverify **out, const pinio_plan *plan);

/* Read `r` has landed at `mem` (file byte r->offset at mem[0]): what lies
 * between the previous read of its file and it is to be hashed (read again
 * from the file), then its wanted bytes from `mem`. Calls come in each
 * file's read order. The hashing may happen later, on the hashing thread:
 * `mem` must stay unchanged until pinio__sverify_wait(`*ticket`) returned.
 * Returns 0, or an error of this read or of an earlier one. */
int pinio__sverify_landed(pinio__sverify *v, const pinio_plan_read *r, const uint8_t *mem,
                          uint64_t *ticket, pinio_diag *diag);

/* Blocks until the landed read that got `ticket` (and every one before it)
 * is hashed; 0 returns at once. Returns 0 or the hashing's first error. */
int pinio__sverify_wait(pinio__sverify *v, uint64_t ticket, pinio_diag *diag);

/* Every read has landed: hashes each file's tail, checks the expected
 * digests of `o` (PINIO_EFORMAT "sha256 mismatch" naming the file), hands
 * each digest to o->sha256_fn and fills rep->verified and the byte counts
 * (the caller times it). */
int pinio__sverify_finish(pinio__sverify *v, const pinio_stream_opts *o, pinio_stream_report *rep,
                          pinio_diag *diag);

/* Releases everything. NULL is a no-op. */
void pinio__sverify_free(pinio__sverify *v);

#endif
