/* plan_order.c — the op lists of a schedule for given stage costs: the
 * one place where the simulator and the executor get their orders, so that
 * both run the same lists (ZB-V's order depends on the op times; the other
 * schedules' orders do not). */
#include <stdlib.h>

#include "sim/schedule.h"
#include "sim/simulate.h"

/* The times the engine gives each op (engine.c: op_duration, run_send),
 * and the activations it counts, laid out as mp_op_times wants them. */
static mp_status cost_times(const mp_pipeline_cost *pc, double **buf, mp_op_times *t,
                            mp_error *err)
{
    size_t n = (size_t)pc->n_stages;
    double *d = malloc(5 * (n ? n : 1) * sizeof *d);
    if (!d)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for a schedule");
    for (size_t k = 0; k < n; k++) {
        const mp_stage_cost *sc = &pc->stages[k];
        bool split = sc->bwd_input + sc->bwd_weight > 0;
        d[k] = sc->fwd;
        d[n + k] = split ? sc->bwd_input : sc->bwd / 2;
        d[2 * n + k] = split ? sc->bwd_weight : sc->bwd / 2;
        /* an activation k -> k+1 and its gradient back are send_bytes of k */
        d[3 * n + k] = pc->p2p_latency + (pc->p2p_bw > 0 ? sc->send_bytes / pc->p2p_bw : 0);
        d[4 * n + k] = sc->act_bytes;
    }
    *t = (mp_op_times){.f = d, .b = d + n, .w = d + 2 * n, .link = d + 3 * n, .act = d + 4 * n,
                       .lat = pc->p2p_latency};
    *buf = d;
    return MP_OK;
}

mp_status mp_sim_schedule(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                          const mp_pipeline_cost *pc, int32_t rank, mp_op_list *out,
                          mp_error *err)
{
    double *buf = NULL;
    mp_op_times t;
    /* One order per plan, whatever the engine's options: the one the
     * executor runs. It is built for inline MoE dispatch (an op's output
     * ready when its compute ends); under ep overlap it does not use the
     * shorter compute stream (tests/sim/test_engine.c test_moe_ep_overlap). */
    bool timed = s == MP_SCHED_ZBV && pc && pc->stages &&
                 (int64_t)pc->n_stages == (int64_t)p * v;
    mp_status st = timed ? cost_times(pc, &buf, &t, err) : MP_OK;
    if (st != MP_OK)
        return st;
    /* Megatron's overlapped p2p places each transfer at its op; without it
     * interleaved 1F1B batches them (sim/schedule.h mp_schedule_opts) */
    mp_schedule_opts o = {.t = timed ? &t : NULL, .overlap_p2p = pc && pc->p2p_overlap};
    st = rank < 0 ? mp_schedule_build_all_opts(s, p, v, m, &o, out, err)
                  : mp_schedule_build_opts(s, p, v, m, rank, &o, out, err);
    free(buf);
    return st;
}

mp_status mp_sim_plan_schedule(const mp_plan *plan, int32_t m, int32_t rank, mp_op_list *out,
                               mp_error *err)
{
    const mp_parallel *par = &plan->config.parallel;
    mp_schedule_kind s = par->schedule;
    int32_t p = (int32_t)par->pp, v = (int32_t)mp_schedule_chunks(s, par->vpp);
    if (s != MP_SCHED_ZBV) {
        mp_schedule_opts o = {.overlap_p2p = par->p2p_overlap};
        return mp_schedule_build_opts(s, p, v, m, rank, &o, out, err);
    }
    out->ops = NULL;
    out->n = out->cap = 0;
    mp_pipeline_cost pc = {0};
    mp_status st = mp_pipeline_cost_build(&plan->config, plan, &pc, err);
    if (st == MP_OK)
        st = mp_sim_schedule(s, p, v, m, &pc, rank, out, err);
    mp_pipeline_cost_free(&pc);
    return st;
}
