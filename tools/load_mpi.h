/* `pinio load --mpi`: present only in a pinio built with MPI (-Dmpi). */
#ifndef PINIO_CLI_LOAD_MPI_H
#define PINIO_CLI_LOAD_MPI_H

/** Runs `pinio load` with argv holding --mpi POLICY; returns the exit status. */
int pinio_cli_load_mpi(int argc, char **argv);

#endif
