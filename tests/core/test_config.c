/* mp_config_check: each kind of configuration that cannot run is refused
 * with the field at fault and a reason that says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/io.h"

static mp_config base(void)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("gpt3-175b");
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 1024, .seq = 2048, .global_batch = 1536,
                               .precision = MP_DTYPE_BF16, .tokens = 3e11};
    c.parallel = (mp_parallel){.tp = 8, .pp = 8, .vpp = 1, .cp = 1, .dp = 16, .sp = true,
                               .micro_batch = 1, .recompute = MP_RECOMPUTE_SELECTIVE,
                               .dist_opt = true, .schedule = MP_SCHED_1F1B};
    return c;
}

static void expect(const mp_config *c, const char *field, const char *part)
{
    mp_error err;
    mp_error_clear(&err);
    mp_status st = mp_config_check(c, &err);
    if (!field) {
        if (st != MP_OK)
            fail_msg("refused: %s: %s", err.field, err.msg);
        return;
    }
    if (st != MP_EINPUT)
        fail_msg("accepted, expected %s: %s", field, part);
    assert_string_equal(err.field, field);
    if (!strstr(err.msg, part))
        fail_msg("message '%s' lacks '%s'", err.msg, part);
}

static void test_valid(void **state)
{
    (void)state;
    mp_config c = base();
    expect(&c, NULL, NULL);
    assert_int_equal(mp_config_microbatches(&c), 96);
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, NULL, NULL);
    c = base();
    c.parallel.tp = 1;
    c.parallel.sp = false;
    c.parallel.pp = 1;
    c.parallel.dp = 1024;
    c.training.global_batch = 2048;
    expect(&c, NULL, NULL);
    assert_int_equal(mp_config_microbatches(&c), 2);
}

static void test_refusals(void **state)
{
    (void)state;
    mp_config c = base();
    c.parallel.tp = 5; /* 96 heads */
    c.parallel.dp = 1024 / 40;
    expect(&c, "tp", "does not divide the 96 attention heads");

    c = base();
    c.model = *mp_model_preset("llama3-70b");
    c.training.seq = 8192;
    c.parallel.tp = 16;
    c.parallel.pp = 4;
    expect(&c, "tp", "key/value heads");

    c = base();
    c.training.gpus = 1000;
    expect(&c, "gpus", "not a multiple of tp*pp*cp");

    c = base();
    c.parallel.dp = 8;
    expect(&c, "dp", "but there are 1024 GPUs");

    c = base();
    c.training.global_batch = 1000;
    expect(&c, "global_batch", "multiple of micro_batch*dp");

    c = base();
    c.parallel.micro_batch = 5;
    expect(&c, "global_batch", "5*16");

    c = base();
    c.parallel.pp = 32; /* 96 layers, 32 stages: fine */
    c.parallel.dp = 4;
    expect(&c, NULL, NULL);
    c.parallel.pp = 64; /* Megatron's first/last-stage split: 17, 1 x 62, 17 */
    c.parallel.dp = 2;
    expect(&c, NULL, NULL);
    c.parallel.pp = 128; /* more stages than layers */
    c.parallel.dp = 1;
    expect(&c, "pp", "cannot be split");

    c = base();
    c.parallel.vpp = 5; /* 96 / (8*5), and 98 / 40: no split without an explicit layout */
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "vpp", "do not split into");
    c.parallel.pp = 2; /* (96 + 2) / (2*7): embedding and loss take a layer's place */
    c.parallel.vpp = 7;
    c.parallel.dp = 64;
    expect(&c, NULL, NULL);
    assert_int_equal(mp_blocks_before_stage(96, 14, 1), 6); /* embedding + 6 blocks */
    assert_int_equal(mp_blocks_before_stage(96, 14, 13), 90); /* 6 blocks + head last */
    /* Llama 3 405B as Meta ran it: 126 layers on pp 16, one fewer on the first and last */
    int64_t first, mid, last;
    assert_true(mp_uneven_split(126, 16, &first, &mid, &last));
    assert_true(first == 7 && mid == 8 && last == 7);
    assert_int_equal(mp_blocks_before_stage(126, 16, 1), 7);
    assert_int_equal(mp_blocks_before_stage(126, 16, 15), 119);

    c = base();
    c.parallel.vpp = 2;
    expect(&c, "schedule", "needs schedule interleaved-1f1b");
    c.parallel.vpp = 1;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "schedule", "needs vpp >= 2");

    c = base();
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    c.training.global_batch = 16 * 12; /* 12 micro-batches, pp 8 */
    expect(&c, "global_batch", "multiple of pp");

    c = base();
    c.parallel.pp = 1;
    c.parallel.vpp = 2;
    c.parallel.dp = 128;
    c.training.global_batch = 1536;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "vpp", "pp >= 2");

    c = base();
    c.parallel.tp = 1;
    c.parallel.dp = 128;
    c.training.global_batch = 1536;
    expect(&c, "sp", "needs tp > 1");

    c = base();
    c.parallel.tp_overlap = true;
    c.parallel.sp = false;
    expect(&c, "tp_overlap", "sp");

    c = base();
    c.training.seq = 4096; /* learned positions: 2048 */
    expect(&c, "seq", "learned positions");

    c = base();
    c.parallel.cp = 2;
    c.parallel.dp = 8;
    expect(&c, "cp", "fused (flash) attention"); /* dgx-a100: the unfused stack of 2021-22 */
    c.hw.flash_attention = true;
    expect(&c, NULL, NULL);
    c.training.seq = 2046;
    expect(&c, "cp", "2*cp");

    c = base();
    c.model = *mp_model_preset("t5-11b");
    c.training.seq = 512;
    c.parallel.tp = 8;
    c.parallel.pp = 4;
    c.parallel.cp = 2;
    c.parallel.dp = 16;
    c.training.global_batch = 128;
    c.hw.flash_attention = true;
    expect(&c, "cp", "GPT/LLaMA");

    c = base();
    c.training.precision = MP_DTYPE_TF32;
    expect(&c, "precision", "bf16, fp16, fp32 or fp8");
    /* dgx-a100 has no FP8 tensor cores: refused, naming the field */
    c.training.precision = MP_DTYPE_FP8;
    expect(&c, "precision", "no fp8 rate");
    c.training.precision = MP_DTYPE_FP16;
    c.hw.peak_flops[MP_DTYPE_FP16] = 0;
    expect(&c, "precision", "no fp16 rate");
    /* H100: fp8 runs with the Hopper recipes; mxfp8 needs Blackwell */
    c = base();
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &(mp_error){0}), MP_OK);
    c.hw.flash_attention = true;
    c.training.precision = MP_DTYPE_FP8;
    for (int r = MP_FP8_DELAYED; r <= MP_FP8_BLOCKWISE; r++) {
        c.training.fp8_recipe = (mp_fp8_recipe)r;
        expect(&c, NULL, NULL);
    }
    c.training.fp8_recipe = MP_FP8_MXFP8;
    expect(&c, "fp8_recipe", "Blackwell");
    assert_int_equal(mp_hw_preset("b200", &c.hw, &(mp_error){0}), MP_OK);
    expect(&c, NULL, NULL);

    c = base();
    c.parallel.schedule = MP_SCHED_ZBH1;
    expect(&c, NULL, NULL);

    c = base();
    c.parallel.tp = 0;
    expect(&c, "tp", "at least 1");
    c = base();
    c.parallel.micro_batch = -1;
    expect(&c, "micro_batch", "at least 1");
    c = base();
    c.training.gpus = 0;
    expect(&c, "gpus", "at least 1");
    /* products that would overflow int64 are refused, not wrapped */
    c = base();
    c.parallel.tp = 1 << 24;
    c.parallel.pp = 1 << 24;
    c.parallel.cp = 1 << 24;
    c.parallel.dp = 1 << 24;
    c.model.heads = c.model.kv_heads = 1 << 24;
    expect(&c, "gpus", "overflows");
}

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < MP_RECOMPUTE_COUNT; i++)
        assert_int_equal(mp_recompute_parse(mp_recompute_name((mp_recompute)i)), i);
    for (int i = 0; i < MP_SCHED_COUNT; i++)
        assert_int_equal(mp_schedule_parse(mp_schedule_name((mp_schedule_kind)i)), i);
    assert_int_equal(mp_schedule_parse("interleaved-1f1b"), MP_SCHED_INTERLEAVED);
    assert_int_equal(mp_schedule_parse("zb-h1"), MP_SCHED_ZBH1);
    assert_int_equal(mp_schedule_parse("1F1B"), -1);
    assert_int_equal(mp_recompute_parse(NULL), -1);
    assert_string_equal(mp_recompute_name((mp_recompute)99), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
