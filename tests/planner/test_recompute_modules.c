/* test_recompute_modules.c — Megatron-Core's selective recompute by module
 * (--recompute-modules): each module's freed activation bytes against a hand
 * count, every module frees something and costs a recomputed forward on a
 * model that has it, the default is the attention core, modules a model
 * lacks are refused, and plans keep the list. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
#include "planner/megatron.h"

#include "../config_fixture.h"

static mp_config config(const char *model, const char *hw, int64_t gpus, int64_t pp, int64_t ep)
{
    mp_config c = preset_config(model, hw, gpus, gpus / pp * 4 * pp, MP_DTYPE_BF16);
    c.parallel.pp = pp;
    c.parallel.dp = gpus / pp;
    c.parallel.ep = ep;
    c.parallel.dist_opt = true;
    return c;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

static double freed(const mp_config *c, int64_t block, mp_recompute_module k)
{
    mp_block_shape bs;
    mp_block_shape_of(&c->model, c->training.seq, block, &bs);
    return mp_block_module_act_bytes(c, &bs, k);
}

/* Hand counts, bf16, tp 1, one micro-batch of 4096 tokens. */
static void test_bytes_by_hand(void **state)
{
    (void)state;
    double sb = 4096.0;
    /* llama3-8b: 32 heads, h 4096, SwiGLU f 14336, flash attention */
    mp_config d = config("llama3-8b", "dgx-h100", 8, 1, 0);
    double h = 4096.0, f = 14336.0;
    assert_true(near(freed(&d, 1, MP_RCM_CORE_ATTN), 4.0 * 32 * sb)); /* fp32 LSE per head */
    /* Megatron-Core's TE spec fuses a dense block's norms into linear_qkv
     * and linear_fc1 (gpt_layer_specs.py: TELayerNormColumnParallelLinear,
     * input_layernorm and pre_mlp_layernorm IdentityOp); transformer_layer.py
     * checkpoints a norm only where it is not an IdentityOp: layernorm
     * frees nothing here (was 2 x 2 x sb x h) */
    assert_true(freed(&d, 1, MP_RCM_LAYERNORM) == 0.0);
    /* the MLP's checkpoint holds FC1's LayerNormLinear, whose input (the
     * pre-MLP norm's input, kept either way) it keeps: it frees the SwiGLU
     * input, FC2's input and the norm output FC1 kept (was without it) */
    assert_true(near(freed(&d, 1, MP_RCM_MLP), (4.0 + 2.0) * sb * f + 2.0 * sb * h));
    assert_true(freed(&d, 1, MP_RCM_MOE) == 0.0 && freed(&d, 1, MP_RCM_MLA_UP_PROJ) == 0.0);
    /* with tp 4 and SP, everything splits four ways */
    mp_config d4 = d;
    d4.parallel.tp = 4, d4.parallel.sp = true, d4.parallel.dp = 2;
    assert_true(freed(&d4, 1, MP_RCM_LAYERNORM) == 0.0);
    assert_true(near(freed(&d4, 1, MP_RCM_MLP), (6.0 * sb * f + 2.0 * sb * h) / 4.0));
    /* Llama 3 405B at Meta's tp 8 with SP, 8192 tokens: 32 MiB of norm
     * output more a block than before, none from layernorm */
    mp_config g = config("llama3-405b", "dgx-h100", 128, 16, 0);
    g.parallel.tp = 8, g.parallel.sp = true, g.parallel.dp = 1, g.training.seq = 8192;
    assert_true(near(freed(&g, 1, MP_RCM_MLP),
                     (6.0 * 8192.0 * 53248.0 + 2.0 * 8192.0 * 16384.0) / 8.0));
    assert_true(freed(&g, 1, MP_RCM_LAYERNORM) == 0.0);

    /* mixtral-8x7b, ep 8: top-2 of 8 experts of f 14336, no shared experts */
    mp_config x = config("mixtral-8x7b", "dgx-h100", 64, 1, 8);
    double copies = sb * 2.0;
    assert_true(near(freed(&x, 1, MP_RCM_MOE_ACT), 2.0 * copies * f)); /* FC2's inputs */
    double routed = 8.0 * sb * 8.0 + copies * (2.0 * h + 4.0 * f + 4.0 + 2.0 * f);
    assert_true(near(freed(&x, 1, MP_RCM_MOE), routed));
    assert_true(freed(&x, 1, MP_RCM_MLP) == 0.0 && freed(&x, 1, MP_RCM_SHARED_EXPERTS) == 0.0);
    /* an MoE block's pre-MLP norm is a module of its own (gpt_layer_specs.py:
     * pre_mlp_layernorm = backend.layer_norm if num_experts), the router's
     * input; its input norm is fused into linear_qkv: one norm's output */
    assert_true(near(freed(&x, 1, MP_RCM_LAYERNORM), 2.0 * sb * h));

    /* deepseek-v3: latent attention, Q and K of 128 heads x 192 (nope 128 +
     * rope 64), V of 128 x 128 (v_head_dim; DeepSeek-V3 report §2.1.1):
     * 2 x 4096 x (24576 + 24576 + 16384) = 536.9 MB; and the up-projections'
     * inputs, the latent norms' outputs 2 x 4096 x (1536 + 512) = 16.8 MB:
     * Megatron-Core's TE spec fuses q_layernorm and kv_layernorm into the
     * up-projections (gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec:
     * linear_q_up_proj / linear_kv_up_proj are column_parallel_layer_norm_linear,
     * the norms IdentityOp), so qkv_up_checkpoint (multi_latent_attention.py
     * get_query_key_value_tensors) re-runs them and keeps only the norms'
     * inputs. One shared expert of 2048 */
    mp_config s = config("deepseek-v3", "b200", 256, 16, 8);
    double qd = 128.0 * (double)s.model.head_dim, lat = 1536.0 + 512.0;
    assert_true(s.model.head_dim == 192 && s.model.mla.v_head_dim == 128);
    assert_true(s.model.mla.q_lora_rank == 1536 && s.model.mla.kv_lora_rank == 512);
    assert_true(near(freed(&s, 1, MP_RCM_MLA_UP_PROJ),
                     2.0 * sb * (qd + qd + 128.0 * 128.0) + 2.0 * sb * lat));
    assert_true(near(freed(&s, 1, MP_RCM_MLA_UP_PROJ), 536870912.0 + 16777216.0));
    /* under fp8 the norms' outputs are what the LayerNormLinears save, FP8
     * (module/layernorm_linear.py _LayerNormLinear.forward: the norm writes
     * the quantized ln_out, which is saved): 1 + 4/128 bytes, blockwise */
    mp_config s8 = s;
    s8.training.precision = MP_DTYPE_FP8;
    s8.training.fp8_recipe = MP_FP8_BLOCKWISE;
    assert_true(near(freed(&s8, 1, MP_RCM_MLA_UP_PROJ),
                     2.0 * sb * (qd + qd + 128.0 * 128.0) + (1.0 + 4.0 / 128.0) * sb * lat));
    assert_true(near(freed(&s, 4, MP_RCM_SHARED_EXPERTS), 6.0 * sb * 2048.0));
    /* latent attention's input norm is a module of its own (input_layernorm
     * = backend.layer_norm, mla_down_proj_fusion off): layernorm frees it in
     * every block, and in the MoE blocks the pre-MLP norm's output too; a
     * dense block's pre-MLP norm is FC1's, freed by mlp */
    double hs = 7168.0;
    assert_true(near(freed(&s, 1, MP_RCM_LAYERNORM), 2.0 * sb * hs));
    assert_true(near(freed(&s, 4, MP_RCM_LAYERNORM), 2.0 * 2.0 * sb * hs));
    assert_true(near(freed(&s, 1, MP_RCM_MLP), 6.0 * sb * 18432.0 + 2.0 * sb * hs));
    /* the whole MoE layer's checkpoint holds moe_act's and the shared experts' */
    mp_block_shape bs;
    mp_block_shape_of(&s.model, 4096, 4, &bs);
    uint32_t all = 1u << MP_RCM_MOE | 1u << MP_RCM_MOE_ACT | 1u << MP_RCM_SHARED_EXPERTS;
    assert_true(near(mp_block_modules_act_bytes(&s, &bs, all), freed(&s, 4, MP_RCM_MOE)));
}

/* Every module frees activations and costs recompute time on a model that
 * has it (deepseek-v3 has them all: dense first blocks, MoE blocks with a
 * shared expert, latent attention); the default is the attention core. */
static void test_every_module_frees_and_costs(void **state)
{
    (void)state;
    mp_config c = config("deepseek-v3", "b200", 256, 16, 8);
    mp_estimate none, def, core, e;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &none, &err), MP_OK);
    c.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    assert_int_equal(mp_estimate_config(&c, NULL, &def, &err), MP_OK);
    c.parallel.recompute_modules = 1u << MP_RCM_CORE_ATTN;
    assert_int_equal(mp_estimate_config(&c, NULL, &core, &err), MP_OK);
    assert_true(def.memory.activations == core.memory.activations);
    assert_true(def.time.recompute == core.time.recompute);
    /* per layer item (the most loaded rank may hold none of a module's
     * blocks: deepseek-v3's dense blocks are on the first stage) */
    static mp_item_cost items[64];
    assert_true(mp_model_blocks(&c.model) + 2 <= 64);
    for (int k = 0; k < MP_RCM_COUNT; k++) {
        c.parallel.recompute_modules = 1u << k;
        if (mp_item_costs(&c, items, &err) != MP_OK)
            fail_msg("%s: %s: %s", mp_recompute_module_name(k), err.field, err.msg);
        double kept = 0.0, all = 0.0, rec = 0.0;
        for (int64_t i = 1; i <= mp_model_blocks(&c.model); i++) {
            kept += items[i].act_bytes[MP_RECOMPUTE_SELECTIVE];
            all += items[i].act_bytes[MP_RECOMPUTE_NONE];
            rec += items[i].bwd[MP_RECOMPUTE_SELECTIVE] - items[i].bwd[MP_RECOMPUTE_NONE];
        }
        if (!(kept < all))
            fail_msg("%s frees nothing: %.6g vs %.6g bytes", mp_recompute_module_name(k), kept,
                     all);
        if (!(rec > 0.0))
            fail_msg("%s recomputes nothing", mp_recompute_module_name(k));
    }
    /* the routed-token part explain names shrinks with moe_act and moe */
    c.parallel.recompute_modules = 1u << MP_RCM_MOE;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_true(e.memory.routed_activations == 0.0 && none.memory.routed_activations > 0.0);
}

/* The audit's FP8 part: an MoE block's router keeps the pre-MLP norm output
 * in bf16 (Megatron-Core RouterGatingLinearFunction saves its input), so
 * the FP8 stash saves only QKV's input there; shared experts' FC1 keeps an
 * FP8 copy beside it under delayed scaling only (the other recipes: it keeps
 * the router's bf16 tensor, moe/shared_experts.py SharedExpertMLP.__init__
 * set_save_original_input). Latent attention's input norm output feeds two
 * TE Linears (linear_q_down_proj, linear_kv_down_proj), each keeping its own
 * FP8 copy (module/linear.py _linear_forward_impl). A dense block stashes
 * both norm outputs in FP8. */
static void test_fp8_moe_norm_output(void **state)
{
    (void)state;
    double sbh = 4096.0 * 4096.0;
    mp_config d = config("llama3-8b", "dgx-h100", 8, 1, 0);
    d.training.precision = MP_DTYPE_FP8;
    d.training.fp8_recipe = MP_FP8_TENSORWISE;
    mp_block_shape bs;
    mp_block_shape_of(&d.model, 4096, 1, &bs);
    double stash = mp_fp8_stash_bytes(&d);
    assert_true(near(mp_fp8_norm_output_saving(&d, &bs), 2.0 * (2.0 - stash) * sbh));
    mp_config x = config("mixtral-8x7b", "dgx-h100", 64, 1, 8);
    x.training.precision = MP_DTYPE_FP8;
    x.training.fp8_recipe = MP_FP8_TENSORWISE;
    mp_block_shape_of(&x.model, 4096, 1, &bs);
    assert_true(near(mp_fp8_norm_output_saving(&x, &bs), (2.0 - stash) * sbh));
    mp_config s = config("deepseek-v3", "b200", 256, 16, 8);
    s.training.precision = MP_DTYPE_FP8;
    s.training.fp8_recipe = MP_FP8_MXFP8;
    mp_block_shape_of(&s.model, 4096, 4, &bs);
    double h = 7168.0 * 4096.0, st = mp_fp8_stash_bytes(&s);
    /* mxfp8: the down-projections' two FP8 copies where bf16 keeps one
     * norm output, the router's bf16, no shared FC1 copy */
    assert_true(near(mp_fp8_norm_output_saving(&s, &bs), (2.0 - 2.0 * st) * h));
    /* layernorm recompute then frees the two FP8 copies and the router's
     * bf16: 2 + 2 x stash bytes per element */
    assert_true(near(mp_block_module_act_bytes(&s, &bs, MP_RCM_LAYERNORM), (2.0 + 2.0 * st) * h));
    /* delayed (stash 1): the shared FC1's FP8 copy too: 2 + 3 bytes */
    s.training.fp8_recipe = MP_FP8_DELAYED;
    assert_true(near(mp_fp8_norm_output_saving(&s, &bs), (2.0 - 3.0) * h));
    assert_true(near(mp_block_module_act_bytes(&s, &bs, MP_RCM_LAYERNORM), 5.0 * h));
    /* mixtral has no shared experts and no latents: one FP8 copy, any recipe */
    x.training.fp8_recipe = MP_FP8_DELAYED;
    mp_block_shape_of(&x.model, 4096, 1, &bs);
    assert_true(near(mp_fp8_norm_output_saving(&x, &bs), 1.0 * sbh));
    /* layernorm there frees the router's bf16 input alone (the input norm
     * is linear_qkv's own) */
    x.training.fp8_recipe = MP_FP8_TENSORWISE;
    assert_true(near(mp_block_module_act_bytes(&x, &bs, MP_RCM_LAYERNORM), 2.0 * sbh));
    /* a dense block under fp8: layernorm frees nothing, mlp the SwiGLU
     * input (bf16), FC2's FP8 input and the FP8 norm output FC1's
     * LayerNormLinear saved (before: less the bf16 norm output the
     * checkpoint was said to keep, 2 - stash bytes an element short) */
    mp_block_shape_of(&d.model, 4096, 1, &bs);
    double f = 14336.0 * 4096.0;
    assert_true(mp_block_module_act_bytes(&d, &bs, MP_RCM_LAYERNORM) == 0.0);
    assert_true(near(mp_block_module_act_bytes(&d, &bs, MP_RCM_MLP), (4.0 + stash) * f + stash * sbh));
    uint32_t both = 1u << MP_RCM_LAYERNORM | 1u << MP_RCM_MLP;
    assert_true(near(mp_block_modules_act_bytes(&d, &bs, both),
                     mp_block_module_act_bytes(&d, &bs, MP_RCM_MLP)));
}

/* What layernorm and mlp re-run: on a dense block layernorm nothing (the
 * norms are inside linear_qkv and linear_fc1), and mlp FC1's norm besides
 * FC1, the SwiGLU and FC2 (one more memory-bound kernel: read and write
 * the block's tokens); an MoE block's layernorm its pre-MLP norm. */
static void block_time(const mp_config *c, int64_t block, mp_block_time *bt)
{
    mp_block_shape bs;
    mp_block_shape_of(&c->model, 4096, block, &bs);
    mp_block_time_of(c, &bs, bt);
}

static void test_norm_times(void **state)
{
    (void)state;
    mp_config d = config("llama3-8b", "dgx-h100", 8, 1, 0);
    mp_block_time bt;
    block_time(&d, 1, &bt);
    assert_true(bt.module_fwd[MP_RCM_LAYERNORM] == 0.0);
    double T = 4096.0, h = 4096.0, f = 14336.0;
    double fc = mp_linear_gemm_time(&d, T, 2.0 * f, h) + mp_linear_gemm_time(&d, T, h, f);
    double ew = mp_membound_time(&d.hw, 4.0 * T * h, 1.0) + mp_membound_time(&d.hw, 6.0 * T * f, 1.0);
    assert_true(near(bt.module_fwd[MP_RCM_MLP], mp_host_bound(&d.hw, fc + ew, 4.0)));
    mp_config x = config("mixtral-8x7b", "dgx-h100", 64, 1, 8);
    block_time(&x, 1, &bt);
    assert_true(near(bt.module_fwd[MP_RCM_LAYERNORM],
                     mp_host_bound(&x.hw, mp_membound_time(&x.hw, 4.0 * T * h, 1.0), 1.0)));
}

/* mla_up_proj's re-run: the Q and KV up-projection GEMMs, RoPE on Q and K
 * (read and write 2 x 128 x 192 elements a token, 2 bytes each), and the
 * latent norms fused into the up-projections (TE LayerNormLinear, inside
 * qkv_up_checkpoint): read and write 1536 + 512 elements a token, two
 * kernels. DeepSeek-V3, bf16, tp 1, 4096 tokens. */
static void test_mla_up_proj_time(void **state)
{
    (void)state;
    mp_config s = config("deepseek-v3", "b200", 256, 16, 8);
    mp_block_time bt;
    block_time(&s, 4, &bt);
    double T = 4096.0, a = 128.0;
    double up = mp_linear_gemm_time(&s, T, a * (128.0 + 64.0), 1536.0) +
                mp_linear_gemm_time(&s, T, a * (128.0 + 128.0), 512.0);
    double rope = mp_membound_time(&s.hw, 4.0 * T * 2.0 * a * (128.0 + 64.0), 1.0);
    double norms = mp_membound_time(&s.hw, 4.0 * T * (1536.0 + 512.0), 2.0);
    assert_true(norms > 0.0);
    assert_true(near(bt.module_fwd[MP_RCM_MLA_UP_PROJ],
                     mp_host_bound(&s.hw, up + rope + norms, 5.0)));
}

/* A module the model has nothing of is refused, naming the field. */
static void test_refused_where_absent(void **state)
{
    (void)state;
    mp_config d = config("llama3-8b", "dgx-h100", 8, 1, 0);
    d.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    mp_estimate e;
    mp_error err;
    const int absent[] = {MP_RCM_MOE_ACT, MP_RCM_MOE, MP_RCM_SHARED_EXPERTS, MP_RCM_MLA_UP_PROJ};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        d.parallel.recompute_modules = 1u << absent[i];
        assert_int_equal(mp_estimate_config(&d, NULL, &e, &err), MP_EINPUT);
        assert_string_equal(err.field, "recompute_modules");
    }
    mp_config x = config("mixtral-8x7b", "dgx-h100", 64, 1, 8);
    x.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    x.parallel.recompute_modules = 1u << MP_RCM_MLP; /* every block is MoE */
    assert_int_equal(mp_estimate_config(&x, NULL, &e, &err), MP_EINPUT);
    x.parallel.recompute_modules = 1u << MP_RCM_SHARED_EXPERTS;
    assert_int_equal(mp_estimate_config(&x, NULL, &e, &err), MP_EINPUT);
}

/* The list syntax, and plans that keep it. */
static void test_parse_and_plan(void **state)
{
    (void)state;
    uint32_t mask;
    char bad[72], buf[128];
    assert_true(mp_recompute_modules_parse("moe_act, layernorm", &mask, bad, sizeof bad));
    assert_true(mask == (1u << MP_RCM_MOE_ACT | 1u << MP_RCM_LAYERNORM));
    mp_recompute_modules_format(mask, buf, sizeof buf);
    assert_string_equal(buf, "moe_act,layernorm");
    assert_false(mp_recompute_modules_parse("mlp,attn", &mask, bad, sizeof bad));
    assert_string_equal(bad, "attn");
    assert_false(mp_recompute_modules_parse("", &mask, bad, sizeof bad));
    assert_false(mp_recompute_modules_parse("mlp,", &mask, bad, sizeof bad));

    mp_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.config = config("deepseek-v3", "b200", 256, 16, 8);
    plan.config.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    plan.config.parallel.recompute_modules = 1u << MP_RCM_MLA_UP_PROJ | 1u << MP_RCM_MOE_ACT;
    mp_buf out = {0};
    mp_plan_write_yaml(&plan, NULL, &out);
    assert_non_null(strstr(out.data, "recompute_modules"));
    mp_plan back;
    mp_error err;
    if (mp_plan_parse_yaml(out.data, out.len, "plan", &back, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    assert_true(back.config.parallel.recompute_modules == plan.config.parallel.recompute_modules);
    mp_buf_free(&out);
    /* the Megatron export: a list option, Megatron's names in its order */
    mp_buf args = {0};
    mp_megatron_args(&plan.config, NULL, &args);
    assert_non_null(strstr(args.data, "--recompute-granularity selective \\\n"
                                      "--recompute-modules moe_act mla_up_proj \\\n"));
    mp_buf_free(&args);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_by_hand),
        cmocka_unit_test(test_every_module_frees_and_costs),
        cmocka_unit_test(test_fp8_moe_norm_output),
        cmocka_unit_test(test_mla_up_proj_time),
        cmocka_unit_test(test_norm_times),
        cmocka_unit_test(test_refused_where_absent),
        cmocka_unit_test(test_parse_and_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
