/* fp8.c — FP8 training as Transformer Engine runs it under Megatron-Core
 * (docs/cost-model.md §13).
 *
 * Only the GEMMs of the linear layers (QKV, projection, FC1, FC2, the
 * grouped expert GEMMs) run in FP8: forward, input gradient and weight
 * gradient (TE's "hybrid" format: E4M3 activations and weights, E5M2 output
 * gradients). Everything else stays in BF16: the attention core (TE's FP8
 * attention is a separate switch, off by default), the router, the LM head
 * (Megatron's output layer is not a TE module), norms, communication,
 * gradients; the master weights and the optimizer are unchanged. What FP8
 * adds: casts of each GEMM operand to FP8 (memory-bound kernels), FP8 copies
 * of each weight held across the micro-batches of an iteration (two, or one
 * where FP8 GEMMs take any layout: fp8_copies), and FP8
 * copies of the GEMM inputs saved for the backward in place of the BF16
 * ones. The recipe decides the scales: one per tensor (delayed: from the
 * amax history, in the cast kernel itself; tensorwise: the current amax,
 * one more read of the tensor), one fp32 scale per 1x128 activation tile
 * and 128x128 weight tile (blockwise, DeepSeek-V3 §3.3.2), one E8M0 byte per
 * 32 elements (mxfp8, OCP MX v1.0). */
#include "planner/cost_internal.h"

bool mp_fp8_on(const mp_config *c)
{
    return c->training.precision == MP_DTYPE_FP8;
}

double mp_high_peak(const mp_config *c)
{
    mp_dtype d = mp_fp8_on(c) ? MP_DTYPE_BF16 : c->training.precision;
    double pk = (unsigned)d < MP_DTYPE_COUNT ? c->hw.peak_flops[d] : 0.0;
    return pk > 0.0 ? pk : c->hw.peak_flops[MP_DTYPE_FP32];
}

double mp_fp8_accumulate_factor(const mp_config *c, mp_gemm_pass pass)
{
    const mp_hw *hw = &c->hw;
    if (!mp_fp8_on(c) || !(hw->matmul_achievable_fp8_split > 0.0) ||
        !(hw->matmul_achievable > 0.0))
        return 1.0;
    /* Transformer Engine's split accumulator (cuBLASLt FAST_ACCUM off:
     * partial sums promoted to FP32 outside the tensor cores' limited FP8
     * accumulation, which matters on Hopper and Ada): the input and weight
     * gradients of the per-tensor recipes (their fp8_gemm_dgrad/wgrad
     * MMParams(use_split_accumulator=True), fprop False; module/base.py
     * _2X_ACC_FPROP False, _2X_ACC_DGRAD/_WGRAD True), every GEMM of the
     * blockwise recipe (Float8BlockScaling requires it in all three) */
    bool split = c->training.fp8_recipe == MP_FP8_BLOCKWISE || pass != MP_GEMM_FPROP;
    if (!split)
        return 1.0;
    double fp8 = hw->peak_flops[MP_DTYPE_FP8], bf16 = hw->peak_flops[MP_DTYPE_BF16];
    if (!(fp8 > 0.0) || !(bf16 > 0.0))
        return 1.0;
    double f = (hw->matmul_achievable_fp8_split / fp8) / (hw->matmul_achievable / bf16);
    return f < 1.0 ? f : 1.0;
}

double mp_fp8_block_scale_factor(const mp_config *c)
{
    /* MXFP8's GEMMs (tcgen05 block-scaled MMA: an E8M0 scale per 32
     * elements of each operand loaded beside the data) against per-tensor
     * FP8 GEMMs of the same shapes, measured on the GPU (the profile's
     * mxfp8_gemm_rate); the other recipes run the per-tensor kernels or, for
     * blockwise, their own rate (mp_fp8_accumulate_factor) */
    double r = c->hw.mxfp8_gemm_rate;
    if (!mp_fp8_on(c) || c->training.fp8_recipe != MP_FP8_MXFP8 || !(r > 0.0))
        return 1.0;
    return r < 1.0 ? r : 1.0;
}

double mp_linear_grouped_gemm_time(const mp_config *c, double groups, double m, double n,
                                   double k)
{
    return mp_linear_grouped_gemm_pass_time(c, MP_GEMM_FPROP, groups, m, n, k);
}

double mp_linear_gemm_pass_time(const mp_config *c, mp_gemm_pass pass, double m, double n,
                                double k)
{
    return mp_linear_grouped_gemm_pass_time(c, pass, 1.0, m, n, k);
}

double mp_linear_grouped_gemm_pass_time(const mp_config *c, mp_gemm_pass pass, double groups,
                                        double m, double n, double k)
{
    const mp_hw *hw = &c->hw;
    double high = mp_high_peak(c);
    double dt = mp_dtype_bytes(c->training.precision);
    double fp8 = hw->peak_flops[MP_DTYPE_FP8];
    if (!mp_fp8_on(c) || !(fp8 > 0.0))
        return mp_gemm_grouped_time(hw, high, dt, groups, m, n, k);
    if (!(groups > 0.0))
        return 0.0;
    /* A GEMM's fixed cost (launch, prologue, the last wave) takes the same
     * time whatever the element type, so at the FP8 rate a GEMM of F FLOPs
     * reaches the efficiency the profile's curve gives a BF16 GEMM of
     * F x bf16/fp8 FLOPs (the rule the profiles use between GPUs). Its
     * tiles quantise as a BF16 GEMM's of the same shape (gemm_shape.c). */
    double flops = 2.0 * m * n * k;
    double eff = mp_gemm_efficiency(hw, flops * high / fp8) *
                 mp_gemm_shape_efficiency(hw, groups, m, n) * mp_fp8_accumulate_factor(c, pass) *
                 mp_fp8_block_scale_factor(c);
    double compute = groups * flops / (fp8 * eff);
    /* FP8 operands (1 byte), the BF16 output (2 bytes) */
    double memory = groups * (m * k + k * n + 2.0 * m * n) / (hw->hbm_bw * hw->memory_efficiency);
    return compute > memory ? compute : memory;
}

double mp_linear_gemm_time(const mp_config *c, double m, double n, double k)
{
    return mp_linear_grouped_gemm_time(c, 1.0, m, n, k);
}

/* Scale bytes per FP8 element of an activation (one direction of tiles). */
static double act_scale_bytes(mp_fp8_recipe r)
{
    switch (r) {
    case MP_FP8_BLOCKWISE: return 4.0 / 128.0; /* fp32 per 1x128 tile */
    case MP_FP8_MXFP8: return 1.0 / 32.0;      /* E8M0 per 32 elements */
    default: return 0.0;                       /* one per tensor */
    }
}

/* Scale bytes per FP8 element of a weight. */
static double weight_scale_bytes(mp_fp8_recipe r)
{
    switch (r) {
    case MP_FP8_BLOCKWISE: return 4.0 / (128.0 * 128.0); /* fp32 per 128x128 tile */
    case MP_FP8_MXFP8: return 1.0 / 32.0;
    default: return 0.0;
    }
}

/* FP8 copies of one quantised tensor: row-wise for one GEMM and, for the
 * other GEMM that reads it along the other dimension, either a transposed
 * copy (per-tensor scales on Hopper, whose FP8 tensor cores take only the
 * TN layout) or a column-wise scaled one (mxfp8, blockwise: the scales
 * run along the other dimension). Where FP8 GEMMs take any layout
 * (Blackwell), a per-tensor scaled tensor serves both GEMMs from one copy:
 * Transformer Engine creates the transpose only when
 * non_tn_fp8_gemm_supported() is false, i.e. below compute capability 10
 * (transformer_engine/pytorch/csrc: quantizer.cpp, util.cpp). */
static double fp8_copies(const mp_config *c)
{
    mp_fp8_recipe r = c->training.fp8_recipe;
    bool per_tensor = r == MP_FP8_DELAYED || r == MP_FP8_TENSORWISE;
    return per_tensor && c->hw.fp8_any_layout ? 1.0 : 2.0;
}

/* Bytes through HBM per element cast: read the BF16 tensor (2), write its
 * FP8 copies (1 each, with their scales); the current-scaling recipe reads
 * the tensor once more for its amax first. */
static double cast_bytes_per_element(const mp_config *c)
{
    mp_fp8_recipe r = c->training.fp8_recipe;
    double b = 2.0 + fp8_copies(c) * (1.0 + act_scale_bytes(r));
    return r == MP_FP8_TENSORWISE ? b + 2.0 : b;
}

void mp_fp8_cast_bytes(const mp_config *c, double m, double n, double k, double *fwd,
                       double *bwd)
{
    *fwd = *bwd = 0.0;
    if (!mp_fp8_on(c))
        return;
    double e = cast_bytes_per_element(c);
    *fwd = e * m * k; /* the input, for this GEMM and (transposed) the weight gradient */
    *bwd = e * m * n; /* the output gradient, for the input and the weight gradients */
}

double mp_fp8_operand_cast_bytes(const mp_config *c, double elems, double sp_split,
                                 bool amax_fused)
{
    if (!mp_fp8_on(c) || !(elems > 0.0))
        return 0.0;
    mp_fp8_recipe r = c->training.fp8_recipe;
    bool per_tensor = r == MP_FP8_DELAYED || r == MP_FP8_TENSORWISE;
    /* current scaling's amax read, unless the kernel that produced the
     * tensor computed it while writing it: Transformer Engine 2.7 and later
     * run the norm of a LayerNormLinear (Megatron-Core's
     * TELayerNormColumnParallelLinear: QKV's and FC1's inputs) with the amax
     * fused (FUSED_NORM_AMAX_FP8 / create_hp_tensor_with_amax in
     * transformer_engine/pytorch/csrc/extensions/normalization.cpp, then
     * quantize_with_amax) */
    double amax = r == MP_FP8_TENSORWISE && !amax_fused ? 2.0 : 0.0;
    if (!(sp_split > 1.0) || !per_tensor)
        return elems * (cast_bytes_per_element(c) - (r == MP_FP8_TENSORWISE ? 2.0 : 0.0) + amax);
    /* A sequence-parallel operand (a column-parallel layer's input, a
     * row-parallel layer's output gradient) is quantized on the rank's 1/t
     * share before the all-gather, which then moves FP8 (TE's
     * layernorm_linear.py / linear.py forward: the quantizer runs on ln_out
     * before fill_userbuffers_buffer_for_all_gather or gather_along_first_dim,
     * row-wise only; base.py grad_output_preprocess likewise for the output
     * gradient): read 2, write the row-wise copy 1 on elems / t; the
     * transposed copy the weight gradient needs (Hopper: TN only) is made
     * from the gathered FP8 tensor, read 1 write 1 on all elems */
    double local = elems / sp_split * (2.0 + 1.0 + amax);
    return local + (fp8_copies(c) > 1.0 ? 2.0 * elems : 0.0);
}

double mp_fp8_stash_bytes(const mp_config *c)
{
    return 1.0 + act_scale_bytes(c->training.fp8_recipe);
}

double mp_fp8_gathered_copy_bytes(const mp_config *c)
{
    if (!mp_fp8_on(c))
        return 0.0;
    /* the forward's copy and the transposed (column-wise) one of the input
     * gradient; one copy serves both where FP8 GEMMs take any layout */
    return fp8_copies(c) * (1.0 + weight_scale_bytes(c->training.fp8_recipe));
}

double mp_fp8_weight_copy_bytes(const mp_config *c)
{
    double b = mp_fp8_gathered_copy_bytes(c);
    /* ZeRO-3 (Megatron FSDP): the FP8 compute weights are sharded like the
     * parameters and all-gathered per layer in FP8 (Megatron-Core's
     * fp8_param_gather, which Megatron-Bridge's FP8 recipes turn on); only
     * the gathered layers hold them whole (cost.c's ZeRO-3 working set) */
    if (c->parallel.zero >= 3)
        b /= (double)mp_zero_shard_ranks(c);
    return b;
}

double mp_fp8_weight_net_bytes(const mp_config *c)
{
    /* FP8 primary weights (Megatron --fp8-param-gather): the FP8 copies
     * are the parameters, the bf16 weight (2 bytes, sharded like the
     * parameters under ZeRO-3) is not kept; the fp32 master weights in the
     * optimizer stay */
    double bf16 = 0.0;
    if (mp_fp8_on(c) && c->training.fp8_param_gather)
        bf16 = c->parallel.zero >= 3 ? 2.0 / (double)mp_zero_shard_ranks(c) : 2.0;
    return mp_fp8_weight_copy_bytes(c) - bf16;
}

double mp_fp8_param_gather_bytes(const mp_config *c)
{
    /* Per-tensor and blockwise FP8 parameters live in Megatron DDP's uint8
     * buffer, which the all-gather moves: 1 byte. An MXFP8 parameter cannot
     * (Transformer Engine's replace_raw_data and cast_master_weights_to_fp8
     * raise NotImplementedError for MXFP8Tensor), so Megatron-Core gathers
     * its updated bf16 value in the gradient buffer and casts it to MXFP8
     * after the gather (reuse_grad_buf_for_mxfp8_param_ag): 2 bytes */
    return c->training.fp8_recipe == MP_FP8_MXFP8 ? 2.0 : 1.0;
}

double mp_fp8_weight_cast_bytes(const mp_config *c)
{
    if (!mp_fp8_on(c))
        return 0.0;
    mp_fp8_recipe r = c->training.fp8_recipe;
    /* once per iteration: TE keeps the copies over the micro-batches
     * (Megatron passes is_first_microbatch); read 2, write both copies */
    double b = 2.0 + mp_fp8_weight_copy_bytes(c);
    return r == MP_FP8_TENSORWISE ? b + 2.0 : b;
}

double mp_fp8_norm_output_saving(const mp_config *c, const mp_block_shape *bs)
{
    if (!mp_fp8_on(c))
        return 0.0;
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    double stash = mp_fp8_stash_bytes(c), per = 2.0 - stash;
    double sbh = (double)p->micro_batch * bs->s / (double)p->cp * (double)m->hidden;
    double split = p->sp && p->tp > 1 ? (double)p->tp : 1.0;
    bool moe = bs->kind == MP_BLOCK_MOE;
    /* QKV's input (and cross attention's Q input) in FP8; the pre-MLP norm's
     * output is FC1's input in a dense block. In an MoE block the router
     * keeps that output in bf16 (moe_utils.py RouterGatingLinearFunction
     * saves its input), and shared experts' FC1 may keep an FP8 copy beside
     * it (mp_fp8_shared_fc1_copy_bytes). */
    double saving = per * sbh * (moe ? 1.0 : 2.0);
    if (bs->s_cross > 0)
        saving += per * sbh;
    if (moe && m->moe.shared_experts > 0)
        saving -= mp_fp8_shared_fc1_copy_bytes(c) * sbh;
    /* latent attention's input norm output feeds two Transformer Engine
     * Linears (Megatron-Core's MLA spec: linear_q_down_proj, or linear_q_proj
     * without a query latent, and linear_kv_down_proj, not fused unless
     * mla_down_proj_fusion, default off), and each quantizes it and keeps
     * its own FP8 copy (module/linear.py _linear_forward_impl: own_quantized_input,
     * saved_inputmat); the bf16 output is kept by none: two copies, not one */
    if (mp_model_is_mla(m))
        saving -= stash * sbh;
    return saving / split;
}

double mp_fp8_shared_fc1_copy_bytes(const mp_config *c)
{
    if (!mp_fp8_on(c))
        return 0.0;
    /* The shared experts' FC1 reads the pre-MLP norm's bf16 output, which
     * the router keeps. With every recipe but delayed (TE 2.6 and later)
     * Megatron-Core sets that FC1 to keep the same bf16 tensor rather than
     * its own FP8 copy (moe/shared_experts.py SharedExpertMLP.__init__,
     * set_save_original_input on linear_fc1 unless shared_experts is
     * recomputed, whose checkpoint keeps that tensor as its input): no
     * copy. Delayed scaling (TE refuses save_original_input for it) keeps
     * the FC1's FP8 copy beside the router's bf16. */
    return c->training.fp8_recipe == MP_FP8_DELAYED ? mp_fp8_stash_bytes(c) : 0.0;
}

double mp_fp8_act_saving(const mp_config *c, const mp_block_shape *bs)
{
    if (!mp_fp8_on(c))
        return 0.0;
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    double per = 2.0 - mp_fp8_stash_bytes(c); /* saved per element: BF16 -> FP8 */
    double t = (double)p->tp, h = (double)m->hidden;
    double sb = (double)p->micro_batch * bs->s / (double)p->cp;
    double hd = m->head_dim > 0 ? (double)m->head_dim : h / (double)m->heads;
    double qd = (double)m->heads * hd;
    double f = m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h;
    bool moe = bs->kind == MP_BLOCK_MOE, cross = bs->s_cross > 0;
    /* the GEMM inputs mp_block_act_bytes counts (and moe.c for an MoE
     * block): the norms' outputs (outside the TP region), the projection's
     * and FC2's (inside it) */
    double proj = sb * (mp_model_is_mla(m) ? (double)m->heads * (double)m->mla.v_head_dim : qd);
    double inside = 0.0;
    if (cross)
        inside += sb * qd;
    inside += sb * (moe ? (double)(m->moe.shared_experts * m->moe.shared_ffn) : f);
    /* the projection's input: what mp_fp8_proj_input_bytes says is kept */
    double proj_saving = (2.0 - mp_fp8_proj_input_bytes(c)) * proj / t;
    return mp_fp8_norm_output_saving(c, bs) + per * inside / t + proj_saving +
           mp_fp8_mla_latent_saving(c, bs) + mp_fp8_routed_saving(c, bs);
}

double mp_fp8_proj_input_bytes(const mp_config *c)
{
    if (!mp_fp8_on(c))
        return 2.0;
    double stash = mp_fp8_stash_bytes(c);
    /* DeepSeek-V3 keeps the attention output, the projection's input, once
     * in its 12-bit E5M6 (report §3.3.3 (1): the attention's backward reads
     * it too), 1.5 bytes and the tile's scale: half a byte more than FP8 */
    if (c->training.fp8_act_cache == MP_F8AC_DEEPSEEK)
        return stash + 0.5;
    /* Megatron-Core with Transformer Engine: the fused (flash) attention
     * saves its bf16 output for its own backward (TE's
     * dot_product_attention/backends.py, FusedAttnFunc.forward: q, k, v and
     * out in f16_tensors, non-FP8 attention), and that output is the
     * projection's input. With delayed scaling the projection quantizes
     * it and keeps its own FP8 copy beside it (module/linear.py
     * _linear_forward_impl: own_quantized_input, saved_inputmat; Megatron-Core
     * sets save_original_input only for the other recipes, and TE refuses
     * it for the delayed Float8Quantizer): bf16 + FP8. An unfused core (no
     * flash attention) keeps no output: the FP8 copy alone. With the other
     * recipes (TE 2.6 and later) Megatron-Core sets the projection to keep
     * the attention's bf16 tensor instead of an FP8 copy (attention.py and
     * multi_latent_attention.py __init__, set_save_original_input on
     * linear_proj): one bf16 copy, the tensor the attention saved, 2 bytes.
     * Without flash attention the projection still keeps the bf16 input. */
    if (c->training.fp8_recipe == MP_FP8_DELAYED)
        return c->hw.flash_attention ? 2.0 + stash : stash;
    return 2.0;
}

double mp_fp8_mla_latent_saving(const mp_config *c, const mp_block_shape *bs)
{
    const mp_model *m = &c->model;
    if (!mp_fp8_on(c) || !mp_model_is_mla(m))
        return 0.0;
    const mp_parallel *p = &c->parallel;
    /* MLA's up-projections are Transformer Engine LayerNormLinears with the
     * latent norms fused in (Megatron-Core's TE spec, gpt_layer_specs.py:
     * linear_q_up_proj and linear_kv_up_proj column_parallel_layer_norm_linear,
     * q_layernorm and kv_layernorm IdentityOp). Under fp8 the norm writes
     * its output quantized and that FP8 tensor is what the GEMM saves
     * (module/layernorm_linear.py _LayerNormLinear.forward: with_quantized_norm,
     * ln_out_to_save = ln_out, row-wise data dropped): the up-projections'
     * inputs, q_r + kv_r per token, in FP8 instead of bf16; the norms'
     * inputs stay bf16 */
    double lat = (double)(m->mla.q_lora_rank + m->mla.kv_lora_rank);
    double sb = (double)p->micro_batch * bs->s / (double)p->cp;
    double split = p->sp && p->tp > 1 ? (double)p->tp : 1.0;
    return (2.0 - mp_fp8_stash_bytes(c)) * sb * lat / split;
}

double mp_fp8_routed_saving(const mp_config *c, const mp_block_shape *bs)
{
    if (!mp_fp8_on(c) || bs->kind != MP_BLOCK_MOE)
        return 0.0;
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    /* each routed copy's FC1 input (h) and FC2 input (f_e / etp), as
     * mp_moe_act_bytes counts them */
    double etp = (double)mp_parallel_etp(p);
    double tokens = (double)p->micro_batch * bs->s / (double)p->cp / (double)p->tp;
    double routed = tokens * (double)m->moe.top_k * etp * mp_moe_imbalance(m);
    return (2.0 - mp_fp8_stash_bytes(c)) * routed *
           ((double)m->hidden + (double)m->moe.expert_ffn / etp);
}

double mp_swiglu_input_store_bytes(const mp_config *c, bool moe)
{
    switch (c->training.fp8_act_cache) {
    case MP_F8AC_SWIGLU_INPUT:
        /* input.to(torch.float8_e4m3fn): 1 byte, no scale
         * (megatron/core/fusions/fused_bias_swiglu.py, fp8_input_store) */
        return 1.0;
    case MP_F8AC_DEEPSEEK:
        /* the MoE layer's SwiGLU inputs in FP8 with the activations' 1x128
         * tiles (DeepSeek-V3 report §3.3.3 (2) and §3.3.2) */
        return moe ? mp_fp8_stash_bytes(c) : 2.0;
    default:
        return 2.0;
    }
}

double mp_act_cache_saving(const mp_config *c, const mp_block_shape *bs)
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    if (c->training.fp8_act_cache == MP_F8AC_OFF || m->activation != MP_ACT_SWIGLU)
        return 0.0;
    bool moe = bs->kind == MP_BLOCK_MOE;
    /* the dense MLP's or the shared experts' SwiGLU input, 2f elements split
     * over t, as mp_block_act_bytes and mp_moe_item_adjust count them; the
     * routed experts' is in mp_moe_act_bytes */
    double f = moe ? (double)(m->moe.shared_experts * m->moe.shared_ffn)
                   : (m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * (double)m->hidden);
    double sb = (double)p->micro_batch * bs->s / (double)p->cp;
    return (2.0 - mp_swiglu_input_store_bytes(c, moe)) * 2.0 * sb * f / (double)p->tp;
}

double mp_swiglu_input_store_cast_bytes(const mp_config *c, bool moe, double elems)
{
    double st = mp_swiglu_input_store_bytes(c, moe);
    if (!(st < 2.0) || c->model.activation != MP_ACT_SWIGLU)
        return 0.0;
    /* read the bf16 input (2), write its stored copy (st, with its scales);
     * the backward reads it (st) and writes bf16 (2) again */
    return elems * (2.0 + st);
}
