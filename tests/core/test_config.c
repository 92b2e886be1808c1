/* mp_config_check: each kind of configuration that cannot run is refused
 * with the field at fault and a reason that says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/io.h"
#include "core/layout.h"

#include "../config_fixture.h"

/* GPT-3 175B, t8 p8 d16 on 1024 A100s, training 300B tokens */
static mp_config base(void)
{
    mp_config c = gpt3_175b_config(8, 1);
    c.training.tokens = 3e11;
    return c;
}

static void expect(const mp_config *c, const char *field, const char *part)
{
    mp_error err;
    mp_error_clear(&err);
    mp_status st = mp_config_check(c, &err);
    if (!field) {
        if (st != MP_OK)
            fail_msg("refused: %s: %s", err.field, err.msg);
        return;
    }
    if (st != MP_EINPUT)
        fail_msg("accepted, expected %s: %s", field, part);
    assert_string_equal(err.field, field);
    if (!strstr(err.msg, part))
        fail_msg("message '%s' lacks '%s'", err.msg, part);
}

static void test_valid(void **state)
{
    (void)state;
    mp_config c = base();
    expect(&c, NULL, NULL);
    assert_int_equal(mp_config_microbatches(&c), 96);
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, NULL, NULL);
    c = base();
    c.parallel.tp = 1;
    c.parallel.sp = false;
    c.parallel.pp = 1;
    c.parallel.dp = 1024;
    c.training.global_batch = 2048;
    expect(&c, NULL, NULL);
    assert_int_equal(mp_config_microbatches(&c), 2);
}

static void test_refusals(void **state)
{
    (void)state;
    mp_config c = base();
    c.parallel.tp = 5; /* 96 heads */
    c.parallel.dp = 1024 / 40;
    expect(&c, "tp", "does not divide the 96 attention heads");

    c = base();
    c.model = *mp_model_preset("llama3-70b");
    c.training.seq = 8192;
    c.parallel.tp = 16;
    c.parallel.pp = 4;
    expect(&c, "tp", "key/value heads");

    /* Megatron's column/row-parallel MLP divides ffn_hidden by tp: a width
     * tp does not divide stops it at start-up (was accepted) */
    c = base();
    c.model.ffn_hidden = 49156; /* 4 * 12289 */
    expect(&c, "tp", "does not divide the FFN size 49156");
    c.parallel.tp = 4; /* divides it: accepted */
    c.parallel.dp = 32;
    expect(&c, NULL, NULL);

    c = base();
    c.training.gpus = 1000;
    expect(&c, "gpus", "not a multiple of tp*pp*cp");

    c = base();
    c.parallel.dp = 8;
    expect(&c, "dp", "but there are 1024 GPUs");

    c = base();
    c.training.global_batch = 1000;
    expect(&c, "global_batch", "multiple of micro_batch*dp");

    c = base();
    c.parallel.micro_batch = 5;
    expect(&c, "global_batch", "5*16");

    c = base();
    c.parallel.pp = 32; /* 96 layers, 32 stages: fine */
    c.parallel.dp = 4;
    expect(&c, NULL, NULL);
    c.parallel.pp = 64; /* Megatron's first/last-stage split: 17, 1 x 62, 17 */
    c.parallel.dp = 2;
    expect(&c, NULL, NULL);
    c.parallel.pp = 128; /* more stages than layers */
    c.parallel.dp = 1;
    expect(&c, "pp", "cannot be split");

    c = base();
    c.parallel.vpp = 5; /* 96 / (8*5), and 98 / 40: no split without an explicit layout */
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "vpp", "do not split into");
    c.parallel.pp = 2; /* (96 + 2) / (2*7): embedding and loss take a layer's place */
    c.parallel.vpp = 7;
    c.parallel.dp = 64;
    expect(&c, NULL, NULL);
    assert_int_equal(mp_blocks_before_stage(96, 14, 7, 0, 1), 6); /* embedding + 6 blocks */
    assert_int_equal(mp_blocks_before_stage(96, 14, 7, 0, 13), 90); /* 6 blocks + head last */
    assert_int_equal(mp_blocks_before_stage(96, 14, 1, 0, 1), 6); /* vpp 1: the same */
    assert_int_equal(mp_blocks_before_stage(96, 14, 1, 0, 13), 90);
    /* Llama 3 405B as Meta ran it: 126 layers on pp 16, one fewer on the first and last */
    mp_uneven u;
    assert_true(mp_uneven_split(126, 16, 0, &u));
    assert_true(u.first == 7 && u.middle == 8 && u.last == 7 && u.lighter == 0);
    assert_int_equal(mp_blocks_before_stage(126, 16, 1, 0, 1), 7);
    assert_int_equal(mp_blocks_before_stage(126, 16, 1, 0, 15), 119);

    c = base();
    c.parallel.vpp = 2;
    expect(&c, "schedule", "needs schedule interleaved-1f1b");
    c.parallel.vpp = 1;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "schedule", "needs vpp >= 2");

    c = base();
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    c.training.global_batch = 16 * 12; /* 12 micro-batches, pp 8 */
    expect(&c, "global_batch", "multiple of pp");

    c = base();
    c.parallel.pp = 1;
    c.parallel.vpp = 2;
    c.parallel.dp = 128;
    c.training.global_batch = 1536;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "vpp", "pp >= 2");

    c = base();
    c.parallel.tp = 1;
    c.parallel.dp = 128;
    c.training.global_batch = 1536;
    expect(&c, "sp", "needs tp > 1");

    c = base();
    c.parallel.tp_overlap = true;
    c.parallel.sp = false;
    expect(&c, "tp_overlap", "sp");

    c = base();
    c.training.seq = 4096; /* learned positions: 2048 */
    expect(&c, "seq", "learned positions");

    c = base();
    c.parallel.cp = 2;
    c.parallel.dp = 8;
    expect(&c, "cp", "fused (flash) attention"); /* dgx-a100: the unfused stack of 2021-22 */
    c.hw.flash_attention = true;
    expect(&c, NULL, NULL);
    c.training.seq = 2046;
    expect(&c, "cp", "2*cp");

    c = base();
    c.model = *mp_model_preset("t5-11b");
    c.training.seq = 512;
    c.parallel.tp = 8;
    c.parallel.pp = 4;
    c.parallel.cp = 2;
    c.parallel.dp = 16;
    c.training.global_batch = 128;
    c.hw.flash_attention = true;
    expect(&c, "cp", "GPT/LLaMA");

    c = base();
    c.training.precision = MP_DTYPE_TF32;
    expect(&c, "precision", "bf16, fp16, fp32 or fp8");
    /* dgx-a100 has no FP8 tensor cores: refused, naming the field */
    c.training.precision = MP_DTYPE_FP8;
    expect(&c, "precision", "no fp8 rate");
    c.training.precision = MP_DTYPE_FP16;
    c.hw.peak_flops[MP_DTYPE_FP16] = 0;
    expect(&c, "precision", "no fp16 rate");
    /* H100: fp8 runs with the Hopper recipes; mxfp8 needs Blackwell */
    c = base();
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &(mp_error){0}), MP_OK);
    c.hw.flash_attention = true;
    c.training.precision = MP_DTYPE_FP8;
    for (int r = MP_FP8_DELAYED; r <= MP_FP8_BLOCKWISE; r++) {
        c.training.fp8_recipe = (mp_fp8_recipe)r;
        expect(&c, NULL, NULL);
    }
    c.training.fp8_recipe = MP_FP8_MXFP8;
    expect(&c, "fp8_recipe", "Blackwell");
    assert_int_equal(mp_hw_preset("b200", &c.hw, &(mp_error){0}), MP_OK);
    expect(&c, NULL, NULL);

    c = base();
    c.parallel.schedule = MP_SCHED_ZBH1;
    expect(&c, NULL, NULL);

    c = base();
    c.parallel.tp = 0;
    expect(&c, "tp", "at least 1");
    c = base();
    c.parallel.micro_batch = -1;
    expect(&c, "micro_batch", "at least 1");
    c = base();
    c.training.gpus = 0;
    expect(&c, "gpus", "at least 1");
    /* products that would overflow int64 are refused, not wrapped */
    c = base();
    c.parallel.tp = 1 << 24;
    c.parallel.pp = 1 << 24;
    c.parallel.cp = 1 << 24;
    c.parallel.dp = 1 << 24;
    c.model.heads = c.model.kv_heads = c.model.ffn_hidden = 1 << 24;
    expect(&c, "gpus", "overflows");
}

/* A stage's work in the units mp_uneven_split balances: its blocks, the
 * embedding (1) on the first, the head and loss (1) and each MTP module (2)
 * on the last. */
static int64_t units(int64_t blocks, int64_t n, int64_t k, int64_t mtp)
{
    return blocks + (k == 0) + (k == n - 1 ? 1 + 2 * mtp : 0);
}

/* A default split with vpp > 1 where neither the layers nor the layers + 2
 * divide into the stages: what Megatron-Core builds for
 * --decoder-first-pipeline-num-layers F --decoder-last-pipeline-num-layers
 * L' --num-virtual-stages-per-pipeline-rank vpp (transformer_block.py
 * get_num_layers_to_build: every chunk of rank 0 F/vpp blocks, of the last
 * rank L'/vpp, of a middle rank (L - F - L')/(pp - 2)/vpp), for flags that
 * pass transformer_config.py's checks; and no F, L' that pass them make the
 * busiest rank do less work. */
static void check_vpp_flag_split(int64_t L, int64_t pp, int64_t vpp, int64_t mtp,
                                 const int64_t *blocks)
{
    int64_t n = pp * vpp, F = 0, Lz = 0;
    for (int64_t c = 0; c < vpp; c++) {
        F += blocks[c * pp];
        Lz += blocks[c * pp + pp - 1];
    }
    int64_t mid_layers = L - F - Lz, mids = pp - 2;
    /* the checks */
    assert_true(F > 0 && F % vpp == 0 && Lz > 0 && Lz % vpp == 0);
    assert_int_equal(mid_layers != 0, mids != 0);
    if (mids) {
        assert_int_equal(mid_layers % mids, 0);
        assert_int_equal(mid_layers / mids % vpp, 0);
    }
    /* Megatron's build */
    for (int64_t k = 0; k < n; k++) {
        int64_t r = k % pp;
        assert_int_equal(blocks[k], r == 0        ? F / vpp
                                    : r == pp - 1 ? Lz / vpp
                                                  : mid_layers / mids / vpp);
    }
    /* the busiest rank's work, against every F, L' Megatron accepts */
    int64_t mid = mids ? mid_layers / mids : 0, worst = F + 1;
    worst = Lz + 1 + 2 * mtp > worst ? Lz + 1 + 2 * mtp : worst;
    worst = mids && mid > worst ? mid : worst;
    for (int64_t f = vpp; f < L; f += vpp)
        for (int64_t l = vpp; f + l <= L; l += vpp) {
            int64_t rest = L - f - l;
            if ((rest != 0) != (mids != 0) || (mids && (rest % mids || rest / mids % vpp)))
                continue;
            int64_t w = f + 1 > l + 1 + 2 * mtp ? f + 1 : l + 1 + 2 * mtp;
            w = mids && rest / mids > w ? rest / mids : w;
            assert_true(worst <= w);
        }
}

/* The default split, for every (layers, pp, vpp) Megatron accepts without a
 * layout and 0-2 MTP modules: every stage holds at least one block, the
 * blocks are used once each in order; the split is one Megatron can run: as
 * the --pipeline-model-parallel-layout megatron.c writes (parsed by
 * mp_layout_parse, which applies PipelineParallelLayerLayout's checks) and,
 * where lighter is 0, by the first/last-stage flags (transformer_config.py:
 * first, last >= 1, the middle stages equal and non-empty); with vpp 1 its
 * slowest stage does no more work than that of any split the first/last
 * flags (or the embedding/loss accounting, which with vpp 1 are such
 * splits) can make, and no more than any split at all (the lower bound: the
 * average, and the last stage's head and MTP over one block); and where the
 * flags do as well, they are what it uses. */
static void test_uneven_split_property(void **state)
{
    (void)state;
    static int64_t blocks[MP_MAX_STAGES];
    static char text[16384];
    static mp_layout lay;
    int64_t checked = 0, layouts = 0, vpp_flags = 0;
    for (int64_t L = 2; L <= 130; L += L < 70 ? 1 : 7)
        for (int64_t pp = 2; pp <= 40 && pp <= L; pp++)
            for (int64_t vpp = 1; vpp <= 4; vpp++)
                for (int64_t mtp = 0; mtp <= 2; mtp++) {
                    int64_t n = pp * vpp;
                    if (!mp_stage_split_ok(L, pp, vpp))
                        continue;
                    checked++;
                    /* every block once, none left out, no empty stage */
                    int64_t total = 0, worst = 0;
                    for (int64_t k = 0; k < n; k++) {
                        blocks[k] = mp_blocks_before_stage(L, n, vpp, mtp, k + 1) -
                                    mp_blocks_before_stage(L, n, vpp, mtp, k);
                        if (blocks[k] < 1)
                            fail_msg("L %lld pp %lld vpp %lld mtp %lld: stage %lld holds %lld",
                                     (long long)L, (long long)pp, (long long)vpp,
                                     (long long)mtp, (long long)k, (long long)blocks[k]);
                        total += blocks[k];
                        int64_t w = units(blocks[k], n, k, mtp);
                        worst = w > worst ? w : worst;
                    }
                    assert_int_equal(mp_blocks_before_stage(L, n, vpp, mtp, 0), 0);
                    assert_int_equal(total, L);
                    /* Megatron runs it: its layout grammar and checks */
                    size_t at = 0;
                    for (int64_t k = 0; k < n; k++) {
                        at += (size_t)snprintf(text + at, sizeof text - at, "%s%st*%lld",
                                               k ? "|" : "", k ? "" : "E", (long long)blocks[k]);
                        if (k == n - 1) {
                            for (int64_t j = 0; j < mtp; j++)
                                at += (size_t)snprintf(text + at, sizeof text - at, "m");
                            at += (size_t)snprintf(text + at, sizeof text - at, "L");
                        }
                    }
                    mp_error err;
                    if (mp_layout_parse(text, pp, vpp, L, mtp, &lay, &err) != MP_OK)
                        fail_msg("L %lld pp %lld vpp %lld: %s: %s", (long long)L,
                                 (long long)pp, (long long)vpp, text, err.msg);
                    if (vpp > 1 && (L % n == 0 || (L + 2) % n == 0))
                        continue; /* even, or the embedding and loss counted as layers */
                    if (vpp > 1) { /* the first/last-stage flags */
                        vpp_flags++;
                        check_vpp_flag_split(L, pp, vpp, mtp, blocks);
                        continue;
                    }
                    if (L % n == 0)
                        continue;
                    mp_uneven u;
                    assert_true(mp_uneven_split(L, n, mtp, &u));
                    if (u.lighter == 0) /* the flags: middle stages equal */
                        for (int64_t k = 1; k < n - 1; k++)
                            assert_int_equal(blocks[k], blocks[1]);
                    else
                        layouts++;
                    /* no worse than any split at all: the lower bound, reached */
                    int64_t sum_units = L + 2 + 2 * mtp, bound = (sum_units + n - 1) / n;
                    bound = bound > 2 + 2 * mtp ? bound : 2 + 2 * mtp;
                    assert_int_equal(worst, bound);
                    /* no worse than any first/last choice; the flags when one ties */
                    bool flags_tie = false;
                    for (int64_t first = 1; first < L; first++)
                        for (int64_t last = 1; first + last <= L; last++) {
                            int64_t rest = L - first - last, mid = 0;
                            if (n > 2 && (rest < n - 2 || rest % (n - 2)))
                                continue;
                            if (n == 2 && rest)
                                continue;
                            mid = n > 2 ? rest / (n - 2) : 0;
                            int64_t w = units(first, n, 0, mtp);
                            w = units(last, n, n - 1, mtp) > w ? units(last, n, n - 1, mtp) : w;
                            w = mid > w ? mid : w;
                            assert_true(worst <= w);
                            flags_tie |= w == worst;
                        }
                    assert_int_equal(u.lighter == 0, flags_tie);
                }
    printf("uneven split property: %lld splits checked, %lld need a layout, %lld by the "
           "first/last-stage flags with vpp > 1\n",
           (long long)checked, (long long)layouts, (long long)vpp_flags);
    assert_true(vpp_flags > 100);
    assert_true(checked > 7000);
    assert_true(layouts > 1000);
}

/* DeepSeek-V3's 61 layers on pp 32 (issue 11, "Uneven pipeline stages"):
 * the first/last flags can do no better than 16, 1 x 30, 15 (the middle
 * stages equal: 1 each, the ends sharing 31); the default is a layout, 1,
 * 2 x 29, 1, 1, its slowest stage two units of work, not 16 blocks. */
static void test_uneven_split_61_on_32(void **state)
{
    (void)state;
    for (int64_t mtp = 0; mtp <= 1; mtp++) {
        mp_uneven u;
        assert_true(mp_uneven_split(61, 32, mtp, &u));
        assert_true(u.first == 1 && u.middle == 2 && u.lighter == 1 && u.last == 1);
        assert_int_equal(mp_blocks_before_stage(61, 32, 1, mtp, 1), 1);
        assert_int_equal(mp_blocks_before_stage(61, 32, 1, mtp, 30), 59);
        assert_int_equal(mp_blocks_before_stage(61, 32, 1, mtp, 31), 60);
    }
    /* where the flags do as well they are used: 61 on 31, 60 + 1 on the
     * first and last ... the middle 29 stages 2 each, the ends 2 and 1 */
    mp_uneven u;
    assert_true(mp_uneven_split(61, 31, 0, &u));
    assert_int_equal(u.lighter, 0);
    assert_true(u.middle == 2 && u.first + u.last == 3 && u.first >= 1 && u.last >= 1);
    /* an MTP module on the last stage: 62 layers on 4 stages, 16, 16, 16, 14
     * (units 17, 16, 16, 17) rather than 16, 15, 15, 16 (17 and 19) */
    assert_true(mp_uneven_split(62, 4, 1, &u));
    assert_true(u.first + 2 * u.middle - u.lighter + u.last == 62);
    assert_true(u.last + 3 <= 17 && u.first + 1 <= 17);
}

/* A plan with c's default stages passes mp_plan_check; with the cut between
 * its first two stages moved to item `cut` it is refused, the message saying
 * `says` (the split the configuration gives). */
static void moved_cut_refused(const mp_config *c, int32_t cut, const char *says)
{
    mp_plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->config = *c;
    mp_plan_default_stages(p);
    mp_error err;
    assert_int_equal(mp_plan_check(p, &err), MP_OK);
    p->stages[0].end = cut;
    p->stages[1].begin = cut;
    assert_int_equal(mp_plan_check(p, &err), MP_EINPUT);
    if (!strstr(err.msg, says))
        fail_msg("refused with '%s', expected '%s'", err.msg, says);
    free(p);
}

/* Megatron's first/last-stage flags as given (parallel.first_stage_layers,
 * last_stage_layers): transformer_config.py's checks refuse what Megatron
 * refuses, and the stages are what transformer_block.py builds (every chunk
 * of a rank a vpp-th of its rank's count). GPT-3 175B: 96 layers. */
static void test_stage_layer_flags(void **state)
{
    (void)state;
    mp_config c = base();
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    c.parallel.first_stage_layers = 8;
    c.parallel.last_stage_layers = 16; /* 72 left: 12 on each of 6 middle ranks */
    expect(&c, NULL, NULL);
    mp_stage_range st[16];
    mp_config_stages(&c, 16, st);
    int32_t want[16][2] = {{0, 5},   {5, 11},  {11, 17}, {17, 23}, {23, 29}, {29, 35},
                           {35, 41}, {41, 49}, {49, 53}, {53, 59}, {59, 65}, {65, 71},
                           {71, 77}, {77, 83}, {83, 89}, {89, 98}};
    for (int k = 0; k < 16; k++)
        if (st[k].begin != want[k][0] || st[k].end != want[k][1])
            fail_msg("stage %d: [%d, %d), expected [%d, %d)", k, st[k].begin, st[k].end,
                     want[k][0], want[k][1]);
    /* the plan's default stages are the same, and a plan saying otherwise is refused */
    moved_cut_refused(&c, 6, "parallel.first_stage_layers gives it [0, 5)");
    /* transformer_config.py's refusals */
    c.parallel.first_stage_layers = 9;
    expect(&c, "first_stage_layers", "9 layers on the first rank must be a multiple of vpp=2");
    c.parallel.first_stage_layers = 8;
    c.parallel.last_stage_layers = 15;
    expect(&c, "last_stage_layers", "15 layers on the last rank must be a multiple of vpp=2");
    c.parallel.last_stage_layers = 18; /* 70 left for 6 ranks */
    expect(&c, "first_stage_layers", "the 70 layers left do not divide among the 6 middle");
    c.parallel.first_stage_layers = 12; /* 66 left: 11 a rank, odd */
    expect(&c, "first_stage_layers",
           "11 layers on each of the 6 middle ranks must be a multiple of vpp=2");
    c.parallel.first_stage_layers = 50;
    c.parallel.last_stage_layers = 50;
    expect(&c, "first_stage_layers", "50 + 50 layers are more than the model's 96");
    /* only the first given: the last rank is a middle one */
    c.parallel.first_stage_layers = 12;
    c.parallel.last_stage_layers = 0; /* 84 left: 12 on each of 7 ranks */
    expect(&c, NULL, NULL);
    /* pp 2: no middle rank may be left layers */
    c.parallel.pp = 2;
    c.parallel.dp = 64;
    c.parallel.first_stage_layers = 40;
    c.parallel.last_stage_layers = 50;
    expect(&c, "first_stage_layers",
           "the first and last ranks' 40 + 50 layers leave 6 of the model's 96 with no rank "
           "to hold them (pp=2 has no middle ranks)");
    /* one given at pp 2: the rank left is the last, not a middle one (it said
     * "0 layers left for 1 middle ranks") */
    c.parallel.first_stage_layers = 96;
    c.parallel.last_stage_layers = 0;
    expect(&c, "first_stage_layers",
           "the first rank's 96 layers leave none of the model's 96 for the other rank");
    c.parallel.first_stage_layers = 40;
    c.parallel.last_stage_layers = 50;
    c.parallel.last_stage_layers = 56;
    expect(&c, NULL, NULL);
    /* with a layout (Megatron: "cannot be set with other pipeline layout arguments") */
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "Et*40|t*8|t*8|t*40L");
    expect(&c, "first_stage_layers", "cannot be given with pipeline_layout");
    c.parallel.pipeline_layout[0] = '\0';
    /* no pipeline */
    c.parallel.pp = 1;
    c.parallel.vpp = 1;
    c.parallel.schedule = MP_SCHED_1F1B;
    c.parallel.dp = 128;
    expect(&c, "first_stage_layers", "needs pipeline parallelism");
}

/* Megatron's account-for split (parallel.account_for_embedding,
 * account_for_loss): transformer_config.py's checks (L + e + l over pp, each
 * rank's units over vpp), transformer_block.py's stages (every virtual stage
 * (L + e + l) / (pp vpp) units, the first and last one block fewer).
 * GPT-3 175B: 96 layers. */
static void stages_are(const mp_config *c, int64_t n, const int32_t (*want)[2])
{
    mp_stage_range st[128];
    mp_config_stages(c, n, st);
    for (int64_t k = 0; k < n; k++)
        if (st[k].begin != want[k][0] || st[k].end != want[k][1])
            fail_msg("stage %lld: [%d, %d), expected [%d, %d)", (long long)k, st[k].begin,
                     st[k].end, want[k][0], want[k][1]);
}

static void test_account_split(void **state)
{
    (void)state;
    mp_config c = base();
    c.parallel.account_for_embedding = c.parallel.account_for_loss = true;
    /* 98 units on 8 ranks */
    expect(&c, "account_for_embedding",
           "the 96 layers + the embedding + the loss = 98 do not divide among pp=8 ranks");
    c.parallel.account_for_embedding = false;
    expect(&c, "account_for_loss", "the 96 layers + the loss = 97 do not divide among pp=8");
    c.parallel.account_for_embedding = true;
    /* pp 2: 49 units a rank, 48 blocks each */
    c.parallel.pp = 2;
    c.parallel.dp = 64;
    expect(&c, NULL, NULL);
    const int32_t two[2][2] = {{0, 49}, {49, 98}};
    stages_are(&c, 2, two);
    /* vpp 2: 49 units a rank do not split into 2 chunks */
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "account_for_embedding",
           "49 layers (the embedding and loss counted) on each rank must be a multiple of vpp=2");
    /* vpp 7: 14 chunks of 7 units, the first 6 blocks and the embedding, the
     * last 6 blocks and the head */
    c.parallel.vpp = 7;
    c.training.global_batch = 1536; /* 24 micro-batches a rank of dp 64: a multiple of pp */
    expect(&c, NULL, NULL);
    int32_t fourteen[14][2];
    for (int k = 0; k < 14; k++) {
        fourteen[k][0] = k == 0 ? 0 : 7 * k;
        fourteen[k][1] = k == 13 ? 98 : 7 * k + 7;
    }
    stages_are(&c, 14, (const int32_t (*)[2])fourteen);
    /* vpp 49: pp*vpp = 98 = L + 2, the first and last chunk the embedding and the loss alone */
    c.parallel.vpp = 49;
    c.training.global_batch = 64 * 2 * 12;
    expect(&c, NULL, NULL);
    mp_stage_range st[98];
    mp_config_stages(&c, 98, st);
    assert_true(st[0].begin == 0 && st[0].end == 1);
    assert_true(st[1].begin == 1 && st[1].end == 2);
    assert_true(st[96].begin == 96 && st[96].end == 97);
    assert_true(st[97].begin == 97 && st[97].end == 98);
    /* its form, as the exporter names it */
    mp_split_form f = mp_split_form_of(&c, st, 98);
    assert_int_equal(f.kind, MP_SPLIT_ACCOUNT);
    assert_true(f.embedding && f.loss);
    /* and a plan's stages are checked against it */
    moved_cut_refused(&c, 2, "parallel.account_for_embedding gives it [0, 1)");
    /* without the flags the same pp*vpp is refused, the message naming them */
    c.parallel.account_for_embedding = c.parallel.account_for_loss = false;
    expect(&c, "vpp", "set account_for_embedding and account_for_loss");
    c.parallel.account_for_embedding = c.parallel.account_for_loss = true;
    /* Megatron: not with a layout, not with the first/last-stage layers */
    snprintf(c.parallel.pipeline_layout, sizeof c.parallel.pipeline_layout, "E|(t|)*96L");
    expect(&c, "account_for_embedding", "cannot be given with pipeline_layout");
    c.parallel.pipeline_layout[0] = '\0';
    c.parallel.vpp = 1;
    c.parallel.schedule = MP_SCHED_1F1B;
    c.parallel.first_stage_layers = 48;
    expect(&c, "first_stage_layers", "cannot be given with account_for_embedding");
    c.parallel.first_stage_layers = 0;
    /* the loss alone: 97 units do not divide among 2 ranks; the embedding alone neither */
    c.parallel.account_for_embedding = false;
    expect(&c, "account_for_loss", "97 do not divide among pp=2 ranks");
    /* pp 1: Megatron accepts the flags, and nothing is split */
    c.parallel.pp = 1;
    c.parallel.dp = 128;
    expect(&c, NULL, NULL);
}

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < MP_RECOMPUTE_COUNT; i++)
        assert_int_equal(mp_recompute_parse(mp_recompute_name((mp_recompute)i)), i);
    for (int i = 0; i < MP_SCHED_COUNT; i++)
        assert_int_equal(mp_schedule_parse(mp_schedule_name((mp_schedule_kind)i)), i);
    assert_int_equal(mp_schedule_parse("interleaved-1f1b"), MP_SCHED_INTERLEAVED);
    assert_int_equal(mp_schedule_parse("zb-h1"), MP_SCHED_ZBH1);
    assert_int_equal(mp_schedule_parse("1F1B"), -1);
    assert_int_equal(mp_recompute_parse(NULL), -1);
    assert_string_equal(mp_recompute_name((mp_recompute)99), "?");
}

/* The V schedules' own default split (mp_v_stage_blocks) where neither L
 * nor L + 2 is a multiple of the 2pp stages: every block placed once, a
 * block in every stage, each rank's work (rank 0 holding the embedding, the
 * head and the MTP modules: 2 + 2 mtp units more) at most the least level
 * ceil((L + e) / pp) can hold, or, where rank 0 cannot come down to it (a
 * block in each of its stages), the other ranks within one block of each
 * other. DeepSeek-V3's 61 on pp 16: 1 + 1 on rank 0, 2 + 2 on ranks 1-14,
 * 2 + 1 on rank 15. Interleaved 1F1B keeps Megatron's refusal; a plan's own
 * stages (mp_config_check_with_stages) pass under every schedule. */
static void test_v_default_split(void **state)
{
    (void)state;
    for (int64_t mtp = 0; mtp <= 2; mtp++)
        for (int64_t pp = 2; pp <= 24; pp++)
            for (int64_t L = 2 * pp; L <= 8 * pp + 3; L++) {
                int64_t e = 2 + 2 * mtp, sum = 0, lo = INT64_MAX, hi = 0, top = 0;
                for (int64_t r = 0; r < pp; r++) {
                    int64_t b = mp_v_rank_blocks(L, pp, mtp, r);
                    int64_t c0 = mp_v_stage_blocks(L, pp, mtp, r);
                    int64_t c1 = mp_v_stage_blocks(L, pp, mtp, 2 * pp - 1 - r);
                    assert_int_equal(c0 + c1, b);
                    assert_true(c0 >= 1 && c1 >= 1 && c0 - c1 >= 0 && c0 - c1 <= 1);
                    sum += b;
                    if (r > 0) {
                        lo = b < lo ? b : lo;
                        hi = b > hi ? b : hi;
                    }
                    top = b + (r == 0 ? e : 0) > top ? b + (r == 0 ? e : 0) : top;
                }
                assert_int_equal(sum, L);
                int64_t level = (L + e + pp - 1) / pp;
                if (level - e >= 2)
                    assert_true(top <= level);
                else
                    assert_true(mp_v_rank_blocks(L, pp, mtp, 0) == 2 && hi - lo <= 1);
            }
    assert_int_equal(mp_v_rank_blocks(61, 16, 1, 0), 2);
    assert_int_equal(mp_v_stage_blocks(61, 16, 1, 0), 1);
    assert_int_equal(mp_v_stage_blocks(61, 16, 1, 31), 1);
    assert_int_equal(mp_v_stage_blocks(61, 16, 1, 1), 2);
    assert_int_equal(mp_v_stage_blocks(61, 16, 1, 15), 2);
    assert_int_equal(mp_v_stage_blocks(61, 16, 1, 16), 1);
    assert_int_equal(mp_v_rank_blocks(61, 16, 0, 15), 3);
    assert_int_equal(mp_v_rank_blocks(31, 16, 0, 0), -1); /* fewer blocks than stages */

    /* the configuration check: 61 layers on pp 8 x vpp 2 */
    mp_config c = base();
    c.model.layers = 61;
    c.parallel.vpp = 2;
    c.parallel.schedule = MP_SCHED_ZBV;
    expect(&c, NULL, NULL);
    c.parallel.schedule = MP_SCHED_DUALPIPEV;
    expect(&c, NULL, NULL);
    mp_stage_range st[16];
    mp_config_stages(&c, 16, st);
    int64_t next = 0;
    for (int k = 0; k < 16; k++) {
        assert_int_equal(st[k].begin, next);
        int64_t want = mp_v_stage_blocks(61, 8, 0, k) + (k == 0) + (k == 15);
        assert_int_equal(st[k].end - st[k].begin, want);
        next = st[k].end;
    }
    assert_int_equal(next, 63);
    c.parallel.schedule = MP_SCHED_INTERLEAVED;
    expect(&c, "vpp", "do not split into pp*vpp");
    mp_error err;
    assert_int_equal(mp_config_check_with_stages(&c, true, &err), MP_OK);
    assert_int_equal(mp_config_check_with_stages(&c, false, &err), MP_EINPUT);
    /* fewer blocks than the V's stages: no default, a plan's stages pass */
    c.model.layers = 15;
    c.parallel.schedule = MP_SCHED_ZBV;
    expect(&c, "vpp", "fewer than the pp*vpp");
    assert_int_equal(mp_config_check_with_stages(&c, true, &err), MP_OK);
    /* a split the configuration gives itself is still checked with stages */
    c.model.layers = 61;
    c.parallel.schedule = MP_SCHED_ZBV;
    c.parallel.first_stage_layers = 4;
    assert_int_equal(mp_config_check_with_stages(&c, true, &err), MP_EINPUT);
    assert_string_equal(err.field, "first_stage_layers");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_stage_layer_flags),
        cmocka_unit_test(test_account_split),
        cmocka_unit_test(test_uneven_split_property),
        cmocka_unit_test(test_uneven_split_61_on_32),
        cmocka_unit_test(test_v_default_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
