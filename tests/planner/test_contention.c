/* test_contention.c — SM contention (docs/cost-model.md, "SM contention"):
 * a communication kernel that overlaps compute holds its share of the SMs,
 * so the overlapped phase lasts max(comm, compute + comm x share). Each
 * place the cost model hides communication under compute is checked by hand
 * against the same place with the profile's sm_count removed (no
 * contention): TP comm overlap (both passes, BF16 and FP8), Megatron's
 * asynchronous TP backward collectives, CP's ring, the DP gradient
 * reduce-scatter and parameter all-gather, ZeRO-3's per-block gathers. */
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

static mp_config config(const char *model, int64_t gpus, int64_t tp, int64_t cp)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    /* GEMMs at FLOPs alone: removing sm_count below must change only the
     * contention, not the GEMMs' wave quantisation (test_gemm_shape.c) */
    c.hw.gemm_tile_m = c.hw.gemm_tile_n = 0;
    c.training = (mp_training){.gpus = gpus, .seq = 4096, .global_batch = 4 * gpus / tp / cp,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = tp, .pp = 1, .vpp = 1, .cp = cp, .dp = gpus / tp / cp,
                               .micro_batch = 1, .sp = tp > 1, .dist_opt = true,
                               .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    return c;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * (fabs(a) + fabs(b)) + 1e-18;
}

static mp_block_time block(const mp_config *c)
{
    mp_block_shape bs;
    mp_block_shape_of(&c->model, c->training.seq, 1, &bs);
    mp_block_time t;
    mp_block_time_of(c, &bs, &t);
    return t;
}

/* c's block time with the profile's SM counts (contended) and without them */
static void blocks(const mp_config *c, mp_block_time *hidden, mp_block_time *contended)
{
    mp_config f = *c;
    f.hw.sm_count = f.hw.nccl_ctas = 0;
    *hidden = block(&f);
    *contended = block(c);
}

/* the same for the stage costs */
static void pipes(const mp_config *c, mp_pipeline_cost *hidden, mp_pipeline_cost *contended)
{
    mp_config f = *c;
    f.hw.sm_count = f.hw.nccl_ctas = 0;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(&f, NULL, hidden, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(c, NULL, contended, &err), MP_OK);
}

/* The profile's counts, and the shares they give: dgx-h100 132 SMs, NCCL 16
 * CTAs; Transformer Engine's userbuffers overlap 8.5 (forward) and 11
 * (backward) SMs in BF16, 1 and 6 in FP8; the flex dispatcher's DeepEP 20,
 * HybridEP 16 where one NVLink domain spans nodes. No sm_count: none. */
static void test_shares(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 64, 8, 1);
    assert_true(c.hw.sm_count == 132 && c.hw.nccl_ctas == 16);
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_NCCL), 16.0 / 132));
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_TP_UB_FWD), 8.5 / 132));
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_TP_UB_BWD), 11.0 / 132));
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_EP), 16.0 / 132)); /* all-to-all: NCCL */
    /* the flex kernels' SMs: the backend's default (DeepEP 20, HybridEP 16),
     * the backend the plan names or else the guess (HybridEP on an NVLink
     * domain spanning nodes), and the plan's SMs above both (Megatron-Bridge's
     * 32 for HybridEP, also on one-node domains: its H100 and B200 runs) */
    static const struct {
        int64_t domain;
        mp_flex_backend backend;
        int64_t sms;
        double want;
    } flex[] = {
        {8, MP_FLEX_AUTO, 0, 20.0},      {72, MP_FLEX_AUTO, 0, 16.0},
        {72, MP_FLEX_AUTO, 32, 32.0},    {72, MP_FLEX_DEEPEP, 0, 20.0},
        {8, MP_FLEX_DEEPEP, 0, 20.0},    {8, MP_FLEX_HYBRIDEP, 0, 16.0},
        {8, MP_FLEX_HYBRIDEP, 32, 32.0},
    };
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    for (size_t i = 0; i < sizeof flex / sizeof flex[0]; i++) {
        c.hw.scale_up.gpus_per_domain = flex[i].domain;
        c.parallel.flex_backend = flex[i].backend;
        c.parallel.flex_sms = flex[i].sms;
        assert_true(near(mp_comm_sm_share(&c, MP_COMM_EP), flex[i].want / 132));
    }
    c.parallel.flex_backend = MP_FLEX_AUTO;
    c.parallel.flex_sms = 0;
    c.training.precision = MP_DTYPE_FP8;
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_TP_UB_FWD), 1.0 / 132));
    assert_true(near(mp_comm_sm_share(&c, MP_COMM_TP_UB_BWD), 6.0 / 132));
    c.hw.sm_count = 0;
    c.hw.nccl_ctas = 0;
    for (int k = MP_COMM_NCCL; k <= MP_COMM_TP_UB_BWD; k++)
        assert_true(mp_comm_sm_share(&c, (mp_comm_kernel)k) == 0.0);
    /* the phase law itself: covered, the share of the comm; uncovered, the excess */
    assert_true(near(mp_overlap_excess(1.0, 10.0, 0.25), 0.25));
    assert_true(near(mp_overlap_excess(10.0, 1.0, 0.25), 9.0));
    assert_true(mp_overlap_excess(0.0, 1.0, 0.25) == 0.0);
}

/* NCCL's all-to-all (grouped send/recv, NCCL 2.29.2's p2p schedule;
 * contention.c): inside one NVLink domain every peer starts on its own
 * channel, so all p2p channels (nccl_ctas) hold a CTA; across domains the
 * rounds go in groups of 8 that share a base channel, each peer on
 * p2pnChannelsPerPeer = pow2(max(NICs per GPU, ceil(50 GB/s / 14))) = 4
 * channels, halved while 4 x ceil(ep/8) > the p2p channels. By hand:
 * dgx-h100, ep 16 over two nodes: 2 groups x 4 = 8 CTAs (the overlap's
 * share 8/132, where 16/132 was charged before); ep 8 in one node: 16;
 * ep 32 over 4 nodes: 4 x 4 = 16; ep 64 over 8 nodes: 4 x 8 = 32 > 16, so
 * 2 per peer, 8 x 2 = 16. b200 (32 p2p channels): ep 16 over two nodes 8,
 * ep 64 over 8: 8 x 4 = 32; gb200-nvl72's ep 16 inside its 72-GPU domain:
 * 32. */
static void test_nccl_alltoall_ctas(void **state)
{
    (void)state;
    struct {
        const char *hw;
        int64_t ep;
        double ctas;
    } rows[] = {{"dgx-h100", 16, 8}, {"dgx-h100", 8, 16}, {"dgx-h100", 32, 16},
                {"dgx-h100", 64, 16}, {"b200", 16, 8},     {"b200", 64, 32},
                {"gb200-nvl72", 16, 32}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mp_config c = config("qwen3-235b-a22b", rows[i].ep < 16 ? 16 : rows[i].ep, 1, 1);
        mp_error err;
        assert_int_equal(mp_hw_preset(rows[i].hw, &c.hw, &err), MP_OK);
        c.parallel.ep = rows[i].ep;
        c.parallel.etp = 1;
        mp_group_place g;
        mp_group_place_of(&c, MP_GROUP_EP, &g);
        assert_true(mp_nccl_alltoall_ctas(&c.hw, &g) == rows[i].ctas);
        assert_true(near(mp_comm_sm_share(&c, MP_COMM_EP), rows[i].ctas / c.hw.sm_count));
        /* the all-gather dispatcher is an NCCL collective: all channels */
        c.parallel.dispatcher = MP_DISPATCH_ALLGATHER;
        assert_true(near(mp_comm_sm_share(&c, MP_COMM_EP), c.hw.nccl_ctas / c.hw.sm_count));
    }
    /* two NICs per GPU at the same 50 GB/s each: 2 x 50 / 14 -> 8 a peer,
     * ep 16 over two nodes: 2 x 8 = 16 */
    mp_config c = config("qwen3-235b-a22b", 16, 1, 1);
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.parallel.ep = 16;
    c.parallel.etp = 1;
    c.hw.scale_out.nics_per_node = 16;
    c.hw.scale_out.bw_per_gpu = 100e9;
    mp_group_place g;
    mp_group_place_of(&c, MP_GROUP_EP, &g);
    assert_true(mp_nccl_alltoall_ctas(&c.hw, &g) == 16.0);
    c.hw.nccl_ctas = 0; /* no count: no contention */
    assert_true(mp_nccl_alltoall_ctas(&c.hw, &g) == 0.0);
}

/* Blackwell (b200, gb200-nvl72): 148 SMs (two dies of 74 enabled SMs) and
 * NCCL's 32 channels on NVLink 5 (DGX B200 init log, NVIDIA/nccl issue
 * 1646). Before these counts the profiles had none, and every overlapped
 * collective on them hid for free: the FP8 TP overlap of a LLaMA 3 405B
 * block (t 4) now exposes one chunk plus comm x 6/148 in the backward, and
 * Megatron's DP reduce-scatter under the backward 32/148 of itself. */
static void test_blackwell(void **state)
{
    (void)state;
    const char *profiles[] = {"b200", "gb200-nvl72"};
    for (int i = 0; i < 2; i++) {
        mp_config c = config("llama3-405b", 64, 4, 1);
        mp_error err;
        assert_int_equal(mp_hw_preset(profiles[i], &c.hw, &err), MP_OK);
        assert_true(c.hw.sm_count == 148 && c.hw.nccl_ctas == 32);
        assert_true(near(mp_comm_sm_share(&c, MP_COMM_NCCL), 32.0 / 148));
        c.training.seq = 8192;
        c.training.precision = MP_DTYPE_FP8;
        c.training.fp8_recipe = MP_FP8_TENSORWISE;
        c.parallel.tp_overlap = true;
        mp_block_time hidden, contended;
        blocks(&c, &hidden, &contended);
        double comm_b = hidden.tp_bwd * 4.0; /* one chunk of 4 */
        assert_true(near(contended.tp_fwd, hidden.tp_fwd + hidden.tp_fwd * 4.0 / 148.0));
        assert_true(near(contended.tp_bwd, comm_b / 4.0 + comm_b * 6.0 / 148.0));
        assert_true(contended.tp_bwd > hidden.tp_bwd);
    }
}

/* --tp-comm-overlap, GEMMs that cover the communication (Llama 3 405B, t 8
 * inside one node, 8192 tokens): without contention a pass exposes one chunk, comm/t; with it,
 * comm/t + comm x share, share the userbuffers kernels' SMs over 132. */
static void test_tp_overlap(void **state)
{
    (void)state;
    const mp_dtype precisions[] = {MP_DTYPE_BF16, MP_DTYPE_FP8};
    const double fwd_sms[] = {8.5, 1.0}, bwd_sms[] = {11.0, 6.0};
    for (int i = 0; i < 2; i++) {
        mp_config c = config("llama3-405b", 64, 8, 1);
        c.training.seq = 8192;
        c.training.precision = precisions[i];
        mp_block_time plain = block(&c); /* no overlap: the whole collective */
        c.parallel.tp_overlap = true;
        mp_block_time hidden, contended;
        blocks(&c, &hidden, &contended);
        double comm_f = plain.tp_fwd, comm_b = hidden.tp_bwd * 8.0; /* one chunk of 8 */
        assert_true(near(hidden.tp_fwd, comm_f / 8.0));
        assert_true(near(contended.tp_fwd, comm_f / 8.0 + comm_f * fwd_sms[i] / 132.0));
        assert_true(near(contended.tp_bwd, comm_b / 8.0 + comm_b * bwd_sms[i] / 132.0));
        /* the step is longer by exactly that, per block and micro-batch */
        assert_true(contended.tp_fwd > hidden.tp_fwd);
    }
}

/* Without --tp-comm-overlap, Megatron's asynchronous backward collectives
 * (with SP: the all-gather under the input-gradient GEMM, the
 * reduce-scatter under the weight-gradient GEMM) run as NCCL kernels: where
 * the GEMMs cover them, each exposes 16/132 of itself. */
static void test_tp_async_backward(void **state)
{
    (void)state;
    mp_config c = config("llama3-405b", 64, 8, 1);
    c.training.seq = 8192;
    mp_block_time hidden, contended;
    blocks(&c, &hidden, &contended);
    assert_true(hidden.tp_bwd == 0.0); /* the GEMMs cover them all */
    /* the backward's collectives: QKV's and FC1's all-gather and
     * reduce-scatter of T h (T = 8192 tokens, h 16384, bf16) over t 8 */
    mp_group_place tpg;
    mp_group_place_of(&c, MP_GROUP_TP, &tpg);
    double bytes = 8192.0 * 16384 * 2;
    double ag = mp_coll_time(&c.hw, &tpg, MP_COLL_ALLGATHER, bytes);
    double rs = mp_coll_time(&c.hw, &tpg, MP_COLL_REDUCESCATTER, bytes);
    assert_true(near(contended.tp_bwd, 2.0 * (ag + rs) * 16.0 / 132.0));
}

/* Context parallelism's ring: each of the c - 1 K/V steps under the
 * attention of the chunk already there exposes 16/132 of itself. */
static void test_cp_ring(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 64, 1, 4);
    c.training.seq = 32768;
    mp_block_time hidden, contended;
    blocks(&c, &hidden, &contended);
    assert_true(hidden.cp_fwd == 0.0 && hidden.cp_bwd == 0.0);
    mp_group_place cpg;
    mp_group_place_of(&c, MP_GROUP_CP, &cpg);
    cpg.n = 2;
    /* one step: this rank's K and V, 2 (s/c) kv_dim elements, twice in
     * the backward (with dK, dV) */
    double kvd = (double)c.model.kv_heads * (double)(c.model.hidden / c.model.heads);
    double kv = 2.0 * (32768.0 / 4) * kvd * 2.0;
    double step_f = mp_coll_time(&c.hw, &cpg, MP_COLL_ALLGATHER, 2.0 * kv);
    double step_b = mp_coll_time(&c.hw, &cpg, MP_COLL_ALLGATHER, 4.0 * kv);
    assert_true(near(contended.cp_fwd, 3.0 * step_f * 16.0 / 132.0));
    assert_true(near(contended.cp_bwd, 3.0 * step_b * 16.0 / 132.0));
}

/* The distributed optimizer's overlapped reduce-scatter and all-gather: the
 * last bucket is exposed either way (frac of the traffic); of the rest,
 * which the backward and forward cover, 16/132 more. */
static void test_dp_overlap(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 64, 1, 1);
    mp_pipeline_cost a, b;
    pipes(&c, &a, &b);
    assert_true(near(a.dp_time, b.dp_time));
    double exposed0 = a.dp_exposed; /* frac x dp_time */
    assert_true(exposed0 < a.dp_time);
    assert_true(near(b.dp_exposed, exposed0 + (a.dp_time - exposed0) * 16.0 / 132.0));
    mp_pipeline_cost_free(&a);
    mp_pipeline_cost_free(&b);
}

/* ZeRO-3: each micro-batch's per-block gathers and reduce-scatters: one
 * block's share exposed, of the rest 16/132 more where the compute covers it. */
static void test_zero3(void **state)
{
    (void)state;
    mp_config c = config("llama3-8b", 8, 1, 1);
    c.parallel.zero = 3;
    mp_pipeline_cost a, b;
    pipes(&c, &a, &b);
    /* the forward's gathers: P bytes over d, one block's share exposed */
    mp_group_place dpg;
    mp_group_place_of(&c, MP_GROUP_DP_SHARD, &dpg);
    double fwd0 = a.stages[0].fwd, fwd1 = b.stages[0].fwd;
    double dp_f0 = fwd1 - fwd0; /* the contention alone */
    assert_true(dp_f0 > 0.0);
    /* by hand: with the gather ag, blocks L (+ embedding and head items'
     * parameters in the stage), share 1/L: (1 - 1/L) ag x 16/132 */
    double L = (double)c.model.layers;
    double params = mp_model_params(&c.model);
    double ag = mp_coll_time(&c.hw, &dpg, MP_COLL_ALLGATHER, params * 2.0);
    assert_true(near(dp_f0, (1.0 - 1.0 / L) * ag * 16.0 / 132.0));
    mp_pipeline_cost_free(&a);
    mp_pipeline_cost_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shares), cmocka_unit_test(test_nccl_alltoall_ctas), cmocka_unit_test(test_blackwell),          cmocka_unit_test(test_tp_overlap),
        cmocka_unit_test(test_tp_async_backward), cmocka_unit_test(test_cp_ring),
        cmocka_unit_test(test_dp_overlap),      cmocka_unit_test(test_zero3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
