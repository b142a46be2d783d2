/* libFuzzer target for the index-file parser (model.safetensors.index.json).
 * The input is a whole index image, parsed as if read from a file next to its
 * shards (nothing is opened). A parse must either succeed with no more
 * distinct shards than weight_map entries (every shard is named by an entry),
 * or fail with PINIO_EFORMAT and a one-line diagnostic naming the file.
 * Allocation failures (-ENOMEM) are not expected at fuzzing sizes.
 * Run: scripts/fuzz index SECONDS. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/load/load_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pinio_diag d = { 0 };
    size_t nt = 0, ns = 0;
    int rc = pinio__index_parse_buffer("fz/model.safetensors.index.json", (const char *)data, size,
                                       &nt, &ns, &d);
    if (rc == 0) {
        if (ns > nt)
            __builtin_trap();
    } else if (rc != PINIO_EFORMAT || strchr(d.msg, '\n') || strncmp(d.msg, "fz/", 3) != 0) {
        __builtin_trap();
    }
    return 0;
}
