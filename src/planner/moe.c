/* moe.c — parameter counts of mixture-of-experts MLPs and multi-head
 * latent attention (docs/cost-model.md, "Mixture of experts").
 *
 * An MoE block's MLP is a router (a linear map h -> E scores, no bias), E
 * routed experts and S shared experts, each a SwiGLU MLP of three h x f
 * matrices (Shazeer et al. 2017; Jiang et al. 2024 for Mixtral; DeepSeek-AI
 * 2024 §2.1.2 for shared experts). A token runs the router, its top_k
 * routed experts and every shared expert.
 *
 * Latent attention (DeepSeek-AI 2024, §2.1.1, eqs. 1-11): queries go h ->
 * q_lora_rank -> heads x (nope + rope) (or straight from h when there is no
 * query LoRA); keys and values share a latent h -> kv_lora_rank, plus one
 * shared RoPE key h -> rope; the latent expands to heads x (nope + v); the
 * output projects heads x v -> h. Each LoRA latent is normalised (RMSNorm). */
#include "planner/cost.h"
#include "planner/cost_internal.h"

double mp_mla_attn_params(const mp_model *m)
{
    double h = (double)m->hidden, a = (double)m->heads;
    double nope = (double)m->mla.qk_nope_head_dim, rope = (double)m->mla.qk_rope_head_dim;
    double v = (double)m->mla.v_head_dim, qr = (double)m->mla.q_lora_rank;
    double kvr = (double)m->mla.kv_lora_rank;
    double q = qr > 0 ? h * qr + qr + qr * a * (nope + rope) : h * a * (nope + rope);
    double kv = h * (kvr + rope) + kvr + kvr * a * (nope + v);
    return q + kv + a * v * h;
}

/* Matrices of one expert's MLP of width f. */
static double expert_params(const mp_model *m, double f)
{
    return (m->activation == MP_ACT_SWIGLU ? 3.0 : 2.0) * (double)m->hidden * f;
}

double mp_moe_mlp_params(const mp_model *m, bool active)
{
    double routed = (double)(active ? m->moe.top_k : m->moe.experts);
    return (double)m->hidden * (double)m->moe.experts /* router */
           + routed * expert_params(m, (double)m->moe.expert_ffn) +
           (double)m->moe.shared_experts * expert_params(m, (double)m->moe.shared_ffn);
}
