/* The test driver's counters (fake_cuda.c), reached with dlsym through a
 * handle the test keeps open, so the driver's state outlives the sink's
 * own dlopen/dlclose and what it leaves behind can be counted. */
#ifndef PINIO_TESTS_STREAM_FAKE_CUDA_H
#define PINIO_TESTS_STREAM_FAKE_CUDA_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct fake_stats {
    unsigned long copies, unregistered, overwritten, out_of_bounds, no_context;
    unsigned long registered_live, allocs_live, ctx_retained, streams_live;
    unsigned long d2h_copies, d2h_bytes; /* cuMemcpyDtoH_v2 calls and bytes */
    unsigned long dropped; /* copies pending at cuStreamDestroy, dropped
                              (FAKE_CUDA_DROP_PENDING_AT_DESTROY=1) */
} fake_stats;

typedef void (*fake_stats_fn)(fake_stats *);

/* Opens the test driver named by `env` (PINIO_CUDA_LIB, PINIO_HIP_LIB);
 * NULL when unset. */
static inline fake_stats_fn fake_gpu_load(const char *env, void **handle)
{
    const char *p = getenv(env);
    *handle = p ? dlopen(p, RTLD_NOW | RTLD_LOCAL) : NULL;
    return *handle ? (fake_stats_fn)(uintptr_t)dlsym(*handle, "fake_cuda_stats") : NULL;
}

#endif
