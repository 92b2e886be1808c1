/* test_ds_stack.c — BigScience's Megatron-DeepSpeed (mp_stack) in the cost
 * model (BigScience's fork; Microsoft's of 2021 for the first term), each
 * term against a hand-computed value and against Megatron-LM's
 * (the old behaviour, which every assertion on the new one would fail):
 * the backward TP all-reduces exposed whole, DeepSpeed's BF16 optimizer's
 * fp32 accumulation pass per micro-batch, and its fp32 all-reduce over DP
 * in place of the distributed optimizer's reduce-scatter. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "../config_fixture.h"

static mp_config config(int64_t gpus, int64_t tp, int64_t pp, mp_dtype prec, mp_stack stack)
{
    mp_config c = preset_on("gpt3-1.3b", "dgx-a100");
    c.training = (mp_training){.gpus = gpus, .seq = c.model.seq, .global_batch = 64,
                               .precision = prec, .stack = stack};
    c.parallel = (mp_parallel){.tp = tp, .pp = pp, .vpp = 1, .cp = 1, .dp = gpus / (tp * pp),
                               .micro_batch = 2, .dist_opt = true, .recompute = MP_RECOMPUTE_FULL,
                               .schedule = MP_SCHED_1F1B};
    return c;
}

/* The stage costs of one bf16 plan under each stack. */
static void build_both(int64_t tp, int64_t pp, mp_config *ds, mp_pipeline_cost *pds,
                       mp_pipeline_cost *pmg)
{
    *ds = config(8, tp, pp, MP_DTYPE_BF16, MP_STACK_BIGSCIENCE_MDS);
    mp_config mg = config(8, tp, pp, MP_DTYPE_BF16, MP_STACK_MEGATRON_LM);
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(ds, NULL, pds, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&mg, NULL, pmg, &err), MP_OK);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* gpt3-1.3b (h 2048, s 2048), b 2, t 8 in one DGX A100: one TP all-reduce
 * of T·h·2 = 4096·2048·2 = 16.8 MB is, by hand from the profile's fields,
 * 15 latencies + bytes·(2·7/8)/(bw·eff) + bytes·local/(bw·eff). The
 * bigscience stack's backward is two of them; Megatron-LM's hides them
 * under the weight-gradient GEMMs and exposes less. */
static void test_backward_tp_exposed(void **state)
{
    (void)state;
    mp_config ds = config(8, 8, 1, MP_DTYPE_FP16, MP_STACK_BIGSCIENCE_MDS);
    mp_config mg = config(8, 8, 1, MP_DTYPE_FP16, MP_STACK_MEGATRON_LM);
    mp_block_shape bs;
    mp_block_shape_of(&ds.model, ds.training.seq, 1, &bs);
    mp_block_time tds, tmg;
    mp_block_time_of(&ds, &bs, &tds);
    mp_block_time_of(&mg, &bs, &tmg);
    double bytes = 2.0 * 2048.0 * 2048.0 * 2.0;
    const mp_hw *hw = &ds.hw;
    double bw = hw->scale_up.bw_per_gpu * hw->scale_up.efficiency;
    double one = 15.0 * hw->scale_up.latency + bytes * (14.0 / 8.0) / bw +
                 bytes * hw->collective_local_pass / bw;
    assert_true(near(tds.tp_bwd, 2.0 * one));
    assert_true(tmg.tp_bwd < 2.0 * one * 0.99);
    /* Microsoft's Megatron-DeepSpeed of 2021 (MT-NLG's) is as synchronous */
    mp_config ms = config(8, 8, 1, MP_DTYPE_FP16, MP_STACK_MDS_2021);
    mp_block_time tms;
    mp_block_time_of(&ms, &bs, &tms);
    assert_true(near(tms.tp_bwd, 2.0 * one));
    /* the forward ones are the same in both */
    assert_true(near(tds.tp_fwd, tmg.tp_fwd));
    assert_true(near(tds.tp_fwd, 2.0 * one));
}

/* 1e9 parameters: 18 GB through HBM per micro-batch; under bf16 only, and
 * only for the bigscience stack. */
static void test_bf16_accumulation_pass(void **state)
{
    (void)state;
    mp_config ds = config(8, 1, 1, MP_DTYPE_BF16, MP_STACK_BIGSCIENCE_MDS);
    double want = 18e9 / (ds.hw.hbm_bw * ds.hw.memory_efficiency);
    assert_true(near(mp_ds_bf16_accumulate_time(&ds, 1e9), want));
    assert_true(mp_ds_bf16_optimizer(&ds));
    mp_config fp16 = config(8, 1, 1, MP_DTYPE_FP16, MP_STACK_BIGSCIENCE_MDS);
    assert_true(mp_ds_bf16_accumulate_time(&fp16, 1e9) == 0.0);
    mp_config mg = config(8, 1, 1, MP_DTYPE_BF16, MP_STACK_MEGATRON_LM);
    assert_true(mp_ds_bf16_accumulate_time(&mg, 1e9) == 0.0);
    /* the BF16 optimizer came in 2022: not in the 2021 stack */
    mp_config ms = config(8, 1, 1, MP_DTYPE_BF16, MP_STACK_MDS_2021);
    assert_true(mp_ds_bf16_accumulate_time(&ms, 1e9) == 0.0);
}

/* t = 1 (no TP term), two stages: each stage's backward grows by exactly
 * the pass over its parameters; the last stage's include its copy of the
 * tied word embeddings (V·h). */
static void test_bf16_accumulation_in_stages(void **state)
{
    (void)state;
    mp_config ds;
    mp_pipeline_cost pds, pmg;
    build_both(1, 2, &ds, &pds, &pmg);
    assert_int_equal(pds.n_stages, 2);
    double per_param = 18.0 / (ds.hw.hbm_bw * ds.hw.memory_efficiency);
    double spb = mp_static_bytes_per_param(&ds);
    double tied = (double)ds.model.vocab * (double)ds.model.hidden;
    for (int k = 0; k < 2; k++) {
        double params = pmg.stages[k].static_bytes / spb + (k == 1 ? tied : 0.0);
        assert_true(near(pds.stages[k].bwd - pmg.stages[k].bwd, params * per_param));
        assert_true(near(pds.stages[k].fwd, pmg.stages[k].fwd));
    }
    mp_pipeline_cost_free(&pds);
    mp_pipeline_cost_free(&pmg);
}

/* One stage, t = 1, 8 DP ranks in one node: the BF16 optimizer all-reduces
 * the fp32 gradients (4 bytes per parameter) where Megatron's distributed
 * optimizer reduce-scatters them; both all-gather the bf16 weights. */
static void test_bf16_dp_allreduce(void **state)
{
    (void)state;
    mp_config ds;
    mp_pipeline_cost pds, pmg;
    build_both(1, 1, &ds, &pds, &pmg);
    mp_group_place g;
    mp_group_place_of(&ds, MP_GROUP_DP, &g);
    double P = mp_model_params(&ds.model);
    double ar = mp_coll_time(&ds.hw, &g, MP_COLL_ALLREDUCE, 4.0 * P);
    double rs = mp_coll_time(&ds.hw, &g, MP_COLL_REDUCESCATTER, 4.0 * P);
    double ag = mp_coll_time(&ds.hw, &g, MP_COLL_ALLGATHER, 2.0 * P);
    assert_true(near(pds.dp_time, ar + ag));
    assert_true(near(pmg.dp_time, rs + ag));
    assert_true(pds.dp_time > pmg.dp_time);
    mp_pipeline_cost_free(&pds);
    mp_pipeline_cost_free(&pmg);
}

/* A plan file names a stack other than Megatron-LM's, and only then. */
static void test_stack_in_plan_json(void **state)
{
    (void)state;
    mp_config ds = config(8, 1, 1, MP_DTYPE_BF16, MP_STACK_BIGSCIENCE_MDS);
    cJSON *o = mp_training_to_json(&ds.training);
    assert_non_null(o);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stack");
    assert_true(cJSON_IsString(st));
    assert_string_equal(st->valuestring, "megatron-deepspeed-bigscience");
    cJSON_Delete(o);
    ds.training.stack = MP_STACK_MEGATRON_LM;
    o = mp_training_to_json(&ds.training);
    assert_non_null(o);
    assert_null(cJSON_GetObjectItemCaseSensitive(o, "stack"));
    cJSON_Delete(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backward_tp_exposed),
        cmocka_unit_test(test_bf16_accumulation_pass),
        cmocka_unit_test(test_bf16_accumulation_in_stages),
        cmocka_unit_test(test_bf16_dp_allreduce),
        cmocka_unit_test(test_stack_in_plan_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
