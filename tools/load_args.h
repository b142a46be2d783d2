/* The command line of `pinio load`, with and without --mpi: one option
 * table and one parser, so that an option means the same thing and takes
 * the same values on both paths. */
#ifndef PINIO_CLI_LOAD_ARGS_H
#define PINIO_CLI_LOAD_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/pinio.h"
#include "jw.h"
#include "stream_cli.h"

typedef struct cli_load_args {
    pinio_load_opts load;    /**< everything the resident load takes */
    const char **filters;    /**< --filter, in order (argv strings) */
    size_t nfilters;
    const char **shas;       /**< --sha256, in order; or, after cli_load_sums(),
                                  one per file from --sha256-file */
    size_t nshas;
    const char *sums;        /**< --sha256-file: sha256sum output, matched by name */
    char *sums_buf;          /**< cli_load_sums(): the digests' storage */
    bool json, quiet, help;
    bool progress;           /**< --progress: the line also when stderr is no terminal */
    cli_device dev;          /**< --device (dev.set) */
    pinio_stream_opts so;    /**< --staging */
    bool staging;
    /* --mpi: the policy and its own options */
    bool mpi;
    const char *policy;      /**< replicate|shard|node|tp, checked by the MPI side */
    const char **shard;      /**< --shard-filter */
    size_t nshard;
    const char *exchange;    /**< --exchange auto|allgatherv|bcast|alltoallv|shared */
    uint64_t piece;          /**< --piece, 0 = default */
    int node_ranks;          /**< --node-ranks, 0 = default */
    /* --split PATTERN=DIM (repeatable), --rank, --world, --max-overread */
    pinio_split_rule *split; /**< pattern points into argv (cut at its last '=') */
    size_t nsplit;
    bool rank_set, world_set;
    /** The PATHs: argv[first_path .. argc). */
    int first_path;
} cli_load_args;

/**
 * Parses `pinio load` argv (argv[0] = "load") into `a` (zeroed and set to
 * the defaults first). Checks that options go together: one of the
 * resident or streaming load is refused with --mpi, an --mpi option
 * without --mpi, --staging without --device.
 * @return 0 (a->help: --help was asked for, nothing else checked), or 2
 *         after one usage line on stderr. Free with cli_load_args_free()
 *         either way.
 */
int cli_load_parse(int argc, char **argv, cli_load_args *a);

/**
 * --sha256-file: cli_sums_read() (sums.h) of `a->sums` for the load's
 * inputs, into `a->shas` / `a->nshas` (one digest per file, plan order).
 * @return 0 (also without --sha256-file), or 1 after one error line (json:
 *         an error object).
 */
int cli_load_sums(cli_load_args *a, const char *const *inputs, size_t n);

/**
 * A selection of nothing: a typo in a pattern that "loaded 0 tensors" and
 * exit 0 would hide. Writes "no tensor matches --filter 'P', ... (T tensors
 * in F files)" into `msg` (`flag` names the patterns' option, `pats` them;
 * `tensors` those the files hold), the one message of every load that
 * selects nothing (cmd_load.c, cmd_load_mpi.c).
 */
void cli_load_nothing(char *msg, size_t size, const char *flag, const char *const *pats,
                      size_t npats, size_t tensors, size_t files);

void cli_load_args_free(cli_load_args *a);


#endif
