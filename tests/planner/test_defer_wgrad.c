/* test_defer_wgrad.c — Megatron-Core's deferred output-layer wgrad
 * (mp_parallel.defer_embedding_wgrad, wgrad_deferral_limit; docs/cost-model.md
 * §6, "Deferred output-layer wgrad"). The last stage's first n = min(limit,
 * m) backwards (all m with limit 0) run without the head's weight-gradient
 * GEMM W; the rank runs the n GEMMs after its last backward, beside the other
 * ranks' cooldown (one backward and one transfer each), so the step changes
 * by max(0, n W - drain) - n (max round before - max round after). Checked
 * by hand on LLaMA 3 70B in 1F1B (t 4, p 4, d 2, 64 micro-batches, NeMo's
 * limit 22), once with the head rank the slowest and once made light; and
 * the memory the held micro-batches keep on the head rank. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/fields.h"
#include "core/hw.h"
#include "core/model.h"
#include "core/tables.h"
#include "planner/cost.h"
#include "planner/cost_internal.h"
#include "sim/simulate.h"

#include "nemo_fixture.h"

static mp_config config(int64_t pp, int64_t vpp, mp_schedule_kind sched)
{
    return nemo_llama70b(pp, vpp, sched);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15;
}

/* The step change by hand from the stage costs of the run without deferral:
 * 1F1B, one chunk per rank, rank r runs stage r. */
static double by_hand(const mp_config *off_cfg, const mp_estimate *off, int64_t n, double *w_out)
{
    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(off_cfg, NULL, &pc, &err), MP_OK);
    assert_int_equal(pc.defer_mb, 0); /* off: nothing deferred */
    int64_t p = pc.n_stages, m = off->microbatches;
    mp_edge_time head;
    mp_head_time_of(off_cfg, &head);
    double w = head.wgrad;
    /* one transfer: the synchronous estimate charges two per round */
    double x = off->time.pp_comm / (double)m / 2.0;
    double before = 0.0, after = 0.0, drain = 0.0;
    for (int64_t r = 0; r < p; r++) {
        const mp_stage_cost *s = &pc.stages[r];
        double round = s->fwd + s->bwd + 2.0 * x;
        before = fmax(before, round);
        after = fmax(after, round - (r == p - 1 ? w : 0.0));
        if (r < p - 1)
            drain += s->bwd + x;
    }
    mp_pipeline_cost_free(&pc);
    *w_out = w;
    return fmax(0.0, (double)n * w - drain) - (double)n * (before - after);
}

static void test_head_rank_slowest(void **state)
{
    (void)state;
    mp_config c = config(4, 1, MP_SCHED_1F1B);
    mp_estimate off = nemo_estimate(&c);
    assert_int_equal(off.microbatches, 64);
    double w;
    double want = by_hand(&c, &off, 22, &w);
    /* the head's wgrad: one GEMM of its forward's size, 2 s b h V / t FLOPs
     * (8192 x 8192 x 128256 / 4 x 2) at bf16 on H100: milliseconds */
    assert_true(w > 1e-3 && w < 20e-3);
    c.parallel.defer_embedding_wgrad = true;
    c.parallel.wgrad_deferral_limit = 22;
    mp_estimate on = nemo_estimate(&c);
    /* the head rank is the slowest by more than W: the 22 rounds lose all
     * of it, and 22 W hide under the three cooldown backwards */
    assert_true(want < 0.0 && near(want, -22.0 * w));
    assert_true(near(on.time.step - off.time.step, want));
    assert_true(near(on.time.compute, off.time.compute));
    /* the stage costs the simulator reads */
    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    assert_int_equal(pc.defer_stage, 3);
    assert_int_equal(pc.defer_mb, 22);
    assert_true(near(pc.defer_w, w));
    /* each held micro-batch keeps the head's SP input slice and its logits'
     * gradient in bf16: 8192 x 2 x (8192/4 + 128512/4) bytes (the vocabulary
     * padded to a multiple of 128 t), with the allocator's fragmentation */
    assert_true(near(pc.defer_hold,
                     8192.0 * 2.0 * (2048.0 + 32128.0) * (1.0 + c.hw.allocator_fragmentation)));
    mp_pipeline_cost_free(&pc);
    /* limit 0: every micro-batch; a limit above m: the same */
    c.parallel.wgrad_deferral_limit = 0;
    mp_estimate all = nemo_estimate(&c);
    c.parallel.wgrad_deferral_limit = 1000;
    mp_estimate over = nemo_estimate(&c);
    assert_true(near(all.time.step, over.time.step));
    c.parallel.defer_embedding_wgrad = false;
    c.parallel.wgrad_deferral_limit = 0;
    double w2;
    assert_true(near(all.time.step - off.time.step, by_hand(&c, &off, 64, &w2)));
}

/* A last stage of two layers and the head: not the slowest rank, so its
 * rounds set nothing, and the flush of 256 GEMMs costs what outlasts the
 * cooldown: the deferral makes this step slower. */
static void test_head_rank_light(void **state)
{
    (void)state;
    mp_config c = config(4, 1, MP_SCHED_1F1B);
    c.training.global_batch = 512; /* 256 micro-batches: a flush longer than the cooldown */
    c.parallel.last_stage_layers = 2;
    mp_estimate off = nemo_estimate(&c);
    assert_int_equal(off.microbatches, 256);
    double w;
    double want = by_hand(&c, &off, 256, &w);
    c.parallel.defer_embedding_wgrad = true;
    mp_estimate on = nemo_estimate(&c);
    print_message("light head rank: %+.4f s (256 W = %.4f s)\n", want, 256.0 * w);
    assert_true(want > 0.0 && want < 256.0 * w);
    assert_true(near(on.time.step - off.time.step, want));
}

/* Megatron defers only in its own 1F1B and interleaved schedules, and only
 * with a pipeline; a limit without the flag is refused. */
static void test_where_not(void **state)
{
    (void)state;
    mp_config c = config(1, 1, MP_SCHED_1F1B);
    c.training.gpus = 8;
    mp_estimate off = nemo_estimate(&c);
    c.parallel.defer_embedding_wgrad = true;
    mp_estimate on = nemo_estimate(&c);
    assert_true(on.time.step == off.time.step);
    c = config(4, 1, MP_SCHED_ZBH1);
    off = nemo_estimate(&c);
    c.parallel.defer_embedding_wgrad = true;
    on = nemo_estimate(&c);
    assert_true(on.time.step == off.time.step);
    c.parallel.defer_embedding_wgrad = false;
    c.parallel.wgrad_deferral_limit = 22;
    mp_error err;
    assert_int_equal(mp_config_check(&c, &err), MP_EINPUT);
    assert_string_equal(err.field, "wgrad_deferral_limit");
}

/* The simulator runs the same: the head rank's first n backwards shorter,
 * the n GEMMs after its last op; its step moves the estimate's way, by the
 * estimate's amount within a tenth. */
static void test_simulator(void **state)
{
    (void)state;
    for (int64_t vpp = 1; vpp <= 5; vpp += 4) {
        mp_config c = config(4, vpp, vpp > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B);
        mp_sim_options o = {0};
        mp_sim_result a, b;
        mp_error err;
        mp_estimate eoff = nemo_estimate(&c);
        assert_int_equal(mp_simulate(&c, NULL, &o, &a, &err), MP_OK);
        c.parallel.defer_embedding_wgrad = true;
        c.parallel.wgrad_deferral_limit = 22;
        mp_estimate eon = nemo_estimate(&c);
        assert_int_equal(mp_simulate(&c, NULL, &o, &b, &err), MP_OK);
        double de = eon.time.step - eoff.time.step, ds = b.makespan - a.makespan;
        /* the head rank's peak holds the 22 micro-batches' buffers */
        mp_pipeline_cost pc;
        assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
        assert_true(near(b.peak_memory[3] - a.peak_memory[3], 22.0 * pc.defer_hold));
        mp_pipeline_cost_free(&pc);
        print_message("vpp %lld: estimate %+.4f s, simulator %+.4f s\n", (long long)vpp, de, ds);
        assert_true(de < 0.0 && ds < 0.0);
        assert_true(fabs(ds - de) <= 0.1 * fabs(de));
        mp_sim_result_free(&a);
        mp_sim_result_free(&b);
    }
}

/* The YAML keys set them (core/config.c's table), strictly typed. */
static void test_fields(void **state)
{
    (void)state;
    mp_config c = config(4, 1, MP_SCHED_1F1B);
    size_t n = 0;
    const mp_field *tab = mp_parallel_field_table(&n);
    mp_error err;
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "defer_embedding_wgrad", "true", &err),
                     MP_OK);
    assert_true(c.parallel.defer_embedding_wgrad);
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "wgrad_deferral_limit", "22", &err),
                     MP_OK);
    assert_int_equal(c.parallel.wgrad_deferral_limit, 22);
    assert_int_not_equal(mp_fields_set_text(tab, n, &c.parallel, "wgrad_deferral_limit", "-1", &err),
                         MP_OK);
    assert_int_not_equal(
        mp_fields_set_text(tab, n, &c.parallel, "defer_embedding_wgrad", "22", &err), MP_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_rank_slowest),
        cmocka_unit_test(test_head_rank_light),
        cmocka_unit_test(test_where_not),
        cmocka_unit_test(test_simulator),
        cmocka_unit_test(test_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
