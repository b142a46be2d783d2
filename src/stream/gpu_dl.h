/* The GPU driver API subset the CUDA and HIP sinks use, loaded at run time.
 *
 * No CUDA or HIP header is needed to build: the types are the drivers' ABI
 * (CUresult an int, CUdevice an int, CUdeviceptr 64-bit, handles opaque
 * pointers) and the CUDA symbols are the versioned names cuda.h #defines
 * the plain ones to. The unversioned legacy names (cuMemAlloc,
 * cuMemcpyHtoDAsync, cuCtxPushCurrent, ...) still resolve in every driver
 * but are the pre-3.2 ABIs with a 32-bit CUdeviceptr: never dlsym them
 * (gpu-python-peers.md §2.1).
 *
 * HIP (libamdhip64) mirrors the subset name for name (§2.4), except the
 * context: its hipDevicePrimaryCtx* and hipCtxPush/PopCurrent are
 * deprecated (HIP has one context per device), so the HIP sink selects
 * the device with hipSetDevice instead: the CUDA-only entries stay NULL
 * with HIP, the HIP-only ones with CUDA. It has the same
 * error codes for what the sink tests (2, 100, 101, 600, 712) and the same
 * flag values for what it passes (Portable 0x1, NonBlocking 0x1,
 * DisableTiming 0x2); its one type difference, hipDeviceptr_t being void *
 * where CUdeviceptr is a 64-bit integer, has the same size and register
 * class on the LP64 ABIs Linux runs (x86-64 SysV, AArch64), so one table
 * serves both. */
#ifndef PINIO_SRC_STREAM_GPU_DL_H
#define PINIO_SRC_STREAM_GPU_DL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

/* The constants, X(name, value): cuda.h's enumerators and flags of the
 * same names and values (tests/stream/gpu_abi.c asserts each against the
 * toolkit's cuda.h). */
#define PINIO_GPU_CONSTS(X)                                                               \
    X(CUDA_SUCCESS, 0)                                                                    \
    X(CUDA_ERROR_OUT_OF_MEMORY, 2)                                                        \
    X(CUDA_ERROR_STUB_LIBRARY, 34)                                                        \
    X(CUDA_ERROR_NO_DEVICE, 100)                                                          \
    X(CUDA_ERROR_INVALID_DEVICE, 101)                                                     \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)                                     \
    X(CU_MEMHOSTREGISTER_PORTABLE, 0x01)                                                  \
    X(CU_STREAM_NON_BLOCKING, 0x1)                                                        \
    X(CU_EVENT_DISABLE_TIMING, 0x2)

/* The entry points, X(field, return type, arguments, CUDA symbol, HIP
 * symbol, optional), symbols as identifiers (stringified where dlsym'ed)
 * so that tests/stream/gpu_abi.c can hold each CUDA one against its
 * prototype in cuda.h, and check it is the versioned name cuda.h maps the
 * plain one to. Optional entries may be missing from a driver. */
#define PINIO_GPU_SYMS(X)                                                                 \
    X(Init, CUresult, (unsigned), cuInit, hipInit, 0)                                     \
    X(DriverGetVersion, CUresult, (int *), cuDriverGetVersion, hipDriverGetVersion, 0)    \
    X(DeviceGetCount, CUresult, (int *), cuDeviceGetCount, hipGetDeviceCount, 0)          \
    X(DeviceGet, CUresult, (CUdevice *, int), cuDeviceGet, hipDeviceGet, 0)               \
    X(DeviceGetByPCIBusId, CUresult, (CUdevice *, const char *), cuDeviceGetByPCIBusId,   \
      hipDeviceGetByPCIBusId, 0)                                                          \
    X(DeviceGetPCIBusId, CUresult, (char *, int, CUdevice), cuDeviceGetPCIBusId,          \
      hipDeviceGetPCIBusId, 0)                                                            \
    X(DeviceGetName, CUresult, (char *, int, CUdevice), cuDeviceGetName, hipDeviceGetName, 0) \
    X(DeviceTotalMem, CUresult, (size_t *, CUdevice), cuDeviceTotalMem_v2,                \
      hipDeviceTotalMem, 0)                                                               \
    X(MemHostRegister, CUresult, (void *, size_t, unsigned), cuMemHostRegister_v2,        \
      hipHostRegister, 0)                                                                 \
    X(MemHostUnregister, CUresult, (void *), cuMemHostUnregister, hipHostUnregister, 0)   \
    X(MemAlloc, CUresult, (CUdeviceptr *, size_t), cuMemAlloc_v2, hipMalloc, 0)           \
    X(MemFree, CUresult, (CUdeviceptr), cuMemFree_v2, hipFree, 0)                         \
    X(MemcpyHtoDAsync, CUresult, (CUdeviceptr, const void *, size_t, CUstream),           \
      cuMemcpyHtoDAsync_v2, hipMemcpyHtoDAsync, 0)                                        \
    X(MemcpyDtoH, CUresult, (void *, CUdeviceptr, size_t), cuMemcpyDtoH_v2, hipMemcpyDtoH, 0) \
    X(StreamCreate, CUresult, (CUstream *, unsigned), cuStreamCreate,                     \
      hipStreamCreateWithFlags, 0)                                                        \
    X(StreamDestroy, CUresult, (CUstream), cuStreamDestroy_v2, hipStreamDestroy, 0)       \
    X(StreamSynchronize, CUresult, (CUstream), cuStreamSynchronize, hipStreamSynchronize, 0) \
    X(EventCreate, CUresult, (CUevent *, unsigned), cuEventCreate, hipEventCreateWithFlags, 0) \
    X(EventDestroy, CUresult, (CUevent), cuEventDestroy_v2, hipEventDestroy, 0)           \
    X(EventRecord, CUresult, (CUevent, CUstream), cuEventRecord, hipEventRecord, 0)       \
    X(EventSynchronize, CUresult, (CUevent), cuEventSynchronize, hipEventSynchronize, 0)  \
    X(GetErrorName, CUresult, (CUresult, const char **), cuGetErrorName,                  \
      hipDrvGetErrorName, 1)                                                              \
    X(GetErrorString, CUresult, (CUresult, const char **), cuGetErrorString,              \
      hipDrvGetErrorString, 1)

/* CUDA only, X(field, return type, arguments, CUDA symbol, optional): the
 * primary context, which HIP binds with hipSetDevice instead. */
#define PINIO_GPU_CUDA_SYMS(X)                                                            \
    X(DevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice), cuDevicePrimaryCtxRetain, 0) \
    X(DevicePrimaryCtxRelease, CUresult, (CUdevice), cuDevicePrimaryCtxRelease_v2, 0)     \
    X(CtxPushCurrent, CUresult, (CUcontext), cuCtxPushCurrent_v2, 0)                      \
    X(CtxPopCurrent, CUresult, (CUcontext *), cuCtxPopCurrent_v2, 0)

/* HIP only, X(field, return type, arguments, HIP symbol, optional): the
 * thread's device, and the runtime's error texts, which HIP 5 (Debian 12's
 * libamdhip64.so.5) has where it lacks hipDrvGetErrorName/String. */
#define PINIO_GPU_HIP_SYMS(X)                                                             \
    X(SetDevice, CUresult, (int), hipSetDevice, 0)                                        \
    X(GetDevice, CUresult, (int *), hipGetDevice, 0)                                      \
    X(RtErrorName, const char *, (CUresult), hipGetErrorName, 1)                          \
    X(RtErrorString, const char *, (CUresult), hipGetErrorString, 1)

/* Beside the real cuda.h (tests/stream/gpu_abi.c), the test renames the
 * types and leaves the constants to cuda.h. */
#ifndef PINIO_GPU_DL_BESIDE_CUDA_H
enum {
#define PINIO_GPU_CONST(name, value) name = value,
    PINIO_GPU_CONSTS(PINIO_GPU_CONST)
#undef PINIO_GPU_CONST
};
#endif

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

/* Which driver: its name in messages, its libraries, its variable. */
typedef struct pinio__gpu_api {
    const char *tag;                /* "cuda", "hip": device names (cuda:0), messages */
    const char *name;               /* "CUDA", "HIP" */
    const char *const *libs;        /* tried in order */
    const char *lib_env;            /* PINIO_CUDA_LIB, PINIO_HIP_LIB */
    bool hip;                       /* the HIP symbol names */
} pinio__gpu_api;

extern const pinio__gpu_api pinio__cuda_api, pinio__hip_api;

/* The driver: one table of entry points, filled by pinio__gpu_open(), and
 * the symbol each came from (for messages); an entry the API does not have
 * (a NULL symbol above) stays NULL. */
typedef struct pinio__gpu {
    void *lib;
    const pinio__gpu_api *api;
#define PINIO_GPU_FIELD(f, ret, args, ...) ret(*f) args;
    PINIO_GPU_SYMS(PINIO_GPU_FIELD)
    PINIO_GPU_CUDA_SYMS(PINIO_GPU_FIELD)
    PINIO_GPU_HIP_SYMS(PINIO_GPU_FIELD)
#undef PINIO_GPU_FIELD
    struct {
#define PINIO_GPU_NAME(f, ...) const char *f;
        PINIO_GPU_SYMS(PINIO_GPU_NAME)
        PINIO_GPU_CUDA_SYMS(PINIO_GPU_NAME)
        PINIO_GPU_HIP_SYMS(PINIO_GPU_NAME)
#undef PINIO_GPU_NAME
    } sym;
} pinio__gpu;

/* Opens the driver (the api's variable, else its libraries in turn),
 * resolves every entry and calls its Init(0). On failure nothing stays
 * open and `diag` says "no CUDA driver: ..." (-ENODEV), "no CUDA driver
 * installed: PATH is the CUDA toolkit's stub library ..." (-ENODEV), "no
 * CUDA device: ..." (-ENODEV) or names the missing symbol / failed Init. */
int pinio__gpu_open(pinio__gpu *g, const pinio__gpu_api *api, pinio_diag *diag);

void pinio__gpu_close(pinio__gpu *g);

/* A driver result as a negative errno (-ENOMEM, -ENODEV, -EIO), with
 * `diag` naming the call and the driver's name and text for the code; no
 * device (100, 101) reads "no CUDA device: CALL answered NAME (N)...". */
int pinio__gpu_fail(const pinio__gpu *g, CUresult r, const char *call, pinio_diag *diag);

#endif
