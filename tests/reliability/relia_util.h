/* Shared bits of the reliability programs: a generated sharded checkpoint in
 * a temporary directory, /proc/self/status figures, cleanup. */
#ifndef PINIO_TESTS_RELIA_UTIL_H
#define PINIO_TESTS_RELIA_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinio/pinio.h"
#include "tests/common/helpers.h"

#define RELIA_SEED 4242u

/* Generates `size` bytes in `tensors` tensors over `shards` files under a new
 * directory "/tmp/pinio-<run>-<tag>-XXXXXX" (its path into `dir`, 256 bytes);
 * returns the checkpoint path (the directory) in `out`, 0 on success. */
static inline int relia_gen(const char *tag, char *tmpl, char *out, size_t cap, uint64_t size,
                            size_t tensors, unsigned shards)
{
    if (t_tmpdir("/tmp", tag, tmpl, 256))
        return -1;
    snprintf(out, cap, "%s/ckpt", tmpl);
    static const pinio_dtype dts[] = { PINIO_DTYPE_BF16, PINIO_DTYPE_F32, PINIO_DTYPE_U8,
                                       PINIO_DTYPE_F8_E4M3 };
    pinio_gen_opts o;
    pinio_gen_opts_default(&o);
    o.size = size;
    o.tensors = tensors;
    o.shards = shards;
    o.seed = RELIA_SEED;
    o.dtypes = dts;
    o.ndtypes = 4;
    pinio_diag d;
    int rc = pinio_gen_write(out, &o, NULL, &d);
    if (rc)
        fprintf(stderr, "gen: %s\n", d.msg);
    return rc;
}

/* Removes the directory made by relia_gen (one level of files, then the
 * checkpoint directory's files). */
static inline void relia_rm(const char *tmpl)
{
    if (t_rm_rf(tmpl) != 0)
        fprintf(stderr, "could not remove %s\n", tmpl);
}

typedef struct relia_proc {
    long rss_kb, pin_kb, lck_kb, fds;
} relia_proc;

static inline long relia_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':')
            v = strtol(line + kl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static inline relia_proc relia_proc_now(void)
{
    relia_proc p = { relia_status_kb("VmRSS"), relia_status_kb("VmPin"), relia_status_kb("VmLck"),
                     0 };
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)))
        p.fds += e->d_name[0] != '.';
    if (d)
        closedir(d);
    p.fds -= 1; /* the DIR's own descriptor */
    return p;
}

#endif
