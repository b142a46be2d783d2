/* The fetched credential sources (src/s3/creds.c) without a network:
 * credential_process's command split as Python's shlex.split splits it
 * (what botocore runs), its JSON refused when it is not Version 1 or lacks
 * a field, and the refresh windows with a fake clock: inside the advisory
 * window a failed refresh keeps the keys, inside the mandatory one it is
 * the error naming the source. No message holds the secret. */
#include <criterion/criterion.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/s3/creds.h"
#include "tests/common/helpers.h"

#define SECRET "Pr0cess/NeverPrint+Secret"

static char dir[256], answer[300];

static void setup(void)
{
    cr_assert_eq(t_tmpdir("/tmp", "s3creds", dir, sizeof(dir)), 0);
    snprintf(answer, sizeof(answer), "%s/answer.json", dir);
}

static void teardown(void)
{
    t_rm_rf(dir);
}

TestSuite(s3_creds, .init = setup, .fini = teardown);

static void put(const char *text)
{
    FILE *f = fopen(answer, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(s3_creds, split_like_shlex)
{
    /* Each line: the command, then shlex.split's words joined by '|'. */
    static const char *const cases[][2] = {
        {"aws-vault exec prof --json", "aws-vault|exec|prof|--json"},
        {"  /bin/tool   'a b'  \"c \\\" d\" e\\ f", "/bin/tool|a b|c \" d|e f"},
        {"x 'it''s' \"$HOME\" \"\\n\"", "x|its|$HOME|\\n"},
        {"a\"b c\"d", "ab cd"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char **argv = NULL, joined[256] = "";
        int n = pinio__s3_split_command(cases[i][0], &argv);
        cr_assert_gt(n, 0, "%s", cases[i][0]);
        for (int k = 0; k < n; k++) {
            strcat(joined, argv[k]);
            if (k + 1 < n)
                strcat(joined, "|");
            free(argv[k]);
        }
        cr_expect_null(argv[n]);
        free(argv);
        cr_expect_str_eq(joined, cases[i][1], "%s", cases[i][0]);
    }
    char **argv = (char **)1;
    cr_expect_eq(pinio__s3_split_command("a 'open", &argv), -EINVAL);
    cr_expect_null(argv);
    cr_expect_eq(pinio__s3_split_command("   ", &argv), -EINVAL);
    cr_expect_eq(pinio__s3_split_command("x\\", &argv), -EINVAL);
}

/* A process source that prints the answer file (and fails without it). */
static int open_proc(pinio__s3_creds **c, pinio_diag *d)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "/bin/sh -c 'cat \"$0\" || exit 1' %s", answer);
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_PROCESS, .source = "credential_process (test)",
                              .command = cmd};
    memset(d, 0, sizeof(*d));
    return pinio__s3_creds_open(c, &s, d);
}

Test(s3_creds, process_answers_are_checked)
{
    static const char *const bad[][2] = {
        {"{\"Version\": 2, \"AccessKeyId\": \"AK\", \"SecretAccessKey\": \"" SECRET "\"}", "Version is not 1"},
        {"{\"Version\": 1, \"AccessKeyId\": \"AK\"}", "no AccessKeyId or SecretAccessKey"},
        {"{\"Version\": 1, \"AccessKeyId\": \"AK\", \"SecretAccessKey\": \"" SECRET "\", \"Expiration\": \"soon\"}", "Expiration is not an ISO 8601 time"},
        {"{\"Version\": 1, \"AccessKeyId\": \"A/K\", \"SecretAccessKey\": \"" SECRET "\"}", "the access key id has a character"},
        {"[\"" SECRET "\"]", "not a JSON object"},
        {"{\"Version\": 1, \"AccessKeyId\": \"AK\", \"SecretAccessKey\": \"" SECRET "\"", "a malformed answer"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        put(bad[i][0]);
        pinio__s3_creds *c = (pinio__s3_creds *)1;
        pinio_diag d;
        cr_expect_eq(open_proc(&c, &d), -EPROTO, "%s", bad[i][0]);
        cr_expect_null(c);
        cr_expect(strstr(d.msg, "credential_process (test): a malformed answer") &&
                  strstr(d.msg, bad[i][1]), "%s", d.msg);
        cr_expect(!strstr(d.msg, "NeverPrint"), "the secret in: %s", d.msg);
    }
    put("{\"Version\": 1, \"AccessKeyId\": \"AK\\u0000\", \"SecretAccessKey\": \"" SECRET "\"}");
    pinio__s3_creds *c;
    pinio_diag d;
    cr_expect_eq(open_proc(&c, &d), -EPROTO, "a NUL in a key id");
    /* JSON's escapes decoded; nested values and unknown members skipped. */
    put(" {\"Version\" : 1, \"x\": {\"y\": [1, 2.5e3, true, null, \"}\"]}, \"AccessKeyId\": "
        "\"AK\\u0041\", \"SecretAccessKey\": \"s\\/\\u00e9\\\"q\"}\n");
    cr_assert_eq(open_proc(&c, &d), 0, "%s", d.msg);
    pinio__s3_keys k;
    cr_assert_eq(pinio__s3_creds_get(c, 0, &k, &d), 0);
    cr_expect_str_eq(k.access_key, "AKA");
    cr_expect_str_eq(k.secret_key, "s/\xc3\xa9\"q");
    cr_expect_eq(pinio__s3_creds_expiry(c), 0);
    pinio__s3_keys_clear(&k);
    pinio__s3_creds_free(c);
    unlink(answer);
    cr_expect_eq(open_proc(&c, &d), -EIO);
    cr_expect(strstr(d.msg, "credential_process (test): credential_process exited with status 1: "),
              "%s", d.msg);
}

Test(s3_creds, refresh_windows_with_a_fake_clock)
{
    /* Expires 2030-01-01T00:00:00Z = 1893456000. */
    const time_t exp = 1893456000;
    put("{\"Version\": 1, \"AccessKeyId\": \"AKOLD\", \"SecretAccessKey\": \"" SECRET "\", "
        "\"SessionToken\": \"tok\", \"Expiration\": \"2030-01-01T00:00:00Z\"}");
    pinio__s3_creds *c;
    pinio_diag d;
    cr_assert_eq(open_proc(&c, &d), 0, "%s", d.msg);
    cr_expect_eq(pinio__s3_creds_expiry(c), exp);
    pinio__s3_keys k;
    /* Outside the 15-minute window: the keys held, nothing run. */
    put("{\"Version\": 1, \"AccessKeyId\": \"AKNEW\", \"SecretAccessKey\": \"" SECRET "\", "
        "\"Expiration\": \"2030-01-01T01:00:00.000+00:00\"}");
    cr_assert_eq(pinio__s3_creds_get(c, exp - 3600, &k, &d), 0);
    cr_expect_str_eq(k.access_key, "AKOLD");
    cr_expect_str_eq(k.session_token, "tok");
    pinio__s3_keys_clear(&k);
    cr_expect_eq(pinio__s3_creds_fetches(c), 1);
    /* Inside it: fetched again. */
    cr_assert_eq(pinio__s3_creds_get(c, exp - 14 * 60, &k, &d), 0, "%s", d.msg);
    cr_expect_str_eq(k.access_key, "AKNEW");
    cr_expect_null(k.session_token);
    pinio__s3_keys_clear(&k);
    cr_expect_eq(pinio__s3_creds_fetches(c), 2);
    cr_expect_eq(pinio__s3_creds_expiry(c), exp + 3600);
    /* The source fails now: in the advisory window the keys stay... */
    unlink(answer);
    cr_assert_eq(pinio__s3_creds_get(c, exp + 3600 - 12 * 60, &k, &d), 0, "%s", d.msg);
    cr_expect_str_eq(k.access_key, "AKNEW");
    pinio__s3_keys_clear(&k);
    /* ...in the mandatory one the failure is the error, naming the source. */
    memset(&d, 0, sizeof(d));
    cr_expect_eq(pinio__s3_creds_get(c, exp + 3600 - 5 * 60, &k, &d), -EIO);
    cr_expect_null(k.access_key);
    cr_expect(strstr(d.msg, "credential_process (test): credential_process exited with status 1"),
              "%s", d.msg);
    pinio__s3_creds_free(c);
}

/* Several signers at once while the keys are inside the refresh window:
 * each get fetches under the source's lock, every copy is whole (one
 * fetch's key id with its secret), and the fetches are counted exactly. */
struct getter {
    pinio__s3_creds *c;
    time_t now;
    int bad;
};

static void *get_many(void *arg)
{
    struct getter *g = arg;
    for (int i = 0; i < 10; i++) {
        pinio__s3_keys k;
        pinio_diag d = {0};
        if (pinio__s3_creds_get(g->c, g->now, &k, &d) != 0 || strcmp(k.access_key, "AKPROC") != 0 ||
            strcmp(k.secret_key, SECRET) != 0)
            g->bad++;
        pinio__s3_keys_clear(&k);
    }
    return NULL;
}

Test(s3_creds, concurrent_refreshes)
{
    put("{\"Version\": 1, \"AccessKeyId\": \"AKPROC\", \"SecretAccessKey\": \"" SECRET "\", "
        "\"Expiration\": \"2030-01-01T00:00:00Z\"}");
    pinio__s3_creds *c;
    pinio_diag d;
    cr_assert_eq(open_proc(&c, &d), 0, "%s", d.msg);
    struct getter g[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        g[i] = (struct getter){.c = c, .now = 1893456000 - 60};
        cr_assert_eq(pthread_create(&t[i], NULL, get_many, &g[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_expect_eq(g[i].bad, 0, "thread %d: %d bad copies", i, g[i].bad);
    }
    cr_expect_eq(pinio__s3_creds_fetches(c), 41);
    pinio__s3_creds_free(c);
}

/* A metadata service of three answers (token, role, credentials expiring
 * in 2030), one connection each, then gone. */
static void *imds_once(void *arg)
{
    int ls = *(int *)arg;
    static const char *const bodies[] = {
        "tok",
        "role",
        "{\"Code\": \"Success\", \"AccessKeyId\": \"AKIMDS\", \"SecretAccessKey\": \"" SECRET "\", "
        "\"Token\": \"t\", \"Expiration\": \"2030-01-01T00:00:00Z\"}",
    };
    for (int i = 0; i < 3; i++) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            break;
        char req[4096];
        size_t n = 0;
        while (n < sizeof(req) - 1) {
            ssize_t got = read(fd, req + n, sizeof(req) - 1 - n);
            if (got <= 0)
                break;
            n += (size_t)got;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        char resp[512];
        int len = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                           "Connection: close\r\n\r\n%s", strlen(bodies[i]), bodies[i]);
        if (write(fd, resp, (size_t)len) < 0)
            break;
        close(fd);
    }
    close(ls);
    return NULL;
}

/* IMDS answers at open and is gone at the refresh: inside the mandatory
 * window that is an error naming the source, never empty keys. */
Test(s3_creds, imds_gone_at_refresh)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    cr_assert_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(ls, 4), 0);
    cr_assert_eq(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    char url[64], src[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(a.sin_port));
    snprintf(src, sizeof(src), "EC2 instance metadata (%s)", url);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, imds_once, &ls), 0);
    pinio__s3_creds_spec s = {.kind = PINIO__S3_CREDS_IMDS, .source = src, .url = url};
    pinio__s3_creds *c;
    pinio_diag d = {0};
    cr_assert_eq(pinio__s3_creds_open(&c, &s, &d), 0, "%s", d.msg);
    pthread_join(t, NULL);
    pinio__s3_keys k;
    cr_assert_eq(pinio__s3_creds_get(c, 1893456000 - 3600, &k, &d), 0);
    cr_expect_str_eq(k.access_key, "AKIMDS");
    pinio__s3_keys_clear(&k);
    cr_expect_eq(pinio__s3_creds_get(c, 1893456000 - 60, &k, &d), -EIO);
    cr_expect_null(k.access_key);
    cr_expect(strstr(d.msg, src) && strstr(d.msg, "no longer answers"), "%s", d.msg);
    pinio__s3_creds_free(c);
}
