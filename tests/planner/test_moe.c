/* test_moe.c — mixture-of-experts and latent-attention models: parameter
 * counts against the published totals and active counts, hand-counted
 * block parameters and FLOPs, which blocks are MoE, and the refusal of moe /
 * mla fields that would otherwise be silently dropped. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

/* Published totals are given to 3 significant figures (1%); active counts
 * to 2 (37B, 22B, 1.3B: up to 2% for a count just past the rounding edge). */
static void test_published_counts(void **state)
{
    (void)state;
    const char *names[] = {"mixtral-8x7b", "mixtral-8x22b", "qwen3-235b-a22b", "olmoe-1b-7b",
                           "deepseek-v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const mp_model *m = mp_model_preset(names[i]);
        assert_non_null(m);
        assert_true(mp_model_is_moe(m));
        double total = mp_model_params(m), active = mp_model_active_params(m);
        double pt = mp_model_preset_published_params(names[i]);
        double pa = mp_model_preset_published_active_params(names[i]);
        if (fabs(total / pt - 1.0) > 0.01 || fabs(active / pa - 1.0) > 0.02)
            fail_msg("%s: %.4g total / %.4g active, published %.4g / %.4g", names[i], total,
                     active, pt, pa);
    }
    /* a dense model: active == total, no published active figure */
    const mp_model *d = mp_model_preset("llama3-8b");
    assert_true(mp_model_active_params(d) == mp_model_params(d));
    assert_true(mp_model_preset_published_active_params("llama3-8b") == 0.0);
}

/* Mixtral 8x7B block by hand: Q,O 4096x4096; K,V 4096x1024; 8 experts of
 * 3 x 4096 x 14336; router 4096 x 8; two RMSNorms of 4096. */
static void test_mixtral_block_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("mixtral-8x7b");
    double attn = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024;
    double experts = 8.0 * 3 * 4096 * 14336, router = 4096.0 * 8, norms = 2.0 * 4096;
    assert_true(mp_block_params(m, MP_BLOCK_MOE) == attn + experts + router + norms);
    assert_true(mp_moe_mlp_params(m, true) == router + 2.0 * 3 * 4096 * 14336);
    /* forward FLOPs of one sequence: 2 s (attention matrices + router + 2
     * experts) + the attention core 4 s^2 a d; the head 2 s V h; x3 with backward */
    double s = 4096;
    double block = 2.0 * s * (attn + router + 2.0 * 3 * 4096 * 14336) + 4.0 * s * s * 4096;
    double want = 3.0 * (32 * block + 2.0 * s * 32000 * 4096);
    double got = mp_model_flops(m, 4096, 1);
    assert_true(fabs(got / want - 1.0) < 1e-12);
}

/* DeepSeek-V3's latent attention by hand (report §2.1.1 and §4.2). */
static void test_deepseek_mla_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("deepseek-v3");
    assert_true(mp_model_is_mla(m));
    double q = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192;
    double kv = 7168.0 * (512 + 64) + 512 + 512.0 * 128 * (128 + 128);
    double o = 128.0 * 128 * 7168;
    assert_true(mp_mla_attn_params(m) == q + kv + o);
    /* shared expert and 256 routed experts of 3 x 7168 x 2048, router 7168 x 256 */
    double e = 3.0 * 7168 * 2048;
    assert_true(mp_moe_mlp_params(m, false) == 7168.0 * 256 + 257 * e);
    assert_true(mp_moe_mlp_params(m, true) == 7168.0 * 256 + 9 * e);
    /* the attention core: QK^T at 192 per head, AV at 128 */
    mp_block_shape bs;
    mp_block_shape_of(m, 4096, 1, &bs);
    assert_true(mp_block_attn_core_fwd_flops(m, &bs) == 2.0 * 4096 * 4096 * 128 * (192 + 128));
}

static void test_moe_block_placement(void **state)
{
    (void)state;
    const mp_model *ds = mp_model_preset("deepseek-v3");
    mp_block_shape bs;
    for (int64_t i = 1; i <= ds->layers; i++) {
        mp_block_shape_of(ds, 0, i, &bs);
        assert_int_equal(bs.kind, i <= 3 ? MP_BLOCK_SELF : MP_BLOCK_MOE);
    }
    assert_int_equal(mp_model_moe_blocks(ds), 58);
    mp_model m = *mp_model_preset("olmoe-1b-7b");
    m.moe.layer_freq = 2; /* blocks 0, 2, 4, ...: Megatron's --moe-layer-freq 2 */
    assert_int_equal(mp_model_moe_blocks(&m), 8);
    assert_true(mp_model_block_is_moe(&m, 0) && !mp_model_block_is_moe(&m, 1));
    m.moe.first_dense = 1;
    assert_int_equal(mp_model_moe_blocks(&m), 7);
}

static void expect_refused(mp_model m, const char *field)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_model_finish(&m, &err) == MP_OK)
        fail_msg("accepted; expected an error on %s", field);
    assert_string_equal(err.field, field);
}

static void test_refusals(void **state)
{
    (void)state;
    mp_model dense = *mp_model_preset("llama3-8b");
    mp_model m = dense;
    m.moe.top_k = 2; /* experts missing: would silently plan a dense model */
    expect_refused(m, "moe.experts");
    m = dense;
    m.mla.v_head_dim = 128;
    expect_refused(m, "mla.kv_lora_rank");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.top_k = 9;
    expect_refused(m, "moe.top_k");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.top_k = 0;
    expect_refused(m, "moe.top_k");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.first_dense = 32;
    expect_refused(m, "moe.first_dense");
    m = *mp_model_preset("deepseek-v3");
    m.moe.route_groups = 7;
    expect_refused(m, "moe.route_groups");
    m = *mp_model_preset("deepseek-v3");
    m.head_dim = 128;
    expect_refused(m, "head_dim");
    m = *mp_model_preset("gpt3-125m");
    m.moe.experts = 8;
    m.moe.top_k = 2;
    assert_true(mp_model_finish(&m, &(mp_error){0}) == MP_OK); /* GELU experts are fine */
    m = *mp_model_preset("bert-base");
    m.moe.experts = 8;
    m.moe.top_k = 2;
    expect_refused(m, "moe.experts");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_counts),
        cmocka_unit_test(test_mixtral_block_by_hand),
        cmocka_unit_test(test_deepseek_mla_by_hand),
        cmocka_unit_test(test_moe_block_placement),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
