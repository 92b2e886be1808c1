/* test_dp_aligned.c — the DP reduction and parameter all-gather under
 * Megatron-Core's interleaved 1F1B with --overlap-grad-reduce and
 * --overlap-param-gather (align_grad_reduce, align_param_gather;
 * docs/cost-model.md §5, "Interleaved pipelines"): each chunk's reduction is
 * launched after its last backward, j*p chunk-backwards before the end for
 * chunk j, so only chunk 0's is exposed whole and the others hide under the
 * cooldown; only chunk 0's gather waits at the step's start. */
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
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "../config_fixture.h"
#include "nemo_fixture.h"

/* LLaMA 3.1 405B on 1024 DGX H100 GPUs, Megatron-Bridge's recipe:
 * t8 p8 v8 cp2 d8, distributed optimizer, overlapped grad reduce and gather */
static mp_config llama405(int64_t vpp)
{
    mp_config c = nemo_config("llama3-405b", 1024, 512);
    c.training.fp8_param_gather = c.training.grad_reduce_bf16 = true;
    c.parallel = (mp_parallel){.tp = 8, .sp = true, .pp = 8, .vpp = vpp, .cp = 2, .dp = 8,
                               .micro_batch = 1, .dist_opt = true, .dp_overlap = true,
                               .tp_overlap = true,
                               .schedule = vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return c;
}

static void cost(const mp_config *c, double *time, double *exposed)
{
    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(c, NULL, &pc, &err), MP_OK);
    *time = pc.dp_time;
    *exposed = pc.dp_exposed;
    mp_pipeline_cost_free(&pc);
}

static void test_chunk0_exposed_rest_hidden(void **state)
{
    (void)state;
    mp_config c = llama405(8);
    double t, x;
    cost(&c, &t, &x);
    assert_true(t > 0.0);
    /* the reduction (half of dp_time: bf16 reduce-scatter and all-gather of
     * 2-byte parameters) of chunk 0, an eighth of the rank's weights or more,
     * is exposed whole (the gather of FP8 weights is smaller: t < 2 rs) */
    assert_true(x >= t / 2.0 / 8.0);
    /* the other chunks' reductions and gathers hide under the cooldown and the
     * warm-up: the old rule (everything under one micro-batch's backward and
     * forward) left two thirds of dp_time exposed */
    assert_true(x < 0.3 * t);
}

static void test_plain_1f1b_unchanged(void **state)
{
    (void)state;
    /* one chunk: the buckets go out during the last micro-batch's backward,
     * which hides no more than that backward */
    mp_config c = llama405(1);
    double t, x;
    cost(&c, &t, &x);
    mp_config i = llama405(8);
    double ti, xi;
    cost(&i, &ti, &xi);
    assert_true(fabs(t - ti) < 1e-9 * t);
    assert_true(x > xi);
}

static void test_old_stack_keeps_one_window(void **state)
{
    (void)state;
    /* the rule is Megatron-Core's: other stacks keep the one-backward window */
    mp_config c = llama405(8);
    double t, x;
    cost(&c, &t, &x);
    c.training.stack = MP_STACK_MEGATRON_LM_2021;
    double t2, x2;
    cost(&c, &t2, &x2);
    assert_true(x2 > x);
}

static void test_fp8_param_gather_moves_one_byte(void **state)
{
    (void)state;
    /* --fp8-param-gather: Megatron DDP's parameter buffer is uint8 for the FP8
     * weights, so the gather of the updated weights moves half the bytes;
     * the bf16 gradient reduce-scatter is unchanged */
    mp_config c = llama405(8);
    double on, x;
    cost(&c, &on, &x);
    c.training.fp8_param_gather = false;
    double off;
    cost(&c, &off, &x);
    /* off: reduce-scatter + gather of equal bytes; on: the gather about half */
    assert_true(on < 0.8 * off);
    assert_true(on > 0.7 * off);
}

/* MXFP8 (Megatron-Bridge's bf16_with_mxfp8_mixed, reuse_grad_buf_for_mxfp8_param_ag):
 * Megatron-Core gathers the updated weights as bf16 in the gradient buffer
 * and casts them to MXFP8 afterwards (param_and_grad_buffer.py at
 * core_v0.14.0 to Megatron-LM d0b3b775), so --fp8-param-gather leaves the
 * all-gather's 2 bytes per parameter; the per-tensor recipe on the same
 * B200s still halves it */
static void test_mxfp8_param_gather_moves_two_bytes(void **state)
{
    (void)state;
    mp_config c = llama405(8);
    mp_error err;
    assert_int_equal(mp_hw_preset("b200", &c.hw, &err), MP_OK);
    const mp_fp8_recipe recipes[] = {MP_FP8_MXFP8, MP_FP8_TENSORWISE};
    double on[2], off[2], x;
    for (int k = 0; k < 2; k++) {
        c.training.fp8_recipe = recipes[k];
        c.training.fp8_param_gather = true;
        cost(&c, &on[k], &x);
        c.training.fp8_param_gather = false;
        cost(&c, &off[k], &x);
    }
    assert_true(off[0] > 0.0);
    assert_true(fabs(on[0] - off[0]) <= 1e-12 * off[0]);
    assert_true(on[1] < 0.8 * off[1]);
    assert_true(mp_fp8_param_gather_bytes(&c) == 1.0);
    c.training.fp8_recipe = MP_FP8_MXFP8;
    assert_true(mp_fp8_param_gather_bytes(&c) == 2.0);
}

/* Uniform chunks: p ranks, v chunks each, forward f and backward b per
 * micro-batch, every chunk an equal share of the collective. */
static double reduce_exposed(int64_t p, int64_t v, double b, double red, double sm)
{
    double bwd[64], share[64];
    for (int64_t i = 0; i < p * v; i++) {
        bwd[i] = b;
        share[i] = 1.0 / (double)v;
    }
    return mp_dp_aligned_reduce_exposed(p, v, bwd, share, red, sm);
}

static double gather_exposed(int64_t p, int64_t v, double f, double b0, double ag, double sm)
{
    double fwd[64], share[64], frac[16];
    for (int64_t i = 0; i < p * v; i++) {
        fwd[i] = f;
        share[i] = 1.0 / (double)v;
    }
    for (int64_t r = 0; r < p; r++)
        frac[r] = b0;
    return mp_dp_early_gather_exposed(p, v, fwd, share, frac, NULL, ag, sm);
}

/* By hand, from schedules.py's launches (docs/cost-model.md §5): p = 4,
 * backward b = 2 s. Chunk c >= 1's reduction starts c*p*b before rank 0's
 * end on every rank; chunk 0's at each rank's own end (rank r: r*b
 * earlier); one at a time. */
static void test_reduce_by_hand(void **state)
{
    (void)state;
    /* v = 2, red 6 (3 a chunk): chunk 1 runs -8..-5, chunk 0 0..3 on rank 0
     * (rank 1: -2..1): 3 s, chunk 0's. The window the estimate had,
     * (v-1)p - (p-1) = 1 backward, charged 3 + (3 - 2) = 4 s. */
    assert_float_equal(reduce_exposed(4, 2, 2.0, 6.0, 0.0), 3.0, 1e-12);
    /* red 20 (10 a chunk): chunk 1 -8..2, so chunk 0 2..12: 12 s =
     * 10 + (10 - p*b) */
    assert_float_equal(reduce_exposed(4, 2, 2.0, 20.0, 0.0), 12.0, 1e-12);
    /* v = 3, red 30: chunk 2 -16..-6, chunk 1 -6..4, chunk 0 4..14: 14 s
     * (the old window of 5 backwards: 10 + 20 - 10 = 20 s) */
    assert_float_equal(reduce_exposed(4, 3, 2.0, 30.0, 0.0), 14.0, 1e-12);
    /* SM contention 0.25: chunk 1's 3 s under rank 0's compute slow it by
     * 0.75 s, and chunk 0 follows: 3.75 s (3 + mp_overlap_excess(3, 8, 0.25)) */
    assert_float_equal(reduce_exposed(4, 2, 2.0, 6.0, 0.25), 3.75, 1e-12);
}

/* The gathers at the step's start, p = 4, forward f = 1 s, the first
 * bucket a tenth of chunk 0's weights. */
static void test_gather_by_hand(void **state)
{
    (void)state;
    /* v = 2, ag 4 (2 a chunk): rank 0's first forward starts at 0.2 and
     * waits for chunk 0's gather to 2: 1 s late; chunk 1's ends at 4, when
     * its first forward is due (p*f after chunk 0's): 1 s. */
    assert_float_equal(gather_exposed(4, 2, 1.0, 0.1, 4.0, 0.0), 1.0, 1e-12);
    /* ag 12 (6 a chunk): chunk 1's gather ends at 12, its first forward was
     * due at 4: 8 s (the old window, 1 forward: 0.6 + 4.4 + 5 = 10 s) */
    assert_float_equal(gather_exposed(4, 2, 1.0, 0.1, 12.0, 0.0), 8.0, 1e-12);
    /* SM share 0.25, ag 4: the first forward, from 0.2, would end at
     * 0.2 + 1 + 0.25 (4 - 0.2) = 2.15, but waits for the gather to 2 and runs
     * slowed to 4: 2 + 0.25 * 2 - 1 = 1.5 s */
    assert_float_equal(gather_exposed(4, 2, 1.0, 0.1, 4.0, 0.25), 1.5, 1e-12);
    /* one chunk (1F1B), ag 4: the first bucket, then the rest beyond the
     * first forward: 4 - 1 = 3 s */
    assert_float_equal(gather_exposed(4, 1, 1.0, 0.1, 4.0, 0.0), 3.0, 1e-12);
}

/* The plan (GPT-3 175B, t8 p8 v2 on 1024 A100, d16): chunk 1's
 * reduction (a half) hides under the p backwards after its launch, so the
 * reduction costs about chunk 0's half; the old window (one backward) left
 * 0.54 s of DP exposed, the simulator 0.32 s. */
static void test_v2_window(void **state)
{
    (void)state;
    mp_config c = gpt3_175b_config(8, 2);
    c.parallel.dp_overlap = true;
    mp_error err;
    mp_pipeline_cost pc;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    assert_true(pc.dp_aligned);
    double red = pc.dp_time - pc.dp_gather - pc.dp_tied;
    double red_exposed = pc.dp_exposed - pc.dp_gather_exposed - pc.dp_tied;
    /* rank 0's chunk 0 holds a little more than half (the embedding) */
    assert_true(red_exposed > 0.5 * red && red_exposed < 0.55 * red);
    assert_true(pc.dp_exposed > 0.30 && pc.dp_exposed < 0.34);
    mp_pipeline_cost_free(&pc);
}

/* The split-backward schedules' rule by hand (mp_dp_tail_reduce_exposed;
 * docs/cost-model.md §5): two ranks, two chunks alike (half the reduction
 * each), chunk 1's last W from 4 s to 2 s before the rank's end, chunk 0's
 * from 1 s to the end, the last bucket a tenth of a chunk. */
static void test_tail_by_hand(void **state)
{
    (void)state;
    const double ws[] = {1, 4, 1, 4}, we[] = {0, 2, 0, 2}, share[] = {0.5, 0.5, 0.5, 0.5},
                 bf[] = {0.1, 0.1, 0.1, 0.1};
    /* red 6 (3 a chunk): chunk 1 runs -4..-1, chunk 0 -1..2: 2 s */
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, NULL, share, bf, 6.0, 0.0), 2.0,
                       1e-12);
    /* red 2: chunk 1 -4..-3 (its last bucket 0.1 s after its W, -1.9),
     * chunk 0 from its W's start -1 to 0, its last bucket after the end: 0.1 s */
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, NULL, share, bf, 2.0, 0.0), 0.1,
                       1e-12);
    /* SM share 0.25: both chunks' 1 s beside compute slow it by 0.5 s */
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, NULL, share, bf, 2.0, 0.25), 0.5,
                       1e-12);
    /* rank 1 ends 0.5 s before the pipeline: rank 0's 2 s stand */
    const double lead[] = {0.0, 0.5};
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, lead, share, bf, 6.0, 0.0), 2.0,
                       1e-12);
    /* rank 1 ends 0.5 s after rank 0 (ZB-V's rank p-1 at pp 2, its deferred
     * Ws run after its last B): the pipeline ends with it, and its last
     * reduction, 2 s past its own end, is 2 s past the pipeline's */
    const double late[] = {0.0, -0.5};
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, late, share, bf, 6.0, 0.0), 2.0,
                       1e-12);
    /* red 2: rank 0's 0.1 s past its end is 0.4 s before rank 1's; rank
     * 1's 0.1 s stands */
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 2, ws, we, late, share, bf, 2.0, 0.0), 0.1,
                       1e-12);
    /* one chunk (ZB-H1): its last W, 1 s, is the rank's last op: red 3
     * runs -1..2 */
    assert_float_equal(mp_dp_tail_reduce_exposed(2, 1, ws, we, NULL, (const double[]){1, 1}, bf,
                                                 3.0, 0.0),
                       2.0, 1e-12);
}

/* The plan: Mixtral 8x7B under ZB-V on 64 H100 (t1 p2 v2 d32 ep8,
 * global batch 64, m = 2): the one-window rule charged 0.038 s of DP where
 * the simulator, which runs the order, exposed 0.189 s (step 0.728 against
 * 0.855 s). The reductions follow each chunk's last W, which on rank 1 are
 * its last two ops, so most of the reduction is exposed; the gathers hide
 * under the first forwards. */
static void test_zbv_mixtral(void **state)
{
    (void)state;
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("mixtral-8x7b");
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 64, .seq = 4096, .global_batch = 64,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 1, .pp = 2, .vpp = 2, .cp = 1, .dp = 32, .micro_batch = 1,
                               .dist_opt = true, .dp_overlap = true, .schedule = MP_SCHED_ZBV,
                               .ep = 8, .etp = 1};
    mp_pipeline_cost pc;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    assert_true(pc.dp_tail && pc.dp_gather > 0);
    double red = pc.dp_time - pc.dp_gather - pc.dp_tied;
    double red_exposed = pc.dp_exposed - pc.dp_gather_exposed - pc.dp_tied;
    /* reduction 0.191 s, 0.139 s of it exposed: Megatron-Core buckets rank
     * 0's first chunk only, so rank 1 reduces each chunk whole after its W
     * (docs/cost-model.md §5, "Buckets"; with every chunk bucketed 0.079 s,
     * and the old one-window rule 0.038 s for the reduction and the gather
     * together); the simulator exposes 0.1515 s of DP against the
     * estimate's 0.1516 s. Gather 0.096 s, 0.013 s exposed */
    if (getenv("MP_PRINT_DP"))
        printf("red %.4f exposed %.4f gather %.4f exposed %.4f\n", red, red_exposed,
               pc.dp_gather, pc.dp_gather_exposed);
    assert_true(red_exposed > 0.6 * red && red_exposed < 0.85 * red);
    assert_true(pc.dp_gather_exposed < 0.25 * pc.dp_gather);
    mp_pipeline_cost_free(&pc);
    /* other stacks keep the one-window rule */
    c.training.stack = MP_STACK_MEGATRON_LM_2021;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    assert_false(pc.dp_tail);
    mp_pipeline_cost_free(&pc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_by_hand),
        cmocka_unit_test(test_gather_by_hand),
        cmocka_unit_test(test_tail_by_hand),
        cmocka_unit_test(test_zbv_mixtral),
        cmocka_unit_test(test_v2_window),
        cmocka_unit_test(test_chunk0_exposed_rest_hidden),
        cmocka_unit_test(test_plain_1f1b_unchanged),
        cmocka_unit_test(test_old_stack_keeps_one_window),
        cmocka_unit_test(test_fp8_param_gather_moves_one_byte),
        cmocka_unit_test(test_mxfp8_param_gather_moves_two_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
