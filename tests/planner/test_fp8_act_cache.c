/* test_fp8_act_cache.c — DeepSeek-V3's memory recipe (technical report,
 * arXiv 2412.19437): training.fp8_act_cache (§3.3.3 "Low-Precision
 * Activation" (2): the MoE SwiGLU inputs cached in FP8, their outputs
 * recomputed; and Megatron-Core's activation_func_fp8_input_store), the
 * embedding shared with the MTP module on DualPipe's rank that holds both
 * ends (§3.2.3), and DualPipe's in-flight mix of a rank's two stages. Each
 * memory term against a hand count from the shapes; the example plan fits
 * with the recipe and not without it. argv[1]: the examples/ folder. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/hw.h"
#include "core/io.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "planner/explain.h"
#include "planner/megatron.h"
#include "planner/pipeline_internal.h"

#include "../config_fixture.h"

static const char *g_examples;

#define GIB 1073741824.0

/* DeepSeek-V3 (h 7168, 256 routed experts of f_e 2048, top-8, one shared
 * expert of 2048, 3 dense blocks of f 18432) on H800s, blockwise FP8, tp 1,
 * ep 64, one micro-batch of 4096 tokens, balanced routing. */
static mp_config dsv3(mp_fp8_act_cache cache)
{
    mp_config c = preset_config("deepseek-v3", "h800", 1024, 64 * 32, MP_DTYPE_FP8);
    c.model.moe.imbalance = 1.0;
    c.training.fp8_recipe = MP_FP8_BLOCKWISE;
    c.training.fp8_act_cache = cache;
    c.parallel.pp = 16;
    c.parallel.dp = 64;
    c.parallel.ep = 64;
    c.parallel.dist_opt = true;
    return c;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

static void shape(const mp_config *c, int64_t block, mp_block_shape *bs)
{
    mp_block_shape_of(&c->model, c->training.seq, block, bs);
}

/* §3.3.3 (2): per routed copy, the SwiGLU input (2 f_e elements) in FP8
 * with an fp32 scale per 1x128 tile, 1 + 4/128 bytes per element instead
 * of bf16's 2; the shared expert's likewise. */
static void test_moe_bytes_by_hand(void **state)
{
    (void)state;
    mp_config off = dsv3(MP_F8AC_OFF), ds = dsv3(MP_F8AC_DEEPSEEK);
    mp_config mg = dsv3(MP_F8AC_SWIGLU_INPUT);
    mp_block_shape bs;
    shape(&off, 4, &bs); /* block 4: an MoE block */
    assert_int_equal(bs.kind, MP_BLOCK_MOE);
    double tokens = 4096.0, copies = tokens * 8.0, fe = 2048.0, fs = 2048.0;
    double stash = 1.0 + 4.0 / 128.0;
    assert_true(near(mp_swiglu_input_store_bytes(&ds, true), stash));
    assert_true(near(mp_swiglu_input_store_bytes(&ds, false), 2.0)); /* dense blocks: bf16 */
    assert_true(near(mp_swiglu_input_store_bytes(&mg, false), 1.0)); /* E4M3, no scale */
    /* the routed copies' bytes: 32768 copies x 4096 elements x (2 - 1.03125) */
    assert_true(near(mp_moe_act_bytes(&off, &bs) - mp_moe_act_bytes(&ds, &bs),
                     copies * 2.0 * fe * (2.0 - stash)));
    assert_true(near(copies * 2.0 * fe * (2.0 - stash), 130023424.0));
    assert_true(near(mp_moe_act_bytes(&off, &bs) - mp_moe_act_bytes(&mg, &bs),
                     copies * 2.0 * fe * 1.0));
    /* the shared expert's: 4096 tokens x 4096 elements x (2 - 1.03125) */
    assert_true(near(mp_act_cache_saving(&ds, &bs), tokens * 2.0 * fs * (2.0 - stash)));
    assert_true(near(mp_act_cache_saving(&mg, &bs), tokens * 2.0 * fs * 1.0));
    assert_true(mp_act_cache_saving(&off, &bs) == 0.0);
    /* a dense block: DeepSeek's cache is the MoE's; Megatron's is every SwiGLU's */
    mp_block_shape dense;
    shape(&off, 1, &dense);
    assert_int_equal(dense.kind, MP_BLOCK_SELF);
    assert_true(mp_act_cache_saving(&ds, &dense) == 0.0);
    assert_true(near(mp_act_cache_saving(&mg, &dense), tokens * 2.0 * 18432.0));

    /* moe_act recomputes the output (FC2's FP8 input, f_e x 1.03125 per copy)
     * and under DeepSeek's cache keeps the FP8 input; Megatron-Core's
     * checkpoint keeps the bf16 input instead, giving the store back */
    double fc2 = copies * fe * stash;
    assert_true(near(mp_block_module_act_bytes(&off, &bs, MP_RCM_MOE_ACT), fc2));
    assert_true(near(mp_block_module_act_bytes(&ds, &bs, MP_RCM_MOE_ACT), fc2));
    assert_true(near(mp_block_module_act_bytes(&mg, &bs, MP_RCM_MOE_ACT),
                     fc2 - copies * 2.0 * fe * 1.0));
    /* shared_experts' checkpoint frees what is stored, the FP8 input now */
    assert_true(near(mp_block_module_act_bytes(&off, &bs, MP_RCM_SHARED_EXPERTS) -
                         mp_block_module_act_bytes(&ds, &bs, MP_RCM_SHARED_EXPERTS),
                     tokens * 2.0 * fs * (2.0 - stash)));
}

/* The block's stash as search and the estimate see it (mp_item_costs), with
 * the example's modules: the two savings above, nothing else. */
static void test_item_stash(void **state)
{
    (void)state;
    mp_config off = dsv3(MP_F8AC_OFF), ds = dsv3(MP_F8AC_DEEPSEEK);
    uint32_t mask = 1u << MP_RCM_LAYERNORM | 1u << MP_RCM_MLA_UP_PROJ | 1u << MP_RCM_MOE_ACT;
    off.parallel.recompute = ds.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    off.parallel.recompute_modules = ds.parallel.recompute_modules = mask;
    int64_t n = mp_model_blocks(&off.model) + 2;
    mp_item_cost *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    mp_error err;
    assert_int_equal(mp_item_costs(&off, a, &err), MP_OK);
    assert_int_equal(mp_item_costs(&ds, b, &err), MP_OK);
    double stash = 1.0 + 4.0 / 128.0, per = 4096.0 * 2.0 * 2048.0 * (2.0 - stash);
    double saved = per * 8.0 + per; /* routed copies (top-8) and the shared expert */
    /* §3.3.3 (1): the attention output (128 heads x v 128) in E5M6, 12 bits
     * (the FP8 stash and half a byte), where Megatron-Core's projection
     * keeps the attention's bf16 output (save_original_input, every recipe
     * but delayed): 2 bytes without the cache. negative: DeepSeek's saves */
    double e5m6 = -(2.0 - (stash + 0.5)) * 4096.0 * 128.0 * 128.0;
    for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
        bool full = r == MP_RECOMPUTE_FULL;
        if (full) {
            assert_true(a[4].act_bytes[r] == b[4].act_bytes[r]);
            assert_true(a[1].act_bytes[r] == b[1].act_bytes[r]);
            continue;
        }
        assert_true(near(a[4].act_bytes[r] - b[4].act_bytes[r], saved - e5m6));
        assert_true(near(b[1].act_bytes[r] - a[1].act_bytes[r], e5m6)); /* a dense block */
    }
    /* 146.3 MB per block, 0.545 GiB per micro-batch of a 4-block stage; and
     * 31.5 MB more per block for the attention output in E5M6, not bf16 */
    assert_true(near(saved, 146276352.0) && near(e5m6, -31457280.0));
    assert_true(fabs(4.0 * saved / GIB - 0.5449) < 1e-4);
    /* and a cast to FP8 and back: a little more time */
    assert_true(b[4].fwd > a[4].fwd && b[4].fwd < a[4].fwd * 1.02);
    free(a);
    free(b);
}

/* Latent attention's stash per token (DeepSeek-V3 report §2.1.1, shapes of
 * §4.2: 128 heads, n 128, r 64, v 128, q_r 1536, kv_r 512), bf16, no
 * recompute: Q and K 2 x 128 x 192 each, V and the attention output
 * 2 x 128 x 128 each; the latents: the two norms' inputs and the two
 * up-projections' inputs 2 x 2 x (1536 + 512) and the RoPE key 2 x 64; the
 * block's own norm inputs 2 x 2h, QKV's (the down-projections') and FC1's
 * inputs 2h each. The MLP: a dense block's SwiGLU of 18432. */
static void test_mla_stash_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("deepseek-v3");
    mp_block_shape bs;
    mp_block_shape_of(m, 4096, 1, &bs);
    double h = 7168.0, f = 18432.0, s = 4096.0;
    double attn = 2.0 * 24576.0 * 2.0 + 2.0 * 16384.0 * 2.0;
    double latents = 4.0 * (1536.0 + 512.0) + 2.0 * 64.0;
    double block = 2.0 * 2.0 * h + 2.0 * h + 2.0 * h; /* norm inputs, QKV and FC1 inputs */
    double mlp = 4.0 * f + 2.0 * f;                   /* SwiGLU in, FC2 in */
    double lse = 4.0 * 128.0;                         /* flash attention's log-sum-exp */
    double want = s * (attn + latents + block + mlp + lse);
    assert_true(near(mp_block_act_bytes(m, &bs, 1.0, 1.0, 1.0, false, MP_RECOMPUTE_NONE, true),
                     want));

    /* Under FP8 (blockwise: 1 + 4/128 bytes an element), as Megatron-Core's
     * TE spec saves them: the up-projections are LayerNormLinears with the
     * latent norms fused in, saving the quantized norm output
     * (module/layernorm_linear.py _LayerNormLinear.forward,
     * with_quantized_norm; ln_out_to_save): q_r + kv_r in FP8, not bf16 */
    mp_config c = dsv3(MP_F8AC_OFF);
    double st = 1.0 + 4.0 / 128.0;
    assert_true(near(mp_fp8_mla_latent_saving(&c, &bs), (2.0 - st) * s * (1536.0 + 512.0)));
    /* the input norm's output feeds linear_q_down_proj and linear_kv_down_proj,
     * two TE Linears that each keep an FP8 copy (module/linear.py
     * _linear_forward_impl: own_quantized_input, columnwise data saved):
     * a dense block keeps 2 x 1.03125 for it and 1.03125 for FC1's input
     * where bf16 keeps 2 + 2; an MoE block keeps the router's bf16 for the
     * pre-MLP norm output and, blockwise, no shared-FC1 copy */
    double sbh = s * h;
    assert_true(near(mp_fp8_norm_output_saving(&c, &bs), 4.0 * sbh - 3.0 * st * sbh));
    mp_block_shape moe;
    mp_block_shape_of(m, 4096, 4, &moe);
    assert_true(moe.kind == MP_BLOCK_MOE);
    assert_true(near(mp_fp8_norm_output_saving(&c, &moe), 2.0 * sbh - 2.0 * st * sbh));
    /* not latent attention: nothing */
    mp_config l = c;
    l.model = *mp_model_preset("llama3-8b");
    mp_block_shape lb;
    mp_block_shape_of(&l.model, 4096, 1, &lb);
    assert_true(mp_fp8_mla_latent_saving(&l, &lb) == 0.0);
}

/* §3.2.3: DualPipe puts the embedding and the head (with the MTP module) on
 * one rank, so the module's lookups need no copy of the embedding: V x h
 * parameters (129280 x 7168, 0.93 B) fewer on the last stage. */
static void test_mtp_shared_embedding(void **state)
{
    (void)state;
    mp_config c = dsv3(MP_F8AC_OFF);
    c.model.mtp_layers = 1;
    c.parallel.schedule = MP_SCHED_1F1B;
    mp_item_cost one, dual;
    mp_error err;
    assert_int_equal(mp_mtp_item_cost(&c, NULL, &one, &err), MP_OK);
    c.parallel.schedule = MP_SCHED_DUALPIPE;
    assert_int_equal(mp_mtp_item_cost(&c, NULL, &dual, &err), MP_OK);
    double vh = 129280.0 * 7168.0;
    assert_true(near(one.static_bytes - dual.static_bytes, vh * mp_static_bytes_per_param(&c)));
}

/* DualPipe's rank r holds stage r and stage p-1-r. At its peak (dualpipe.py:
 * step 1 runs (p/2 - r - 1) x 2 forwards of its first direction, step 2
 * r + 1 of each, step 3 keeps the second's count, step 4 starts with one
 * more of the first) rank 0 holds p = 16 micro-batches of its first stage
 * and 1 of its second: PP + 1, not 8.5 of each. */
static void test_dualpipe_mix(void **state)
{
    (void)state;
    double act[2] = {1.0, 1e-3}, hold[2] = {0.0, 0.0}, at[2];
    double peak = mp_pipeline_stash_peak(MP_SCHED_DUALPIPE, 16, 2, 120, 0, act, hold, at);
    assert_true(at[0] == 16.0 && at[1] == 1.0);
    assert_true(near(peak, 16.0 + 1e-3));
    /* equal chunks: the closed form's PP + 1 */
    double eq[2] = {1.0, 1.0};
    assert_true(mp_pipeline_stash_peak(MP_SCHED_DUALPIPE, 16, 2, 120, 0, eq, hold, NULL) == 17.0);
    /* not DualPipe's: no walk */
    assert_true(mp_pipeline_stash_peak(MP_SCHED_INTERLEAVED, 4, 3, 12, 0, eq, hold, NULL) < 0.0);
}

static void read_example(mp_plan *plan)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/deepseek-v3-h800.yaml", g_examples);
    mp_error err;
    if (mp_plan_read_file(path, plan, &err) != MP_OK)
        fail_msg("%s: %s", path, err.msg);
}

/* The published run with the report's recipe fits on 80 GB H800s (78.6 GiB:
 * 79.7 before mla_up_proj counted the latent norms it re-runs);
 * without the FP8 cache megaplan has it over 80 GiB. */
static void test_example_fits(void **state)
{
    (void)state;
    mp_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    read_example(plan);
    assert_int_equal(plan->config.training.fp8_act_cache, MP_F8AC_DEEPSEEK);
    mp_estimate e, o;
    mp_error err;
    assert_int_equal(mp_estimate_config(&plan->config, plan, &e, &err), MP_OK);
    assert_true(e.fits);
    assert_true(e.memory.peak / GIB > 78.0 && e.memory.peak / GIB < 79.0);
    mp_config off = plan->config;
    off.training.fp8_act_cache = MP_F8AC_OFF;
    assert_int_equal(mp_estimate_config(&off, plan, &o, &err), MP_OK);
    assert_false(o.fits);
    /* the saving: 17 micro-batches of 4 MoE blocks' routed and shared
     * SwiGLU inputs (test_item_stash) and their fragmentation */
    double stash = 1.0 + 4.0 / 128.0;
    double saved = 17.0 * 4.0 * (9.0 * 4096.0 * 2.0 * 2048.0 * (2.0 - stash) +
                                 (2.0 - (stash + 0.5)) * 4096.0 * 128.0 * 128.0);
    assert_true(fabs((o.memory.peak - e.memory.peak) -
                     saved * (1.0 + plan->config.hw.allocator_fragmentation)) < 1e-6 * saved);
    /* explain names the saving when a plan does not fit */
    mp_config tight = plan->config;
    tight.hw.memory = 60.0 * GIB;
    mp_buf out = {0};
    int verdict = -1;
    assert_int_equal(mp_explain_against(&tight, NULL, "no search", &out, &verdict, &err), MP_OK);
    assert_non_null(strstr(out.data, "saved by fp8_act_cache deepseek"));
    mp_buf_free(&out);
    /* the Megatron export says the cache is DeepSeek's own */
    mp_buf args = {0};
    mp_megatron_args(&plan->config, plan, &args);
    assert_non_null(strstr(args.data, "# fp8_act_cache deepseek: Megatron-LM has no flag"));
    mp_buf_free(&args);
    mp_config mg = plan->config;
    mg.training.fp8_act_cache = MP_F8AC_SWIGLU_INPUT;
    mp_megatron_args(&mg, NULL, &args);
    assert_non_null(strstr(args.data, "activation_func_fp8_input_store"));
    mp_buf_free(&args);
    free(plan);
}

/* Refusals, each naming the field. */
static void test_refusals(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = dsv3(MP_F8AC_DEEPSEEK);
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "fp8_act_cache");
    c = dsv3(MP_F8AC_DEEPSEEK);
    c.training.precision = MP_DTYPE_BF16;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "fp8_act_cache");
    /* a dense model has no MoE SwiGLU to cache */
    mp_config d = c;
    d.model = *mp_model_preset("llama3-8b");
    d.training.precision = MP_DTYPE_FP8;
    d.parallel.ep = 1;
    assert_int_equal(mp_config_check(&d, &err), MP_EINPUT);
    assert_string_equal(err.field, "fp8_act_cache");
    assert_non_null(strstr(err.msg, "no MoE layers"));
    /* Megatron-Core's store is SwiGLU's only */
    mp_config g = d;
    g.model = *mp_model_preset("gpt3-175b");
    g.training.fp8_act_cache = MP_F8AC_SWIGLU_INPUT;
    assert_int_equal(mp_config_check(&g, &err), MP_EINPUT);
    assert_string_equal(err.field, "fp8_act_cache");
    assert_non_null(strstr(err.msg, "not SwiGLU"));
}

int main(int argc, char **argv)
{
    g_examples = argc > 1 ? argv[1] : "examples";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_bytes_by_hand), cmocka_unit_test(test_item_stash),
        cmocka_unit_test(test_mla_stash_by_hand),
        cmocka_unit_test(test_mtp_shared_embedding), cmocka_unit_test(test_dualpipe_mix),
        cmocka_unit_test(test_example_fits), cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
