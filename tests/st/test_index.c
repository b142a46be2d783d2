/* The index parser (src/st/index.c): shard names judged per path component,
 * and a FIFO named like an index refused without blocking. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
