/*
 * Loading the CUDA driver at run time (see cuda_dl.h for the ABI rules).
 *
 * Why libcuda.so.1 and never libcuda.so: the unversioned name is a
 * development symlink, or the toolkit's stub (which answers every call
 * with CUDA_ERROR_STUB_LIBRARY); containers often mount only the .so.1.
 * PINIO_CUDA_LIB names another path (NixOS, WSL, Apptainer keep the driver
 * elsewhere; the tests point it at their fake driver).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/stream/gpu_dl.h"

/* Entry name -> its field, versioned symbol names where they exist. */
#define CUDA_SYMS(X)                                             \
    X(Init, "cuInit")                                            \
    X(DriverGetVersion, "cuDriverGetVersion")                    \
    X(DeviceGetCount, "cuDeviceGetCount")                        \
    X(DeviceGet, "cuDeviceGet")                                  \
    X(DeviceGetByPCIBusId, "cuDeviceGetByPCIBusId")              \
    X(DeviceGetPCIBusId, "cuDeviceGetPCIBusId")                  \
    X(DeviceGetName, "cuDeviceGetName")                          \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2")                     \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")        \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")   \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2")                     \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2")                       \
    X(MemHostRegister, "cuMemHostRegister_v2")                   \
    X(MemHostUnregister, "cuMemHostUnregister")                  \
    X(MemAlloc, "cuMemAlloc_v2")                                 \
    X(MemFree, "cuMemFree_v2")                                   \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                   \
    X(MemcpyDtoH, "cuMemcpyDtoH_v2")                             \
    X(StreamCreate, "cuStreamCreate")                            \
    X(StreamDestroy, "cuStreamDestroy_v2")                       \
    X(StreamSynchronize, "cuStreamSynchronize")                  \
    X(EventCreate, "cuEventCreate")                              \
    X(EventDestroy, "cuEventDestroy_v2")                         \
    X(EventRecord, "cuEventRecord")                              \
    X(EventSynchronize, "cuEventSynchronize")                    \
    X(GetErrorName, "cuGetErrorName")                            \
    X(GetErrorString, "cuGetErrorString")

int pinio__cuda_open(pinio__cuda *cu, pinio_diag *diag)
{
    memset(cu, 0, sizeof(*cu));
    const char *path = getenv(PINIO_CUDA_LIB_ENV);
    if (!path || !*path)
        path = "libcuda.so.1";
    cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cu->lib) {
        const char *e = dlerror();
        pinio_diag_set(diag, -ENODEV, "no CUDA driver: %s (%s names another library)",
                       e ? e : path, PINIO_CUDA_LIB_ENV);
        return -ENODEV;
    }
#define RESOLVE(field, sym)                                                                   \
    *(void **)&cu->field = dlsym(cu->lib, sym);                                               \
    if (!cu->field) {                                                                         \
        pinio_diag_set(diag, -ENODEV, "no usable CUDA driver: %s lacks %s (driver too old?)", \
                       path, sym);                                                            \
        pinio__cuda_close(cu);                                                                \
        return -ENODEV;                                                                       \
    }
    CUDA_SYMS(RESOLVE)
#undef RESOLVE
    CUresult r = cu->Init(0);
    if (r != CUDA_SUCCESS) {
        int rc = pinio__cuda_fail(cu, r, "cuInit", diag);
        if (r == CUDA_ERROR_STUB_LIBRARY)
            pinio_diag_set(diag, -ENODEV, "no CUDA driver: %s is the toolkit's stub library, "
                           "not the driver", path);
        pinio__cuda_close(cu);
        return r == CUDA_ERROR_STUB_LIBRARY ? -ENODEV : rc;
    }
    return 0;
}

void pinio__cuda_close(pinio__cuda *cu)
{
    if (cu->lib)
        dlclose(cu->lib);
    memset(cu, 0, sizeof(*cu));
}

int pinio__cuda_fail(const pinio__cuda *cu, CUresult r, const char *call, pinio_diag *diag)
{
    const char *name = NULL, *text = NULL;
    if (cu->GetErrorName)
        cu->GetErrorName(r, &name);
    if (cu->GetErrorString)
        cu->GetErrorString(r, &text);
    int rc = r == CUDA_ERROR_OUT_OF_MEMORY                                 ? -ENOMEM
             : r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE ? -ENODEV
                                                                           : -EIO;
    pinio_diag_set(diag, rc, "cuda: %s failed: %s (%d): %s", call, name ? name : "CUDA_ERROR",
                   r, text ? text : "no description");
    return rc;
}
