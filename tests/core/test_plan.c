/* Plans: Megatron's even split, the checks of a stage split, reading errors
 * located in the file, and write -> read -> equal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/io.h"

static mp_plan *make_plan(const char *model, int64_t gpus, int64_t tp, int64_t pp, int64_t vpp)
{
    mp_plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->config.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a100", &p->config.hw, &err), MP_OK);
    int64_t dp = gpus / (tp * pp);
    p->config.training = (mp_training){.gpus = gpus, .seq = p->config.model.seq,
                                       .global_batch = dp * pp * 4, .precision = MP_DTYPE_BF16};
    p->config.parallel = (mp_parallel){.tp = tp, .pp = pp, .vpp = vpp, .cp = 1, .dp = dp,
                                       .micro_batch = 1, .sp = tp > 1,
                                       .schedule = vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return p;
}

static void test_default_split(void **state)
{
    (void)state;
    mp_plan *p = make_plan("gpt3-175b", 1024, 8, 8, 2);
    mp_plan_default_stages(p);
    assert_int_equal(p->n_stages, 16);
    /* 96 blocks over 16 virtual stages: 6 each; embedding with the first,
     * head with the last */
    assert_int_equal(p->stages[0].begin, 0);
    assert_int_equal(p->stages[0].end, 7);
    assert_int_equal(p->stages[1].begin, 7);
    assert_int_equal(p->stages[1].end, 13);
    assert_int_equal(p->stages[15].begin, 91);
    assert_int_equal(p->stages[15].end, 98);
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_plan_check(p, &err), MP_OK);

    /* a single stage holds everything */
    mp_plan *q = make_plan("gpt3-125m", 8, 8, 1, 1);
    mp_plan_default_stages(q);
    assert_int_equal(q->n_stages, 1);
    assert_int_equal(q->stages[0].begin, 0);
    assert_int_equal(q->stages[0].end, 14);
    free(q);

    /* broken splits */
    p->stages[3].end += 1;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    assert_string_equal(err.field, "stages");
    assert_non_null(strstr(err.msg, "contiguous"));
    mp_plan_default_stages(p);
    p->stages[15].end = 97;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "expected 98"));
    mp_plan_default_stages(p);
    p->n_stages = 8;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "pp*vpp"));
    mp_plan_default_stages(p);
    p->stages[0].end = 0; /* empty: the first stage holds the embedding */
    p->stages[1].begin = 0;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "empty"));
    mp_plan_default_stages(p); /* a plan built in code: the embedding recomputes nothing */
    p->has_layer_recompute = true;
    memset(p->layer_recompute, MP_RECOMPUTE_NONE, sizeof p->layer_recompute);
    p->layer_recompute[0] = MP_RECOMPUTE_SELECTIVE;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "item 0 is the embedding"));
    p->layer_recompute[0] = MP_RECOMPUTE_NONE;
    assert_int_equal(mp_plan_check(p, &err), MP_OK);
    free(p);
}

static void round_trip(mp_plan *p, const char *predicted_json)
{
    cJSON *pred = predicted_json ? cJSON_Parse(predicted_json) : NULL;
    mp_buf b;
    mp_buf_init(&b);
    mp_plan_write_yaml(p, pred, &b);
    assert_false(b.oom);
    mp_plan *back = malloc(sizeof *back);
    assert_non_null(back);
    mp_error err;
    mp_error_clear(&err);
    if (mp_plan_parse_yaml(b.data, b.len, "rt.yaml", back, &err) != MP_OK)
        fail_msg("%s:%d:%d: %s: %s\n%s", err.file, err.line, err.column, err.field, err.msg,
                 b.data);
    assert_memory_equal(&back->config.model, &p->config.model, sizeof p->config.model);
    assert_memory_equal(&back->config.hw, &p->config.hw, sizeof p->config.hw);
    assert_memory_equal(&back->config.training, &p->config.training,
                        sizeof p->config.training);
    assert_memory_equal(&back->config.parallel, &p->config.parallel,
                        sizeof p->config.parallel);
    if (p->n_stages) {
        assert_int_equal(back->n_stages, p->n_stages);
        assert_memory_equal(back->stages, p->stages, sizeof p->stages[0] * (size_t)p->n_stages);
    }
    assert_int_equal(back->has_layer_recompute, p->has_layer_recompute);
    if (p->has_layer_recompute)
        assert_memory_equal(back->layer_recompute, p->layer_recompute,
                            (size_t)p->config.model.layers + 2);
    assert_int_equal(back->has_predicted, pred != NULL);
    if (pred) {
        cJSON *again = cJSON_Parse(back->predicted_json);
        assert_true(cJSON_Compare(again, pred, true));
        cJSON_Delete(again);
    }
    /* writing what was read gives the same text */
    mp_buf b2;
    mp_buf_init(&b2);
    mp_plan_write_yaml(back, NULL, &b2);
    assert_string_equal(b2.data, b.data);
    mp_buf_free(&b);
    mp_buf_free(&b2);
    cJSON_Delete(pred);
    free(back);
}

static void test_round_trip(void **state)
{
    (void)state;
    mp_plan *p = make_plan("gpt3-175b", 1024, 8, 8, 2);
    p->config.training.tokens = 3e11;
    p->config.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    p->config.parallel.dist_opt = true;
    p->config.parallel.dp_overlap = true;
    round_trip(p, NULL); /* no stages given: the even split is written */
    mp_plan_default_stages(p);
    p->stages[0].end = 6; /* an uneven split the ILP might choose */
    p->stages[1].begin = 6;
    p->has_layer_recompute = true;
    for (int i = 1; i < 97; i++) /* the embedding (0) and head (97) recompute nothing */
        p->layer_recompute[i] = (uint8_t)(i % 3);
    round_trip(p,
               "{\"model\":\"gpt3-175b\",\"hw\":\"dgx-a100\",\"gpus\":1024,"
               "\"memory_gib\":{\"peak\":61.25,\"capacity\":80},"
               "\"time_s\":{\"step\":12.345678901234567,\"bubble\":0.1},"
               "\"fits\":true,\"defaults\":[\"vpp=1\", \"yes\", \"1f1b\", \"\"],"
               "\"over\":null,\"name with space\":-1e-300}");
    free(p);

    p = make_plan("llama3-70b", 64, 8, 4, 1);
    p->config.hw.scale_out.bw_per_gpu = 1.0 / 3.0 * 1e11; /* not a round number */
    memset(p->config.hw.description, 0, sizeof p->config.hw.description);
    strcpy(p->config.hw.description, "quotes \" and \\ and: colons # hash");
    round_trip(p, NULL);
    free(p);

    p = make_plan("t5-11b", 64, 8, 4, 1);
    p->config.training.global_batch = 128;
    round_trip(p, NULL);
    free(p);
}

static mp_status parse(const char *text, mp_plan *p, mp_error *err)
{
    mp_error_clear(err);
    return mp_plan_parse_yaml(text, strlen(text), "p.yaml", p, err);
}

static void expect_error(const char *text, int line, int col, const char *field, const char *part)
{
    mp_plan *p = malloc(sizeof *p);
    mp_error err;
    if (parse(text, p, &err) != MP_EINPUT)
        fail_msg("accepted; expected %s", field);
    free(p);
    assert_string_equal(err.file, "p.yaml");
    if (err.line != line || err.column != col || strcmp(err.field, field) ||
        !strstr(err.msg, part))
        fail_msg("got %d:%d %s: %s; expected %d:%d %s: ...%s...", err.line, err.column,
                 err.field, err.msg, line, col, field, part);
}

static void test_short_plans_and_errors(void **state)
{
    (void)state;
    const char *head = "megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\n";
    char text[1024];
    mp_plan *p = malloc(sizeof *p);
    mp_error err;
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nparallel: {tp: 2}\n",
             head);
    if (parse(text, p, &err) != MP_OK)
        fail_msg("%d:%d %s: %s", err.line, err.column, err.field, err.msg);
    /* defaults as Megatron's: dp from the GPU count, 1f1b, seq of the model */
    assert_int_equal(p->config.parallel.dp, 2);
    assert_int_equal(p->config.parallel.pp, 1);
    assert_int_equal(p->config.parallel.schedule, MP_SCHED_1F1B);
    assert_int_equal(p->config.training.seq, 2048);
    assert_int_equal(p->config.training.precision, MP_DTYPE_BF16);
    assert_int_equal(p->n_stages, 0);
    free(p);

    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nparallel: {tp: 3}\n",
             head);
    expect_error(text, 4, 18, "training.gpus", "not a multiple");
    snprintf(text, sizeof text, "%straining: {gpus: 8, global_batch: 8}\nparallel: {tp: 8, dp: 1, pp: 1, cp: 1}\n", head);
    expect_error(text, 5, 16, "parallel.tp", "does not divide"); /* 12 heads */
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 7}\n", head);
    expect_error(text, 4, 35, "training.global_batch", "multiple of micro_batch*dp");
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, sp: 2}\n",
             head);
    expect_error(text, 5, 23, "parallel.sp", "true or false");
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nparalel: {}\n", head);
    expect_error(text, 5, 1, "paralel", "did you mean 'parallel'");
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nstages: [[0, 7], [7, 14]]\n",
             head);
    expect_error(text, 5, 9, "stages", "pp*vpp");
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nstages: [[0, x]]\n", head);
    expect_error(text, 5, 14, "stages", "integer");
    snprintf(text, sizeof text, "%straining: {gpus: 4, global_batch: 8}\nlayer_recompute: [none]\n",
             head);
    expect_error(text, 5, 18, "layer_recompute", "needs 14 entries");
    /* recomputation is of the blocks: the embedding's and the head's entries are none */
    snprintf(text, sizeof text,
             "%straining: {gpus: 4, global_batch: 8}\nlayer_recompute: [none, full, full, full, "
             "full, full, full, full, full, full, full, full, full, selective]\n",
             head);
    expect_error(text, 5, 97, "layer_recompute", "item 13 is the head: only none");
    snprintf(text, sizeof text, "%straining: {gpus: 4}\n", head);
    expect_error(text, 4, 11, "training.global_batch", "missing");
    expect_error("megaplan_plan: 2\n", 1, 16, "megaplan_plan", "format version 2 is not known");
    expect_error("model: gpt3-125m\n", 1, 1, "megaplan_plan", "not a plan file");
    expect_error("megaplan_plan: 1\nmodel: gpt3-999b\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n",
                 2, 8, "model", "unknown model preset");
    expect_error("megaplan_plan: 1\nmodel: gpt3-125m\nhw: nope\ntraining: {gpus: 1, global_batch: 1}\n",
                 3, 5, "hw", "unknown hardware profile");
    expect_error("megaplan_plan: 1\nmodel: {arch: gpt, layers: 2, hidden: 64, heads: 4, vocab: 10, seq: -1}\n"
                 "hw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n",
                 2, 69, "model.seq", "at least 1");
    expect_error("megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n"
                 "model: gpt3-125m\n",
                 5, 1, "model", "duplicate");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_split),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_short_plans_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
