/* test_domain.c — large scale-up domains: TP up to the NVLink domain (16 on
 * a 16-GPU NVSwitch system, more on GB200 NVL72), and the rank order deciding
 * which groups stay inside the domain (a DP group spanning 64 of NVL72's 72
 * GPUs talks over NVLink; one spanning 128 does not). */
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

static mp_config config(const char *model, const char *hw, int64_t gpus, int64_t tp, int64_t dp)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset(model);
    mp_error err;
    assert_int_equal(mp_hw_preset(hw, &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = gpus, .seq = c.model.seq, .global_batch = 1024,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = tp, .pp = gpus / (tp * dp), .vpp = 1, .cp = 1, .dp = dp,
                               .micro_batch = 1, .schedule = MP_SCHED_1F1B};
    return c;
}

/* A DGX-2-style system: 16 GPUs on one NVSwitch fabric. */
static void sixteen_gpu_domain(mp_hw *hw)
{
    hw->gpus_per_node = 16;
    hw->scale_up.gpus_per_domain = 16;
    hw->scale_out.nics_per_node = 16;
}

static void test_tp16_on_16_gpu_domain(void **state)
{
    (void)state;
    mp_search_options o;
    memset(&o, 0, sizeof o);
    o.base = config("gpt3-175b", "dgx-h100", 128, 1, 1);
    sixteen_gpu_domain(&o.base.hw);
    o.base.parallel.tp = 16;
    o.fixed = MP_FIX_TP;
    o.top_k = 3;
    o.no_simulate = true;
    mp_search_result r;
    mp_error err;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    assert_true(r.n > 0);
    for (int i = 0; i < r.n; i++) assert_int_equal(r.plans[i].config.parallel.tp, 16);
    mp_search_result_free(&r);
    /* the group of 16 stays on NVLink */
    mp_config c = config("gpt3-175b", "dgx-h100", 128, 16, 8);
    sixteen_gpu_domain(&c.hw);
    mp_group_place g;
    mp_group_place_of(&c, MP_GROUP_TP, &g);
    assert_false(g.cross_domain);
    /* unfixed, search tries tp up to the domain: on 8-GPU DGX H100 nodes
     * tp = 16 and 32 are refused as beyond it; on the 16-GPU domain only 32 */
    memset(&o, 0, sizeof o);
    o.base = config("gpt3-175b", "dgx-h100", 128, 1, 128);
    o.top_k = 1;
    o.no_simulate = true;
    o.no_split = true;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    assert_int_equal(r.counts.rejected[MP_REJECT_TP_DOMAIN], 2);
    mp_search_result_free(&r);
    sixteen_gpu_domain(&o.base.hw);
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    assert_int_equal(r.counts.rejected[MP_REJECT_TP_DOMAIN], 1);
    mp_search_result_free(&r);
}

static void test_nvl72_dp_inside_domain(void **state)
{
    (void)state;
    mp_group_place g;
    mp_config in = config("gpt3-175b", "gb200-nvl72", 64, 8, 8);
    mp_group_place_of(&in, MP_GROUP_DP, &g);
    assert_int_equal(g.n, 8);
    assert_false(g.cross_domain); /* 64 ranks of a 72-GPU domain, though 16 trays of 4 */
    mp_config out = config("gpt3-175b", "gb200-nvl72", 128, 8, 16);
    mp_group_place_of(&out, MP_GROUP_DP, &g);
    assert_true(g.cross_domain);
    /* and it costs: the same gradient bytes take longer across racks */
    double bytes = 1e9;
    mp_group_place gin, gout;
    mp_group_place_of(&in, MP_GROUP_DP, &gin);
    mp_group_place_of(&out, MP_GROUP_DP, &gout);
    assert_true(mp_coll_time(&in.hw, &gin, MP_COLL_ALLREDUCE, bytes) <
                mp_coll_time(&out.hw, &gout, MP_COLL_ALLREDUCE, bytes));
    /* TP of 32 inside NVL72 is a valid choice for a 96-head model */
    mp_search_options o;
    memset(&o, 0, sizeof o);
    o.base = config("gpt3-175b", "gb200-nvl72", 128, 32, 1);
    o.fixed = MP_FIX_TP;
    o.top_k = 1;
    o.no_simulate = true;
    mp_search_result r;
    mp_error err;
    assert_int_equal(mp_search(&o, &r, &err), MP_OK);
    assert_int_equal(r.plans[0].config.parallel.tp, 32);
    mp_search_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp16_on_16_gpu_domain),
        cmocka_unit_test(test_nvl72_dp_inside_domain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
