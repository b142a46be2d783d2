/* The index parser (src/st/index.c): shard names judged per path component,
 * a FIFO named like an index refused without blocking, and parse time that
 * grows like n log n, not n^2 (a ratio of two sizes, so that a shared,
 * loaded machine does not make it flaky). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinio/safetensors.h"
#include "tests/common/helpers.h"

static int parse(const char *json, pinio_st_index **ix, pinio_diag *d)
{
    return pinio_st_index_parse(ix, json, strlen(json), "dir/model.safetensors.index.json", d);
}

static void shard_ok(const char *shard, const char *want)
{
    char json[256];
    snprintf(json, sizeof json, "{\"weight_map\":{\"t\":\"%s\"}}", shard);
    pinio_st_index *ix = NULL;
    pinio_diag d = {0};
    cr_assert_eq(parse(json, &ix, &d), 0, "%s refused: %s", shard, d.msg);
    cr_assert_str_eq(pinio_st_index_shard(ix, 0), want);
    pinio_st_index_free(ix);
}

static void shard_bad(const char *shard, const char *why)
{
    char json[256];
    snprintf(json, sizeof json, "{\"weight_map\":{\"t\":\"%s\"}}", shard);
    pinio_st_index *ix = NULL;
    pinio_diag d = {0};
    cr_assert_eq(parse(json, &ix, &d), PINIO_EFORMAT, "%s accepted", shard);
    cr_assert_null(ix);
    cr_assert(strstr(d.msg, why), "%s: %s", shard, d.msg);
    cr_assert(strstr(d.msg, "dir/model.safetensors.index.json"), "%s", d.msg);
}

Test(index, shard_names_are_judged_by_component)
{
    shard_ok("model..v2.safetensors", "dir/model..v2.safetensors");
    shard_ok("..a", "dir/..a");
    shard_ok("a../b...", "dir/a../b...");
    shard_ok("sub/model.safetensors", "dir/sub/model.safetensors");
    shard_ok("./a", "dir/a");
    shard_ok("a/./b/.", "dir/a/b");
    shard_bad("..", "'..' component");
    shard_bad("../a", "'..' component");
    shard_bad("a/../../b", "'..' component");
    shard_bad("a/..", "'..' component");
    shard_bad("/etc/passwd", "absolute path");
    shard_bad("a//b", "empty path component");
    shard_bad("a/", "empty path component");
    shard_bad("", "is empty");
    shard_bad("a\\u0000b", "NUL");
}

/* One file spelled "a" and "./a" is one shard, opened once. */
Test(index, one_shard_spelled_two_ways_is_one)
{
    pinio_st_index *ix = NULL;
    pinio_diag d = {0};
    cr_assert_eq(parse("{\"weight_map\":{\"x\":\"a\",\"y\":\"./a\",\"z\":\"b\"}}", &ix, &d), 0,
                 "%s", d.msg);
    cr_assert_eq(pinio_st_index_shard_count(ix), 2);
    cr_assert_eq(pinio_st_index_find(ix, "y", 1)->shard, 0);
    cr_assert_eq(pinio_st_index_find(ix, "z", 1)->shard, 1);
    pinio_st_index_free(ix);
}

/* The header parser's rule: a tensor name holding a NUL is refused, with
 * the byte of its escape ("a\\u0000b" would be cut to "a" by any C string). */
Test(index, nul_in_tensor_name_is_refused)
{
    pinio_st_index *ix = NULL;
    pinio_diag d = {0};
    cr_assert_eq(parse("{\"weight_map\":{\"a\\u0000b\":\"s\",\"a\\u0000c\":\"s\"}}", &ix, &d),
                 PINIO_EFORMAT);
    cr_assert_null(ix);
    cr_assert(strstr(d.msg, "NUL") && strstr(d.msg, "byte 17"), "%s", d.msg);
}

/* A FIFO named like an index: open() would wait for a writer forever. */
Test(index, fifo_is_refused_without_blocking)
{
    char dir[256], p[300];
    cr_assert_eq(t_tmpdir("/dev/shm", "index", dir, sizeof dir), 0);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    cr_assert_eq(mkfifo(p, 0600), 0);
    alarm(20); /* a regression blocks: SIGALRM fails the test instead */
    pinio_st_index *ix = NULL;
    pinio_diag d = {0};
    int rc = pinio_st_index_open(&ix, p, &d);
    alarm(0);
    t_rm_rf(dir);
    cr_assert_eq(rc, -EINVAL);
    cr_assert_null(ix);
    cr_assert(strstr(d.msg, "not a regular file") && strstr(d.msg, p), "%s", d.msg);
}

/* An index of n entries over n/10 ... n shards, as a JSON image. */
static char *make_index(size_t n, size_t shards, size_t *len)
{
    size_t cap = 64 + n * 64;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    size_t k = (size_t)snprintf(b, cap, "{\"metadata\":{},\"weight_map\":{");
    uint64_t s = 42;
    for (size_t i = 0; i < n; i++) {
        /* Names in scrambled order, so that sorting has work to do. */
        uint64_t r = t_rand(&s);
        k += (size_t)snprintf(b + k, cap - k, "%s\"l%zu.w%llu\":\"m-%05zu.safetensors\"",
                              i ? "," : "", i, (unsigned long long)(r % 1000), (size_t)(r % shards));
    }
    k += (size_t)snprintf(b + k, cap - k, "}}");
    *len = k;
    return b;
}

static double parse_seconds(size_t n, size_t shards)
{
    size_t len;
    char *b = make_index(n, shards, &len);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) { /* the best of three: another load only adds */
        struct timespec t0, t1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        pinio_st_index *ix = NULL;
        pinio_diag d = {0};
        cr_assert_eq(pinio_st_index_parse(&ix, b, len, "m.index.json", &d), 0, "%s", d.msg);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        cr_assert_eq(pinio_st_index_count(ix), n);
        cr_assert_leq(pinio_st_index_shard_count(ix), shards);
        pinio_st_index_free(ix);
        double t = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (t < best)
            best = t;
    }
    free(b);
    return best;
}

/* 100k entries over 100k shards against 10k over 10k: n log n predicts a
 * ratio near 12, n^2 one near 100 (the old linear shard search took tens of
 * seconds at 100k). CPU time of this process, not wall time. */
Test(index, parse_time_grows_like_n_log_n, .timeout = 120)
{
    double small = parse_seconds(10000, 10000), big = parse_seconds(100000, 100000);
    if (small < 1e-4)
        small = 1e-4; /* clock granularity */
    cr_assert_lt(big / small, 40.0, "10k: %.4f s, 100k: %.4f s: ratio %.1f (quadratic?)", small,
                 big, big / small);
    cr_assert_lt(big, 10.0, "100k shards: %.2f s", big);
}
