/* test_zero.c — ZeRO-2/3 and FSDP in the cost model: bytes per parameter
 * against the ZeRO paper's worked example, the per-micro-batch gathers and
 * reduce-scatters against the closed form when communication dominates,
 * the configuration rules, and search keeping them to no pipeline. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "search/driver.h"

#include "../config_fixture.h"

static mp_config config(const char *model, const char *hw, int64_t gpus, int64_t gb, int64_t tp,
                        int64_t b, int64_t zero)
{
    mp_config c = preset_on(model, hw);
    c.training = (mp_training){.gpus = gpus, .seq = c.model.seq, .global_batch = gb,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = tp, .pp = 1, .vpp = 1, .cp = 1, .dp = gpus / tp,
                               .micro_batch = b, .dist_opt = zero >= 1, .zero = zero,
                               .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    return c;
}

/* Rajbhandari et al. 2020, Figure 1: 7.5B parameters on 64 data-parallel
 * GPUs with mixed-precision Adam (K = 12): P_os+g 16.6 GB, P_os+g+p 1.9 GB
 * per GPU. (Their P_os, 31.4 GB, keeps 16-bit gradients; Megatron's
 * distributed optimizer, our ZeRO-1, keeps fp32 main gradients instead.) */
static void test_bytes_zero_paper(void **state)
{
    (void)state;
    mp_config c = config("gpt3-1.3b", "dgx-a100", 64, 512, 1, 1, 2);
    double psi = 7.5e9;
    double w, g, o;
    mp_static_bytes(&c, &w, &g, &o);
    assert_true(fabs(psi * (w + g + o) / 1e9 - 16.6) < 0.05);
    c.parallel.zero = 3;
    mp_static_bytes(&c, &w, &g, &o);
    assert_true(fabs(psi * (w + g + o) / 1e9 - 1.9) < 0.05);
    assert_true(w == 2.0 / 64 && g == 2.0 / 64 && o == 12.0 / 64);
    /* ZeRO-1 as Megatron runs it: 6 + 12/d (Megatron-LM's distributed optimizer docs) */
    c.parallel.zero = 0;
    assert_true(mp_static_bytes_per_param(&c) == 6.0 + 12.0 / 64);
    c.parallel.dist_opt = false;
    assert_true(mp_static_bytes_per_param(&c) == 18.0);
    /* CP ranks shard too: the gradient group is dp * cp */
    c.parallel.zero = 3;
    c.parallel.dist_opt = true;
    c.parallel.dp = 32;
    c.parallel.cp = 2;
    assert_true(mp_static_bytes_per_param(&c) == 16.0 / 64);
}

/* Estimates c and places its DP group. */
static void estimate_dp(const mp_config *c, mp_estimate *e, mp_group_place *g)
{
    mp_error err;
    assert_int_equal(mp_estimate_config(c, NULL, e, &err), MP_OK);
    mp_group_place_of(c, MP_GROUP_DP, g);
}

/* ZeRO-3's DP time when communication dominates: each micro-batch's two
 * gathers (ag each) and reduce-scatter (rs) exposed but for the compute. */
static double comm_bound_dp(const mp_estimate *e, double ag, double rs)
{
    return (double)e->microbatches * (2.0 * ag + rs) - e->time.compute - e->time.recompute;
}

/* With a network a thousand times slower, every micro-batch's two
 * all-gathers and reduce-scatter are exposed almost whole: the estimate's DP
 * part is m x (2 AG + RS) minus the compute windows, to the closed form. */
static void test_zero3_comm_bound(void **state)
{
    (void)state;
    mp_config c = config("gpt3-1.3b", "dgx-a100", 16, 64, 1, 2, 3);
    c.hw.scale_out.bw_per_gpu /= 1000.0;
    mp_estimate e;
    mp_error err;
    mp_group_place g;
    estimate_dp(&c, &e, &g);
    double P = mp_model_params(&c.model); /* tp = 1, one stage: every parameter */
    double ag = mp_coll_time(&c.hw, &g, MP_COLL_ALLGATHER, 2.0 * P);
    double rs = mp_coll_time(&c.hw, &g, MP_COLL_REDUCESCATTER, 2.0 * P);
    double m = (double)e.microbatches;
    double want = comm_bound_dp(&e, ag, rs);
    assert_true(e.time.dp_comm <= m * (2.0 * ag + rs));
    assert_true(fabs(e.time.dp_comm - want) < 1e-6 * want);
    /* ZeRO-2: one reduce-scatter per micro-batch and one gather per step */
    c.parallel.zero = 2;
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_true(e.time.dp_comm < m * rs + ag);
    assert_true(e.time.dp_comm > m * rs - e.time.compute);
    /* the parts still add up to the step */
    const mp_times *t = &e.time;
    double sum = t->compute + t->recompute + t->tp_comm + t->cp_comm + t->pp_comm + t->bubble +
                 t->dp_comm + t->optimizer;
    assert_true(fabs(sum - t->step) < 1e-9 * t->step);
}

/* Megatron FSDP with --fp8-param-gather keeps an FP8 parameter group's
 * shard in a uint8 buffer (param_and_grad_buffer.py, core_v0.14.0 lines
 * 1806-1810), so both of a micro-batch's gathers move 1 byte per FP8 GEMM
 * weight and 2 for the rest (embedding, head, norms). LLaMA 3 8B's GEMM
 * weights counted by hand from its shape (h 4096, 32 query and 8 K/V heads
 * of 128, FFN 14336 gated): QKV 4096 x 6144, projection 4096 x 4096, FC1
 * 2 x 4096 x 14336, FC2 14336 x 4096 = 218,103,808 a block, 32 blocks,
 * with the block's two norm vectors (2 x 4096), which the model counts
 * with its FP8 weights (cost.c, as the FP8 copies' memory).
 * With the links a thousand times slower every gather is exposed but for
 * the compute window, as test_zero3_comm_bound. */
static void test_zero3_fp8_gather(void **state)
{
    (void)state;
    mp_config c = preset_on("llama3-8b", "dgx-h100");
    c.training = (mp_training){.gpus = 8, .seq = 8192, .global_batch = 32,
                               .precision = MP_DTYPE_FP8, .fp8_recipe = MP_FP8_TENSORWISE,
                               .fp8_param_gather = true};
    c.parallel = (mp_parallel){.tp = 1, .pp = 1, .vpp = 1, .cp = 1, .dp = 8, .micro_batch = 1,
                               .dist_opt = true, .zero = 3, .dp_overlap = true,
                               .schedule = MP_SCHED_1F1B};
    c.hw.scale_up.bw_per_gpu /= 1000.0;
    mp_estimate e;
    mp_group_place g;
    estimate_dp(&c, &e, &g);
    double P = mp_model_params(&c.model), f8 = 32.0 * (218103808.0 + 2.0 * 4096.0);
    double ag = mp_coll_time(&c.hw, &g, MP_COLL_ALLGATHER, 2.0 * (P - f8)) +
                mp_coll_time(&c.hw, &g, MP_COLL_ALLGATHER, f8);
    double rs = mp_coll_time(&c.hw, &g, MP_COLL_REDUCESCATTER, 2.0 * P);
    double want = comm_bound_dp(&e, ag, rs);
    assert_true(fabs(e.time.dp_comm - want) < 1e-6 * want);
    /* without it the gathers move the bf16 weights: 2 bytes each */
    c.training.fp8_param_gather = false;
    estimate_dp(&c, &e, &g);
    want = comm_bound_dp(&e, mp_coll_time(&c.hw, &g, MP_COLL_ALLGATHER, 2.0 * P), rs);
    assert_true(fabs(e.time.dp_comm - want) < 1e-6 * want);
}

/* On a fast network the gathers hide behind compute: ZeRO-3 costs no more
 * than one block's share per micro-batch over ZeRO-1, and holds less. */
static void test_zero3_hidden(void **state)
{
    (void)state;
    mp_config c = config("gpt3-13b", "dgx-h100", 64, 512, 1, 4, 3);
    mp_estimate z3, z1;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &z3, &err), MP_OK);
    c.parallel.zero = 1;
    assert_int_equal(mp_estimate_config(&c, NULL, &z1, &err), MP_OK);
    assert_true(z3.memory.weights < z1.memory.weights / 32);
    assert_true(z3.memory.grads < z1.memory.grads / 32);
    assert_true(z3.time.step < 1.05 * z1.time.step);
}

/* HSDP: shard inside the 8-GPU NVLink domain, replicate across nodes. */
static void test_hsdp(void **state)
{
    (void)state;
    mp_config c = config("gpt3-13b", "dgx-a100", 256, 512, 1, 1, 3);
    c.parallel.hsdp = true;
    mp_error err;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    assert_int_equal(mp_zero_shard_ranks(&c), 8);
    double w, g, o;
    mp_static_bytes(&c, &w, &g, &o);
    assert_true(w == 2.0 / 8 && g == 2.0 / 8 && o == 12.0 / 8);
    mp_group_place shard, rep;
    mp_group_place_of(&c, MP_GROUP_DP_SHARD, &shard);
    mp_group_place_of(&c, MP_GROUP_DP_REPLICA, &rep);
    assert_int_equal(shard.n, 8);
    assert_false(shard.cross_domain);
    assert_int_equal(rep.n, 32);
    assert_true(rep.cross_domain);
    /* tp = 2 leaves 4 DP ranks per node */
    c = config("gpt3-13b", "dgx-a100", 256, 512, 2, 1, 3);
    c.parallel.hsdp = true;
    assert_int_equal(mp_zero_shard_ranks(&c), 4);
    /* on a slow network the per-micro-batch gathers stay on NVLink: HSDP
     * exposes far less than ZeRO-3 over every DP rank */
    c = config("gpt3-1.3b", "dgx-a100", 64, 128, 1, 1, 3);
    c.hw.scale_out.bw_per_gpu /= 100.0;
    mp_estimate z3, hs;
    assert_int_equal(mp_estimate_config(&c, NULL, &z3, &err), MP_OK);
    c.parallel.hsdp = true;
    assert_int_equal(mp_estimate_config(&c, NULL, &hs, &err), MP_OK);
    assert_true(hs.time.dp_comm < 0.5 * z3.time.dp_comm);
    assert_true(hs.memory.weights > z3.memory.weights); /* sharded 8 ways, not 64 */
    /* without ZeRO-3 it means nothing: refused */
    c.parallel.zero = 2;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "hsdp");
}

static void test_rules(void **state)
{
    (void)state;
    mp_config c = config("gpt3-1.3b", "dgx-a100", 64, 512, 1, 1, 3);
    mp_error err;
    assert_int_equal(mp_config_check(&c, &err), MP_OK);
    c.parallel.pp = 2;
    c.parallel.dp = 32;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "zero");
    c = config("gpt3-1.3b", "dgx-a100", 64, 512, 1, 1, 2);
    c.parallel.dist_opt = false;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "zero");
    c = config("gpt3-1.3b", "dgx-a100", 1, 512, 1, 1, 3);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    c = config("gpt3-1.3b", "dgx-a100", 64, 512, 1, 1, 4);
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
}

/* Search offers ZeRO-2/3 only without a pipeline, and a fixed zero holds. */
static void test_search(void **state)
{
    (void)state;
    mp_search_options o;
    memset(&o, 0, sizeof o);
    o.base = config("gpt3-13b", "dgx-a100", 128, 1024, 1, 1, 0);
    o.top_k = 20;
    o.no_simulate = true;
    mp_search_result r;
    mp_error err;
    /* not asked: Megatron's space only */
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    for (int i = 0; i < r.n; i++) assert_true(r.plans[i].config.parallel.zero < 2);
    mp_search_result_free(&r);
    o.zero_sharding = true;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    bool any_zero = false;
    for (int i = 0; i < r.n; i++) {
        const mp_parallel *p = &r.plans[i].config.parallel;
        if (p->zero >= 2) {
            any_zero = true;
            assert_int_equal(p->pp, 1);
            assert_true(p->dist_opt);
        }
    }
    assert_true(any_zero);
    mp_search_result_free(&r);
    o.fixed = MP_FIX_ZERO;
    o.base.parallel.zero = 3;
    o.base.parallel.dist_opt = true;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    for (int i = 0; i < r.n; i++) assert_int_equal(r.plans[i].config.parallel.zero, 3);
    mp_search_result_free(&r);
    o.base.parallel.zero = 0;
    o.base.parallel.dist_opt = false;
    o.fixed = MP_FIX_ZERO;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    for (int i = 0; i < r.n; i++) assert_true(r.plans[i].config.parallel.zero < 2);
    mp_search_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_zero_paper), cmocka_unit_test(test_zero3_comm_bound),
        cmocka_unit_test(test_zero3_hidden),     cmocka_unit_test(test_rules),
        cmocka_unit_test(test_hsdp),             cmocka_unit_test(test_zero3_fp8_gather),
        cmocka_unit_test(test_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
