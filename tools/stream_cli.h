/* The streaming side of the pinio command: the staging option. */
#ifndef PINIO_CLI_STREAM_H
#define PINIO_CLI_STREAM_H

#include "pinio/stream.h"

/** Parses --staging SIZE[xK] ("32M", "32Mx4") into o->slot_size/slots.
 *  @return 0, or -EINVAL (malformed) / -ERANGE (out of the ring's limits). */
int cli_parse_staging(const char *s, pinio_stream_opts *o);

#endif
