/* CHECK for the plain test executables (those that also run under
 * ThreadSanitizer, where Criterion cannot): a failed condition is printed
 * with its file and line and counted in t_failures, and the test goes on;
 * main() turns t_failures into the exit status. */
#ifndef PINIO_TESTS_COMMON_CHECK_H
#define PINIO_TESTS_COMMON_CHECK_H

#include <stdio.h>

static int t_failures;

#define CHECK(c, ...)                                                    \
    do {                                                                 \
        if (!(c)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                \
            fputc('\n', stderr);                                         \
            t_failures++;                                                \
        }                                                                \
    } while (0)

#endif
