/* What every rank proves about the bytes it reads (mpi_verify.c): the
 * identity of its own files, the arguments that shape the job, the plan,
 * and each file's SHA-256 over the bytes as the ranks read them. Internal
 * to libpinio_mpi; not installed. */
#ifndef PINIO_MPI_VERIFY_H
#define PINIO_MPI_VERIFY_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/mpi.h"

#define PINIO_MPI_SHA_LEN 32

/* One file as a rank opened it: its size, the SHA-256 of its 8-byte
 * length and JSON header, and the SHA-256 of a few data blocks spread over
 * the file (a stale or torn copy with the same header rarely keeps them). */
typedef struct pinio__mpi_ident {
    uint64_t size;
    uint8_t head[PINIO_MPI_SHA_LEN];
    uint8_t sample[PINIO_MPI_SHA_LEN];
} pinio__mpi_ident;

void pinio__mpi_sha256(const void *p, size_t len, uint8_t out[PINIO_MPI_SHA_LEN]);

/* Rank-local: the identity of plan file `i`, read through the plan's own
 * descriptor (the one the data is read through). */
int pinio__mpi_ident_file(const pinio_plan *plan, size_t i, pinio__mpi_ident *out,
                          pinio_diag *d);

/*
 * Collective over `comm`: each file's SHA-256 over the bytes the ranks
 * read, hashed in file order by whoever read them (see mpi_verify.c).
 * `base` is this rank's destination (laid out as its plan), reads
 * [first, first + nreads) of `plan` this rank's own, tensors [t0, t1) the
 * ones it holds. `digest` receives
 * files x 32 bytes, the same on every rank. Returns this rank's code (a
 * re-read of a gap failing); every rank returns after the same messages,
 * whatever failed, so the caller's agreement never waits on a rank.
 * `landed` and `reread` receive the bytes this rank hashed from memory and
 * read again from its file.
 */
int pinio__mpi_hash_files(MPI_Comm comm, int rank, int n, const pinio_plan *plan,
                          const uint8_t *base, size_t first, size_t nreads, size_t t0, size_t t1,
                          uint8_t *digest, uint64_t *landed, uint64_t *reread, pinio_diag *d);

/* 64 lowercase hex digits and a NUL. */
void pinio__mpi_hex(const uint8_t sha[PINIO_MPI_SHA_LEN], char out[2 * PINIO_MPI_SHA_LEN + 1]);

#endif
