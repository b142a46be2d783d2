/*
 * What every rank of an MPI load proves about the bytes it reads.
 *
 * Identity: a rank reads its stripe from its own path, which may be a
 * node-local copy; nothing but the bytes says it is rank 0's file. Each
 * rank therefore names each of its files by size, the SHA-256 of its
 * header bytes and the SHA-256 of a few data blocks spread over it, all
 * read through the descriptor its data will come from; the caller compares
 * them with rank 0's before any data byte moves. The blocks catch a stale
 * copy that kept its header (a fine-tune of the same shapes): every byte
 * of it differs. A copy that differs only between the blocks is caught by
 * --verify with --sha256, not by the identity.
 *
 * SHA-256 of a file over the bytes as read: SHA-256 is sequential, and no
 * rank holds a whole file before an exchange (shard never exchanges), so
 * the file is hashed in file order by the ranks that read it, each its
 * own tensor bytes where they landed, the hash state (112 bytes) handed to
 * the next reader in file order. Which rank hashes a tensor byte: the one
 * that read it and holds it (a shard's boundary read is read by both
 * neighbours, each holding its own tensors of it; overlapping shard
 * filters: the lowest rank, and each other rank holding them compares
 * its copy with its file, read again). Bytes no tensor of a reader covers (the
 * header, unselected tensors, the gaps) are hashed by the rank then
 * holding the state, read again through its own validated descriptor
 * (whose identity was agreed). So a byte flipped on its way into the
 * memory that holds a tensor changes the digest. The chain is sequential per
 * file (the cost of one core hashing the file, spread over its readers);
 * different files proceed in parallel, because a rank only waits for the
 * state of the segment it hashes next.
 *
 * Why it cannot deadlock: every rank walks the same segment list in the
 * same order, and a rank blocks only to receive the state of segment k
 * from the owner of segment k-1, who sends it right after hashing k-1; by
 * induction on k every receive is matched. A rank whose own hashing failed
 * passes the state on marked failed, so the chain always completes.
 */
#define OPENSSL_API_COMPAT 0x10101000L /* SHA256_CTX: the state is handed between ranks */
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_verify.h"

#define SAMPLE_BLOCKS 16
#define SAMPLE_LEN 4096
#define CHUNK ((size_t)1 << 20)
#define TAG_STATE 28

void pinio__mpi_sha256(const void *p, size_t len, uint8_t out[PINIO_MPI_SHA_LEN])
{
    unsigned int n = 0;
    if (EVP_Digest(p, len, out, &n, EVP_sha256(), NULL) != 1)
        memset(out, 0, PINIO_MPI_SHA_LEN);
}

void pinio__mpi_hex(const uint8_t sha[PINIO_MPI_SHA_LEN], char out[2 * PINIO_MPI_SHA_LEN + 1])
{
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < PINIO_MPI_SHA_LEN; i++) {
        out[2 * i] = hx[sha[i] >> 4];
        out[2 * i + 1] = hx[sha[i] & 15];
    }
    out[2 * PINIO_MPI_SHA_LEN] = '\0';
}

/* Up to a chunk of [off, end) of `f` through its validated descriptor:
 * the bytes read (> 0), or the code, `d` saying what the read was `for`. */
static ssize_t read_again(const pinio_plan_file *f, uint8_t *buf, uint64_t off, uint64_t end,
                          const char *what, pinio_diag *d)
{
    size_t want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
    ssize_t r;
    do
        r = pread(f->fd, buf, want, (off_t)off);
    while (r < 0 && errno == EINTR);
    if (r > 0)
        return r;
    int rc = r < 0 ? -errno : PINIO_ECHANGED;
    pinio_diag_set_at(d, rc, f->path, off, "reading again %s: %s", what,
                      r < 0 ? pinio_strerror(rc) : "the file is shorter");
    return rc;
}

/* [off, end) of `f` into `ctx`. */
static int hash_fd(const pinio_plan_file *f, SHA256_CTX *ctx, uint64_t off, uint64_t end,
                   uint8_t *buf, pinio_diag *d)
{
    while (off < end) {
        ssize_t r = read_again(f, buf, off, end, "for its sha256", d);
        if (r < 0)
            return (int)r;
        SHA256_Update(ctx, buf, (size_t)r);
        off += (uint64_t)r;
    }
    return 0;
}

int pinio__mpi_ident_file(const pinio_plan *plan, size_t i, pinio__mpi_ident *out, pinio_diag *d)
{
    const pinio_plan_file *f = pinio_plan_file_at(plan, i);
    memset(out, 0, sizeof(*out));
    out->size = f->size;
    uint64_t head = 8 + pinio_st_header_size(f->header);
    uint8_t *buf = malloc(CHUNK);
    if (!buf)
        return -ENOMEM;
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    int rc = hash_fd(f, &ctx, 0, head < f->size ? head : f->size, buf, d);
    SHA256_Final(out->head, &ctx);
    /* Blocks at evenly spaced offsets of the data section, the last one
     * ending at the end of the file (a torn copy loses its tail first). */
    SHA256_Init(&ctx);
    uint64_t data = head < f->size ? f->size - head : 0;
    for (int k = 0; rc == 0 && data && k < SAMPLE_BLOCKS; k++) {
        uint64_t len = data < SAMPLE_LEN ? data : SAMPLE_LEN;
        uint64_t off = head + (data - len) / (SAMPLE_BLOCKS - 1) * (uint64_t)k;
        if (k == SAMPLE_BLOCKS - 1)
            off = f->size - len;
        rc = hash_fd(f, &ctx, off, off + len, buf, d);
    }
    SHA256_Final(out->sample, &ctx);
    free(buf);
    if (rc < 0)
        pinio_diag_set_index(d, i);
    return rc;
}

/* A range of tensor bytes some rank read and holds, and then a segment of
 * the hash chain. */
typedef struct range {
    uint64_t file, off, end;
    int rank;
    size_t local; /* its index among the owner's own ranges */
} range;

typedef struct seg {
    uint32_t file;
    int owner;
    uint64_t off, end;
    const range *from; /* the range it landed in; NULL: read again by its owner */
} seg;

/* This rank's own ranges: file bytes, and where they landed. */
typedef struct own {
    uint64_t file, off, end;
    const uint8_t *mem;
} own;

static int by_position(const void *a, const void *b)
{
    const range *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->rank - y->rank;
}

/* Whether every rank has its memory (`ok` here), the same branch for all:
 * -ENOMEM on a rank without, -ECANCELED on the others (whose caller's
 * agreement then carries the failing rank's -ENOMEM). */
static int all_ok(MPI_Comm comm, int ok)
{
    int every = 0;
    if (MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_LAND, comm) != MPI_SUCCESS)
        return -EPROTO;
    return every ? 0 : ok ? -ECANCELED : -ENOMEM;
}

/* Held tensors [t0, t1) cut by this rank's reads [first, first + nreads),
 * each read up to its `need`: both lists are in destination order, and
 * within a read a file byte and its destination byte are a fixed distance
 * apart, so one merge over the two gives the tensor bytes this rank read. */
static size_t own_ranges(const pinio_plan *plan, const uint8_t *base, size_t first, size_t nreads,
                         size_t t0, size_t t1, own *out)
{
    size_t k = 0, r = first, t = t0;
    while (r < first + nreads && t < t1) {
        const pinio_plan_read *rd = pinio_plan_read_at(plan, r);
        const pinio_plan_tensor *tn = pinio_plan_tensor_at(plan, t);
        uint64_t rlo = rd->dest_offset, rhi = rd->dest_offset + rd->need;
        uint64_t tlo = tn->dest_offset, thi = tn->dest_offset + tn->nbytes;
        uint64_t lo = rlo > tlo ? rlo : tlo, hi = rhi < thi ? rhi : thi;
        if (lo < hi && rd->file == tn->file)
            out[k++] = (own){ tn->file, tn->file_offset + (lo - tlo), tn->file_offset + (hi - tlo),
                              base + lo };
        if (rhi <= thi)
            r++;
        else
            t++;
    }
    return k;
}

/* Every rank's ranges. Each step that allocates is agreed before the
 * collective that needs it, so a rank short of memory never leaves the
 * others in a collective. */
static int gather_ranges(MPI_Comm comm, int n, const own *mine_, size_t nmine, range **out,
                         size_t *nout)
{
    uint64_t *mine = malloc((nmine ? nmine : 1) * 3 * sizeof(*mine));
    int *counts = calloc(2 * (size_t)n, sizeof(int));
    uint64_t *all = NULL;
    range *rg = NULL;
    int rc = all_ok(comm, mine && counts);
    int my = (int)(3 * nmine);
    for (size_t i = 0; rc == 0 && i < nmine; i++) {
        mine[3 * i] = mine_[i].file;
        mine[3 * i + 1] = mine_[i].off;
        mine[3 * i + 2] = mine_[i].end;
    }
    if (rc == 0 && MPI_Allgather(&my, 1, MPI_INT, counts, 1, MPI_INT, comm) != MPI_SUCCESS)
        rc = -EPROTO;
    size_t total = 0;
    for (int r = 0; rc == 0 && r < n; r++) {
        counts[n + r] = (int)total;
        total += (size_t)counts[r];
    }
    if (rc == 0) {
        all = malloc((total ? total : 1) * sizeof(*all));
        rg = malloc((total / 3 + 1) * sizeof(*rg));
        rc = all_ok(comm, all && rg);
    }
    if (rc == 0 && MPI_Allgatherv(mine, my, MPI_UINT64_T, all, counts, counts + n, MPI_UINT64_T,
                                  comm) != MPI_SUCCESS)
        rc = -EPROTO;
    for (int r = 0, k = 0; rc == 0 && r < n; r++)
        for (int i = 0; i < counts[r] / 3; i++, k++) {
            const uint64_t *t = all + counts[n + r] + 3 * i;
            rg[k] = (range){ t[0], t[1], t[2], r, (size_t)i };
        }
    free(mine);
    free(counts);
    free(all);
    if (rc < 0) {
        free(rg);
        return rc;
    }
    qsort(rg, total / 3, sizeof(*rg), by_position);
    *out = rg;
    *nout = total / 3;
    return 0;
}

/* The chain: each file's bytes in order, a tensor byte owned by the
 * lowest rank whose range has it; the bytes of no range by the rank
 * holding the state then (at a file's start: its first owner; a file with
 * no range: file % n). */
static seg *segments(const pinio_plan *plan, int n, const range *rg, size_t nrg, size_t *nseg,
                     seg *dups, size_t *ndups)
{
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    seg *s = malloc((2 * nrg + pi.files) * sizeof(*s));
    if (!s)
        return NULL;
    size_t k = 0, j = 0;
    *ndups = 0;
    for (uint32_t f = 0; f < pi.files; f++) {
        uint64_t size = pinio_plan_file_at(plan, f)->size, pos = 0;
        int holder = -1;
        for (; j < nrg && rg[j].file == f; j++) {
            /* bytes another rank's range has already given the chain: this
             * rank's copy of them is checked against its file */
            if (rg[j].off < pos)
                dups[(*ndups)++] = (seg){ f, rg[j].rank, rg[j].off,
                                          rg[j].end < pos ? rg[j].end : pos, &rg[j] };
            if (rg[j].end <= pos)
                continue;
            uint64_t from = rg[j].off > pos ? rg[j].off : pos;
            if (from > pos)
                s[k++] = (seg){ f, holder >= 0 ? holder : rg[j].rank, pos, from, NULL };
            s[k++] = (seg){ f, rg[j].rank, from, rg[j].end, &rg[j] };
            holder = rg[j].rank;
            pos = rg[j].end;
        }
        if (pos < size || holder < 0)
            s[k++] = (seg){ f, holder >= 0 ? holder : (int)(f % (uint32_t)n), pos, size, NULL };
    }
    *nseg = k;
    return s;
}

/* A copy this rank holds of bytes the chain took from another rank's:
 * compared with this rank's file, read again into `buf`. */
static int check_dup(const pinio_plan *plan, const seg *g, const own *o, uint8_t *buf,
                     pinio_diag *d)
{
    const pinio_plan_file *f = pinio_plan_file_at(plan, g->file);
    for (uint64_t off = g->off; off < g->end;) {
        ssize_t r = read_again(f, buf, off, g->end, "to check this rank's copy", d);
        if (r < 0)
            return (int)r;
        const uint8_t *mem = o->mem + (off - o->off);
        if (memcmp(buf, mem, (size_t)r) != 0) {
            size_t i = 0;
            while (buf[i] == mem[i])
                i++;
            pinio_diag_set_at(d, PINIO_EFORMAT, f->path, off + i,
                              "byte %llu as this rank read it differs from the file (a read "
                              "went wrong; another rank's copy of it was hashed)",
                              (unsigned long long)(off + i));
            return PINIO_EFORMAT;
        }
        off += (uint64_t)r;
    }
    return 0;
}

/* The state handed along a chain: the digest so far, or the failure. */
typedef struct handoff {
    int32_t rc, pad;
    SHA256_CTX ctx;
} handoff;

int pinio__mpi_hash_files(MPI_Comm comm, int rank, int n, const pinio_plan *plan,
                          const uint8_t *base, size_t first, size_t nreads, size_t t0, size_t t1,
                          uint8_t *digest, uint64_t *landed, uint64_t *reread, pinio_diag *d)
{
    *landed = *reread = 0;
    pinio_plan_info pi;
    pinio_plan_get_info(plan, &pi);
    memset(digest, 0, pi.files * PINIO_MPI_SHA_LEN);
    range *rg = NULL;
    size_t nrg = 0, nseg = 0, nown = 0;
    /* at most one range per tensor and one more per read */
    own *mine = malloc((t1 - t0 + nreads + 1) * sizeof(*mine));
    if (mine)
        nown = own_ranges(plan, base, first, nreads, t0, t1, mine);
    int rc = all_ok(comm, mine != NULL);
    if (rc == 0)
        rc = gather_ranges(comm, n, mine, nown, &rg, &nrg);
    /* The ranges are the same on every rank, so is the list (or its
     * allocation failing is this rank's alone: it is agreed on first). */
    seg *dups = rc == 0 ? malloc((nrg + 1) * sizeof(*dups)) : NULL;
    size_t ndups = 0;
    seg *s = rc == 0 && dups ? segments(plan, n, rg, nrg, &nseg, dups, &ndups) : NULL;
    uint8_t *buf = rc == 0 ? malloc(CHUNK) : NULL;
    if (rc == 0)
        rc = all_ok(comm, s && buf);
    if (rc < 0) {
        if (rc == -ENOMEM)
            pinio_diag_set(d, rc, "no memory for the sha256 chain");
        else if (rc == -EPROTO)
            pinio_diag_set(d, rc, "gathering the ranks' reads for sha256: an MPI call failed");
        free(rg);
        free(s);
        free(dups);
        free(buf);
        free(mine);
        /* -ECANCELED: another rank failed, and reports it in the caller's
         * agreement; 0 here keeps this rank out of its lowest code. */
        return rc == -ECANCELED ? 0 : rc;
    }
    handoff h;
    memset(&h, 0, sizeof(h));
    for (size_t k = 0; k < nseg; k++) {
        const seg *g = &s[k];
        if (g->owner != rank)
            continue;
        const pinio_plan_file *f = pinio_plan_file_at(plan, g->file);
        if (k == 0 || s[k - 1].file != g->file) {
            h.rc = 0;
            SHA256_Init(&h.ctx);
        } else if (s[k - 1].owner != rank) {
            MPI_Status st;
            int e = MPI_Recv(&h, (int)sizeof(h), MPI_BYTE, s[k - 1].owner, TAG_STATE, comm, &st);
            if (e != MPI_SUCCESS && rc == 0) {
                pinio_diag_set(d, rc = -EPROTO, "MPI_Recv (sha256 state) failed");
                h.rc = rc;
            }
        }
        if (h.rc == 0 && g->from) {
            const own *o = &mine[g->from->local];
            SHA256_Update(&h.ctx, o->mem + (g->off - o->off), (size_t)(g->end - g->off));
            *landed += g->end - g->off;
        } else if (h.rc == 0) {
            h.rc = hash_fd(f, &h.ctx, g->off, g->end, buf, d);
            *reread += g->end - g->off;
            if (h.rc < 0 && rc == 0)
                rc = h.rc;
        }
        if (k + 1 == nseg || s[k + 1].file != g->file) {
            if (h.rc == 0)
                SHA256_Final(digest + (size_t)g->file * PINIO_MPI_SHA_LEN, &h.ctx);
        } else if (s[k + 1].owner != rank &&
                   MPI_Send(&h, (int)sizeof(h), MPI_BYTE, s[k + 1].owner, TAG_STATE, comm) !=
                       MPI_SUCCESS &&
                   rc == 0) {
            pinio_diag_set(d, rc = -EPROTO, "MPI_Send (sha256 state) failed");
        }
    }
    for (size_t k = 0; rc == 0 && k < ndups; k++)
        if (dups[k].owner == rank)
            rc = check_dup(plan, &dups[k], &mine[dups[k].from->local], buf, d);
    free(rg);
    free(s);
    free(dups);
    free(buf);
    free(mine);
    /* Each digest was finished by one rank, zeros elsewhere: OR is a gather. */
    if (MPI_Allreduce(MPI_IN_PLACE, digest, (int)(pi.files * PINIO_MPI_SHA_LEN), MPI_BYTE, MPI_BOR,
                      comm) != MPI_SUCCESS &&
        rc == 0)
        pinio_diag_set(d, rc = -EPROTO, "MPI_Allreduce (sha256 digests) failed");
    return rc;
}
