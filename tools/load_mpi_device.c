/* `pinio load --mpi tp --device DEV`: after the job has read each selected
 * byte once and every rank holds its slices in host memory, each rank
 * copies them to its GPU through the device's sink fed from that memory
 * (pinio_stream_from_memory()): the same registered slots and asynchronous
 * copies a stream from the file uses, so the slices land packed as
 * `pinio load --split --device` lands them.
 *
 * Why the copies start from host memory rather than each rank streaming
 * its own slices from the file: the job's reads stay one copy of the
 * selected bytes (a tensor held whole by every rank, or a dim-1 slice of
 * short runs, would otherwise be read by every rank), which is the point
 * of --mpi tp. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/pinio.h"
#include "load_mpi_device.h"
#include "util.h"

/* This rank's index among the ranks of its machine. */
static int local_rank(MPI_Comm comm)
{
    MPI_Comm local;
    int rank = 0, lr = 0;
    MPI_Comm_rank(comm, &rank);
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) !=
        MPI_SUCCESS)
        return 0;
    MPI_Comm_rank(local, &lr);
    MPI_Comm_free(&local);
    return lr;
}

/* A held tensor by name, for the binary search below. */
typedef struct named {
    const char *name;
    size_t i;
} named;

static int by_name(const void *x, const void *y)
{
    return strcmp(((const named *)x)->name, ((const named *)y)->name);
}

/* The rank's own work: 0 or a negative code with `diag` set. */
static int copy_rank(MPI_Comm comm, const cli_load_args *a, const char *const *paths,
                     size_t npaths, const pinio_mpi_checkpoint *cp, cli_mpi_gpu *out,
                     pinio_diag *diag)
{
    const char *api = a->dev.hip ? "hip" : "cuda";
    const pinio_sink *sink = a->dev.hip ? &pinio_sink_hip : &pinio_sink_cuda;
    size_t slot = a->so.slot_size ? a->so.slot_size : PINIO_STREAM_SLOT_DEFAULT;
    unsigned nslots = a->so.slots ? a->so.slots : PINIO_STREAM_SLOTS_DEFAULT;
    int rank = 0, size = 1, device = a->dev.index;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int lr = local_rank(comm); /* collective: before any rank can fail */
    if (a->dev.local) {
        size_t ndev = 0;
        int rc = pinio_gpu_devices(api, NULL, 0, &ndev, NULL, diag);
        if (rc < 0)
            return rc;
        if (ndev == 0) {
            pinio_diag_set(diag, -ENODEV, "%s:local: the driver lists no device", api);
            return -ENODEV;
        }
        device = (int)((size_t)lr % ndev);
    }
    pinio_plan_opts po;
    pinio_plan_opts_default(&po);
    po.filters = a->filters;
    po.nfilters = a->nfilters;
    po.split = a->split;
    po.nsplit = a->nsplit;
    po.rank = (uint32_t)rank;
    po.world = (uint32_t)size;
    po.segment = slot;
    po.cache = PINIO_CACHE_HOT; /* never executed: the headers are all it needs */
    pinio_plan *plan = NULL;
    int rc = pinio_plan_create(&plan, paths, npaths, &po, diag);
    if (rc < 0)
        return rc;
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    size_t held = pinio_mpi_count(cp);
    named *idx = calloc(held ? held : 1, sizeof(*idx));
    pinio_view *views = calloc(pi.tensors ? pi.tensors : 1, sizeof(*views));
    const void **src = calloc(pi.tensors ? pi.tensors : 1, sizeof(*src));
    rc = idx && views && src ? 0 : -ENOMEM;
    if (rc < 0)
        pinio_diag_set(diag, rc, "out of memory");
    for (size_t i = 0; rc == 0 && i < held; i++)
        idx[i] = (named){.name = pinio_mpi_tensor(cp, i)->name, .i = i};
    if (rc == 0)
        qsort(idx, held, sizeof(*idx), by_name);
    /* Each plan tensor's bytes: the held slice of the same name, which the
     * same rules, rank and world made the same size. */
    for (size_t i = 0; rc == 0 && i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(plan, i);
        named key = {.name = t->name}, *hit = bsearch(&key, idx, held, sizeof(*idx), by_name);
        size_t k = hit ? hit->i : 0;
        const pinio_plan_tensor *h = hit ? pinio_mpi_tensor(cp, k) : NULL;
        if (!h || h->nbytes != t->nbytes) {
            rc = -EPROTO;
            pinio_diag_set(diag, rc, "tensor '%s': %s, the device copy's plan says %llu bytes",
                           t->name, h ? "held in other bytes" : "not held",
                           (unsigned long long)t->nbytes);
            break;
        }
        if ((rc = pinio_mpi_tensor_view(cp, k, &views[i])) < 0) {
            pinio_diag_set(diag, rc, "tensor '%s': no view of its bytes", t->name);
            break;
        }
        src[i] = views[i].ptr;
    }
    pinio_gpu_arena *arena = NULL;
    pinio_sink_gpu_cfg cfg = {.device = device, .pci_bus_id = a->dev.pci, .out = &arena};
    if (rc == 0)
        rc = pinio_stream_from_memory(plan, src, pi.tensors, slot, nslots, sink, &cfg, diag);
    if (rc == 0) {
        pinio_gpu_info gi;
        pinio_gpu_arena_get_info(arena, &gi);
        out->device = gi.device;
        memcpy(out->pci_bus_id, gi.pci_bus_id, sizeof(out->pci_bus_id));
        out->pci_bus_id[sizeof(out->pci_bus_id) - 1] = '\0';
        out->driver_version = gi.driver_version;
        out->tensors = gi.tensors;
        out->bytes = gi.bytes;
        out->copies = gi.copies;
        out->h2d_seconds = gi.h2d_seconds;
        out->slots_registered = gi.slots_registered;
    }
    pinio_gpu_arena_free(arena);
    for (size_t i = 0; views && i < pi.tensors; i++)
        pinio_view_release(&views[i]);
    free(views);
    free(src);
    free(idx);
    pinio_plan_free(plan);
    return rc;
}

int cli_mpi_to_device(MPI_Comm comm, const cli_load_args *a, const char *const *paths,
                      size_t npaths, const pinio_mpi_checkpoint *cp, cli_mpi_gpu *out,
                      pinio_diag *diag)
{
    memset(out, 0, sizeof(*out));
    out->device = -1;
    double t0 = cli_now_s();
    pinio_diag mine = {.offset = PINIO_DIAG_NO_OFFSET};
    int rc = copy_rank(comm, a, paths, npaths, cp, out, &mine);
    out->seconds = cli_now_s() - t0;
    /* One verdict for the job: the lowest code, among equal codes the
     * lowest rank, and that rank's words for every rank (as the library's
     * own phases agree), so no rank reports success beside one that failed. */
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    struct { int rc, rank; } in = {rc, rank}, all;
    if (MPI_Allreduce(&in, &all, 1, MPI_2INT, MPI_MINLOC, comm) != MPI_SUCCESS) {
        pinio_diag_set(diag, -EPROTO, "MPI_Allreduce (device copy status) failed");
        return -EPROTO;
    }
    if (all.rc == 0)
        return 0;
    if (rank == all.rank && mine.code == 0)
        pinio_diag_set(&mine, all.rc, "%s", pinio_strerror(all.rc));
    MPI_Bcast(&mine, (int)sizeof(mine), MPI_BYTE, all.rank, comm);
    mine.msg[sizeof(mine.msg) - 1] = mine.path[sizeof(mine.path) - 1] = '\0';
    const char *rest = mine.msg;
    size_t pl = strlen(mine.path);
    if (pl && strncmp(rest, mine.path, pl) == 0 && strncmp(rest + pl, ": ", 2) == 0)
        rest += pl + 2;
    pinio_diag_set_at(diag, all.rc, pl ? mine.path : NULL, mine.offset,
                      "rank %d of %d: to the device: %s", all.rank, size, rest);
    return all.rc;
}
