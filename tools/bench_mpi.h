/* `pinio bench --mpi` (bench_mpi.c): every rank of an mpiexec job runs the
 * benchmark, rank 0 prints one result (pinio_mpi_bench_run()). Compiled
 * only into a pinio built with MPI; cmd_bench.c calls these when
 * PINIO_HAVE_MPI. */
#ifndef PINIO_CLI_BENCH_MPI_H
#define PINIO_CLI_BENCH_MPI_H

#include <stdbool.h>

#include "bench_cli.h"

/* Takes --mpi[=LAYOUT], --mpi-reorder[=K], --mpi-clock-ping, --mpi-lat-log
 * PREFIX and --verbose out of argv (which keeps the rest, in order, for
 * bench_parse_args()). Returns 0, or 2 after a usage message. */
int bench_mpi_take_args(int *argc, char **argv);

/* --mpi was given. */
bool bench_mpi_on(void);

/* With --mpi under a launcher: before parsing, ranks other than 0 are
 * hushed (rank 0 alone speaks); after it, bench_mpi_agree() initialises
 * MPI and every rank meets with its parse's status: one rank's usage error
 * is the job's (2 on every rank), so no rank is left waiting in a run. */
void bench_mpi_hush(int argc, char **argv);
int bench_mpi_agree(int argc, char **argv, int rc);

/* The rank in MPI_COMM_WORLD (after bench_mpi_agree()), 0 without MPI. */
int bench_mpi_rank(void);

/* One collective run of `x` (pinio_mpi_bench_run()): `r` the job's result
 * on rank 0; the tables bench_print_result() adds are kept for it. */
int bench_mpi_run_one(struct cli *c, pinio_bench_opts *x, pinio_bench_result *r,
                      pinio_diag *d, bool quiet);

/* Frees the last run's tables, restores the hushed output, finalizes MPI
 * when bench_mpi_agree() initialised it. */
void bench_mpi_end(void);

/* `pinio bench --help`'s lines for the options above. */
void bench_mpi_usage(FILE *out);

#endif
