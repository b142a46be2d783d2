/* Every fault of the PINIO_FAULTS hook, on the io_uring backend and on the
 * pread pool: EIO -> a clear error with path and offset, nothing reported
 * complete; short/EAGAIN/EINTR -> correct data; regnomem -> unregistered
 * reads, still correct; setup EINVAL -> the ladder drops the flag; setup
 * ENOSYS -> pread pool; dioinval -> buffered, still correct. */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <sys/wait.h>

#include "helpers.h"
#include "uring/ring_internal.h"
#include "tests/common/limits.h"

#define SIZE ((1u << 20) + 333u)

typedef struct fx {
    pinio_ring *ring;
    pinio_ring_file *file;
    char path[PATH_MAX];
    uint8_t *buf;
} fx;

static int fx_open(fx *x, const char *faults, pinio_backend backend, unsigned qd, pinio_diag *d)
{
    memset(x, 0, sizeof *x);
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.backend = backend;
    o.queue_depth = qd;
    o.request_size = 64 << 10;
    o.faults = faults;
    int ret = pinio_ring_create(&x->ring, &o, d);
    if (ret)
        return ret;
    cr_assert_eq(t_make_file("/var/tmp", SIZE, 7, x->path, sizeof x->path), 0);
    cr_assert_eq(pinio_ring_file_open(x->ring, x->path, &x->file, d), 0, "%s", d->msg);
    x->buf = t_map(2u << 20);
    cr_assert_not_null(x->buf);
    return 0;
}

static void fx_close(fx *x)
{
    pinio_ring_file_close(x->file);
    pinio_ring_destroy(x->ring);
    munmap(x->buf, 2u << 20);
    unlink(x->path);
}

/* Reads the whole file plus an unaligned piece, checks against pread. */
static void read_ok(fx *x)
{
    pinio_read_req q[2] = {
        {.file = x->file, .offset = 0, .len = SIZE + 100, .dst = x->buf},
        {.file = x->file, .offset = 5000, .len = 70001, .dst = x->buf + SIZE + 4096 + 3},
    };
    memset(x->buf, T_POISON, 2u << 20);
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_read_bulk(x->ring, q, 2, &d), 0, "%s", d.msg);
    for (int i = 0; i < 2; i++) {
        const char *bad = t_check_req(x->path, &q[i]);
        cr_assert_null(bad, "req %d: %s", i, bad);
    }
}

static const pinio_backend both[] = {PINIO_BACKEND_AUTO, PINIO_BACKEND_PREAD};

Test(faults, eio_fails_request_with_offset)
{
    for (int b = 0; b < 2; b++) {
        fx x;
        pinio_diag d = {0};
        cr_assert_eq(fx_open(&x, "eio@3", both[b], 4, &d), 0, "%s", d.msg);
        pinio_read_req q = {.file = x.file, .offset = 100, .len = 500000, .dst = x.buf};
        int ret = pinio_ring_read_bulk(x.ring, &q, 1, &d);
        cr_assert_eq(ret, -EIO);
        cr_assert_eq(q.result, -EIO);
        cr_assert_eq(q.done, 0u, "a failed request reports nothing complete");
        cr_assert_eq(d.code, -EIO);
        cr_assert(strstr(d.msg, x.path) && strstr(d.msg, "offset"), "diag: %s", d.msg);
        /* The ring stays usable after a failed request. */
        read_ok(&x);
        fx_close(&x);
    }
}

/* With one request in flight at a time completions are ordered, so the
 * 2nd request gets the EIO and its neighbours are untouched by it. */
Test(faults, eio_fails_only_its_request)
{
    fx x;
    pinio_diag d = {0};
    cr_assert_eq(fx_open(&x, "eio@2", PINIO_BACKEND_AUTO, 1, &d), 0, "%s", d.msg);
    memset(x.buf, T_POISON, 3 * 8192);
    pinio_read_req q[3];
    for (int i = 0; i < 3; i++)
        q[i] = (pinio_read_req){.file = x.file, .offset = (uint64_t)i * 8192, .len = 8192,
                                .dst = x.buf + i * 8192};
    cr_assert_eq(pinio_ring_read_bulk(x.ring, q, 3, &d), -EIO);
    cr_assert_null(t_check_req(x.path, &q[0]));
    cr_assert_eq(q[1].result, -EIO);
    cr_assert_eq(q[1].done, 0u);
    cr_assert(strstr(d.msg, "offset 8192"), "%s", d.msg);
    cr_assert_null(t_check_req(x.path, &q[2]));
    fx_close(&x);
}

Test(faults, short_eagain_eintr_recover)
{
    const char *specs[] = {"short@2x5", "eagain@2x10", "eintr@1x3", "short@1,eagain@3x2,short@9",
                           "seed=7,rate=0.3"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (int b = 0; b < 2; b++) {
            fx x;
            pinio_diag d = {0};
            cr_assert_eq(fx_open(&x, specs[s], both[b], 8, &d), 0, "%s", d.msg);
            read_ok(&x);
            pinio_ring_info ri;
            pinio_ring_get_info(x.ring, &ri);
            cr_assert(ri.faults_active);
            cr_assert_gt(ri.retries, 0u, "%s on %s: the fault must have fired", specs[s],
                         pinio_backend_name(both[b]));
            fx_close(&x);
        }
}

Test(faults, eagain_forever_gives_up)
{
    fx x;
    pinio_diag d = {0};
    cr_assert_eq(fx_open(&x, "eagain@1x100000", PINIO_BACKEND_AUTO, 2, &d), 0, "%s", d.msg);
    pinio_read_req q = {.file = x.file, .offset = 0, .len = 4096, .dst = x.buf};
    cr_assert_eq(pinio_ring_read_bulk(x.ring, &q, 1, &d), -EAGAIN, "retries are bounded");
    cr_assert_eq(q.done, 0u);
    fx_close(&x);
}

Test(faults, regnomem_falls_back_unregistered)
{
    fx x;
    pinio_diag d = {0};
    cr_assert_eq(fx_open(&x, "regnomem", PINIO_BACKEND_AUTO, 8, &d), 0, "%s", d.msg);
    pinio_ring_info ri;
    pinio_ring_get_info(x.ring, &ri);
    cr_assert_eq(ri.backend, PINIO_BACKEND_DIRECT);
    cr_assert_eq(ri.reg_error, -ENOMEM);
    cr_assert(strstr(ri.reason, "registration refused"), "%s", ri.reason);
    int slot = -1;
    cr_assert_lt(pinio_ring_register_region(x.ring, x.buf, 2u << 20, &slot), 0);
    cr_assert_eq(slot, -1, "slot untouched on failure");
    read_ok(&x);
    pinio_ring_get_info(x.ring, &ri);
    cr_assert_eq(ri.fixed_ops, 0u);
    cr_assert_gt(ri.plain_ops, 0u);
    fx_close(&x);
    /* Forcing the registered rung makes the refusal an error. */
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.backend = PINIO_BACKEND_FIXED_DIRECT;
    o.faults = "regnomem";
    pinio_ring *r;
    cr_assert_eq(pinio_ring_create(&r, &o, &d), -ENOMEM);
    cr_assert(strstr(d.msg, "MEMLOCK"), "%s", d.msg);
}

Test(faults, setup_ladder_drops_flags)
{
    struct {
        const char *spec;
        unsigned must, mustnot;
    } cases[] = {
        {"", IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_COOP_TASKRUN},
        {"setupinval:defer", IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
                                 IORING_SETUP_TASKRUN_FLAG,
         IORING_SETUP_DEFER_TASKRUN},
        {"setupinval:single", IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
         IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN},
        {"setupinval:single,setupinval:taskrun", IORING_SETUP_COOP_TASKRUN,
         IORING_SETUP_TASKRUN_FLAG},
        {"setupinval:coop,setupinval:defer", IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE,
         IORING_SETUP_COOP_TASKRUN | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER},
        {"setupinval:submitall", IORING_SETUP_CQSIZE, IORING_SETUP_SUBMIT_ALL},
        {"setupinval:cqsize", 0, IORING_SETUP_CQSIZE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx x;
        pinio_diag d = {0};
        cr_assert_eq(fx_open(&x, cases[i].spec, PINIO_BACKEND_AUTO, 8, &d), 0, "%s", d.msg);
        pinio_ring_info ri;
        pinio_ring_get_info(x.ring, &ri);
        cr_assert_eq(ri.setup_flags & cases[i].must, cases[i].must, "%s: flags %#x (%s)",
                     cases[i].spec, ri.setup_flags, ri.reason);
        cr_assert_eq(ri.setup_flags & cases[i].mustnot, 0u, "%s: flags %#x", cases[i].spec,
                     ri.setup_flags);
        if (i)
            cr_assert(strstr(ri.reason, "dropped"), "%s", ri.reason);
        cr_assert_geq(ri.cq_entries, ri.sq_entries);
        read_ok(&x);
        fx_close(&x);
    }
}

Test(faults, setup_nosys_uses_pread_pool)
{
    fx x;
    pinio_diag d = {0};
    cr_assert_eq(fx_open(&x, "setupnosys", PINIO_BACKEND_AUTO, 8, &d), 0, "%s", d.msg);
    pinio_ring_info ri;
    pinio_ring_get_info(x.ring, &ri);
    cr_assert_eq(ri.backend, PINIO_BACKEND_PREAD);
    cr_assert_eq(ri.setup_error, -ENOSYS);
    cr_assert(strstr(ri.reason, "ENOSYS"), "%s", ri.reason);
    read_ok(&x);
    fx_close(&x);
    /* A forced io_uring rung cannot fall back: the error is returned. */
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.backend = PINIO_BACKEND_DIRECT;
    o.faults = "setupnosys";
    pinio_ring *r;
    cr_assert_eq(pinio_ring_create(&r, &o, &d), -ENOSYS);
}

Test(faults, dioinval_falls_back_buffered)
{
    for (int b = 0; b < 2; b++) {
        fx x;
        pinio_diag d = {0};
        cr_assert_eq(fx_open(&x, "dioinval", both[b], 8, &d), 0, "%s", d.msg);
        pinio_ring_file_info fi;
        pinio_ring_file_get_info(x.file, &fi);
        cr_assert(fi.direct);
        read_ok(&x);
        pinio_ring_file_get_info(x.file, &fi);
        cr_assert(!fi.direct, "first O_DIRECT read refused: file must be buffered now");
        cr_assert_eq(fi.direct_error, -EINVAL);
        cr_assert(strstr(fi.reason, "refused at first read"), "%s", fi.reason);
        fx_close(&x);
    }
}

Test(faults, bad_spec_rejected)
{
    const char *bad[] = {"eio", "eio@0", "eio@x3", "short@3x", "setupinval:bogus", "rate=2",
                         "nonsense", "seed=abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pinio_ring_opts o;
        pinio_ring_opts_default(&o);
        o.faults = bad[i];
        pinio_ring *r;
        pinio_diag d = {0};
        cr_assert_eq(pinio_ring_create(&r, &o, &d), -EINVAL, "'%s' must be rejected", bad[i]);
        cr_assert(strstr(d.msg, "PINIO_FAULTS"), "%s", d.msg);
    }
}

/* The environment variable is read once, at ring creation. */
Test(faults, from_environment)
{
    setenv("PINIO_FAULTS", "eio@1", 1);
    fx x;
    pinio_diag d = {0};
    cr_assert_eq(fx_open(&x, NULL, PINIO_BACKEND_AUTO, 4, &d), 0, "%s", d.msg);
    unsetenv("PINIO_FAULTS");
    pinio_read_req q = {.file = x.file, .offset = 0, .len = 4096, .dst = x.buf};
    cr_assert_eq(pinio_ring_read_bulk(x.ring, &q, 1, &d), -EIO);
    fx_close(&x);
    cr_assert_eq(fx_open(&x, NULL, PINIO_BACKEND_AUTO, 4, &d), 0);
    pinio_ring_info ri;
    pinio_ring_get_info(x.ring, &ri);
    cr_assert(!ri.faults_active);
    read_ok(&x);
    fx_close(&x);
}

static void *idle_thread(void *arg)
{
    return arg;
}

/* The pread pool under RLIMIT_NPROC (the child and one thread): creating 4
 * workers fails with EAGAIN, and the one that started is joined before the
 * error returns: afterwards a thread can be created again, which a leaked
 * worker would prevent. */
Test(faults, pread_pool_thread_limit_unwinds)
{
    pid_t pid = t_fork_nproc(2);
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(30);
        struct pinio_pread_pool *p = NULL;
        int rc = pinio__pread_pool_create(&p, 4, 8);
        if (rc != -EAGAIN)
            _exit(20);
        pthread_t th;
        if (pthread_create(&th, NULL, idle_thread, NULL) != 0)
            _exit(21); /* the started worker still runs */
        pthread_join(th, NULL);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st), "the child died of signal %d", WTERMSIG(st));
    if (WEXITSTATUS(st) == 13 || WEXITSTATUS(st) == 14)
        cr_skip_test("cannot lower RLIMIT_NPROC here (step %d)", WEXITSTATUS(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "child check %d failed", WEXITSTATUS(st));
}
