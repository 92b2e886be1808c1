/* config.h — one training configuration: model + hardware + training settings
 * + the parallel split. This is what `estimate` costs and what `search` varies. */
#ifndef MP_CONFIG_H
#define MP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/hw.h"
#include "core/model.h"

typedef enum { MP_RECOMPUTE_NONE, MP_RECOMPUTE_SELECTIVE, MP_RECOMPUTE_FULL, MP_RECOMPUTE_COUNT } mp_recompute;
typedef enum {
    MP_SCHED_GPIPE,
    MP_SCHED_1F1B,
    MP_SCHED_INTERLEAVED, /* "interleaved-1f1b" */
    MP_SCHED_ZBH1,        /* "zb-h1" */
    MP_SCHED_ZBV,         /* "zb-v": two chunks per rank in a V, B/W split (Qi et al. 2024) */
    MP_SCHED_DUALPIPEV,   /* "dualpipev": DeepSeek's cut-in-half DualPipe, V placement */
    MP_SCHED_DUALPIPE,    /* "dualpipe": DeepSeek-V3's bidirectional pipeline, two weight copies */
    MP_SCHED_COUNT
} mp_schedule_kind;

/* The V placement (zb-v, dualpipev): pipeline rank r holds virtual stages r
 * and 2p-1-r, so the first and the last stage share rank 0 and the two
 * middle stages rank p-1 (docs/simulator.md, "Schedules"). */
bool mp_schedule_is_v(mp_schedule_kind s);
/* Model chunks per pipeline rank: vpp for interleaved 1F1B, 2 for the V
 * schedules and for dualpipe, else 1. */
int64_t mp_schedule_chunks(mp_schedule_kind s, int64_t vpp);
/* The distinct (virtual) stages the layers are split into: p * chunks, but p
 * for dualpipe, whose two chunks per rank are copies of whole stages (rank r
 * holds stage r of the forward-direction pipeline and stage p-1-r of the
 * reverse one; vpp is 1 there). */
int64_t mp_schedule_n_stages(mp_schedule_kind s, int64_t p, int64_t vpp);
/* The virtual stage (layer order) that chunk c of pipeline rank r runs:
 * c*p + r, or for the V schedules r (c = 0) and 2p-1-r (c = 1); for dualpipe
 * chunk c is the direction: r (c = 0) and p-1-r (c = 1). */
int64_t mp_schedule_stage(mp_schedule_kind s, int64_t p, int64_t r, int64_t c);
/* Whether the schedule splits the backward into B (input gradient) and a
 * deferred W (weight gradient): zb-h1, zb-v, dualpipev, dualpipe. */
bool mp_schedule_splits_backward(mp_schedule_kind s);
/* The schedule that runs for s on pp pipeline ranks: s, but 1f1b for zb-h1
 * at pp 1. Without a pipeline there is no bubble for a deferred W to fill: a
 * runtime runs it as Megatron's forward_backward_no_pipelining, each backward
 * whole (the zero-bubble fork replaces only the pipelined path), so that its
 * gradients are reduced under it. The schedule builder's entry points
 * (sim/schedule.c) and the simulator's (sim/engine.c mp_simulate_cost) ask
 * this, so every list built -- the simulator's, the executor's, `megaplan
 * simulate`'s -- runs it; the estimate costs the same (its split backward,
 * held gradients and DP tail windows only where splits_backward and pp > 1:
 * planner/compute.c, cost.c). The other schedules have no such case:
 * zb-v, dualpipev and dualpipe are refused below pp 2 (core/config.c), vpp > 1
 * needs pp >= 2, interleaved with one chunk is built as 1f1b already, and
 * gpipe at pp 1 keeps its order (all forwards, then all backwards: the same
 * time, its m micro-batches' activations held, as PyTorch's ScheduleGPipe on
 * one stage runs it). */
mp_schedule_kind mp_schedule_run_as(mp_schedule_kind s, int64_t pp);

/* How an MoE layer moves tokens to their experts (Megatron-Core
 * --moe-token-dispatcher-type): all-to-all inside the expert-parallel group
 * (one copy per token and routed expert), all-gather of every token to every
 * rank (each keeps its experts'), or flex (DeepEP / HybridEP kernels: one
 * copy per token and remote scale-up domain holding any of its experts, then
 * one per destination GPU over NVLink; docs/cost-model.md, "Mixture of
 * experts"). */
typedef enum {
    MP_DISPATCH_ALLTOALL,
    MP_DISPATCH_ALLGATHER,
    MP_DISPATCH_FLEX,
    MP_DISPATCH_COUNT
} mp_dispatcher;
const char *mp_dispatcher_name(mp_dispatcher d);

/* Which kernels the flex dispatcher runs (Megatron-Core
 * --moe-flex-dispatcher-backend; parallel.flex_backend): auto = the backend
 * megaplan assumes Megatron-Bridge picks, HybridEP where one NVLink domain
 * spans nodes (GB200 NVL72) and DeepEP elsewhere (planner/megatron_moe.c);
 * deepep; hybridep. The two differ here in their SMs' default (contention.c)
 * and in FP8 row padding: DeepEP hands the experts unaligned counts,
 * HybridEP aligns them itself (moe.c). */
typedef enum {
    MP_FLEX_AUTO,
    MP_FLEX_DEEPEP,
    MP_FLEX_HYBRIDEP,
    MP_FLEX_BACKEND_COUNT
} mp_flex_backend;
const char *mp_flex_backend_setting_name(mp_flex_backend b);

/* How context parallelism exchanges the attention's inputs (Megatron-Core
 * --cp-comm-type, Transformer Engine's cp_comm_type; docs/cost-model.md §5
 * CP): p2p, K/V passed around a ring under each step's attention (the
 * default: Megatron-Core passes "p2p" when the config leaves it unset);
 * all_gather, K/V gathered whole before the attention (exposed); a2a,
 * Q/K/V and the output exchanged all-to-all so that each rank runs the whole
 * sequence for heads/cp heads (DeepSpeed-Ulysses). a2a+p2p (hierarchical)
 * is named so that a plan giving it is refused with a reason. */
typedef enum {
    MP_CP_P2P,
    MP_CP_ALL_GATHER,
    MP_CP_A2A,
    MP_CP_A2A_P2P,
    MP_CP_COMM_COUNT
} mp_cp_comm;
const char *mp_cp_comm_name(mp_cp_comm k);

/* The runtime that shards a ZeRO-2/3 plan (parallel.zero_runtime): auto =
 * DeepSpeed where it can run the plan, torchtitan's FSDP2 otherwise, and no
 * pipeline parallelism (DeepSpeed refuses ZeRO-2/3 with its pipeline engine);
 * deepspeed; fsdp2 = PyTorch FSDP2 (fully_shard), which torch.distributed.
 * pipelining combines with pipeline stages (torchtitan, NeMo AutoModel): with
 * pp > 1 each stage's weights are gathered once per step and kept, its
 * gradients accumulated unsharded and reduce-scattered once
 * (docs/choosing.md §3, "FSDP with pipeline parallelism"). */
typedef enum {
    MP_ZRT_AUTO,
    MP_ZRT_DEEPSPEED,
    MP_ZRT_FSDP2,
    MP_ZRT_COUNT
} mp_zero_runtime;
const char *mp_zero_runtime_name(mp_zero_runtime r);

const char *mp_recompute_name(mp_recompute r);

/* The parts of a block that Megatron-Core's selective recompute can
 * checkpoint (--recompute-granularity selective --recompute-modules,
 * megatron/core/transformer/transformer_config.py recompute_modules), one bit
 * each; docs/cost-model.md ("Selective recompute by module") says what each
 * frees and re-runs. Megatron's others (gdn_norm_out, gdp_*, mhc) belong to
 * layer kinds megaplan has no model of. */
typedef enum {
    MP_RCM_CORE_ATTN,      /* the attention core (Korthikanti 2022's selective) */
    MP_RCM_MOE_ACT,        /* the routed experts' activation function */
    MP_RCM_LAYERNORM,      /* input_layernorm and pre_mlp_layernorm */
    MP_RCM_MLA_UP_PROJ,    /* latent attention's up-projections and RoPE */
    MP_RCM_MLP,            /* the MLP of a dense block */
    MP_RCM_MOE,            /* the whole MoE layer of an MoE block */
    MP_RCM_SHARED_EXPERTS, /* the shared experts of an MoE block */
    MP_RCM_COUNT
} mp_recompute_module;
const char *mp_recompute_module_name(mp_recompute_module m);
/* Parses a comma-separated list of module names into a mask of
 * 1u << mp_recompute_module; false (with *bad the first unknown name, NUL
 * terminated in bad_buf) when a name is unknown or the list is empty. */
bool mp_recompute_modules_parse(const char *list, uint32_t *mask, char *bad_buf, size_t bad_size);
/* "core_attn,moe_act" (Megatron's order) into buf. */
void mp_recompute_modules_format(uint32_t mask, char *buf, size_t size);

/* The parts of each layer captured as CUDA graphs by Transformer Engine
 * (Megatron-Core --cuda-graph-impl transformer_engine --cuda-graph-scope,
 * megatron/training/arguments.py), one bit each: their kernels are replayed
 * by one graph launch instead of being dispatched one by one by the host
 * (docs/cost-model.md, "CUDA graphs"). 0 = no graphs. */
typedef enum {
    MP_CGS_ATTN,           /* TransformerLayer._forward_attention */
    MP_CGS_MLP,            /* _forward_mlp of a dense layer */
    MP_CGS_MOE,            /* _forward_mlp of an MoE layer (drop-and-pad only) */
    MP_CGS_MOE_ROUTER,     /* _forward_mlp up to the router (with unoverlapped shared experts) */
    MP_CGS_MOE_PREPROCESS, /* MoELayer.preprocess (needs moe_router) */
    MP_CGS_COUNT
} mp_cuda_graph_scope;
const char *mp_cuda_graph_scope_name(mp_cuda_graph_scope s);
/* A comma-separated list of scope names into a mask of 1u << scope; false
 * (the first unknown name in bad_buf) as mp_recompute_modules_parse. */
bool mp_cuda_graph_scope_parse(const char *list, uint32_t *mask, char *bad_buf, size_t bad_size);
/* The names, for messages: "attn, mlp, moe, moe_router, moe_preprocess". */
#define MP_CUDA_GRAPH_SCOPES "attn, mlp, moe, moe_router, moe_preprocess"
const char *mp_schedule_name(mp_schedule_kind s);
/* Parse by name; return -1 when unknown. */
int mp_recompute_parse(const char *s);
int mp_schedule_parse(const char *s);

/* How Transformer Engine scales the FP8 tensors of a precision: fp8 plan
 * (Megatron-Core --fp8-recipe; docs/cost-model.md §13): delayed scaling
 * (per-tensor scale from an amax history), tensorwise (per-tensor current
 * scaling), blockwise (DeepSeek-V3's 1x128 activation and 128x128 weight
 * tiles) and mxfp8 (32-element blocks with E8M0 scales, which only Blackwell
 * tensor cores run). */
typedef enum {
    MP_FP8_DELAYED,
    MP_FP8_TENSORWISE,
    MP_FP8_BLOCKWISE,
    MP_FP8_MXFP8,
    MP_FP8_RECIPE_COUNT
} mp_fp8_recipe;
const char *mp_fp8_recipe_name(mp_fp8_recipe r);

/* Activations stashed for the backward in FP8 beyond the GEMM inputs that
 * fp8 training already keeps so (training.fp8_act_cache; docs/cost-model.md
 * §3, "FP8 activation cache"):
 *   swiglu_input  Megatron-Core's activation_func_fp8_input_store
 *                 (TransformerConfig; no command-line argument): every SwiGLU
 *                 saves its input cast to E4M3, 1 byte per element, no scale
 *                 (fusions/fused_bias_swiglu.py); a checkpoint around the
 *                 activation (moe_act) keeps its bf16 input instead;
 *   deepseek      DeepSeek-V3's recipe (technical report §3.3.3,
 *                 "Low-Precision Activation"): (2) the MoE layer's SwiGLU
 *                 inputs cached in FP8 with a scale per 1x128 tile, also
 *                 when its output is recomputed (moe_act); (1) the attention
 *                 output, the projection's input, in E5M6 (12 bits). */
typedef enum {
    MP_F8AC_OFF,
    MP_F8AC_SWIGLU_INPUT,
    MP_F8AC_DEEPSEEK,
    MP_F8AC_COUNT
} mp_fp8_act_cache;
const char *mp_fp8_act_cache_name(mp_fp8_act_cache a);

/* The training software, where its behaviour changes the cost
 * (docs/cost-model.md §5, "Megatron-DeepSpeed"): Megatron-LM (the default,
 * what every option here names); BigScience's fork of Megatron-DeepSpeed on
 * DeepSpeed's pipeline engine (2022, BLOOM's runs), whose column-parallel
 * layers all-reduce the input gradient synchronously and which under bf16
 * runs DeepSpeed's BF16 optimizer (a separate fp32 accumulation pass per
 * micro-batch, an fp32 all-reduce over DP, not a reduce-scatter); or
 * Microsoft's Megatron-DeepSpeed of 2021 (MT-NLG's time), synchronous backward
 * all-reduces only; or NVIDIA's Megatron-LM before September 2021 (Narayanan
 * 2021's runs): its own pipeline, but synchronous backward all-reduces and
 * autograd's gradient accumulation, as Megatron-DeepSpeed's. Set by the validation data (a run's `stack` column) or a
 * configuration file's training.stack; no command-line option (search plans
 * for Megatron-LM). */
typedef enum {
    MP_STACK_MEGATRON_LM = 0,
    MP_STACK_BIGSCIENCE_MDS,
    MP_STACK_MDS_2021,
    MP_STACK_MEGATRON_LM_2021,
    MP_STACK_COUNT
} mp_stack;
/* "megatron-lm", "megatron-deepspeed-bigscience", "megatron-deepspeed-2021",
 * "megatron-lm-2021" */
const char *mp_stack_name(mp_stack s);

/* Which fused attention kernel Transformer Engine's DotProductAttention runs
 * (Megatron-Core --attention-backend; training.attention_backend). auto:
 * TE's own choice, which from v1.2 (sm90) and v2.0 (sm90 and later) drops
 * FlashAttention for cuDNN's FusedAttention whenever both take the call
 * (get_attention_backend, "give FusedAttention preference on Hopper+"): fused
 * where the profile gives a fused-attention rate (its GPU is sm90 or later),
 * flash elsewhere. flash: FlashAttention (the recipe sets NVTE_FUSED_ATTN=0),
 * fused: cuDNN's. Read only where the profile has flash_attention: true. */
typedef enum { MP_ATTN_AUTO = 0, MP_ATTN_FLASH, MP_ATTN_FUSED, MP_ATTN_COUNT } mp_attn_backend;
/* "auto", "flash", "fused" */
const char *mp_attn_backend_name(mp_attn_backend b);

typedef struct mp_training {
    int64_t gpus;
    int64_t seq;          /* tokens per sample; defaults to the model's seq */
    int64_t global_batch; /* samples per iteration */
    mp_dtype precision;   /* bf16 or fp16 (fp32 accepted); fp8: bf16 training whose
                             linear layers' GEMMs run in FP8 (Transformer Engine) */
    mp_fp8_recipe fp8_recipe; /* precision fp8 only */
    /* Main gradients accumulated and reduced over DP in bf16, not fp32
     * (Megatron --grad-reduce-in-bf16; Megatron-Core DDP grad_reduce_in_fp32
     * false, as NVIDIA's Megatron-Bridge performance recipes train): 2 bytes
     * per parameter of gradients and of their reduction instead of 4. */
    bool grad_reduce_bf16;
    /* precision fp8 only: the parameters themselves are FP8 (Megatron
     * --fp8-param-gather, Transformer Engine's FP8 primary weights): the
     * linear layers keep no bf16 copy beside their FP8 ones, and the
     * distributed optimizer gathers FP8 (Megatron-Bridge's FP8 recipes). */
    bool fp8_param_gather;
    /* No fp32 master copy: the parameters stay in the training type and
     * Adam's moments take their type (torch.optim.Adam on bf16 parameters,
     * as NeMo AutoModel's benchmark recipes train): 2 + 2 bytes of optimizer
     * state per parameter instead of 4 + 4 + 4. */
    bool low_precision_optimizer;
    /* Adam's first and second moments stored in this type beside the fp32
     * master weights: Megatron-Core's precision-aware optimizer
     * (--use-precision-aware-optimizer --exp-avg-dtype X --exp-avg-sq-dtype X,
     * Transformer Engine's FusedAdam; distributed optimizer only), as
     * DeepSeek-V3 trains (report §3.3.3, "Low-Precision Optimizer States"). fp32 (the
     * default): the plain optimizer; bf16 or fp16: 2 + 2 bytes of moments per
     * parameter instead of 4 + 4 (memory.c, mp_optimizer_master_bytes). */
    mp_dtype optimizer_moments;
    /* SwiGLU inputs stashed in FP8 (mp_fp8_act_cache; off by default) */
    mp_fp8_act_cache fp8_act_cache;
    /* The loss as Transformer Engine's fused cross entropy (Megatron
     * --cross-entropy-loss-fusion --cross-entropy-fusion-impl te, which
     * Megatron-Bridge's performance recipes set): one online-softmax read of
     * the bf16 logits in the forward, the gradient written over them in the
     * backward; no fp32 copy of the logits. Off: PyTorch's unfused
     * vocab-parallel cross entropy on fp32 logits (Megatron's default). */
    bool te_cross_entropy;
    /* The loss as Megatron-Core's native fused cross entropy
     * (--cross-entropy-loss-fusion --cross-entropy-fusion-impl native, or
     * cross_entropy_loss_fusion alone before Megatron-Core 0.12): the
     * unfused passes grouped into torch.compile'd functions, on fp32 logits
     * (docs/cost-model.md §4 "Head"). Not with te_cross_entropy. */
    bool native_cross_entropy;
    /* Without SP, the pipeline transfer was split over the TP group and
     * gathered after the receive, as by Megatron-LM from 2021-02-16 until
     * 2023-03-23 (--scatter-gather-tensors-in-pipeline) or DeepSpeed's
     * partitioned pipeline engine; current Megatron-LM sends the whole tensor
     * from every TP rank (planner/cost.c p2p_whole_factor). Set by the
     * validation data that ran such code (tools/refdata.c: vTrain, Korthikanti
     * 2022) or a configuration file's training.p2p_scatter, like stack the
     * software that ran a plan (no command-line option; --format megatron
     * writes current Megatron's flags, which have no such setting). */
    bool p2p_scatter;
    mp_stack stack;       /* Megatron-LM unless a data row says otherwise */
    mp_attn_backend attention_backend; /* auto unless a plan or data row names one */
    double tokens;        /* total training tokens, for days_for_tokens (0 = not asked) */
} mp_training;

/* The largest parallel.ddp_bucket_size read (2^48 parameters, past any
 * model: a bucket larger than a rank's parameters is one bucket) */
#define MP_DDP_BUCKET_MAX (1LL << 48)

/* The largest parallel.flex_sms read: a GPU's SMs (B200 and GB200: 148; the
 * contention share is capped at the profile's sm_count) */
#define MP_FLEX_SMS_MAX 1024

#define MP_LAYOUT_CHARS 256 /* a pipeline layout string, with its NUL */

typedef struct mp_parallel {
    int64_t tp, pp, vpp, cp, dp;
    bool sp;
    int64_t micro_batch;
    mp_recompute recompute;
    /* selective only: the modules recomputed (1u << mp_recompute_module);
     * 0 = Megatron's default, the attention core alone */
    uint32_t recompute_modules;
    /* CUDA-graphed parts of each layer (1u << mp_cuda_graph_scope); 0 = none */
    uint32_t cuda_graph_scope;
    bool dist_opt;
    /* The distributed optimizer's parameter all-gather run synchronously
     * after the optimizer step, while the gradient reduction still overlaps
     * the backward (Megatron-Core --overlap-grad-reduce without
     * --overlap-param-gather: DistributedOptimizer.step launches the
     * all-gather itself when overlap_param_gather is off). Only with
     * dp_overlap and dist_opt; ignored by ZeRO-2/3. Beside dist_opt: in
     * its padding. */
    bool param_gather_sync;
    /* Megatron --overlap-param-gather-with-optimizer-step: the optimizer
     * steps the first model chunk's shard first and launches that chunk's
     * parameter all-gather at once, under the other chunks' step
     * (megatron/core/optimizer/optimizer.py ChainedOptimizer._step); the
     * buffers are not bucketed (training/models/dist_utils.py), so the
     * chunk's first forward waits for all of it. Megatron's constraints
     * (training/arguments.py): the distributed optimizer, the overlapped
     * parameter gather, the interleaved schedule (mp_config_check). In
     * dist_opt's padding. */
    bool overlap_param_gather_with_optimizer_step;
    /* the output layer's (and a tied embedding's) weight-gradient GEMMs of
     * the last pipeline stage held back from each micro-batch's backward and
     * run after the rank's last backward, in the pipeline flush (Megatron-Core
     * defer_embedding_wgrad_compute, --defer-embedding-wgrad-compute; needs
     * pp > 1, ignored otherwise). wgrad_deferral_limit: only the first that
     * many micro-batches deferred, the rest computed in place (0: all of them;
     * --wgrad-deferral-limit). docs/cost-model.md §6, "Deferred output-layer
     * wgrad". */
    bool defer_embedding_wgrad;
    mp_zero_runtime zero_runtime; /* who runs zero >= 2 (below; in dist_opt's padding) */
    /* MoE, flex dispatcher: its backend (mp_flex_backend above; auto =
     * megaplan's guess), in the padding zero_runtime left before zero */
    mp_flex_backend flex_backend;
    /* Sharding over the data-parallel ranks beyond the optimizer (ZeRO,
     * Rajbhandari et al. 2020): 0 or 1 = what dist_opt says (1 = ZeRO-1, the
     * optimizer states: Megatron's distributed optimizer); 2 = gradients too;
     * 3 = parameters too (ZeRO-3 / PyTorch FSDP: each layer's weights are
     * all-gathered for its forward and again for its backward). 2 and 3 run
     * under DeepSpeed or FSDP, not Megatron; with pipeline parallelism only
     * zero=3 under zero_runtime fsdp2. */
    int64_t zero;
    /* ZeRO-3 as hybrid sharded data parallelism (PyTorch HSDP): shard over
     * the data-parallel ranks inside one scale-up domain, replicate across
     * domains (one gradient all-reduce per step among the replicas). */
    bool hsdp;
    bool dp_overlap;     /* DP gradient reduction overlapped with backward (Megatron --overlap-grad-reduce) */
    bool tp_overlap;     /* TP comm overlapped with GEMMs (Megatron --tp-comm-overlap) */
    /* interleaved 1F1B: each chunk's activation (gradient) transfer posted
     * asynchronously and waited on before the next pass that needs it, so
     * it runs beside the other direction's compute (Megatron
     * --overlap-p2p-communication, overlap_p2p_comm; NeMo and Megatron-Bridge
     * turn it on whenever vpp > 1). Ignored by the other schedules, which
     * Megatron runs with batched synchronous p2p. Off: Megatron-Core's
     * synchronous interleaved schedule, each steady-state F and B pair
     * followed by one batch of both outputs and both next inputs, waited on
     * whole (sim/schedule.c build_interleaved_batched). */
    bool p2p_overlap;
    /* Megatron-Core DDP / Megatron FSDP nccl_ub: the parameter and gradient
     * buffers registered with NCCL as user buffers, so its DP all-gathers and
     * reduce-scatters run SM-light algorithms (contention.c) */
    bool nccl_ub;
    /* MoE: the EP all-to-all of one micro-batch overlapped with another's
     * compute in the 1F1B steady state (Megatron-Core
     * --overlap-moe-expert-parallel-comm, with --delay-wgrad-compute) */
    bool moe_a2a_overlap;
    /* MoE with shared experts: their computation overlapped with the
     * dispatch and combine (Megatron-Core --moe-shared-expert-overlap) */
    bool shared_expert_overlap;
    /* MoE, flex dispatcher: the dispatch's payload (and the combine's
     * backward gradient, which moves the same way) sent in FP8 with one
     * scale byte per 32 elements, the combine (and the dispatch's backward)
     * in bf16: DeepSeek-V3's (report §3.3.3; 1x128 tiles, an fp32 scale
     * each) and Megatron-Core's --moe-dispatch-fwd-dtype mxfp8
     * --moe-combine-bwd-dtype mxfp8 (E8M0 per 32, its ncclep backend) */
    bool dispatch_fp8;
    mp_schedule_kind schedule;
    mp_dispatcher dispatcher; /* MoE only (beside schedule: no padding) */
    /* Mixture of experts (Megatron-Core's "parallel folding"): the expert
     * layers regroup each pipeline stage's tp*cp*dp ranks as etp*ep*edp.
     * ep: expert-parallel degree (0 = 1); etp: expert tensor-parallel degree
     * (0 = tp, Megatron's default). Dense models keep both 0. */
    int64_t ep, etp;
    /* Megatron-Core DDP's bucket, in parameters (--ddp-bucket-size;
     * DistributedDataParallelConfig.bucket_size): 0 = Megatron's default,
     * max(40M, 1M * dp) (distributed_data_parallel.py). Megatron-Bridge's
     * and NeMo 2's comm-overlap configs set 128 * 1024^2 when dp > 1. Used
     * only with dp_overlap (Megatron drops it without --overlap-grad-reduce). */
    int64_t ddp_bucket_size;
    /* MoE, flex dispatcher: the SMs its dispatch and combine kernels hold
     * (Megatron-Core's moe_hybridep_num_sms / moe_deepep_num_sms, which
     * Megatron-Bridge's performance scripts set to 32 for HybridEP); 0 = the
     * backend's default, 16 for HybridEP and 20 for DeepEP (contention.c) */
    int64_t flex_sms;
    int64_t wgrad_deferral_limit; /* with defer_embedding_wgrad, above */
    /* An explicit split of the layers into the pp*vpp stages, in Megatron-Core's
     * --pipeline-model-parallel-layout grammar ("Et*3|(tt|)*29|L"; core/layout.h);
     * "" = Megatron's default split. */
    char pipeline_layout[MP_LAYOUT_CHARS];
    /* Megatron's --decoder-first-pipeline-num-layers and
     * --decoder-last-pipeline-num-layers: the blocks of pipeline rank 0 and
     * of the last rank, the middle ranks splitting the rest evenly, every
     * chunk a vpp-th of its rank's (mp_flag_stage_blocks); 0 = not given. */
    int64_t first_stage_layers, last_stage_layers;
    /* Megatron's --account-for-embedding-in-pipeline-split and
     * --account-for-loss-in-pipeline-split: the embedding (the loss) counted
     * as one more layer in the split, L + e + l units spread evenly over the
     * pp*vpp virtual stages, the first (last) virtual stage building one
     * block fewer (mp_account_split_check; false = not given). */
    bool account_for_embedding, account_for_loss;
    /* zero_runtime fsdp2 with pp > 1: FSDP2 syncs every micro-batch, each
     * backward of a chunk reduce-scattering its gradients and resharding its
     * weights, which the next pass of the chunk gathers again. Where a
     * pipeline stage's module is itself an FSDP unit,
     * torch.distributed.pipelining's stage turns both off until the last
     * backward (stage.py backward_maybe_with_nosync, the default: false);
     * any other module gets a plain backward (NeMo AutoModel's model parts,
     * whose inner model and head are the units, before its MoE patch of
     * 2c236e081). At the end, in the padding after the account-for flags. */
    bool fsdp_microbatch_sync;
    /* context parallelism's exchange (Megatron-Core --cp-comm-type) */
    mp_cp_comm cp_comm_type;
} mp_parallel;

/* Whether the user fixed the split: a layout, the first/last-stage flags or
 * the account-for flags. */
static inline bool mp_parallel_split_given(const mp_parallel *p)
{
    return p->pipeline_layout[0] || p->first_stage_layers > 0 || p->last_stage_layers > 0 ||
           p->account_for_embedding || p->account_for_loss;
}

/* The field that gives the split (for messages): pipeline_layout,
 * first_stage_layers, last_stage_layers, account_for_embedding or
 * account_for_loss; NULL when none does. */
const char *mp_parallel_split_field(const mp_parallel *p);

/* The modules recomputed by a block of recompute r: r selective, the
 * plan's modules (the attention core when none are given); otherwise 0. */
uint32_t mp_recompute_modules_of(const mp_parallel *p, mp_recompute r);

/* The expert degrees with their defaults applied (1; tp), and
 * edp = tp*cp*dp / (etp*ep), the ranks holding the same experts. */
int64_t mp_parallel_ep(const mp_parallel *p);
int64_t mp_parallel_etp(const mp_parallel *p);
int64_t mp_parallel_edp(const mp_parallel *p);

typedef struct mp_config {
    mp_model model;
    mp_hw hw;
    mp_training training;
    mp_parallel parallel;
} mp_config;

/* global_batch / (micro_batch * dp) */
int64_t mp_config_microbatches(const mp_config *c);

/* The default split of L blocks over n pipeline stages (vpp 1) when n does
 * not divide L: the first stage holds `first` blocks, the last `last`, the
 * middle ones `middle` each except the last `lighter` of them, which hold
 * one fewer. lighter == 0 is Megatron's first/last-stage form
 * (--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers,
 * the middle stages splitting the rest evenly); otherwise only an explicit
 * --pipeline-model-parallel-layout says it (megatron.c writes one for every
 * uneven split). */
/* The attention kernel a plan runs: its attention_backend, auto resolved
 * by Transformer Engine's rule (mp_attn_backend above). */
mp_attn_backend mp_attention_backend_of(const mp_config *c);

typedef struct mp_uneven {
    int64_t first, last, middle, lighter;
} mp_uneven;

/* Chooses that split so that the slowest stage does the least work, counting
 * a stage's work in block units: its blocks, one more on the first for the
 * embedding and one more on the last for the final norm, head and loss (the
 * convention of Megatron's --account-for-embedding/loss-in-pipeline-split
 * and of Llama 3's 126 layers on 16 stages, 7, 8 x 14, 7), and two more there
 * for each of the mtp multi-token-prediction modules (a block and another
 * pass of the head). Every stage keeps at least one block. Among the splits
 * with the least slowest stage: Megatron's first/last-stage form when one
 * is among them (the most even of those, then the heavier first), else the
 * most even split, the first and the last stage giving up a block first and
 * then the middle stages from the end. 61 layers on 32 stages: 1, 2 x 29, 1,
 * 1 (the first/last flags could do no better than 16, 1 x 30, 15). false
 * when n < 2 or n > L. */
bool mp_uneven_split(int64_t L, int64_t n, int64_t mtp, mp_uneven *out);
/* Blocks of stage k of n under split u. */
int64_t mp_uneven_stage_blocks(const mp_uneven *u, int64_t n, int64_t k);

/* Megatron's first/last-stage flags with virtual stages
 * (--decoder-first-pipeline-num-layers F --decoder-last-pipeline-num-layers
 * L' --num-virtual-stages-per-pipeline-rank vpp): rank 0 holds F blocks, the
 * last rank L', each middle rank M, and every chunk of a rank a vpp-th of its
 * rank's count (transformer_block.py get_num_layers_to_build,
 * transformer_layer.py get_transformer_layer_offset, Megatron-LM d98e8a6).
 * transformer_config.py's checks: F, L' > 0 and multiples of vpp, the middle
 * ranks' layers non-empty where there are middle ranks, divisible among them,
 * each rank's a multiple of vpp. Of the splits those allow, the one whose
 * busiest rank does the least work (in mp_uneven_split's units: the
 * embedding one more on rank 0, the loss one and each MTP module two more on
 * the last), then the most even, then the heavier first; out->lighter = 0.
 * false when pp < 2, vpp < 2 or no split passes (L not a multiple of vpp,
 * or fewer than 2 vpp blocks). */
bool mp_vpp_flag_split(int64_t L, int64_t pp, int64_t vpp, int64_t mtp, mp_uneven *out);

/* Blocks held by virtual stages 0..k-1 under mp_vpp_flag_split's split u. */
int64_t mp_vpp_flag_blocks_before(const mp_uneven *u, int64_t pp, int64_t vpp, int64_t k);

/* Blocks of virtual stage k (chunk k / pp of rank k % pp) under the
 * first/last-stage flags F and Lz (0: not given, that end a middle rank),
 * as transformer_block.py's get_num_layers_to_build builds them; the
 * flags must pass mp_flag_split_check. */
int64_t mp_flag_stage_blocks(int64_t L, int64_t pp, int64_t vpp, int64_t F, int64_t Lz,
                             int64_t k);
/* transformer_config.py's checks of those flags (and megaplan's: pp >= 2,
 * no layout, t5 refused, the schedules that run Megatron's stage order),
 * refusing with field first_stage_layers or last_stage_layers. */
mp_status mp_flag_split_check(const mp_config *c, mp_error *err);

/* Megatron's account-for split (transformer_block.py get_num_layers_to_build):
 * the L blocks plus e (the embedding) plus l (the loss) units, n virtual
 * stages of (L + e + l) / n units each, the first building e fewer blocks
 * and the last l fewer (a stage may hold none). The blocks of stage k of n;
 * -1 when n does not divide L + e + l. */
int64_t mp_account_stage_blocks(int64_t L, int64_t n, bool e, bool l, int64_t k);
/* transformer_config.py's checks of those flags (L + e + l divisible by pp,
 * each rank's units by vpp; neither with a layout or the first/last-stage
 * flags) and megaplan's (not t5), refusing with field account_for_embedding
 * or account_for_loss. */
mp_status mp_account_split_check(const mp_config *c, mp_error *err);

/* Whether Megatron can split L blocks over pp*vpp (virtual) stages without an
 * explicit layout: evenly; or counting the embedding and the loss as one layer
 * each (--account-for-embedding-in-pipeline-split / -loss-: L + 2 divisible,
 * any vpp); or, with vpp 1, by mp_uneven_split (a layout where Megatron's
 * first/last-stage flags cannot do as well); or, with vpp > 1, by its
 * first/last-stage flags (mp_vpp_flag_split). */
bool mp_stage_split_ok(int64_t L, int64_t pp, int64_t vpp);

/* Blocks held by stages 0..k-1 of n = pp*vpp under that default split:
 * k*L/n when n divides L; with vpp > 1, k(L+2)/n - 1 when n divides L + 2
 * (the embedding and the head take a block's place on the first and last
 * stage), else mp_vpp_flag_split's for a model of mtp MTP modules; with
 * vpp 1, mp_uneven_split's (else floor(k*L/n)). */
int64_t mp_blocks_before_stage(int64_t L, int64_t n, int64_t vpp, int64_t mtp, int64_t k);

/* Checks that the configuration can run at all, refusing with the reason
 * (field = the option or key at fault, e.g. "tp"): t divides heads and kv_heads,
 * gpus == t*p*c*d, global batch a multiple of micro_batch*d, layers divisible
 * into p*v stages as Megatron accepts them (mp_stage_split_ok), interleaving needs m a multiple of p,
 * cp divides seq into 2*cp chunks, sp needs tp > 1, ... Memory fit is NOT
 * checked here: a config that does not fit is still a valid config. */
mp_status mp_config_check(const mp_config *c, mp_error *err);
/* mp_config_check, but where stages_given (a plan file that lists its
 * stages, whose ranges mp_plan_check checks) without the refusals of the
 * split the layer count would give: any layer count pp*vpp does not divide,
 * for every schedule. The split a configuration gives itself (a layout, the
 * first/last-stage or the account-for flags) is still checked. Every check
 * of a plan that lists its stages goes through this one. */
mp_status mp_config_check_with_stages(const mp_config *c, bool stages_given, mp_error *err);

/* The default split of a V schedule (zb-v, dualpipev: vpp 2, stage k on
 * rank k for k < pp, else on rank 2pp-1-k) where neither L nor L + 2 is a
 * multiple of its 2pp stages. Megatron's first/last-stage flags split in its
 * interleaved order, which a V does not run, so megaplan spreads the blocks
 * over the ranks: each rank's work in mp_uneven_split's units (rank 0 holds
 * the first and the last stage, so the embedding, the head and loss, and
 * each MTP module's two units more) as even as can be, at least a block in
 * every stage; the blocks over the level come off rank 0 first, then off the
 * last ranks; a rank's odd block goes to its first chunk (rank 0: the
 * embedding's stage, lighter than the head's). 61 blocks on pp 16: rank 0
 * 1 + 1, ranks 1..14 2 + 2, rank 15 2 + 1. -1 when pp < 2, L < 2pp or r, k
 * out of range. */
int64_t mp_v_rank_blocks(int64_t L, int64_t pp, int64_t mtp, int64_t r);
/* Whether that split is m's default under schedule s on pp x vpp (no split
 * given): a V schedule, vpp 2, neither L nor L + 2 a multiple of 2pp, at
 * least a block for every stage, not t5. */
bool mp_v_split_default(const mp_model *m, mp_schedule_kind s, int64_t pp, int64_t vpp);
int64_t mp_v_stage_blocks(int64_t L, int64_t pp, int64_t mtp, int64_t k);
/* Whether t is a training.tokens megaplan takes: 0 (not asked) or a whole
 * number of tokens from 1 to 1e18. Within 1e-9 of a whole number counts as
 * whole, so that 1.4T (1.4 x 1e12, not exact in binary) is. */
bool mp_tokens_valid(double t);
/* The expert-parallel part of mp_config_check (core/config_moe.c). */
mp_status mp_config_check_moe(const mp_config *c, mp_error *err);
/* mp_config_check's rules for parallel.cp_comm_type (a2a+p2p refused, cp > 1
 * and no MLA unless p2p); heads: also a2a's heads and K/V heads divisible by
 * tp*cp (search leaves that to each candidate when tp or cp varies). */
mp_status mp_config_cp_comm_check(const mp_config *c, bool heads, mp_error *err);
/* The rules Megatron-LM's argument checks apply to the CUDA-graph scopes
 * (core/config_moe.c). */
mp_status mp_config_check_cuda_graph(const mp_config *c, mp_error *err);
/* The recompute modules (core/config_recompute.c): each must have something
 * to recompute in the model (mla_up_proj latent attention, moe and moe_act
 * MoE blocks, shared_experts shared experts, mlp a dense block). */
mp_status mp_config_check_recompute(const mp_config *c, mp_error *err);
/* The precision part (core/config_precision.c): the hardware must have a
 * peak rate for it (fp8: none before Hopper), and the mxfp8 recipe needs
 * Blackwell's block-scaled tensor cores (the profile's mxfp8). */
mp_status mp_config_check_precision(const mp_config *c, mp_error *err);

#endif
