#include "core/model.h"

#include <float.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/tables.h"

/* Limits that keep every product the cost model forms (s*b*h*L, a*s^2,
 * V*h, ...) far inside int64 and double; real models are orders of
 * magnitude below them. */
#define MAX_HIDDEN (1 << 20)
#define MAX_HEADS (1 << 16)
#define MAX_FFN (1 << 23)
#define MAX_VOCAB (1 << 24)
#define MAX_SEQ (1 << 22)
#define MAX_PARAMS 1e16
#define MAX_EXPERTS (1 << 16)

static const char *const arch_names[] = {"gpt", "bert", "t5", "llama"};
static const char *const act_names[] = {"gelu", "swiglu", "relu", "gelu_erf", "geglu",
                                         "geglu_erf"};
static const char *const norm_names[] = {"layernorm", "rmsnorm"};
static const char *const pos_names[] = {"learned", "rope", "relative"};
static const char *const router_names[] = {"softmax", "sigmoid"};
static const char *const yarn_bounds_names[] = {"rounded", "unrounded"};

const char *mp_arch_name(mp_arch a)
{
    return (unsigned)a < MP_ARCH_COUNT ? arch_names[a] : "?";
}
const char *mp_activation_name(mp_activation a)
{
    return (unsigned)a < MP_ACT_COUNT ? act_names[a] : "?";
}
bool mp_activation_is_gated(mp_activation a)
{
    return a == MP_ACT_SWIGLU || a == MP_ACT_GEGLU || a == MP_ACT_GEGLU_ERF;
}
bool mp_activation_is_erf(mp_activation a)
{
    return a == MP_ACT_GELU_ERF || a == MP_ACT_GEGLU_ERF;
}
const char *mp_norm_name(mp_norm n)
{
    return (unsigned)n < MP_NORM_COUNT ? norm_names[n] : "?";
}
const char *mp_position_name(mp_position p)
{
    return (unsigned)p < MP_POS_COUNT ? pos_names[p] : "?";
}

const char *mp_router_name(mp_router r)
{
    return (unsigned)r < MP_ROUTER_COUNT ? router_names[r] : "?";
}

int64_t mp_model_blocks(const mp_model *m)
{
    if (m->arch == MP_ARCH_T5 && m->encoder_layers + m->decoder_layers > 0)
        return m->encoder_layers + m->decoder_layers;
    return m->layers;
}

const char *mp_yarn_bounds_name(mp_yarn_bounds b)
{
    return (unsigned)b < MP_YARN_BOUNDS_COUNT ? yarn_bounds_names[b] : "?";
}

static const char *yarn_bounds_name_i(int i)
{
    return mp_yarn_bounds_name((mp_yarn_bounds)i);
}

static const char *router_name_i(int i)
{
    return mp_router_name((mp_router)i);
}

static const char *arch_name_i(int i)
{
    return mp_arch_name((mp_arch)i);
}
static const char *act_name_i(int i)
{
    return mp_activation_name((mp_activation)i);
}
static const char *norm_name_i(int i)
{
    return mp_norm_name((mp_norm)i);
}
static const char *pos_name_i(int i)
{
    return mp_position_name((mp_position)i);
}

#define INT_FIELD(key, lo, hi, req)                                                        \
    {.path = #key, .type = MP_FT_INT, .offset = offsetof(mp_model, key), .min = (lo),      \
     .max = (hi), .required = (req)}
#define ENUM_FIELD(key, fn, count, req)                                                    \
    {.path = #key, .type = MP_FT_ENUM, .offset = offsetof(mp_model, key), .name_of = (fn), \
     .n_names = (count), .required = (req)}

/* A nested field (moe.experts, mla.kv_lora_rank). */
#define SUB_INT_FIELD(grp, key, lo, hi)                                                   \
    {.path = #grp "." #key, .type = MP_FT_INT, .offset = offsetof(mp_model, grp.key),     \
     .min = (lo), .max = (hi)}

#define SUB_DOUBLE_FIELD(grp, key, lo, hi)                                                \
    {.path = #grp "." #key, .type = MP_FT_DOUBLE, .offset = offsetof(mp_model, grp.key),  \
     .unit = MP_UNIT_NONE, .min = (lo), .max = (hi)}

/* Zero means "derive it" for the optional sizes (kv_heads, head_dim, ...). */
static const mp_field model_fields[] = {
    {.path = "name", .type = MP_FT_STRING, .offset = offsetof(mp_model, name),
     .size = MP_NAME_MAX},
    ENUM_FIELD(arch, arch_name_i, MP_ARCH_COUNT, true),
    INT_FIELD(layers, 1, MP_MAX_LAYERS, false),
    INT_FIELD(encoder_layers, 0, MP_MAX_LAYERS, false),
    INT_FIELD(decoder_layers, 0, MP_MAX_LAYERS, false),
    INT_FIELD(hidden, 1, MAX_HIDDEN, true),
    INT_FIELD(heads, 1, MAX_HEADS, true),
    INT_FIELD(kv_heads, 0, MAX_HEADS, false),
    INT_FIELD(head_dim, 0, MAX_HEADS, false),
    INT_FIELD(ffn_hidden, 0, MAX_FFN, false),
    INT_FIELD(vocab, 1, MAX_VOCAB, true),
    INT_FIELD(seq, 1, MAX_SEQ, false),
    INT_FIELD(encoder_seq, 0, MAX_SEQ, false),
    INT_FIELD(decoder_seq, 0, MAX_SEQ, false),
    ENUM_FIELD(activation, act_name_i, MP_ACT_COUNT, false),
    ENUM_FIELD(norm, norm_name_i, MP_NORM_COUNT, false),
    /* positive and below 1: a norm divides by sqrt(var + eps), so eps is
     * a small guard, not a scale (real models: 1e-12 to 1e-5) */
    {.path = "norm_eps", .type = MP_FT_DOUBLE, .offset = offsetof(mp_model, norm_eps),
     .unit = MP_UNIT_NONE, .min = 0.0, .min_open = true, .max = 1.0, .max_open = true},
    ENUM_FIELD(position, pos_name_i, MP_POS_COUNT, false),
    {.path = "tied_embeddings", .type = MP_FT_BOOL,
     .offset = offsetof(mp_model, tied_embeddings)},
    INT_FIELD(mtp_layers, 0, 64, false),
    {.path = "mtp_loss_scale", .type = MP_FT_DOUBLE, .offset = offsetof(mp_model, mtp_loss_scale),
     .unit = MP_UNIT_NONE, .min = 0.0, .max = 1024.0},
    SUB_INT_FIELD(moe, experts, 0, MAX_EXPERTS),
    SUB_INT_FIELD(moe, top_k, 0, MAX_EXPERTS),
    SUB_INT_FIELD(moe, expert_ffn, 0, MAX_FFN),
    SUB_INT_FIELD(moe, shared_experts, 0, MAX_EXPERTS),
    SUB_INT_FIELD(moe, shared_ffn, 0, MAX_FFN),
    SUB_INT_FIELD(moe, first_dense, 0, MP_MAX_LAYERS),
    SUB_INT_FIELD(moe, layer_freq, 0, MP_MAX_LAYERS),
    SUB_INT_FIELD(moe, route_groups, 0, MAX_EXPERTS),
    SUB_INT_FIELD(moe, route_group_top_k, 0, MAX_EXPERTS),
    {.path = "moe.capacity_factor", .type = MP_FT_DOUBLE,
     .offset = offsetof(mp_model, moe.capacity_factor), .unit = MP_UNIT_NONE, .min = 0.0,
     .max = 1024.0},
    {.path = "moe.imbalance", .type = MP_FT_DOUBLE,
     .offset = offsetof(mp_model, moe.imbalance), .unit = MP_UNIT_NONE, .min = 0.0,
     .max = 1024.0},
    {.path = "moe.route_scale", .type = MP_FT_DOUBLE,
     .offset = offsetof(mp_model, moe.route_scale), .unit = MP_UNIT_NONE, .min = 0.0,
     .max = 1024.0},
    {.path = "moe.bias_update_rate", .type = MP_FT_DOUBLE,
     .offset = offsetof(mp_model, moe.bias_update_rate), .unit = MP_UNIT_NONE, .min = 0.0,
     .max = 1.0},
    {.path = "moe.router", .type = MP_FT_ENUM, .offset = offsetof(mp_model, moe.router),
     .name_of = router_name_i, .n_names = MP_ROUTER_COUNT},
    {.path = "moe.fake_balanced_gate", .type = MP_FT_BOOL,
     .offset = offsetof(mp_model, moe.fake_balanced_gate)},
    SUB_INT_FIELD(mla, q_lora_rank, 0, MAX_HIDDEN),
    SUB_INT_FIELD(mla, kv_lora_rank, 0, MAX_HIDDEN),
    SUB_INT_FIELD(mla, qk_rope_head_dim, 0, MAX_HEADS),
    SUB_INT_FIELD(mla, qk_nope_head_dim, 0, MAX_HEADS),
    SUB_INT_FIELD(mla, v_head_dim, 0, MAX_HEADS),
    SUB_INT_FIELD(attn, window, 0, MAX_SEQ),
    SUB_INT_FIELD(attn, window_skip_freq, 0, MP_MAX_LAYERS),
    {.path = "attn.sinks", .type = MP_FT_BOOL, .offset = offsetof(mp_model, attn.sinks)},
    {.path = "attn.qk_norm", .type = MP_FT_BOOL, .offset = offsetof(mp_model, attn.qk_norm)},
    {.path = "linear_bias", .type = MP_FT_BOOL, .offset = offsetof(mp_model, linear_bias)},
    /* probabilities: 0 (none) up to, not including, 1 (everything dropped) */
    {.path = "hidden_dropout", .type = MP_FT_DOUBLE, .offset = offsetof(mp_model, hidden_dropout),
     .unit = MP_UNIT_NONE, .min = 0.0, .max = 1.0, .max_open = true},
    {.path = "attention_dropout", .type = MP_FT_DOUBLE,
     .offset = offsetof(mp_model, attention_dropout), .unit = MP_UNIT_NONE, .min = 0.0,
     .max = 1.0, .max_open = true},
    {.path = "glu_limit", .type = MP_FT_DOUBLE, .offset = offsetof(mp_model, glu_limit),
     .unit = MP_UNIT_NONE, .min = 0.0, .max = 1e6},
    {.path = "attn.rope_yarn", .type = MP_FT_BOOL,
     .offset = offsetof(mp_model, attn.rope_yarn)},
    /* any finite number here: 0 (the default base) or (1, 1e12], a range with a
     * hole that finish_rope (model_attn.c) checks and states whole */
    SUB_DOUBLE_FIELD(attn, rope_theta, -DBL_MAX, DBL_MAX),
    SUB_DOUBLE_FIELD(attn, yarn_factor, 0.0, 1e6),
    SUB_INT_FIELD(attn, yarn_original_seq, 0, MAX_SEQ),
    SUB_DOUBLE_FIELD(attn, yarn_beta_fast, 0.0, 1e6),
    SUB_DOUBLE_FIELD(attn, yarn_beta_slow, 0.0, 1e6),
    SUB_DOUBLE_FIELD(attn, yarn_mscale, 0.0, 1e6),
    SUB_DOUBLE_FIELD(attn, yarn_mscale_all_dim, 0.0, 1e6),
    {.path = "attn.yarn_bounds", .type = MP_FT_ENUM, .offset = offsetof(mp_model, attn.yarn_bounds),
     .name_of = yarn_bounds_name_i, .n_names = MP_YARN_BOUNDS_COUNT},
};



const mp_field *mp_model_field_table(size_t *n)
{
    *n = sizeof model_fields / sizeof model_fields[0];
    return model_fields;
}

double mp_model_default_norm_eps(mp_arch a)
{
    switch (a) {
    case MP_ARCH_BERT:
        return 1e-12; /* Devlin et al.'s BERT; HF BertConfig.layer_norm_eps */
    case MP_ARCH_T5:
        return 1e-6; /* HF T5Config.layer_norm_epsilon, the released T5s' */
    default:
        return 1e-5; /* GPT-2's layer_norm_epsilon, Llama 2/3's rms_norm_eps */
    }
}

double mp_model_default_dropout(mp_arch a)
{
    /* GPT-2's, BERT's and T5's released configs and Megatron-Core's
     * TransformerConfig (hidden_dropout, attention_dropout 0.1); LLaMA-style
     * models train without (Touvron et al. 2023; HF's attention_dropout 0) */
    return a == MP_ARCH_LLAMA ? 0.0 : 0.1;
}

double mp_model_hidden_dropout(const mp_model *m)
{
    return m->dropout_set ? m->hidden_dropout : mp_model_default_dropout(m->arch);
}

double mp_model_attention_dropout(const mp_model *m)
{
    return m->dropout_set ? m->attention_dropout : mp_model_default_dropout(m->arch);
}

void mp_model_arch_defaults(mp_model *m, mp_arch arch)
{
    m->arch = arch;
    m->norm_eps = mp_model_default_norm_eps(arch);
    m->hidden_dropout = m->attention_dropout = mp_model_default_dropout(arch);
    m->dropout_set = true;
    switch (arch) {
    case MP_ARCH_LLAMA:
        m->activation = MP_ACT_SWIGLU;
        m->norm = MP_NORM_RMSNORM;
        m->position = MP_POS_ROPE;
        m->tied_embeddings = false;
        break;
    case MP_ARCH_T5:
        /* T5 1.0: ReLU, scale-only ("RMS") layer norm, relative position
         * buckets, embeddings shared with the output layer */
        m->activation = MP_ACT_RELU;
        m->norm = MP_NORM_RMSNORM;
        m->position = MP_POS_RELATIVE;
        m->tied_embeddings = true;
        break;
    default:
        /* GPT-2/GPT-3's gelu_new is the tanh form; BERT's "gelu" (BertConfig,
         * Megatron-Core's F.gelu) is the exact one */
        m->activation = arch == MP_ARCH_BERT ? MP_ACT_GELU_ERF : MP_ACT_GELU;
        m->norm = MP_NORM_LAYERNORM;
        m->position = MP_POS_LEARNED;
        m->tied_embeddings = true;
        break;
    }
}

#define FAIL(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

mp_status mp_model_finish(mp_model *m, mp_error *err)
{
    size_t nf;
    const mp_field *tab = mp_model_field_table(&nf);
    if (!memchr(m->name, '\0', sizeof m->name))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "name", "not terminated");
    if (!m->name[0])
        snprintf(m->name, sizeof m->name, "custom");
    if (m->arch != MP_ARCH_T5 && m->layers == 0)
        return FAIL("layers", "missing (required)");
    if (m->arch != MP_ARCH_T5 && m->seq == 0)
        return FAIL("seq", "missing (required)");
    if (m->norm_eps == 0.0) /* a model built in code: its architecture's */
        m->norm_eps = mp_model_default_norm_eps(m->arch);
    if (!m->dropout_set) { /* likewise */
        m->hidden_dropout = m->attention_dropout = mp_model_default_dropout(m->arch);
        m->dropout_set = true;
    }
    /* t5 may leave layers and seq at 0 (derived below from its two sides) */
    mp_model ranged = *m;
    if (m->arch == MP_ARCH_T5) {
        if (!ranged.layers)
            ranged.layers = 1;
        if (!ranged.seq)
            ranged.seq = 1;
    }
    mp_status st = mp_fields_check(tab, nf, &ranged, "", err);
    if (st != MP_OK)
        return st;

    if (m->arch == MP_ARCH_T5) {
        if (!m->encoder_layers && !m->decoder_layers && m->layers > 0) {
            if (m->layers % 2)
                return FAIL("layers",
                           "t5 needs encoder_layers and decoder_layers (odd total %lld)",
                           (long long)m->layers);
            m->encoder_layers = m->decoder_layers = m->layers / 2;
        }
        if (m->encoder_layers < 1)
            return FAIL("encoder_layers", "t5 needs at least 1 encoder layer (got %lld)",
                       (long long)m->encoder_layers);
        if (m->decoder_layers < 1)
            return FAIL("decoder_layers", "t5 needs at least 1 decoder layer (got %lld)",
                       (long long)m->decoder_layers);
        int64_t total = m->encoder_layers + m->decoder_layers;
        if (m->layers && m->layers != total)
            return FAIL("layers", "must equal encoder_layers + decoder_layers (%lld), got %lld",
                       (long long)total, (long long)m->layers);
        m->layers = total;
        if (!m->encoder_seq)
            m->encoder_seq = m->seq;
        if (m->seq && m->seq != m->encoder_seq)
            return FAIL("seq", "t5: seq is the encoder_seq (%lld), got %lld",
                       (long long)m->encoder_seq, (long long)m->seq);
        m->seq = m->encoder_seq;
        if (!m->decoder_seq)
            m->decoder_seq = m->encoder_seq;
        if (m->seq < 1)
            return FAIL("encoder_seq", "missing: t5 needs encoder_seq (or seq)");
    } else {
        if (m->encoder_layers || m->decoder_layers)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0,
                                m->encoder_layers ? "encoder_layers" : "decoder_layers",
                                "only for arch t5 (this model is %s)", mp_arch_name(m->arch));
        if (m->encoder_seq || m->decoder_seq)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0,
                                m->encoder_seq ? "encoder_seq" : "decoder_seq",
                                "only for arch t5 (this model is %s)", mp_arch_name(m->arch));
        if (m->layers < 1)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "layers", "missing or zero");
        if (m->seq < 1)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "seq", "missing or zero");
    }
    if (m->layers > MP_MAX_LAYERS)
        return FAIL("layers", "too large: at most %d (got %lld)", MP_MAX_LAYERS,
                   (long long)m->layers);

    bool derived_head_dim = !m->head_dim;
    if (!m->kv_heads)
        m->kv_heads = m->heads;
    if (m->kv_heads > m->heads)
        return FAIL("kv_heads", "more than heads (%lld): got %lld", (long long)m->heads,
                   (long long)m->kv_heads);
    if (m->heads % m->kv_heads)
        return FAIL("kv_heads", "must divide heads (%lld): got %lld", (long long)m->heads,
                   (long long)m->kv_heads);
    bool mla_head_dim = !m->head_dim && mp_model_is_mla(m);
    if (mla_head_dim)
        m->head_dim = m->mla.qk_nope_head_dim + m->mla.qk_rope_head_dim;
    if (!m->head_dim) {
        if (m->hidden % m->heads)
            return FAIL("heads", "must divide hidden (%lld), or give head_dim: got %lld",
                       (long long)m->hidden, (long long)m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    /* rotary embeddings turn pairs of a head's dimensions (Megatron-Core's and
     * HF's rotate_half cut the head in two halves): an odd one cannot run */
    if (m->position == MP_POS_ROPE && !mp_model_is_mla(m) && m->head_dim % 2)
        return FAIL(derived_head_dim ? "heads" : "head_dim",
                    "rotary embeddings turn pairs of dimensions: head_dim must be even (got %lld)",
                    (long long)m->head_dim);
    if (m->position == MP_POS_ROPE && mp_model_is_mla(m) && m->mla.qk_rope_head_dim % 2)
        return FAIL("mla.qk_rope_head_dim",
                    "rotary embeddings turn pairs of dimensions: it must be even (got %lld)",
                    (long long)m->mla.qk_rope_head_dim);
    if (m->heads * m->head_dim > MAX_HIDDEN * 4LL)
        return FAIL("head_dim", "too large: heads*head_dim must be at most %lld (got %lld)",
                   MAX_HIDDEN * 4LL, (long long)(m->heads * m->head_dim));
    if (!m->ffn_hidden) {
        if (mp_activation_is_gated(m->activation)) {
            /* LLaMA's rule: 2/3 of 4h, rounded up to a multiple of 256 (a
             * gated MLP's three matrices as many weights as two of 4h) */
            int64_t f = 8 * m->hidden / 3;
            m->ffn_hidden = (f + 255) / 256 * 256;
        } else {
            m->ffn_hidden = 4 * m->hidden;
        }
        if (m->ffn_hidden > MAX_FFN)
            return FAIL("ffn_hidden", "too large: at most %d (got %lld)", MAX_FFN,
                       (long long)m->ffn_hidden);
    }
    /* Derived sizes meet the limits a file that states them must meet: a
     * model megaplan writes (in a plan, with every field explicit) must read
     * back, so "hidden: 99999, heads: 1" is refused here, not by simulate. */
    if ((st = mp_fields_check(tab, nf, m, "", err)) != MP_OK) {
        if (derived_head_dim && !strcmp(err->field, "head_dim")) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            /* latent attention's head is its two query parts, not hidden/heads */
            if (mla_head_dim)
                return FAIL("mla.qk_nope_head_dim",
                            "qk_nope_head_dim + qk_rope_head_dim = %lld + %lld gives head_dim %.160s",
                            (long long)m->mla.qk_nope_head_dim,
                            (long long)m->mla.qk_rope_head_dim, msg);
            return FAIL("heads", "hidden/heads = %lld/%lld gives head_dim %.160s",
                        (long long)m->hidden, (long long)m->heads, msg);
        }
        return st;
    }
    st = mp_model_finish_moe(m, err);
    if (st != MP_OK)
        return st;
    st = mp_model_finish_attn(m, err);
    if (st != MP_OK)
        return st;
    /* a coarse parameter count, only to refuse the absurd */
    double h = (double)m->hidden, attn = 2.0 * h * (double)(m->heads + m->kv_heads) *
                                         (double)m->head_dim;
    double mlp = (mp_activation_is_gated(m->activation) ? 3.0 : 2.0) * h * (double)m->ffn_hidden;
    mlp += 3.0 * h * (double)(m->moe.experts * m->moe.expert_ffn +
                              m->moe.shared_experts * m->moe.shared_ffn);
    double params = (double)m->layers * (attn * 2 + mlp) + 2.0 * (double)m->vocab * h;
    if (params > MAX_PARAMS)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "hidden",
                            "absurd model: about %.3g parameters (limit %.0e)", params,
                            MAX_PARAMS);
    return MP_OK;
}
