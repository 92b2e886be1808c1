/* config_moe.c — the rules a mixture-of-experts split must follow
 * (Megatron-Core's parallel folding; docs/cost-model.md, "Mixture of
 * experts"): the expert groups etp x ep x edp regroup the same ranks as the
 * attention groups tp x cp x dp inside each pipeline stage. */
#include "core/config.h"

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

mp_status mp_config_check_moe(const mp_config *c, mp_error *err)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    if (!mp_model_is_moe(m)) {
        if (p->ep > 1 || p->etp > 0 || p->dispatcher != MP_DISPATCH_ALLTOALL)
            return FAIL(p->ep > 1 ? "ep" : "etp", "expert parallelism needs a model with "
                                                  "experts (%s has none)", m->name);
        return MP_OK;
    }
    int64_t ep = mp_parallel_ep(p), etp = mp_parallel_etp(p);
    if (m->moe.experts % ep)
        return FAIL("ep", "ep=%lld does not divide the %lld experts", (long long)ep,
                    (long long)m->moe.experts);
    if (m->moe.expert_ffn % etp || (m->moe.shared_experts && m->moe.shared_ffn % etp))
        return FAIL("etp", "etp=%lld does not divide the expert FFN size %lld", (long long)etp,
                    (long long)m->moe.expert_ffn);
    int64_t ranks = p->tp * p->cp * p->dp;
    if (p->dp > 0 && ranks % (ep * etp))
        return FAIL("ep", "etp*ep = %lld does not divide a stage's tp*cp*dp = %lld ranks",
                    (long long)(ep * etp), (long long)ranks);
    if (p->hsdp)
        /* ZeRO-2/3 shard the experts over all of expert-DP (docs/exec.md,
         * "ZeRO-2 and ZeRO-3"); hybrid shard groups of experts are not modelled */
        return FAIL("hsdp", "hybrid sharding is not supported with experts (ZeRO-2/3 shard "
                            "them over their expert-DP group)");
    if (p->tp > 1 && !p->sp)
        /* Megatron-Core refuses MoE with tensor parallelism but without SP */
        return FAIL("sp", "mixture of experts with tp > 1 needs sequence parallelism (sp)");
    return MP_OK;
}
