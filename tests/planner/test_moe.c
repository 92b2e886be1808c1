/* test_moe.c — mixture-of-experts and latent-attention models: parameter
 * counts against the published totals and active counts, hand-counted
 * block parameters and FLOPs, which blocks are MoE, and the refusal of moe /
 * mla fields that would otherwise be silently dropped. */
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
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "moe_fixture.h"
#include "planner/megatron.h"

/* Published totals are given to 3 significant figures (1%); active counts
 * to 2 (37B, 22B, 1.3B: up to 2% for a count just past the rounding edge). */
static void test_published_counts(void **state)
{
    (void)state;
    const char *names[] = {"mixtral-8x7b", "mixtral-8x22b", "qwen3-235b-a22b", "olmoe-1b-7b",
                           "deepseek-v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const mp_model *m = mp_model_preset(names[i]);
        assert_non_null(m);
        assert_true(mp_model_is_moe(m));
        double total = mp_model_params(m), active = mp_model_active_params(m);
        double pt = mp_model_preset_published_params(names[i]);
        double pa = mp_model_preset_published_active_params(names[i]);
        if (fabs(total / pt - 1.0) > 0.01 || fabs(active / pa - 1.0) > 0.02)
            fail_msg("%s: %.4g total / %.4g active, published %.4g / %.4g", names[i], total,
                     active, pt, pa);
    }
    /* a dense model: active == total, no published active figure */
    const mp_model *d = mp_model_preset("llama3-8b");
    assert_true(mp_model_active_params(d) == mp_model_params(d));
    assert_true(mp_model_preset_published_active_params("llama3-8b") == 0.0);
}

/* GPT-OSS against its model card (OpenAI 2025, Table 1: 116.83B / 20.91B
 * total, 5.13B / 3.61B active). The card's active count takes the
 * unembedding but not the input embedding (V x h = 0.58B), which megaplan
 * counts as active (it is held and updated): compared without it. Biases and
 * sinks are counted: without them the totals fall 0.05% short, so the test
 * checks them by hand on one block. */
static void test_gpt_oss_counts(void **state)
{
    (void)state;
    const char *names[] = {"gpt-oss-120b", "gpt-oss-20b"};
    for (size_t i = 0; i < 2; i++) {
        const mp_model *m = mp_model_preset(names[i]);
        double total = mp_model_params(m);
        double active = mp_model_active_params(m) - (double)m->vocab * (double)m->hidden;
        double pt = mp_model_preset_published_params(names[i]);
        double pa = mp_model_preset_published_active_params(names[i]);
        if (fabs(total / pt - 1.0) > 0.005 || fabs(active / pa - 1.0) > 0.01)
            fail_msg("%s: %.5g total / %.4g active, published %.5g / %.4g", names[i], total,
                     active, pt, pa);
    }
    /* one block by hand: Q,O 2880x4096 + K,V 2880x512 with their biases, 64
     * sinks; 128 experts of gate/up/down 2880x2880 with biases; router
     * 2880x128 + 128; two RMSNorms */
    const mp_model *m = mp_model_preset("gpt-oss-120b");
    double attn = 2.0 * 2880 * 4096 + 2.0 * 2880 * 512 + (4096 + 2 * 512 + 2880) + 64;
    double expert = 3.0 * 2880 * 2880 + 2.0 * 2880 + 2880;
    double want = attn + 128 * expert + 2880.0 * 128 + 128 + 2.0 * 2880;
    assert_true(mp_block_params(m, MP_BLOCK_MOE) == want);
}

/* Mixtral 8x7B block by hand: Q,O 4096x4096; K,V 4096x1024; 8 experts of
 * 3 x 4096 x 14336; router 4096 x 8; two RMSNorms of 4096. */
static void test_mixtral_block_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("mixtral-8x7b");
    double attn = 2.0 * 4096 * 4096 + 2.0 * 4096 * 1024;
    double experts = 8.0 * 3 * 4096 * 14336, router = 4096.0 * 8, norms = 2.0 * 4096;
    assert_true(mp_block_params(m, MP_BLOCK_MOE) == attn + experts + router + norms);
    assert_true(mp_moe_mlp_params(m, true) == router + 2.0 * 3 * 4096 * 14336);
    /* forward FLOPs of one sequence: 2 s (attention matrices + router + 2
     * experts) + the attention core 4 s^2 a d; the head 2 s V h; x3 with backward */
    double s = 4096;
    double block = 2.0 * s * (attn + router + 2.0 * 3 * 4096 * 14336) + 4.0 * s * s * 4096;
    double want = 3.0 * (32 * block + 2.0 * s * 32000 * 4096);
    double got = mp_model_flops(m, 4096, 1);
    assert_true(fabs(got / want - 1.0) < 1e-12);
}

/* DeepSeek-V3's latent attention by hand (report §2.1.1 and §4.2). */
static void test_deepseek_mla_by_hand(void **state)
{
    (void)state;
    const mp_model *m = mp_model_preset("deepseek-v3");
    assert_true(mp_model_is_mla(m));
    double q = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192;
    double kv = 7168.0 * (512 + 64) + 512 + 512.0 * 128 * (128 + 128);
    double o = 128.0 * 128 * 7168;
    assert_true(mp_mla_attn_params(m) == q + kv + o);
    /* shared expert and 256 routed experts of 3 x 7168 x 2048, router 7168 x 256 */
    double e = 3.0 * 7168 * 2048;
    assert_true(mp_moe_mlp_params(m, false) == 7168.0 * 256 + 257 * e);
    assert_true(mp_moe_mlp_params(m, true) == 7168.0 * 256 + 9 * e);
    /* the attention core: QK^T at 192 per head, AV at 128 */
    mp_block_shape bs;
    mp_block_shape_of(m, 4096, 1, &bs);
    assert_true(mp_block_attn_core_fwd_flops(m, &bs) == 2.0 * 4096 * 4096 * 128 * (192 + 128));
}

static void test_moe_block_placement(void **state)
{
    (void)state;
    const mp_model *ds = mp_model_preset("deepseek-v3");
    mp_block_shape bs;
    for (int64_t i = 1; i <= ds->layers; i++) {
        mp_block_shape_of(ds, 0, i, &bs);
        assert_int_equal(bs.kind, i <= 3 ? MP_BLOCK_SELF : MP_BLOCK_MOE);
    }
    assert_int_equal(mp_model_moe_blocks(ds), 58);
    mp_model m = *mp_model_preset("olmoe-1b-7b");
    m.moe.layer_freq = 2; /* blocks 0, 2, 4, ...: Megatron's --moe-layer-freq 2 */
    assert_int_equal(mp_model_moe_blocks(&m), 8);
    assert_true(mp_model_block_is_moe(&m, 0) && !mp_model_block_is_moe(&m, 1));
    m.moe.first_dense = 1;
    assert_int_equal(mp_model_moe_blocks(&m), 7);
    /* the count's closed form against counting block by block */
    for (int64_t L = 1; L <= 20; L++)
        for (int64_t a = 0; a <= 22; a++)
            for (int64_t f = 1; f <= 5; f++) {
                m.layers = L;
                m.moe.first_dense = a;
                m.moe.layer_freq = f;
                int64_t n = 0;
                for (int64_t i = 0; i < L; i++) n += mp_model_block_is_moe(&m, i);
                assert_int_equal(mp_model_moe_blocks(&m), n);
            }
}

static void expect_refused(mp_model m, const char *field)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_model_finish(&m, &err) == MP_OK)
        fail_msg("accepted; expected an error on %s", field);
    assert_string_equal(err.field, field);
}

static void test_refusals(void **state)
{
    (void)state;
    mp_model dense = *mp_model_preset("llama3-8b");
    mp_model m = dense;
    m.moe.top_k = 2; /* experts missing: would silently plan a dense model */
    expect_refused(m, "moe.experts");
    m = dense;
    m.mla.v_head_dim = 128;
    expect_refused(m, "mla.kv_lora_rank");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.top_k = 9;
    expect_refused(m, "moe.top_k");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.top_k = 0;
    expect_refused(m, "moe.top_k");
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.first_dense = 32;
    expect_refused(m, "moe.first_dense");
    m = *mp_model_preset("deepseek-v3");
    m.moe.route_groups = 7;
    expect_refused(m, "moe.route_groups");
    /* a group ranks by its top top_k / route_group_top_k: at least one */
    m = *mp_model_preset("deepseek-v3");
    m.moe.top_k = 3;
    expect_refused(m, "moe.route_group_top_k");
    /* the kept groups (1 of 64, 4 experts each) must hold top_k (8) experts */
    m = *mp_model_preset("deepseek-v3");
    m.moe.route_groups = 64;
    m.moe.route_group_top_k = 1;
    expect_refused(m, "moe.top_k");
    /* the expert bias is the sigmoid router's */
    m = *mp_model_preset("mixtral-8x7b");
    m.moe.bias_update_rate = 1e-3;
    expect_refused(m, "moe.bias_update_rate");
    m = *mp_model_preset("gpt3-125m");
    m.moe.route_scale = 2.5; /* a dense model: the moe keys need experts */
    expect_refused(m, "moe.experts");
    m = *mp_model_preset("deepseek-v3");
    m.head_dim = 128;
    expect_refused(m, "head_dim");
    m = *mp_model_preset("gpt3-125m");
    m.moe.experts = 8;
    m.moe.top_k = 2;
    assert_true(mp_model_finish(&m, &(mp_error){0}) == MP_OK); /* GELU experts are fine */
    m = *mp_model_preset("bert-base");
    m.moe.experts = 8;
    m.moe.top_k = 2;
    expect_refused(m, "moe.experts");
    /* GPT-OSS's fields where they would mean nothing */
    m = dense;
    m.attn.window_skip_freq = 2; /* no window */
    expect_refused(m, "attn.window_skip_freq");
    m = dense;
    m.attn.window = 128;
    m.attn.window_skip_freq = 1; /* every block full */
    expect_refused(m, "attn.window_skip_freq");
    m = *mp_model_preset("bert-base");
    m.attn.window = 128; /* not causal */
    expect_refused(m, "attn.window");
    m = *mp_model_preset("bert-base");
    m.attn.sinks = true;
    expect_refused(m, "attn.sinks");
    m = *mp_model_preset("deepseek-v3");
    m.attn.window = 128;
    expect_refused(m, "attn.window");
    m = *mp_model_preset("gpt3-125m");
    m.linear_bias = true; /* gpt has its biases */
    expect_refused(m, "linear_bias");
    m = dense;
    m.glu_limit = 7.0; /* an expert activation, and this model has none */
    expect_refused(m, "glu_limit");
    m = *mp_model_preset("gpt3-125m");
    m.moe.experts = 8;
    m.moe.top_k = 2;
    m.glu_limit = 7.0; /* GELU experts */
    expect_refused(m, "glu_limit");
}


/* Per-expert tokens and local parameters by hand (Megatron-Core folding). */
static void test_expert_split_by_hand(void **state)
{
    (void)state;
    mp_config c = moe_config("mixtral-8x7b", 64, 2, 8, 1);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    /* 4096 tokens / tp 2 (SP) = 2048 per rank, x top-2 x ep 8 x etp 1 / 8 experts */
    assert_true(mp_moe_tokens_per_expert(&c, &bs) == 4096.0);
    assert_true(mp_moe_local_expert_params(&c) == 1.0 * 3 * 4096 * 14336);
    assert_int_equal(mp_parallel_edp(&c.parallel), 2 * 32 / 8);
    c.parallel.etp = 2; /* each expert split over 2 ranks, which both see its tokens */
    assert_true(mp_moe_tokens_per_expert(&c, &bs) == 8192.0);
    assert_true(mp_moe_local_expert_params(&c) == 0.5 * 3 * 4096 * 14336);
    c = moe_config("deepseek-v3", 2048, 1, 64, 1);
    assert_true(mp_moe_local_expert_params(&c) == 4.0 * 3 * 7168 * 2048);
}

/* Dispatch and combine of the all-to-all dispatcher: each rank sends its
 * Tr x top_k x h bf16 copies, an equal share per member; the shares for
 * members in other domains cross the 25 GB/s network, the rest NVLink. */
static void test_alltoall_volume(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 64, 1, 8, 1);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_time t;
    mp_moe_block_time(&c, &bs, &t);
    double bytes = 4096.0 * 8 * 2048 * 2; /* Tr x top-8 x h x 2 bytes */
    double inside = bytes * 7.0 / 8.0 / 100e9;
    assert_true(fabs(t.comm_f / (2.0 * inside) - 1.0) < 1e-12); /* dispatch + combine */
    assert_true(t.comm_b == t.comm_f);
    /* ep 16 spans two domains: half the shares leave over the network */
    c = moe_config("olmoe-1b-7b", 64, 1, 16, 1);
    mp_moe_block_time(&c, &bs, &t);
    double across = bytes * 8.0 / 16.0 / 25e9;
    assert_true(fabs(t.comm_f / (2.0 * across) - 1.0) < 1e-12);
    /* the routed GEMMs: ep 16 holds 4 experts of 4096 x 8 x 16 / 64 = 8192 tokens */
    assert_true(mp_moe_tokens_per_expert(&c, &bs) == 8192.0);
    /* the all-gather dispatcher moves every token (not top_k copies) */
    c.parallel.dispatcher = MP_DISPATCH_ALLGATHER;
    mp_moe_time g;
    mp_moe_block_time(&c, &bs, &g);
    assert_true(g.comm_f > 0.0 && g.gemm_f == t.gemm_f);
}

/* The all-to-all dispatcher sorts the received copies by local expert
 * before the grouped GEMMs and back before the combine (Megatron-Core's
 * "Permutation 2" and "Unpermutation 2", sort_chunks_by_idxs, whenever a rank
 * holds more than one expert): r2 w2 each per copy and hidden element, on top
 * of the permutation and unpermutation around the all-to-all. One local
 * expert, or the flex dispatcher, has none. In the merged pass of the EP
 * overlap they run in the expert node with the activation and the grouped
 * GEMMs (fine_grained_callables.py), so the block's expert time holds them. */
static void test_alltoall_sort_by_expert(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 64, 1, 8, 1); /* 64 experts: 8 a rank */
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    mp_moe_time t;
    mp_moe_block_time(&c, &bs, &t);
    double Tr = 4096.0, k = 8.0, h = 2048.0, E = 64.0;
    double copies = Tr * k * h;
    assert_true(fabs(t.sort_bytes / (8.0 * copies) - 1.0) < 1e-12);
    assert_true(fabs(t.ew_bytes / (Tr * E * 8.0 + 16.0 * copies + t.act_bytes) - 1.0) < 1e-12);
    /* the block's expert time: the GEMMs, the sorts, the activation */
    mp_block_time bt;
    mp_block_time_of(&c, &bs, &bt);
    double mem = c.hw.hbm_bw * c.hw.memory_efficiency;
    assert_true(fabs((bt.mlp_fwd - t.gemm_f) / ((t.sort_bytes + t.act_bytes) / mem) - 1.0) <
                1e-9);
    assert_true(fabs((bt.mlp_bwd - t.gemm_b) / (2.0 * (t.sort_bytes + t.act_bytes) / mem) -
                     1.0) < 1e-9);
    /* flex: DeepEP's dispatch lands the tokens by rank, permuted once */
    c.parallel.dispatcher = MP_DISPATCH_FLEX;
    mp_moe_block_time(&c, &bs, &t);
    assert_true(t.sort_bytes == 0.0);
    assert_true(fabs(t.ew_bytes / (Tr * E * 8.0 + 8.0 * copies + t.act_bytes) - 1.0) < 1e-12);
    /* one expert a rank: nothing to sort */
    c = moe_config("olmoe-1b-7b", 64, 1, 64, 1);
    mp_moe_block_time(&c, &bs, &t);
    assert_true(t.sort_bytes == 0.0);
}

/* With tp > 1 (and SP, which Megatron-Core requires) an MoE block's only TP
 * collectives are attention's and its shared experts' (SharedExpertMLP
 * gathers its input and reduce-scatters its output); the routed experts take
 * the sequence-parallel shard through the dispatcher (moe_layer.py gathers
 * nothing; the dispatcher's TP group is the expert TP group, 1 here). OLMoE
 * has no shared experts: at ep 1 (no dispatch) the forward's TP traffic is
 * one all-gather and one reduce-scatter of T x h (synchronous without TP
 * overlap), not two, and the backward's at most that; a shared expert (DeepSeek-V3's) adds
 * its pair. */
static void test_moe_block_tp_collectives(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 16, 2, 1, 1);
    c.parallel.tp_overlap = false;
    mp_block_shape bs;
    mp_block_shape_of(&c.model, 4096, 1, &bs);
    assert_true(bs.kind == MP_BLOCK_MOE);
    mp_group_place tpg;
    mp_group_place_of(&c, MP_GROUP_TP, &tpg);
    double bytes = 2.0 * 4096.0 * 2048.0 * 2.0; /* micro-batch 2 x s x h, bf16 */
    c.parallel.micro_batch = 2;
    double pair = mp_coll_time(&c.hw, &tpg, MP_COLL_ALLGATHER, bytes) +
                  mp_coll_time(&c.hw, &tpg, MP_COLL_REDUCESCATTER, bytes);
    mp_block_time t;
    mp_block_time_of(&c, &bs, &t);
    assert_true(t.ep_fwd == 0.0);
    assert_true(fabs(t.tp_fwd / pair - 1.0) < 1e-12);
    /* backward: QKV's gather and scatter, partly under its own GEMMs
     * (Megatron's asynchronous backward collectives), and no FC1 pair */
    assert_true(t.tp_bwd > 0.0 && t.tp_bwd <= pair * (1.0 + 1e-12));
    double qkv_bwd = t.tp_bwd;
    /* shared experts bring their own gather and scatter */
    c.model.moe.shared_experts = 1;
    c.model.moe.shared_ffn = 1024;
    mp_block_time_of(&c, &bs, &t);
    assert_true(fabs(t.tp_fwd / (2.0 * pair) - 1.0) < 1e-12);
    assert_true(t.tp_bwd > qkv_bwd);
}

/* Transformer Engine's grouped GEMM launches one cuBLASLt GEMM per local
 * expert from the host (and, under a per-tensor FP8 cast, one cast per
 * expert operand): 33 us each (moe.c), counted against the host. */
static void test_expert_launches_by_hand(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 64, 1, 8, 1); /* 64 experts: 8 per rank */
    double f, b, per = 33e-6 / c.hw.kernel_overhead;
    mp_moe_expert_launches(&c, &f, &b);
    assert_true(fabs(f / (8.0 * 2.0 * per) - 1.0) < 1e-12); /* FC1, FC2 */
    assert_true(fabs(b / (8.0 * 4.0 * per) - 1.0) < 1e-12); /* their dgrad and wgrad */
    c.training.precision = MP_DTYPE_FP8;
    c.training.fp8_recipe = MP_FP8_MXFP8; /* a cast per expert input and output gradient */
    mp_moe_expert_launches(&c, &f, &b);
    assert_true(fabs(f / (8.0 * 4.0 * per) - 1.0) < 1e-12);
    assert_true(fabs(b / (8.0 * 6.0 * per) - 1.0) < 1e-12);
    c.training.fp8_recipe = MP_FP8_DELAYED; /* one fused multi-tensor cast */
    mp_moe_expert_launches(&c, &f, &b);
    assert_true(fabs(f / (8.0 * 2.0 * per) - 1.0) < 1e-12);

    /* a host-bound block (1 s a launch): ep 8 holds 7 experts more than ep
     * 64, whose launches the host pays on top: 7 x 2 x 33 us forward, 7 x 4
     * x 33 us backward; the same with kernel_overhead 57.5 us would be
     * GPU-bound, so the host's whole time is read here */
    mp_config c8 = moe_config("olmoe-1b-7b", 64, 1, 8, 1);
    mp_config c64 = moe_config("olmoe-1b-7b", 64, 1, 64, 1);
    c8.hw.kernel_overhead = c64.hw.kernel_overhead = 1.0;
    mp_block_shape bs;
    mp_block_shape_of(&c8.model, 4096, 1, &bs);
    mp_block_time t8, t64;
    mp_block_time_of(&c8, &bs, &t8);
    mp_block_time_of(&c64, &bs, &t64);
    /* ep 8's all-to-all also sorts its 8 experts' copies and back: 2
     * launches forward, 4 backward (1 s each here), which ep 64's one
     * expert a rank does not */
    double host8 = t8.fwd_compute + t8.tp_fwd, host64 = t64.fwd_compute + t64.tp_fwd;
    assert_true(fabs((host8 - host64 - 2.0) / (7.0 * 2.0 * 33e-6) - 1.0) < 1e-6);
    host8 = t8.bwd_compute + t8.tp_bwd, host64 = t64.bwd_compute + t64.tp_bwd;
    assert_true(fabs((host8 - host64 - 4.0) / (7.0 * 4.0 * 33e-6) - 1.0) < 1e-6);
    /* a CUDA graph of the whole MoE layer replays them in one launch */
    c8.parallel.cuda_graph_scope = c64.parallel.cuda_graph_scope = 1u << MP_CGS_MOE;
    mp_block_time_of(&c8, &bs, &t8);
    mp_block_time_of(&c64, &bs, &t64);
    assert_true(fabs((t8.fwd_compute + t8.tp_fwd) - (t64.fwd_compute + t64.tp_fwd)) < 1e-9);
}

/* The estimate's memory: routed experts' optimizer states sharded over edp,
 * the rest over d x c (the distributed optimizer, 12 bytes per parameter). */
static void test_expert_optimizer_shard(void **state)
{
    (void)state;
    mp_config c = moe_config("mixtral-8x7b", 64, 1, 8, 1);
    c.training.global_batch = 64;
    mp_estimate e;
    mp_error err;
    if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    double one = 3.0 * 4096 * 14336, routed_all = 32.0 * 8 * one, local = 32.0 * one;
    double rest = mp_model_params(&c.model) - routed_all;
    assert_true(fabs(e.memory.weights / (2.0 * (rest + local)) - 1.0) < 1e-12);
    double edp = (double)mp_parallel_edp(&c.parallel); /* 64 / 8 = 8 */
    assert_true(edp == 8.0);
    assert_true(fabs(e.memory.optimizer / (12.0 * (rest / 64.0 + local / edp)) - 1.0) < 1e-12);
    /* the parts explain and estimate name: the routed experts' share */
    assert_true(fabs(e.memory.expert_weights / (2.0 * local) - 1.0) < 1e-12);
    assert_true(fabs(e.memory.expert_grads / (4.0 * local) - 1.0) < 1e-12);
    assert_true(fabs(e.memory.expert_optimizer / (12.0 * local / edp) - 1.0) < 1e-12);
    /* routed tokens: 1 micro-batch of 4096 tokens x top-2 per block, 32 blocks:
     * router scores 8 x 4096 x 8, per copy FC1's input 2h, SwiGLU's inputs
     * 4f and fp32 probability 4, FC2's input 2f; nothing for the unpermute
     * (Megatron-Core saves only its index map: the 2h per copy counted
     * before this audit made the routed part 16% too large here) */
    double per_block = 8.0 * 4096 * 8 + 4096.0 * 2 * (2.0 * 4096 + 6.0 * 14336 + 4.0);
    assert_true(fabs(e.memory.routed_activations / (32.0 * per_block) - 1.0) < 1e-12);
    assert_true(e.memory.routed_activations < e.memory.activations);
    /* a dense model's estimate is untouched by the expert fields being 0 */
    mp_config d = moe_config("llama3-8b", 64, 1, 0, 0);
    d.training.global_batch = 64;
    assert_int_equal(mp_estimate_config(&d, NULL, &e, &err), MP_OK);
    d.parallel.ep = 2; /* and refused on a dense model */
    assert_int_equal(mp_estimate_config(&d, NULL, &e, &err), MP_EINPUT);
    assert_string_equal(err.field, "ep");
}

/* ZeRO-2 and ZeRO-3 with experts (exec's shard.c): the routed experts'
 * gradients (ZeRO-2) and weights (ZeRO-3) sharded over edp like their
 * optimizer states, the rest over d x c; hybrid sharding refused. */
static void test_expert_zero_shards(void **state)
{
    (void)state;
    double one = 3.0 * 4096 * 14336, local = 32.0 * one, edp = 8.0; /* 64 / ep 8 */
    mp_estimate e;
    mp_error err;
    for (int zero = 2; zero <= 3; zero++) {
        mp_config c = moe_config("mixtral-8x7b", 64, 1, 8, 1);
        c.training.global_batch = 64;
        c.parallel.zero = zero;
        if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
            fail_msg("%s: %s", err.field, err.msg);
        double rest = mp_model_params(&c.model) - 8.0 * local;
        /* 16-bit gradients under ZeRO-2/3 (memory.c), 2 bytes */
        assert_true(fabs(e.memory.expert_grads / (2.0 * local / edp) - 1.0) < 1e-12);
        assert_true(fabs(e.memory.grads / (2.0 * (rest / 64.0 + local / edp)) - 1.0) < 1e-12);
        double w = zero == 3 ? 2.0 * local / edp : 2.0 * local;
        assert_true(fabs(e.memory.expert_weights / w - 1.0) < 1e-12);
        assert_true(fabs(e.memory.expert_optimizer / (12.0 * local / edp) - 1.0) < 1e-12);
    }
    mp_config c = moe_config("mixtral-8x7b", 64, 1, 8, 1);
    c.parallel.zero = 3;
    c.parallel.hsdp = true;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_EINPUT);
    assert_string_equal(err.field, "hsdp");
}

/* Blocks 0..15 with first_dense 1 and layer_freq 2: MoE blocks 2, 4, ..., 14
 * (7 of them); the estimate costs each block by its own kind. */
static void test_layer_pattern_in_estimate(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 8, 1, 8, 1);
    c.model.moe.first_dense = 1;
    c.model.moe.layer_freq = 2;
    c.training.global_batch = 8;
    mp_estimate e;
    mp_error err;
    if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
        fail_msg("%s: %s", err.field, err.msg);
    double local = 8.0 * 3 * 2048 * 1024; /* 64 experts / ep 8 */
    assert_true(fabs(e.memory.expert_weights / (2.0 * 7 * local) - 1.0) < 1e-12);
}

/* Megatron-Core's rules for the expert split. */
static void test_split_refusals(void **state)
{
    (void)state;
    mp_estimate e;
    mp_error err;
    mp_config c = moe_config("mixtral-8x7b", 64, 1, 3, 1);
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_EINPUT);
    assert_string_equal(err.field, "ep"); /* 3 does not divide 8 experts */
    c = moe_config("mixtral-8x7b", 64, 2, 8, 0);
    c.parallel.sp = false;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_EINPUT);
    assert_string_equal(err.field, "sp");
    c = moe_config("olmoe-1b-7b", 16, 1, 32, 1); /* etp*ep = 32 > 16 ranks */
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_EINPUT);
    assert_string_equal(err.field, "ep");
}

/* DeepSeek-V3's multi-token-prediction module by hand: its forward FLOPs
 * per sequence are a 2h -> h projection, one more MoE block and the output
 * head again; on the last stage only (Megatron's default placement): the
 * head item grows by the module's time, weights and activations, and the
 * blocks and the embedding do not change. */
static void test_mtp_by_hand(void **state)
{
    (void)state;
    mp_model m = *mp_model_preset("deepseek-v3");
    double base = mp_model_flops(&m, 4096, 1);
    m.mtp_layers = 1;
    mp_block_shape last;
    mp_block_shape_of(&m, 4096, 61, &last);
    assert_int_equal(last.kind, MP_BLOCK_MOE);
    double h = 7168.0;
    double one = 2.0 * 4096 * 2 * h * h + mp_block_fwd_flops(&m, &last) +
                 2.0 * 4096 * h * 129280;
    assert_true(fabs(mp_mtp_fwd_flops(&m, 4096) / one - 1.0) < 1e-12);
    assert_true(fabs((mp_model_flops(&m, 4096, 1) - base) / (3.0 * one) - 1.0) < 1e-12);
    assert_true(mp_model_params(&m) == mp_model_params(mp_model_preset("deepseek-v3")));
    assert_true(mp_mtp_module_params(&m) ==
                3 * h + 2 * h * h + mp_block_params(&m, MP_BLOCK_MOE));

    mp_config c = moe_config("deepseek-v3", 256, 1, 8, 1);
    c.parallel.pp = 4;
    c.parallel.dp = 64;
    c.training.global_batch = 256;
    mp_item_cost *a = calloc(63, sizeof *a), *b = calloc(63, sizeof *b);
    mp_error err;
    assert_int_equal(mp_item_costs(&c, a, &err), MP_OK);
    c.model.mtp_layers = 1;
    assert_int_equal(mp_item_costs(&c, b, &err), MP_OK);
    for (int i = 0; i <= 61; i++) {
        assert_true(a[i].fwd == b[i].fwd);
        assert_true(a[i].static_bytes == b[i].static_bytes);
    }
    /* the head item: at least a block, the head again and the embedding's copy */
    assert_true(b[62].fwd >= a[62].fwd + a[61].fwd + a[62].fwd * 0.99);
    assert_true(b[62].static_bytes > a[62].static_bytes + a[61].static_bytes);
    assert_true(b[62].act_bytes[MP_RECOMPUTE_NONE] >
                a[62].act_bytes[MP_RECOMPUTE_NONE] + a[61].act_bytes[MP_RECOMPUTE_NONE]);
    free(a);
    free(b);
    /* Megatron's flags for them */
    mp_buf f;
    mp_buf_init(&f);
    mp_megatron_moe_args(&c, &f);
    assert_non_null(strstr(f.data, "--mtp-num-layers 1 \\\n--mtp-loss-scaling-factor 0.1 \\\n"));
    mp_buf_free(&f);
    /* refused where it means nothing */
    m = *mp_model_preset("deepseek-v3");
    m.mtp_loss_scale = 0.3;
    expect_refused(m, "mtp_loss_scale");
    m = *mp_model_preset("t5-11b");
    m.mtp_layers = 1;
    expect_refused(m, "mtp_layers");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_counts), cmocka_unit_test(test_gpt_oss_counts),
        cmocka_unit_test(test_mixtral_block_by_hand),
        cmocka_unit_test(test_deepseek_mla_by_hand),
        cmocka_unit_test(test_moe_block_placement),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_expert_split_by_hand),
        cmocka_unit_test(test_mtp_by_hand),
        cmocka_unit_test(test_alltoall_volume),
        cmocka_unit_test(test_moe_block_tp_collectives),
        cmocka_unit_test(test_alltoall_sort_by_expert),
        cmocka_unit_test(test_expert_launches_by_hand),
        cmocka_unit_test(test_expert_optimizer_shard),
        cmocka_unit_test(test_expert_zero_shards),
        cmocka_unit_test(test_split_refusals),
        cmocka_unit_test(test_layer_pattern_in_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
