/* test_p2p_whole.c — how much of the (s/cp, b, h) activation one pipeline
 * transfer moves per TP rank (planner/cost.c p2p_whole_factor). Current
 * Megatron-LM sends the whole tensor from every TP rank when SP is off
 * (megatron/core/pipeline_parallel: get_tensor_shapes gives (s/cp, b, h), or
 * (s/cp/t, b, h) under SP; 3c92fa93b5 of 2023-03-23 removed the older
 * scatter/gather). The Megatron-LM of 2021-2023 scattered it over TP, and
 * DeepSpeed's pipeline engine partitions it: a TP rank's share, as under SP.
 * So without SP at t 4 a stage sends 4 times the bytes it sends with SP,
 * unless the stack is one of those or a data row ran such code
 * (training.p2p_scatter); the simulator's step moves with it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../config_fixture.h"
#include "planner/cost.h"
#include "sim/simulate.h"

static double send_bytes(const mp_config *c)
{
    mp_pipeline_cost pc;
    mp_error err;
    if (mp_pipeline_cost_build(c, NULL, &pc, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    double b = pc.stages[0].send_bytes;
    mp_pipeline_cost_free(&pc);
    return b;
}

static mp_config plan(bool sp)
{
    mp_config c = preset_config("gpt3-175b", "dgx-a100", 64, 64, MP_DTYPE_BF16);
    c.training.seq = 2048;
    c.parallel.tp = 4;
    c.parallel.sp = sp;
    c.parallel.pp = 4;
    c.parallel.dp = 4;
    c.parallel.micro_batch = 1;
    c.parallel.recompute = MP_RECOMPUTE_FULL;
    return c;
}

static void whole_without_sp_on_current_megatron(void **state)
{
    (void)state;
    mp_config with = plan(true), without = plan(false);
    /* s b h bf16 over t under SP: 2048 x 1 x 12288 x 2 / 4 */
    assert_true(send_bytes(&with) == 2048.0 * 12288 * 2 / 4);
    assert_true(send_bytes(&without) == 2048.0 * 12288 * 2);
}

static void a_share_where_the_code_scattered(void **state)
{
    (void)state;
    mp_config c = plan(false);
    c.training.p2p_scatter = true;
    assert_true(send_bytes(&c) == 2048.0 * 12288 * 2 / 4);
    for (int s = 0; s < MP_STACK_COUNT; s++) {
        c = plan(false);
        c.training.stack = (mp_stack)s;
        double want = 2048.0 * 12288 * 2 / (s == MP_STACK_MEGATRON_LM ? 1 : 4);
        if (send_bytes(&c) != want)
            fail_msg("stack %s: %.0f bytes, want %.0f", mp_stack_name((mp_stack)s),
                     send_bytes(&c), want);
    }
}

static void the_simulated_step_pays_it(void **state)
{
    (void)state;
    mp_config whole = plan(false), share = plan(false);
    share.training.p2p_scatter = true;
    mp_sim_options o = {0};
    mp_sim_result a, b;
    mp_error err;
    assert_int_equal(mp_simulate(&whole, NULL, &o, &a, &err), MP_OK);
    assert_int_equal(mp_simulate(&share, NULL, &o, &b, &err), MP_OK);
    assert_true(a.pipeline_makespan > b.pipeline_makespan);
    mp_sim_result_free(&a);
    mp_sim_result_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_without_sp_on_current_megatron),
        cmocka_unit_test(a_share_where_the_code_scattered),
        cmocka_unit_test(the_simulated_step_pays_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
