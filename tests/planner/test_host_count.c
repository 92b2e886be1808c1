/* test_host_count.c — the launches a dense GPT layer charges the host
 * (kernel_overhead each, compute.c: mp_layer_launches, mp_host_bound), by
 * hand. tools/fit_profile.py divides the counted host work of one
 * Megatron-DeepSpeed layer and micro-batch (tests/data/host) by these
 * launches to give kernel_overhead's prior (LAYER_LAUNCHES_T1 = 13 + 13 + 26,
 * tests/validation/test_host_prior.py): if the model's count changes, that
 * prior must be recounted, and this test says so.
 *
 * One layer's forward at t = 1, no flash attention, dropout on (the vTrain
 * sweeps' a100-4xhdr, fp16):
 *   attention part: input layer norm, QKV GEMM, the core's 4 (QK^T baddbmm,
 *     fused scale-mask-softmax, attention dropout, AV bmm), output
 *     projection GEMM, bias-dropout-add                               = 8
 *   MLP part: post-attention layer norm, FC1 GEMM, bias-GeLU, FC2 GEMM,
 *     bias-dropout-add                                                 = 5
 *   forward 13; backward twice the forward, 26; at t > 1 one TP all-reduce
 *   more in each part: 15 and 30.
 * With full recompute the forward runs again inside the backward (charged
 * by the schedule, not here): 13 + 13 + 26 = 52 per layer and micro-batch. */
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

/* gpt3-1.3b on vTrain's node at tensor parallelism t, the GPU and the
 * fabric made so fast that every pass is host-bound: its time is then the
 * counted launches times kernel_overhead. */
static mp_config host_only(int64_t t)
{
    mp_config c = preset_on("gpt3-1.3b", "a100-4xhdr");
    c.training = (mp_training){.gpus = t, .seq = 1024, .global_batch = 8,
                               .precision = MP_DTYPE_FP16};
    c.parallel = (mp_parallel){.tp = t, .pp = 1, .vpp = 1, .cp = 1, .dp = 1, .micro_batch = 1,
                               .recompute = MP_RECOMPUTE_FULL, .schedule = MP_SCHED_1F1B};
    host_bound_hw(&c.hw, 1e9);
    c.hw.kernel_overhead = 1e-3; /* 1 ms a launch: the GPU's time is below 1e-6 of it */
    return c;
}

static void launches(int64_t t, double want_f, double want_b)
{
    mp_config c = host_only(t);
    assert_false(c.hw.flash_attention); /* the core's 4 launches, not one fused kernel */
    mp_block_shape bs;
    mp_block_shape_of(&c.model, c.training.seq, 1, &bs);
    assert_true(bs.attn_dropout && bs.hidden_dropout);
    mp_block_time bt;
    mp_block_time_of(&c, &bs, &bt);
    double ko = c.hw.kernel_overhead;
    double got_f = (bt.fwd_compute + bt.tp_fwd) / ko, got_b = (bt.bwd_compute + bt.tp_bwd) / ko;
    if (fabs(got_f - want_f) > 1e-6 || fabs(got_b - want_b) > 1e-6)
        fail_msg("t = %lld: %.6f forward and %.6f backward launches, by hand %g and %g",
                 (long long)t, got_f, got_b, want_f, want_b);
}

static void test_layer_launches_t1(void **state)
{
    (void)state;
    launches(1, 13.0, 26.0);
}

static void test_layer_launches_tp(void **state)
{
    (void)state;
    launches(2, 15.0, 30.0);
    launches(8, 15.0, 30.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_launches_t1),
        cmocka_unit_test(test_layer_launches_tp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
