/* The PINIO_FAULTS hook (grammar in include/pinio/ring.h), shared by the
 * engine and the benchmark: the uring layer's library-internal interface for
 * the layers below it. Not installed. */
#ifndef PINIO_URING_FAULTS_H
#define PINIO_URING_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinio/common.h"

/* ---- fault injection (faults.c) ---------------------------------------- */

enum pinio__fault_kind {
    PINIO__F_EIO,
    PINIO__F_SHORT,
    PINIO__F_EAGAIN,
    PINIO__F_EINTR,
    PINIO__F_CORRUPT, /* flip a byte of the completed buffer (pinio__faults_completion_buf) */
};

typedef struct pinio__fault_rule {
    enum pinio__fault_kind kind;
    uint64_t first; /* 1-based completion number */
    uint64_t count;
} pinio__fault_rule;

typedef struct pinio__faults {
    pinio__fault_rule rules[16];
    unsigned nrules;
    uint64_t completions; /* completions consumed so far */
    uint64_t rng;         /* xorshift state, from seed */
    double rate;
    bool dioinval;
    bool regnomem;
    bool sparseinval; /* the sparse buffer table refused (a kernel before 5.19) */
    bool setupnosys;
    unsigned setupinval; /* IORING_SETUP_* flags that "the kernel" refuses */
    bool trimnotsup;   /* bench's trim probe: -EOPNOTSUPP (no hole punching/discard) */
    bool nodiscardcmd; /* bench: no io_uring block discard command (a kernel before 6.12) */
    /* The file sink (pinio stage), 1-based, 0 = none: */
    uint64_t stagecorrupt; /* the N-th file it copies gets one byte flipped on disk */
    uint64_t stagerename;  /* its N-th rename while publishing fails with -EIO */
    bool stagewritehold;   /* its first write from a reused slot held until a read lands
                            * that the stream fetched meanwhile (else the stage fails) */
} pinio__faults;

/* Parses `spec`; 0 or -EINVAL with `diag` naming the bad item. *out is
 * malloc'ed (caller frees) only on success with a non-empty spec, else NULL. */
int pinio__faults_parse(const char *spec, pinio__faults **out, pinio_diag *diag);

/* Rewrites the result `res` of a completion of `len` bytes. Called only when
 * faults are active. Returns the (possibly) rewritten result. */
int pinio__faults_completion(pinio__faults *f, int res, size_t len);

/* The same, for a caller that has the completed buffer at hand: a
 * `corrupt@N` rule flips one byte of `buf` (within the `res` bytes read) and
 * leaves `res` alone. The read engine and pinio_bench use it; without a
 * buffer (the variant above) `corrupt@` rules only count. */
int pinio__faults_completion_buf(pinio__faults *f, int res, void *buf, size_t len);

#endif
