/* The streaming side of the pinio command (public API only). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stream_cli.h"
#include "util.h"

int cli_parse_staging(const char *s, pinio_stream_opts *o)
{
    char buf[64];
    if (strlen(s) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, s);
    char *x = strchr(buf, 'x');
    uint64_t size, k = o->slots;
    if (x)
        *x = '\0';
    if (cli_parse_size(buf, &size) < 0 || (x && cli_parse_u64(x + 1, &k) < 0))
        return -EINVAL;
    if (size < (64u << 10) || size > (1u << 30) || (size & (size - 1)) || k < 2 || k > 1024)
        return -ERANGE;
    o->slot_size = (size_t)size;
    o->slots = (unsigned)k;
    return 0;
}
