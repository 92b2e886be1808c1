/* cost_internal.h — the pieces of the cost model shared by its files
 * (flops.c, memory.c, comm.c, compute.c, pipeline.c, cost.c, report.c).
 * Not a contract for other areas: they use planner/cost.h. Equations and
 * their sources: docs/cost-model.md. */
#ifndef MP_COST_INTERNAL_H
#define MP_COST_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"

/* Bytes of one element of the training precision (fp16/bf16: 2, fp32: 4;
 * fp8: 2, since FP8 training keeps activations, gradients and communication
 * in BF16 and only its GEMM operands in FP8: fp8.c). */
double mp_dtype_bytes(mp_dtype d);

/* Megatron pads the vocabulary to a multiple of 128 * t so each TP rank's
 * slice of the embedding is GEMM-friendly (--make-vocab-size-divisible-by). */
double mp_padded_vocab(int64_t vocab, int64_t tp);

/* The kinds of transformer block: decoder-only/encoder-only self attention,
 * a T5 encoder block, a T5 decoder block (self + cross attention). */
typedef enum { MP_BLOCK_SELF, MP_BLOCK_T5_ENC, MP_BLOCK_T5_DEC, MP_BLOCK_MOE } mp_block_kind;

/* Shape of one block as the cost model sees it: sequence lengths, whether
 * attention is causal, whether there is cross attention, which dropouts run. */
typedef struct mp_block_shape {
    mp_block_kind kind;
    double s;        /* tokens of this block's own sequence */
    double s_cross;  /* encoder tokens attended by cross attention (0 = none) */
    bool causal;
    /* dropout's kernels and masks are there (a probability above 0):
     * the attention probabilities' (attention_dropout) and the residual
     * branches' (hidden_dropout) */
    bool attn_dropout;
    bool hidden_dropout;
    double window;   /* keys a windowed query sees, itself included (0: all earlier ones) */
} mp_block_shape;

/* Block item index (1..L) -> shape. */
void mp_block_shape_of(const mp_model *m, int64_t seq, int64_t block, mp_block_shape *out);

/* Parameters of one block / of the embedding item / of the head item (the
 * head counts its own matrix only when embeddings are untied). */
double mp_block_params(const mp_model *m, mp_block_kind kind);
double mp_embedding_params(const mp_model *m, int64_t seq);
double mp_head_params(const mp_model *m, bool count_tied_copy);

/* Forward FLOPs of one block / head for one sample (model FLOPs, attention
 * core counted in full, not halved for causal masks: Narayanan 2021). */
double mp_block_fwd_flops(const mp_model *m, const mp_block_shape *bs);
double mp_block_attn_core_fwd_flops(const mp_model *m, const mp_block_shape *bs);
double mp_head_fwd_flops(const mp_model *m, int64_t seq);

/* Activation bytes stashed by one block for one micro-batch (generalised
 * Korthikanti: GQA, SwiGLU, no-dropout, flash attention, cross attention). */
double mp_block_act_bytes(const mp_model *m, const mp_block_shape *bs, double b, double tp,
                          double cp, bool sp, mp_recompute r, bool flash);

/* ---- mixture of experts and latent attention (moe.c) ---- */

/* Matrices (and the two LoRA norms) of one latent-attention block. */
double mp_mla_attn_params(const mp_model *m);
/* Parameters of an MoE block's MLP: the router, the routed experts (all of
 * them, or with active only the top_k a token uses) and the shared experts. */
double mp_moe_mlp_params(const mp_model *m, bool active);
/* Multi-token prediction (mtp.c; docs/cost-model.md "Multi-token
 * prediction"): one module's parameters besides the shared embedding and
 * head (three norms, the 2h -> h projection, a block of the last block's
 * kind), and the forward FLOPs of all modules for one sequence of seq. */
double mp_mtp_module_params(const mp_model *m);
double mp_mtp_fwd_flops(const mp_model *m, int64_t seq);

/* The busiest expert rank's tokens over the mean: moe.imbalance, else the
 * capacity factor, else 1 (balanced). */
double mp_moe_imbalance(const mp_model *m);
/* Mean tokens one local expert computes per micro-batch on one rank:
 * b s / (cp tp) x top_k x ep x etp / experts. */
double mp_moe_tokens_per_expert(const mp_config *c, const mp_block_shape *bs);
/* Routed-expert parameters one GPU holds in one MoE block: experts/ep of
 * them, each split over etp. */
double mp_moe_local_expert_params(const mp_config *c);

/* Seconds per micro-batch on one GPU for the routed part of one MoE block
 * (the shared experts are timed as a dense MLP). */
/* Elementwise passes costed forward and backward apart: bytes through HBM
 * and kernel launches of each, in the profile's counted launches (an eager
 * op chain's ops converted by mp_eager_op_launches where the block is
 * timed: the experts' bias and the clamp in moe.c, YaRN's RoPE in
 * compute.c). */
typedef struct mp_pass_cost {
    double bytes_f, bytes_b, kernels_f, kernels_b;
} mp_pass_cost;

typedef struct mp_moe_time {
    double gemm_f, gemm_b, wgrad; /* router and grouped expert GEMMs */
    double ew_bytes, kernels;     /* elementwise bytes and launches of the forward */
    double router_kernels;        /* of kernels, the router's (moe_router's CUDA graph) */
    double cast_f, cast_b;        /* FP8 casts of the grouped GEMMs' operands (bytes) */
    double comm_f, comm_b;        /* dispatch + combine (and the etp gather) */
    double act_bytes;             /* of ew_bytes: the experts' activation function */
    double sort_bytes;            /* of ew_bytes: the all-to-all's sort by local expert */
    mp_pass_cost bias;            /* the experts' output bias, applied per expert */
    mp_pass_cost clamp;           /* GPT-OSS's eager clamp of the activation's input */
    mp_pass_cost pad;             /* FP8: the experts' rows padded to the GEMM alignment and back */
    double clamp_syncs;           /* of it, stream synchronisations per forward (oss_cost.c) */
    /* the token dispatcher's host synchronisations per forward
     * (mp_moe_dispatch_syncs), and the GPU's idle time they cost a forward:
     * one host dispatch each, less the GPU work still queued behind the
     * point the host waits for (moe.c) */
    double dispatch_syncs, dispatch_sync_s;
    /* the host's per-expert launches of the grouped GEMMs (Transformer
     * Engine's loop over the local experts), in the profile's counted
     * launches: forward, backward (moe.c, mp_moe_expert_launches) */
    double expert_launches_f, expert_launches_b;
} mp_moe_time;
void mp_moe_block_time(const mp_config *c, const mp_block_shape *bs, mp_moe_time *out);
/* The host's per-expert launches of one MoE block's grouped GEMMs, forward
 * and backward, in counted launches (the profile's kernel_overhead each). */
void mp_moe_expert_launches(const mp_config *c, double *fwd, double *bwd);
/* The share of pipeline rank r's m * v passes through its chunks that
 * Megatron-Core's EP all-to-all overlap pairs with a pass of the other
 * direction: all but the warm-up forwards and cool-down backwards, which run
 * alone (cost.c; docs/cost-model.md §12, "The EP all-to-all overlap"). */
double mp_moe_a2a_paired_share(int64_t p, int64_t v, int64_t m, int64_t r);
/* DualPipe(V)'s F&B units on rank r: chunk 0's F with chunk 1's B, and
 * chunk 1's F with chunk 0's B (cost.c) */
void mp_dualpipe_fb_units(mp_schedule_kind s, int64_t p, int64_t m, int64_t r, int64_t *f0b1,
                          int64_t *f1b0);
/* The merged 1F1B pass's middle phase (cost.c): dispatches d_f then d_b on
 * the comm stream, the experts' dgrad g_b, wgrad w_b and forward e_f on the
 * compute stream, d_b after g_b and e_f after d_f; sm: the dispatcher's SM share */
double mp_moe_a2a_mid_phase(double d_f, double d_b, double g_b, double w_b, double e_f, double sm);

/* The host time of one eager PyTorch op and its CUDA launch, in the
 * profile's counted launches (kernel_overhead each; 0 without one): from
 * Python with autograd recording (forward, and a checkpoint's recompute),
 * or from the autograd engine's C++ nodes (backward). For chains of single
 * eager ops the model counts op by op (YaRN's unfused RoPE, the experts'
 * per-expert output bias, GPT-OSS's clamp), where a counted launch of a
 * Megatron layer stands for several ops and module calls (compute.c). */
double mp_eager_op_launches(const mp_hw *hw, bool backward);

/* ---- GPT-OSS (oss_cost.c) ---- */

/* The eager clamp in front of the experts' fused activation (glu_limit):
 * bytes and launches of each pass over `routed` copies of 2f elements, and
 * the stream synchronisations of one forward call. */
void mp_oss_glu_clamp(const mp_model *m, double routed, double f, mp_pass_cost *out,
                      double *syncs);
/* What the clamp's autograd saves beside the activation's input, a routed
 * copy's share of mp_moe_act_bytes (moe_act's checkpoint frees it with FC2's
 * input: mp_moe_act_output_bytes). */
double mp_oss_glu_clamp_saved_bytes(const mp_model *m, double routed, double f);

/* ---- CUDA graphs (cudagraph.c) ---- */

/* The launches of one block's passes, by the part of the layer each
 * CUDA-graph scope captures: compute.c counts them, once, and the block's
 * host time reads them (mp_block_launches). Every launch of the block is in
 * one part; a dense block has no router or moe part, an MoE block no mlp. */
typedef struct mp_pass_launches {
    double fwd, bwd;
} mp_pass_launches;
typedef struct mp_layer_launches {
    mp_pass_launches attn;   /* input norm, QKV, RoPE, attention core, projection, residual add,
                                TP collective */
    mp_pass_launches mlp;    /* a dense block's norm, FC1, activation, FC2, residual add, TP */
    mp_pass_launches router; /* of moe: the norm, router, and unoverlapped shared experts */
    mp_pass_launches moe;    /* an MoE block's whole MLP: norm, router, dispatch, experts,
                                shared experts, combine, residual add, TP */
    mp_pass_launches rest;   /* what no scope captures (cross attention) */
} mp_layer_launches;
/* The launches the host dispatches in one pass (bwd: the backward) of a
 * block under c's CUDA-graph scope: each graphed part's kernels, forward
 * and, as Transformer Engine captures the part's backward too, backward,
 * are one graph launch. */
double mp_block_launches(const mp_config *c, const mp_layer_launches *l, bool bwd);

/* ---- the flex dispatcher's copies (moe_dispatch.c) ---- */

/* Under uniform top-k routing (and the model's group limit, if any): the
 * probability that a token's experts include one of experts first ..
 * first + count - 1. */
double mp_moe_hit_probability(const mp_model *m, int64_t first, int64_t count);
/* The expected number of holders a token reaches when the experts are
 * split in order over `holders` equal holders (GPUs, or scale-up domains). */
double mp_moe_expected_holders(const mp_model *m, int64_t holders);
/* One dispatch (or combine) by the flex dispatcher: `tokens` tokens of
 * bytes_per_token each from every GPU of EP group g (members stride GPUs
 * apart), one copy per remote domain and per GPU reached. */
struct mp_group_place;
double mp_moe_dispatch_wire_bytes(const mp_config *c);
/* Host synchronisations of one MoE layer's forward in Megatron-Core's token
 * dispatcher, dropless with the fused permutation (moe_dispatch.c cites the
 * lines); 0 under a CUDA graph of the whole MoE layer. */
double mp_moe_dispatch_syncs(const mp_config *c);
double mp_moe_flex_time(const mp_config *c, const struct mp_group_place *g, double stride,
                        double tokens, double bytes_per_token);
/* Activation bytes the routed part of an MoE block stashes per micro-batch. */
/* Bytes per element of a SwiGLU input as saved for its backward
 * (training.fp8_act_cache: 2, bf16, when off; fp8.c): moe for the MoE
 * layer's experts (routed and shared), else a dense block's MLP. */
double mp_swiglu_input_store_bytes(const mp_config *c, bool moe);
/* What training.fp8_act_cache saves of a block's dense-MLP or shared-expert
 * SwiGLU input per micro-batch (no recompute or selective), from the bf16
 * count; the routed experts' smaller stash is in mp_moe_act_bytes. */
double mp_act_cache_saving(const mp_config *c, const mp_block_shape *bs);
/* HBM bytes of one pass's casts of elems SwiGLU-input elements to the
 * stored type and back (the same each pass; 0 when stored in bf16). */
double mp_swiglu_input_store_cast_bytes(const mp_config *c, bool moe, double elems);
double mp_moe_act_bytes(const mp_config *c, const mp_block_shape *bs);
/* Of those, the grouped FC2's inputs (the activation's outputs): what
 * moe_act recompute frees (FP8 stash bytes under fp8). */
double mp_moe_act_output_bytes(const mp_config *c, const mp_block_shape *bs);
/* Of those, what the busiest rank holds above the mean load: the capacity
 * factor's (or moe.imbalance's) headroom, (alpha - 1)/alpha of the routed
 * copies' bytes; 0 when balanced. */
double mp_moe_capacity_bytes(const mp_config *c, const mp_block_shape *bs);
/* Turns a block item's dense view (params split over tp, the activations of
 * an ffn_hidden MLP) into the MoE block's: routed experts split over ep x
 * etp (returned in expert_params too: their optimizer shards over edp), the
 * shared experts' and routed tokens' activations. Nothing for a dense block. */
void mp_moe_item_adjust(const mp_config *c, const mp_block_shape *bs, double *params,
                        double *expert_params, double act[MP_RECOMPUTE_COUNT]);

/* ---- FP8 training (fp8.c; docs/cost-model.md §13) ---- */

/* Whether the linear layers' GEMMs run in FP8 (training.precision fp8). */
bool mp_fp8_on(const mp_config *c);
/* Peak of everything that stays in the high precision (attention core,
 * router, LM head): bf16 under fp8, else the precision's (fp32 when 0). */
double mp_high_peak(const mp_config *c);
/* An m x k by k x n GEMM of a linear layer: at the FP8 rate under fp8
 * (the profile's efficiency curve at the FLOPs the BF16 rate would do in
 * the same time), else mp_gemm_mnk_time at the precision's rate. */
double mp_linear_gemm_time(const mp_config *c, double m, double n, double k);
/* `groups` such GEMMs run as one grouped kernel (MoE experts): their tiles
 * share the waves (gemm_shape.c). */
double mp_linear_grouped_gemm_time(const mp_config *c, double groups, double m, double n,
                                   double k);
/* How many TP ranks' shares of the (s/cp, b, h) activation one pipeline
 * transfer moves per TP rank: t without SP on current Megatron-LM (the whole
 * tensor), else 1 (cost.c says why; the search's memory bound uses it too). */
double mp_p2p_whole_factor(const mp_training *t, bool sp, int64_t tp);

/* Which GEMM of a linear layer: the forward, the input gradient or the
 * weight gradient (Transformer Engine accumulates them differently). */
typedef enum { MP_GEMM_FPROP, MP_GEMM_DGRAD, MP_GEMM_WGRAD } mp_gemm_pass;
/* The two above for a given pass: under fp8 the gradients' GEMMs of the
 * per-tensor recipes, and every GEMM of the blockwise one, accumulate with
 * the split accumulator, at mp_fp8_accumulate_factor of the rate. */
double mp_linear_gemm_pass_time(const mp_config *c, mp_gemm_pass pass, double m, double n,
                                double k);
double mp_linear_grouped_gemm_pass_time(const mp_config *c, mp_gemm_pass pass, double groups,
                                        double m, double n, double k);
/* The rate of an FP8 GEMM of this pass relative to a fast-accumulating one:
 * the profile's measured split-accumulator FP8 matmul over the FP8 peak,
 * relative to its BF16 measurement over the BF16 peak (at most 1); 1 when
 * not fp8, for a fast-accumulating GEMM, or without the measurements. */
double mp_fp8_accumulate_factor(const mp_config *c, mp_gemm_pass pass);
/* The rate of an MXFP8 GEMM relative to a per-tensor-scaled FP8 one of the
 * same shape: the profile's mxfp8_gemm_rate (at most 1); 1 when not fp8,
 * for the other recipes, or without the measurement. */
double mp_fp8_block_scale_factor(const mp_config *c);
/* HBM bytes of the FP8 casts of one such GEMM per micro-batch: forward the
 * m x k input, backward the m x n output gradient (0, 0 when not fp8). */
void mp_fp8_cast_bytes(const mp_config *c, double m, double n, double k, double *fwd,
                       double *bwd);
/* Bytes through HBM to cast one GEMM operand of elems elements to FP8:
 * sp_split = t where the operand is all-gathered over the sequence-parallel
 * group (quantized on the rank's share first), 1 otherwise; amax_fused: its
 * producer computed current scaling's amax (docs/cost-model.md §13). */
double mp_fp8_operand_cast_bytes(const mp_config *c, double elems, double sp_split,
                                 bool amax_fused);
/* Bytes per element of an FP8 tensor saved for the backward (with scales). */
double mp_fp8_stash_bytes(const mp_config *c);
/* Bytes per GEMM weight parameter of its FP8 copies (0 when not fp8). */
double mp_fp8_weight_copy_bytes(const mp_config *c);
/* What a GEMM weight's FP8 copies add to its bf16 weight, per parameter:
 * the copies, less the bf16 copy itself where the parameters are FP8
 * (training.fp8_param_gather). */
double mp_fp8_weight_net_bytes(const mp_config *c);
/* Bytes per FP8 GEMM parameter the distributed optimizer's parameter
 * all-gather moves with training.fp8_param_gather: 1, but 2 (bf16) under
 * MXFP8 (docs/cost-model.md §5). */
double mp_fp8_param_gather_bytes(const mp_config *c);
/* The same per parameter of a layer whose weights are whole (ZeRO-3's gathered layers). */
double mp_fp8_gathered_copy_bytes(const mp_config *c);
/* HBM bytes per weight parameter of casting it once per iteration. */
double mp_fp8_weight_cast_bytes(const mp_config *c);
/* Activation bytes one block saves per micro-batch by stashing its GEMM
 * inputs in FP8 instead of BF16 (no recompute or selective). */
double mp_fp8_act_saving(const mp_config *c, const mp_block_shape *bs);
/* Bytes per element kept for the attention output projection's input (2
 * when not fp8; under fp8 as Megatron-Core with Transformer Engine keeps it,
 * or DeepSeek's E5M6 with fp8_act_cache deepseek). */
double mp_fp8_proj_input_bytes(const mp_config *c);
/* Of mp_fp8_act_saving, latent attention's up-projection inputs (the
 * latent norms' outputs) stashed in FP8 (0 for other attention). */
double mp_fp8_mla_latent_saving(const mp_config *c, const mp_block_shape *bs);
/* Bytes per element of the FP8 copy the shared experts' FC1 keeps of its
 * input beside the router's bf16 one (0 where it keeps that bf16 tensor). */
double mp_fp8_shared_fc1_copy_bytes(const mp_config *c);
/* Of those, the routed experts' (an MoE block's routed copies). */
double mp_fp8_routed_saving(const mp_config *c, const mp_block_shape *bs);
/* Of mp_fp8_act_saving, the norms' outputs' part (what layernorm recompute's count starts
 * from); negative where extra FP8 copies are kept (an MoE block's shared FC1 under delayed
 * scaling, latent attention's two down-projections). */
double mp_fp8_norm_output_saving(const mp_config *c, const mp_block_shape *bs);

/* ---- communication (comm.c) ---- */

/* Where a process group lies, from the rank order t, c, d, p (docs/design.md §4). */
typedef struct mp_group_place {
    int64_t n;            /* members */
    bool cross_domain;    /* members in different scale-up domains -> scale-out tier */
    double per_node;      /* members of one group inside one node (>= 1) */
    double cross_fraction;/* PP: share of neighbour pairs in different domains */
} mp_group_place;

typedef enum {
    MP_GROUP_TP, MP_GROUP_CP, MP_GROUP_DP, MP_GROUP_PP,
    MP_GROUP_DP_SHARD,  /* the ranks the weights are sharded over (ZeRO): all of DP, or
                           with hsdp the DP ranks inside one scale-up domain */
    MP_GROUP_DP_REPLICA, /* with hsdp: the shard's copies in the other domains; else 1 */
    /* expert layers: a stage's ranks in the order etp, ep, edp (Megatron-Core
     * parallel folding) */
    MP_GROUP_ETP, MP_GROUP_EP, MP_GROUP_EDP
} mp_group_kind;
/* DP here means the gradient-reduction group (d * c ranks: CP ranks hold the
 * same weights). PP: the pair of pipeline neighbours. */
void mp_group_place_of(const mp_config *c, mp_group_kind g, mp_group_place *out);
/* GPUs of one scale-up domain (the profile's, else a node's). */
double mp_scale_up_gpus(const mp_hw *hw);
/* The flex dispatcher's backend c runs: parallel.flex_backend, or with auto
 * HybridEP where one NVLink domain spans nodes and DeepEP elsewhere
 * (megatron_moe.c); never MP_FLEX_AUTO. */
mp_flex_backend mp_flex_backend_of(const mp_config *c);

/* ---- SM contention (contention.c; docs/cost-model.md, "SM contention") ---- */

/* The communication kernels that overlap compute: NCCL collectives and
 * point-to-point (DP reduce/gather, Megatron's asynchronous TP collectives,
 * CP's ring), the MoE dispatch and combine (NCCL for all-to-all and
 * all-gather; DeepEP or HybridEP for flex), and Transformer Engine's
 * userbuffers TP overlap of a forward and of a backward pass. */
typedef enum {
    MP_COMM_NCCL,
    MP_COMM_EP,
    MP_COMM_TP_UB_FWD,
    MP_COMM_TP_UB_BWD
} mp_comm_kernel;
/* The share of the GPU's SMs such a kernel occupies while it runs (0 where
 * the profile gives no sm_count, or no nccl_ctas for NCCL's kernels). */
double mp_comm_sm_share(const mp_config *c, mp_comm_kernel k);
/* What of comm seconds of communication, overlapping compute seconds of
 * work whose rate drops to 1 - share while the kernel runs, lies beyond the
 * compute: max(comm - compute, comm x share) (0 without communication). */
double mp_overlap_excess(double comm, double compute, double share);
/* The SM share of a DP all-gather (reduce false) or reduce-scatter (true)
 * over group g: NCCL's CTAs, or with parallel.nccl_ub the SM-light
 * algorithms that registered buffers allow. */
double mp_dp_sm_share(const mp_config *c, const mp_group_place *g, bool reduce);
/* The CTAs (SMs) NCCL's grouped all-to-all over group g holds: the
 * profile's p2p channels (nccl_ctas) inside one NVLink domain; across
 * domains one block of channels per peer for each group of up to 8 rounds
 * (NCCL 2.29's p2p schedule; contention.c). 0 without nccl_ctas. */
double mp_nccl_alltoall_ctas(const mp_hw *hw, const mp_group_place *g);
/* Megatron-Core's overlapped DP on a pipeline of p ranks with v chunks each
 * (index r*v + c: chunk c of pipeline rank r; fwd, bwd: one micro-batch's
 * forward and backward of that chunk; share: its part of the most loaded
 * rank's collective, of red or ag seconds; docs/cost-model.md §5).
 * Exposed seconds past the pipeline's end of the gradient reductions under
 * interleaved 1F1B with align_grad_reduce: each chunk's launched after its
 * last backward, pipeline rank backwards late, chunk 0's after the cooldown;
 * sm_r the share of the SMs they take from compute beside them. */
double mp_dp_aligned_reduce_exposed(int64_t p, int64_t v, const double *bwd, const double *share,
                                    double red, double sm_r);
/* Seconds the pipeline starts late for the parameter all-gathers when they
 * all start with the step, in chunk order (align_param_gather; one chunk:
 * the first forward's pre-hooks): bucket_frac[r] the part of rank r's chunk
 * 0 in its first bucket; sm_a the SMs' share they take. ahead (NULL: none):
 * --overlap-param-gather-with-optimizer-step, rank r's chunk-0 gather began
 * ahead[r] seconds before the step, under the optimizer step, which it slows
 * by sm_a of the overlap (the latest rank's slowdown is added). */
double mp_dp_early_gather_exposed(int64_t p, int64_t v, const double *fwd, const double *share,
                                  const double *bucket_frac, const double *ahead, double ag,
                                  double sm_a);
/* The same with the chunks' first forwards given: due[r*v + c], when rank
 * r's first forward of chunk c starts without DP (due[r*v] its first). */
double mp_dp_gather_due_exposed(int64_t p, int64_t v, const double *fwd, const double *share,
                                const double *bucket_frac, const double *due, const double *ahead,
                                double ag, double sm_a);
/* Seconds the reductions add past the pipeline's end under the schedules
 * that split the backward (ZB-H1, ZB-V, DualPipeV, DualPipe): chunk c of rank r
 * (index r*v + c, v <= 8) reduced from the start of its last weight-gradient
 * op, win_start[] before the rank's last compute op, its last bucket
 * (bucket_frac[] of it) after that op ends, win_end[] before it; one at a
 * time; rank r ending lead[r] before the pipeline (NULL: 0); sm_r the SMs'
 * share they take from compute beside them. */
double mp_dp_tail_reduce_exposed(int64_t p, int64_t v, const double *win_start,
                                 const double *win_end, const double *lead, const double *share,
                                 const double *bucket_frac, double red, double sm_r);

/* The ranks one ZeRO shard spans: d * c, or with hsdp the largest divisor of
 * d * c whose DP ranks fit in one scale-up domain (at least 1). */
int64_t mp_zero_shard_ranks(const mp_config *c);

typedef enum { MP_COLL_ALLREDUCE, MP_COLL_ALLGATHER, MP_COLL_REDUCESCATTER, MP_COLL_P2P } mp_coll_kind;
/* Seconds for one collective over bytes (the full tensor: the all-reduce's
 * input, the all-gather's output, the reduce-scatter's input, the message). */
double mp_coll_time(const mp_hw *hw, const mp_group_place *g, mp_coll_kind k, double bytes);
/* The scale-out bandwidth factor of a group: the profile's
 * scale_out.partial_node_efficiency when the group crosses nodes holding more
 * than one but not all of each node's GPUs, else 1. */
double mp_partial_node_factor(const mp_hw *hw, const mp_group_place *g);

/* ---- compute (compute.c) ---- */
/* The factor on the profile's GEMM curve for a GPU whose curve was
 * transferred from another GPU's fit: (matmul_achievable / BF16 peak) /
 * curve_matmul_efficiency, 1 when either field is absent. */
double mp_gemm_transfer(const mp_hw *hw);
/* Fraction of peak a GEMM reaches: the curve at curve_flops (the FLOPs of a
 * BF16 GEMM of the same duration: fp8.c) times mp_gemm_transfer, in (0, 1]. */
double mp_gemm_efficiency(const mp_hw *hw, double curve_flops);
double mp_gemm_time(const mp_hw *hw, double peak, double flops);
/* An m x k by k x n GEMM of dt-byte elements: the slower of its FLOPs at the
 * efficiency curve and its shape's tile and wave quantisation, and moving
 * its three matrices through HBM. */
double mp_gemm_mnk_time(const mp_hw *hw, double peak, double dt, double m, double n, double k);
/* `groups` GEMMs of that shape in one kernel (grouped or batched GEMM):
 * each at the curve's efficiency for its own FLOPs, their tiles sharing
 * the waves. */
double mp_gemm_grouped_time(const mp_hw *hw, double peak, double dt, double groups, double m,
                            double n, double k);

/* ---- GEMM shape (gemm_shape.c; docs/cost-model.md §4, "GEMM shape") ---- */
/* Whether the profile gives sm_count and gemm_tile (else GEMMs cost FLOPs alone). */
bool mp_gemm_shape_on(const mp_hw *hw);
/* Waves of `groups` m x n outputs cut into tile_m x tile_n CTA tiles, one
 * tile per SM at a time: ceil(tiles / sm_count). */
double mp_gemm_waves(const mp_hw *hw, double groups, double m, double n, double tile_m,
                     double tile_n);
/* Fraction of the SMs' full-tile time that `groups` m x n outputs use, with
 * the best of cuBLAS's tile shapes: 1 when the profile has no tile or SM
 * count. In (0, 1]. */
double mp_gemm_shape_efficiency(const mp_hw *hw, double groups, double m, double n);
double mp_membound_time(const mp_hw *hw, double bytes, double kernels);
/* A pass of `kernels` launches whose GPU time is gpu: max(gpu, kernels x the
 * profile's kernel_overhead (host dispatch per kernel)). */
double mp_host_bound(const mp_hw *hw, double gpu, double kernels);
/* Context parallelism under Transformer Engine's p2p ring (compute.c,
 * docs/cost-model.md §5 CP): the slowest rank's causal attention as its c
 * calls, forward and backward seconds (rows = micro-batch x local heads, s
 * the whole sequence, hd the head dim); and the bytes of the ring's merges
 * and buffer copies per pass (n_q elements of Q, n_out of the output, n_kv
 * of K and V; elt bytes per element). */
/* The attention kernel's rate as a share of peak, at 4,096 keys, and its
 * half-rate keys: FlashAttention's or cuDNN's, per mp_attention_backend_of
 * (compute.c). */
double mp_attention_efficiency_of(const mp_config *c);
double mp_attention_half_rate_keys_of(const mp_config *c);
void mp_cp_causal_attention(const mp_config *c, double rows, double s, double cp, double hd,
                            bool dropout, double *fwd, double *bwd);
/* all_gather CP's transient bytes on a rank (memory.c): the re-gathered
 * K, V and the whole dK, dV of one layer's backward; 0 otherwise. */
double mp_cp_gather_bytes(const mp_config *c);
/* Context parallelism's all_gather and a2a exchanges (compute.c): the
 * exposed collectives of one rank per micro-batch and layer, forward and
 * backward, for q_bytes of its queries and kv_bytes of its K and V; and
 * their copies at the HBM rate, n_q and n_kv elements of elt bytes. */
void mp_cp_other_comm(const mp_hw *hw, const mp_group_place *g, mp_cp_comm k, double q_bytes,
                      double kv_bytes, double *fwd, double *bwd);
void mp_cp_other_copies(mp_cp_comm k, double cp, double n_q, double n_kv, double elt,
                        mp_pass_cost *out);
void mp_cp_ring_merge(double cp, double n_q, double n_out, double n_kv, double elt,
                      mp_pass_cost *out);

/* Seconds per micro-batch on one GPU for one block, by part. */
typedef struct mp_block_time {
    double fwd_compute, bwd_compute; /* GEMMs, attention, elementwise */
    double attn_core_fwd;            /* what selective recompute re-runs */
    double wgrad;                    /* weight-gradient GEMMs inside bwd_compute (ZB-H1's W) */
    double tp_fwd, tp_bwd;           /* exposed TP/SP communication */
    double cp_fwd, cp_bwd;           /* exposed CP communication */
    double ep_fwd, ep_bwd;           /* of tp_fwd/tp_bwd: the MoE dispatch and combine */
    /* what selective recompute of each module re-runs in the backward (its
     * forward, with its communication): module_fwd[MP_RCM_CORE_ATTN] is
     * attn_core_fwd; 0 for a module the block does not have */
    double module_fwd[MP_RCM_COUNT];
    double mlp_fwd, mlp_bwd;         /* MoE: of the compute, the expert node (routed and
                                        shared GEMMs, the sorts by local expert, the
                                        activation, the FP8 casts): what runs between
                                        dispatch and combine */
    double mlp_wgrad;                /* of mlp_bwd: its weight gradients (under
                                        --delay-wgrad-compute the node's backward_dw) */
} mp_block_time;
void mp_block_time_of(const mp_config *c, const mp_block_shape *bs, mp_block_time *out);

/* The GEMM calls beyond one that Transformer Engine's userbuffers overlap
 * splits shape 0-3 (QKV, projection, FC1, FC2) into, in its forward and its
 * input gradient (compute.c; 0 without tp_overlap). */
void mp_ub_split_calls(const mp_config *c, int shape, double *fwd, double *bwd);

/* The norms selective recompute's `layernorm` checkpoints in a block
 * (memory.c): MP_NORM_INPUT, MP_NORM_PRE_MLP, or both; 0 where the
 * Transformer Engine spec fuses both into the linear layers after them. */
enum { MP_NORM_INPUT = 1u, MP_NORM_PRE_MLP = 2u };
unsigned mp_block_checkpointed_norms(const mp_model *m, const mp_block_shape *bs);

/* Activation bytes per micro-batch that recomputing module k frees in one
 * block (the saved tensors inside its checkpoint, as mp_block_act_bytes,
 * moe.c and fp8.c count them; docs/cost-model.md, "Selective recompute by
 * module"); 0 for a module the block does not have. */
double mp_block_module_act_bytes(const mp_config *c, const mp_block_shape *bs,
                                 mp_recompute_module k);

/* The same for the modules of mask together (a module inside another's
 * checkpoint counted once). */
double mp_block_modules_act_bytes(const mp_config *c, const mp_block_shape *bs, uint32_t mask);
/* What recomputing the modules of mask re-runs: the sum of module_fwd. */
double mp_block_modules_time(const mp_block_time *bt, uint32_t mask);

/* Embedding and head items (per micro-batch, one GPU). */
typedef struct mp_edge_time {
    double fwd_compute, bwd_compute, tp_fwd, tp_bwd;
    double wgrad; /* weight-gradient part of bwd_compute */
} mp_edge_time;
void mp_embedding_time_of(const mp_config *c, mp_edge_time *out);
void mp_head_time_of(const mp_config *c, mp_edge_time *out);

/* The head's vocab-parallel cross entropy on `logits` elements of this
 * rank's T x V/t logits: HBM bytes and counted launches of its passes over
 * them, forward and backward, and the stream synchronisations of one
 * backward call (compute.c; docs/cost-model.md §4, "Head"). */
void mp_cross_entropy_cost(const mp_config *c, double logits, mp_pass_cost *out, double *syncs);

/* Optimizer step (Adam, memory-bound) for params_local parameters on one GPU. */
double mp_optimizer_time(const mp_config *c, double params_local);

/* Bytes per gradient element reduced over DP: Megatron reduces fp32 main grads
 * for bf16 (arguments.py forces accumulate_allreduce_grads_in_fp32), and
 * the fp16 grads themselves for fp16. */
double mp_grad_reduce_bytes(const mp_config *c);

/* DeepSpeed's BF16 optimizer runs the plan (BigScience's Megatron-DeepSpeed
 * under bf16, mp_stack), and the time of its per-micro-batch fp32 gradient
 * accumulation over params parameters of one GPU (0 when it does not run). */
bool mp_ds_bf16_optimizer(const mp_config *c);
double mp_ds_bf16_accumulate_time(const mp_config *c, double params);
/* DeepSpeed's pipeline engine (ds_pipe.c): whether a configuration runs on it
 * is mp_ds_pipe_engine (planner/cost.h); the transfers a rank waits on per
 * pass of a micro-batch (1 Megatron, 2 DeepSpeed: a step's send and receive
 * one after the other); the PartitionedTensor gathers of one stage per
 * micro-batch, slice_bytes being one tensor-parallel rank's slice of the
 * activation (0 for Megatron-LM or t = 1). */
double mp_ds_p2p_transfers_per_pass(const mp_config *c);
/* Transfers the estimate's m rounds plus ramps count beyond TrainSchedule's
 * closed form on equal stages (ds_pipe.c): 6, 4 for m = 1, 2 for p = 2. */
int64_t mp_ds_pipe_makespan_ends(int64_t p, int64_t m);
void mp_ds_partition_gathers(const mp_config *c, double slice_bytes, bool first, bool last,
                             double *fwd, double *bwd);
/* The in-place add autograd runs per micro-batch on the 16-bit gradients of
 * params parameters of one GPU where DeepSpeed's engine leaves them in
 * param.grad (ds_pipe.c; 0 for Megatron-LM and under the BF16 optimizer). */
double mp_ds_grad_accumulate_time(const mp_config *c, double params);

#endif
