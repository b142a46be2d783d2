/*
 * The HIP sink: the GPU sink body (gpu.c) bound to the HIP runtime,
 * libamdhip64.so (.so.7, .so.6, .so.5) or the library PINIO_HIP_LIB names (gpu_dl.c).
 * The device is selected with hipSetDevice, not HIP's deprecated
 * primary-context calls (gpu.c, bind()).
 */
#include "src/stream/gpu_internal.h"

static int hip_open(void *priv, const void *cfg, const pinio_sink_setup *s, pinio_diag *diag)
{
    return pinio__gpu_sink_open(priv, &pinio__hip_api, cfg, s, diag);
}

static int hip_prefer_node(const void *cfg)
{
    return pinio__gpu_sink_prefer_node(&pinio__hip_api, cfg);
}

const pinio_sink pinio_sink_hip = {
    .name = "hip",
    .description = "every tensor to an AMD GPU (HIP) at its own 256-byte aligned address",
    .priv_size = sizeof(pinio__gpusink),
    .open = hip_open,
    .chunk = pinio__gpu_sink_chunk,
    .slot_wait = pinio__gpu_sink_slot_wait,
    .finish = pinio__gpu_sink_finish,
    .close = pinio__gpu_sink_close,
    .prefer_node = hip_prefer_node,
};
