/* S3 configuration (src/s3/config.c): the environment and the AWS CLI's
 * files in botocore's order, the errors for a missing profile or a
 * malformed file (file and line named), and no secret in any message:
 * every failing case's diagnostic is searched for the secret key. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/s3/config_internal.h"
#include "tests/common/helpers.h"
#include "tests/s3/s3_env.h"

#define SECRET "S3cr3t/NeverPrint+Me=0123456789abcdefghij"
#define TOKEN "T0ken/NeverPrint+Me=="

static char dir[256], cred[300], conf[300];

static void setup(void)
{
    s3_env_clear();
    cr_assert_eq(t_tmpdir("/tmp", "s3cfg", dir, sizeof(dir)), 0);
    snprintf(cred, sizeof(cred), "%s/credentials", dir);
    snprintf(conf, sizeof(conf), "%s/config", dir);
    setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
    setenv("AWS_CONFIG_FILE", conf, 1);
    setenv("HOME", dir, 1);
}

static void teardown(void)
{
    t_rm_rf(dir);
}

TestSuite(s3_config, .init = setup, .fini = teardown);

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static pinio__s3_cfg *load_ok(void)
{
    pinio__s3_cfg *cfg = NULL;
    pinio_diag d = {0};
    int rc = pinio__s3_cfg_load(&cfg, &d);
    cr_assert_eq(rc, 0, "cfg_load: %d %s", rc, d.msg);
    cr_assert_not_null(cfg);
    return cfg;
}

/* A failing load: the code, a message holding `want`, and neither the
 * secret nor the token anywhere in the diagnostic. */
static void load_fails(int code, const char *want, pinio_diag *d)
{
    pinio__s3_cfg *cfg = (pinio__s3_cfg *)d; /* must be reset to NULL */
    memset(d, 0, sizeof(*d));
    int rc = pinio__s3_cfg_load(&cfg, d);
    cr_assert_eq(rc, code, "want %d, got %d: %s", code, rc, d->msg);
    cr_expect_null(cfg, "nothing owned on failure");
    cr_expect_eq(d->code, code);
    cr_expect(strstr(d->msg, want), "message lacks '%s': %s", want, d->msg);
    cr_expect(!strchr(d->msg, '\n'), "one line: %s", d->msg);
    cr_expect(!strstr(d->msg, SECRET) && !strstr(d->path, SECRET), "the secret in: %s", d->msg);
    cr_expect(!strstr(d->msg, "NeverPrint") && !strstr(d->path, "NeverPrint"), "a secret's part in: %s",
              d->msg);
}

Test(s3_config, environment_keys_and_defaults)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    pinio__s3_cfg *cfg = load_ok();
    cr_expect(!pinio__s3_cfg_anonymous(cfg));
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), "environment");
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "us-east-1");
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://s3.us-east-1.amazonaws.com");
    cr_expect_str_eq(pinio__s3_cfg_addressing(cfg), "auto");
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, no_credentials_is_anonymous)
{
    pinio__s3_cfg *cfg = load_ok();
    cr_expect(pinio__s3_cfg_anonymous(cfg));
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), "none");
    pinio__s3_cfg_free(cfg);
    /* The default profile may be absent: only a named one must exist. */
    put(cred, "[other]\naws_access_key_id = AKID\naws_secret_access_key = " SECRET "\n");
    cfg = load_ok();
    cr_expect(pinio__s3_cfg_anonymous(cfg));
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, no_sign_request)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    setenv("AWS_NO_SIGN_REQUEST", "TRUE", 1);
    pinio__s3_cfg *cfg = load_ok();
    cr_expect(pinio__s3_cfg_anonymous(cfg));
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), "AWS_NO_SIGN_REQUEST");
    pinio__s3_cfg_free(cfg);
    setenv("AWS_NO_SIGN_REQUEST", "false", 1);
    cfg = load_ok();
    cr_expect(!pinio__s3_cfg_anonymous(cfg));
    pinio__s3_cfg_free(cfg);
    pinio_diag d;
    setenv("AWS_NO_SIGN_REQUEST", "maybe", 1);
    load_fails(-EINVAL, "AWS_NO_SIGN_REQUEST", &d);
}

Test(s3_config, profile_from_both_files)
{
    put(cred, "# keys\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = " SECRET "\n\n"
              "[dev]\nAWS_Access_Key_Id: AKIDDEV\n  ; an indented comment\naws_secret_access_key=" SECRET "\r\n"
              "aws_session_token = " TOKEN "\n");
    put(conf, "[default]\nregion = eu-west-1\n\n[profile  dev ]\nregion = ap-south-1\ns3 =\n"
              "  addressing_style = path\n");
    pinio__s3_cfg *cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "eu-west-1");
    cr_expect_str_eq(pinio__s3_cfg_addressing(cfg), "auto");
    char want[400];
    snprintf(want, sizeof(want), "%s [default]", cred);
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), want);
    pinio__s3_cfg_free(cfg);

    setenv("AWS_PROFILE", "dev", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "ap-south-1");
    cr_expect_str_eq(pinio__s3_cfg_addressing(cfg), "path");
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://s3.ap-south-1.amazonaws.com");
    snprintf(want, sizeof(want), "%s [dev]", cred);
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), want);
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, precedence)
{
    put(cred, "[dev]\naws_access_key_id = AKIDCRED\naws_secret_access_key = " SECRET "\n");
    put(conf, "[profile dev]\naws_access_key_id = AKIDCONF\naws_secret_access_key = " SECRET "\n"
              "region = eu-north-1\n[profile prod]\naws_access_key_id = AKIDPROD\n"
              "aws_secret_access_key = " SECRET "\n");
    setenv("AWS_PROFILE", "dev", 1);
    char want[400];
    /* The credentials file before the config file. */
    pinio__s3_cfg *cfg = load_ok();
    snprintf(want, sizeof(want), "%s [dev]", cred);
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), want);
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "eu-north-1");
    pinio__s3_cfg_free(cfg);
    /* AWS_DEFAULT_PROFILE before AWS_PROFILE (botocore's order); keys from the config file. */
    setenv("AWS_DEFAULT_PROFILE", "prod", 1);
    cfg = load_ok();
    snprintf(want, sizeof(want), "%s [profile prod]", conf);
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), want);
    pinio__s3_cfg_free(cfg);
    /* The region variables before the profile's, AWS_REGION first. */
    setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "sa-east-1");
    pinio__s3_cfg_free(cfg);
    setenv("AWS_REGION", "ca-central-1", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "ca-central-1");
    pinio__s3_cfg_free(cfg);
    /* Keys in the environment before any profile. */
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_source(cfg), "environment");
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, endpoint_precedence_and_addressing)
{
    put(conf, "[default]\nendpoint_url = http://profile.local:9000\nservices = store\n"
              "s3 =\n  addressing_style = virtual\n"
              "[services store]\ns3 =\n  endpoint_url = HTTP://Services.Local:9001/\n");
    pinio__s3_cfg *cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "http://services.local:9001");
    cr_expect_str_eq(pinio__s3_cfg_addressing(cfg), "virtual");
    pinio__s3_cfg_free(cfg);
    put(conf, "[default]\nendpoint_url = http://profile.local:9000\n");
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "http://profile.local:9000");
    pinio__s3_cfg_free(cfg);
    setenv("AWS_ENDPOINT_URL", "https://global.example:443/", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://global.example", "the default port dropped");
    pinio__s3_cfg_free(cfg);
    setenv("AWS_ENDPOINT_URL_S3", "http://[::1]:9000", 1);
    setenv("PINIO_S3_ADDRESSING", "path", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "http://[::1]:9000");
    cr_expect_str_eq(pinio__s3_cfg_addressing(cfg), "path");
    pinio__s3_cfg_free(cfg);
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("PINIO_S3_ADDRESSING");
    put(conf, "");
    setenv("AWS_REGION", "cn-north-1", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://s3.cn-north-1.amazonaws.com.cn");
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, default_paths_under_home)
{
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unsetenv("AWS_CONFIG_FILE");
    char aws[300], path[320];
    snprintf(aws, sizeof(aws), "%s/.aws", dir);
    cr_assert_eq(mkdir(aws, 0700), 0);
    snprintf(path, sizeof(path), "%s/credentials", aws);
    put(path, "[default]\naws_access_key_id = AKIDHOME\naws_secret_access_key = " SECRET "\n");
    snprintf(path, sizeof(path), "%s/config", aws);
    put(path, "[default]\nregion = us-west-2\n");
    pinio__s3_cfg *cfg = load_ok();
    cr_expect(!pinio__s3_cfg_anonymous(cfg));
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "us-west-2");
    pinio__s3_cfg_free(cfg);
    /* "~/" in the variables, as botocore expands it. */
    setenv("AWS_CONFIG_FILE", "~/.aws/config", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "us-west-2");
    pinio__s3_cfg_free(cfg);
}

Test(s3_config, missing_profile_names_it_and_the_files)
{
    put(cred, "[dev]\naws_access_key_id = AKID\naws_secret_access_key = " SECRET "\n");
    setenv("AWS_PROFILE", "prdo", 1);
    pinio_diag d;
    load_fails(-ENOENT, "'prdo'", &d);
    cr_expect(strstr(d.msg, cred) && strstr(d.msg, conf), "%s", d.msg);
    /* botocore refuses it even with keys in the environment. */
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    load_fails(-ENOENT, "'prdo'", &d);
}

/* Each malformed file, with the secret (or a part of it: a malformed
 * line has no '=', and the secret has one) on or next to the bad line. */
Test(s3_config, malformed_files_name_file_and_line)
{
    struct { const char *text; unsigned line; } bad[] = {
        {"aws_secret_access_key = " SECRET "\n[default]\n", 1},
        {"[default]\naws_access_key_id = AKID\naws_secret_access_key S3cr3t/NeverPrint\n", 3},
        {"[default\naws_secret_access_key = " SECRET "\n", 1},
        {"[default]\naws_secret_access_key = " SECRET "\n[default]\n", 3},
        {"[default]\naws_secret_access_key = x\naws_secret_access_key = " SECRET "\n", 3},
        {"[default]\ns3 =\n  addressing_style path NeverPrint\n", 3},
        {"[default]\n= " SECRET "\n", 2},
        {"[]\n", 1},
    };
    pinio_diag d;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        put(cred, bad[i].text);
        char want[32];
        snprintf(want, sizeof(want), "line %u: ", bad[i].line);
        load_fails(PINIO_EFORMAT, want, &d);
        cr_expect_str_eq(d.path, cred, "case %zu names the file", i);
    }
    /* The config file too, and even when the environment has the keys (botocore reads both files). */
    put(cred, "");
    put(conf, "[default]\nregion = us-east-1\naws_secret_access_key S3cr3t/NeverPrint\n");
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    load_fails(PINIO_EFORMAT, "line 3: ", &d);
    cr_expect_str_eq(d.path, conf);
}

Test(s3_config, unreadable_file_is_named)
{
    cr_assert_eq(mkdir(cred, 0700), 0);
    pinio_diag d;
    load_fails(-EISDIR, cred, &d);
    cr_expect_str_eq(d.path, cred);
}

Test(s3_config, half_keys_and_unsupported_sources)
{
    pinio_diag d;
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    load_fails(-EINVAL, "AWS_SECRET_ACCESS_KEY is not", &d);
    unsetenv("AWS_ACCESS_KEY_ID");
    put(cred, "[default]\naws_access_key_id = AKID\n");
    load_fails(-EINVAL, "[default] has aws_access_key_id but no aws_secret_access_key", &d);
    cr_expect_str_eq(d.path, cred);
    put(cred, "");
    put(conf, "[profile sso]\nrole_arn = arn:aws:iam::123456789012:role/" SECRET "\nsource_profile = x\n");
    setenv("AWS_PROFILE", "sso", 1);
    load_fails(-EINVAL, "[sso] source_profile x has no aws_access_key_id", &d);
    put(conf, "[profile sso]\nsso_start_url = https://example.awsapps.com/start\n"
              "sso_account_id = 123456789012\n");
    load_fails(-EINVAL, "[sso] is configured for SSO but has no sso_role_name, sso_region", &d);
    cr_expect_str_eq(d.path, conf);
    put(conf, "[profile sso]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Environment\n");
    load_fails(-ENOENT, "[sso] credential_source Environment: no credentials found there", &d);
    cr_expect_str_eq(d.path, conf);
}

Test(s3_config, bad_values_are_refused_without_echo)
{
    pinio_diag d;
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
    const char *endpoints[] = {"ftp://host", ("http://user:" SECRET "@host:9000"), "http://AKID:NeverPrint@host:9000",
                               "http://", "http://host:0",
                               "http://host:99999", "http://host:9x", ("http://host/?q=" SECRET),
                               "http://[::1", "s3.amazonaws.com"};
    for (size_t i = 0; i < sizeof(endpoints) / sizeof(*endpoints); i++) {
        setenv("AWS_ENDPOINT_URL", endpoints[i], 1);
        load_fails(-EINVAL, "AWS_ENDPOINT_URL: ", &d);
    }
    setenv("AWS_ENDPOINT_URL", "http://host:9000\r\nX-Injected: 1", 1);
    load_fails(-EINVAL, "AWS_ENDPOINT_URL: ", &d);
    unsetenv("AWS_ENDPOINT_URL");
    /* A key id or token that would break (or inject) a header line. */
    setenv("AWS_SESSION_TOKEN", TOKEN "\r\nX-Injected: 1", 1);
    load_fails(-EINVAL, "the session token has a character", &d);
    unsetenv("AWS_SESSION_TOKEN");
    setenv("AWS_ACCESS_KEY_ID", "AKID/NeverPrint", 1);
    load_fails(-EINVAL, "the access key id has a character", &d);
    put(cred, "[default]\naws_access_key_id = AKID NeverPrint\naws_secret_access_key = " SECRET "\n");
    unsetenv("AWS_ACCESS_KEY_ID");
    load_fails(-EINVAL, "[default]: the access key id has a character", &d);
    put(cred, "");
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_REGION", "us-east-1/" SECRET, 1);
    load_fails(-EINVAL, "AWS_REGION: not a region", &d);
    unsetenv("AWS_REGION");
    put(conf, "[default]\nregion = -bad\n");
    load_fails(-EINVAL, "[default] region: not a region", &d);
    put(conf, "[default]\ns3 =\n  addressing_style = sideways\n");
    load_fails(-EINVAL, "s3.addressing_style: the addressing style is auto, path or virtual", &d);
    put(conf, "");
    setenv("PINIO_S3_ADDRESSING", "Path", 1);
    load_fails(-EINVAL, "PINIO_S3_ADDRESSING", &d);
}

/* Files made of random lines, mostly good, now and then a bad one, in both
 * files: every load either succeeds or fails with one of the documented
 * codes, one line, no secret (under ASan and valgrind: no bad access, no
 * leak on any path). */
Test(s3_config, random_files_fail_cleanly)
{
    static const char *const good[] = {
        "[default]\n", "[profile dev]\n", "[dev]\n", "[services s]\n", "aws_access_key_id = AKID\n",
        "aws_secret_access_key = " SECRET "\n", "aws_session_token = " TOKEN "\n", "s3 =\n",
        "  addressing_style = path\n", "  endpoint_url = http://h:9000\n", "region = eu-west-1\n",
        "endpoint_url = http://127.0.0.1:9000/x\n", "services = s\n", "\n", "# comment\n",
        "; comment\n", "\t\n", "\r\n", "region = \n", "AWS_ACCESS_KEY_ID: AKID2\n",
    };
    static const char *const bad[] = {
        "= NeverPrint\n", "junk NeverPrint\n", "[\n", "[]\n", "   continued NeverPrint\n",
        "role_arn = arn\n", "region = -x\n", "endpoint_url = ftp://NeverPrint\n",
    };
    const size_t ngood = sizeof(good) / sizeof(*good), nbad = sizeof(bad) / sizeof(*bad);
    uint64_t seed = 0x5eed5;
    unsigned ok = 0, failed = 0;
    for (int round = 0; round < 400; round++) {
        const char *paths[] = {cred, conf};
        for (int k = 0; k < 2; k++) {
            FILE *f = fopen(paths[k], "w");
            cr_assert_not_null(f);
            /* A section first (a setting before one is malformed), then up to 7
             * lines; one bad line in about a quarter of the files. */
            uint64_t n = t_rand(&seed) % 8, badat = t_rand(&seed) % 28;
            fputs(good[t_rand(&seed) % 4], f);
            for (uint64_t i = 0; i < n; i++)
                fputs(i == badat ? bad[t_rand(&seed) % nbad] : good[t_rand(&seed) % ngood], f);
            fclose(f);
        }
        if (t_rand(&seed) % 2)
            setenv("AWS_PROFILE", "dev", 1);
        else
            unsetenv("AWS_PROFILE");
        pinio__s3_cfg *cfg = NULL;
        pinio_diag d = {0};
        int rc = pinio__s3_cfg_load(&cfg, &d);
        if (rc == 0) {
            cr_assert_not_null(cfg);
            cr_expect_not_null(pinio__s3_cfg_region(cfg));
            pinio__s3_cfg_free(cfg);
            ok++;
            continue;
        }
        failed++;
        cr_expect(rc == PINIO_EFORMAT || rc == -EINVAL || rc == -ENOENT || rc == -ENOTSUP,
                  "round %d: %d %s", round, rc, d.msg);
        cr_expect_null(cfg);
        cr_expect_eq(d.code, rc);
        cr_expect(!strchr(d.msg, '\n') && !strstr(d.msg, "NeverPrint"), "round %d: %s", round, d.msg);
    }
    /* Both outcomes exercised, so neither path goes unchecked. */
    cr_expect(ok >= 50 && failed >= 50, "%u loads succeeded, %u failed", ok, failed);
}

/* AWS_USE_FIPS_ENDPOINT / AWS_USE_DUALSTACK_ENDPOINT and the profile's
 * use_fips_endpoint / use_dualstack_endpoint in the endpoint's name, as
 * botocore 1.29 builds it (s3-fips, s3.dualstack, s3-fips.dualstack). */
Test(s3_config, fips_and_dualstack_endpoints)
{
    setenv("AWS_REGION", "us-west-2", 1);
    setenv("AWS_USE_FIPS_ENDPOINT", "true", 1);
    pinio__s3_cfg *cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://s3-fips.us-west-2.amazonaws.com");
    pinio__s3_cfg_free(cfg);
    setenv("AWS_USE_DUALSTACK_ENDPOINT", "TRUE", 1);
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg),
                     "https://s3-fips.dualstack.us-west-2.amazonaws.com");
    pinio__s3_cfg_free(cfg);
    unsetenv("AWS_USE_FIPS_ENDPOINT");
    unsetenv("AWS_USE_DUALSTACK_ENDPOINT");
    put(conf, "[default]\nuse_dualstack_endpoint = true\n");
    cfg = load_ok();
    cr_expect_str_eq(pinio__s3_cfg_endpoint(cfg), "https://s3.dualstack.us-west-2.amazonaws.com");
    pinio__s3_cfg_free(cfg);
    put(conf, "[default]\nuse_fips_endpoint = yes\n");
    pinio_diag d;
    load_fails(-EINVAL, "use_fips_endpoint: expected true or false", &d);
}

/* A region redirect's view: the bucket's region signs, and a host built
 * from the region follows it (a configured endpoint stays); the store's
 * word is no host name unless it is a region name. */
Test(s3_config, region_view_for_a_redirect)
{
    setenv("AWS_USE_DUALSTACK_ENDPOINT", "true", 1);
    pinio__s3_cfg *cfg = load_ok(), view;
    char region[64], host[160];
    cr_assert_eq(pinio__s3_cfg_region_view(cfg, "eu-west-1", &view, region, host), 0);
    cr_expect_str_eq(pinio__s3_cfg_region(&view), "eu-west-1");
    cr_expect_str_eq(view.host, "s3.dualstack.eu-west-1.amazonaws.com");
    cr_expect_str_eq(pinio__s3_cfg_region(cfg), "us-east-1");
    cr_expect_eq(pinio__s3_cfg_region_view(cfg, "evil.example/x", &view, region, host), -EINVAL);
    pinio__s3_cfg_free(cfg);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
    cfg = load_ok();
    cr_assert_eq(pinio__s3_cfg_region_view(cfg, "ap-south-1", &view, region, host), 0);
    cr_expect_str_eq(view.host, "127.0.0.1:9000");
    cr_expect_str_eq(pinio__s3_cfg_region(&view), "ap-south-1");
    pinio__s3_cfg_free(cfg);
}

/* Credential endpoints that are no URL, or would send a token elsewhere,
 * are refused naming the variable, before any request. */
Test(s3_config, bad_credential_endpoints)
{
    pinio_diag d;
    char tok[300];
    snprintf(tok, sizeof(tok), "%s/token", dir);
    put(tok, "jwt");
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tok, 1);
    setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
    const char *sts[] = {"http://", "ftp://sts.local", "http://u:" SECRET "@sts.local/",
                         "http://sts.local/\r\nX: 1"};
    for (size_t i = 0; i < sizeof(sts) / sizeof(*sts); i++) {
        setenv("AWS_ENDPOINT_URL_STS", sts[i], 1);
        load_fails(-EINVAL, "AWS_ENDPOINT_URL_STS: not an http:// or https:// URL", &d);
    }
    unsetenv("AWS_ROLE_ARN");
    unsetenv("AWS_ENDPOINT_URL_STS");
    load_fails(-EINVAL, "no role to assume", &d);
    unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://u:" SECRET "@127.0.0.1/creds", 1);
    load_fails(-EINVAL, "not an http:// or https:// URL", &d);
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.169.254/creds", 1);
    load_fails(-EINVAL, "an http:// URI must name 169.254.170.2", &d);
    unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "creds", 1);
    load_fails(-EINVAL, "container credentials: the URI is not a URL path", &d);
    char big[4096];
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", big, 1);
    load_fails(-EINVAL, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is over", &d);
}
