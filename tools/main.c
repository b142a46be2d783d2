/* The `pinio` command. It uses the public API only; each subcommand lives in
 * its own cmd_*.c file and is listed in the table below. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "pinio/pinio.h"
#include "cli.h"
#include "util.h"

extern const struct pinio_cmd pinio_cmd_bench;
extern const struct pinio_cmd pinio_cmd_doctor;
extern const struct pinio_cmd pinio_cmd_gen;
extern const struct pinio_cmd pinio_cmd_info;
extern const struct pinio_cmd pinio_cmd_load;
extern const struct pinio_cmd pinio_cmd_stage;

static const struct pinio_cmd *const commands[] = {
    &pinio_cmd_load,
    &pinio_cmd_stage,
    &pinio_cmd_info,
    &pinio_cmd_gen,
    &pinio_cmd_doctor,
    &pinio_cmd_bench,
    NULL,
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pinio [--help] [--version] <command> [args]\n"
            "\n"
            "pinio moves file bytes (model checkpoints above all) from storage into\n"
            "pinned, NUMA-local, io_uring-registered memory with O_DIRECT reads.\n"
            "\n");
    if (commands[0]) {
        fprintf(out, "commands:\n");
        for (size_t i = 0; commands[i]; i++)
            fprintf(out, "  %-8s %s\n", commands[i]->name, commands[i]->summary);
        fprintf(out, "\n'pinio <command> --help' explains each command.\n");
    }
}

/* A command's output is its result: when it could not be written (a full
 * disk, a closed pipe's EIO, stdout on /dev/full) the command failed, even
 * though everything it computed was right. stdio reports a failed write only
 * through the stream's error flag or the final flush, so it is checked here,
 * once, after every command, rather than after each printf. fclose also
 * catches what only close(2) reports (NFS). */
static int finish_output(const char *cmd, int rc)
{
    bool failed = ferror(stdout) != 0;
    errno = 0;
    if (fclose(stdout) != 0)
        failed = true;
    if (!failed)
        return rc;
    /* A buffer that failed to flush mid-printf is kept and fails again at
     * fclose, with its errno; one an explicit cli_flush() lost left the
     * reason there. */
    int e = cli_output_errno() ? cli_output_errno() : errno;
    fprintf(stderr, "pinio%s%s: writing the output: %s\n", cmd ? " " : "", cmd ? cmd : "",
            e ? strerror(e) : "an earlier write failed");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *arg = argv[1];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help")) {
        usage(stdout);
        return finish_output(NULL, 0);
    }
    if (!strcmp(arg, "--version") || !strcmp(arg, "-V")) {
        printf("pinio %s\n", pinio_version());
        return finish_output(NULL, 0);
    }
    /* A load holds a descriptor per shard: the soft open-file limit goes
     * up to the hard one for every command (info, stage, --mpi too), as Go
     * programs do at start-up; the hard limit is the administrator's. */
    unsigned long long nofile_from, nofile_to;
    cli_raise_nofile(&nofile_from, &nofile_to);
    for (size_t i = 0; commands[i]; i++)
        if (!strcmp(arg, commands[i]->name)) {
            cli_usage_json_scan(argc - 1, argv + 1);
            return finish_output(commands[i]->name, commands[i]->run(argc - 1, argv + 1));
        }
    fprintf(stderr, "pinio: unknown command '%s' (see 'pinio --help')\n", arg);
    return 2;
}
