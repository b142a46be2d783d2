/* See stale.h: a directory scan for PATH<infix><digits><suffix>, and the
 * mark that says which boot and PID namespace wrote a temporary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
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

/* The writer's identity a mark records: the boot and the PID namespace. */
typedef struct writer_id {
    char boot[40];              /* /proc/sys/kernel/random/boot_id, a UUID */
    unsigned long long pidns;   /* inode of /proc/self/ns/pid */
} writer_id;

/* This process's identity; -errno when /proc cannot tell it (then nothing
 * can be proven, and nothing is marked or removed on that ground). */
static int self_id(writer_id *id)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) != 0)
        return -errno;
    id->pidns = (unsigned long long)st.st_ino;
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, id->boot, sizeof(id->boot) - 1);
    int e = n < 0 ? -errno : 0;
    close(fd);
    if (e || n < 32)
        return e ? e : -EIO;
    id->boot[n] = '\0';
    id->boot[strcspn(id->boot, "\n")] = '\0';
    return 0;
}

/* The mark's value: "boot=<uuid> pidns=<inode>". */
static int parse_mark(const char *v, writer_id *id)
{
    return sscanf(v, "boot=%36s pidns=%llu", id->boot, &id->pidns) == 2 ? 0 : -EINVAL;
}

int pinio__stale_mark(int fd, const char *mark)
{
    writer_id me;
    int rc = self_id(&me);
    if (rc < 0)
        return rc;
    char v[96];
    int n = snprintf(v, sizeof(v), "boot=%s pidns=%llu", me.boot, me.pidns);
    return fsetxattr(fd, mark, v, (size_t)n, 0) == 0 ? 0 : -errno;
}

/* Whether the writer of a temporary named with `pid` and marked `v` is gone. */
static bool writer_gone(const char *v, long pid, const writer_id *me)
{
    writer_id w;
    if (parse_mark(v, &w) < 0)
        return false;                /* older mark: which namespace is unknown */
    if (strcmp(w.boot, me->boot) != 0)
        return true;                 /* written before a reboot */
    if (w.pidns != me->pidns)
        return false;                /* its pid means nothing to kill() here */
    return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

unsigned pinio__remove_stale(const char *path, const char *infix, const char *suffix,
                             const char *mark)
{
    writer_id me;
    if (self_id(&me) < 0)
        return 0;
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
        if (pid <= 0)
            continue;
        /* O_NOFOLLOW | O_NONBLOCK: only a regular file, never what a link
         * names, and never a wait on a FIFO. */
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        char v[128];
        ssize_t vn = -1;
        bool stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                     now - st.st_mtime >= PINIO__STALE_AGE_S &&
                     (vn = fgetxattr(fd, mark, v, sizeof(v) - 1)) >= 0;
        close(fd);
        if (stale) {
            v[vn] = '\0';
            stale = writer_gone(v, pid, &me);
        }
        if (stale && unlinkat(dfd, e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
