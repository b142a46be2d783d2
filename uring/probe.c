/* Which io_uring opcodes this kernel has (IORING_REGISTER_PROBE), and which
 * liburing pinio runs with.
 *
 * Why probe rather than compare kernel versions: distribution kernels
 * backport io_uring wholesale (RHEL 9's 5.14 has opcodes of 6.x) and
 * sandboxes filter it (seccomp, gVisor implements a subset), so only the
 * kernel's own answer is worth reporting. */
#include <errno.h>
#include <string.h>

#include <liburing.h>

#include "pinio/ring.h"
#include "uring/liburing_version.h"

int pinio_ring_probe_ops(pinio_ring_ops *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof(*out));
    /* A ring of our own rather than io_uring_get_probe(): that one drops
     * the setup error, which is the answer when io_uring is blocked. */
    struct io_uring ring;
    int rc = io_uring_queue_init(2, &ring, 0);
    if (rc < 0)
        return rc;
    struct io_uring_probe *p = io_uring_get_probe_ring(&ring);
    io_uring_queue_exit(&ring);
    if (!p)
        return -EOPNOTSUPP; /* Linux < 5.6: no IORING_REGISTER_PROBE */
    out->read = io_uring_opcode_supported(p, IORING_OP_READ);
    out->read_fixed = io_uring_opcode_supported(p, IORING_OP_READ_FIXED);
    out->write = io_uring_opcode_supported(p, IORING_OP_WRITE);
    out->write_fixed = io_uring_opcode_supported(p, IORING_OP_WRITE_FIXED);
    out->last_op = p->last_op;
    io_uring_free_probe(p);
    return 0;
}

const char *pinio_liburing_version(void)
{
    return PINIO_LIBURING_VERSION;
}
