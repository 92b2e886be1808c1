/* test_dp_aligned.c — the DP reduction and parameter all-gather under
 * Megatron-Core's interleaved 1F1B with --overlap-grad-reduce and
 * --overlap-param-gather (align_grad_reduce, align_param_gather;
 * docs/cost-model.md §5, "Interleaved pipelines"): each chunk's reduction is
 * launched after its last backward, j*p chunk-backwards before the end for
 * chunk j, so only chunk 0's is exposed whole and the others hide under the
 * cooldown; only chunk 0's gather waits at the step's start. */
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
#include "planner/cost.h"

#include "nemo_fixture.h"

/* LLaMA 3.1 405B on 1024 DGX H100 GPUs, Megatron-Bridge's recipe:
 * t8 p8 v8 cp2 d8, distributed optimizer, overlapped grad reduce and gather */
static mp_config llama405(int64_t vpp)
{
    mp_config c = nemo_config("llama3-405b", 1024, 512);
    c.training.fp8_param_gather = c.training.grad_reduce_bf16 = true;
    c.parallel = (mp_parallel){.tp = 8, .sp = true, .pp = 8, .vpp = vpp, .cp = 2, .dp = 8,
                               .micro_batch = 1, .dist_opt = true, .dp_overlap = true,
                               .tp_overlap = true,
                               .schedule = vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return c;
}

static void cost(const mp_config *c, double *time, double *exposed)
{
    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(c, NULL, &pc, &err), MP_OK);
    *time = pc.dp_time;
    *exposed = pc.dp_exposed;
    mp_pipeline_cost_free(&pc);
}

static void test_chunk0_exposed_rest_hidden(void **state)
{
    (void)state;
    mp_config c = llama405(8);
    double t, x;
    cost(&c, &t, &x);
    assert_true(t > 0.0);
    /* the reduction (half of dp_time: bf16 reduce-scatter and all-gather of
     * 2-byte parameters) of chunk 0, an eighth of the rank's weights or more,
     * is exposed whole (the gather of FP8 weights is smaller: t < 2 rs) */
    assert_true(x >= t / 2.0 / 8.0);
    /* the other chunks' reductions and gathers hide under the cooldown and the
     * warm-up: the old rule (everything under one micro-batch's backward and
     * forward) left two thirds of dp_time exposed */
    assert_true(x < 0.3 * t);
}

static void test_plain_1f1b_unchanged(void **state)
{
    (void)state;
    /* one chunk: the buckets go out during the last micro-batch's backward,
     * which hides no more than that backward */
    mp_config c = llama405(1);
    double t, x;
    cost(&c, &t, &x);
    mp_config i = llama405(8);
    double ti, xi;
    cost(&i, &ti, &xi);
    assert_true(fabs(t - ti) < 1e-9 * t);
    assert_true(x > xi);
}

static void test_old_stack_keeps_one_window(void **state)
{
    (void)state;
    /* the rule is Megatron-Core's: other stacks keep the one-backward window */
    mp_config c = llama405(8);
    double t, x;
    cost(&c, &t, &x);
    c.training.stack = MP_STACK_MEGATRON_LM_2021;
    double t2, x2;
    cost(&c, &t2, &x2);
    assert_true(x2 > x);
}

static void test_fp8_param_gather_moves_one_byte(void **state)
{
    (void)state;
    /* --fp8-param-gather: Megatron DDP's parameter buffer is uint8 for the FP8
     * weights, so the gather of the updated weights moves half the bytes;
     * the bf16 gradient reduce-scatter is unchanged */
    mp_config c = llama405(8);
    double on, x;
    cost(&c, &on, &x);
    c.training.fp8_param_gather = false;
    double off;
    cost(&c, &off, &x);
    /* off: reduce-scatter + gather of equal bytes; on: the gather about half */
    assert_true(on < 0.8 * off);
    assert_true(on > 0.7 * off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk0_exposed_rest_hidden),
        cmocka_unit_test(test_plain_1f1b_unchanged),
        cmocka_unit_test(test_old_stack_keeps_one_window),
        cmocka_unit_test(test_fp8_param_gather_moves_one_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
