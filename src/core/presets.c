/* presets.c — the built-in models (docs/formats.md), each with the parameter count
 * its paper publishes and the training batch it was published with. */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "core/model.h"
#include "core/tables.h"

typedef struct preset {
    mp_model model;
    double published_params;
    int64_t global_batch; /* sequences per iteration in the source; 0 = none published */
    double published_active; /* MoE: parameters one token uses, as published; 0 otherwise */
    const char *alias;    /* size-only name ("175B"), NULL when none */
} preset;

/* Dropout (hidden and attention): 0.1 in the GPT-3, Megatron GPT, BERT and
 * T5 presets (GPT-2's released resid/embd/attn_pdrop, BERT's
 * hidden_dropout_prob and attention_probs_dropout_prob, T5's dropout_rate,
 * Megatron-LM's --hidden-dropout and --attention-dropout defaults); none in
 * the LLaMA-style ones (their released configs' attention_dropout 0, no
 * residual dropout in their code). A run that turns it off says so in its
 * model file (hidden_dropout, attention_dropout). */
#define DROPOUT_01 .hidden_dropout = 0.1, .attention_dropout = 0.1, .dropout_set = true
#define DROPOUT_NONE .dropout_set = true

/* GPT-3 and Megatron GPT: learned positions, GELU's tanh form (GPT-2's
 * gelu_new, which GPT-3 keeps; activation gelu), LayerNorm (epsilon
 * 1e-5: GPT-2's released layer_norm_epsilon, Megatron-LM's --norm-epsilon
 * default), tied embeddings; vocabulary 51200 (GPT-2's 50257 padded as
 * Megatron-LM does). */
#define GPT(nm, L, h, a, params, gb, al)                                                    \
    {{.name = nm, .arch = MP_ARCH_GPT, .layers = L, .hidden = h, .heads = a, .kv_heads = a, \
      .head_dim = (h) / (a), .ffn_hidden = 4 * (h), .vocab = 51200, .seq = 2048,           \
      .activation = MP_ACT_GELU, .norm = MP_NORM_LAYERNORM, .norm_eps = 1e-5,               \
      .position = MP_POS_LEARNED, .tied_embeddings = true, DROPOUT_01},                     \
     params, gb, 0.0, al}

/* LLaMA: SwiGLU, RMSNorm (epsilon 1e-5: the Llama 2 and Llama 3 configs'
 * rms_norm_eps), RoPE of base theta (the config's rope_theta), untied
 * input/output embeddings, GQA. */
#define LLAMA(nm, L, h, a, kv, ffn, V, s, params, gb, al, theta)                             \
    {{.name = nm, .arch = MP_ARCH_LLAMA, .layers = L, .hidden = h, .heads = a,              \
      .kv_heads = kv, .head_dim = (h) / (a), .ffn_hidden = ffn, .vocab = V, .seq = s,       \
      .activation = MP_ACT_SWIGLU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-5,              \
      .position = MP_POS_ROPE, .tied_embeddings = false, DROPOUT_NONE,                    \
      .attn = {.rope_theta = theta}},                                                      \
     params, gb, 0.0, al}

/* BERT: WordPiece vocabulary 30522, 512 positions, the exact (erf) GELU
 * (the released configs' hidden_act "gelu"; Megatron-LM's default without
 * --openai-gelu), LayerNorm of
 * epsilon eps, the masked-LM output layer tied to the word embeddings. */
#define BERT(nm, L, h, a, params, gb, eps)                                                  \
    {{.name = nm, .arch = MP_ARCH_BERT, .layers = L, .hidden = h, .heads = a, .kv_heads = a, \
      .head_dim = (h) / (a), .ffn_hidden = 4 * (h), .vocab = 30522, .seq = 512,            \
      .activation = MP_ACT_GELU_ERF, .norm = MP_NORM_LAYERNORM, .norm_eps = eps,           \
      .position = MP_POS_LEARNED, .tied_embeddings = true, DROPOUT_01},                    \
     params, gb, 0.0, NULL}

/* T5 1.0: SentencePiece vocabulary 32128 (as released), ReLU, scale-only
 * norm (epsilon 1e-6, the released configs' layer_norm_epsilon), relative
 * position buckets, tied embeddings; pre-training used 512
 * input and 114 target tokens, rounded up here to a decoder_seq of 128. */
#define T5(nm, enc, dec, d, a, dkv, dff, params, gb)                                         \
    {{.name = nm, .arch = MP_ARCH_T5, .layers = (enc) + (dec), .encoder_layers = enc,       \
      .decoder_layers = dec, .hidden = d, .heads = a, .kv_heads = a, .head_dim = dkv,       \
      .ffn_hidden = dff, .vocab = 32128, .seq = 512, .encoder_seq = 512, .decoder_seq = 128, \
      .activation = MP_ACT_RELU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-6,                \
      .position = MP_POS_RELATIVE, .tied_embeddings = true, DROPOUT_01},                   \
     params, gb, 0.0, NULL}

/* Mixtures of experts (decoder-only, SwiGLU experts, RMSNorm, RoPE, untied
 * embeddings): L blocks, hidden h, a heads of hd, kv heads, vocabulary V,
 * seq s (the Mixtral configs allow 32k/64k positions: 4096 here is a
 * training length, --seq changes it); E routed experts of size ef, top-k;
 * ffn the dense FFN size the config gives (used by no block here); the counts published (total,
 * active); global batch in sequences (0: none published); the rotary base
 * (the config's rope_theta). RMSNorm's epsilon 1e-5: the Mixtral and
 * OLMoE configs' rms_norm_eps. */
#define MOE(nm, L, h, a, kv, hd, V, s, E, k, ef, ffn, total, active, gb, theta)               \
    {{.name = nm, .arch = MP_ARCH_LLAMA, .layers = L, .hidden = h, .heads = a,              \
      .kv_heads = kv, .head_dim = hd, .ffn_hidden = ffn, .vocab = V, .seq = s,               \
      .activation = MP_ACT_SWIGLU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-5,              \
      .position = MP_POS_ROPE, .tied_embeddings = false, DROPOUT_NONE,                    \
      .attn = {.rope_theta = theta},                                                       \
      .moe = {.experts = E, .top_k = k, .expert_ffn = ef, .layer_freq = 1}},                \
     total, gb, active, NULL}

/* Qwen3's MoE: the form above with QK-norm, an RMSNorm over head_dim on each
 * query and key head before RoPE (Qwen Team 2025, the Qwen3 report's
 * architecture section, after Dehghani et al. 2023; HF's q_norm/k_norm);
 * RMSNorm's epsilon 1e-6 (the released config's rms_norm_eps). */
#define MOE_QK(nm, L, h, a, kv, hd, V, s, E, k, ef, ffn, total, active, gb, theta)            \
    {{.name = nm, .arch = MP_ARCH_LLAMA, .layers = L, .hidden = h, .heads = a,              \
      .kv_heads = kv, .head_dim = hd, .ffn_hidden = ffn, .vocab = V, .seq = s,               \
      .activation = MP_ACT_SWIGLU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-6,              \
      .position = MP_POS_ROPE, .tied_embeddings = false, DROPOUT_NONE,                     \
      .attn = {.rope_theta = theta, .qk_norm = true},                                      \
      .moe = {.experts = E, .top_k = k, .expert_ffn = ef, .layer_freq = 1}},                \
     total, gb, active, NULL}

/* GPT-OSS: the MoE form above with biases, sinks, the alternating 128-token
 * window (full attention in every second block), the SwiGLU clamped at 7
 * and YaRN-scaled rotary embeddings (config.json's rope_theta and
 * rope_scaling: base 150000, factor 32 over the original 4096 positions,
 * betas 32 and 1, the ramp's bounds not rounded), RMSNorm's epsilon 1e-5
 * (its rms_norm_eps); L blocks,
 * E experts, the published total and active counts. */
#define GPT_OSS(nm, L, E, total, active)                                                     \
    {{.name = nm, .arch = MP_ARCH_LLAMA, .layers = L, .hidden = 2880, .heads = 64,           \
      .kv_heads = 8, .head_dim = 64, .ffn_hidden = 2880, .vocab = 201088, .seq = 4096,        \
      .activation = MP_ACT_SWIGLU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-5,                \
      .position = MP_POS_ROPE, .tied_embeddings = false, DROPOUT_NONE,                       \
      .moe = {.experts = E, .top_k = 4, .expert_ffn = 2880, .layer_freq = 1},                 \
      .attn = {.window = 128, .window_skip_freq = 2, .sinks = true, .rope_yarn = true,       \
               .rope_theta = 150000.0, .yarn_factor = 32.0, .yarn_original_seq = 4096,        \
               .yarn_beta_fast = 32.0, .yarn_beta_slow = 1.0, .yarn_bounds = MP_YARN_UNROUNDED},\
      .linear_bias = true,                                                                    \
      .glu_limit = 7.0},                                                                      \
     total, 0, active, NULL}

static const preset presets[] = {
    /* Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1
     * (layers, d_model, heads, batch in tokens / 2048). The paper rounds: the
     * shapes give 356M for "350M", 2.65B for "2.7B", 12.9B for "13B" (whose
     * d_model is printed as 5140; 5120 = 40 x 128 is the real width). For
     * 1.3B the table's 24 heads x d_head 128 = 3072 does not match d_model
     * 2048 (nor the 1.3B count); 16 heads of 128, as Megatron-DeepSpeed's and
     * GPT-Neo's 1.3B configs use, keep both d_head and the count. */
    GPT("gpt3-125m", 12, 768, 12, 125e6, 256, "125M"),
    GPT("gpt3-350m", 24, 1024, 16, 350e6, 256, "350M"),
    GPT("gpt3-760m", 24, 1536, 16, 760e6, 256, "760M"),
    GPT("gpt3-1.3b", 24, 2048, 16, 1.3e9, 512, "1.3B"),
    GPT("gpt3-2.7b", 32, 2560, 32, 2.7e9, 512, "2.7B"),
    GPT("gpt3-6.7b", 32, 4096, 32, 6.7e9, 1024, "6.7B"),
    GPT("gpt3-13b", 40, 5120, 40, 13.0e9, 1024, "13B"),
    /* batch 3.2M tokens; Megatron-LM's GPT-3 recipe uses 1536 sequences */
    GPT("gpt3-175b", 96, 12288, 96, 175.0e9, 1536, "175B"),

    /* Narayanan et al. 2021, "Efficient Large-Scale Language Model Training
     * on GPU Clusters Using Megatron-LM", Table 1 (heads, hidden, layers,
     * parameters, batch size). Its 1.7B row computes to 1.65B. */
    GPT("megatron-1.7b", 24, 2304, 24, 1.7e9, 512, "1.7B"),
    GPT("megatron-3.6b", 30, 3072, 32, 3.6e9, 512, "3.6B"),
    GPT("megatron-7.5b", 36, 4096, 32, 7.5e9, 512, "7.5B"),
    GPT("megatron-18.4b", 40, 6144, 48, 18.4e9, 1024, "18.4B"),
    GPT("megatron-39.1b", 48, 8192, 64, 39.1e9, 1536, "39.1B"),
    GPT("megatron-76.1b", 60, 10240, 80, 76.1e9, 1792, "76.1B"),
    GPT("megatron-145.6b", 80, 12288, 96, 145.6e9, 2304, "145.6B"),
    GPT("megatron-310.1b", 96, 16384, 128, 310.1e9, 2160, "310.1B"),
    GPT("megatron-529.6b", 105, 20480, 128, 529.6e9, 2520, "529.6B"),
    GPT("megatron-1t", 128, 25600, 160, 1008.0e9, 3072, "1T"),
    /* Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
     * Transformer Models", Table 3 (22B, 530B; 175B and 1T as above). The
     * 530B batch is MT-NLG's (Smith et al. 2022: 1920 sequences). */
    GPT("megatron-22b", 48, 6144, 64, 22e9, 0, "22B"),
    GPT("megatron-530b", 105, 20480, 128, 530e9, 1920, "530B"),

    /* Touvron et al. 2023, "Llama 2", Table 1 and the released configs;
     * 4M-token batches of 4096 = 1024 sequences. Counts from the model cards.
     * Size aliases only where no other preset has that size: 13B is GPT-3's,
     * and 70B names two LLaMAs (megaplan lists both when asked for it). */
    LLAMA("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 6.74e9, 1024, "7B", 10000.0),
    LLAMA("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 13.0e9, 1024, NULL, 10000.0),
    LLAMA("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 69.0e9, 1024, NULL, 10000.0),
    /* Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3 (its RoPE base
     * frequency 500,000) and the released configs; initial batch 4M tokens =
     * 512 sequences of 8192. */
    LLAMA("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8.03e9, 512, "8B", 500000.0),
    LLAMA("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 70.6e9, 512, NULL, 500000.0),
    LLAMA("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 405.9e9, 512, "405B",
          500000.0),

    /* Devlin et al. 2019, "BERT", §3 (L, H, A; 110M and 340M; batch 256). */
    /* LayerNorm epsilon 1e-12: the released BERT configs' layer_norm_eps. */
    BERT("bert-base", 12, 768, 12, 110e6, 256, 1e-12),
    BERT("bert-large", 24, 1024, 16, 340e6, 256, 1e-12),
    /* Shoeybi et al. 2019, "Megatron-LM", Table 4: 48 layers, 2560 hidden,
     * 40 heads, 3.9B; batch 1024. Trained with Megatron-LM, whose
     * LayerNorm epsilon defaults to 1e-5 (--layernorm-epsilon then,
     * --norm-epsilon now). */
    BERT("megatron-bert-3.9b", 48, 2560, 40, 3.9e9, 1024, 1e-5),

    /* Raffel et al. 2020, "Exploring the Limits of Transfer Learning", §3.7
     * (shapes; batch 128 sequences). The paper rounds (220M, 770M, 3B, 11B);
     * the counts here are the released checkpoints' (HuggingFace hub:
     * 223M, 738M, 2.85B, 11.3B). */
    T5("t5-base", 12, 12, 768, 12, 64, 3072, 223e6, 128),
    T5("t5-large", 24, 24, 1024, 16, 64, 4096, 738e6, 128),
    T5("t5-3b", 24, 24, 1024, 32, 128, 16384, 2.85e9, 128),
    T5("t5-11b", 24, 24, 1024, 128, 128, 65536, 11.3e9, 128),

    /* Jiang et al. 2024, "Mixtral of Experts", Table 1 and §2.1 (46.7B total,
     * 12.9B active; 8 experts, top-2) with the released config.json; no
     * training batch published. */
    MOE("mixtral-8x7b", 32, 4096, 32, 8, 128, 32000, 4096, 8, 2, 14336, 14336, 46.7e9, 12.9e9, 0, 1e6),
    /* Mistral AI, "Cheaper, Better, Faster, Stronger" (2024-04-17): 141B
     * total, 39B active; shapes from the released config.json. */
    MOE("mixtral-8x22b", 56, 6144, 48, 8, 128, 32768, 4096, 8, 2, 16384, 16384, 141e9, 39e9, 0, 1e6),
    /* Qwen Team 2025, "Qwen3 Technical Report", Tables 1-2: 94 layers, 64
     * query / 4 KV heads, 128 experts, 8 activated, 235B total / 22B active;
     * head_dim 128 and expert size 1536 from the released config.json. */
    MOE_QK("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 151936, 4096, 128, 8, 1536, 12288, 235e9, 22e9, 0,
           1e6),
    /* Muennighoff et al. 2024, "OLMoE: Open Mixture-of-Experts Language
     * Models", Table 1: 6.9B total, 1.3B active, 64 experts, top-8, 16
     * layers; the small MoE the tests use. Batch 4M tokens = 1024 x 4096. */
    MOE("olmoe-1b-7b", 16, 2048, 16, 16, 128, 50304, 4096, 64, 8, 1024, 1024, 6.9e9, 1.3e9, 1024, 10000.0),
    /* DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §4.2: 61 layers,
     * hidden 7168, 128 heads of 128 (+64 RoPE), MLA with q/kv LoRA ranks
     * 1536/512, the first 3 blocks dense (FFN 18432), then 1 shared + 256
     * routed experts of 2048, 8 active, routed to at most 4 of 8 groups,
     * sigmoid routing (the chosen weights scaled by 2.5, the released
     * config.json's routed_scaling_factor); 671B total / 37B active (the 14B multi-token
     * prediction module excluded, as the report counts); RMSNorm's epsilon
     * 1e-6, the config's rms_norm_eps. Batch: 15360
     * sequences of 4096 after the ramp-up. */
    {{.name = "deepseek-v3", .arch = MP_ARCH_LLAMA, .layers = 61, .hidden = 7168, .heads = 128,
      .kv_heads = 128, .head_dim = 192, .ffn_hidden = 18432, .vocab = 129280, .seq = 4096,
      .activation = MP_ACT_SWIGLU, .norm = MP_NORM_RMSNORM, .norm_eps = 1e-6,
      .position = MP_POS_ROPE, .tied_embeddings = false, DROPOUT_NONE,
      .attn = {.rope_theta = 10000.0},
      .moe = {.experts = 256, .top_k = 8, .expert_ffn = 2048, .shared_experts = 1,
              .shared_ffn = 2048, .first_dense = 3, .layer_freq = 1, .route_groups = 8,
              .route_group_top_k = 4, .route_scale = 2.5, .router = MP_ROUTER_SIGMOID},
      .mla = {.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_rope_head_dim = 64,
              .qk_nope_head_dim = 128, .v_head_dim = 128}},
     671e9, 15360, 37e9, NULL},
    /* OpenAI 2025, "gpt-oss-120b & gpt-oss-20b Model Card", §2.1 and Table
     * 1: 36 / 24 blocks of hidden 2880, 64 query heads of 64 with 8 KV
     * heads, 128 / 32 experts of 2880 with top-4, biases in every linear
     * layer, a learned sink per head, banded (128-token) and dense attention
     * alternating, the clamped SwiGLU; 116.83B / 20.91B total, 5.13B / 3.61B
     * active (the card's active count leaves the input embedding out, see
     * tests/planner/test_moe.c); shapes from the released config.json
     * (tests/core/data/gpt-oss-*-config.json). No training batch published;
     * seq 4096, the initial context length. */
    GPT_OSS("gpt-oss-120b", 36, 128, 116.83e9, 5.13e9),
    GPT_OSS("gpt-oss-20b", 24, 32, 20.91e9, 3.61e9),
};

#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

static const preset *find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcasecmp(presets[i].model.name, name))
            return &presets[i];
    for (int i = 0; i < N_PRESETS; i++)
        if (presets[i].alias && !strcasecmp(presets[i].alias, name))
            return &presets[i];
    return NULL;
}

const mp_model *mp_model_preset(const char *name)
{
    const preset *p = find(name);
    return p ? &p->model : NULL;
}

const mp_model *mp_model_preset_at(int index)
{
    return index >= 0 && index < N_PRESETS ? &presets[index].model : NULL;
}

double mp_model_preset_published_params(const char *name)
{
    const preset *p = find(name);
    return p ? p->published_params : 0.0;
}

double mp_model_preset_published_active_params(const char *name)
{
    const preset *p = find(name);
    return p ? p->published_active : 0.0;
}

int64_t mp_model_preset_global_batch(const char *name)
{
    const preset *p = find(name);
    return p ? p->global_batch : 0;
}

const char *mp_model_preset_alias(const char *name)
{
    const preset *p = find(name);
    return p ? p->alias : NULL;
}
