/* test_param_gather.c — the distributed optimizer's parameter all-gather run
 * after the optimizer step (parallel.param_gather_sync; docs/cost-model.md §5,
 * "Synchronous parameter gather"): Megatron-Core with --overlap-grad-reduce but
 * without --overlap-param-gather (DistributedOptimizer.step launches the
 * all-gather itself), as Megatron-Bridge 25.11's MXFP8 LLaMA 3.1 405B recipe on
 * B200 runs (scripts/performance/configs/llama31/llama31_llm_pretrain.py at
 * tag v0.2.0: overlap_param_gather = False for fp8_mx). The gradient
 * reduction keeps its overlap; the whole gather is exposed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/fields.h"
#include "core/tables.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "planner/megatron.h"
#include "sim/simulate.h"

#include "nemo_fixture.h"
#include "../sim/sim_dp.h"

/* LLaMA 3.1 405B on 128 B200s as the 25.11 MXFP8 row: t4 p8 v8 cp2 d2, GBS 64 */
static mp_config llama405_b200(int64_t vpp)
{
    mp_config c = nemo_config("llama3-405b", 128, 64);
    mp_error err;
    assert_int_equal(mp_hw_preset("b200", &c.hw, &err), MP_OK);
    c.training.fp8_recipe = MP_FP8_MXFP8;
    c.training.fp8_param_gather = c.training.grad_reduce_bf16 = true;
    c.parallel = (mp_parallel){.tp = 4, .sp = true, .pp = 8, .vpp = vpp, .cp = 2, .dp = 2,
                               .micro_batch = 1, .dist_opt = true, .dp_overlap = true,
                               .tp_overlap = true, .p2p_overlap = vpp > 1,
                               .schedule = vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return c;
}

static mp_pipeline_cost build(const mp_config *c)
{
    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(c, NULL, &pc, &err), MP_OK);
    return pc;
}

static double step(const mp_config *c)
{
    mp_estimate e;
    mp_error err;
    assert_int_equal(mp_estimate_config(c, NULL, &e, &err), MP_OK);
    return e.time.step;
}

/* Overlapped, the gather goes out at the step's start and only its first
 * chunk's share waits (dp_gather_exposed of dp_gather); synchronous, the same
 * all-gather is exposed whole and the reduction's exposed part is unchanged:
 * dp_exposed grows by exactly dp_gather - dp_gather_exposed, dp_time not at all. */
static void test_whole_gather_exposed(void **state)
{
    (void)state;
    const int64_t vpps[] = {8, 1};
    for (size_t k = 0; k < sizeof vpps / sizeof vpps[0]; k++) {
        mp_config c = llama405_b200(vpps[k]);
        mp_pipeline_cost over = build(&c);
        c.parallel.param_gather_sync = true;
        mp_pipeline_cost sync = build(&c);
        assert_true(over.dp_gather > 0.0);
        assert_true(over.dp_gather_exposed < over.dp_gather);
        assert_true(sync.dp_gather == 0.0 && sync.dp_gather_exposed == 0.0);
        assert_true(fabs(sync.dp_time - over.dp_time) <= 1e-12 * over.dp_time);
        double grow = over.dp_gather - over.dp_gather_exposed;
        assert_true(fabs((sync.dp_exposed - over.dp_exposed) - grow) <= 1e-9 * over.dp_time);
        mp_pipeline_cost_free(&over);
        mp_pipeline_cost_free(&sync);
    }
}

/* The step grows by that much (the exposed DP time adds to it), and the
 * setting does nothing where there is no overlapped distributed-optimizer
 * gather: without --overlap-grad-reduce (already exposed) or without the
 * distributed optimizer (no gather). */
static void test_step_and_scope(void **state)
{
    (void)state;
    mp_config c = llama405_b200(8);
    mp_pipeline_cost over = build(&c);
    double grow = over.dp_gather - over.dp_gather_exposed;
    mp_pipeline_cost_free(&over);
    double a = step(&c);
    c.parallel.param_gather_sync = true;
    double b = step(&c);
    assert_true(b > a);
    assert_true(fabs((b - a) - grow) <= 0.05 * grow);

    c = llama405_b200(8);
    c.parallel.dp_overlap = false;
    a = step(&c);
    c.parallel.param_gather_sync = true;
    assert_true(step(&c) == a);

    c = llama405_b200(8);
    c.parallel.dist_opt = false;
    a = step(&c);
    c.parallel.param_gather_sync = true;
    assert_true(step(&c) == a);
}

/* The simulator queues the gather on the DP stream after the reductions
 * (dp_gather_sync): its iteration grows by the whole gather less what the
 * overlapped gather had left exposed, within 5 % of the estimate's growth. */
static void test_simulator(void **state)
{
    (void)state;
    const int64_t vpps[] = {8, 1};
    for (size_t k = 0; k < sizeof vpps / sizeof vpps[0]; k++) {
        mp_config c = llama405_b200(vpps[k]);
        mp_pipeline_cost over = build(&c);
        double grow = over.dp_gather - over.dp_gather_exposed;
        mp_pipeline_cost_free(&over);
        mp_sim_options opt = {0};
        mp_sim_result a, b;
        mp_error err;
        assert_int_equal(mp_simulate(&c, NULL, &opt, &a, &err), MP_OK);
        c.parallel.param_gather_sync = true;
        mp_pipeline_cost sync = build(&c);
        assert_true(sync.dp_gather_sync == over.dp_gather);
        mp_pipeline_cost_free(&sync);
        assert_int_equal(mp_simulate(&c, NULL, &opt, &b, &err), MP_OK);
        assert_true(fabs((b.makespan - a.makespan) - grow) <= 0.05 * grow);
        mp_sim_result_free(&a);
        mp_sim_result_free(&b);
    }
}

/* Megatron-LM's flags: --overlap-grad-reduce stays, --overlap-param-gather goes */
static void test_megatron_flags(void **state)
{
    (void)state;
    mp_config c = llama405_b200(8);
    mp_buf b = {0};
    mp_megatron_args(&c, NULL, &b);
    assert_non_null(strstr(b.data, "--overlap-param-gather"));
    mp_buf_free(&b);
    c.parallel.param_gather_sync = true;
    mp_buf d = {0};
    mp_megatron_args(&c, NULL, &d);
    assert_non_null(strstr(d.data, "--overlap-grad-reduce"));
    assert_null(strstr(d.data, "--overlap-param-gather"));
    mp_buf_free(&d);
}

/* The YAML key parallel.param_gather_sync sets it (core/config.c's table). */
static void test_config_key(void **state)
{
    (void)state;
    mp_config c = llama405_b200(8);
    size_t n;
    const mp_field *tab = mp_parallel_field_table(&n);
    mp_error err;
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "param_gather_sync", "true", &err),
                     MP_OK);
    assert_true(c.parallel.param_gather_sync);
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "param_gather_sync", "false", &err),
                     MP_OK);
    assert_false(c.parallel.param_gather_sync);
}

/* --overlap-param-gather-with-optimizer-step (parallel.
 * overlap_param_gather_with_optimizer_step; docs/cost-model.md §5): by hand,
 * one rank, two chunks of forward 1 s, a gather of 4 s (2 s a chunk), chunk
 * 0 unbucketed. From the step's start: chunk 0's first forward waits for its
 * 2 s, chunk 1's (due 1 s after the rank's start) for 4 s: 3 s late. Begun
 * 1.5 s ahead under the optimizer step: chunk 0's ends at 0.5 s, chunk 1's at
 * 2.5 s: 1.5 s. Begun 3 s ahead (all of chunk 0 under the step): chunk 1's
 * ends at 2 s: 1 s. With the gathers' SM share 1/4 (1.5 s ahead): the
 * optimizer step loses 0.375 s, chunk 0's forward runs 0.5 s slower beside
 * chunk 1's gather (1.0 s late), chunk 1's first forward still waits 1.5 s. */
static void test_opt_step_by_hand(void **state)
{
    (void)state;
    const double fwd[] = {1, 1}, share[] = {0.5, 0.5}, whole[] = {1};
    assert_float_equal(mp_dp_early_gather_exposed(1, 2, fwd, share, whole, NULL, 4, 0), 3.0,
                       1e-12);
    assert_float_equal(
        mp_dp_early_gather_exposed(1, 2, fwd, share, whole, (const double[]){1.5}, 4, 0), 1.5,
        1e-12);
    assert_float_equal(
        mp_dp_early_gather_exposed(1, 2, fwd, share, whole, (const double[]){3}, 4, 0), 1.0,
        1e-12);
    assert_float_equal(
        mp_dp_early_gather_exposed(1, 2, fwd, share, whole, (const double[]){1.5}, 4, 0.25),
        1.875, 1e-12);
}

/* Megatron-Core buckets only pipeline rank 0's first chunk
 * (distributed_data_parallel.py: bucket_size = None when pp_rank > 0 or
 * disable_bucketing; docs/cost-model.md §5, "Buckets"): by hand, two ranks of
 * one chunk, forward 1 s each, rank 1 holding twice rank 0's parameters, a
 * gather of 3 s for rank 1 (1.5 s for rank 0). Rank 0, bucketed (first bucket
 * a tenth): its forward starts at 0.15 s and ends no earlier than its gather,
 * 1.5 s: 0.5 s late. Rank 1, its input due at 1 s: bucketed it would start
 * then and end at its gather's 3 s, 1 s late; as one bucket it starts only at
 * 3 s and ends at 4 s: 2 s late, the pipeline's exposure. */
static void test_rank_buckets_by_hand(void **state)
{
    (void)state;
    const double fwd[] = {1, 1}, share[] = {0.5, 1};
    const double megatron[] = {0.1, 1}, everywhere[] = {0.1, 0.1};
    assert_float_equal(mp_dp_early_gather_exposed(2, 1, fwd, share, megatron, NULL, 3, 0), 2.0,
                       1e-12);
    assert_float_equal(mp_dp_early_gather_exposed(2, 1, fwd, share, everywhere, NULL, 3, 0), 1.0,
                       1e-12);
}

/* The planner applies it: LLaMA 3 8B, seq 1024, on 16 H100 (t1 p2 d8, 1F1B), pipeline
 * rank 0 holding 2 layers (first_stage_layers), rank 1 the other 30 and the
 * head, so rank 1 is the most loaded and its gather is dp_gather. Rank 1's
 * first forward waits for all of it (its input, due after rank 0's forward,
 * comes far sooner): the exposure is dp_gather less rank 0's forward,
 * exactly (0.034 s); bucketed, all but a few ms of it would have hidden
 * under rank 1's own forward. The simulator exposes the same DP time within
 * 5 % (and tests/sim/test_simulate.c's DP grids hold it on even splits). */
static void test_rank_buckets_in_plan(void **state)
{
    (void)state;
    mp_config c = nemo_config("llama3-8b", 16, 64);
    mp_error err;
    c.model.seq = c.training.seq = 1024; /* forwards short against the gather */
    assert_int_equal(mp_model_finish(&c.model, &err), MP_OK);
    c.training.precision = MP_DTYPE_BF16;
    c.parallel = (mp_parallel){.tp = 1, .pp = 2, .vpp = 1, .cp = 1, .dp = 8, .micro_batch = 1,
                               .dist_opt = true, .dp_overlap = true, .first_stage_layers = 2,
                               .schedule = MP_SCHED_1F1B};
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    mp_pipeline_cost pc = build(&c);
    assert_true(pc.n_stages == 2 && pc.stages[1].grad_bytes > pc.stages[0].grad_bytes);
    if (getenv("MP_PRINT_DP"))
        printf("gather %.4f exposed %.4f, forwards %.4f %.4f\n", pc.dp_gather,
               pc.dp_gather_exposed, pc.stages[0].fwd, pc.stages[1].fwd);
    assert_true(pc.dp_gather > pc.stages[0].fwd + pc.stages[1].fwd);
    assert_float_equal(pc.dp_gather_exposed, pc.dp_gather - pc.stages[0].fwd, 1e-9);
    /* its reduction is one bucket too, all of it after its last backward,
     * which ends rank 0's backward and one transfer before the pipeline's
     * end: exposed red - (b_0 + x), more than rank 0's buckets leave */
    double red = pc.dp_time - pc.dp_gather - pc.dp_tied;
    double x = pc.p2p_latency + pc.stages[0].send_bytes / pc.p2p_bw;
    double whole = red - (pc.stages[0].bwd + x);
    if (getenv("MP_PRINT_DP"))
        printf("reduction %.4f: rank 0 exposes %.4f, rank 1 %.4f\n", red,
               pc.dp_reduce_exposed0, whole);
    assert_true(pc.dp_rank_whole && whole > pc.dp_reduce_exposed0);
    assert_float_equal(pc.dp_exposed - pc.dp_gather_exposed - pc.dp_tied, whole, 1e-9);
    double s = sim_dp_added(&c, &pc);
    if (getenv("MP_PRINT_DP"))
        printf("DP exposed: estimate %.4f, simulated %.4f\n", pc.dp_exposed, s);
    if (fabs(s - pc.dp_exposed) > 0.05 * pc.dp_exposed)
        fail_msg("simulated DP %.4f s, estimate %.4f s", s, pc.dp_exposed);
    mp_pipeline_cost_free(&pc);
}

/* The flag on the 405B plan (t4 p8 v8 cp2 d2): the estimate charges the
 * gathers by the rule above and the simulator, which places chunk 0's
 * remaining gather at the step's start and slows the optimizer by the part
 * it overlapped, exposes the same DP time within 5 % (the tolerance of
 * tests/sim/test_simulate.c's DP grids); the flag changes the exposure
 * (chunk 0 waits for its whole gather, not its first bucket, begun earlier). */
static void test_opt_step_estimate_vs_sim(void **state)
{
    (void)state;
    mp_config c = llama405_b200(8);
    mp_pipeline_cost off = build(&c);
    c.parallel.overlap_param_gather_with_optimizer_step = true;
    mp_error err;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    mp_pipeline_cost on = build(&c);
    assert_true(on.dp_gather_opt_step && !off.dp_gather_opt_step);
    assert_true(fabs(on.dp_exposed - off.dp_exposed) > 1e-4);
    double s_on = sim_dp_added(&c, &on);
    if (getenv("MP_PRINT_DP")) {
        mp_config c0 = llama405_b200(8);
        printf("DP exposed: flag off est %.4f sim %.4f, on est %.4f sim %.4f (optimizer %.4f s)\n",
               off.dp_exposed, sim_dp_added(&c0, &off), on.dp_exposed, s_on, on.optimizer);
    }
    if (fabs(s_on - on.dp_exposed) > 0.05 * on.dp_exposed)
        fail_msg("flag on: simulated DP %.4f s, estimate %.4f s", s_on, on.dp_exposed);
    mp_pipeline_cost_free(&off);
    mp_pipeline_cost_free(&on);
}

/* Megatron's constraints (megatron/training/arguments.py), one line each,
 * naming the field; the flag exported as Megatron's. */
static void test_opt_step_checks_and_flags(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = llama405_b200(8);
    c.parallel.overlap_param_gather_with_optimizer_step = true;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    mp_buf b = {0};
    mp_megatron_args(&c, NULL, &b);
    assert_non_null(strstr(b.data, "--overlap-param-gather-with-optimizer-step"));
    mp_buf_free(&b);
    mp_config bad[4] = {c, c, c, llama405_b200(1)};
    bad[0].parallel.dist_opt = false;
    bad[1].parallel.param_gather_sync = true;
    bad[2].training.stack = MP_STACK_MEGATRON_LM_2021;
    bad[3].parallel.overlap_param_gather_with_optimizer_step = true;
    const char *why[4] = {"distributed optimizer", "overlapped parameter gather",
                          "megatron-lm", "interleaved"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(mp_config_check(&bad[i], &err), MP_EINPUT);
        assert_string_equal(err.field, "overlap_param_gather_with_optimizer_step");
        assert_non_null(strstr(err.msg, why[i]));
        assert_null(strchr(err.msg, '\n'));
    }
    mp_config plain = llama405_b200(8);
    mp_buf d = {0};
    mp_megatron_args(&plain, NULL, &d);
    assert_null(strstr(d.data, "--overlap-param-gather-with-optimizer-step"));
    mp_buf_free(&d);
    /* the YAML key sets it */
    size_t n;
    const mp_field *tab = mp_parallel_field_table(&n);
    assert_int_equal(mp_fields_set_text(tab, n, &plain.parallel,
                                        "overlap_param_gather_with_optimizer_step", "true", &err),
                     MP_OK);
    assert_true(plain.parallel.overlap_param_gather_with_optimizer_step);
}

/* parallel.ddp_bucket_size (Megatron --ddp-bucket-size; Megatron-Bridge's
 * and NeMo 2's CommOverlapConfig set 128 * 1024^2 when dp > 1; docs/cost-model.md
 * §5, "Buckets"): LLaMA 3 8B in bf16 on 8 H100 (t1 p1 d8, 1F1B), every rank
 * holding all 8,030,261,248 parameters, so the bucket is a fraction f of them:
 * Megatron's default max(40M, 1M * 8) = 40M gives f = 0.0049811, 128 * 1024^2
 * f = 0.0167141. With one chunk the reduction's last bucket and the gather's
 * first are exposed whole and the rest runs under the backward (forward) at
 * the SMs' share s: exposed = red (f + s_r (1 - f)) + ag (f + s_a (1 - f)).
 * The tails (f red + f ag, less what the share already counts) grow by
 * 134217728 / 40000000 = 3.3554 from the default to the recipes' bucket;
 * the bucket's bytes are 2 a parameter (gradients reduced in bf16). */
static void test_bucket_size_by_hand(void **state)
{
    (void)state;
    mp_config c = nemo_config("llama3-8b", 8, 64);
    mp_error err;
    c.training.precision = MP_DTYPE_BF16;
    c.training.grad_reduce_bf16 = true; /* as the recipes: 2-byte gradients */
    c.parallel = (mp_parallel){.tp = 1, .pp = 1, .vpp = 1, .cp = 1, .dp = 8, .micro_batch = 1,
                               .dist_opt = true, .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    mp_pipeline_cost def = build(&c);
    c.parallel.ddp_bucket_size = 134217728;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    mp_pipeline_cost big = build(&c);
    const double fs[2] = {0.0049811, 0.0167141};
    const mp_pipeline_cost *pcs[2] = {&def, &big};
    double tail[2];
    for (int i = 0; i < 2; i++) {
        const mp_pipeline_cost *pc = pcs[i];
        double red = pc->dp_time - pc->dp_gather - pc->dp_tied, ag = pc->dp_gather;
        double f = fs[i], sr = pc->dp_sm_reduce, sa = pc->dp_sm_gather;
        double want = red * (f + sr * (1 - f)) + ag * (f + sa * (1 - f)) + pc->dp_tied;
        if (getenv("MP_PRINT_DP"))
            printf("bucket %.0f: red %.4f ag %.4f s %.3f %.3f exposed %.5f, by hand %.5f\n",
                   pc->dp_bucket_bytes / 2, red, ag, sr, sa, pc->dp_exposed, want);
        assert_float_equal(pc->dp_exposed, want, 1e-6 * pc->dp_time);
        tail[i] = pc->dp_exposed - red * sr - ag * sa - pc->dp_tied;
    }
    assert_float_equal(big.dp_bucket_bytes, 134217728.0 * 2, 1.0);
    assert_float_equal(tail[1] / tail[0], 3.3554, 1e-3);
    /* the simulator exposes the same DP time */
    double s = sim_dp_added(&c, &big);
    if (fabs(s - big.dp_exposed) > 0.05 * big.dp_exposed)
        fail_msg("simulated DP %.4f s, estimate %.4f s", s, big.dp_exposed);
    mp_pipeline_cost_free(&def);
    mp_pipeline_cost_free(&big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_gather_exposed),
        cmocka_unit_test(test_step_and_scope),
        cmocka_unit_test(test_simulator),
        cmocka_unit_test(test_megatron_flags),
        cmocka_unit_test(test_config_key),
        cmocka_unit_test(test_opt_step_by_hand),
        cmocka_unit_test(test_rank_buckets_by_hand),
        cmocka_unit_test(test_rank_buckets_in_plan),
        cmocka_unit_test(test_bucket_size_by_hand),
        cmocka_unit_test(test_opt_step_estimate_vs_sim),
        cmocka_unit_test(test_opt_step_checks_and_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
