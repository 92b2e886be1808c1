/* model.h — a Transformer's shape: everything the cost model and the
 * executor need to know about the network, nothing about how it is split. */
#ifndef MP_MODEL_H
#define MP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

typedef enum { MP_ARCH_GPT, MP_ARCH_BERT, MP_ARCH_T5, MP_ARCH_LLAMA, MP_ARCH_COUNT } mp_arch;
/* The MLP's activation (docs/formats.md, "activation"). MP_ACT_GELU is GELU's
 * tanh approximation (GPT-2's gelu_new, Megatron's --openai-gelu), the
 * YAML's `gelu`; MP_ACT_GELU_ERF the exact x Phi(x) (torch's default, BERT,
 * Megatron's default). The gated ones (mp_activation_is_gated) have three
 * FFN matrices: act(x W_gate) * (x W_up) W_down with act SiLU (SwiGLU), tanh
 * GELU (GEGLU: T5 1.1 / Flan-T5's gated-gelu) or erf GELU (GEGLU_ERF). */
typedef enum {
    MP_ACT_GELU,
    MP_ACT_SWIGLU,
    MP_ACT_RELU,
    MP_ACT_GELU_ERF,
    MP_ACT_GEGLU,
    MP_ACT_GEGLU_ERF,
    MP_ACT_COUNT
} mp_activation;
typedef enum { MP_NORM_LAYERNORM, MP_NORM_RMSNORM, MP_NORM_COUNT } mp_norm;
typedef enum { MP_POS_LEARNED, MP_POS_ROPE, MP_POS_RELATIVE, MP_POS_COUNT } mp_position;

/* How a mixture-of-experts layer scores its experts: softmax over the
 * experts then top-k (Mixtral, Qwen-MoE), or a sigmoid per expert with a
 * bias used only for selection (DeepSeek-V3's auxiliary-loss-free routing). */
typedef enum { MP_ROUTER_SOFTMAX, MP_ROUTER_SIGMOID, MP_ROUTER_COUNT } mp_router;

#define MP_NAME_MAX 64
#define MP_MAX_LAYERS 2048 /* more is refused as absurd */

/* YaRN's ramp bounds (attn.yarn_bounds): rounded out to whole dims (HF's
 * rope_scaling.truncate true, its default; Megatron's
 * --yarn-correction-range-round-to-int) or used as computed (truncate false:
 * GPT-OSS). */
typedef enum { MP_YARN_ROUNDED, MP_YARN_UNROUNDED, MP_YARN_BOUNDS_COUNT } mp_yarn_bounds;
const char *mp_yarn_bounds_name(mp_yarn_bounds b);

typedef struct mp_model {
    char name[MP_NAME_MAX];
    mp_arch arch;
    int64_t layers;         /* transformer blocks in total; t5: encoder_layers + decoder_layers */
    int64_t encoder_layers; /* t5 only (0 otherwise) */
    int64_t decoder_layers; /* t5 only (0 otherwise) */
    int64_t hidden;         /* h */
    int64_t heads;          /* a */
    int64_t kv_heads;       /* == heads unless grouped-query attention */
    int64_t head_dim;       /* hidden/heads unless the model says otherwise (t5-11b: 128) */
    int64_t ffn_hidden;     /* 4h for GPT; gated models (SwiGLU, GEGLU) have 3 matrices of h x ffn_hidden */
    int64_t vocab;          /* V */
    int64_t seq;            /* s; t5: encoder_seq */
    int64_t encoder_seq;    /* t5 only */
    int64_t decoder_seq;    /* t5 only */
    mp_activation activation;
    mp_norm norm;
    /* The epsilon every norm of the model adds to the variance (LayerNorm)
     * or mean square (RMSNorm) before the square root: the block norms, the
     * final norm, BERT's head, MLA's latent norms, QK-norm, MTP's norms
     * (HF's rms_norm_eps / layer_norm_epsilon / layer_norm_eps; Megatron's
     * --norm-epsilon). 0 in a model built in code: the architecture's
     * default (mp_model_default_norm_eps), filled in by mp_model_finish. */
    double norm_eps;
    mp_position position;
    bool tied_embeddings;
    /* Biases in the linear layers (Q, K, V, output, MLP/experts) of a
     * llama-style model, which has none by default (GPT-OSS; Megatron keeps
     * --add-bias-linear on). gpt and bert always have them. */
    bool linear_bias;
    /* hidden_dropout and attention_dropout below are the model's own (not
     * a file field: the readers and presets set it; kept here, beside the
     * other bools, so it takes a padding byte) */
    bool dropout_set;

    /* Dropout while training (docs/formats.md, "hidden_dropout"): the
     * probability of dropping an element of the residual branches' outputs
     * and of the embedding's output (hidden_dropout; Megatron's
     * --hidden-dropout, which its embedding dropout shares), and of the
     * attention probabilities (attention_dropout; --attention-dropout).
     * 0 is no dropout: no mask, no dropout kernel. Each architecture has its
     * own default (mp_model_arch_defaults: 0.1 for gpt, bert and t5, 0 for
     * llama), which a model built in code without dropout_set gets from
     * mp_model_finish (and from the accessors mp_model_hidden_dropout and
     * mp_model_attention_dropout); the YAML decoder, the config.json import
     * and the presets set dropout_set. */
    double hidden_dropout;
    double attention_dropout;

    /* Mixture of experts (docs/cost-model.md, "Mixture of experts"). experts
     * == 0: a dense model and every other moe field is 0. Block i (0-based)
     * is an MoE block when i >= first_dense and i % layer_freq == 0
     * (Megatron's --moe-layer-freq, DeepSeek's first_k_dense_replace); the
     * other blocks keep the dense ffn_hidden MLP. */
    struct mp_moe {
        int64_t experts;         /* routed experts per MoE block */
        int64_t top_k;           /* routed experts per token */
        int64_t expert_ffn;      /* one routed expert's FFN size (0: ffn_hidden) */
        int64_t shared_experts;  /* always-on experts beside the routed ones */
        int64_t shared_ffn;      /* one shared expert's FFN size (0: expert_ffn) */
        int64_t first_dense;     /* leading dense blocks */
        int64_t layer_freq;      /* every layer_freq-th block is MoE (0: 1) */
        int64_t route_groups;    /* DeepSeek group-limited routing: expert groups (0: none) */
        int64_t route_group_top_k; /* groups a token may use */
        /* the routed experts' weights times this after their normalisation
         * (DeepSeek-V3's routed_scaling_factor 2.5; Megatron's
         * --moe-router-topk-scaling-factor; 0: 1) */
        double route_scale;
        /* the sigmoid router's expert bias (auxiliary-loss-free balancing,
         * used for the choice only): after each step each expert's bias
         * moves by this towards the mean load (Megatron's
         * --moe-router-bias-update-rate; 0: its default 1e-3) */
        double bias_update_rate;
        double capacity_factor;  /* 0: dropless; else tokens kept per expert / fair share */
        /* tokens of the busiest expert rank / the mean, a property of how well
         * training balances the router (0: 1, or capacity_factor when set) */
        double imbalance;
        mp_router router;
        /* a benchmark's fixed routing in place of the router: token t of a
         * rank's micro-batch goes to the top_k consecutive experts from
         * (t * top_k) mod experts, every expert equally loaded (NeMo
         * AutoModel's FakeBalancedGate, BackendConfig fake_balanced_gate).
         * The cost model counts the flex dispatcher's copies for it
         * (moe_dispatch.c); exec routes with its router. */
        bool fake_balanced_gate;
    } moe;

    /* Multi-token prediction (DeepSeek-V3 §2.2; Megatron's --mtp-num-layers):
     * mtp_layers sequential modules after the model, module k predicting
     * token i+k+1 from the previous depth's hidden state and token i+k's
     * embedding: two RMSNorms, a 2h -> h projection, one transformer block of
     * the model's last block's kind, and the shared output head; their loss
     * is added times mtp_loss_scale (0: Megatron's default 0.1). Not counted
     * in the parameters a model is published with (DeepSeek-V3's 671B).
     * They run on the last pipeline stage, or on the stage an explicit
     * layout puts them (Megatron's standalone MTP stage, core/layout.h). */
    int64_t mtp_layers;
    double mtp_loss_scale;

    /* Multi-head latent attention (DeepSeek-V2/V3). kv_lora_rank == 0: plain
     * attention and every other mla field is 0. heads * qk_head_dim = heads *
     * (qk_nope_head_dim + qk_rope_head_dim) query/key width, heads *
     * v_head_dim value width. */
    struct mp_mla {
        int64_t q_lora_rank;     /* 0: queries projected straight from h */
        int64_t kv_lora_rank;
        int64_t qk_rope_head_dim;
        int64_t qk_nope_head_dim;
        int64_t v_head_dim;
    } mla;

    /* Attention variants (GPT-OSS; docs/cost-model.md, "Sliding-window
     * attention and sinks"). window == 0: every query of a causal model sees
     * every earlier key. Otherwise block i (0-based) is windowed unless
     * window_skip_freq > 0 and (i + 1) % window_skip_freq == 0 (Megatron's
     * --window-attn-skip-freq N: one full-attention block after N-1 windowed
     * ones); a windowed query at position t sees the keys max(0, t-window+1)
     * .. t (HuggingFace's sliding_window; Megatron's --window-size
     * window-1,0). sinks: one learned logit per head joins every softmax's
     * denominator and takes no value (Megatron's --softmax-type learnable). */
    struct mp_attn {
        int64_t window;
        int64_t window_skip_freq;
        bool sinks;
        /* QK-norm (Qwen3; Megatron-Core's --qk-layernorm): an RMSNorm over
         * head_dim on every query head and every key head after the QKV
         * projection and before the rotary turn, each with its own learned
         * scale of head_dim shared by the heads (HF's q_norm / k_norm of
         * modeling_qwen3.py, weight shape [head_dim]) */
        bool qk_norm;
        /* rotary embedding with YaRN scaling (GPT-OSS): its attention
         * factor (mscale) is not 1, which Transformer Engine's fused RoPE
         * kernel does not take, so Megatron applies it with unfused ops */
        bool rope_yarn;
        /* The rotary angles (position rope): dimension pair k of a head of
         * d turns by pos * rope_theta^(-2k/d) (0: 10000, LLaMA-2's and
         * Megatron's default; HF's rope_theta). With rope_yarn, HF
         * transformers' _compute_yarn_parameters: the frequencies below
         * the ramp from beta_fast to beta_slow rotations over the original
         * context are divided by yarn_factor, those above kept, the ramp
         * mixing them linearly (its bounds rounded out to whole dims, HF's
         * default truncate, or not: GPT-OSS's truncate false); cos and sin
         * are scaled by 0.1 ln factor + 1. beta 0: HF's defaults 32 and 1.
         * DeepSeek's variant (latent attention only; its rope_scaling's
         * mscale and mscale_all_dim, 0: absent), with g(m) = 0.1 m ln factor
         * + 1: cos and sin scaled by g(yarn_mscale) / g(yarn_mscale_all_dim)
         * when both are given (else as above), and the softmax scale
         * 1/sqrt(d) multiplied by g(yarn_mscale_all_dim)^2 when that is. */
        mp_yarn_bounds yarn_bounds;
        double rope_theta;
        double yarn_factor;
        int64_t yarn_original_seq;
        double yarn_beta_fast, yarn_beta_slow;
        double yarn_mscale, yarn_mscale_all_dim;
    } attn;
    /* GPT-OSS's clamped SwiGLU in the experts (0: plain SwiGLU): gate g and
     * up u clamped (g <= limit, |u| <= limit), out = g sigmoid(1.702 g) (u +
     * 1) (Megatron: --quick-geglu --glu-linear-offset 1
     * --activation-func-clamp-value limit). Element-wise: no cost of its own. */
    double glu_limit;
} mp_model;

/* True when the model has routed experts / latent attention. */
bool mp_model_is_moe(const mp_model *m);
bool mp_model_is_mla(const mp_model *m);
/* Block index 0..layers-1 -> whether its attention is windowed. */
bool mp_model_block_is_windowed(const mp_model *m, int64_t block0);
/* The rotary base (attn.rope_theta, 10000 when 0) and YaRN's betas with
 * HF's defaults filled in (32 and 1 when 0). */
double mp_model_rope_theta(const mp_model *m);
double mp_model_yarn_beta_fast(const mp_model *m);
double mp_model_yarn_beta_slow(const mp_model *m);
/* Windowed blocks in the model. */
int64_t mp_model_windowed_blocks(const mp_model *m);
/* Whether the model has multi-token prediction modules. */
bool mp_model_has_mtp(const mp_model *m);
/* The MTP loss's factor (mtp_loss_scale, or Megatron's default 0.1). */
double mp_model_mtp_loss_scale(const mp_model *m);
/* Block index 0..layers-1 -> whether it is an MoE block. */
bool mp_model_block_is_moe(const mp_model *m, int64_t block0);
/* MoE blocks in the model. */
int64_t mp_model_moe_blocks(const mp_model *m);
/* Transformer blocks in the model: encoder_layers + decoder_layers for a T5
 * that gives them, else layers. The count every part shares (the cost
 * model's items 1..blocks, the search, Megatron's flags). */
int64_t mp_model_blocks(const mp_model *m);
const char *mp_router_name(mp_router r);

/* Names used in files and on the command line ("gpt", "swiglu", ...). */
const char *mp_arch_name(mp_arch a);
const char *mp_activation_name(mp_activation a);
/* Gated MLP (SwiGLU, GEGLU, GEGLU_ERF): three h x ffn_hidden matrices, the
 * activation's input twice as wide. */
bool mp_activation_is_gated(mp_activation a);
/* The activation's GELU is the exact (erf) one (GELU_ERF, GEGLU_ERF). */
bool mp_activation_is_erf(mp_activation a);
const char *mp_norm_name(mp_norm n);
const char *mp_position_name(mp_position p);

/* The norm epsilon an architecture's models have unless they say (a file's
 * norm_eps, a config.json's key): gpt and llama 1e-5 (GPT-2's
 * layer_norm_epsilon, Llama 2's and 3's rms_norm_eps, Megatron's
 * --norm-epsilon default), bert 1e-12 (BERT's layer_norm_eps), t5 1e-6
 * (T5's layer_norm_epsilon). */
double mp_model_default_norm_eps(mp_arch a);

/* The dropout probabilities an architecture's models have unless they say
 * (0.1 and 0.1 for gpt, bert and t5: GPT-2's resid/embd/attn_pdrop, BERT's
 * hidden_dropout_prob and attention_probs_dropout_prob, T5's dropout_rate,
 * Megatron-Core's TransformerConfig defaults; 0 for llama-style models). */
double mp_model_default_dropout(mp_arch a);
/* A model's hidden and attention dropout probabilities: its own once
 * dropout_set, else its architecture's default. */
double mp_model_hidden_dropout(const mp_model *m);
double mp_model_attention_dropout(const mp_model *m);

/* Fills derived defaults (kv_heads = heads, head_dim = hidden/heads, t5 layer
 * and seq sums, ...) and checks consistency: positive sizes, heads divisible by
 * kv_heads, nothing absurd (sizes that would overflow the cost model's int64
 * or double arithmetic are refused). Field names in err are the YAML keys. */
mp_status mp_model_finish(mp_model *m, mp_error *err);

/* Built-in presets (core/presets.c). Names are lower case family-size
 * ("gpt3-175b", "llama3-70b", "megatron-1t", "bert-large", "t5-11b"); the
 * GPT/Megatron line, and LLaMAs whose size no other preset has, also answer
 * to size-only aliases ("175B", "530B", "1T", "8B", case-insensitive).
 * Returns NULL when unknown. */
const mp_model *mp_model_preset(const char *name);
/* Iteration over presets: returns NULL past the end. */
const mp_model *mp_model_preset_at(int index);
/* The published parameter count a preset is checked against (0 when none). */
double mp_model_preset_published_params(const char *name);
/* MoE presets: the published active-parameter count (0 for dense ones). */
double mp_model_preset_published_active_params(const char *name);

#endif
