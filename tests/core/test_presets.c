/* Presets: every model preset is valid and already complete (finishing it
 * changes nothing), names and aliases resolve, every built-in hardware
 * profile loads, validates and survives a write/read round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <strings.h>

#include "core/io.h"
#include "core/tables.h"

static void test_models_valid(void **state)
{
    (void)state;
    int n = 0;
    for (const mp_model *p; (p = mp_model_preset_at(n)); n++) {
        mp_model m = *p;
        mp_error err;
        mp_error_clear(&err);
        if (mp_model_finish(&m, &err) != MP_OK)
            fail_msg("%s: %s: %s", p->name, err.field, err.msg);
        if (memcmp(&m, p, sizeof m))
            fail_msg("%s: finishing changed the preset (incomplete entry)", p->name);
        assert_true(mp_model_preset_published_params(p->name) > 1e8);
        /* attention width = hidden, except where a paper says otherwise (T5) */
        if (p->arch != MP_ARCH_T5 && p->heads * p->head_dim != p->hidden &&
            strcmp(p->name, "qwen3-235b-a22b") && strncmp(p->name, "gpt-oss-", 8) &&
            !mp_model_is_mla(p))
            fail_msg("%s: heads %lld x head_dim %lld != hidden %lld", p->name,
                     (long long)p->heads, (long long)p->head_dim, (long long)p->hidden);
        assert_ptr_equal(mp_model_preset(p->name), p);
        /* names are lower case */
        for (const char *c = p->name; *c; c++)
            assert_false(*c >= 'A' && *c <= 'Z');
        for (int k = 0; k < n; k++)
            assert_string_not_equal(mp_model_preset_at(k)->name, p->name);
    }
    assert_true(n >= 40);
    assert_null(mp_model_preset_at(-1));
    assert_null(mp_model_preset_at(n));
}

static void test_names_and_aliases(void **state)
{
    (void)state;
    const struct {
        const char *name, *preset;
    } cases[] = {
        {"175B", "gpt3-175b"},        {"175b", "gpt3-175b"},       {"GPT3-175B", "gpt3-175b"},
        {"530B", "megatron-530b"},    {"1T", "megatron-1t"},       {"1t", "megatron-1t"},
        {"125M", "gpt3-125m"},        {"1.3B", "gpt3-1.3b"},       {"22B", "megatron-22b"},
        {"1.7B", "megatron-1.7b"},    {"145.6B", "megatron-145.6b"},
        {"llama3-70b", "llama3-70b"}, {"bert-large", "bert-large"}, {"t5-11b", "t5-11b"},
        {"7B", "llama2-7b"},          {"8b", "llama3-8b"},         {"405B", "llama3-405b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mp_model *m = mp_model_preset(cases[i].name);
        if (!m)
            fail_msg("%s: not found", cases[i].name);
        assert_string_equal(m->name, cases[i].preset);
    }
    assert_null(mp_model_preset("176B"));
    /* 70B is two LLaMAs: no alias, and --model names both */
    assert_null(mp_model_preset("70B"));
    mp_model m;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_model_load("70B", &m, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "did you mean llama2-70b or llama3-70b?"));
    /* every alias names one preset, and no preset's name */
    for (int i = 0; mp_model_preset_at(i); i++) {
        const char *alias = mp_model_preset_alias(mp_model_preset_at(i)->name);
        if (!alias)
            continue;
        assert_ptr_equal(mp_model_preset(alias), mp_model_preset_at(i));
        for (int j = 0; mp_model_preset_at(j); j++)
            if (j != i && mp_model_preset_alias(mp_model_preset_at(j)->name))
                assert_true(strcasecmp(alias, mp_model_preset_alias(mp_model_preset_at(j)->name)));
    }
    assert_null(mp_model_preset("gpt3"));
    assert_null(mp_model_preset(""));
    assert_null(mp_model_preset(NULL));
    assert_true(mp_model_preset_published_params("nope") == 0);
    assert_int_equal(mp_model_preset_global_batch("gpt3-175b"), 1536);
    assert_int_equal(mp_model_preset_global_batch("megatron-1t"), 3072);
}

static void test_model_shapes(void **state)
{
    (void)state;
    /* spot checks against the sources */
    const mp_model *m = mp_model_preset("gpt3-175b");
    assert_int_equal(m->layers, 96);
    assert_int_equal(m->hidden, 12288);
    assert_int_equal(m->heads, 96);
    assert_int_equal(m->ffn_hidden, 49152);
    assert_int_equal(m->vocab, 51200);
    m = mp_model_preset("megatron-1t");
    assert_int_equal(m->layers, 128);
    assert_int_equal(m->hidden, 25600);
    assert_int_equal(m->heads, 160);
    m = mp_model_preset("llama3-70b");
    assert_int_equal(m->kv_heads, 8);
    assert_int_equal(m->ffn_hidden, 28672);
    assert_int_equal(m->vocab, 128256);
    assert_false(m->tied_embeddings);
    assert_int_equal(m->activation, MP_ACT_SWIGLU);
    m = mp_model_preset("t5-11b");
    assert_int_equal(m->encoder_layers, 24);
    assert_int_equal(m->decoder_layers, 24);
    assert_int_equal(m->layers, 48);
    assert_int_equal(m->head_dim, 128);
    assert_int_equal(m->heads, 128);
    assert_int_equal(m->ffn_hidden, 65536);
    assert_int_equal(m->decoder_seq, 128);
    m = mp_model_preset("megatron-bert-3.9b");
    assert_int_equal(m->arch, MP_ARCH_BERT);
    assert_int_equal(m->hidden, 2560);
}

static void test_model_load_round_trip(void **state)
{
    (void)state;
    for (int i = 0; mp_model_preset_at(i); i++) {
        const mp_model *p = mp_model_preset_at(i);
        cJSON *j = mp_model_to_json(p);
        assert_non_null(j);
        mp_buf b;
        mp_buf_init(&b);
        mp_json_write_yaml(j, 0, &b);
        cJSON_Delete(j);
        mp_model back;
        mp_error err;
        mp_error_clear(&err);
        if (mp_model_parse_yaml(b.data, b.len, "rt.yaml", &back, &err) != MP_OK)
            fail_msg("%s: %s:%d: %s: %s\n%s", p->name, err.file, err.line, err.field, err.msg,
                     b.data);
        assert_memory_equal(&back, p, sizeof back);
        mp_buf_free(&b);
    }
}

/* The LLaMA presets' rotary bases are their released configs' rope_theta
 * (Llama 2: 10000; Llama 3: 500000), not the 10000 a missing one means. */
static void test_llama_rope_theta(void **state)
{
    (void)state;
    const char *two[] = {"llama2-7b", "llama2-13b", "llama2-70b"};
    const char *three[] = {"llama3-8b", "llama3-70b", "llama3-405b"};
    for (size_t i = 0; i < 3; i++) {
        assert_true(mp_model_preset(two[i])->attn.rope_theta == 10000.0);
        assert_true(mp_model_preset(three[i])->attn.rope_theta == 500000.0);
    }
}

static void test_hw_presets(void **state)
{
    (void)state;
    const char *expected[] = {"dgx-a100", "a100-4xhdr", "dgx-h100", "h200", "h800", "b200",
                              "gb200-nvl72"};
    assert_int_equal(mp_hw_preset_count(), 7);
    for (size_t i = 0; i < 7; i++) {
        mp_hw hw;
        mp_error err;
        mp_error_clear(&err);
        if (mp_hw_preset(expected[i], &hw, &err) != MP_OK)
            fail_msg("%s: %s:%d:%d: %s: %s", expected[i], err.file, err.line, err.column,
                     err.field, err.msg);
        assert_string_equal(hw.name, expected[i]);
        assert_int_equal(mp_hw_finish(&hw, &err), MP_OK);
        assert_true(hw.memory > hw.runtime_reserve);
        assert_true(hw.peak_flops[MP_DTYPE_BF16] > 0);
        /* both writers read back to the same profile */
        for (int units = 0; units < 2; units++) {
            cJSON *j = units ? mp_hw_to_json_units(&hw) : mp_hw_to_json(&hw);
            assert_non_null(j);
            mp_buf b;
            mp_buf_init(&b);
            mp_json_write_yaml(j, 0, &b);
            cJSON_Delete(j);
            mp_hw back;
            if (mp_hw_parse_yaml(b.data, b.len, "rt.yaml", &back, &err) != MP_OK)
                fail_msg("%s: %d:%d %s: %s\n%s", expected[i], err.line, err.column, err.field,
                         err.msg, b.data);
            assert_memory_equal(&back, &hw, sizeof hw);
            mp_buf_free(&b);
        }
    }
    for (int i = 0; i < mp_hw_preset_count(); i++)
        assert_non_null(mp_hw_preset_name(i));
    assert_null(mp_hw_preset_name(99));
    mp_hw hw;
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a1000", &hw, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "dgx-a100"));
    assert_int_equal(mp_hw_load("dgx-h100", &hw, &err), MP_OK);
    assert_true(hw.scale_up.bw_per_gpu == 450e9); /* NVLink 4: 450 GB/s each way */
    assert_true(hw.scale_out.bw_per_gpu == 50e9); /* NDR 400 Gb/s */
}

/* Each struct's field table covers the whole struct (all but padding), so a
 * field added to mp_hw / mp_model / ... without its table row is caught. */
static size_t uncovered(const mp_field *tab, size_t n, size_t struct_size)
{
    unsigned char covered[4096] = {0};
    assert_true(struct_size <= sizeof covered);
    for (size_t i = 0; i < n; i++) {
        size_t size = 0;
        switch (tab[i].type) {
        case MP_FT_INT:
        case MP_FT_DOUBLE:
            size = 8;
            break;
        case MP_FT_BOOL:
            size = 1;
            break;
        case MP_FT_ENUM:
            size = sizeof(int);
            break;
        case MP_FT_STRING:
            size = tab[i].size;
            break;
        case MP_FT_CURVE:
            size = sizeof(mp_curve);
            break;
        }
        assert_true(tab[i].offset + size <= struct_size);
        for (size_t k = 0; k < size; k++) {
            if (covered[tab[i].offset + k])
                fail_msg("%s overlaps another field", tab[i].path);
            covered[tab[i].offset + k] = 1;
        }
    }
    size_t holes = 0;
    for (size_t k = 0; k < struct_size; k++)
        holes += !covered[k];
    return holes;
}

static void test_tables_cover_structs(void **state)
{
    (void)state;
    size_t n;
    const mp_field *t = mp_hw_field_table(&n);
    /* the baselines are today's padding bytes (x86-64) */
    size_t h = uncovered(t, n, sizeof(mp_hw));
    if (h > 7)
        fail_msg("mp_hw has %zu bytes no table row covers: a field is missing in core/hw.c", h);
    t = mp_model_field_table(&n);
    h = uncovered(t, n, sizeof(mp_model));
    if (h > 11) /* 6 after tied_embeddings + linear_bias (one of them dropout_set, a flag
                   no file writes), 4 after moe.router, 1 after attn.rope_yarn */
        fail_msg("mp_model has %zu uncovered bytes (core/model.c)", h);
    t = mp_training_field_table(&n);
    h = uncovered(t, n, sizeof(mp_training));
    if (h > 8) /* after grad_reduce_bf16, fp8_param_gather, stack and low_precision_optimizer,
                  and 3 more since fp8_act_cache (a 4-byte enum) moved tokens on by 8 */
        fail_msg("mp_training has %zu uncovered bytes (core/config.c)", h);
    t = mp_parallel_field_table(&n);
    h = uncovered(t, n, sizeof(mp_parallel));
    /* padding (none after dist_opt, param_gather_sync,
     * overlap_param_gather_with_optimizer_step and defer_embedding_wgrad, which
     * took the byte left there, none after zero_runtime since flex_backend
     * (4 bytes) took them, the bools' after
     * tp_overlap's group), and the two lists io_plan.c reads and io_json.c
     * writes themselves: recompute_modules (4) and cuda_graph_scope (4); 2 more since
     * account_for_embedding and account_for_loss, two bools, moved the struct's end) */
    if (h > 17)
        fail_msg("mp_parallel has %zu uncovered bytes (core/config.c)", h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_valid),
        cmocka_unit_test(test_names_and_aliases),
        cmocka_unit_test(test_model_shapes),
        cmocka_unit_test(test_model_load_round_trip),
        cmocka_unit_test(test_llama_rope_theta),
        cmocka_unit_test(test_hw_presets),
        cmocka_unit_test(test_tables_cover_structs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
