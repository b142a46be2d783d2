/*
 * The CUDA sink: the GPU sink body (gpu.c) bound to the CUDA driver,
 * libcuda.so.1 or the library PINIO_CUDA_LIB names (gpu_dl.c).
 */
#include "src/stream/gpu_internal.h"

static int cuda_open(void *priv, const void *cfg, const pinio_sink_setup *s, pinio_diag *diag)
{
    return pinio__gpu_sink_open(priv, &pinio__cuda_api, cfg, s, diag);
}

static int cuda_prefer_node(const void *cfg)
{
    return pinio__gpu_sink_prefer_node(&pinio__cuda_api, cfg);
}

const pinio_sink pinio_sink_cuda = {
    .name = "cuda",
    .description = "every tensor to a CUDA device at its own 256-byte aligned address",
    .priv_size = sizeof(pinio__gpusink),
    .open = cuda_open,
    .chunk = pinio__gpu_sink_chunk,
    .slot_wait = pinio__gpu_sink_slot_wait,
    .finish = pinio__gpu_sink_finish,
    .close = pinio__gpu_sink_close,
    .prefer_node = cuda_prefer_node,
};
