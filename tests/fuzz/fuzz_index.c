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

#include "pinio/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pinio_diag d = { 0 };
    pinio_st_index *ix = NULL;
    int rc = pinio_st_index_parse(&ix, data, size, "fz/model.safetensors.index.json", &d);
    if (rc == 0) {
        size_t nt = pinio_st_index_count(ix), ns = pinio_st_index_shard_count(ix);
        if (ns > nt || nt == 0)
            __builtin_trap();
        /* Every entry is found by its own name and names a shard that exists. */
        for (size_t i = 0; i < nt; i++) {
            const pinio_st_index_entry *e = pinio_st_index_at(ix, i);
            if (pinio_st_index_find(ix, e->name, e->name_len) != e || e->shard >= ns ||
                strncmp(pinio_st_index_shard(ix, e->shard), "fz/", 3) != 0)
                __builtin_trap();
        }
        pinio_st_index_free(ix);
    } else if (ix || rc != PINIO_EFORMAT || strchr(d.msg, '\n') || strncmp(d.msg, "fz/", 3) != 0) {
        __builtin_trap();
    }
    return 0;
}
