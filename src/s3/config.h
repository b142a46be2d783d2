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

#include "pinio/common.h"

/** Credentials and addressing; opaque, immutable once loaded (so one may
 *  be shared by threads that only read it). */
typedef struct pinio__s3_cfg pinio__s3_cfg;

/**
 * Reads the configuration from the environment and the AWS files.
 *
 * Credentials, first found wins: AWS_NO_SIGN_REQUEST=true (anonymous);
 * AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN);
 * the profile (AWS_DEFAULT_PROFILE, AWS_PROFILE, else "default", in
 * botocore's order) in AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials
 * (section "[NAME]"), then in AWS_CONFIG_FILE or ~/.aws/config (section
 * "[profile NAME]", or "[default]"): aws_access_key_id,
 * aws_secret_access_key, aws_session_token. No credentials at all:
 * anonymous (no Authorization header), for public buckets.
 *
 * Region: AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`, else
 * "us-east-1". Endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the
 * `[services NAME]` section the profile's `services` names (its nested
 * `s3 = endpoint_url = ...`), the profile's `endpoint_url`, else https://s3.REGION.amazonaws.com (.com.cn in the cn-
 * regions). Addressing: PINIO_S3_ADDRESSING, else the profile's nested
 * `s3 = addressing_style = ...`: "path", "virtual" or "auto" (the default:
 * see pinio__s3_sign()).
 *
 * A missing file is an empty one; a profile that is named
 * (AWS_PROFILE/AWS_DEFAULT_PROFILE) but in neither file is -ENOENT naming
 * the profile and both files. A malformed file is #PINIO_EFORMAT with
 * diag->path the file and the line number in the message (never the
 * line's text, which may hold a secret). A half pair of keys is -EINVAL
 * naming which half is missing and where; a profile that gets credentials
 * another way (role_arn, credential_process, sso_*) without static keys is
 * -ENOTSUP; a bad region, endpoint or addressing value is -EINVAL naming
 * the variable or file.
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
 *  "FILE [SECTION]", "AWS_NO_SIGN_REQUEST" or "none". Owned by cfg; no secret. */
const char *pinio__s3_cfg_source(const pinio__s3_cfg *cfg);

/** The addressing style chosen by configuration: "auto", "path" or "virtual". */
const char *pinio__s3_cfg_addressing(const pinio__s3_cfg *cfg);

#endif
