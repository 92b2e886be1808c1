/* test_gemm_shape.c — tile and wave quantisation of a GEMM's shape
 * (docs/cost-model.md §4, "GEMM shape"; planner/gemm_shape.c), against wave
 * counts and efficiencies worked out by hand on an A100 (108 SMs, largest
 * CTA tile 256 x 128: NVIDIA's "Matrix Multiplication Background User's
 * Guide", DU-09799-001, §2.3 and §3.2). */
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

#include "moe_fixture.h"

static mp_hw a100(void)
{
    mp_hw hw;
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a100", &hw, &err), MP_OK);
    /* the profile's SM count; its tile is named in a comment only (the
     * shipped curve is fitted without the shape model) */
    assert_true(hw.sm_count == 108 && hw.gemm_tile_m == 0);
    hw.gemm_tile_m = 256;
    hw.gemm_tile_n = 128;
    assert_int_equal(mp_hw_finish(&hw, &err), MP_OK);
    return hw;
}

static bool near(double a, double b, double rel)
{
    return fabs(a - b) <= rel * (fabs(a) + fabs(b));
}

/* 9 x 12 = 108 tiles of 256 x 128 fill the 108 SMs once; one more row of
 * tiles (10 x 12 = 120) needs a second wave, as does one more column. */
static void test_waves_by_hand(void **state)
{
    (void)state;
    mp_hw hw = a100();
    assert_true(mp_gemm_waves(&hw, 1, 2304, 1536, 256, 128) == 1.0);
    assert_true(mp_gemm_waves(&hw, 1, 2304 + 1, 1536, 256, 128) == 2.0); /* 10 x 12 tiles */
    assert_true(mp_gemm_waves(&hw, 1, 2304, 1536 + 1, 256, 128) == 2.0); /* 9 x 13 */
    assert_true(mp_gemm_waves(&hw, 1, 4608, 3072, 256, 128) == 4.0);     /* 432 tiles */
    assert_true(mp_gemm_waves(&hw, 1, 4608, 3072 + 1, 256, 128) == 5.0); /* 450 tiles */
    /* a grouped GEMM's tiles share the waves: 108 experts of one tile each */
    assert_true(mp_gemm_waves(&hw, 108, 256, 128, 256, 128) == 1.0);
    assert_true(mp_gemm_waves(&hw, 109, 256, 128, 256, 128) == 2.0);
}

/* Exactly one wave of whole 256 x 128 tiles wastes nothing. */
static void test_full_wave_is_free(void **state)
{
    (void)state;
    mp_hw hw = a100();
    assert_true(near(mp_gemm_shape_efficiency(&hw, 1, 2304, 1536), 1.0, 1e-12));
    assert_true(near(mp_gemm_shape_efficiency(&hw, 1, 27648, 128), 1.0, 1e-12)); /* 108 x 1 */
    assert_true(near(mp_gemm_shape_efficiency(&hw, 108, 256, 128), 1.0, 1e-12));
}

/* The guide's wave-quantisation figure (§3.2): with 256 x 128 tiles on
 * 108 SMs, work of 109 tiles takes two waves, the second holding one tile,
 * so throughput nearly halves (109 of 216 tile-slots used). cuBLAS's
 * heuristic then picks another tile; by hand for m = 109 x 256, n = 128:
 *   256x128: 109 tiles, 2 waves, 109/216 = 0.505
 *   128x256: 218 tiles (n padded to 256), 3 waves, 0.431
 *   128x128: 218 tiles, 3 waves, 218/324 = 0.673, full rate: the best
 *   256x64, 128x64, 64x128, 64x64: 0.538, 0.538, 0.538, 0.449 after their
 *   rates (0.8, 2/3, 2/3, 0.5: operand reuse below the 128 x 128 tile's). */
static void test_one_tile_more(void **state)
{
    (void)state;
    mp_hw hw = a100();
    double m = 109.0 * 256.0, n = 128.0;
    double fixed = 109.0 / (mp_gemm_waves(&hw, 1, m, n, 256, 128) * 108.0);
    assert_true(near(fixed, 109.0 / 216.0, 1e-12));
    assert_true(near(mp_gemm_shape_efficiency(&hw, 1, m, n), 218.0 / 324.0, 1e-12));
    /* one tile fewer is one whole wave again */
    assert_true(near(mp_gemm_shape_efficiency(&hw, 1, m - 256.0, n), 1.0, 1e-12));
}

/* Padding of partial tiles: a 64-row output is best as 64 x 64 tiles (half
 * rate) rather than a quarter-used 256 x 128 tile. 64 x 6912 = 108 tiles of
 * 64 x 64: one full wave at rate 0.5; 64 x 128: 54 tiles in one wave, 0.5
 * used x 2/3; 256 x 128: 54 tiles, a quarter used of half the SMs. */
static void test_thin_output(void **state)
{
    (void)state;
    mp_hw hw = a100();
    assert_true(near(mp_gemm_shape_efficiency(&hw, 1, 64, 6912), 0.5, 1e-12));
}

/* The time charged: FLOPs at the curve over the shape's efficiency; a
 * profile without gemm_tile charges FLOPs alone. Grouped tiles share waves:
 * 8 experts of one 256 x 128 output each run as 8 x 8 = 64 tiles of 64 x 64
 * in one wave (64 x 4096 of 108 x 4096 slots at rate 0.5 = 0.296), against
 * 8 tiles of 64 x 64 alone (0.037) when each runs as a kernel of its own. */
static void test_time(void **state)
{
    (void)state;
    mp_hw hw = a100();
    double peak = hw.peak_flops[MP_DTYPE_BF16];
    double m = 109.0 * 256.0, n = 128.0, k = 4096.0;
    double flops_only = mp_gemm_time(&hw, peak, 2.0 * m * n * k);
    assert_true(near(mp_gemm_mnk_time(&hw, peak, 2.0, m, n, k), flops_only * 324.0 / 218.0, 1e-12));
    mp_hw off = hw;
    off.gemm_tile_m = off.gemm_tile_n = 0;
    assert_true(near(mp_gemm_mnk_time(&off, peak, 2.0, m, n, k), flops_only, 1e-12));
    double one = mp_gemm_time(&hw, peak, 2.0 * 256 * 128 * k);
    assert_true(near(mp_gemm_grouped_time(&hw, peak, 2.0, 8, 256, 128, k),
                     8.0 * one / (8.0 * 256 * 128 / (108.0 * 4096) * 0.5), 1e-12));
    assert_true(near(mp_gemm_mnk_time(&hw, peak, 2.0, 256, 128, k),
                     one / (256.0 * 128 / (108.0 * 4096) * 0.5), 1e-12));
    assert_true(mp_gemm_grouped_time(&hw, peak, 2.0, 8, 256, 128, k) <
                8.0 * mp_gemm_mnk_time(&hw, peak, 2.0, 256, 128, k));
}

/* The MoE layer's expert GEMMs run as one grouped kernel per pass: the
 * weight gradients it charges are the router's GEMM and, for FC1 and FC2,
 * the local experts' tiles in shared waves, never more than each
 * expert's GEMM as a kernel of its own (OLMoE, 64 experts on 8 ranks: 8
 * local experts, h 2048, expert FFN 1024, SwiGLU). */
static void test_moe_grouped(void **state)
{
    (void)state;
    mp_config c = moe_config("olmoe-1b-7b", 8, 1, 8, 1);
    c.hw.gemm_tile_m = 256;
    c.hw.gemm_tile_n = 128;
    const mp_model *m = &c.model;
    mp_block_shape bs;
    mp_block_shape_of(m, c.training.seq, m->layers, &bs);
    assert_int_equal(bs.kind, MP_BLOCK_MOE);
    mp_moe_time mt;
    mp_moe_block_time(&c, &bs, &mt);
    double h = (double)m->hidden, E = (double)m->moe.experts, f = (double)m->moe.expert_ffn;
    double local = E / 8.0, Tr = (double)c.parallel.micro_batch * bs.s;
    double ne = mp_moe_tokens_per_expert(&c, &bs) * mp_moe_imbalance(m);
    double peak = mp_high_peak(&c);
    double fc1 = mp_linear_grouped_gemm_time(&c, local, h, 2.0 * f, ne);
    double fc2 = mp_linear_grouped_gemm_time(&c, local, f, h, ne);
    double want = mp_gemm_mnk_time(&c.hw, peak, 2.0, h, E, Tr) + fc1 + fc2;
    assert_true(near(mt.wgrad, want, 1e-12));
    /* shared waves never cost more than a kernel per expert (strictly less
     * for small experts: test_time) */
    assert_true(fc1 <= local * mp_linear_gemm_time(&c, h, 2.0 * f, ne) * (1.0 + 1e-12));
    /* without a tile: the experts' GEMMs at FLOPs alone, as before */
    mp_config off = c;
    off.hw.gemm_tile_m = off.hw.gemm_tile_n = 0;
    assert_true(near(mp_linear_grouped_gemm_time(&off, local, h, 2.0 * f, ne),
                     local * mp_linear_gemm_time(&off, h, 2.0 * f, ne), 1e-12));
}

/* A tile needs an SM count to make waves of: the profile is refused with
 * one line naming the field. */
static void test_tile_needs_sm_count(void **state)
{
    (void)state;
    mp_hw hw = a100();
    mp_error err;
    hw.sm_count = 0;
    assert_int_equal(mp_hw_finish(&hw, &err), MP_EINPUT);
    assert_string_equal(err.field, "gemm_tile");
    hw = a100();
    hw.gemm_tile_n = 32;
    assert_int_equal(mp_hw_finish(&hw, &err), MP_EINPUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waves_by_hand),  cmocka_unit_test(test_full_wave_is_free),
        cmocka_unit_test(test_one_tile_more),  cmocka_unit_test(test_thin_output),
        cmocka_unit_test(test_time),           cmocka_unit_test(test_moe_grouped),
        cmocka_unit_test(test_tile_needs_sm_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
