/* The streaming side of the pinio command: `pinio load --device` and the
 * staging option it shares with `pinio stage`. */
#ifndef PINIO_CLI_STREAM_H
#define PINIO_CLI_STREAM_H

#include <stdbool.h>

#include "pinio/stream.h"
#include "jw.h"

/** Parses --staging SIZE[xK] ("32M", "32Mx4") into o->slot_size/slots.
 *  @return 0, or -EINVAL (malformed) / -ERANGE (out of the ring's limits). */
int cli_parse_staging(const char *s, pinio_stream_opts *o);

/** Where `pinio load --device` sends the tensors. */
typedef struct cli_device {
    bool set;
    bool host;               /**< "host": the host sink (bounded memory, bytes counted) */
    bool hip;                /**< "hip:...": AMD through HIP, else CUDA */
    int index;               /**< "cuda:N", "hip:N": ordinal */
    const char *pci;         /**< "cuda:0000:65:00.0": by PCI bus id */
    bool local;              /**< "cuda:local", "hip:local" (--mpi tp): the rank's index on
                                  its machine, modulo the machine's devices */
} cli_device;

/** Parses host, cuda:N, cuda:BUSID, cuda:local, hip:N, hip:BUSID or hip:local.
 *  @return 0 or -EINVAL. */
int cli_parse_device(const char *s, cli_device *d);

/** The digests a verified stream hands out (pinio_stream_opts.sha256_fn),
 *  kept for the summary. */
typedef struct cli_shas {
    size_t n;
    char (*hex)[65];
    char **path;
    bool lost;               /**< out of memory: some digests were not kept */
} cli_shas;

/** Points o->sha256_fn at `s` (zeroed by the caller) when o->verify. */
void cli_shas_hook(pinio_stream_opts *o, cli_shas *s);
/** JSON members "verified", "verify_s", "verify_*_bytes", "digests_complete"
 *  and "digests": [{"path", "sha256"}] (doc/json/SCHEMA.md). */
void cli_shas_json(jw *w, const cli_shas *s, const pinio_stream_report *r);
/** Starts the JSON object of `pinio load` on stdout: the fixed keys,
 *  "kind" (resident, stream, mpi) and "inputs" (the PATHs). */
void cli_load_json_begin(jw *w, const char *kind, const char *const *paths, size_t n);

/** The JSON members load --device and stage share: counts, bytes, times,
 *  the ring, "io_path", and "ready_s": `ready_s`, the seconds from the
 *  pinio_stream() call until it returned (every tensor in its sink, every
 *  staged file in place), measured by the caller around the call. */
void cli_stream_json(jw *w, const pinio_stream_report *r, double ready_s);
/** The summary lines `sha256    HEX  PATH` and `verify    ...`, as pinio load
 *  --verify prints them; nothing when the stream was not verified. */
void cli_shas_text(const cli_shas *s, const pinio_stream_report *r);
void cli_shas_free(cli_shas *s);
/** Whether `s` is 64 hex digits (a --sha256 argument). */
bool cli_is_sha256(const char *s);

/** Streams `paths` to the device and prints the summary (text or JSON).
 *  @return the exit status: 0, or 1 with one line on stderr (and, with
 *  `json`, the error object on stdout). */
int cli_stream_load(const char *const *paths, size_t n, const pinio_stream_opts *o,
                    const cli_device *d, bool json, bool quiet, unsigned progress_flags);

/** The keys of a split load's "split" object (doc/json/SCHEMA.md) that the
 *  resident and the streamed load share: rank, world, rules[], the counts. */
void cli_split_json(jw *w, const pinio_split_rule *rules, size_t n, uint32_t rank, uint32_t world,
                    size_t sliced, size_t strided, uint64_t full_bytes, uint64_t hole_bytes);

/** The JSON "rules" key of a --split load (resident, streamed or --mpi tp):
 *  one `{pattern, dim}` per rule, `dim` null for a rule that keeps its
 *  tensors whole. */
void cli_split_rules_json(jw *w, const pinio_split_rule *rules, size_t n);

#endif
