/* libFuzzer target for the safetensors header parser. The input is a whole
 * file image; it is parsed from memory with its own length as the file size,
 * then with a larger file size (so rules 6-7 see data past the header), and
 * every accessor is walked so a bad table would crash here. Build with clang:
 * meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 * && ninja -C build-fuzz tests/st/fuzz_st_header. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pinio/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const pinio_st *st)
{
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < pinio_st_count(st); i++) {
        const pinio_st_tensor *t = pinio_st_at(st, i);
        for (unsigned d = 0; d < t->rank; d++)
            sink += t->shape[d];
        sink += (uint64_t)t->name[t->name_len]; /* NUL-terminated */
        if (pinio_st_find(st, t->name, t->name_len) != t)
            __builtin_trap();
        if (pinio_st_position(st, t) != i)
            __builtin_trap();
    }
    for (size_t i = 0; i < pinio_st_metadata_count(st); i++)
        sink += strlen(pinio_st_metadata_at(st, i)->value);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pinio_diag d;
    pinio_st *st;
    unsigned flags[] = {0, PINIO_ST_REJECT_UNKNOWN_FIELDS | PINIO_ST_ALLOW_TRAILING_BYTES};
    for (int i = 0; i < 2; i++) {
        if (pinio_st_parse(&st, data, size, size + (uint64_t)i * 4096, "fuzz", flags[i], &d) == 0) {
            walk(st);
            pinio_st_free(st);
        } else if (strchr(d.msg, '\n')) {
            __builtin_trap(); /* diagnostics are one line */
        }
    }
    return 0;
}
