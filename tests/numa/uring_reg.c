#include "uring_reg.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

int uring_reg_init(struct uring_reg *u)
{
    memset(u, 0, sizeof(*u));
    int rc = io_uring_queue_init(4, &u->ring, 0);
    if (rc < 0)
        return rc;
    /* Sparse table (5.19): slots are filled and emptied one by one, like a
     * pool that registers slabs as it grows. */
    rc = io_uring_register_buffers_sparse(&u->ring, URING_REG_SLOTS);
    if (rc < 0) {
        io_uring_queue_exit(&u->ring);
        return rc;
    }
    return 0;
}

static int reg(void *ctx, void *addr, size_t len, int *slot)
{
    struct uring_reg *u = ctx;
    u->reg_calls++;
    for (int i = 0; i < URING_REG_SLOTS; i++) {
        if (u->used[i])
            continue;
        struct iovec iov = { .iov_base = addr, .iov_len = len };
        int rc = io_uring_register_buffers_update_tag(&u->ring, (unsigned)i, &iov, NULL, 1);
        if (rc < 0) {
            u->last_error = rc;
            return rc;
        }
        u->used[i] = true;
        *slot = i;
        return 0;
    }
    return -ENOSPC;
}

static void unreg(void *ctx, int slot)
{
    struct uring_reg *u = ctx;
    u->unreg_calls++;
    /* An empty iovec (NULL, 0) clears the slot and drops the pin. */
    struct iovec iov = { .iov_base = NULL, .iov_len = 0 };
    io_uring_register_buffers_update_tag(&u->ring, (unsigned)slot, &iov, NULL, 1);
    u->used[slot] = false;
}

pinio_pool_registrar uring_reg_registrar(struct uring_reg *u)
{
    return (pinio_pool_registrar){ .ctx = u, .reg = reg, .unreg = unreg };
}

void uring_reg_exit(struct uring_reg *u)
{
    io_uring_unregister_buffers(&u->ring);
    io_uring_queue_exit(&u->ring);
}
