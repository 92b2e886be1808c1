/* test_fp8.c — FP8 training's terms (docs/cost-model.md §13), each against a
 * hand count, and the MoE load-imbalance factor: the linear GEMMs at the FP8
 * rate, the cast kernels' bytes per recipe, the FP8 weight copies and the
 * FP8 stashes of the GEMM inputs, what stays in BF16 (attention core,
 * master weights, gradients), and the busiest expert rank scaled by
 * moe.imbalance. */
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
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "../config_fixture.h"

static bool near(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

static mp_config config(const char *model, const char *hw, int64_t gpus, int64_t tp,
                        mp_dtype precision)
{
    mp_config c = preset_config(model, hw, gpus, gpus / tp * 2, precision);
    c.parallel.tp = tp;
    c.parallel.sp = tp > 1;
    c.parallel.dp = gpus / tp;
    c.parallel.dist_opt = true;
    return c;
}

/* A GEMM of a linear layer: FLOPs at the FP8 peak at the efficiency the
 * curve gives the same time at the BF16 peak; the attention core and the LM
 * head stay at the BF16 rate. */
static void test_gemm_rate(void **state)
{
    (void)state;
    mp_config b = config("llama3-8b", "dgx-h100", 8, 1, MP_DTYPE_BF16);
    mp_config f = b;
    f.training.precision = MP_DTYPE_FP8;
    double m = 8192, n = 4096, k = 4096, flops = 2 * m * n * k;
    const mp_hw *hw = &b.hw;
    double pb = hw->peak_flops[MP_DTYPE_BF16], p8 = hw->peak_flops[MP_DTYPE_FP8];
    /* dgx-h100's curve is the A100 fit transferred: scaled by the two GPUs'
     * measured achievable matmul rates, (794.5 / 989.4) / 0.869 */
    double r = (794.5 / 989.4) / 0.869;
    double want_b = flops / (pb * r * mp_curve_eval(&hw->gemm_efficiency, flops));
    double want_8 = flops / (p8 * r * mp_curve_eval(&hw->gemm_efficiency, flops * pb / p8));
    assert_true(near(mp_linear_gemm_time(&b, m, n, k), want_b, 1e-12));
    assert_true(near(mp_linear_gemm_time(&f, m, n, k), want_8, 1e-12));
    assert_true(mp_linear_gemm_time(&f, m, n, k) < 0.6 * want_b);
    assert_true(mp_high_peak(&f) == pb && mp_high_peak(&b) == pb);
    /* the attention core is timed at the BF16 rate either way */
    mp_block_shape bs;
    mp_block_shape_of(&b.model, 4096, 1, &bs);
    mp_block_time tb, t8;
    mp_block_time_of(&b, &bs, &tb);
    mp_block_time_of(&f, &bs, &t8);
    assert_true(tb.attn_core_fwd == t8.attn_core_fwd);
    assert_true(t8.fwd_compute < tb.fwd_compute && t8.bwd_compute < tb.bwd_compute);
    /* the head (Megatron's output layer is not a TE module) is not sped up */
    mp_edge_time hb, h8;
    mp_head_time_of(&b, &hb);
    mp_head_time_of(&f, &h8);
    assert_true(hb.fwd_compute == h8.fwd_compute);
}

/* A transferred GEMM curve is scaled by the GPU's measured achievable matmul
 * rate over its peak, relative to the fitted GPU's (docs/cost-model.md §4):
 * b200 (1745 / 2250) / 0.869, gb200-nvl72 (1822 / 2500) / 0.869; a profile
 * fitted on its own GPU, or one without the two fields, keeps its curve. */
static void test_gemm_transfer(void **state)
{
    (void)state;
    mp_config b = config("llama3-8b", "b200", 8, 1, MP_DTYPE_FP8);
    mp_config g = config("llama3-8b", "gb200-nvl72", 8, 1, MP_DTYPE_FP8);
    mp_config a = config("llama3-8b", "dgx-a100", 8, 1, MP_DTYPE_BF16);
    double rb = (1745.0 / 2250.0) / 0.869, rg = (1822.0 / 2500.0) / 0.869;
    assert_true(near(mp_gemm_transfer(&b.hw), rb, 1e-12));
    assert_true(near(mp_gemm_transfer(&g.hw), rg, 1e-12));
    assert_true(mp_gemm_transfer(&a.hw) == 1.0);

    /* a BF16 GEMM of 1e12 FLOPs at the curve's value times the factor */
    double flops = 1e12, pk = b.hw.peak_flops[MP_DTYPE_BF16];
    double want = flops / (pk * rb * mp_curve_eval(&b.hw.gemm_efficiency, flops));
    assert_true(near(mp_gemm_time(&b.hw, pk, flops), want, 1e-12));
    mp_hw bare = b.hw;
    bare.matmul_achievable = 0.0;
    assert_true(mp_gemm_transfer(&bare) == 1.0);
    assert_true(near(mp_gemm_time(&bare, pk, flops), want * rb, 1e-12));

    /* the same large FP8 GEMM on GB200 and B200: the datasheets say 5 and 4.5
     * PFLOP/s (11% apart), the measured achievable rates 1822 and 1745
     * TFLOP/s (4.4% apart); with the transfer the two differ by the latter */
    double m = 16384, n = 28672, k = 4096;
    double ratio = mp_linear_gemm_time(&b, m, n, k) / mp_linear_gemm_time(&g, m, n, k);
    assert_true(ratio > 1.03 && ratio < 1.06);

    /* the fields are read from a profile and checked */
    mp_error err;
    mp_hw h = b.hw;
    assert_int_equal(mp_hw_set_field(&h, "matmul_achievable", "2 PFLOP/s", &err), MP_OK);
    assert_true(h.matmul_achievable == 2e15);
    assert_int_equal(mp_hw_set_field(&h, "curve_matmul_efficiency", "1.5", &err), MP_EINPUT);
}

/* Transformer Engine runs the input- and weight-gradient FP8 GEMMs of the
 * per-tensor recipes, and every GEMM of the blockwise one, with cuBLASLt's
 * split accumulator (FAST_ACCUM off); on Hopper that path measures 1402.6
 * of 1978.9 TFLOP/s (H100 SXM, tests/data/hw/mamf_ml_engineering.csv, FP8
 * row), against the BF16 794.5 of 989.4 the curve is transferred with: those
 * GEMMs take 1 / ((1402.6 / 1978.9) / (794.5 / 989.4)) = 1.133 times as
 * long as a fast-accumulating one of the same shape (docs/cost-model.md
 * §13). Blackwell's profiles carry no such measurement (its FP8 and BF16
 * ratios agree), nor does BF16 training use it. */
static void test_split_accumulator(void **state)
{
    (void)state;
    mp_config h = config("llama3-70b", "dgx-h100", 8, 4, MP_DTYPE_FP8);
    h.training.fp8_recipe = MP_FP8_TENSORWISE;
    double want = (1402.6 / 1978.9) / (794.5 / 989.4);
    assert_true(near(want, 0.88273, 1e-4));
    assert_true(near(mp_fp8_accumulate_factor(&h, MP_GEMM_DGRAD), want, 1e-12));
    assert_true(near(mp_fp8_accumulate_factor(&h, MP_GEMM_WGRAD), want, 1e-12));
    assert_true(mp_fp8_accumulate_factor(&h, MP_GEMM_FPROP) == 1.0);
    /* a large compute-bound GEMM: the gradient pass takes 1/want as long */
    double m = 8192, n = 7168, k = 8192;
    double fprop = mp_linear_gemm_time(&h, m, n, k);
    assert_true(near(mp_linear_gemm_pass_time(&h, MP_GEMM_DGRAD, m, n, k), fprop / want, 1e-12));
    assert_true(near(mp_linear_gemm_pass_time(&h, MP_GEMM_WGRAD, m, n, k), fprop / want, 1e-12));
    /* delayed scaling splits the same passes; blockwise splits all three */
    mp_config d = h;
    d.training.fp8_recipe = MP_FP8_DELAYED;
    assert_true(mp_fp8_accumulate_factor(&d, MP_GEMM_FPROP) == 1.0);
    assert_true(near(mp_fp8_accumulate_factor(&d, MP_GEMM_DGRAD), want, 1e-12));
    mp_config bw = h;
    bw.training.fp8_recipe = MP_FP8_BLOCKWISE;
    assert_true(near(mp_fp8_accumulate_factor(&bw, MP_GEMM_FPROP), want, 1e-12));
    /* BF16 training, Blackwell, and a profile without the measurement: 1 */
    mp_config b16 = h;
    b16.training.precision = MP_DTYPE_BF16;
    assert_true(mp_fp8_accumulate_factor(&b16, MP_GEMM_WGRAD) == 1.0);
    mp_config bl = config("llama3-70b", "b200", 8, 4, MP_DTYPE_FP8);
    assert_true(mp_fp8_accumulate_factor(&bl, MP_GEMM_WGRAD) == 1.0);
    mp_config bare = h;
    bare.hw.matmul_achievable_fp8_split = 0.0;
    assert_true(mp_fp8_accumulate_factor(&bare, MP_GEMM_DGRAD) == 1.0);

    /* a block: the forward is unchanged, the backward's GEMMs (all of it
     * that is GEMMs on this compute-bound 70B layer at t = 4) grow by 1/want */
    mp_block_shape bs;
    mp_block_shape_of(&h.model, 4096, 1, &bs);
    mp_block_time with, without;
    mp_block_time_of(&h, &bs, &with);
    mp_block_time_of(&bare, &bs, &without);
    assert_true(with.fwd_compute == without.fwd_compute);
    assert_true(near(with.wgrad, without.wgrad / want, 1e-9));
    assert_true(with.bwd_compute - without.bwd_compute > 0.9 * (1.0 / want - 1.0) * 2.0 *
                                                              without.wgrad);

    /* the field is read from a profile */
    mp_error err;
    mp_hw hw = h.hw;
    assert_int_equal(mp_hw_set_field(&hw, "matmul_achievable_fp8_split", "1 PFLOP/s", &err),
                     MP_OK);
    assert_true(hw.matmul_achievable_fp8_split == 1e15);
}

/* Cast bytes per element: read 2, write two FP8 copies (+ scales: blockwise
 * fp32 per 128, mxfp8 one byte per 32, each copy); current scaling reads
 * the tensor once more for its amax. Forward: the m x k input; backward:
 * the m x n output gradient. Hopper (dgx-h100) keeps a transposed copy of a
 * per-tensor scaled operand; Blackwell (b200, fp8_any_layout) does not:
 * 3 and 5 bytes for delayed and tensorwise there, and one FP8 copy of each
 * weight instead of two. */
static void test_cast_bytes(void **state)
{
    (void)state;
    const char *hw[2] = {"dgx-h100", "b200"};
    const double per[2][MP_FP8_RECIPE_COUNT] = {
        {4.0, 6.0, 4.0 + 2.0 * 4.0 / 128.0, 4.0 + 2.0 / 32.0},
        {3.0, 5.0, 4.0 + 2.0 * 4.0 / 128.0, 4.0 + 2.0 / 32.0}};
    const double copies[2][MP_FP8_RECIPE_COUNT] = {
        {2.0, 2.0, 2.0 * (1.0 + 4.0 / (128.0 * 128.0)), 2.0 * (1.0 + 1.0 / 32.0)},
        {1.0, 1.0, 2.0 * (1.0 + 4.0 / (128.0 * 128.0)), 2.0 * (1.0 + 1.0 / 32.0)}};
    for (int g = 0; g < 2; g++) {
        mp_config c = config("llama3-8b", hw[g], 8, 1, MP_DTYPE_FP8);
        for (int r = 0; r < MP_FP8_RECIPE_COUNT; r++) {
            if (r == MP_FP8_MXFP8 && !c.hw.mxfp8)
                continue;
            c.training.fp8_recipe = (mp_fp8_recipe)r;
            double f, b;
            mp_fp8_cast_bytes(&c, 1000, 2000, 3000, &f, &b);
            assert_true(near(f, per[g][r] * 1000 * 3000, 1e-12));
            assert_true(near(b, per[g][r] * 1000 * 2000, 1e-12));
            assert_true(near(mp_fp8_gathered_copy_bytes(&c), copies[g][r], 1e-12));
        }
    }
    mp_config c = config("llama3-8b", "b200", 8, 1, MP_DTYPE_FP8);
    c.training.precision = MP_DTYPE_BF16;
    double f = 1, b = 1;
    mp_fp8_cast_bytes(&c, 1000, 2000, 3000, &f, &b);
    assert_true(f == 0.0 && b == 0.0);
    assert_true(mp_fp8_weight_copy_bytes(&c) == 0.0);
}

/* One operand's cast (mp_fp8_operand_cast_bytes): a sequence-parallel
 * operand (a column-parallel layer's input, a row-parallel layer's output
 * gradient) is quantized on the rank's 1/t share before the FP8 all-gather
 * (read 2, write 1, current scaling's amax read 2 more) and transposed after
 * it on Hopper (read 1, write 1 on the gathered tensor); Blackwell makes no
 * transpose of a per-tensor scaled tensor; the block-scaled recipes keep the
 * whole-tensor count. Current scaling's amax read disappears where the
 * producer (Transformer Engine >= 2.7's norm) computed it. In a dense block
 * at t = 4 with SP, current scaling costs over delayed only the amax reads
 * of the operands not produced by the norm: the projection's and FC2's
 * inputs whole, the projection's and FC2's output gradients on the rank's
 * share, QKV's and FC1's output gradients whole. */
static void test_operand_cast(void **state)
{
    (void)state;
    const double e = 1.0e6;
    mp_config c = config("llama3-70b", "dgx-h100", 64, 4, MP_DTYPE_FP8);
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 1.0, false), 6.0 * e, 1e-12));
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 1.0, true), 4.0 * e, 1e-12));
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 4.0, false), 5.0 * e / 4.0 + 2.0 * e, 1e-12));
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 4.0, true), 3.0 * e / 4.0 + 2.0 * e, 1e-12));
    c.training.fp8_recipe = MP_FP8_DELAYED;
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 4.0, true), 3.0 * e / 4.0 + 2.0 * e, 1e-12));
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 1.0, false), 4.0 * e, 1e-12));
    c.training.fp8_recipe = MP_FP8_BLOCKWISE;
    assert_true(near(mp_fp8_operand_cast_bytes(&c, e, 4.0, false), (4.0 + 8.0 / 128.0) * e, 1e-12));
    mp_config b = config("llama3-70b", "b200", 64, 4, MP_DTYPE_FP8);
    b.training.fp8_recipe = MP_FP8_TENSORWISE;
    assert_true(near(mp_fp8_operand_cast_bytes(&b, e, 4.0, false), 5.0 * e / 4.0, 1e-12));

    /* the block: tensorwise minus delayed, t = 4 with SP */
    c.training.fp8_recipe = MP_FP8_DELAYED;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_block_time d, w;
    mp_block_time_of(&c, &bs, &d);
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    mp_block_time_of(&c, &bs, &w);
    const mp_model *m = &c.model;
    double T = 4096.0, t = 4.0, h = (double)m->hidden, f = (double)m->ffn_hidden;
    double hd = h / (double)m->heads, qd = (double)m->heads * hd;
    double qkv = qd + 2.0 * (double)m->kv_heads * hd;
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    double amax_f = 2.0 * T * (qd / t + f / t);
    double amax_b = 2.0 * T * (qkv / t + h / t + 2.0 * f / t + h / t);
    assert_true(near(w.fwd_compute - d.fwd_compute, amax_f / bw, 1e-6));
    assert_true(near(w.bwd_compute - d.bwd_compute, amax_b / bw, 1e-6));

    /* the forward's TP gathers in FP8 (1 byte), its reduce-scatters in BF16;
     * BF16 training gathers 2 bytes; the backward is the same in both */
    c.parallel.tp_overlap = false;
    mp_group_place tpg;
    mp_group_place_of(&c, MP_GROUP_TP, &tpg);
    mp_block_time_of(&c, &bs, &w);
    double ag1 = mp_coll_time(&c.hw, &tpg, MP_COLL_ALLGATHER, T * h);
    double ag2 = mp_coll_time(&c.hw, &tpg, MP_COLL_ALLGATHER, 2.0 * T * h);
    double rs2 = mp_coll_time(&c.hw, &tpg, MP_COLL_REDUCESCATTER, 2.0 * T * h);
    assert_true(near(w.tp_fwd, 2.0 * (ag1 + rs2), 1e-9));
    mp_config bf = c;
    bf.training.precision = MP_DTYPE_BF16;
    mp_block_time_of(&bf, &bs, &d);
    assert_true(near(d.tp_fwd, 2.0 * (ag2 + rs2), 1e-9));
    assert_true(near(w.tp_bwd, d.tp_bwd, 1e-9));
}

/* Memory: FP8 copies (and transposes) of every block weight, 2 bytes per
 * parameter with delayed scaling; the master weights, gradients and
 * optimizer unchanged; the GEMM inputs stashed in 1 byte instead of 2. */
static void test_memory(void **state)
{
    (void)state;
    mp_config b = config("llama3-8b", "dgx-h100", 8, 1, MP_DTYPE_BF16);
    b.training.global_batch = 8;
    mp_config f = b;
    f.training.precision = MP_DTYPE_FP8;
    mp_estimate eb, e8;
    mp_error err;
    assert_int_equal(mp_estimate_config(&b, NULL, &eb, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&f, NULL, &e8, &err), MP_OK);
    const mp_model *m = &b.model;
    mp_block_shape bs;
    mp_block_shape_of(m, 4096, 1, &bs);
    double block_params = mp_block_params(m, bs.kind);
    double copies = 2.0 * block_params * (double)m->layers;
    assert_true(near(e8.memory.fp8_weights, copies, 1e-12));
    assert_true(eb.memory.fp8_weights == 0.0);
    assert_true(near(e8.memory.weights - eb.memory.weights, copies, 1e-12));
    assert_true(e8.memory.grads == eb.memory.grads);
    assert_true(e8.memory.optimizer == eb.memory.optimizer);
    /* per block and micro-batch of 4096 tokens (tp 1): QKV and FC1 inputs
     * (h each) and FC2's (ffn) in FP8, 1 byte of 2 saved. The projection's
     * input (heads x head_dim = h) under delayed scaling with flash
     * attention: the fused attention's bf16 output (TE
     * dot_product_attention/backends.py FusedAttnFunc.forward saves out)
     * and the projection's own FP8 copy (module/linear.py
     * _linear_forward_impl, no save_original_input for delayed), 2 + 1
     * bytes where bf16 training keeps 2: one byte more, not one fewer */
    double sb = 4096.0, h = 4096.0, f_ffn = 14336.0;
    assert_true(f.hw.flash_attention);
    double saved = sb * (2.0 * h + f_ffn) - sb * h;
    assert_true(near(mp_fp8_proj_input_bytes(&f), 3.0, 1e-12));
    assert_true(near(mp_fp8_act_saving(&f, &bs), saved, 1e-12));
    /* an unfused core keeps no output: the FP8 copy alone */
    mp_config nf = f;
    nf.hw.flash_attention = false;
    assert_true(near(mp_fp8_act_saving(&nf, &bs), sb * (2.0 * h + h + f_ffn), 1e-12));
    /* blockwise (scales: 4 bytes per 128): QKV, FC1 and FC2 inputs as FP8
     * stashes; the projection keeps the attention's bf16 output and no FP8
     * copy (Megatron-Core attention.py / multi_latent_attention.py
     * __init__: set_save_original_input on linear_proj for every recipe but
     * delayed): 2 bytes, no saving there, with or without flash attention */
    f.training.fp8_recipe = MP_FP8_BLOCKWISE;
    assert_true(near(mp_fp8_proj_input_bytes(&f), 2.0, 1e-12));
    assert_true(near(mp_fp8_act_saving(&f, &bs),
                     sb * (2.0 * h + f_ffn) * (1.0 - 1.0 / 32.0), 1e-12));
    nf.training.fp8_recipe = MP_FP8_BLOCKWISE;
    assert_true(near(mp_fp8_proj_input_bytes(&nf), 2.0, 1e-12));
    assert_true(e8.memory.activations < eb.memory.activations);
    /* the MoE parts: the experts' FP8 copies counted with the expert weights */
    mp_config x = config("mixtral-8x7b", "dgx-h100", 64, 1, MP_DTYPE_FP8);
    x.parallel.ep = 8;
    x.training.global_batch = 64;
    assert_int_equal(mp_estimate_config(&x, NULL, &e8, &err), MP_OK);
    double local = 32.0 * 3 * 4096 * 14336; /* one expert per rank, 32 blocks */
    assert_true(near(e8.memory.expert_weights, 4.0 * local, 1e-12));
}

/* The recipes' storage switches: bf16 main gradients (2 bytes per parameter
 * instead of 4, and in the DP reduction) and FP8 parameters (the GEMM
 * weights' bf16 copy gone, their FP8 copies kept); each refused where the
 * precision cannot have it. */
static void test_storage_switches(void **state)
{
    (void)state;
    mp_config f = config("llama3-8b", "dgx-h100", 8, 1, MP_DTYPE_FP8);
    f.training.global_batch = 8;
    f.training.fp8_recipe = MP_FP8_TENSORWISE;
    mp_estimate e0, eg, ep;
    mp_error err;
    assert_int_equal(mp_estimate_config(&f, NULL, &e0, &err), MP_OK);
    mp_config g = f;
    g.training.grad_reduce_bf16 = true;
    assert_int_equal(mp_estimate_config(&g, NULL, &eg, &err), MP_OK);
    assert_true(near(eg.memory.grads, 0.5 * e0.memory.grads, 1e-12));
    assert_true(eg.memory.weights == e0.memory.weights);
    assert_true(mp_grad_reduce_bytes(&g) == 2.0 && mp_grad_reduce_bytes(&f) == 4.0);
    assert_true(eg.time.dp_comm <= e0.time.dp_comm);
    mp_config p = f;
    p.training.fp8_param_gather = true;
    assert_int_equal(mp_estimate_config(&p, NULL, &ep, &err), MP_OK);
    /* tensorwise keeps two 1-byte copies per GEMM weight: the 2-byte bf16
     * weight they replace is as large as both */
    double gemm_params = e0.memory.fp8_weights / mp_fp8_weight_copy_bytes(&f);
    assert_true(ep.memory.fp8_weights == e0.memory.fp8_weights);
    assert_true(near(e0.memory.weights - ep.memory.weights, 2.0 * gemm_params, 1e-12));
    assert_true(ep.memory.grads == e0.memory.grads);
    /* refusals: bf16 gradients under fp32, FP8 parameters without fp8 */
    mp_config b = config("llama3-8b", "dgx-h100", 8, 1, MP_DTYPE_BF16);
    b.training.fp8_param_gather = true;
    assert_int_equal(mp_config_check(&b, &err), MP_EINPUT);
    assert_string_equal(err.field, "fp8_param_gather");
    b.training.fp8_param_gather = false;
    b.training.precision = MP_DTYPE_FP32;
    b.training.grad_reduce_bf16 = true;
    assert_int_equal(mp_config_check(&b, &err), MP_EINPUT);
    assert_string_equal(err.field, "grad_reduce_bf16");
}

/* ZeRO-3 (Megatron FSDP): the FP8 compute weights are sharded like the
 * parameters (fp8_param_gather), so their bytes per GPU shrink with the
 * data-parallel degree; the two gathered blocks hold theirs whole (in the
 * ZeRO-3 working set under "other"). ZeRO-1 keeps them whole on every rank. */
static void test_zero3_copies_sharded(void **state)
{
    (void)state;
    mp_estimate e[2], z1;
    mp_error err;
    double copies = 0.0, block_params = 0.0;
    for (int i = 0; i < 2; i++) {
        int64_t gpus = i == 0 ? 8 : 32;
        mp_config c = config("llama3-8b", "dgx-h100", gpus, 1, MP_DTYPE_FP8);
        c.training.global_batch = gpus;
        c.parallel.zero = 3;
        assert_int_equal(mp_estimate_config(&c, NULL, &e[i], &err), MP_OK);
        mp_block_shape bs;
        mp_block_shape_of(&c.model, 4096, 1, &bs);
        block_params = mp_block_params(&c.model, bs.kind);
        copies = 2.0 * block_params * (double)c.model.layers;
        assert_true(near(e[i].memory.fp8_weights, copies / (double)gpus, 1e-12));
        if (i == 0) {
            c.parallel.zero = 1;
            assert_int_equal(mp_estimate_config(&c, NULL, &z1, &err), MP_OK);
            assert_true(near(z1.memory.fp8_weights, copies, 1e-12));
            /* the working set: the BF16 weights of two blocks and the
             * gradients of one (3 x 2 bytes), the FP8 copies of two (2 x 2) */
            c.parallel.zero = 3;
            mp_config b = c;
            b.training.precision = MP_DTYPE_BF16;
            mp_estimate eb;
            assert_int_equal(mp_estimate_config(&b, NULL, &eb, &err), MP_OK);
            double stash_diff = e[0].memory.activations - eb.memory.activations;
            double frag = c.hw.allocator_fragmentation * stash_diff;
            assert_true(near(e[0].memory.other - eb.memory.other - frag, 4.0 * block_params, 1e-9));
        }
    }
    assert_true(near(e[0].memory.fp8_weights / e[1].memory.fp8_weights, 4.0, 1e-12));
}

/* The step: faster than bf16 but not twice (attention, elementwise work and
 * communication stay), MFU against the BF16 peak; A100 refuses fp8. */
static void test_step(void **state)
{
    (void)state;
    mp_config b = config("llama3-70b", "dgx-h100", 64, 4, MP_DTYPE_BF16);
    b.parallel.pp = 4;
    b.parallel.dp = 4;
    b.training.global_batch = 128;
    mp_config f = b;
    f.training.precision = MP_DTYPE_FP8;
    mp_estimate eb, e8;
    mp_error err;
    assert_int_equal(mp_estimate_config(&b, NULL, &eb, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&f, NULL, &e8, &err), MP_OK);
    double speedup = eb.time.step / e8.time.step;
    assert_true(speedup > 1.15 && speedup < 1.9);
    assert_true(near(e8.throughput.mfu / eb.throughput.mfu, speedup, 1e-9));
    assert_true(e8.time.optimizer > eb.time.optimizer); /* the weights' casts */
    mp_config a = config("llama3-8b", "dgx-a100", 8, 1, MP_DTYPE_FP8);
    assert_int_equal(mp_estimate_config(&a, NULL, &e8, &err), MP_EINPUT);
    assert_string_equal(err.field, "precision");
}

/* moe.imbalance scales what the busiest expert rank computes and moves:
 * its grouped GEMMs' tokens and its dispatch/combine volume, nothing else. */
static void test_imbalance(void **state)
{
    (void)state;
    mp_config c = config("olmoe-1b-7b", "dgx-h100", 64, 1, MP_DTYPE_BF16);
    c.parallel.ep = 8;
    c.hw.scale_up.latency = c.hw.scale_out.latency = 0.0;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    assert_true(mp_moe_imbalance(&c.model) == 1.0); /* dropless default: balanced */
    mp_moe_time t1, t2;
    mp_moe_block_time(&c, &bs, &t1);
    c.model.moe.imbalance = 1.5;
    mp_moe_block_time(&c, &bs, &t2);
    assert_true(near(t2.comm_f, 1.5 * t1.comm_f, 1e-12));
    assert_true(near(t2.comm_b, 1.5 * t1.comm_b, 1e-12));
    /* the expert GEMMs: 8 local experts of n_e x 1.5 tokens (n_e = 4096 x
     * top-8 x ep 8 / 64 = 4096) through FC1 (2 x 1024 wide) and FC2; the
     * router's GEMM does not change */
    double pk = mp_high_peak(&c);
    double router = mp_gemm_mnk_time(&c.hw, pk, 2.0, 4096, 64, 2048);
    for (int i = 0; i < 2; i++) {
        double a = i ? 1.5 : 1.0, ne = 4096.0 * a;
        double experts = 8.0 * (mp_gemm_mnk_time(&c.hw, pk, 2.0, ne, 2048, 2048) +
                                mp_gemm_mnk_time(&c.hw, pk, 2.0, ne, 2048, 1024));
        assert_true(near((i ? t2 : t1).gemm_f, router + experts, 1e-12));
    }
    assert_true(t2.gemm_f > t1.gemm_f);
    /* the capacity factor caps it when given (dropped tokens) */
    c.model.moe.imbalance = 0.0;
    c.model.moe.capacity_factor = 1.25;
    assert_true(mp_moe_imbalance(&c.model) == 1.25);
}

/* Under FP8, Megatron-Core's TEGroupedMLP pads each local expert's rows to
 * the FP8 GEMM alignment with Transformer Engine's Fp8Padding and strips it
 * with Fp8Unpadding (moe/experts.py; TE pytorch/module/fp8_padding.py,
 * fp8_unpadding.py): one copy of the routed tokens in and one of the
 * experts' output out, 16-bit, read and written, and the same two copies of
 * the gradients backward. Qwen3-235B-A22B as the H100 rows run it (t 2 with
 * SP, ep 32, micro-batch 1, 4,096 tokens): each rank dispatches its 2,048
 * tokens' top-8 copies, 16,384 rows of 4,096, so 4 x 2 x 16,384 x 4,096 =
 * 536,870,912 bytes a pass. Nothing under BF16 (no Fp8Padding), nothing
 * with the flex dispatcher unless the plan names DeepEP (HybridEP aligns
 * the counts in its own permutation, DeepEP does not; auto only guesses the
 * backend and is not charged), and the all-gather dispatcher pads as the
 * all-to-all does. */
static void test_fp8_row_padding(void **state)
{
    (void)state;
    mp_config c = config("qwen3-235b-a22b", "dgx-h100", 256, 2, MP_DTYPE_FP8);
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    c.parallel.pp = 8;
    c.parallel.dp = 16;
    c.parallel.ep = 32;
    c.parallel.etp = 1; /* the recipes' (Megatron's default is tp) */
    c.parallel.micro_batch = 1;
    c.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_time t;
    mp_moe_block_time(&c, &bs, &t);
    const double pass = 536870912.0;
    assert_true(near(t.pad.bytes_f, pass, 1e-12));
    assert_true(near(t.pad.bytes_b, pass, 1e-12));
    double k_eager = mp_eager_op_launches(&c.hw, false);
    assert_true(k_eager > 0.0 && k_eager < 1.0); /* an eager call, not a layer's launch */
    assert_true(near(t.pad.kernels_f, 3.0 * k_eager, 1e-12));
    assert_true(near(t.pad.kernels_b, 3.0 * k_eager, 1e-12));
    c.parallel.dispatcher = MP_DISPATCH_ALLGATHER;
    mp_moe_block_time(&c, &bs, &t);
    assert_true(t.pad.bytes_f > 0.0);
    c.training.fp8_recipe = MP_FP8_MXFP8; /* the alignment differs, the copies do not */
    c.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    mp_moe_block_time(&c, &bs, &t);
    assert_true(near(t.pad.bytes_f, pass, 1e-12));
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    /* auto on this one-node NVLink domain is DeepEP (mp_flex_backend_of), as
     * for the SM share and the export: its counts arrive unaligned */
    mp_moe_block_time(&c, &bs, &t);
    assert_true(near(t.pad.bytes_f, pass, 1e-12));
    c.parallel.flex_backend = MP_FLEX_HYBRIDEP;
    mp_moe_block_time(&c, &bs, &t);
    assert_true(t.pad.bytes_f == 0.0 && t.pad.bytes_b == 0.0 && t.pad.kernels_f == 0.0);
    c.parallel.flex_backend = MP_FLEX_DEEPEP; /* the same routed rows, unaligned */
    mp_moe_block_time(&c, &bs, &t);
    assert_true(near(t.pad.bytes_f, pass, 1e-12));
    assert_true(near(t.pad.bytes_b, pass, 1e-12));
    assert_true(near(t.pad.kernels_b, 3.0 * k_eager, 1e-12));
    c.parallel.flex_backend = MP_FLEX_AUTO;
    c.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    c.training.precision = MP_DTYPE_BF16;
    mp_moe_block_time(&c, &bs, &t);
    assert_true(t.pad.bytes_f == 0.0 && t.pad.bytes_b == 0.0 && t.pad.kernels_b == 0.0);
}

/* MXFP8's GEMMs run at the profile's mxfp8_gemm_rate of a per-tensor FP8
 * GEMM's rate (b200, gb200-nvl72: 0.9513, Transformer Engine's measured
 * ratio, tests/data/hw/te_gemm_profiling.csv); the other recipes, BF16 and a
 * profile without the field are not touched. */
static void test_mxfp8_rate(void **state)
{
    (void)state;
    const double m = 16384, n = 14336, k = 4096;
    for (int g = 0; g < 2; g++) {
        mp_config c = config("llama3-8b", g ? "gb200-nvl72" : "b200", 8, 1, MP_DTYPE_FP8);
        assert_true(near(c.hw.mxfp8_gemm_rate, 0.9513, 1e-12));
        c.training.fp8_recipe = MP_FP8_TENSORWISE;
        double per_tensor = mp_linear_gemm_pass_time(&c, MP_GEMM_WGRAD, m, n, k);
        assert_true(mp_fp8_block_scale_factor(&c) == 1.0);
        c.training.fp8_recipe = MP_FP8_MXFP8;
        assert_true(near(mp_fp8_block_scale_factor(&c), 0.9513, 1e-12));
        for (int p = MP_GEMM_FPROP; p <= MP_GEMM_WGRAD; p++)
            assert_true(near(mp_linear_gemm_pass_time(&c, (mp_gemm_pass)p, m, n, k),
                             per_tensor / 0.9513, 1e-12));
        c.hw.mxfp8_gemm_rate = 0.0; /* absent: the per-tensor rate */
        assert_true(near(mp_linear_gemm_time(&c, m, n, k), per_tensor, 1e-12));
        c.training.precision = MP_DTYPE_BF16;
        c.hw.mxfp8_gemm_rate = 0.9513;
        assert_true(mp_fp8_block_scale_factor(&c) == 1.0);
    }
    mp_config h = config("llama3-8b", "dgx-h100", 8, 1, MP_DTYPE_FP8);
    assert_true(h.hw.mxfp8_gemm_rate == 0.0);
}

/* One dense layer's 12 GEMMs as Transformer Engine's GEMM profiling tutorial
 * measured them on a B300 (tests/data/hw/te_gemm_profiling.csv; B300 has
 * B200's dense peaks and HBM rate), against the b200 profile: per pass (fprop,
 * dgrad, wgrad), the GEMM kernels alone (operands quantized beforehand) in
 * BF16, per-tensor FP8 and MXFP8, and with autocast's quantization of both
 * operands of every GEMM from BF16 at the model's cast bytes per element
 * (mp_fp8_cast_bytes) over the HBM rate. Within 10% each; the totals within
 * 5% (model against measured: BF16 13.29 / 13.10 ms, FP8 6.93 / 6.81,
 * MXFP8 7.29 / 7.16; with the casts FP8 8.84 / 9.15, MXFP8 8.84 / 8.98). */
static const char *te_csv = "tests/data/hw/te_gemm_profiling.csv";

static double te_measured(const char *mode, const char *pass, int column)
{
    FILE *f = fopen(te_csv, "r");
    assert_non_null(f);
    char line[512];
    double v = -1.0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || strncmp(line, "NVIDIA B300", 11) != 0)
            continue;
        char *field[16];
        int nf = 0;
        for (char *p = line, *q; nf < 16; p = q + 1) {
            field[nf++] = p;
            if (!(q = strchr(p, ',')))
                break;
            *q = '\0';
        }
        if (nf > column && !strcmp(field[1], mode) && !strcmp(field[2], pass))
            v = atof(field[column]) * 1e-3;
    }
    fclose(f);
    assert_true(v > 0.0);
    return v;
}

static void test_te_gemm_profile(void **state)
{
    (void)state;
    enum { BF16 = 6, FP8_CURRENT = 7, MXFP8 = 9 }; /* the file's columns */
    const double mtok = 15872, kn[4][2] = {{4096, 12288}, {4096, 4096}, {4096, 16384},
                                           {16384, 4096}};
    const char *pass_name[3] = {"fprop", "dgrad", "wgrad"};
    const int column[3] = {BF16, FP8_CURRENT, MXFP8};
    for (int r = 0; r < 3; r++) {
        mp_config c = config("llama3-8b", "b200", 8, 1, r ? MP_DTYPE_FP8 : MP_DTYPE_BF16);
        c.training.fp8_recipe = r == 2 ? MP_FP8_MXFP8 : MP_FP8_TENSORWISE;
        double per_elem, ignored;
        mp_fp8_cast_bytes(&c, 1, 1, 1, &per_elem, &ignored);
        double rate = c.hw.hbm_bw * c.hw.memory_efficiency;
        double kern_total = 0, auto_total = 0;
        for (int p = 0; p < 3; p++) {
            double kern = 0, cast = 0;
            for (int g = 0; g < 4; g++) {
                double k = kn[g][0], n = kn[g][1];
                kern += mp_linear_gemm_pass_time(&c, (mp_gemm_pass)p, mtok, n, k);
                /* the operands each call quantizes: fprop X (M x K) and W
                 * (K x N), dgrad dY (M x N) and W, wgrad dY and X */
                double elems = p == 0 ? mtok * k + k * n : p == 1 ? mtok * n + k * n
                                                                  : mtok * n + mtok * k;
                cast += per_elem * elems / rate;
            }
            assert_true(near(kern, te_measured("prequantized", pass_name[p], column[r]), 0.10));
            assert_true(near(kern + cast, te_measured("autocast", pass_name[p], column[r]), 0.10));
            kern_total += kern;
            auto_total += kern + cast;
        }
        assert_true(near(kern_total, te_measured("prequantized", "total", column[r]), 0.05));
        assert_true(near(auto_total, te_measured("autocast", "total", column[r]), 0.05));
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        te_csv = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_rate), cmocka_unit_test(test_gemm_transfer),
        cmocka_unit_test(test_split_accumulator),
        cmocka_unit_test(test_cast_bytes), cmocka_unit_test(test_operand_cast),
        cmocka_unit_test(test_memory),    cmocka_unit_test(test_step),
        cmocka_unit_test(test_imbalance), cmocka_unit_test(test_storage_switches),
        cmocka_unit_test(test_zero3_copies_sharded),
        cmocka_unit_test(test_mxfp8_rate), cmocka_unit_test(test_te_gemm_profile),
        cmocka_unit_test(test_fp8_row_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
