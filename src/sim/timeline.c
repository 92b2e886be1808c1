/* timeline.c — the event list shared by the simulator (predicted) and the
 * executor (measured), and the names both use for streams and events. */
#include "sim/timeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mp_stream_name(mp_stream s)
{
    static const char *const names[MP_STREAM_COUNT] = {"compute", "tp", "cp",
                                                       "pp-send", "pp-recv", "dp", "ep"};
    return (unsigned)s < MP_STREAM_COUNT ? names[s] : "?";
}

const char *mp_event_kind_name(mp_event_kind k)
{
    static const char *const names[MP_EV_KIND_COUNT] = {
        "F", "B", "W", "R", "send-fwd", "recv-fwd", "send-bwd", "recv-bwd",
        "tp", "cp", "dp", "optimizer", "other", "ep"};
    return (unsigned)k < MP_EV_KIND_COUNT ? names[k] : "?";
}

void mp_event_label(const mp_event *e, char *buf, size_t size)
{
    const char *name = mp_event_kind_name((mp_event_kind)e->kind);
    if (size == 0)
        return;
    if (e->microbatch >= 0 && e->chunk >= 0)
        snprintf(buf, size, "%s %d.%d", name, (int)e->microbatch, (int)e->chunk);
    else if (e->microbatch >= 0)
        snprintf(buf, size, "%s %d", name, (int)e->microbatch);
    else if (e->chunk >= 0)
        snprintf(buf, size, "%s chunk %d", name, (int)e->chunk);
    else
        snprintf(buf, size, "%s", name);
}

void mp_timeline_init(mp_timeline *t, int32_t ranks, const char *source)
{
    memset(t, 0, sizeof *t);
    t->ranks = ranks;
    snprintf(t->source, sizeof t->source, "%s", source ? source : "");
}

mp_status mp_timeline_add(mp_timeline *t, const mp_event *e, mp_error *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        mp_event *ev = realloc(t->events, cap * sizeof *ev);
        if (!ev)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a timeline");
        t->events = ev;
        t->cap = cap;
    }
    t->events[t->n++] = *e;
    if (e->rank >= t->ranks)
        t->ranks = e->rank + 1;
    return MP_OK;
}

void mp_timeline_free(mp_timeline *t)
{
    free(t->events);
    t->events = NULL;
    t->n = t->cap = 0;
}
