/* pinio_bench's progress callback: called about once a second from the
 * caller's thread while the jobs run, with bytes that never go down; a
 * nonzero return stops a long run early with -ECANCELED and removes the
 * file the run created. A plain executable, not Criterion, so that it also
 * runs under ThreadSanitizer (the callback reads counters the job threads
 * write). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinio/bench.h"
#include "tests/common/check.h"
#include "tests/common/helpers.h"

struct seen {
    int calls;
    uint64_t last_bytes, last_ops;
    uint64_t slack; /* bytes the two counters may be apart: jobs x qd x bs */
    double last_s;
    int stop_at; /* return nonzero at this call (0: never) */
};

static int on_progress(void *ctx, const pinio_progress *p)
{
    struct seen *s = ctx;
    uint64_t bytes = p->done_bytes;
    double seconds = p->elapsed_s;
    s->calls++;
    CHECK(bytes >= s->last_bytes, "bytes went down: %llu after %llu", (unsigned long long)bytes,
          (unsigned long long)s->last_bytes);
    CHECK(seconds > s->last_s, "seconds did not advance: %.3f after %.3f", seconds, s->last_s);
    /* done_ops: the requests behind done_bytes (what the CLI's IOPS is
     * drawn from); each job publishes both once per wake, so a reader may
     * see one a wake ahead of the other, never more. */
    CHECK(p->done_ops >= s->last_ops, "done_ops went down: %llu after %llu",
          (unsigned long long)p->done_ops, (unsigned long long)s->last_ops);
    uint64_t ob = p->done_ops * 4096;
    CHECK(!s->slack || (ob > bytes ? ob - bytes : bytes - ob) <= s->slack,
          "done_ops %llu x 4 KiB is far from done_bytes %llu", (unsigned long long)p->done_ops,
          (unsigned long long)bytes);
    s->last_ops = p->done_ops;
    s->last_bytes = bytes;
    s->last_s = seconds;
    return s->calls == s->stop_at;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
    alarm(120);
    char path[256];
    int fd = t_tmpname("/var/tmp", "progress", path, sizeof path) ? -1 : mkstemp(path);
    if (fd < 0)
        return perror("mkstemp"), 1;
    close(fd);
    unlink(path); /* the first run creates it */

    /* A 2.5 s random-read run over two jobs. */
    pinio_bench_opts o;
    pinio_bench_opts_default(&o);
    o.path = path;
    o.rw = PINIO_BENCH_RANDREAD;
    o.bs = 4096;
    o.qd = 8;
    o.jobs = 2;
    o.size = 8 << 20;
    o.time_s = 2.5;
    struct seen s = {.slack = 2ull * 8 * 4096};
    o.progress = on_progress;
    o.progress_ctx = &s;
    pinio_bench_result r;
    pinio_diag d = {0};
    int rc = pinio_bench_run(&o, &r, &d);
    if (rc == -EINVAL && strstr(d.msg, "O_DIRECT")) {
        printf("SKIP: %s\n", d.msg);
        unlink(path);
        return 77;
    }
    CHECK(rc == 0, "%d %s", rc, d.msg);
    /* Two here; valgrind runs one thread at a time and delays the caller's
     * wake-ups, so only "at least one, never more than once a second". */
    CHECK(s.calls >= 1 && s.calls <= 3, "%d calls in 2.5 s", s.calls);
    CHECK(s.last_bytes > 0 && s.last_bytes <= r.bytes, "last report %llu, run moved %llu",
          (unsigned long long)s.last_bytes, (unsigned long long)r.bytes);
    CHECK(s.last_ops > 0 && s.last_ops <= r.ios, "last report %llu requests, run completed %llu",
          (unsigned long long)s.last_ops, (unsigned long long)r.ios);
    CHECK(r.created, "the run should have created %s", path);
    unlink(path);

    /* A 60 s write run (it creates its file) stopped at the first call. */
    pinio_bench_opts w = o;
    w.rw = PINIO_BENCH_WRITE;
    w.time_s = 60;
    w.verify = true;
    struct seen s2 = {.stop_at = 1};
    w.progress_ctx = &s2;
    double t0 = mono();
    rc = pinio_bench_run(&w, &r, &d);
    double took = mono() - t0;
    CHECK(rc == -ECANCELED, "%d %s", rc, d.msg);
    CHECK(strstr(d.msg, "progress callback") && strstr(d.msg, path), "%s", d.msg);
    CHECK(s2.calls == 1, "%d calls after asking to stop", s2.calls);
    CHECK(took < 10, "stopping took %.1f s", took);
    CHECK(access(path, F_OK) != 0, "the canceled run left %s behind", path);
    unlink(path);

    if (t_failures)
        return fprintf(stderr, "progress: %d checks failed\n", t_failures), 1;
    printf("progress: all checks passed\n");
    return 0;
}
