/*
 * Loading a GPU driver at run time (see gpu_dl.h for the ABI rules).
 *
 * Why libcuda.so.1 and never libcuda.so: the unversioned name is a
 * development symlink, or the toolkit's stub (which answers every call
 * with CUDA_ERROR_STUB_LIBRARY); containers often mount only the .so.1.
 * HIP's runtime is libamdhip64.so, versioned .so.7/.so.6/.so.5 where no
 * development package installed the plain name (.so.5 is Debian 12's,
 * package libamdhip64-5). A variable names another
 * path (NixOS, WSL, Apptainer keep the driver elsewhere; the tests point
 * it at their test drivers).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "src/stream/gpu_dl.h"

static const char *const cuda_libs[] = { "libcuda.so.1", NULL };
static const char *const hip_libs[] = { "libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6",
                                        "libamdhip64.so.5", NULL };

const pinio__gpu_api pinio__cuda_api = {
    .tag = "cuda", .name = "CUDA", .libs = cuda_libs, .lib_env = "PINIO_CUDA_LIB", .hip = false,
};
const pinio__gpu_api pinio__hip_api = {
    .tag = "hip", .name = "HIP", .libs = hip_libs, .lib_env = "PINIO_HIP_LIB", .hip = true,
};

/* RTLD_NODELETE: a driver, once initialized, is never unloaded. Its Init
 * cannot be undone, it keeps state (and, with a device in use, threads)
 * that only its own exit handlers release, and unmapping it leaves that
 * memory unreachable: HIP 5's hipInit allocations read as leaks to
 * LeakSanitizer once the library is gone. pinio__gpu_close() drops our
 * reference; the library stays mapped, as it would for any program that
 * linked it. */
static void *open_lib(const pinio__gpu_api *api, const char **path, pinio_diag *diag)
{
    const char *env = getenv(api->lib_env);
    const char *const one[] = { env, NULL };
    const char *const *libs = env && *env ? one : api->libs;
    char first[256] = "";
    for (size_t i = 0; libs[i]; i++) {
        void *h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h) {
            *path = libs[i];
            return h;
        }
        if (!first[0]) { /* the first failure is the telling one */
            const char *e = dlerror();
            snprintf(first, sizeof(first), "%s", e ? e : libs[i]);
        }
    }
    pinio_diag_set(diag, -ENODEV, "no %s driver: %s (%s names another library)", api->name,
                   first, api->lib_env);
    return NULL;
}

/* One entry: `name` is its symbol in this API, NULL where the API has
 * none (the entry stays NULL). */
static int resolve(pinio__gpu *g, void **fn, const char **sym, const char *name, bool opt,
                   const char *path, pinio_diag *diag)
{
    *sym = name;
    if (!name)
        return 0;
    *fn = dlsym(g->lib, name);
    if (*fn || opt)
        return 0;
    pinio_diag_set(diag, -ENODEV, "no usable %s driver: %s lacks %s (driver too old?)",
                   g->api->name, path, name);
    return -ENODEV;
}

/* The driver's name and text for a result, or NULL. */
static void describe(const pinio__gpu *g, CUresult r, const char **name, const char **text)
{
    *name = *text = NULL;
    if (g->GetErrorName && g->GetErrorName(r, name) != CUDA_SUCCESS)
        *name = NULL;
    if (g->GetErrorString && g->GetErrorString(r, text) != CUDA_SUCCESS)
        *text = NULL;
    if (!*name && g->RtErrorName) /* HIP 5: the runtime's texts (gpu_dl.h) */
        *name = g->RtErrorName(r);
    if (!*text && g->RtErrorString)
        *text = g->RtErrorString(r);
    if (*name && *text && strcmp(*name, *text) == 0) /* HIP 5's text is the name */
        *text = NULL;
}

/* The toolkit's stubs/libcuda.so only lets programs link, and answers
 * every call with CUDA_ERROR_STUB_LIBRARY, cuGetErrorName included, so the
 * message is ours. */
static int init_failed(pinio__gpu *g, CUresult r, const char *path, pinio_diag *diag)
{
    if (r != CUDA_ERROR_STUB_LIBRARY || g->api->hip)
        return pinio__gpu_fail(g, r, g->sym.Init, diag);
    pinio_diag_set(diag, -ENODEV,
                   "no CUDA driver installed: %s is the CUDA toolkit's stub library "
                   "(%s: CUDA_ERROR_STUB_LIBRARY), not a driver; install the NVIDIA driver "
                   "(libcuda.so.1) or point %s at it", path, g->sym.Init, g->api->lib_env);
    return -ENODEV;
}

int pinio__gpu_open(pinio__gpu *g, const pinio__gpu_api *api, pinio_diag *diag)
{
    memset(g, 0, sizeof(*g));
    g->api = api;
    const char *path = NULL;
    g->lib = open_lib(api, &path, diag);
    if (!g->lib)
        return -ENODEV;
    int rc = 0;
#define RESOLVE(f, name, opt)                                                                 \
    if (rc == 0)                                                                              \
        rc = resolve(g, (void **)&g->f, &g->sym.f, name, opt, path, diag);
#define BOTH(f, ret, args, cu_sym, hip_sym, opt) RESOLVE(f, api->hip ? #hip_sym : #cu_sym, opt)
#define CUDA_ONLY(f, ret, args, cu_sym, opt) RESOLVE(f, api->hip ? NULL : #cu_sym, opt)
#define HIP_ONLY(f, ret, args, hip_sym, opt) RESOLVE(f, api->hip ? #hip_sym : NULL, opt)
    PINIO_GPU_SYMS(BOTH)
    PINIO_GPU_CUDA_SYMS(CUDA_ONLY)
    PINIO_GPU_HIP_SYMS(HIP_ONLY)
#undef BOTH
#undef CUDA_ONLY
#undef HIP_ONLY
#undef RESOLVE
    CUresult r = rc == 0 ? g->Init(0) : CUDA_SUCCESS;
    if (rc == 0 && r != CUDA_SUCCESS)
        rc = init_failed(g, r, path, diag);
    if (rc < 0)
        pinio__gpu_close(g);
    return rc;
}

void pinio__gpu_close(pinio__gpu *g)
{
    if (g->lib)
        dlclose(g->lib);
    const pinio__gpu_api *api = g->api;
    memset(g, 0, sizeof(*g));
    g->api = api;
}

/*
 * No device is said plainly, whichever call found it: CUDA answers
 * CUDA_ERROR_NO_DEVICE; HIP 5 without a GPU answers hipInit with
 * hipErrorInvalidDevice (101) and hipGetDeviceCount with hipErrorNoDevice
 * (100), at once, without output; ROCm needs /dev/kfd, which a container
 * must be given: its absence is the reason.
 */
int pinio__gpu_fail(const pinio__gpu *g, CUresult r, const char *call, pinio_diag *diag)
{
    const char *name, *text;
    describe(g, r, &name, &text);
    if (r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_INVALID_DEVICE) {
        bool no_kfd = g->api->hip && access("/dev/kfd", F_OK) != 0;
        pinio_diag_set(diag, -ENODEV, "no %s device: %s answered %s (%d)%s%s%s", g->api->name,
                       call, name ? name : "error", r, text ? ": " : "", text ? text : "",
                       no_kfd ? "; no /dev/kfd: the amdgpu kernel driver is not loaded, or this "
                                "container was not given it" : "");
        return -ENODEV;
    }
    int rc = r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    pinio_diag_set(diag, rc, "%s: %s failed: %s (%d): %s", g->api->tag, call,
                   name ? name : "error", r, text ? text : "no description");
    return rc;
}
