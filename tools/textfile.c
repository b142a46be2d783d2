/* Small text files a user names: see textfile.h. Kept free of libpinio so
 * that the job-file parser's unit test and fuzz target link it alone. */
#include "textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_text_read(const char *path, size_t max, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    /* O_NONBLOCK: open() of a FIFO that no program writes to waits for a
     * writer forever. Cleared once open: a pipe with a writer ("sha256sum
     * ... | pinio ... /dev/stdin") is then read to its end, and one without
     * reads as empty. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat sb;
    int rc = fstat(fd, &sb) < 0 ? -errno
             : S_ISDIR(sb.st_mode) ? -EISDIR
             : !S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode) ? -EINVAL
             : 0;
    int fl = rc ? -1 : fcntl(fd, F_GETFL);
    if (!rc && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0))
        rc = -errno;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    while (!rc) {
        if (cap - n < 4096 + 1) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = cap > max + 1 ? NULL : realloc(buf, ncap);
            if (!nb) {
                rc = cap > max + 1 ? -EFBIG : -ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = -errno;
        else if (k == 0)
            break;
        else if ((n += (size_t)k) > max)
            rc = -EFBIG;
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    if (!buf && !(buf = malloc(1)))
        return -ENOMEM;
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}
