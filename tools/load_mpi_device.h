/* `pinio load --mpi tp --device DEV`: each rank's slices, once the job has
 * read and exchanged them, copied from its memory to its GPU. Present only
 * in a pinio built with MPI. */
#ifndef PINIO_CLI_LOAD_MPI_DEVICE_H
#define PINIO_CLI_LOAD_MPI_DEVICE_H

#include <stdint.h>

#include "pinio/mpi.h"
#include "load_args.h"

/** What one rank's device did; gathered on rank 0 for the report, so a
 *  plain struct of bytes. */
typedef struct cli_mpi_gpu {
    int device;               /**< ordinal; -1: no device copy */
    char pci_bus_id[32];
    int driver_version;
    uint64_t tensors, bytes, copies;
    double h2d_seconds;       /**< first copy issued to last completed */
    double seconds;           /**< the rank's whole device phase (plan, copies, sync) */
    unsigned slots_registered;
} cli_mpi_gpu;

/**
 * Collective over `comm`: every rank copies the tensors `cp` holds (its
 * slices and the tensors it holds whole) to its device, `a->dev`: the same
 * ordinal or bus id on every rank, or with `a->dev.local` the rank's index
 * among the ranks of its machine, modulo the machine's devices. The copy
 * goes through the device's sink from host memory
 * (pinio_stream_from_memory(), `a->so`'s staging ring), the device memory
 * freed again before the call returns (a measurement, as `pinio load
 * --device`). Every rank returns the same code; on failure `diag` is the
 * first failing rank's, "rank R of N: ...".
 */
int cli_mpi_to_device(MPI_Comm comm, const cli_load_args *a, const char *const *paths,
                      size_t npaths, const pinio_mpi_checkpoint *cp, cli_mpi_gpu *out,
                      pinio_diag *diag);

#endif
