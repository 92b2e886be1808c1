/* timeline.h — timed events per rank and stream: what the simulator predicts
 * and what the executor measures. One trace writer turns either into Chrome
 * trace JSON, so the two can be laid side by side. */
#ifndef MP_TIMELINE_H
#define MP_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum mp_stream {
    MP_STREAM_COMPUTE,
    MP_STREAM_TP,
    MP_STREAM_CP,
    MP_STREAM_PP_SEND,
    MP_STREAM_PP_RECV,
    MP_STREAM_DP,
    MP_STREAM_EP, /* the MoE layers' dispatch and combine */
    MP_STREAM_COUNT
} mp_stream;

typedef enum mp_event_kind {
    MP_EV_F,          /* forward  "F mb.chunk" */
    MP_EV_B,          /* backward "B mb.chunk" */
    MP_EV_W,          /* weight gradient "W mb.chunk" */
    MP_EV_RECOMPUTE,  /* "R mb.chunk" when shown apart from B */
    MP_EV_SEND_FWD,
    MP_EV_RECV_FWD,
    MP_EV_SEND_BWD,
    MP_EV_RECV_BWD,
    MP_EV_TP_COMM,    /* TP/SP collective */
    MP_EV_CP_COMM,    /* CP ring step */
    MP_EV_DP_COMM,    /* DP gradient reduction (bucket) */
    MP_EV_OPTIMIZER,
    MP_EV_OTHER,
    MP_EV_EP_COMM,    /* MoE dispatch + combine of one F or B */
    MP_EV_KIND_COUNT
} mp_event_kind;

typedef struct mp_event {
    double start, end;  /* seconds from the start of the iteration */
    int32_t rank;       /* global rank (the simulator: pipeline rank) */
    uint8_t stream;     /* mp_stream */
    uint8_t kind;       /* mp_event_kind */
    int32_t microbatch; /* -1 when not per micro-batch */
    int32_t chunk;      /* -1 when not per chunk */
} mp_event;

typedef struct mp_timeline {
    mp_event *events;
    size_t n, cap;
    int32_t ranks;
    char source[16];    /* "simulated" or "measured" */
} mp_timeline;

const char *mp_stream_name(mp_stream s);      /* "compute", "tp", "cp", "pp-send", "pp-recv", "dp", "ep" */
const char *mp_event_kind_name(mp_event_kind k);
/* The event's display name, "F 3.1" style. */
void mp_event_label(const mp_event *e, char *buf, size_t size);

void mp_timeline_init(mp_timeline *t, int32_t ranks, const char *source);
mp_status mp_timeline_add(mp_timeline *t, const mp_event *e, mp_error *err);
void mp_timeline_free(mp_timeline *t);

/* Chrome trace-event JSON (Perfetto, chrome://tracing): one process per rank,
 * one thread per stream; written as core/output.h says (sim/trace.c); force
 * replaces a read-only file. */
mp_status mp_trace_write(const mp_timeline *t, const char *path, bool force, mp_error *err);

#endif
