/* Megatron's pipeline layout strings (core/layout.h): the expansion as
 * Megatron-Core's parse_str_to_list does it, its rules, and one clear
 * message (field, character) for every string it or megaplan refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"

static mp_layout *parse_ok(const char *s, int64_t pp, int64_t vpp, int64_t layers)
{
    mp_layout *l = calloc(1, sizeof *l);
    assert_non_null(l);
    mp_error err;
    mp_error_clear(&err);
    if (mp_layout_parse(s, pp, vpp, layers, 0, l, &err) != MP_OK)
        fail_msg("'%s' refused: %s: %s", s, err.field, err.msg);
    return l;
}

static void expect_blocks(const char *s, int64_t pp, int64_t vpp, int64_t layers,
                          const int32_t *want, int n)
{
    mp_layout *l = parse_ok(s, pp, vpp, layers);
    assert_int_equal(l->n_stages, n);
    for (int k = 0; k < n; k++)
        if (l->blocks[k] != want[k])
            fail_msg("'%s': stage %d holds %d layers, expected %d", s, k, l->blocks[k], want[k]);
    free(l);
}

static void expect_refused(const char *s, int64_t pp, int64_t vpp, int64_t layers,
                           const char *part)
{
    mp_layout *l = calloc(1, sizeof *l);
    assert_non_null(l);
    mp_error err;
    mp_error_clear(&err);
    mp_status st = mp_layout_parse(s, pp, vpp, layers, 0, l, &err);
    free(l);
    if (st != MP_EINPUT)
        fail_msg("'%s' accepted, expected '%s'", s, part);
    assert_string_equal(err.field, "pipeline_layout");
    if (!strstr(err.msg, part))
        fail_msg("'%s': message '%s' lacks '%s'", s, err.msg, part);
}

static void test_good(void **state)
{
    (void)state;
    /* Megatron-Bridge's DeepSeek-V3 (4, 4) layout: 61 layers over 16 stages */
    int32_t dsv3[16] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 1};
    expect_blocks("Et*4|(t*4|)*14tL", 4, 4, 61, dsv3, 16);
    /* its H100 (8, 4) one: 32 stages */
    int32_t h100[32];
    h100[0] = 1;
    for (int k = 1; k < 31; k++) h100[k] = 2;
    h100[31] = 0;
    expect_blocks("Et|(tt|)*30L", 8, 4, 61, h100, 32);
    /* commas are cosmetic, anywhere */
    int32_t three[3] = {2, 1, 2};
    expect_blocks("E,t,t|t|t,t,L", 3, 1, 5, three, 3);
    expect_blocks("Ett|t|ttL", 3, 1, 5, three, 3);
    /* one pass each, groups first: "(t)*2*3" is "tt*3", then "tttt" */
    int32_t four[1] = {4};
    expect_blocks("E(t)*2*3L", 1, 1, 4, four, 1);
    /* zero repeats vanish; a stage of the embedding alone is a stage */
    int32_t lone[2] = {0, 1};
    expect_blocks("Et*0|tL", 2, 1, 1, lone, 2);
    /* empty stages, which Megatron accepts (PipelineParallelLayerLayout
     * checks E first and L last in the layers' order, bars left out: a stage
     * may hold nothing, or the embedding or the loss alone) */
    int32_t hole[3] = {1, 0, 1};
    expect_blocks("Et||tL", 3, 1, 2, hole, 3);
    int32_t before[2] = {0, 3};
    expect_blocks("|EtttL", 2, 1, 3, before, 2);
    int32_t after[2] = {2, 0};
    expect_blocks("EttL|", 2, 1, 2, after, 2);
    int32_t loss[4] = {2, 2, 2, 0};
    expect_blocks("Et*2|t*2|t*2|L", 2, 2, 6, loss, 4);
    /* a group whose copies end in a bar */
    int32_t groups[4] = {1, 2, 2, 1};
    expect_blocks("Et|(tt|)*2tL", 4, 1, 6, groups, 4);
}

static void test_stage_items(void **state)
{
    (void)state;
    mp_layout *l = parse_ok("Et*4|(t*4|)*14tL", 4, 4, 61);
    int64_t b, e;
    mp_layout_stage_items(l, 61, 0, &b, &e);
    assert_true(b == 0 && e == 5); /* embedding + blocks 1..4 */
    mp_layout_stage_items(l, 61, 1, &b, &e);
    assert_true(b == 5 && e == 9);
    mp_layout_stage_items(l, 61, 15, &b, &e);
    assert_true(b == 61 && e == 63); /* block 61 + the head */
    free(l);
    /* the embedding on the first stage and the loss on the last, where
     * Megatron builds them (pre_process, post_process), whatever stage of
     * the string names them */
    l = parse_ok("|Ett|t|tL|", 5, 1, 4);
    int64_t want[5][2] = {{0, 1}, {1, 3}, {3, 4}, {4, 5}, {5, 6}};
    for (int k = 0; k < 5; k++) {
        mp_layout_stage_items(l, 4, k, &b, &e);
        if (b != want[k][0] || e != want[k][1])
            fail_msg("stage %d: [%lld, %lld), expected [%lld, %lld)", k, (long long)b,
                     (long long)e, (long long)want[k][0], (long long)want[k][1]);
    }
    free(l);
}

static void test_bad(void **state)
{
    (void)state;
    expect_refused("Ettx|ttL", 2, 1, 4, "character 4: 'x' is not a layer");
    expect_refused("Et t|ttL", 2, 1, 3, "character 3: byte 0x20 is not a layer");
    expect_refused("Ett|ttL", 4, 1, 4, "2 stages, but pp*vpp = 4*1 = 4");
    expect_refused("Ett|tt|tt|ttL", 2, 1, 8, "4 stages, but pp*vpp = 2*1 = 2");
    expect_refused("tE|tL", 2, 1, 2, "character 1: the first layer must be E");
    expect_refused("|tE|tL", 3, 1, 2, "character 2: the first layer must be E");
    expect_refused("EtL|t", 2, 1, 2, "character 5: the last layer must be L");
    expect_refused("Et|Lt|", 3, 1, 2, "character 5: the last layer must be L");
    expect_refused("||", 3, 1, 2, "the first layer must be E");
    expect_refused("EtE|tL", 2, 1, 2, "character 3: a second E");
    expect_refused("EtLt|tL", 2, 1, 3, "character 3: L (the loss) comes once, last");
    expect_refused("Ett|tL", 2, 1, 4, "3 transformer layers (t), but the model has 4");
    expect_refused("Ett|tmL", 2, 1, 3, "character 6: m, a multi-token-prediction layer, but "
                                       "the model has no MTP layers");
    expect_refused("Et*99999999L", 1, 1, 4, "character 4: absurd repeat count");
    expect_refused("Et*999999999999999999999999999L", 1, 1, 4, "character 4: absurd repeat");
    expect_refused("E(t*0)*100000L", 1, 1, 4, "absurd repeat count");
    expect_refused("E(tt|L", 2, 1, 2, "character 2: '(' is not a layer");
    expect_refused("Et*|tL", 2, 1, 2, "character 3: '*' is not a layer");
    expect_refused("E()*3tL", 1, 1, 1, "character 2: '(' is not a layer");
    expect_refused("", 1, 1, 1, "empty");
}

/* Megatron's MTP rules, for a model with MTP layers (the count comes in as
 * mtp_layers; megaplan's model gives 0 until it has the module). */
static void expect_mtp_at(const char *s, int64_t pp, int64_t vpp, int64_t layers, int64_t mtp,
                          int32_t stage, const char *part)
{
    mp_layout *l = calloc(1, sizeof *l);
    assert_non_null(l);
    mp_error err;
    mp_error_clear(&err);
    mp_status st = mp_layout_parse(s, pp, vpp, layers, mtp, l, &err);
    if (!part) {
        if (st != MP_OK)
            fail_msg("'%s' refused: %s", s, err.msg);
        assert_int_equal(l->mtp_layers, mtp);
        assert_int_equal(l->mtp_stage, stage < 0 ? l->n_stages - 1 : stage);
    } else if (st != MP_EINPUT || !strstr(err.msg, part)) {
        fail_msg("'%s': status %d, message '%s', expected '%s'", s, (int)st, err.msg, part);
    }
    free(l);
}

/* the m's on the last stage */
static void expect_mtp(const char *s, int64_t pp, int64_t vpp, int64_t layers, int64_t mtp,
                       const char *part)
{
    expect_mtp_at(s, pp, vpp, layers, mtp, -1, part);
}

static void test_mtp(void **state)
{
    (void)state;
    expect_mtp("Et*4|(t*4|)*14tmL", 16, 1, 61, 1, NULL); /* the 25.11 B200 recipe's */
    expect_mtp("Et|t|t|tmmL", 2, 2, 4, 2, NULL);
    expect_mtp("Et|t|t|tmL", 2, 2, 4, 2, "1 MTP layers (m), but the model has 2");
    expect_mtp("Etm|tL", 2, 1, 2, 1, "character 5: a transformer layer after an MTP layer");
    expect_mtp("Et|tm|t|tL", 2, 2, 4, 1, "character 5: an MTP layer outside its rank's last");
    expect_mtp("Ettm|mL", 2, 1, 2, 2, "character 6: MTP layers in two stages");
    expect_mtp("Ett|t|tt|mL", 2, 2, 5, 1, NULL);
    expect_mtp("Ett|t|ttt|m|L", 2, 2, 6, 1, "5 stages, but pp*vpp");
    /* Megatron's standalone MTP stage (validate_layer_layout's mtp_standalone):
     * the m's in the last chunk of a rank other than the last stage's,
     * alone or beside the last blocks; the stages after it empty but the
     * loss's. Its own tests' layouts (tests/unit_tests/pipeline_parallel/
     * test_pipeline_layout.py test_forward_vpp, pp 4 vpp 2, 8 layers) and
     * DeepSeek-V3's (its docstring's "Ettt|(tt|)*29,m|L", pp 16 vpp 2) */
    expect_mtp_at("E|t*3|(t|)*4tm|L", 4, 2, 8, 1, 6, NULL);
    expect_mtp_at("E|t*3|(t|)*3tt|m|L", 4, 2, 8, 1, 6, NULL);
    expect_mtp_at("Et*3|(tt|)*29,m|L", 16, 2, 61, 1, 30, NULL);
    expect_mtp_at("Et|t|ttt|m|L", 5, 1, 5, 1, 3, NULL);
    expect_mtp_at("Et|tmm|L", 3, 1, 2, 2, 1, NULL);
    expect_mtp_at("Et|tm||L", 4, 1, 2, 1, 1, NULL); /* an empty stage between */
    /* vpp 1: the first rank's stage is its last chunk, so Megatron allows it */
    expect_mtp_at("Ettm|L", 2, 1, 2, 1, 0, NULL);
    /* what Megatron still refuses there: not its rank's last chunk (rank 0
     * chunk 0 of vpp 2, "MTP should not be in the first pp rank"), a block
     * after it */
    expect_mtp("Etm|t|t|L", 2, 2, 3, 1, "character 3: an MTP layer outside its rank's last");
    expect_mtp("Et|tm|tL", 3, 1, 3, 1, "character 7: a transformer layer after an MTP layer");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_stage_items),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_mtp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
