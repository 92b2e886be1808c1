/* test_cp_ring.c — context parallelism as Transformer Engine's p2p ring runs
 * it (AttnFuncWithCPAndKVP2P, transformer_engine/pytorch/attention/
 * dot_product_attention/context_parallel.py, TE 2.9; docs/cost-model.md §5
 * CP): the slowest rank's attention as its c calls, and the bytes of the
 * ring's merges and buffer copies, each against a count by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

static bool near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

static mp_config config(const char *model, int64_t tp, int64_t cp)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 64, .seq = 8192, .global_batch = 64,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = tp, .pp = 1, .vpp = 1, .cp = cp, .dp = 64 / tp / cp,
                               .micro_batch = 1, .sp = tp > 1, .dist_opt = true,
                               .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    return c;
}

/* LLaMA 3.1 405B at t 4, c 2, b 1, s 8192 (the Megatron-Bridge B200 and
 * GB200 rows): a rank holds 4096 tokens, 32 of the 128 query heads and 2 of
 * the 8 K/V heads, head dim 128. Q and the output: 4096 x 32 x 128 =
 * 16,777,216 elements; K and V: 4096 x 2 x 2 x 128 = 2,097,152. Rank 1's
 * forward: torch.cat of K, V (4 bytes each), the first output's correction
 * (4) and the second's add (6): 4 x 2,097,152 + 10 x 16,777,216 =
 * 176,160,768 bytes. Its backward: the K/V copy (4), dQ copied then added
 * (4 + 6), dK/dV copied into their first half (2 per element of the whole)
 * and added whole at the diagonal step (6): 4 x 2,097,152 + 10 x 16,777,216
 * + 8 x 2,097,152 = 192,937,984. At c 4 (same chunk sizes): forward
 * 4 x 2,097,152 + (4 + 3 x 6) x 16,777,216 = 377,487,360; backward adds
 * 22 x 16,777,216 for dQ and (2 + 3 + 3 + 6) x 2,097,152 for dK/dV:
 * 406,847,488. */
static void test_merge_bytes(void **state)
{
    (void)state;
    mp_pass_cost r;
    mp_cp_ring_merge(2.0, 16777216.0, 16777216.0, 2097152.0, 2.0, &r);
    assert_true(r.bytes_f == 176160768.0);
    assert_true(r.bytes_b == 192937984.0);
    mp_cp_ring_merge(4.0, 16777216.0, 16777216.0, 2097152.0, 2.0, &r);
    assert_true(r.bytes_f == 377487360.0);
    assert_true(r.bytes_b == 406847488.0);
}

/* The slowest rank's causal attention at c 2: the diagonal call over 4096
 * keys and one unmasked call over 2048, each half the rank's work. The rate
 * per key count is FlashAttention-2's (Dao 2023, fwd+bwd, head dim 128:
 * 0.91 of its long-sequence rate at 2k keys, 0.97 at 4k), which the
 * profile's attention_half_rate_keys encodes: against one call at the
 * 4096-key rate the two take 0.5 (1 + 0.97 / 0.91) = 1.033 of the time; by
 * the profile's law (k / (k + 300)) exactly 0.5 (1 + (4096 / 4396) /
 * (2048 / 2348)) = 1.03412. Forward by hand: W / (peak x efficiency x L(k))
 * per call, W = 2 x 16 x 4096 x 4096 x 128 FLOPs; backward 2.5 x. */
static void test_causal_steps(void **state)
{
    (void)state;
    mp_config c = config("llama3-405b", 8, 2);
    c.training.attention_backend = MP_ATTN_FLASH; /* FlashAttention-2's law, as the rows of NeMo 24.07 ran */
    assert_true(c.hw.attention_half_rate_keys == 300.0);
    double f, b;
    mp_cp_causal_attention(&c, 16.0, 8192.0, 2.0, 128.0, false, &f, &b);
    double rate = c.hw.peak_flops[MP_DTYPE_BF16] * c.hw.attention_efficiency;
    double ref = 4096.0 / 4396.0;
    double w = 2.0 * 16.0 * 4096.0 * 4096.0 * 128.0;
    double l4k = (4096.0 / 4396.0) / ref, l2k = (2048.0 / 2348.0) / ref;
    double hand = w / (rate * l4k) + w / (rate * l2k);
    assert_true(near(f, hand, 1e-12));
    assert_true(near(b, 2.5 * hand, 1e-12));
    double one_call = 2.0 * w / rate; /* the whole causal work at the 4096-key rate */
    assert_true(near(f / one_call, 1.03412, 1e-5));
    assert_true(near(f / one_call, 0.5 * (1.0 + 0.97 / 0.91), 2e-3));
}

/* Blackwell against Hopper (docs/cost-model.md §4, "Attention core on
 * Blackwell"): the model's attention time on dgx-h100 over gb200-nvl72's for
 * the slowest rank's calls at cp 1 (one causal call over 8192 keys) and cp 2
 * (a causal call over 4096 keys and an unmasked one of 4096 queries over 2048
 * keys), 64 query heads, head dim 128, against cuDNN 9.19's measured
 * forward + backward times of the same calls on H200 and GB200
 * (tests/data/hw/cudnn_sdpa_llama31.csv, batch 1, 64 heads): causal 8192 keys
 * 6.791 ms against 2.785 (2.438 x); causal 4096 1.915 against 0.813 plus
 * twice the unmasked 2048 x 2048 call (the 4096 x 2048 one's work) 2 x 0.898
 * against 2 x 0.425 (2.232 x). Blackwell gains less at the CP chunk's
 * shorter calls; the GB200 profile's attention_half_rate_keys carries that
 * (at the Hopper profiles' 300 the cp 2 ratio would be 2.36). */
static double attention_time(const char *hw, double cp)
{
    mp_config c = config("llama3-405b", 2, (int64_t)cp);
    mp_error err;
    assert_int_equal(mp_hw_preset(hw, &c.hw, &err), MP_OK);
    c.training.attention_backend = MP_ATTN_FLASH; /* the transferred FlashAttention constants */
    double f, b;
    mp_cp_causal_attention(&c, 64.0, 8192.0, cp, 128.0, false, &f, &b);
    return f + b;
}

static void test_blackwell_over_hopper(void **state)
{
    (void)state;
    double cp1 = attention_time("dgx-h100", 1.0) / attention_time("gb200-nvl72", 1.0);
    double cp2 = attention_time("dgx-h100", 2.0) / attention_time("gb200-nvl72", 2.0);
    assert_true(near(cp1, 6.791 / 2.785, 0.03));
    assert_true(near(cp2, (1.915 + 2.0 * 0.898) / (0.813 + 2.0 * 0.425), 0.03));
}

/* Transformer Engine's choice (docs/cost-model.md §4, "Attention kernel"):
 * from v1.2 on sm90, and v2.0 on every compute capability from 9.0,
 * get_attention_backend drops FlashAttention for cuDNN's FusedAttention
 * when both take the call. megaplan's auto follows it: fused where the
 * profile gives cuDNN's rate (the Hopper and Blackwell profiles), flash on
 * the A100 ones, which give none; a plan's flash or fused overrides it. */
static void test_backend_rule(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 1);
    c.hw.attention_efficiency_fused = 0.5;
    c.hw.attention_half_rate_keys_fused = 1000.0;
    assert_int_equal(mp_attention_backend_of(&c), MP_ATTN_FUSED);
    assert_true(mp_attention_efficiency_of(&c) == 0.5);
    assert_true(mp_attention_half_rate_keys_of(&c) == 1000.0);
    c.training.attention_backend = MP_ATTN_FLASH; /* NVTE_FUSED_ATTN=0 */
    assert_int_equal(mp_attention_backend_of(&c), MP_ATTN_FLASH);
    assert_true(mp_attention_efficiency_of(&c) == c.hw.attention_efficiency);
    assert_true(mp_attention_half_rate_keys_of(&c) == c.hw.attention_half_rate_keys);
    /* a profile without cuDNN's rate runs FlashAttention under auto */
    c = config("llama3-8b", 1, 1);
    c.hw.attention_efficiency_fused = 0.0;
    assert_int_equal(mp_attention_backend_of(&c), MP_ATTN_FLASH);
    mp_error err;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    /* fused on a profile without cuDNN's rate is refused, naming the field */
    c.training.attention_backend = MP_ATTN_FUSED;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_non_null(strstr(err.field, "attention_backend"));
}

/* The profiles: cuDNN's rate on the Hopper and Blackwell ones (auto runs
 * fused there), none on the A100 ones (auto runs FlashAttention). */
static void test_profiles_backend(void **state)
{
    (void)state;
    const char *fused[] = {"dgx-h100", "h200", "h800", "b200", "gb200-nvl72"};
    mp_error err;
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) {
        mp_config c = config("llama3-8b", 1, 1);
        assert_int_equal(mp_hw_preset(fused[i], &c.hw, &err), MP_OK);
        assert_int_equal(mp_attention_backend_of(&c), MP_ATTN_FUSED);
        assert_true(mp_attention_efficiency_of(&c) == c.hw.attention_efficiency_fused);
    }
    mp_config c = config("llama3-8b", 1, 1);
    assert_int_equal(mp_hw_preset("dgx-a100", &c.hw, &err), MP_OK);
    assert_int_equal(mp_attention_backend_of(&c), MP_ATTN_FLASH);
}

/* cuDNN's fused attention on Hopper against its published times
 * (tests/data/hw/cudnn_sdpa_llama31.csv: cuDNN 9.19.1 on H200, H100's die and
 * peak; batch 1, 64 query heads, head dim 128, forward + backward): one
 * causal call over 4,096 keys 0.465 + 1.450 = 1.915 ms, over 8,192 keys
 * 1.708 + 5.083 = 6.791 ms, over 16,384 keys 6.531 + 19.002 = 25.533 ms;
 * the cp 2 rank's pair (causal over 4,096, unmasked 4,096 x 2,048, timed as
 * two 2,048^2 calls of 0.217 + 0.681 ms) 1.915 + 1.796 = 3.711 ms; on GB200
 * 0.813, 2.785, 2.606 + 7.845 = 10.451 and 0.813 + 2 x 0.425 = 1.663 ms. The
 * profiles' 0.508 / 1202 and 0.473 / 1650 come from the first two of each;
 * the others check the length law, the unmasked call at the rate of a
 * causal one over twice its keys (the same keys per query row: the pair
 * 3.2% slow on H200, 2.2% fast on GB200). */
static void test_cudnn_rate(void **state)
{
    (void)state;
    static const struct {
        const char *hw;
        double s, cp, ms, tol;
    } calls[] = {{"dgx-h100", 4096, 1, 1.915, 0.002},   {"dgx-h100", 8192, 1, 6.791, 0.002},
                 {"dgx-h100", 16384, 1, 25.533, 0.01},  {"dgx-h100", 8192, 2, 3.711, 0.04},
                 {"gb200-nvl72", 4096, 1, 0.813, 0.002}, {"gb200-nvl72", 8192, 1, 2.785, 0.002},
                 {"gb200-nvl72", 16384, 1, 10.451, 0.03}, {"gb200-nvl72", 8192, 2, 1.663, 0.04}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        mp_config c = config("llama3-405b", 2, (int64_t)calls[i].cp);
        mp_error err;
        assert_int_equal(mp_hw_preset(calls[i].hw, &c.hw, &err), MP_OK);
        double f, b;
        mp_cp_causal_attention(&c, 64.0, calls[i].s, calls[i].cp, 128.0, false, &f, &b);
        double ms = (f + b) * 1e3;
        if (!near(ms, calls[i].ms, calls[i].tol))
            fail_msg("%s s %g cp %g: %.4f ms, cuDNN %.4f ms", calls[i].hw, calls[i].s,
                     calls[i].cp, ms, calls[i].ms);
    }
}

/* In a block: selective recompute of core_attn re-runs the whole call, the
 * steps above, the forward's merges at the HBM rate and the exposed
 * exchange. LLaMA 3 8B, t 1, s 8192: 4096 tokens, 32 query heads, 8 K/V heads. */
static void test_block(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 1, 2);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, c.training.seq, 1, &bs);
    mp_block_time two;
    mp_block_time_of(&c, &bs, &two);
    double f, b;
    mp_cp_causal_attention(&c, 32.0, 8192.0, 2.0, 128.0, false, &f, &b);
    mp_pass_cost r;
    double n_q = 4096.0 * 32 * 128, n_kv = 4096.0 * 2 * 8 * 128;
    mp_cp_ring_merge(2.0, n_q, n_q, n_kv, 2.0, &r);
    double merge_f = mp_membound_time(&c.hw, r.bytes_f, 0.0);
    assert_true(f > 4.0 * c.hw.kernel_overhead); /* GPU-bound: the host's 4 launches are less */
    assert_true(near(two.attn_core_fwd, f + merge_f + two.cp_fwd, 1e-12));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_bytes),
        cmocka_unit_test(test_causal_steps),
        cmocka_unit_test(test_blackwell_over_hopper),
        cmocka_unit_test(test_backend_rule),
        cmocka_unit_test(test_profiles_backend),
        cmocka_unit_test(test_cudnn_rate),
        cmocka_unit_test(test_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
