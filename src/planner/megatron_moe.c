/* megatron_moe.c — the Megatron-Core arguments of a mixture-of-experts,
 * latent-attention or multi-token-prediction plan (megatron/training/arguments.py, "moe" and "mla"
 * groups): the experts and routing, the expert degrees of the parallel
 * folding, the dispatcher, and the MLA shape. */
#include "planner/megatron.h"

#include "planner/cost_internal.h"

mp_flex_backend mp_flex_backend_of(const mp_config *c)
{
    if (c->parallel.flex_backend != MP_FLEX_AUTO)
        return c->parallel.flex_backend;
    /* auto: Megatron-Core's moe_flex_dispatcher_backend comment "Currently
     * only hybridep supports the MNNVL case" (an NVLink domain spanning
     * several nodes, GB200 NVL72); DeepEP, its default, otherwise. A guess:
     * Megatron-Bridge's performance scripts also run HybridEP on H100 and
     * B200 (v0.3.0 onwards), which the plan says with flex_backend. */
    const mp_hw *hw = &c->hw;
    return mp_scale_up_gpus(hw) > (double)(hw->gpus_per_node > 0 ? hw->gpus_per_node : 1)
               ? MP_FLEX_HYBRIDEP
               : MP_FLEX_DEEPEP;
}

const char *mp_flex_backend_name(const mp_config *c)
{
    return mp_flex_backend_setting_name(mp_flex_backend_of(c));
}

void mp_megatron_moe_args(const mp_config *c, mp_buf *out)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    if (mp_model_is_moe(m)) {
        const struct mp_moe *e = &m->moe;
        mp_buf_printf(out, "--num-experts %lld \\\n--moe-router-topk %lld \\\n"
                           "--moe-ffn-hidden-size %lld \\\n",
                      (long long)e->experts, (long long)e->top_k, (long long)e->expert_ffn);
        if (e->shared_experts)
            mp_buf_printf(out, "--moe-shared-expert-intermediate-size %lld \\\n",
                          (long long)(e->shared_experts * e->shared_ffn));
        if (e->first_dense || e->layer_freq > 1) {
            /* the pattern as a Python list expression, 1 = MoE block */
            mp_buf_puts(out, "--moe-layer-freq \"[");
            for (int64_t i = 0; i < m->layers; i++)
                mp_buf_printf(out, "%s%d", i ? "," : "", mp_model_block_is_moe(m, i) ? 1 : 0);
            mp_buf_puts(out, "]\" \\\n");
        }
        if (e->router == MP_ROUTER_SIGMOID)
            mp_buf_puts(out, "--moe-router-score-function sigmoid \\\n"
                             "--moe-router-enable-expert-bias \\\n");
        if (e->route_groups)
            mp_buf_printf(out, "--moe-router-num-groups %lld \\\n--moe-router-group-topk %lld \\\n",
                          (long long)e->route_groups, (long long)e->route_group_top_k);
        if (e->route_scale > 0.0 && e->route_scale != 1.0)
            mp_buf_printf(out, "--moe-router-topk-scaling-factor %g \\\n", e->route_scale);
        if (e->bias_update_rate > 0.0)
            mp_buf_printf(out, "--moe-router-bias-update-rate %g \\\n", e->bias_update_rate);
        if (e->capacity_factor > 0.0)
            mp_buf_printf(out, "--moe-expert-capacity-factor %g \\\n", e->capacity_factor);
        mp_buf_printf(out, "--expert-model-parallel-size %lld \\\n"
                           "--expert-tensor-parallel-size %lld \\\n"
                           "--moe-token-dispatcher-type %s \\\n--moe-grouped-gemm \\\n",
                      (long long)mp_parallel_ep(p), (long long)mp_parallel_etp(p),
                      mp_dispatcher_name(p->dispatcher));
        if (p->dispatcher == MP_DISPATCH_FLEX)
            mp_buf_printf(out, "--moe-flex-dispatcher-backend %s \\\n",
                          p->dispatch_fp8 ? "ncclep" : mp_flex_backend_name(c));
        if (p->dispatcher == MP_DISPATCH_FLEX && !p->dispatch_fp8 && p->flex_sms > 0)
            /* TransformerConfig's field for the backend (core_v0.16.0's
             * arguments come from its fields) */
            mp_buf_printf(out, "--moe-%s-num-sms %lld \\\n", mp_flex_backend_name(c),
                          (long long)p->flex_sms);
        if (p->dispatch_fp8)
            /* the FP8 wire: the ncclep backend only, its payload consumed by
             * TE's fused grouped GEMM (transformer_config.py) */
            mp_buf_puts(out, "--moe-dispatch-fwd-dtype mxfp8 \\\n--moe-combine-bwd-dtype mxfp8 \\\n"
                             "--use-transformer-engine-op-fuser \\\n");
        if (p->moe_a2a_overlap)
            /* Megatron-Bridge's moe_a2a_overlap sets both (its perf scripts'
             * set_moe_a2a_overlap_overrides): the weight gradients wait so
             * that the backward's combine has compute to hide under */
            mp_buf_puts(out, "--overlap-moe-expert-parallel-comm \\\n--delay-wgrad-compute \\\n");
        if (p->shared_expert_overlap)
            mp_buf_puts(out, "--moe-shared-expert-overlap \\\n");
    }
    if (mp_model_is_mla(m)) {
        const struct mp_mla *a = &m->mla;
        mp_buf_puts(out, "--multi-latent-attention \\\n");
        if (a->q_lora_rank)
            mp_buf_printf(out, "--q-lora-rank %lld \\\n", (long long)a->q_lora_rank);
        mp_buf_printf(out, "--kv-lora-rank %lld \\\n--qk-head-dim %lld \\\n"
                           "--qk-pos-emb-head-dim %lld \\\n--v-head-dim %lld \\\n",
                      (long long)a->kv_lora_rank, (long long)a->qk_nope_head_dim,
                      (long long)a->qk_rope_head_dim, (long long)a->v_head_dim);
    }
    if (mp_model_has_mtp(m)) /* Megatron places the modules on the last stage by default */
        mp_buf_printf(out, "--mtp-num-layers %lld \\\n--mtp-loss-scaling-factor %g \\\n",
                      (long long)m->mtp_layers, mp_model_mtp_loss_scale(m));
}
