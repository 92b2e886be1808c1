/* mp_simulate on real configurations (cost model durations): agreement with
 * estimate, the breakdown adding up, timeline contents, plans with uneven
 * stages, refusals. argv[1]: the examples/ folder. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "sim/simulate.h"
#include "sim/timeline.h"

static const char *g_examples;

static mp_config gpt175b(int64_t gpus, int64_t t, int64_t p, int64_t v, int64_t gb)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    const mp_model *m = mp_model_preset("gpt3-175b");
    assert_non_null(m);
    c.model = *m;
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-a100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = gpus, .seq = 2048, .global_batch = gb,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = t, .pp = p, .vpp = v, .cp = 1, .dp = gpus / (t * p),
                               .sp = true, .micro_batch = 1,
                               .recompute = MP_RECOMPUTE_SELECTIVE, .dist_opt = true,
                               .dp_overlap = true,
                               .schedule = v > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B};
    return c;
}

static double sum_parts(const mp_times *x)
{
    return x->compute + x->recompute + x->tp_comm + x->cp_comm + x->pp_comm + x->bubble +
           x->dp_comm + x->optimizer;
}

/* Simulated and estimated step agree within a few percent on the 175B
 * configuration of Narayanan 2021; parts add up; memory agrees. */
static void test_agrees_with_estimate(void **state)
{
    (void)state;
    const int64_t vs[] = {1, 2, 4};
    for (size_t i = 0; i < 3; i++) {
        mp_config c = gpt175b(1024, 8, 8, vs[i], 1536);
        mp_estimate e;
        mp_sim_result r;
        mp_error err;
        mp_sim_options opt = {0};
        assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
        assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
        assert_int_equal(r.ranks, 8);
        if (fabs(r.makespan / e.time.step - 1) > 0.03)
            fail_msg("v=%lld: simulated %.4f s, estimate %.4f s", (long long)vs[i], r.makespan,
                     e.time.step);
        assert_true(fabs(sum_parts(&r.exposed) - r.makespan) <= 1e-9 * r.makespan);
        assert_true(r.makespan >= r.pipeline_makespan);
        double peak = 0;
        for (int32_t k = 0; k < r.ranks; k++) {
            assert_true(r.bubble_fraction[k] >= 0 && r.bubble_fraction[k] < 0.5);
            if (r.peak_memory[k] > peak)
                peak = r.peak_memory[k];
        }
        if (fabs(peak / e.memory.peak - 1) > 0.02)
            fail_msg("v=%lld: simulated peak %.3g B, estimate %.3g B", (long long)vs[i], peak,
                     e.memory.peak);
        /* interleaving shrinks the bubble */
        assert_true(r.exposed.bubble < r.makespan * 0.1);
        assert_int_equal(r.timeline.n, 0);
        mp_sim_result_free(&r);
    }
}

/* With the timeline: every F has its B on the same rank after it, one F per
 * (micro-batch, chunk) per rank, DP and optimizer events, sane times. */
static void test_timeline_contents(void **state)
{
    (void)state;
    mp_config c = gpt175b(64, 8, 4, 2, 32); /* dp 2, m 16 */
    mp_sim_result r;
    mp_error err;
    mp_sim_options opt = {.record_timeline = true};
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
    int32_t m = 16, v = 2, p = 4;
    static double f_end[4][16][2], b_start[4][16][2];
    memset(f_end, 0, sizeof f_end);
    memset(b_start, 0, sizeof b_start);
    int f = 0, b = 0, dp = 0, optim = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *e = &r.timeline.events[i];
        assert_true(e->start >= 0 && e->end >= e->start && e->end <= r.makespan + 1e-12);
        assert_true(e->rank >= 0 && e->rank < p);
        if (e->kind == MP_EV_F) {
            f++;
            f_end[e->rank][e->microbatch][e->chunk] = e->end;
        } else if (e->kind == MP_EV_B) {
            b++;
            b_start[e->rank][e->microbatch][e->chunk] = e->start;
        }
        dp += e->stream == MP_STREAM_DP;
        optim += e->kind == MP_EV_OPTIMIZER;
    }
    assert_int_equal(f, p * m * v);
    assert_int_equal(b, p * m * v);
    assert_int_equal(dp, p * v);
    assert_int_equal(optim, p);
    for (int32_t k = 0; k < p; k++)
        for (int32_t mb = 0; mb < m; mb++)
            for (int32_t ch = 0; ch < v; ch++)
                assert_true(b_start[k][mb][ch] >= f_end[k][mb][ch]);
    /* the memory curve exists for every rank */
    assert_true(r.n_memory > (size_t)p);
    assert_int_equal(r.memory[r.n_memory - 1].rank, p - 1);
    mp_sim_result_free(&r);
}

/* Plans from examples/: uneven stages, per-layer recompute; numbers agree
 * with estimate on the same plan. */
static void test_example_plans(void **state)
{
    (void)state;
    const char *names[] = {"plan-gpt-pp2.yaml", "plan-gpt-tp2.yaml", "plan-gpt3-175b-1024.yaml"};
    for (size_t i = 0; i < 3; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", g_examples, names[i]);
        mp_plan *plan = calloc(1, sizeof *plan);
        assert_non_null(plan);
        mp_error err;
        if (mp_plan_read_file(path, plan, &err) != MP_OK)
            fail_msg("%s: %s", path, err.msg);
        mp_estimate e;
        mp_sim_result r;
        mp_sim_options opt = {.record_timeline = true};
        assert_int_equal(mp_estimate_config(&plan->config, plan, &e, &err), MP_OK);
        assert_int_equal(mp_simulate(NULL, plan, &opt, &r, &err), MP_OK);
        assert_int_equal(r.ranks, plan->config.parallel.pp);
        if (fabs(r.makespan / e.time.step - 1) > 0.05)
            fail_msg("%s: simulated %.6f s, estimate %.6f s", names[i], r.makespan, e.time.step);
        assert_true(fabs(sum_parts(&r.exposed) - r.makespan) <= 1e-9 * r.makespan);
        mp_sim_result_free(&r);
        free(plan);
    }
}

/* Asynchronous p2p never makes the step longer. */
static void test_async_not_slower(void **state)
{
    (void)state;
    mp_config c = gpt175b(1024, 8, 8, 2, 1536);
    mp_sim_result a, s;
    mp_error err;
    mp_sim_options sync = {0}, async = {.async_p2p = true};
    assert_int_equal(mp_simulate(&c, NULL, &sync, &s, &err), MP_OK);
    assert_int_equal(mp_simulate(&c, NULL, &async, &a, &err), MP_OK);
    assert_true(a.pipeline_makespan <= s.pipeline_makespan);
    assert_true(a.exposed.pp_comm < s.exposed.pp_comm);
    mp_sim_result_free(&a);
    mp_sim_result_free(&s);
}

static void test_refusals(void **state)
{
    (void)state;
    mp_sim_result r;
    mp_error err;
    mp_sim_options opt = {0};
    mp_config c = gpt175b(1024, 8, 8, 2, 1544); /* 1544 not a multiple of b*d = 16 */
    mp_error_clear(&err);
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_EINPUT);
    assert_true(err.msg[0] != '\0');
    c = gpt175b(1024, 8, 8, 2, 1536 + 16 * 4); /* m = 100: not a multiple of pp for interleaving */
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_EINPUT);
    c = gpt175b(1024, 7, 8, 1, 1536);
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_EINPUT);
    assert_int_equal(mp_simulate(NULL, NULL, &opt, &r, &err), MP_EINTERNAL);
}

int main(int argc, char **argv)
{
    g_examples = argc > 1 ? argv[1] : "examples";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agrees_with_estimate),
        cmocka_unit_test(test_timeline_contents),
        cmocka_unit_test(test_example_plans),
        cmocka_unit_test(test_async_not_slower),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
