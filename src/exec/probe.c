/* probe.c — event recording for the measured timeline. */
#include "exec/probe.h"

#include <stdlib.h>
#include <string.h>

void mp_probe_init(mp_probe *p, const mp_backend *be, int rank)
{
    memset(p, 0, sizeof *p);
    p->be = be;
    p->rank = rank;
    p->microbatch = -1;
    p->chunk = -1;
    p->kill_step = -1;
}

void mp_probe_free(mp_probe *p)
{
    free(p->events);
    p->events = NULL;
    p->n = p->cap = 0;
}

void mp_probe_record(mp_probe *p, double start, mp_stream stream, mp_event_kind kind,
                     bool per_microbatch)
{
    if (!p || !p->recording || p->oom)
        return;
    double end = p->be->now();
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        mp_event *e = realloc(p->events, cap * sizeof *e);
        if (!e) {
            p->oom = true; /* timings are a by-product: the run goes on without them */
            return;
        }
        p->events = e;
        p->cap = cap;
    }
    p->events[p->n++] = (mp_event){
        .start = start - p->t0,
        .end = end - p->t0,
        .rank = p->rank,
        .stream = (uint8_t)stream,
        .kind = (uint8_t)kind,
        .microbatch = per_microbatch ? p->microbatch : -1,
        .chunk = per_microbatch ? p->chunk : -1,
    };
}

bool mp_probe_drops(const mp_probe *p, const char *site)
{
    return p && p->drop_site && !strcmp(p->drop_site, site);
}
