/* The GPU sinks' shared body (gpu.c), which sink_cuda.c and sink_hip.c
 * bind to their driver description (gpu_dl.h). */
#ifndef PINIO_SRC_STREAM_GPU_INTERNAL_H
#define PINIO_SRC_STREAM_GPU_INTERNAL_H

#include "pinio/sink.h"
#include "src/stream/gpu_dl.h"

/* A GPU sink's private state (the stream allocates priv_size of it). */
typedef struct pinio__gpusink {
    pinio_gpu_arena *a;
    pinio_gpu_arena **out;
    const pinio_plan *plan;
    CUstream stream;
    CUevent *ev;
    unsigned nslots;
    uint8_t **slots;
    size_t slot_size;
    signed char *reg;          /* per slot: 0 not yet, 1 ours, -1 someone else's */
    bool pushed;               /* the device is bound to this thread (gpu.c bind()) */
    int prev_dev;              /* HIP: the thread's device before, restored at close */
    double t_first;
} pinio__gpusink;

/* The pinio_sink entries, `api` bound by each sink's own file. */
int pinio__gpu_sink_open(void *priv, const pinio__gpu_api *api, const void *cfg,
                         const pinio_sink_setup *su, pinio_diag *diag);
int pinio__gpu_sink_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *diag);
int pinio__gpu_sink_slot_wait(void *priv, unsigned slot, pinio_diag *diag);
int pinio__gpu_sink_finish(void *priv, pinio_diag *diag);
void pinio__gpu_sink_close(void *priv, bool ok);
int pinio__gpu_sink_prefer_node(const pinio__gpu_api *api, const void *cfg);

#endif
