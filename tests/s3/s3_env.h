/* The s3 tests' environment: every variable the S3 configuration reads,
 * unset, so that a developer's own AWS setup never leaks into a test (each
 * Criterion test runs in its own process, so changes stay in that test). */
#ifndef PINIO_TESTS_S3_ENV_H
#define PINIO_TESTS_S3_ENV_H

#include <stdlib.h>

static inline void s3_env_clear(void)
{
    static const char *vars[] = {
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
        "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_NO_SIGN_REQUEST", "PINIO_S3_ADDRESSING",
        "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME",
        "AWS_ENDPOINT_URL_STS", "AWS_STS_REGIONAL_ENDPOINTS", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "AWS_USE_FIPS_ENDPOINT",
        "AWS_USE_DUALSTACK_ENDPOINT", "AWS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++)
        unsetenv(vars[i]);
    /* The machine's instance metadata (on EC2) must not answer a test. */
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    /* No file unless a test writes one. */
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/pinio-s3-credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/pinio-s3-config", 1);
}

#endif
