/* test_moe_dispatch.c — the flex dispatcher's copies against a brute-force
 * count over every routing, its time by hand beside the all-to-all's, the EP
 * all-to-all overlap (hides min(a2a, compute) of each F and B pair), the
 * shared-expert overlap, and Megatron-Core's rules for both overlaps. */
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
#include "sim/schedule.h"
#include "sim/simulate.h"
#include "moe_fixture.h"

static mp_model routing(int64_t experts, int64_t top_k, int64_t groups, int64_t group_top_k)
{
    mp_model m;
    memset(&m, 0, sizeof m);
    m.moe.experts = experts;
    m.moe.top_k = top_k;
    m.moe.route_groups = groups;
    m.moe.route_group_top_k = group_top_k;
    return m;
}

/* Distinct holders (experts split in order over `holders`) of one routing. */
static int distinct(const int *chosen, int k, int per)
{
    int seen[64] = {0}, n = 0;
    for (int i = 0; i < k; i++)
        if (!seen[chosen[i] / per]++)
            n++;
    return n;
}

/* Every k-subset of the pool (ids pool[0..n-1]) in turn: the sum of distinct
 * holders and the number of subsets. */
static void subsets(const int *pool, int n, int k, int per, double *sum, double *count)
{
    int idx[16], chosen[16];
    for (int i = 0; i < k; i++) idx[i] = i;
    for (;;) {
        for (int i = 0; i < k; i++) chosen[i] = pool[idx[i]];
        *sum += distinct(chosen, k, per);
        *count += 1.0;
        int i = k - 1;
        while (i >= 0 && idx[i] == n - k + i) i--;
        if (i < 0) return;
        idx[i]++;
        for (int j = i + 1; j < k; j++) idx[j] = idx[j - 1] + 1;
    }
}

/* The expected holders reached, by enumerating every routing: uniform top-k
 * of E; with groups, every M-subset of the G groups, then every k-subset of
 * their experts (each group subset equally likely, then each expert subset). */
static double brute_force(int E, int k, int G, int M, int holders)
{
    int per = E / holders, pool[64];
    if (G <= 1) {
        for (int i = 0; i < E; i++) pool[i] = i;
        double sum = 0.0, count = 0.0;
        subsets(pool, E, k, per, &sum, &count);
        return sum / count;
    }
    int gsize = E / G;
    double total = 0.0, nsets = 0.0;
    for (int mask = 0; mask < (1 << G); mask++) {
        if (__builtin_popcount((unsigned)mask) != M) continue;
        int n = 0;
        for (int g = 0; g < G; g++)
            if (mask >> g & 1)
                for (int j = 0; j < gsize; j++) pool[n++] = g * gsize + j;
        double sum = 0.0, count = 0.0;
        subsets(pool, n, k, per, &sum, &count);
        total += sum / count;
        nsets += 1.0;
    }
    return total / nsets;
}

static void test_distinct_holders_brute_force(void **state)
{
    (void)state;
    const struct { int E, k, G, M; } cases[] = {
        {16, 4, 0, 0}, {16, 2, 0, 0}, {12, 3, 0, 0},
        {16, 3, 4, 2}, /* groups of 4: holders of 2, 4, 8 experts */
        {12, 3, 4, 2}, /* groups of 3: holders of 2 straddle two groups */
        {24, 4, 8, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mp_model m = routing(cases[c].E, cases[c].k, cases[c].G, cases[c].M);
        for (int holders = 1; holders <= cases[c].E; holders++) {
            if (cases[c].E % holders) continue;
            double want = brute_force(cases[c].E, cases[c].k, cases[c].G, cases[c].M, holders);
            double got = mp_moe_expected_holders(&m, holders);
            if (fabs(got - want) > 1e-9)
                fail_msg("E=%d k=%d G=%d M=%d holders=%d: %.12g, brute force %.12g",
                         cases[c].E, cases[c].k, cases[c].G, cases[c].M, holders, got, want);
        }
    }
    /* a holder of everything is always reached; one expert per holder: k */
    mp_model m = routing(64, 8, 0, 0);
    assert_true(fabs(mp_moe_expected_holders(&m, 1) - 1.0) < 1e-12);
    assert_true(fabs(mp_moe_expected_holders(&m, 64) - 8.0) < 1e-12);
    /* the group limit reaches fewer nodes: DeepSeek-V3's 8 groups, 4 per token,
     * one group per node of ep 64 over 8 nodes: at most 4 */
    mp_model limited = routing(256, 8, 8, 4), free_ = routing(256, 8, 0, 0);
    double lim = mp_moe_expected_holders(&limited, 8), fr = mp_moe_expected_holders(&free_, 8);
    assert_true(lim < fr && lim <= 4.0);
}


/* NeMo AutoModel's FakeBalancedGate (moe.fake_balanced_gate), as its code
 * routes: indices = arange(T * k).view(T, k) % E, token t to experts
 * t k .. t k + k - 1 mod E. The holders each token meets, counted over T
 * tokens (a multiple of E: every start as often), against the model's; the
 * recipes' two cases by hand: a Qwen3-30B-A3B token (8 of 128 experts, 16
 * per rank at ep 8) reaches one rank, a DeepSeek-V3 token (8 of 256, 4 per
 * rank at ep 64, 32 per node of 8) two ranks of one node. */
static void test_fake_balanced_gate_holders(void **state)
{
    (void)state;
    const struct { int E, k; } cases[] = {
        {128, 8}, {256, 8}, {12, 5}, {10, 7}, {6, 6}, {16, 3}, {60, 8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int E = cases[c].E, k = cases[c].k, T = 4 * E;
        mp_model m = routing(E, k, 0, 0);
        m.moe.fake_balanced_gate = true;
        for (int holders = 1; holders <= E; holders++) {
            if (E % holders) continue;
            int per = E / holders;
            double sum = 0.0;
            for (int t = 0; t < T; t++) {
                int seen[256] = {0}, n = 0;
                for (int j = 0; j < k; j++)
                    if (!seen[((t * k + j) % E) / per]++)
                        n++;
                sum += n;
            }
            double want = sum / T, got = mp_moe_expected_holders(&m, holders);
            if (fabs(got - want) > 1e-12)
                fail_msg("E=%d k=%d holders=%d: %.12g, by the gate's indices %.12g", E, k,
                         holders, got, want);
        }
    }
    mp_model qwen = routing(128, 8, 0, 0), dsv3 = routing(256, 8, 8, 4);
    qwen.moe.fake_balanced_gate = dsv3.moe.fake_balanced_gate = true;
    assert_true(fabs(mp_moe_expected_holders(&qwen, 8) - 1.0) < 1e-12);
    assert_true(fabs(mp_moe_expected_holders(&dsv3, 64) - 2.0) < 1e-12);
    assert_true(fabs(mp_moe_expected_holders(&dsv3, 8) - 1.0) < 1e-12);
    /* the same models under their routers reach more: 5.3 of 8 ranks */
    qwen.moe.fake_balanced_gate = false;
    assert_true(mp_moe_expected_holders(&qwen, 8) > 5.0);
}

/* The fake gate computes no scores: the MoE block loses the router's GEMMs
 * (T x h x E forward, its two gradients backward) and its fp32 scores'
 * 8 bytes a token and expert, and the flex dispatch at ep 8 in one domain
 * moves one copy a token, 7/8 of them over NVLink (OLMoE: 64 experts, top
 * 8, 8 per rank at ep 8: the run of 8 meets one rank). */
static void test_fake_balanced_gate_block(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 8, 1, 8, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, c.training.seq, 1, &bs);
    mp_moe_time real, fake;
    mp_moe_block_time(&c, &bs, &real);
    c.model.moe.fake_balanced_gate = true;
    mp_moe_block_time(&c, &bs, &fake);
    double T = (double)c.parallel.micro_batch * bs.s, E = 64.0, h = 2048.0;
    double peak = c.hw.peak_flops[MP_DTYPE_BF16];
    double router = mp_gemm_mnk_time(&c.hw, peak, 2.0, T, E, h);
    assert_true(fabs((real.gemm_f - fake.gemm_f) - router) < 1e-9 * real.gemm_f);
    assert_true(fabs((real.ew_bytes - fake.ew_bytes) - T * E * 8.0) < 1e-6 * real.ew_bytes);
    double one = T * 7.0 / 8.0 * h * 2.0 / 100e9; /* a dispatch or a combine */
    assert_true(fabs(fake.comm_f - 2.0 * one) < 1e-9 * one);
}

/* 1 - C(E - e, k) / C(E, k) */
static double hit(double E, double e, double k)
{
    double miss = 1.0;
    for (double i = 0; i < k; i++) miss *= (E - e - i) / (E - i);
    return 1.0 - miss;
}

/* OLMoE (64 experts, top 8, h 2048), 4096 tokens per GPU. ep 16 over two
 * domains: the network carries each token to the other domain when that
 * domain holds one of its experts (32 of 64), NVLink to each GPU reached
 * (4 experts each) but the sender, the forward from the receiving GPU
 * included; the slower leg decides. */
static void test_flex_by_hand(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 64, 1, 16, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_time t;
    mp_moe_block_time(&c, &bs, &t);
    double per_token = 2048.0 * 2, T = 4096.0;
    double net = T * hit(64, 32, 8) * per_token / 25e9;           /* one remote domain */
    double nvl = T * 16.0 * hit(64, 4, 8) * 7.0 / 8.0 * per_token / 100e9;
    assert_true(fabs(t.comm_f / (2.0 * fmax(net, nvl)) - 1.0) < 1e-12);
    /* the all-to-all sends 8 copies, half of them across: flex is cheaper */
    mp_config a = c;
    a.parallel.dispatcher = MP_DISPATCH_ALLTOALL;
    mp_moe_time ta;
    mp_moe_block_time(&a, &bs, &ta);
    assert_true(fabs(ta.comm_f / (2.0 * T * 8 * per_token * 8.0 / 16.0 / 25e9) - 1.0) < 1e-12);
    assert_true(t.comm_f < ta.comm_f);
    /* inside one domain (ep 8): one copy per GPU reached (8 experts each) */
    c = moe_config("olmoe-1b-7b", 64, 1, 8, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    mp_moe_block_time(&c, &bs, &t);
    nvl = T * 8.0 * hit(64, 8, 8) * 7.0 / 8.0 * per_token / 100e9;
    assert_true(fabs(t.comm_f / (2.0 * nvl) - 1.0) < 1e-12);
}

/* The latency one dispatch of c waits: its forward dispatch-and-combine
 * time with the profile's latencies set to up and out, less the same with
 * none (comm_f holds two all-to-alls). */
static double dispatch_latency(mp_config c, double up, double out)
{
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_time t0, t1;
    mp_moe_block_time(&c, &bs, &t0);
    c.hw.scale_up.latency = up;
    c.hw.scale_out.latency = out;
    mp_moe_block_time(&c, &bs, &t1);
    return (t1.comm_f - t0.comm_f) / 2.0;
}

/* An all-to-all's peers are in flight together, not one after another:
 * NCCL progresses 8 peers per p2p channel at once (NCCL_MAX_DEV_WORK_P2P_
 * PER_BATCH) and, across nodes, spreads the peers over its p2p channels in
 * one round (the profile's nccl_ctas, 16 on dgx-h100); inside one NVLink
 * domain each peer takes every channel, so 8 at a time. DeepEP sends to
 * every rank at once: one latency per leg. The old charge, one latency per
 * peer, fails each case. */
static void test_a2a_latency_rounds(void **state)
{
    (void)state;
    const double up = 7e-6, out = 3e-6;
    /* ep 8 inside an 8-GPU domain: 7 peers, one round */
    mp_config c = moe_config("olmoe-1b-7b", 64, 1, 8, 1);
    assert_true(fabs(dispatch_latency(c, up, out) / up - 1.0) < 1e-6);
    /* ep 64 inside one 72-GPU domain: 63 peers, 8 at a time: 8 rounds */
    c = moe_config("olmoe-1b-7b", 64, 1, 64, 1);
    c.hw.scale_up.gpus_per_domain = 72;
    assert_true(fabs(dispatch_latency(c, up, out) / (8.0 * up) - 1.0) < 1e-6);
    /* ep 16 over two domains: 15 peers within 8 x 16 channels: one round at
     * the network's latency; with 1 channel, 2 rounds */
    c = moe_config("olmoe-1b-7b", 64, 1, 16, 1);
    assert_true(c.hw.nccl_ctas == 16.0);
    assert_true(fabs(dispatch_latency(c, up, out) / out - 1.0) < 1e-6);
    c.hw.nccl_ctas = 1.0;
    c.hw.sm_count = 132.0;
    assert_true(fabs(dispatch_latency(c, up, out) / (2.0 * out) - 1.0) < 1e-6);
    /* flex over two domains: the network hop, then the NVLink forward */
    c = moe_config("olmoe-1b-7b", 64, 1, 16, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    assert_true(fabs(dispatch_latency(c, up, out) / (up + out) - 1.0) < 1e-6);
    /* flex inside one domain: one NVLink latency */
    c = moe_config("olmoe-1b-7b", 64, 1, 8, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    assert_true(fabs(dispatch_latency(c, up, out) / up - 1.0) < 1e-6);
}

/* Estimate of c, checked. */
static mp_estimate estimate_of(const mp_config *c)
{
    mp_estimate e;
    mp_error err;
    if (mp_estimate_config(c, NULL, &e, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    return e;
}

/* The embedding's and the head's F + B on a one-stage plan: the model
 * chunk's pre_process and post_process, which run outside the merged layers
 * and hide nothing. */
static double edge_time(const mp_config *c)
{
    static mp_item_cost items[MP_MAX_LAYERS + 2];
    mp_error err;
    int64_t L = mp_model_blocks(&c->model);
    assert_int_equal(mp_item_costs(c, items, &err), MP_OK);
    double edge = items[0].fwd + items[0].bwd[MP_RECOMPUTE_NONE] + items[L + 1].fwd +
                  items[L + 1].bwd[MP_RECOMPUTE_NONE];
    assert_true(edge > 0.0);
    return edge;
}

/* pp = 1: one stage, m micro-batches, each an F and a B. With the overlap
 * each pair of F and B hides min(a2a, the rest of F + B) of its a2a when
 * every phase's compute covers its communication (fast network), and the
 * pair takes its a2a alone when the communication covers everything (a slow
 * one). Megatron-Core pairs micro-batch i's B with i + 1's F, so the first F
 * and the last B run alone (combined_1f1b_schedule_for_no_pipelining): m - 1
 * pairs, and the step shrinks by (m - 1) min(a2a, compute) either way (m of
 * them before the warm-up was charged), compute being the layers' alone: the
 * embedding and the head run outside the merged layers
 * (model_chunk_schedule_plan.py, TransformerModelChunkSchedulePlan.run: the
 * pre_process forward and post_process backward before the layer loop, the
 * post_process forward and pre_process backward after it). Without SM contention (no
 * sm_count): the overlap's own law; with it, the next test. */
static void test_a2a_overlap_hides_min(void **state)
{
    (void)state;
    const double bws[] = {1e12, 1e9, 1e7};
    for (size_t i = 0; i < sizeof bws / sizeof bws[0]; i++) {
        mp_config c = moe_config("olmoe-1b-7b", 16, 1, 16, 1);
        c.hw.scale_out.bw_per_gpu = bws[i];
        c.hw.sm_count = c.hw.nccl_ctas = 0;
        c.parallel.dp_overlap = false; /* its window would move with B */
        mp_pipeline_cost pc;
        mp_error err;
        assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
        double a2a = pc.stages[0].ep_comm_fwd + pc.stages[0].ep_comm_bwd;
        double rest = pc.stages[0].fwd + pc.stages[0].bwd - a2a;
        mp_pipeline_cost_free(&pc);
        rest -= edge_time(&c);
        assert_true(a2a > 0.0);
        mp_estimate inline_ = estimate_of(&c);
        c.parallel.moe_a2a_overlap = true;
        mp_estimate over = estimate_of(&c);
        double m = (double)inline_.microbatches;
        double hidden = inline_.time.step - over.time.step;
        assert_true(m >= 2.0);
        if (i == 0) /* every phase covered: the whole a2a */
            assert_true(fabs(hidden / ((m - 1.0) * a2a) - 1.0) < 1e-9);
        if (i == 2) /* the a2a covers all: the compute is hidden */
            assert_true(fabs(hidden / ((m - 1.0) * rest) - 1.0) < 1e-9);
        assert_true(hidden <= (m - 1.0) * fmin(a2a, rest) * (1.0 + 1e-9));
        assert_true(hidden > 0.0);
        /* the simulator runs the plan's overlap on the ep stream, its
         * merged passes with the embedding and the head outside them (one
         * stage: pass after pass, the estimate's step exactly; with the
         * edges in the phases the slower networks hid them under the
         * all-to-all: 0.08% short on the middle one, OLMoE's head small) */
        mp_sim_result r0, r1;
        c.parallel.moe_a2a_overlap = false;
        assert_int_equal(mp_simulate(&c, NULL, NULL, &r0, &err), MP_OK);
        c.parallel.moe_a2a_overlap = true;
        assert_int_equal(mp_simulate(&c, NULL, NULL, &r1, &err), MP_OK);
        assert_true(r1.makespan < r0.makespan);
        assert_true(fabs(r1.makespan / over.time.step - 1.0) < 1e-9);
        mp_sim_result_free(&r0);
        mp_sim_result_free(&r1);
    }
}

/* The passes the overlap pairs, by hand from Megatron-Core's schedules
 * (core_v0.15.0, pipeline_parallel/schedules.py get_pp_rank_microbatches:
 * (p - r - 1) * 2 + (v - 1) * p warm-up forwards, one more under
 * --overlap-moe-expert-parallel-comm; as many cool-down backwards). Qwen3-
 * 235B's H100 recipe, pp 8, vp 4: rank 0 runs 7*2 + 3*8 + 1 = 39 of its
 * m*v forwards alone, the last rank 3*8 + 1 = 25; with m = 128 micro-batches
 * (global batch 2048 over dp 16) that is 39 of 512. Without a pipeline the
 * first F and the last B: 1 of m. Never below 0. */
static void test_a2a_overlap_warmup(void **state)
{
    (void)state;
    assert_true(fabs(mp_moe_a2a_paired_share(8, 4, 128, 0) - (512.0 - 39.0) / 512.0) < 1e-15);
    assert_true(fabs(mp_moe_a2a_paired_share(8, 4, 128, 7) - (512.0 - 25.0) / 512.0) < 1e-15);
    assert_true(fabs(mp_moe_a2a_paired_share(2, 24, 32, 0) - (768.0 - 49.0) / 768.0) < 1e-15);
    assert_true(fabs(mp_moe_a2a_paired_share(1, 1, 16, 0) - 15.0 / 16.0) < 1e-15);
    assert_true(mp_moe_a2a_paired_share(8, 4, 4, 0) == 0.0); /* all warm-up */
    /* the estimate: rank 0 of pp 2, vp 2 (5 of 2m alone) is the slowest */
    mp_config c = moe_config("olmoe-1b-7b", 16, 1, 8, 1);
    c.parallel.pp = 2;
    c.parallel.vpp = 2;
    c.parallel.dp = 8;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    c.hw.scale_out.bw_per_gpu = 1e7; /* the a2a covers everything */
    c.hw.scale_up.bw_per_gpu = 1e7;
    c.hw.sm_count = c.hw.nccl_ctas = 0;
    c.parallel.dp_overlap = false;
    mp_estimate inline_ = estimate_of(&c);
    c.parallel.moe_a2a_overlap = true;
    mp_estimate over = estimate_of(&c);
    assert_true(over.time.step < inline_.time.step);
    double m = (double)inline_.microbatches;
    assert_true(fabs(mp_moe_a2a_paired_share(2, 2, (int64_t)m, 0) - (2.0 * m - 5.0) / (2.0 * m)) <
                1e-15);
}

/* pp 2, vpp 2, m 4 by hand from Megatron-Core's combined 1F1B (schedules.py
 * get_pp_rank_microbatches and forward_backward_pipelining_with_interleaving):
 * 8 forwards and 8 backwards per rank. Rank 0 warms up (2-0-1)*2 + (2-1)*2
 * + 1 = 5 forwards alone, pairs forwards 5..7 with backwards 0..2 in the
 * steady state and runs backwards 3..7 alone: 3 of 8 paired. Rank 1:
 * 0 + 2 + 1 = 3 alone, 5 of 8 paired. m 2: rank 0's 5 warm-ups of 4
 * forwards leave nothing paired. */
static void test_a2a_overlap_pp2_vpp2_m4(void **state)
{
    (void)state;
    assert_true(mp_moe_a2a_paired_share(2, 2, 4, 0) == 3.0 / 8.0);
    assert_true(mp_moe_a2a_paired_share(2, 2, 4, 1) == 5.0 / 8.0);
    assert_true(mp_moe_a2a_paired_share(2, 2, 2, 0) == 0.0);
}

/* DualPipe(V)'s F&B units by hand from dualpipev.py's phases (the
 * simulator merges exactly these: tests/sim/test_engine.c
 * test_dualpipe_merged_fb_grid). DualPipeV p = 1, m = 2: F0 F0 | F0&B1 run
 * apart (the turn of the V) | F1&B0 | B1 | B0: no F0&B1 unit, one F1&B0.
 * p = 2, m = 4, rank 0: phase 4's one round F0&B1, F1&B0; phase 5's B1,
 * F1&B0: 1 and 2. Rank 1: phase 4's two rounds, the first's F0 B1 apart:
 * 1 and 2. p = 4, m = 16, rank 0: phase 4's 9 rounds, phase 5's 3: 9 and
 * 12; rank 3: 12 rounds less the turn: 11 and 12. DualPipe p = 4, m = 8 is
 * DualPipeV p = 2, m = 4 on ranks 0 and 3 (h = 0), 1 and 2 (h = 1).
 * Before, every pass of both chunks counted as paired (m of m). */
static void test_dualpipe_fb_units(void **state)
{
    (void)state;
    const int64_t want[][6] = {/* kind, p, m, r, f0b1, f1b0 */
                               {MP_SCHED_DUALPIPEV, 1, 2, 0, 0, 1},
                               {MP_SCHED_DUALPIPEV, 2, 4, 0, 1, 2},
                               {MP_SCHED_DUALPIPEV, 2, 4, 1, 1, 2},
                               {MP_SCHED_DUALPIPEV, 4, 16, 0, 9, 12},
                               {MP_SCHED_DUALPIPEV, 4, 16, 3, 11, 12},
                               {MP_SCHED_DUALPIPE, 4, 8, 0, 1, 2},
                               {MP_SCHED_DUALPIPE, 4, 8, 3, 1, 2},
                               {MP_SCHED_DUALPIPE, 4, 8, 1, 1, 2},
                               {MP_SCHED_DUALPIPE, 4, 8, 2, 1, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t a = -1, b = -1;
        mp_dualpipe_fb_units((mp_schedule_kind)want[i][0], want[i][1], want[i][2], want[i][3], &a,
                             &b);
        if (a != want[i][4] || b != want[i][5])
            fail_msg("row %zu: %lld, %lld; want %lld, %lld", i, (long long)a, (long long)b,
                     (long long)want[i][4], (long long)want[i][5]);
    }
}

/* The estimate's closed-form unit counts against the list builder's own
 * marks (schedule.c dpv_fb, which the simulator merges): per rank, the F's
 * marked fb of chunk 0 (paired with chunk 1's B) and of chunk 1, for every
 * DualPipeV p <= 6, m from 2p to 24, and DualPipe even p <= 8, even m from
 * 2p to 24 (DualPipe's second half with its chunk labels swapped: the estimate
 * visits the first half only), so the two descriptions cannot drift apart. */
static void test_dualpipe_fb_units_match_lists(void **state)
{
    (void)state;
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    for (int q = 0; q < 2; q++) {
        for (int32_t p = q ? 2 : 1; p <= (q ? 8 : 6); p += q ? 2 : 1) {
            for (int32_t m = 2 * p; m <= 24; m += q ? 2 : 1) {
                for (int32_t r = 0; r < p; r++) {
                    mp_op_list l = {0};
                    mp_error err = {0};
                    assert_int_equal(mp_schedule_build(kinds[q], p, 2, m, r, &l, &err), MP_OK);
                    int64_t n[2] = {0, 0}, a = -1, b = -1;
                    for (int32_t i = 0; i < l.n; i++)
                        if (l.ops[i].kind == MP_OP_F && l.ops[i].fb)
                            n[l.ops[i].chunk != 0]++;
                    mp_op_list_free(&l);
                    mp_dualpipe_fb_units(kinds[q], p, m, r, &a, &b);
                    if (q && r >= p / 2) { /* DualPipe's second half labels the */
                        int64_t t = n[0]; /* two stages the other way round */
                        n[0] = n[1];      /* (dualpipe.py: phase ^= is_in_second_half) */
                        n[1] = t;
                    }
                    if (a != n[0] || b != n[1])
                        fail_msg("%s p=%d m=%d rank %d: estimate %lld, %lld; lists %lld, %lld",
                                 mp_schedule_name(kinds[q]), (int)p, (int)m, (int)r,
                                 (long long)a, (long long)b, (long long)n[0], (long long)n[1]);
                }
            }
        }
    }
}

/* The merged pass's middle phase by hand (model_chunk_schedule_plan.py,
 * TransformerLayerSchedulePlan.run): the backward's dispatch waits for the
 * expert dgrad, the forward's experts for the forward's dispatch. Dispatches
 * 1 ms each, dgrad 2, wgrad 0, forward experts 0.5, no SM contention: the
 * comm stream idles for the dgrad, 2 + 1 = 3 ms, not max(1 + 1, 2 + 0.5) =
 * 2.5. Dgrad 0.5, wgrad 1, experts 1: the experts wait for nothing and
 * the backward's dispatch starts at 1: max(1 + 1, 1.5 + 1) = 2.5 = both
 * streams' work. Comm-bound (4, 4 against 1, 1, 1): 8. With the share
 * 0.25 the streams' work bound: compute 3 + 0.25 x 2 under 2 ms of comm. */
static void test_a2a_overlap_mid_phase(void **state)
{
    (void)state;
    assert_true(fabs(mp_moe_a2a_mid_phase(1e-3, 1e-3, 2e-3, 0.0, 0.5e-3, 0.0) - 3e-3) < 1e-15);
    assert_true(fabs(mp_moe_a2a_mid_phase(1e-3, 1e-3, 0.5e-3, 1e-3, 1e-3, 0.0) - 2.5e-3) < 1e-15);
    assert_true(fabs(mp_moe_a2a_mid_phase(4e-3, 4e-3, 1e-3, 1e-3, 1e-3, 0.0) - 8e-3) < 1e-15);
    assert_true(fabs(mp_moe_a2a_mid_phase(1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 0.25) - 3.5e-3) < 1e-15);
}

/* The same with SM contention (dgx-h100: 132 SMs; DeepEP 20 SMs; the
 * all-to-all's NCCL kernel over ep 16 on two nodes, contention.c: the
 * fast network's 1000 GB/s a GPU asks ceil(1000 / 14) -> 128 channels a
 * peer, halved to 8 (8 x ceil(16/8) = 16 p2p channels), two groups of 8
 * rounds: 16 CTAs; the slow one's 10 MB/s 1 a peer: 2 CTAs): each phase
 * lasts max(comm, compute + comm x share). On a fast network every phase's compute covers its
 * communication, so a pair hides a2a (1 - share): the step shrinks by
 * (m - 1) a2a (1 - 16/132) (flex: 1 - 20/132), not (m - 1) a2a. On a slow one
 * the communication covers the slowed compute too: (m - 1) x the rest, the
 * layers' (edge_time). */
static void test_a2a_overlap_sm_contention(void **state)
{
    (void)state;
    const mp_dispatcher dispatchers[] = {MP_DISPATCH_ALLTOALL, MP_DISPATCH_FLEX};
    const double sms_of[2][2] = {{16.0, 2.0}, {20.0, 20.0}}; /* [dispatcher][slow] */
    for (size_t d = 0; d < 2; d++)
        for (int slow = 0; slow < 2; slow++) {
            const double sms[] = {sms_of[0][slow], sms_of[1][slow]};
            mp_config c = moe_config("olmoe-1b-7b", 16, 1, 16, 1);
            c.hw.scale_out.bw_per_gpu = slow ? 1e7 : 1e12;
            c.parallel.dispatcher = dispatchers[d];
            c.parallel.dp_overlap = false;
            mp_pipeline_cost pc;
            mp_error err;
            assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
            double a2a = pc.stages[0].ep_comm_fwd + pc.stages[0].ep_comm_bwd;
            double rest = pc.stages[0].fwd + pc.stages[0].bwd - a2a - edge_time(&c);
            assert_true(fabs(pc.ep_sm_share - sms[d] / 132.0) < 1e-15);
            mp_pipeline_cost_free(&pc);
            mp_estimate inline_ = estimate_of(&c);
            c.parallel.moe_a2a_overlap = true;
            mp_estimate over = estimate_of(&c);
            double m = (double)inline_.microbatches;
            double hidden = inline_.time.step - over.time.step;
            /* m - 1 pairs: the first F and the last B run alone */
            double want = (m - 1.0) * (slow ? rest : a2a * (1.0 - sms[d] / 132.0));
            /* flex on the fast network: DeepEP's fixed rounds exceed the
             * layers' forward outside the experts (the head's no longer
             * covers them), so a little less than the bound */
            if (dispatchers[d] == MP_DISPATCH_FLEX && !slow)
                assert_true(hidden <= want * (1.0 + 1e-9) && hidden > 0.9 * want);
            else
                assert_true(fabs(hidden / want - 1.0) < 1e-9);
            /* the simulator slows the compute under the ep stream the
             * same way: never faster than without the contention */
            mp_sim_result r0, r1;
            assert_int_equal(mp_simulate(&c, NULL, NULL, &r1, &err), MP_OK);
            /* one stage: the estimate's step (test_a2a_overlap_hides_min) */
            assert_true(fabs(r1.makespan / over.time.step - 1.0) < 1e-9);
            c.hw.sm_count = c.hw.nccl_ctas = 0;
            assert_int_equal(mp_simulate(&c, NULL, NULL, &r0, &err), MP_OK);
            assert_true(r1.makespan >= r0.makespan);
            if (!slow)
                assert_true(r1.makespan > r0.makespan);
            mp_sim_result_free(&r0);
            mp_sim_result_free(&r1);
        }
}

/* DeepSeek-V3's shared expert runs beside the dispatch and combine: what it
 * covers of them is no longer exposed, min(comm, shared compute) per pass;
 * with SM contention (dgx-h100, all-to-all: 16 of 132 SMs) never less than
 * 16/132 of the communication (which is all that is left where the shared
 * experts cover it: the fastest network here). */
static void test_shared_expert_overlap(void **state)
{
    (void)state;
    const double bws[] = {25e9, 1e8, 1e13};
    for (size_t i = 0; i < sizeof bws / sizeof bws[0]; i++) {
        mp_config c = moe_config("deepseek-v3", 256, 1, 64, 1);
        c.hw.scale_out.bw_per_gpu = bws[i];
        c.hw.scale_up.bw_per_gpu = bws[i] * 4.0;
        mp_block_shape bs;
        mp_block_shape_of(&c.model, 4096, 5, &bs);
        assert_int_equal(bs.kind, MP_BLOCK_MOE);
        mp_block_time off, on;
        mp_moe_time mt;
        mp_block_time_of(&c, &bs, &off);
        mp_moe_block_time(&c, &bs, &mt);
        /* the expert node's time less the routed experts' GEMMs and its
         * elementwise work (the sorts by local expert, the activation, the
         * FP8 casts: compute.c) is the shared experts' GEMMs */
        double mem = c.hw.hbm_bw * c.hw.memory_efficiency;
        double node_f = (mt.sort_bytes + mt.act_bytes + mt.cast_f) / mem;
        double node_b = (2.0 * (mt.sort_bytes + mt.act_bytes) + mt.cast_b) / mem;
        double shared_f = off.mlp_fwd - mt.gemm_f - node_f;
        double shared_b = off.mlp_bwd - mt.gemm_b - node_b;
        assert_true(shared_f > 0.0 && shared_b > 0.0);
        c.parallel.shared_expert_overlap = true;
        mp_block_time_of(&c, &bs, &on);
        double sm = 16.0 / 132.0;
        double want_f = fmax(off.ep_fwd - fmin(off.ep_fwd, shared_f), sm * off.ep_fwd);
        double want_b = fmax(off.ep_bwd - fmin(off.ep_bwd, shared_b), sm * off.ep_bwd);
        if (i == 2) /* covered: exactly the SMs' share */
            assert_true(fabs(want_f / (sm * off.ep_fwd) - 1.0) < 1e-12);
        assert_true(fabs(on.ep_fwd - want_f) <= 1e-12 * off.ep_fwd);
        assert_true(fabs(on.ep_bwd - want_b) <= 1e-12 * off.ep_bwd);
        assert_true(on.ep_fwd < off.ep_fwd);
    }
}

/* Megatron-Core's rules for the overlaps (TransformerConfig). */
static void test_overlap_refusals(void **state)
{
    (void)state;
    mp_error err;
    mp_config c = moe_config("olmoe-1b-7b", 16, 1, 16, 1);
    c.parallel.moe_a2a_overlap = true;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.ep = 1;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "moe_a2a_overlap");
    c.parallel.ep = 16;
    c.parallel.dispatcher = MP_DISPATCH_ALLGATHER;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.recompute = MP_RECOMPUTE_FULL;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    /* pp > 1 needs a virtual pipeline */
    c = moe_config("olmoe-1b-7b", 16, 1, 8, 1);
    c.parallel.pp = 2;
    c.parallel.dp = 8;
    c.parallel.schedule = MP_SCHED_1F1B;
    c.parallel.moe_a2a_overlap = true;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "moe_a2a_overlap");
    /* flex needs more than one GPU per expert group (Megatron: TPxEP > 1) */
    c = moe_config("olmoe-1b-7b", 16, 1, 1, 1);
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "dispatcher");
    /* shared-expert overlap: shared experts needed (OLMoE has none) */
    c = moe_config("olmoe-1b-7b", 16, 1, 16, 1);
    c.parallel.shared_expert_overlap = true;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "shared_expert_overlap");
    c = moe_config("deepseek-v3", 256, 1, 64, 1);
    c.parallel.shared_expert_overlap = true;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.moe_a2a_overlap = true; /* the two exclude each other */
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    /* a dense model has nothing to overlap */
    memset(&c.parallel, 0, sizeof c.parallel);
    c = moe_config("olmoe-1b-7b", 16, 1, 1, 1);
    c.model = *mp_model_preset("llama3-8b");
    c.parallel.ep = 0;
    c.parallel.etp = 0;
    c.parallel.moe_a2a_overlap = true;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "moe_a2a_overlap");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distinct_holders_brute_force),
        cmocka_unit_test(test_fake_balanced_gate_holders),
        cmocka_unit_test(test_fake_balanced_gate_block),
        cmocka_unit_test(test_flex_by_hand),
        cmocka_unit_test(test_a2a_latency_rounds),
        cmocka_unit_test(test_a2a_overlap_hides_min),
        cmocka_unit_test(test_a2a_overlap_warmup),
        cmocka_unit_test(test_a2a_overlap_pp2_vpp2_m4),
        cmocka_unit_test(test_dualpipe_fb_units),
        cmocka_unit_test(test_dualpipe_fb_units_match_lists),
        cmocka_unit_test(test_a2a_overlap_mid_phase),
        cmocka_unit_test(test_a2a_overlap_sm_contention),
        cmocka_unit_test(test_shared_expert_overlap),
        cmocka_unit_test(test_overlap_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
