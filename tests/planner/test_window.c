/* test_window.c — sliding-window attention in the cost model: model FLOPs
 * count a windowed block's band (window keys per query), a fused kernel
 * visits only the key tiles that meet the band, the windowed and full
 * blocks of GPT-OSS are costed apart, sinks add one parameter per head, and
 * context parallelism with a window is refused (docs/cost-model.md). Also
 * what Megatron runs for GPT-OSS beyond the band (§12a): YaRN's rotary
 * embedding through the unfused PyTorch ops (24 bytes a Q/K element forward,
 * 26 backward, against the fused kernel's 4 and 8), and the experts' output
 * bias applied expert by expert (12 bytes a routed output element forward,
 * 16 backward, 2 and 4 kernels per local expert), and the clamped expert
 * SwiGLU's eager clamps (planner/oss_cost.c), by hand from the Megatron and
 * PyTorch source that planner/compute.c, moe.c and oss_cost.c cite. */
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
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "../config_fixture.h"

/* GPT-OSS-120B's model FLOPs by hand: 18 windowed blocks (keys = 128), 18
 * full ones (keys = s), all MoE with top-4 of 128 experts. */
static void test_model_flops_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("gpt-oss-120b");
    assert_int_equal(mp_model_windowed_blocks(m), 18);
    double s = 4096, h = 2880, qd = 64 * 64, kvd = 8 * 64;
    double attn = 2.0 * h * qd + 2.0 * h * kvd;                   /* Q, O, K, V */
    double mlp = h * 128 + 4 * (3.0 * h * 2880 + 2.0 * 2880 + h); /* router + 4 experts */
    mlp += 128; /* router bias */
    double gemm = 2.0 * s * (attn + mlp);
    double windowed = gemm + 4.0 * s * 128 * qd, full = gemm + 4.0 * s * s * qd;
    double want = 3.0 * (18 * windowed + 18 * full + 2.0 * s * 201088 * h);
    double got = mp_model_flops(m, 4096, 1);
    if (fabs(got / want - 1.0) > 1e-12)
        fail_msg("gpt-oss-120b: %.6g FLOPs, by hand %.6g", got, want);
    /* the same model without its window counts s keys everywhere */
    mp_model nw = *m;
    nw.attn.window = nw.attn.window_skip_freq = 0;
    assert_true(mp_model_flops(&nw, 4096, 1) > got);
    /* a window longer than the sequence is no window */
    mp_block_shape bs;
    mp_block_shape_of(m, 64, 1, &bs);
    assert_true(bs.window == 128.0);
    assert_true(mp_block_attn_core_fwd_flops(m, &bs) == 4.0 * 64 * 64 * qd);
    mp_block_shape_of(m, 4096, 2, &bs); /* block 2 (1-based): full attention */
    assert_true(bs.window == 0.0);
}

static mp_config gpt_oss_config(void)
{
    mp_config c = preset_config("gpt-oss-120b", "dgx-h100", 8, 8, MP_DTYPE_BF16);
    c.parallel.dp = 8;
    c.parallel.ep = 8;
    return c;
}

/* The fused kernel's attention time: a full causal block computes half the
 * score matrix over calls of s keys; a 128-token window visits 2 key tiles
 * of 128 per query tile (256 keys), at the rate of 256-key calls. */
static void test_kernel_skips_outside_the_band(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    /* the GPUs' time: at micro-batch 1 the host's launches (Transformer
     * Engine's per-expert GEMMs among them) bind both blocks alike */
    c.hw.kernel_overhead = 0.0;
    mp_block_shape win, full;
    mp_block_shape_of(&c.model, 4096, 1, &win);
    mp_block_shape_of(&c.model, 4096, 2, &full);
    mp_block_time tw, tf;
    mp_block_time_of(&c, &win, &tw);
    mp_block_time_of(&c, &full, &tf);
    double half = mp_attention_half_rate_keys_of(&c), s = 4096, keys = 256;
    double law = mp_attention_backend_of(&c) == MP_ATTN_FUSED ? 2.0 : 1.0; /* compute.c */
    double rate_w = law * keys / (law * keys + half), rate_f = s / (s + half);
    double want = (keys / s) / 0.5 * rate_f / rate_w; /* windowed / full */
    double got = tw.attn_core_fwd / tf.attn_core_fwd;
    if (fabs(got / want - 1.0) > 1e-9)
        fail_msg("windowed/full attention time %.6g, expected %.6g", got, want);
    assert_true(tw.fwd_compute < tf.fwd_compute);
    /* windows of 129..256 keys visit 3 tiles; a window past the sequence
     * costs what the full causal block costs */
    c.model.attn.window = 200;
    mp_block_shape_of(&c.model, 4096, 1, &win);
    mp_block_time_of(&c, &win, &tw);
    keys = 384;
    rate_w = law * keys / (law * keys + half);
    want = (keys / s) / 0.5 * rate_f / rate_w;
    got = tw.attn_core_fwd / tf.attn_core_fwd;
    if (fabs(got / want - 1.0) > 1e-9)
        fail_msg("window 200: %.6g, expected %.6g", got, want);
    c.model.attn.window = 8192;
    mp_block_shape_of(&c.model, 4096, 1, &win);
    mp_block_time_of(&c, &win, &tw);
    assert_true(fabs(tw.attn_core_fwd / tf.attn_core_fwd - 1.0) < 1e-12);
}

/* Windowed attention time relative to the full causal block, for a window
 * whose kernel call runs over `keys` keys per query. */
static void expect_window_keys(mp_config *c, int64_t window, double keys, const char *what)
{
    c->model.attn.window = window;
    mp_block_shape win, full;
    mp_block_shape_of(&c->model, 4096, 1, &win);
    mp_block_shape_of(&c->model, 4096, 2, &full);
    mp_block_time tw, tf;
    mp_block_time_of(c, &win, &tw);
    mp_block_time_of(c, &full, &tf);
    double half = mp_attention_half_rate_keys_of(c), s = 4096;
    /* cuDNN's rate law takes a band's rows at twice their keys (compute.c) */
    double law = mp_attention_backend_of(c) == MP_ATTN_FUSED ? 2.0 * keys : keys;
    double want = (keys / s) / 0.5 * (s / (s + half)) / (law / (law + half));
    double got = tw.attn_core_fwd / tf.attn_core_fwd;
    if (fabs(got / want - 1.0) > 1e-9)
        fail_msg("%s: windowed/full %.6g, expected %.6g (%.0f keys)", what, got, want, keys);
}

/* With sinks the kernel is cuDNN's, whose key loop for a CTA of M query
 * rows runs from tile (row - window) / 128: M/128 + ceil(window/128) tiles.
 * Megatron-Bridge's GPT-OSS runs (window_size (128, 0): 129 keys) visit 3
 * tiles per 128 queries on H100 (384 keys, where FlashAttention-2's bound
 * gives 256) and 4 per 256 on B200 (256 keys a query); HuggingFace's 128
 * keys visit 2 per 128 on H100 and 3 per 256 on B200 (192). Without sinks
 * FlashAttention-2's bound stays. */
static void test_cudnn_band_with_sinks(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    c.parallel.micro_batch = 8; /* windowed calls long enough not to be launch-bound */
    c.training.global_batch = 64;
    expect_window_keys(&c, 129, 384, "h100, 129 keys");
    expect_window_keys(&c, 128, 256, "h100, 128 keys");
    mp_error err;
    assert_int_equal(mp_hw_preset("b200", &c.hw, &err), MP_OK);
    assert_true(c.hw.attention_query_tile == 256.0);
    expect_window_keys(&c, 129, 256, "b200, 129 keys");
    expect_window_keys(&c, 128, 192, "b200, 128 keys");
    c.model.attn.sinks = false;
    expect_window_keys(&c, 129, 256, "b200 without sinks, 129 keys");
    expect_window_keys(&c, 128, 256, "b200 without sinks, 128 keys");
}

/* The estimate costs windowed and full blocks apart: GPT-OSS runs faster
 * than the same model with full attention everywhere, and its sinks add 64
 * parameters per block. */
static void test_estimate_and_refusals(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    mp_estimate with, without;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &with, &err), MP_OK);
    mp_config nw = c;
    nw.model.attn.window = nw.model.attn.window_skip_freq = 0;
    assert_int_equal(mp_estimate_config(&nw, NULL, &without, &err), MP_OK);
    assert_true(with.time.step < without.time.step);
    mp_model ns = c.model;
    ns.attn.sinks = false;
    assert_true(mp_block_params(&c.model, MP_BLOCK_MOE) - mp_block_params(&ns, MP_BLOCK_MOE) ==
                64.0);
    /* context parallelism with a window (exec runs it, docs/exec.md
     * "GPT-OSS"): accepted; a windowed block's attention computes the band,
     * while the ring passes the same K/V chunks as the full block's, hidden
     * under less work, so no less of it is exposed */
    c.parallel.cp = 2;
    c.parallel.dp = 4;
    mp_error_clear(&err);
    assert_int_equal(mp_estimate_config(&c, NULL, &with, &err), MP_OK);
    mp_block_shape win, full;
    mp_block_shape_of(&c.model, 4096, 1, &win);  /* block 1 (1-based): windowed */
    mp_block_shape_of(&c.model, 4096, 2, &full); /* block 2: full attention */
    assert_true(win.window > 0 && full.window == 0);
    mp_block_time tw, tf;
    /* the GPUs' time: at micro-batch 1 the host's launches bind both cores
     * once cuDNN's rate makes them this short */
    c.hw.kernel_overhead = 0.0;
    mp_block_time_of(&c, &win, &tw);
    mp_block_time_of(&c, &full, &tf);
    assert_true(tw.attn_core_fwd < tf.attn_core_fwd);
    assert_true(tw.cp_fwd >= tf.cp_fwd && tw.cp_bwd >= tf.cp_bwd);
    assert_true(tw.cp_fwd > 0.0);
}

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * fabs(want))
        fail_msg("%s: %.9g, by hand %.9g", what, got, want);
}

/* The preset and the HuggingFace config both say YaRN; the unfused RoPE
 * moves 20 more bytes an element forward and 18 more backward than the
 * fused kernel (the old model charged the fused cost whatever the scaling:
 * no difference at all). */
static void test_yarn_rope_runs_unfused(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    c.parallel.micro_batch = 4; /* GPU-bound, not launch-bound */
    c.training.global_batch = 32;
    assert_true(c.model.attn.rope_yarn);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    mp_block_time yarn, fused;
    mp_block_time_of(&c, &bs, &yarn);
    mp_config f = c;
    f.model.attn.rope_yarn = false;
    mp_block_time_of(&f, &bs, &fused);
    double elts = 4.0 * 4096 * (64 * 64 + 8 * 64); /* T x (q + kv widths), t = 1 */
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    near(yarn.fwd_compute - fused.fwd_compute, (24.0 - 4.0) * elts / bw, "forward");
    near(yarn.bwd_compute - fused.bwd_compute, (26.0 - 8.0) * elts / bw, "backward");
    /* no rotary embedding at all: YaRN is refused */
    mp_model m = c.model;
    m.position = MP_POS_LEARNED;
    mp_error err;
    mp_error_clear(&err);
    assert_int_equal(mp_model_finish_attn(&m, &err), MP_EINPUT);
    assert_string_equal(err.field, "attn.rope_yarn");
}

/* The experts' output bias: 16 local experts, each GPU's 4 x 4096 tokens
 * sent to 4 experts each, so 4 x 16384 routed copies of h = 2880 here. */
static void test_expert_output_bias(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    c.parallel.micro_batch = 4; /* GPU-bound, not launch-bound */
    c.training.global_batch = 32;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    mp_moe_time mt;
    mp_moe_block_time(&c, &bs, &mt);
    double n = 4.0 * 16384 * 2880;
    near(mt.bias.bytes_f, 12.0 * n, "forward bytes");
    near(mt.bias.bytes_b, 16.0 * n, "backward bytes");
    /* launches in counted units: each an eager op's host time (below) */
    double ko = c.hw.kernel_overhead;
    near(mt.bias.kernels_f, (2.0 * 16 + 1) * (6.8e-6 + 3.0e-6) / ko, "forward kernels");
    near(mt.bias.kernels_b, (4.0 * 16 + 2) * (1.0e-6 + 3.0e-6) / ko, "backward kernels");
    /* the block pays them: forward 12 bytes an element more than the same
     * model without biases, backward 16 */
    mp_block_time with, without;
    mp_block_time_of(&c, &bs, &with);
    mp_config nb = c;
    nb.model.linear_bias = false;
    mp_moe_block_time(&nb, &bs, &mt);
    assert_true(mt.bias.bytes_f == 0.0 && mt.bias.kernels_b == 0.0);
    mp_block_time_of(&nb, &bs, &without);
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    near(with.fwd_compute - without.fwd_compute, 12.0 * n / bw, "block forward");
    near(with.bwd_compute - without.bwd_compute, 16.0 * n / bw, "block backward");
}

/* GPT-OSS's clamped expert SwiGLU (planner/oss_cost.c): the eager clamps
 * and cat in front of the fused activation move 8 bytes an FC1-output
 * element forward and 15 backward (3 and 9 launches), its torch.tensor
 * synchronises the stream once a forward call (one host dispatch exposed),
 * moe_act's recompute pays the forward again, and without that checkpoint
 * the clamped copy (2 x 2f bytes a routed copy) is saved beside the FC1
 * output. b = 4 of 4096 tokens to 4 experts each: every GPU's 16 experts
 * see 4 x 16384 routed copies of 2 x 2880 FC1 outputs (GPU-bound). */
static mp_config gpt_oss_b4(void)
{
    mp_config c = gpt_oss_config();
    c.parallel.micro_batch = 4;
    c.training.global_batch = 32;
    return c;
}

static void test_clamp_bytes_and_launches(void **state)
{
    (void)state;
    mp_config c = gpt_oss_b4();
    assert_true(c.model.glu_limit == 7.0);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    mp_moe_time mt;
    mp_moe_block_time(&c, &bs, &mt);
    double n = 4.0 * 16384 * 2.0 * 2880; /* FC1 outputs on one GPU */
    near(mt.clamp.bytes_f, 8.0 * n, "forward bytes");
    near(mt.clamp.bytes_b, 15.0 * n, "backward bytes");
    double ko = c.hw.kernel_overhead;
    near(mt.clamp.kernels_f, 3.0 * (6.8e-6 + 3.0e-6) / ko, "forward kernels");
    near(mt.clamp.kernels_b, 9.0 * (1.0e-6 + 3.0e-6) / ko, "backward kernels");
    near(mt.clamp_syncs, 1.0, "synchronisations a forward");
    /* no clamp, no cost; nor for a model without experts */
    mp_config nc = c;
    nc.model.glu_limit = 0.0;
    mp_moe_block_time(&nc, &bs, &mt);
    assert_true(mt.clamp.bytes_f == 0.0 && mt.clamp.kernels_b == 0.0 && mt.clamp_syncs == 0.0);
}

/* The block pays them: forward 8 bytes an element and one dispatch more
 * than the same model unclamped, backward 15 bytes; moe_act's recompute
 * re-runs the forward's 8 bytes and its synchronisation. */
static void test_block_pays_the_clamp(void **state)
{
    (void)state;
    mp_config c = gpt_oss_b4();
    c.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    c.parallel.recompute_modules = (1u << MP_RCM_MOE_ACT) | (1u << MP_RCM_LAYERNORM);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    mp_block_time with, without;
    mp_block_time_of(&c, &bs, &with);
    mp_config nc = c;
    nc.model.glu_limit = 0.0;
    mp_block_time_of(&nc, &bs, &without);
    double n = 4.0 * 16384 * 2.0 * 2880;
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    near(with.fwd_compute - without.fwd_compute, 8.0 * n / bw + c.hw.kernel_overhead,
         "block forward");
    near(with.bwd_compute - without.bwd_compute, 15.0 * n / bw, "block backward");
    near(with.module_fwd[MP_RCM_MOE_ACT] - without.module_fwd[MP_RCM_MOE_ACT],
         8.0 * n / bw + c.hw.kernel_overhead, "moe_act recompute");
}

/* Memory: 2 x 2f bytes a routed copy more without a checkpoint (the clamps
 * keep the FC1 output, the fused function the clamped copy); moe_act's
 * checkpoint frees it with FC2's input, so what selective recompute keeps
 * is unchanged. */
static void test_clamped_copy_saved(void **state)
{
    (void)state;
    mp_config c = gpt_oss_b4();
    mp_config nc = c;
    nc.model.glu_limit = 0.0;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    double routed = 4.0 * 16384;
    near(mp_moe_act_bytes(&c, &bs) - mp_moe_act_bytes(&nc, &bs), routed * 4.0 * 2880,
         "saved without a checkpoint");
    near(mp_moe_act_output_bytes(&c, &bs) - mp_moe_act_output_bytes(&nc, &bs),
         routed * 4.0 * 2880, "freed by moe_act");
    uint32_t mask = 1u << MP_RCM_MOE_ACT;
    double kept = mp_moe_act_bytes(&c, &bs) - mp_block_modules_act_bytes(&c, &bs, mask);
    double kept_nc = mp_moe_act_bytes(&nc, &bs) - mp_block_modules_act_bytes(&nc, &bs, mask);
    near(kept, kept_nc, "kept under moe_act");
}

/* The host time of one eager PyTorch op (planner/compute.c,
 * mp_eager_op_launches), against its sources in tests/data/host: a call from
 * Python with autograd recording 6.8 us (eager_op_overhead.csv, PyTorch
 * issue #41383), one from C++ (the autograd engine's backward nodes) 1.0 us,
 * a cuLaunchKernel 3.0 us (cuda_launch.csv, tritonbench PR #1017), in the
 * profile's counted launches; none without a kernel_overhead. Then a
 * host-bound GPT-OSS block (micro-batch 1, 16 local experts on dgx-h100, the
 * GPU made all but free): the experts' output bias costs the host its 33
 * forward and 66 backward ops at those rates, not 99 counted launches of
 * 57.5 us (5.7 ms a block and micro-batch before). */
static void test_eager_op_host_cost(void **state)
{
    (void)state;
    mp_config c = gpt_oss_config();
    double ko = c.hw.kernel_overhead;
    assert_true(ko > 0.0);
    near(mp_eager_op_launches(&c.hw, false) * ko, 9.8e-6, "forward op");
    near(mp_eager_op_launches(&c.hw, true) * ko, 4.0e-6, "backward op");
    mp_hw free_host = c.hw;
    free_host.kernel_overhead = 0.0;
    assert_true(mp_eager_op_launches(&free_host, false) == 0.0);

    c.parallel.micro_batch = 1;
    host_bound_hw(&c.hw, 1e6);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 2, &bs);
    mp_block_time with, without;
    mp_block_time_of(&c, &bs, &with);
    mp_config nb = c;
    nb.model.linear_bias = false;
    mp_block_time_of(&nb, &bs, &without);
    assert_true(with.fwd_compute > 1e-3); /* host-bound: milliseconds of host */
    if (fabs(with.fwd_compute - without.fwd_compute - 33.0 * 9.8e-6) > 1e-9)
        fail_msg("forward host %.9g s more, by hand %.9g",
                 with.fwd_compute - without.fwd_compute, 33.0 * 9.8e-6);
    if (fabs(with.bwd_compute - without.bwd_compute - 66.0 * 4.0e-6) > 1e-9)
        fail_msg("backward host %.9g s more, by hand %.9g",
                 with.bwd_compute - without.bwd_compute, 66.0 * 4.0e-6);
    /* YaRN's unfused RoPE: 24 eager ops forward (Q and K) and 14 backward
     * against the fused kernel's 1 and 2 counted launches */
    mp_config fu = c;
    fu.model.attn.rope_yarn = false;
    mp_block_time fused;
    mp_block_time_of(&fu, &bs, &fused);
    double df = 24.0 * 9.8e-6 - 1.0 * ko, db = 14.0 * 4.0e-6 - 2.0 * ko;
    if (fabs(with.fwd_compute - fused.fwd_compute - df) > 1e-9 ||
        fabs(with.bwd_compute - fused.bwd_compute - db) > 1e-9)
        fail_msg("YaRN's host %.9g / %.9g s more than the fused kernel's, by hand %.9g / %.9g",
                 with.fwd_compute - fused.fwd_compute, with.bwd_compute - fused.bwd_compute, df, db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_flops_by_hand),
        cmocka_unit_test(test_kernel_skips_outside_the_band),
        cmocka_unit_test(test_cudnn_band_with_sinks),
        cmocka_unit_test(test_estimate_and_refusals),
        cmocka_unit_test(test_yarn_rope_runs_unfused),
        cmocka_unit_test(test_expert_output_bias),
        cmocka_unit_test(test_clamp_bytes_and_launches),
        cmocka_unit_test(test_block_pays_the_clamp),
        cmocka_unit_test(test_clamped_copy_saved),
        cmocka_unit_test(test_eager_op_host_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
