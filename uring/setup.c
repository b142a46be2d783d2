/* The io_uring setup-flag ladder (liburing's setup.c): newest flags first,
 * each dropped on -EINVAL; and the one table of setup-flag names. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ring_internal.h"

/* The one table of io_uring setup-flag names (include/linux/io_uring.h,
 * stable kernel ABI, hence literal bits: the bookworm liburing 2.3 headers
 * lack the newer ones). Ascending bit order. */
static const struct {
    unsigned bit;
    const char *name;
} flag_table[] = {
    {1u << 0, "IOPOLL"},         {1u << 1, "SQPOLL"},         {1u << 2, "SQ_AFF"},
    {1u << 3, "CQSIZE"},         {1u << 4, "CLAMP"},          {1u << 5, "ATTACH_WQ"},
    {1u << 6, "R_DISABLED"},     {1u << 7, "SUBMIT_ALL"},     {1u << 8, "COOP_TASKRUN"},
    {1u << 9, "TASKRUN_FLAG"},   {1u << 10, "SQE128"},        {1u << 11, "CQE32"},
    {1u << 12, "SINGLE_ISSUER"}, {1u << 13, "DEFER_TASKRUN"}, {1u << 14, "NO_MMAP"},
    {1u << 15, "REGISTERED_FD_ONLY"}, {1u << 16, "NO_SQARRAY"}, {1u << 17, "HYBRID_IOPOLL"},
};

/* Appends `s` at `at` (snprintf-style: truncates, keeps the NUL); returns
 * strlen(s), what the output needed. */
static size_t put(char *buf, size_t n, size_t at, const char *s)
{
    size_t len = strlen(s);
    if (at + 1 < n) {
        size_t room = n - 1 - at;
        size_t k = len < room ? len : room;
        memcpy(buf + at, s, k);
        buf[at + k] = 0;
    }
    return len;
}

size_t pinio_ring_flags_format(unsigned flags, char *buf, size_t n)
{
    if (n)
        buf[0] = 0;
    if (!flags)
        return put(buf, n, 0, "none");
    size_t len = 0;
    unsigned rest = flags;
    for (size_t i = 0; i < sizeof flag_table / sizeof flag_table[0]; i++) {
        if (!(flags & flag_table[i].bit))
            continue;
        if (len)
            len += put(buf, n, len, "|");
        len += put(buf, n, len, flag_table[i].name);
        rest &= ~flag_table[i].bit;
    }
    if (rest) {
        char hex[16];
        snprintf(hex, sizeof hex, "0x%x", rest);
        if (len)
            len += put(buf, n, len, "|");
        len += put(buf, n, len, hex);
    }
    return len;
}

/* One rung of the setup ladder. The fault hook answers first so tests can
 * play a kernel that lacks a flag. */
static int try_setup(struct io_uring *ring, const pinio__faults *faults, unsigned entries,
                     unsigned flags)
{
    if (faults) {
        if (faults->setupnosys)
            return -ENOSYS;
        if (flags & faults->setupinval)
            return -EINVAL;
    }
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = flags;
    p.cq_entries = entries * 2;
    return io_uring_queue_init_params(entries, ring, &p);
}

/* The ladder, as fio does it (engines/io_uring.c fio_ioring_queue_init):
 * newest flags first, drop one on -EINVAL. SINGLE_ISSUER|DEFER_TASKRUN (6.1)
 * defers completion work to our own io_uring_enter (no IPIs, no task_work
 * interrupting the submitter); COOP_TASKRUN|TASKRUN_FLAG (5.19) is the next
 * best. CQSIZE = 2 x SQ guarantees the CQ can hold every request in flight,
 * so overflow cannot happen; SUBMIT_ALL (5.18) keeps one bad SQE from
 * stalling the rest of a batch. `want` holds #pinio_ring_flags; `reason`
 * (may be NULL) receives the one line pinio_ring_info::reason starts with. */
static int ladder_setup(struct io_uring *ring, const pinio__faults *faults, unsigned qd,
                        unsigned want, unsigned *in_force, char *reason, size_t rn)
{
    unsigned common = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    unsigned extra = 0;
    if (want & PINIO_RING_IOPOLL)
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
    if (want & PINIO_RING_SQPOLL) {
        /* SQPOLL excludes COOP/DEFER (EINVAL, verified on 6.18): its own ladder. */
        extra |= IORING_SETUP_SQPOLL;
        unsigned sq[] = {common | IORING_SETUP_SINGLE_ISSUER, common, IORING_SETUP_CQSIZE, 0};
        memcpy(ladder, sq, sizeof sq);
        n = sizeof sq / sizeof sq[0];
    }
    int ret = -EINVAL;
    for (size_t i = 0; i < n; i++) {
        ret = try_setup(ring, faults, qd, ladder[i] | extra);
        if (ret == 0) {
            *in_force = ladder[i] | extra;
            if (reason) {
                char acc[100], drop[100];
                pinio_ring_flags_format(*in_force, acc, sizeof acc);
                pinio_ring_flags_format(ladder[0] & ~ladder[i], drop, sizeof drop);
                snprintf(reason, rn, "io_uring flags %s%s%s", acc,
                         i ? "; dropped on EINVAL: " : "", i ? drop : "");
            }
            return 0;
        }
        if (ret != -EINVAL)
            break;
    }
    return ret;
}

int pinio__ring_setup_ladder(pinio_ring *r)
{
    int ret = ladder_setup(&r->ring, r->faults, r->opts.queue_depth, r->opts.flags,
                           &r->setup_flags, r->reason, sizeof r->reason);
    if (ret == 0)
        r->cq_entries = r->ring.cq.ring_entries;
    return ret;
}

int pinio_ring_setup_uring(struct io_uring *uring, unsigned entries, unsigned flags,
                           unsigned *setup_flags)
{
    if (!uring || !entries || entries > 4096 ||
        (flags & ~(unsigned)(PINIO_RING_SQPOLL | PINIO_RING_IOPOLL)))
        return -EINVAL;
    unsigned in_force = 0;
    int ret = ladder_setup(uring, NULL, entries, flags, &in_force, NULL, 0);
    if (ret == 0 && setup_flags)
        *setup_flags = in_force;
    return ret;
}
