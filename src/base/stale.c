/* See stale.h: a directory scan for PATH<infix><digits><suffix>. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "src/base/stale.h"

/* The pid in `name` when it is `base infix digits suffix`, else 0. */
static long pid_in(const char *name, const char *base, const char *infix, const char *suffix)
{
    size_t bl = strlen(base), il = strlen(infix), sl = strlen(suffix), nl = strlen(name);
    if (nl <= bl + il + sl || memcmp(name, base, bl) || memcmp(name + bl, infix, il) ||
        memcmp(name + nl - sl, suffix, sl))
        return 0;
    long pid = 0;
    for (size_t i = bl + il; i < nl - sl; i++) {
        if (name[i] < '0' || name[i] > '9' || pid > 100000000)
            return 0;
        pid = pid * 10 + (name[i] - '0');
    }
    return pid;
}

unsigned pinio__remove_stale(const char *path, const char *infix, const char *suffix,
                             const char *mark)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
    if (!dir)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    unsigned removed = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = pid_in(e->d_name, base, infix, suffix);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        /* O_NOFOLLOW | O_NONBLOCK: only a regular file, never what a link
         * names, and never a wait on a FIFO. */
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        char v[4];
        bool stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                     now - st.st_mtime >= PINIO__STALE_AGE_S &&
                     fgetxattr(fd, mark, v, sizeof v) >= 0;
        close(fd);
        if (stale && unlinkat(dfd, e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
