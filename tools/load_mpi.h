/* `pinio load --mpi`: present only in a pinio built with MPI (-Dmpi). */
#ifndef PINIO_CLI_LOAD_MPI_H
#define PINIO_CLI_LOAD_MPI_H

#include <stdio.h>

#include "load_args.h"

/** Runs `pinio load --mpi POLICY` as parsed by cli_load_parse() (argc and
 *  argv are handed to MPI_Init); returns the exit status. */
int pinio_cli_load_mpi(int argc, char **argv, const cli_load_args *a);

/** `pinio load --mpi ... --help`. */
void pinio_cli_load_mpi_usage(FILE *out);

#endif
