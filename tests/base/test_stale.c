/* Stale temporaries (src/base/stale.h): removed only when provably pinio's
 * and abandoned. The PID-namespace rule is the one that matters here: a pid
 * from another namespace is not "dead" because kill() here does not know it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "src/base/stale.h"
#include "tests/common/helpers.h"

#define MARK "user.pinio.test"

static char dir[64];
static char boot[40];
static unsigned long long pidns;
static long dead; /* a pid that was ours and has exited */

static void setup(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "stale", dir, sizeof dir), 0);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%36s", boot), 1);
    fclose(f);
    struct stat st;
    cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
    pidns = (unsigned long long)st.st_ino;
    pid_t c = fork();
    cr_assert_geq(c, 0);
    if (c == 0)
        _exit(0);
    cr_assert_eq(waitpid(c, NULL, 0), c);
    dead = c;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Makes DIR/t.tmp<pid> with the mark value `v` (NULL: none), `age` seconds old.
 * Returns 0, or -1 when the file system has no user xattrs. */
static int make(long pid, const char *v, int age)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/t.tmp%ld", dir, pid);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0);
    int rc = v ? fsetxattr(fd, MARK, v, strlen(v), 0) : 0;
    close(fd);
    if (rc != 0)
        return -1;
    struct timespec t[2] = { { time(NULL) - age, 0 }, { time(NULL) - age, 0 } };
    cr_assert_eq(utimensat(AT_FDCWD, p, t, 0), 0);
    return 0;
}

static bool exists(long pid)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/t.tmp%ld", dir, pid);
    return access(p, F_OK) == 0;
}

static unsigned sweep(void)
{
    char target[128];
    snprintf(target, sizeof(target), "%s/t", dir);
    return pinio__remove_stale(target, ".tmp", "", MARK);
}

Test(stale, writer_proven_gone_only, .init = setup, .fini = teardown)
{
    char here[128], other_ns[128], other_boot[128];
    snprintf(here, sizeof(here), "boot=%s pidns=%llu", boot, pidns);
    snprintf(other_ns, sizeof(other_ns), "boot=%s pidns=%llu", boot, pidns + 1);
    snprintf(other_boot, sizeof(other_boot), "boot=00000000-0000-0000-0000-000000000000 pidns=%llu",
             pidns);
    if (make(dead, here, 3600) != 0)
        cr_skip_test("no user extended attributes on /var/tmp");
    cr_expect_eq(sweep(), 1, "dead pid, this namespace, old: removed");
    cr_expect(!exists(dead));

    /* The namespace case: the same dead-looking pid, written in another PID
     * namespace of this boot, proves nothing. */
    make(dead, other_ns, 3600);
    /* A marked file of older pinio (no record of its namespace): nothing proven. */
    make(dead + 1000000, "1", 3600);
    /* Fresh, unmarked, or this process's own: never. */
    make(dead + 2000000, here, 0);
    make(dead + 3000000, NULL, 3600);
    make(getpid(), here, 3600);
    cr_expect_eq(sweep(), 0);
    cr_expect(exists(dead), "another PID namespace's temporary was removed");
    cr_expect(exists(dead + 1000000) && exists(dead + 2000000) && exists(dead + 3000000) &&
              exists(getpid()));

    /* Another boot: its writer is gone whatever its pid, even a live one. */
    make(getppid(), other_boot, 3600);
    cr_expect_eq(sweep(), 1);
    cr_expect(!exists(getppid()));
}

/* pinio__stale_mark writes the mark that the sweep judges this namespace's. */
Test(stale, mark_round_trip, .init = setup, .fini = teardown)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/t.tmp%ld", dir, dead);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0);
    int rc = pinio__stale_mark(fd, MARK);
    close(fd);
    if (rc == -ENOTSUP || rc == -EOPNOTSUPP)
        cr_skip_test("no user extended attributes on /var/tmp");
    cr_assert_eq(rc, 0, "%s", strerror(-rc));
    char v[128] = "", want[128];
    cr_assert_gt(getxattr(p, MARK, v, sizeof(v) - 1), 0);
    snprintf(want, sizeof(want), "boot=%s pidns=%llu", boot, pidns);
    cr_expect_str_eq(v, want);
    struct timespec t[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
    cr_assert_eq(utimensat(AT_FDCWD, p, t, 0), 0);
    cr_expect_eq(sweep(), 1);
}
