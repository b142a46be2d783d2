/* The real-world refusals, each in a forked child so the restriction dies
 * with it: io_uring blocked by a seccomp filter (as Docker's default profile
 * does) -> pread pool; CAP_IPC_LOCK dropped + a small RLIMIT_MEMLOCK ->
 * registration refused -> unregistered reads. Data must stay correct. */
#include <criterion/criterion.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "helpers.h"

/* Reads the whole file through `r` and compares with pread. 0 when correct. */
static int read_compare(pinio_ring *r, const char *path, size_t size)
{
    pinio_ring_file *f;
    if (pinio_ring_file_open(r, path, &f, NULL))
        return 10;
    uint8_t *buf = t_map(size + 8192);
    memset(buf, T_POISON, size + 8192);
    pinio_read_req q[2] = {{.file = f, .offset = 0, .len = size + 100, .dst = buf},
                           {.file = f, .offset = 12345, .len = 4000, .dst = buf + size + 201}};
    int rc = pinio_ring_read_bulk(r, q, 2, NULL) ? 11 : 0;
    for (int i = 0; !rc && i < 2; i++)
        if (t_check_req(path, &q[i]))
            rc = 12 + i;
    munmap(buf, size + 8192);
    pinio_ring_file_close(f);
    return rc;
}

static int wait_child(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "child crashed (signal %d)", WTERMSIG(st));
    return WEXITSTATUS(st);
}

static int block_io_uring(int err)
{
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW), /* other arch: leave alone */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fp = {.len = sizeof prog / sizeof prog[0], .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp);
}

Test(sandbox, seccomp_blocks_io_uring)
{
#if !defined(__x86_64__)
    cr_skip_test("seccomp filter written for x86_64 only");
#endif
    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", (2u << 20) + 17, 3, path, sizeof path), 0);
    const int errs[] = {ENOSYS, EPERM};
    for (int k = 0; k < 2; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            if (block_io_uring(errs[k]))
                _exit(77);
            pinio_ring *r;
            if (pinio_ring_create(&r, NULL, NULL))
                _exit(2);
            pinio_ring_info ri;
            pinio_ring_get_info(r, &ri);
            if (ri.backend != PINIO_BACKEND_PREAD || ri.setup_error != -errs[k])
                _exit(3);
            int rc = read_compare(r, path, (2u << 20) + 17);
            pinio_ring_destroy(r);
            _exit(rc);
        }
        int rc = wait_child(pid);
        if (rc == 77) {
            unlink(path);
            cr_skip_test("seccomp filters unavailable here");
        }
        cr_assert_eq(rc, 0, "child with io_uring blocked (%s) failed: %d", strerror(errs[k]), rc);
    }
    unlink(path);
}

/* Root has CAP_IPC_LOCK, which hides RLIMIT_MEMLOCK: drop it from the
 * effective, permitted and bounding sets, then lower the limit. Registration
 * is charged per user, so 1 MiB cannot hold the 2 MiB staging area however
 * much the user (root, shared with other processes) has pinned already. */
static int drop_ipc_lock(void)
{
    if (prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) && errno != EINVAL)
        return -1;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d))
        return -1;
    for (int i = 0; i < 2; i++) {
        unsigned bit = CAP_IPC_LOCK;
        if (bit / 32 == (unsigned)i) {
            d[i].effective &= ~(1u << (bit % 32));
            d[i].permitted &= ~(1u << (bit % 32));
            d[i].inheritable &= ~(1u << (bit % 32));
        }
    }
    return (int)syscall(SYS_capset, &h, d);
}

Test(sandbox, no_ipc_lock_small_memlock)
{
    char path[PATH_MAX];
    cr_assert_eq(t_make_file("/var/tmp", (3u << 20) + 5, 4, path, sizeof path), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (drop_ipc_lock())
            _exit(77);
        struct rlimit rl = {1u << 20, 1u << 20};
        if (setrlimit(RLIMIT_MEMLOCK, &rl))
            _exit(78);
        pinio_ring *r;
        if (pinio_ring_create(&r, NULL, NULL))
            _exit(2);
        pinio_ring_info ri;
        pinio_ring_get_info(r, &ri);
        /* Either the registration was refused (unregistered O_DIRECT), or on
         * 6.x, where ring memory is charged too, the ring itself: pread. */
        bool reg_refused = ri.backend == PINIO_BACKEND_DIRECT &&
                           (ri.reg_error == -ENOMEM || ri.reg_error == -EPERM);
        bool ring_refused = ri.backend == PINIO_BACKEND_PREAD && ri.setup_error == -ENOMEM;
        if (!reg_refused && !ring_refused)
            _exit(3);
        /* A pool slab of 4 MiB cannot be registered either: not fatal. */
        uint8_t *m = t_map(4u << 20);
        int slot;
        if (pinio_ring_register_region(r, m, 4u << 20, &slot) == 0)
            _exit(4);
        int rc = read_compare(r, path, (3u << 20) + 5);
        pinio_ring_destroy(r);
        _exit(rc);
    }
    int rc = wait_child(pid);
    unlink(path);
    if (rc == 77)
        cr_skip_test("cannot drop CAP_IPC_LOCK here");
    cr_assert_eq(rc, 0, "child without CAP_IPC_LOCK failed: %d", rc);
}
