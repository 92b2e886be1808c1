/* kernels_decl.h — declarations for one precision (MP_REAL_PASS); read
 * twice by kernels.h (no include guard on purpose). Every name declared here
 * has its line in real_names.h. Shapes are row-major, in elements. */
#include "exec/real.h"

/* ---- layers.c ---- */

/* x = round(x * 2^grid) / 2^grid, clamped to |x| <= max_int * 2^-grid. */
void mp_quantize(real *x, size_t n, int grid, int max_int);
/* Quantizes onto the grid only when exact is set. */
void mp_q(bool exact, real *x, size_t n, int grid);

/* out[rows,h] = xhat * w + b, xhat = (x - mean) * rstd, rstd = 1/sqrt(var +
 * eps); keeps xhat and rstd. */
void mp_layernorm_forward(real *out, real *xhat, real *rstd, const real *x, const real *w,
                          const real *b, int rows, int h, double eps, bool exact);
/* dx[rows,h] = d LN / dx (overwritten); dw, db accumulated. */
void mp_layernorm_backward(real *dx, real *dw, real *db, const real *dout, const real *xhat,
                           const real *rstd, const real *w, int rows, int h, bool exact);
/* RMSNorm: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) (no mean, no
 * shift); keeps xhat = x * rstd and rstd. */
void mp_rmsnorm_forward(real *out, real *xhat, real *rstd, const real *x, const real *w,
                        int rows, int h, double eps, bool exact);
/* dx[rows,h] = d RMSNorm / dx (overwritten); dw accumulated. */
void mp_rmsnorm_backward(real *dx, real *dw, const real *dout, const real *xhat,
                         const real *rstd, const real *w, int rows, int h, bool exact);
/* SwiGLU: out[rows,f] = silu(gu[:, :f]) * gu[:, f:] for gu[rows, 2f] = [gate | up]. */
void mp_swiglu_forward(real *out, const real *gu, int rows, int f);
/* dgu[rows, 2f] from dout[rows, f]. */
void mp_swiglu_backward(real *dgu, const real *dout, const real *gu, int rows, int f);
/* Rotary embedding in place on `heads` heads of hd columns (from column 0) of
 * rows r = i*b + n (ld apart) at positions pos[i], i < s; inverse: the
 * backward (the opposite turn). spec: the angles and their scale (rope.h).
 * Exact mode rounds the result onto `grid`. */
void mp_rope(real *x, size_t ld, int heads, int hd, const mp_rope_spec *spec, const int *pos,
             int s, int b, bool inverse, bool exact, int grid);
/* GeLU, tanh approximation (as GPT-2). */
void mp_gelu_forward(real *out, const real *in, size_t n);
/* din = dout * gelu'(in) */
void mp_gelu_backward(real *din, const real *dout, const real *in, size_t n);
/* the exact GELU, x Phi(x) (erf), and its gradient */
void mp_gelu_erf_forward(real *out, const real *in, size_t n);
void mp_gelu_erf_backward(real *din, const real *dout, const real *in, size_t n);
/* GEGLU over gu[rows, 2f] = [gate | up]: out = gelu(gate) * up, GELU's tanh
 * form or (erf) the exact one; backward into dgu[rows, 2f] */
void mp_geglu_forward(real *out, const real *gu, int rows, int f, bool erf);
void mp_geglu_backward(real *dgu, const real *dout, const real *gu, int rows, int f, bool erf);
void mp_bias_add(real *y, const real *b, int rows, int cols);
/* db[cols] += sum over rows of dy */
void mp_bias_grad(real *db, const real *dy, int rows, int cols);
/* y[rows,cols] += x */
void mp_add(real *y, const real *x, size_t n);
/* mp_quantize on rows of cols elements, ld apart. */
void mp_quantize_rows(real *x, size_t rows, size_t cols, size_t ld, int grid, int max_int);
void mp_tanh_forward(real *out, const real *in, size_t n);
/* dx *= 1 - y^2 */
void mp_tanh_backward(real *dx, const real *y, size_t n);
/* Attention's softmax rows and their backward, cross-entropy's pieces, row
 * lookups by index and an in-order sum: backend.h says what each does. */
void mp_attn_softmax(real *p, int s, int sk, const int *qpos, bool causal, real scale,
                     bool exact);
void mp_attn_softmax_backward(real *ds, const real *p, int s, int sk, const int *qpos,
                              bool causal, real scale, bool exact);
void mp_ce_max(real *mx, const real *logits, size_t S, size_t V);
void mp_ce_exp_sum(real *logits, real *sum, real *tl, const real *mx,
                   const int32_t *targets, size_t lo, size_t S, size_t V, bool exact);
void mp_ce_loss(real *loss, real *logits, const real *sum, const real *mx, const real *tl,
                const int32_t *targets, size_t S, size_t V, bool exact);
void mp_ce_backward(real *logits, const int32_t *targets, size_t lo, size_t S, size_t V,
                    real scale, bool masked);
void mp_gather_rows(real *out, const real *table, const int32_t *idx, size_t lo, size_t n,
                    size_t rows, size_t h, bool accumulate);
void mp_scatter_add_rows(real *table, const real *x, const int32_t *idx, size_t lo, size_t n,
                         size_t rows, size_t h);
double mp_sum_in_order(const real *x, size_t n);

/* ---- moe_ops.c ---- the MoE layer's routing and row shuffles (backend.h's
 * mixture-of-experts ops say what each computes). */
void mp_moe_scores(real *scores, const real *logits, size_t S, size_t E, bool sigmoid);
void mp_moe_topk(real *choice, real *wgt, const real *scores, const real *bias, size_t S,
                 size_t E, size_t k, size_t groups, size_t group_k, double scale);
void mp_moe_capacity(real *kept, const real *all, size_t rows, size_t b, size_t E, size_t k,
                     size_t cp, size_t me, size_t r0, size_t S, size_t capacity);
void mp_moe_send_order(real *sorder, real *counts, real *tags, size_t tag_ld,
                       const real *choice, const real *kept, size_t Sk, size_t El, size_t ep);
void mp_moe_expert_order(real *rorder, real *ne, const real *tags, size_t tag_ld, size_t n,
                         size_t El);
void mp_moe_gather(real *dst, size_t dld, const real *src, size_t sld, const real *idx,
                   size_t div, const real *wgt, size_t n, size_t h);
void mp_moe_scatter(real *dst, size_t dld, const real *src, size_t sld, const real *idx,
                    size_t div, size_t n, size_t h, bool accumulate);
void mp_moe_combine(real *out, const real *y, const real *wgt, const real *kept, size_t r0,
                    size_t Sl, size_t k, size_t h);
void mp_moe_combine_backward(real *dwl, const real *dout, const real *y, const real *kept,
                             size_t r0, size_t Sl, size_t k, size_t h);
void mp_moe_count(real *load, const real *choice, const real *kept, size_t Sk);
void mp_moe_weights_backward(real *dl, const real *scores, const real *choice, const real *wgt,
                             const real *dwf, size_t S, size_t E, size_t k, double scale);
void mp_moe_scores_backward(real *dl, const real *scores, size_t S, size_t E, bool sigmoid);
void mp_moe_bias_update(real *bias, const real *load, size_t E, double rate);
/* ---- attention_sink.c ---- GPT-OSS's variants (backend.h says what each computes) */
void mp_attn_softmax_oss(real *p, int s, int sk, const int *qpos, bool causal, int window,
                         const real *sink, real scale, bool exact);
void mp_attn_softmax_oss_backward(real *ds, real *dsink, const real *p, int s, int sk,
                                  const int *qpos, bool causal, int window, real scale,
                                  bool exact);
void mp_swiglu_clamped_forward(real *out, const real *gu, int rows, int f, real limit);
void mp_swiglu_clamped_backward(real *dgu, const real *dout, const real *gu, int rows, int f,
                                real limit);

/* ---- attention.c ---- causal self-attention over this rank's heads, its
 * two products as the backend's GEMMs. qkv[S, 3*hl] with rows r = pos*b +
 * sample and columns [Q | K | V], each head-major (hl = heads_local * hd);
 * out[S, hl]; probs[b, heads_local, s, s]. */
void mp_attention_forward(const mp_backend *be, real *out, real *probs, const real *qkv,
                          int s, int b, int heads_local, int hd, bool exact);
/* dqkv[S, 3*hl] from dout[S, hl]; scratch holds s * s reals. */
void mp_attention_backward(const mp_backend *be, real *dqkv, const real *dout,
                           const real *qkv, const real *probs, int s, int b, int heads_local,
                           int hd, real *scratch, bool exact);
/* The same for s query positions (global position qpos[i]; NULL: i) against
 * sk key positions held apart from the queries (row strides in elements):
 * probs[b, heads_local, s, sk]; query head a reads key/value head a / rep
 * (grouped-query attention; 1: one each); causal false: every key (BERT).
 * Backward writes dq (rounded) and
 * adds to dk, dv (not rounded: with CP they are partial sums); scratch holds
 * s * sk reals. */
void mp_attention_forward_kv(const mp_backend *be, real *out, real *probs, const real *q,
                             size_t q_row, const real *k, const real *v, size_t kv_row,
                             const int *qpos, int s, int sk, int b, int heads_local, int hd,
                             int rep, bool causal, bool exact);
void mp_attention_backward_kv(const mp_backend *be, real *dq, size_t dq_row, real *dk,
                              real *dv, size_t dkv_row, const real *dout, const real *q,
                              size_t q_row, const real *k, const real *v, size_t kv_row,
                              const real *probs, const int *qpos, int s, int sk, int b,
                              int heads_local, int hd, int rep, bool causal, real *scratch,
                              bool exact);
/* The same with value heads of hdv columns, queries and keys of hd (latent
 * attention), the softmax scale 1/sqrt(hd) times scale_mul (DeepSeek's YaRN,
 * rope.h; 1: none); out and dout are [S, heads_local*hdv]. */
void mp_attention_forward_dv(const mp_backend *be, real *out, real *probs, const real *q,
                             size_t q_row, const real *k, const real *v, size_t kv_row,
                             const int *qpos, int s, int sk, int b, int heads_local, int hd,
                             int hdv, int rep, bool causal, double scale_mul, bool exact);
/* GPT-OSS's variants of one block's causal attention: keys from qpos -
 * window + 1 (window 0: all earlier), sink[heads_local] this rank's heads'
 * sink logits (NULL: none) and dsink their gradients (added to). */
typedef struct mp_attn_oss {
    int window;
    const real *sink;
    real *dsink;
} mp_attn_oss;
void mp_attention_forward_oss(const mp_backend *be, real *out, real *probs, const real *q,
                              size_t q_row, const real *k, const real *v, size_t kv_row,
                              const int *qpos, int s, int sk, int b, int heads_local, int hd,
                              int rep, const mp_attn_oss *x, bool exact);
void mp_attention_backward_oss(const mp_backend *be, real *dq, size_t dq_row, real *dk,
                               real *dv, size_t dkv_row, const real *dout, const real *q,
                               size_t q_row, const real *k, const real *v, size_t kv_row,
                               const real *probs, const int *qpos, int s, int sk, int b,
                               int heads_local, int hd, int rep, const mp_attn_oss *x,
                               real *scratch, bool exact);
void mp_attention_backward_dv(const mp_backend *be, real *dq, size_t dq_row, real *dk,
                              real *dv, size_t dkv_row, const real *dout, const real *q,
                              size_t q_row, const real *k, const real *v, size_t kv_row,
                              const real *probs, const int *qpos, int s, int sk, int b,
                              int heads_local, int hd, int hdv, int rep, bool causal,
                              double scale_mul, real *scratch, bool exact);

/* ---- model.c ---- one rank's part of the GPT. */
typedef struct mp_acts mp_acts; /* saved activations of one micro-batch */

typedef struct mp_gpt {
    mp_gpt_dims d;
    const mp_param_layout *lay;
    const mp_backend *be;
    mp_group tp;
    mp_group cp;           /* context-parallel group (set after init when d.cp > 1) */
    mp_group ep, edp;      /* MoE: expert-parallel and expert-DP groups (exec/moe.h; set
                              after init, size 0 or 1: none) */
    int *qpos;             /* [positions] global position of each local one (host) */
    /* The same in the backend's memory, and each local residual row's global
     * position and segment (the learned position and token-type lookups) */
    int *qpos_be, *row_pos, *row_seg;
    bool exact;
    mp_probe *probe;       /* may be NULL */
    /* Every tensor below is in the backend's memory (the device's with CUDA),
     * kept_logits excepted (the host's, for the check). */
    real *w, *g;           /* parameters and gradients, flat (layout order), padded */
    size_t n_alloc;        /* elements allocated in w and g (>= lay->total) */
    mp_acts **slots;   /* saved activations per micro-batch in flight */
    int n_slots;
    size_t slot_reals;     /* reals one slot holds (what recomputation saves shows here) */
    real *ws;              /* backward workspace */
    real grad_scale;       /* d loss / d (sum of token losses) */
    real *kept_logits;     /* [S, V/t] logits of the micro-batch keep_microbatch, or NULL */
    int keep_microbatch;
    int microbatch_now;    /* set by the trainer before each forward */
    /* Pipeline stages other than the first and last (d.item_begin/end): the
     * received activation [Sl,h] a forward starts from, and the received
     * gradient [Sl,h] of the stage's output a backward starts from (from a
     * standalone MTP stage on: 1 + D of them, mp_gpt_stage_*_count). */
    const real *stage_in, *stage_grad_in;
    void *t5;              /* T5's slots and workspace (t5.c), NULL for the others */
    /* The sigmoid router's expert bias [layers, experts] (d.bias_rate > 0;
     * Megatron starts it at zero) and the tokens each expert kept since the
     * last step, both in the backend's (host) memory; NULL: no bias */
    real *route_bias, *route_load;
} mp_gpt;

/* Allocates parameters (initialised from seed: each element's value is a
 * function of its full index) and n_slots activation slots. pad_to: the flat
 * buffers are padded to a multiple of it (DP shards). */
mp_status mp_gpt_init(mp_gpt *g, const mp_gpt_dims *d, const mp_param_layout *lay,
                      const mp_backend *be, mp_group tp, int n_slots, size_t pad_to,
                      bool exact, uint64_t seed, mp_probe *probe, mp_error *err);
void mp_gpt_free(mp_gpt *g);
/* Bytes mp_gpt_init allocates for these arguments (weights, gradients,
 * workspace, n_slots activation slots), without allocating: memory.c's estimate. */
size_t mp_gpt_bytes(const mp_gpt_dims *d, const mp_param_layout *lay, int n_slots,
                    size_t pad_to);
/* Forward of one micro-batch into slot: tokens/targets [S] (rows pos*b + sample).
 * Adds the sum of its token losses (replicated over TP) to *loss_sum. */
mp_status mp_gpt_forward(mp_gpt *g, int slot, const int32_t *tokens,
                         const int32_t *targets, double *loss_sum, mp_error *err);
/* Backward of the micro-batch in slot; gradients accumulate into g->g. */
mp_status mp_gpt_backward(mp_gpt *g, int slot, mp_error *err);
/* A stage without the head: its output activation [Sl,h] of the forward in slot
 * (what it sends to the next stage). */
const real *mp_gpt_stage_output(const mp_gpt *g, int slot);
/* A stage without the embedding: the gradient [Sl,h] of its input from the
 * last backward (what it sends to the previous stage). */
const real *mp_gpt_stage_input_grad(const mp_gpt *g);
/* Elements of the stage's input (what it receives forward and sends back
 * as a gradient) and of its output: this rank's [Sl,h], or T5's (a decoder
 * stage's carries the encoder's output with its own activation). */
size_t mp_gpt_stage_input_count(const mp_gpt *g);
size_t mp_gpt_stage_output_count(const mp_gpt *g);

/* ---- moe_layer.c ---- after a step: the expert bias of each MoE block
 * moves by d.bias_rate towards the mean load, the loads counted over the
 * stage's tp x cp x dp ranks (Megatron's get_updated_expert_bias). */
mp_status mp_moe_update_bias(mp_gpt *g, mp_error *err);

/* ---- optimizer.c ---- AdamW over flat elements [lo, hi) of the layout;
 * exact mode puts every updated weight back on its class's grid. */
void mp_adamw_update(real *w, const real *grad, real *m, real *v, const mp_param_layout *lay,
                     size_t lo, size_t hi, const mp_adam_cfg *cfg, int step, bool exact);

/* ---- step.c ---- one training step, run as the schedule's op list says. */
typedef struct mp_trainer {
    mp_gpt *model;
    mp_group dp;
    bool dist_opt;
    mp_adam_cfg adam;
    int microbatches;          /* per DP rank */
    const mp_op_list *ops;     /* this rank's schedule: its pipeline stage's ops */
    mp_schedule_kind schedule; /* which placement the ops' chunks follow (mp_schedule_stage) */
    real *m, *v;               /* Adam moments: whole local buffer, or the DP shard */
    size_t shard_lo, shard_hi; /* flat range this rank updates (all of it without dist-opt);
                                  with experts, the dense part's (part[0]) */
    /* The distributed optimizer's parts: one (the whole buffer over DP x CP),
     * or with experts on this stage two (the dense tensors over DP x CP, then
     * the experts over expert-DP); without it one part, not sharded. */
    mp_shard_part part[2];
    int n_parts;
    size_t moment_n;           /* elements of m and v: the parts' shards end to end */
    real *shard_buf;           /* reduce-scatter destination (dist-opt) */
    size_t shard_n;            /* its elements: the largest shard */
    int zero;                  /* 2: gradients sharded between micro-batches, 3: weights too
                                  (zero.c); 0: as dist_opt says */
    real *poison;              /* ZeRO-3: NaN written over the weights this rank does not own */
    mp_group replica;          /* HSDP: the ranks holding the same shard (size 0 or 1: none) */
    mp_group pp, emb;          /* pipeline and tied-embedding groups (size <= 1: none) */
    mp_group mirror;           /* dualpipe: ranks p and pp-1-p (size <= 1: none) */
    real *recv_act, *recv_grad; /* [Sl,h] the activation / output gradient received */
    const mp_backend *be;      /* whose memory m, v, shard_buf and recv_* are in */
} mp_trainer;

mp_status mp_trainer_init(mp_trainer *t, mp_gpt *model, mp_group dp, bool dist_opt,
                          const mp_adam_cfg *adam, int microbatches, const mp_op_list *ops,
                          mp_error *err);
void mp_trainer_free(mp_trainer *t);
/* This rank is one stage of a pipeline: its SEND/RECV ops talk over pp (the
 * peers' group ranks are their stage numbers), and with tied embeddings the
 * first and last stages sum the embedding's gradient over emb. */
mp_status mp_trainer_set_pipeline(mp_trainer *t, mp_group pp, mp_group emb,
                                  mp_error *err);
/* Forward and backward of every micro-batch in schedule order (with the
 * pipeline's sends and receives), then the tied embedding's sum over the
 * first and last stages, the TP reduction of sequence-split gradients and the
 * DP reduction (all-reduce, or reduce-scatter into [shard_lo, shard_hi) with
 * the distributed optimizer).
 * tokens/targets: [microbatches][S]. *loss_sum: sum over this DP group's tokens. */
mp_status mp_trainer_grads(mp_trainer *t, const int32_t *tokens, const int32_t *targets,
                           double *loss_sum, mp_error *err);
/* The same for the v model chunks of one pipeline rank (interleaved 1F1B:
 * chunk c runs virtual stage c*pp + rank): every chunk's trainer shares the
 * op list, whose ops name their chunk; the reductions run chunk by chunk. */
mp_status mp_trainer_grads_chunks(mp_trainer *chunks, int n_chunks,
                                      const int32_t *tokens, const int32_t *targets,
                                      double *loss_sum, mp_error *err);
/* AdamW on [shard_lo, shard_hi) and, with the distributed optimizer, the
 * all-gather of the updated parameters (ZeRO-3: none). step counts from 1. */
mp_status mp_trainer_update(mp_trainer *t, int step, mp_error *err);

/* ---- shard.c ---- the distributed optimizer's parts (mp_shard_part). */
/* Cuts t's buffer into its parts (the dense tensors over t->dp, the experts
 * over the model's expert-DP group) and sets dist_opt, shard_lo/hi, moment_n
 * and shard_n; allocates nothing. */
mp_status mp_shard_parts_init(mp_trainer *t, bool dist_opt, mp_error *err);
/* Every part's gradients over its group: all-reduced whole, or with the
 * distributed optimizer reduce-scattered into this rank's shard (sharded_rest:
 * and zero elsewhere in the part, as ZeRO-2/3 keep them). */
mp_status mp_shard_reduce(mp_trainer *t, bool sharded_rest, mp_error *err);
/* Every part's weights all-gathered over its group from the ranks' shards
 * (skip_experts: a test's skipped gather of the experts' part). */
mp_status mp_shard_gather(mp_trainer *t, bool skip_experts, mp_error *err);
/* AdamW over this rank's shard of every part. */
void mp_shard_update(mp_trainer *t, int step);

/* ---- zero.c ---- ZeRO-2/3 over the distributed optimizer's shards. After
 * mp_trainer_init: zero 2 or 3 (with dist_opt over more than one rank; else
 * nothing changes); ZeRO-3 leaves NaN in the weights this rank does not own.
 * replica (HSDP; NULL otherwise): the trainer's DP group is then one shard
 * group, and the gradient shards are summed over replica once per step. */
mp_status mp_trainer_set_zero(mp_trainer *t, int zero, const mp_group *replica,
                                  mp_error *err);
/* ZeRO-3: the stage's weights whole before a forward or backward (skip: a
 * test's dropped gather); NaN over the others' shards after it. */
mp_status mp_zero_gather_params(mp_trainer *t, bool skip, bool skip_experts, mp_error *err);
void mp_zero_release_params(mp_trainer *t);
/* ZeRO-2/3: after a micro-batch's backward, its gradients summed over DP
 * into this rank's shard; the rest of the gradient buffer zero. */
mp_status mp_zero_reduce_microbatch(mp_trainer *t, mp_error *err);
/* HSDP: after the last micro-batch, this rank's gradient shard summed over
 * the replicas of the shard. */
mp_status mp_zero_reduce_replicas(mp_trainer *t, mp_error *err);
/* ZeRO-2/3 with pp and tied embeddings: the first and last stages' copies
 * lie at different places of their stages' buffers, so their shards do not
 * line up. unshard: the whole DP-summed gradient of [lo, lo + n) on every DP
 * rank (a sum over DP of the shards, zero elsewhere); reshard: zero again
 * outside this rank's shard. */
mp_status mp_zero_unshard_grad(mp_trainer *t, size_t lo, size_t n, mp_error *err);
void mp_zero_reshard_grad(mp_trainer *t, size_t lo, size_t n);
