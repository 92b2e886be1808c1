/* test_ub_split.c — TP overlap's split GEMMs (docs/cost-model.md §5, "TP
 * overlap's split GEMMs"): Transformer Engine's userbuffers overlap runs a
 * collective's GEMM as tp calls (ring_exchange) or 4 (pipeline), and each
 * call beyond the first costs the profile's measured gemm_call_overhead.
 * Counts and times are worked by hand; the profile's constant is the H200
 * sweep's per-call floor (tests/data/hw/gemm_h200_cublas.csv). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "gemm_sweep.h"
#include "nemo_fixture.h"

static const char *csv = "tests/data/hw/gemm_h200_cublas.csv";

static bool near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

/* LLaMA 3 70B at t 8 with SP and TP overlap, one micro-batch, no pipeline */
static mp_config t8(mp_dtype precision, bool overlap)
{
    mp_config c = nemo_config("llama3-70b", 16, 16);
    c.training.precision = precision;
    c.parallel = (mp_parallel){.tp = 8, .pp = 1, .vpp = 1, .cp = 1, .dp = 2, .micro_batch = 1,
                               .sp = true, .tp_overlap = overlap, .dist_opt = true,
                               .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    return c;
}

/* By hand, t = 8: QKV's and FC1's forwards are ring exchanges (8 calls), the
 * projection's and FC2's pipelines (4) in BF16 and ring exchanges in FP8;
 * their input gradients ring exchanges (8); QKV's and FC1's backward bulk. */
static void test_counts(void **state)
{
    (void)state;
    static const double bf16_f[4] = {7, 3, 7, 3}, fp8_f[4] = {7, 7, 7, 7}, b[4] = {0, 7, 0, 7};
    mp_config bf = t8(MP_DTYPE_BF16, true), f8 = t8(MP_DTYPE_FP8, true);
    for (int i = 0; i < 4; i++) {
        double xf, xb;
        mp_ub_split_calls(&bf, i, &xf, &xb);
        assert_true(xf == bf16_f[i] && xb == b[i]);
        mp_ub_split_calls(&f8, i, &xf, &xb);
        assert_true(xf == fp8_f[i] && xb == b[i]);
    }
    /* none without the overlap, at t = 1, or for a shape it does not split */
    mp_config off = t8(MP_DTYPE_BF16, false), one = t8(MP_DTYPE_BF16, true);
    one.parallel.tp = 1;
    for (int i = 0; i < 5; i++) {
        double xf = -1, xb = -1;
        mp_ub_split_calls(&off, i, &xf, &xb);
        assert_true(xf == 0.0 && xb == 0.0);
        mp_ub_split_calls(&one, i, &xf, &xb);
        assert_true(xf == 0.0 && xb == 0.0);
    }
    double xf = -1, xb = -1;
    mp_ub_split_calls(&bf, 4, &xf, &xb); /* cross attention: not TE's userbuffers */
    assert_true(xf == 0.0 && xb == 0.0);
}

/* In a block, the splits add 20 calls forward and 14 backward (BF16, t 8)
 * at the profile's per-call time: the block's GPU-bound passes grow by
 * exactly that. */
static void test_block_time(void **state)
{
    (void)state;
    mp_config c = t8(MP_DTYPE_BF16, true);
    mp_block_shape bs;
    mp_block_shape_of(&c.model, c.training.seq, 1, &bs);
    mp_block_time with, without;
    mp_block_time_of(&c, &bs, &with);
    double per_call = c.hw.gemm_call_overhead;
    assert_true(per_call > 0.0);
    c.hw.gemm_call_overhead = 0.0;
    mp_block_time_of(&c, &bs, &without);
    if (!near(with.fwd_compute - without.fwd_compute, 20.0 * per_call, 1e-9))
        fail_msg("forward +%.3f us, want 20 calls", (with.fwd_compute - without.fwd_compute) * 1e6);
    if (!near(with.bwd_compute - without.bwd_compute, 14.0 * per_call, 1e-9))
        fail_msg("backward +%.3f us, want 14 calls", (with.bwd_compute - without.bwd_compute) * 1e6);
    /* the weight gradients are one call each */
    assert_true(near(with.wgrad, without.wgrad, 1e-12));
}

/* Every built-in profile holds the measured per-call time: the sweep's
 * floor row (a 128^3 product, back to back), within 1%. */
static void test_profiles_hold_the_floor(void **state)
{
    (void)state;
    double floor_us = sweep_floor_us(csv);
    assert_true(floor_us > 1.0 && floor_us < 100.0);
    static const char *const names[] = {"dgx-a100", "a100-4xhdr", "dgx-h100", "h200",
                                        "h800",     "b200",       "gb200-nvl72"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        mp_hw hw;
        mp_error err;
        assert_int_equal(mp_hw_preset(names[i], &hw, &err), MP_OK);
        if (!near(hw.gemm_call_overhead * 1e6, floor_us, 0.01))
            fail_msg("%s: gemm_call_overhead %.2f us, the measured floor %.2f us", names[i],
                     hw.gemm_call_overhead * 1e6, floor_us);
    }
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The floor is what every call costs beyond its FLOPs, not only a tiny
 * one's: over the sweep's products below 1e11 FLOPs, the time left after
 * their FLOPs at the large products' median rate (those of 1e12 and more)
 * has a median within 15% of the floor row. */
static void test_floor_is_every_calls_fixed_cost(void **state)
{
    (void)state;
    FILE *f = fopen(csv, "r");
    assert_non_null(f);
    static double rate[2048], flops[2048], us[2048];
    int nr = 0, ns = 0;
    double floor_us = sweep_floor_us(csv), peak = 989.4e12; /* H200 SXM bf16, the sweep's GPU */
    sweep_row w;
    while (sweep_row_next(f, &w)) {
        if (strcmp(w.what, "gemm") != 0)
            continue;
        double F = 2.0 * w.m * (double)w.n * w.k;
        if (F >= 1e12 && nr < 2048)
            rate[nr++] = F / (w.us * 1e-6) / peak;
        else if (F < 1e11 && ns < 2048)
            flops[ns] = F, us[ns++] = w.us;
    }
    fclose(f);
    assert_true(nr >= 300 && ns >= 100 && floor_us > 0.0);
    double eff = median(rate, nr);
    for (int i = 0; i < ns; i++)
        us[i] -= flops[i] / (peak * eff) * 1e6;
    double fixed = median(us, ns);
    if (!near(fixed, floor_us, 0.15))
        fail_msg("fixed cost %.2f us a call against the floor's %.2f us", fixed, floor_us);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        csv = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_block_time),
        cmocka_unit_test(test_profiles_hold_the_floor),
        cmocka_unit_test(test_floor_is_every_calls_fixed_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
