/*
 * S3 credentials, region, endpoint and addressing, read the way the AWS CLI
 * and botocore read them (environment, then ~/.aws/credentials and
 * ~/.aws/config), so that a user's existing setup works unchanged.
 *
 * Library-internal (not installed): used by src/s3/ (the signer and the
 * client) and by the layers below it. No function here prints, and no
 * message or diagnostic ever contains a secret key or a session token.
 */
#ifndef PINIO_SRC_S3_CONFIG_H
#define PINIO_SRC_S3_CONFIG_H

#include <stdbool.h>
#include <time.h>

#include "pinio/common.h"
#include "src/s3/creds.h"

/** Credentials and addressing; opaque, immutable once loaded (so one may
 *  be shared by threads that only read it). */
typedef struct pinio__s3_cfg pinio__s3_cfg;

/**
 * Reads the configuration from the environment and the AWS files, and
 * fetches the first credentials of the source that has them.
 *
 * Credentials, in botocore 1.29's order (credentials.py,
 * create_credential_resolver), first configured wins:
 * AWS_NO_SIGN_REQUEST=true (anonymous); AWS_ACCESS_KEY_ID with
 * AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN); the profile's role_arn
 * with source_profile (STS AssumeRole signed with that profile's static
 * keys; role_session_name, external_id, duration_seconds); web identity
 * (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME, else
 * the profile's web_identity_token_file, role_arn, role_session_name:
 * STS AssumeRoleWithWebIdentity); the credentials file's static keys;
 * the profile's credential_process (run without a shell, its JSON
 * Version 1 read); the config file's static keys; container credentials
 * (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI against 169.254.170.2, or
 * _FULL_URI: https, or http to 169.254.170.2, 169.254.170.23 (EKS Pod
 * Identity), fd00:ec2::23 or loopback; AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 * or _TOKEN); EC2 instance metadata (IMDSv2; AWS_EC2_METADATA_DISABLED,
 * AWS_EC2_METADATA_SERVICE_ENDPOINT[_MODE]; one try of one second: no
 * answer means not on EC2). Nothing configured: anonymous (no
 * Authorization header), for public buckets. The profile is
 * AWS_DEFAULT_PROFILE, AWS_PROFILE, else "default", its settings in
 * AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials (section "[NAME]")
 * over AWS_CONFIG_FILE or ~/.aws/config ("[profile NAME]" or "[default]").
 * STS: AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, the profile's services
 * sts endpoint_url or endpoint_url, else sts[-fips].REGION.amazonaws.com
 * (sts.amazonaws.com for a legacy region when AWS_STS_REGIONAL_ENDPOINTS
 * or sts_regional_endpoints is "legacy").
 *
 * Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
 * "us-east-1". Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
 * `[services NAME]` section the profile's `services` names (its nested
 * `s3 = endpoint_url = ...`), the profile's `endpoint_url`, else
 * https://s3[-fips][.dualstack].REGION.amazonaws.com (.com.cn in the cn-
 * regions; AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT or the
 * profile's use_fips_endpoint, use_dualstack_endpoint). Addressing:
 * PINIO_S3_ADDRESSING, else the profile's nested `s3 = addressing_style
 * = ...`: "path", "virtual" or "auto" (the default: see pinio__s3_sign()).
 * TLS trust: AWS_CA_BUNDLE, the profile's ca_bundle, else SSL_CERT_FILE
 * (a PEM file), and SSL_CERT_DIR (a hashed folder); verification is never
 * turned off.
 *
 * A missing file is an empty one; a profile that is named
 * (AWS_PROFILE/AWS_DEFAULT_PROFILE) but in neither file is -ENOENT naming
 * the profile and both files. A malformed file is #PINIO_EFORMAT with
 * diag->path the file and the line number in the message (never the
 * line's text, which may hold a secret). A half pair of keys is -EINVAL
 * naming which half is missing and where; SSO profiles and
 * credential_source are -ENOTSUP; a bad region, endpoint, flag or
 * addressing value is -EINVAL naming the variable or file; a CA file or
 * folder that is not there is -ENOENT. A configured source that fails is
 * its error, the message naming the source (creds.h).
 *
 * @param out receives the configuration on success (free it with
 *        pinio__s3_cfg_free()); set to NULL on failure, when nothing is owned.
 * @return 0, or a negative code with `diag` filled.
 */
int pinio__s3_cfg_load(pinio__s3_cfg **out, pinio_diag *diag);

/** Frees a configuration (its secrets are wiped first). NULL-safe. */
void pinio__s3_cfg_free(pinio__s3_cfg *cfg);

/** The signing region ("us-east-1"); owned by cfg. */
const char *pinio__s3_cfg_region(const pinio__s3_cfg *cfg);

/** The endpoint as scheme://host[:port] (lower-case scheme, no trailing
 *  slash, no user info, no path); owned by cfg. Contains no secret. */
const char *pinio__s3_cfg_endpoint(const pinio__s3_cfg *cfg);

/** true when requests go unsigned (AWS_NO_SIGN_REQUEST or no credentials). */
bool pinio__s3_cfg_anonymous(const pinio__s3_cfg *cfg);

/** Where the credentials came from, for a status line: "environment",
 *  "FILE [SECTION]", "web identity (...)", "container credentials (...)",
 *  "EC2 instance metadata (URL)", "credential_process (...)", "assume role
 *  (...)", "AWS_NO_SIGN_REQUEST" or "none". Owned by cfg; no secret. */
const char *pinio__s3_cfg_source(const pinio__s3_cfg *cfg);

/** The addressing style chosen by configuration: "auto", "path" or "virtual". */
const char *pinio__s3_cfg_addressing(const pinio__s3_cfg *cfg);

/**
 * A copy of the keys to sign with at `now`, fetched again first when they
 * are about to expire (see pinio__s3_creds_get()); thread-safe.
 * @param out zeroed (all NULL) when anonymous; free with pinio__s3_keys_clear().
 * @return 0, or a negative code with `diag` naming the source.
 */
int pinio__s3_cfg_keys(const pinio__s3_cfg *cfg, time_t now, pinio__s3_keys *out,
                       pinio_diag *diag);

/** The access key id's last 4 characters ("" when anonymous), for a status
 *  line: never more of it, never the secret. */
void pinio__s3_cfg_key_hint(const pinio__s3_cfg *cfg, char out[8]);

/** When the credentials held now expire (Unix seconds); 0: never, or anonymous. */
time_t pinio__s3_cfg_expiry(const pinio__s3_cfg *cfg);

/** The CA file and folder for TLS (CURLOPT_CAINFO, CURLOPT_CAPATH), NULL
 *  when libcurl's own apply; owned by cfg. */
const char *pinio__s3_cfg_cainfo(const pinio__s3_cfg *cfg);
const char *pinio__s3_cfg_capath(const pinio__s3_cfg *cfg);

#endif
