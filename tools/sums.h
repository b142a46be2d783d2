/* --sha256-file: a list of digests as sha256sum prints them, matched to
 * the files a load (or a stage) of some inputs reads. */
#ifndef PINIO_CLI_SUMS_H
#define PINIO_CLI_SUMS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_sums {
    const char *cmd;     /**< in: the command its errors name ("load", "stage") */
    bool json;           /**< in: errors as JSON objects */
    const char *path;    /**< in: the SUMS file */
    const char **shas;   /**< out: one digest per file, in the plan's file order */
    size_t nshas;
    char *buf;           /**< out: the digests' storage */
} cli_sums;

/**
 * Reads `s->path` (sha256sum's output: plain, binary `*`, --tag, escaped
 * names) and sets `s->shas` to one digest per file the inputs resolve to,
 * in that order (a dry plan resolves them: the same files the command
 * reads). A file matches the line naming the same path, else the one line
 * whose name has the same last component; a file no line names, or two
 * lines name, is an error (a check silently skipped would read as
 * verified). Lines for other files are ignored (a SUMS may list config.json
 * too).
 * @return 0, or 1 after one error line (json: an error object). Free with
 *         cli_sums_free() either way.
 */
int cli_sums_read(cli_sums *s, const char *const *inputs, size_t n);

void cli_sums_free(cli_sums *s);

#endif
