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
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(*vars); i++)
        unsetenv(vars[i]);
    /* No file unless a test writes one. */
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/pinio-s3-credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/pinio-s3-config", 1);
}

#endif
