/* test_dispatch_sync.c — the token dispatcher's host synchronisations
 * (planner/moe_dispatch.c mp_moe_dispatch_syncs, planner/moe.c
 * dispatch_syncs): how many a MoE layer's forward makes per dispatcher, as
 * Megatron-Core's token_dispatcher.py and fused_a2a.py make them (cba6b0ed,
 * the 25.11 container's, to d0b3b775, 26.06's: the lines are cited in
 * moe_dispatch.c), what each costs the forward (one host dispatch, the
 * profile's kernel_overhead, less the GPU work still queued), and that the
 * block's forward and the MoE layer's recompute pay it. OLMoE (64 experts,
 * top 8, hidden 2048) on 8 H100 at ep 8. */
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
#include "moe_fixture.h"

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * fmax(fabs(want), 1e-9))
        fail_msg("%s: %.9g, by hand %.9g", what, got, want);
}

static mp_config olmoe(mp_dispatcher d, mp_flex_backend b, int64_t micro_batch)
{
    mp_config c = moe_config("olmoe-1b-7b", 8, 1, 8, 1);
    c.parallel.dispatcher = d;
    c.parallel.flex_backend = b;
    c.parallel.micro_batch = micro_batch;
    c.training.global_batch = 8 * micro_batch * 2;
    return c;
}

/* Per dispatcher, dropless with the fused permutation (the rows'
 * settings): all-to-all one wait on the counts' copy (d2h_event.synchronize,
 * token_dispatcher.py cba6b0ed line 907); all-gather two (.cpu() line 302,
 * masked_select line 311); flex one, DeepEP's spin on the received counts
 * (fused_a2a.py lines 103-104) or HybridEP's copy of the sizes (lines
 * 357-361, 482-489). A CUDA graph of the whole MoE layer has none; the
 * partial scopes (router, preprocess) leave the dispatch to the host. */
static void test_counts_per_dispatcher(void **state)
{
    (void)state;
    mp_config c = olmoe(MP_DISPATCH_ALLTOALL, MP_FLEX_AUTO, 1);
    near(mp_moe_dispatch_syncs(&c), 1.0, "all-to-all");
    c = olmoe(MP_DISPATCH_ALLGATHER, MP_FLEX_AUTO, 1);
    near(mp_moe_dispatch_syncs(&c), 2.0, "all-gather");
    c = olmoe(MP_DISPATCH_FLEX, MP_FLEX_DEEPEP, 1);
    near(mp_moe_dispatch_syncs(&c), 1.0, "flex, DeepEP");
    c = olmoe(MP_DISPATCH_FLEX, MP_FLEX_HYBRIDEP, 1);
    near(mp_moe_dispatch_syncs(&c), 1.0, "flex, HybridEP");
    c.parallel.cuda_graph_scope = (1u << MP_CGS_MOE_ROUTER) | (1u << MP_CGS_MOE_PREPROCESS);
    near(mp_moe_dispatch_syncs(&c), 1.0, "flex under the router's and preprocess's graphs");
    c.parallel.cuda_graph_scope = 1u << MP_CGS_MOE;
    near(mp_moe_dispatch_syncs(&c), 0.0, "a captured MoE layer");
    /* a dense model has no dispatcher */
    mp_config d = preset_config("gpt3-1.3b", "dgx-h100", 8, 16, MP_DTYPE_BF16);
    near(mp_moe_dispatch_syncs(&d), 0.0, "dense");
}

/* What a forward pays: a drained stream waits one host dispatch a sync
 * (flex: ko; all-gather: 2 ko). The all-to-all's host waits for a copy
 * issued before Permutation 1, which is still queued: 4 bytes (16-bit, read
 * and written) per sent element, T x k x h = 4096 x 8 x 2048 at b = 1, 268
 * MB, longer than one dispatch on an H100, so nothing; at 256 tokens 16.8
 * MB, and the dispatch less its time shows; under a moe_preprocess graph
 * the copy is made at the wait, all of it. */
static void test_time_per_sync(void **state)
{
    (void)state;
    mp_block_shape bs;
    mp_moe_time mt;
    mp_config c = olmoe(MP_DISPATCH_FLEX, MP_FLEX_HYBRIDEP, 1);
    double ko = c.hw.kernel_overhead;
    assert_true(ko > 0.0);
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_block_time(&c, &bs, &mt);
    near(mt.dispatch_syncs, 1.0, "flex count");
    near(mt.dispatch_sync_s, ko, "flex: one dispatch");
    c = olmoe(MP_DISPATCH_ALLGATHER, MP_FLEX_AUTO, 1);
    mp_moe_block_time(&c, &bs, &mt);
    near(mt.dispatch_sync_s, 2.0 * ko, "all-gather: two dispatches");

    c = olmoe(MP_DISPATCH_ALLTOALL, MP_FLEX_AUTO, 1);
    double bw = c.hw.hbm_bw * c.hw.memory_efficiency;
    mp_moe_block_time(&c, &bs, &mt);
    assert_true(4.0 * 4096 * 8 * 2048 / bw > ko);
    near(mt.dispatch_syncs, 1.0, "all-to-all count");
    near(mt.dispatch_sync_s, 0.0, "all-to-all, 4096 tokens: the permutation covers it");
    mp_block_shape small;
    mp_block_shape_of(&c.model, 256, 1, &small);
    mp_moe_block_time(&c, &small, &mt);
    double perm = 4.0 * 256 * 8 * 2048 / bw;
    assert_true(perm < ko);
    near(mt.dispatch_sync_s, ko - perm, "all-to-all, 256 tokens");
    c.parallel.cuda_graph_scope = (1u << MP_CGS_MOE_ROUTER) | (1u << MP_CGS_MOE_PREPROCESS);
    mp_moe_block_time(&c, &bs, &mt);
    near(mt.dispatch_sync_s, ko, "all-to-all, preprocess captured: copied at the wait");
    c.parallel.cuda_graph_scope = 1u << MP_CGS_MOE;
    mp_moe_block_time(&c, &bs, &mt);
    near(mt.dispatch_sync_s, 0.0, "a captured MoE layer");
}

/* The block's forward pays it, its backward not, and the MoE layer's
 * recompute pays it again: on a GPU-bound block (b = 8, flex) the forward
 * grows by exactly one host dispatch when the dispatch's cost does, and
 * the backward not at all. */
static void test_block_pays(void **state)
{
    (void)state;
    mp_config c = olmoe(MP_DISPATCH_FLEX, MP_FLEX_HYBRIDEP, 8);
    c.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    c.parallel.recompute_modules = 1u << MP_RCM_MOE;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_block_time one, two;
    mp_block_time_of(&c, &bs, &one);
    double ko = c.hw.kernel_overhead;
    mp_config c2 = c;
    c2.hw.kernel_overhead = 2.0 * ko;
    mp_block_time_of(&c2, &bs, &two);
    near(two.fwd_compute - one.fwd_compute, ko, "forward: one more dispatch");
    near(two.bwd_compute - one.bwd_compute, 0.0, "backward: none");
    near(two.module_fwd[MP_RCM_MOE] - one.module_fwd[MP_RCM_MOE], ko, "the MoE layer's recompute");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_per_dispatcher),
        cmocka_unit_test(test_time_per_sync),
        cmocka_unit_test(test_block_pays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
