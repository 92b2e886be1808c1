/* test_meta405_memory.c — Llama 3 405B in the shape Meta trained it (Dubey et
 * et al. 2024, arXiv 2407.21783, §3.3.2: 16384 H100, tp 8, cp 1, pp 16,
 * dp 128, sequence 8192, 16M tokens a step = 2048 sequences, one block fewer
 * on the first and last stages), its memory under Megatron-LM term by term
 * against a hand count (docs/cost-model.md §3, "Llama 3 405B on 16384
 * H100"): bf16, no recompute, 16 micro-batches per pipeline = p, so the
 * first ranks hold a whole model's worth of blocks and the shape does not fit
 * 79.6 GiB; recomputing the MLP makes it fit, recomputing the norms frees
 * nothing (both are fused into the linear layers after them). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "nemo_fixture.h"

static const double GiB = 1073741824.0;

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b));
}

/* 1f1b: Meta's 7 + 14 x 8 + 7 split; interleaved: vpp 8, one block a chunk,
 * the embedding and the loss alone in the first and last chunks
 * (Megatron's --account-for-embedding/loss-in-pipeline-split: E|(t|)*126L) */
static mp_config meta405(bool interleaved)
{
    mp_config c = nemo_config("llama3-405b", 16384, 2048);
    c.training.precision = MP_DTYPE_BF16;
    c.training.fp8_recipe = 0;
    c.parallel = (mp_parallel){.tp = 8, .sp = true, .pp = 16, .vpp = interleaved ? 8 : 1,
                               .cp = 1, .dp = 128, .micro_batch = 1, .dist_opt = true,
                               .dp_overlap = true,
                               .schedule = interleaved ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    if (interleaved)
        c.parallel.account_for_embedding = c.parallel.account_for_loss = true;
    else
        c.parallel.first_stage_layers = c.parallel.last_stage_layers = 7;
    return c;
}

/* One block's saved activations, b = 1, s = 8192, t = 8 with SP, bf16:
 *   the norms' inputs and outputs   8 x 8192 x 16384 / 8      = 134217728
 *   Q                               2 x 8192 x 16384 / 8      =  33554432
 *   K and V (8 heads of 128)        4 x 8192 x 1024 / 8       =   4194304
 *   the attention output            2 x 8192 x 16384 / 8      =  33554432
 *   the SwiGLU input                4 x 8192 x 53248 / 8      = 218103808
 *   FC2's input                     2 x 8192 x 53248 / 8      = 109051904
 *   the fp32 log-sum-exp            4 x 128 x 8192 / 8        =    524288
 * = 533200896 bytes (0.497 GiB). */
static const double block = 533200896.0;
/* what recomputing the MLP frees of it: the SwiGLU and FC2 inputs and the
 * norm output FC1's LayerNormLinear kept, 2 x 8192 x 16384 / 8 */
static const double mlp = 218103808.0 + 109051904.0 + 33554432.0;
/* a block's parameters on one GPU: Q and the projection 16384^2 each, K and V
 * 16384 x 1024 each, the SwiGLU MLP 3 x 16384 x 53248, over t = 8, and the
 * two norms' 16384 each (which megaplan splits over t too, where Megatron
 * keeps them whole on every rank: 28672 parameters, 0.007% of a block's,
 * within the tolerance below) */
static const double block_params = (2.0 * 268435456.0 + 2.0 * 16777216.0 + 2617245696.0) / 8.0 +
                                   2.0 * 16384.0;

static bool within(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

static void test_1f1b_by_hand(void **state)
{
    (void)state;
    mp_config c = meta405(false);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 8192, 1, &bs);
    assert_true(c.hw.flash_attention);
    assert_true(near(mp_block_act_bytes(&c.model, &bs, 1.0, 8.0, 1.0, true, MP_RECOMPUTE_NONE,
                                        true),
                     block));
    mp_estimate e = nemo_estimate(&c);
    /* the most loaded rank is rank 1: 8 blocks, p - r = 15 micro-batches in
     * flight (Megatron's non-interleaved warm-up p - r - 1, then one more) */
    double params = 8.0 * block_params;
    assert_true(within(e.memory.weights, 2.0 * params, 1e-4)); /* 5.94 GiB */
    assert_true(near(e.memory.grads, 2.0 * e.memory.weights)); /* fp32 main gradients */
    assert_true(near(e.memory.optimizer, 12.0 / 128.0 / 2.0 * e.memory.weights));
    assert_true(near(e.memory.activations, 15.0 * 8.0 * block)); /* 59.6 GiB */
    /* the 3 GiB reserve, the allocator's 0.1 of the activations, four p2p
     * buffers of b s h / t and the SP all-gather buffer b s h (2 bytes) */
    double send = 2.0 * 8192.0 * 16384.0 / 8.0;
    assert_true(near(e.memory.other, 3.0 * GiB + 0.1 * e.memory.activations + 4.0 * send +
                                         8.0 * send)); /* 9.33 GiB */
    assert_false(e.fits);
    assert_true(e.memory.peak > 87.0 * GiB && e.memory.peak < 87.1 * GiB);
    /* without the allocator's share it still does not fit: 81.1 GiB */
    assert_true(e.memory.peak - 0.1 * e.memory.activations > e.memory.capacity);
}

static void test_interleaved_by_hand(void **state)
{
    (void)state;
    mp_config c = meta405(true);
    mp_estimate e = nemo_estimate(&c);
    /* m = p = 16: on ranks r <= 7 the warm-up 2(p - r - 1) + (v - 1) p
     * reaches m v = 128 chunks (schedules.py get_pp_rank_microbatches): every
     * forward before the first backward, 128 block-micro-batches */
    assert_true(near(e.memory.activations, 128.0 * block)); /* 63.6 GiB */
    assert_false(e.fits);
    assert_true(e.memory.peak > 91.3 * GiB && e.memory.peak < 91.4 * GiB);

    /* layernorm: the two norms are fused into linear_qkv and linear_fc1, a
     * no-op in Megatron-Core; it frees nothing and costs nothing */
    mp_config ln = c;
    ln.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    ln.parallel.recompute_modules = 1u << MP_RCM_LAYERNORM;
    mp_estimate el = nemo_estimate(&ln);
    assert_true(near(el.memory.activations, e.memory.activations));
    assert_true(el.time.recompute == 0.0);

    /* mlp: 172.5 MB a block kept, 44.1 GiB in all: it fits */
    mp_config m = c;
    m.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    m.parallel.recompute_modules = 1u << MP_RCM_MLP;
    mp_estimate em = nemo_estimate(&m);
    assert_true(near(em.memory.activations, 128.0 * (block - mlp)));
    assert_true(em.fits);
    assert_true(em.memory.peak > 44.0 * GiB && em.memory.peak < 44.2 * GiB);
    assert_true(em.time.recompute > 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1f1b_by_hand),
        cmocka_unit_test(test_interleaved_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
