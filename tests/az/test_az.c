/* Azure's pure parts (src/s3/azure_*.c): az:// and https:// URLs and their
 * round trip through the loader's (bucket, key) pairs; the configuration
 * from the environment (connection strings, account variables, workload
 * identity) and its refusals, which name the variable and never its value;
 * List Blobs pages (names, sizes, NextMarker, and the pages refused). The
 * requests are tested against Azurite (az_cli_test.sh), through the fault
 * proxy (az_faults_test.sh), against a token server (az_identity_test.sh)
 * and against the Azure SDK's signer (az_sdk_check.py). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/s3/azure.h"

#define KEY "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

static void clear_env(void)
{
    const char *v[] = { "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT",
                        "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
                        "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
                        "AZURE_AUTHORITY_HOST" };
    for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++)
        unsetenv(v[i]);
}

TestSuite(az_cfg, .init = clear_env);

Test(az_url, splits_and_joins_back)
{
    const char *ok[][3] = {
        { "az://models/llama/a b.safetensors", "az://models", "llama/a b.safetensors" },
        { "az://models", "az://models", "" },
        { "https://acct.blob.core.windows.net/models/x/y.json",
          "https://acct.blob.core.windows.net/models", "x/y.json" },
        { "az://$root/m.safetensors", "az://$root", "m.safetensors" },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++) {
        char *b, *k;
        cr_assert(pinio__s3_is_url(ok[i][0]), "%s", ok[i][0]);
        cr_assert_eq(pinio__s3_url_split(ok[i][0], &b, &k, NULL), 0, "%s", ok[i][0]);
        cr_assert_str_eq(b, ok[i][1]);
        cr_assert_str_eq(k, ok[i][2]);
        cr_assert(pinio__az_bucket(b));
        char *u = pinio__s3_url_join(b, k);
        if (*k)
            cr_assert_str_eq(u, ok[i][0], "the join gives the URL back");
        free(u);
        free(b);
        free(k);
    }
    cr_assert_not(pinio__s3_is_url("https://example.com/models/x.safetensors"));
    cr_assert_not(pinio__s3_is_url("https://acct.blob.core.windows.net.evil/x"));
}

Test(az_url, refuses_what_is_no_container)
{
    static const struct { const char *url, *why; } bad[] = {
        { "az://", "the container name is empty" },
        { "az:///blob", "the container name is empty" },
        { "az://Models/x", "is not one Azure allows" },
        { "az://a_b/x", "is not one Azure allows" },
        { "az://ab/x", "is not one Azure allows" },
        { "az://-ab/x", "is not one Azure allows" },
        { "az://a--b/x", "is not one Azure allows" },
        { "https://UPPER.blob.core.windows.net/c/x", "the account name is not" },
        { "https://acct.blob.core.windows.net/", "the container name is empty" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char *parts[2] = { (char *)1, (char *)1 };
        pinio_diag d = { 0 };
        int rc = pinio__s3_url_split(bad[i].url, &parts[0], &parts[1], &d);
        cr_assert(rc == -EINVAL && !parts[0] && !parts[1], "%s: %d", bad[i].url, rc);
        cr_assert(strstr(d.msg, bad[i].url) && strstr(d.msg, bad[i].why),
                  "the diag names the URL and why: %s", d.msg);
    }
}

/* Loads the configuration from the environment as set; returns its code. */
static int load(pinio__az_cfg **c, pinio_diag *d)
{
    memset(d, 0, sizeof(*d));
    return pinio__az_cfg_load(c, d);
}

Test(az_cfg, connection_strings)
{
    pinio__az_cfg *c;
    pinio_diag d;
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" KEY
           ";EndpointSuffix=core.chinacloudapi.cn", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert_str_eq(pinio__az_cfg_endpoint(c), "https://acct.blob.core.chinacloudapi.cn");
    cr_assert_str_eq(pinio__az_cfg_auth(c), "SharedKey of account acct (AZURE_STORAGE_CONNECTION_STRING)");
    pinio__az_cfg_free(c);
    setenv("AZURE_STORAGE_CONNECTION_STRING", " UseDevelopmentStorage=true ;", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert_str_eq(pinio__az_cfg_endpoint(c), "http://127.0.0.1:10000/devstoreaccount1");
    pinio__az_cfg_free(c);
    setenv("AZURE_STORAGE_CONNECTION_STRING",
           "BlobEndpoint=http://127.0.0.1:1/x/;SharedAccessSignature=sv=2021&sig=SECRETSIG", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert_str_eq(pinio__az_cfg_endpoint(c), "http://127.0.0.1:1/x");
    cr_assert_str_eq(pinio__az_cfg_auth(c), "a SAS token (AZURE_STORAGE_CONNECTION_STRING)");
    pinio__az_cfg_free(c);
}

Test(az_cfg, refusals_name_the_variable_not_the_value)
{
    const char *bad[][2] = {
        { "AccountName=acct;AccountKey=SECRET!notbase64", "the account key is not base64" },
        { "AccountKey=" KEY, "AccountKey without AccountName" },
        { "AccountName=acct;SECRETnoequals", "a part without '='" },
        { "BlobEndpoint=ftp://SECRET@host", "not an http:// or https:// URL" },
        { "BlobEndpoint=http://user:SECRET@host", "user info" },
        { "DefaultEndpointsProtocol=gopher;AccountName=SECRET", "neither https nor http" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        pinio__az_cfg *c = (pinio__az_cfg *)1;
        pinio_diag d;
        setenv("AZURE_STORAGE_CONNECTION_STRING", bad[i][0], 1);
        cr_assert_eq(load(&c, &d), -EINVAL, "%s", bad[i][0]);
        cr_assert_null(c);
        cr_assert(strstr(d.msg, "AZURE_STORAGE_CONNECTION_STRING") && strstr(d.msg, bad[i][1]),
                  "%s: %s", bad[i][0], d.msg);
        cr_assert_null(strstr(d.msg, "SECRET"), "a value in the message: %s", d.msg);
        cr_assert_null(strstr(d.msg, KEY), "the key in the message: %s", d.msg);
    }
}

Test(az_cfg, account_variables_and_workload_identity)
{
    pinio__az_cfg *c;
    pinio_diag d;
    setenv("AZURE_STORAGE_KEY", KEY, 1);
    cr_assert_eq(load(&c, &d), -EINVAL);
    cr_assert(strstr(d.msg, "AZURE_STORAGE_KEY: set without AZURE_STORAGE_ACCOUNT"), "%s", d.msg);
    setenv("AZURE_STORAGE_ACCOUNT", "acct", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert_str_eq(pinio__az_cfg_endpoint(c), "https://acct.blob.core.windows.net");
    cr_assert(strstr(pinio__az_cfg_auth(c), "AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY"));
    pinio__az_cfg_free(c);
    unsetenv("AZURE_STORAGE_KEY");
    setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=1&sig=x", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert_str_eq(pinio__az_cfg_auth(c), "a SAS token (AZURE_STORAGE_SAS_TOKEN)");
    pinio__az_cfg_free(c);
    unsetenv("AZURE_STORAGE_SAS_TOKEN");
    setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent", 1);
    setenv("AZURE_CLIENT_ID", "id", 1);
    cr_assert_eq(load(&c, &d), -EINVAL);
    cr_assert(strstr(d.msg, "AZURE_TENANT_ID: not set"), "%s", d.msg);
    setenv("AZURE_TENANT_ID", "t", 1);
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert(strstr(pinio__az_cfg_auth(c), "workload identity"));
    pinio__az_cfg_free(c);
    unsetenv("AZURE_FEDERATED_TOKEN_FILE");
    cr_assert_eq(load(&c, &d), 0, "%s", d.msg);
    cr_assert(strstr(pinio__az_cfg_auth(c), "anonymous"));
    pinio__az_cfg_free(c);
}

static int parse(const char *xml, pinio__s3_entry **e, size_t *n, char **next)
{
    *e = NULL;
    *n = 0;
    return pinio__az_list_parse(xml, strlen(xml), e, n, next);
}

#define HEAD "<?xml version=\"1.0\" encoding=\"utf-8\"?><EnumerationResults " \
             "ServiceEndpoint=\"http://x/\" ContainerName=\"m\"><Prefix>p/</Prefix>"
#define BLOB(name, size) "<Blob><Name>" name "</Name><Properties><Content-Length>" size \
                         "</Content-Length></Properties></Blob>"

Test(az_list, pages_and_markers)
{
    pinio__s3_entry *e;
    size_t n;
    char *next;
    cr_assert_eq(parse(HEAD "<Blobs>" BLOB("p/a &amp; b.safetensors", "10")
                       "<BlobPrefix><Name>p/sub/</Name></BlobPrefix>" BLOB("p/c", "0")
                       "</Blobs><NextMarker>2!m&amp;k</NextMarker></EnumerationResults>",
                       &e, &n, &next), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(e[0].key, "p/a & b.safetensors");
    cr_assert_eq(e[0].size, 10);
    cr_assert_str_eq(e[1].key, "p/c");
    cr_assert_str_eq(next, "2!m&k");
    free(next);
    pinio__s3_entries_free(e, n);
    cr_assert_eq(parse(HEAD "<Blobs /><NextMarker /></EnumerationResults>", &e, &n, &next), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(next);
    pinio__s3_entries_free(e, n);
}

Test(az_list, refuses_pages_that_are_not_whole)
{
    const char *bad[] = {
        HEAD "<Blobs>" BLOB("p/a", "1") "</Blobs></EnumerationResults>",   /* no NextMarker */
        HEAD "<Blobs>" BLOB("p/a", "1"),                                    /* cut short */
        HEAD "<Blobs></Blobs><NextMarker/><NextMarker>x</NextMarker></EnumerationResults>",
        HEAD "<Blobs><Blob><Name Encoded=\"true\">%01</Name><Properties><Content-Length>1"
             "</Content-Length></Properties></Blob></Blobs><NextMarker/></EnumerationResults>",
        HEAD "<Blobs>" BLOB("p/a", "-1") "</Blobs><NextMarker/></EnumerationResults>",
        "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        pinio__s3_entry *e;
        size_t n;
        char *next;
        cr_assert_eq(parse(bad[i], &e, &n, &next), PINIO_EFORMAT, "case %zu", i);
        free(next);
        pinio__s3_entries_free(e, n);
    }
}
