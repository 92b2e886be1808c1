/* dualpipe_replay.h — DualPipe(V)'s pipeline makespan on per-stage times
 * (dualpipe_replay.c; docs/cost-model.md §6, "DualPipe(V) on uneven
 * stages"). */
#ifndef MP_DUALPIPE_REPLAY_H
#define MP_DUALPIPE_REPLAY_H

#include <stdint.h>

#include "core/config.h"
#include "core/error.h"

/* The op times of one DualPipe(V) step. Stage k is mp_schedule_stage's
 * (DualPipeV: 2p stages, rank r holding r and 2p-1-r; DualPipe: p stages,
 * rank r holding r and p-1-r, one per direction).
 *   f, b, w   per stage: the forward, the input gradient, the weight gradient
 *   wire      per stage k: its output activation's time on a link (bytes over
 *             the link's bandwidth; the gradient into stage k is as large)
 *   lat       each transfer's latency
 *   unit      NULL: every pass inline; else per rank r and chunk c,
 *             unit[2r + c]: the time of an F&B unit whose forward is chunk
 *             c's (with chunk 1-c's input and weight gradient), run as one
 *             merged pass (the EP overlap; sim/engine.c run_fb). */
typedef struct mp_dualpipe_times {
    const double *f, *b, *w, *wire;
    double lat;
    const double *unit;
} mp_dualpipe_times;

/* The step's pipeline makespan: the simulator's lists for (s, p, m)
 * (mp_schedule_build_all) run op by op as sim/engine.c runs them (each
 * rank's ops in order, a compute op as soon as the rank is free, a receive
 * when its message has landed, a run of transfers one commit whose sends are
 * posted together, each behind the earlier ones on its directed link, the
 * rank going on once all of it is done). s: MP_SCHED_DUALPIPEV or
 * MP_SCHED_DUALPIPE. MP_EINPUT for another schedule or a (p, m) the
 * schedule refuses, MP_ENOMEM, MP_EINTERNAL if the lists stall. */
mp_status mp_dualpipe_replay(mp_schedule_kind s, int32_t p, int32_t m, const mp_dualpipe_times *t,
                             double *makespan, mp_error *err);

#endif
