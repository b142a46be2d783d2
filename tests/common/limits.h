/* Test helper: become "a user without privileges" in a forked child. */
#ifndef PINIO_TESTS_COMMON_LIMITS_H
#define PINIO_TESTS_COMMON_LIMITS_H

#include <grp.h>
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

/* fork() whose child may run at most `tasks` tasks (threads count) under
 * RLIMIT_NPROC, so that pthread_create() fails with EAGAIN once the child
 * and `tasks - 1` threads exist. Root ignores the limit, so a root child
 * first becomes a UID of its own (setresuid clears every capability) which
 * no other process uses. Returns the pid in the parent, 0 in the child; a
 * child that cannot get there exits with 13 (UID) or 14 (limit). */
static inline pid_t t_fork_nproc(rlim_t tasks)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0) {
            uid_t id = (uid_t)(300000 + getpid() % 100000);
            if (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 ||
                setresuid(id, id, id) != 0)
                _exit(13);
        }
        struct rlimit rl = { tasks, tasks };
        if (setrlimit(RLIMIT_NPROC, &rl) != 0)
            _exit(14);
    }
    return pid;
}

#endif
