/* A real io_uring registrar for tests: one small ring with a sparse table of
 * fixed buffers; reg fills a free slot, unreg empties it. The library's own
 * (uring/) registrar is not used so that numa/ tests stay independent. */
#ifndef PINIO_TESTS_URING_REG_H
#define PINIO_TESTS_URING_REG_H

#include <liburing.h>
#include <stdbool.h>

#include "pinio/pool.h"

#define URING_REG_SLOTS 16

struct uring_reg {
    struct io_uring ring;
    bool used[URING_REG_SLOTS];
    int reg_calls, unreg_calls;
    int last_error;
};

/** 0, or the negative errno of io_uring setup (-ENOSYS/-EPERM: io_uring unavailable). */
int uring_reg_init(struct uring_reg *u);

/** Unregisters everything and exits the ring explicitly. */
void uring_reg_exit(struct uring_reg *u);

/** The registrar for pinio_pool_opts.registrar. */
pinio_pool_registrar uring_reg_registrar(struct uring_reg *u);

#endif
