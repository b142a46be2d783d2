/* pinio_bench's verify blocks: the pattern, the block header and its sums,
 * and the report of a block that is not what was written. */
#include <string.h>

#include "src/bench/job_internal.h"


static inline uint64_t mix64(uint64_t x)
{
    /* splitmix64's finalizer: every input bit affects every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

void pinio__bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t seed)
{
    uint64_t *w = buf;
    uint64_t k = seed * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len / 8; i++)
        w[i] = mix64((off + 8 * i) ^ k);
}

long pinio__bench_pattern_check(const void *buf, size_t len, uint64_t off, uint64_t seed)
{
    const uint64_t *w = buf;
    uint64_t k = seed * 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len / 8; i++)
        if (w[i] != mix64((off + 8 * i) ^ k))
            return (long)(8 * i);
    return -1;
}

/* The block header: the pattern's first bytes replaced by what names the
 * block, so that a block found at the wrong place says where it belongs
 * instead of only "differs". One magic per mode ("PINIIVB1", "PINIIVC1",
 * "PINIIVS1" little-endian): a verify-only run in the wrong mode says so
 * instead of reporting every block corrupt. */
static const uint64_t block_magic[3] = {
    0x31425649494e4950ull, 0x31435649494e4950ull, 0x31535649494e4950ull,
};

size_t pinio__bench_block_hdr(int mode)
{
    return mode == PINIO_BENCH_VERIFY_SHA256   ? 64
           : mode == PINIO_BENCH_VERIFY_CRC32C ? 40
                                               : PINIO__BLOCK_HDR;
}

/* The payload's sum in mode `mode` into sum[32] (zero-padded); false when
 * SHA-256 could not run. */
static bool payload_sum(const uint8_t *p, size_t n, int mode, uint8_t sum[32])
{
    memset(sum, 0, 32);
    if (mode == PINIO_BENCH_VERIFY_CRC32C) {
        uint32_t c = pinio__crc32c(0, p, n);
        memcpy(sum, &c, sizeof c);
        return true;
    }
    return pinio__sha256(p, n, sum) == 0;
}

void pinio__bench_block_fill(void *buf, size_t len, uint64_t off, uint64_t seed, uint64_t gen,
                             int mode)
{
    pinio__bench_pattern_fill(buf, len, off, seed);
    size_t h = pinio__bench_block_hdr(mode);
    if (len < h)
        return;
    uint64_t *w = buf;
    w[0] = block_magic[mode];
    w[1] = off;
    w[2] = seed;
    w[3] = gen;
    if (mode != PINIO_BENCH_VERIFY_PATTERN) {
        uint8_t sum[32];
        /* A failed SHA-256 (no memory) leaves a zero digest: the read-back
         * then reports the block, never a silent pass. */
        payload_sum((uint8_t *)buf + h, len - h, mode, sum);
        memcpy((uint8_t *)buf + 32, sum, h - 32);
    }
}

int pinio__bench_block_check(const void *buf, size_t len, uint64_t off, uint64_t seed, int mode,
                             pinio__block_found *found)
{
    const uint64_t *w = buf;
    size_t h = pinio__bench_block_hdr(mode);
    memset(found, 0, sizeof *found);
    found->bad_at = -1;
    found->mode = -1;
    if (len >= PINIO__BLOCK_HDR) {
        for (int m = 0; m < 3; m++)
            if (w[0] == block_magic[m])
                found->mode = m;
        if (found->mode < 0) {
            found->bad_at = 0;
            return -1;
        }
        found->has_header = true;
        found->off = w[1];
        found->seed = w[2];
        found->gen = w[3];
        if (w[1] != off || w[2] != seed) {
            found->bad_at = 8;
            return -1;
        }
        if (found->mode != mode) {
            found->bad_at = 0;
            return -1;
        }
    }
    if (len < h)
        h = 0; /* pattern only */
    else if (mode != PINIO_BENCH_VERIFY_PATTERN) {
        uint8_t sum[32];
        bool ok = payload_sum((const uint8_t *)buf + h, len - h, mode, sum) &&
                  !memcmp(sum, (const uint8_t *)buf + 32, h - 32);
        if (ok)
            return 0;
        found->sum_bad = true;
    }
    long bad = pinio__bench_pattern_check((const uint8_t *)buf + h, len - h, off + h, seed);
    if (bad < 0 && !found->sum_bad)
        return 0;
    /* sum_bad with an intact payload: the stored sum itself was hit. */
    found->bad_at = bad < 0 ? 32 : (long)h + bad;
    return -1;
}

/* Reports a verify mismatch of the block in slot `s`, naming what is there
 * instead when the block holds another block's header. */
void pinio__bench_verify_fail(job *j, const slot *sl, const pinio__block_found *f,
                              bool gen_known, uint64_t gen)
{
    const pinio_bench_opts *o = j->o;
    const char *path = j->paths[sl->file]; /* the file the block was read from */
    unsigned long long at = (unsigned long long)sl->off;
    j->err = -EBADMSG;
    uint64_t tag_mask = (1ull << FILE_TAG_SHIFT) - 1, from = f->off >> FILE_TAG_SHIFT;
    if (f->has_header && f->off != tagged_off(sl) && from != sl->file && from < j->nfiles)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu holds the block written for "
                       "%s at offset %llu (misplaced from another file)", path, at,
                       j->paths[from], (unsigned long long)(f->off & tag_mask));
    else if (f->has_header && f->off != tagged_off(sl))
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu holds the block written for "
                       "offset %llu (misplaced)", path, at, (unsigned long long)(f->off & tag_mask));
    else if (f->has_header && f->seed != o->seed)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu was written with seed %llu, "
                       "not %llu", path, at, (unsigned long long)f->seed,
                       (unsigned long long)o->seed);
    else if (f->has_header && f->mode != (int)o->verify_mode)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu was written with --verify=%s, "
                       "not %s", path, at,
                       pinio_bench_verify_mode_name((pinio_bench_verify_mode)f->mode),
                       pinio_bench_verify_mode_name(o->verify_mode));
    else if (f->sum_bad)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu fails its %s checksum "
                       "(first differing byte at offset %llu)", path, at,
                       pinio_bench_verify_mode_name(o->verify_mode),
                       (unsigned long long)(sl->off + (uint64_t)f->bad_at));
    else if (f->bad_at < 0 && gen_known)
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu is stale: generation %llu, "
                       "the last write was generation %llu", path, at,
                       (unsigned long long)f->gen, (unsigned long long)gen);
    else
        pinio_diag_set(&j->diag, -EBADMSG,
                       "bench: %s: verify: the block at offset %llu differs from what was "
                       "written (first at byte %llu)%s", path, at,
                       (unsigned long long)(sl->off + (uint64_t)(f->bad_at > 0 ? f->bad_at : 0)),
                       f->has_header ? "" : "; it has no bench block header");
}
