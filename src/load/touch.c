/*
 * The first touch of fresh memory against the storage's read rate: the two
 * figures #PINIO_MEMORY_AUTO compares for a cold file (modes.c).
 *
 * Why it matters: O_DIRECT into a fresh arena makes the kernel fault and
 * zero every page of the arena; a populated mapping of the page cache
 * does not zero (the read fills each page). Where the zeroing runs slower
 * than the storage reads, the arena, not the disk, sets the pace of a
 * cold load, and the page cache is the faster path.
 *
 * What a first touch costs is two things on a VM: the guest kernel's
 * fault and zeroing, and the host backing the guest page (where the host
 * took it back: free page reporting). Only the first is what the page
 * cache avoids: a page-cache page the disk's DMA filled is as new to the
 * guest's CPU as an arena page, and its first access pays the host's part
 * in the user's first read instead (measured on this VM, 2 GiB cold,
 * medians of 5: mapped with the page cache filled, ready at 2.8 s and
 * every tensor read once at 14.0 s, against 4.3 s and 4.8 s for O_DIRECT
 * into the arena; doc/measurements.md, "Issue 40: the measured cold
 * path"). So the probe times the guest's part alone: once per
 * process, a region of up to 8 MiB, 2 MiB aligned and advised
 * MADV_HUGEPAGE as the arena is (numa/prim.c), faulted in by
 * MADV_POPULATE_WRITE (a write per 4 KiB page on kernels without it) for
 * at most 20 ms, dropped, and faulted in again, timed (20 ms at most
 * again): the allocator hands the pages just freed back, backed
 * already. A node-local segment (coop.c) pays the same fault and zeroing
 * (tmpfs zeroes its pages on allocation), so the figure stands for both.
 *
 * The storage's rate is the caller's figure when given, else the last
 * cold read of 64 MiB or more this process made (a mapped fill or an
 * O_DIRECT read), else an assumed 1.7 GB/s: what this VM's virtio disk
 * gave fio, a local SSD's order. One figure per process, not per device.
 * An O_DIRECT read's rate is itself bounded by the arena's touch, so it
 * can only understate the storage, which keeps the rule on O_DIRECT, the
 * former default, where the two are close.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "src/load/touch_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define PROBE_BYTES ((size_t)8 << 20)
#define PROBE_ALIGN ((size_t)2 << 20)
#define PROBE_SECONDS 0.02
#define STORAGE_ASSUMED_GBPS 1.7
#define NOTE_MIN_BYTES ((uint64_t)64 << 20)

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static double probed_gbps; /* written once under probe_once; 0: the probe failed */

/* Bits of the last noted storage rate (a double), 0 = none yet. */
static _Atomic uint64_t noted_bits;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Faults [p, p + len) in, a huge page at a time, until `len` or `limit`
 * seconds; returns the bytes faulted, their time in `*secs`. */
static size_t populate(uint8_t *p, size_t len, double limit, double *secs)
{
    double t0 = now_s(), s = 0;
    size_t done = 0;
    while (done < len && s < limit) {
        if (madvise(p + done, PROBE_ALIGN, MADV_POPULATE_WRITE) != 0)
            for (size_t i = 0; i < PROBE_ALIGN; i += 4096)
                ((volatile uint8_t *)p)[done + i] = 1;
        done += PROBE_ALIGN;
        s = now_s() - t0;
    }
    *secs = s > 1e-9 ? s : 1e-9;
    return done;
}

/* The kernel's own work of a first touch, GB/s: a region faulted in (the
 * host backs its pages), dropped, and faulted in again, timed the second
 * time, when the pages the allocator hands back are the ones just freed.
 * 0 when no memory could be mapped. */
static double probe_one(void)
{
    size_t len = PROBE_BYTES + PROBE_ALIGN;
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + PROBE_ALIGN - 1) & ~(uintptr_t)(PROBE_ALIGN - 1));
    (void)madvise(p, PROBE_BYTES, MADV_HUGEPAGE); /* advice: small pages without THP */
    double s;
    size_t done = populate(p, PROBE_BYTES, PROBE_SECONDS, &s);
    (void)madvise(p, done, MADV_DONTNEED);
    done = populate(p, done, PROBE_SECONDS, &s);
    munmap(m, len);
    return (double)done / s / 1e9;
}

static _Atomic bool measured; /* the probe ran: its figure is free to use */

static void probe(void)
{
    probed_gbps = probe_one();
    atomic_store_explicit(&measured, true, memory_order_release);
}

bool pinio__rates_get(const pinio_load_opts *o, uint64_t bytes, pinio__rates *r)
{
    memset(r, 0, sizeof(*r));
    if (o->first_touch_gbps > 0) {
        r->touch_gbps = o->first_touch_gbps;
        r->touch_from = "given";
    } else {
        if (bytes < PINIO__TOUCH_MIN_BYTES &&
            !atomic_load_explicit(&measured, memory_order_acquire))
            return false;
        pthread_once(&probe_once, probe);
        if (probed_gbps <= 0)
            return false;
        r->touch_gbps = probed_gbps;
        r->touch_from = "measured";
    }
    uint64_t bits = atomic_load_explicit(&noted_bits, memory_order_relaxed);
    double noted;
    memcpy(&noted, &bits, sizeof(noted));
    if (o->storage_gbps > 0) {
        r->storage_gbps = o->storage_gbps;
        r->storage_from = "given";
    } else if (bits) {
        r->storage_gbps = noted;
        r->storage_from = "last read";
    } else {
        r->storage_gbps = STORAGE_ASSUMED_GBPS;
        r->storage_from = "assumed";
    }
    return true;
}

void pinio__storage_note(const pinio_load_report *rep)
{
    double gbps = 0;
    /* Only a load whose every mapped file was filled here, or whose reads
     * were O_DIRECT only: a hot file's mapping or buffered read is memory
     * speed, not the storage's. */
    if (rep->files_filled && rep->files_filled == rep->files_mapped && !rep->files_pinned &&
        rep->mapped_bytes >= NOTE_MIN_BYTES && rep->fill_seconds > 0)
        gbps = (double)rep->mapped_bytes / rep->fill_seconds / 1e9;
    else if (!rep->files_mapped && rep->files_direct && !rep->files_buffered &&
             !rep->files_object && rep->read_bytes >= NOTE_MIN_BYTES && rep->io_seconds > 0)
        gbps = (double)rep->read_bytes / rep->io_seconds / 1e9;
    if (gbps <= 0)
        return;
    uint64_t bits;
    memcpy(&bits, &gbps, sizeof(bits));
    atomic_store_explicit(&noted_bits, bits, memory_order_relaxed);
}
