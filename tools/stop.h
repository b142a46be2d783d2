/* SIGINT and SIGTERM during a command that writes files (gen, bench).
 *
 * The library installs no signal handlers and cleans up only when asked to
 * stop, through its progress callback. So the handler records the signal and
 * nothing else; the command's progress callback returns nonzero once one
 * arrived (cli_stop_requested()), the library stops and removes the file it
 * was making, and the command then dies of the same signal
 * (cli_stop_reraise()), so its caller sees "killed by SIGINT" as usual. */
#ifndef PINIO_TOOLS_STOP_H
#define PINIO_TOOLS_STOP_H

/* Installs the handler for SIGTERM, and for SIGINT unless it is ignored (a
 * background job of a shell: Ctrl-C is not meant for it). */
void cli_stop_install(void);

/* The signal received since cli_stop_install(), or 0. */
int cli_stop_requested(void);

/* When a signal was received: restores its default action and raises it
 * (does not return). Otherwise returns. */
void cli_stop_reraise(void);

#endif
