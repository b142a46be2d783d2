/*
 * The agreement every phase of pinio_mpi_load ends in (mpi_load.c explains
 * why), and an MPI call's failure as a pinio code. Below both mpi_load.c and
 * mpi_plan.c, which call it: neither calls the other's helpers.
 *
 * This file uses the public pinio API only (scripts/check-layers).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pinio/mpi.h"
#include "mpi_internal.h"

/* An MPI call's failure as a pinio code, with MPI's own words. */
int pinio__mpi_fail(job *j, int err, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof(s), "MPI error %d", err);
    pinio_diag_set(&j->local, -EPROTO, "%s failed: %s", call, s);
    return -EPROTO;
}

/*
 * The agreement: every rank's code in, one code out. MINLOC picks the
 * lowest (most negative) code and, among equal codes, the lowest rank; that
 * rank's diagnostic goes to everyone, prefixed with who failed.
 */
int pinio__mpi_agree(job *j, int rc)
{
    struct { int rc, rank; } in = { rc, j->rank }, out;
    int e = MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, j->comm);
    if (e != MPI_SUCCESS) /* nothing left to agree with: report it locally */
        return pinio__mpi_fail(j, e, "MPI_Allreduce (status agreement)");
    if (out.rc == 0)
        return 0;
    pinio_diag d = j->local;
    if (j->rank == out.rank && d.code == 0)
        pinio_diag_set(&d, out.rc, "%s", pinio_strerror(out.rc));
    if (MPI_Bcast(&d, (int)sizeof(d), MPI_BYTE, out.rank, j->comm) != MPI_SUCCESS)
        pinio_diag_set(&d, out.rc, "%s", pinio_strerror(out.rc));
    d.msg[sizeof(d.msg) - 1] = d.path[sizeof(d.path) - 1] = '\0';
    /* The message starts with "PATH: " when it has a path; the formatter
     * puts it back in front of the rank. */
    const char *rest = d.msg;
    size_t pl = strlen(d.path);
    if (pl && strncmp(rest, d.path, pl) == 0 && strncmp(rest + pl, ": ", 2) == 0)
        rest += pl + 2;
    pinio_diag_set_at(j->diag, out.rc, pl ? d.path : NULL, d.offset, "rank %d of %d: %s",
                      out.rank, j->n, rest);
    pinio_diag_set_index(j->diag, d.index);
    return out.rc;
}
