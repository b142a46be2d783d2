/* libpinio_mpi's interface between its own files (not installed): one
 * call's state, the agreement, and phase 1 (mpi_plan.c). */
#ifndef PINIO_MPI_INTERNAL_H
#define PINIO_MPI_INTERNAL_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/mpi.h"
#include "mpi_verify.h"

/* A registered io_uring buffer holds at most 1 GiB. */
#define REGION_MAX ((uint64_t)1 << 30)

/* One call's state. */
typedef struct job {
    MPI_Comm comm;
    int rank, n;
    pinio_mpi_opts o;
    pinio_diag local;        /* this rank's own failure */
    pinio_diag *diag;        /* the caller's: the agreed failure */
    bool own_filters;        /* shard by each rank's shard_filters: plans differ */
    bool job_progress;       /* rank 0 has a progress callback: it follows every rank's reads */
    bool has_index;          /* the checkpoint came with an index, of this digest */
    uint8_t index_sha[PINIO_MPI_SHA_LEN];
} job;

/* An MPI call's failure as a pinio code, with MPI's own words. */
int pinio__mpi_fail(job *j, int err, const char *call);

/* The agreement: every rank's code in, one code out (mpi_load.c). */
int pinio__mpi_agree(job *j, int rc);

/* Phase 1: the arguments agreed; each rank its own headers and plan, with
 * rank 0's alignment; the files and the plans agreed. `slices` (TP only,
 * else NULL): also this rank's plan with the split rules, from the same
 * headers. */
int pinio__mpi_plan_phase(job *j, const char *const *paths, size_t npaths, pinio_plan **plan,
                          pinio_plan **slices, uint64_t *header_bytes);

/* #PINIO_MPI_TP (mpi_tp.c). Where rank q's slice of a tensor lies in the
 * tensor's bytes: `runs` runs of `len` bytes, run o at o * stride + off
 * (a whole tensor: one run of all its bytes; an empty slice: len 0). */
typedef struct tp_geom {
    uint64_t runs, stride, off, len;
} tp_geom;

typedef struct tp_plan {
    size_t tensors;          /* the plans' tensors (the same in both) */
    tp_geom *g;              /* tensors x ranks: g[t * n + q] */
    pinio_plan_tensor *held; /* this rank's slices, dest_offset in its own memory */
    uint64_t dest_bytes;     /* this rank's memory: its slices packed, 64-byte aligned */
    size_t sliced;           /* of them, held as a slice */
    uint64_t full_bytes;     /* the tensors whole */
} tp_plan;

/* Collective: each rank's geometry from its plan with the split rules
 * (`mine`) against the whole plan (`full`), shared with every rank; this
 * rank's layout. Agreed; on failure `tp` holds nothing. */
int pinio__mpi_tp_layout(job *j, const pinio_plan *full, const pinio_plan *mine, tp_plan *tp);

/* Collective: the staging area (laid out as `full`, this rank's stripe
 * [start[rank], start[rank + 1]) read) into each rank's slices at `dest`.
 * Returns this rank's code (the caller agrees); every rank enters the
 * same rounds. */
int pinio__mpi_tp_exchange(job *j, const pinio_plan *full, const tp_plan *tp,
                           const uint8_t *stage, const uint64_t *start, uint8_t *dest,
                           pinio_mpi_report *rep);

/* #PINIO_MPI_EXCHANGE_SHARED: this rank's slices placed in a memory that
 * maps the staging area (laid out as `full`) at 0 and has room from
 * `tail` on: a slice that is one aligned run of the staging area stays
 * where it is, the others are packed from `tail`. Returns the memory's
 * size (also tp->dest_bytes). Rank-local. */
uint64_t pinio__mpi_tp_place(const pinio_plan *full, tp_plan *tp, int me, int n, uint64_t tail);

/* #PINIO_MPI_EXCHANGE_SHARED, after every rank's stripe is in the node's
 * staging area (`stage`, shared; `fd` its memfd, or -1): the slices placed
 * from `tail` copied into `mem` (the private mapping of the same area),
 * the others' pages mapped; the bytes the rounds would have moved counted
 * in `rep`. Rank-local: no MPI call, nothing that fails. */
void pinio__mpi_tp_shared(job *j, const pinio_plan *full, const tp_plan *tp, const uint8_t *stage,
                          int fd, const uint64_t *start, uint8_t *mem, uint64_t tail,
                          pinio_mpi_report *rep);

void pinio__mpi_tp_free(tp_plan *tp);

#endif
