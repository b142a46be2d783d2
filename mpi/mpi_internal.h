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
 * rank 0's alignment; the files and the plans agreed. */
int pinio__mpi_plan_phase(job *j, const char *const *paths, size_t npaths, pinio_plan **plan,
                          uint64_t *header_bytes);

#endif
