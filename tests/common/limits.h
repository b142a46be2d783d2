/* Test helper: become "a user without privileges" in a forked child. */
#ifndef PINIO_TESTS_COMMON_LIMITS_H
#define PINIO_TESTS_COMMON_LIMITS_H

#include <linux/capability.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Sets RLIMIT_MEMLOCK to `bytes` and drops every capability (CAP_IPC_LOCK
 * above all, which root has and which hides the limit). Call it in a forked
 * child: it cannot be undone. Returns 0, or which step failed (1, 2). */
static inline int t_drop_to_memlock(rlim_t bytes)
{
    struct rlimit rl = { bytes, bytes };
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return 1;
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) != 0)
        return 2;
    return 0;
}

/* fork() whose child is already that user: returns the pid in the parent,
 * 0 in the child; a child that cannot drop exits with 10 + the failed
 * step of t_drop_to_memlock() (11, 12), which callers report or skip. */
static inline pid_t t_fork_unprivileged(rlim_t bytes)
{
    pid_t pid = fork();
    if (pid == 0) {
        int step = t_drop_to_memlock(bytes);
        if (step)
            _exit(10 + step);
    }
    return pid;
}

#endif
