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
#include <math.h>
#include <string.h>

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

/* Matrices of one expert's MLP of width f, with their biases where the
 * model has them (GPT-OSS: gate, up and down). */
static double one_expert_params(const mp_model *m, double f)
{
    double mats = mp_activation_is_gated(m->activation) ? 3.0 : 2.0;
    double bias = m->linear_bias ? (mats - 1.0) * f + (double)m->hidden : 0.0;
    return mats * (double)m->hidden * f + bias;
}

double mp_moe_mlp_params(const mp_model *m, bool active)
{
    double routed = (double)(active ? m->moe.top_k : m->moe.experts);
    double router_bias = m->linear_bias ? (double)m->moe.experts : 0.0;
    return (double)m->hidden * (double)m->moe.experts + router_bias /* router (+ GPT-OSS's bias) */
           + routed * one_expert_params(m, (double)m->moe.expert_ffn) +
           (double)m->moe.shared_experts * one_expert_params(m, (double)m->moe.shared_ffn);
}

/* ---- expert parallelism: time and memory of one MoE block ------------- */

double mp_moe_imbalance(const mp_model *m)
{
    if (m->moe.imbalance > 0.0)
        return m->moe.imbalance;
    /* dropped tokens never exceed the capacity; dropless: balanced */
    return m->moe.capacity_factor > 0.0 ? m->moe.capacity_factor : 1.0;
}

/* Tokens of one micro-batch entering the MoE layer on one rank: this
 * rank's sequence shard (cp) split over tp by sequence parallelism, which
 * Megatron-Core requires for MoE with tp > 1. */
static double tokens_in(const mp_config *c, const mp_block_shape *bs)
{
    const mp_parallel *p = &c->parallel;
    return (double)p->micro_batch * bs->s / (double)p->cp / (double)p->tp;
}

double mp_moe_tokens_per_expert(const mp_config *c, const mp_block_shape *bs)
{
    const mp_parallel *p = &c->parallel;
    double ep = (double)mp_parallel_ep(p), etp = (double)mp_parallel_etp(p);
    /* the etp*ep ranks of an expert group send Tr*top_k token copies each,
     * spread over E experts; each expert's etp ranks all see its tokens */
    return tokens_in(c, bs) * (double)c->model.moe.top_k * ep * etp /
           (double)c->model.moe.experts;
}

double mp_moe_local_expert_params(const mp_config *c)
{
    const mp_model *m = &c->model;
    double local = (double)m->moe.experts / (double)mp_parallel_ep(&c->parallel);
    return local * one_expert_params(m, (double)m->moe.expert_ffn) /
           (double)mp_parallel_etp(&c->parallel);
}

/* Rounds of latency an NCCL all-to-all over n ranks waits: NCCL issues the
 * grouped sends and receives as one kernel whose channels each progress up
 * to NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 peers at once (src/device/
 * sendrecv.h splits a channel's warps among the batch's works;
 * src/enqueue.cc, maxConcurrent = p2p channels / channels per peer * 8).
 * Inside one NVLink domain every peer gets all the p2p channels, so 8 peers
 * at a time; across domains src/graph/paths.cc (ncclTopoComputeP2pChannels)
 * lowers the channels per peer until all peers fit in one round, which holds
 * up to 8 peers per p2p channel (the profile's nccl_ctas, where given). Not
 * one round per peer: the peers' messages are in flight together. */
static double alltoall_rounds(const mp_hw *hw, double n, bool crosses)
{
    double peers = n - 1.0;
    if (!crosses)
        return ceil(peers / 8.0);
    return hw->nccl_ctas > 0.0 ? ceil(peers / (8.0 * hw->nccl_ctas)) : 1.0;
}

/* All-to-all of bytes_per_rank (each rank's send buffer, an equal share to
 * every member) over group g: the shares for members in other scale-up
 * domains cross the network while the rest move over NVLink at once. */
static double alltoall_time(const mp_hw *hw, const mp_group_place *g, double stride,
                            double bytes_per_rank)
{
    double n = (double)g->n;
    if (n <= 1.0 || bytes_per_rank <= 0.0)
        return 0.0;
    double dom = mp_scale_up_gpus(hw);
    double inside = fmin(n, fmax(1.0, dom / stride)); /* members in my domain, me included */
    double up = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    double out = hw->scale_out.bw_per_gpu * hw->scale_out.efficiency;
    double t_up = up > 0.0 ? bytes_per_rank * (inside - 1.0) / n / up : INFINITY;
    double t_out = 0.0, lat = hw->scale_up.latency;
    if (inside < n) {
        t_out = out > 0.0 ? bytes_per_rank * (n - inside) / n / out : INFINITY;
        lat = hw->scale_out.latency;
    }
    return lat * alltoall_rounds(hw, n, inside < n) + fmax(t_up, t_out);
}

/* The experts' output (FC2) bias of a model with linear biases (GPT-OSS),
 * over `rows` routed copies of width h on this rank's `local` experts.
 * Transformer Engine adds FC1's bias inside its grouped GEMM, but Megatron-
 * Core builds FC2 with skip_bias_add and scales its bias by each copy's
 * routing probability in TEGroupedMLP._apply_bias (core_v0.15.0 and
 * core_v0.16.0, transformer/moe/experts.py): a Python loop over the local
 * experts of t + b * p, then one torch.cat. Per element (16-bit, the
 * router's probabilities in the logits' dtype): forward b * p (w2) and the
 * sum (r2 r2 w2) per expert, the cat (r2 w2): 12 bytes, 2 kernels per
 * expert + 1; backward (autograd) the bias gradient grad * p and its sum
 * over rows (r2 w2, r2), the probability gradient grad * b and its sum over
 * h (r2 w2, r2), the split's cat of the input gradients (r2 w2): 16 bytes,
 * 4 kernels per expert + 2 (docs/cost-model.md §12a). */
static void expert_output_bias(double rows, double h, double local, mp_pass_cost *out)
{
    double n = rows * h;
    out->bytes_f = 12.0 * n;
    out->bytes_b = 16.0 * n;
    out->kernels_f = 2.0 * local + 1.0;
    out->kernels_b = 4.0 * local + 2.0;
}

/* Megatron-Core's TEGroupedMLP under FP8 pads each local expert's rows to
 * the FP8 GEMMs' alignment (16 rows; MXFP8 32) before the grouped GEMMs and
 * strips the padding after them: Transformer Engine's Fp8Padding and
 * Fp8Unpadding (transformer_engine/pytorch/module/fp8_padding.py and
 * fp8_unpadding.py, v2.9 to v2.14), each one fused_multi_row_padding /
 * _unpadding kernel that copies the whole routed tensor (read and write,
 * 16-bit), forward the tokens in and the experts' output out, backward the
 * same two copies of their gradients; a third, the routing probabilities'
 * padding, is a column of one value a row (its bytes left out). Megatron-
 * Core calls them whenever the config is FP8 (moe/experts.py,
 * TEGroupedMLP.forward: core_v0.15.0 lines 862-866 and 958, 25.11's
 * cba6b0ed 903-907 and 1019, core_v0.16.0 648-652 and 762, core_v0.17.0
 * 347-351 and 402), and they copy unless every count is already aligned:
 * force-balanced (random) routing leaves almost every count unaligned. The
 * all-to-all and all-gather
 * dispatchers hand the experts unaligned counts unless
 * moe_router_padding_for_quantization pads the routing map (off by
 * default, and in every recipe tests/data runs); the flex dispatcher's
 * HybridEP pads inside its own permutation (pad_multiple, token_dispatcher.py
 * _HybridEPManager), so its counts arrive aligned and nothing is copied,
 * while DeepEP's do not (_DeepepManager hands over the counts its dispatch
 * received). So flex pays the copies when DeepEP runs: the plan's
 * parallel.flex_backend, or with auto the backend the SM share and the
 * export take too (mp_flex_backend_of: DeepEP but across a multi-node
 * NVLink domain) (docs/cost-model.md §12, "FP8 row padding"). */
static void fp8_row_padding(const mp_config *c, double routed_bytes, mp_pass_cost *out)
{
    memset(out, 0, sizeof *out);
    mp_dispatcher d = c->parallel.dispatcher;
    bool deepep = d == MP_DISPATCH_FLEX && !c->parallel.dispatch_fp8 &&
                  mp_flex_backend_of(c) == MP_FLEX_DEEPEP;
    if (!mp_fp8_on(c) || !(d == MP_DISPATCH_ALLTOALL || d == MP_DISPATCH_ALLGATHER || deepep))
        return;
    out->bytes_f = 4.0 * routed_bytes; /* tokens padded, output unpadded: r + w each */
    out->bytes_b = 4.0 * routed_bytes; /* their gradients, the other way */
    /* three fused kernels a pass (tokens, probabilities, output), each
     * behind one Python call (a torch.autograd.Function's forward, and in the
     * backward its Python backward): the host pays an eager op's call and
     * launch each, not a counted launch of a layer (mp_eager_op_launches) */
    out->kernels_f = 3.0 * mp_eager_op_launches(&c->hw, false);
    out->kernels_b = out->kernels_f;
}

/* Host time of one per-expert launch in Transformer Engine's grouped GEMM:
 * its PR #3134 (NVIDIA/TransformerEngine) measured the multi-stream cuBLASLt
 * path on SM100 at 0.267 ms for 8 experts of 128 tokens (N = K = 2048),
 * GEMMs of about 1 GFLOP that the GPU runs in a few microseconds each, so
 * the call is the host's: 33 us an expert. */
#define TE_EXPERT_LAUNCH_S 33e-6

/* Transformer Engine's GroupedLinear, which Megatron-Core's
 * --moe-grouped-gemm runs (TEGroupedMLP), is no single kernel in the
 * releases these runs used (TE 2.9 to 2.12): general_grouped_gemm ends in
 * multi_stream_cublas_gemm (common/gemm/cublaslt_gemm.cu), a host loop that
 * builds the cuBLASLt descriptors, asks for a heuristic and launches one
 * GEMM per local expert on four streams (the CUTLASS grouped kernel is
 * opt-in and Hopper-only, NVTE_USE_CUTLASS_GROUPED_GEMM), and under FP8
 * split_quantize casts each expert's operand with its own launch
 * (pytorch/csrc/extensions/cast.cpp multi_tensor_quantize_impl: only
 * delayed scaling has the fused multi-tensor cast). Per MoE block and
 * micro-batch that is, per local expert, the two GEMMs (FC1, FC2) forward
 * and their input- and weight-gradient GEMMs backward, plus under a
 * per-tensor cast the two inputs forward and the two output gradients
 * backward. The cost model counts host time in the profile's counted
 * launches (kernel_overhead each), so they are returned in those units. */
void mp_moe_expert_launches(const mp_config *c, double *fwd, double *bwd)
{
    double local = (double)c->model.moe.experts / (double)mp_parallel_ep(&c->parallel);
    bool cast = mp_fp8_on(c) && c->training.fp8_recipe != MP_FP8_DELAYED;
    double per = c->hw.kernel_overhead > 0.0 ? TE_EXPERT_LAUNCH_S / c->hw.kernel_overhead : 0.0;
    *fwd = local * (2.0 + (cast ? 2.0 : 0.0)) * per;
    *bwd = local * (4.0 + (cast ? 2.0 : 0.0)) * per;
}

/* The dispatcher's host synchronisations (mp_moe_dispatch_syncs): when the
 * host waits, the GPU runs what is queued behind the point it waits for,
 * then idles until the host's next dispatch (the profile's
 * kernel_overhead, as GPT-OSS's clamp, oss_cost.c). The all-to-all
 * dispatcher's host waits for the counts' copy, issued before Permutation 1
 * (token_dispatcher.py cuda_dtoh_point "before_permutation_1", cba6b0ed
 * line 451), so the permutation of the copies it sends (`sent` 16-bit
 * elements, r2 w2 each) is still queued and covers that much of the host's
 * dispatch; under a moe_preprocess CUDA graph the copy moves to the wait
 * (line 449) and nothing is queued. The other dispatchers wait with the
 * stream drained. */
static void dispatch_syncs(const mp_config *c, double sent, mp_moe_time *out)
{
    const mp_hw *hw = &c->hw;
    out->dispatch_syncs = mp_moe_dispatch_syncs(c);
    double queued = 0.0;
    if (c->parallel.dispatcher == MP_DISPATCH_ALLTOALL &&
        !(c->parallel.cuda_graph_scope & (1u << MP_CGS_MOE_PREPROCESS)))
        queued = mp_membound_time(hw, 4.0 * sent, 1.0);
    out->dispatch_sync_s = out->dispatch_syncs * fmax(0.0, hw->kernel_overhead - queued);
}

void mp_moe_block_time(const mp_config *c, const mp_block_shape *bs, mp_moe_time *out)
{
    const mp_model *m = &c->model;
    const mp_hw *hw = &c->hw;
    const mp_parallel *p = &c->parallel;
    double peak = mp_high_peak(c); /* the router stays in BF16 under fp8 */
    double dt = mp_dtype_bytes(c->training.precision), h = (double)m->hidden;
    double ep = (double)mp_parallel_ep(p), etp = (double)mp_parallel_etp(p);
    double E = (double)m->moe.experts, k = (double)m->moe.top_k;
    double alpha = mp_moe_imbalance(m);
    double Tr = tokens_in(c, bs);
    double ne = mp_moe_tokens_per_expert(c, bs) * alpha; /* the busiest rank's experts */
    double f = (double)m->moe.expert_ffn / etp;
    double gate = mp_activation_is_gated(m->activation) ? 2.0 : 1.0;
    memset(out, 0, sizeof *out);

    /* router: Tr x h -> E on every rank (replicated weights); AutoModel's
     * FakeBalancedGate has no weights and no scores, its routing a fixed
     * function of the token's position (moe_dispatch.c) */
    bool fake = m->moe.fake_balanced_gate;
    if (!fake) {
        out->gemm_f += mp_gemm_mnk_time(hw, peak, dt, Tr, E, h);
        double r_w = mp_gemm_mnk_time(hw, peak, dt, h, E, Tr);
        out->gemm_b += mp_gemm_mnk_time(hw, peak, dt, Tr, h, E) + r_w;
        out->wgrad += r_w;
    }
    /* grouped GEMMs: E/ep local experts of ne tokens each, at the
     * efficiency of one expert's GEMM (Megatron --moe-grouped-gemm runs them
     * as one kernel, whose tiles are those of the per-expert problem and
     * share the SMs' waves) */
    double local = E / ep;
    double shapes[2][3] = {{ne, gate * f, h}, {ne, h, f}};
    for (int i = 0; i < 2; i++) {
        double gm = shapes[i][0], gn = shapes[i][1], gk = shapes[i][2];
        double w = mp_linear_grouped_gemm_pass_time(c, MP_GEMM_WGRAD, local, gk, gn, gm);
        out->gemm_f += mp_linear_grouped_gemm_time(c, local, gm, gn, gk);
        out->gemm_b += mp_linear_grouped_gemm_pass_time(c, MP_GEMM_DGRAD, local, gm, gk, gn) + w;
        out->wgrad += w;
        double qf, qb;
        mp_fp8_cast_bytes(c, gm, gn, gk, &qf, &qb);
        out->cast_f += local * qf;
        out->cast_b += local * qb;
    }
    /* elementwise: router softmax/top-k (fp32 scores r4 w4), permute and
     * unpermute of the routed copies (r2 w2 each), the experts' activation
     * (SwiGLU r4 w2, GeLU r2 w2 per element) */
    double routed = Tr * k * etp * alpha;
    out->act_bytes = (gate > 1.0 ? 6.0 : 4.0) * ne * local * f;
    /* training.fp8_act_cache: the activation's input cast to its stored
     * type in the forward and back in the backward (fp8.c) */
    double store = mp_swiglu_input_store_cast_bytes(c, true, ne * local * gate * f);
    out->cast_f += store;
    out->cast_b += store;
    /* the all-to-all dispatcher's second permutation: the received copies
     * arrive grouped by source rank and are sorted by local expert before
     * the grouped GEMMs, and sorted back before the combine (Megatron-Core
     * MoEAlltoAllTokenDispatcher.dispatch_postprocess "Permutation 2" and
     * combine_preprocess "Unpermutation 2", sort_chunks_by_idxs, whenever
     * num_local_experts > 1; core_v0.15.0 transformer/moe/
     * token_dispatcher.py): r2 w2 each per copy and hidden element. The
     * flex dispatcher's permutation after DeepEP's dispatch is the one
     * permutation counted above; the all-gather dispatcher has none. */
    out->sort_bytes = p->dispatcher == MP_DISPATCH_ALLTOALL && local > 1.0 ? routed * h * 8.0 : 0.0;
    out->ew_bytes = (fake ? 0.0 : Tr * E * 8.0) + routed * h * 8.0 + out->act_bytes +
                    out->sort_bytes;
    /* router, top-k, scores; the fake gate's weights, arange and modulo */
    out->router_kernels = 3.0;
    out->kernels = out->router_kernels + 2.0 /* permute, unpermute */ +
                   3.0 /* FC1, activation, FC2 */ + (out->sort_bytes > 0.0 ? 2.0 : 0.0);
    if (m->linear_bias)
        expert_output_bias(ne * local, h, local, &out->bias);
    fp8_row_padding(c, routed * h * dt, &out->pad);
    mp_oss_glu_clamp(m, ne * local, f, &out->clamp, &out->clamp_syncs);
    /* both are chains of single eager ops: the host pays each op's call and
     * launch, not a counted launch of a layer (mp_eager_op_launches) */
    double eager_f = mp_eager_op_launches(hw, false), eager_b = mp_eager_op_launches(hw, true);
    out->bias.kernels_f *= eager_f;
    out->bias.kernels_b *= eager_b;
    out->clamp.kernels_f *= eager_f;
    out->clamp.kernels_b *= eager_b;
    if (p->cuda_graph_scope & (1u << MP_CGS_MOE))
        out->clamp_syncs = 0.0; /* a captured layer replays without the host */
    mp_moe_expert_launches(c, &out->expert_launches_f, &out->expert_launches_b);
    dispatch_syncs(c, Tr * k * h, out);

    /* dispatch and combine, forward; backward moves the same gradients */
    double one = 0.0;
    if (p->dispatcher == MP_DISPATCH_ALLGATHER) {
        /* every rank of the etp*ep group gets every token and keeps its
         * experts'; the combine reduce-scatters the outputs back */
        mp_group_place g = {0};
        mp_group_place_of(c, MP_GROUP_EP, &g);
        g.n = (int64_t)(ep * etp);
        g.cross_domain = ep * etp > mp_scale_up_gpus(hw);
        double bytes = Tr * ep * etp * h * dt;
        one = mp_coll_time(hw, &g, MP_COLL_ALLGATHER, bytes) +
              mp_coll_time(hw, &g, MP_COLL_REDUCESCATTER, bytes);
    } else {
        mp_group_place epg, etpg;
        mp_group_place_of(c, MP_GROUP_EP, &epg);
        mp_group_place_of(c, MP_GROUP_ETP, &etpg);
        /* each rank sends its Tr*top_k routed copies, and gets them back;
         * flex (DeepEP/HybridEP) one per remote domain and GPU reached
         * (moe_dispatch.c) */
        if (p->dispatcher == MP_DISPATCH_FLEX)
            one = mp_moe_flex_time(c, &epg, etp, Tr * alpha, h * mp_moe_dispatch_wire_bytes(c)) +
                  mp_moe_flex_time(c, &epg, etp, Tr * alpha, h * dt);
        else
            one = 2.0 * alltoall_time(hw, &epg, etp, Tr * k * h * dt * alpha);
        /* with etp > 1 an expert's etp ranks all-gather its tokens and
         * reduce-scatter its outputs */
        double gathered = Tr * k * etp * h * dt * alpha;
        one += mp_coll_time(hw, &etpg, MP_COLL_ALLGATHER, gathered) +
               mp_coll_time(hw, &etpg, MP_COLL_REDUCESCATTER, gathered);
    }
    out->comm_f = one;
    out->comm_b = one;
}

/* Routed token copies on the busiest rank of one micro-batch: each of the
 * etp*ep ranks' Tr tokens goes to top_k experts, and an expert's etp ranks
 * all see its tokens. */
static double routed_copies(const mp_config *c, const mp_block_shape *bs)
{
    const mp_model *m = &c->model;
    double etp = (double)mp_parallel_etp(&c->parallel);
    return tokens_in(c, bs) * (double)m->moe.top_k * etp * mp_moe_imbalance(m);
}

double mp_moe_act_bytes(const mp_config *c, const mp_block_shape *bs)
{
    const mp_model *m = &c->model;
    double h = (double)m->hidden, E = (double)m->moe.experts;
    double etp = (double)mp_parallel_etp(&c->parallel);
    double Tr = tokens_in(c, bs);
    double routed = routed_copies(c, bs);
    double f = (double)m->moe.expert_ffn / etp;
    bool swiglu = mp_activation_is_gated(m->activation);
    /* What Megatron-Core's MoE layer saves for its backward (docs/cost-model.md,
     * "MoE activation memory", cites the lines): the fp32 router scores and
     * probabilities (Tr x E each); per routed copy the grouped FC1's input
     * (the permuted token), the weighted activation's input(s) and its fp32
     * routing probability, and the grouped FC2's input. The combine's
     * unpermute saves only its index map: the probabilities were applied in
     * the activation, so its backward is a gather. */
    /* the activation's input: 2f_e/etp elements (SwiGLU), bf16 unless
     * training.fp8_act_cache stores it in FP8 */
    double act_in = swiglu ? 2.0 * mp_swiglu_input_store_bytes(c, true) : 2.0;
    /* (no scores under AutoModel's FakeBalancedGate: moe.fake_balanced_gate) */
    double scores = c->model.moe.fake_balanced_gate ? 0.0 : Tr * E * 8.0;
    return scores + routed * (2.0 * h + act_in * f + 4.0 + 2.0 * f) +
           mp_oss_glu_clamp_saved_bytes(m, routed, f);
}

double mp_moe_act_output_bytes(const mp_config *c, const mp_block_shape *bs)
{
    /* the grouped FC2's input, as mp_moe_act_bytes and the FP8 stash count it */
    double f = (double)c->model.moe.expert_ffn / (double)mp_parallel_etp(&c->parallel);
    double per = mp_fp8_on(c) ? mp_fp8_stash_bytes(c) : 2.0;
    /* and the clamped copy GPT-OSS's activation saves (its checkpoint frees both) */
    double freed = routed_copies(c, bs) * f * per +
                   mp_oss_glu_clamp_saved_bytes(&c->model, routed_copies(c, bs), f);
    /* Megatron-Core's FP8 input store is the activation's own: under the
     * checkpoint (CheckpointWithoutOutput, moe/experts.py) the function runs
     * without saving and the checkpoint keeps its bf16 input, fc1_output
     * (tensor_parallel/random.py), so moe_act gives that saving back.
     * DeepSeek caches the input in FP8 and recomputes the output (report
     * §3.3.3 (2)): nothing given back. */
    if (c->training.fp8_act_cache == MP_F8AC_SWIGLU_INPUT &&
        c->model.activation == MP_ACT_SWIGLU)
        freed -= routed_copies(c, bs) * 2.0 * f * (2.0 - mp_swiglu_input_store_bytes(c, true));
    return freed;
}

double mp_moe_capacity_bytes(const mp_config *c, const mp_block_shape *bs)
{
    double alpha = mp_moe_imbalance(&c->model);
    if (alpha <= 1.0)
        return 0.0;
    /* the per-copy part of mp_moe_act_bytes grows with alpha; its share
     * above the mean load is the headroom */
    double scores = tokens_in(c, bs) * (double)c->model.moe.experts * 8.0;
    double copies = mp_moe_act_bytes(c, bs) - scores - mp_fp8_routed_saving(c, bs);
    return copies * (alpha - 1.0) / alpha;
}

void mp_moe_item_adjust(const mp_config *c, const mp_block_shape *bs, double *params,
                        double *expert_params, double act[MP_RECOMPUTE_COUNT])
{
    const mp_model *m = &c->model;
    const mp_parallel *p = &c->parallel;
    *expert_params = 0.0;
    if (bs->kind != MP_BLOCK_MOE)
        return;
    /* mp_block_params split every matrix over tp; the routed experts are
     * split over ep x etp instead */
    double routed = (double)m->moe.experts * one_expert_params(m, (double)m->moe.expert_ffn);
    *expert_params = mp_moe_local_expert_params(c);
    *params += *expert_params - routed / (double)p->tp;
    /* mp_block_act_bytes counted a dense MLP of ffn_hidden: swap it for the
     * shared experts' and add the routed tokens' */
    double sb = (double)p->micro_batch * bs->s / (double)p->cp;
    double per_f = (mp_activation_is_gated(m->activation) ? 4.0 : 2.0) + 2.0;
    double dense = per_f * sb * (double)m->ffn_hidden / (double)p->tp;
    double shared = per_f * sb * (double)(m->moe.shared_experts * m->moe.shared_ffn) /
                    (double)p->tp;
    double delta = shared - dense + mp_moe_act_bytes(c, bs);
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++)
        if (r != MP_RECOMPUTE_FULL)
            act[r] += delta;
}
