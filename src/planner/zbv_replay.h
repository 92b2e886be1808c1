/* zbv_replay.h — ZB-V's pipeline makespan from the order the simulator
 * runs (zbv_replay.c; docs/cost-model.md §6). */
#ifndef MP_ZBV_REPLAY_H
#define MP_ZBV_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "sim/schedule_vorder.h"

/* The replay's budget: orders built for at most this many micro-batches
 * times p (about 1 ms an estimate; docs/design.md §8). */
#define MP_ZBV_REPLAY_PM 1024

/* ZB-V's step on p ranks with m micro-batches under t (the stage times
 * sim/plan_order.c gives the simulator): rt (p of them) the chosen order's
 * rank times, *makespan the latest rank end. *exact: the orders were built
 * for all m (p m <= MP_ZBV_REPLAY_PM), the simulator's own choice and step
 * (to rounding); else they were built for max(MP_ZBV_REPLAY_PM / p, 4p)
 * and extended (mp_schedule_zbv_times), within the error the tests state.
 * MP_EINPUT, MP_ENOMEM, MP_EINTERNAL as mp_schedule_v_times. */
mp_status mp_zbv_replay(int32_t p, int32_t m, const mp_op_times *t, mp_v_rank_times *rt,
                        double *makespan, bool *exact, mp_error *err);

#endif
