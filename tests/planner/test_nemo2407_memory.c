/* test_nemo2407_memory.c — the memory count of NeMo 24.07's LLaMA 3 8B run
 * (tests/data/published/nemo_24.07_h100.csv: 8 H100, cp 2, dp 4, micro-batch
 * 1, global batch 128, sequence 8192, FP8 delayed scaling) term by term
 * against a hand count of what that release allocates (docs/cost-model.md
 * §3, "Checked against NeMo 24.07"): bf16 weights, Transformer Engine 1.8's
 * cached FP8 weight and its transpose, bf16 gradients (the launcher's
 * grad_sync_dtype bf16), 12 bytes of optimizer state over the d·c = 8 ranks,
 * one micro-batch of saved activations (FP8 GEMM inputs, bf16 attention
 * output beside the projection's FP8 copy), the head's fp32 logits. With
 * those bf16 gradients the run fits the H100's 81559 MiB; with Megatron-LM's
 * fp32 default it does not (the validation page's former known miss). */
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

#include "nemo_fixture.h"

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b));
}

static mp_config llama3_8b_cp2(bool grad_bf16)
{
    mp_config c = nemo_config("llama3-8b", 8, 128);
    c.training.fp8_recipe = MP_FP8_DELAYED; /* TE 1.8's default recipe */
    c.training.grad_reduce_bf16 = grad_bf16;
    c.parallel = (mp_parallel){.tp = 1, .pp = 1, .vpp = 1, .cp = 2, .dp = 4, .micro_batch = 1,
                               .dist_opt = true, .dp_overlap = true,
                               .schedule = MP_SCHED_1F1B};
    return c;
}

/* Parameters by hand: embedding and (untied) head 128256 x 4096 each; a
 * block: Q and the projection 4096 x 4096 each, K and V 4096 x 1024 each,
 * the SwiGLU MLP 3 x 4096 x 14336, two norms 4096 each = 218112000; 32
 * blocks; the final norm 4096. */
static const double params = 2.0 * 525336576.0 + 32.0 * 218112000.0 + 4096.0; /* 8030261248 */
static const double block_params = 32.0 * 218112000.0;                       /* 6979584000 */

/* One block's saved activations, s = 8192 / cp = 4096 tokens, b = 1:
 *   two norm inputs, bf16         2 x 2 x 4096 x 4096   =  67108864
 *   QKV's and FC1's FP8 inputs    2 x 1 x 4096 x 4096   =  33554432
 *   Q (bf16) and K, V (8 heads)   2 x 4096 x 4096 + 4 x 4096 x 1024 = 50331648
 *   the attention output: bf16 (the fused attention's) + the projection's
 *   FP8 copy (delayed scaling)    3 x 4096 x 4096       =  50331648
 *   log-sum-exp, fp32             4 x 32 x 4096         =    524288
 *   SwiGLU input, bf16            4 x 4096 x 14336      = 234881024
 *   FC2's FP8 input               1 x 4096 x 14336      =  58720256
 * = 495452160 bytes; pp = 1 holds one micro-batch of the 32 blocks. */
static const double act = 32.0 * 495452160.0;

static void test_terms_by_hand(void **state)
{
    (void)state;
    mp_config c = llama3_8b_cp2(true);
    mp_estimate e = nemo_estimate(&c);
    assert_true(near(e.memory.weights, 2.0 * params + 2.0 * block_params)); /* 30019690496 */
    assert_true(near(e.memory.fp8_weights, 2.0 * block_params));
    assert_true(near(e.memory.grads, 2.0 * params));                        /* 16060522496 */
    assert_true(near(e.memory.optimizer, 12.0 / 8.0 * params));             /* 12045391872 */
    assert_true(near(e.memory.activations, act));                           /* 15854469120 */
    /* the runtime reserve (3 GiB), the allocator's 10% of the stash, and the
     * head: final norm and head inputs 2 x 2 x 4096 x 4096, fp32 logits
     * 4 x 4096 x 128256 */
    double head = 4.0 * 4096.0 * 4096.0 + 4.0 * 4096.0 * 128256.0;
    assert_true(near(e.memory.other, 3.0 * 1073741824.0 + 0.1 * act + head));
    double peak = 2.0 * params + 2.0 * block_params + 2.0 * params + 1.5 * params + act +
                  3.0 * 1073741824.0 + 0.1 * act + head; /* 80.9e9 bytes = 75.4 GiB */
    assert_true(near(e.memory.peak, peak));
    assert_true(e.fits);
    assert_true(e.memory.capacity == 81559.0 * 1048576.0);
}

/* Megatron-LM's default, fp32 main gradients: 2 bytes more per parameter,
 * 16.06e9 bytes, and the run no longer fits (90.4 GiB of 79.6). */
static void test_fp32_grads_do_not_fit(void **state)
{
    (void)state;
    mp_config b = llama3_8b_cp2(true), f = llama3_8b_cp2(false);
    mp_estimate eb = nemo_estimate(&b), ef = nemo_estimate(&f);
    assert_true(near(ef.memory.grads, 4.0 * params));
    assert_true(near(ef.memory.peak - eb.memory.peak, 2.0 * params));
    assert_false(ef.fits);
    assert_true(ef.memory.peak > 90.3 * 1073741824.0 && ef.memory.peak < 90.4 * 1073741824.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terms_by_hand),
        cmocka_unit_test(test_fp32_grads_do_not_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
