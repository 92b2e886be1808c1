/* model_moe.c — the mixture-of-experts, latent-attention and
 * multi-token-prediction parts of a model: which blocks are MoE, and the consistency rules of the moe and
 * mla field groups (docs/cost-model.md, "Mixture of experts"). */
#include <string.h>

#include "core/model.h"
#include "core/tables.h"
#include "core/units.h"

bool mp_model_is_moe(const mp_model *m)
{
    return m->moe.experts > 0;
}

bool mp_model_is_mla(const mp_model *m)
{
    return m->mla.kv_lora_rank > 0;
}

bool mp_model_block_is_moe(const mp_model *m, int64_t block0)
{
    if (!mp_model_is_moe(m) || block0 < m->moe.first_dense)
        return false;
    int64_t f = m->moe.layer_freq > 0 ? m->moe.layer_freq : 1;
    return block0 % f == 0;
}

int64_t mp_model_moe_blocks(const mp_model *m)
{
    /* the multiples of layer_freq in [first_dense, layers), counted in
     * closed form (search's bounds ask for every candidate) */
    if (!mp_model_is_moe(m) || m->layers <= 0)
        return 0;
    int64_t f = m->moe.layer_freq > 0 ? m->moe.layer_freq : 1;
    int64_t a = m->moe.first_dense > 0 ? m->moe.first_dense : 0, L = m->layers;
    if (a >= L)
        return 0;
    return (L + f - 1) / f - (a + f - 1) / f;
}

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

static mp_status finish_moe(mp_model *m, mp_error *err)
{
    const struct mp_moe *e = &m->moe;
    if (!mp_model_is_moe(m)) {
        /* a dense model: any other moe field would be silently ignored */
        if (e->top_k || e->expert_ffn || e->shared_experts || e->shared_ffn || e->first_dense ||
            e->layer_freq || e->route_groups || e->route_group_top_k || e->capacity_factor || e->imbalance ||
            e->router || e->route_scale || e->bias_update_rate || e->fake_balanced_gate)
            return FAIL("moe.experts", "missing: the other moe fields need moe.experts > 0");
        return MP_OK;
    }
    if (m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT)
        return FAIL("moe.experts", "mixture of experts is for decoder-only models (gpt, llama), "
                                   "not %s", mp_arch_name(m->arch));
    if (e->top_k < 1)
        return FAIL("moe.top_k", "missing: an MoE model needs moe.top_k >= 1");
    if (e->top_k > e->experts)
        return FAIL("moe.top_k", "more than moe.experts (%lld): got %lld", (long long)e->experts,
                    (long long)e->top_k);
    if (!m->moe.expert_ffn)
        m->moe.expert_ffn = m->ffn_hidden;
    if (e->shared_experts && !e->shared_ffn)
        m->moe.shared_ffn = m->moe.expert_ffn;
    if (e->shared_ffn && !e->shared_experts)
        return FAIL("moe.shared_ffn", "given without moe.shared_experts");
    if (!m->moe.layer_freq)
        m->moe.layer_freq = 1;
    if (e->first_dense >= m->layers)
        return FAIL("moe.first_dense", "must leave at least one MoE block (layers %lld): got %lld",
                    (long long)m->layers, (long long)e->first_dense);
    if (!mp_model_moe_blocks(m))
        return FAIL("moe.layer_freq", "leaves no MoE block");
    if (e->route_groups) {
        if (e->experts % e->route_groups)
            return FAIL("moe.route_groups", "must divide moe.experts (%lld): got %lld",
                        (long long)e->experts, (long long)e->route_groups);
        if (e->route_group_top_k < 1 || e->route_group_top_k > e->route_groups)
            return FAIL("moe.route_group_top_k", "must be in [1, moe.route_groups = %lld]: got %lld",
                        (long long)e->route_groups, (long long)e->route_group_top_k);
        /* Megatron ranks a group by the sum of its top_k / route_group_top_k
         * best scores, and the chosen groups must hold top_k experts */
        if (e->top_k < e->route_group_top_k)
            return FAIL("moe.route_group_top_k", "more than moe.top_k (%lld): got %lld",
                        (long long)e->top_k, (long long)e->route_group_top_k);
        if (e->top_k > e->route_group_top_k * (e->experts / e->route_groups))
            return FAIL("moe.top_k", "more than the experts of moe.route_group_top_k groups "
                                     "(%lld): got %lld",
                        (long long)(e->route_group_top_k * (e->experts / e->route_groups)),
                        (long long)e->top_k);
    } else if (e->route_group_top_k) {
        return FAIL("moe.route_group_top_k", "given without moe.route_groups");
    }
    if (e->bias_update_rate > 0.0 && e->router != MP_ROUTER_SIGMOID)
        return FAIL("moe.bias_update_rate", "the expert bias belongs to the sigmoid router "
                                            "(moe.router: sigmoid)");
    /* the values in their exact shortest form: %g said "must be >= 1, got 1"
     * for 0.9999999 */
    bool drops = e->capacity_factor > 0.0 && e->capacity_factor < 1.0 / (double)e->top_k;
    bool below_mean = e->imbalance > 0.0 && e->imbalance < 1.0;
    bool above_cap = e->capacity_factor > 0.0 && e->imbalance > e->capacity_factor;
    if (!drops && !below_mean && !above_cap)
        return MP_OK;
    char cf[32], im[32];
    mp_format_double(e->capacity_factor, cf, sizeof cf);
    mp_format_double(e->imbalance, im, sizeof im);
    if (drops)
        return FAIL("moe.capacity_factor", "below 1/top_k drops most tokens: got %s", cf);
    if (below_mean)
        return FAIL("moe.imbalance", "the busiest rank carries at least the mean: must be >= 1, "
                                     "got %s", im);
    return FAIL("moe.imbalance", "above moe.capacity_factor (%s), which caps each expert: "
                                 "got %s", cf, im);
}

static mp_status finish_mla(mp_model *m, mp_error *err)
{
    const struct mp_mla *a = &m->mla;
    if (!mp_model_is_mla(m)) {
        if (a->q_lora_rank || a->qk_rope_head_dim || a->qk_nope_head_dim || a->v_head_dim)
            return FAIL("mla.kv_lora_rank",
                        "missing: the other mla fields need mla.kv_lora_rank > 0");
        return MP_OK;
    }
    if (m->arch != MP_ARCH_LLAMA)
        return FAIL("mla.kv_lora_rank", "latent attention is for llama-style models, not %s",
                    mp_arch_name(m->arch));
    if (a->qk_nope_head_dim < 1)
        return FAIL("mla.qk_nope_head_dim", "missing: latent attention needs it");
    if (a->qk_rope_head_dim < 1)
        return FAIL("mla.qk_rope_head_dim", "missing: latent attention needs it");
    if (a->v_head_dim < 1)
        return FAIL("mla.v_head_dim", "missing: latent attention needs it");
    if (m->kv_heads != m->heads)
        return FAIL("kv_heads", "latent attention has one key/value per head: kv_heads must "
                                "equal heads (%lld), got %lld",
                    (long long)m->heads, (long long)m->kv_heads);
    /* head_dim is the query/key width per head, what the attention core sees */
    int64_t qk = a->qk_nope_head_dim + a->qk_rope_head_dim;
    if (m->head_dim != qk)
        return FAIL("head_dim", "with latent attention head_dim is qk_nope_head_dim + "
                                "qk_rope_head_dim (%lld), got %lld",
                    (long long)qk, (long long)m->head_dim);
    return MP_OK;
}

bool mp_model_has_mtp(const mp_model *m)
{
    return m->mtp_layers > 0;
}

double mp_model_mtp_loss_scale(const mp_model *m)
{
    return m->mtp_loss_scale > 0.0 ? m->mtp_loss_scale : 0.1; /* Megatron's default */
}

/* Multi-token prediction: decoder-only models (each module predicts a later
 * token of the same causal stream). */
static mp_status finish_mtp(const mp_model *m, mp_error *err)
{
    if (!mp_model_has_mtp(m)) {
        if (m->mtp_loss_scale > 0.0)
            return FAIL("mtp_loss_scale", "given without mtp_layers");
        return MP_OK;
    }
    if (m->arch != MP_ARCH_GPT && m->arch != MP_ARCH_LLAMA)
        return FAIL("mtp_layers", "multi-token prediction is for decoder-only models (gpt, "
                                  "llama), not %s", mp_arch_name(m->arch));
    return MP_OK;
}

mp_status mp_model_finish_moe(mp_model *m, mp_error *err)
{
    mp_status st = finish_moe(m, err);
    if (st == MP_OK)
        st = finish_mla(m, err);
    return st != MP_OK ? st : finish_mtp(m, err);
}
