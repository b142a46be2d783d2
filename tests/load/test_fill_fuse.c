/* PINIO_FILL_AUTO on a real FUSE file system: bench/slowfs (path in
 * $SLOWFS) mounted over a temporary directory; a cold file loaded mapped
 * through it must be read ahead at depth (the report says "fuse"), every
 * byte right, and still give PINIO_ECHANGED when truncated between plan and
 * mapping. Skipped (77) where FUSE cannot be mounted. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/load.h"
#include "pinio/sys.h"
#include "src/load/load_internal.h"
#include "tests/load/load_helpers.h"

#define FUSE_MAGIC 0x65735546

static char back[300], mnt[300];
static pid_t fs_pid = -1;

static bool mounted(void)
{
    struct statfs sf;
    return statfs(mnt, &sf) == 0 && (unsigned long)sf.f_type == FUSE_MAGIC;
}

static void fuse_setup(void)
{
    disk_setup();
    snprintf(back, sizeof(back), "%s/back", tmpdir);
    snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
    cr_assert_eq(mkdir(back, 0755), 0);
    cr_assert_eq(mkdir(mnt, 0755), 0);
    const char *slowfs = getenv("SLOWFS");
    if (!slowfs || access("/dev/fuse", R_OK | W_OK) != 0)
        return;
    fs_pid = fork();
    cr_assert_geq(fs_pid, 0);
    if (fs_pid == 0) {
        setenv("SLOWFS_DELAY_US", "0", 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execl(slowfs, slowfs, back, mnt, "-f", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !mounted(); i++) {
        if (waitpid(fs_pid, NULL, WNOHANG) == fs_pid) {
            fs_pid = -1; /* it could not mount: no FUSE here */
            return;
        }
        nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
    }
}

static void fuse_teardown(void)
{
    if (fs_pid > 0) {
        pid_t um = fork();
        if (um == 0) {
            execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (um > 0)
            waitpid(um, &st, 0);
        if (mounted()) /* fusermount3 missing or refused: end the daemon */
            kill(fs_pid, SIGTERM);
        waitpid(fs_pid, NULL, 0);
        fs_pid = -1;
    }
    teardown();
}

static void need_fuse(void)
{
    if (!mounted()) {
        fuse_teardown(); /* Criterion runs no .fini after a skip */
        cr_skip_test("no FUSE mount here (SLOWFS=%s, /dev/fuse %s)", getenv("SLOWFS"),
                     access("/dev/fuse", R_OK | W_OK) == 0 ? "usable" : "not usable");
    }
}

/* A generated checkpoint in the backing directory (`b`) and its path
 * through the mount (`m`); skips without a mount. */
static void fuse_file(char b[400], char m[400])
{
    need_fuse();
    snprintf(b, 400, "%s/m.safetensors", back);
    snprintf(m, 400, "%s/m.safetensors", mnt);
    gen(b, 6u << 20, 23, 1);
    int fd = open(b, O_RDONLY);
    cr_assert_geq(fd, 0, "%s", b);
    cr_assert_eq(fsync(fd), 0);
    close(fd);
}

Test(fill_fuse, auto_reads_ahead_on_fuse_every_byte_right, .init = fuse_setup,
     .fini = fuse_teardown)
{
    char b[400], m[400];
    fuse_file(b, m);
    for (int fill = 0; fill < 2; fill++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_MAPPED;
        o.cache = PINIO_CACHE_COLD; /* drops the pages through the mount */
        o.mapped_fill = fill ? PINIO_FILL_FAULT : PINIO_FILL_AUTO;
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(m, &o, &r);
        check_all(cp, 23);
        cr_assert_eq(r.files_filled, 1, "%s", r.cache);
        cr_assert_eq(r.files_filled_ahead, fill ? 0u : 1u, "%s", r.cache);
        cr_assert_not_null(strstr(r.cache, fill ? "filled by the mapping's readahead (mapped_fill FAULT)"
                                                : "filled by readahead at depth (fuse, "),
                           "%s", r.cache);
        pinio_checkpoint_release(cp);
    }
}

Test(fill_fuse, truncated_between_plan_and_fill_is_echanged, .init = fuse_setup,
     .fini = fuse_teardown)
{
    char b[400], m[400];
    fuse_file(b, m);
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.cache = PINIO_CACHE_COLD;
    pinio_plan *plan = NULL;
    pinio_diag d = { 0 };
    const char *paths[] = { m };
    cr_assert_eq(pinio_plan_create(&plan, paths, 1, &po, &d), 0, "%s", d.msg);
    cr_assert_eq(truncate(b, 1u << 20), 0);
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_MAPPED;
    pinio__fmem fm[1];
    pinio__modes_decide(plan, &o, fm);
    cr_assert(fm[0].fill.ahead, "%s", fm[0].fill.why);
    pinio_load_report rep = { 0 };
    int rc = pinio__map_files(plan, fm, false, false, &rep, &d);
    cr_assert_eq(rc, PINIO_ECHANGED, "%d: %s", rc, d.msg);
    cr_assert_not_null(strstr(d.msg, "m.safetensors"), "%s", d.msg);
    pinio__fmem_release(fm, 1);
    pinio_plan_free(plan);
}

/* A cold pinned load from a FUSE mount reads with requests that suit a
 * network file system and its size (exec.c's rule: 6 MiB is 1 MiB
 * requests, 128 in flight) and says so; a size or depth the caller chose
 * is kept and said to be. On local disk the line has no such part. */
Test(fill_fuse, a_network_file_system_gets_large_requests_and_says_so, .init = fuse_setup,
     .fini = fuse_teardown)
{
    char b[400], m[400];
    fuse_file(b, m);
    for (int asked = 0; asked < 4; asked++) {
        pinio_load_opts o;
        pinio_load_opts_default(&o);
        o.memory = PINIO_MEMORY_PINNED;
        o.cache = PINIO_CACHE_COLD;
        if (asked == 1)
            o.request_size = 2u << 20;
        if (asked == 3)
            o.queue_depth = 8;
        pinio_load_report r;
        pinio_checkpoint *cp = load_ok(asked == 2 ? b : m, &o, &r);
        check_all(cp, 23);
        const char *want = asked == 0   ? "fuse: 1 MiB requests, 128 in flight (network file system)"
                           : asked == 1 ? "fuse: 2 MiB requests, 128 in flight (size as asked)"
                           : asked == 3 ? "fuse: 1 MiB requests, 8 in flight (depth as asked)"
                                        : NULL;
        if (want)
            cr_assert_not_null(strstr(r.io_path, want), "%s", r.io_path);
        else
            cr_assert_null(strstr(r.io_path, "in flight"), "local disk: %s", r.io_path);
        pinio_checkpoint_release(cp);
    }
}
