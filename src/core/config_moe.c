/* config_moe.c — the rules a mixture-of-experts split must follow
 * (Megatron-Core's parallel folding; docs/cost-model.md, "Mixture of
 * experts"): the expert groups etp x ep x edp regroup the same ranks as the
 * attention groups tp x cp x dp inside each pipeline stage. */
#include "core/config.h"
#include "core/units.h"

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

/* Megatron-Core's rules for the two MoE overlaps (TransformerConfig
 * __post_init__: overlap_moe_expert_parallel_comm needs ep > 1, the alltoall
 * or flex dispatcher, a virtual pipeline when pp > 1, no full recompute and
 * no shared-expert overlap; moe_shared_expert_overlap needs shared experts
 * and the alltoall or flex dispatcher). */
static mp_status mp_config_check_moe_overlap(const mp_config *c, mp_error *err)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    bool a2a_like = p->dispatcher == MP_DISPATCH_ALLTOALL || p->dispatcher == MP_DISPATCH_FLEX;
    if (p->shared_expert_overlap) {
        if (!m->moe.shared_experts)
            return FAIL("shared_expert_overlap", "shared-expert overlap needs shared experts "
                                                 "(%s has none)", m->name);
        if (!a2a_like)
            return FAIL("shared_expert_overlap", "shared-expert overlap works with the alltoall "
                                                 "or flex dispatcher only");
    }
    if (p->dispatch_fp8 && (p->dispatcher != MP_DISPATCH_FLEX || c->training.precision != MP_DTYPE_FP8))
        /* Megatron-Core: the ncclep flex backend only, its grouped GEMM
         * consuming the FP8 payload (transformer_config.py) */
        return FAIL("dispatch_fp8", "FP8 dispatch needs the flex dispatcher and precision fp8 "
                                    "(the experts' FP8 GEMM takes the FP8 tokens)");
    if (!p->moe_a2a_overlap)
        return MP_OK;
    if (mp_parallel_ep(p) < 2)
        return FAIL("moe_a2a_overlap", "the EP all-to-all overlap needs ep > 1");
    if (!a2a_like)
        return FAIL("moe_a2a_overlap", "the EP all-to-all overlap works with the alltoall or flex "
                                       "dispatcher only");
    if (p->pp > 1 && p->vpp < 2 && p->schedule != MP_SCHED_DUALPIPE &&
        p->schedule != MP_SCHED_DUALPIPEV)
        return FAIL("moe_a2a_overlap", "the EP all-to-all overlap needs a virtual pipeline (vpp > "
                                       "1) when pp > 1");
    if (p->recompute == MP_RECOMPUTE_FULL)
        return FAIL("moe_a2a_overlap", "the EP all-to-all overlap runs without full recompute");
    if (p->shared_expert_overlap)
        return FAIL("moe_a2a_overlap", "the EP all-to-all overlap and the shared-expert overlap "
                                       "exclude each other");
    return MP_OK;
}

/* moe.imbalance (or --moe-imbalance) has a physical ceiling that depends on
 * ep. planner/moe.c charges the busiest EP rank alpha times the mean routed
 * copies, alpha * Tr*top_k*etp (the E/ep local experts' tokens, each
 * mp_moe_tokens_per_expert * alpha). The etp*ep ranks of an expert group hold
 * etp*ep*Tr tokens, and one token sends at most one copy to each of the
 * rank's E/ep experts, so at most min(top_k, E/ep) to one rank: the busiest
 * rank receives at most etp*ep*Tr * min(top_k, E/ep) copies, and
 *   alpha <= ep * min(top_k, E/ep) / top_k
 * (1 at ep = 1: one rank holds every expert and carries exactly the mean).
 * A larger alpha would charge more tokens than the group routes. */
static mp_status mp_config_check_moe_imbalance(const mp_config *c, mp_error *err)
{
    const struct mp_moe *e = &c->model.moe;
    if (!(e->imbalance > 0.0))
        return MP_OK;
    int64_t ep = mp_parallel_ep(&c->parallel);
    int64_t local = e->experts / ep, k = e->top_k;
    int64_t most = ep * (local < k ? local : k); /* the busiest rank's copies per k tokens */
    if (e->imbalance * (double)k <= (double)most)
        return MP_OK;
    char im[32], cap[32];
    mp_format_double(e->imbalance, im, sizeof im);
    mp_format_double((double)most / (double)k, cap, sizeof cap);
    return FAIL("moe.imbalance", "the busiest of ep=%lld ranks carries at most ep*min(top_k, "
                                 "experts/ep)/top_k = %s times the mean (a token sends it at "
                                 "most min(top_k, experts/ep) = %lld copies): got %s",
                (long long)ep, cap, (long long)(local < k ? local : k), im);
}

mp_status mp_config_check_moe(const mp_config *c, mp_error *err)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    if (p->flex_sms > 0 && p->dispatcher != MP_DISPATCH_FLEX)
        /* Megatron-Core reads moe_hybridep_num_sms / moe_deepep_num_sms only
         * in the flex dispatcher (token_dispatcher.py) */
        return FAIL("flex_sms", "the flex dispatcher's SMs need the flex dispatcher");
    if (p->flex_sms > 0 && c->hw.sm_count > 0 && !((double)p->flex_sms < c->hw.sm_count))
        /* the dispatch kernels hold SMs of the GPU beside the compute's: 500
         * on a 132-SM GPU was taken (the SM share capped at all of them) */
        return FAIL("flex_sms", "%lld SMs for the dispatch kernels: %s has %g SMs a GPU, and the "
                                "kernels must leave some to the compute (at most %g)",
                    (long long)p->flex_sms, c->hw.name, c->hw.sm_count, c->hw.sm_count - 1);
    if (p->flex_backend != MP_FLEX_AUTO && p->dispatcher != MP_DISPATCH_FLEX)
        /* Megatron-Core reads moe_flex_dispatcher_backend only in the flex
         * dispatcher (token_dispatcher.py MoEFlexTokenDispatcher) */
        return FAIL("flex_backend", "%s is a backend of the flex dispatcher: it needs "
                                    "dispatcher flex",
                    mp_flex_backend_setting_name(p->flex_backend));
    if (p->flex_backend != MP_FLEX_AUTO && p->dispatch_fp8)
        /* the FP8 wire runs the ncclep backend (megatron_moe.c) */
        return FAIL("flex_backend", "dispatch_fp8 runs the ncclep backend, not %s",
                    mp_flex_backend_setting_name(p->flex_backend));
    if (!mp_model_is_moe(m)) {
        if (p->ep > 1 || p->etp > 0)
            return FAIL(p->ep > 1 ? "ep" : "etp", "expert parallelism needs a model with "
                                                  "experts (%s has none)", m->name);
        if (p->dispatcher != MP_DISPATCH_ALLTOALL)
            return FAIL("dispatcher", "a token dispatcher needs a model with experts (%s has "
                                      "none)", m->name);
        if (p->moe_a2a_overlap || p->shared_expert_overlap || p->dispatch_fp8)
            return FAIL(p->moe_a2a_overlap       ? "moe_a2a_overlap"
                        : p->shared_expert_overlap ? "shared_expert_overlap"
                                                   : "dispatch_fp8",
                        "an MoE overlap needs a model with experts (%s has none)", m->name);
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
    if (p->dispatcher == MP_DISPATCH_FLEX && ep * etp < 2)
        /* Megatron-Core's MoEFlexTokenDispatcher: "DeepEP dispatcher requires TPxEP > 1" */
        return FAIL("dispatcher", "the flex dispatcher needs etp*ep > 1 (got %lld)",
                    (long long)(ep * etp));
    mp_status st = mp_config_check_moe_imbalance(c, err);
    if (st != MP_OK)
        return st;
    st = mp_config_check_moe_overlap(c, err);
    if (st != MP_OK)
        return st;
    if (p->tp > 1 && !p->sp)
        /* Megatron-Core refuses MoE with tensor parallelism but without SP */
        return FAIL("sp", "mixture of experts with tp > 1 needs sequence parallelism (sp)");
    return MP_OK;
}

/* Megatron-LM's checks of --cuda-graph-scope (megatron/training/arguments.py,
 * validate_args): moe and moe_router exclude each other; moe_preprocess needs
 * moe_router; the MoE scopes need experts; mlp needs a dense layer; the
 * whole MoE layer is captured only under the alltoall dispatcher with
 * drop-and-pad (a capacity factor), and moe_preprocess not when the
 * dispatcher's preprocess copies counts to the host (a capacity factor). */
mp_status mp_config_check_cuda_graph(const mp_config *c, mp_error *err)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    uint32_t s = p->cuda_graph_scope;
#define HAS(k) ((s & (1u << (k))) != 0)
    if (!s)
        return MP_OK;
    if (HAS(MP_CGS_MOE) && HAS(MP_CGS_MOE_ROUTER))
        return FAIL("cuda_graph_scope", "moe and moe_router exclude each other");
    if (HAS(MP_CGS_MOE_PREPROCESS) && !HAS(MP_CGS_MOE_ROUTER))
        return FAIL("cuda_graph_scope", "moe_preprocess needs moe_router");
    bool moe_scope = HAS(MP_CGS_MOE) || HAS(MP_CGS_MOE_ROUTER) || HAS(MP_CGS_MOE_PREPROCESS);
    if (moe_scope && !mp_model_is_moe(m))
        return FAIL("cuda_graph_scope", "the moe scopes need a model with experts (%s has none)",
                    m->name);
    if (HAS(MP_CGS_MLP) && mp_model_is_moe(m) && m->moe.first_dense == 0 &&
        m->moe.layer_freq <= 1)
        return FAIL("cuda_graph_scope", "mlp graphs dense layers, and every layer of %s is an "
                                        "MoE layer", m->name);
    if (HAS(MP_CGS_MOE) && (p->dispatcher != MP_DISPATCH_ALLTOALL ||
                            !(m->moe.capacity_factor > 0.0)))
        return FAIL("cuda_graph_scope", "moe (the whole MoE layer) is captured only under the "
                                        "alltoall dispatcher with a capacity factor");
    if (HAS(MP_CGS_MOE_PREPROCESS) && p->dispatcher == MP_DISPATCH_ALLTOALL &&
        m->moe.capacity_factor > 0.0)
        return FAIL("cuda_graph_scope", "moe_preprocess cannot be captured when the alltoall "
                                        "dispatcher's preprocess copies counts to the host "
                                        "(a capacity factor)");
#undef HAS
    return MP_OK;
}
