/* simulate.h — one training iteration through the discrete-event engine:
 * the plan's schedule on every pipeline rank, durations from the cost model. */
#ifndef MP_SIMULATE_H
#define MP_SIMULATE_H

#include <stdbool.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"
#include "planner/cost.h"
#include "sim/timeline.h"

typedef struct mp_sim_options {
    bool record_timeline;   /* keep every event (for trace/plot); off for search's re-ranking */
} mp_sim_options;

typedef struct mp_sim_result {
    double makespan;          /* seconds: the whole iteration (pipeline + exposed DP + optimizer) */
    double pipeline_makespan; /* seconds: the pipeline part alone */
    int32_t ranks;            /* pipeline ranks simulated (pp) */
    double *bubble_fraction;  /* per pipeline rank: idle / pipeline makespan */
    double *peak_memory;      /* per pipeline rank, bytes (static + peak stashed activations) */
    mp_times exposed;         /* exposed time by kind, adding up to makespan */
    mp_timeline timeline;     /* events, when record_timeline */
} mp_sim_result;

mp_status mp_simulate(const mp_config *c, const mp_plan *plan, const mp_sim_options *opt,
                      mp_sim_result *out, mp_error *err);
void mp_sim_result_free(mp_sim_result *r);

#endif
