/* One of the independent processes of tests/load/share_test.sh:
 *   share_load PATH [off]
 * loads PATH (a file of pinio gen) pinned, with node-local sharing unless
 * "off", checks every tensor's bytes against the generator, and prints
 *   read_bytes=N shared=S read_here=R share_bytes=B pid=P minflt=F
 *   share=<the report's share line>
 *   memory=<the report's memory line>
 * Exit 0; 1 with the library's message; 3 when a byte is wrong.
 *
 * The test's fault point, compiled into this program only: the load's
 * share hook reads SHARE_TEST_AT="STAGE:kill" or "STAGE:wait:FILE", or
 * several of them separated by commas (STAGE: claimed, allocated, reading,
 * complete, joining, early, wanting). At that stage of the first file, "kill" sends
 * SIGKILL to this process; "wait" creates FILE.reached, then waits until
 * FILE exists. SHARE_TEST_LOG=FILE: each stage's name appended to FILE as
 * it is reached (a test waits for "wanting": the process asked the reader).
 * F: this process's minor page faults (getrusage), the whole run's. SHARE_TEST_HOLD=FILE: the
 * same wait once the load is checked and printed, the checkpoint still
 * held, so that processes "at once" overlap whatever the machine's load
 * (empty: no wait). */
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/load.h"

static const char *const stages[] = { "", "claimed", "allocated", "reading", "complete",
                                      "joining", "early", "wanting" };

/* Creates FILE.reached, then waits until FILE exists. Bounded: a test that
 * never releases it fails on its counts, not by hanging its run. */
static void wait_for(const char *file)
{
    char reached[4096];
    snprintf(reached, sizeof(reached), "%s.reached", file);
    FILE *f = fopen(reached, "w");
    if (f)
        fclose(f);
    for (int i = 0; i < 12000 && access(file, F_OK) != 0; i++)
        nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
}

static void at_stage(void *ctx, const char *path, pinio_share_stage st)
{
    (void)ctx;
    (void)path;
    const char *log = getenv("SHARE_TEST_LOG");
    if (log && *log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "%s\n", stages[st]);
            fclose(f);
        }
    }
    const char *spec = getenv("SHARE_TEST_AT");
    size_t n = strlen(stages[st]);
    for (; spec && *spec; spec = strchr(spec, ',') ? strchr(spec, ',') + 1 : NULL) {
        if (strncmp(spec, stages[st], n) != 0 || spec[n] != ':')
            continue;
        char act[4096];
        snprintf(act, sizeof(act), "%.*s", (int)strcspn(spec + n + 1, ","), spec + n + 1);
        if (strcmp(act, "kill") == 0)
            raise(SIGKILL);
        if (strncmp(act, "wait:", 5) == 0)
            wait_for(act + 5);
        return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: share_load PATH [off]\n");
        return 2;
    }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.memory = PINIO_MEMORY_PINNED;
    o.share = argc > 2 && strcmp(argv[2], "off") == 0 ? PINIO_SHARE_OFF : PINIO_SHARE_AUTO;
    o.share_hook = at_stage;
    const char *paths[] = { argv[1] };
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_load(paths, 1, &o, &cp, &d);
    if (rc < 0) {
        fprintf(stderr, "share_load: %s\n", d.msg);
        return 1;
    }
    const char *seed_s = pinio_checkpoint_metadata(cp, PINIO_GEN_SEED_KEY);
    uint64_t seed = seed_s ? strtoull(seed_s, NULL, 10) : 0;
    int bad = 0;
    for (size_t i = 0; i < pinio_checkpoint_count(cp); i++) {
        const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
        uint64_t at = 0;
        if (!seed_s || !pinio_gen_verify(seed, t->name, 0, t->data, t->nbytes, &at)) {
            fprintf(stderr, "share_load: %s: tensor %s wrong at byte %llu\n", argv[1], t->name,
                    (unsigned long long)at);
            bad = 1;
        }
    }
    pinio_load_report r;
    pinio_checkpoint_report(cp, &r);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("read_bytes=%llu shared=%zu read_here=%zu share_bytes=%llu pid=%d minflt=%ld\n"
           "share=%s\nmemory=%s\n",
           (unsigned long long)r.read_bytes, r.files_shared, r.files_share_read,
           (unsigned long long)r.share_bytes, (int)getpid(), ru.ru_minflt, r.share, r.memory);
    fflush(stdout);
    const char *hold = getenv("SHARE_TEST_HOLD");
    if (hold && *hold)
        wait_for(hold);
    pinio_checkpoint_release(cp);
    return bad ? 3 : 0;
}
