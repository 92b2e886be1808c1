/* test_cross_entropy.c — the loss as Transformer Engine's fused cross entropy
 * (training.te_cross_entropy; docs/cost-model.md §4, "Cross entropy"): the
 * head's memory-bound passes over the T x V/t logits fall from 26 + 14 bytes
 * per logit (unfused, fp32) to 2 + 4 (one online-softmax read; the gradient
 * written over the bf16 logits), its kernels from 5 + 3 to 2 + 1, and the
 * head keeps the bf16 logits (2 bytes) in place of an fp32 copy (4). Checked
 * by hand on LLaMA 3 8B (V = 128256) at t = 1 and t = 4. */
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
#include "planner/cost.h"
#include "planner/cost_internal.h"

#include "nemo_fixture.h"

static mp_config config(int64_t tp)
{
    mp_config c = nemo_config("llama3-8b", 8, 64);
    c.parallel = (mp_parallel){.tp = tp, .pp = 1, .vpp = 1, .cp = 1, .dp = 8 / tp,
                               .micro_batch = 1, .sp = tp > 1, .dist_opt = true,
                               .dp_overlap = true, .schedule = MP_SCHED_1F1B};
    return c;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15;
}

static void check_head(int64_t tp)
{
    mp_config c = config(tp);
    mp_edge_time off, on;
    mp_head_time_of(&c, &off);
    c.training.te_cross_entropy = true;
    mp_head_time_of(&c, &on);
    double t = (double)tp, T = 8192.0, h = 4096.0;
    double logits = T * mp_padded_vocab(c.model.vocab, tp) / t;
    double norm = T * h / (tp > 1 ? t : 1.0) * 4.0;
    /* the GEMMs and the norm are the same; only the loss's passes change */
    double f_off = mp_membound_time(&c.hw, norm + 26.0 * logits, 7.0);
    double f_on = mp_membound_time(&c.hw, norm + 2.0 * logits, 4.0);
    double b_off = mp_membound_time(&c.hw, 2.0 * norm + 14.0 * logits, 5.0);
    double b_on = mp_membound_time(&c.hw, 2.0 * norm + 4.0 * logits, 3.0);
    assert_true(near(off.fwd_compute - on.fwd_compute, f_off - f_on));
    assert_true(near(off.bwd_compute - on.bwd_compute, b_off - b_on));
    assert_true(on.wgrad == off.wgrad && on.tp_fwd == off.tp_fwd && on.tp_bwd == off.tp_bwd);
    /* 128256 x 8192 logits: several ms of HBM traffic saved per micro-batch */
    assert_true(off.fwd_compute + off.bwd_compute - on.fwd_compute - on.bwd_compute > 2e-3 / t);

    /* the head item keeps 2 bytes per logit, not 4 */
    c.training.te_cross_entropy = false;
    int64_t n = c.model.layers + 2;
    mp_item_cost *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    mp_error err;
    assert_int_equal(mp_item_costs(&c, a, &err), MP_OK);
    c.training.te_cross_entropy = true;
    assert_int_equal(mp_item_costs(&c, b, &err), MP_OK);
    assert_true(near(a[n - 1].act_bytes[MP_RECOMPUTE_NONE] - b[n - 1].act_bytes[MP_RECOMPUTE_NONE],
                     2.0 * logits));
    assert_true(a[1].fwd == b[1].fwd && a[1].act_bytes[0] == b[1].act_bytes[0]); /* blocks */
    free(a);
    free(b);
}

static void test_head_t1(void **state)
{
    (void)state;
    check_head(1);
}

static void test_head_t4(void **state)
{
    (void)state;
    check_head(4);
}

/* The estimate of the whole step falls by the head's saving per micro-batch
 * (one stage: every micro-batch passes the head). */
static void test_step(void **state)
{
    (void)state;
    mp_config c = config(1);
    mp_estimate off, on;
    mp_error err;
    assert_int_equal(mp_estimate_config(&c, NULL, &off, &err), MP_OK);
    mp_edge_time h0, h1;
    mp_head_time_of(&c, &h0);
    c.training.te_cross_entropy = true;
    mp_head_time_of(&c, &h1);
    assert_int_equal(mp_estimate_config(&c, NULL, &on, &err), MP_OK);
    double saved = (double)off.microbatches *
                   (h0.fwd_compute + h0.bwd_compute - h1.fwd_compute - h1.bwd_compute);
    assert_true(near(off.time.compute - on.time.compute, saved));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_t1),
        cmocka_unit_test(test_head_t4),
        cmocka_unit_test(test_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
