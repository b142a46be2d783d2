/* libFuzzer target for the fio job-file parser (tools/bench_jobfile.c): the
 * input is a whole job file, read through a memfd (the parser takes a path),
 * so nothing touches a file system. A parse either succeeds with at least one
 * job, each an argument vector "bench ..." ending in NULL, groups numbered
 * from 0 in file order and below ngroups, and notes naming the file; or fails
 * with a documented errno, an empty result and a one-line error naming the
 * file. The same input parsed twice gives the same result (no state kept;
 * checked on one input in eight).
 * Run: scripts/fuzz jobfile SECONDS. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench_jobfile.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)              \
    do {                      \
        if (!(c))             \
            __builtin_trap(); \
    } while (0)

static int mfd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    mfd = memfd_create("pinio-fuzz-jobfile", MFD_CLOEXEC);
    if (mfd < 0)
        abort();
    snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
    return 0;
}

static bool starts_with_path(const char *s)
{
    size_t n = strlen(path);
    return !strncmp(s, path, n) && s[n] == ':';
}

static void check_ok(const bench_jobfile *jf)
{
    CHECK(jf->njobs > 0 && jf->jobs && jf->ngroups > 0);
    unsigned group = 0;
    for (size_t i = 0; i < jf->njobs; i++) {
        const bench_job *j = &jf->jobs[i];
        CHECK(j->name && j->argc > 0 && j->argv && !strcmp(j->argv[0], "bench"));
        CHECK(j->argv[j->argc] == NULL);
        for (int a = 0; a < j->argc; a++)
            CHECK(j->argv[a] != NULL);
        CHECK(j->group >= group && j->group < jf->ngroups);
        group = j->group;
    }
    CHECK(group == jf->ngroups - 1);
    for (size_t i = 0; i < jf->nnotes; i++)
        CHECK(jf->notes[i] && starts_with_path(jf->notes[i]) && !strchr(jf->notes[i], '\n'));
}

static bool same(const bench_jobfile *a, const bench_jobfile *b)
{
    if (a->njobs != b->njobs || a->ngroups != b->ngroups || a->nnotes != b->nnotes)
        return false;
    for (size_t i = 0; i < a->njobs; i++) {
        const bench_job *x = &a->jobs[i], *y = &b->jobs[i];
        if (strcmp(x->name, y->name) || x->group != y->group || x->argc != y->argc)
            return false;
        for (int k = 0; k < x->argc; k++)
            if (strcmp(x->argv[k], y->argv[k]))
                return false;
    }
    for (size_t i = 0; i < a->nnotes; i++)
        if (strcmp(a->notes[i], b->notes[i]))
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CHECK(ftruncate(mfd, 0) == 0);
    CHECK(pwrite(mfd, data, size, 0) == (ssize_t)size);

    bench_jobfile jf, again;
    char err[512], err2[512];
    int rc = bench_jobfile_parse(path, &jf, err, sizeof(err));
    if (rc == 0) {
        check_ok(&jf);
    } else {
        CHECK(rc == -EINVAL || rc == -ENOTSUP);
        CHECK(jf.njobs == 0 && jf.jobs == NULL && jf.nnotes == 0 && jf.notes == NULL);
        CHECK(starts_with_path(err) && !strchr(err, '\n'));
    }
    /* One input in eight, chosen by its size (so a finding reproduces):
     * the check halves the speed where it runs. */
    if (size % 8 == 0) {
        int rc2 = bench_jobfile_parse(path, &again, err2, sizeof(err2));
        CHECK(rc2 == rc && (rc ? !strcmp(err, err2) : same(&jf, &again)));
        bench_jobfile_free(&again);
    }
    bench_jobfile_free(&jf);
    return 0;
}
