/* test_hwchoice.c — choosing hardware: the GPU counts tried, days/cost/energy
 * arithmetic against hand-computed values, the Pareto front and the picks on
 * made-up points (ties, unpriced points, nothing admissible), and one real
 * run whose every point is the plan a plain search of that point finds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "core/model.h"
#include "search/hwchoice.h"

static void test_counts(void **state)
{
    (void)state;
    int64_t c[MP_HWCHOICE_MAX_COUNTS];
    int n = mp_hwchoice_counts(64, 8192, 8, c);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) assert_int_equal(c[i], 64LL << i);
    /* ends that are not powers of two are tried; part nodes are not */
    n = mp_hwchoice_counts(12, 100, 8, c);
    assert_int_equal(n, 3);
    assert_int_equal(c[0], 16);
    assert_int_equal(c[1], 32);
    assert_int_equal(c[2], 64);
    n = mp_hwchoice_counts(24, 24, 8, c);
    assert_int_equal(n, 1);
    assert_int_equal(c[0], 24);
    /* a count that divides a node is a part of one node */
    n = mp_hwchoice_counts(2, 8, 4, c);
    assert_int_equal(n, 3);
    assert_int_equal(c[0], 2);
    assert_int_equal(c[2], 8);
    assert_int_equal(mp_hwchoice_counts(10, 5, 8, c), 0);
}

static void test_price(void **state)
{
    (void)state;
    mp_hw hw;
    memset(&hw, 0, sizeof hw);
    hw.gpus_per_node = 8;
    hw.price_per_gpu_hour = 3.0;
    hw.gpu_watts = 700;
    hw.node_watts = 4600;
    double days, cost, mwh;
    /* 1e12 tokens at 1e6 tokens/s: 1e6 s = 277.78 h = 11.574 days */
    mp_hwchoice_price(&hw, 1024, 1e12, 1e6, 1.2, &days, &cost, &mwh);
    assert_true(fabs(days - 1e6 / 86400.0) < 1e-9);
    assert_true(fabs(cost - 3.0 * 1024 * 1e6 / 3600.0) < 1e-6);
    /* (700 W x 1024 + 4600 W x 128 nodes) x 277.78 h x 1.2 = 435.2 MWh */
    double want = (700.0 * 1024 + 4600.0 * 128) * (1e6 / 3600.0) * 1.2 / 1e6;
    assert_true(fabs(mwh - want) < 1e-9);
    assert_true(fabs(mwh - 435.2) < 0.1);
    /* a part node still draws its node power */
    mp_hwchoice_price(&hw, 12, 1e12, 1e6, 1.0, &days, &cost, &mwh);
    assert_true(fabs(mwh - (700.0 * 12 + 4600.0 * 2) * (1e6 / 3600.0) / 1e6) < 1e-9);
}

static mp_hwchoice_point pt(double days, double cost, bool priced)
{
    mp_hwchoice_point p;
    memset(&p, 0, sizeof p);
    p.fits = true;
    p.days = days;
    p.cost_usd = priced ? cost : 0;
    p.priced = priced;
    return p;
}

static void test_front(void **state)
{
    (void)state;
    mp_hwchoice_point pts[] = {
        pt(100, 1.0e6, true),  /* 0: cheapest, slow: front */
        pt(50, 1.2e6, true),   /* 1: front */
        pt(60, 1.5e6, true),   /* 2: beaten by 1 on both */
        pt(20, 3.0e6, true),   /* 3: front */
        pt(20, 3.0e6, true),   /* 4: equal to 3: neither beats the other, both on the front */
        pt(10, 0, false),      /* 5: fastest, no price: never on the front */
        {.fits = false},       /* 6: does not run */
        pt(50, 1.3e6, true),   /* 7: as fast as 1, dearer: beaten */
    };
    mp_hwchoice_result r = {.n = 8, .points = pts};
    mp_hwchoice_rank(&r, 55 * 86400.0, 2.0e6);
    bool want[] = {true, true, false, true, true, false, false, false};
    for (int i = 0; i < 8; i++) assert_int_equal(pts[i].pareto, want[i]);
    assert_int_equal(r.cheapest, 0);
    assert_int_equal(r.fastest, 5);
    assert_int_equal(r.cheapest_in_deadline, 1); /* 1, 7 and 3 finish in 55 days; 1 is cheapest */
    assert_int_equal(r.fastest_in_budget, 1);    /* 0, 1, 2, 7 cost under $2M; 1 and 7 tie on days: the earlier */
    /* nothing admissible */
    mp_hwchoice_rank(&r, 5 * 86400.0, 1e5);
    assert_int_equal(r.cheapest_in_deadline, -1);
    assert_int_equal(r.fastest_in_budget, -1);
    /* no deadline, no budget: no picks of those kinds */
    mp_hwchoice_rank(&r, 0, 0);
    assert_int_equal(r.cheapest_in_deadline, -1);
    assert_int_equal(r.fastest_in_budget, -1);
}

/* Every point of a real run is what one plain search of that profile and
 * count finds (so `search --hw H --gpus N` reproduces a point), and the
 * front holds no point another point beats. */
static void test_run_matches_plain_search(void **state)
{
    (void)state;
    static mp_hwchoice_options o;
    memset(&o, 0, sizeof o);
    mp_error err;
    mp_error_clear(&err);
    assert_non_null(mp_model_preset("gpt3-13b"));
    o.search.base.model = *mp_model_preset("gpt3-13b");
    o.search.base.training.seq = 2048;
    o.search.base.training.global_batch = 512;
    o.search.base.training.precision = MP_DTYPE_BF16;
    o.search.base.training.tokens = 3e11;
    o.search.top_k = MP_SEARCH_RERANK_MIN;
    assert_int_equal(mp_hw_preset("dgx-a100", &o.hws[0], &err), MP_OK);
    assert_int_equal(mp_hw_preset("dgx-h100", &o.hws[1], &err), MP_OK);
    o.n_hw = 2;
    o.gpus_min = 32;
    o.gpus_max = 128;
    o.pue = 1.0;
    o.deadline_s = 30 * 86400.0;
    mp_hwchoice_result r;
    assert_int_equal(mp_hwchoice_run(&o, &r, &err), MP_OK);
    assert_int_equal(r.n, 6);
    for (int i = 0; i < r.n; i++) {
        const mp_hwchoice_point *p = &r.points[i];
        assert_true(p->fits);
        mp_search_options so = o.search;
        so.base.hw = o.hws[p->hw];
        so.base.training.gpus = p->gpus;
        so.no_split = true; /* points keep Megatron's even split (hwchoice.c) */
        mp_search_result sr;
        assert_int_equal(mp_search(&so, &sr, &err), MP_OK);
        assert_true(sr.plans[0].rank_step == p->step_s);
        assert_int_equal(sr.plans[0].config.parallel.tp, p->plan.config.parallel.tp);
        assert_int_equal(sr.plans[0].config.parallel.pp, p->plan.config.parallel.pp);
        assert_int_equal(sr.plans[0].config.parallel.dp, p->plan.config.parallel.dp);
        mp_search_result_free(&sr);
        for (int j = 0; j < r.n && p->pareto; j++) {
            const mp_hwchoice_point *q = &r.points[j];
            assert_false(j != i && q->days <= p->days && q->cost_usd <= p->cost_usd &&
                         (q->days < p->days || q->cost_usd < p->cost_usd));
        }
    }
    assert_true(r.cheapest_in_deadline >= 0);
    assert_true(r.points[r.cheapest_in_deadline].days <= 30);
    mp_hwchoice_result_free(&r);
}

static void test_refuses(void **state)
{
    (void)state;
    static mp_hwchoice_options o;
    memset(&o, 0, sizeof o);
    mp_error err;
    mp_hwchoice_result r;
    mp_error_clear(&err);
    assert_non_null(mp_model_preset("gpt3-13b"));
    o.search.base.model = *mp_model_preset("gpt3-13b");
    assert_int_equal(mp_hw_preset("dgx-a100", &o.hws[0], &err), MP_OK);
    o.n_hw = 1;
    o.gpus_min = 8;
    o.gpus_max = 8;
    assert_int_equal(mp_hwchoice_run(&o, &r, &err), MP_EINPUT); /* no tokens */
    assert_string_equal(err.field, "tokens");
    o.search.base.training.tokens = 1e9;
    o.gpus_min = 16;
    assert_int_equal(mp_hwchoice_run(&o, &r, &err), MP_EINPUT); /* min > max */
    assert_string_equal(err.field, "gpus");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_price),
        cmocka_unit_test(test_front),
        cmocka_unit_test(test_run_matches_plain_search),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
