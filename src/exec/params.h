/* params.h — the GPT the executor runs: its sizes, how each rank holds it
 * (the parameter table: every tensor's full shape, how tensor parallelism
 * splits it, where this rank's part lies in one flat buffer) and the initial
 * values, a pure function of (seed, tensor, full index) so that every rank
 * and the unpartitioned reference see the same numbers whatever the rank order. */
#ifndef MP_EXEC_PARAMS_H
#define MP_EXEC_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/model.h"
#include "exec/rope.h"

/* T5's relative position buckets per stack (HF T5: 32, max distance 128). */
#define MP_T5_BUCKETS 32
#define MP_T5_MAX_DISTANCE 128

/* Sizes of the model as one rank runs it. */
typedef struct mp_gpt_dims {
    int hidden, heads, ffn, vocab, seq, micro_batch, layers;
    bool tied;            /* LM head shares the token embedding */
    /* LLaMA-style variants (all false / 0: GPT-2's blocks) */
    int kv_heads;         /* grouped-query attention: key/value heads (0: = heads) */
    /* the width of a query, key and value head (0: hidden / heads); Qwen3's and
     * Gemma's heads x head_dim is not hidden: Q, K, V and the projection's
     * input are heads x head_dim wide, the residual stream hidden */
    int head_dim;
    bool rmsnorm;         /* RMSNorm (a scale, no shift) instead of LayerNorm */
    /* the epsilon of every norm (the model's norm_eps: block, final, BERT
     * head, MLA latent, QK and MTP norms; 0: 1e-5, mp_dims_norm_eps) */
    double norm_eps;
    /* The MLP's activation (core/model.h mp_activation): gated, act(x W_gate)
     * * (x W_up) W_down with act SiLU (SwiGLU) or GELU (geglu: GEGLU), else
     * act(x W_1) W_2 with act GELU (or relu, T5's); gelu_erf: every GELU
     * the model runs (the MLP's, GEGLU's gate, BERT's masked-LM head) is the
     * exact x Phi(x), else its tanh form */
    bool gated, geglu, gelu_erf;
    bool rope;            /* rotary position embedding on Q and K, no learned positions */
    mp_rope_spec rope_freq; /* its angles (rope.h: base, YaRN) */
    bool no_bias;         /* no biases in the linear layers */
    /* BERT (Megatron's, pre-LN): bidirectional attention, token-type
     * embeddings, the masked-LM head (dense, GeLU, LayerNorm, the tied
     * vocabulary projection plus a bias) on the tokens whose target is not -1,
     * and the pooler (dense, tanh on position 0) with its two-way head */
    bool bert;
    /* T5 (arch t5, exec/t5.c): the first enc_layers of `layers` blocks are the
     * encoder's, the rest the decoder's (self-attention, cross-attention over
     * the encoder's output, MLP); `seq` is the encoder's length, dec_seq the
     * decoder's (<= seq); relative position bias per stack; relu: the MLP's
     * activation is ReLU */
    bool t5, relu;
    int enc_layers, dec_seq;
    /* Activation recomputation (mp_recompute: 0 none, 1 selective: the
     * attention probabilities, 2 full: the whole block from its input), for
     * every block, or per layer item 0..L+1 when layer_recompute is set (the
     * plan's, which outlives the run). It changes memory and time, never values. */
    int recompute;
    const unsigned char *layer_recompute;
    /* What selective recomputation (1) rebuilds: MP_RCM_* bits of
     * core/config.h, Megatron's --recompute-modules (0: core_attn alone) */
    unsigned recompute_modules;
    int tp, tp_rank;      /* tensor-parallel degree and this rank's place */
    bool sp;              /* sequence parallelism (needs tp > 1 to matter) */
    int cp, cp_rank;      /* context parallelism (0 or 1: none): the sequence is cut in 2cp
                             chunks and this rank holds chunks cp_rank and 2cp-1-cp_rank,
                             so that every rank gets as much of the causal mask's work */
    /* The pipeline stage this rank runs: layer items [item_begin, item_end)
     * (0 embedding, 1..L blocks, L+1 final norm + head + loss); 0, 0 = all. */
    int item_begin, item_end;
    /* Mixture of experts (exec/moe.h; experts == 0: dense). Block l is an MoE
     * block when l >= moe_first_dense and l % moe_layer_freq == 0. Its experts
     * are spread over ep ranks (experts / ep each, this rank's from
     * ep_rank * experts / ep), each one split over etp ranks: etp = tp (0 too)
     * splits it over TP as the dense MLP is; etp = 1 keeps it whole, and each
     * TP rank then routes its own (SP) tokens. */
    int experts, top_k, expert_ffn, moe_first_dense, moe_layer_freq;
    int shared_ffn;         /* the shared experts' FFN sizes summed (0: none) */
    double capacity_factor; /* 0: dropless */
    bool router_sigmoid;    /* sigmoid scores (DeepSeek-V3), else softmax */
    /* DeepSeek-V3's routing (moe_pick.c): experts in route_groups groups of
     * which a token uses route_group_top_k (0: no limit); the chosen weights
     * times route_scale (0: 1); the sigmoid router's expert bias, added to
     * the scores for the choice only, moves by bias_rate a step towards the
     * mean load (0: no bias) */
    int route_groups, route_group_top_k;
    double route_scale, bias_rate;
    int ep, ep_rank, etp;
    /* Multi-head latent attention (exec/mla.h; kv_lora == 0: none). Queries:
     * x W_dq [q_lora], RMSNorm, W_uq [heads x (nope + rope)] (q_lora == 0: x W_q
     * straight); keys and values: x W_dkv [kv_lora | rope], RMSNorm of the
     * kv_lora part, W_ukv [heads x (nope + v)]; the rope part is one rotary key
     * shared by every head. */
    int q_lora, kv_lora, rope_dim, nope_dim, v_dim;
    /* The distributed optimizer shards the dense tensors over DP x CP and an
     * MoE model's experts over expert-DP: the experts then start, and the flat
     * buffers end, at a multiple of this (lcm of the two groups' sizes; 0 or
     * 1: no alignment beyond the DP padding). */
    int flat_align;
    /* Multi-token prediction (exec/mtp.c; 0: none): mtp_layers modules on the
     * last stage, each its own block numbered layers + k in the block table
     * (the type of the model's last block, as Megatron's spec builds it), its
     * losses averaged over the modules and scaled by mtp_scale. */
    int mtp_layers;
    double mtp_scale;
    /* Megatron's standalone MTP stage (core/layout.h: the m's on a virtual
     * stage before the loss's): this chunk's place against it, MP_MTP_* below;
     * 0 when the modules run beside the loss (or there are none) */
    int mtp_split;
    /* GPT-OSS (exec/attention_sink.c): block l's queries see the `window`
     * keys ending at their own position when mp_dims_block_window says so
     * (0: every earlier key); sinks: a learned logit per head (MP_BLK_SINK)
     * joins every softmax's denominator and takes no value; glu_limit > 0:
     * the clamped SwiGLU (gate <= limit, |up| <= limit, gate sigmoid(1.702
     * gate) (up + 1)) in the MLPs and experts */
    int window, window_skip_freq;
    bool sinks;
    double glu_limit;
    bool expert_bias; /* the routed experts' fc1 and fc2 biases (MP_BLK_EXP_FC*_B) */
    /* QK-norm (Qwen3, block.c): an RMSNorm over the head dim on each query
     * and key head before RoPE, scales MP_BLK_QNORM_W / MP_BLK_KNORM_W */
    bool qk_norm;
} mp_gpt_dims;

/* Block l's attention window (0: full attention): windowed unless
 * window_skip_freq > 0 and (l + 1) % window_skip_freq == 0 (core/model.h's
 * rule); an MTP module's block is the last block's kind. */
static inline int mp_dims_block_window(const mp_gpt_dims *d, int l)
{
    if (l >= d->layers && d->layers > 0)
        l = d->layers - 1;
    if (d->window <= 0)
        return 0;
    return d->window_skip_freq > 0 && (l + 1) % d->window_skip_freq == 0 ? 0 : d->window;
}

/* The most MTP modules the executor runs (DeepSeek-V3 has one). */
#define MP_MTP_MAX 8

/* Blocks in the block table: the model's, then the MTP modules'. */
static inline int mp_dims_blocks(const mp_gpt_dims *d) { return d->layers + d->mtp_layers; }

/* mtp_split: a stage before the MTP stage, the MTP stage (the modules and
 * its copy of the embedding; it sends [h | h_0 .. h_{D-1}], (1 + D) times
 * the activation), a stage after it (empty, then the loss's: the output
 * layer computes every loss from those hidden states) */
enum { MP_MTP_BEFORE = 1, MP_MTP_ON = 2, MP_MTP_AFTER = 3 };

/* Whether the blocks' attention is multi-head latent attention. */
static inline bool mp_dims_is_mla(const mp_gpt_dims *d) { return d->kv_lora > 0; }
/* The model activation d runs (gated, geglu, gelu_erf, relu). */
static inline mp_activation mp_dims_activation(const mp_gpt_dims *d)
{
    if (d->gated && !d->geglu)
        return MP_ACT_SWIGLU;
    if (d->gated)
        return d->gelu_erf ? MP_ACT_GEGLU_ERF : MP_ACT_GEGLU;
    if (d->relu)
        return MP_ACT_RELU;
    return d->gelu_erf ? MP_ACT_GELU_ERF : MP_ACT_GELU;
}
/* The norms' epsilon: norm_eps, or 1e-5 (Megatron's default) in dims built
 * in code that leave it 0. */
static inline double mp_dims_norm_eps(const mp_gpt_dims *d)
{
    return d->norm_eps > 0 ? d->norm_eps : 1e-5;
}

/* Elements allocated for a flat buffer of `total`: padded to a multiple of
 * pad_to (the DP shards) and of d's flat_align (a multiple of pad_to). */
static inline size_t mp_dims_flat_alloc(const mp_gpt_dims *d, size_t total, size_t pad_to)
{
    size_t a = d->flat_align > 1 ? (size_t)d->flat_align : 1;
    if (pad_to > a)
        a = pad_to;
    return (total + a - 1) / a * a;
}

/* Whether block l (0-based) is an MoE block. */
static inline bool mp_dims_block_is_moe(const mp_gpt_dims *d, int l)
{
    if (l >= d->layers && d->layers > 0) /* an MTP module's block: the last block's type */
        l = d->layers - 1;
    return d->experts > 0 && l >= d->moe_first_dense &&
           l % (d->moe_layer_freq > 0 ? d->moe_layer_freq : 1) == 0;
}
static inline int mp_dims_ep(const mp_gpt_dims *d) { return d->ep > 1 ? d->ep : 1; }
/* Whether each TP rank dispatches its own tokens to whole experts (etp = 1
 * under TP: Megatron's MoE with SP), rather than the TP group its common rows
 * to experts split over TP. */
static inline bool mp_dims_moe_local(const mp_gpt_dims *d)
{
    return d->experts > 0 && d->etp == 1 && d->tp > 1;
}

/* The stage's items, with 0, 0 meaning the whole model. */
static inline void mp_dims_items(const mp_gpt_dims *d, int *begin, int *end)
{
    *begin = d->item_begin;
    *end = d->item_end > 0 ? d->item_end : d->layers + 2;
}

/* Recomputation of block l (0-based). */
static inline int mp_dims_block_recompute(const mp_gpt_dims *d, int block)
{
    if (block >= d->layers) /* an MTP module's block keeps its activations */
        return 0;
    return d->layer_recompute ? d->layer_recompute[block + 1] : d->recompute;
}

/* Whether block l recomputes module `rcm` (MP_RCM_*: core_attn, layernorm, mlp). */
static inline bool mp_dims_block_rebuilds(const mp_gpt_dims *d, int block, int rcm)
{
    unsigned m = d->recompute_modules ? d->recompute_modules : 1u; /* bit 0: core_attn */
    return mp_dims_block_recompute(d, block) == 1 && (m >> rcm & 1u);
}

/* Derived per-rank sizes. */
static inline int mp_dims_cp(const mp_gpt_dims *d) { return d->cp > 1 ? d->cp : 1; }
/* Sequence positions this rank holds (all of them without CP). */
static inline int mp_dims_positions(const mp_gpt_dims *d) { return d->seq / mp_dims_cp(d); }
/* Global position of this rank's local position i (positions ascend). */
static inline int mp_dims_global_pos(const mp_gpt_dims *d, int i)
{
    int c = mp_dims_cp(d);
    if (c == 1)
        return i;
    int chunk = d->seq / (2 * c);
    return i < chunk ? d->cp_rank * chunk + i : (2 * c - 1 - d->cp_rank) * chunk + (i - chunk);
}
/* Token rows of one micro-batch on this rank: local positions x samples. */
static inline int mp_dims_tokens(const mp_gpt_dims *d)
{
    return mp_dims_positions(d) * d->micro_batch;
}
static inline int mp_dims_local_tokens(const mp_gpt_dims *d)
{
    return d->sp ? mp_dims_tokens(d) / d->tp : mp_dims_tokens(d);
}
static inline int mp_dims_head_dim(const mp_gpt_dims *d)
{
    return d->head_dim > 0 ? d->head_dim : d->hidden / d->heads;
}
static inline int mp_dims_kv_heads(const mp_gpt_dims *d)
{
    return d->kv_heads > 0 ? d->kv_heads : d->heads;
}

/* How tensor parallelism cuts a [rows, cols] tensor (row-major, y = x W). */
typedef enum {
    MP_SPLIT_NONE, /* replicated on every TP rank */
    MP_SPLIT_COLS, /* column-parallel: this rank holds cols [r*c/t, (r+1)*c/t) */
    MP_SPLIT_QKV,  /* column-parallel over sections ([Q | K | V], or SwiGLU's [gate | up]):
                      this rank's share of each (whole heads of Q, K and V) */
    MP_SPLIT_ROWS  /* row-parallel (and vocab-parallel embedding / head): rows [r*R/t, ...) */
} mp_split;

/* Value classes: the initial distribution, and in exact mode the dyadic grid
 * the tensor lives on (see quant.h). */
typedef enum { MP_INIT_WEIGHT, MP_INIT_EMBED, MP_INIT_GAMMA, MP_INIT_BIAS } mp_init_class;

typedef struct mp_param {
    char name[48];
    int rows, cols;       /* full shape */
    int lrows, lcols;     /* this rank's part */
    mp_split split;
    mp_init_class init;
    bool latent_down;     /* MLA's down-projections and their norms: replicated over TP, their
                             SP sum (sp_partial) is --test-drop-allreduce tp-mla-grad's */
    bool sp_partial;      /* under SP each TP rank holds the gradient of its tokens only:
                             all-reduce it over TP (LayerNorms, row-parallel biases, positions);
                             also QK-norm's scales under any TP (each rank: its heads' share) */
    bool head_partial;    /* QK-norm's scales: their TP sum is --test-drop-allreduce
                             tp-qknorm-grad's */
    bool cancelling;      /* its gradient is a sum of terms that nearly cancel (GPT-OSS's
                             sinks), so fp32 rounding alone is a larger share of it: tolerance
                             mode checks it and its update at MP_CHECK_CANCELLING_TOL (check.c) */
    size_t offset;        /* of this rank's part in the flat buffers */
    int item;             /* layer item: 0 embedding, 1..L blocks, L+1 head (pipeline stage) */
    int n_sec;            /* MP_SPLIT_QKV: sections, and each one's full columns */
    int sec_cols[3];
    int ref_index;        /* index of the same tensor in the whole model's table: its initial
                             values and its reference (a tied head's copy of the embedding on
                             the last stage names the embedding) */
    /* An MoE block's experts, stacked by rows (expert e's rows are
     * [e*rows/n_exp, (e+1)*rows/n_exp)): this rank holds exp_local of them from
     * exp_first, each one split over TP as `split` says. 0: not an expert tensor. */
    int n_exp, exp_first, exp_local;
} mp_param;

/* The tensors of one block (mp_block_param; a LLaMA block has no biases and
 * RMSNorm has no shift: those are -1). */
enum {
    MP_BLK_LN1_W, MP_BLK_LN1_B, MP_BLK_QKV_W, MP_BLK_QKV_B, MP_BLK_PROJ_W, MP_BLK_PROJ_B,
    MP_BLK_LN2_W, MP_BLK_LN2_B, MP_BLK_FC1_W, MP_BLK_FC1_B, MP_BLK_FC2_W, MP_BLK_FC2_B,
    /* a T5 decoder block's cross-attention: its norm, Q, [K | V] from the
     * encoder's output, output projection */
    MP_BLK_LNX_W, MP_BLK_XQ_W, MP_BLK_XKV_W, MP_BLK_XO_W,
    /* an MoE block's router [h, experts] and its experts' fc1 [experts*h, f1e]
     * and fc2 [experts*fe, h] (in place of fc1/fc2) */
    MP_BLK_ROUTER_W, MP_BLK_EXP_FC1_W, MP_BLK_EXP_FC2_W,
    /* its shared experts, as one MLP of their summed width, split over TP */
    MP_BLK_SHR_FC1_W, MP_BLK_SHR_FC2_W,
    /* multi-head latent attention (in place of QKV; proj is [heads*v_dim, h]):
     * the query down-projection [h, q_lora], its RMSNorm, the query
     * up-projection [q_lora, heads*(nope+rope)] (q_lora 0: [h, ...] straight);
     * the key/value down-projection [h, kv_lora + rope] (the latent and the
     * shared rotary key), the latent's RMSNorm, its up-projection [kv_lora,
     * heads*(nope+v)] */
    MP_BLK_MLA_QDOWN_W, MP_BLK_MLA_QNORM_W, MP_BLK_MLA_QUP_W, MP_BLK_MLA_KVDOWN_W,
    MP_BLK_MLA_KVNORM_W, MP_BLK_MLA_KVUP_W,
    /* GPT-OSS: the attention sinks (one logit a head, split over TP by
     * heads), the routed experts' biases (stacked by expert), the router's */
    MP_BLK_SINK, MP_BLK_EXP_FC1_B, MP_BLK_EXP_FC2_B, MP_BLK_ROUTER_B,
    /* QK-norm (Qwen3): the query heads' and the key heads' RMSNorm scales
     * [1, head_dim], replicated over TP; each TP rank's gradient is its
     * heads' share, summed over TP (sp_partial, with or without SP) */
    MP_BLK_QNORM_W, MP_BLK_KNORM_W,
    MP_BLK_COUNT
};

/* An MTP module's tensors besides its block (mp_mtp_param): the norms of the
 * shifted tokens' embedding and of the previous hidden states, the projection
 * of [embedding | hidden] [2h, h] (column-parallel) and its final norm. */
enum {
    MP_MTP_ENORM_W, MP_MTP_ENORM_B, MP_MTP_HNORM_W, MP_MTP_HNORM_B, MP_MTP_EH_W,
    MP_MTP_FNORM_W, MP_MTP_FNORM_B, MP_MTP_COUNT
};

typedef struct mp_param_layout {
    mp_param *p;
    int n;
    size_t total;         /* elements of this rank's flat buffer */
    int wte, wpe, lnf_w, lnf_b, head; /* indices (-1: not on this stage); head == wte when
                                         tied and both are on this stage */
    /* BERT (-1 otherwise): token types; the masked-LM head's dense, LayerNorm and
     * vocabulary bias; the pooler and the two-way (next-sentence) head */
    int tte, mlm_w, mlm_b, mlm_ln_w, mlm_ln_b, lm_bias, pool_w, pool_b, nsp_w, nsp_b;
    /* T5 (-1 otherwise): the relative position bias tables [32, heads] of the
     * encoder and decoder stacks, and the encoder's final norm */
    int enc_rel, dec_rel, enc_lnf;
    int *block;           /* [(layers + mtp_layers) * MP_BLK_COUNT] tensor index, -1: absent
                             or not on this stage (the MTP modules' blocks after the model's) */
    int *mtp;             /* [mtp_layers * MP_MTP_COUNT] an MTP module's other tensors */
    int layers;
    size_t expert_lo;     /* the experts' tensors fill [expert_lo, total) of the flat buffer
                             (reduced over expert-DP, the rest over DP); total when none */
} mp_param_layout;

/* Tensor k (MP_BLK_*) of block l, or -1. */
static inline int mp_block_param(const mp_param_layout *l, int layer, int k)
{
    return l->block[(size_t)layer * MP_BLK_COUNT + (size_t)k];
}

/* Tensor k (MP_MTP_*) of MTP module j, or -1. */
static inline int mp_mtp_param(const mp_param_layout *l, int j, int k)
{
    return l->mtp[(size_t)j * MP_MTP_COUNT + (size_t)k];
}

/* Builds the table for dims (tp, tp_rank, sp and the stage's items as given). */
mp_status mp_param_layout_build(const mp_gpt_dims *d, mp_param_layout *out, mp_error *err);
void mp_param_layout_free(mp_param_layout *l);

/* Exact mode's grid (quant.h) of a tensor of this class: where AdamW puts it back. */
int mp_init_grid(mp_init_class c);
/* Full index (row * cols + col) of local element i of parameter p on TP rank r. */
size_t mp_param_full_index(const mp_param *p, int tp_rank, size_t local_index);

/* The initial value of full element `full_index` of parameter number `pid` of
 * the whole model (mp_param.ref_index).
 * Exact mode gives small integers times a power of two (quant.h). */
double mp_param_init_value(const mp_param *p, int pid, uint64_t seed, size_t full_index,
                           bool exact);

/* Deterministic 64-bit mixing (splitmix64): initial values and synthetic data. */
uint64_t mp_mix64(uint64_t x);

#endif
