/* An explicit pipeline layout in the cost model and the simulator: one equal
 * to Megatron's default split changes nothing, bit for bit; an uneven one
 * moves exactly its layers' memory to the stage that holds them; the
 * simulator runs uneven (also interleaved) stages to the end, as the same
 * split given as plan stages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/io.h"
#include "core/layout.h"
#include "planner/megatron.h"
#include "planner/cost.h"
#include "sim/simulate.h"

#include "../config_fixture.h"

static void estimate(const mp_config *c, mp_estimate *e)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_estimate_config(c, NULL, e, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
}

static void test_default_equal(void **state)
{
    (void)state;
    static const struct {
        int64_t pp, vpp;
        const char *layout;
    } cases[] = {
        {8, 1, "Et*12|(t*12|)*6t*12L"},
        {8, 2, "Et*6|(t*6|)*14t*6L"},
        {4, 3, "E,t*8|(t*8|)*10,t*8L"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_config c = gpt3_175b_config(cases[i].pp, cases[i].vpp);
        mp_estimate plain, given;
        estimate(&c, &plain);
        snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
                 cases[i].layout);
        estimate(&c, &given);
        assert_memory_equal(&plain.time, &given.time, sizeof plain.time);
        assert_memory_equal(&plain.memory, &given.memory, sizeof plain.memory);
    }
}

static void stage_costs(const mp_config *c, mp_pipeline_cost *pc)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_pipeline_cost_build(c, NULL, pc, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
}

/* Two blocks moved from the last stage to the first: stage 0 gains exactly
 * two middle blocks' weights, gradients, optimizer states and activations,
 * the last stage loses them, the middle stays, and the first rank (the
 * most micro-batches in flight under 1F1B) peaks higher. */
static void test_uneven_moves_memory(void **state)
{
    (void)state;
    mp_config c = gpt3_175b_config(8, 1);
    mp_pipeline_cost even, moved;
    stage_costs(&c, &even);
    mp_estimate e_even, e_moved;
    estimate(&c, &e_even);
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*14|(t*12|)*6t*10L");
    stage_costs(&c, &moved);
    estimate(&c, &e_moved);
    /* a middle stage holds 12 blocks and nothing else: one block's share */
    double block_static = even.stages[1].static_bytes / 12.0;
    double block_act = even.stages[1].act_bytes / 12.0;
    assert_float_equal(moved.stages[0].static_bytes - even.stages[0].static_bytes,
                       2.0 * block_static, 1e-6 * block_static);
    assert_float_equal(even.stages[7].static_bytes - moved.stages[7].static_bytes,
                       2.0 * block_static, 1e-6 * block_static);
    assert_float_equal(moved.stages[0].act_bytes - even.stages[0].act_bytes, 2.0 * block_act,
                       1e-6 * block_act);
    for (int k = 1; k < 7; k++)
        assert_memory_equal(&moved.stages[k], &even.stages[k], sizeof even.stages[k]);
    assert_true(e_moved.memory.peak > e_even.memory.peak);
    mp_pipeline_cost_free(&even);
    mp_pipeline_cost_free(&moved);
}

/* A model with a multi-token-prediction module: the layout must place its m
 * (after every t, in the last stage: megaplan keeps no stage without a
 * block), and such a layout costs exactly what the default split does (the
 * module beside the head); a layout without the m is refused. */
static void test_layout_places_mtp(void **state)
{
    (void)state;
    mp_config c = gpt3_175b_config(2, 2);
    c.model.mtp_layers = 1;
    mp_estimate plain, given;
    estimate(&c, &plain);
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*24|t*24|t*24|t*24mL");
    estimate(&c, &given);
    assert_memory_equal(&plain.time, &given.time, sizeof plain.time);
    assert_memory_equal(&plain.memory, &given.memory, sizeof plain.memory);
    mp_error err;
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*24|t*24|t*24|t*24L");
    assert_int_equal(mp_estimate_config(&c, NULL, &given, &err), MP_EINPUT);
    assert_string_equal(err.field, "pipeline_layout");
    c.model.mtp_layers = 0;
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*24|t*24|t*24|t*24mL");
    assert_int_equal(mp_estimate_config(&c, NULL, &given, &err), MP_EINPUT);
}

static double simulate(const mp_config *c, const mp_plan *plan, mp_sim_result *r)
{
    mp_error err;
    mp_error_clear(&err);
    mp_sim_options o = {.record_timeline = false, .async_p2p = true};
    memset(r, 0, sizeof *r);
    if (mp_simulate(c, plan, &o, r, &err) != MP_OK)
        fail_msg("simulate: %s: %s", err.field, err.msg);
    return r->makespan;
}

/* Uneven interleaved stages: the simulator runs every micro-batch through
 * them (no deadlock), gives what the same split given as plan stages gives,
 * and not what the default split gives; the heavier rank 0 peaks higher. */
static void test_simulate_uneven(void **state)
{
    (void)state;
    mp_config c = gpt3_175b_config(4, 2);
    c.parallel.dp = 1024 / 32;
    c.training.global_batch = 8 * c.parallel.dp; /* 8 micro-batches: a multiple of pp */
    mp_sim_result plain, given, staged;
    double t_plain = simulate(&c, NULL, &plain);
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*16|t*10|t*12|t*10|t*12|t*12|t*12|t*12L");
    double t_given = simulate(&c, NULL, &given);
    mp_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    plan->config = c;
    mp_plan_default_stages(plan); /* the layout's split, as plan stages */
    assert_int_equal(plan->n_stages, 8);
    assert_int_equal(plan->stages[0].end, 17);
    assert_int_equal(plan->stages[1].end, 27);
    plan->config.parallel.pipeline_layout[0] = '\0';
    double t_staged = simulate(&plan->config, plan, &staged);
    assert_true(t_given == t_staged);
    assert_true(t_given != t_plain);
    assert_true(given.peak_memory[0] > plain.peak_memory[0]);
    assert_true(given.peak_memory[0] == staged.peak_memory[0]);
    mp_sim_result_free(&plain);
    mp_sim_result_free(&given);
    mp_sim_result_free(&staged);
    free(plan);
}

/* The Megatron flags of a layout plan carry the layout as written; read back
 * (Megatron's --pipeline-model-parallel-layout value, parsed again) it gives
 * the stages the cost model used, and no --num-layers-per-virtual-pipeline-stage
 * beside it (Megatron refuses both together). Also for a plan whose uneven
 * split came as stages only: the layout written for it reads back to them. */
static void roundtrip(const mp_config *c, const mp_plan *plan, const mp_stage_range *want)
{
    mp_buf b;
    mp_buf_init(&b);
    mp_megatron_args(c, plan, &b);
    const char *flag = "--pipeline-model-parallel-layout \"";
    const char *at = strstr(b.data, flag);
    assert_non_null(at);
    assert_null(strstr(b.data, "--num-layers-per-virtual-pipeline-stage"));
    at += strlen(flag);
    const char *end = strchr(at, '"');
    assert_non_null(end);
    char text[MP_LAYOUT_CHARS];
    snprintf(text, sizeof text, "%.*s", (int)(end - at), at);
    if (c->parallel.pipeline_layout[0])
        assert_string_equal(text, c->parallel.pipeline_layout);
    mp_layout *l = calloc(1, sizeof *l);
    assert_non_null(l);
    mp_error err;
    assert_int_equal(mp_layout_parse(text, c->parallel.pp, c->parallel.vpp, c->model.layers, 0, l,
                                     &err),
                     MP_OK);
    for (int32_t k = 0; k < l->n_stages; k++) {
        int64_t lb, le;
        mp_layout_stage_items(l, c->model.layers, k, &lb, &le);
        assert_int_equal(lb, want[k].begin);
        assert_int_equal(le, want[k].end);
    }
    free(l);
    mp_buf_free(&b);
}

static void test_export_roundtrip(void **state)
{
    (void)state;
    mp_config c = gpt3_175b_config(4, 2);
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s",
             "Et*16|t*10|t*12|t*10|(t*12|)*3t*12L");
    mp_stage_range st[8];
    mp_config_stages(&c, 8, st);
    assert_int_equal(st[1].begin, 17);
    roundtrip(&c, NULL, st);
    /* the same split as plan stages, no layout string: written from the stages */
    mp_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    plan->config = c;
    plan->config.parallel.pipeline_layout[0] = '\0';
    plan->n_stages = 8;
    memcpy(plan->stages, st, sizeof st);
    roundtrip(&plan->config, plan, st);
    free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_equal),
        cmocka_unit_test(test_uneven_moves_memory),
        cmocka_unit_test(test_layout_places_mtp),
        cmocka_unit_test(test_simulate_uneven),
        cmocka_unit_test(test_export_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
