/*
 * Temporary files that a dead pinio process left behind.
 *
 * gen and bench write under a temporary name next to the target
 * (PATH<infix><pid><suffix>) and rename when complete. SIGKILL, a crash or a
 * power cut leaves the temporary, which nobody else will ever remove. A
 * later run removes those it can prove are pinio's and abandoned: the name
 * has the pattern, the file carries pinio's extended attribute `mark` (set
 * when it was created), the process it names is not running here
 * (kill(pid, 0) says ESRCH) and it was not modified for STALE_AGE_S seconds
 * (a live writer in another PID namespace keeps touching its file).
 */
#ifndef PINIO_BASE_STALE_H
#define PINIO_BASE_STALE_H

/** Unmodified for this long, an abandoned temporary (seconds). */
#define PINIO__STALE_AGE_S 60

/** Removes the abandoned temporaries of `path` (see above); returns how many. */
unsigned pinio__remove_stale(const char *path, const char *infix, const char *suffix,
                             const char *mark);

#endif
