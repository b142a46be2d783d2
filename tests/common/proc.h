/* Test helper: what /proc says about this process, for tests that check a
 * loop leaves no growth behind (descriptors, resident, locked and pinned
 * memory). Both return -1 when /proc cannot be read. */
#ifndef PINIO_TESTS_COMMON_PROC_H
#define PINIO_TESTS_COMMON_PROC_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open file descriptors (the directory's own included: compare counts). */
static inline long t_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* A "VmRSS:" / "VmPin:" / "VmLck:" value of /proc/self/status, in KiB. */
static inline long t_status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k))
            v = strtol(line + k, NULL, 10);
    fclose(f);
    return v;
}

#endif
