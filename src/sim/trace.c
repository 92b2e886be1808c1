/* trace.c — a timeline as Chrome trace-event JSON (Perfetto, chrome://tracing).
 * One process per rank ("rank N"), one thread per stream, complete events
 * ("ph":"X") with ts/dur in microseconds. Built in a buffer and written
 * by core/output.h (a regular file atomically, so a reader never sees half a
 * trace; a pipe or device written through). */
#include <stdio.h>

#include "core/buf.h"
#include "core/output.h"
#include "sim/timeline.h"

/* Event names are generated from fixed words and numbers: nothing to escape. */
static void write_metadata(const mp_timeline *t, mp_buf *b, bool *first)
{
    for (int32_t r = 0; r < t->ranks; r++) {
        mp_buf_printf(b,
                      "%s\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\","
                      "\"args\":{\"name\":\"rank %d\"}}",
                      *first ? "" : ",", (int)r, (int)r);
        *first = false;
        mp_buf_printf(b,
                      ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_sort_index\","
                      "\"args\":{\"sort_index\":%d}}",
                      (int)r, (int)r);
        for (int s = 0; s < MP_STREAM_COUNT; s++) {
            mp_buf_printf(b,
                          ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\","
                          "\"args\":{\"name\":\"%s\"}}",
                          (int)r, s, mp_stream_name((mp_stream)s));
            mp_buf_printf(b,
                          ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_sort_index\","
                          "\"args\":{\"sort_index\":%d}}",
                          (int)r, s, s);
        }
    }
}

mp_status mp_trace_write(const mp_timeline *t, const char *path, bool force, mp_error *err)
{
    mp_buf b;
    mp_buf_init(&b);
    mp_buf_printf(&b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"%s\"},"
                      "\"traceEvents\":[",
                  t->source[0] ? t->source : "unknown");
    bool first = true;
    write_metadata(t, &b, &first);
    char label[64];
    for (size_t i = 0; i < t->n; i++) {
        const mp_event *e = &t->events[i];
        mp_event_label(e, label, sizeof label);
        double dur = (e->end - e->start) * 1e6;
        mp_buf_printf(&b,
                      "%s\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"cat\":\"%s\","
                      "\"ts\":%.3f,\"dur\":%.3f",
                      first ? "" : ",", (int)e->rank, (int)e->stream, label,
                      mp_event_kind_name((mp_event_kind)e->kind), e->start * 1e6,
                      dur > 0 ? dur : 0);
        first = false;
        if (e->microbatch >= 0 || e->chunk >= 0)
            mp_buf_printf(&b, ",\"args\":{\"microbatch\":%d,\"chunk\":%d}", (int)e->microbatch,
                          (int)e->chunk);
        mp_buf_puts(&b, "}");
    }
    mp_buf_puts(&b, "\n]}\n");
    if (b.oom) {
        mp_buf_free(&b);
        return mp_error_set(err, MP_ENOMEM, path, 0, 0, NULL, "out of memory writing a trace");
    }
    mp_status st = mp_output_write_path(path, force, b.data, b.len, err);
    mp_buf_free(&b);
    return st;
}
