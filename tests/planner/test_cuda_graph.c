/* test_cuda_graph.c — CUDA-graph scopes (Megatron --cuda-graph-scope): the
 * launches each graphed part saves a host-bound block, forward and backward,
 * counted by hand; every launch the cost model counts belongs to a part; the
 * scope names; Megatron-LM's rules for the scopes. */
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
#include "moe_fixture.h"

/* One second per counted launch: every block is host-bound, so a pass
 * takes (launches) seconds and the difference of two passes counts the
 * launches one of them saves. */
static mp_config host_bound(const char *model, int64_t ep)
{
    mp_config c = moe_config(model, 8, 1, ep, ep > 1 ? 1 : 0);
    c.hw.kernel_overhead = 1.0;
    return c;
}

/* forward and backward seconds of block `block` under scope mask s */
static void passes(mp_config *c, int64_t block, uint32_t s, double *f, double *b)
{
    mp_block_shape bs;
    mp_block_shape_of(&c->model, c->training.seq, block, &bs);
    c->parallel.cuda_graph_scope = s;
    mp_block_time t;
    mp_block_time_of(c, &bs, &t);
    *f = t.fwd_compute + t.tp_fwd;
    *b = t.bwd_compute + t.tp_bwd;
}

#define S(k) (1u << (k))

/* A dense LLaMA block, tp 1, bf16, fused attention: attention's part is the
 * input norm, QKV, RoPE, the attention core, the projection and the
 * residual add (6 launches -> 1 graph: 5 saved); the MLP's is the norm,
 * FC1, SwiGLU, FC2 and the residual add (5 -> 1: 4 saved): 11 eager. The
 * backward is a graph of its own (Transformer Engine captures each part's
 * backward): attention's 2 x 5 and RoPE's 2 backward kernels -> 1 (11
 * saved), the MLP's 10 -> 1 (9 saved); 22 eager. */
static void test_dense_scopes_by_hand(void **state)
{
    (void)state;
    mp_config c = host_bound("llama3-8b", 0);
    double f0, b0, f1, b1;
    passes(&c, 1, 0, &f0, &b0);
    assert_float_equal(f0, 11.0, 1e-6);
    assert_float_equal(b0, 22.0, 1e-6);
    passes(&c, 1, S(MP_CGS_ATTN), &f1, &b1);
    assert_float_equal(f0 - f1, 5.0, 1e-9);
    assert_float_equal(b0 - b1, 11.0, 1e-9);
    passes(&c, 1, S(MP_CGS_MLP), &f1, &b1);
    assert_float_equal(f0 - f1, 4.0, 1e-9);
    assert_float_equal(b0 - b1, 9.0, 1e-9);
    passes(&c, 1, S(MP_CGS_ATTN) | S(MP_CGS_MLP), &f1, &b1);
    assert_float_equal(f0 - f1, 9.0, 1e-9);
    assert_float_equal(b0 - b1, 20.0, 1e-9);
}

/* An MoE block without shared experts (OLMoE): moe_router graphs the
 * pre-MLP norm and the router's three launches (4 -> 1: 3 saved; backward
 * 8 -> 1: 7); moe_preprocess, captured with it, adds nothing (the model
 * charges the dispatcher's preprocessing no launch); moe graphs the whole
 * MLP: the norm, the residual add and the layer's 10 (router 3, permute and
 * unpermute, the all-to-all's sort by local expert and back, FC1,
 * activation, FC2): 12 -> 1, 11 saved (backward 24 -> 1). mlp graphs dense
 * layers only: nothing in an MoE block. The block has no dense MLP: 6 + 12
 * launches eager (the count once charged the absent MLP's FC1, activation
 * and FC2 too). */
static void test_moe_scopes_by_hand(void **state)
{
    (void)state;
    mp_config c = host_bound("olmoe-1b-7b", 8);
    double f0, b0, f1, b1;
    /* and Transformer Engine's per-expert launches (8 local experts, FC1 and
     * FC2 forward, their two gradients backward: moe.c), inside moe's graph */
    double ex_f = 8.0 * 2.0 * 33e-6, ex_b = 8.0 * 4.0 * 33e-6;
    /* and the all-to-all dispatcher's wait for its counts: one dispatch
     * less the permutation still queued (T x k x h elements, r2 w2: moe.c
     * dispatch_syncs); under moe_preprocess's graph the whole dispatch, under
     * moe's none */
    double T = (double)(c.parallel.micro_batch * c.training.seq);
    double perm = 4.0 * T * (double)c.model.moe.top_k * (double)c.model.hidden /
                  (c.hw.hbm_bw * c.hw.memory_efficiency);
    double sync = 1.0 - perm;
    passes(&c, 1, 0, &f0, &b0);
    assert_true(fabs(f0 - 18.0 - ex_f - sync) < 1e-9);
    passes(&c, 1, S(MP_CGS_MOE_ROUTER), &f1, &b1);
    assert_true(fabs(f0 - f1 - 3.0) < 1e-9);
    assert_true(fabs(b0 - b1 - 7.0) < 1e-9);
    passes(&c, 1, S(MP_CGS_MOE_ROUTER) | S(MP_CGS_MOE_PREPROCESS), &f1, &b1);
    assert_true(fabs(f0 - f1 - 3.0 + perm) < 1e-9);
    passes(&c, 1, S(MP_CGS_MOE), &f1, &b1);
    assert_true(fabs(f0 - f1 - 11.0 - ex_f - sync) < 1e-9);
    assert_true(fabs(b0 - b1 - 23.0 - ex_b) < 1e-9);
    passes(&c, 1, S(MP_CGS_MLP), &f1, &b1);
    assert_true(fabs(f0 - f1 - 0.0) < 1e-9);
}

/* Every launch the cost model counts for a block (no cross attention) is
 * in a part some scope captures: with attention's and the MLP's (or the
 * MoE layer's) parts graphed, each pass of a host-bound block is exactly
 * two graph launches, forward and backward, whatever the block (dense,
 * MoE with and without shared experts, overlapped or not, TP, FP8, YaRN
 * RoPE, expert biases). A kernel counted outside the parts (the drift of
 * a tally kept beside the count) leaves more. */
static void test_every_launch_in_a_part(void **state)
{
    (void)state;
    const struct {
        const char *model;
        int64_t ep, tp, block;
        bool fp8, overlap;
    } k[] = {
        {"llama3-8b", 0, 1, 1, false, false},   {"llama3-8b", 0, 2, 1, true, false},
        {"olmoe-1b-7b", 8, 1, 1, false, false}, {"olmoe-1b-7b", 8, 2, 1, true, false},
        {"deepseek-v3", 8, 1, 4, false, false}, {"deepseek-v3", 8, 1, 4, false, true},
        {"deepseek-v3", 8, 2, 1, false, false}, {"gpt-oss-20b", 8, 1, 1, false, false},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        mp_config c = moe_config(k[i].model, 8 * k[i].tp, k[i].tp, k[i].ep, k[i].ep ? 1 : 0);
        c.hw.kernel_overhead = 1.0;
        if (k[i].fp8) c.training.precision = MP_DTYPE_FP8;
        c.parallel.shared_expert_overlap = k[i].overlap;
        mp_block_shape bs;
        mp_block_shape_of(&c.model, c.training.seq, k[i].block, &bs);
        bool moe = bs.kind == MP_BLOCK_MOE;
        double f0, b0, f, b;
        passes(&c, k[i].block, 0, &f0, &b0);
        passes(&c, k[i].block, S(MP_CGS_ATTN) | S(moe ? MP_CGS_MOE : MP_CGS_MLP), &f, &b);
        if (fabs(f - 2.0) > 1e-6 || fabs(b - 2.0) > 1e-6)
            fail_msg("%s block %lld tp %lld: %g forward, %g backward launches left of %g, %g "
                     "under graphs (want 2 each)", k[i].model, (long long)k[i].block,
                     (long long)k[i].tp, f, b, f0, b0);
        assert_true(f0 > 8.0 && b0 > f0);
    }
}

/* Shared experts (DeepSeek-V3's MoE block 4): moe_router also graphs them
 * (FC1, SwiGLU, FC2: 7 -> 1, 6 saved) unless they overlap the dispatch. */
static void test_router_scope_shared_experts(void **state)
{
    (void)state;
    mp_config c = host_bound("deepseek-v3", 8);
    double f0, b0, f1, b1;
    passes(&c, 4, 0, &f0, &b0);
    passes(&c, 4, S(MP_CGS_MOE_ROUTER), &f1, &b1);
    assert_true(fabs(f0 - f1 - 6.0) < 1e-9);
    c.parallel.shared_expert_overlap = true;
    passes(&c, 4, 0, &f0, &b0);
    passes(&c, 4, S(MP_CGS_MOE_ROUTER), &f1, &b1);
    assert_true(fabs(f0 - f1 - 3.0) < 1e-9);
}

/* The parts' launches include the elementwise kernels counted apart from
 * the rest (their backward is not twice their forward), in both passes: attention's graph
 * takes GPT-OSS's 24 unfused YaRN RoPE kernels (against the one fused
 * kernel), the MoE layer's graph the experts' output-bias kernels (2 per
 * local expert, 32 experts over 8 ranks, and the one cat). Those are eager
 * ops, in counted launches at an eager op's host time each
 * (mp_eager_op_launches: 9.8 us forward, 4.0 backward), the fused kernel a
 * counted launch. */
static void test_scopes_take_the_odd_kernels(void **state)
{
    (void)state;
    mp_config c = host_bound("gpt-oss-20b", 8);
    assert_true(c.model.attn.rope_yarn && c.model.linear_bias);
    double f0, b0, f1, b1, yarn, fused, yarn_b, fused_b;
    passes(&c, 1, 0, &f0, &b0);
    passes(&c, 1, S(MP_CGS_ATTN), &f1, &b1);
    yarn = f0 - f1;
    yarn_b = b0 - b1;
    c.model.attn.rope_yarn = false;
    passes(&c, 1, 0, &f0, &b0);
    passes(&c, 1, S(MP_CGS_ATTN), &f1, &b1);
    fused = f0 - f1;
    fused_b = b0 - b1;
    double uf = mp_eager_op_launches(&c.hw, false), ub = mp_eager_op_launches(&c.hw, true);
    assert_true(uf > 0.0 && ub > 0.0);
    /* (cmocka's assert_float_equal compares floats: too coarse here) */
    if (fabs(yarn - fused - (24.0 * uf - 1.0)) > 1e-9)
        fail_msg("attn graph saves %.12g more with YaRN, by hand %.12g", yarn - fused,
                 24.0 * uf - 1.0);
    /* the backward graph takes RoPE's backward kernels as rope_cost counts
     * them: YaRN's 14 against the fused kernel's 2, not twice the forward's */
    if (fabs(yarn_b - fused_b - (14.0 * ub - 2.0)) > 1e-9)
        fail_msg("backward: %.12g, by hand %.12g", yarn_b - fused_b, 14.0 * ub - 2.0);
    double with_bias, without, with_bias_b, without_b;
    passes(&c, 1, 0, &f0, &b0);
    passes(&c, 1, S(MP_CGS_MOE), &f1, &b1);
    with_bias = f0 - f1;
    with_bias_b = b0 - b1;
    c.model.linear_bias = false;
    passes(&c, 1, 0, &f0, &b0);
    passes(&c, 1, S(MP_CGS_MOE), &f1, &b1);
    without = f0 - f1;
    without_b = b0 - b1;
    if (fabs(with_bias - without - (2.0 * 4.0 + 1.0) * uf) > 1e-9)
        fail_msg("moe graph saves %.12g more with the bias, by hand %.12g", with_bias - without,
                 (2.0 * 4.0 + 1.0) * uf);
    /* backward: the bias's 4 per local expert and 2 (moe.c) */
    if (fabs(with_bias_b - without_b - (4.0 * 4.0 + 2.0) * ub) > 1e-9)
        fail_msg("backward: %.12g, by hand %.12g", with_bias_b - without_b,
                 (4.0 * 4.0 + 2.0) * ub);
}

/* A GPU-bound block is not changed by graphs: they save host time only. */
static void test_gpu_bound_unchanged(void **state)
{
    (void)state;
    mp_config c = host_bound("llama3-8b", 0);
    c.hw.kernel_overhead = 0.0;
    double f0, b0, f1, b1;
    passes(&c, 1, 0, &f0, &b0);
    passes(&c, 1, S(MP_CGS_ATTN) | S(MP_CGS_MLP), &f1, &b1);
    assert_float_equal(f0, f1, 0.0);
    assert_float_equal(b0, b1, 0.0);
}

static void test_scope_names(void **state)
{
    (void)state;
    uint32_t mask;
    char bad[72];
    assert_true(mp_cuda_graph_scope_parse("attn,moe_router,moe_preprocess", &mask, bad,
                                          sizeof bad));
    assert_int_equal(mask, S(MP_CGS_ATTN) | S(MP_CGS_MOE_ROUTER) | S(MP_CGS_MOE_PREPROCESS));
    assert_false(mp_cuda_graph_scope_parse("attn,full_iteration", &mask, bad, sizeof bad));
    assert_string_equal(bad, "full_iteration");
    assert_false(mp_cuda_graph_scope_parse("", &mask, bad, sizeof bad));
    for (int k = 0; k < MP_CGS_COUNT; k++) {
        assert_true(mp_cuda_graph_scope_parse(mp_cuda_graph_scope_name((mp_cuda_graph_scope)k),
                                              &mask, bad, sizeof bad));
        assert_int_equal(mask, S(k));
    }
}

/* Megatron-LM's checks (arguments.py validate_args). */
static void test_scope_rules(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = moe_config("olmoe-1b-7b", 8, 1, 8, 1);
    c.parallel.cuda_graph_scope = S(MP_CGS_ATTN) | S(MP_CGS_MOE_ROUTER) | S(MP_CGS_MOE_PREPROCESS);
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.cuda_graph_scope = S(MP_CGS_MOE_PREPROCESS); /* without the router */
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "cuda_graph_scope");
    c.parallel.cuda_graph_scope = S(MP_CGS_MOE) | S(MP_CGS_MOE_ROUTER);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    /* the whole MoE layer: alltoall with drop-and-pad only */
    c.parallel.cuda_graph_scope = S(MP_CGS_MOE);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    c.model.moe.capacity_factor = 1.0;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    /* moe_preprocess: not when the alltoall preprocess syncs (capacity) */
    c.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    c.parallel.cuda_graph_scope = S(MP_CGS_MOE_ROUTER) | S(MP_CGS_MOE_PREPROCESS);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    /* mlp: OLMoE has no dense layer */
    c.model.moe.capacity_factor = 0.0;
    c.parallel.cuda_graph_scope = S(MP_CGS_MLP);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "cuda_graph_scope");
    /* DeepSeek-V3 has three dense layers */
    c = moe_config("deepseek-v3", 256, 1, 64, 1);
    c.parallel.cuda_graph_scope = S(MP_CGS_MLP);
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    /* a dense model: no MoE scope */
    c = moe_config("olmoe-1b-7b", 8, 1, 1, 1);
    c.model = *mp_model_preset("llama3-8b");
    c.parallel.ep = 0;
    c.parallel.etp = 0;
    c.parallel.cuda_graph_scope = S(MP_CGS_MOE_ROUTER);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    c.parallel.cuda_graph_scope = S(MP_CGS_ATTN) | S(MP_CGS_MLP);
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_scopes_by_hand),
        cmocka_unit_test(test_moe_scopes_by_hand),
        cmocka_unit_test(test_every_launch_in_a_part),
        cmocka_unit_test(test_router_scope_shared_experts),
        cmocka_unit_test(test_scopes_take_the_odd_kernels),
        cmocka_unit_test(test_gpu_bound_unchanged),
        cmocka_unit_test(test_scope_names),
        cmocka_unit_test(test_scope_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
