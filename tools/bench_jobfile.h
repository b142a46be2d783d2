/* bench_jobfile: fio INI job files for `pinio bench FILE.fio`.
 *
 * The subset of fio's job-file syntax that maps onto pinio bench's options,
 * turned into argument vectors in pinio's spelling, so that a simple fio job
 * file runs as is and a storage engineer never has to translate by hand.
 * What it cannot map is refused with "FILE:LINE: option 'X' is not supported
 * by pinio bench": a key silently dropped would make the run measure
 * something else than the file says.
 *
 * Syntax (as fio reads it): sections "[name]"; "[global]" sets defaults for
 * the job sections after it (several [global] sections each affect only the
 * jobs below them); "key=value" or a bare "flag" (a bool set to 1); blanks
 * around keys and values; ';' or '#' start a comment, also after a value.
 * Not supported: include directives and $VAR / ${VAR} expansion.
 *
 * Values follow fio, not pinio: sizes take fio's suffixes with kb_base=1024
 * by default (4k = 4096, and, in fio's compatibility mode, 4KiB = 4000;
 * kb_base=1000 swaps them); times are seconds unless suffixed (us, ms, s, m,
 * h, d), thinktime microseconds. Sizes and times are written out as plain
 * numbers (bytes, seconds) in the argument vectors, so pinio's own suffix
 * rules never apply to them.
 *
 * fio's defaults differ from pinio's and are written out so the job runs as
 * fio would run it: bs=4k, iodepth=1, rw=read, direct=0 and invalidate=1
 * (the file's pages dropped first: "--cache cold"). pinio's engine choices
 * (registered buffers, batching) are kept: they change the cost of an I/O,
 * not the workload.
 *
 * The mapping, fio key -> pinio option:
 *   rw, readwrite           --rw (readwrite -> rw)
 *   rwmixread, rwmixwrite   --rwmixread N (rwmixwrite=N -> 100-N)
 *   bs, blocksize           --bs BYTES
 *   bsrange                 --bsrange A-B   (bytes)
 *   bssplit                 --bssplit A/P:B/P (bytes; blank shares filled in as fio does)
 *   blockalign, ba          --blockalign BYTES
 *   iodepth                 --qd N
 *   numjobs                 --jobs N --jobs-share whole (each clone over the whole region)
 *   size, offset, io_size   --size, --offset, --io-size BYTES
 *   loops                   --loops N
 *   filename (a:b), directory + nrfiles   --file a,b (each DIR/name; with nrfiles
 *                           and no filename, DIR/JOBNAME.0.N, as fio names them)
 *   file_service_type       --file-service-type roundrobin|sequential|random[:N]
 *   filesize                --filesize BYTES (one size, not a range)
 *   direct, buffered        --direct on|off
 *   invalidate              --cache cold when 1 (fio's default)
 *   runtime (+ time_based)  --time SECONDS (pinio's --time always loops)
 *   ramp_time, startdelay   --ramp-time, --startdelay SECONDS
 *   rate, rate_iops         --rate BYTES, --rate-iops N (per job)
 *   thinktime               --thinktime USEC
 *   random_distribution     --random-distribution
 *   norandommap             --norandommap
 *   verify                  --verify=pattern|crc32c|sha256 (crc32c-intel -> crc32c)
 *   verify_only             --verify-only
 *   randseed                --seed N
 *   group_reporting         --group-reporting
 *   percentile_list         --percentile-list
 *   write_bw_log, write_iops_log, write_lat_log, log_avg_msec
 *                           --log-file PREFIX.N.csv --log-interval MS (one log
 *                           holds bandwidth, IOPS and latency; N is the job's
 *                           index from 1, as in fio's PREFIX_bw.N.log)
 *   fixedbufs, registerfiles, sqthread_poll, hipri   --fixed, --regfiles, --sqpoll, --iopoll
 *   stonewall, wait_for_previous   start a new group
 *   ioengine                io_uring; libaio, psync, sync, pvsync, pvsync2,
 *                           posixaio, vsync: accepted with a note (runs with io_uring)
 * Accepted with a note, no effect: name, description, thread, randrepeat,
 * new_group, kb_base (it does change how sizes read), clat_percentiles,
 * lat_percentiles. Everything else is an error. */
#ifndef PINIO_TOOLS_BENCH_JOBFILE_H
#define PINIO_TOOLS_BENCH_JOBFILE_H

#include <stddef.h>

/** One job section: the pinio bench command line it stands for. */
typedef struct bench_job {
    char *name;   /* the section's name */
    unsigned group; /* jobs with the same group run concurrently, groups in order */
    int argc;
    char **argv;  /* argv[0] = "bench", then options, e.g. "--qd", "32"; argv[argc] = NULL */
} bench_job;

typedef struct bench_jobfile {
    bench_job *jobs;
    size_t njobs;
    unsigned ngroups; /* groups are 0 .. ngroups-1; stonewall starts the next */
    char **notes;     /* "FILE:LINE: ..." for keys accepted with a caveat, once each */
    size_t nnotes;
} bench_jobfile;

/**
 * Reads the fio job file at `path` into `out` ([global] keys inherited by
 * each job section after them, the job's own keys overriding).
 * @return 0 (`out` owned by the caller: bench_jobfile_free()), or a negative
 *         errno with `err` = "FILE:LINE: what" (or "FILE: what" for I/O errors)
 *         and `out` left empty: -ENOTSUP for an option pinio bench does not
 *         have, -EINVAL for bad syntax or a bad value, -ENOENT etc. from
 *         opening the file, -ENOMEM.
 */
int bench_jobfile_parse(const char *path, bench_jobfile *out, char *err, size_t errlen);

/** Frees what bench_jobfile_parse() filled in; `jf` is left empty. NULL is a no-op. */
void bench_jobfile_free(bench_jobfile *jf);

#endif
