/* libFuzzer target for the planner, through the public seam
 * (pinio_plan_create_from_headers): inputs -> plan from bytes.
 *
 * Input: a 16-byte prefix of options, then blobs separated by SEP:
 *   p[0]  bits 0-1: files (1 + v % 3); bit 2: the next blob after the headers
 *         is an index image (its shards must be s0..s2.safetensors); bits 3-4:
 *         cache policy; bit 5: direct off; bit 6: the last blob is one more
 *         filter pattern; bit 7: data sizes in MiB instead of bytes
 *   p[1]  low nibble: align (0 = auto, else 1 << (v - 1)); high nibble:
 *         segment (0 = default, else 2048 << v: may be refused as < align)
 *   p[2]  merge gap (0 = default, else v << (v & 15))
 *   p[3]  mask over FILTERS[]
 *   p[4..12]  per file, the data-section size (24 bits, little endian): the
 *         file is truncated to 8 + N + that, N from the header's own prefix
 *   blobs: one header image (8-byte N + JSON) per file, then the index, then
 *         the filter pattern.
 * The files are sparse and live in a scratch folder for the run; only their
 * sizes matter, as planning reads no tensor data.
 *
 * A plan that builds is walked whole: reads inside their file and aligned as
 * promised, within one segment, back to back and disjoint in the destination,
 * every selected tensor's bytes covered by reads once, at its dest_offset, and
 * the info's counts equal to what the accessors give. A plan that fails gives
 * a documented error with a one-line diagnostic and no plan.
 * Run: scripts/fuzz plan SECONDS. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/plan.h"
#include "tests/common/helpers.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXF 3
#define PREFIX 16
static const uint8_t SEP[4] = { 0xff, 0xfe, 0xfd, 0xfc };
static const char *const FILTERS[8] = { "a", "b", "model.layers.0", "*.weight",
                                        "[ab]*", "x?", "model", "no-such-tensor" };

static char dir[4096];
static char paths[MAXF][4200];
static char index_path[4200];

#define CHECK(c) \
    do {         \
        if (!(c)) \
            __builtin_trap(); \
    } while (0)

static void cleanup(void)
{
    for (int i = 0; i < MAXF; i++)
        unlink(paths[i]);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* libFuzzer leaves by _Exit on a finding or an interrupt, past atexit:
     * the scripts name a folder of their own (PINIO_FUZZ_TMPDIR) and remove
     * it whatever happens. */
    const char *base = getenv("PINIO_FUZZ_TMPDIR");
    if (t_tmpdir(base ? base : "/dev/shm", "fuzzplan", dir, sizeof(dir)) != 0 &&
        t_tmpdir("/var/tmp", "fuzzplan", dir, sizeof(dir)) != 0)
        abort();
    for (int i = 0; i < MAXF; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s/s%d.safetensors", dir, i);
        int fd = open(paths[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
            abort();
        close(fd);
    }
    snprintf(index_path, sizeof(index_path), "%s/model.safetensors.index.json", dir);
    atexit(cleanup);
    return 0;
}

/* The next blob: up to SEP or the end. */
static const uint8_t *next_blob(const uint8_t **p, const uint8_t *end, size_t *len)
{
    const uint8_t *b = *p;
    if (!b)
        return NULL;
    const uint8_t *s = memmem(b, (size_t)(end - b), SEP, sizeof(SEP));
    *len = (size_t)((s ? s : end) - b);
    *p = s ? s + sizeof(SEP) : NULL;
    return b;
}

static bool one_line(const pinio_diag *d)
{
    return d->msg[0] && !strchr(d->msg, '\n');
}

/* Tensors in (file, file_offset) order, for the sweep over the reads. */
static int by_position(const void *a, const void *b)
{
    const pinio_plan_tensor *x = *(const pinio_plan_tensor *const *)a;
    const pinio_plan_tensor *y = *(const pinio_plan_tensor *const *)b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

static void walk(const pinio_plan *p, size_t nfiles, const pinio_plan_opts *o, bool filtered)
{
    pinio_plan_info in;
    pinio_plan_get_info(p, &in);
    CHECK(in.files == nfiles && pinio_plan_file_at(p, nfiles) == NULL);
    CHECK(in.align && !(in.align & (in.align - 1)) && (!o->align || in.align == o->align));
    uint64_t seg = o->segment ? o->segment : (uint64_t)1 << 30;

    size_t in_headers = 0;
    for (size_t f = 0; f < nfiles; f++) {
        const pinio_plan_file *pf = pinio_plan_file_at(p, f);
        CHECK(pf && pf->fd >= 0 && pf->header && pf->cache_why);
        in_headers += pinio_st_count(pf->header);
    }
    CHECK(in.tensors + in.skipped + in.unindexed == in_headers);
    if (!filtered && !in.index_path)
        CHECK(in.skipped == 0 && in.unindexed == 0);

    /* Reads: in (file, offset) order, aligned, inside the file, within one
     * segment, back to back and disjoint in the destination. */
    uint64_t read_bytes = 0, dest_end = 0;
    const pinio_plan_read *prev = NULL;
    size_t nr = 0;
    for (const pinio_plan_read *r; (r = pinio_plan_read_at(p, nr)); nr++) {
        CHECK(r->file < nfiles);
        uint64_t fsize = pinio_plan_file_at(p, r->file)->size;
        CHECK(r->offset % in.align == 0 && r->dest_offset % in.align == 0 &&
              r->len % in.align == 0);
        CHECK(r->need > 0 && r->need <= r->len && r->offset + r->need <= fsize);
        CHECK(r->dest_offset % seg + r->len <= seg);
        CHECK(r->dest_offset >= dest_end);
        if (prev && prev->file == r->file)
            CHECK(prev->offset + prev->need <= r->offset);
        else if (prev)
            CHECK(prev->file < r->file);
        dest_end = r->dest_offset + r->len;
        read_bytes += r->len;
        prev = r;
    }
    CHECK(nr == in.reads && read_bytes == in.read_bytes && dest_end <= in.dest_bytes);

    /* Tensors: as their header says, and every byte covered by the reads
     * once, landing at dest_offset + its position in the tensor. */
    size_t nt = in.tensors;
    const pinio_plan_tensor **ts = malloc((nt ? nt : 1) * sizeof(*ts));
    CHECK(ts != NULL);
    uint64_t bytes = 0;
    for (size_t i = 0; i < nt; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        CHECK(t && t->file < nfiles);
        const pinio_st_tensor *h =
            pinio_st_find(pinio_plan_file_at(p, t->file)->header, t->name, t->name_len);
        CHECK(h && h->file_offset == t->file_offset && h->nbytes == t->nbytes &&
              h->dtype == t->dtype && h->rank == t->rank);
        CHECK(t->dest_offset + t->nbytes <= in.dest_bytes);
        if (i)
            CHECK(ts[i - 1]->file <= t->file);
        bytes += t->nbytes;
        ts[i] = t;
    }
    CHECK(pinio_plan_tensor_at(p, nt) == NULL && bytes == in.bytes);
    qsort(ts, nt, sizeof(*ts), by_position);
    size_t r0 = 0;
    for (size_t i = 0; i < nt; i++) {
        const pinio_plan_tensor *t = ts[i];
        uint64_t at = t->file_offset, end = t->file_offset + t->nbytes;
        /* The first read that could hold this tensor's first byte. */
        while (r0 < nr) {
            const pinio_plan_read *r = pinio_plan_read_at(p, r0);
            if (r->file < t->file || (r->file == t->file && r->offset + r->need <= at))
                r0++;
            else
                break;
        }
        for (size_t k = r0; at < end; k++) {
            const pinio_plan_read *r = pinio_plan_read_at(p, k);
            CHECK(r && r->file == t->file && r->offset <= at && at < r->offset + r->need);
            CHECK(t->dest_offset + (at - t->file_offset) == r->dest_offset + (at - r->offset));
            at = r->offset + r->need < end ? r->offset + r->need : end;
        }
    }
    free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t pre[PREFIX] = { 0 };
    memcpy(pre, data, size < PREFIX ? size : PREFIX);
    const uint8_t *end = data + size, *cur = size > PREFIX ? data + PREFIX : NULL;

    size_t nfiles = 1 + pre[0] % 4 % 3;
    bool with_index = pre[0] & 4, extra_filter = pre[0] & 64, mib = pre[0] & 128;
    pinio_plan_opts o;
    pinio_plan_opts_default(&o);
    o.cache = (pinio_cache_policy)((pre[0] >> 3) & 3);
    o.direct = pre[0] & 32 ? PINIO_DIRECT_OFF : PINIO_DIRECT_AUTO;
    o.align = pre[1] & 15 ? (uint64_t)1 << ((pre[1] & 15) - 1) : 0;
    o.segment = pre[1] >> 4 ? (uint64_t)2048 << (pre[1] >> 4) : 0;
    o.merge_gap = pre[2] ? (uint64_t)pre[2] << (pre[2] & 15) : 0;

    pinio_plan_header hs[MAXF];
    for (size_t i = 0; i < nfiles; i++) {
        size_t len = 0;
        const uint8_t *b = next_blob(&cur, end, &len);
        hs[i] = (pinio_plan_header){ .path = paths[i], .bytes = b ? b : (const uint8_t *)"", .len = len };
        uint64_t n = 0;
        if (len >= 8)
            memcpy(&n, b, 8); /* little endian, as the format */
        uint64_t dsize = pre[4 + 3 * i] | (uint64_t)pre[5 + 3 * i] << 8 | (uint64_t)pre[6 + 3 * i] << 16;
        if (mib)
            dsize <<= 20;
        /* A length the header could never have: its own length decides. */
        uint64_t fsize = len < 8 || n > ((uint64_t)1 << 40) ? len : 8 + n + dsize;
        /* Past the file system's largest file (EFBIG: 16 TiB on ext4) the
         * input cannot be staged: not the planner's business. */
        if (truncate(paths[i], (off_t)fsize) != 0) {
            if (errno == EFBIG || errno == EINVAL)
                return 0;
            abort();
        }
    }
    size_t index_len = 0;
    const uint8_t *index = with_index ? next_blob(&cur, end, &index_len) : NULL;
    const char *filters[9];
    size_t nfilters = 0;
    for (int i = 0; i < 8; i++)
        if (pre[3] >> i & 1)
            filters[nfilters++] = FILTERS[i];
    char pattern[64];
    size_t plen = 0;
    const uint8_t *pb = extra_filter ? next_blob(&cur, end, &plen) : NULL;
    if (pb) {
        plen = plen < sizeof(pattern) - 1 ? plen : sizeof(pattern) - 1;
        memcpy(pattern, pb, plen);
        pattern[plen] = '\0';
        filters[nfilters++] = pattern;
    }
    o.filters = filters;
    o.nfilters = nfilters;

    pinio_plan *p = (pinio_plan *)&o; /* must be cleared by the call */
    pinio_diag d = { 0 };
    int rc = pinio_plan_create_from_headers(&p, hs, nfiles, index, index_len,
                                            index ? index_path : NULL, &o, &d);
    if (rc == 0) {
        CHECK(p != NULL);
        walk(p, nfiles, &o, nfilters > 0);
        pinio_plan_free(p);
    } else {
        CHECK(p == NULL && d.code == rc && one_line(&d));
        CHECK(rc == PINIO_EFORMAT || rc == -ENOENT || rc == -EEXIST || rc == -EINVAL ||
              rc == -EXDEV || rc == -EOVERFLOW);
    }
    return 0;
}
