/* simulate.c — mp_simulate: stage costs from the cost model, then the engine. */
#include "sim/simulate.h"

#include <stdlib.h>
#include <string.h>

mp_status mp_sim_check_size(int64_t p, int64_t v, int64_t m, bool record_timeline,
                            const char *field, mp_error *err)
{
    int64_t limit = record_timeline ? MP_SIM_MAX_UNITS_TIMELINE : MP_SIM_MAX_UNITS;
    /* a non-positive size is the schedule's to refuse, with its own message;
     * each factor is checked before the product, so it cannot overflow */
    if (p < 1 || v < 1 || m < 1)
        return MP_OK;
    if (p > limit || v > limit || m > limit || p * v > limit || p * v * m > limit)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, field,
                            "too large to simulate: pp*vpp*micro-batches = %lld*%lld*%lld is "
                            "over %lld%s; fewer micro-batches show the same schedule",
                            (long long)p, (long long)v, (long long)m, (long long)limit,
                            record_timeline ? " with a timeline (trace, plot or json)" : "");
    return MP_OK;
}

mp_status mp_simulate(const mp_config *c, const mp_plan *plan, const mp_sim_options *opt,
                      mp_sim_result *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    const mp_config *cfg = plan ? &plan->config : c;
    if (!cfg)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, NULL, "nothing to simulate");
    /* a plan that lists its stages is its own split (any layer count) */
    mp_status st = mp_config_check_with_stages(cfg, plan && plan->n_stages != 0, err);
    if (st != MP_OK)
        return st;
    int64_t m = mp_config_microbatches(cfg);
    const mp_parallel *par = &cfg->parallel;
    if (m < 1 || m > INT32_MAX || par->pp < 1 || par->pp > MP_MAX_STAGES || par->vpp < 1 ||
        par->pp * par->vpp > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "parallel",
                            "cannot simulate pp=%lld vpp=%lld with %lld micro-batches",
                            (long long)par->pp, (long long)par->vpp, (long long)m);
    st = mp_sim_check_size(par->pp, par->vpp, m, opt && opt->record_timeline, "global_batch", err);
    if (st != MP_OK)
        return st;
    mp_pipeline_cost pc;
    memset(&pc, 0, sizeof pc);
    st = mp_pipeline_cost_build(cfg, plan, &pc, err);
    if (st != MP_OK)
        return st;
    /* the generator's chunks per rank: vpp, but 2 for dualpipe's two copies */
    /* a plan with the EP all-to-all overlap (Megatron-Core
     * --overlap-moe-expert-parallel-comm) runs it on the ep stream */
    mp_sim_options o = {0};
    if (opt)
        o = *opt;
    o.ep_overlap = o.ep_overlap || par->moe_a2a_overlap;
    /* Megatron --overlap-p2p-communication: interleaved 1F1B waits on a
     * transfer only where the data is needed (cost.c, round_p2p) */
    o.async_p2p = o.async_p2p || (par->p2p_overlap && par->schedule == MP_SCHED_INTERLEAVED);
    /* (zb-h1 at pp 1 runs as 1f1b: mp_simulate_cost asks
     * mp_schedule_run_as, core/config.h) */
    st = mp_simulate_cost(par->schedule, (int32_t)par->pp,
                          (int32_t)mp_schedule_chunks(par->schedule, par->vpp), (int32_t)m, &pc,
                          par->dp_overlap, &o, out, err);
    mp_pipeline_cost_free(&pc);
    return st;
}
