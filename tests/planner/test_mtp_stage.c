/* test_mtp_stage.c — Megatron's standalone MTP stage (core/layout.h,
 * cost.c place_mtp_standalone): DeepSeek-V3's 61 layers and one MTP module
 * on p = 16, v = 2 as Megatron-LM's own layout docstring writes it,
 * "Et*3|(tt|)*29,m|L" (pipeline_parallel_layer_layout.py parse_str_to_list,
 * at d98e8a6): stage 30 (rank 14's second chunk) holds the module, stage
 * 31 (rank 15's) the loss alone. Against the same split with the module
 * beside the loss, "Et*3|(tt|)*29,|mL": the work moves, none is lost; the
 * module's stage keeps a copy of the word embedding (GPTModel builds the
 * embedding where mtp_process) and sends the main and the module's hidden
 * states concatenated (1 + D activations, process_mtp_loss splits them on
 * the last stage); the last keeps the head's GEMM, cross entropy and logits
 * for the MTP loss; and the embedding group (pretrain_gpt.py
 * get_embedding_ranks: the first rank, the last when tied, the MTP ranks)
 * all-reduces the embedding gradient over its members. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "sim/simulate.h"

#define STANDALONE "Et*3|(tt|)*29,m|L"
#define BESIDE "Et*3|(tt|)*29,|mL"

static mp_config dsv3(const char *layout, bool tied)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("deepseek-v3");
    c.model.moe.imbalance = 1.0;
    c.model.mtp_layers = 1;
    c.model.tied_embeddings = tied;
    mp_error err;
    assert_int_equal(mp_hw_preset("h800", &c.hw, &err), MP_OK);
    c.training.gpus = 2048;
    c.training.seq = 4096;
    c.training.precision = MP_DTYPE_BF16;
    mp_parallel_defaults(&c.parallel);
    c.parallel.pp = 16;
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    c.parallel.dp = 128;
    c.parallel.ep = 64;
    c.parallel.dist_opt = true;
    c.training.global_batch = 128 * 32;
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "%s", layout);
    return c;
}

static void build(const mp_config *c, mp_pipeline_cost *pc)
{
    mp_error err;
    if (mp_pipeline_cost_build(c, NULL, pc, &err) != MP_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(pc->n_stages, 32);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12;
}

static void test_stage_of_modules(void **state)
{
    (void)state;
    mp_config s = dsv3(STANDALONE, false), b = dsv3(BESIDE, false);
    assert_int_equal(mp_config_mtp_stage(&s, 32), 30);
    assert_int_equal(mp_config_mtp_stage(&b, 32), 31);
    mp_config none = dsv3("", false);
    assert_int_equal(mp_config_mtp_stage(&none, 32), 31); /* Megatron's default */
    none.model.mtp_layers = 0;
    assert_int_equal(mp_config_mtp_stage(&none, 32), -1);
}

static void test_work_moves(void **state)
{
    (void)state;
    mp_config s = dsv3(STANDALONE, false), b = dsv3(BESIDE, false);
    mp_pipeline_cost ps, pb;
    build(&s, &ps);
    build(&b, &pb);
    const mp_stage_cost *s30 = &ps.stages[30], *s31 = &ps.stages[31];
    const mp_stage_cost *b30 = &pb.stages[30], *b31 = &pb.stages[31];
    /* beside the loss: stage 30 is empty */
    assert_true(b30->fwd == 0.0 && b30->static_bytes == 0.0);
    /* standalone: the module runs on stage 30, the same work in all */
    assert_true(s30->fwd > 0.0 && s30->bwd > 0.0);
    assert_true(near(s30->fwd + s31->fwd, b31->fwd));
    assert_true(near(s30->bwd + s31->bwd, b31->bwd));
    assert_true(near(s30->bwd_weight + s31->bwd_weight, b31->bwd_weight));
    /* the last stage keeps the head's part: the head item's and the MTP
     * loss's (one more GEMM, cross entropy and logits), twice the head's */
    mp_item_cost items[63];
    mp_error err;
    assert_int_equal(mp_item_costs(&s, items, &err), MP_OK);
    mp_item_cost all;
    assert_int_equal(mp_mtp_item_cost(&s, NULL, &all, &err), MP_OK);
    double head_item = items[62].fwd - all.fwd; /* items[62]: head + the modules folded in */
    assert_true(near(s31->fwd, 2.0 * head_item));
    assert_true(near(s30->fwd, all.fwd - head_item));
    /* combined 1F1B runs a head without modules outside the merged layers
     * (TransformerModelChunkSchedulePlan.run's post_process): the last
     * stage's whole pass here; the module runs in stage 30's layer loop,
     * and beside the loss the head holds it (mtp_post_process) */
    assert_true(near(s31->head_fwd, s31->fwd) && near(s31->head_bwd, s31->bwd));
    assert_true(s30->head_fwd == 0.0 && s30->embed_fwd == 0.0 && s30->head_bwd == 0.0);
    assert_true(b31->head_fwd == 0.0 && b31->head_bwd == 0.0);
    /* untied: one embedding copy for the module's lookups either way, on
     * the module's stage, so the weights (and the copy) move whole */
    double spb = mp_static_bytes_per_param(&s);
    double vh = 129280.0 * 7168.0; /* V x h, tp 1 */
    assert_true(near(s30->static_bytes + s31->static_bytes, b31->static_bytes));
    assert_true(s30->static_bytes > vh * spb);
    /* the last stage: the output layer (and final norm) alone, the MTP
     * loss's GEMM using its weight */
    assert_true(near(s31->static_bytes, items[62].static_bytes - all.static_bytes));
    /* the concatenated hidden states: 1 + D activations from stage 30 */
    assert_true(near(s30->send_bytes, 2.0 * ps.stages[29].send_bytes));
    assert_true(near(b30->send_bytes, 0.0) || near(b30->send_bytes, pb.stages[29].send_bytes));
    mp_pipeline_cost_free(&ps);
    mp_pipeline_cost_free(&pb);
}

/* The embedding group: untied, the first rank and the module's (rank 14
 * standalone, rank 15 beside the loss): two members either way; tied, the
 * last rank joins (its head's copy): three standalone, two beside. The
 * all-reduce moves the V x h / t gradient (tp 1). */
static void test_embedding_group(void **state)
{
    (void)state;
    mp_config s = dsv3(STANDALONE, false), b = dsv3(BESIDE, false);
    mp_pipeline_cost ps, pb;
    build(&s, &ps);
    build(&b, &pb);
    mp_group_place g;
    mp_group_place_of(&s, MP_GROUP_PP, &g);
    g.cross_domain = (double)s.training.gpus > mp_scale_up_gpus(&s.hw);
    g.per_node = 1.0;
    double bytes = 129280.0 * 7168.0 * mp_grad_reduce_bytes(&s);
    g.n = 2;
    double two = mp_coll_time(&s.hw, &g, MP_COLL_ALLREDUCE, bytes);
    g.n = 3;
    double three = mp_coll_time(&s.hw, &g, MP_COLL_ALLREDUCE, bytes);
    assert_true(two > 0.0 && three > two);
    assert_true(near(ps.dp_tied, two));
    assert_true(near(pb.dp_tied, two));
    mp_pipeline_cost_free(&ps);
    mp_pipeline_cost_free(&pb);
    mp_config st = dsv3(STANDALONE, true), bt = dsv3(BESIDE, true);
    build(&st, &ps);
    build(&bt, &pb);
    assert_true(near(ps.dp_tied, three));
    assert_true(near(pb.dp_tied, two));
    /* tied: the module's stage needs its own copy, the head keeps its own */
    double spb = mp_static_bytes_per_param(&st);
    double vh = 129280.0 * 7168.0;
    assert_true(near(ps.stages[30].static_bytes + ps.stages[31].static_bytes -
                         pb.stages[31].static_bytes,
                     vh * spb));
    mp_pipeline_cost_free(&ps);
    mp_pipeline_cost_free(&pb);
}

/* The estimate runs it: the layout's step is neither refused nor free. */
static void test_estimate(void **state)
{
    (void)state;
    mp_config s = dsv3(STANDALONE, false), b = dsv3(BESIDE, false);
    mp_estimate es, eb;
    mp_error err;
    if (mp_estimate_config(&s, NULL, &es, &err) != MP_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(mp_estimate_config(&b, NULL, &eb, &err), MP_OK);
    assert_true(es.time.step > 0.0 && eb.time.step > 0.0);
    assert_true(es.time.step != eb.time.step);
}

/* The simulator runs the moved stages: rank 14 (the module's stage in its
 * second chunk) holds the module's weights, the embedding copy and its
 * stashed activations; rank 15 gives up the module and the copy. */
static void test_simulate(void **state)
{
    (void)state;
    mp_config s = dsv3(STANDALONE, false), b = dsv3(BESIDE, false);
    mp_sim_options opt = {0};
    mp_sim_result rs, rb;
    mp_error err;
    if (mp_simulate(&s, NULL, &opt, &rs, &err) != MP_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(mp_simulate(&b, NULL, &opt, &rb, &err), MP_OK);
    assert_int_equal(rs.ranks, 16);
    double vh_bytes = 129280.0 * 7168.0 * mp_static_bytes_per_param(&s);
    assert_true(rs.peak_memory[14] - rb.peak_memory[14] > vh_bytes);
    assert_true(rb.peak_memory[15] - rs.peak_memory[15] > vh_bytes);
    assert_true(rs.makespan > 0.0 && rs.makespan != rb.makespan);
    mp_sim_result_free(&rs);
    mp_sim_result_free(&rb);
}

/* The modules' cost is checked as the estimate checks its config: 61
 * layers on pp 16 x vpp 2 without a layout are Megatron's refusal under
 * interleaved 1F1B (neither 61 nor 63 is a multiple of 32), the V's own split
 * under zb-v, and any split in a plan that lists its stages. It checked every
 * config as if stages were given, so the interleaved one was costed. */
static void test_mtp_cost_checked_as_estimate(void **state)
{
    (void)state;
    mp_config c = dsv3("", false);
    mp_item_cost mtp;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_mtp_item_cost(&c, NULL, &mtp, &err), MP_EINPUT);
    assert_string_equal(err.field, "vpp");
    mp_estimate e;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_EINPUT); /* the same verdict */
    mp_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    plan->config = c;
    plan->n_stages = 32;
    assert_int_equal(mp_mtp_item_cost(&c, plan, &mtp, &err), MP_OK);
    assert_true(mtp.fwd > 0.0);
    free(plan);
    c.parallel.schedule = MP_SCHED_ZBV;
    assert_int_equal(mp_mtp_item_cost(&c, NULL, &mtp, &err), MP_OK);
    assert_true(mtp.fwd > 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_of_modules),
        cmocka_unit_test(test_work_moves),
        cmocka_unit_test(test_embedding_group),
        cmocka_unit_test(test_estimate),
        cmocka_unit_test(test_simulate),
        cmocka_unit_test(test_mtp_cost_checked_as_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
