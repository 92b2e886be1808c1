/* cost.h — the cost model: memory per GPU, time per op, and the estimate of
 * one configuration. The one source of durations and memory for estimate,
 * search and simulate (equations and sources in docs/cost-model.md).
 * All quantities are SI: bytes, seconds, FLOPs. */
#ifndef MP_COST_H
#define MP_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"
#include "planner/split.h"

typedef struct mp_memory {
    double weights, grads, optimizer, activations, other, peak, capacity; /* bytes per GPU */
    /* MoE: the routed experts' share of weights, grads and optimizer, and the
     * routed tokens' share of activations (already in the totals; 0 if dense) */
    double expert_weights, expert_grads, expert_optimizer, routed_activations;
    /* FP8: the weights' FP8 copies (in weights; the experts' share also in
     * expert_weights); 0 when not fp8 */
    double fp8_weights;
    /* MoE: of routed_activations, what the busiest rank holds above the
     * mean load (the capacity factor's or moe.imbalance's headroom) */
    double capacity_activations;
    /* Of peak, what PyTorch's caching allocator counts as allocated
     * (torch.cuda.max_memory_allocated, Megatron-LM's mem-max-allocated-bytes):
     * peak without runtime_reserve (CUDA context and NCCL buffers, which the
     * allocator never sees; the profile's reserve also covers cuBLAS/TE
     * workspaces, which it does see: tens of MiB) and without the
     * allocator_fragmentation share of the activations, which is reserved,
     * not allocated (docs/cost-model.md §3) */
    double allocated_peak;
    /* Bytes that stay allocated between steps beyond weights, gradients and
     * optimizer state (torch's allocated bytes after the optimizer step are
     * weights + grads + optimizer + this). Megatron-LM with p > 1: every
     * model chunk fed by an earlier stage keeps its last received
     * activation and that activation's gradient. Not in peak: each is
     * released by its chunk's first forward of the next step, by the time
     * the rank's in-flight activations peak. */
    double held_after_step;
} mp_memory;

/* Exposed time on the critical path: the parts add up to step. */
typedef struct mp_times {
    double step, compute, recompute, tp_comm, cp_comm, pp_comm, dp_comm, bubble, optimizer;
} mp_times;

typedef struct mp_throughput {
    double tokens_per_s, tokens_per_s_per_gpu;
    double model_tflops_per_gpu, hardware_tflops_per_gpu;
    double mfu, hfu;         /* fractions (0..1) */
    double days_for_tokens;  /* 0 when training.tokens is 0 */
    double gpu_hours_for_tokens; /* days_for_tokens x 24 x gpus: what the job holds */
} mp_throughput;

typedef struct mp_estimate {
    int64_t microbatches;
    double params;             /* total parameters of the model */
    double model_flops;        /* per iteration, all GPUs */
    double hardware_flops;     /* per iteration incl. recompute */
    mp_memory memory;          /* the most loaded GPU */
    mp_times time;
    mp_throughput throughput;
    bool fits;
    double over_bytes;         /* peak - capacity when !fits, else 0 */
} mp_estimate;

/* What one micro-batch costs on one (virtual) stage: the simulator's op
 * durations. fwd/bwd include the exposed TP/CP communication of that stage. */
typedef struct mp_stage_cost {
    double fwd;          /* F */
    double bwd;          /* B for non-split schedules: input + weight gradients + recompute */
    double bwd_input;    /* ZB-H1 B (includes recompute) */
    double bwd_weight;   /* ZB-H1 W */
    double recompute;    /* part of bwd spent re-running forward */
    double tp_comm_fwd, tp_comm_bwd; /* exposed TP/SP comm inside fwd / bwd */
    double cp_comm_fwd, cp_comm_bwd; /* exposed CP comm inside fwd / bwd */
    /* of tp_comm_fwd / tp_comm_bwd: the MoE layers' dispatch and combine
     * (expert-parallel all-to-all or all-gather), which the simulator can
     * overlap with another micro-batch's compute (mp_sim_options.ep_overlap) */
    double ep_comm_fwd, ep_comm_bwd;
    /* of fwd / bwd: the MoE layers' expert node (routed and shared experts'
     * GEMMs with the sort, activation and casts beside them; of expert_bwd,
     * expert_wgrad its weight gradients, Megatron-Core's backward_dw): the
     * merged pass of the EP all-to-all overlap runs them in its middle phase
     * (docs/simulator.md, sim/engine.c run_pair; planner/cost.c hide_a2a) */
    double expert_fwd, expert_bwd, expert_wgrad;
    /* of fwd / bwd: the embedding's and the head's (output layer and loss;
     * 0 for a head holding MTP modules, which run in the layer loop), each
     * with its exposed comm. Combined 1F1B's merged pass runs them outside
     * its phases: F's embedding and B's head before, F's head and B's
     * embedding after (sim/engine.c run_pair; planner/cost.c hide_a2a) */
    double embed_fwd, embed_bwd, head_fwd, head_bwd;
    double send_bytes;   /* activation bytes sent to the next stage per micro-batch */
    double act_bytes;    /* activation bytes stashed per in-flight micro-batch */
    /* split backward (ZB-H1, ZB-V, DualPipe(V)): the linear layers' output
     * gradients a B keeps until its W when W does not follow it at once */
    double w_hold_bytes;
    /* of act_bytes: the embedding's and the head's (the loss's logits), which
     * the backward of the loss consumes: a split backward frees them at B */
    double edge_bytes;
    double static_bytes; /* weights + grads + optimizer states of this stage, per GPU */
    double grad_bytes;   /* gradient bytes this stage reduces over DP, per GPU */
} mp_stage_cost;

/* Costs per (virtual) stage and the pipeline-wide terms. */
typedef struct mp_pipeline_cost {
    int32_t n_stages;          /* pp * vpp */
    mp_stage_cost *stages;     /* n_stages entries, owned by the caller (mp_pipeline_cost_free) */
    double p2p_latency;        /* seconds per send between pipeline neighbours */
    double p2p_bw;             /* bytes/s of that link */
    /* further transfers a rank waits on after each of its sends: 0 on
     * Megatron (a step's send and receive move together), 1 on DeepSpeed's
     * pipeline engine (its receive follows its send, ds_pipe.c) */
    double p2p_serial;
    /* parallel.p2p_overlap on interleaved 1F1B (Megatron
     * --overlap-p2p-communication): the schedule's lists place each transfer
     * at its own F or B and the simulator does not wait on sends; false:
     * Megatron's synchronous interleaved order, one batched exchange after
     * each steady-state F and B pair (sim/schedule.c build_interleaved) */
    bool p2p_overlap;
    double dp_time;            /* full DP gradient reduction (+ all-gather with dist-opt) of the most loaded rank */
    double dp_exposed;         /* the part not hidden under backward */
    /* Megatron-Core interleaved 1F1B with overlap (align_grad_reduce; cost.c
     * aligned_chunks): dp_aligned, the simulator launches each chunk's
     * reduction after its last backward (pipeline rank backwards late).
     * With the distributed optimizer's overlapped gather on Megatron-Core's
     * interleaved, one-chunk or split-backward schedules
     * (mp_dp_early_gather_exposed, mp_dp_gather_due_exposed), the
     * simulator gathers the parameters at the step's start, before the first
     * forwards: dp_gather, of dp_time, that all-gather (0 otherwise: the
     * simulator then queues it with the reductions), dp_gather_exposed its
     * part of dp_exposed. dp_tied, of dp_time and dp_exposed, the
     * tied-embedding (DualPipe: mirror) sync after the flush;
     * dp_bucket_bytes the first bucket's gradient bytes; dp_sm_reduce /
     * dp_sm_gather the SM share that overlapped collectives take from compute
     * (mp_overlap_excess). */
    bool dp_aligned;
    /* the split-backward schedules (ZB-H1, ZB-V, DualPipeV, DualPipe) on Megatron-LM
     * with overlap (cost.c tail_chunks): each chunk's reduction starts with
     * its last weight-gradient op, its last bucket (dp_bucket_bytes) after
     * that op, beside compute at dp_sm_reduce; the gathers as dp_gather says */
    bool dp_tail;
    /* 1F1B (one chunk, pp > 1) on Megatron-LM with overlap: Megatron-Core
     * buckets pipeline rank 0 only, so each rank r > 0 reduces its chunk
     * whole after its last backward (cost.c rank_whole_reduce); rank 0
     * reduces its own share in buckets under its last backward,
     * dp_reduce_exposed0 seconds of it past that backward's end (dp_exposed
     * holds the latest rank's) */
    bool dp_rank_whole;
    double dp_reduce_exposed0;
    double dp_gather, dp_gather_exposed, dp_tied, dp_bucket_bytes, dp_sm_reduce, dp_sm_gather;
    /* parallel.param_gather_sync: the distributed optimizer's parameter
     * all-gather, of dp_time and dp_exposed, run whole after the reductions
     * (the simulator queues it after them and the tied sync); 0 otherwise */
    double dp_gather_sync;
    /* parallel.overlap_param_gather_with_optimizer_step in effect (with
     * dp_aligned and dp_gather): each rank's chunk-0 gather began under the
     * previous optimizer step, its last (1 - chunk 0's share of the rank's
     * grad_bytes) of optimizer seconds, which it slows by dp_sm_gather of
     * the overlap; that chunk's first forward waits for all of it (not
     * bucketed) */
    bool dp_gather_opt_step;
    double optimizer;          /* optimizer step time */
    double other_bytes;        /* per GPU: embedding/logit buffers, comm buffers, runtime reserve */
    /* share of the SMs the MoE dispatcher's kernels hold while they run: under
     * ep_overlap, compute that overlaps them runs at 1 - this of its rate
     * (docs/cost-model.md, "SM contention"; 0: no contention) */
    double ep_sm_share;
    /* parallel.defer_embedding_wgrad in effect (1F1B / interleaved, pp > 1):
     * stage defer_stage's B of micro-batches 0 .. defer_mb-1 runs without
     * its output layer's weight-gradient GEMM (defer_w seconds each), and its
     * rank runs the defer_mb GEMMs back to back after its last op, before
     * that stage's gradients are complete (docs/cost-model.md §6); each of
     * those B keeps defer_hold bytes (its input and logits' gradient) until
     * then */
    int32_t defer_stage;
    int32_t defer_mb;
    double defer_w, defer_hold;
} mp_pipeline_cost;

/* Parameters of the model (docs/cost-model.md §1, general form). */
double mp_model_params(const mp_model *m);
/* Parameters one token uses: mp_model_params less the routed experts it is
 * not sent to (equal to it for a dense model). */
double mp_model_active_params(const mp_model *m);
/* Model FLOPs per iteration for global_batch samples (no recompute). */
double mp_model_flops(const mp_model *m, int64_t seq, int64_t global_batch);

/* Activation bytes of one transformer layer for one micro-batch
 * (Korthikanti 2022, with the CP division of s). */
double mp_activation_bytes_per_layer(const mp_model *m, int64_t seq, int64_t micro_batch,
                                     int64_t tp, int64_t cp, bool sp, mp_recompute r);

/* Bytes the first pipeline stage would keep for the outputs of its in-flight
 * micro-batches (p of them, 2sbh each; 2sbh/t with SP) if Megatron did
 * not deallocate pipeline outputs after sending them (Korthikanti 2022: 2.73 GiB
 * for the 530B model, p = 35). megaplan's estimate assumes the deallocation. */
double mp_pipeline_output_bytes(const mp_model *m, int64_t seq, int64_t micro_batch, int64_t pp,
                                int64_t tp, bool sp);

/* Bytes per parameter on one GPU of the weights, gradients and optimizer
 * states for the configuration's precision and sharding (dist_opt, zero over
 * dp*cp ranks): 18 bytes in 16-bit training, 6 + 12/d with the distributed
 * optimizer (mixed-precision Adam, Megatron), less with ZeRO-2/3.
 * The one rule the estimate and search's bounds both use. */
void mp_static_bytes(const mp_config *c, double *weights, double *grads, double *optimizer);
double mp_static_bytes_per_param(const mp_config *c);
/* fp32 master weights + Adam's 16-bit moments, bytes per parameter before
 * sharding (training.optimizer_moments set; memory.c) */
double mp_optimizer_moment_state_bytes(const mp_config *c);

/* What one layer item (plan.h: 0 = embedding, 1..L = blocks, L+1 = head)
 * costs per micro-batch on one GPU of its stage, for each recompute choice.
 * Stage costs are sums of item costs; search's ILP picks stage boundaries
 * and a recompute choice per item from these. */
typedef struct mp_item_cost {
    double fwd;                               /* seconds, incl. exposed TP/CP comm */
    double bwd[MP_RECOMPUTE_COUNT];           /* seconds, incl. recompute of that choice */
    double act_bytes[MP_RECOMPUTE_COUNT];     /* stashed per in-flight micro-batch */
    double static_bytes;                      /* weights + grads + optimizer, per GPU */
    double send_bytes;                        /* activation leaving this item per micro-batch */
} mp_item_cost;

/* Fills items[0 .. layers+1] (layers+2 entries) for config c. */
mp_status mp_item_costs(const mp_config *c, mp_item_cost *items, mp_error *err);

/* The multi-token-prediction modules' share of the last stage's item
 * (zeros without them): what mp_item_costs adds to the head item. plan: the
 * plan c came from, or NULL; c is checked as the estimate checks it (a plan
 * that lists its stages is its own split, else the derived split's rules). */
mp_status mp_mtp_item_cost(const mp_config *c, const mp_plan *plan, mp_item_cost *out,
                           mp_error *err);

/* The estimate's memory per GPU in the stage split's linear form (split.h,
 * docs/design.md §5), from the same terms the estimate sums: items[0 ..
 * layers+1] get their static_bytes (weights, grads and optimizer states as
 * the estimate charges them, routed experts sharded over edp, FP8 copies,
 * the head's tied copy; the head's logits and deferred-wgrad hold, held
 * once), act (per micro-batch in flight, blocks with the allocator's
 * fragmentation, the embedding's mask) and hold_bytes (a split backward's
 * held output gradients); inflight and held [pp*vpp] per virtual stage;
 * rank_other [pp] the bytes no item scales. For a split of uniform blocks
 * the solver's bytes of each rank equal mp_estimate_rank_memory's peak up
 * to rounding; with blocks of several kinds rank_other holds the largest
 * block's re-materialisation, the estimate the rank's own (no less).
 * MP_EINTERNAL for the schedules the split does not re-split (V, DualPipe). */
mp_status mp_split_memory(const mp_config *c, mp_split_item *items, double *inflight,
                          double *held, double *rank_other, mp_error *err);

/* Each pipeline rank's memory as the estimate counts it (ranks: [pp]; the
 * estimate reports the largest). */
mp_status mp_estimate_rank_memory(const mp_config *c, const mp_plan *plan, mp_memory *ranks,
                                  mp_error *err);

/* Stage costs for a config; plan may be NULL (Megatron's even split). */
mp_status mp_pipeline_cost_build(const mp_config *c, const mp_plan *plan, mp_pipeline_cost *out,
                                 mp_error *err);
void mp_pipeline_cost_free(mp_pipeline_cost *pc);

/* Closed-form pipeline makespan for one iteration (forward + backward of m
 * micro-batches through p ranks with v chunks each), given uniform per-chunk
 * times f, b (or b and w for ZB-H1; w = 0 otherwise) and the p2p time per
 * send. This is what estimate uses; the simulator must agree with it. */
double mp_pipeline_makespan(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, double f,
                            double b, double w, double p2p);

/* DualPipe and DualPipeV on equal stages (pipeline.c, docs/cost-model.md
 * §6): f, b, w per chunk (DualPipe: per stage), each transfer lat seconds of
 * latency and wire seconds on its link; what the simulator's lists take, for
 * every f, b, w and link (mp_pipeline_makespan: p2p as lat, wire 0). */
double mp_dualpipe_makespan(mp_schedule_kind s, int64_t p, int64_t m, double f, double b, double w,
                            double lat, double wire);

/* Interleaved 1F1B (v > 1) with --overlap-p2p-communication on equal
 * stages, f and b per chunk, each transfer hop seconds (docs/cost-model.md
 * §6): (m v + p - 1)(f + b) + mp_pipeline_overlap_fill(p, v) hop, what the
 * simulator's asynchronous op lists take while a hop fits under the shorter
 * pass (hop <= min(f, b)); beyond, the steady state exposes more. */
double mp_pipeline_makespan_overlap(int64_t p, int64_t v, int64_t m, double f, double b,
                                    double hop);

/* ... the hops its fill and drain expose: the first micro-batch's forward
 * down all p v virtual stages and its backward back up, 2(p v - 1). */
int64_t mp_pipeline_overlap_fill(int64_t p, int64_t v);

/* Whether a configuration's pipeline runs on DeepSpeed's engine (a
 * Megatron-DeepSpeed stack, training.stack, with pp > 1: ds_pipe.c), which
 * moves its transfers as TrainSchedule's blocking sends and receives. */
bool mp_ds_pipe_engine(const mp_config *c);

/* The estimate of one configuration. plan may be NULL (even split, config's
 * recompute everywhere). Fails with MP_EINPUT for configurations that cannot
 * run (mp_config_check); a config that does not fit is estimated with fits=false. */
mp_status mp_estimate_config(const mp_config *c, const mp_plan *plan, mp_estimate *out,
                             mp_error *err);

/* The same without mp_config_check / mp_plan_check (which cost more than the
 * estimate itself, ~7 us of ~10): for callers that checked the configuration
 * already, such as search's inner loop. An invalid config gives meaningless
 * numbers, never a crash for positive sizes. */
mp_status mp_estimate_config_unchecked(const mp_config *c, const mp_plan *plan,
                                       mp_estimate *out, mp_error *err);

#endif
