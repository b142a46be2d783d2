/* pinio_plan_create_from_headers(): a plan built from header (and index)
 * bytes that someone else read, as every rank of an MPI job builds it from
 * what rank 0 broadcast. It must lay out exactly the reads a plan built
 * from the paths lays out, deliver the right bytes, and refuse bytes that
 * do not belong to the files opened. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinio/gen.h"
#include "pinio/plan.h"
#include "tests/common/helpers.h"

#define SEED 41

static char dir[64];
static char ck[128];

static void setup(void)
{
    cr_assert_eq(t_tmpdir("/var/tmp", "planhdr", dir, sizeof(dir)), 0);
    snprintf(ck, sizeof(ck), "%s/ck", dir);
    pinio_gen_opts g;
    pinio_gen_opts_default(&g);
    g.size = 3u << 20;
    g.tensors = 9;
    g.shards = 3;
    g.seed = SEED;
    cr_assert_eq(pinio_gen_write(ck, &g, NULL, NULL), 0);
}

static void teardown(void)
{
    cr_assert_eq(t_rm_rf(dir), 0, "removing %s", dir);
}

/* The first `*len` bytes of `path` (all of it when `*len` is 0). */
static void *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0, "open %s", path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    if (*len == 0 || *len > (size_t)st.st_size)
        *len = (size_t)st.st_size;
    void *b = malloc(*len ? *len : 1);
    cr_assert_not_null(b);
    cr_assert_eq(pread(fd, b, *len, 0), (ssize_t)*len);
    close(fd);
    return b;
}

/* What a rank 0 would broadcast: each file's header bytes. */
typedef struct headers {
    pinio_plan_header h[8];
    size_t n;
    void *index;
    size_t index_len;
    const char *index_path;
} headers;

static void headers_of(const pinio_plan *p, headers *hs)
{
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert_leq(pi.files, 8);
    memset(hs, 0, sizeof(*hs));
    for (size_t i = 0; i < pi.files; i++) {
        const pinio_plan_file *f = pinio_plan_file_at(p, i);
        size_t len = 8 + (size_t)pinio_st_header_size(f->header);
        hs->h[i] = (pinio_plan_header){ .path = f->path, .bytes = slurp(f->path, &len),
                                        .len = len };
    }
    hs->n = pi.files;
    if (pi.index_path) {
        hs->index = slurp(pi.index_path, &hs->index_len);
        hs->index_path = pi.index_path;
    }
}

static void headers_free(headers *hs)
{
    for (size_t i = 0; i < hs->n; i++)
        free((void *)hs->h[i].bytes);
    free(hs->index);
}

static pinio_plan *plan_of_paths(const pinio_plan_opts *o)
{
    const char *paths[] = { ck };
    pinio_plan *p = NULL;
    pinio_diag d;
    int rc = pinio_plan_create(&p, paths, 1, o, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    return p;
}

static void assert_same_layout(const pinio_plan *a, const pinio_plan *b)
{
    pinio_plan_info ia, ib;
    pinio_plan_get_info(a, &ia);
    pinio_plan_get_info(b, &ib);
    cr_assert_eq(ia.tensors, ib.tensors);
    cr_assert_eq(ia.reads, ib.reads);
    cr_assert_eq(ia.dest_bytes, ib.dest_bytes);
    cr_assert_eq(ia.unindexed, ib.unindexed);
    /* field by field: a memcmp would compare the padding after `file` */
    for (size_t i = 0; i < ia.reads; i++) {
        const pinio_plan_read *x = pinio_plan_read_at(a, i), *y = pinio_plan_read_at(b, i);
        cr_assert(x->file == y->file && x->offset == y->offset && x->len == y->len &&
                      x->need == y->need && x->dest_offset == y->dest_offset,
                  "read %zu differs", i);
    }
    for (size_t i = 0; i < ia.tensors; i++) {
        const pinio_plan_tensor *x = pinio_plan_tensor_at(a, i), *y = pinio_plan_tensor_at(b, i);
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->dest_offset, y->dest_offset);
        cr_assert_eq(x->file_offset, y->file_offset);
    }
}

static int claim(void *ctx, size_t i, const pinio_plan_read *r, void **mem)
{
    (void)i;
    *mem = (uint8_t *)ctx + r->dest_offset;
    return 0;
}

Test(plan_headers, same_layout_and_bytes_as_a_plan_of_the_paths, .init = setup, .fini = teardown)
{
    pinio_plan_opts o;
    pinio_plan_opts_default(&o);
    o.align = 4096;
    const char *filters[] = { "*.0.*up*", "*.0.*down*" };
    o.filters = filters;
    o.nfilters = 2;
    pinio_plan *ref = plan_of_paths(&o);
    headers hs;
    headers_of(ref, &hs);
    cr_assert_not_null(hs.index, "the generator writes an index for shards");
    pinio_plan *p = NULL;
    pinio_diag d;
    int rc = pinio_plan_create_from_headers(&p, hs.h, hs.n, hs.index, hs.index_len,
                                            hs.index_path, &o, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    assert_same_layout(ref, p);

    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert(pi.tensors > 0 && pi.skipped > 0, "the filters select some, not all");
    uint8_t *mem = aligned_alloc(4096, pi.dest_bytes);
    cr_assert_not_null(mem);
    const pinio_dest_ops ops = { .size = sizeof(ops), .claim = claim };
    rc = pinio_plan_execute(p, &ops, mem, NULL, NULL, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    for (size_t i = 0; i < pi.tensors; i++) {
        const pinio_plan_tensor *t = pinio_plan_tensor_at(p, i);
        cr_assert(pinio_gen_verify(SEED, t->name, 0, mem + t->dest_offset, t->nbytes, NULL),
                  "tensor %s", t->name);
    }
    free(mem);
    pinio_plan_free(p);
    pinio_plan_free(ref);
    headers_free(&hs);
}

Test(plan_headers, refuses_bytes_that_are_not_the_files, .init = setup, .fini = teardown)
{
    pinio_plan *ref = plan_of_paths(NULL);
    headers hs;
    headers_of(ref, &hs);
    pinio_plan *p = (pinio_plan *)1;
    pinio_diag d;

    /* the shards out of the index's order */
    pinio_plan_header swapped[8];
    memcpy(swapped, hs.h, sizeof(swapped));
    swapped[0] = hs.h[1];
    swapped[1] = hs.h[0];
    int rc = pinio_plan_create_from_headers(&p, swapped, hs.n, hs.index, hs.index_len,
                                            hs.index_path, NULL, &d);
    cr_assert_eq(rc, -EINVAL);
    cr_assert_null(p);
    cr_assert(strstr(d.msg, "shards in order"), "%s", d.msg);

    /* a header cut short of its declared length */
    pinio_plan_header cut[8];
    memcpy(cut, hs.h, sizeof(cut));
    cut[2].len = 20;
    rc = pinio_plan_create_from_headers(&p, cut, hs.n, hs.index, hs.index_len, hs.index_path,
                                        NULL, &d);
    cr_assert_lt(rc, 0);
    cr_assert_eq(d.index, 2, "names the file");

    /* shard 0's header over shard 1's file: validated against the file
     * opened, whose size differs, or else its tensors do not match the
     * index's map. Either way refused. */
    pinio_plan_header wrong[8];
    memcpy(wrong, hs.h, sizeof(wrong));
    wrong[1].bytes = hs.h[0].bytes;
    wrong[1].len = hs.h[0].len;
    rc = pinio_plan_create_from_headers(&p, wrong, hs.n, hs.index, hs.index_len, hs.index_path,
                                        NULL, &d);
    cr_assert_lt(rc, 0, "a foreign header was accepted");

    /* no files, a header without bytes */
    cr_assert_eq(pinio_plan_create_from_headers(&p, hs.h, 0, NULL, 0, NULL, NULL, &d), -EINVAL);
    pinio_plan_header none = { .path = hs.h[0].path };
    cr_assert_eq(pinio_plan_create_from_headers(&p, &none, 1, NULL, 0, NULL, NULL, &d), -EINVAL);
    pinio_plan_free(ref);
    headers_free(&hs);
}

Test(plan_headers, one_file_without_an_index, .init = setup, .fini = teardown)
{
    pinio_plan *ref = plan_of_paths(NULL);
    headers hs;
    headers_of(ref, &hs);
    pinio_plan *p = NULL;
    pinio_diag d;
    int rc = pinio_plan_create_from_headers(&p, &hs.h[1], 1, NULL, 0, NULL, NULL, &d);
    cr_assert_eq(rc, 0, "%s", d.msg);
    pinio_plan_info pi;
    pinio_plan_get_info(p, &pi);
    cr_assert_eq(pi.files, 1);
    cr_assert_eq(pi.tensors, pinio_st_count(pinio_plan_file_at(ref, 1)->header));
    cr_assert_null(pi.index_path);
    pinio_plan_free(p);
    pinio_plan_free(ref);
    headers_free(&hs);
}
