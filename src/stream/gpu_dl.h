/* The CUDA driver API subset the CUDA sink uses, loaded at run time.
 *
 * No CUDA header is needed to build: the types are the driver's ABI
 * (CUresult an int, CUdevice an int, CUdeviceptr 64-bit, handles opaque
 * pointers) and the symbols are the versioned names cuda.h #defines the
 * plain ones to. The unversioned legacy names (cuMemAlloc,
 * cuMemcpyHtoDAsync, cuCtxPushCurrent, ...) still resolve in every driver
 * but are the pre-3.2 ABIs with a 32-bit CUdeviceptr: never dlsym them
 * (gpu-python-peers.md §2.1). */
#ifndef PINIO_SRC_STREAM_GPU_DL_H
#define PINIO_SRC_STREAM_GPU_DL_H

#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_STUB_LIBRARY 34
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

/* The driver: one table of entry points, filled by pinio__cuda_open(). */
typedef struct pinio__cuda {
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetByPCIBusId)(CUdevice *, const char *);
    CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceTotalMem)(size_t *, CUdevice);          /* _v2 */
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);          /* _v2 */
    CUresult (*CtxPushCurrent)(CUcontext);                   /* _v2 */
    CUresult (*CtxPopCurrent)(CUcontext *);                  /* _v2 */
    CUresult (*MemHostRegister)(void *, size_t, unsigned);   /* _v2 */
    CUresult (*MemHostUnregister)(void *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);             /* _v2 */
    CUresult (*MemFree)(CUdeviceptr);                        /* _v2 */
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream); /* _v2 */
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);     /* _v2 */
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);                     /* _v2 */
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);                       /* _v2 */
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*GetErrorString)(CUresult, const char **);
} pinio__cuda;

/* The environment variable naming another driver library than libcuda.so.1. */
#define PINIO_CUDA_LIB_ENV "PINIO_CUDA_LIB"

/* Opens the driver (PINIO_CUDA_LIB or libcuda.so.1), resolves every entry
 * and calls cuInit(0). On failure nothing stays open and `diag` says
 * "no CUDA driver: ..." (-ENODEV) or names the missing symbol / failed
 * cuInit (-ENODEV for no device, -EIO otherwise). */
int pinio__cuda_open(pinio__cuda *cu, pinio_diag *diag);

void pinio__cuda_close(pinio__cuda *cu);

/* A driver result as a negative errno (-ENOMEM, -ENODEV, -EIO), with
 * `diag` naming the call and the driver's name and text for the code. */
int pinio__cuda_fail(const pinio__cuda *cu, CUresult r, const char *call, pinio_diag *diag);

#endif
