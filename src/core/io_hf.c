/* io_hf.c — a HuggingFace config.json as a model. model_type picks the
 * family (gpt2, llama/mistral, bert/roberta, t5/mt5); without it the key set
 * decides. Keys HuggingFace uses for other things are ignored; the ones read
 * must have the right type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "core/fields.h"
#include "core/io.h"
#include "core/tables.h"
#include "core/units.h"

typedef struct hf_ctx {
    const char *text;
    size_t len;
    const char *origin;
    const cJSON *root;
} hf_ctx;

/* cJSON keeps no positions: find where "key" is written to point the user
 * at the line (first occurrence followed by a colon). */
static void key_position(const hf_ctx *cx, const char *key, int *line, int *col)
{
    *line = 0;
    *col = 0;
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen + 2 <= cx->len; i++) {
        if (cx->text[i] != '"' || memcmp(cx->text + i + 1, key, klen) || cx->text[i + klen + 1] != '"')
            continue;
        size_t j = i + klen + 2;
        while (j < cx->len && (cx->text[j] == ' ' || cx->text[j] == '\t' || cx->text[j] == '\n' ||
                               cx->text[j] == '\r'))
            j++;
        if (j >= cx->len || cx->text[j] != ':')
            continue;
        int l = 1, c = 1;
        for (size_t k = 0; k < i; k++) {
            if (cx->text[k] == '\n') {
                l++;
                c = 1;
            } else {
                c++;
            }
        }
        *line = l;
        *col = c;
        return;
    }
}

static mp_status hf_fail(const hf_ctx *cx, const char *key, mp_error *err, const char *msg)
{
    int line, col;
    key_position(cx, key, &line, &col);
    return mp_error_set(err, MP_EINPUT, cx->origin, line, col, key, "%s", msg);
}

/* Reads an integer key; absent leaves *out and returns MP_OK unless required. */
static mp_status hf_int(const hf_ctx *cx, const char *key, bool required, int64_t lo, int64_t hi,
                        int64_t *out, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required)
            return mp_error_set(err, MP_EINPUT, cx->origin, 1, 1, key, "missing (required)");
        return MP_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return hf_fail(cx, key, err, "expected an integer");
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        char msg[128];
        snprintf(msg, sizeof msg, "out of range: must be in [%lld, %lld]", (long long)lo,
                 (long long)hi);
        return hf_fail(cx, key, err, msg);
    }
    *out = (int64_t)v->valuedouble;
    return MP_OK;
}

static mp_status hf_bool(const hf_ctx *cx, const char *key, bool *out, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    if (!v || cJSON_IsNull(v))
        return MP_OK;
    if (!cJSON_IsBool(v))
        return hf_fail(cx, key, err, "expected true or false");
    *out = cJSON_IsTrue(v);
    return MP_OK;
}

static mp_status hf_string(const hf_ctx *cx, const char *key, const char **out, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    if (!v || cJSON_IsNull(v))
        return MP_OK;
    if (!cJSON_IsString(v))
        return hf_fail(cx, key, err, "expected a string");
    *out = v->valuestring;
    return MP_OK;
}

#define TRY(x)                                                                              \
    do {                                                                                    \
        mp_status st_ = (x);                                                                \
        if (st_ != MP_OK)                                                                   \
            return st_;                                                                     \
    } while (0)

#define BIG_DIM (1 << 23)

static mp_status read_gpt2(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    mp_model_arch_defaults(m, MP_ARCH_GPT);
    TRY(hf_int(cx, "n_layer", true, 1, MP_MAX_LAYERS, &m->layers, err));
    TRY(hf_int(cx, "n_embd", true, 1, BIG_DIM, &m->hidden, err));
    TRY(hf_int(cx, "n_head", true, 1, BIG_DIM, &m->heads, err));
    m->seq = 1024;
    TRY(hf_int(cx, "n_ctx", false, 1, BIG_DIM, &m->seq, err));
    TRY(hf_int(cx, "n_positions", false, 1, BIG_DIM, &m->seq, err));
    TRY(hf_int(cx, "vocab_size", true, 1, BIG_DIM, &m->vocab, err));
    TRY(hf_int(cx, "n_inner", false, 1, BIG_DIM, &m->ffn_hidden, err)); /* null: 4h */
    TRY(hf_bool(cx, "tie_word_embeddings", &m->tied_embeddings, err));
    return MP_OK;
}

/* Mistral's sliding_window (every block windowed); Qwen2's, which applies
 * only with use_sliding_window and then to some layers, is refused rather
 * than guessed. Biases that LLaMA's attention_bias / mlp_bias add are not
 * modelled for this family: refused, not dropped. */
static mp_status read_llama_window(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    bool use = true, bias = false;
    TRY(hf_bool(cx, "use_sliding_window", &use, err));
    if (use && cJSON_GetObjectItemCaseSensitive(cx->root, "use_sliding_window"))
        return hf_fail(cx, "use_sliding_window", err,
                       "Qwen2's per-layer sliding window is not modelled (only false)");
    if (use)
        TRY(hf_int(cx, "sliding_window", false, 1, BIG_DIM, &m->attn.window, err));
    if (m->attn.window >= m->seq)
        m->attn.window = 0; /* a window as long as the context is no window */
    TRY(hf_bool(cx, "attention_bias", &bias, err));
    if (bias)
        return hf_fail(cx, "attention_bias", err,
                       "attention biases are not modelled for this family (only false)");
    TRY(hf_bool(cx, "mlp_bias", &bias, err));
    if (bias)
        return hf_fail(cx, "mlp_bias", err,
                       "MLP biases are not modelled for this family (only false)");
    return MP_OK;
}

/* A number inside the object o (rope_scaling), or a top-level key when o is
 * the root; absent leaves *out. */
static mp_status hf_number_in(const hf_ctx *cx, const cJSON *o, const char *key, double lo,
                              double hi, double *out, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v))
        return MP_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        char msg[128];
        snprintf(msg, sizeof msg, "expected a number in [%.10g, %.10g]", lo, hi);
        return hf_fail(cx, key, err, msg);
    }
    *out = v->valuedouble;
    return MP_OK;
}

/* rope_theta in o: a base above 1 (attn.rope_theta), at most 1e12; absent
 * leaves *out. One range in the message, the one accepted. */
static mp_status hf_rope_theta(const hf_ctx *cx, const cJSON *o, double *out, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    if (!v || cJSON_IsNull(v))
        return MP_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 1.0) ||
        v->valuedouble > 1e12)
        return hf_fail(cx, "rope_theta", err, "expected a rotary base in (1, 1e+12]");
    *out = v->valuedouble;
    return MP_OK;
}

/* Every key of a YaRN rope_scaling object is one read_rope reads; another
 * (attention_factor, DeepSeek's mscale keys elsewhere, or one HF added
 * later) may change the angles, so it is refused, named. */
static mp_status yarn_keys_known(const hf_ctx *cx, const cJSON *rope, bool deepseek,
                                 mp_error *err)
{
    static const char *const known[] = {"rope_type", "type", "rope_theta", "factor",
                                        "original_max_position_embeddings", "beta_fast",
                                        "beta_slow", "truncate"};
    const cJSON *v;
    cJSON_ArrayForEach(v, rope) {
        bool ok = deepseek && (!strcmp(v->string, "mscale") ||
                               !strcmp(v->string, "mscale_all_dim"));
        for (size_t i = 0; !ok && i < sizeof known / sizeof *known; i++)
            ok = !strcmp(v->string, known[i]);
        if (ok || cJSON_IsNull(v))
            continue;
        if (!strcmp(v->string, "attention_factor") || !strcmp(v->string, "mscale") ||
            !strcmp(v->string, "mscale_all_dim"))
            return hf_fail(cx, v->string, err,
                           deepseek ? "YaRN's attention factor is modelled as HF's default "
                                      "or DeepSeek's mscale ratio only"
                                    : "YaRN's attention factor is modelled as HF's default "
                                      "only (0.1 ln factor + 1); mscale is DeepSeek's");
        return hf_fail(cx, v->string, err,
                       "a rope_scaling key megaplan does not know (it may change the angles)");
    }
    return MP_OK;
}

/* The rotary angles: rope_theta (attn.rope_theta) and rope_scaling (or
 * transformers 5's rope_parameters, which may carry rope_theta too). Plain
 * ("default") angles and YaRN as HF's _compute_yarn_parameters computes it
 * (attn.rope_yarn and its factor, original context, betas and truncate) are
 * read; with `deepseek` also DeepSeek's mscale and mscale_all_dim
 * (attn.yarn_mscale, attn.yarn_mscale_all_dim: they rescale cos, sin and
 * its latent attention's softmax). Another scheme (linear, dynamic, llama3,
 * longrope), a YaRN key that changes the angles beyond those
 * (attention_factor; mscale outside DeepSeek) or a YaRN key not known at all
 * is refused rather than dropped. */
/* transformers turns int(head_dim * partial_rotary_factor) dimensions of each
 * head, whatever the rope_type (_compute_default_rope_parameters reads it from
 * the config, or from rope_parameters); megaplan turns them all */
static mp_status partial_rotary_is_one(const hf_ctx *cx, const cJSON *obj, mp_error *err)
{
    const cJSON *prf = cJSON_GetObjectItemCaseSensitive(obj, "partial_rotary_factor");
    if (prf && !cJSON_IsNull(prf) && !(cJSON_IsNumber(prf) && prf->valuedouble == 1.0))
        return hf_fail(cx, "partial_rotary_factor", err,
                       "only 1 (every head dim turned) is modelled");
    return MP_OK;
}

static mp_status read_rope(const hf_ctx *cx, mp_model *m, bool deepseek, mp_error *err)
{
    TRY(hf_rope_theta(cx, cx->root, &m->attn.rope_theta, err));
    TRY(partial_rotary_is_one(cx, cx->root, err));
    const char *key = "rope_scaling";
    const cJSON *rope = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    if (!rope || cJSON_IsNull(rope)) {
        key = "rope_parameters";
        rope = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    }
    if (!rope || cJSON_IsNull(rope))
        return MP_OK;
    if (!cJSON_IsObject(rope))
        return hf_fail(cx, key, err, "expected an object");
    TRY(hf_rope_theta(cx, rope, &m->attn.rope_theta, err));
    TRY(partial_rotary_is_one(cx, rope, err));
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(rope, "rope_type");
    if (!rt || cJSON_IsNull(rt))
        rt = cJSON_GetObjectItemCaseSensitive(rope, "type"); /* the older name */
    if (rt && !cJSON_IsString(rt))
        return hf_fail(cx, key, err, "rope_type: expected a string");
    if (!rt || !strcmp(rt->valuestring, "default")) {
        /* HF versions disagree on whether DeepSeek's softmax factor applies
         * without YaRN (older ones: whenever rope_scaling is there) */
        static const char *const ds_keys[] = {"mscale", "mscale_all_dim"};
        for (size_t i = 0; deepseek && i < 2; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(rope, ds_keys[i]);
            if (v && !cJSON_IsNull(v))
                return hf_fail(cx, ds_keys[i], err, "modelled with rope_type yarn only");
        }
        return MP_OK;
    }
    if (strcmp(rt->valuestring, "yarn"))
        return hf_fail(cx, key, err,
                       "only rope_type default and yarn are modelled (their angles change "
                       "what a run computes)");
    TRY(yarn_keys_known(cx, rope, deepseek, err));
    struct mp_attn *a = &m->attn;
    a->rope_yarn = true;
    if (!cJSON_GetObjectItemCaseSensitive(rope, "factor"))
        return hf_fail(cx, key, err, "yarn needs factor");
    TRY(hf_number_in(cx, rope, "factor", 1.0, 1e6, &a->yarn_factor, err));
    double orig = (double)m->seq; /* HF: max_position_embeddings when absent */
    TRY(hf_number_in(cx, rope, "original_max_position_embeddings", 1.0, (double)BIG_DIM, &orig,
                     err));
    if (orig != floor(orig))
        return hf_fail(cx, "original_max_position_embeddings", err, "expected an integer");
    a->yarn_original_seq = (int64_t)orig;
    TRY(hf_number_in(cx, rope, "beta_fast", 1e-9, 1e6, &a->yarn_beta_fast, err));
    TRY(hf_number_in(cx, rope, "beta_slow", 1e-9, 1e6, &a->yarn_beta_slow, err));
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(rope, "truncate");
    if (tr && !cJSON_IsNull(tr)) {
        if (!cJSON_IsBool(tr))
            return hf_fail(cx, "truncate", err, "expected true or false");
        a->yarn_bounds = cJSON_IsTrue(tr) ? MP_YARN_ROUNDED : MP_YARN_UNROUNDED;
    }
    if (deepseek) { /* 0 (HF's "falsy") is absent, as model.h's 0 */
        TRY(hf_number_in(cx, rope, "mscale", 0.0, 1e6, &a->yarn_mscale, err));
        TRY(hf_number_in(cx, rope, "mscale_all_dim", 0.0, 1e6, &a->yarn_mscale_all_dim, err));
        if (a->yarn_mscale != 0.0 && a->yarn_mscale_all_dim == 0.0)
            return hf_fail(cx, "mscale", err,
                           "without mscale_all_dim HF ignores it: give both or neither");
    }
    return MP_OK;
}

/* LLaMA's keys without the rotary angles' scaling (read_llama adds it). */
static mp_status read_llama_keys(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    mp_model_arch_defaults(m, MP_ARCH_LLAMA);
    TRY(hf_int(cx, "num_hidden_layers", true, 1, MP_MAX_LAYERS, &m->layers, err));
    TRY(hf_int(cx, "hidden_size", true, 1, BIG_DIM, &m->hidden, err));
    TRY(hf_int(cx, "num_attention_heads", true, 1, BIG_DIM, &m->heads, err));
    TRY(hf_int(cx, "num_key_value_heads", false, 1, BIG_DIM, &m->kv_heads, err));
    TRY(hf_int(cx, "head_dim", false, 1, BIG_DIM, &m->head_dim, err));
    TRY(hf_int(cx, "intermediate_size", true, 1, BIG_DIM, &m->ffn_hidden, err));
    TRY(hf_int(cx, "vocab_size", true, 1, BIG_DIM, &m->vocab, err));
    m->seq = 2048;
    TRY(hf_int(cx, "max_position_embeddings", false, 1, BIG_DIM, &m->seq, err));
    TRY(hf_bool(cx, "tie_word_embeddings", &m->tied_embeddings, err));
    return read_llama_window(cx, m, err);
}

static mp_status read_llama(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    TRY(read_llama_keys(cx, m, err));
    return read_rope(cx, m, false, err);
}

static mp_status read_bert(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    mp_model_arch_defaults(m, MP_ARCH_BERT);
    m->activation = MP_ACT_GELU_ERF; /* BertConfig's hidden_act "gelu" (check_activation) */
    TRY(hf_int(cx, "num_hidden_layers", true, 1, MP_MAX_LAYERS, &m->layers, err));
    TRY(hf_int(cx, "hidden_size", true, 1, BIG_DIM, &m->hidden, err));
    TRY(hf_int(cx, "num_attention_heads", true, 1, BIG_DIM, &m->heads, err));
    TRY(hf_int(cx, "intermediate_size", false, 1, BIG_DIM, &m->ffn_hidden, err));
    TRY(hf_int(cx, "vocab_size", true, 1, BIG_DIM, &m->vocab, err));
    m->seq = 512;
    TRY(hf_int(cx, "max_position_embeddings", false, 1, BIG_DIM, &m->seq, err));
    TRY(hf_bool(cx, "tie_word_embeddings", &m->tied_embeddings, err));
    return MP_OK;
}

/* The elementwise function an activation name (transformers' ACT2FN key)
 * computes: GELU's tanh form ("gelu_new", "gelu_pytorch_tanh"), the exact
 * erf GELU ("gelu": torch's nn.GELU()), SiLU ("silu" and its alias
 * "swish"), ReLU; anything else (gelu_fast, quick_gelu, gelu_10, ...) is
 * another function, -1. */
typedef enum { HF_FN_GELU_TANH, HF_FN_GELU_ERF, HF_FN_SILU, HF_FN_RELU } hf_fn;

static int hf_fn_of(const char *name)
{
    static const struct {
        const char *name;
        hf_fn fn;
    } fns[] = {{"gelu_new", HF_FN_GELU_TANH}, {"gelu_pytorch_tanh", HF_FN_GELU_TANH},
               {"gelu", HF_FN_GELU_ERF},      {"silu", HF_FN_SILU},
               {"swish", HF_FN_SILU},         {"relu", HF_FN_RELU}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!strcmp(name, fns[i].name))
            return (int)fns[i].fn;
    return -1;
}

/* The model activation of an MLP that is gated or not around fn; -1 where
 * megaplan has none (a plain SiLU MLP, ReGLU). */
static int hf_activation_of(hf_fn fn, bool gated)
{
    switch (fn) {
    case HF_FN_GELU_TANH:
        return gated ? MP_ACT_GEGLU : MP_ACT_GELU;
    case HF_FN_GELU_ERF:
        return gated ? MP_ACT_GEGLU_ERF : MP_ACT_GELU_ERF;
    case HF_FN_SILU:
        return gated ? MP_ACT_SWIGLU : -1;
    default:
        return gated ? -1 : MP_ACT_RELU;
    }
}

/* T5's MLP (transformers' T5Config): feed_forward_proj "[gated-]ACT"
 * (default "relu") gives is_gated_act and dense_act_fn = ACT, except that
 * "gated-gelu" means dense_act_fn "gelu_new" (kept so for the T5 1.1 and
 * Flan-T5 checkpoints: GEGLU over GELU's tanh form). A saved config also
 * holds dense_act_fn and is_gated_act, which T5Config then sets as given
 * (its PretrainedConfig.__init__ runs last); either one that disagrees with
 * feed_forward_proj is refused at its line rather than one of them
 * silently chosen. */
static mp_status read_t5_activation(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    const char *proj = "relu", *dense = NULL;
    TRY(hf_string(cx, "feed_forward_proj", &proj, err));
    bool gated = !strncmp(proj, "gated-", 6);
    const char *fn_name = gated ? proj + 6 : proj;
    if (!strcmp(proj, "gated-gelu"))
        fn_name = "gelu_new";
    int fn = strchr(fn_name, '-') ? -1 : hf_fn_of(fn_name);
    int act = fn < 0 ? -1 : hf_activation_of((hf_fn)fn, gated);
    if (act < 0)
        return hf_fail(cx, "feed_forward_proj", err,
                       "expected relu, gelu, gelu_new, gated-gelu, gated-gelu_new or "
                       "gated-silu (another activation changes the math)");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(cx->root, "is_gated_act");
    bool said_gated = gated;
    TRY(hf_bool(cx, "is_gated_act", &said_gated, err));
    char msg[240];
    if (said_gated != gated) {
        snprintf(msg, sizeof msg, "%s contradicts feed_forward_proj \"%.60s\" (%s MLP)",
                 cJSON_IsTrue(g) ? "true" : "false", proj, gated ? "a gated" : "an ungated");
        return hf_fail(cx, "is_gated_act", err, msg);
    }
    TRY(hf_string(cx, "dense_act_fn", &dense, err));
    if (dense && hf_fn_of(dense) != fn) {
        snprintf(msg, sizeof msg,
                 "\"%.60s\" contradicts feed_forward_proj \"%.60s\", which transformers "
                 "reads as %s",
                 dense, proj, fn_name);
        return hf_fail(cx, "dense_act_fn", err, msg);
    }
    m->activation = (mp_activation)act;
    return MP_OK;
}

static mp_status read_t5(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    mp_model_arch_defaults(m, MP_ARCH_T5);
    TRY(hf_int(cx, "num_layers", true, 1, MP_MAX_LAYERS, &m->encoder_layers, err));
    m->decoder_layers = m->encoder_layers; /* HuggingFace: defaults to num_layers */
    TRY(hf_int(cx, "num_decoder_layers", false, 1, MP_MAX_LAYERS, &m->decoder_layers, err));
    TRY(hf_int(cx, "d_model", true, 1, BIG_DIM, &m->hidden, err));
    TRY(hf_int(cx, "num_heads", true, 1, BIG_DIM, &m->heads, err));
    TRY(hf_int(cx, "d_kv", true, 1, BIG_DIM, &m->head_dim, err));
    TRY(hf_int(cx, "d_ff", true, 1, BIG_DIM, &m->ffn_hidden, err));
    TRY(hf_int(cx, "vocab_size", true, 1, BIG_DIM, &m->vocab, err));
    /* relative positions have no table size; T5 pre-trained on 512 input
     * and 114 target tokens (decoder rounded to 128) */
    m->encoder_seq = 512;
    TRY(hf_int(cx, "n_positions", false, 1, BIG_DIM, &m->encoder_seq, err));
    m->decoder_seq = 128;
    m->layers = 0;
    m->seq = 0;
    TRY(read_t5_activation(cx, m, err));
    TRY(hf_bool(cx, "tie_word_embeddings", &m->tied_embeddings, err));
    return MP_OK;
}

/* Mixtral (model_type mixtral): LLaMA's keys, every block an MoE of
 * num_local_experts experts of intermediate_size, top num_experts_per_tok. */
static mp_status read_mixtral(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    TRY(read_llama(cx, m, err));
    TRY(hf_int(cx, "num_local_experts", true, 1, BIG_DIM, &m->moe.experts, err));
    TRY(hf_int(cx, "num_experts_per_tok", true, 1, BIG_DIM, &m->moe.top_k, err));
    m->moe.expert_ffn = m->ffn_hidden;
    m->moe.layer_freq = 1;
    return MP_OK;
}

/* Qwen2-MoE and Qwen3-MoE: num_experts of moe_intermediate_size, top
 * num_experts_per_tok; Qwen2-MoE adds one shared expert of
 * shared_expert_intermediate_size. Qwen3-MoE has none (transformers'
 * Qwen3MoeConfig has no such key and its sparse block no shared expert):
 * the key there was read as a shared expert, so it is refused unless 0.
 * Layer patterns other than "every block" (decoder_sparse_step > 1,
 * mlp_only_layers) are refused, not guessed. */
static mp_status read_qwen_moe(const hf_ctx *cx, mp_model *m, bool qwen3, mp_error *err)
{
    TRY(read_llama(cx, m, err));
    TRY(hf_int(cx, "num_experts", true, 1, BIG_DIM, &m->moe.experts, err));
    TRY(hf_int(cx, "num_experts_per_tok", true, 1, BIG_DIM, &m->moe.top_k, err));
    TRY(hf_int(cx, "moe_intermediate_size", true, 1, BIG_DIM, &m->moe.expert_ffn, err));
    TRY(hf_int(cx, "shared_expert_intermediate_size", false, 0, BIG_DIM, &m->moe.shared_ffn,
               err));
    if (m->moe.shared_ffn && qwen3)
        return hf_fail(cx, "shared_expert_intermediate_size", err,
                       "Qwen2-MoE's shared expert: transformers builds none for qwen3_moe, "
                       "so it would be costed and not run (give 0, or model_type qwen2_moe)");
    if (m->moe.shared_ffn)
        m->moe.shared_experts = 1;
    int64_t step = 1;
    TRY(hf_int(cx, "decoder_sparse_step", false, 1, MP_MAX_LAYERS, &step, err));
    if (step != 1)
        return hf_fail(cx, "decoder_sparse_step", err,
                       "only 1 (every block MoE) is supported");
    /* the chosen weights renormalised to one, as Megatron always does for
     * more than one expert; false (Qwen1.5-MoE's) is another model */
    bool norm = true;
    TRY(hf_bool(cx, "norm_topk_prob", &norm, err));
    if (!norm && m->moe.top_k > 1)
        return hf_fail(cx, "norm_topk_prob", err,
                       "only true (the chosen experts' weights renormalised) is supported");
    const cJSON *dense = cJSON_GetObjectItemCaseSensitive(cx->root, "mlp_only_layers");
    if (dense && !cJSON_IsNull(dense) && (!cJSON_IsArray(dense) || cJSON_GetArraySize(dense)))
        return hf_fail(cx, "mlp_only_layers", err, "only an empty list is supported");
    m->moe.layer_freq = 1;
    return MP_OK;
}

/* DeepSeek-V3: latent attention (q/kv LoRA ranks, nope/rope/v head sizes),
 * first_k_dense_replace dense blocks of intermediate_size, then every
 * moe_layer_freq-th block an MoE of n_routed_experts + n_shared_experts of
 * moe_intermediate_size, routed to num_experts_per_tok in topk_group of
 * n_group groups with a sigmoid (scoring_func) score, the weights renormalised
 * (norm_topk_prob) and scaled by routed_scaling_factor; num_nextn_predict_layers
 * multi-token-prediction modules. */
static mp_status read_deepseek(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    /* the rotary angles with DeepSeek's own YaRN (rope_scaling's mscale and
     * mscale_all_dim rescale cos, sin and the softmax; docs/formats.md) */
    TRY(read_llama_keys(cx, m, err));
    TRY(read_rope(cx, m, true, err));
    struct mp_moe *e = &m->moe;
    struct mp_mla *a = &m->mla;
    TRY(hf_int(cx, "n_routed_experts", true, 1, BIG_DIM, &e->experts, err));
    TRY(hf_int(cx, "num_experts_per_tok", true, 1, BIG_DIM, &e->top_k, err));
    TRY(hf_int(cx, "moe_intermediate_size", true, 1, BIG_DIM, &e->expert_ffn, err));
    TRY(hf_int(cx, "n_shared_experts", false, 0, BIG_DIM, &e->shared_experts, err));
    if (e->shared_experts)
        e->shared_ffn = e->expert_ffn;
    TRY(hf_int(cx, "first_k_dense_replace", false, 0, MP_MAX_LAYERS, &e->first_dense, err));
    e->layer_freq = 1;
    TRY(hf_int(cx, "moe_layer_freq", false, 1, MP_MAX_LAYERS, &e->layer_freq, err));
    TRY(hf_int(cx, "n_group", false, 1, BIG_DIM, &e->route_groups, err));
    TRY(hf_int(cx, "topk_group", false, 1, BIG_DIM, &e->route_group_top_k, err));
    if (e->route_groups == 1 && e->route_group_top_k <= 1)
        e->route_groups = e->route_group_top_k = 0; /* one group: no limit */
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(cx->root, "routed_scaling_factor");
    if (scale && !cJSON_IsNull(scale)) {
        if (!cJSON_IsNumber(scale) || !(scale->valuedouble > 0 && scale->valuedouble <= 1024))
            return hf_fail(cx, "routed_scaling_factor", err, "expected a number in (0, 1024]");
        e->route_scale = scale->valuedouble == 1.0 ? 0.0 : scale->valuedouble;
    }
    /* the chosen weights renormalised to one, as Megatron always does for
     * more than one expert: without it the model is another one */
    bool norm = true;
    TRY(hf_bool(cx, "norm_topk_prob", &norm, err));
    if (!norm && e->top_k > 1)
        return hf_fail(cx, "norm_topk_prob", err,
                       "only true (the chosen experts' weights renormalised) is supported");
    const char *score = NULL;
    TRY(hf_string(cx, "scoring_func", &score, err));
    if (score && !strcmp(score, "sigmoid"))
        e->router = MP_ROUTER_SIGMOID;
    else if (score && strcmp(score, "softmax"))
        return hf_fail(cx, "scoring_func", err, "expected softmax or sigmoid");
    TRY(hf_int(cx, "num_nextn_predict_layers", false, 0, 64, &m->mtp_layers, err));
    TRY(hf_int(cx, "q_lora_rank", false, 1, BIG_DIM, &a->q_lora_rank, err));
    TRY(hf_int(cx, "kv_lora_rank", true, 1, BIG_DIM, &a->kv_lora_rank, err));
    TRY(hf_int(cx, "qk_rope_head_dim", true, 1, BIG_DIM, &a->qk_rope_head_dim, err));
    TRY(hf_int(cx, "qk_nope_head_dim", true, 1, BIG_DIM, &a->qk_nope_head_dim, err));
    TRY(hf_int(cx, "v_head_dim", true, 1, BIG_DIM, &a->v_head_dim, err));
    /* head_dim left 0: mp_model_finish derives it from the two query parts
     * and names qk_nope_head_dim when their sum is too large (it said
     * "head_dim: too large", a key this config does not have, at no line) */
    m->head_dim = 0;
    m->kv_heads = m->heads; /* num_key_value_heads describes the latent, one per head */
    return MP_OK;
}

/* GPT-OSS (model_type gpt_oss): LLaMA's keys with biases in every linear
 * layer (attention_bias, and the experts always), num_local_experts experts
 * of intermediate_size, top num_experts_per_tok, a learned sink logit per
 * head, layer_types alternating sliding_window and full attention (HF's
 * default when absent: sliding first), and the experts' clamped SwiGLU
 * (swiglu_limit, swiglu_alpha 1.702). */
static mp_status read_gpt_oss(const hf_ctx *cx, mp_model *m, mp_error *err)
{
    mp_model_arch_defaults(m, MP_ARCH_LLAMA);
    TRY(hf_int(cx, "num_hidden_layers", true, 1, MP_MAX_LAYERS, &m->layers, err));
    TRY(hf_int(cx, "hidden_size", true, 1, BIG_DIM, &m->hidden, err));
    TRY(hf_int(cx, "num_attention_heads", true, 1, BIG_DIM, &m->heads, err));
    TRY(hf_int(cx, "num_key_value_heads", false, 1, BIG_DIM, &m->kv_heads, err));
    m->head_dim = 64; /* GptOssConfig's default */
    TRY(hf_int(cx, "head_dim", false, 1, BIG_DIM, &m->head_dim, err));
    TRY(hf_int(cx, "intermediate_size", true, 1, BIG_DIM, &m->ffn_hidden, err));
    TRY(hf_int(cx, "vocab_size", true, 1, BIG_DIM, &m->vocab, err));
    m->seq = 131072;
    TRY(hf_int(cx, "max_position_embeddings", false, 1, BIG_DIM, &m->seq, err));
    TRY(hf_bool(cx, "tie_word_embeddings", &m->tied_embeddings, err));
    struct mp_moe *e = &m->moe;
    TRY(hf_int(cx, "num_local_experts", true, 1, BIG_DIM, &e->experts, err));
    TRY(hf_int(cx, "num_experts_per_tok", true, 1, BIG_DIM, &e->top_k, err));
    int64_t k_old = e->top_k; /* the released files also carry the original key */
    TRY(hf_int(cx, "experts_per_token", false, 1, BIG_DIM, &k_old, err));
    if (k_old != e->top_k)
        return hf_fail(cx, "experts_per_token", err, "differs from num_experts_per_tok");
    e->expert_ffn = m->ffn_hidden;
    e->layer_freq = 1;
    bool bias = true;
    TRY(hf_bool(cx, "attention_bias", &bias, err));
    if (!bias)
        return hf_fail(cx, "attention_bias", err,
                       "only true: GPT-OSS's experts carry biases either way, and one switch "
                       "(linear_bias) covers both");
    m->linear_bias = true;
    m->attn.sinks = true;
    m->glu_limit = 7.0;
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(cx->root, "swiglu_limit");
    if (lim && !cJSON_IsNull(lim)) {
        if (!cJSON_IsNumber(lim) || !(lim->valuedouble > 0.0) || !isfinite(lim->valuedouble))
            return hf_fail(cx, "swiglu_limit", err, "expected a positive number");
        m->glu_limit = lim->valuedouble;
    }
    const cJSON *alpha = cJSON_GetObjectItemCaseSensitive(cx->root, "swiglu_alpha");
    if (alpha && !cJSON_IsNull(alpha) &&
        (!cJSON_IsNumber(alpha) || fabs(alpha->valuedouble - 1.702) > 1e-9))
        return hf_fail(cx, "swiglu_alpha", err, "only GPT-OSS's 1.702 is modelled");
    m->attn.window = 128;
    TRY(hf_int(cx, "sliding_window", false, 0, BIG_DIM, &m->attn.window, err));
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(cx->root, "sliding_window");
    if (sw && cJSON_IsNull(sw))
        m->attn.window = 0;
    m->attn.window_skip_freq = 2;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(cx->root, "layer_types");
    if (types && !cJSON_IsNull(types)) {
        /* a pattern Megatron's --window-attn-skip-freq states: full
         * attention exactly at blocks f, 2f, ... (1-based), or nowhere */
        if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != (int)m->layers)
            return hf_fail(cx, "layer_types", err,
                           "expected a list with one entry per layer (num_hidden_layers)");
        int64_t first_full = 0;
        for (int i = 0; i < (int)m->layers; i++) {
            const cJSON *t = cJSON_GetArrayItem(types, i);
            bool full = cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention");
            if (!full && !(cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention")))
                return hf_fail(cx, "layer_types", err,
                               "expected \"sliding_attention\" or \"full_attention\" entries");
            if (full && !first_full)
                first_full = i + 1;
        }
        m->attn.window_skip_freq = first_full;
        for (int i = 0; i < (int)m->layers; i++) {
            const cJSON *t = cJSON_GetArrayItem(types, i);
            bool full = !strcmp(t->valuestring, "full_attention");
            if (full != (first_full > 0 && (i + 1) % first_full == 0))
                return hf_fail(cx, "layer_types", err,
                               "only a periodic pattern (full attention every n-th layer, "
                               "Megatron's --window-attn-skip-freq n) is modelled");
        }
        if (first_full == 1)
            m->attn.window = m->attn.window_skip_freq = 0; /* every layer full */
    }
    if (!m->attn.window)
        m->attn.window_skip_freq = 0;
    return read_rope(cx, m, false, err);
}

/* GPT-OSS's keys in another family: a per-layer attention pattern (other
 * than all full), a clamped SwiGLU or sink-style attention would be dropped
 * silently there, so they are refused. */
static mp_status refuse_gpt_oss_keys(const hf_ctx *cx, mp_error *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, "swiglu_limit");
    if (v && !cJSON_IsNull(v))
        return hf_fail(cx, "swiglu_limit", err,
                       "GPT-OSS's clamped SwiGLU, not understood for this family (give "
                       "model_type gpt_oss)");
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(cx->root, "layer_types");
    if (!types || cJSON_IsNull(types))
        return MP_OK;
    const cJSON *t;
    bool all_full = cJSON_IsArray(types);
    cJSON_ArrayForEach(t, types)
        all_full = all_full && cJSON_IsString(t) && !strcmp(t->valuestring, "full_attention");
    if (!all_full)
        return hf_fail(cx, "layer_types", err,
                       "a per-layer attention pattern is understood for gpt_oss only (here "
                       "every entry must be \"full_attention\")");
    return MP_OK;
}

typedef enum {
    HF_GPT2, HF_LLAMA, HF_BERT, HF_T5, HF_MIXTRAL, HF_QWEN_MOE, HF_DEEPSEEK, HF_GPT_OSS,
    HF_UNKNOWN
} hf_family;

/* Keys that change a mixture of experts' or latent attention's math (its
 * shape, its layer pattern, how tokens are routed or weighted): each is read
 * by the families in read_by, and anywhere else it would be dropped
 * silently, so it is an error at its line unless its value says what the
 * family does anyway (neutral). A dense family refuses the first eleven with
 * any value but 0 (then they are not MoE keys at all). Keys that do not
 * change the math are accepted and ignored (docs/formats.md lists them):
 * output_router_logits, router_aux_loss_coef, aux_loss_alpha, seq_aux
 * (the load-balancing loss: a few scalars per step beside a GEMM-sized
 * layer, and a training objective, not the step's work), router_jitter_noise
 * (noise on the router's input while training: the same work), topk_method
 * (how DeepSeek balances its routing without the loss: the same top-k work)
 * and ep_size (a parallel setting, which megaplan chooses). */
#define HF_F(f) (1u << (f))
#define HF_MOE_FAMILIES (HF_F(HF_MIXTRAL) | HF_F(HF_QWEN_MOE) | HF_F(HF_DEEPSEEK) | HF_F(HF_GPT_OSS))
typedef enum { NEUTRAL_ZERO, NEUTRAL_ONE, NEUTRAL_TRUE, NEUTRAL_EMPTY, NEUTRAL_NONE } hf_neutral;
static const struct {
    const char *key;
    unsigned read_by;
    bool dense; /* refused in a dense family too */
    hf_neutral neutral;
} math_keys[] = {
    {"num_local_experts", HF_F(HF_MIXTRAL) | HF_F(HF_GPT_OSS), true, NEUTRAL_ZERO},
    {"num_experts", HF_F(HF_QWEN_MOE), true, NEUTRAL_ZERO},
    {"n_routed_experts", HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"num_experts_per_tok", HF_MOE_FAMILIES, true, NEUTRAL_ZERO},
    {"moe_intermediate_size", HF_F(HF_QWEN_MOE) | HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"n_shared_experts", HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"shared_expert_intermediate_size", HF_F(HF_QWEN_MOE), true, NEUTRAL_ZERO},
    {"kv_lora_rank", HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"q_lora_rank", HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"first_k_dense_replace", HF_F(HF_DEEPSEEK), true, NEUTRAL_ZERO},
    {"moe_layer_freq", HF_F(HF_DEEPSEEK), true, NEUTRAL_ONE},
    /* every block an MoE block, as Mixtral's and GPT-OSS's are */
    {"decoder_sparse_step", HF_F(HF_QWEN_MOE), false, NEUTRAL_ONE},
    {"mlp_only_layers", HF_F(HF_QWEN_MOE), false, NEUTRAL_EMPTY},
    /* Mixtral and GPT-OSS renormalise the chosen experts' weights always */
    {"norm_topk_prob", HF_F(HF_QWEN_MOE) | HF_F(HF_DEEPSEEK), false, NEUTRAL_TRUE},
    {"n_group", HF_F(HF_DEEPSEEK), false, NEUTRAL_ZERO},
    {"topk_group", HF_F(HF_DEEPSEEK), false, NEUTRAL_ZERO},
    {"routed_scaling_factor", HF_F(HF_DEEPSEEK), false, NEUTRAL_ONE},
    {"scoring_func", HF_F(HF_DEEPSEEK), false, NEUTRAL_NONE},
    {"num_nextn_predict_layers", HF_F(HF_DEEPSEEK), false, NEUTRAL_ZERO},
    /* no HF family here has token dropping; a model YAML's moe.capacity_factor does */
    {"capacity_factor", 0, false, NEUTRAL_ZERO},
    {"moe_capacity_factor", 0, false, NEUTRAL_ZERO},
    {"expert_capacity", 0, false, NEUTRAL_ZERO},
};

/* Whether value v of a key says what a family that does not read it does. */
static bool hf_neutral_value(const cJSON *v, hf_neutral n)
{
    if (!v || cJSON_IsNull(v))
        return true;
    switch (n) {
    case NEUTRAL_ZERO: return cJSON_IsNumber(v) && v->valuedouble == 0;
    case NEUTRAL_ONE: return cJSON_IsNumber(v) && v->valuedouble == 1;
    case NEUTRAL_TRUE: return cJSON_IsTrue(v);
    case NEUTRAL_EMPTY: return cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0;
    default: return false;
    }
}

static mp_status refuse_math_keys(const hf_ctx *cx, hf_family fam, const char *model_type,
                                  mp_error *err)
{
    bool moe = (HF_MOE_FAMILIES >> fam) & 1u;
    for (size_t i = 0; i < sizeof math_keys / sizeof math_keys[0]; i++) {
        if ((math_keys[i].read_by >> fam) & 1u)
            continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, math_keys[i].key);
        if (moe ? hf_neutral_value(v, math_keys[i].neutral)
                : (!math_keys[i].dense || hf_neutral_value(v, NEUTRAL_ZERO)))
            continue;
        char msg[240];
        if (!moe)
            snprintf(msg, sizeof msg,
                     "a mixture-of-experts / latent-attention key, not understood for %s (give "
                     "model_type mixtral, qwen2_moe, qwen3_moe, deepseek_v3 or gpt_oss)",
                     model_type ? model_type : "a config without model_type");
        else if (!math_keys[i].read_by)
            snprintf(msg, sizeof msg,
                     "changes the math and is not understood for %s (no HF family here drops "
                     "tokens; a model YAML's moe.capacity_factor does)",
                     model_type ? model_type : "this family");
        else
            snprintf(msg, sizeof msg,
                     "changes the math and is not understood for %s: it would be dropped "
                     "(a model YAML says it: docs/formats.md)",
                     model_type ? model_type : "this family");
        return hf_fail(cx, math_keys[i].key, err, msg);
    }
    return MP_OK;
}

/* The activation a config names (hidden_act: LLaMA, Mistral, Qwen, Mixtral,
 * DeepSeek, GPT-OSS, BERT; activation_function: GPT-2; hidden_activation:
 * Gemma's spelling) changes the math, so every such key the file has must
 * name a function megaplan computes for the family, read exactly
 * (hf_fn_of): "gelu" is the exact erf GELU (BERT's default and Megatron's
 * without --openai-gelu: activation gelu_erf), "gelu_new" and
 * "gelu_pytorch_tanh" its tanh form (GPT-2's default: activation gelu),
 * "silu"/"swish" the gate of the SwiGLU families, "relu". GPT-2 and BERT
 * take their GELU from the key (else transformers' default: GPT2Config's
 * gelu_new, BertConfig's gelu); the other families' activation is fixed
 * (T5's from feed_forward_proj, read_t5_activation), and a key must agree
 * with it. Two keys that disagree, or any other value, are refused at the
 * key's line, never dropped. */
static mp_status check_activation(const hf_ctx *cx, hf_family fam, const char *model_type,
                                  mp_model *m, mp_error *err)
{
    static const char *const keys[] = {"hidden_act", "activation_function", "hidden_activation"};
    bool gelu_family = fam == HF_GPT2 || fam == HF_BERT;
    bool gated = mp_activation_is_gated(m->activation);
    const char *first = NULL;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, keys[k]);
        if (!v || cJSON_IsNull(v))
            continue;
        if (!cJSON_IsString(v))
            return hf_fail(cx, keys[k], err, "expected a string (the activation's name)");
        int fn = hf_fn_of(v->valuestring);
        int act = fn < 0 ? -1 : hf_activation_of((hf_fn)fn, gated);
        char msg[240];
        if (gelu_family && !first && (act == MP_ACT_GELU || act == MP_ACT_GELU_ERF)) {
            m->activation = (mp_activation)act;
        } else if (act != (int)m->activation) {
            if (first)
                snprintf(msg, sizeof msg, "\"%.60s\" contradicts %s (%s)", v->valuestring,
                         first, mp_activation_name(m->activation));
            else
                snprintf(msg, sizeof msg,
                         "\"%.60s\" changes the math and is not what megaplan computes for "
                         "%s (%s)",
                         v->valuestring, model_type ? model_type : "this family",
                         gelu_family ? "GELU: gelu (erf), gelu_new or gelu_pytorch_tanh (tanh)"
                         : m->activation == MP_ACT_SWIGLU ? "SwiGLU: silu or swish"
                         : m->activation == MP_ACT_RELU   ? "ReLU: relu"
                                                          : mp_activation_name(m->activation));
            return hf_fail(cx, keys[k], err, msg);
        }
        first = keys[k];
    }
    return MP_OK;
}

/* The family's norm epsilon key and transformers' default for it when the
 * file has none (each configuration_*.py: LlamaConfig, MistralConfig,
 * Qwen2Config, Qwen3Config, Qwen2MoeConfig, Qwen3MoeConfig and
 * DeepseekV3Config rms_norm_eps 1e-6; MixtralConfig and GptOssConfig 1e-5;
 * GPT2Config layer_norm_epsilon 1e-5; BertConfig, RobertaConfig and
 * MegatronBertConfig layer_norm_eps 1e-12; T5Config and MT5Config
 * layer_norm_epsilon 1e-6). */
static const char *hf_norm_eps_key(hf_family fam, double *def)
{
    switch (fam) {
    case HF_GPT2:
        *def = 1e-5;
        return "layer_norm_epsilon";
    case HF_BERT:
        *def = 1e-12;
        return "layer_norm_eps";
    case HF_T5:
        *def = 1e-6;
        return "layer_norm_epsilon";
    case HF_MIXTRAL:
    case HF_GPT_OSS:
        *def = 1e-5;
        return "rms_norm_eps";
    default: /* llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, deepseek_v3 */
        *def = 1e-6;
        return "rms_norm_eps";
    }
}

/* norm_eps from the family's key, or transformers' default without one. */
static mp_status read_norm_eps(const hf_ctx *cx, hf_family fam, mp_model *m, mp_error *err)
{
    double def;
    const char *key = hf_norm_eps_key(fam, &def);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, key);
    m->norm_eps = def;
    if (!v || cJSON_IsNull(v))
        return MP_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble > 0.0) ||
        !(v->valuedouble < 1.0))
        return hf_fail(cx, key, err, "expected a number above 0 and below 1 (the norm's epsilon)");
    m->norm_eps = v->valuedouble;
    return MP_OK;
}

/* The dropout keys (docs/formats.md, "config.json"): which families'
 * transformers code applies each, and to what. GPT-2 (modeling_gpt2.py):
 * resid_pdrop on the attention's and the MLP's outputs, embd_pdrop on the
 * embedding's, attn_pdrop on the attention probabilities; BERT, RoBERTa and
 * Megatron-BERT: hidden_dropout_prob on the embedding's and both residual
 * branches' outputs, attention_probs_dropout_prob on the probabilities; T5
 * and mT5: dropout_rate everywhere (the embedding, the residual branches and
 * the attention probabilities, and also inside the MLP, between the
 * activation and wo, which Megatron's T5, the one megaplan costs, does not
 * have: not charged); the LLaMA-style families (llama, mistral, qwen2,
 * qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek_v3, gpt_oss):
 * attention_dropout on the probabilities only, no residual dropout. The
 * others name dropouts of families megaplan does not read (Falcon's and
 * BLOOM's hidden_dropout, OPT's and BART's dropout and activation_dropout):
 * 0 is no dropout anywhere, any other value is refused, as is a key of
 * another family here, rather than dropped. summary_first_dropout (GPT-2's
 * sequence-summary head) and classifier_dropout (BERT's classification
 * heads) belong to fine-tuning heads that pre-training does not run:
 * ignored. */
typedef enum { HF_DROP_HIDDEN = 1, HF_DROP_ATTN = 2, HF_DROP_BOTH = 3 } hf_drop;
#define HF_LLAMA_STYLE (HF_F(HF_LLAMA) | HF_MOE_FAMILIES)
static const struct {
    const char *key;
    unsigned read_by;
    hf_drop to;
} dropout_keys[] = {
    {"resid_pdrop", HF_F(HF_GPT2), HF_DROP_HIDDEN},
    {"embd_pdrop", HF_F(HF_GPT2), HF_DROP_HIDDEN},
    {"attn_pdrop", HF_F(HF_GPT2), HF_DROP_ATTN},
    {"hidden_dropout_prob", HF_F(HF_BERT), HF_DROP_HIDDEN},
    {"attention_probs_dropout_prob", HF_F(HF_BERT), HF_DROP_ATTN},
    {"dropout_rate", HF_F(HF_T5), HF_DROP_BOTH},
    {"attention_dropout", HF_LLAMA_STYLE, HF_DROP_ATTN},
    {"hidden_dropout", 0, HF_DROP_HIDDEN},
    {"dropout", 0, HF_DROP_HIDDEN},
    {"activation_dropout", 0, HF_DROP_HIDDEN},
    {"ffn_dropout", 0, HF_DROP_HIDDEN},
};

/* hidden_dropout and attention_dropout from the family's keys (their
 * transformers defaults, the architecture's, when absent). Two keys that
 * give the hidden dropout (GPT-2's resid_pdrop and embd_pdrop) must agree:
 * megaplan, as Megatron's --hidden-dropout, has one for both. */
static mp_status read_dropout(const hf_ctx *cx, hf_family fam, const char *model_type,
                              mp_model *m, mp_error *err)
{
    const char *hidden_from = NULL;
    char msg[240];
    for (size_t i = 0; i < sizeof dropout_keys / sizeof dropout_keys[0]; i++) {
        const char *key = dropout_keys[i].key;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(cx->root, key);
        if (!v || cJSON_IsNull(v))
            continue;
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || !(v->valuedouble >= 0.0) ||
            !(v->valuedouble < 1.0))
            return hf_fail(cx, key, err,
                           "expected a dropout probability (a number at least 0 and below 1)");
        double p = v->valuedouble;
        if (!((dropout_keys[i].read_by >> fam) & 1u)) {
            if (p == 0.0)
                continue;
            snprintf(msg, sizeof msg,
                     "a dropout that transformers does not apply for %s: it would be dropped "
                     "(give 0, or say it in a model YAML: hidden_dropout, attention_dropout)",
                     model_type ? model_type : "this family");
            return hf_fail(cx, key, err, msg);
        }
        if (dropout_keys[i].to & HF_DROP_HIDDEN) {
            if (hidden_from && p != m->hidden_dropout) {
                /* exact forms: %g said "0.1 differs from resid_pdrop (0.1)" for
                 * 0.1000000001 against 0.1 */
                char got[40], had[40];
                mp_format_double(p, got, sizeof got);
                mp_format_double(m->hidden_dropout, had, sizeof had);
                snprintf(msg, sizeof msg,
                         "%s differs from %s (%s): megaplan has one hidden dropout for the "
                         "residual branches and the embedding (Megatron's --hidden-dropout)",
                         got, hidden_from, had);
                return hf_fail(cx, key, err, msg);
            }
            m->hidden_dropout = p;
            hidden_from = key;
        }
        if (dropout_keys[i].to & HF_DROP_ATTN)
            m->attention_dropout = p;
    }
    m->dropout_set = true;
    return MP_OK;
}

/* The config.json key behind a model field, so a validation error (e.g.
 * "kv_heads must divide heads") names what the user wrote. */
static const char *hf_key_of(hf_family fam, const char *field)
{
    static const struct {
        hf_family fam;
        const char *field, *key;
    } map[] = {
        {HF_GPT2, "layers", "n_layer"},
        {HF_GPT2, "hidden", "n_embd"},
        {HF_GPT2, "heads", "n_head"},
        {HF_GPT2, "ffn_hidden", "n_inner"},
        {HF_GPT2, "vocab", "vocab_size"},
        {HF_GPT2, "seq", "n_positions"},
        {HF_LLAMA, "layers", "num_hidden_layers"},
        {HF_LLAMA, "hidden", "hidden_size"},
        {HF_LLAMA, "heads", "num_attention_heads"},
        {HF_LLAMA, "kv_heads", "num_key_value_heads"},
        {HF_LLAMA, "head_dim", "head_dim"},
        {HF_LLAMA, "ffn_hidden", "intermediate_size"},
        {HF_LLAMA, "vocab", "vocab_size"},
        {HF_LLAMA, "seq", "max_position_embeddings"},
        {HF_BERT, "layers", "num_hidden_layers"},
        {HF_BERT, "hidden", "hidden_size"},
        {HF_BERT, "heads", "num_attention_heads"},
        {HF_BERT, "ffn_hidden", "intermediate_size"},
        {HF_BERT, "vocab", "vocab_size"},
        {HF_BERT, "seq", "max_position_embeddings"},
        {HF_T5, "encoder_layers", "num_layers"},
        {HF_T5, "decoder_layers", "num_decoder_layers"},
        {HF_T5, "layers", "num_layers"},
        {HF_T5, "hidden", "d_model"},
        {HF_T5, "heads", "num_heads"},
        {HF_T5, "head_dim", "d_kv"},
        {HF_T5, "ffn_hidden", "d_ff"},
        {HF_T5, "vocab", "vocab_size"},
        {HF_T5, "encoder_seq", "n_positions"},
        {HF_MIXTRAL, "moe.experts", "num_local_experts"},
        {HF_QWEN_MOE, "moe.experts", "num_experts"},
        {HF_QWEN_MOE, "moe.expert_ffn", "moe_intermediate_size"},
        {HF_QWEN_MOE, "moe.shared_ffn", "shared_expert_intermediate_size"},
        {HF_DEEPSEEK, "moe.experts", "n_routed_experts"},
        {HF_DEEPSEEK, "moe.expert_ffn", "moe_intermediate_size"},
        {HF_DEEPSEEK, "moe.shared_experts", "n_shared_experts"},
        {HF_DEEPSEEK, "moe.first_dense", "first_k_dense_replace"},
        {HF_DEEPSEEK, "moe.layer_freq", "moe_layer_freq"},
        {HF_DEEPSEEK, "moe.route_groups", "n_group"},
        {HF_DEEPSEEK, "moe.route_group_top_k", "topk_group"},
        {HF_DEEPSEEK, "moe.route_scale", "routed_scaling_factor"},
        {HF_DEEPSEEK, "mtp_layers", "num_nextn_predict_layers"},
        {HF_DEEPSEEK, "mla.q_lora_rank", "q_lora_rank"},
        {HF_DEEPSEEK, "mla.kv_lora_rank", "kv_lora_rank"},
        {HF_DEEPSEEK, "mla.qk_rope_head_dim", "qk_rope_head_dim"},
        {HF_DEEPSEEK, "mla.qk_nope_head_dim", "qk_nope_head_dim"},
        {HF_DEEPSEEK, "mla.v_head_dim", "v_head_dim"},
        {HF_GPT_OSS, "moe.experts", "num_local_experts"},
        {HF_GPT_OSS, "attn.window", "sliding_window"},
        {HF_GPT_OSS, "attn.window_skip_freq", "layer_types"},
        {HF_GPT_OSS, "glu_limit", "swiglu_limit"},
        {HF_GPT_OSS, "attn.rope_yarn", "rope_scaling"},
        {HF_LLAMA, "attn.rope_theta", "rope_theta"},
        {HF_LLAMA, "attn.rope_yarn", "rope_scaling"},
        {HF_LLAMA, "attn.yarn_factor", "factor"},
        {HF_LLAMA, "attn.yarn_original_seq", "original_max_position_embeddings"},
        {HF_LLAMA, "attn.yarn_beta_fast", "beta_fast"},
        {HF_LLAMA, "attn.yarn_beta_slow", "beta_slow"},
        {HF_LLAMA, "attn.yarn_bounds", "truncate"},
        {HF_DEEPSEEK, "attn.yarn_mscale", "mscale"},
        {HF_DEEPSEEK, "attn.yarn_mscale_all_dim", "mscale_all_dim"},
        {HF_LLAMA, "attn.window", "sliding_window"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (map[i].fam == fam && !strcmp(map[i].field, field))
            return map[i].key;
    if (!strcmp(field, "norm_eps")) {
        double def;
        return hf_norm_eps_key(fam, &def);
    }
    if (!strcmp(field, "moe.top_k") && (fam == HF_MIXTRAL || fam == HF_QWEN_MOE ||
                                        fam == HF_DEEPSEEK || fam == HF_GPT_OSS))
        return "num_experts_per_tok";
    if (fam == HF_MIXTRAL || fam == HF_QWEN_MOE || fam == HF_DEEPSEEK || fam == HF_GPT_OSS)
        return hf_key_of(HF_LLAMA, field);
    return NULL;
}

static hf_family family_of(const char *model_type)
{
    static const struct {
        const char *name;
        hf_family f;
    } map[] = {
        {"gpt2", HF_GPT2},      {"llama", HF_LLAMA},   {"mistral", HF_LLAMA},
        {"qwen2", HF_LLAMA},    {"qwen3", HF_LLAMA},   {"bert", HF_BERT},
        {"roberta", HF_BERT},
        {"megatron-bert", HF_BERT}, {"t5", HF_T5},     {"mt5", HF_T5},
        {"mixtral", HF_MIXTRAL}, {"qwen2_moe", HF_QWEN_MOE}, {"qwen3_moe", HF_QWEN_MOE},
        {"deepseek_v3", HF_DEEPSEEK}, {"gpt_oss", HF_GPT_OSS},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(model_type, map[i].name))
            return map[i].f;
    return HF_UNKNOWN;
}

static void text_position(const char *text, const char *at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* One key of an object as written: the object's number, the key's bytes. */
typedef struct json_key {
    size_t obj;
    const char *p;
    size_t len;
} json_key;

/* by object, then name, then place in the file */
static int key_cmp(const void *pa, const void *pb)
{
    const json_key *a = pa, *b = pb;
    if (a->obj != b->obj)
        return a->obj < b->obj ? -1 : 1;
    int c = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);
    if (c)
        return c;
    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return a->p < b->p ? -1 : a->p > b->p;
}

/* What cJSON reads differently from Python's json, which transformers reads
 * the file with, so that megaplan would plan another model than the one the
 * checkpoint trains: a key given twice in one object (cJSON takes the first,
 * Python the last) and a \u0000 in a string (cJSON's C string ends there).
 * Both refused at their place. text[0, n) is JSON that cJSON parsed, so a
 * lexical walk suffices. */
static mp_status check_json_text(const char *text, size_t n, const char *origin, mp_error *err)
{
    enum { MAX_DEPTH = 1100 }; /* above cJSON's nesting limit (1000) */
    struct {
        bool obj, want_key;
        size_t id;
    } stack[MAX_DEPTH];
    int depth = 0;
    size_t n_obj = 0, n_keys = 0, cap = 0;
    json_key *keys = NULL;
    mp_status st = MP_OK;
    int line, col;
    for (size_t i = 0; i < n && st == MP_OK; i++) {
        char c = text[i];
        if (c == '{' || c == '[') {
            if (depth == MAX_DEPTH)
                break;
            stack[depth].obj = c == '{';
            stack[depth].want_key = c == '{';
            stack[depth].id = n_obj++;
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth > 0)
                depth--;
        } else if (c == ',') {
            if (depth > 0 && stack[depth - 1].obj)
                stack[depth - 1].want_key = true;
        } else if (c == '"') {
            size_t start = i + 1, j = start;
            for (; j < n && text[j] != '"'; j++) {
                if (text[j] != '\\')
                    continue;
                if (j + 5 < n && !memcmp(text + j + 1, "u0000", 5)) {
                    text_position(text, text + j, &line, &col);
                    st = mp_error_set(err, MP_EINPUT, origin, line, col, NULL,
                                      "JSON string with \\u0000 (a NUL character)");
                    break;
                }
                j++; /* the escaped character */
            }
            if (st != MP_OK)
                break;
            if (depth > 0 && stack[depth - 1].obj && stack[depth - 1].want_key) {
                stack[depth - 1].want_key = false;
                if (n_keys == cap) {
                    cap = cap ? 2 * cap : 64;
                    json_key *k = realloc(keys, cap * sizeof *keys);
                    if (!k) {
                        st = mp_error_set(err, MP_ENOMEM, origin, 0, 0, NULL, "out of memory");
                        break;
                    }
                    keys = k;
                }
                keys[n_keys++] = (json_key){stack[depth - 1].id, text + start, j - start};
            }
            i = j;
        }
    }
    if (st == MP_OK && n_keys > 1) {
        qsort(keys, n_keys, sizeof *keys, key_cmp);
        const json_key *second = NULL; /* the first repeat in the file */
        for (size_t k = 1; k < n_keys; k++) {
            const json_key *a = &keys[k - 1], *b = &keys[k];
            if (a->obj == b->obj && a->len == b->len && !memcmp(a->p, b->p, a->len) &&
                (!second || b->p < second->p))
                second = b;
        }
        if (second) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(second->len < 63 ? second->len : 63),
                     second->p);
            text_position(text, second->p - 1, &line, &col);
            st = mp_error_set(err, MP_EINPUT, origin, line, col, name,
                              "duplicate key (Python's json, which transformers reads it "
                              "with, keeps the last)");
        }
    }
    free(keys);
    return st;
}

mp_status mp_model_parse_hf_json(const char *text, size_t len, const char *origin,
                                 mp_model *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    /* JSON has no raw control characters (a string escapes them): a NUL or
     * another one is a binary or corrupt file, where cJSON would stop at the
     * NUL and read what came before it as the whole file */
    /* nor nesting past cJSON's limit, which it reports as a syntax error */
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        int line, col;
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            text_position(text, text + i, &line, &col);
            return mp_error_set(err, MP_EINPUT, origin, line, col, NULL,
                                "JSON syntax error: control character 0x%02x (a binary file?)", c);
        }
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > CJSON_NESTING_LIMIT) {
                text_position(text, text + i, &line, &col);
                return mp_error_set(err, MP_EINPUT, origin, line, col, NULL,
                                    "nested deeper than %d levels: refused", CJSON_NESTING_LIMIT);
            }
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        /* cJSON points at where it stopped: turn that into line:col */
        int line = 1, col = 1;
        const char *stop = end && end >= text && end <= text + len ? end : cJSON_GetErrorPtr();
        if (stop && stop >= text && stop <= text + len)
            for (const char *p = text; p < stop; p++) {
                if (*p == '\n') {
                    line++;
                    col = 1;
                } else {
                    col++;
                }
            }
        return mp_error_set(err, MP_EINPUT, origin, line, col, NULL,
                            "JSON syntax error (or truncated file)");
    }
    hf_ctx cx = {text, len, origin, root};
    mp_status st = check_json_text(text, end && end >= text && end <= text + len ? (size_t)(end - text) : len,
                                   origin, err);
    if (st != MP_OK)
        goto done;
    /* nothing but blanks may follow the object (a NUL ends the text too) */
    for (const char *p = end; p && p < text + len && *p; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            continue;
        int line = 1, col = 1;
        for (const char *q = text; q < p; q++) {
            if (*q == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        st = mp_error_set(err, MP_EINPUT, origin, line, col, NULL,
                          "JSON syntax error: text after the end of the object");
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        st = mp_error_set(err, MP_EINPUT, origin, 1, 1, NULL, "expected a JSON object");
        goto done;
    }
    const char *model_type = NULL;
    if ((st = hf_string(&cx, "model_type", &model_type, err)) != MP_OK)
        goto done;
    hf_family fam;
    if (model_type) {
        fam = family_of(model_type);
        if (fam == HF_UNKNOWN) {
            st = hf_fail(&cx, "model_type", err,
                         "unsupported (known: gpt2, llama, mistral, qwen2, qwen3, bert, roberta, "
                         "t5, mt5, "
                         "mixtral, qwen2_moe, qwen3_moe, deepseek_v3, gpt_oss)");
            goto done;
        }
    } else if (cJSON_GetObjectItemCaseSensitive(root, "num_local_experts") &&
               (cJSON_GetObjectItemCaseSensitive(root, "swiglu_limit") ||
                cJSON_GetObjectItemCaseSensitive(root, "experts_per_token"))) {
        fam = HF_GPT_OSS;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "num_local_experts")) {
        fam = HF_MIXTRAL;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "n_routed_experts") &&
               cJSON_GetObjectItemCaseSensitive(root, "kv_lora_rank")) {
        fam = HF_DEEPSEEK;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "num_experts") &&
               cJSON_GetObjectItemCaseSensitive(root, "moe_intermediate_size")) {
        /* Qwen2-MoE and Qwen3-MoE share these keys but not the math
         * (Qwen3's QK-norm): the family cannot be guessed */
        st = mp_error_set(err, MP_EINPUT, origin, 1, 1, "model_type",
                          "missing: a Qwen-MoE config needs it (qwen2_moe or qwen3_moe, which "
                          "adds QK-norm)");
        goto done;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "n_layer")) {
        fam = HF_GPT2;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "d_model")) {
        fam = HF_T5;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads")) {
        fam = HF_LLAMA;
    } else if (cJSON_GetObjectItemCaseSensitive(root, "num_hidden_layers")) {
        fam = HF_BERT;
    } else {
        st = mp_error_set(err, MP_EINPUT, origin, 1, 1, "model_type",
                          "missing, and the keys match no known family");
        goto done;
    }
    if ((st = refuse_math_keys(&cx, fam, model_type, err)) != MP_OK)
        goto done;
    if (fam != HF_GPT_OSS && (st = refuse_gpt_oss_keys(&cx, err)) != MP_OK)
        goto done;
    switch (fam) {
    case HF_MIXTRAL:
        st = read_mixtral(&cx, out, err);
        break;
    case HF_QWEN_MOE:
        st = read_qwen_moe(&cx, out, model_type && !strcmp(model_type, "qwen3_moe"), err);
        break;
    case HF_DEEPSEEK:
        st = read_deepseek(&cx, out, err);
        break;
    case HF_GPT_OSS:
        st = read_gpt_oss(&cx, out, err);
        break;
    case HF_GPT2:
        st = read_gpt2(&cx, out, err);
        break;
    case HF_LLAMA:
        st = read_llama(&cx, out, err);
        break;
    case HF_BERT:
        st = read_bert(&cx, out, err);
        break;
    default:
        st = read_t5(&cx, out, err);
        break;
    }
    if (st != MP_OK || (st = check_activation(&cx, fam, model_type, out, err)) != MP_OK ||
        (st = read_norm_eps(&cx, fam, out, err)) != MP_OK ||
        (st = read_dropout(&cx, fam, model_type, out, err)) != MP_OK)
        goto done;
    /* Qwen3 (dense and MoE): an RMSNorm on each query and key head before
     * the rotary turn (transformers' modeling_qwen3.py / modeling_qwen3_moe.py
     * q_norm, k_norm); its config has no key for it */
    if (model_type && (!strcmp(model_type, "qwen3") || !strcmp(model_type, "qwen3_moe")))
        out->attn.qk_norm = true;
    /* name: the checkpoint's folder for ".../name/config.json", else the file */
    char stem[MP_NAME_MAX];
    mp_basename_stem(origin ? origin : "hf-model", stem, sizeof stem);
    if (!strcmp(stem, "config") && origin) {
        const char *slash = strrchr(origin, '/');
        if (slash && slash > origin) {
            const char *start = slash;
            while (start > origin && start[-1] != '/')
                start--;
            size_t n = (size_t)(slash - start);
            if (n && n < sizeof stem) {
                memcpy(stem, start, n);
                stem[n] = '\0';
            }
        }
    }
    /* a folder "m\nx" wrote "# m" and "x: 124439808 parameters" as two lines,
     * and a byte that is not UTF-8 a plan megaplan could not read back */
    mp_text_sanitize(stem);
    snprintf(out->name, sizeof out->name, "%s", stem);
    st = mp_model_finish(out, err);
    if (st != MP_OK) {
        const char *key = hf_key_of(fam, err->field);
        int line = 0, col = 0;
        if (key) {
            snprintf(err->field, sizeof err->field, "%s", key);
            key_position(&cx, key, &line, &col);
        }
        mp_error_locate(err, origin, line, col);
    }
done:
    cJSON_Delete(root);
    return st;
}
