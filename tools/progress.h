/* progress: the one progress line of the pinio command (load, stage; bench
 * and gen to adopt it).
 *
 * One style everywhere: a single line on stderr, redrawn in place at most
 * ten times a second, at most 79 columns wide, erased when the operation
 * ends so that what remains on the terminal is the command's summary:
 *
 *     load [=========>          ]  45%  0.48 / 1.07 GB  1.23 GB/s  ETA 0:05
 *     bench [====>              ]  25%  3.2 GB  0.81 GB/s  52.1k IOPS  ETA 0:15
 *
 * It is drawn only when stderr is a terminal and the caller did not ask for
 * quiet or JSON output: a log file or a pipe never receives carriage
 * returns. Sizes are decimal (GB = 10^9 bytes), as every rate pinio prints
 * (GB/s). Time-bound operations (a bench run of N seconds: total_bytes 0,
 * total_s > 0) show the percentage and ETA of the time instead.
 *
 * Usage, with a library operation that takes a pinio_progress_fn:
 *
 *     cli_progress pg;
 *     cli_progress_start(&pg, "load", 0, quiet || json);
 *     if (cli_progress_active(&pg)) {          // a callback costs a queue drain
 *         opts.progress = cli_progress_cb;
 *         opts.progress_ctx = &pg;
 *     }
 *     rc = pinio_load(...);
 *     cli_progress_end(&pg);                    // before any other output
 *
 * or, driving it by hand, cli_progress_update(&pg, &(pinio_progress){...}).
 * The state is the caller's; nothing is global. Not thread-safe: update it
 * from the thread that started it. */
#ifndef PINIO_TOOLS_PROGRESS_H
#define PINIO_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

/** The widest line drawn, in columns (an 80-column terminal must not wrap). */
#define CLI_PROGRESS_COLUMNS 79

/** Flags of cli_progress_start(). */
enum {
    CLI_PROGRESS_IOPS = 1u << 0, /**< show requests per second (bench: from done_ops) */
    /** draw also when stderr is not a terminal (--progress: under mpiexec,
     *  whose launcher forwards a rank's stderr through a pipe) */
    CLI_PROGRESS_FORCE = 1u << 1,
};

typedef struct cli_progress {
    bool on;           /**< drawing: stderr is a terminal and not quiet */
    unsigned flags;
    const char *label; /**< the command's name, first on the line */
    double t0;         /**< monotonic start, for callers that pass no elapsed time */
    double last;       /**< when the line was last drawn */
    size_t drawn;      /**< width of the line on screen; 0 when none */
} cli_progress;

/**
 * Starts a progress line labelled `label` (kept by pointer: a string
 * literal). Nothing is drawn until the first update. `off` forces it off
 * (--quiet, --json); otherwise it is on when stderr is a terminal, or with
 * #CLI_PROGRESS_FORCE.
 */
void cli_progress_start(cli_progress *p, const char *label, unsigned flags, bool off);

/** Whether the line is drawn at all (to skip installing a callback). */
bool cli_progress_active(const cli_progress *p);

/**
 * Redraws the line for `pg` (done/total bytes, done ops, elapsed seconds:
 * 0 = measured from cli_progress_start()). Throttled to ten draws a second,
 * except the last one (done == total). Never fails; a failed write to
 * stderr is ignored (progress is a courtesy, not output).
 */
void cli_progress_update(cli_progress *p, const pinio_progress *pg);

/** pinio_progress_fn adapter: `ctx` is a cli_progress. Always returns 0. */
int cli_progress_cb(void *ctx, const pinio_progress *pg);

/** Erases the line (if one was drawn) and stops drawing. Idempotent. */
void cli_progress_end(cli_progress *p);

/**
 * Formats the line for `pg` without drawing it (what update draws; for
 * tests and for callers with their own output). At most
 * CLI_PROGRESS_COLUMNS characters, all ASCII. @return its length.
 */
size_t cli_progress_format(char *buf, size_t cap, const char *label, unsigned flags,
                           const pinio_progress *pg);

#endif
