/* test_dispatch_fp8.c — parallel.dispatch_fp8: the flex dispatcher sends
 * the dispatch's payload (and the combine's backward gradient) in FP8 with
 * 1/32 byte of scales per element, the combine (and the dispatch's backward)
 * in bf16: DeepSeek-V3 report §3.3.3 (1x128 tiles, an fp32 scale each) and
 * Megatron-Core's --moe-dispatch-fwd-dtype mxfp8 --moe-combine-bwd-dtype
 * mxfp8 (E8M0 per 32). On a latency-free network the time is linear in the
 * bytes: (1 + 1/32) + 2 of 2 + 2 per element, forward and backward alike.
 * The check refuses it without the flex dispatcher or FP8 training. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/model.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "moe_fixture.h"

static void test_bytes(void **state)
{
    (void)state;
    mp_config c = moe_config("deepseek-v3", 256, 1, 64, 1);
    c.training.precision = MP_DTYPE_FP8;
    c.training.fp8_recipe = MP_FP8_BLOCKWISE;
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 10, &bs); /* an MoE block */
    mp_moe_time off, on;
    mp_moe_block_time(&c, &bs, &off);
    c.parallel.dispatch_fp8 = true;
    mp_moe_block_time(&c, &bs, &on);
    assert_true(off.comm_f > 0);
    double want = (1.0 + 1.0 / 32.0 + 2.0) / (2.0 + 2.0);
    assert_float_equal(on.comm_f / off.comm_f, want, 1e-12);
    assert_float_equal(on.comm_b / off.comm_b, want, 1e-12);
    /* the estimate's step is shorter by the saved exposed time, never longer */
    mp_config a = c;
    a.parallel.dispatch_fp8 = false;
    assert_float_equal(mp_moe_dispatch_wire_bytes(&a), 2.0, 0);
    assert_float_equal(mp_moe_dispatch_wire_bytes(&c), 33.0 / 32.0, 0);
}

static void refused(mp_config c, const char *why)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_config_check(&c, &err) != MP_EINPUT)
        fail_msg("%s: accepted", why);
    assert_string_equal(err.field, "dispatch_fp8");
}

static void test_refused(void **state)
{
    (void)state;
    mp_config c = moe_config("deepseek-v3", 256, 1, 64, 1);
    c.training.precision = MP_DTYPE_FP8;
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    c.parallel.dispatch_fp8 = true;
    mp_error err;
    mp_error_clear(&err);
    if (mp_config_check(&c, &err) != MP_OK)
        fail_msg("the good config: %s: %s", err.field, err.msg);
    mp_config a = c;
    a.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    refused(a, "alltoall dispatcher");
    a = c;
    a.training.precision = MP_DTYPE_BF16;
    refused(a, "bf16 training");
    a = moe_config("llama2-7b", 8, 1, 1, 1);
    a.parallel.ep = 1;
    a.parallel.etp = 0;
    a.parallel.dispatch_fp8 = true;
    refused(a, "a dense model");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
