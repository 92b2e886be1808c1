/* test_optimizer_moments.c — training.optimizer_moments: Adam's moments in
 * 16 bits beside fp32 master weights (DeepSeek-V3 report §3.3.3,
 * "Low-Precision Optimizer States"; Megatron-Core's precision-aware optimizer,
 * --use-precision-aware-optimizer --exp-avg-dtype --exp-avg-sq-dtype).
 * Bytes of optimizer state per parameter, hand-computed: fp32 master 4 or,
 * where Transformer Engine keeps the master on bf16 parameters, its 16-bit
 * remainder 2 (store_param_remainders); moments 2 + 2; sharded over dp by
 * the distributed optimizer. The optimizer step reads and writes the
 * moments in 2 bytes. The plan check refuses what Megatron refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

static mp_config config(mp_dtype precision, mp_fp8_recipe recipe, mp_dtype moments)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("llama3-70b");
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 64, .seq = 4096, .global_batch = 64,
                               .precision = precision, .fp8_recipe = recipe,
                               .optimizer_moments = moments};
    c.parallel = (mp_parallel){.tp = 8, .sp = true, .pp = 1, .vpp = 1, .cp = 1, .dp = 8,
                               .micro_batch = 1, .recompute = MP_RECOMPUTE_FULL,
                               .dist_opt = true, .dp_overlap = true,
                               .schedule = MP_SCHED_1F1B};
    return c;
}

static double opt_bytes(const mp_config *c)
{
    double w, g, o;
    mp_static_bytes(c, &w, &g, &o);
    return o;
}

/* per parameter, over dp = 8 */
static void test_state_bytes(void **state)
{
    (void)state;
    mp_config c = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_FP32);
    assert_float_equal(opt_bytes(&c), 12.0 / 8, 1e-12); /* 4 + 4 + 4 */
    /* bf16 training: TE's FusedAdam keeps the master as the bf16 parameter
     * and a 16-bit remainder: 2 + 2 + 2 */
    c.training.optimizer_moments = MP_DTYPE_BF16;
    assert_float_equal(opt_bytes(&c), 6.0 / 8, 1e-12);
    c.training.optimizer_moments = MP_DTYPE_FP16;
    assert_float_equal(opt_bytes(&c), 6.0 / 8, 1e-12);
    /* FP8 blockwise (DeepSeek-V3's): Megatron-Core keeps the fp32 master
     * itself: 4 + 2 + 2 */
    c = config(MP_DTYPE_FP8, MP_FP8_BLOCKWISE, MP_DTYPE_BF16);
    assert_float_equal(opt_bytes(&c), 8.0 / 8, 1e-12);
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    assert_float_equal(opt_bytes(&c), 8.0 / 8, 1e-12);
    /* delayed scaling: TE's master again, on bf16 parameters 2 + 2 + 2; on
     * FP8 parameters (fp8_param_gather) no remainder: 4 + 2 + 2 */
    c.training.fp8_recipe = MP_FP8_DELAYED;
    assert_float_equal(opt_bytes(&c), 6.0 / 8, 1e-12);
    c.training.fp8_param_gather = true;
    assert_float_equal(opt_bytes(&c), 8.0 / 8, 1e-12);
    /* fp16 parameters keep the whole fp32 master: 4 + 2 + 2 */
    c = config(MP_DTYPE_FP16, MP_FP8_DELAYED, MP_DTYPE_BF16);
    assert_float_equal(opt_bytes(&c), 8.0 / 8, 1e-12);
}

/* the estimate's optimizer states are the parameters on the GPU times those
 * bytes: blockwise FP8 with bf16 moments holds 8/12 of the fp32 states */
static void test_estimate_memory(void **state)
{
    (void)state;
    mp_config a = config(MP_DTYPE_FP8, MP_FP8_BLOCKWISE, MP_DTYPE_FP32);
    mp_config b = config(MP_DTYPE_FP8, MP_FP8_BLOCKWISE, MP_DTYPE_BF16);
    mp_estimate ea, eb;
    mp_error err;
    assert_int_equal(mp_estimate_config(&a, NULL, &ea, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&b, NULL, &eb, &err), MP_OK);
    assert_float_equal(eb.memory.optimizer / ea.memory.optimizer, 8.0 / 12.0, 1e-9);
    assert_float_equal(ea.memory.peak - eb.memory.peak,
                       ea.memory.optimizer - eb.memory.optimizer, 1e-3 * ea.memory.peak);
    assert_true(eb.memory.weights == ea.memory.weights && eb.memory.grads == ea.memory.grads);
}

/* the step: Adam reads and writes m and v once each, 4 + 4 bytes fewer per
 * local parameter in bf16 (38 -> 30 bytes, memory-bound) */
static void test_step_traffic(void **state)
{
    (void)state;
    mp_config a = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_FP32);
    mp_config b = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_BF16);
    double n = 1e10; /* memory-bound, well above the launch floor */
    double ta = mp_optimizer_time(&a, n), tb = mp_optimizer_time(&b, n);
    double ka = mp_membound_time(&a.hw, 38.0 * n, 12.0), kb = mp_membound_time(&a.hw, 30.0 * n, 12.0);
    assert_float_equal(ta, ka, 1e-9 * ka);
    assert_float_equal(tb, kb, 1e-9 * kb);
}

static void refused(mp_config c, const char *why)
{
    mp_error err;
    mp_error_clear(&err);
    mp_estimate e;
    if (mp_estimate_config(&c, NULL, &e, &err) != MP_EINPUT)
        fail_msg("%s: accepted", why);
    assert_string_equal(err.field, "optimizer_moments");
}

/* what Megatron-Core refuses, or megaplan does not model, is refused */
static void test_refused(void **state)
{
    (void)state;
    mp_config c = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_FP8);
    refused(c, "fp8 moments");
    c = config(MP_DTYPE_FP32, MP_FP8_DELAYED, MP_DTYPE_BF16);
    refused(c, "fp32 training");
    c = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_BF16);
    c.training.low_precision_optimizer = true;
    refused(c, "with low_precision_optimizer");
    c = config(MP_DTYPE_BF16, MP_FP8_DELAYED, MP_DTYPE_BF16);
    c.parallel.dist_opt = false;
    refused(c, "without the distributed optimizer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_bytes),
        cmocka_unit_test(test_estimate_memory),
        cmocka_unit_test(test_step_traffic),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
