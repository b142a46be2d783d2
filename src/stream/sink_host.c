/*
 * The host sink: the caller's function per tensor fragment. The slot is
 * free again as soon as the function returns, so the stream needs no
 * slot_wait: a caller that wants the bytes later copies them.
 */
#include <errno.h>

#include "pinio/sink.h"

typedef struct host {
    pinio_sink_host_cfg cfg;
    const pinio_plan *plan;
} host;

static int host_open(void *priv, const void *cfg, const pinio_sink_setup *s, pinio_diag *diag)
{
    host *h = priv;
    const pinio_sink_host_cfg *c = cfg;
    if (!c || !c->fn) {
        pinio_diag_set(diag, -EINVAL, "host sink: no callback (pinio_sink_host_cfg.fn)");
        return -EINVAL;
    }
    h->cfg = *c;
    h->plan = s->plan;
    return 0;
}

static int host_chunk(void *priv, const pinio_sink_chunk *c, pinio_diag *diag)
{
    host *h = priv;
    size_t cur = 0;
    pinio_sink_fragment f;
    while (pinio_sink_next_fragment(h->plan, c, &cur, &f)) {
        int rc = h->cfg.fn(h->cfg.ctx, &f);
        if (rc < 0) {
            pinio_diag_set(diag, rc, "host sink: the callback stopped at tensor '%s' offset %llu: %s",
                           f.t->name, (unsigned long long)f.offset, pinio_strerror(rc));
            return rc;
        }
    }
    return 0;
}

const pinio_sink pinio_sink_host = {
    .name = "host",
    .description = "a callback per tensor fragment (tensor, offset in tensor, bytes)",
    .priv_size = sizeof(host),
    .open = host_open,
    .chunk = host_chunk,
};
