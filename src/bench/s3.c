/* pinio_bench on an object ("s3://BUCKET/KEY"; contract in
 * include/pinio/bench.h): the jobs' requests are HTTP range GETs through the
 * loader's S3 client (src/s3/client.h), in its stream form: each job keeps
 * `qd` of them in flight on its own client (its own connections) and
 * times each one from its issue to the last byte of its body.
 *
 * Why not fio's http engine: it reads whole objects (no Range), so its
 * "bs" is the object and its latency the whole transfer's; and its SigV4
 * signer breaks on common stores (fio issues #1227, #1944). Here each
 * request is a range of the job's order (the same next_io() as a file's:
 * sequential, permutation, distributions, bssplit), signed by pinio's SigV4,
 * checked (206, Content-Range, length) and pinned to one version by If-Match
 * (or, from a store that sends no ETag, by its Last-Modified), so that the
 * figures are those of the bytes the run claims to have moved.
 *
 * Everything after the request is the file engine's: the slots, the
 * histograms (lat, slat: issue to the request handed to curl, signing
 * included; clat: from there to the body's last byte), the ramp, the
 * intervals, the summary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/bench/job_internal.h"
#include "src/s3/sign.h"

static int s3_setup(job *j);
static int s3_pass(job *j, uint64_t limit, uint64_t deadline);
static void s3_teardown(job *j);

void pinio__bench_s3_obj_free(pinio__bench_obj *obj)
{
    free(obj->bucket);
    free(obj->key);
    memset(obj, 0, sizeof *obj);
}

/* A HEAD's 404 has no body to say whether the bucket or the key is
 * missing: a one-key listing of the bucket tells them apart. */
static int which_missing(pinio__s3 *c, const char *url, const pinio__bench_obj *obj,
                         pinio_diag *diag)
{
    pinio__s3_param q[] = {{"list-type", "2"}, {"max-keys", "1"}};
    char *body = NULL;
    size_t len = 0;
    pinio_diag d = {0};
    int rc = pinio__s3_get_listing(c, obj->bucket, q, 2, &body, &len, &d);
    free(body);
    if (rc == -ENOENT)
        pinio_diag_set_at(diag, -ENOENT, url, PINIO_DIAG_NO_OFFSET,
                          "no such bucket '%s' (404 NoSuchBucket)", obj->bucket);
    else if (rc == 0)
        pinio_diag_set_at(diag, -ENOENT, url, PINIO_DIAG_NO_OFFSET,
                          "no such object: bucket '%s' has no key '%s' (404)", obj->bucket,
                          obj->key);
    return -ENOENT; /* otherwise the HEAD's own message stands */
}

int pinio__bench_s3_prepare(const pinio_bench_opts *o, pinio__bench_obj *obj, uint64_t *size,
                            pinio_bench_file *file, pinio_diag *diag)
{
    obj->setup = s3_setup;
    obj->pass = s3_pass;
    obj->teardown = s3_teardown;
    int rc = pinio__s3_url_split(o->path, &obj->bucket, &obj->key, diag);
    if (rc)
        return rc;
    size_t kl = strlen(obj->key);
    if (!kl || obj->key[kl - 1] == '/')
        return pinio_diag_set(diag, -EINVAL, "bench: %s: names %s, not an object: "
                              "s3://BUCKET/KEY", o->path, kl ? "a prefix" : "a bucket"),
               -EINVAL;
    pinio__s3 *c = NULL;
    if ((rc = pinio__s3_open(&c, NULL, diag)))
        return rc;
    snprintf(obj->endpoint, sizeof obj->endpoint, "%s", pinio__s3_endpoint(c));
    pinio__s3_meta m;
    rc = pinio__s3_stat(c, obj->bucket, obj->key, &m, diag);
    obj->size = m.size;
    snprintf(obj->etag, sizeof obj->etag, "%s", m.etag);
    snprintf(obj->last_modified, sizeof obj->last_modified, "%s", m.last_modified);
    if (rc == -ENOENT)
        rc = which_missing(c, o->path, obj, diag);
    pinio__s3_close(c);
    if (rc)
        return rc;
    /* The region as a file's: what the object holds from --offset, whole
     * blocks per job; bench never makes an object bigger. */
    uint64_t fsize = obj->size;
    if (!*size) {
        uint64_t avail = fsize > o->offset ? fsize - o->offset : 0;
        *size = avail - avail % (unit_bs(o) * o->jobs);
        if (!*size)
            return pinio_diag_set(diag, -EINVAL,
                                  "bench: %s: %llu bytes is less than one block per job",
                                  o->path, (unsigned long long)fsize),
                   -EINVAL;
    } else if (o->offset + *size > fsize) {
        return pinio_diag_set(diag, -EINVAL, "bench: %s has %llu bytes, --offset + --size ask "
                              "for %llu", o->path, (unsigned long long)fsize,
                              (unsigned long long)(o->offset + *size)),
               -EINVAL;
    }
    file->size = fsize;
    file->used = *size;
    file->created = false;
    return 0;
}

/* The version the run's HEAD saw, as the client's checks take it. */
static pinio__s3_meta meta_of(const pinio__bench_obj *obj)
{
    pinio__s3_meta m = {.size = obj->size};
    snprintf(m.etag, sizeof m.etag, "%s", obj->etag);
    snprintf(m.last_modified, sizeof m.last_modified, "%s", obj->last_modified);
    return m;
}

const char *pinio__bench_s3_pinned_by(const pinio__bench_obj *obj)
{
    pinio__s3_meta m = meta_of(obj);
    return pinio__s3_pinned_by(&m);
}

/* The load's rule (pinio__obj_execute): an answer that carried no
 * validator to compare, or an object that only its size pins, confirmed
 * nothing about the bytes moved; the object is asked once more after the
 * run, so that one replaced mid-run fails it as changed instead of being
 * measured as if it were one version. */
int pinio__bench_s3_recheck(const pinio_bench_opts *o, const pinio__bench_obj *obj,
                            uint64_t unconfirmed, pinio_diag *diag)
{
    pinio__s3_meta was = meta_of(obj), now;
    if (!unconfirmed && strcmp(pinio__s3_pinned_by(&was), "size") != 0)
        return 0;
    pinio__s3 *c = NULL;
    int rc = pinio__s3_open(&c, NULL, diag);
    if (!rc)
        rc = pinio__s3_stat(c, obj->bucket, obj->key, &now, diag);
    if (!rc)
        rc = pinio__s3_same(o->path, &was, &now, diag);
    pinio__s3_close(c);
    return rc;
}

static int s3_setup(job *j)
{
    pinio__s3_opts so = {.concurrency = j->o->qd};
    j->s3done = calloc(j->o->qd, sizeof *j->s3done);
    if (!j->s3done) {
        j->err = -ENOMEM;
        pinio_diag_set(&j->diag, -ENOMEM, "bench: %s: no memory for %u requests", j->o->path,
                       j->o->qd);
        return j->err;
    }
    int rc = pinio__s3_open(&j->s3, &so, &j->diag);
    if (rc)
        j->err = rc;
    return rc;
}

static void s3_teardown(job *j)
{
    pinio__s3_close(j->s3);
    j->s3 = NULL;
    free(j->s3done);
    j->s3done = NULL;
}

/* Issues slot `s` (its request already drawn by next_io()) at `t`. */
static int issue(job *j, unsigned s, uint64_t t)
{
    slot *sl = &j->slots[s];
    const pinio__bench_obj *ob = j->obj;
    pinio__s3_range r = {.bucket = ob->bucket, .key = ob->key, .etag = ob->etag,
                         .last_modified = ob->last_modified, .size = ob->size, .off = sl->off, .len = sl->len,
                         .dst = j->area + (size_t)s * j->maxbs, .tag = s};
    sl->t0 = t;
    int rc = pinio__s3_submit(j->s3, &r, &j->diag);
    sl->ts = now_ns();
    j->submits++;
    return rc;
}

/* The pass over the object: as job_pass() for a file, with the client's
 * stream for the ring. A failure (the client's diag names the object and
 * the range's offset) ends it and drops what is in flight. */
static int s3_pass(job *j, uint64_t limit, uint64_t deadline)
{
    const pinio_bench_opts *o = j->o;
    unsigned inflight = 0;
    bool stop = false;
    int rc = 0;
    uint64_t t = now_ns();
    j->issued = j->issued_bytes = j->seq_pos = 0;
    for (unsigned s = 0; s < o->qd && (limit || t < deadline) && !rc; s++) {
        if (!pinio__bench_next_io(j, &j->slots[s], limit))
            break;
        if (!(rc = issue(j, s, t)))
            inflight++;
    }
    while (inflight && !rc) {
        size_t n = 0;
        /* Bounded, so that the deadline, a stop and the intervals are seen
         * while a request waits out a retry's backoff. */
        rc = pinio__s3_poll(j->s3, 0.1, j->s3done, o->qd, &n, &j->diag);
        if (rc)
            break;
        t = now_ns();
        stop |= pinio__bench_wake(j, t, deadline, true);
        bool rec = !j->ramp_end;
        for (size_t k = 0; k < n; k++) {
            unsigned s = (unsigned)j->s3done[k].tag;
            slot *sl = &j->slots[s];
            if (rec)
                pinio__bench_record(j, sl, t);
            if (!rc && !stop && (limit || t < deadline) && pinio__bench_next_io(j, sl, limit))
                rc = issue(j, s, t);
            else
                inflight--;
        }
        if (rec) {
            atomic_store_explicit(&j->live_bytes, j->bytes[0], memory_order_relaxed);
            atomic_store_explicit(&j->live_ios, j->ios[0], memory_order_relaxed);
        }
        /* A stop asked by the caller (Ctrl-C) does not wait for the
         * requests in flight, as the deadline does: one of them may be
         * spending its retry budget (minutes) in backoff. */
        if (stop && inflight && atomic_load_explicit(&j->gate->cancel, memory_order_relaxed)) {
            pinio__s3_drop(j->s3);
            inflight = 0;
        }
    }
    if (rc) {
        pinio__s3_drop(j->s3);
        if (!j->err)
            j->err = rc;
    }
    pinio__s3_get_stats(j->s3, &j->s3st);
    return j->err;
}
