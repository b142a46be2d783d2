/* The setup-flag names (pinio_ring_flags_format): every known IORING_SETUP_*
 * bit by name and at its kernel ABI value, unknown bits as hex, "none" for 0,
 * snprintf truncation; and the ring's own reason line uses the same names.
 * Public API only (plus liburing for the kernel's bit values). */
#include <criterion/criterion.h>
#include <liburing.h>
#include <string.h>

#include "pinio/ring.h"

static const struct {
    unsigned bit;
    const char *name;
} known[] = {
    {1u << 0, "IOPOLL"},         {1u << 1, "SQPOLL"},         {1u << 2, "SQ_AFF"},
    {1u << 3, "CQSIZE"},         {1u << 4, "CLAMP"},          {1u << 5, "ATTACH_WQ"},
    {1u << 6, "R_DISABLED"},     {1u << 7, "SUBMIT_ALL"},     {1u << 8, "COOP_TASKRUN"},
    {1u << 9, "TASKRUN_FLAG"},   {1u << 10, "SQE128"},        {1u << 11, "CQE32"},
    {1u << 12, "SINGLE_ISSUER"}, {1u << 13, "DEFER_TASKRUN"}, {1u << 14, "NO_MMAP"},
    {1u << 15, "REGISTERED_FD_ONLY"}, {1u << 16, "NO_SQARRAY"}, {1u << 17, "HYBRID_IOPOLL"},
};
#define NKNOWN (sizeof known / sizeof known[0])

static const char *fmt(unsigned flags)
{
    static char buf[512];
    size_t len = pinio_ring_flags_format(flags, buf, sizeof buf);
    cr_assert_eq(len, strlen(buf), "%#x: returned %zu for \"%s\"", flags, len, buf);
    return buf;
}

Test(flags_format, every_known_flag_alone)
{
    for (size_t i = 0; i < NKNOWN; i++)
        cr_assert_str_eq(fmt(known[i].bit), known[i].name, "bit %#x", known[i].bit);
}

Test(flags_format, bits_are_the_kernel_abi)
{
    /* The table's bits are the kernel's: liburing's headers agree. */
    cr_assert_str_eq(fmt(IORING_SETUP_IOPOLL), "IOPOLL");
    cr_assert_str_eq(fmt(IORING_SETUP_SQPOLL), "SQPOLL");
    cr_assert_str_eq(fmt(IORING_SETUP_SQ_AFF), "SQ_AFF");
    cr_assert_str_eq(fmt(IORING_SETUP_CQSIZE), "CQSIZE");
    cr_assert_str_eq(fmt(IORING_SETUP_CLAMP), "CLAMP");
    cr_assert_str_eq(fmt(IORING_SETUP_ATTACH_WQ), "ATTACH_WQ");
    cr_assert_str_eq(fmt(IORING_SETUP_R_DISABLED), "R_DISABLED");
#ifdef IORING_SETUP_SINGLE_ISSUER
    cr_assert_str_eq(fmt(IORING_SETUP_SINGLE_ISSUER), "SINGLE_ISSUER");
#endif
#ifdef IORING_SETUP_DEFER_TASKRUN
    cr_assert_str_eq(fmt(IORING_SETUP_DEFER_TASKRUN), "DEFER_TASKRUN");
#endif
}

Test(flags_format, all_known_joined_in_bit_order)
{
    unsigned all = 0;
    char want[512] = "";
    for (size_t i = 0; i < NKNOWN; i++) {
        all |= known[i].bit;
        if (i)
            strcat(want, "|");
        strcat(want, known[i].name);
    }
    cr_assert_str_eq(fmt(all), want);
    cr_assert_str_eq(fmt((1u << 13) | (1u << 12) | (1u << 3)), "CQSIZE|SINGLE_ISSUER|DEFER_TASKRUN");
}

Test(flags_format, zero_and_unknown_bits)
{
    cr_assert_str_eq(fmt(0), "none");
    cr_assert_str_eq(fmt(1u << 31), "0x80000000");
    cr_assert_str_eq(fmt((1u << 1) | (1u << 31) | (1u << 30)), "SQPOLL|0xc0000000");
    cr_assert_str_eq(fmt(~0u & ~((1u << 18) - 1)), "0xfffc0000");
}

Test(flags_format, truncation_is_snprintf)
{
    unsigned cases[] = {0, 1u << 1, (1u << 3) | (1u << 7) | (1u << 12) | (1u << 13),
                        (1u << 0) | (1u << 30)};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char full[512];
        size_t need = pinio_ring_flags_format(cases[c], full, sizeof full);
        cr_assert_eq(need, strlen(full));
        cr_assert_eq(pinio_ring_flags_format(cases[c], NULL, 0), need, "n = 0 only measures");
        for (size_t n = 1; n <= need + 2; n++) {
            char buf[512];
            memset(buf, 'X', sizeof buf);
            size_t got = pinio_ring_flags_format(cases[c], buf, n);
            cr_assert_eq(got, need, "%#x, n %zu", cases[c], n);
            size_t keep = n - 1 < need ? n - 1 : need;
            cr_assert_eq(buf[keep], '\0', "%#x, n %zu: NUL-terminated at %zu", cases[c], n, keep);
            cr_assert_eq(memcmp(buf, full, keep), 0, "%#x, n %zu: a prefix", cases[c], n);
            cr_assert_eq(buf[n], 'X', "%#x, n %zu: nothing written past n", cases[c], n);
        }
    }
}

Test(flags_format, the_ring_reports_with_the_same_names)
{
    pinio_ring *r = NULL;
    pinio_diag d = {0};
    cr_assert_eq(pinio_ring_create(&r, NULL, &d), 0, "%s", d.msg);
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    if (ri.backend != PINIO_BACKEND_PREAD)
        cr_assert(strstr(ri.reason, fmt(ri.setup_flags)), "\"%s\" in \"%s\"", fmt(ri.setup_flags),
                  ri.reason);
    pinio_ring_destroy(r);
}

/* pinio_ring_setup_uring(): the engine's ladder on a caller's ring. */
Test(setup_uring, same_flags_as_the_engine)
{
    pinio_ring *r = NULL;
    pinio_ring_opts o;
    pinio_ring_opts_default(&o);
    o.queue_depth = 8;
    o.faults = "";
    cr_assert_eq(pinio_ring_create(&r, &o, NULL), 0);
    pinio_ring_info ri;
    pinio_ring_get_info(r, &ri);
    pinio_ring_destroy(r);
    if (ri.backend == PINIO_BACKEND_PREAD)
        cr_skip_test("io_uring unavailable: %s", ri.reason);

    struct io_uring ring;
    unsigned flags = 0xdead;
    cr_assert_eq(pinio_ring_setup_uring(&ring, 8, 0, &flags), 0);
    cr_assert_eq(flags, ri.setup_flags, "%s vs the engine's %s", fmt(flags), ri.reason);
    cr_assert(flags & IORING_SETUP_CQSIZE);
    cr_assert_eq(ring.sq.ring_entries, 8);
    cr_assert_geq(ring.cq.ring_entries, 16, "CQ holds every request in flight");
    /* the ring works: one NOP through it */
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    cr_assert_not_null(sqe);
    io_uring_prep_nop(sqe);
    cr_assert_eq(io_uring_submit_and_wait(&ring, 1), 1);
    struct io_uring_cqe *cqe;
    cr_assert_eq(io_uring_peek_cqe(&ring, &cqe), 0);
    cr_assert_eq(cqe->res, 0);
    io_uring_cqe_seen(&ring, cqe);
    io_uring_queue_exit(&ring);

    cr_assert_eq(pinio_ring_setup_uring(&ring, 8, 0, NULL), 0, "setup_flags is optional");
    io_uring_queue_exit(&ring);
}

Test(setup_uring, sqpoll_is_kept_or_the_call_fails)
{
    struct io_uring ring;
    unsigned flags = 0;
    int rc = pinio_ring_setup_uring(&ring, 4, PINIO_RING_SQPOLL, &flags);
    if (rc == -EPERM || rc == -ENOSYS)
        cr_skip_test("SQPOLL refused here: %d", rc);
    cr_assert_eq(rc, 0);
    cr_assert(flags & IORING_SETUP_SQPOLL, "%s", fmt(flags));
    cr_assert_not(flags & (IORING_SETUP_COOP_TASKRUN | IORING_SETUP_DEFER_TASKRUN),
                  "SQPOLL excludes them: %s", fmt(flags));
    io_uring_queue_exit(&ring);
}

Test(setup_uring, bad_arguments)
{
    struct io_uring ring;
    unsigned flags = 77;
    cr_assert_eq(pinio_ring_setup_uring(NULL, 8, 0, &flags), -EINVAL);
    cr_assert_eq(pinio_ring_setup_uring(&ring, 0, 0, &flags), -EINVAL);
    cr_assert_eq(pinio_ring_setup_uring(&ring, 4097, 0, &flags), -EINVAL);
    cr_assert_eq(pinio_ring_setup_uring(&ring, 8, 1u << 5, &flags), -EINVAL, "unknown flag");
    cr_assert_eq(flags, 77u, "untouched on failure");
}
