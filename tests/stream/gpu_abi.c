/* Our hand-written driver table (src/stream/gpu_dl.h) held to the real
 * driver artifacts that exist without a GPU (issue 29). Compiled by
 * gpu_abi_test.sh at test time, never by the build, so that a machine
 * without the CUDA toolkit builds pinio and skips the check with a reason.
 *
 * With -DPINIO_WITH_CUDA_H (and the toolkit's include/ on the path), at
 * compile time, beside the real cuda.h:
 *   - every constant of PINIO_GPU_CONSTS equals cuda.h's of that name;
 *   - our six types are cuda.h's (CUresult: an enum there, an int here:
 *     same size, both integers);
 *   - every CUDA entry's prototype, as the table writes it, is the type
 *     of the function cuda.h declares;
 *   - every CUDA symbol is the name cuda.h maps the plain one to: cuda.h
 *     #defines cuMemAlloc to cuMemAlloc_v2, so a table that said
 *     cuMemAlloc would dlsym the pre-3.2 ABI (32-bit CUdeviceptr) while a
 *     type check through the macro passed; the stringified name must
 *     survive macro expansion unchanged.
 * A mismatch is a compile error that names the entry.
 *
 * At run time, `gpu_abi cuda LIB [stub]` / `gpu_abi hip LIB`: every
 * symbol of the API (both APIs' entries and its own) resolves with dlsym
 * in LIB (a HIP optional one may be missing: reported); then the driver's
 * Init (and HIP's device count) is called and its answers printed, and
 * with `stub`, cuInit must answer cuda.h's CUDA_ERROR_STUB_LIBRARY.
 * Exit 0 when every check passed, 3 when LIB cannot be opened, 1 otherwise. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#ifdef PINIO_WITH_CUDA_H
/* Our types renamed, our constants left out: cuda.h declares both. */
#define PINIO_GPU_DL_BESIDE_CUDA_H
#define CUresult pinio_CUresult
#define CUdevice pinio_CUdevice
#define CUdeviceptr pinio_CUdeviceptr
#define CUcontext pinio_CUcontext
#define CUstream pinio_CUstream
#define CUevent pinio_CUevent
#endif

#include "src/stream/gpu_dl.h"

#define STR(x) #x
#define XSTR(x) STR(x) /* the name after cuda.h's macros */

#ifdef PINIO_WITH_CUDA_H
#undef CUresult
#undef CUdevice
#undef CUdeviceptr
#undef CUcontext
#undef CUstream
#undef CUevent
#include <cuda.h>

#define SAME_TYPE(ours, theirs)                                                         \
    _Static_assert(__builtin_types_compatible_p(ours, theirs),                          \
                   "gpu_dl.h: " #ours " is not cuda.h's " #theirs);
SAME_TYPE(pinio_CUdevice, CUdevice)
SAME_TYPE(pinio_CUdeviceptr, CUdeviceptr)
SAME_TYPE(pinio_CUcontext, CUcontext)
SAME_TYPE(pinio_CUstream, CUstream)
SAME_TYPE(pinio_CUevent, CUevent)
/* GCC makes an enum without negative values unsigned int: the same size
 * and registers as our int, and every code is below INT_MAX. */
_Static_assert(sizeof(pinio_CUresult) == sizeof(CUresult) &&
                   (__builtin_types_compatible_p(CUresult, unsigned) ||
                    __builtin_types_compatible_p(CUresult, int)),
               "gpu_dl.h: CUresult is not an int-sized integer in cuda.h");

#define CHECK_CONST(name, value)                                                        \
    _Static_assert((value) == (name),                                                   \
                   "gpu_dl.h: " #name " is " #value " there, not cuda.h's value");
PINIO_GPU_CONSTS(CHECK_CONST)

/* The table's arguments are read here with cuda.h's types, which the
 * asserts above prove are ours. */
#define CHECK_PROTO(f, ret, args, cu, name)                                             \
    _Static_assert(__builtin_types_compatible_p(__typeof__(cu), ret args),              \
                   "gpu_dl.h: entry " #f " says " #ret " " #args                        \
                   ", not the prototype cuda.h declares for " XSTR(cu));               \
    _Static_assert(sizeof(name) == sizeof(XSTR(cu)),                                    \
                   "gpu_dl.h: entry " #f " dlsyms " name " but cuda.h maps that name to " \
                   XSTR(cu) ": use the versioned name");
/* #cu here, where the argument is still the table's own text: a macro's
 * arguments are expanded before they reach a macro it calls. */
#define CHECK_BOTH(f, ret, args, cu, hip, opt) CHECK_PROTO(f, ret, args, cu, #cu)
#define CHECK_CUDA(f, ret, args, cu, opt) CHECK_PROTO(f, ret, args, cu, #cu)
PINIO_GPU_SYMS(CHECK_BOTH)
PINIO_GPU_CUDA_SYMS(CHECK_CUDA)
#endif

typedef struct entry {
    const char *field, *sym, *expanded; /* expanded: after cuda.h's macros, if included */
    bool opt;
} entry;

static const entry cuda_entries[] = {
#define E_BOTH(f, ret, args, cu, hip, opt) { #f, #cu, XSTR(cu), opt },
#define E_ONE(f, ret, args, sym, opt) { #f, #sym, XSTR(sym), opt },
    PINIO_GPU_SYMS(E_BOTH) PINIO_GPU_CUDA_SYMS(E_ONE)
#undef E_BOTH
};
static const entry hip_entries[] = {
#define E_BOTH(f, ret, args, cu, hip, opt) { #f, #hip, #hip, opt },
    PINIO_GPU_SYMS(E_BOTH) PINIO_GPU_HIP_SYMS(E_ONE)
#undef E_BOTH
#undef E_ONE
};

static int resolve_all(void *lib, const char *path, const entry *e, size_t n, bool all)
{
    int bad = 0;
    size_t found = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(e[i].sym, e[i].expanded) != 0) {
            printf("FAIL: %s: dlsym'ed as %s, but cuda.h maps it to %s\n", e[i].field,
                   e[i].sym, e[i].expanded);
            bad++;
        }
        if (dlsym(lib, e[i].sym)) {
            found++;
        } else if (e[i].opt && !all) {
            printf("note: %s lacks %s (optional)\n", path, e[i].sym);
        } else {
            printf("FAIL: %s lacks %s (entry %s)\n", path, e[i].sym, e[i].field);
            bad++;
        }
    }
    printf("%zu of %zu symbols resolved in %s\n", found, n, path);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "cuda") && strcmp(argv[1], "hip"))) {
        fprintf(stderr, "usage: gpu_abi cuda|hip LIB [stub]\n");
        return 2;
    }
    bool hip = strcmp(argv[1], "hip") == 0, stub = argc > 3 && strcmp(argv[3], "stub") == 0;
    /* Never unloaded, as src/stream/gpu_dl.c does not: HIP's hipInit
     * allocations would read as leaks once the library is gone. */
    void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!lib) { /* a distinct status: the caller may be looking for a driver that is absent */
        printf("cannot open %s: %s\n", argv[2], dlerror());
        return 3;
    }
    int bad = hip ? resolve_all(lib, argv[2], hip_entries,
                                sizeof(hip_entries) / sizeof(*hip_entries), false)
                  : resolve_all(lib, argv[2], cuda_entries,
                                sizeof(cuda_entries) / sizeof(*cuda_entries), true);
    /* Called through the table's own types. */
    pinio__gpu g = { 0 };
    *(void **)&g.Init = dlsym(lib, hip ? "hipInit" : "cuInit");
    *(void **)&g.DeviceGetCount = dlsym(lib, hip ? "hipGetDeviceCount" : "cuDeviceGetCount");
    if (!bad && g.Init && g.DeviceGetCount) {
        int r = g.Init(0), n = -1;
        fflush(stdout);
        int rc = g.DeviceGetCount(&n);
        printf("%s(0) answered %d; %s answered %d, %d device%s\n", hip ? "hipInit" : "cuInit", r,
               hip ? "hipGetDeviceCount" : "cuDeviceGetCount", rc, n, n == 1 ? "" : "s");
#ifdef PINIO_WITH_CUDA_H
        if (stub && r != CUDA_ERROR_STUB_LIBRARY) {
            printf("FAIL: the stub's cuInit answered %d, not CUDA_ERROR_STUB_LIBRARY (%d)\n", r,
                   (int)CUDA_ERROR_STUB_LIBRARY);
            bad++;
        }
#else
        if (stub) {
            printf("FAIL: checking the stub's answer needs cuda.h (-DPINIO_WITH_CUDA_H)\n");
            bad++;
        }
#endif
    }
    return bad ? 1 : 0;
}
