/* test_p2p_overlap.c — interleaved 1F1B with Megatron's
 * --overlap-p2p-communication (mp_parallel.p2p_overlap; docs/cost-model.md
 * §6, "Overlapped p2p"). In the steady state a forward's transfer runs beside
 * the backward that follows it and a backward's beside the next forward, so
 * each chunk pass exposes only what of each transfer lies beyond the other
 * direction's compute, or NCCL's SM share of it; the fill and drain keep
 * their transfers. Checked by hand against the synchronous estimate of the
 * same configuration (LLaMA 3 70B as Megatron-Bridge's H100 FP8 recipe runs
 * it: t 4, p 8, v 5), and the simulator against its asynchronous engine. */
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

/* The exposed p2p of the slowest rank by hand: per micro-batch and chunk,
 * max(p2p - bwd, p2p x share) + max(p2p - fwd, p2p x share), p2p one
 * transfer as the synchronous estimate charges it (Megatron's batch after
 * each F and B pair: one transfer per chunk pass). */
static void test_steady_state_by_hand(void **state)
{
    (void)state;
    mp_config c = config(8, 5, MP_SCHED_INTERLEAVED);
    mp_estimate off = nemo_estimate(&c);
    c.parallel.p2p_overlap = true;
    mp_estimate on = nemo_estimate(&c);
    int64_t p = 8, v = 5, m = off.microbatches;
    assert_int_equal(m, 64);
    assert_true(off.time.pp_comm > 0.0);
    double p2p = off.time.pp_comm / (double)(m * v);

    mp_pipeline_cost pc;
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    double share = mp_comm_sm_share(&c, MP_COMM_NCCL);
    assert_true(share > 0.0);
    /* the last rank holds the LM head: the slowest, with and without overlap */
    double exposed = 0.0;
    for (int64_t ch = 0; ch < v; ch++) {
        const mp_stage_cost *s = &pc.stages[ch * p + (p - 1)];
        exposed += fmax(p2p - s->bwd, p2p * share) + fmax(p2p - s->fwd, p2p * share);
    }
    mp_pipeline_cost_free(&pc);
    assert_true(near(on.time.pp_comm, (double)m * exposed));
    /* a 32 MiB transfer across nodes hides under a chunk's compute: only the
     * SM share of each of the two is left, far below the synchronous charge
     * of one per pass */
    assert_true(near(on.time.pp_comm, 2.0 * off.time.pp_comm * share));
    assert_true(on.time.pp_comm < off.time.pp_comm);
    assert_true(on.time.step < off.time.step);
    assert_true(near(on.time.compute, off.time.compute));
}

/* Megatron overlaps p2p only in the interleaved schedule: 1F1B (vpp 1) with
 * the flag set estimates as without it. */
static void test_other_schedules_unchanged(void **state)
{
    (void)state;
    mp_config c = config(8, 1, MP_SCHED_1F1B);
    mp_estimate off = nemo_estimate(&c);
    c.parallel.p2p_overlap = true;
    mp_estimate on = nemo_estimate(&c);
    assert_true(off.time.pp_comm > 0.0);
    assert_true(on.time.pp_comm == off.time.pp_comm && on.time.step == off.time.step);
}

/* The simulator runs the flag as its asynchronous engine (isend) on the
 * lists with each transfer at its op: the same result as asking for the
 * asynchronous engine, and a shorter pipeline than Megatron's synchronous
 * batches. */
static void test_simulator_async(void **state)
{
    (void)state;
    mp_config c = config(8, 5, MP_SCHED_INTERLEAVED);
    mp_sim_options sync = {0}, async = {.async_p2p = true};
    mp_sim_result a, b, d;
    mp_error err;
    assert_int_equal(mp_simulate(&c, NULL, &sync, &a, &err), MP_OK);
    c.parallel.p2p_overlap = true;
    assert_int_equal(mp_simulate(&c, NULL, &async, &b, &err), MP_OK);
    assert_int_equal(mp_simulate(&c, NULL, &sync, &d, &err), MP_OK);
    assert_true(d.pipeline_makespan == b.pipeline_makespan);
    assert_true(d.pipeline_makespan < a.pipeline_makespan);
    mp_sim_result_free(&a);
    mp_sim_result_free(&b);
    mp_sim_result_free(&d);
}

/* Megatron's synchronous interleaved batches (p2p_overlap off) in the
 * estimate and the simulator: the same plan (t 4, p 8, v 5, 64
 * micro-batches) gives the same pipeline within 1%, its p2p within 10% (the
 * estimate charges one transfer per chunk pass, the simulator waits for
 * the later of the batch's two), and the estimate's pipeline p2p is
 * m v x, half what waiting on each transfer charged (2 m v x, which fails
 * here). */
static void test_sync_estimate_matches_simulator(void **state)
{
    (void)state;
    mp_config c = config(8, 5, MP_SCHED_INTERLEAVED);
    mp_estimate e = nemo_estimate(&c);
    mp_sim_options sync = {0};
    mp_sim_result r;
    mp_error err;
    assert_int_equal(mp_simulate(&c, NULL, &sync, &r, &err), MP_OK);
    double est_pipe = e.time.step - e.time.dp_comm - e.time.optimizer;
    if (fabs(r.pipeline_makespan / est_pipe - 1) > 0.01)
        fail_msg("simulated pipeline %.6f s, estimate %.6f s", r.pipeline_makespan, est_pipe);
    int64_t m = e.microbatches, v = 5;
    mp_pipeline_cost pc;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    double x = pc.p2p_latency + pc.stages[0].send_bytes / pc.p2p_bw;
    mp_pipeline_cost_free(&pc);
    assert_true(fabs(e.time.pp_comm / ((double)(m * v) * x) - 1) < 0.02);
    mp_sim_result_free(&r);
}

/* The fill and drain's hops with the overlap (docs/cost-model.md §6): T5
 * 11B on 64 dgx-a100 at t 1, p 2, v 16, d 32, micro-batch 2 of 128
 * sequences, so m = p = 2 (megaplan search's winner before, whose p2p
 * Megatron-LM overlaps at pp 2). Its 32 chunk passes per rank are mostly
 * fill and drain, whose 2(p v - 1) = 62 hops the simulator exposes (PP
 * 0.022 s of a 0.385 s step): the estimate charged none of them and was 11%
 * short of the simulation, beyond the cost model's 10% error
 * (docs/validation.md, the bound megaplan search reports gaps against). */
static void test_t5_fill_within_error(void **state)
{
    (void)state;
    mp_config c;
    memset(&c, 0, sizeof c);
    c.model = *mp_model_preset("t5-11b");
    mp_error err;
    assert_int_equal(mp_model_finish(&c.model, &err), MP_OK);
    assert_int_equal(mp_hw_preset("dgx-a100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 64, .seq = c.model.seq, .global_batch = 128,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 1, .pp = 2, .vpp = 16, .cp = 1, .dp = 32, .micro_batch = 2,
                               .dist_opt = true, .dp_overlap = true, .p2p_overlap = true,
                               .schedule = MP_SCHED_INTERLEAVED};
    mp_estimate e = nemo_estimate(&c);
    assert_int_equal(e.microbatches, 2);
    mp_sim_options opt = {0};
    mp_sim_result r;
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
    double gap = r.makespan / e.time.step - 1.0;
    double sim_pp = r.exposed.pp_comm;
    mp_sim_result_free(&r);
    if (fabs(gap) > 0.10)
        fail_msg("simulated %.6g s against the estimate's %.6g s: %+.1f%%", e.time.step * (1 + gap),
                 e.time.step, 100.0 * gap);
    /* the hops are there, in the bubble (the fill's idle ranks wait on them) */
    assert_true(sim_pp > 0.0);
    assert_true(e.time.bubble > 0.0);
}

/* The YAML key parallel.p2p_overlap sets it (core/config.c's table). */
static void test_config_key(void **state)
{
    (void)state;
    mp_config c = config(8, 5, MP_SCHED_INTERLEAVED);
    size_t n;
    const mp_field *tab = mp_parallel_field_table(&n);
    mp_error err;
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "p2p_overlap", "true", &err), MP_OK);
    assert_true(c.parallel.p2p_overlap);
    assert_int_equal(mp_fields_set_text(tab, n, &c.parallel, "p2p_overlap", "false", &err), MP_OK);
    assert_false(c.parallel.p2p_overlap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steady_state_by_hand),
        cmocka_unit_test(test_other_schedules_unchanged),
        cmocka_unit_test(test_simulator_async),
        cmocka_unit_test(test_sync_estimate_matches_simulator),
        cmocka_unit_test(test_t5_fill_within_error),
        cmocka_unit_test(test_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
