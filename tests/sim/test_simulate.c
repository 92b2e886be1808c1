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

#include "../config_fixture.h"
#include "sim_dp.h"

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

/* The estimate's memory peak (the closed form: mp_schedule_inflight_bound
 * chunks of activations, mp_schedule_w_pending_bound waiting Ws' output
 * gradients, the static bytes with the routed experts' states sharded over
 * edp) and the simulator's (the same bytes counted op by op) agree for every
 * schedule: the simulated peak is at most 0.1% above the estimate (the
 * embedding's dropout masks, per chunk in flight where the estimate takes
 * the rank's mean) and at most a tolerance below it, where the estimate's
 * bounds are not reached by the op order:
 *   PEAK_TOL        2%: 1F1B, interleaved, ZB-H1, DualPipe, DualPipeV;
 *   PEAK_TOL_ZBV   10%: ZB-V, whose waiting Ws are bounded by every chunk in
 *                  flight (its order follows the ops' times);
 *   PEAK_TOL_FULL  17%: split schedules under full recompute, where a
 *                  block's held output gradients (9 b s h / t) outweigh its
 *                  kept input (b s h / t) and the bound counts a W waiting
 *                  for every chunk in flight.
 * DualPipe: the 12 GiB the two disagreed by on DeepSeek-V3
 * (examples/deepseek-v3-h800.yaml: estimate 94.6, simulated 82.6) were the
 * routed experts' optimizer states, sharded over dp = 128 instead of
 * edp = 2 in the simulator's stage costs (7.8 GiB, the simulator wrong), and
 * ZB-H1's held output gradients, which the estimate added to DualPipe's
 * PP + 1 peak where its backwards are not split (4.3 GiB, the estimate
 * wrong): both now say 90.3 GiB. */
#define PEAK_TOL 0.02
#define PEAK_TOL_ZBV 0.10
#define PEAK_TOL_FULL 0.17

/* An example plan (g_examples/name), read into a new allocation. */
static mp_plan *example_plan(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_examples, name);
    mp_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    mp_error err;
    if (mp_plan_read_file(path, plan, &err) != MP_OK)
        fail_msg("%s: %s", path, err.msg);
    return plan;
}

/* The estimate and the simulation of c (or of plan, when not NULL). */
static void estimate_and_simulate(const char *what, const mp_config *c, const mp_plan *plan,
                                  mp_estimate *e, mp_sim_result *r)
{
    mp_error err;
    mp_sim_options opt = {0};
    if (mp_estimate_config(c, plan, e, &err) != MP_OK)
        fail_msg("%s: %s", what, err.msg);
    if (mp_simulate(plan ? NULL : c, plan, &opt, r, &err) != MP_OK)
        fail_msg("%s: %s", what, err.msg);
}

static void check_peaks(const char *what, const mp_config *c, const mp_plan *plan, double tol)
{
    mp_estimate e;
    mp_sim_result r;
    estimate_and_simulate(what, c, plan, &e, &r);
    double peak = 0;
    for (int32_t k = 0; k < r.ranks; k++)
        peak = fmax(peak, r.peak_memory[k]);
    if (getenv("MP_PRINT_PEAKS"))
        printf("%-40s estimate %8.3f GiB  simulated %8.3f GiB  %+.2f%%\n", what,
               e.memory.peak / 1073741824.0, peak / 1073741824.0,
               100 * (peak / e.memory.peak - 1));
    if (peak > e.memory.peak * 1.001 || peak < e.memory.peak * (1 - tol))
        fail_msg("%s: simulated peak %.4f GiB, estimate %.4f GiB", what, peak / 1073741824.0,
                 e.memory.peak / 1073741824.0);
    mp_sim_result_free(&r);
}

static void test_peaks_agree_every_schedule(void **state)
{
    (void)state;
    static const struct {
        mp_schedule_kind s;
        int64_t v;
    } scheds[] = {{MP_SCHED_1F1B, 1},  {MP_SCHED_INTERLEAVED, 2}, {MP_SCHED_ZBH1, 1},
                  {MP_SCHED_ZBV, 2},   {MP_SCHED_DUALPIPE, 1},    {MP_SCHED_DUALPIPEV, 2}};
    static const struct {
        const char *model, *hw;
        int64_t t, p, d, m;
        mp_recompute rc;
    } cfgs[] = {{"gpt3-175b", "dgx-a100", 8, 8, 2, 32, MP_RECOMPUTE_SELECTIVE},
                {"llama3-70b", "dgx-h100", 4, 4, 4, 16, MP_RECOMPUTE_NONE},
                {"gpt3-175b", "dgx-h100", 8, 16, 1, 64, MP_RECOMPUTE_FULL}};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (size_t j = 0; j < sizeof scheds / sizeof scheds[0]; j++) {
            mp_config c;
            memset(&c, 0, sizeof c);
            const mp_model *m = mp_model_preset(cfgs[i].model);
            assert_non_null(m);
            c.model = *m;
            mp_error err;
            assert_int_equal(mp_hw_preset(cfgs[i].hw, &c.hw, &err), MP_OK);
            int64_t t = cfgs[i].t, p = cfgs[i].p, d = cfgs[i].d;
            c.training = (mp_training){.gpus = t * p * d, .seq = m->seq,
                                       .global_batch = cfgs[i].m * d,
                                       .precision = MP_DTYPE_BF16};
            c.parallel = (mp_parallel){.tp = t, .pp = p, .vpp = scheds[j].v, .cp = 1, .dp = d,
                                       .sp = true, .micro_batch = 1, .recompute = cfgs[i].rc,
                                       .dist_opt = true, .dp_overlap = true,
                                       .schedule = scheds[j].s};
            char what[96];
            snprintf(what, sizeof what, "%s pp%lld m%lld %s", cfgs[i].model, (long long)p,
                     (long long)cfgs[i].m, mp_schedule_name(scheds[j].s));
            double tol = scheds[j].s == MP_SCHED_ZBV ? PEAK_TOL_ZBV : PEAK_TOL;
            if (cfgs[i].rc == MP_RECOMPUTE_FULL && mp_schedule_splits_backward(scheds[j].s))
                tol = PEAK_TOL_FULL;
            check_peaks(what, &c, NULL, tol);
        }
    /* a mixture of experts whose experts' states shard over edp = 2 of
     * dp = 128: DeepSeek-V3's DualPipe plan */
    mp_plan *plan = example_plan("deepseek-v3-h800.yaml");
    check_peaks("deepseek-v3-h800.yaml dualpipe", &plan->config, plan, PEAK_TOL);
    /* and within 0.1% there: the closed form is exact for DualPipe */
    {
        mp_estimate e;
        mp_sim_result r;
        estimate_and_simulate("deepseek-v3-h800.yaml", &plan->config, plan, &e, &r);
        double peak = 0;
        for (int32_t k = 0; k < r.ranks; k++)
            peak = fmax(peak, r.peak_memory[k]);
        assert_true(fabs(peak / e.memory.peak - 1) < 0.001);
        mp_sim_result_free(&r);
    }
    free(plan);
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
    /* per chunk a reduction and (dist-opt, aligned: cost.c) a parameter
     * all-gather, and the tied embedding's sync */
    assert_int_equal(dp, 2 * p * v + p);
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
        mp_plan *plan = example_plan(names[i]);
        mp_error err;
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

/* DP under Megatron-Core's overlapped gradient reduction and parameter
 * all-gather (docs/cost-model.md §5, docs/simulator.md "DP"): the simulator
 * launches each chunk's reduction from the schedule it runs (interleaved:
 * pipeline rank r backwards after the chunk's last backward, chunk 0's
 * after the cooldown) and gathers the parameters from the step's start,
 * before each chunk's first forward; estimate's closed form
 * (mp_dp_aligned_reduce_exposed, mp_dp_early_gather_exposed) charges the
 * same from the launch times the schedule implies. What the DP collectives
 * add to the simulated step (with them less without them) is held to the
 * estimate's dp_exposed within 5% over a grid of plans: GPT-3 175B on DGX
 * A100 (bf16, no SM contention) and LLaMA-3 70B on DGX H100 (FP8, NCCL's
 * SMs slow the compute beside the collectives), tp 8, pp 4..16, 1F1B and
 * interleaved with v = 2..4, d 8 and 64, 16 micro-batches a replica. On
 * this grid they agree to 4%. Before (the closed form's window (v-1)p -
 * (p-1) chunk-backwards, the 1F1B simulation queueing the gather with the
 * reductions) GPT-3 175B t8 p8 v2 d16 was 0.54 s estimated against 0.32 s
 * simulated, t8 p4 v4 0.42 s against 0.32 s, and 1F1B plans simulated 7-15%
 * (LLaMA-3 70B up to 3.6x) above the estimate. */
static void dp_exposure(const mp_config *c, mp_pipeline_cost *pc, double *sim)
{
    mp_error err;
    assert_int_equal(mp_pipeline_cost_build(c, NULL, pc, &err), MP_OK);
    assert_true(pc->dp_exposed > 0 && pc->dp_gather > 0);
    *sim = sim_dp_added(c, pc);
}

static mp_config llama70b_h100(int64_t gpus, int64_t t, int64_t p, int64_t v)
{
    mp_config c = gpt175b(gpus, t, p, v, gpus / (t * p) * 16);
    c.model = *mp_model_preset("llama3-70b");
    c.model.seq = 8192;
    mp_error err;
    assert_int_equal(mp_model_finish(&c.model, &err), MP_OK);
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training.seq = 8192;
    c.training.precision = MP_DTYPE_FP8;
    c.training.fp8_recipe = MP_FP8_TENSORWISE;
    return c;
}

static void test_dp_exposure_matches_estimate(void **state)
{
    (void)state;
    const int64_t ps[] = {4, 8, 16}, ds[] = {8, 64};
    int checked = 0, aligned = 0;
    for (int model = 0; model < 2; model++)
        for (size_t i = 0; i < 3; i++)
            for (int64_t v = 1; v <= 4; v++)
                for (size_t j = 0; j < 2; j++) {
                    int64_t p = ps[i], d = ds[j], t = 8;
                    int64_t layers = model == 0 ? 96 : 80;
                    if (layers % (p * v) != 0)
                        continue;
                    mp_config c = model == 0 ? gpt175b(t * p * d, t, p, v, d * 16)
                                             : llama70b_h100(t * p * d, t, p, v);
                    mp_pipeline_cost pc;
                    double sim;
                    dp_exposure(&c, &pc, &sim);
                    assert_true(pc.dp_aligned == (v > 1));
                    if (fabs(sim - pc.dp_exposed) > 0.05 * pc.dp_exposed)
                        fail_msg("%s t%lld p%lld v%lld d%lld: simulated DP exposure %.4f s, "
                                 "estimate %.4f s",
                                 model == 0 ? "gpt3-175b" : "llama3-70b", (long long)t,
                                 (long long)p, (long long)v, (long long)d, sim, pc.dp_exposed);
                    checked++;
                    aligned += pc.dp_aligned;
                    mp_pipeline_cost_free(&pc);
                }
    assert_true(checked >= 30 && aligned >= 18);
}

/* The split-backward schedules (docs/cost-model.md §5, "DP under the
 * split-backward schedules"): the simulator reduces each chunk from the start
 * of the last weight-gradient op it runs for it (its last bucket after that
 * op) and gathers the parameters at the step's start; the estimate's closed
 * form (mp_dp_tail_reduce_exposed, mp_dp_gather_due_exposed) places those ops
 * from the schedule. ZB-H1's last W is every rank's last op: the two agree.
 * ZB-V and DualPipeV: the estimate replays the V lists the simulator runs
 * under the stage times (cost.c v_replay_windows), so each chunk's last W
 * and each rank's end come from the order itself. Megatron-Core buckets
 * only pipeline rank 0's first chunk: every other chunk is reduced whole
 * from its last W's end, both sides (docs/cost-model.md §5, "Buckets"),
 * ZB-H1's ranks ending where its order puts them (lead_r = w_0 +
 * sum_{k<r} (b_k + x) - min(r+1, m) w_r). Every schedule, pp 2, 4 and 8, is
 * held to DP_TOL (on this grid: ZB-H1 1.00x-1.03x, ZB-V 0.99x-1.00x,
 * DualPipeV 0.98x-1.00x, DualPipe 1.00x). DualPipeV's replay receives and
 * sends where the lists do (both inputs of an F&B unit before its F, both
 * outputs after its B and W: schedule_vorder.c strip_transfers); before, it
 * sent each output as its op ended: DualPipeV at pp 2 below 6p
 * micro-batches 0.70x (llama3-70b d 4) and 0.82x (d 32), gpt3-175b at pp 2
 * 0.96x-0.97x, DualPipe 0.98x. Before the
 * bucketing rule (every chunk bucketed): DualPipeV 0.96x at pp 2 where the
 * gathers' waits move the ranks;
 * before: ZB-V 0.97x-1.60x, 1.60x at pp 2, whose rank 1 defers four Ws to
 * its end and so ends after rank 0, and DualPipeV 0.69x-1.00x from an upper
 * bound on its chunk-1 W). DualPipe, whose order is DualPipeV's on p/2 ranks,
 * the same way per direction: 0.98x-1.00x (before, one window over both
 * directions: the simulator 1.13x-1.31x, and it took its last-bucket share
 * from that estimate). m runs from 2p to 64p (432 plans). ZB-V's windows
 * move with m past any bound (its order is picked among three by their
 * times, two of them list schedulings over real times with no steady state:
 * docs/cost-model.md §5), so the estimate replays all m where that costs no
 * more than pp 16's 4p micro-batches (p m <= 1024: to 64p at pp 4, 16p at
 * pp 8), else 1024/p or 4p; before, 4p at every pp, and ZB-V plans past it
 * were held to 20% (0.99x-1.16x at m = 8p and 16p, 1.21x at mixtral pp 4
 * m = 64p): now ZB-V 0.99x-1.00x, pp 8 at 32p and 64p, not replayed whole,
 * included. The fixed-phase V schedules' windows are the whole replay's for
 * every m (mp_schedule_v_windows, tests/sim/test_vorder.c
 * test_dpv_windows_are_exact): DualPipeV 0.98x-1.00x (before, 2p
 * micro-batches for any m: 0.96x for mixtral pp 2 at 8p and 16p, now 1.00x),
 * DualPipe 1.00x.
 * The simulated step stays within STEP_TOL of the
 * estimate's: the V schedules' simulated pipelines run up to 14% shorter
 * than their closed forms on their own (test_bubble_share_matches_estimate,
 * docs/simulator.md); at most 8.2% here (8.0% before DualPipe(V)'s commits
 * posted their sends together). MP_PRINT_DP=1 prints the grid. */
#define DP_TOL 0.05
#define STEP_TOL 0.12

static void test_split_dp_matches_estimate(void **state)
{
    (void)state;
    static const mp_schedule_kind scheds[] = {MP_SCHED_ZBH1, MP_SCHED_ZBV, MP_SCHED_DUALPIPEV,
                                              MP_SCHED_DUALPIPE};
    static const struct {
        const char *model, *hw;
        int64_t t, ep;
    } cfgs[] = {{"gpt3-175b", "dgx-a100", 8, 0},
                {"llama3-70b", "dgx-h100", 4, 0},
                {"mixtral-8x7b", "dgx-h100", 2, 8}};
    const int64_t pps[] = {2, 4, 8}, ds[] = {4, 32}, mults[] = {2, 4, 8, 16, 32, 64};
    bool print = getenv("MP_PRINT_DP") != NULL;
    int checked = 0, per_pp[9] = {0};
    double lo = INFINITY, hi = 0, worst_step = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (size_t j = 0; j < sizeof scheds / sizeof scheds[0]; j++)
            for (size_t k = 0; k < sizeof pps / sizeof pps[0]; k++)
                for (size_t l = 0; l < sizeof ds / sizeof ds[0]; l++)
                    for (size_t q = 0; q < sizeof mults / sizeof mults[0]; q++) {
                        mp_schedule_kind s = scheds[j];
                        int64_t t = cfgs[i].t, p = pps[k], d = ds[l], m = mults[q] * p;
                        const mp_model *md = mp_model_preset(cfgs[i].model);
                        mp_config c;
                        memset(&c, 0, sizeof c);
                        c.model = *md;
                        mp_error err;
                        assert_int_equal(mp_hw_preset(cfgs[i].hw, &c.hw, &err), MP_OK);
                        c.training = (mp_training){.gpus = t * p * d, .seq = md->seq,
                                                   .global_batch = m * d,
                                                   .precision = MP_DTYPE_BF16};
                        c.parallel = (mp_parallel){
                            .tp = t, .pp = p, .vpp = mp_schedule_is_v(s) ? 2 : 1, .cp = 1,
                            .dp = d, .sp = true, .micro_batch = 1,
                            .recompute = MP_RECOMPUTE_SELECTIVE, .dist_opt = true,
                            .dp_overlap = true, .schedule = s, .ep = cfgs[i].ep,
                            .etp = cfgs[i].ep > 0};
                        mp_estimate e;
                        if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
                            continue; /* a split the configuration check refuses */
                        mp_pipeline_cost pc;
                        double sim;
                        dp_exposure(&c, &pc, &sim);
                        assert_true(pc.dp_tail);
                        mp_sim_result r;
                        mp_sim_options opt = {0};
                        assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
                        double ratio = sim / pc.dp_exposed, step = r.makespan / e.time.step - 1;
                        if (print)
                            printf("%-13s p%-2lld d%-3lld m%-3lld %-10s DP est %.4f sim %.4f "
                                   "(x%.2f)  step est %.4f sim %.4f (%+.1f%%)\n",
                                   cfgs[i].model, (long long)p, (long long)d, (long long)m,
                                   mp_schedule_name(s), pc.dp_exposed, sim, ratio,
                                   e.time.step, r.makespan, 100 * step);
                        bool v = mp_schedule_is_v(s) || s == MP_SCHED_DUALPIPE;
                        if (fabs(ratio - 1) > DP_TOL)
                            fail_msg("%s p%lld d%lld m%lld %s: simulated DP exposure %.4f s, "
                                     "estimate %.4f s",
                                     cfgs[i].model, (long long)p, (long long)d, (long long)m,
                                     mp_schedule_name(s), sim, pc.dp_exposed);
                        if (fabs(step) > STEP_TOL)
                            fail_msg("%s p%lld d%lld m%lld %s: simulated step %.4f s, "
                                     "estimate %.4f s",
                                     cfgs[i].model, (long long)p, (long long)d, (long long)m,
                                     mp_schedule_name(s), r.makespan, e.time.step);
                        if (v) {
                            per_pp[k] += s == MP_SCHED_ZBV;
                            per_pp[3 + k] += s == MP_SCHED_DUALPIPEV;
                            per_pp[6 + k] += s == MP_SCHED_DUALPIPE;
                            lo = fmin(lo, ratio);
                            hi = fmax(hi, ratio);
                        }
                        worst_step = fmax(worst_step, fabs(step));
                        checked++;
                        mp_sim_result_free(&r);
                        mp_pipeline_cost_free(&pc);
                    }
    if (print)
        printf("%d plans: V schedules' DP x%.2f-x%.2f, step within %.1f%%\n", checked, lo, hi,
               100 * worst_step);
    assert_true(checked >= 400);
    for (int k = 0; k < 9; k++) /* ZB-V, DualPipeV and DualPipe at pp 2, 4 and 8 */
        assert_true(per_pp[k] >= 8);
}

/* The simulator on hand-made stages (no transfers, every chunk alike):
 * p = 4, v = 2 (interleaved) or 1, forward 1 s, backward 2 s; the exposure
 * the closed form gives by hand (tests/planner/test_dp_aligned.c). */
static double uniform_dp(int32_t v, double red, double ag, double sm)
{
    const int32_t p = 4, m = 8;
    mp_stage_cost st[8];
    memset(st, 0, sizeof st);
    for (int32_t k = 0; k < p * v; k++) {
        st[k].fwd = 1.0;
        st[k].bwd = st[k].bwd_input = 2.0;
        st[k].grad_bytes = 1e9;
    }
    mp_pipeline_cost pc;
    memset(&pc, 0, sizeof pc);
    pc.n_stages = p * v;
    pc.stages = st;
    pc.dp_time = red + ag;
    pc.dp_gather = ag;
    pc.dp_aligned = v > 1;
    pc.dp_bucket_bytes = 1e8 * v; /* a tenth of chunk 0 */
    pc.dp_sm_reduce = pc.dp_sm_gather = sm;
    mp_pipeline_cost none = pc;
    none.dp_time = none.dp_gather = 0;
    none.dp_aligned = false;
    mp_sim_options opt = {0};
    mp_sim_result with, without;
    mp_error err;
    mp_schedule_kind s = v > 1 ? MP_SCHED_INTERLEAVED : MP_SCHED_1F1B;
    assert_int_equal(mp_simulate_cost(s, p, v, m, &pc, true, &opt, &with, &err), MP_OK);
    assert_int_equal(mp_simulate_cost(s, p, v, m, &none, true, &opt, &without, &err), MP_OK);
    double x = with.makespan - without.makespan;
    mp_sim_result_free(&with);
    mp_sim_result_free(&without);
    return x;
}

static void test_dp_by_hand(void **state)
{
    (void)state;
    /* chunk 1's reduction starts p*b = 8 s before the end and hides;
     * chunk 0's follows the last backward */
    assert_float_equal(uniform_dp(2, 6.0, 0.0, 0.0), 3.0, 1e-9);
    assert_float_equal(uniform_dp(2, 20.0, 0.0, 0.0), 12.0, 1e-9);
    assert_float_equal(uniform_dp(2, 6.0, 0.0, 0.25), 3.75, 1e-9);
    /* the gathers: chunk 0's waited for, chunk 1's due p forwards later */
    assert_float_equal(uniform_dp(2, 0.0, 4.0, 0.0), 1.0, 1e-9);
    assert_float_equal(uniform_dp(2, 0.0, 12.0, 0.0), 8.0, 1e-9);
    assert_float_equal(uniform_dp(2, 0.0, 4.0, 0.25), 1.5, 1e-9);
    /* 1F1B: the gather before the first forward, beyond it 3 s */
    assert_float_equal(uniform_dp(1, 0.0, 4.0, 0.0), 3.0, 1e-9);
}

/* The simulated breakdown is the critical rank's (docs/simulator.md, "What
 * comes out"), the estimate's its slowest rank's (planner/cost.c), over a
 * grid of plans, dense and MoE: 1F1B, interleaved 1F1B (v = 2), ZB-V and
 * DualPipeV; pp 4, 8, 16; m = 2p and 4p (splits the configuration check
 * refuses are left out). DeepSeek-V3's 61 layers split unevenly, its first
 * stage holding the 3 dense layers: the case the breakdown got wrong when
 * it reported the rank that finishes last (the lightly loaded first one;
 * on the search winner tp 2 pp 16 ep 32, bubble 27% of the step against the
 * estimate's 5.6%).
 * - Both report the same rank's work: the critical rank's F/B/W time
 *   (compute, recompute, TP, CP) is the estimate's slowest rank's within
 *   BUSY_TOL of the step.
 * - 1F1B and interleaved: the bubble shares of the step agree within
 *   BUBBLE_TOL (points). On this grid: within 0.54 for even splits (Mixtral pp 16), 0.82 for
 *   DeepSeek-V3's uneven ones, where the closed form's fill (the other ranks'
 *   f + b + p2p summed, planner/pipeline.c) approximates the simulated one
 *   (the path through stages of different sizes); the margin above that
 *   leaves room for other default splits of its 61 layers.
 * - ZB-V and DualPipeV differ legitimately: the simulator runs the real
 *   order (ZB-V's from the stage costs, DualPipeV's phases), up to 14% of
 *   the step shorter than their closed forms here (an upper bound for
 *   DualPipeV where B > W; docs/simulator.md; 13.5% at Mixtral pp 16, m 32,
 *   DualPipeV, 11.6% before its commits' sends were posted together), and
 *   the time saved is bubble: sim 5.6% against est 15.0% there.
 *   There the bubble must differ from the estimate's by what the pipeline
 *   does (simulated less closed form) less what the closed form charges as
 *   p2p beyond the simulated exposed waits, within BUSY_TOL of the step;
 *   with the parts adding up that is the F/B/W check again.
 * MP_PRINT_BUBBLES=1 prints the grid. Mixtral on pp 8 with m = 32 under
 * ZB-V is left out: its order from real costs stalls ("zb-v order stalled",
 * also before this test; reported, not fixed here). */
#define BUBBLE_TOL 0.015
#define BUSY_TOL 0.01

static void test_bubble_share_matches_estimate(void **state)
{
    (void)state;
    static const struct {
        mp_schedule_kind s;
        int64_t v;
    } scheds[] = {{MP_SCHED_1F1B, 1},
                  {MP_SCHED_INTERLEAVED, 2},
                  {MP_SCHED_ZBV, 2},
                  {MP_SCHED_DUALPIPEV, 2}};
    static const struct {
        const char *model, *hw;
        int64_t t, ep;
        mp_recompute rc;
    } cfgs[] = {{"gpt3-175b", "dgx-a100", 8, 0, MP_RECOMPUTE_SELECTIVE},
                {"llama3-70b", "dgx-h100", 4, 0, MP_RECOMPUTE_NONE},
                {"mixtral-8x7b", "dgx-h100", 2, 8, MP_RECOMPUTE_SELECTIVE},
                {"deepseek-v3", "dgx-h100", 2, 32, MP_RECOMPUTE_NONE}};
    const int64_t pps[] = {4, 8, 16}, mults[] = {2, 4};
    bool print = getenv("MP_PRINT_BUBBLES") != NULL;
    int checked = 0, uneven = 0, moe = 0;
    double worst = 0, worst_v = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (size_t j = 0; j < sizeof scheds / sizeof scheds[0]; j++)
            for (size_t k = 0; k < sizeof pps / sizeof pps[0]; k++)
                for (size_t l = 0; l < sizeof mults / sizeof mults[0]; l++) {
                    mp_config c;
                    memset(&c, 0, sizeof c);
                    const mp_model *md = mp_model_preset(cfgs[i].model);
                    assert_non_null(md);
                    c.model = *md;
                    mp_error err;
                    assert_int_equal(mp_hw_preset(cfgs[i].hw, &c.hw, &err), MP_OK);
                    int64_t t = cfgs[i].t, p = pps[k], m = mults[l] * p;
                    int64_t d = cfgs[i].ep > 0 ? cfgs[i].ep / t : 2; /* ep = tp*dp, etp 1 */
                    mp_schedule_kind s = scheds[j].s;
                    if (s == MP_SCHED_ZBV && strcmp(cfgs[i].model, "mixtral-8x7b") == 0 &&
                        p == 8 && m == 32)
                        continue;
                    c.training = (mp_training){.gpus = t * p * d, .seq = md->seq,
                                               .global_batch = m * d,
                                               .precision = MP_DTYPE_BF16};
                    /* the V schedules without DP overlap: with it their
                     * parameter gathers start with the step and the first
                     * forwards wait for them (DP time inside the simulated
                     * pipeline, which the closed form's pipeline leaves out) */
                    c.parallel = (mp_parallel){.tp = t, .pp = p, .vpp = scheds[j].v, .cp = 1,
                                               .dp = d, .sp = true, .micro_batch = 1,
                                               .recompute = cfgs[i].rc, .dist_opt = true,
                                               .dp_overlap = !mp_schedule_is_v(s),
                                               .schedule = s,
                                               .ep = cfgs[i].ep, .etp = cfgs[i].ep > 0};
                    mp_estimate e;
                    mp_sim_result r;
                    mp_sim_options opt = {0};
                    if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
                        continue;
                    char what[96];
                    snprintf(what, sizeof what, "%s pp%lld m%lld %s", cfgs[i].model,
                             (long long)p, (long long)m, mp_schedule_name(s));
                    if (mp_simulate(&c, NULL, &opt, &r, &err) != MP_OK)
                        fail_msg("%s: %s", what, err.msg);
                    assert_true(fabs(sum_parts(&r.exposed) - r.makespan) <= 1e-9 * r.makespan);
                    const mp_times *x = &r.exposed, *y = &e.time;
                    double busy = x->compute + x->recompute + x->tp_comm + x->cp_comm;
                    double ebusy = y->compute + y->recompute + y->tp_comm + y->cp_comm;
                    double sim = x->bubble / x->step, est = y->bubble / y->step;
                    double pipe = r.pipeline_makespan - (y->step - y->dp_comm - y->optimizer);
                    double off = mp_schedule_is_v(s)
                                     ? fabs((x->bubble - y->bubble) - pipe +
                                            (x->pp_comm - y->pp_comm)) / y->step
                                     : fabs(sim - est);
                    if (print)
                        printf("%-34s crit %2d  bubble sim %5.1f%% est %5.1f%%  pipeline "
                               "%+5.1f%%  busy %+5.2f%%  off %.2f\n",
                               what, (int)r.critical_rank, 100 * sim, 100 * est,
                               100 * pipe / y->step, 100 * (busy - ebusy) / y->step, 100 * off);
                    if (fabs(busy - ebusy) > BUSY_TOL * y->step)
                        fail_msg("%s: the critical rank %d's F/B/W time %.4f s, the estimate's "
                                 "slowest rank's %.4f s",
                                 what, (int)r.critical_rank, busy, ebusy);
                    if (off > (mp_schedule_is_v(s) ? BUSY_TOL : BUBBLE_TOL))
                        fail_msg("%s: simulated bubble %.1f%% of the step (critical rank %d), "
                                 "estimate %.1f%%, pipeline %+.2f s against the closed form",
                                 what, 100 * sim, (int)r.critical_rank, 100 * est, pipe);
                    if (mp_schedule_is_v(s))
                        worst_v = fmax(worst_v, off);
                    else
                        worst = fmax(worst, off);
                    checked++;
                    uneven += c.model.layers % (p * scheds[j].v) != 0;
                    moe += cfgs[i].ep > 0;
                    mp_sim_result_free(&r);
                }
    if (print)
        printf("%d plans (%d MoE, %d uneven): bubble off by at most %.2f points (1F1B, "
               "interleaved), %.2f (V schedules, after the pipeline's difference)\n",
               checked, moe, uneven, 100 * worst, 100 * worst_v);
    assert_true(checked >= 60 && moe >= 20 && uneven >= 6);
}

static mp_config zb_config(const char *model, const char *hw, int64_t t, int64_t p, int64_t d,
                           int64_t ep, int64_t b, int64_t m, mp_recompute rc)
{
    mp_config c = preset_on(model, hw);
    c.training = (mp_training){.gpus = t * p * d, .seq = c.model.seq, .global_batch = m * b * d,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = t, .pp = p, .vpp = 1, .cp = 1, .dp = d, .sp = t > 1,
                               .micro_batch = b, .recompute = rc, .dist_opt = true,
                               .dp_overlap = true, .schedule = MP_SCHED_ZBH1, .ep = ep,
                               .etp = ep > 0};
    return c;
}

/* ZB-H1 without a pipeline (pp 1) runs as 1F1B (sim/simulate.c): each
 * backward whole, the gradients' reductions under it, as the estimate costs
 * it. The search winner of `megaplan search --model mixtral-8x7b --gpus 128
 * --hw dgx-h100 --global-batch 128 --fix schedule=zb-h1` (tp 2 sp, pp 1,
 * dp 64, ep 8, mb 2): before, the simulator split W from B, so the last
 * micro-batch's gradients filled their buckets only under W, and simulated
 * 0.945 s (DP 0.337 s exposed) against the estimate's 0.707 s (+34%). */
static void test_zbh1_without_pipeline(void **state)
{
    (void)state;
    mp_config c = zb_config("mixtral-8x7b", "dgx-h100", 2, 1, 64, 8, 2, 1, MP_RECOMPUTE_NONE);
    mp_config one = c;
    one.parallel.schedule = MP_SCHED_1F1B;
    mp_estimate e;
    mp_sim_result z, f;
    mp_error err;
    mp_sim_options opt = {0};
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_int_equal(mp_simulate(&c, NULL, &opt, &z, &err), MP_OK);
    assert_int_equal(mp_simulate(&one, NULL, &opt, &f, &err), MP_OK);
    if (fabs(z.makespan - f.makespan) > 1e-9 * f.makespan ||
        fabs(z.exposed.dp_comm - f.exposed.dp_comm) > 1e-9 * f.makespan)
        fail_msg("zb-h1 at pp 1: simulated %.4f s (DP %.4f s), 1f1b %.4f s (DP %.4f s)",
                 z.makespan, z.exposed.dp_comm, f.makespan, f.exposed.dp_comm);
    if (fabs(z.makespan / e.time.step - 1) > 0.005)
        fail_msg("zb-h1 at pp 1: simulated %.4f s, estimate %.4f s", z.makespan, e.time.step);
    mp_sim_result_free(&z);
    mp_sim_result_free(&f);
}

/* ZB-H1's pipeline, simulated and estimated, over a grid: equal stages
 * (GPT-3 175B, Llama 3 70B) and T5-11B's encoder and decoder stages (its
 * decoder blocks heavier), pp 2, 4, 8, m from 1 to 4p, micro-batch 1 and 2.
 * With fewer micro-batches than stages the deferred Ws cannot fill the
 * cool-down and the step is the last micro-batch's critical path (planner/
 * cost.c zbh1_critical); the estimate's rounds-and-ramps form alone was up
 * to 17% low there (`megaplan search --model t5-11b --gpus 128 --hw
 * dgx-h100 --global-batch 64 --fix schedule=zb-h1`: pp 4, dp 32, mb 2, m 1,
 * estimate 0.135 s, simulated 0.158 s; on this grid it was 10-42% low at
 * m = 1, and up to 42% low overall). The pipelines (the step less the
 * optimizer; DP without overlap, outside the pipeline) agree within ZB_TOL1
 * at m = 1, where the critical path is all the lists run (-0.9% to -0.1%:
 * an offset of under 1% not traced further), and within
 * ZB_TOL elsewhere: for m >= p the estimate's ramps are up to 5.1% above the
 * simulated pipeline on T5's uneven stages (as before this term: T5 pp 2
 * and 8 with micro-batch 2 at m = p), and for 1 < m < p the critical path's
 * m - 1 rounds of the slowest rank are up to 3% above it (the simulated
 * lists overlap part of them with the other stages' passes).
 * MP_PRINT_ZB=1 prints the grid. */
#define ZB_TOL1 0.01
#define ZB_TOL 0.055

static void test_zbh1_pipeline_matches_estimate(void **state)
{
    (void)state;
    static const struct {
        const char *model, *hw;
        int64_t t;
    } cfgs[] = {{"gpt3-175b", "dgx-a100", 8}, {"llama3-70b", "dgx-h100", 4},
                {"t5-11b", "dgx-h100", 1}};
    const int64_t pps[] = {2, 4, 8}, bs[] = {1, 2};
    bool print = getenv("MP_PRINT_ZB") != NULL;
    int checked = 0, few = 0;
    double worst = 0;
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (size_t k = 0; k < sizeof pps / sizeof pps[0]; k++)
            for (size_t l = 0; l < sizeof bs / sizeof bs[0]; l++)
                for (int64_t m = 1; m <= 4 * pps[k]; m = m < pps[k] ? m + 1 : m * 2) {
                    int64_t p = pps[k];
                    mp_config c = zb_config(cfgs[i].model, cfgs[i].hw, cfgs[i].t, p, 4, 0, bs[l],
                                            m, MP_RECOMPUTE_SELECTIVE);
                    c.parallel.dp_overlap = false; /* DP after the pipeline, apart */
                    mp_estimate e;
                    mp_sim_result r;
                    mp_error err;
                    mp_sim_options opt = {0};
                    if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
                        continue; /* a split the configuration check refuses */
                    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
                    double est = e.time.step - e.time.dp_comm - e.time.optimizer;
                    double off = r.pipeline_makespan / est - 1;
                    if (print)
                        printf("%-12s pp%lld b%lld m%-3lld pipeline sim %.4f est %.4f (%+.2f%%)\n",
                               cfgs[i].model, (long long)p, (long long)bs[l], (long long)m,
                               r.pipeline_makespan, est, 100 * off);
                    if (fabs(off) > (m == 1 ? ZB_TOL1 : ZB_TOL))
                        fail_msg("%s pp%lld b%lld m%lld zb-h1: simulated pipeline %.4f s, "
                                 "estimate %.4f s (%+.1f%%)",
                                 cfgs[i].model, (long long)p, (long long)bs[l], (long long)m,
                                 r.pipeline_makespan, est, 100 * off);
                    worst = fmax(worst, fabs(off));
                    checked++;
                    few += m < p;
                    mp_sim_result_free(&r);
                }
    if (print)
        printf("%d plans (%d with m < pp): within %.2f%%\n", checked, few, 100 * worst);
    assert_true(checked >= 60 && few >= 20);
}

/* DualPipe(V)'s estimated pipeline is the simulator's on real, uneven
 * stages (planner/dualpipe_replay.c: the estimate runs the order itself),
 * to 1e-9 of the step, with the DP reductions after the pipeline (dp_overlap
 * off: with it the simulated pipeline also holds the parameter gathers
 * before each chunk's first forward, which the estimate counts as DP).
 * The plans: DeepSeek-V3 as examples/deepseek-v3-h800.yaml runs it (pp 16
 * DualPipe, stages 3 | 4 x 14 | 2 + head and MTP, the all-to-all under the
 * F&B units) and without the EP overlap; DeepSeek-V3 pp 8 DualPipe with a
 * plan's split whose last stage holds ten blocks, the head and MTP (a
 * DualPipeV plan of its 61 layers is refused by the configuration check);
 * Mixtral 8x7B pp 8 and pp 16 DualPipeV (the V's rank 0 holds the
 * embedding and the head) with and without the overlap, at m from 2p to
 * 8p; Llama 3 70B pp 8 DualPipeV and DualPipe. Before, the estimate costed
 * DualPipe(V) rank by rank (docs/cost-model.md §6) and was up to 9.9% above
 * the simulated pipeline (Mixtral pp 16 DualPipeV, m 32: 0.963 s against
 * 0.877), the DeepSeek-V3 plan 0.31% below it with the overlap. */
#define DUAL_TOL 1e-9

static void check_dual_pipeline(const char *what, const mp_config *c, const mp_plan *plan)
{
    mp_estimate e;
    mp_sim_result r;
    estimate_and_simulate(what, c, plan, &e, &r);
    double est = e.time.step - e.time.dp_comm - e.time.optimizer;
    if (getenv("MP_PRINT_DUAL"))
        printf("%-44s m %4d pipeline sim %.9f est %.9f\n", what, (int)r.microbatches,
               r.pipeline_makespan, est);
    if (fabs(est - r.pipeline_makespan) > DUAL_TOL * r.pipeline_makespan)
        fail_msg("%s: simulated pipeline %.12g s, estimate %.12g s", what, r.pipeline_makespan,
                 est);
    mp_sim_result_free(&r);
}

static void test_dualpipe_uneven_matches_simulator(void **state)
{
    (void)state;
    mp_plan *plan = example_plan("deepseek-v3-h800.yaml");
    plan->config.parallel.dp_overlap = false;
    check_dual_pipeline("deepseek-v3-h800 dualpipe pp16", &plan->config, plan);
    plan->config.parallel.moe_a2a_overlap = false;
    check_dual_pipeline("deepseek-v3-h800 dualpipe pp16, no EP overlap", &plan->config, plan);
    /* pp 8, the plan's own split: the embedding with three blocks, six
     * stages of eight, the last ten blocks with the head and MTP */
    plan->config.parallel.pp = 8;
    plan->config.parallel.dp = 256;
    plan->config.training.global_batch = 16 * 256;
    plan->config.parallel.moe_a2a_overlap = true;
    plan->n_stages = 8;
    plan->stages[0] = (mp_stage_range){0, 4};
    for (int32_t k = 1; k < 7; k++)
        plan->stages[k] = (mp_stage_range){4 + 8 * (k - 1), 12 + 8 * (k - 1)};
    plan->stages[7] = (mp_stage_range){52, 63};
    check_dual_pipeline("deepseek-v3 dualpipe pp8 3|8x6|10+head", &plan->config, plan);
    /* DualPipeV at pp 16: its 61 layers split over the V's 32 stages by the
     * V's default (mp_v_stage_blocks: rank 0 a block in each of its stages,
     * ranks 1-14 two, rank 15 two and one), then a plan's own stages of the
     * same model (the embedding and four blocks, 26 stages of two, four of
     * one, the last block with the head and MTP),
     * which the configuration check refused before, as the default split */
    plan->config.parallel.pp = 16;
    plan->config.parallel.vpp = 2;
    plan->config.parallel.dp = 128;
    plan->config.training.global_batch = 64 * 128;
    plan->config.parallel.schedule = MP_SCHED_DUALPIPEV;
    plan->n_stages = 0;
    mp_stage_range vs[32];
    mp_config_stages(&plan->config, 32, vs);
    assert_int_equal(vs[0].end, 2);        /* the embedding and a block */
    assert_int_equal(vs[1].end - vs[1].begin, 2);
    assert_int_equal(vs[15].end - vs[15].begin, 2); /* rank 15: 2 + 1 */
    assert_int_equal(vs[16].end - vs[16].begin, 1);
    assert_int_equal(vs[31].begin, 61);    /* a block, the head and MTP */
    check_dual_pipeline("deepseek-v3 dualpipev pp16, V default split", &plan->config, NULL);
    plan->n_stages = 32;
    plan->stages[0] = (mp_stage_range){0, 5};
    for (int32_t k = 1; k <= 26; k++)
        plan->stages[k] = (mp_stage_range){5 + 2 * (k - 1), 7 + 2 * (k - 1)};
    for (int32_t k = 27; k <= 30; k++)
        plan->stages[k] = (mp_stage_range){57 + (k - 27), 58 + (k - 27)};
    plan->stages[31] = (mp_stage_range){61, 63};
    mp_error perr;
    assert_int_equal(mp_plan_check(plan, &perr), MP_OK);
    check_dual_pipeline("deepseek-v3 dualpipev pp16, a plan's stages", &plan->config, plan);
    free(plan);
    /* a small uneven model: 13 blocks of llama3-8b on pp 2 (4 stages: 13
     * and 15 are no multiple of 4), DualPipeV on the default V split and on
     * a plan's 1 | 6 | 5 | 1; then interleaved 1F1B on the plan */
    for (int vs_s = 0; vs_s < 2; vs_s++) {
        mp_config x = preset_on("llama3-8b", "dgx-h100");
        x.model.layers = 13;
        x.training = (mp_training){.gpus = 4, .seq = x.model.seq, .global_batch = 16,
                                   .precision = MP_DTYPE_BF16};
        x.parallel = (mp_parallel){.tp = 1, .pp = 2, .vpp = 2, .cp = 1, .dp = 2,
                                   .micro_batch = 1, .recompute = MP_RECOMPUTE_NONE,
                                   .dist_opt = true, .schedule = MP_SCHED_DUALPIPEV};
        mp_plan *sp = calloc(1, sizeof *sp);
        assert_non_null(sp);
        sp->config = x;
        sp->n_stages = 4;
        sp->stages[0] = (mp_stage_range){0, 2};
        sp->stages[1] = (mp_stage_range){2, 8};
        sp->stages[2] = (mp_stage_range){8, 13};
        sp->stages[3] = (mp_stage_range){13, 15};
        assert_int_equal(mp_plan_check(sp, &perr), MP_OK);
        if (vs_s == 0) {
            check_dual_pipeline("llama3-8b 13 blocks dualpipev pp2, V default split", &x, NULL);
            check_dual_pipeline("llama3-8b 13 blocks dualpipev pp2, 1|6|5|1", &x, sp);
        } else {
            /* interleaved 1F1B keeps Megatron's rule: no default split of
             * 13 over 4 (13 is odd for the first/last-stage flags), but a
             * plan's own stages run */
            sp->config.parallel.schedule = MP_SCHED_INTERLEAVED;
            sp->config.training.global_batch = 8;
            assert_int_equal(mp_config_check(&sp->config, &perr), MP_EINPUT);
            assert_string_equal(perr.field, "vpp");
            assert_int_equal(mp_plan_check(sp, &perr), MP_OK);
            mp_estimate e;
            mp_sim_result r;
            estimate_and_simulate("llama3-8b 13 blocks interleaved pp2, 1|6|5|1", &sp->config,
                                  sp, &e, &r);
            mp_sim_result_free(&r);
        }
        free(sp);
    }
    static const struct {
        const char *model;
        mp_schedule_kind s;
        int64_t t, p, ep;
    } cfgs[] = {{"mixtral-8x7b", MP_SCHED_DUALPIPEV, 2, 8, 8},
                {"mixtral-8x7b", MP_SCHED_DUALPIPEV, 2, 16, 8},
                {"llama3-70b", MP_SCHED_DUALPIPEV, 4, 8, 0},
                {"llama3-70b", MP_SCHED_DUALPIPE, 4, 8, 0}};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
        for (int64_t mult = 2; mult <= 8; mult *= 2)
            for (int a2a = 0; a2a < (cfgs[i].ep > 0 ? 2 : 1); a2a++) {
                int64_t p = cfgs[i].p, m = mult * p, d = 4;
                mp_config x = preset_on(cfgs[i].model, "dgx-h100");
                x.training = (mp_training){.gpus = cfgs[i].t * p * d, .seq = x.model.seq,
                                           .global_batch = m * d, .precision = MP_DTYPE_BF16};
                x.parallel = (mp_parallel){
                    .tp = cfgs[i].t, .pp = p, .vpp = cfgs[i].s == MP_SCHED_DUALPIPEV ? 2 : 1,
                    .cp = 1, .dp = d, .sp = true, .micro_batch = 1,
                    .recompute = MP_RECOMPUTE_NONE, .dist_opt = true, .schedule = cfgs[i].s,
                    .ep = cfgs[i].ep, .etp = cfgs[i].ep > 0, .moe_a2a_overlap = a2a};
                char what[96];
                snprintf(what, sizeof what, "%s pp%lld %s%s", cfgs[i].model, (long long)p,
                         mp_schedule_name(cfgs[i].s), a2a ? ", EP overlap" : "");
                check_dual_pipeline(what, &x, NULL);
            }
}

static void assert_same_ops(const mp_op_list *x, const mp_op_list *y, const char *what)
{
    if (x->n != y->n)
        fail_msg("%s: %d ops, 1f1b %d", what, (int)x->n, (int)y->n);
    for (int32_t i = 0; i < x->n; i++)
        if (x->ops[i].kind != y->ops[i].kind || x->ops[i].microbatch != y->ops[i].microbatch ||
            x->ops[i].chunk != y->ops[i].chunk)
            fail_msg("%s: op %d is %s of micro-batch %d, 1f1b's %s of %d", what, (int)i,
                     mp_op_kind_name((mp_op_kind)x->ops[i].kind), (int)x->ops[i].microbatch,
                     mp_op_kind_name((mp_op_kind)y->ops[i].kind), (int)y->ops[i].microbatch);
}

/* ZB-H1 at pp 1 is 1F1B everywhere a schedule is built or run, by the one
 * rule (core/config.h mp_schedule_run_as): the executor's lists
 * (mp_sim_plan_schedule, what exec/exec.c runs), the builder's
 * (mp_schedule_build_all, `megaplan simulate --unit-ops`'s), the bounds on
 * what a rank holds, and mp_simulate_cost called directly (sim_dp_added's
 * path), not only mp_simulate. Before, all but mp_simulate split W from B:
 * the lists held m W ops, and the direct simulation of the mixtral plan
 * above reduced the last micro-batch's gradients only under W. At pp 2 the
 * split stays. */
static void test_zbh1_without_pipeline_everywhere(void **state)
{
    (void)state;
    const int32_t m = 4;
    mp_config c = zb_config("mixtral-8x7b", "dgx-h100", 2, 1, 64, 8, 2, m, MP_RECOMPUTE_NONE);
    mp_config one = c;
    one.parallel.schedule = MP_SCHED_1F1B;
    mp_plan plan, plan1;
    memset(&plan, 0, sizeof plan);
    memset(&plan1, 0, sizeof plan1);
    plan.config = c;
    plan1.config = one;
    mp_error err;
    mp_op_list z, f;
    assert_int_equal(mp_sim_plan_schedule(&plan, m, 0, &z, &err), MP_OK);
    assert_int_equal(mp_sim_plan_schedule(&plan1, m, 0, &f, &err), MP_OK);
    assert_same_ops(&z, &f, "the executor's zb-h1 list at pp 1");
    mp_op_list_free(&z);
    assert_int_equal(mp_schedule_build_all(MP_SCHED_ZBH1, 1, 1, m, &z, &err), MP_OK);
    assert_same_ops(&z, &f, "the builder's zb-h1 list at pp 1");
    mp_op_list_free(&z);
    mp_op_list_free(&f);
    assert_int_equal(mp_schedule_inflight_bound(MP_SCHED_ZBH1, 1, 1, m, 0),
                     mp_schedule_inflight_bound(MP_SCHED_1F1B, 1, 1, m, 0));
    assert_int_equal(mp_schedule_w_pending_bound(MP_SCHED_ZBH1, 1, 1, m, 0), 0);
    /* pp 2 still splits: rank 1's list holds m Ws */
    assert_int_equal(mp_schedule_build(MP_SCHED_ZBH1, 2, 1, m, 1, &z, &err), MP_OK);
    int ws = 0;
    for (int32_t i = 0; i < z.n; i++)
        ws += z.ops[i].kind == MP_OP_W;
    assert_int_equal(ws, m);
    mp_op_list_free(&z);

    mp_pipeline_cost pz, pf;
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pz, &err), MP_OK);
    assert_int_equal(mp_pipeline_cost_build(&one, NULL, &pf, &err), MP_OK);
    double dz = sim_dp_added(&c, &pz), df = sim_dp_added(&one, &pf);
    mp_sim_options opt = {0};
    mp_sim_result rz, rf;
    assert_int_equal(mp_simulate_cost(MP_SCHED_ZBH1, 1, 1, m, &pz, true, &opt, &rz, &err), MP_OK);
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 1, 1, m, &pf, true, &opt, &rf, &err), MP_OK);
    if (fabs(rz.makespan - rf.makespan) > 1e-9 * rf.makespan || fabs(dz - df) > 1e-9 * rf.makespan)
        fail_msg("zb-h1 at pp 1 simulated directly: %.4f s (DP adds %.4f s), 1f1b %.4f s (%.4f s)",
                 rz.makespan, dz, rf.makespan, df);
    assert_int_equal(rz.schedule, MP_SCHED_1F1B);
    /* and the estimate costs the two alike (its split backward only at pp > 1) */
    mp_estimate ez, ef;
    assert_int_equal(mp_estimate_config(&c, NULL, &ez, &err), MP_OK);
    assert_int_equal(mp_estimate_config(&one, NULL, &ef, &err), MP_OK);
    if (ez.time.step != ef.time.step || ez.memory.peak != ef.memory.peak)
        fail_msg("zb-h1 at pp 1 estimated %.6f s, %.3f GiB; 1f1b %.6f s, %.3f GiB", ez.time.step,
                 ez.memory.peak / 1073741824.0, ef.time.step, ef.memory.peak / 1073741824.0);
    mp_sim_result_free(&rz);
    mp_sim_result_free(&rf);
    mp_pipeline_cost_free(&pz);
    mp_pipeline_cost_free(&pf);
}

int main(int argc, char **argv)
{
    g_examples = argc > 1 ? argv[1] : "examples";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agrees_with_estimate),
        cmocka_unit_test(test_dp_exposure_matches_estimate),
        cmocka_unit_test(test_dp_by_hand),
        cmocka_unit_test(test_split_dp_matches_estimate),
        cmocka_unit_test(test_peaks_agree_every_schedule),
        cmocka_unit_test(test_timeline_contents),
        cmocka_unit_test(test_example_plans),
        cmocka_unit_test(test_async_not_slower),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_bubble_share_matches_estimate),
        cmocka_unit_test(test_zbh1_without_pipeline),
        cmocka_unit_test(test_zbh1_without_pipeline_everywhere),
        cmocka_unit_test(test_zbh1_pipeline_matches_estimate),
        cmocka_unit_test(test_dualpipe_uneven_matches_simulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
