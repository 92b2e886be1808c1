/* memory.c — bytes per parameter and activation bytes per block
 * (Korthikanti et al. 2022, §4; docs/cost-model.md §3).
 *
 * Korthikanti counts, per layer and micro-batch, in 16-bit bytes:
 *   LayerNorm inputs 4sbh, QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax
 *   output 2as²b, dropout mask as²b and output 2as²b, projection input 2sbh,
 *   its dropout mask sbh, FC1 input 2sbh, GeLU input 8sbh, FC2 input 8sbh,
 *   MLP dropout mask sbh  =  sbh(34 + 5as/h).
 * Tensor parallelism splits the parts inside the column/row-parallel region
 * (24sbh + 5as²b); sequence parallelism splits the remaining 10sbh too.
 * The general form below counts the same tensors for grouped-query
 * attention, SwiGLU, dropout turned off, flash attention (no s² terms,
 * a fp32 log-sum-exp per row instead) and T5 cross attention. For a GPT
 * block it is exactly Korthikanti's six formulas.
 *
 * The dropouts' share: attention dropout (attention_dropout > 0) keeps the
 * mask as²b and its output 2as²b, which the AV product reads; without it
 * AV reads the softmax output, already kept, and both go: 5as²b -> 2as²b.
 * Hidden dropout (hidden_dropout > 0) keeps one 1-byte mask per residual
 * branch, sbh each (two in a GPT block, three in a T5 decoder block), and
 * the embedding's sbh (cost.c). A GPT block without either keeps
 * sbh(32 + 2as/h). With flash attention the dropout runs inside the fused
 * kernel, which regenerates its mask from the RNG state in the backward:
 * nothing kept either way. */
#include "planner/cost.h"
#include "planner/cost_internal.h"

/* Bytes of optimizer state per parameter that 16-bit moments leave
 * (training.optimizer_moments, Megatron-Core's precision-aware optimizer):
 * the moments' 2 + 2 and the master weights. With FP8 recipes other than
 * delayed scaling Megatron-Core keeps fp32 master weights itself, 4 bytes
 * (optimizer_config.py, use_precision_aware_optimizer_no_fp8_or_ds_fp8
 * false); otherwise Transformer Engine's FusedAdam keeps them, and on bf16
 * parameters stores only the 16 low bits of each fp32 master weight beside
 * the bf16 parameter that holds its 16 high bits (store_param_remainders,
 * default true since TE 2.1: distrib_optimizer.py allocates the master
 * shard as int16), 2 bytes. fp16 parameters keep the whole fp32 master. */
double mp_optimizer_moment_state_bytes(const mp_config *c)
{
    const mp_training *t = &c->training;
    bool te_master = t->precision != MP_DTYPE_FP8 || t->fp8_recipe == MP_FP8_DELAYED;
    bool bf16_params = t->precision == MP_DTYPE_BF16 ||
                       (t->precision == MP_DTYPE_FP8 && !t->fp8_param_gather);
    double master = te_master && bf16_params ? 2.0 : 4.0;
    return master + 2.0 * mp_dtype_bytes(t->optimizer_moments);
}

void mp_static_bytes(const mp_config *c, double *weights, double *grads, double *optimizer)
{
    const mp_parallel *p = &c->parallel;
    double all = (double)(p->dp > 0 ? p->dp : 1) * (double)(p->cp > 0 ? p->cp : 1);
    /* ZeRO-1 (Megatron) shards over every DP rank; ZeRO-2/3 over their shard
     * group, which hybrid sharding keeps inside a scale-up domain */
    double shard = p->zero >= 2 ? (double)mp_zero_shard_ranks(c) : all;
    bool fp32 = c->training.precision == MP_DTYPE_FP32;
    /* 16-bit training: 16-bit weights, fp32 main grads (bf16 with
     * grad_reduce_bf16), fp32 master weights and Adam m and v; fp32
     * training: fp32 weights and grads, Adam m and v */
    double w = fp32 ? 4.0 : 2.0, g = c->training.grad_reduce_bf16 ? 2.0 : 4.0, o = fp32 ? 8.0 : 12.0;
    if (c->training.low_precision_optimizer)
        o = 2.0 * w; /* Adam's m and v in the parameters' type, no master copy */
    else if (!fp32 && c->training.optimizer_moments != MP_DTYPE_FP32)
        o = mp_optimizer_moment_state_bytes(c);
    int64_t stage = p->zero > 0 ? p->zero : p->dist_opt ? 1 : 0;
    if (stage >= 1)
        o /= shard;
    if (stage >= 2)
        /* DeepSpeed's ZeRO-2/3 and FSDP keep the gradients in the 16-bit
         * training type (Rajbhandari et al. 2020, §3: 2 + 2 + 12 bytes),
         * where Megatron keeps fp32 main gradients */
        g = (fp32 ? 4.0 : 2.0) / shard;
    if (stage >= 3)
        w /= shard;
    *weights = w;
    *grads = g;
    *optimizer = o;
}

double mp_static_bytes_per_param(const mp_config *c)
{
    double w, g, o;
    mp_static_bytes(c, &w, &g, &o);
    return w + g + o;
}

/* The attention core's saved bytes before the TP split: the scores
 * (softmax output, and with attention dropout its mask and output), or with
 * flash attention an fp32 log-sum-exp per query row. */
static double core_bytes(const mp_model *m, const mp_block_shape *bs, double sb, double cp,
                         bool flash)
{
    (void)cp;
    bool cross = bs->s_cross > 0;
    double heads = (double)m->heads;
    double s_kv = bs->s; /* each query attends to the whole sequence */
    if (flash)
        return 4.0 * heads * sb * (cross ? 2.0 : 1.0);
    double per_score = bs->attn_dropout ? 5.0 : 2.0;
    double core = per_score * heads * sb * s_kv;
    if (cross)
        core += per_score * heads * sb * bs->s_cross;
    return core;
}

/* cp_comm_type all_gather (TE 2.9 AttnFuncWithCPAndKVAllGather): each
 * rank saves only its own K and V for the backward (as the ring does), but
 * while one layer's backward runs it holds the re-gathered K and V of the
 * whole sequence and the zero-filled dK, dV of the same size: 2 x b x s x
 * (K and V widths)/t elements, one layer at a time, beside the saved
 * activations. 0 for the other types. */
double mp_cp_gather_bytes(const mp_config *c)
{
    const mp_parallel *p = &c->parallel;
    const mp_model *m = &c->model;
    if (p->cp < 2 || p->cp_comm_type != MP_CP_ALL_GATHER)
        return 0.0;
    double hd = m->head_dim > 0 ? (double)m->head_dim : (double)m->hidden / (double)m->heads;
    double seq = (double)(c->training.seq > 0 ? c->training.seq : m->seq);
    double kv = 2.0 * (double)m->kv_heads * hd / (double)p->tp;
    return 2.0 * (double)p->micro_batch * seq * kv * mp_dtype_bytes(c->training.precision);
}

double mp_block_act_bytes(const mp_model *m, const mp_block_shape *bs, double b, double tp,
                          double cp, bool sp, mp_recompute r, bool flash)
{
    double h = (double)m->hidden;
    double hd = m->head_dim > 0 ? (double)m->head_dim : h / (double)m->heads;
    double qd = (double)m->heads * hd;
    double kvd = (double)(m->kv_heads > 0 ? m->kv_heads : m->heads) * hd;
    double f = m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h;
    double s = bs->s / cp;      /* this rank's query tokens */
    double sb = s * b;
    bool cross = bs->s_cross > 0;
    double n_norm = cross ? 3.0 : 2.0;

    if (r == MP_RECOMPUTE_FULL)  /* only the block's input is kept (sharded with SP) */
        return 2.0 * sb * h / (sp ? tp : 1.0);

    /* outside the tensor-parallel region: replicated on every TP rank unless SP */
    double outside = 2.0 * sb * h * n_norm        /* norm inputs */
                     + 2.0 * sb * h               /* QKV input (norm output) */
                     + 2.0 * sb * h;              /* FC1 input (norm output) */
    if (cross)
        outside += 2.0 * sb * h;                  /* cross-attention Q input */
    if (bs->hidden_dropout)
        outside += sb * h * n_norm;               /* residual dropout masks (1 byte) */

    /* inside the region: split over t */
    double inside = 2.0 * sb * qd + 4.0 * sb * kvd  /* Q, K, V */
                    + 2.0 * sb * qd;                /* projection input */
    if (mp_model_is_mla(m)) {
        /* latent attention (DeepSeek-V2 §2.1.2, V3 §2.1.1; Megatron-Core's
         * multi_latent_attention.py): Q and K at n + r per head, V and the
         * attention output (the projection's input) at v; outside the TP
         * region the latents: the query and KV norms' inputs and the
         * up-projections' inputs (their outputs; one TE LayerNormLinear
         * each saves both), q_r + kv_r each, and the decoupled RoPE key, r
         * (docs/cost-model.md §12) */
        double vd = (double)m->heads * (double)m->mla.v_head_dim;
        double lat = (double)(m->mla.q_lora_rank + m->mla.kv_lora_rank);
        inside = 2.0 * sb * qd + 2.0 * sb * kvd + 2.0 * sb * vd + 2.0 * sb * vd;
        outside += 2.0 * sb * (2.0 * lat + (double)m->mla.qk_rope_head_dim);
    }
    if (m->attn.qk_norm)
        /* QK-norm (Qwen3): Transformer Engine's norm saves its input (the
         * un-normed Q and K, 16-bit) and one FP32 inverse RMS per head row;
         * its output is RoPE's input, which the fused RoPE does not keep,
         * and RoPE's output is the Q, K above (docs/cost-model.md §12a) */
        inside += 2.0 * sb * (qd + kvd) + 4.0 * sb * (qd + kvd) / hd;
    inside += (mp_activation_is_gated(m->activation) ? 4.0 : 2.0) * sb * f; /* activation input(s) */
    inside += 2.0 * sb * f;                         /* FC2 input */
    if (cross)
        inside += 2.0 * sb * qd + 4.0 * bs->s_cross / cp * b * kvd + 2.0 * sb * qd;

    double core = r == MP_RECOMPUTE_SELECTIVE ? 0.0 : core_bytes(m, bs, sb, cp, flash);

    return outside / (sp ? tp : 1.0) + (inside + core) / tp;
}

double mp_activation_bytes_per_layer(const mp_model *m, int64_t seq, int64_t micro_batch,
                                     int64_t tp, int64_t cp, bool sp, mp_recompute r)
{
    mp_block_shape bs;
    mp_block_shape_of(m, seq, 1, &bs);
    if (m->arch == MP_ARCH_T5 && m->decoder_layers > 0)
        mp_block_shape_of(m, seq, m->encoder_layers + 1, &bs); /* the larger decoder block */
    return mp_block_act_bytes(m, &bs, (double)micro_batch, (double)(tp > 0 ? tp : 1),
                              (double)(cp > 0 ? cp : 1), sp && tp > 1, r, false);
}

double mp_pipeline_output_bytes(const mp_model *m, int64_t seq, int64_t micro_batch, int64_t pp,
                                int64_t tp, bool sp)
{
    /* each in-flight micro-batch's stage output: b x s x h 16-bit values,
     * sequence-sharded over t with SP */
    double s = (double)(seq > 0 ? seq : m->seq);
    double out = 2.0 * s * (double)micro_batch * (double)m->hidden;
    if (sp && tp > 1)
        out /= (double)tp;
    return (double)(pp > 0 ? pp : 1) * out;
}

/* The norms selective recompute's `layernorm` checkpoints in a block.
 * Megatron-Core checkpoints input_layernorm and pre_mlp_layernorm only where
 * each is a module of its own (transformer_layer.py: recompute_input_layernorm
 * and recompute_pre_mlp_layernorm need the norm not to be an IdentityOp).
 * Its Transformer Engine spec (gpt_layer_specs.py
 * get_gpt_layer_with_transformer_engine_submodules; T5's t5_spec.py alike)
 * fuses the input norm into linear_qkv and a dense block's pre-MLP norm
 * into linear_fc1 (TELayerNormColumnParallelLinear, the norms IdentityOp);
 * it builds them as norms of their own only for latent attention's input
 * (input_layernorm = backend.layer_norm, mla_down_proj_fusion off by
 * default) and an MoE block's pre-MLP norm (the router's input). T5's
 * pre_cross_attn_layernorm is never checkpointed. */
unsigned mp_block_checkpointed_norms(const mp_model *m, const mp_block_shape *bs)
{
    unsigned n = 0;
    if (mp_model_is_mla(m))
        n |= MP_NORM_INPUT;
    if (bs->kind == MP_BLOCK_MOE)
        n |= MP_NORM_PRE_MLP;
    return n;
}

double mp_block_module_act_bytes(const mp_config *c, const mp_block_shape *bs,
                                 mp_recompute_module k)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    double h = (double)m->hidden, t = (double)p->tp;
    double hd = m->head_dim > 0 ? (double)m->head_dim : h / (double)m->heads;
    double qd = (double)m->heads * hd;
    double kvd = (double)(m->kv_heads > 0 ? m->kv_heads : m->heads) * hd;
    double sb = (double)p->micro_batch * bs->s / (double)p->cp;
    double outside_split = p->sp && p->tp > 1 ? t : 1.0;
    bool moe = bs->kind == MP_BLOCK_MOE, swiglu = mp_activation_is_gated(m->activation);
    bool fp8 = mp_fp8_on(c);
    double per = fp8 ? 2.0 - mp_fp8_stash_bytes(c) : 0.0; /* FP8's saving per element */
    /* the dense MLP's width, or an MoE block's shared experts' */
    double f = moe ? (double)(m->moe.shared_experts * m->moe.shared_ffn)
                   : (m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h);
    /* an MLP's inside: the activation's input(s) and FC2's input (FP8 under
     * fp8); under fp8 also FC1's FP8 copy of its input, which the checkpoint
     * keeps in bf16 instead (the norm output, saved beside it); the
     * activation's input as training.fp8_act_cache stores it */
    double act_in = swiglu ? 2.0 * mp_swiglu_input_store_bytes(c, moe) : 2.0;
    double mlp = (act_in + 2.0 - per) * sb * f / t;
    if (fp8 && f > 0.0 && moe) /* the shared FC1's FP8 copy beside the router's bf16, if kept */
        mlp += mp_fp8_shared_fc1_copy_bytes(c) * sb * h / outside_split;
    else if (!moe)
        /* a dense block's pre-MLP norm is inside FC1 (Transformer Engine's
         * LayerNormLinear, the norm an IdentityOp: gpt_layer_specs.py), so
         * the checkpoint's input is the norm's input, which FC1 kept anyway,
         * and it frees the norm's output FC1 kept: bf16, or its FP8 copy */
        mlp += (2.0 - per) * sb * h / outside_split;
    switch (k) {
    case MP_RCM_CORE_ATTN: /* the scores or log-sum-exp; Q, K, V are its inputs */
        return core_bytes(m, bs, sb, (double)p->cp, c->hw.flash_attention) / t;
    case MP_RCM_LAYERNORM: { /* the outputs of the norms that are modules of their own */
        double kept = 0.0;
        if (mp_block_checkpointed_norms(m, bs) & MP_NORM_INPUT)
            /* latent attention's input norm: kept once in bf16 by the two
             * down-projections, or each one's FP8 copy (fp8.c) */
            kept += fp8 ? 2.0 * mp_fp8_stash_bytes(c) : 2.0;
        if (mp_block_checkpointed_norms(m, bs) & MP_NORM_PRE_MLP)
            /* an MoE block's pre-MLP norm: the router keeps it in bf16, the
             * shared experts' FC1 perhaps an FP8 copy beside it (fp8.c) */
            kept += 2.0 + (m->moe.shared_experts > 0 ? mp_fp8_shared_fc1_copy_bytes(c) : 0.0);
        return kept * sb * h / outside_split;
    }
    case MP_RCM_MLA_UP_PROJ: {
        if (!mp_model_is_mla(m))
            return 0.0;
        /* Q, K and V, the core's inputs, and the up-projections' inputs:
         * Megatron-Core's TE spec fuses the latent norms into the
         * up-projections (gpt_layer_specs.py, linear_q_up_proj and
         * linear_kv_up_proj column_parallel_layer_norm_linear, q_layernorm
         * and kv_layernorm IdentityOp), so qkv_up_checkpoint
         * (multi_latent_attention.py get_query_key_value_tensors,
         * CheckpointWithoutOutput of qkv_up_proj_and_rope_apply) re-runs the
         * norms too and keeps only its inputs: the norms' inputs (the
         * down-projections' outputs) and the RoPE key. The norms' outputs
         * are bf16, or FP8 under fp8 (mp_fp8_mla_latent_saving) */
        double lat = (double)(m->mla.q_lora_rank + m->mla.kv_lora_rank);
        double qkv = 2.0 * sb * qd + 2.0 * sb * kvd +
                     2.0 * sb * (double)m->heads * (double)m->mla.v_head_dim;
        return qkv / t + 2.0 * sb * lat / outside_split - mp_fp8_mla_latent_saving(c, bs);
    }
    case MP_RCM_MLP:
        return moe ? 0.0 : mlp;
    case MP_RCM_SHARED_EXPERTS:
        return moe ? mlp : 0.0;
    case MP_RCM_MOE: /* the routed part and the shared experts; the input stays */
        return moe ? mp_moe_act_bytes(c, bs) - mp_fp8_routed_saving(c, bs) + mlp : 0.0;
    case MP_RCM_MOE_ACT: /* the activation's output = the grouped FC2's input */
        return moe ? mp_moe_act_output_bytes(c, bs) : 0.0;
    default:
        return 0.0;
    }
}

double mp_block_modules_act_bytes(const mp_config *c, const mp_block_shape *bs, uint32_t mask)
{
    bool moe_all = mask & (1u << MP_RCM_MOE);
    double freed = 0.0;
    for (int k = 0; k < MP_RCM_COUNT; k++) {
        if (!(mask & (1u << k)))
            continue;
        /* the whole MoE layer's checkpoint holds its parts' */
        if (moe_all && (k == MP_RCM_MOE_ACT || k == MP_RCM_SHARED_EXPERTS))
            continue;
        freed += mp_block_module_act_bytes(c, bs, (mp_recompute_module)k);
    }
    /* under fp8, an MoE block's pre-MLP norm output is the shared
     * experts' input: with both recomputed, the layernorm's count already
     * freed the shared FC1's FP8 copy the shared experts' count frees too.
     * (A dense block's pre-MLP norm is FC1's own, inside the MLP's
     * checkpoint, and layernorm does not checkpoint it.) */
    bool ln = mask & (1u << MP_RCM_LAYERNORM);
    if (ln && mp_fp8_on(c) && (mp_block_checkpointed_norms(&c->model, bs) & MP_NORM_PRE_MLP)) {
        const mp_parallel *p = &c->parallel;
        double sbh = (double)p->micro_batch * bs->s / (double)p->cp * (double)c->model.hidden /
                     (p->sp && p->tp > 1 ? (double)p->tp : 1.0);
        if (c->model.moe.shared_experts > 0 &&
            (mask & (1u << MP_RCM_SHARED_EXPERTS | 1u << MP_RCM_MOE)))
            freed -= mp_fp8_shared_fc1_copy_bytes(c) * sbh;
    }
    return freed;
}
