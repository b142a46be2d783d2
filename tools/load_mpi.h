/* `pinio load --mpi`: present only in a pinio built with MPI (-Dmpi). */
#ifndef PINIO_CLI_LOAD_MPI_H
#define PINIO_CLI_LOAD_MPI_H

#include <stdbool.h>
#include <stdio.h>

#include "load_args.h"

/** Runs `pinio load --mpi POLICY` as parsed by cli_load_parse() (argc and
 *  argv are handed to MPI_Init unless MPI is up); returns the exit status.
 *  `finalize`: MPI was initialized by pinio_cli_load_mpi_agree(), and is
 *  finalized here. */
int pinio_cli_load_mpi(int argc, char **argv, cli_load_args *a, bool finalize);

/** After parsing, with --mpi in argv under a launcher: every rank meets
 *  (MPI_Init, one MPI_Allreduce) whatever `rc`, its parse's status, so that
 *  no rank exits before rank 0 has said a usage error; a usage error on
 *  another rank alone is named by rank 0. Returns 2 on every rank when any
 *  rank's `rc` was not 0 (MPI finalized again), else `rc`; `*own`: MPI was
 *  initialized here and stays up for pinio_cli_load_mpi(). Elsewhere: `rc`,
 *  nothing done. */
int pinio_cli_load_mpi_agree(int argc, char **argv, int rc, bool *own);

/** `pinio load --mpi ... --help` (under mpiexec: rank 0 only). */
void pinio_cli_load_mpi_usage(FILE *out);

/** Before parsing: with --mpi in argv, on a rank other than 0 of the
 *  launcher (its environment: MPI_Init has not run), stdout and stderr go
 *  to /dev/null, saved in `saved` (-1 when not), so that a usage error is
 *  one line, rank 0's; every rank still exits with its status. */
void pinio_cli_load_mpi_hush(int argc, char **argv, int saved[2]);

/** Puts back what pinio_cli_load_mpi_hush() saved. */
void pinio_cli_load_mpi_unhush(const int saved[2]);

#endif
