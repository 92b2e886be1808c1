/* test_qk_norm.c — Qwen3's QK-norm (attn.qk_norm) in the cost model: the
 * RMSNorm on this rank's query and key heads moves 4 bytes an element
 * forward and 6 backward (Transformer Engine's norm kernel, planner/compute.c),
 * in 2 and 4 launches; its saved input (2 bytes an element) and FP32
 * inverse RMS per head row are activation memory (planner/memory.c); its
 * scales are 2 x head_dim parameters a block; the model FLOPs (MFU) do not
 * change. By hand from docs/cost-model.md §12a. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "../config_fixture.h"

static mp_config qwen3_config(void)
{
    mp_config c = preset_config("qwen3-235b-a22b", "dgx-h100", 64, 256, MP_DTYPE_BF16);
    c.parallel.tp = 2;
    c.parallel.sp = true;
    c.parallel.dp = 32;
    c.parallel.ep = 32;
    c.parallel.micro_batch = 4; /* GPU-bound, not launch-bound */
    return c;
}

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * fabs(want))
        fail_msg("%s: %.9g, by hand %.9g", what, got, want);
}

static void test_preset_and_time(void **state)
{
    (void)state;
    mp_config c = qwen3_config();
    assert_true(c.model.attn.qk_norm); /* the preset says so (HF: qwen3_moe) */
    mp_config n = c;
    n.model.attn.qk_norm = false;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_block_time with, without;
    mp_block_time_of(&c, &bs, &with);
    mp_block_time_of(&n, &bs, &without);
    /* this rank's Q and K heads: 4 x 4096 tokens x (64 + 4) heads x 128 / t 2 */
    double elts = 4.0 * 4096 * (64 + 4) * 128 / 2.0;
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    near(with.fwd_compute - without.fwd_compute, 4.0 * elts / bw, "forward");
    near(with.bwd_compute - without.bwd_compute, 6.0 * elts / bw, "backward");
    /* the model FLOPs (MFU's numerator) are the same */
    assert_true(mp_model_flops(&c.model, 4096, 1) == mp_model_flops(&n.model, 4096, 1));
}

static void test_params_and_memory(void **state)
{
    (void)state;
    mp_config c = qwen3_config();
    mp_model n = c.model;
    n.attn.qk_norm = false;
    near(mp_block_params(&c.model, MP_BLOCK_MOE) - mp_block_params(&n, MP_BLOCK_MOE), 256.0,
         "parameters a block");
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    double a = mp_block_act_bytes(&c.model, &bs, 1.0, 2.0, 1.0, true, MP_RECOMPUTE_NONE, true);
    double b = mp_block_act_bytes(&n, &bs, 1.0, 2.0, 1.0, true, MP_RECOMPUTE_NONE, true);
    /* the norms' 16-bit inputs and an FP32 1/rms a head row, split over t 2 */
    double rows = 4096.0 * (64 + 4);
    near(a - b, (2.0 * rows * 128 + 4.0 * rows) / 2.0, "saved bytes");
    /* full recompute keeps the block's input alone either way */
    assert_true(mp_block_act_bytes(&c.model, &bs, 1.0, 2.0, 1.0, true, MP_RECOMPUTE_FULL, true) ==
                mp_block_act_bytes(&n, &bs, 1.0, 2.0, 1.0, true, MP_RECOMPUTE_FULL, true));
}

static void test_field_rules(void **state)
{
    (void)state;
    mp_model m = *mp_model_preset("gpt3-175b");
    m.attn.qk_norm = true;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_model_finish_attn(&m, &err), MP_EINPUT);
    assert_string_equal(err.field, "attn.qk_norm");
    m = *mp_model_preset("deepseek-v3");
    m.attn.qk_norm = true;
    mp_error_clear(&err);
    assert_int_equal(mp_model_finish_attn(&m, &err), MP_EINPUT);
    assert_string_equal(err.field, "attn.qk_norm");
    /* LLaMA, GPT-OSS and DeepSeek stay without */
    assert_false(mp_model_preset("llama3-70b")->attn.qk_norm);
    assert_false(mp_model_preset("gpt-oss-120b")->attn.qk_norm);
    assert_false(mp_model_preset("deepseek-v3")->attn.qk_norm);
    assert_false(mp_model_preset("mixtral-8x7b")->attn.qk_norm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preset_and_time),
        cmocka_unit_test(test_params_and_memory),
        cmocka_unit_test(test_field_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
