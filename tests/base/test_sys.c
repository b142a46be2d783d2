/* System probes: compared with what /proc and the kernel say directly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinio/sys.h"
#include "tests/common/helpers.h"
#include "src/base/sys_internal.h"
#include "tests/common/limits.h"

Test(sys, probe_matches_uname_and_rlimit)
{
    pinio_sysinfo si;
    cr_assert_eq(pinio_sys_probe(&si), 0);
    struct utsname u;
    uname(&u);
    cr_assert_str_eq(si.kernel_release, u.release);
    cr_assert_gt(si.kernel_major, 0);
    struct rlimit rl;
    getrlimit(RLIMIT_MEMLOCK, &rl);
    cr_assert_eq(si.memlock_soft, rl.rlim_cur == RLIM_INFINITY ? PINIO_UNLIMITED : rl.rlim_cur);
    cr_assert_eq(si.page_size, sysconf(_SC_PAGESIZE));
    cr_assert_gt(si.cpus_online, 0);
    cr_assert_eq(pinio_sys_probe(NULL), -EINVAL);
}

Test(sys, thp_mode_is_the_bracketed_word)
{
    char buf[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        cr_skip_test("no /sys/kernel/mm/transparent_hugepage on this kernel");
    cr_assert_not_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    pinio_sysinfo si;
    pinio_sys_probe(&si);
    char want[32];
    snprintf(want, sizeof(want), "[%s]", si.thp_enabled);
    cr_assert_not_null(strstr(buf, want), "'%s' not active in '%s'", si.thp_enabled, buf);
}

Test(sys, cachestat_presence_matches_kernel)
{
    if (getenv("PINIO_UNDER_VALGRIND"))
        cr_skip_test("valgrind answers ENOSYS for syscalls it does not know, cachestat among them");
    pinio_sysinfo si;
    pinio_sys_probe(&si);
    /* cachestat arrived in 6.5; on a newer kernel it must be found. */
    if (si.kernel_major > 6 || (si.kernel_major == 6 && si.kernel_minor >= 5))
        cr_assert(si.has_cachestat);
}

/* In a child without CAP_IPC_LOCK and with a 64 KiB memlock limit, the
 * registrable budget is the limit minus what is already locked or pinned. */
Test(sys, registrable_follows_memlock_without_cap_ipc_lock)
{
    pid_t pid = t_fork_unprivileged(65536);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        pinio_sysinfo si;
        pinio_sys_probe(&si);
        if (si.cap_ipc_lock)
            _exit(13);
        if (si.memlock_soft != 65536)
            _exit(14);
        if (si.registrable != 65536 - si.vm_locked - si.vm_pinned)
            _exit(15);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}

static int make_file(const char *dir, size_t size, char *path)
{
    cr_assert_eq(t_tmpname(dir, "sys", path, 256), 0);
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    char *buf = malloc(size);
    memset(buf, 0x5a, size);
    cr_assert_eq(write(fd, buf, size), (ssize_t)size);
    free(buf);
    return fd;
}

static void residency_roundtrip(const char *dir, bool drop_works)
{
    char path[256];
    size_t size = 8u << 20;
    int fd = make_file(dir, size, path);
    pinio_residency r;
    cr_assert_eq(pinio_file_residency(fd, 0, 0, &r), 0);
    cr_assert_eq(r.range_bytes, size);
    cr_assert_eq(r.cached_bytes, size, "just written, %llu of %zu cached",
                 (unsigned long long)r.cached_bytes, size);

    cr_assert_eq(pinio_file_drop_cache(fd), 0);
    cr_assert_eq(pinio_file_residency(fd, 0, 0, &r), 0);
    uint64_t mc = 0;
    cr_assert_eq(pinio__residency_mincore(fd, 0, size, &mc), 0);
    if (drop_works) {
        cr_assert_lt(r.cached_bytes, size / 2, "dropped, still %llu cached",
                     (unsigned long long)r.cached_bytes);
        /* read the middle 1 MiB back: exactly that becomes resident */
        char *buf = malloc(1u << 20);
        cr_assert_eq(pread(fd, buf, 1u << 20, 2u << 20), 1 << 20);
        free(buf);
        cr_assert_eq(pinio_file_residency(fd, 2u << 20, 1u << 20, &r), 0);
        cr_assert_eq(r.cached_bytes, 1u << 20);
        cr_assert_eq(pinio__residency_mincore(fd, 2u << 20, 1u << 20, &mc), 0);
        cr_assert_eq(mc, 1u << 20);
    } else {
        cr_assert_eq(r.cached_bytes, size, "tmpfs pages cannot be dropped");
        cr_assert_eq(mc, size);
    }
    /* unaligned sub-range: counted to the byte, by both probes */
    cr_assert_eq(pinio_file_residency(fd, 100, 5000, &r), 0);
    cr_assert_eq(r.range_bytes, 5000);
    cr_assert_eq(pinio__residency_mincore(fd, 100, 5000, &mc), 0);
    cr_assert_leq(r.cached_bytes, 5000);
    cr_assert_leq(mc, 5000);
    /* past the end: empty */
    cr_assert_eq(pinio_file_residency(fd, size + 1, 10, &r), 0);
    cr_assert_eq(r.range_bytes, 0);
    close(fd);
    unlink(path);
}

Test(sys, residency_on_disk_file)
{
    residency_roundtrip("/var/tmp", true);
}

Test(sys, residency_on_tmpfs)
{
    if (access("/dev/shm", W_OK) != 0)
        cr_skip_test("no writable /dev/shm");
    residency_roundtrip("/dev/shm", false);
}

Test(sys, residency_rejects_non_regular_files)
{
    pinio_residency r;
    int fd = open("/dev/null", O_RDONLY);
    cr_assert_eq(pinio_file_residency(fd, 0, 0, &r), -EINVAL);
    close(fd);
    cr_assert_eq(pinio_file_residency(-1, 0, 0, &r), -EBADF);
}

/* A fake root for pinio_mem_available(): proc/ and sys/fs/cgroup/ files. */
static void put(const char *root, const char *rel, const char *text)
{
    char p[512], cmd[700];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
    cr_assert_eq(system(cmd), 0);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs(text, f);
    fclose(f);
}

Test(sys, mem_available_takes_the_tightest_of_meminfo_and_the_cgroup)
{
    char root[256];
    cr_assert_eq(t_tmpdir("/var/tmp", "memavail", root, sizeof(root)), 0);
    put(root, "proc/meminfo", "MemTotal: 100000 kB\nMemAvailable: 50000 kB\n");
    pinio_memavail m;
    cr_assert_eq(pinio_mem_available(root, &m), 0);
    cr_assert_eq(m.bytes, 50000ull * 1024, "no cgroup file: MemAvailable");
    cr_assert_str_eq(m.source, "MemAvailable");

    /* v2, the limit on the parent, the usage partly reclaimable cache. */
    put(root, "proc/self/cgroup", "0::/jobs/42\n");
    put(root, "sys/fs/cgroup/jobs/42/memory.max", "max\n");
    put(root, "sys/fs/cgroup/jobs/42/memory.current", "1000\n");
    put(root, "sys/fs/cgroup/jobs/memory.max", "20000000\n");
    put(root, "sys/fs/cgroup/jobs/memory.current", "8000000\n");
    put(root, "sys/fs/cgroup/jobs/memory.stat", "anon 5000000\ninactive_file 3000000\n");
    cr_assert_eq(pinio_mem_available(root, &m), 0);
    cr_assert_eq(m.cgroup_limit, 20000000u);
    cr_assert_eq(m.cgroup, 20000000u - (8000000u - 3000000u), "inactive cache counts as free");
    cr_assert_eq(m.bytes, m.cgroup);
    cr_assert_str_eq(m.source, "cgroup v2 memory.max");

    /* v1 in a container: the host's path is absent, the mount root is ours. */
    put(root, "proc/self/cgroup", "4:memory:/host/path/abc\n0::/\n");
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "10000000\n");
    put(root, "sys/fs/cgroup/memory/memory.usage_in_bytes", "4000000\n");
    put(root, "sys/fs/cgroup/memory/memory.stat", "cache 1\ntotal_inactive_file 1000000\n");
    cr_assert_eq(pinio_mem_available(root, &m), 0);
    cr_assert_eq(m.cgroup, 10000000u - 3000000u);
    cr_assert_str_eq(m.source, "cgroup v1 memory.limit_in_bytes");

    /* v1's "no limit" is no limit. */
    put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    cr_assert_eq(pinio_mem_available(root, &m), 0);
    cr_assert_eq(m.cgroup, PINIO_UNLIMITED);
    cr_assert_eq(m.bytes, 50000ull * 1024);
    cr_assert_eq(pinio_mem_available(NULL, NULL), -EINVAL);
    cr_assert_eq(t_rm_rf(root), 0);
}
