/* Peak host memory of a stream is the ring, not the checkpoint: a
 * checkpoint twelve times the ring is streamed to the host sink, every
 * byte checked, while the process's resident set (VmRSS, and VmHWM reset
 * through /proc/self/clear_refs where the kernel allows) and its pinned
 * memory (VmPin: the io_uring-registered slots) are sampled at every
 * fragment. A plain program (CHECK), kept out of valgrind's 'unit' suite:
 * its RSS figures mean nothing under valgrind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"
#include "pinio/gen.h"
#include "pinio/stream.h"
#include "tests/common/helpers.h"

#define SEED 7
#define MiB ((uint64_t)1 << 20)
#define SLOT (2 * MiB)
#define SLOTS 4u
#define RING (SLOT * SLOTS)
#define CKPT (12 * RING)

/* kB of a /proc/self/status field, or -1. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

typedef struct seen {
    uint64_t bytes;
    long max_rss_kb, max_pin_kb;
    size_t bad, fragments;
} seen;

static int on_fragment(void *ctx, const pinio_sink_fragment *f)
{
    seen *s = ctx;
    if (!pinio_gen_verify(SEED, f->t->name, f->offset, f->data, f->len, NULL))
        s->bad++;
    s->bytes += f->len;
    if (s->fragments++ % 4 == 0) {
        long rss = status_kb("VmRSS"), pin = status_kb("VmPin");
        if (rss > s->max_rss_kb)
            s->max_rss_kb = rss;
        if (pin > s->max_pin_kb)
            s->max_pin_kb = pin;
    }
    return 0;
}

int main(void)
{
    char dir[64];
    if (t_tmpdir("/var/tmp", "stream-mem", dir, sizeof dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[128];
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = CKPT;
    g.tensors = 48;
    g.seed = SEED;
    pinio_gen_result gr;
    int rc = pinio_gen_write(path, &g, &gr, NULL);
    CHECK(rc == 0, "gen: %d", rc);

    long rss0 = status_kb("VmRSS");
    /* "5" resets VmHWM to the current RSS (Linux 4.0); without it, VmHWM
     * still holds the generator's peak and only the sampled RSS counts. */
    FILE *cr = fopen("/proc/self/clear_refs", "w");
    bool hwm_reset = cr && fputs("5", cr) >= 0;
    if (cr)
        hwm_reset = fclose(cr) == 0 && hwm_reset;

    seen s = { 0 };
    pinio_stream_opts o;
    pinio_stream_opts_default(&o);
    o.slot_size = SLOT;
    o.slots = SLOTS;
    o.cache = PINIO_CACHE_COLD; /* from storage, as a real stream */
    pinio_sink_host_cfg hc = { .fn = on_fragment, .ctx = &s };
    pinio_stream_report rep;
    pinio_diag d = { 0 };
    const char *in = path;
    rc = rc == 0 ? pinio_stream(&in, 1, &o, &pinio_sink_host, &hc, &rep, &d) : rc;
    CHECK(rc == 0, "stream: %s", d.msg);
    long hwm = status_kb("VmHWM");

    CHECK(s.bad == 0, "%zu fragments with wrong bytes", s.bad);
    CHECK(s.bytes == gr.data_bytes, "%llu of %llu bytes arrived", (unsigned long long)s.bytes,
          (unsigned long long)gr.data_bytes);
    /* The ring, plus slack for the engine's queue and bounce buffer, the
     * plan and the test's own pages: well under the checkpoint. */
    long bound_kb = (long)((RING + 16 * MiB) >> 10);
    CHECK(s.max_rss_kb - rss0 <= bound_kb, "RSS grew by %ld kB while streaming %llu MiB "
          "through a %llu MiB ring", s.max_rss_kb - rss0, (unsigned long long)(CKPT / MiB),
          (unsigned long long)(RING / MiB));
    if (hwm_reset)
        CHECK(hwm - rss0 <= bound_kb, "peak RSS (VmHWM) grew by %ld kB", hwm - rss0);
    if (s.max_pin_kb >= 0)
        CHECK(s.max_pin_kb <= (long)((RING + 8 * MiB) >> 10), "VmPin peaked at %ld kB",
              s.max_pin_kb);
    printf("checkpoint %llu MiB, ring %llu MiB (%u x %llu MiB): RSS +%ld kB (VmHWM %s +%ld kB), "
           "VmPin max %ld kB, registered %s, %zu slot waits\n",
           (unsigned long long)(gr.data_bytes / MiB), (unsigned long long)(RING / MiB), SLOTS,
           (unsigned long long)(SLOT / MiB), s.max_rss_kb - rss0,
           hwm_reset ? "reset" : "not reset", hwm - rss0, s.max_pin_kb,
           rep.registered ? "yes" : "no", rep.slot_waits);

    unlink(path);
    rmdir(dir);
    return t_failures ? 1 : 0;
}
