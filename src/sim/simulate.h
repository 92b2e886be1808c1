/* simulate.h — one training iteration through the discrete-event engine:
 * the plan's schedule on every pipeline rank, durations from the cost model. */
#ifndef MP_SIMULATE_H
#define MP_SIMULATE_H

#include <stdbool.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"
#include "planner/cost.h"
#include "sim/schedule.h"
#include "sim/timeline.h"

typedef struct mp_sim_options {
    bool record_timeline;   /* keep every event (for trace/plot); off for search's re-ranking */
    /* Added by the simulator (additive). false (the default): Megatron's p2p,
     * batched isend/irecv waited on before the next compute, so a SEND holds
     * the compute stream until its message has landed. true: sends are
     * fire-and-forget (the executor's MPI_Isend); only receives wait. */
    bool async_p2p;
    /* MoE: false (the default): each F and B runs its layers' dispatch and
     * combine inline, the compute stream waiting for them. true: Megatron-
     * Core's --overlap-moe-expert-parallel-comm. On interleaved 1F1B (and
     * 1F1B without a pipeline) its combined 1F1B: each steady-state B and
     * the F after it run as one merged pass in three phases, the
     * all-to-alls under the other pass's compute; the warm-up's forwards
     * and one more, and the cool-down's backwards, run alone, inline
     * (docs/simulator.md). DualPipe and DualPipeV run each F&B unit (an F
     * of one chunk, the other chunk's B and its W) as the same merged pass,
     * DeepSeek's overlap. On the other schedules (and DualPipe(V)'s passes
     * alone) the all-to-all of an op runs on the ep stream under the
     * compute of the next op; the op of the same micro-batch that takes
     * its output (the send, the last stage's B after its F) waits for its
     * combine. */
    bool ep_overlap;
} mp_sim_options;

/* Added by the simulator (additive): one step of a rank's memory curve. */
typedef struct mp_sim_memory_point {
    double time;   /* seconds from the start of the iteration */
    int32_t rank;  /* pipeline rank */
    double bytes;  /* static bytes + stashed activations from this time on */
} mp_sim_memory_point;

typedef struct mp_sim_result {
    double makespan;          /* seconds: the whole iteration (pipeline + exposed DP + optimizer) */
    double pipeline_makespan; /* seconds: the pipeline part alone */
    int32_t ranks;            /* pipeline ranks simulated (pp) */
    double *bubble_fraction;  /* per pipeline rank: idle / pipeline makespan */
    double *peak_memory;      /* per pipeline rank, bytes (static + peak stashed activations) */
    mp_times exposed;         /* exposed time by kind, adding up to makespan */
    mp_timeline timeline;     /* events, when record_timeline */
    /* Added by the simulator (additive): */
    mp_sim_memory_point *memory; /* memory curve, when record_timeline; sorted by rank, time */
    size_t n_memory;
    int32_t critical_rank;    /* the pipeline rank whose breakdown `exposed` reports: the
                               * least idle one (most F/B/W + exposed p2p + DP waits;
                               * docs/simulator.md, "What comes out") */
    int32_t microbatches;     /* m */
    int32_t chunks;           /* v */
    mp_schedule_kind schedule;
    bool order_fallback;      /* zb-v: its greedy orders stalled and the fallback order
                               * ran (sim/schedule_vorder.c; never seen, a guard) */
} mp_sim_result;

/* The largest iteration simulated, in pp*vpp*micro-batches ("units": each is
 * a forward, a backward and up to four transfers). Without a timeline a unit
 * costs about 110 bytes (schedules and message tables; 16 more with the DP
 * parameter gathers placed at the step's start), so 2^20 units stay
 * near 120 MB and a third of a second; a timeline (trace, plot, JSON events)
 * adds about six events and two memory points per unit, and the trace text
 * more, so it is held to 2^18. Beyond that mp_simulate and mp_simulate_cost
 * refuse with MP_EINPUT before allocating anything: a smaller global batch
 * shows the same schedule (the step grows linearly once the pipeline is full). */
#define MP_SIM_MAX_UNITS (1 << 20)
#define MP_SIM_MAX_UNITS_TIMELINE (1 << 18)

/* MP_OK when p*v*m units can be simulated with (or without) a timeline;
 * else MP_EINPUT naming field (the caller's name for what sets m). */
mp_status mp_sim_check_size(int64_t p, int64_t v, int64_t m, bool record_timeline,
                            const char *field, mp_error *err);

mp_status mp_simulate(const mp_config *c, const mp_plan *plan, const mp_sim_options *opt,
                      mp_sim_result *out, mp_error *err);
void mp_sim_result_free(mp_sim_result *r);

/* The engine on given stage costs (pc->n_stages == mp_schedule_n_stages: p*v,
 * dualpipe p; virtual stage k where mp_schedule_stage places it), for tests, benchmarks and callers that already hold
 * the costs. dp_overlap: DP reductions start during the last backward of each
 * chunk (else after the rank's last backward). */
mp_status mp_simulate_cost(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                           const mp_pipeline_cost *pc, bool dp_overlap,
                           const mp_sim_options *opt, mp_sim_result *out, mp_error *err);

/* The op lists the engine runs for these stage costs (pc->n_stages ==
 * p*v): pipeline rank `rank`'s into *out, or with rank -1 all p ranks' into
 * out[0..p-1]. ZB-V's order is built from the costs' op times (F, B = the
 * input gradient, W, and each link's transfer: latency + send_bytes /
 * p2p_bw, MoE dispatch inline) and activation bytes; the other schedules'
 * orders do not depend on the costs. Interleaved 1F1B's transfers are
 * batched as Megatron's synchronous schedule posts them unless
 * pc->p2p_overlap (sim/schedule.h mp_schedule_opts). */
mp_status mp_sim_schedule(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                          const mp_pipeline_cost *pc, int32_t rank, mp_op_list *out,
                          mp_error *err);
/* The plan's list for pipeline rank `rank` with m micro-batches, the one the
 * simulator runs for it: for ZB-V the
 * stage costs come from the same cost model call the simulator makes
 * (mp_pipeline_cost_build on the plan). What the executor runs. */
mp_status mp_sim_plan_schedule(const mp_plan *plan, int32_t m, int32_t rank, mp_op_list *out,
                               mp_error *err);

#endif
