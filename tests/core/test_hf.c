/* HuggingFace config.json of GPT-2, LLaMA, BERT, T5 and the MoE families
 * (tests/core/data, sources in its README.md). */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "core/io.h"
#include "planner/cost.h"

static const char *data_dir = "tests/core/data";

static mp_status load(const char *file, mp_model *m, mp_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", data_dir, file);
    mp_error_clear(err);
    return mp_model_load(path, m, err);
}

static void test_gpt2(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("gpt2-config.json", &m, &err), MP_OK);
    assert_int_equal(m.arch, MP_ARCH_GPT);
    assert_int_equal(m.layers, 12);
    assert_int_equal(m.hidden, 768);
    assert_int_equal(m.heads, 12);
    assert_int_equal(m.ffn_hidden, 3072); /* n_inner absent: 4h */
    assert_int_equal(m.vocab, 50257);
    assert_int_equal(m.seq, 1024);
    assert_true(m.tied_embeddings);
    assert_int_equal(m.position, MP_POS_LEARNED);
    assert_string_equal(m.name, "gpt2-config");
}

/* The MoE families give the presets' shapes (the presets' seq is a
 * training length; the configs give their position tables). */
static void same_shape(const mp_model *m, const char *preset)
{
    mp_model p = *mp_model_preset(preset), got = *m;
    got.seq = p.seq;
    memcpy(got.name, p.name, sizeof got.name);
    if (memcmp(&got, &p, sizeof p))
        fail_msg("%s: the config.json reads differently from the preset", preset);
}

static void test_moe_families(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("mixtral-config.json", &m, &err), MP_OK);
    same_shape(&m, "mixtral-8x7b");
    assert_int_equal(load("qwen3-moe-config.json", &m, &err), MP_OK);
    same_shape(&m, "qwen3-235b-a22b");
    assert_int_equal(load("deepseek-v3-config.json", &m, &err), MP_OK);
    /* the config has its MTP module; the preset is the 671B the report counts */
    assert_int_equal(m.mtp_layers, 1);
    m.mtp_layers = 0;
    /* its rope_scaling (DeepSeek's YaRN, test_deepseek_yarn); the preset has
     * none: pre-training ran at 4K, YaRN came after (docs/formats.md) */
    assert_true(m.attn.rope_yarn && m.attn.yarn_factor == 40.0);
    m.attn.rope_yarn = false;
    m.attn.yarn_factor = m.attn.yarn_beta_fast = m.attn.yarn_beta_slow = 0.0;
    m.attn.yarn_mscale = m.attn.yarn_mscale_all_dim = 0.0;
    m.attn.yarn_original_seq = 0;
    same_shape(&m, "deepseek-v3");
    assert_true(m.moe.route_scale == 2.5); /* routed_scaling_factor */
    /* weights not renormalised: another model, refused at the key */
    assert_int_equal(load("deepseek-v3-unnormalised-config.json", &m, &err), MP_EINPUT);
    assert_string_equal(err.field, "norm_topk_prob");
    assert_int_equal(err.line, 19);
    /* without model_type the expert keys decide the family (it used to
     * load as a dense 7.2B LLaMA) */
    assert_int_equal(load("mixtral-untyped-config.json", &m, &err), MP_OK);
    assert_int_equal(m.moe.experts, 8);
    /* a dense family with expert keys: refused at the key, not dropped */
    assert_int_equal(load("mixtral-as-mistral-config.json", &m, &err), MP_EINPUT);
    assert_string_equal(err.field, "num_local_experts");
    assert_int_equal(err.line, 16);
}

static void test_llama(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("llama-config.json", &m, &err), MP_OK);
    const mp_model *p = mp_model_preset("llama3-70b");
    assert_int_equal(m.arch, MP_ARCH_LLAMA);
    assert_int_equal(m.layers, p->layers);
    assert_int_equal(m.hidden, p->hidden);
    assert_int_equal(m.heads, p->heads);
    assert_int_equal(m.kv_heads, p->kv_heads);
    assert_int_equal(m.head_dim, p->head_dim);
    assert_int_equal(m.ffn_hidden, p->ffn_hidden);
    assert_int_equal(m.vocab, p->vocab);
    assert_int_equal(m.seq, p->seq);
    assert_false(m.tied_embeddings);
    assert_int_equal(m.activation, MP_ACT_SWIGLU);
    assert_int_equal(m.norm, MP_NORM_RMSNORM);
    assert_int_equal(m.position, MP_POS_ROPE);
    /* the rotary base: the config's 500000 is the preset's (it had none: 10000) */
    assert_true(m.attn.rope_theta == 500000.0 && p->attn.rope_theta == m.attn.rope_theta);
}

static void test_bert(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("bert-config.json", &m, &err), MP_OK);
    const mp_model *p = mp_model_preset("bert-large");
    assert_int_equal(m.arch, MP_ARCH_BERT);
    assert_int_equal(m.layers, p->layers);
    assert_int_equal(m.hidden, p->hidden);
    assert_int_equal(m.heads, p->heads);
    assert_int_equal(m.ffn_hidden, p->ffn_hidden);
    assert_int_equal(m.vocab, p->vocab);
    assert_int_equal(m.seq, p->seq);
}

static void test_t5(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("t5-config.json", &m, &err), MP_OK);
    const mp_model *p = mp_model_preset("t5-11b");
    assert_int_equal(m.arch, MP_ARCH_T5);
    assert_int_equal(m.encoder_layers, 24);
    assert_int_equal(m.decoder_layers, 24);
    assert_int_equal(m.layers, 48);
    assert_int_equal(m.hidden, p->hidden);
    assert_int_equal(m.heads, p->heads);
    assert_int_equal(m.head_dim, 128);
    assert_int_equal(m.ffn_hidden, 65536);
    assert_int_equal(m.vocab, 32128);
    assert_int_equal(m.encoder_seq, 512);
    assert_int_equal(m.decoder_seq, 128);
    assert_int_equal(m.activation, MP_ACT_RELU);
}

/* Flan-T5 base's released config.json (T5 1.1's shape): gated-gelu with
 * dense_act_fn gelu_new and is_gated_act true is GEGLU over GELU's tanh
 * form, three FFN matrices a block, the head untied. Its parameters are
 * Chung et al. 2022's "250M" (Table 2, two digits) and, exactly, the
 * released checkpoint's 247,577,856 (tests/core/data/README.md derives it
 * from the tensors' shapes); read as two FFN matrices (the ungated form)
 * it would be 209.8M. */
static void test_t5_gated(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("flan-t5-base-config.json", &m, &err), MP_OK);
    assert_int_equal(m.arch, MP_ARCH_T5);
    assert_int_equal(m.activation, MP_ACT_GEGLU);
    assert_true(mp_activation_is_gated(m.activation));
    assert_false(mp_activation_is_erf(m.activation));
    assert_int_equal(m.encoder_layers, 12);
    assert_int_equal(m.decoder_layers, 12);
    assert_int_equal(m.hidden, 768);
    assert_int_equal(m.ffn_hidden, 2048);
    assert_false(m.tied_embeddings);
    double n = mp_model_params(&m);
    if (fabs(n / 247577856.0 - 1.0) > 1e-3)
        fail_msg("flan-t5-base: %.6g parameters, the checkpoint holds 247577856", n);
    assert_true(round(n / 1e7) == 25.0); /* "250M" */
}

/* The norm epsilon from each family's key in the released configs
 * (tests/core/data: GPT-2 layer_norm_epsilon 1e-5, Llama 3 70B rms_norm_eps
 * 1e-5, BERT layer_norm_eps 1e-12, T5 layer_norm_epsilon 1e-6, Mixtral
 * 1e-5, Qwen3-MoE 1e-6, DeepSeek-V3 1e-6, GPT-OSS 1e-5); without the key,
 * transformers' default for the model_type; a bad value refused at it. */
static void test_norm_eps(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    const struct {
        const char *file;
        double eps;
    } released[] = {
        {"gpt2-config.json", 1e-5},        {"llama-config.json", 1e-5},
        {"bert-config.json", 1e-12},       {"t5-config.json", 1e-6},
        {"mixtral-config.json", 1e-5},     {"qwen3-moe-config.json", 1e-6},
        {"deepseek-v3-config.json", 1e-6}, {"gpt-oss-20b-config.json", 1e-5},
    };
    for (size_t i = 0; i < sizeof released / sizeof *released; i++) {
        assert_int_equal(load(released[i].file, &m, &err), MP_OK);
        if (m.norm_eps != released[i].eps)
            fail_msg("%s: norm_eps %g, expected %g", released[i].file, m.norm_eps,
                     released[i].eps);
    }
    /* one key per family, another value than the default: read, not assumed */
    const struct {
        const char *json;
        double eps;
    } keys[] = {
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
         "\"vocab_size\": 100, \"layer_norm_epsilon\": 3e-6}", 3e-6},
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100, "
         "\"rms_norm_eps\": 3e-6}", 3e-6},
        {"{\"model_type\": \"qwen3\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100, "
         "\"rms_norm_eps\": 3e-6}", 3e-6},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 100, \"layer_norm_eps\": 3e-6}", 3e-6},
        {"{\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, \"num_heads\": 4, "
         "\"d_kv\": 16, \"d_ff\": 100, \"vocab_size\": 100, \"layer_norm_epsilon\": 3e-6}", 3e-6},
        /* absent: transformers' defaults (LlamaConfig 1e-6, GPT2Config 1e-5,
         * BertConfig 1e-12, T5Config 1e-6) */
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100}", 1e-6},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
         "\"vocab_size\": 100}", 1e-5},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 100}", 1e-12},
        {"{\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, \"num_heads\": 4, "
         "\"d_kv\": 16, \"d_ff\": 100, \"vocab_size\": 100}", 1e-6},
        /* GPT-2's key on a BERT is not BERT's: its default stays */
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 100, \"layer_norm_epsilon\": 3e-6}",
         1e-12},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        mp_error_clear(&err);
        if (mp_model_parse_hf_json(keys[i].json, strlen(keys[i].json), "c.json", &m, &err) !=
            MP_OK)
            fail_msg("case %zu: %s: %s", i, err.field, err.msg);
        if (m.norm_eps != keys[i].eps)
            fail_msg("case %zu: norm_eps %g, expected %g", i, m.norm_eps, keys[i].eps);
    }
    const char *bad[] = {"0", "-1e-5", "1", "\"1e-5\"", "true"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"model_type\": \"mistral\", \"num_hidden_layers\": 2, \"hidden_size\": 64,\n"
                 " \"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100,\n"
                 " \"rms_norm_eps\": %s}",
                 bad[i]);
        mp_error_clear(&err);
        assert_int_equal(mp_model_parse_hf_json(json, strlen(json), "c.json", &m, &err),
                         MP_EINPUT);
        assert_string_equal(err.field, "rms_norm_eps");
        assert_int_equal(err.line, 3);
        assert_int_equal(err.column, 2);
    }
}

static void hf_refused(const char *text, const char *field, const char *what, size_t i);

/* The dropout keys (docs/formats.md): the released files' values, each
 * family's keys read as transformers applies them, and every dropout key a
 * family does not apply refused unless 0, never dropped. */
static void test_dropout(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    const struct {
        const char *file;
        double hidden, attention;
    } released[] = {
        {"gpt2-config.json", 0.1, 0.1},       /* resid/embd/attn_pdrop 0.1 */
        {"bert-config.json", 0.1, 0.1},       /* hidden_dropout_prob, attention_probs_... */
        {"t5-config.json", 0.1, 0.1},         /* dropout_rate 0.1 */
        {"flan-t5-base-config.json", 0.1, 0.1},
        {"llama-config.json", 0.0, 0.0},      /* no key: LlamaConfig's attention_dropout 0 */
        {"mixtral-config.json", 0.0, 0.0},    /* attention_dropout 0.0 */
        {"deepseek-v3-config.json", 0.0, 0.0},
        {"gpt-oss-20b-config.json", 0.0, 0.0},
    };
    for (size_t i = 0; i < sizeof released / sizeof *released; i++) {
        assert_int_equal(load(released[i].file, &m, &err), MP_OK);
        if (m.hidden_dropout != released[i].hidden || m.attention_dropout != released[i].attention)
            fail_msg("%s: dropout %g/%g, expected %g/%g", released[i].file, m.hidden_dropout,
                     m.attention_dropout, released[i].hidden, released[i].attention);
    }
#define GPT2 "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, " \
             "\"vocab_size\": 100, "
#define BERT "{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, " \
             "\"num_attention_heads\": 4, \"vocab_size\": 100, "
#define T5 "{\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, \"num_heads\": 4, " \
           "\"d_kv\": 16, \"d_ff\": 100, \"vocab_size\": 100, "
#define LLAMA(t) "{\"model_type\": \"" t "\", \"num_hidden_layers\": 2, \"hidden_size\": 64, " \
                 "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": 100, "
    const struct {
        const char *json;
        double hidden, attention;
    } keys[] = {
        {GPT2 "\"resid_pdrop\": 0, \"embd_pdrop\": 0, \"attn_pdrop\": 0.2}", 0.0, 0.2},
        {GPT2 "\"resid_pdrop\": 0.05, \"embd_pdrop\": 0.05, \"attn_pdrop\": 0}", 0.05, 0.0},
        {BERT "\"hidden_dropout_prob\": 0, \"attention_probs_dropout_prob\": 0.05}", 0.0, 0.05},
        {T5 "\"dropout_rate\": 0}", 0.0, 0.0},
        {T5 "\"dropout_rate\": 0.2}", 0.2, 0.2},
        {LLAMA("llama") "\"attention_dropout\": 0.1}", 0.0, 0.1},
        {LLAMA("qwen2") "\"attention_dropout\": 0.0}", 0.0, 0.0},
        /* 0 is no dropout whoever names it; fine-tuning heads' dropouts are
         * not the pre-training model's */
        {LLAMA("mistral") "\"hidden_dropout\": 0, \"dropout\": 0.0}", 0.0, 0.0},
        {GPT2 "\"summary_first_dropout\": 0.1}", 0.1, 0.1},
        {BERT "\"classifier_dropout\": 0.3}", 0.1, 0.1},
        /* null is absent (transformers' default) */
        {BERT "\"hidden_dropout_prob\": null}", 0.1, 0.1},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        mp_error_clear(&err);
        if (mp_model_parse_hf_json(keys[i].json, strlen(keys[i].json), "c.json", &m, &err) !=
            MP_OK)
            fail_msg("case %zu: %s: %s", i, err.field, err.msg);
        if (m.hidden_dropout != keys[i].hidden || m.attention_dropout != keys[i].attention)
            fail_msg("case %zu: dropout %g/%g, expected %g/%g", i, m.hidden_dropout,
                     m.attention_dropout, keys[i].hidden, keys[i].attention);
        assert_true(m.dropout_set);
    }
    const struct {
        const char *json, *field;
    } refused[] = {
        /* megaplan, as Megatron, has one hidden dropout for both */
        {GPT2 "\"resid_pdrop\": 0.1, \"embd_pdrop\": 0}", "embd_pdrop"},
        /* a key the family does not apply, nonzero */
        {LLAMA("llama") "\"hidden_dropout\": 0.1}", "hidden_dropout"},
        {LLAMA("qwen3") "\"resid_pdrop\": 0.1}", "resid_pdrop"},
        {BERT "\"attention_dropout\": 0.1}", "attention_dropout"},
        {GPT2 "\"dropout\": 0.3}", "dropout"},
        {T5 "\"attn_pdrop\": 0.1}", "attn_pdrop"},
        {GPT2 "\"activation_dropout\": 0.1}", "activation_dropout"},
        /* not a probability */
        {BERT "\"attention_probs_dropout_prob\": 1}", "attention_probs_dropout_prob"},
        {BERT "\"hidden_dropout_prob\": -0.1}", "hidden_dropout_prob"},
        {T5 "\"dropout_rate\": \"0.1\"}", "dropout_rate"},
        {LLAMA("mistral") "\"attention_dropout\": true}", "attention_dropout"},
        /* a wrong type is refused even where the key is not read */
        {LLAMA("llama") "\"hidden_dropout\": \"none\"}", "hidden_dropout"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        hf_refused(refused[i].json, refused[i].field, "dropout", i);
#undef GPT2
#undef BERT
#undef T5
#undef LLAMA
    /* the error points at the key's line */
    const char *json = "{\"model_type\": \"llama\", \"num_hidden_layers\": 2,\n"
                       " \"hidden_size\": 64, \"num_attention_heads\": 4,\n"
                       " \"intermediate_size\": 96, \"vocab_size\": 100,\n"
                       " \"attention_dropout\": 1.5}";
    mp_error_clear(&err);
    assert_int_equal(mp_model_parse_hf_json(json, strlen(json), "c.json", &m, &err), MP_EINPUT);
    assert_string_equal(err.field, "attention_dropout");
    assert_int_equal(err.line, 4);
    assert_int_equal(err.column, 2);
}

static void test_errors(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("bad-type-config.json", &m, &err), MP_EINPUT);
    assert_string_equal(err.field, "hidden_size");
    assert_int_equal(err.line, 4);
    assert_int_equal(err.column, 3);
    assert_non_null(strstr(err.msg, "integer"));
    assert_non_null(strstr(err.file, "bad-type-config.json"));

    assert_int_equal(load("truncated-config.json", &m, &err), MP_EINPUT);
    assert_true(err.line >= 4); /* at the end of the text */
    assert_non_null(strstr(err.msg, "JSON"));

    const char *cases[][2] = {
        {"{\"model_type\": \"gpt-j\"}", "model_type"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 12}", "n_embd"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": -1, \"n_embd\": 8, \"n_head\": 2, \"vocab_size\": 9}", "n_layer"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 1e30, \"n_embd\": 8, \"n_head\": 2, \"vocab_size\": 9}", "n_layer"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2.5, \"n_embd\": 8, \"n_head\": 2, \"vocab_size\": 9}", "n_layer"},
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
         "\"num_key_value_heads\": 3, \"intermediate_size\": 100, \"vocab_size\": 10}", "num_key_value_heads"},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 5, "
         "\"vocab_size\": 10}", "num_attention_heads"},
        {"{\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, \"num_heads\": 4, \"d_kv\": 16, "
         "\"d_ff\": 100, \"vocab_size\": 10, \"feed_forward_proj\": \"swish\"}", "feed_forward_proj"},
        {"{\"tie_word_embeddings\": 1, \"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 10}", "tie_word_embeddings"},
        {"[1, 2]", ""},
        {"{\"foo\": 1}", "model_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_error_clear(&err);
        mp_status st = mp_model_parse_hf_json(cases[i][0], strlen(cases[i][0]), "c.json", &m, &err);
        if (st != MP_EINPUT)
            fail_msg("case %zu accepted", i);
        if (strcmp(err.field, cases[i][1]))
            fail_msg("case %zu: field '%s' (%s), expected '%s'", i, err.field, err.msg,
                     cases[i][1]);
        assert_string_equal(err.file, "c.json");
    }
    /* no model_type: the keys decide */
    const char *t5 = "{\"num_layers\": 2, \"num_decoder_layers\": 1, \"d_model\": 64, \"num_heads\": 4, "
                     "\"d_kv\": 16, \"d_ff\": 100, \"vocab_size\": 10, \"feed_forward_proj\": \"gated-gelu\"}";
    assert_int_equal(mp_model_parse_hf_json(t5, strlen(t5), "x/flan/config.json", &m, &err), MP_OK);
    assert_int_equal(m.layers, 3);
    assert_int_equal(m.activation, MP_ACT_GEGLU); /* gated-gelu: gelu_new(x W0) * (x W1) */
    assert_string_equal(m.name, "flan");
}

/* GPT-OSS's released config.json, field by field, and the presets. */
static void test_gpt_oss(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("gpt-oss-120b-config.json", &m, &err), MP_OK);
    assert_int_equal(m.arch, MP_ARCH_LLAMA);
    assert_int_equal(m.layers, 36);              /* num_hidden_layers */
    assert_int_equal(m.hidden, 2880);            /* hidden_size */
    assert_int_equal(m.heads, 64);               /* num_attention_heads */
    assert_int_equal(m.kv_heads, 8);             /* num_key_value_heads */
    assert_int_equal(m.head_dim, 64);            /* head_dim */
    assert_int_equal(m.vocab, 201088);           /* vocab_size */
    assert_int_equal(m.seq, 131072);             /* max_position_embeddings */
    assert_int_equal(m.moe.experts, 128);        /* num_local_experts */
    assert_int_equal(m.moe.top_k, 4);            /* num_experts_per_tok */
    assert_int_equal(m.moe.expert_ffn, 2880);    /* intermediate_size */
    assert_int_equal(m.moe.layer_freq, 1);
    assert_int_equal(m.attn.window, 128);        /* sliding_window */
    assert_int_equal(m.attn.window_skip_freq, 2); /* layer_types: sliding, full, ... */
    assert_true(m.attn.sinks);
    assert_true(m.attn.rope_yarn);               /* rope_scaling.rope_type yarn */
    assert_true(m.linear_bias);                  /* attention_bias */
    assert_true(m.glu_limit == 7.0);             /* swiglu_limit */
    assert_false(m.tied_embeddings);             /* tie_word_embeddings */
    assert_int_equal(m.activation, MP_ACT_SWIGLU);
    assert_int_equal(m.norm, MP_NORM_RMSNORM);
    assert_int_equal(m.position, MP_POS_ROPE);
    assert_string_equal(m.name, "gpt-oss-120b-config");
    same_shape(&m, "gpt-oss-120b");
    assert_int_equal(load("gpt-oss-20b-config.json", &m, &err), MP_OK);
    assert_int_equal(m.layers, 24);
    assert_int_equal(m.moe.experts, 32);
    same_shape(&m, "gpt-oss-20b");
    /* blocks 1, 3, 5, ... (0-based) keep full attention, as layer_types says */
    assert_true(mp_model_block_is_windowed(&m, 0));
    assert_false(mp_model_block_is_windowed(&m, 1));
    assert_int_equal(mp_model_windowed_blocks(&m), 12);

    const char *base = "\"model_type\": \"gpt_oss\", \"num_hidden_layers\": 4, \"hidden_size\": 64, "
                       "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
                       "\"intermediate_size\": 32, \"vocab_size\": 100, \"num_local_experts\": 4, "
                       "\"num_experts_per_tok\": 2, \"max_position_embeddings\": 64";
    const struct {
        const char *extra, *field;
    } bad[] = {
        {"\"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", "
         "\"sliding_attention\"]", "layer_types"},
        {"\"layer_types\": [\"sliding_attention\", \"full_attention\"]", "layer_types"},
        {"\"layer_types\": [\"sliding_attention\", \"chunked\", \"x\", \"y\"]", "layer_types"},
        {"\"swiglu_alpha\": 1.0", "swiglu_alpha"},
        {"\"swiglu_limit\": -1", "swiglu_limit"},
        {"\"attention_bias\": false", "attention_bias"},
        {"\"experts_per_token\": 3", "experts_per_token"},
        {"\"rope_scaling\": {\"rope_type\": \"longrope\"}", "rope_scaling"},
    };
    char text[2048];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "{%s, %s}", base, bad[i].extra);
        mp_error_clear(&err);
        if (mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err) != MP_EINPUT)
            fail_msg("gpt_oss case %zu accepted", i);
        if (strcmp(err.field, bad[i].field))
            fail_msg("gpt_oss case %zu: field '%s' (%s), expected '%s'", i, err.field, err.msg,
                     bad[i].field);
    }
    /* every layer sliding: no full block; every layer full: no window */
    snprintf(text, sizeof text, "{%s, \"layer_types\": [\"sliding_attention\", "
             "\"sliding_attention\", \"sliding_attention\", \"sliding_attention\"]}", base);
    assert_int_equal(mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err), MP_OK);
    assert_int_equal(m.attn.window, 128);
    assert_int_equal(m.attn.window_skip_freq, 0);
    snprintf(text, sizeof text, "{%s, \"sliding_window\": 8, \"layer_types\": [\"full_attention\", "
             "\"full_attention\", \"full_attention\", \"full_attention\"]}", base);
    assert_int_equal(mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err), MP_OK);
    assert_int_equal(m.attn.window, 0);
    /* HF's defaults when the keys are absent: window 128, alternating */
    snprintf(text, sizeof text, "{%s}", base);
    assert_int_equal(mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err), MP_OK);
    assert_int_equal(m.attn.window, 128);
    assert_int_equal(m.attn.window_skip_freq, 2);
    assert_true(m.glu_limit == 7.0);
    /* without model_type, GPT-OSS's keys pick the family (not Mixtral) */
    const char *untyped = "{\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
                          "\"intermediate_size\": 32, \"vocab_size\": 100, \"num_local_experts\": 4, "
                          "\"num_experts_per_tok\": 2, \"swiglu_limit\": 7.0, \"sliding_window\": 8, "
                          "\"max_position_embeddings\": 64}";
    assert_int_equal(mp_model_parse_hf_json(untyped, strlen(untyped), "c.json", &m, &err), MP_OK);
    assert_true(m.attn.sinks);
    assert_false(m.attn.rope_yarn); /* no rope_scaling: plain rotary */
    assert_int_equal(m.attn.window, 8);
    /* GPT-OSS's keys in other families: refused, not dropped */
    const char *other[][2] = {
        {"{\"model_type\": \"mixtral\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100, "
         "\"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"swiglu_limit\": 7.0}",
         "swiglu_limit"},
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100, "
         "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}", "layer_types"},
        {"{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100, "
         "\"attention_bias\": true}", "attention_bias"},
        {"{\"model_type\": \"qwen2\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100, "
         "\"use_sliding_window\": true, \"sliding_window\": 16}", "use_sliding_window"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        mp_error_clear(&err);
        if (mp_model_parse_hf_json(other[i][0], strlen(other[i][0]), "c.json", &m, &err) !=
            MP_EINPUT)
            fail_msg("other family case %zu accepted", i);
        assert_string_equal(err.field, other[i][1]);
    }
    /* Mistral's sliding_window windows every block; all-full layer_types pass */
    const char *mistral = "{\"model_type\": \"mistral\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                          "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100, "
                          "\"sliding_window\": 16, \"max_position_embeddings\": 64, \"layer_types\": "
                          "[\"full_attention\", \"full_attention\"]}";
    assert_int_equal(mp_model_parse_hf_json(mistral, strlen(mistral), "c.json", &m, &err), MP_OK);
    assert_int_equal(m.attn.window, 16);
    assert_int_equal(m.attn.window_skip_freq, 0);
    assert_false(m.attn.sinks);
}

/* Qwen3's QK-norm (an RMSNorm on each query and key head): HF's qwen3 and
 * qwen3_moe have it with no key saying so, the other families not; a
 * Qwen-MoE config without model_type cannot say which it is and is refused
 * (it used to load without the norm). */
static void test_qwen3_qk_norm(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    /* Qwen3-8B's shapes (its released config.json) */
    const char *dense = "{\"model_type\": \"qwen3\", \"num_hidden_layers\": 36, "
                        "\"hidden_size\": 4096, \"num_attention_heads\": 32, "
                        "\"num_key_value_heads\": 8, \"head_dim\": 128, "
                        "\"intermediate_size\": 12288, \"vocab_size\": 151936, "
                        "\"max_position_embeddings\": 40960, \"rope_theta\": 1000000, "
                        "\"rms_norm_eps\": 1e-06, \"attention_bias\": false, "
                        "\"use_sliding_window\": false, \"sliding_window\": null, "
                        "\"tie_word_embeddings\": false}";
    mp_error_clear(&err);
    assert_int_equal(mp_model_parse_hf_json(dense, strlen(dense), "c.json", &m, &err), MP_OK);
    assert_true(m.attn.qk_norm);
    assert_int_equal(m.arch, MP_ARCH_LLAMA);
    assert_false(mp_model_is_moe(&m));
    assert_int_equal(load("qwen3-moe-config.json", &m, &err), MP_OK);
    assert_true(m.attn.qk_norm);
    const char *llama = "{\"model_type\": \"qwen2\", \"num_hidden_layers\": 2, "
                        "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                        "\"intermediate_size\": 32, \"vocab_size\": 100}";
    mp_error_clear(&err);
    assert_int_equal(mp_model_parse_hf_json(llama, strlen(llama), "c.json", &m, &err), MP_OK);
    assert_false(m.attn.qk_norm);
    const char *files[] = {"mixtral-config.json", "deepseek-v3-config.json",
                           "gpt-oss-120b-config.json", "llama-config.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        assert_int_equal(load(files[i], &m, &err), MP_OK);
        if (m.attn.qk_norm)
            fail_msg("%s: read with QK-norm", files[i]);
    }
    const char *untyped = "{\"num_hidden_layers\": 2, \"hidden_size\": 64, "
                          "\"num_attention_heads\": 4, \"intermediate_size\": 32, "
                          "\"vocab_size\": 100, \"num_experts\": 4, "
                          "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 16}";
    mp_error_clear(&err);
    assert_int_equal(mp_model_parse_hf_json(untyped, strlen(untyped), "c.json", &m, &err),
                     MP_EINPUT);
    assert_string_equal(err.field, "model_type");
}

/* The config.json text is refused at the key `field` (case i of `what`). */
static void hf_refused(const char *text, const char *field, const char *what, size_t i)
{
    mp_model m;
    mp_error err;
    mp_error_clear(&err);
    if (mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err) != MP_EINPUT)
        fail_msg("%s case %zu accepted", what, i);
    if (strcmp(err.field, field))
        fail_msg("%s case %zu: field '%s' (%s), expected '%s'", what, i, err.field, err.msg,
                 field);
}

/* The rotary angles' fields: GPT-OSS's YaRN read whole from its config
 * (same_shape above holds them to the preset too), the base read for the
 * LLaMA family, and every key that would change the angles unread refused;
 * the model's own checks keep the fields where they mean something. */
static void test_rope_fields(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("gpt-oss-20b-config.json", &m, &err), MP_OK);
    assert_true(m.attn.rope_theta == 150000.0);            /* rope_theta */
    assert_true(m.attn.yarn_factor == 32.0);               /* rope_scaling.factor */
    assert_int_equal(m.attn.yarn_original_seq, 4096);      /* original_max_position_embeddings */
    assert_true(m.attn.yarn_beta_fast == 32.0 && m.attn.yarn_beta_slow == 1.0);
    assert_int_equal(m.attn.yarn_bounds, MP_YARN_UNROUNDED); /* truncate: false */
    assert_int_equal(load("llama-config.json", &m, &err), MP_OK);
    assert_true(m.attn.rope_theta == 500000.0);
    assert_false(m.attn.rope_yarn);

    const char *base = "\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
                       "\"num_attention_heads\": 4, \"intermediate_size\": 32, "
                       "\"vocab_size\": 100, \"max_position_embeddings\": 512";
    char text[1024];
    /* YaRN in a LLaMA-family config: HF's defaults (truncate, betas, the
     * original context = max_position_embeddings) */
    snprintf(text, sizeof text, "{%s, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4}}",
             base);
    assert_int_equal(mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err), MP_OK);
    assert_true(m.attn.rope_yarn && m.attn.yarn_factor == 4.0);
    assert_int_equal(m.attn.yarn_original_seq, 512);
    assert_int_equal(m.attn.yarn_bounds, MP_YARN_ROUNDED);
    assert_true(mp_model_yarn_beta_fast(&m) == 32.0 && mp_model_yarn_beta_slow(&m) == 1.0);
    assert_true(mp_model_rope_theta(&m) == 10000.0);
    const struct {
        const char *extra, *field;
    } bad[] = {
        {"\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}", "rope_scaling"},
        {"\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2}", "rope_scaling"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\"}", "rope_scaling"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"mscale\": 1}", "mscale"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"attention_factor\": 1}",
         "attention_factor"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"truncate\": 1}", "truncate"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4, \"beta_fast\": 1, "
         "\"beta_slow\": 32}", "beta_fast"},
        {"\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}, \"partial_rotary_factor\": 0.5",
         "partial_rotary_factor"},
        {"\"rope_theta\": \"big\"", "rope_theta"},
        {"\"rope_theta\": 1", "rope_theta"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "{%s, %s}", base, bad[i].extra);
        hf_refused(text, bad[i].field, "rope", i);
    }
    /* the model's own checks, on a plan's model fields */
    const struct {
        const char *yaml, *field;
    } model_bad[] = {
        {"arch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {rope_theta: 500000}\n", "attn.rope_theta"},
        {"arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {yarn_factor: 32}\n", "attn.yarn_factor"},
        {"arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {rope_yarn: true, yarn_original_seq: 4096}\n", "attn.yarn_factor"},
        {"arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {rope_yarn: true, yarn_factor: 32}\n", "attn.yarn_original_seq"},
        {"arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {rope_yarn: true, yarn_factor: 32, yarn_original_seq: 64, yarn_beta_slow: 40}\n",
         "attn.yarn_beta_fast"},
        {"arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
         "attn: {yarn_bounds: sideways}\n", "attn.yarn_bounds"},
    };
    for (size_t i = 0; i < sizeof model_bad / sizeof model_bad[0]; i++) {
        mp_error_clear(&err);
        const char *y = model_bad[i].yaml;
        if (mp_model_parse_yaml(y, strlen(y), "m.yaml", &m, &err) != MP_EINPUT)
            fail_msg("model case %zu accepted", i);
        if (!strstr(err.field, model_bad[i].field))
            fail_msg("model case %zu: field '%s' (%s), expected '%s'", i, err.field, err.msg,
                     model_bad[i].field);
    }
    const char *ok = "arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
                     "attn: {rope_yarn: true, rope_theta: 150000, yarn_factor: 32, "
                     "yarn_original_seq: 4096, yarn_bounds: unrounded}\n";
    assert_int_equal(mp_model_parse_yaml(ok, strlen(ok), "m.yaml", &m, &err), MP_OK);
    assert_int_equal(m.attn.yarn_bounds, MP_YARN_UNROUNDED);
}

/* DeepSeek-V3's rope_scaling (its own YaRN: mscale and mscale_all_dim beside
 * HF's keys) read whole into the model, nothing that changes the math
 * dropped: a key not known, a value of the wrong type, or mscale without
 * mscale_all_dim (which HF would ignore) refused at the key. */
static void test_deepseek_yarn(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(load("deepseek-v3-config.json", &m, &err), MP_OK);
    assert_true(m.attn.rope_yarn);
    assert_true(m.attn.rope_theta == 10000.0);
    assert_true(m.attn.yarn_factor == 40.0);
    assert_int_equal(m.attn.yarn_original_seq, 4096);
    assert_true(m.attn.yarn_beta_fast == 32.0 && m.attn.yarn_beta_slow == 1.0);
    assert_int_equal(m.attn.yarn_bounds, MP_YARN_ROUNDED); /* no truncate: HF's default */
    assert_true(m.attn.yarn_mscale == 1.0 && m.attn.yarn_mscale_all_dim == 1.0);

    const char *base = "\"model_type\": \"deepseek_v3\", \"num_hidden_layers\": 2, "
                       "\"hidden_size\": 64, \"num_attention_heads\": 4, "
                       "\"intermediate_size\": 32, \"vocab_size\": 100, "
                       "\"max_position_embeddings\": 512, \"n_routed_experts\": 4, "
                       "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 16, "
                       "\"kv_lora_rank\": 8, \"qk_rope_head_dim\": 4, "
                       "\"qk_nope_head_dim\": 8, \"v_head_dim\": 8";
    char text[2048];
    /* mscale_all_dim alone: cos and sin keep HF's default factor */
    snprintf(text, sizeof text, "{%s, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4, "
             "\"mscale_all_dim\": 0.707}}", base);
    assert_int_equal(mp_model_parse_hf_json(text, strlen(text), "c.json", &m, &err), MP_OK);
    assert_true(m.attn.yarn_mscale == 0.0 && m.attn.yarn_mscale_all_dim == 0.707);
    assert_int_equal(m.attn.yarn_original_seq, 512);
    const struct {
        const char *scaling, *field;
    } bad[] = {
        {"{\"type\": \"yarn\", \"factor\": 40, \"mscale_every_dim\": 1}", "mscale_every_dim"},
        {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": \"one\", \"mscale_all_dim\": 1}",
         "mscale"},
        {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1, \"mscale_all_dim\": true}",
         "mscale_all_dim"},
        {"{\"type\": \"yarn\", \"factor\": 40, \"mscale\": 1}", "mscale"},
        {"{\"type\": \"yarn\", \"factor\": 40, \"attention_factor\": 1}", "attention_factor"},
        {"{\"type\": \"linear\", \"factor\": 40}", "rope_scaling"},
        {"{\"type\": \"yarn\", \"factor\": \"40\"}", "factor"},
        {"{\"type\": \"default\", \"factor\": 40, \"mscale_all_dim\": 1}", "mscale_all_dim"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "{%s, \"rope_scaling\": %s}", base, bad[i].scaling);
        hf_refused(text, bad[i].field, "deepseek rope", i);
    }
    /* the model's own checks: DeepSeek's fields need YaRN, latent attention,
     * and mscale its partner */
    const char *mla = "arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 64\n"
                      "position: rope\nmla: {kv_lora_rank: 8, qk_rope_head_dim: 4, "
                      "qk_nope_head_dim: 8, v_head_dim: 8}\n";
    const char *yarn = "rope_yarn: true, yarn_factor: 40, yarn_original_seq: 16";
    const struct {
        const char *attn, *field;
        bool with_mla;
    } model_bad[] = {
        {"yarn_mscale_all_dim: 1", "attn.yarn_mscale_all_dim", true},
        {"yarn_mscale: 1, yarn_mscale_all_dim: 1", "attn.yarn_mscale", false},
        {"yarn_mscale: 1", "attn.yarn_mscale", true},
    };
    char yaml[1024];
    for (size_t i = 0; i < sizeof model_bad / sizeof model_bad[0]; i++) {
        bool needs_yarn = i > 0;
        snprintf(yaml, sizeof yaml, "%sattn: {%s%s%s}\n",
                 model_bad[i].with_mla ? mla
                                       : "arch: llama\nlayers: 2\nhidden: 64\nheads: 4\n"
                                         "vocab: 100\nseq: 64\n",
                 needs_yarn ? yarn : "", needs_yarn ? ", " : "", model_bad[i].attn);
        mp_error_clear(&err);
        if (mp_model_parse_yaml(yaml, strlen(yaml), "m.yaml", &m, &err) != MP_EINPUT)
            fail_msg("deepseek model case %zu accepted", i);
        if (!strstr(err.field, model_bad[i].field))
            fail_msg("deepseek model case %zu: field '%s' (%s), expected '%s'", i, err.field,
                     err.msg, model_bad[i].field);
    }
    snprintf(yaml, sizeof yaml, "%sattn: {%s, yarn_mscale: 1, yarn_mscale_all_dim: 1}\n", mla,
             yarn);
    assert_int_equal(mp_model_parse_yaml(yaml, strlen(yaml), "m.yaml", &m, &err), MP_OK);
    assert_true(m.attn.yarn_mscale_all_dim == 1.0);
}

/* One HF config case: a family's head (index into a table), one extra key
 * on line 3, and the field it must be refused at (NULL: accepted). */
typedef struct {
    int fam;
    const char *extra, *field;
} hf_case;

/* Each case as "{head,\nmiddle,\nextra}": accepted, or refused at its line 3
 * naming its field and the file. */
static void check_hf_cases(const char *const heads[], const char *middle, const hf_case *cases,
                           size_t n)
{
    mp_model m;
    mp_error err;
    for (size_t i = 0; i < n; i++) {
        char json[1024];
        snprintf(json, sizeof json, "{%s,\n%s,\n%s}", heads[cases[i].fam], middle, cases[i].extra);
        mp_error_clear(&err);
        mp_status st = mp_model_parse_hf_json(json, strlen(json), "c.json", &m, &err);
        if (!cases[i].field) {
            if (st != MP_OK)
                fail_msg("case %zu (%s) refused: %s: %s", i, cases[i].extra, err.field, err.msg);
            continue;
        }
        if (st != MP_EINPUT)
            fail_msg("case %zu (%s) accepted", i, cases[i].extra);
        assert_string_equal(err.field, cases[i].field);
        assert_string_equal(err.file, "c.json");
        assert_int_equal(err.line, 3);
    }
}

/* A key that changes an MoE's math and that the family does not read is an
 * error at its line (issue 14: never silently dropped), in every MoE family;
 * a value saying what the family does anyway, and the keys that do not change
 * the math (the load-balancing loss, router noise), pass. */
static void test_moe_math_keys(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    static const char *const heads[] = {
        "\"model_type\": \"mixtral\", \"num_local_experts\": 8",
        "\"model_type\": \"qwen3_moe\", \"num_experts\": 8, \"moe_intermediate_size\": 32",
        "\"model_type\": \"gpt_oss\", \"num_local_experts\": 8",
        "\"model_type\": \"deepseek_v3\", \"n_routed_experts\": 8, \"moe_intermediate_size\": 32, "
        "\"kv_lora_rank\": 16, \"qk_rope_head_dim\": 8, \"qk_nope_head_dim\": 8, "
        "\"v_head_dim\": 16",
    };
    const char *common = "\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
                         "\"intermediate_size\": 32, \"vocab_size\": 100, "
                         "\"max_position_embeddings\": 64, \"num_experts_per_tok\": 2";
    /* {family index, the extra key (on line 3), refused?} */
    static const hf_case cases[] = {
        {0, "\"n_shared_experts\": 2", "n_shared_experts"},
        {0, "\"moe_intermediate_size\": 1024", "moe_intermediate_size"},
        {0, "\"capacity_factor\": 1.25", "capacity_factor"},
        {0, "\"decoder_sparse_step\": 2", "decoder_sparse_step"},
        {0, "\"norm_topk_prob\": false", "norm_topk_prob"},
        {0, "\"num_experts\": 16", "num_experts"},
        {0, "\"first_k_dense_replace\": 1", "first_k_dense_replace"},
        {1, "\"n_shared_experts\": 1", "n_shared_experts"},
        {1, "\"norm_topk_prob\": false", "norm_topk_prob"},
        {1, "\"n_group\": 4", "n_group"},
        /* Qwen2-MoE's key: Qwen3-MoE builds no shared expert (it was costed as one) */
        {1, "\"shared_expert_intermediate_size\": 64", "shared_expert_intermediate_size"},
        {1, "\"shared_expert_intermediate_size\": 0", NULL},
        {2, "\"moe_intermediate_size\": 1024", "moe_intermediate_size"},
        {2, "\"shared_expert_intermediate_size\": 64", "shared_expert_intermediate_size"},
        {3, "\"num_local_experts\": 16", "num_local_experts"},
        {3, "\"decoder_sparse_step\": 2", "decoder_sparse_step"},
        {3, "\"expert_capacity\": 64", "expert_capacity"},
        /* neutral values and keys that do not change the math: accepted */
        {0, "\"decoder_sparse_step\": 1, \"norm_topk_prob\": true, \"n_shared_experts\": 0", NULL},
        {0, "\"output_router_logits\": true, \"router_aux_loss_coef\": 0.02, "
            "\"router_jitter_noise\": 0.1", NULL},
        {1, "\"router_aux_loss_coef\": 0.001, \"output_router_logits\": false", NULL},
        {3, "\"aux_loss_alpha\": 0.001, \"seq_aux\": true, \"topk_method\": \"noaux_tc\", "
            "\"ep_size\": 1", NULL},
    };
    check_hf_cases(heads, common, cases, sizeof cases / sizeof cases[0]);
    /* the audit's case: the released Mixtral config with a shared expert
     * added loaded as the 12.88B-active model it is not */
    char path[512];
    snprintf(path, sizeof path, "%s/mixtral-config.json", data_dir);
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char text[8192], shared[8300];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = '\0';
    const char *brace = strchr(text, '{');
    assert_non_null(brace);
    snprintf(shared, sizeof shared, "{\n  \"n_shared_experts\": 2,%s", brace + 1);
    mp_error_clear(&err);
    assert_int_equal(mp_model_parse_hf_json(shared, strlen(shared), "mixtral/config.json", &m,
                                            &err), MP_EINPUT);
    assert_string_equal(err.field, "n_shared_experts");
    assert_string_equal(err.file, "mixtral/config.json");
    assert_int_equal(err.line, 2);
}

/* Issue #14: the activation a config names changes the math; a value
 * megaplan does not compute for the family is refused at its line (3), one
 * accepted and one refused per family kind (SwiGLU, GELU, ReLU). */
static void test_activation(void **state)
{
    (void)state;
    static const char *const heads[] = {
        /* 0 llama */
        "\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
        "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100",
        /* 1 mixtral */
        "\"model_type\": \"mixtral\", \"num_local_experts\": 8, \"num_experts_per_tok\": 2, "
        "\"num_hidden_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, "
        "\"intermediate_size\": 32, \"vocab_size\": 100",
        /* 2 gpt2 */
        "\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
        "\"vocab_size\": 100",
        /* 3 bert */
        "\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
        "\"num_attention_heads\": 4, \"intermediate_size\": 32, \"vocab_size\": 100",
        /* 4 t5 1.0 (ReLU) */
        "\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, \"num_heads\": 4, "
        "\"d_kv\": 16, \"d_ff\": 32, \"vocab_size\": 100, \"feed_forward_proj\": \"relu\"",
    };
    static const hf_case cases[] = {
        {0, "\"hidden_act\": \"silu\"", NULL},
        {0, "\"hidden_act\": \"swish\"", NULL},
        {0, "\"hidden_act\": \"gelu\"", "hidden_act"},
        {0, "\"hidden_activation\": \"gelu_pytorch_tanh\"", "hidden_activation"},
        {0, "\"hidden_act\": 1", "hidden_act"},
        {1, "\"hidden_act\": \"silu\"", NULL},
        {1, "\"hidden_act\": \"relu\"", "hidden_act"},
        {2, "\"activation_function\": \"gelu_new\"", NULL},
        {2, "\"activation_function\": \"gelu_pytorch_tanh\"", NULL},
        {2, "\"activation_function\": \"relu\"", "activation_function"},
        {2, "\"activation_function\": \"gelu_fast\"", "activation_function"},
        {3, "\"hidden_act\": \"gelu\"", NULL},
        {3, "\"hidden_act\": \"quick_gelu\"", "hidden_act"},
        {3, "\"hidden_act\": \"silu\"", "hidden_act"},
        {4, "\"hidden_act\": \"relu\"", NULL},
        {4, "\"hidden_act\": \"gelu\"", "hidden_act"},
        /* two keys naming different GELUs contradict each other */
        {2, "\"activation_function\": \"gelu_new\", \"hidden_act\": \"gelu\"",
         "activation_function"}, /* read after hidden_act */
        {3, "\"hidden_act\": \"gelu\", \"hidden_activation\": \"gelu\"", NULL},
    };
    check_hf_cases(heads, "\"pad\": 0", cases, sizeof cases / sizeof cases[0]);
}

/* Each GELU name read exactly: "gelu" is the exact erf GELU (BERT's
 * default), "gelu_new" / "gelu_pytorch_tanh" its tanh form (GPT-2's
 * default); a family without the key gets transformers' default. */
static void test_gelu_forms(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        mp_activation want;
    } cases[] = {
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
         "\"vocab_size\": 100}", MP_ACT_GELU},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
         "\"vocab_size\": 100, \"activation_function\": \"gelu\"}", MP_ACT_GELU_ERF},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 64, \"n_head\": 4, "
         "\"vocab_size\": 100, \"activation_function\": \"gelu_pytorch_tanh\"}", MP_ACT_GELU},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 100}", MP_ACT_GELU_ERF},
        {"{\"model_type\": \"bert\", \"num_hidden_layers\": 2, \"hidden_size\": 64, "
         "\"num_attention_heads\": 4, \"vocab_size\": 100, \"hidden_act\": \"gelu_new\"}",
         MP_ACT_GELU},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_model m;
        mp_error err;
        mp_error_clear(&err);
        if (mp_model_parse_hf_json(cases[i].json, strlen(cases[i].json), "c.json", &m, &err))
            fail_msg("case %zu refused: %s: %s", i, err.field, err.msg);
        if (m.activation != cases[i].want)
            fail_msg("case %zu: %s, expected %s", i, mp_activation_name(m.activation),
                     mp_activation_name(cases[i].want));
    }
    mp_model m;
    mp_error err;
    assert_int_equal(load("bert-config.json", &m, &err), MP_OK); /* hidden_act "gelu" */
    assert_int_equal(m.activation, MP_ACT_GELU_ERF);
    assert_int_equal(load("gpt2-config.json", &m, &err), MP_OK); /* "gelu_new" */
    assert_int_equal(m.activation, MP_ACT_GELU);
}

/* T5's MLP from feed_forward_proj, with dense_act_fn and is_gated_act held
 * to it (transformers' T5Config): the accepted spellings give their
 * activation, a contradiction is refused at the contradicting key. */
static void test_t5_activation(void **state)
{
    (void)state;
    const char *head = "{\"model_type\": \"t5\", \"num_layers\": 2, \"d_model\": 64, "
                       "\"num_heads\": 4, \"d_kv\": 16, \"d_ff\": 32, \"vocab_size\": 100";
    static const struct {
        const char *keys;
        int want;          /* the activation, or -1: refused */
        const char *field; /* where */
    } cases[] = {
        {"", MP_ACT_RELU, NULL},
        {"\"feed_forward_proj\": \"relu\", \"dense_act_fn\": \"relu\", "
         "\"is_gated_act\": false", MP_ACT_RELU, NULL},
        {"\"feed_forward_proj\": \"gelu\"", MP_ACT_GELU_ERF, NULL},
        {"\"feed_forward_proj\": \"gelu_new\"", MP_ACT_GELU, NULL},
        {"\"feed_forward_proj\": \"gated-gelu\"", MP_ACT_GEGLU, NULL},
        {"\"feed_forward_proj\": \"gated-gelu\", \"dense_act_fn\": \"gelu_new\", "
         "\"is_gated_act\": true", MP_ACT_GEGLU, NULL},
        {"\"feed_forward_proj\": \"gated-gelu_new\"", MP_ACT_GEGLU, NULL},
        {"\"feed_forward_proj\": \"gated-gelu_pytorch_tanh\"", MP_ACT_GEGLU, NULL},
        {"\"feed_forward_proj\": \"gated-silu\", \"dense_act_fn\": \"silu\"", MP_ACT_SWIGLU,
         NULL},
        {"\"feed_forward_proj\": \"gated-swish\"", MP_ACT_SWIGLU, NULL},
        /* contradictions and functions megaplan does not compute */
        {"\"feed_forward_proj\": \"gated-gelu\", \"dense_act_fn\": \"gelu\"", -1,
         "dense_act_fn"},
        {"\"feed_forward_proj\": \"gated-gelu\", \"is_gated_act\": false", -1,
         "is_gated_act"},
        {"\"feed_forward_proj\": \"relu\", \"is_gated_act\": true", -1, "is_gated_act"},
        {"\"feed_forward_proj\": \"relu\", \"dense_act_fn\": \"gelu_new\"", -1,
         "dense_act_fn"},
        {"\"dense_act_fn\": \"silu\"", -1, "dense_act_fn"},
        {"\"feed_forward_proj\": \"silu\"", -1, "feed_forward_proj"},
        {"\"feed_forward_proj\": \"gated-relu\"", -1, "feed_forward_proj"},
        {"\"feed_forward_proj\": \"gated-gelu-new\"", -1, "feed_forward_proj"},
        {"\"feed_forward_proj\": \"gated-quick_gelu\"", -1, "feed_forward_proj"},
        {"\"feed_forward_proj\": \"gated-gelu\", \"is_gated_act\": 1", -1, "is_gated_act"},
        {"\"feed_forward_proj\": \"gated-gelu\", \"hidden_act\": \"gelu\"", -1, "hidden_act"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "%s%s%s}", head, cases[i].keys[0] ? ",\n" : "",
                 cases[i].keys);
        mp_model m;
        mp_error err;
        mp_error_clear(&err);
        mp_status st = mp_model_parse_hf_json(json, strlen(json), "c.json", &m, &err);
        if (cases[i].want >= 0) {
            if (st != MP_OK)
                fail_msg("case %zu refused: %s: %s", i, err.field, err.msg);
            if ((int)m.activation != cases[i].want)
                fail_msg("case %zu: %s, expected %s", i, mp_activation_name(m.activation),
                         mp_activation_name((mp_activation)cases[i].want));
            continue;
        }
        if (st != MP_EINPUT)
            fail_msg("case %zu (%s) accepted", i, cases[i].keys);
        if (strcmp(err.field, cases[i].field))
            fail_msg("case %zu: field '%s' (%s), expected '%s'", i, err.field, err.msg,
                     cases[i].field);
        assert_int_equal(err.line, 2);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2), cmocka_unit_test(test_llama), cmocka_unit_test(test_bert),
        cmocka_unit_test(test_t5),   cmocka_unit_test(test_errors),
        cmocka_unit_test(test_moe_families), cmocka_unit_test(test_gpt_oss),
        cmocka_unit_test(test_rope_fields), cmocka_unit_test(test_deepseek_yarn),
        cmocka_unit_test(test_qwen3_qk_norm), cmocka_unit_test(test_norm_eps),
        cmocka_unit_test(test_moe_math_keys), cmocka_unit_test(test_activation),
        cmocka_unit_test(test_t5_gated),      cmocka_unit_test(test_gelu_forms),
        cmocka_unit_test(test_t5_activation), cmocka_unit_test(test_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
