/* The C path of a split load, for the Python test (tests/python/test_split.py):
 *   split_dump OUT RANK WORLD PATH PATTERN=DIM...
 * loads PATH with the split rules (DIM an integer or "whole") as rank RANK
 * of WORLD and saves every loaded tensor, as it landed (the slices, with
 * their shapes), to the safetensors file OUT. Exit 0, or 1 with the
 * library's message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinio/load.h"
#include "pinio/save.h"

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: split_dump OUT RANK WORLD PATH PATTERN=DIM...\n");
        return 2;
    }
    size_t nrules = (size_t)argc - 5;
    pinio_split_rule *rules = calloc(nrules ? nrules : 1, sizeof(*rules));
    for (size_t i = 0; i < nrules; i++) {
        char *eq = strrchr(argv[5 + i], '=');
        if (!eq) {
            fprintf(stderr, "split_dump: '%s' is not PATTERN=DIM\n", argv[5 + i]);
            return 2;
        }
        *eq = '\0';
        rules[i].pattern = argv[5 + i];
        rules[i].dim = strcmp(eq + 1, "whole") ? atoi(eq + 1) : PINIO_SPLIT_WHOLE;
    }
    pinio_load_opts o;
    pinio_load_opts_default(&o);
    o.split = rules;
    o.nsplit = nrules;
    o.rank = (uint32_t)strtoul(argv[2], NULL, 10);
    o.world = (uint32_t)strtoul(argv[3], NULL, 10);
    const char *paths[] = { argv[4] };
    pinio_checkpoint *cp = NULL;
    pinio_diag d = { 0 };
    int rc = pinio_load(paths, 1, &o, &cp, &d);
    if (rc == 0) {
        size_t n = pinio_checkpoint_count(cp);
        pinio_save_tensor *ts = calloc(n ? n : 1, sizeof(*ts));
        for (size_t i = 0; i < n; i++) {
            const pinio_tensor *t = pinio_checkpoint_tensor(cp, i);
            ts[i] = (pinio_save_tensor){ .name = t->name, .dtype = t->dtype, .rank = t->rank,
                                         .shape = t->shape, .data = t->data,
                                         .nbytes = t->nbytes };
        }
        pinio_save_opts so;
        pinio_save_opts_default(&so);
        so.no_sync = true;
        rc = pinio_save(argv[1], ts, n, &so, NULL, &d);
        free(ts);
        pinio_checkpoint_release(cp);
    }
    free(rules);
    if (rc < 0) {
        fprintf(stderr, "split_dump: %s\n", d.msg);
        return 1;
    }
    return 0;
}
