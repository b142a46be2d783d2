/*
 * The credential sources of the AWS credential chain that pinio fetches
 * (src/s3/config.c picks which one, in botocore's order): static keys, a
 * credential_process, STS AssumeRoleWithWebIdentity and AssumeRole, IAM
 * Identity Center (SSO: GetRoleCredentials with the AWS CLI's cached
 * token), the container credentials endpoint (ECS, EKS Pod Identity) and
 * the EC2 instance metadata service (IMDSv2); each holds its current keys
 * and fetches new ones before they expire.
 *
 * Library-internal (not installed). No function here prints; no message
 * or diagnostic contains a secret key, a session token or a web identity
 * token. Every failure names the source ("web identity
 * (AWS_WEB_IDENTITY_TOKEN_FILE=/path): STS answered 403 InvalidIdentityToken").
 */
#ifndef PINIO_SRC_S3_CREDS_H
#define PINIO_SRC_S3_CREDS_H

#include <stdbool.h>
#include <time.h>

#include "pinio/common.h"

/** A source and its current keys; thread-safe (a mutex guards the keys). */
typedef struct pinio__s3_creds pinio__s3_creds;

enum pinio__s3_creds_kind {
    PINIO__S3_CREDS_STATIC,       /**< access_key, secret_key, session_token */
    PINIO__S3_CREDS_PROCESS,      /**< command */
    PINIO__S3_CREDS_WEB_IDENTITY, /**< role_arn, session_name, token_file, sts_* */
    PINIO__S3_CREDS_ASSUME_ROLE,  /**< role_arn, session_name, external_id, sts_*, base */
    PINIO__S3_CREDS_CONTAINER,    /**< url, auth_token, auth_token_file */
    PINIO__S3_CREDS_IMDS,         /**< url (the service's base URL) */
    /** url (the SSO portal's scheme://host[:port]), sso_role, sso_account,
     *  sso_cache_dir, sso_key (the sso_session's name, or the legacy
     *  sso_start_url: the cached token is SSO_CACHE_DIR/SHA1(KEY).json);
     *  for an sso_session also sso_oidc_url (SSO OIDC's scheme://host[:port]),
     *  sso_start_url and sso_region: a cached token within 15 minutes of its
     *  expiry is refreshed there (CreateToken, grant refresh_token) and the
     *  cache file rewritten (botocore's SSOTokenProvider); sso_oidc_url NULL
     *  (the legacy form): never refreshed */
    PINIO__S3_CREDS_SSO,
};

/** What a source needs; strings are copied, NULL when not used. */
typedef struct pinio__s3_creds_spec {
    enum pinio__s3_creds_kind kind;
    /** Names the source in messages and status lines, never a secret:
     *  "environment", "FILE [SECTION]", "web identity (AWS_ROLE_ARN=...)". */
    const char *source;
    const char *access_key, *secret_key, *session_token;
    const char *command;
    const char *role_arn, *session_name, *external_id, *token_file;
    const char *sts_url;    /**< scheme://host[:port] of STS */
    const char *sts_region; /**< AssumeRole's signing region */
    unsigned duration_s;    /**< 0: STS's default */
    const char *url, *auth_token, *auth_token_file;
    const char *sso_role, *sso_account, *sso_cache_dir, *sso_key;
    const char *sso_oidc_url, *sso_start_url, *sso_region;
    const char *cainfo, *capath; /**< CURLOPT_CAINFO / CAPATH for https, NULL: libcurl's */
    /** ASSUME_ROLE: the source profile's credentials; taken over by
     *  pinio__s3_creds_open() whatever it returns. */
    pinio__s3_creds *base;
} pinio__s3_creds_spec;

/** A copy of the keys to sign with (free with pinio__s3_keys_clear()). */
typedef struct pinio__s3_keys {
    char *access_key, *secret_key, *session_token; /**< token NULL when none */
} pinio__s3_keys;

/**
 * Builds the source and fetches its first keys.
 * @param out receives the source (free with pinio__s3_creds_free()); NULL on
 *        failure and when it returns 1.
 * @return 0; 1 for IMDS when no instance metadata service answers (not on
 *         EC2: the chain goes on, botocore's way); else a negative code with
 *         `diag` naming the source (-EACCES refused, -EPROTO a malformed
 *         answer, -ENOENT a missing token file, -EKEYEXPIRED an SSO token
 *         past its time that could not be refreshed (the message says to
 *         run `aws sso login` and why the refresh failed), -EIO
 *         unreachable, -EINVAL a bad setting, -ENOMEM).
 */
int pinio__s3_creds_open(pinio__s3_creds **out, const pinio__s3_creds_spec *spec,
                         pinio_diag *diag);

/** Frees a source, its keys wiped first. NULL-safe. */
void pinio__s3_creds_free(pinio__s3_creds *c);

/**
 * The keys to sign with at `now`. Keys that expire are fetched again once
 * fewer than 15 minutes are left (botocore's advisory window: a failure
 * then keeps the old keys) and must be by 10 minutes (its mandatory one: a
 * failure then is the error). Safe from several threads: one fetches, the
 * others wait for it.
 * @param out filled on success; zeroed on failure.
 * @return 0, or a negative code with `diag` naming the source.
 */
int pinio__s3_creds_get(pinio__s3_creds *c, time_t now, pinio__s3_keys *out, pinio_diag *diag);

/** Wipes and frees the copy's strings; NULL-safe, idempotent. */
void pinio__s3_keys_clear(pinio__s3_keys *k);

/** The source's name (the spec's `source`); owned by c. */
const char *pinio__s3_creds_source(const pinio__s3_creds *c);

/** How many times keys were fetched (1 after open; static keys: 0). */
unsigned pinio__s3_creds_fetches(pinio__s3_creds *c);

/** When the current keys expire (0: never). */
time_t pinio__s3_creds_expiry(pinio__s3_creds *c);

/**
 * Splits a credential_process command line the way Python's shlex.split
 * (POSIX mode, what botocore uses) does: blanks separate words, '...'
 * keeps everything, "..." keeps all but \" \\ \$ \` escapes, a backslash
 * outside quotes escapes the next character.
 * @param argv receives a NULL-terminated array (free each and it), NULL on failure.
 * @return the number of words, or -EINVAL (an open quote, an empty command) / -ENOMEM.
 */
int pinio__s3_split_command(const char *cmd, char ***argv);

#endif
