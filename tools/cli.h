/* Shared pieces of the pinio command line. */
#ifndef PINIO_CLI_H
#define PINIO_CLI_H

/** One subcommand: `run` gets argv starting at the command name and returns the exit status. */
struct pinio_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

#endif
