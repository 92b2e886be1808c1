/* test_exec_t5_split.c — T5's pipeline split is one split: the plan's
 * default stages, the cost model's (which the simulator runs) and the
 * executor's are the same items at Megatron's split rank, and the bytes the
 * cost model sends between stages are what the executor's stages send. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/io.h"
#include "core/plan.h"
#include "exec/exec.h"
#include "exec/kernels.h"
#include "planner/cost.h"

static mp_plan *t5_plan(int pp, int enc, int dec, int dec_seq)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "megaplan_plan: 1\n"
             "model: {name: t, arch: t5, layers: %d, encoder_layers: %d, decoder_layers: %d,\n"
             "        hidden: 32, heads: 4, ffn_hidden: 64, vocab: 64, seq: 16, encoder_seq: 16,\n"
             "        decoder_seq: %d, activation: relu, norm: rmsnorm, position: relative,\n"
             "        tied_embeddings: true}\n"
             "hw: dgx-a100\n"
             "training: {gpus: %d, seq: 16, global_batch: 8, precision: fp32, tokens: 0}\n"
             "parallel: {tp: 1, sp: false, pp: %d, vpp: 1, cp: 1, dp: 1, micro_batch: 2,\n"
             "           recompute: none, dist_opt: false, schedule: 1f1b}\n",
             enc + dec, enc, dec, dec_seq, pp, pp);
    mp_plan *plan = calloc(1, sizeof *plan);
    mp_error err;
    assert_non_null(plan);
    if (mp_plan_parse_yaml(yaml, strlen(yaml), "t5.yaml", plan, &err) != MP_OK)
        fail_msg("%s", err.msg);
    return plan;
}

/* One split, three users: for several depths and pipelines, no stage mixes
 * encoder and decoder blocks, the executor's stages are the plan's, and the
 * cost model without stages costs each stage as with the plan's. */
static void check_split(int pp, int enc, int dec)
{
    mp_plan *plan = t5_plan(pp, enc, dec, 8), *with = calloc(1, sizeof *with);
    mp_error err;
    assert_non_null(with);
    *with = *plan;
    mp_plan_default_stages(with);
    assert_int_equal(with->n_stages, pp);
    int split = (int)mp_t5_split_rank(enc, dec, pp);
    assert_true(split >= 1 && split < pp);
    mp_gpt_dims d;
    int m;
    assert_int_equal(mp_exec_dims(plan, false, &d, &m, &err), MP_OK);
    for (int k = 0; k < pp; k++) {
        int b, e;
        assert_int_equal(mp_exec_stage_items(plan, false, &d, k, &b, &e, &err), MP_OK);
        assert_int_equal(b, with->stages[k].begin);
        assert_int_equal(e, with->stages[k].end);
        /* encoder stages before the split rank, decoder stages from it */
        if (k < split)
            assert_true(e <= enc + 1);
        else
            assert_true(b >= enc + 1 || (k == 0 && b == 0));
    }
    mp_pipeline_cost a, c;
    assert_int_equal(mp_pipeline_cost_build(&plan->config, NULL, &a, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&with->config, with, &c, &err), MP_OK);
    for (int k = 0; k < pp; k++) {
        assert_true(a.stages[k].fwd == c.stages[k].fwd);
        assert_true(a.stages[k].bwd == c.stages[k].bwd);
        assert_true(a.stages[k].send_bytes == c.stages[k].send_bytes);
    }
    mp_pipeline_cost_free(&a);
    mp_pipeline_cost_free(&c);
    free(plan);
    free(with);
}

static void test_t5_split_is_one_split(void **state)
{
    (void)state;
    check_split(2, 2, 2);
    check_split(4, 2, 2);
    check_split(4, 6, 6);
    check_split(4, 12, 4);  /* three encoder stages, one decoder stage */
    check_split(8, 24, 24); /* t5-11b's depth */
    check_split(6, 12, 12);
    assert_int_equal(mp_t5_split_rank(24, 24, 8), 4);
    assert_int_equal(mp_t5_split_rank(12, 4, 4), 3);
    assert_int_equal(mp_t5_split_rank(1, 7, 4), 1); /* at least one stage a side */
    assert_int_equal(mp_t5_split_rank(7, 1, 4), 3);
    assert_int_equal(mp_t5_split_rank(4, 4, 1), 0);
}

/* The bytes between stages: an encoder stage sends its rows of the
 * encoder's stream, a decoder stage its own rows and the encoder's output;
 * the cost model's send_bytes (fp32, tp 1) are the executor's messages. */
static void test_t5_stage_messages_match_cost(void **state)
{
    (void)state;
    for (int pp = 2; pp <= 4; pp += 2) {
        mp_plan *plan = t5_plan(pp, 2, 2, 8);
        mp_error err;
        mp_gpt_dims d;
        int m;
        assert_int_equal(mp_exec_dims(plan, false, &d, &m, &err), MP_OK);
        mp_pipeline_cost pc;
        assert_int_equal(mp_pipeline_cost_build(&plan->config, NULL, &pc, &err), MP_OK);
        size_t prev_out = 0;
        for (int k = 0; k < pp; k++) {
            mp_gpt_dims dk = d;
            assert_int_equal(mp_exec_stage_items(plan, false, &d, k, &dk.item_begin,
                                                 &dk.item_end, &err),
                             MP_OK);
            mp_param_layout lay;
            assert_int_equal(mp_param_layout_build(&dk, &lay, &err), MP_OK);
            mp_group self = {.comm = MPI_COMM_SELF, .size = 1, .rank = 0};
            mp_gpt_f32 g;
            assert_int_equal(mp_gpt_init_f32(&g, &dk, &lay, mp_backend_cpu(), self, 1, 1, false,
                                             1, NULL, &err),
                             MP_OK);
            size_t in = mp_gpt_stage_input_count_f32(&g), out = mp_gpt_stage_output_count_f32(&g);
            if (k > 0)
                assert_int_equal(in, prev_out);
            if (k < pp - 1) {
                assert_true((double)out * sizeof(float) == pc.stages[k].send_bytes);
                /* the decoder's stages carry both streams */
                size_t enc_rows = 16 * 2, dec_rows = 8 * 2;
                bool dec = dk.item_end > d.enc_layers + 1;
                assert_int_equal(out, (dec ? enc_rows + dec_rows : enc_rows) * 32);
            }
            prev_out = out;
            mp_gpt_free_f32(&g);
            mp_param_layout_free(&lay);
        }
        mp_pipeline_cost_free(&pc);
        free(plan);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t5_split_is_one_split),
        cmocka_unit_test(test_t5_stage_messages_match_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
