/*
 * Temporary files that a dead pinio process left behind.
 *
 * gen and bench write under a temporary name next to the target
 * (PATH<infix><pid><suffix>) and rename when complete. SIGKILL, a crash or a
 * power cut leaves the temporary, which nobody else will ever remove. A
 * later run removes those it can prove are pinio's and abandoned:
 *
 *  - the name has the pattern, and the file is a regular file owned by this
 *    process's effective uid (another user's file is never touched);
 *  - it carries pinio's extended attribute `mark`, whose value
 *    (pinio__stale_mark(), set when it was created) records the writer's boot
 *    (the kernel's boot_id) and PID namespace (the inode of /proc/self/ns/pid);
 *  - the writer is provably gone: the mark names another boot (every process
 *    of that boot is gone), or it names this boot and this PID namespace and
 *    the pid in the name is not running (kill(pid, 0) says ESRCH). A pid is
 *    only meaningful in its own namespace: a writer in another container
 *    sharing the folder has a pid that kill() here knows nothing of, so its
 *    temporaries are left until a run in its namespace, or after a reboot,
 *    removes them. A mark without that record (older pinio, or no /proc)
 *    proves nothing and is left too;
 *  - and it was not modified for PINIO__STALE_AGE_S seconds (a pid reused
 *    between the check and the unlink is then still an old file).
 */
#ifndef PINIO_BASE_STALE_H
#define PINIO_BASE_STALE_H

/** Unmodified for this long, an abandoned temporary (seconds). */
#define PINIO__STALE_AGE_S 60

/** Removes the abandoned temporaries of `path` (see above); returns how many. */
unsigned pinio__remove_stale(const char *path, const char *infix, const char *suffix,
                             const char *mark);

/**
 * Marks the temporary open at `fd` as this process's: sets the extended
 * attribute `mark` to this boot and PID namespace (see above).
 * @return 0, or -errno (no xattr support: the file is then never removed
 *         by pinio__remove_stale(), which is the safe side).
 */
int pinio__stale_mark(int fd, const char *mark);

#endif
