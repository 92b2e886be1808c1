/* test_embedding_sp.c — the embedding's tensor-parallel collective under
 * sequence parallelism. Megatron-Core reduce-scatters the vocab-parallel
 * lookup only when no learned position table is added
 * (Megatron-Core core_v0.15.0, language_model_embedding.py lines 48-53:
 * reduce_scatter_embeddings needs not add_position_embedding); with a learned
 * table it all-reduces (tensor_parallel/layers.py lines 286-294) and then only
 * splits the sequence (scatter_to_sequence_parallel_region, lines 135-139 of
 * language_model_embedding.py). The old count charged a
 * reduce-scatter for both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../config_fixture.h"
#include "planner/cost_internal.h"

/* GPT-3 175B (learned positions) at tp 8 with SP, or the same model with RoPE */
static mp_config config(mp_position pos)
{
    mp_config c = gpt3_175b_config(8, 1);
    c.model.position = pos;
    return c;
}

static void test_embedding_sp_collective(void **state)
{
    (void)state;
    double bytes = 1.0 * 2048.0 * 12288.0 * 2.0; /* b s h, bf16 */
    mp_config learned = config(MP_POS_LEARNED), rope = config(MP_POS_ROPE);
    mp_group_place tpg;
    mp_group_place_of(&learned, MP_GROUP_TP, &tpg);
    double ar = mp_coll_time(&learned.hw, &tpg, MP_COLL_ALLREDUCE, bytes);
    double rs = mp_coll_time(&learned.hw, &tpg, MP_COLL_REDUCESCATTER, bytes);
    assert_true(ar > rs * 1.5); /* the two differ: the test can fail */
    mp_edge_time el, er;
    mp_embedding_time_of(&learned, &el);
    mp_embedding_time_of(&rope, &er);
    assert_float_equal(el.tp_fwd, ar, 1e-12 * ar);
    assert_float_equal(er.tp_fwd, rs, 1e-12 * rs);
    /* the backward of the split is the sequence all-gather in both */
    assert_float_equal(el.tp_bwd, er.tp_bwd, 1e-12 * er.tp_bwd);
    assert_true(el.tp_bwd > 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_embedding_sp_collective)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
