/* test_dropout.c — the model's hidden_dropout and attention_dropout in the
 * cost model. Korthikanti et al. 2022 (§4.1, Table 2) count a GPT block's
 * saved activations as sbh(34 + 5as/h) 16-bit bytes with dropout 0.1: of
 * them the two residual branches' 1-byte dropout masks (2sbh) and, in the
 * attention core, the probabilities' 1-byte mask (as²b) and the dropout's
 * 2-byte output (2as²b), which AV reads instead of the softmax output.
 * Without hidden dropout the masks go: sbh(32 + 5as/h); without attention
 * dropout the mask and the output go, AV reading the softmax output that is
 * kept anyway: sbh(34 + 2as/h); without either sbh(32 + 2as/h). Time: the
 * bias+dropout+residual kernel moves 7 bytes an element forward (r4 w2 +
 * mask 1) and 6 without (r4 w2), the backward twice that; the unfused
 * attention's dropout moves r2 w2 + mask 1 a score forward and r3 w2
 * backward (planner/compute.c), nothing with flash attention, which
 * regenerates its mask inside the kernel; the embedding's dropout r2 w2 +
 * mask 1 forward, and in the backward 5 bytes an element against 2 in each
 * of its two passes (planner/compute.c). By hand from docs/cost-model.md. */
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

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9 * fabs(want))
        fail_msg("%s: %.9g, by hand %.9g", what, got, want);
}

/* GPT-3 175B with the given dropouts (the preset trains with 0.1 and 0.1) */
static mp_model gpt3(double hidden, double attention)
{
    mp_model m = *mp_model_preset("gpt3-175b");
    m.hidden_dropout = hidden;
    m.attention_dropout = attention;
    return m;
}

static void test_preset_defaults(void **state)
{
    (void)state;
    const mp_model *g = mp_model_preset("gpt3-175b"), *l = mp_model_preset("llama3-8b");
    assert_true(mp_model_hidden_dropout(g) == 0.1 && mp_model_attention_dropout(g) == 0.1);
    assert_true(mp_model_hidden_dropout(l) == 0.0 && mp_model_attention_dropout(l) == 0.0);
    const mp_model *moe = mp_model_preset("mixtral-8x7b");
    assert_non_null(moe);
    assert_true(mp_model_hidden_dropout(moe) == 0.0 && mp_model_attention_dropout(moe) == 0.0);
    /* a model built in code gets its architecture's from mp_model_finish */
    mp_model c = *g;
    c.hidden_dropout = c.attention_dropout = 0.0;
    c.dropout_set = false;
    assert_true(mp_model_hidden_dropout(&c) == 0.1);
    mp_error err;
    assert_int_equal(mp_model_finish(&c, &err), MP_OK);
    assert_true(c.dropout_set && c.hidden_dropout == 0.1 && c.attention_dropout == 0.1);
}

/* Korthikanti's per-layer formulas, with each dropout off */
static void test_korthikanti_without_dropout(void **state)
{
    (void)state;
    double s = 2048, b = 1, h = 12288, a = 96, t = 8, sbh = s * b * h, as_h = a * s / h;
    mp_model on = gpt3(0.1, 0.1), nohid = gpt3(0.0, 0.1), noattn = gpt3(0.1, 0.0),
             none = gpt3(0.0, 0.0);
    struct {
        const mp_model *m;
        int64_t tp;
        bool sp;
        mp_recompute r;
        double want;
    } cases[] = {
        /* Korthikanti's own, as published (the dropouts on) */
        {&on, 1, false, MP_RECOMPUTE_NONE, sbh * (34 + 5 * as_h)},
        {&on, 8, false, MP_RECOMPUTE_NONE, sbh * (10 + 24 / t + 5 * as_h / t)},
        /* hidden dropout off: its two masks (outside the TP region) go */
        {&nohid, 1, false, MP_RECOMPUTE_NONE, sbh * (32 + 5 * as_h)},
        {&nohid, 8, false, MP_RECOMPUTE_NONE, sbh * (8 + 24 / t + 5 * as_h / t)},
        {&nohid, 8, true, MP_RECOMPUTE_NONE, sbh / t * (32 + 5 * as_h)},
        {&nohid, 8, true, MP_RECOMPUTE_SELECTIVE, 32 * sbh / t},
        /* attention dropout off: the scores' mask and dropout output go */
        {&noattn, 1, false, MP_RECOMPUTE_NONE, sbh * (34 + 2 * as_h)},
        {&noattn, 8, false, MP_RECOMPUTE_NONE, sbh * (10 + 24 / t + 2 * as_h / t)},
        {&noattn, 8, true, MP_RECOMPUTE_SELECTIVE, 34 * sbh / t}, /* the core is recomputed */
        /* neither */
        {&none, 1, false, MP_RECOMPUTE_NONE, sbh * (32 + 2 * as_h)},
        {&none, 8, true, MP_RECOMPUTE_NONE, sbh / t * (32 + 2 * as_h)},
        {&none, 1, false, MP_RECOMPUTE_FULL, 2 * sbh},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = mp_activation_bytes_per_layer(cases[i].m, 2048, 1, cases[i].tp, 1,
                                                   cases[i].sp, cases[i].r);
        if (fabs(got - cases[i].want) > 1e-9 * cases[i].want)
            fail_msg("case %zu: %.9g bytes, by hand %.9g", i, got, cases[i].want);
    }
    /* the difference is exactly the dropout terms: 2sbh + 3as²b */
    near(mp_activation_bytes_per_layer(&on, 2048, 1, 1, 1, false, MP_RECOMPUTE_NONE) -
             mp_activation_bytes_per_layer(&none, 2048, 1, 1, 1, false, MP_RECOMPUTE_NONE),
         2 * sbh + 3 * a * s * s * b, "dropout's share");
    /* a probability is not a size: 0.5 keeps as much as 0.1 */
    mp_model half = gpt3(0.5, 0.5);
    assert_true(mp_activation_bytes_per_layer(&half, 2048, 1, 8, 1, true, MP_RECOMPUTE_NONE) ==
                mp_activation_bytes_per_layer(&on, 2048, 1, 8, 1, true, MP_RECOMPUTE_NONE));
    /* flash attention keeps no scores either way */
    mp_block_shape bs_on, bs_noattn;
    mp_block_shape_of(&on, 2048, 1, &bs_on);
    mp_block_shape_of(&noattn, 2048, 1, &bs_noattn);
    assert_true(mp_block_act_bytes(&on, &bs_on, 1, 8, 1, true, MP_RECOMPUTE_NONE, true) ==
                mp_block_act_bytes(&noattn, &bs_noattn, 1, 8, 1, true, MP_RECOMPUTE_NONE, true));
}

/* GPT-3 175B at t 8 with SP, b 4, on an unfused-attention profile (dgx-a100)
 * or a flash one (dgx-h100): GPU-bound */
static mp_config gpt3_on(const char *hw, double hidden, double attention)
{
    mp_config c = preset_on("gpt3-175b", hw);
    c.model = gpt3(hidden, attention);
    c.training = (mp_training){.gpus = 64, .seq = 2048, .global_batch = 512,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 8, .pp = 8, .vpp = 1, .cp = 1, .dp = 1, .sp = true,
                               .micro_batch = 4, .schedule = MP_SCHED_1F1B};
    return c;
}

static void block_delta(const char *hw, double hidden, double attention, double *df,
                        double *db, double *bw)
{
    mp_config on = gpt3_on(hw, 0.1, 0.1), off = gpt3_on(hw, hidden, attention);
    mp_block_shape bs_on, bs_off;
    mp_block_shape_of(&on.model, 2048, 1, &bs_on);
    mp_block_shape_of(&off.model, 2048, 1, &bs_off);
    mp_block_time a, b;
    mp_block_time_of(&on, &bs_on, &a);
    mp_block_time_of(&off, &bs_off, &b);
    assert_true(a.tp_fwd == b.tp_fwd && a.tp_bwd == b.tp_bwd);
    *df = a.fwd_compute - b.fwd_compute;
    *db = a.bwd_compute - b.bwd_compute;
    *bw = on.hw.hbm_bw * on.hw.memory_efficiency;
}

static void test_block_time(void **state)
{
    (void)state;
    double b = 4, s = 2048, h = 12288, a = 96, t = 8;
    double outside = b * s * h / t;       /* this rank's share of a residual (SP) */
    double scores = b * (a / t) * s * s;  /* this rank's score elements */
    double df, db, bw;
    /* hidden dropout: one mask byte an element in each of the two
     * bias+dropout+residual kernels forward, two backward */
    block_delta("dgx-a100", 0.0, 0.1, &df, &db, &bw);
    near(df, 2.0 * outside / bw, "hidden, forward");
    near(db, 2.0 * 2.0 * outside / bw, "hidden, backward");
    /* attention dropout, unfused: r2 w2 + mask 1 a score forward, r3 w2 backward */
    block_delta("dgx-a100", 0.1, 0.0, &df, &db, &bw);
    near(df, 5.0 * scores / bw, "attention, forward");
    near(db, 7.0 * scores / bw, "attention, backward");
    /* both */
    block_delta("dgx-a100", 0.0, 0.0, &df, &db, &bw);
    near(df, (2.0 * outside + 5.0 * scores) / bw, "both, forward");
    near(db, (4.0 * outside + 7.0 * scores) / bw, "both, backward");
    /* flash attention drops inside its kernel: only the hidden dropout's bytes */
    block_delta("dgx-h100", 0.1, 0.0, &df, &db, &bw);
    assert_true(df == 0.0 && db == 0.0);
    block_delta("dgx-h100", 0.0, 0.0, &df, &db, &bw);
    near(df, 2.0 * outside / bw, "flash, hidden, forward");
}

static void test_embedding(void **state)
{
    (void)state;
    mp_config on = gpt3_on("dgx-a100", 0.1, 0.1), off = gpt3_on("dgx-a100", 0.0, 0.1);
    mp_edge_time a, b;
    mp_embedding_time_of(&on, &a);
    mp_embedding_time_of(&off, &b);
    double T = 4.0 * 2048, h = 12288, bw = on.hw.hbm_bw * on.hw.memory_efficiency;
    /* its dropout: r2 w2 + mask 1 forward; backward 5 against 2 bytes, twice */
    near(a.fwd_compute - b.fwd_compute, 5.0 * T * h / bw, "embedding forward");
    near(a.bwd_compute - b.bwd_compute, 6.0 * T * h / bw, "embedding backward");
    /* the attention dropout is not the embedding's */
    mp_config att = gpt3_on("dgx-a100", 0.1, 0.0);
    mp_embedding_time_of(&att, &b);
    assert_true(a.fwd_compute == b.fwd_compute && a.bwd_compute == b.bwd_compute);
}

/* The whole estimate: 1F1B's first stage holds p = 8 micro-batches of its
 * 12 layers (Korthikanti's L layers' worth of block masks) and 8 embedding
 * masks (sbh/t with SP each). */
static void test_estimate_memory(void **state)
{
    (void)state;
    mp_config on = gpt3_on("dgx-a100", 0.1, 0.1), off = gpt3_on("dgx-a100", 0.0, 0.1);
    on.parallel.recompute = off.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
    mp_estimate a, b;
    mp_error err;
    assert_int_equal(mp_estimate_config(&on, NULL, &a, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&off, NULL, &b, &err), MP_OK);
    double sbh_t = 4.0 * 2048 * 12288 / 8;
    /* 1F1B's first stage: p = 8 micro-batches of its 12 layers, 2 masks each
     * (Korthikanti's L layers' worth), and 8 embedding masks */
    near(a.memory.activations - b.memory.activations, 96 * 2.0 * sbh_t, "block masks");
    /* beyond them the embedding masks and the allocator's fragmentation of
     * the blocks' stash (docs/cost-model.md §3) */
    double frag = on.hw.allocator_fragmentation;
    near((a.memory.peak - a.memory.activations) - (b.memory.peak - b.memory.activations),
         8.0 * sbh_t + frag * 96 * 2.0 * sbh_t, "embedding masks");
    assert_true(a.time.step > b.time.step);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preset_defaults),
        cmocka_unit_test(test_korthikanti_without_dropout),
        cmocka_unit_test(test_block_time),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_estimate_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
