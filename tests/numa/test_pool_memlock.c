/* The pool against the real RLIMIT_MEMLOCK and real io_uring registration.
 *
 * Each scenario runs in a forked child that lowers RLIMIT_MEMLOCK and loses
 * CAP_IPC_LOCK (which would hide the limit). As root the child switches to a
 * UID of its own: setuid clears every capability, and since the kernel
 * charges registered buffers per user, a private UID also keeps parallel test
 * runs from eating each other's budget. Children report by exit code
 * (0 pass, 77 skip, else the failed step). */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinio/pool.h"
#include "pinio/sys.h"
#include "uring_reg.h"

#define MiB ((size_t)1 << 20)
#define SKIP 77

static int become_limited(uint64_t limit)
{
    struct rlimit rl = { .rlim_cur = limit, .rlim_max = limit };
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return 90;
    if (geteuid() == 0) {
        uid_t id = (uid_t)(200000 + getpid() % 100000);
        if (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 || setresuid(id, id, id) != 0)
            return 91;
    }
    pinio_sysinfo si;
    if (pinio_sys_probe(&si) != 0)
        return 92;
    if (si.cap_ipc_lock)
        return SKIP; /* a non-root process with file capabilities: cannot drop */
    return si.memlock_soft == limit ? 0 : 93;
}

static uint64_t vm_pinned(void)
{
    pinio_sysinfo si;
    return pinio_sys_probe(&si) == 0 ? si.vm_pinned : UINT64_MAX;
}

static int child_init_ring(struct uring_reg *u)
{
    int rc = uring_reg_init(u);
    if (rc == -ENOSYS || rc == -EPERM)
        return SKIP; /* io_uring disabled (seccomp, kernel.io_uring_disabled) */
    return rc < 0 ? 94 : 0;
}

static pinio_pool *child_pool(struct uring_reg *u)
{
    pinio_pool_opts o;
    pinio_pool_opts_default(&o);
    o.slab_size = 2 * MiB;
    o.registrar = uring_reg_registrar(u);
    pinio_pool *p = NULL;
    return pinio_pool_create(&p, &o, NULL) == 0 ? p : NULL;
}

static int run_in_child(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 98;
    if (pid == 0)
        _exit(fn());
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return 99;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void expect_child(int (*fn)(void))
{
    int rc = run_in_child(fn);
    if (rc == SKIP)
        cr_skip_test("io_uring unavailable, or CAP_IPC_LOCK cannot be dropped here");
    cr_assert_eq(rc, 0, "child failed at step %d", rc);
}

/* 3 MiB limit: one 2 MiB slab registers, the next is refused by the
 * pre-check without calling the registrar, and fits again once the first
 * slab's last region is gone (the budget is recomputed per slab). */
static int scenario_budget(void)
{
    int rc = become_limited(3 * MiB);
    if (rc)
        return rc;
    struct uring_reg u;
    if ((rc = child_init_ring(&u)))
        return rc;
    pinio_pool *p = child_pool(&u);
    if (!p)
        return 2;
    pinio_view a, b, c;
    pinio_pool_region_info ia, ib, ic;
    if (pinio_pool_alloc(p, 4096, 0, &a, &ia) != 0)
        return 3;
    if (ia.reg != PINIO_POOL_REG_OK || u.reg_calls != 1)
        return 4;
    if (vm_pinned() != 2 * MiB)
        return 5;
    memset(ia.data, 0x3c, 4096);

    /* Does not fit in the rest of the slab: a second slab, over budget. */
    if (pinio_pool_alloc(p, 2 * MiB - 4096 + 1, 0, &b, &ib) != 0)
        return 6;
    if (ib.reg != PINIO_POOL_REG_OVER_MEMLOCK || u.reg_calls != 1)
        return 7;
    pinio_pool_stats st;
    pinio_pool_get_stats(p, &st);
    if (!strstr(st.fallback_reason, "3145728") || !strstr(st.fallback_reason, "ulimit -l") ||
        st.slabs_fallback != 1 || st.bytes_registered != 2 * MiB)
        return 8;
    memset(ib.data, 0x4d, b.len); /* unregistered memory works all the same */

    /* The first slab is no longer current: its region is its last holder. */
    if (a.ptr[4095] != 0x3c)
        return 9;
    pinio_view_release(&a);
    if (u.unreg_calls != 1 || vm_pinned() != 0)
        return 10;

    if (pinio_pool_alloc(p, 2 * MiB - 4096 + 1, 0, &c, &ic) != 0)
        return 11;
    if (ic.reg != PINIO_POOL_REG_OK || u.reg_calls != 2 || vm_pinned() != 2 * MiB)
        return 12;
    pinio_view_release(&b);
    pinio_view_release(&c);
    pinio_pool_destroy(p);
    if (u.unreg_calls != 2 || vm_pinned() != 0)
        return 13;
    uring_reg_exit(&u);
    return 0;
}

Test(pool_memlock, budget_precheck_and_recovery, .timeout = 30)
{
    expect_child(scenario_budget);
}

/* Another process of the same user holds 2 MiB pinned: this process's own
 * VmPin is 0, so the pre-check lets the slab through and the kernel refuses
 * it with ENOMEM; the pool must fall back with the reason. */
static int scenario_kernel_enomem(void)
{
    int rc = become_limited(3 * MiB);
    if (rc)
        return rc;
    int ready[2], done[2];
    if (pipe(ready) != 0 || pipe(done) != 0)
        return 20;
    pid_t helper = fork();
    if (helper < 0)
        return 21;
    if (helper == 0) {
        close(ready[0]);
        close(done[1]);
        struct io_uring ring;
        char ok = 'n';
        void *buf = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf != MAP_FAILED && io_uring_queue_init(4, &ring, 0) == 0) {
            struct iovec iov = { buf, 2 * MiB };
            int r = io_uring_register_buffers(&ring, &iov, 1);
            ok = r == 0 ? 'y' : (r == -ENOSYS || r == -EPERM) ? 's' : 'n';
        } else {
            ok = 's';
        }
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        char c;
        while (read(done[0], &c, 1) < 0 && errno == EINTR)
            ;
        _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    char ok = 0;
    ssize_t got;
    while ((got = read(ready[0], &ok, 1)) < 0 && errno == EINTR)
        ; /* SIGCHLD and valgrind's signals interrupt the wait */
    if (got != 1)
        return 22;
    int result = 0;
    struct uring_reg u;
    if (ok == 's')
        result = SKIP;
    else if (ok != 'y')
        result = 23;
    else if ((result = child_init_ring(&u)) == 0) {
        pinio_pool *p = child_pool(&u);
        pinio_view v;
        pinio_pool_region_info info;
        pinio_pool_stats st;
        if (!p)
            result = 24;
        else if (pinio_pool_alloc(p, 8192, 0, &v, &info) != 0)
            result = 25;
        else {
            pinio_pool_get_stats(p, &st);
            if (u.reg_calls != 1)
                result = 26; /* the pre-check must not have refused */
            else if (info.reg != PINIO_POOL_REG_FAILED || info.reg_error != -ENOMEM)
                result = 27;
            else if (!strstr(st.fallback_reason, "ENOMEM") ||
                     !strstr(st.fallback_reason, "per user") ||
                     !strstr(st.fallback_reason, "CAP_IPC_LOCK"))
                result = 28;
            else {
                memset(info.data, 1, 8192);
                result = v.ptr[8191] == 1 ? 0 : 29;
            }
            pinio_view_release(&v);
            pinio_pool_destroy(p);
            if (result == 0 && u.unreg_calls != 0)
                result = 30;
        }
        uring_reg_exit(&u);
    }
    close(done[1]); /* lets the helper exit */
    int status;
    waitpid(helper, &status, 0);
    return result;
}

Test(pool_memlock, kernel_enomem_per_user_falls_back, .timeout = 30)
{
    expect_child(scenario_kernel_enomem);
}
