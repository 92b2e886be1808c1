/* The YAML loader and the model / hardware readers: every error names the
 * origin, the exact line and column, and the dotted field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/decode.h"
#include "core/io.h"
#include "core/yaml_tree.h"

static const char *data_dir = "tests/core/data";

#define EXPECT_ERR(err_, line_, col_, field_, msg_part_)                                   \
    do {                                                                                  \
        assert_int_equal((err_).code, MP_EINPUT);                                         \
        assert_string_equal((err_).file, "t.yaml");                                       \
        assert_int_equal((err_).line, (line_));                                           \
        assert_int_equal((err_).column, (col_));                                          \
        assert_string_equal((err_).field, (field_));                                      \
        if (!strstr((err_).msg, (msg_part_)))                                             \
            fail_msg("message '%s' lacks '%s'", (err_).msg, (msg_part_));                \
    } while (0)

static mp_status model(const char *text, mp_model *m, mp_error *err)
{
    mp_error_clear(err);
    return mp_model_parse_yaml(text, strlen(text), "t.yaml", m, err);
}

static void test_loader_positions(void **state)
{
    (void)state;
    const char *text = "a: 1\nb:\n  c: [x, \"y\"]\n  d: {e: 2}\n";
    mp_ynode *root = NULL;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_yaml_load(text, strlen(text), "t.yaml", &root, &err), MP_OK);
    assert_non_null(root);
    assert_int_equal(root->kind, MP_Y_MAP);
    assert_int_equal(root->n, 2);
    const mp_ynode *c = mp_ynode_at(root, "b.c");
    assert_non_null(c);
    assert_int_equal(c->kind, MP_Y_SEQ);
    assert_int_equal(c->line, 3);
    assert_int_equal(c->column, 6);
    assert_true(c->items[0]->plain);
    assert_false(c->items[1]->plain);
    const mp_ynode *e = mp_ynode_at(root, "b.d.e");
    assert_non_null(e);
    assert_string_equal(e->text, "2");
    assert_int_equal(e->line, 4);
    assert_int_equal(e->column, 10);
    assert_null(mp_ynode_at(root, "b.x"));
    mp_yaml_free(root);
}

static void test_loader_errors(void **state)
{
    (void)state;
    const struct {
        const char *text;
        int line, col;
        const char *msg;
    } cases[] = {
        {"a: [1, 2\nb: 3\n", 2, 2, "syntax"},           /* truncated flow list */
        {"a: 1\n b: 2\n", 2, 3, "syntax"},              /* bad indentation */
        {"a: &x 1\nb: *x\n", 2, 4, "aliases"},          /* aliases refused */
        {"a: 1\n---\nb: 2\n", 2, 1, "more than one"},   /* two documents */
        {"a: \"open\n", 2, 1, "syntax"},                /* unterminated string */
        {"[1, 2]: x\n", 1, 1, "key"},                   /* non-scalar key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_ynode *root = NULL;
        mp_error err;
        mp_error_clear(&err);
        mp_status st = mp_yaml_load(cases[i].text, strlen(cases[i].text), "t.yaml", &root, &err);
        if (st != MP_EINPUT)
            fail_msg("case %zu: expected an error", i);
        assert_null(root);
        assert_string_equal(err.file, "t.yaml");
        if (err.line != cases[i].line || err.column != cases[i].col)
            fail_msg("case %zu: at %d:%d, expected %d:%d (%s)", i, err.line, err.column,
                     cases[i].line, cases[i].col, err.msg);
        if (!strstr(err.msg, cases[i].msg))
            fail_msg("case %zu: message '%s'", i, err.msg);
    }
    /* deep nesting is refused, not a stack overflow */
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = '\0';
    mp_ynode *root = NULL;
    mp_error err;
    assert_int_equal(mp_yaml_load(deep, strlen(deep), "t.yaml", &root, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "nested"));
    /* empty documents load as nothing */
    assert_int_equal(mp_yaml_load("", 0, "t.yaml", &root, &err), MP_OK);
    assert_null(root);
}

static void test_model_ok(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(model("name: tiny\narch: llama\nlayers: 4\nhidden: 256\nheads: 8\n"
                           "kv_heads: 2\nvocab: 1000\nseq: 128\n",
                           &m, &err),
                     MP_OK);
    assert_string_equal(m.name, "tiny");
    assert_int_equal(m.arch, MP_ARCH_LLAMA);
    /* llama defaults follow the arch; sizes derive */
    assert_int_equal(m.activation, MP_ACT_SWIGLU);
    assert_int_equal(m.norm, MP_NORM_RMSNORM);
    assert_int_equal(m.position, MP_POS_ROPE);
    assert_false(m.tied_embeddings);
    assert_int_equal(m.head_dim, 32);
    assert_int_equal(m.kv_heads, 2);
    assert_int_equal(m.ffn_hidden, 768); /* 8h/3 = 682 rounded up to 256 */
    /* no name: the file's */
    assert_int_equal(model("arch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\n",
                           &m, &err),
                     MP_OK);
    assert_string_equal(m.name, "t");
    assert_int_equal(m.ffn_hidden, 256);
    assert_true(m.tied_embeddings);
    assert_int_equal(m.activation, MP_ACT_GELU); /* GPT-2's gelu_new: tanh */
    /* BERT's default GELU is the exact (erf) one, as BertConfig and Megatron run it */
    assert_int_equal(model("arch: bert\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\n",
                           &m, &err),
                     MP_OK);
    assert_int_equal(m.activation, MP_ACT_GELU_ERF);
    /* t5 sums its layers */
    assert_int_equal(model("arch: t5\nencoder_layers: 2\ndecoder_layers: 3\nhidden: 64\n"
                           "heads: 4\nvocab: 100\nencoder_seq: 64\ndecoder_seq: 16\n",
                           &m, &err),
                     MP_OK);
    assert_int_equal(m.layers, 5);
    assert_int_equal(m.seq, 64);
    assert_int_equal(m.activation, MP_ACT_RELU);
}

/* Each activation spelling (docs/formats.md "Activations") reads as its
 * own function and writes back as it was spelled; gated ones (three FFN
 * matrices) get LLaMA's 8h/3 default width; an unknown one is refused. */
static void test_model_activations(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        mp_activation act;
        bool gated, erf;
    } acts[] = {
        {"gelu", MP_ACT_GELU, false, false},      {"gelu_erf", MP_ACT_GELU_ERF, false, true},
        {"swiglu", MP_ACT_SWIGLU, true, false},   {"geglu", MP_ACT_GEGLU, true, false},
        {"geglu_erf", MP_ACT_GEGLU_ERF, true, true}, {"relu", MP_ACT_RELU, false, false},
    };
    assert_int_equal(sizeof acts / sizeof acts[0], MP_ACT_COUNT);
    mp_model m;
    mp_error err;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        char text[160];
        snprintf(text, sizeof text,
                 "arch: gpt\nlayers: 2\nhidden: 96\nheads: 4\nvocab: 100\nseq: 64\n"
                 "activation: %s\n", acts[i].name);
        assert_int_equal(model(text, &m, &err), MP_OK);
        assert_int_equal(m.activation, acts[i].act);
        assert_string_equal(mp_activation_name(m.activation), acts[i].name);
        assert_int_equal(mp_activation_is_gated(m.activation), acts[i].gated);
        assert_int_equal(mp_activation_is_erf(m.activation), acts[i].erf);
        /* gated: 8h/3 = 256 rounded up to 256; else 4h = 384 */
        assert_int_equal(m.ffn_hidden, acts[i].gated ? 256 : 384);
    }
    assert_int_equal(model("arch: gpt\nlayers: 2\nhidden: 96\nheads: 4\nvocab: 100\nseq: 64\n"
                           "activation: gelu_tanh\n", &m, &err),
                     MP_EINPUT);
    assert_string_equal(err.field, "activation");
}

/* norm_eps: each architecture's default when absent (GPT-2's and Llama 2's
 * 1e-5, BERT's 1e-12, T5's 1e-6), the file's value when given, refused
 * at its line and column when not positive, not below 1 or not a number;
 * a model built in code with none gets its architecture's from finishing. */
static void test_model_norm_eps(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    const struct {
        const char *arch;
        double eps;
    } defaults[] = {{"gpt", 1e-5}, {"llama", 1e-5}, {"bert", 1e-12}, {"t5", 1e-6}};
    char text[512];
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) {
        snprintf(text, sizeof text, "arch: %s\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\n"
                 "seq: 32\n", defaults[i].arch);
        assert_int_equal(model(text, &m, &err), MP_OK);
        if (m.norm_eps != defaults[i].eps)
            fail_msg("%s: norm_eps %g, expected %g", defaults[i].arch, m.norm_eps,
                     defaults[i].eps);
        assert_true(mp_model_default_norm_eps(m.arch) == defaults[i].eps);
    }
    const char *base = "arch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\n";
    snprintf(text, sizeof text, "%snorm_eps: 1e-6\n", base); /* Qwen3, DeepSeek-V3 */
    assert_int_equal(model(text, &m, &err), MP_OK);
    assert_true(m.norm_eps == 1e-6);
    snprintf(text, sizeof text, "arch: bert\nnorm_eps: 0.5\nlayers: 2\nhidden: 64\nheads: 4\n"
             "vocab: 100\nseq: 32\n");
    assert_int_equal(model(text, &m, &err), MP_OK);
    assert_true(m.norm_eps == 0.5);
    snprintf(text, sizeof text, "%snorm_eps: 0\n", base);
    assert_int_equal(model(text, &m, &err), MP_EINPUT);
    EXPECT_ERR(err, 7, 11, "norm_eps", "must be positive (got 0)");
    snprintf(text, sizeof text, "%snorm_eps: -1e-5\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 11, "norm_eps", "must be positive");
    snprintf(text, sizeof text, "%snorm_eps: 1\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 11, "norm_eps", "must be less than 1 (got 1)");
    snprintf(text, sizeof text, "%snorm_eps: 1e300\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 11, "norm_eps", "must be less than 1");
    snprintf(text, sizeof text, "%snorm_eps: small\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 11, "norm_eps", "expected a number");
    snprintf(text, sizeof text, "%snorm_eps: .nan\n", base);
    assert_int_equal(model(text, &m, &err), MP_EINPUT);
    assert_string_equal(err.field, "norm_eps");
    /* built in code: 0 is the architecture's, a bad value is refused */
    mp_model c = {.arch = MP_ARCH_T5, .encoder_layers = 1, .decoder_layers = 1, .hidden = 64,
                  .heads = 4, .vocab = 100, .seq = 32, .activation = MP_ACT_RELU,
                  .norm = MP_NORM_RMSNORM, .position = MP_POS_RELATIVE};
    assert_int_equal(mp_model_finish(&c, &err), MP_OK);
    assert_true(c.norm_eps == 1e-6);
    c.norm_eps = 2.0;
    assert_int_equal(mp_model_finish(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "norm_eps");
}

static void test_model_errors(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    const char *base = "arch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\n";
    char text[512];

    snprintf(text, sizeof text, "%sseq: 32\nhiden: 5\n", base);
    assert_int_equal(model(text, &m, &err), MP_EINPUT);
    EXPECT_ERR(err, 7, 1, "hiden", "did you mean 'hidden'");

    snprintf(text, sizeof text, "%sseq: thirty\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "expected an integer");

    snprintf(text, sizeof text, "%sseq: [32]\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "got a list");

    snprintf(text, sizeof text, "%sseq: 0\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "at least 1");

    snprintf(text, sizeof text, "%sseq: -5\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "at least 1");

    snprintf(text, sizeof text, "%sseq: 99999999999999999999999\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "overflows");

    snprintf(text, sizeof text, "%sseq: 1000000000000\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "too large");
    /* integers print in full, not as 4.1943e+06 */
    snprintf(text, sizeof text, "%sseq: 5644901\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 6, 6, "seq", "too large: at most 4194304 (got 5644901)");

    snprintf(text, sizeof text, "%sseq: 32\ntied_embeddings: maybe\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 18, "tied_embeddings", "true or false");

    snprintf(text, sizeof text, "%sseq: 32\nactivation: tanh\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 13, "activation", "gelu|swiglu|relu");

    snprintf(text, sizeof text, "%sseq: 32\nheads: 4\n", base);
    model(text, &m, &err);
    EXPECT_ERR(err, 7, 1, "heads", "duplicate");

    /* validation after reading still points at the field's line */
    model("arch: gpt\nlayers: 2\nhidden: 64\nheads: 6\nvocab: 100\nseq: 32\n", &m, &err);
    EXPECT_ERR(err, 4, 8, "heads", "must divide hidden");
    model("arch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nkv_heads: 3\nvocab: 100\nseq: 32\n", &m,
          &err);
    EXPECT_ERR(err, 5, 11, "kv_heads", "must divide heads");
    model("arch: gpt\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\nencoder_layers: 2\n",
          &m, &err);
    EXPECT_ERR(err, 7, 17, "encoder_layers", "only for arch t5");
    /* absurd sizes that would overflow the cost model are refused */
    model("arch: gpt\nlayers: 2048\nhidden: 1048576\nheads: 64\nvocab: 100\nseq: 32\n", &m, &err);
    assert_int_equal(err.code, MP_EINPUT);
    assert_non_null(strstr(err.msg, "absurd"));

    /* a missing required field is reported at the mapping */
    model("arch: gpt\nlayers: 2\nheads: 4\nvocab: 100\nseq: 32\n", &m, &err);
    EXPECT_ERR(err, 1, 1, "hidden", "missing");
    model("arch: gpt\nhidden: 64\nheads: 4\nvocab: 100\nseq: 32\n", &m, &err);
    EXPECT_ERR(err, 1, 1, "layers", "missing");
    /* not a mapping at all */
    model("- 1\n- 2\n", &m, &err);
    assert_int_equal(err.code, MP_EINPUT);
    assert_int_equal(err.line, 1);
    model("", &m, &err);
    assert_int_equal(err.code, MP_EINPUT);
}

static const char *hw_text =
    "name: t\nmemory: 16 GiB\nhbm_bw: 1 TB/s\npeak_flops: {bf16: 100 TFLOP/s}\n"
    "gemm_efficiency: [[1e9, 0.5], [1e12, 0.8]]\nmemory_efficiency: 0.7\n"
    "attention_efficiency: 0.5\ngpus_per_node: 8\n"
    "scale_up:\n  gpus_per_domain: 8\n  bw_per_gpu: 300 GB/s\n  latency: 2 us\n  efficiency: 0.8\n"
    "scale_out: {gpus_per_domain: 0, bw_per_gpu: 200 Gb/s, latency: 10 us, efficiency: 0.8}\n"
    "runtime_reserve: 2 GiB\nkernel_overhead: 5 us\n";

static mp_status hw_with(const char *from, const char *to, mp_hw *hw, mp_error *err)
{
    char text[2048];
    const char *at = strstr(hw_text, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - hw_text), hw_text, to, at + strlen(from));
    mp_error_clear(err);
    return mp_hw_parse_yaml(text, strlen(text), "t.yaml", hw, err);
}

static void test_hw_errors(void **state)
{
    (void)state;
    mp_hw hw;
    mp_error err;
    assert_int_equal(hw_with("name: t", "name: t", &hw, &err), MP_OK);
    assert_true(hw.scale_out.bw_per_gpu == 25e9);
    assert_true(hw.memory == 16.0 * 1073741824.0);
    assert_true(hw.peak_flops[MP_DTYPE_FP32] == 0);

    hw_with("  latency: 2 us", "  latency: 2 parsecs", &hw, &err);
    EXPECT_ERR(err, 12, 12, "scale_up.latency", "a time");
    hw_with("  bw_per_gpu: 300 GB/s", "  bw_per_gpux: 300 GB/s", &hw, &err);
    EXPECT_ERR(err, 11, 3, "scale_up.bw_per_gpux", "did you mean 'bw_per_gpu'");
    hw_with("memory: 16 GiB", "memory: -16 GiB", &hw, &err);
    EXPECT_ERR(err, 2, 9, "memory", "positive");
    hw_with("memory: 16 GiB", "memory: 1e30 GiB", &hw, &err);
    EXPECT_ERR(err, 2, 9, "memory", "too large");
    hw_with("memory_efficiency: 0.7", "memory_efficiency: 1.5", &hw, &err);
    EXPECT_ERR(err, 6, 20, "memory_efficiency", "at most 1");
    hw_with("[[1e9, 0.5], [1e12, 0.8]]", "[[1e12, 0.5], [1e9, 0.8]]", &hw, &err);
    EXPECT_ERR(err, 5, 32, "gemm_efficiency", "increase");
    hw_with("[[1e9, 0.5], [1e12, 0.8]]", "[[1e9, 0.5], [1e12]]", &hw, &err);
    EXPECT_ERR(err, 5, 31, "gemm_efficiency", "[x, y]");
    hw_with("gpus_per_node: 8", "gpus_per_node: 0", &hw, &err);
    EXPECT_ERR(err, 8, 16, "gpus_per_node", "at least 1");
    hw_with("scale_out: {", "scale_out: {foo: 1, ", &hw, &err);
    EXPECT_ERR(err, 14, 13, "scale_out.foo", "unknown key");
    hw_with("scale_out: {", "scale_out: 7\nx: {", &hw, &err);
    EXPECT_ERR(err, 14, 12, "scale_out", "mapping");
    hw_with("runtime_reserve: 2 GiB", "runtime_reserve: 20 GiB", &hw, &err);
    EXPECT_ERR(err, 15, 18, "runtime_reserve", "less than memory");
    hw_with("name: t\n", "", &hw, &err);
    EXPECT_ERR(err, 1, 1, "name", "missing");
    hw_with("  efficiency: 0.8\n", "", &hw, &err);
    EXPECT_ERR(err, 10, 3, "scale_up.efficiency", "missing");
    /* SM contention: NCCL's CTAs are a share of the GPU's SMs */
    assert_int_equal(hw_with("kernel_overhead: 5 us", "kernel_overhead: 5 us\nsm_count: 132\n"
                             "nccl_ctas: 16", &hw, &err), MP_OK);
    assert_true(hw.sm_count == 132 && hw.nccl_ctas == 16);
    assert_int_equal(hw_with("kernel_overhead: 5 us", "kernel_overhead: 5 us\nnccl_ctas: 16",
                             &hw, &err), MP_EINPUT);
    assert_string_equal(err.field, "nccl_ctas");
    assert_non_null(strstr(err.msg, "sm_count"));
    assert_int_equal(hw_with("kernel_overhead: 5 us", "kernel_overhead: 5 us\nsm_count: 8\n"
                             "nccl_ctas: 16", &hw, &err), MP_EINPUT);
    assert_string_equal(err.field, "nccl_ctas");
    assert_int_equal(hw_with("kernel_overhead: 5 us", "kernel_overhead: 5 us\nsm_count: -1",
                             &hw, &err), MP_EINPUT);
    assert_string_equal(err.field, "sm_count");
}

static void test_hw_overrides(void **state)
{
    (void)state;
    mp_hw hw;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(hw_with("name: t", "name: t", &hw, &err), MP_OK);
    assert_int_equal(mp_hw_set_field(&hw, "scale_out.bw_per_gpu", "400 Gb/s", &err), MP_OK);
    assert_true(hw.scale_out.bw_per_gpu == 50e9);
    assert_int_equal(mp_hw_set_field(&hw, "gemm_efficiency", "[[1e9, 0.3], [1e11, 0.9]]", &err),
                     MP_OK);
    assert_int_equal(hw.gemm_efficiency.n, 2);
    assert_true(hw.gemm_efficiency.y[1] == 0.9);
    assert_int_equal(mp_hw_set_field(&hw, "peak_flops.fp8", "2 PFLOP/s", &err), MP_OK);
    assert_true(hw.peak_flops[MP_DTYPE_FP8] == 2e15);
    assert_int_equal(mp_hw_set_field(&hw, "scale_out.bw_per_gpux", "1", &err), MP_EINPUT);
    assert_string_equal(err.field, "scale_out.bw_per_gpux");
    assert_non_null(strstr(err.msg, "scale_out.bw_per_gpu"));
    assert_int_equal(mp_hw_set_field(&hw, "memory", "lots", &err), MP_EINPUT);
    assert_string_equal(err.field, "memory");
    assert_int_equal(mp_hw_set_field(&hw, "gemm_efficiency", "[[1e9", &err), MP_EINPUT);
    assert_int_equal(mp_hw_set_field(&hw, "memory_efficiency", "0", &err), MP_EINPUT);
    assert_int_equal(mp_hw_finish(&hw, &err), MP_OK);
}

static void test_curve(void **state)
{
    (void)state;
    mp_curve c = {.n = 3, .x = {1e9, 1e10, 1e12}, .y = {0.2, 0.6, 0.8}};
    assert_true(mp_curve_eval(&c, 1e6) == 0.2);  /* clamped low */
    assert_true(mp_curve_eval(&c, 1e15) == 0.8); /* clamped high */
    assert_true(mp_curve_eval(&c, 1e10) == 0.6);
    double mid = mp_curve_eval(&c, 1e11); /* halfway in log between 1e10 and 1e12 */
    assert_true(mid > 0.699 && mid < 0.701);
    double q = mp_curve_eval(&c, 3.1622776601683795e9); /* 10^9.5 */
    assert_true(q > 0.399 && q < 0.401);
    mp_curve one = {.n = 1, .x = {1}, .y = {0.5}};
    assert_true(mp_curve_eval(&one, 1e20) == 0.5);
    assert_true(mp_curve_eval(&c, 0) == 0.2);
    assert_true(mp_curve_eval(&c, -1) == 0.2);
}

static void test_tiny_hw_file(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny-hw.yaml", data_dir);
    mp_hw hw;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_hw_load(path, &hw, &err), MP_OK);
    assert_string_equal(hw.name, "tiny");
    assert_true(hw.scale_out.bw_per_gpu == 25e9);
    assert_int_equal(hw.scale_out.nics_per_node, 4);
    assert_int_equal(hw.scale_up.nics_per_node, 0);
    assert_int_equal(mp_hw_load("no/such/file.yaml", &hw, &err), MP_EIO);
    assert_string_equal(err.file, "no/such/file.yaml");
}

/* The generic writer: whatever cJSON tree it writes reads back as the same
 * tree (strings that look like numbers, booleans or YAML syntax are quoted). */
static void test_writer_round_trip(void **state)
{
    (void)state;
    static const char *const strings[] = {
        "", "yes", "No", "null", "~", "true", "1f1b", "80 GiB", "12", "1e3", "0x10", "a: b",
        "- x", "#c", "x #c", " lead", "trail ", "quote\"s", "back\\slash", "tab\tx",
        "new\nline", "\xc3\xbc" "nic\xc3\xb6" "de", "[x]", "{y}", "&a", "*b", "!t", "|", ">", "%",
        "@", "`", "interleaved-1f1b", "gpt3-1.3b", "a,b", "2024-01-01", "1_000", ".inf",
        "\x01" "ctl", "12 GB/s", "1.5 TFLOP/s", "0 ", "x:", "-", "?",
    };
    static const double numbers[] = {0, -1, 1, 0.1, 1.0 / 3.0, 1e300, -1e-300, 9007199254740992.0,
                                     123456789012345678.0, 85899345920.0, 2039e9, 5.5e-6, 1e15,
                                     -2.5e16, 0.35};
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(root, "strings");
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        cJSON_AddItemToArray(list, cJSON_CreateString(strings[i]));
        char key[64];
        snprintf(key, sizeof key, "%s", strings[i]);
        if (key[0] && !cJSON_GetObjectItemCaseSensitive(root, key))
            cJSON_AddStringToObject(root, key, strings[i]); /* as keys too */
    }
    cJSON *nums = cJSON_AddArrayToObject(root, "numbers");
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        cJSON_AddItemToArray(nums, cJSON_CreateNumber(numbers[i]));
    cJSON *nested = cJSON_AddArrayToObject(root, "nested");
    cJSON *obj = cJSON_CreateObject();
    cJSON_AddItemToObject(obj, "inner", cJSON_CreateIntArray((int[]){1, 2}, 2));
    cJSON_AddItemToObject(obj, "empty_list", cJSON_CreateArray());
    cJSON_AddItemToObject(obj, "empty_map", cJSON_CreateObject());
    cJSON_AddItemToObject(obj, "null", cJSON_CreateNull());
    cJSON_AddItemToArray(nested, obj);
    cJSON *deeper = cJSON_CreateArray();
    cJSON_AddItemToArray(deeper, cJSON_CreateObject());
    cJSON_AddItemToArray(deeper, cJSON_CreateBool(false));
    cJSON_AddItemToArray(nested, deeper);

    mp_buf b;
    mp_buf_init(&b);
    mp_json_write_yaml(root, 0, &b);
    mp_ynode *tree = NULL;
    mp_error err;
    mp_error_clear(&err);
    if (mp_yaml_load(b.data, b.len, "w.yaml", &tree, &err) != MP_OK)
        fail_msg("%d:%d %s\n%s", err.line, err.column, err.msg, b.data);
    cJSON *back = mp_ynode_to_json(tree);
    if (!cJSON_Compare(back, root, true)) {
        char *a = cJSON_Print(back);
        fail_msg("differs:\n%s\n---\n%s", b.data, a);
    }
    /* numbers come back exactly, not just within cJSON's tolerance */
    cJSON *n2 = cJSON_GetObjectItemCaseSensitive(back, "numbers");
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
        assert_true(cJSON_GetArrayItem(n2, (int)i)->valuedouble == numbers[i]);
    cJSON_Delete(back);
    mp_yaml_free(tree);
    mp_buf_free(&b);
    cJSON_Delete(root);
}

/* A preset name means the preset even when a file of that name is here. */
static void test_load_precedence(void **state)
{
    (void)state;
    mp_model m;
    mp_error err;
    assert_int_equal(mp_model_load("175B", &m, &err), MP_OK);
    assert_string_equal(m.name, "gpt3-175b");
    assert_int_equal(mp_model_load("./175B", &m, &err), MP_EIO);
    assert_int_equal(mp_model_load("gpt3-175b.yaml", &m, &err), MP_EIO);
    assert_int_equal(mp_model_load("", &m, &err), MP_EINPUT);
    assert_int_equal(mp_model_load(NULL, &m, &err), MP_EINPUT);
    const char *junk = "{\"model_type\": \"gpt2\", \"n_layer\": 1, \"n_embd\": 8, \"n_head\": 2, "
                       "\"vocab_size\": 9} trailing";
    assert_int_equal(mp_model_parse_hf_json(junk, strlen(junk), "j.json", &m, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "after the end"));
    mp_hw hw;
    assert_int_equal(mp_hw_load("dgx-a100", &hw, &err), MP_OK);
    assert_int_equal(mp_hw_load("./dgx-a100", &hw, &err), MP_EIO);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_positions), cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_model_ok),         cmocka_unit_test(test_model_errors),
        cmocka_unit_test(test_model_norm_eps), cmocka_unit_test(test_model_activations),
        cmocka_unit_test(test_hw_errors),        cmocka_unit_test(test_hw_overrides),
        cmocka_unit_test(test_curve),            cmocka_unit_test(test_tiny_hw_file),
        cmocka_unit_test(test_writer_round_trip), cmocka_unit_test(test_load_precedence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
