/* sim_dp.h — what the DP collectives add to a simulated step: the step with
 * them less the step without them (dp_time, dp_exposed, the gathers and the
 * tied sync zeroed), with the breakdown checked to add up and to count at
 * least that much as DP. For tests that compare it with the estimate's
 * dp_exposed (tests/sim/test_simulate.c, tests/planner/test_param_gather.c);
 * include after <cmocka.h>, "sim/simulate.h" and <math.h>. */
#ifndef MP_TEST_SIM_DP_H
#define MP_TEST_SIM_DP_H

static double sim_dp_added(const mp_config *c, const mp_pipeline_cost *pc)
{
    mp_error err;
    int32_t p = (int32_t)c->parallel.pp,
            v = (int32_t)mp_schedule_chunks(c->parallel.schedule, c->parallel.vpp);
    int32_t m = (int32_t)mp_config_microbatches(c);
    mp_sim_options opt = {0};
    mp_sim_result with, without;
    assert_int_equal(mp_simulate_cost(c->parallel.schedule, p, v, m, pc, true, &opt, &with, &err),
                     MP_OK);
    mp_pipeline_cost none = *pc;
    none.dp_time = none.dp_exposed = none.dp_gather = none.dp_gather_exposed = none.dp_tied = 0;
    none.dp_aligned = false;
    assert_int_equal(
        mp_simulate_cost(c->parallel.schedule, p, v, m, &none, true, &opt, &without, &err), MP_OK);
    double added = with.makespan - without.makespan;
    /* the breakdown still adds up, the gathers' waits counted as DP */
    const mp_times *x = &with.exposed;
    double parts = x->compute + x->recompute + x->tp_comm + x->cp_comm + x->pp_comm + x->bubble +
                   x->dp_comm + x->optimizer;
    assert_true(fabs(parts - with.makespan) <= 1e-9 * with.makespan);
    assert_true(x->dp_comm >= added - 1e-9);
    mp_sim_result_free(&with);
    mp_sim_result_free(&without);
    return added;
}

#endif
