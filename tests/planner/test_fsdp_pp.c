/* test_fsdp_pp.c — ZeRO-3 with pipeline parallelism under zero_runtime fsdp2
 * (PyTorch FSDP2 beside torch.distributed.pipelining's stages): who may run
 * it, its DP communication (one gather and one reduce-scatter of the rank's
 * weights per step, whatever the number of micro-batches; every micro-batch
 * under fsdp_microbatch_sync) and its memory
 * (the shards plus every chunk's gathered weights and unsharded fp32
 * gradient accumulators), each against the hand-computed figure. */
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
#include "planner/framework.h"

/* llama2-7b (32 layers, untied) over pp 2 x dp 8 on one DGX-H100 pair */
static mp_config config(int64_t gb, mp_zero_runtime rt)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("llama2-7b");
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 16, .seq = 4096, .global_batch = gb,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 1, .pp = 2, .vpp = 1, .cp = 1, .dp = 8, .micro_batch = 1,
                               .dist_opt = true, .zero = 3, .zero_runtime = rt,
                               .schedule = MP_SCHED_1F1B};
    return c;
}

static void refused(mp_config *c, const char *field, const char *part)
{
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_config_check(c, &err), MP_EINPUT);
    assert_string_equal(err.field, field);
    if (!strstr(err.msg, part))
        fail_msg("'%s' lacks '%s'", err.msg, part);
}

/* DeepSpeed (and auto, which may mean DeepSpeed) keep refusing ZeRO-2/3
 * with pp, with DeepSpeed's reason; fsdp2 runs zero=3 with pp and nothing
 * else it does not model. */
static void test_rules(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = config(64, MP_ZRT_AUTO);
    refused(&c, "zero", "DeepSpeed refuses ZeRO-2/3 with its pipeline engine");
    c = config(64, MP_ZRT_DEEPSPEED);
    refused(&c, "zero", "DeepSpeed refuses ZeRO-2/3 with its pipeline engine");
    c = config(64, MP_ZRT_FSDP2);
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    assert_int_equal(mp_plan_framework(&c), MP_FW_TORCHTITAN);
    c.parallel.zero = 2;
    refused(&c, "zero_runtime", "needs zero=3");
    c.parallel.zero = 1;
    refused(&c, "zero_runtime", "needs zero >= 2");
    c = config(64, MP_ZRT_FSDP2);
    c.parallel.hsdp = true;
    refused(&c, "hsdp", "pipeline");
    /* a named DeepSpeed runtime writes DeepSpeed's config, whatever tp says */
    c = config(64, MP_ZRT_DEEPSPEED);
    c.parallel.pp = 1;
    c.parallel.dp = 16;
    c.parallel.tp = 1;
    assert_int_equal(mp_plan_framework(&c), MP_FW_DEEPSPEED);
}

/* The rank's parameters: stage 0 holds the embedding and 16 blocks, stage 1
 * 16 blocks, the final norm and the head (as large as the embedding). */
static double rank_params(const mp_config *c)
{
    return mp_model_params(&c->model) / 2.0 + (double)c->model.hidden / 2.0;
}

/* The estimate's DP time of c, with the parts still adding up to the step;
 * once: one all-gather of the rank's bf16 weights and one reduce-scatter of
 * its fp32 gradients over the DP shard group. */
static double dp_comm_of(mp_config *c, double *once)
{
    mp_estimate e;
    mp_error err;
    if (mp_estimate_config(c, NULL, &e, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    mp_group_place g;
    mp_group_place_of(c, MP_GROUP_DP_SHARD, &g);
    double P = rank_params(c);
    *once = mp_coll_time(&c->hw, &g, MP_COLL_ALLGATHER, 2.0 * P) +
            mp_coll_time(&c->hw, &g, MP_COLL_REDUCESCATTER, 4.0 * P);
    const mp_times *t = &e.time;
    double sum = t->compute + t->recompute + t->tp_comm + t->cp_comm + t->pp_comm + t->bubble +
                 t->dp_comm + t->optimizer;
    assert_true(fabs(sum - t->step) < 1e-9 * t->step);
    return t->dp_comm;
}

/* dp_comm_of at 8 and at 32 micro-batches (global batch 64, 256), the
 * overlap off, with the stage's deferred sync or fsdp_microbatch_sync. */
static void dp_at_8_and_32(bool sync, double dp[2], double once[2])
{
    for (int k = 0; k < 2; k++) {
        mp_config c = config(k ? 256 : 64, MP_ZRT_FSDP2);
        c.parallel.dp_overlap = false;
        c.parallel.fsdp_microbatch_sync = sync;
        dp[k] = dp_comm_of(&c, &once[k]);
    }
}

/* Without overlap the step pays the rank's one all-gather (bf16 weights)
 * and one reduce-scatter (fp32 gradients) over DP, and nothing per
 * micro-batch: the same with 8 micro-batches as with 32. ZeRO-3 without a
 * pipeline pays per micro-batch (test_zero.c). */
static void test_dp_once_per_step(void **state)
{
    (void)state;
    double dp[2], want[2];
    dp_at_8_and_32(false, dp, want);
    for (int k = 0; k < 2; k++)
        if (fabs(dp[k] / want[k] - 1.0) > 1e-9)
            fail_msg("dp_comm %.6g s, want %.6g s", dp[k], want[k]);
    assert_true(dp[0] == dp[1]);
}

/* A pipeline stage whose module is not an FSDP unit syncs every micro-batch
 * (fsdp_microbatch_sync: AutoModel's DeepSeek-V3 parts at 89e3a9fdd, a plain
 * backward in torch.distributed.pipelining's stage): per micro-batch and
 * stage one all-gather of its bf16 weights and one reduce-scatter of its
 * fp32 gradients, of each at least the first block's share exposed (16
 * blocks a stage here), so the DP time grows with the micro-batches where
 * the deferred sync's does not; refused without a pipeline or FSDP2. */
static void test_dp_every_micro_batch(void **state)
{
    (void)state;
    double dp[2], once[2];
    dp_at_8_and_32(true, dp, once);
    for (int k = 0; k < 2; k++) {
        double floor = (k ? 32.0 : 8.0) / 16.0 * once[k];
        if (!(dp[k] >= floor))
            fail_msg("dp_comm %.6g s under the first blocks' shares %.6g s", dp[k], floor);
    }
    assert_true(dp[1] > 3.5 * dp[0]);
    mp_config c = config(64, MP_ZRT_FSDP2);
    c.parallel.fsdp_microbatch_sync = true;
    c.parallel.pp = 1;
    c.parallel.dp = 16;
    refused(&c, "fsdp_microbatch_sync", "pp > 1");
    c = config(64, MP_ZRT_DEEPSPEED);
    c.parallel.pp = 1;
    c.parallel.dp = 16;
    c.parallel.fsdp_microbatch_sync = true;
    refused(&c, "fsdp_microbatch_sync", "zero_runtime fsdp2");
}

/* Memory of the most loaded rank (the first: 1F1B keeps pp micro-batches'
 * activations there; its stage lacks the final norm's h weights): the
 * shards (2 + 2 + 12 bytes over dp 8),
 * plus the gathered bf16 weights (2 bytes) and the fp32 gradient
 * accumulators (4 bytes) of every parameter of the rank; with the optimizer
 * in bf16 (AutoModel), 4 bytes of moments over dp instead of 12. */
static void test_memory(void **state)
{
    (void)state;
    mp_config c = config(64, MP_ZRT_FSDP2);
    double P = rank_params(&c) - (double)c.model.hidden, d = 8.0;
    mp_estimate e;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_true(fabs(e.memory.weights / (P * (2.0 / d + 2.0)) - 1.0) < 1e-12);
    assert_true(fabs(e.memory.grads / (P * (2.0 / d + 4.0)) - 1.0) < 1e-12);
    assert_true(fabs(e.memory.optimizer / (P * 12.0 / d) - 1.0) < 1e-12);
    c.training.low_precision_optimizer = true;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_true(fabs(e.memory.optimizer / (P * 4.0 / d) - 1.0) < 1e-12);
    /* bf16 reduction: the accumulators in bf16 too */
    c.training.grad_reduce_bf16 = true;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_true(fabs(e.memory.grads / (P * (2.0 / d + 2.0)) - 1.0) < 1e-12);
}

/* torchtitan's job file runs the pipeline: degree, schedule, micro-batch,
 * one flush of a DP rank's batch, weights kept between forward and backward. */
static void test_torchtitan(void **state)
{
    (void)state;
    mp_config c = config(64, MP_ZRT_FSDP2);
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    mp_buf b = {0};
    mp_error err;
    assert_int_equal(mp_torchtitan_config(&c, NULL, &b, &err), MP_OK);
    const char *want[] = {"pipeline_parallel_degree = 2\n",
                          "pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
                          "pipeline_parallel_microbatch_size = 1\n",
                          /* 32 layers over 2 x 2 stages: 8 each, in pipeline order */
                          "  [\"tok_embeddings\", \"layers.0\", \"layers.1\", \"layers.2\", "
                          "\"layers.3\", \"layers.4\", \"layers.5\", \"layers.6\", \"layers.7\"],\n",
                          "  [\"layers.24\", \"layers.25\", \"layers.26\", \"layers.27\", "
                          "\"layers.28\", \"layers.29\", \"layers.30\", \"layers.31\", \"norm\", "
                          "\"output\"]\n]\n",
                          "fsdp_reshard_after_forward = \"default\"\n",
                          "local_batch_size = 8\n", "data_parallel_shard_degree = 8\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(b.data, want[i]))
            fail_msg("torchtitan config lacks %s:\n%s", want[i], b.data);
    /* torchtitan re-splits by its own rule from the layers per stage */
    if (strstr(b.data, "layers_per_stage"))
        fail_msg("torchtitan config writes layers_per_stage:\n%s", b.data);
    mp_buf_free(&b);
    c.parallel.vpp = 1;
    c.parallel.schedule = MP_SCHED_ZBH1;
    assert_int_equal(mp_torchtitan_config(&c, NULL, &b, &err), MP_EINPUT);
    mp_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_dp_once_per_step),
        cmocka_unit_test(test_dp_every_micro_batch),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_torchtitan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
