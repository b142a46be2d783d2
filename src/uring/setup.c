/* The io_uring setup-flag ladder (liburing's setup.c): newest flags first,
 * each dropped on -EINVAL. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ring_internal.h"

static void flag_names(unsigned flags, char *buf, size_t n)
{
    static const struct {
        unsigned f;
        const char *name;
    } names[] = {
        {IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER"}, {IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN"},
        {IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},   {IORING_SETUP_TASKRUN_FLAG, "TASKRUN_FLAG"},
        {IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL"},       {IORING_SETUP_CQSIZE, "CQSIZE"},
        {IORING_SETUP_SQPOLL, "SQPOLL"},               {IORING_SETUP_IOPOLL, "IOPOLL"},
    };
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((flags & names[i].f) && used < n)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? "|" : "", names[i].name);
    if (!used)
        snprintf(buf, n, "none");
}

/* One rung of the setup ladder. The fault hook answers first so tests can
 * play a kernel that lacks a flag. */
static int try_setup(pinio_ring *r, unsigned entries, unsigned flags)
{
    if (r->faults) {
        if (r->faults->setupnosys)
            return -ENOSYS;
        if (flags & r->faults->setupinval)
            return -EINVAL;
    }
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    p.cq_entries = entries * 2;
    return io_uring_queue_init_params(entries, &r->ring, &p);
}

/* The ladder, as fio does it (engines/io_uring.c fio_ioring_queue_init):
 * newest flags first, drop one on -EINVAL. SINGLE_ISSUER|DEFER_TASKRUN (6.1)
 * defers completion work to our own io_uring_enter (no IPIs, no task_work
 * interrupting the submitter); COOP_TASKRUN|TASKRUN_FLAG (5.19) is the next
 * best. CQSIZE = 2 x SQ guarantees the CQ can hold every request in flight,
 * so overflow cannot happen; SUBMIT_ALL (5.18) keeps one bad SQE from
 * stalling the rest of a batch. */
int pinio__ring_setup_ladder(pinio_ring *r)
{
    unsigned qd = r->opts.queue_depth;
    unsigned common = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    unsigned extra = 0;
    if (r->opts.flags & PINIO_RING_IOPOLL)
        extra |= IORING_SETUP_IOPOLL;
    unsigned ladder[] = {
        common | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        common | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
            IORING_SETUP_TASKRUN_FLAG,
        common | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        common | IORING_SETUP_COOP_TASKRUN,
        common,
        IORING_SETUP_CQSIZE,
        0,
    };
    size_t n = sizeof ladder / sizeof ladder[0];
    if (r->opts.flags & PINIO_RING_SQPOLL) {
        /* SQPOLL excludes COOP/DEFER (EINVAL, verified on 6.18): its own ladder. */
        extra |= IORING_SETUP_SQPOLL;
        unsigned sq[] = {common | IORING_SETUP_SINGLE_ISSUER, common, IORING_SETUP_CQSIZE, 0};
        memcpy(ladder, sq, sizeof sq);
        n = sizeof sq / sizeof sq[0];
    }
    int ret = -EINVAL;
    for (size_t i = 0; i < n; i++) {
        ret = try_setup(r, qd, ladder[i] | extra);
        if (ret == 0) {
            r->setup_flags = ladder[i] | extra;
            r->cq_entries = r->ring.cq.ring_entries;
            char acc[100], drop[100];
            flag_names(r->setup_flags, acc, sizeof acc);
            flag_names(ladder[0] & ~ladder[i], drop, sizeof drop);
            snprintf(r->reason, sizeof r->reason, "io_uring flags %s%s%s", acc,
                     i ? "; dropped on EINVAL: " : "", i ? drop : "");
            return 0;
        }
        if (ret != -EINVAL)
            break;
    }
    return ret;
}
