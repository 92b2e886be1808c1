/* Engine tests on hand-made stage costs: the closed forms of the pipeline
 * bubble with uniform ops and free communication, links with latency and
 * bandwidth, stashed-activation memory, DP overlap, timeline contents. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/dualpipe_replay.h"
#include "planner/pipeline_internal.h"
#include "planner/zbv_replay.h"
#include "sim/schedule.h"
#include "sim/simulate.h"

static mp_stage_cost g_stages[MP_MAX_STAGES];

/* Uniform costs: every (virtual) stage F = f, B = b (ZB: B = b, W = w). */
static mp_pipeline_cost uniform(int32_t p, int32_t v, double f, double b, double w)
{
    mp_pipeline_cost pc;
    memset(&pc, 0, sizeof pc);
    memset(g_stages, 0, sizeof g_stages);
    pc.n_stages = p * v;
    pc.stages = g_stages;
    for (int32_t k = 0; k < p * v; k++) {
        g_stages[k].fwd = f;
        g_stages[k].bwd = b + w;
        g_stages[k].bwd_input = b;
        g_stages[k].bwd_weight = w;
    }
    return pc;
}

static bool g_async; /* the p2p semantics run() uses */

static mp_sim_result run(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                         const mp_pipeline_cost *pc, bool record)
{
    mp_sim_result r;
    mp_error err;
    mp_error_clear(&err);
    mp_sim_options opt = {.record_timeline = record, .async_p2p = g_async};
    mp_status st = mp_simulate_cost(s, p, v, m, pc, true, &opt, &r, &err);
    if (st != MP_OK)
        fail_msg("simulate s=%d p=%d v=%d m=%d: %s", (int)s, (int)p, (int)v, (int)m, err.msg);
    return r;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1 + fabs(b));
}
#define NEAR(a, b) near((double)(a), (double)(b))

/* With uniform ops and free communication the idle time of every rank is
 * exactly (p-1)/m of the ideal time for GPipe and 1F1B, and (p-1)/(m v) for
 * interleaved; the makespan equals the closed form. Every valid p <= 8,
 * v <= 4, m <= 32, and two F:B ratios. */
static void test_uniform_bubble_exact(void **state)
{
    (void)state;
    const double ratios[][2] = {{1, 1}, {1, 2}};
    for (int kind = 0; kind < MP_SCHED_COUNT; kind++) {
        if (mp_schedule_splits_backward(kind)) /* their own tests below */
            continue;
        for (size_t q = 0; q < 2; q++)
            for (int32_t p = 1; p <= 8; p++)
                for (int32_t v = 1; v <= (kind == MP_SCHED_INTERLEAVED ? 4 : 1); v++)
                    for (int32_t m = 1; m <= 32; m++) {
                        if (kind == MP_SCHED_INTERLEAVED && v > 1 && m % p != 0)
                            continue;
                        double f = ratios[q][0] / v, b = ratios[q][1] / v;
                        mp_pipeline_cost pc = uniform(p, v, f, b, 0);
                        mp_sim_result r = run((mp_schedule_kind)kind, p, v, m, &pc, false);
                        double ideal = m * v * (f + b);
                        double want_bubble = (double)(p - 1) / ((double)m * v);
                        /* GPipe/1F1B with m < p still idle (p-1)(f+b). */
                        double makespan = ideal + (p - 1) * (f + b);
                        if (!NEAR(r.pipeline_makespan, makespan))
                            fail_msg("kind %d p=%d v=%d m=%d f=%g b=%g: makespan %.12g, want %.12g",
                                     kind, (int)p, (int)v, (int)m, f, b, r.pipeline_makespan,
                                     makespan);
                        for (int32_t rank = 0; rank < p; rank++) {
                            double idle = r.bubble_fraction[rank] * r.pipeline_makespan;
                            if (!NEAR(idle / ideal, want_bubble))
                                fail_msg("kind %d p=%d v=%d m=%d rank %d: bubble %.12g of ideal, "
                                         "want %.12g",
                                         kind, (int)p, (int)v, (int)m, (int)rank, idle / ideal,
                                         want_bubble);
                        }
                        assert_true(NEAR(r.makespan, r.pipeline_makespan));
                        assert_true(NEAR(r.exposed.bubble, (p - 1) * (f + b)));
                        mp_sim_result_free(&r);
                    }
    }
}

/* ZB-H1 with F = B = W: the bubble is (p-1) single ops, i.e. (p-1)/(3m) of
 * the ideal time (Qi et al. 2023: (p-1)(T_F + T_B - T_W)), for m >= p. */
static void test_zbh1_bubble(void **state)
{
    (void)state;
    for (int32_t p = 1; p <= 8; p++)
        for (int32_t m = p; m <= 32; m++) {
            mp_pipeline_cost pc = uniform(p, 1, 1, 1, 1);
            mp_sim_result r = run(MP_SCHED_ZBH1, p, 1, m, &pc, false);
            double ideal = 3.0 * m;
            double want = ideal + (p - 1);
            if (!NEAR(r.pipeline_makespan, want))
                fail_msg("zb-h1 p=%d m=%d: makespan %.12g, want %.12g", (int)p, (int)m,
                         r.pipeline_makespan, want);
            double idle0 = r.bubble_fraction[0] * r.pipeline_makespan;
            assert_true(NEAR(idle0 / ideal, (p - 1) / (3.0 * m)));
            mp_sim_result_free(&r);
        }
}

/* The engine and estimate's closed form (mp_pipeline_makespan, planner/
 * pipeline.c) agree exactly with uniform ops and free communication, for
 * every schedule and every valid p <= 8, v <= 4, m <= 32, with F:B(:W) of
 * 1:2 and, for ZB-H1, 1:1:1 and 1:1.5:0.5 -- except ZB-H1 with m < p, where
 * the closed form m(f+b+w) + (p-1)(f+b-w) is below the critical path of
 * the last micro-batch (F through p stages, B back through p stages, then
 * its W: (m+p-1)(f+b) + w). The engine reaches that bound; the closed form
 * is low by (p-m)w there (reported to the cost model). */
static void test_matches_closed_form(void **state)
{
    (void)state;
    for (int kind = 0; kind < MP_SCHED_COUNT; kind++)
        for (int32_t p = 1; p <= 8 && !mp_schedule_is_v(kind) && kind != MP_SCHED_DUALPIPE; p++)
            for (int32_t v = 1; v <= (kind == MP_SCHED_INTERLEAVED ? 4 : 1); v++)
                for (int32_t m = 1; m <= 32; m++) {
                    if (kind == MP_SCHED_INTERLEAVED && v > 1 && m % p != 0)
                        continue;
                    const double fbw[][3] = {{1, 2, 0}, {1, 1, 1}, {1, 1.5, 0.5}};
                    for (size_t q = 0; q < (kind == MP_SCHED_ZBH1 ? 3u : 1u); q++) {
                        double f = fbw[q][0] / v, b = fbw[q][1] / v, w = fbw[q][2] / v;
                        if (kind != MP_SCHED_ZBH1) {
                            b += w;
                            w = 0;
                        }
                        mp_pipeline_cost pc = uniform(p, v, f, b, w);
                        mp_sim_result r = run((mp_schedule_kind)kind, p, v, m, &pc, false);
                        double closed = mp_pipeline_makespan((mp_schedule_kind)kind, p, v, m, f,
                                                             b, w, 0.0);
                        if (!NEAR(r.pipeline_makespan, closed))
                            fail_msg("kind %d p=%d v=%d m=%d f=%g b=%g w=%g: engine %.12g, "
                                     "closed form %.12g",
                                     kind, (int)p, (int)v, (int)m, f, b, w, r.pipeline_makespan,
                                     closed);
                        mp_sim_result_free(&r);
                    }
                }
}

/* ZB-V with F = B = W per chunk (Qi et al. 2024's assumption): the only
 * idle time is the first forward's fill down the V, (p-1) F, for m = p and
 * m >= 2p (the generator's list scheduling is up to p-2 units off between);
 * every rank holds at most 2p chunk activations (p micro-batches of
 * whole-stage activations: 1F1B's first rank, "1x memory"), and rank 0
 * reaches it. ZB-H1 on the same model (whole stages, F = B = W = 2) idles
 * (p-1) 2, 1F1B (p-1) 6. The engine equals the closed form. */
static void test_zbv_zero_bubble(void **state)
{
    (void)state;
    for (int32_t p = 1; p <= 8; p++)
        for (int32_t m = p; m <= 32; m = m == p && p > 1 ? 2 * p : m + 1) {
            mp_pipeline_cost pc = uniform(p, 2, 1, 1, 1);
            for (int32_t k = 0; k < 2 * p; k++)
                g_stages[k].act_bytes = 1;
            mp_sim_result r = run(MP_SCHED_ZBV, p, 2, m, &pc, false);
            double want = 6.0 * m + (p - 1);
            if (!NEAR(r.pipeline_makespan, want))
                fail_msg("zb-v p=%d m=%d: makespan %.12g, want %.12g", (int)p, (int)m,
                         r.pipeline_makespan, want);
            assert_true(NEAR(mp_pipeline_makespan(MP_SCHED_ZBV, p, 2, m, 1, 1, 1, 0), want));
            assert_true(NEAR(r.peak_memory[0], mp_schedule_inflight_bound(MP_SCHED_ZBV, p, 2, m, 0)));
            assert_true(NEAR(r.peak_memory[0], 2.0 * p));
            for (int32_t rank = 0; rank < p; rank++)
                assert_true(r.peak_memory[rank] <= 2.0 * p + 1e-9);
            mp_sim_result_free(&r);
            mp_pipeline_cost zb = uniform(p, 1, 2, 2, 2);
            mp_sim_result h = run(MP_SCHED_ZBH1, p, 1, m, &zb, false);
            assert_true(NEAR(h.pipeline_makespan - 6.0 * m, 2.0 * (p - 1)));
            mp_sim_result_free(&h);
        }
}

/* DualPipeV (DeepSeek's table, deepseek-ai/DualPipe README): bubble
 * (PP/2 - 1)(F&B + B - 3W) with PP = 2p stages, B the whole backward and
 * F&B an overlapped forward-backward pair -- here F + B, run as one unit --
 * at 2p + 1 chunk activations ("PP + 1") on rank 0. Exact for F = B = W (B the
 * input-gradient half), a bound for B > F, W; where F or W outlasts B the
 * engine is longer. The estimate's closed form (pipeline.c) is the engine's
 * step on all of them (test_dualpipe_exact_grid). */
static void test_dualpipev_bubble(void **state)
{
    (void)state;
    const double fbw[][3] = {{1, 1, 1}, {1, 1.5, 0.5}, {1, 2, 1}};
    for (size_t q = 0; q < 3; q++)
        for (int32_t p = 1; p <= 8; p++)
            for (int32_t m = 2 * p; m <= 32; m++) {
                double f = fbw[q][0], b = fbw[q][1], w = fbw[q][2];
                mp_pipeline_cost pc = uniform(p, 2, f, b, w);
                for (int32_t k = 0; k < 2 * p; k++)
                    g_stages[k].act_bytes = 1;
                mp_sim_result r = run(MP_SCHED_DUALPIPEV, p, 2, m, &pc, false);
                double full = b + w, fandb = f + full;
                double want = 2.0 * m * (f + b + w) + (p - 1) * (fandb + full - 3 * w);
                /* with B > W the engine finds a shorter fill than the table's
                 * formula, which is then a bound */
                bool exact = b <= w;
                if (exact ? !NEAR(r.pipeline_makespan, want) : r.pipeline_makespan > want + 1e-9)
                    fail_msg("dualpipev p=%d m=%d f=%g b=%g w=%g: makespan %.12g, want %.12g",
                             (int)p, (int)m, f, b, w, r.pipeline_makespan, want);
                /* the estimate's closed form is the engine's step (pipeline.c) */
                assert_true(NEAR(mp_pipeline_makespan(MP_SCHED_DUALPIPEV, p, 2, m, f, b, w, 0),
                                 r.pipeline_makespan));
                assert_true(NEAR(r.peak_memory[0], 2.0 * p + 1));
                mp_sim_result_free(&r);
            }
}

/* DualPipe (DeepSeek-V3 report §3.2.1, Table 2): bubble (PP/2 - 1)(F&B + B -
 * 3W) with B the whole backward (here b + w) and F&B an overlapped
 * forward-backward pair (run as one unit: F + B), f, b, w per whole stage;
 * "PP + 1" activations on the end ranks; twice 1F1B's parameters (the
 * second direction's copy: test_peak_memory). Exact for F = B = W, a bound
 * for B > W (b the input-gradient half). With p = 2 there is no bubble. */
static void test_dualpipe_bubble(void **state)
{
    (void)state;
    /* the DualPipeV test's ratios: F = B = W, and B > F, W (where it is a
     * bound); with F > B or W > B the order idles more, at every m
     * (p=4, m=8, f=1, b=0.5, w=1 takes 22.5; test_dualpipe_exact_grid) */
    const double fbw[][3] = {{1, 1, 1}, {1, 1.5, 0.5}, {1, 2, 1}};
    for (size_t q = 0; q < sizeof fbw / sizeof fbw[0]; q++)
        for (int32_t p = 2; p <= 8; p += 2)
            for (int32_t m = 2 * p; m <= 32; m += 2) {
                double f = fbw[q][0], b = fbw[q][1], w = fbw[q][2];
                mp_pipeline_cost pc = uniform(p, 1, f, b, w); /* p stages, each held twice */
                for (int32_t k = 0; k < p; k++)
                    g_stages[k].act_bytes = 1;
                mp_sim_result r = run(MP_SCHED_DUALPIPE, p, 2, m, &pc, false);
                double full = b + w, fandb = f + full;
                double ideal = m * (f + b + w); /* each rank: m/2 passes per direction */
                double bubble = (p / 2 - 1) * (fandb + full - 3 * w);
                bool exact = b <= w;
                double idle0 = r.bubble_fraction[0] * r.pipeline_makespan;
                if (exact ? !NEAR(r.pipeline_makespan, ideal + bubble) || !NEAR(idle0, bubble)
                          : r.pipeline_makespan > ideal + bubble + 1e-9)
                    fail_msg("dualpipe p=%d m=%d f=%g b=%g w=%g: makespan %.12g (rank 0 idle "
                             "%.12g), want %.12g (idle %.12g)",
                             (int)p, (int)m, f, b, w, r.pipeline_makespan, idle0, ideal + bubble,
                             bubble);
                assert_true(NEAR(mp_pipeline_makespan(MP_SCHED_DUALPIPE, p, 1, m, f, b, w, 0),
                                 r.pipeline_makespan));
                assert_true(NEAR(r.peak_memory[0], p + 1.0));
                assert_true(NEAR(r.peak_memory[p - 1], p + 1.0));
                for (int32_t rank = 0; rank < p; rank++)
                    assert_true(r.peak_memory[rank] <= p + 1.0 + 1e-9);
                mp_sim_result_free(&r);
            }
}

/* MoE: each F and B carries its layers' dispatch and combine (ep_comm, part
 * of the exposed TP time). Inline, they add to the compute stream. With
 * Megatron's overlap of the expert-parallel all-to-all
 * (mp_sim_options.ep_overlap) interleaved 1F1B runs combined 1F1B's merged
 * passes (test_moe_merged_pass_*) and is faster; on the other schedules the
 * all-to-all goes to the ep stream under the next op, each output waiting
 * for its combine: never slower (DualPipeV faster; 1F1B, whose every op
 * feeds the next through its combine, gains nothing here; ZB-V, whose
 * passes nothing merges, runs inline), never shorter than either stream of the
 * busiest rank alone; the ep stream's events never overlap. */
static void test_moe_ep_overlap(void **state)
{
    (void)state;
    const mp_schedule_kind kinds[] = {MP_SCHED_INTERLEAVED, MP_SCHED_1F1B, MP_SCHED_ZBV,
                                      MP_SCHED_DUALPIPEV};
    for (size_t q = 0; q < sizeof kinds / sizeof kinds[0]; q++) {
        mp_schedule_kind s = kinds[q];
        int32_t p = 4, v = s == MP_SCHED_1F1B ? 1 : 2, m = 8;
        mp_pipeline_cost pc = uniform(p, v, 1, 1, 1);
        for (int32_t k = 0; k < p * v; k++) {
            /* F 1 s of which 0.4 all-to-all; B 2 s (1 + W 1) of which 0.8 */
            g_stages[k].fwd = 1.0;
            g_stages[k].tp_comm_fwd = g_stages[k].ep_comm_fwd = 0.4;
            g_stages[k].tp_comm_bwd = g_stages[k].ep_comm_bwd = 0.8;
            g_stages[k].send_bytes = 10;
        }
        pc.p2p_bw = 1000;
        mp_sim_result inline_ = run(s, p, v, m, &pc, true);
        mp_sim_options opt = {.record_timeline = true, .ep_overlap = true};
        mp_sim_result over;
        mp_error err;
        assert_int_equal(mp_simulate_cost(s, p, v, m, &pc, true, &opt, &over, &err), MP_OK);
        if (s == MP_SCHED_ZBV) /* nothing merges its passes: inline */
            assert_true(NEAR(over.makespan, inline_.makespan));
        else if (s == MP_SCHED_1F1B)
            assert_true(over.makespan <= inline_.makespan + 1e-9);
        else
            assert_true(over.makespan < inline_.makespan - 1e-9);
        /* a rank's compute stream alone (F and B less their all-to-all, and
         * W: 0.6 + 1.2 per chunk whether B is split or not) and its ep
         * stream alone (0.4 + 0.8): m v chunks of each */
        double compute = m * v * (0.6 + 1.2), ep = m * v * (0.4 + 0.8);
        assert_true(over.pipeline_makespan >= (compute > ep ? compute : ep) - 1e-9);
        /* every F and B has its ep events, which never overlap: inline one
         * per op, on the ep stream one per op, a merged pass two per op (the
         * dispatch and the combine apart) */
        size_t n_ep = 0, want = 0;
        double last_end[4] = {0};
        for (size_t i = 0; i < over.timeline.n; i++) {
            const mp_event *ev = &over.timeline.events[i];
            if (ev->stream != MP_STREAM_EP)
                continue;
            assert_int_equal(ev->kind, MP_EV_EP_COMM);
            assert_true(ev->start >= last_end[ev->rank] - 1e-12);
            last_end[ev->rank] = ev->end;
            n_ep++;
        }
        for (int32_t r = 0; r < p; r++) {
            /* interleaved: the warm-up forwards and one more run alone
             * (docs/cost-model.md §12, mp_moe_a2a_paired_share) */
            int32_t alone = s == MP_SCHED_INTERLEAVED ? (p - r - 1) * 2 + (v - 1) * p + 1 : m * v;
            int32_t pairs = alone < m * v ? m * v - alone : 0;
            /* DualPipeV: its F&B units, 2(m - 2p + r + 1) in phase 4 (but
             * the last rank's first, the turn of its V) and p - r - 1 in
             * phase 5 (schedule.c build_dualpipev) */
            if (s == MP_SCHED_DUALPIPEV)
                pairs = 2 * (m - 2 * p + r + 1) - (r == p - 1) + (p - r - 1);
            want += (size_t)(2 * m * v + 2 * pairs);
        }
        assert_int_equal(n_ep, want);
        size_t n_inline = 0;
        for (size_t i = 0; i < inline_.timeline.n; i++)
            n_inline += inline_.timeline.events[i].stream == MP_STREAM_EP;
        assert_int_equal(n_inline, (size_t)2 * p * v * m);
        mp_sim_result_free(&inline_);
        mp_sim_result_free(&over);
    }
}

static mp_sim_result run_ep(mp_schedule_kind s, int32_t p, int32_t v, int32_t m,
                            const mp_pipeline_cost *pc)
{
    mp_sim_options opt = {.record_timeline = true, .ep_overlap = true};
    mp_sim_result r;
    mp_error err;
    mp_error_clear(&err);
    if (mp_simulate_cost(s, p, v, m, pc, true, &opt, &r, &err) != MP_OK)
        fail_msg("simulate: %s", err.msg);
    return r;
}

/* Every stage: F 1 s of which 0.4 all-to-all, B 2 s of which 0.8. */
static mp_pipeline_cost moe_costs(int32_t p, int32_t v, double sm)
{
    mp_pipeline_cost pc = uniform(p, v, 1.0, 2.0, 0.0);
    for (int32_t k = 0; k < p * v; k++) {
        g_stages[k].tp_comm_fwd = g_stages[k].ep_comm_fwd = 0.4;
        g_stages[k].tp_comm_bwd = g_stages[k].ep_comm_bwd = 0.8;
    }
    pc.ep_sm_share = sm;
    return pc;
}

/* The ep stream (schedules other than ZB-V, DualPipe(V), 1F1B without a pipeline and
 * interleaved): an op's output is complete once its combine is, and the
 * op of the same micro-batch that takes it waits for it: the last stage's B
 * after its F, the next stage's op through the send. Costs of moe_costs,
 * GPipe, by hand.
 * One stage, m = 2 (F0 F1 B1 B0), no SM contention:
 *   F0 0-0.6, a2a 0.6-1.0; F1 0.6-1.2, a2a 1.2-1.6;
 *   B1 waits for F1's combine: 1.6-2.8, a2a 2.8-3.6; B0 2.8-4.0, a2a 4.0-4.8
 * 4.8 (B1 from 1.2, before its input was complete, gave 4.4). With the
 * dispatcher holding half the SMs: F1 runs 0.4 s at half rate under F0's
 * a2a, 0.6-1.4, a2a 1.4-1.8; B1 1.8-3.0 (the ep stream idle), a2a 3.0-3.8;
 * B0 1.2 s of work, 0.8 under B1's a2a: 3.0-4.6, a2a 4.6-5.4: 5.4 (5.2).
 * Two stages, m = 1, free links: rank 0 F0 0-0.6, a2a 0.6-1.0, sent at 1.0;
 * rank 1 F0 1.0-1.6, a2a 1.6-2.0, B0 2.0-3.2, a2a 3.2-4.0, sent at 4.0;
 * rank 0 B0 4.0-5.2, a2a 5.2-6.0: 6.0, inline's time (one micro-batch has
 * nothing to overlap with; 5.6 with B0 from 1.6). The sends wait for the
 * combine of their own op. */
static void test_moe_ep_stream_combine_wait(void **state)
{
    (void)state;
    mp_pipeline_cost pc = moe_costs(1, 1, 0.0);
    mp_sim_result r = run_ep(MP_SCHED_GPIPE, 1, 1, 2, &pc);
    assert_true(near(r.pipeline_makespan, 4.8));
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->kind == MP_EV_B && ev->microbatch == 1)
            assert_true(near(ev->start, 1.6) && near(ev->end, 2.8));
    }
    mp_sim_result_free(&r);
    pc = moe_costs(1, 1, 0.5);
    r = run_ep(MP_SCHED_GPIPE, 1, 1, 2, &pc);
    assert_true(near(r.pipeline_makespan, 5.4));
    mp_sim_result_free(&r);
    pc = moe_costs(2, 1, 0.0);
    r = run_ep(MP_SCHED_GPIPE, 2, 1, 1, &pc);
    assert_true(near(r.pipeline_makespan, 6.0));
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->stream == MP_STREAM_COMPUTE && ev->rank == 1)
            assert_true(ev->kind == MP_EV_F ? near(ev->start, 1.0) : near(ev->start, 2.0));
    }
    mp_sim_result_free(&r);
}

/* SM contention in the merged pass, by hand: one stage, m = 2 (combined
 * 1F1B without a pipeline: F0 alone, B0 with F1, B1 alone), costs of
 * moe_costs (no expert node: the experts' phase holds the dispatches alone):
 *   F0 alone, inline 0-1.0;
 *   the pass from 1.0: B0's combine 0.4 beside F1's rest 0.6: 1.0-1.6;
 *     F1's dispatch 0.2 then B0's 0.4: 1.6-2.2; F1's combine 0.2 beside
 *     B0's rest 1.2: 2.2-3.4 (2.4 s for 3 s of F and B);
 *   B1 alone 3.4-5.4.
 * With the dispatcher's kernels holding half the SMs (ep_sm_share 0.5) the
 * rests run at half rate under the combines: F1's 0.6 takes 0.8 (0.4 of it
 * beside 0.4 s of combine at half rate, then 0.4), 1.0-1.8; the dispatches
 * 1.8-2.4; B0's rest 1.2 + 0.5 x 0.2 = 1.3, 2.4-3.7; 5.7. With all the SMs
 * the compute waits: 6.0, as inline. */
static void test_moe_ep_overlap_sm_contention(void **state)
{
    (void)state;
    const double sm[] = {0.0, 0.5, 1.0}, want[] = {5.4, 5.7, 6.0};
    for (int i = 0; i < 3; i++) {
        mp_pipeline_cost pc = moe_costs(1, 1, sm[i]);
        mp_sim_result r = run_ep(MP_SCHED_1F1B, 1, 1, 2, &pc);
        assert_true(near(r.pipeline_makespan, want[i]));
        mp_sim_result_free(&r);
    }
    mp_pipeline_cost pc = moe_costs(1, 1, 1.5);
    mp_sim_options opt = {.ep_overlap = true};
    mp_sim_result r;
    mp_error err;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 1, 1, 2, &pc, true, &opt, &r, &err),
                     MP_EINTERNAL);
}

/* The merged pass's middle phase, in its event order, by hand: one stage,
 * m = 2, F 3.5 s (dispatch and combine 1 s each, experts e_F 0.5, the rest
 * 1), B 5 s (dispatch and combine 1 s each, experts' dgrad g_B 2, the rest
 * 1), no SM contention (planner/cost.c's hand case,
 * test_a2a_overlap_mid_phase). F0 alone 0-3.5; the pass from 3.5: B's
 * combine beside F's rest 3.5-4.5; F's dispatch 4.5-5.5, B's dgrad
 * 4.5-6.5, B's dispatch after the dgrad 6.5-7.5, F's experts after F's
 * dispatch and the dgrad 6.5-7.0: the phase ends at 7.5 (3 s, not the 2.5 of
 * either stream's work alone); F's combine beside B's rest 7.5-8.5; B1
 * alone 8.5-13.5. B's weight gradients w_B (backward_dw) run after the
 * dgrad and before F's experts but hold up no dispatch: with w_B = 0.5 the
 * phase still ends at 7.5 (F's experts 7.0-7.5), with w_B = 1.5 at 8.5
 * (w_B 6.5-8.0, F's experts 8.0-8.5: the compute stream's 4 s); the step
 * is F0 + the pass + B1 (5 + w_B). Each pass's own time is
 * the estimate's pair, max(b_B, r_F) + mid + max(b_F, r_B). */
static void test_moe_merged_pass_event_order(void **state)
{
    (void)state;
    const double wgrad[] = {0.0, 0.5, 1.5}, want[] = {13.5, 14.0, 16.0};
    for (int i = 0; i < 3; i++) {
        mp_pipeline_cost pc = uniform(1, 1, 3.5, 5.0 + wgrad[i], 0.0);
        g_stages[0].tp_comm_fwd = g_stages[0].ep_comm_fwd = 2.0;
        g_stages[0].tp_comm_bwd = g_stages[0].ep_comm_bwd = 2.0;
        g_stages[0].expert_fwd = 0.5;
        g_stages[0].expert_bwd = 2.0 + wgrad[i];
        g_stages[0].expert_wgrad = wgrad[i];
        mp_sim_result r = run_ep(MP_SCHED_1F1B, 1, 1, 2, &pc);
        /* F0 3.5 + the pass + B1 (5 + w_B) */
        assert_true(near(r.pipeline_makespan, want[i]));
        for (size_t j = 0; j < r.timeline.n; j++) {
            const mp_event *ev = &r.timeline.events[j];
            if (ev->stream == MP_STREAM_EP && ev->microbatch == 0 && ev->start > 3.5 &&
                ev->start < 8.0) /* B0's dispatch: after its dgrad */
                assert_true(near(ev->start, 6.5) && near(ev->end, 7.5));
            if (ev->kind == MP_EV_F && ev->microbatch == 1 && ev->start > 5.0) /* F1's experts */
                assert_true(near(ev->start, 6.5 + wgrad[i]));
        }
        mp_sim_result_free(&r);
    }
}

/* The model chunk's edges in the merged pass, by hand: one stage, m = 2
 * (F0 alone, B0 with F1, B1 alone), costs of moe_costs. Combined 1F1B runs
 * F's embedding and B's head (output layer and loss) before the merged
 * layers and F's head and B's embedding after them, with no all-to-all
 * beside them (TransformerModelChunkSchedulePlan.run, core_v0.15.0
 * model_chunk_schedule_plan.py lines 425-438 and 493-497).
 * - Edges on top (F 1.3 with embedding 0.1 and head 0.2, B 2.5 with head
 *   0.3 and embedding 0.2): the phases are those of
 *   test_moe_ep_overlap_sm_contention, each covered by its compute, and the
 *   pass grows by exactly the edges, 2.4 + 0.8: F0 0-1.3, the pass 1.3-4.5
 *   (F1's embedding 1.3-1.4, B0's head 1.4-1.7, the phases 1.7-4.1, F1's
 *   head 4.1-4.3, B0's embedding 4.3-4.5), B1 4.5-7.0.
 * - Edges within (F 1.0 with embedding 0.1 and head 0.2: F's rest 0.3; B
 *   2.0 with head 0.3 and embedding 0.2: B's rest 0.7): F0 0-1.0; the pass
 *   from 1.0: F1's embedding 1.0-1.1, B0's head 1.1-1.4, B0's combine 0.4
 *   beside F1's rest 0.3 1.4-1.8, the dispatches 1.8-2.4, F1's combine 0.2
 *   beside B0's rest 0.7 2.4-3.1, F1's head 3.1-3.3, B0's embedding
 *   3.3-3.5; B1 3.5-5.5. With the edges in the phases F's head hid 0.2 of
 *   B's combine: 5.4.
 * DualPipe(V)'s F&B unit keeps them in its phases (run_fb). */
static void test_moe_merged_pass_edges(void **state)
{
    (void)state;
    for (int within = 0; within < 2; within++) {
        mp_pipeline_cost pc = moe_costs(1, 1, 0.0);
        double add = within ? 0.0 : 1.0;
        g_stages[0].fwd += add * 0.3;
        g_stages[0].bwd += add * 0.5;
        g_stages[0].embed_fwd = 0.1;
        g_stages[0].head_fwd = 0.2;
        g_stages[0].head_bwd = 0.3;
        g_stages[0].embed_bwd = 0.2;
        mp_sim_result r = run_ep(MP_SCHED_1F1B, 1, 1, 2, &pc);
        assert_true(near(r.pipeline_makespan, within ? 5.5 : 7.0));
        /* the pass's compute: [start, end, kind, micro-batch] */
        const double want[2][4][4] = {
            {{1.3, 1.4, MP_EV_F, 1}, {1.4, 1.7, MP_EV_B, 0}, {4.1, 4.3, MP_EV_F, 1},
             {4.3, 4.5, MP_EV_B, 0}},
            {{1.0, 1.1, MP_EV_F, 1}, {1.1, 1.4, MP_EV_B, 0}, {3.1, 3.3, MP_EV_F, 1},
             {3.3, 3.5, MP_EV_B, 0}}};
        int found = 0;
        for (size_t j = 0; j < r.timeline.n; j++) {
            const mp_event *ev = &r.timeline.events[j];
            if (ev->stream != MP_STREAM_COMPUTE)
                continue;
            for (int k = 0; k < 4; k++)
                if (near(ev->start, want[within][k][0]) && near(ev->end, want[within][k][1])) {
                    assert_int_equal(ev->kind, (int)want[within][k][2]);
                    assert_int_equal(ev->microbatch, (int)want[within][k][3]);
                    found |= 1 << k;
                }
        }
        assert_int_equal(found, 15);
        mp_sim_result_free(&r);
    }
}

/* With Megatron's overlapped p2p a merged pass's forward output goes out
 * once F's layers are done (post_forward on the comm stream after the layer
 * loop, core_v0.15.0 model_chunk_schedule_plan.py lines 474-479), before
 * the edges after them (B's embedding backward, lines 496-497). Interleaved,
 * p = 2, v = 2, m = 4, costs of moe_costs with free links, the embedding on
 * rank 0's chunk 0 (0.1 of F, 0.2 of B), the head on rank 1's chunk 1 (0.2
 * of F, 0.3 of B): rank 0 merges B 0.0 with F 3.1, whose output leaves
 * when F 3.1's combine ends, before B 0.0's embedding backward (the last
 * 0.2 s of the pass), not at the pass's end. */
static void test_moe_merged_pass_send_before_edges(void **state)
{
    (void)state;
    mp_pipeline_cost pc = moe_costs(2, 2, 0.0);
    pc.p2p_latency = 0.01;
    g_stages[0].embed_fwd = 0.1;
    g_stages[0].embed_bwd = 0.2;
    g_stages[3].head_fwd = 0.2;
    g_stages[3].head_bwd = 0.3;
    mp_sim_options opt = {.record_timeline = true, .ep_overlap = true, .async_p2p = true};
    mp_sim_result r;
    mp_error err;
    assert_int_equal(mp_simulate_cost(MP_SCHED_INTERLEAVED, 2, 2, 4, &pc, true, &opt, &r, &err),
                     MP_OK);
    double send = -1, emb = -1;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->rank != 0)
            continue;
        if (ev->kind == MP_EV_SEND_FWD && ev->microbatch == 3 && ev->chunk == 1)
            send = ev->start;
        if (ev->kind == MP_EV_B && ev->microbatch == 0 && ev->chunk == 0 &&
            near(ev->end - ev->start, 0.2))
            emb = ev->start;
    }
    assert_true(send > 0 && emb > 0);
    assert_true(send < emb - 0.1);
    mp_sim_result_free(&r);
}

/* Merged passes across two stages, by hand: interleaved, p = 2, v = 2,
 * m = 4, costs of moe_costs, free links. Rank 0's warm-up is 4 forwards,
 * rank 1's 2; each runs one more alone, so rank 0 merges (B 0.1, F 3.0),
 * (B 1.1, F 2.1), (B 0.0, F 3.1) and rank 1 (B 0.1, F 1.1), (B 1.1, F 2.0),
 * (B 0.0, F 3.0), (B 1.0, F 2.1), (B 2.1, F 3.1) (micro-batch.chunk); a pass
 * takes 0.6 + 0.6 + 1.2 = 2.4 s (test_moe_ep_overlap_sm_contention), a
 * forward alone 1, a backward alone 2. Rank 0: F 0.0, 1.0, 0.1, 1.1 in 0-4,
 * F 2.0 alone 4-5; rank 1: F 0.0 1-2, F 1.0 2-3, F 0.1 3-4 (rank 0's ended
 * at 3), then its pass (B 0.1, F 1.1) 4-6.4 (its F 0.1 and rank 0's F 1.1
 * ended at 4). Rank 0's first pass takes B 0.1's gradient at 6.4: 6.4-8.8,
 * while rank 1's (B 1.1, F 2.0) runs 6.4-8.8; then both ranks' passes wait
 * for the other's: 8.8-11.2 and 11.2-13.6 on both. Rank 0's B 1.0 alone
 * 13.6-15.6; rank 1's last pass (B 2.1, F 3.1) needs rank 0's F 3.1, sent at
 * 13.6: 13.6-16.0, then its B 3.1 16-18, B 2.0 18-20 (rank 0's B 2.1 16-18),
 * B 3.0 20-22; rank 0's B 3.1 18-20, B 2.0 20-22, B 3.0 22-24: 24 s, against
 * 27 inline. */
static void test_moe_merged_pass_two_stages(void **state)
{
    (void)state;
    mp_pipeline_cost pc = moe_costs(2, 2, 0.0);
    mp_sim_result r = run_ep(MP_SCHED_INTERLEAVED, 2, 2, 4, &pc);
    assert_true(near(r.pipeline_makespan, 24.0));
    mp_sim_result in = run(MP_SCHED_INTERLEAVED, 2, 2, 4, &pc, false);
    assert_true(near(in.pipeline_makespan, 27.0));
    mp_sim_result_free(&in);
    /* rank 1's first pass: B 0.1's combine 4.0-4.4 beside F 1.1's rest
     * 4.0-4.6, the dispatches 4.6-5.2, B 0.1's rest 5.2-6.4 beside F 1.1's
     * combine 5.2-5.4 */
    int seen = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->rank != 1 || ev->start < 4.0 - 1e-9 || ev->start > 6.0)
            continue;
        if (ev->kind == MP_EV_F && ev->microbatch == 1 && ev->chunk == 1)
            seen += near(ev->start, 4.0) && near(ev->end, 4.6);
        if (ev->kind == MP_EV_B && ev->microbatch == 0 && ev->chunk == 1)
            seen += near(ev->start, 5.2) && near(ev->end, 6.4);
        if (ev->stream == MP_STREAM_EP)
            seen += near(ev->start, 4.0) || near(ev->start, 4.6) || near(ev->start, 4.8) ||
                    near(ev->start, 5.2);
    }
    assert_int_equal(seen, 6);
    mp_sim_result_free(&r);
    /* With overlapped p2p (Megatron's post_forward on the comm stream) a
     * merged pass's forward output leaves once F's combine is done, 1.0 s
     * before the pass ends (B's rest 1.2 beside F's combine 0.2); without
     * it, after the pass. Five merged forwards send (rank 0's three, rank
     * 1's F 2.0 and F 3.0; chunk 1 on rank 1 is the last stage). */
    pc.p2p_latency = 0.5;
    for (int async = 0; async < 2; async++) {
        mp_sim_options opt = {.record_timeline = true, .ep_overlap = true, .async_p2p = async};
        mp_error err;
        assert_int_equal(mp_simulate_cost(MP_SCHED_INTERLEAVED, 2, 2, 4, &pc, true, &opt, &r, &err),
                         MP_OK);
        int early = 0;
        for (size_t i = 0; i < r.timeline.n; i++) {
            const mp_event *sf = &r.timeline.events[i];
            if (sf->kind != MP_EV_SEND_FWD)
                continue;
            for (size_t j = 0; j < r.timeline.n; j++) {
                const mp_event *b = &r.timeline.events[j];
                early += b->rank == sf->rank && b->kind == MP_EV_B && near(b->end, sf->start + 1.0) &&
                         b->start < sf->start;
            }
        }
        assert_int_equal(early, async ? 5 : 0);
        mp_sim_result_free(&r);
    }
}

/* Combined 1F1B's order runs to the end (no deadlock) for every interleaved
 * p <= 8, v <= 4, m a multiple of p up to 32, with uneven random costs and
 * links: every F and B once, the merged passes the estimate's paired share. */
static void test_moe_merged_pass_grid(void **state)
{
    (void)state;
    srand(14);
    for (int32_t p = 1; p <= 8; p++)
        for (int32_t v = 2; v <= 4; v++)
            for (int32_t m = p; m <= 32; m += p) {
                if (p == 1 && m > 8)
                    continue;
                mp_pipeline_cost pc = moe_costs(p, v, 0.3);
                for (int32_t k = 0; k < p * v; k++) {
                    g_stages[k].fwd = 0.5 + (double)rand() / RAND_MAX;
                    g_stages[k].bwd = 1.0 + 2.0 * (double)rand() / RAND_MAX;
                    g_stages[k].expert_fwd = 0.2 * g_stages[k].fwd;
                    g_stages[k].expert_bwd = 0.2 * g_stages[k].bwd;
                    g_stages[k].expert_wgrad = 0.05 * g_stages[k].bwd;
                    g_stages[k].send_bytes = 10;
                }
                pc.p2p_bw = 100;
                pc.p2p_latency = 0.01;
                mp_sim_result r = run_ep(MP_SCHED_INTERLEAVED, p, v, m, &pc);
                size_t f = 0, b = 0;
                for (size_t i = 0; i < r.timeline.n; i++)
                    if (r.timeline.events[i].stream == MP_STREAM_EP)
                        (void)0;
                    else if (r.timeline.events[i].kind == MP_EV_F)
                        f++;
                    else if (r.timeline.events[i].kind == MP_EV_B)
                        b++;
                /* inline or alone one event per op; a merged F two (its
                 * rest and its experts), a merged B two (dgrad and wgrad,
                 * the rest) */
                size_t want = 0;
                for (int32_t rank = 0; rank < p; rank++) {
                    int32_t alone = (p - rank - 1) * 2 + (v - 1) * p + 1;
                    want += (size_t)(m * v + (alone < m * v ? m * v - alone : 0));
                }
                assert_int_equal(f, want);
                assert_int_equal(b, want);
                mp_sim_result_free(&r);
            }
}

/* ZB-H1 beats 1F1B, which beats GPipe only in memory: same time. */
static void test_zbh1_better_than_1f1b(void **state)
{
    (void)state;
    mp_pipeline_cost pc = uniform(8, 1, 1, 1, 1);
    mp_sim_result z = run(MP_SCHED_ZBH1, 8, 1, 16, &pc, false);
    mp_sim_result o = run(MP_SCHED_1F1B, 8, 1, 16, &pc, false);
    assert_true(z.pipeline_makespan < o.pipeline_makespan);
    assert_true(NEAR(o.pipeline_makespan, (16 + 7) * 3.0));
    mp_sim_result_free(&z);
    mp_sim_result_free(&o);
}

/* Point-to-point: latency l and bytes/bw per send. With non-blocking sends,
 * GPipe's critical path is the first micro-batch down and the last one up,
 * so makespan = (m + p - 1)(f + b) + 2(p-1)(l + x) with x = bytes/bw, as
 * long as the link is not the bottleneck. */
static void test_gpipe_with_links(void **state)
{
    (void)state;
    g_async = true;
    int32_t p = 4, m = 8;
    mp_pipeline_cost pc = uniform(p, 1, 1, 2, 0);
    pc.p2p_latency = 0.01;
    pc.p2p_bw = 1000;
    for (int32_t k = 0; k < p; k++)
        g_stages[k].send_bytes = 100; /* 0.1 s on the wire */
    mp_sim_result r = run(MP_SCHED_GPIPE, p, 1, m, &pc, true);
    double want = (m + p - 1) * 3.0 + 2 * (p - 1) * 0.11;
    assert_true(NEAR(r.pipeline_makespan, want));
    /* The last rank waits on the wire before its first F: pp comm exposed. */
    assert_true(r.exposed.pp_comm > 0);
    assert_true(NEAR(r.exposed.compute + r.exposed.recompute + r.exposed.tp_comm +
                         r.exposed.cp_comm + r.exposed.pp_comm + r.exposed.bubble +
                         r.exposed.dp_comm + r.exposed.optimizer,
                     r.makespan));
    size_t sends = 0, recvs = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *e = &r.timeline.events[i];
        assert_true(e->end >= e->start);
        if (e->stream == MP_STREAM_PP_SEND) {
            sends++;
            assert_true(NEAR(e->end - e->start, 0.11) || e->end - e->start > 0.11);
        }
        if (e->stream == MP_STREAM_PP_RECV)
            recvs++;
    }
    assert_int_equal(sends, (size_t)2 * (p - 1) * m);
    assert_int_equal(recvs, sends);
    mp_sim_result_free(&r);
    g_async = false;
}

/* Megatron's synchronous p2p (the default) against fire-and-forget sends,
 * GPipe p=2, f=1, b=2, p2p=0.1, worked by hand:
 *  m=1: F0 [0,1] -> lands 1.1; rank 1 F0 [1.1,2.1] B0 [2.1,4.1] -> 4.2;
 *       rank 0 B0 [4.2,6.2]: 6.2 either way.
 *  m=2, async: rank 0 F0 [0,1] F1 [1,2]; rank 1 F0 [1.1,2.1] F1 [2.1,3.1]
 *       B1 [3.1,5.1] B0 [5.1,7.1]; rank 0 B1 [5.2,7.2] B0 [7.2,9.2]: 9.2.
 *  m=2, sync: rank 0 F0 [0,1] waits to 1.1, F1 [1.1,2.1] waits to 2.2;
 *       rank 1 F0 [1.1,2.1] F1 [2.2,3.2] B1 [3.2,5.2] waits to 5.3,
 *       B0 [5.3,7.3]; rank 0 B1 [5.3,7.3] B0 [7.4,9.4]: 9.4. */
static void test_sync_and_async_p2p(void **state)
{
    (void)state;
    const struct { int32_t m; bool async; double want; } cases[] = {
        {1, false, 6.2}, {1, true, 6.2}, {2, true, 9.2}, {2, false, 9.4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mp_pipeline_cost pc = uniform(2, 1, 1, 2, 0);
        pc.p2p_latency = 0.1;
        g_async = cases[i].async;
        mp_sim_result r = run(MP_SCHED_GPIPE, 2, 1, cases[i].m, &pc, false);
        if (!NEAR(r.pipeline_makespan, cases[i].want))
            fail_msg("case %zu: %.12g, want %.12g", i, r.pipeline_makespan, cases[i].want);
        /* all waiting on the wire is pp comm, the rest bubble */
        assert_true(r.exposed.pp_comm > 0);
        mp_sim_result_free(&r);
    }
    g_async = false;
}

/* DeepSpeed's pipeline engine (p2p_serial 1): after each send a rank also
 * waits for the receive its step posts next, one more transfer. The sync
 * case above, p=2, m=2, f=1, b=2, p2p=0.1, worked again: rank 0 F0 [0,1]
 * waits to 1.2, F1 [1.2,2.2] waits to 2.4; rank 1 F0 [1.1,2.1], F1 (landed
 * 2.3) [2.3,3.3], B1 [3.3,5.3] (lands 5.4) waits to 5.5, B0 [5.5,7.5]
 * (lands 7.6); rank 0 B1 [5.4,7.4] B0 [7.6,9.6]: 9.6, not 9.4. */
static void test_serial_p2p(void **state)
{
    (void)state;
    mp_pipeline_cost pc = uniform(2, 1, 1, 2, 0);
    pc.p2p_latency = 0.1;
    pc.p2p_serial = 1.0;
    mp_sim_result r = run(MP_SCHED_GPIPE, 2, 1, 2, &pc, false);
    if (!NEAR(r.pipeline_makespan, 9.6))
        fail_msg("%.12g, want 9.6", r.pipeline_makespan);
    mp_sim_result_free(&r);
}

/* A slow link is a bottleneck: messages queue one after another. GPipe's
 * forwards from rank 0 take f = 1 each but each send takes 2 s on the wire,
 * so the last forward reaches rank 1 at 2m + ... */
static void test_link_serialises_messages(void **state)
{
    (void)state;
    int32_t p = 2, m = 4;
    mp_pipeline_cost pc = uniform(p, 1, 1, 1, 0);
    pc.p2p_bw = 1;
    g_stages[0].send_bytes = 2;
    g_stages[1].send_bytes = 2;
    g_async = true;
    mp_sim_result r = run(MP_SCHED_GPIPE, p, 1, m, &pc, true);
    g_async = false;
    /* sends leave rank 0 at 1, 3, 5, 7 (link busy 2 s each): last lands at 9 */
    double last_f1 = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *e = &r.timeline.events[i];
        if (e->rank == 1 && e->kind == MP_EV_F && e->microbatch == m - 1)
            last_f1 = e->start;
    }
    assert_true(NEAR(last_f1, 9.0));
    mp_sim_result_free(&r);
}

/* Uniform stages (uniform()) with links of y = 0.2 s on the wire and
 * x = 0.05 s latency. */
static mp_pipeline_cost linked(int32_t n, double f, double b, double w)
{
    mp_pipeline_cost pc = uniform(n, 1, f, b, w);
    pc.p2p_latency = 0.05;
    pc.p2p_bw = 1;
    for (int32_t k = 0; k < n; k++)
        g_stages[k].send_bytes = 0.2;
    return pc;
}

/* The one event of rank's timeline of this kind, micro-batch and chunk
 * (chunk -1: any): *start, *end; fails unless there is exactly one. */
static void event_span(const mp_sim_result *r, int32_t rank, mp_event_kind kind, int32_t mb,
                       int32_t chunk, double *start, double *end)
{
    int found = 0;
    for (size_t i = 0; i < r->timeline.n; i++) {
        const mp_event *e = &r->timeline.events[i];
        if (e->rank == rank && e->kind == kind && e->microbatch == mb &&
            (chunk < 0 || e->chunk == chunk)) {
            *start = e->start;
            *end = e->end;
            found++;
        }
    }
    if (found != 1)
        fail_msg("rank %d: %d events of kind %d for micro-batch %d chunk %d", (int)rank, found,
                 (int)kind, (int)mb, (int)chunk);
}

/* Megatron-Core's interleaved 1F1B without --overlap-p2p-communication
 * (schedules.py, forward_backward_pipelining_with_interleaving, the steady
 * state's send_forward_backward_recv_forward_backward after F and B): a
 * steady-state forward's output leaves only after the backward that follows
 * it, in one batch with that backward's gradient, both on the wire together
 * (to the next and the previous rank). p = 4, v = 2, m = 8, f = 1, b = 2,
 * links of y = 0.2 s on the wire and x = 0.05 s latency. Rank 1 warms up
 * with 2(4-1-1) + 4 = 8 forwards; its first steady-state F is micro-batch 4
 * of chunk 0, its B micro-batch 0 of chunk 1. With the overlap the same
 * forward's output leaves as the forward ends, before the backward. */
static void test_interleaved_batched_send_after_b(void **state)
{
    (void)state;
    int32_t p = 4, v = 2, m = 8;
    for (int ov = 0; ov < 2; ov++) {
        mp_pipeline_cost pc = uniform(p, v, 1, 2, 0);
        pc.p2p_latency = 0.05;
        pc.p2p_bw = 1;
        for (int32_t k = 0; k < p * v; k++)
            g_stages[k].send_bytes = 0.2;
        pc.p2p_overlap = ov;
        g_async = ov; /* mp_simulate's pairing of the two */
        mp_sim_result r = run(MP_SCHED_INTERLEAVED, p, v, m, &pc, true);
        g_async = false;
        double f0, f1, b0, b1, s0, s1, g0, g1;
        event_span(&r, 1, MP_EV_F, 4, 0, &f0, &f1);
        event_span(&r, 1, MP_EV_B, 0, 1, &b0, &b1);
        event_span(&r, 1, MP_EV_SEND_FWD, 4, 0, &s0, &s1);
        if (!ov) {
            assert_true(NEAR(b0, f1)); /* B right after the F, its gradient in already */
            assert_true(s0 >= b1 - 1e-12);
            assert_true(NEAR(s0, b1));
            /* the gradient of B(0) leaves with it, on the other link */
            event_span(&r, 1, MP_EV_SEND_BWD, 0, 1, &g0, &g1);
            assert_true(NEAR(g0, s0));
            assert_true(NEAR(s1 - s0, 0.25) && NEAR(g1 - g0, 0.25));
        } else {
            assert_true(NEAR(s0, f1));
            assert_true(s1 < b1);
        }
        mp_sim_result_free(&r);
    }
}

/* The closed form of Megatron's synchronous interleaved batches
 * (planner/pipeline.c): (mv + p - 1)(f + b + x) + (2(p - 1) + (v - 2)p)x
 * with x one transfer (latency + bytes / bandwidth), equal to the engine on
 * uniform stages for every p 3..8, v 2..4, m = p..4p, two ratios of x to
 * the compute. The closed form of sends waited on one by one, (mv + p - 1)
 * (f + b + 2x), is above it by (mv - (v - 1)p + 1)x, (p + 1)x at m = p. */
static void test_interleaved_batched_closed_form(void **state)
{
    (void)state;
    const double wire[] = {0.2, 1.5}, lat[] = {0.05, 0.1};
    for (int q = 0; q < 2; q++)
        for (int32_t p = 3; p <= 8; p++)
            for (int32_t v = 2; v <= 4; v++)
                for (int32_t m = p; m <= 4 * p; m += p) {
                    mp_pipeline_cost pc = uniform(p, v, 1, 2 + q, 0);
                    pc.p2p_latency = lat[q];
                    pc.p2p_bw = 1;
                    for (int32_t k = 0; k < p * v; k++)
                        g_stages[k].send_bytes = wire[q];
                    mp_sim_result r = run(MP_SCHED_INTERLEAVED, p, v, m, &pc, false);
                    double x = wire[q] + lat[q];
                    double closed = mp_pipeline_makespan(MP_SCHED_INTERLEAVED, p, v, m, 1,
                                                         2 + q, 0, x);
                    if (!NEAR(r.pipeline_makespan, closed))
                        fail_msg("p=%d v=%d m=%d q=%d: engine %.12g, closed form %.12g", (int)p,
                                 (int)v, (int)m, q, r.pipeline_makespan, closed);
                    assert_true((m * v + p - 1) * (3 + q + 2 * x) > closed + x);
                    mp_sim_result_free(&r);
                }
}

/* Interleaved 1F1B with --overlap-p2p-communication (the simulator's
 * overlapped lists, sim/schedule.c build_interleaved: each transfer posted
 * asynchronously after its pass, its receive waited on before the pass that
 * needs it) against the estimate's closed form (mp_pipeline_makespan_overlap,
 * docs/cost-model.md §6) on equal stages f = 1, b = 2: the steady state
 * hides every hop, the fill and drain expose the first micro-batch's
 * 2(p v - 1), whatever m. Hops of 0.25 s (0.2 on the wire) and of 1 s (0.9
 * on the wire; at p = 2 both directions queue on the one link), as long as
 * the forward they overlap: exact. A hop of 2.5 s outlasts both passes and
 * the steady state exposes some of it too: the closed form is then a lower
 * bound, strictly at m = 4p (the estimate adds each pass's excess, cost.c
 * round_p2p). The estimate
 * before (no hop but 2(p - 1) in the fill) is short by 2(p - 1)(v - 1)
 * hops. */
static void test_interleaved_overlap_closed_form(void **state)
{
    (void)state;
    const double wire[] = {0.2, 0.9, 2.4}, lat[] = {0.05, 0.1, 0.1};
    g_async = true;
    for (int q = 0; q < 3; q++)
        for (int32_t p = 2; p <= 8; p++)
            for (int32_t v = 2; v <= 4; v++)
                for (int32_t m = p; m <= 4 * p; m += p) {
                    mp_pipeline_cost pc = uniform(p, v, 1, 2, 0);
                    pc.p2p_latency = lat[q];
                    pc.p2p_bw = 1;
                    pc.p2p_overlap = true;
                    for (int32_t k = 0; k < p * v; k++)
                        g_stages[k].send_bytes = wire[q];
                    mp_sim_result r = run(MP_SCHED_INTERLEAVED, p, v, m, &pc, false);
                    g_async = true; /* run() reads it; reset below */
                    double x = wire[q] + lat[q];
                    double closed = mp_pipeline_makespan_overlap(p, v, m, 1, 2, x);
                    double engine = r.pipeline_makespan;
                    mp_sim_result_free(&r);
                    /* beyond: a bound, strict once the steady state is long */
                    bool ok = q < 2     ? NEAR(engine, closed)
                              : m < 4 * p ? engine > closed - 1e-9
                                          : engine > closed + 1e-9;
                    if (!ok) {
                        g_async = false;
                        fail_msg("p=%d v=%d m=%d x=%g: engine %.12g, closed form %.12g", (int)p,
                                 (int)v, (int)m, x, engine, closed);
                    }
                    assert_true(closed >
                                (m * v + p - 1) * 3.0 + 2 * (p - 1) * x + 1e-9);
                }
    g_async = false;
}

/* With --overlap-p2p-communication and without its warmup_flush variant
 * (Megatron-Core's default, which NeMo and Megatron-Bridge keep) the warm-up
 * waits on each transfer where it posts it (schedules.py line 1655, a
 * blocking send_forward_recv_forward) and the cool-down too (line 2053);
 * only the steady state's are waited on a pass later (sim/schedule.c
 * build_interleaved). p 4, v 2, m 8, f 1, b 2, a hop of 0.25 s (0.2 on the
 * wire): rank 0 runs its chunk-0 warm-up forwards, which need no input, one
 * hop apart (back to back before: fails on the old lists), its steady-state
 * F's send still lands under the B after it, and each cool-down B waits for
 * the one before it to have sent its gradient. On equal stages the fill's
 * own hops already space the warm-up so (its makespan is unchanged:
 * test_interleaved_overlap_closed_form). */
static void test_interleaved_overlap_warmup_sync(void **state)
{
    (void)state;
    int32_t p = 4, v = 2, m = 8;
    mp_pipeline_cost pc = uniform(p, v, 1, 2, 0);
    pc.p2p_latency = 0.05;
    pc.p2p_bw = 1;
    pc.p2p_overlap = true;
    for (int32_t k = 0; k < p * v; k++)
        g_stages[k].send_bytes = 0.2;
    g_async = true;
    mp_sim_result r = run(MP_SCHED_INTERLEAVED, p, v, m, &pc, true);
    g_async = false;
    double a0, a1, b0, b1, s0, s1;
    for (int32_t mb = 0; mb + 1 < p; mb++) {
        event_span(&r, 0, MP_EV_F, mb, 0, &a0, &a1);
        event_span(&r, 0, MP_EV_SEND_FWD, mb, 0, &s0, &s1);
        event_span(&r, 0, MP_EV_F, mb + 1, 0, &b0, &b1);
        assert_true(NEAR(s0, a1) && NEAR(s1 - s0, 0.25));
        assert_true(NEAR(b0, s1)); /* waited on, then the next forward */
    }
    /* rank 1's steady state: F(4) of chunk 0, then B(0) of chunk 1 */
    event_span(&r, 1, MP_EV_F, 4, 0, &a0, &a1);
    event_span(&r, 1, MP_EV_SEND_FWD, 4, 0, &s0, &s1);
    event_span(&r, 1, MP_EV_B, 0, 1, &b0, &b1);
    assert_true(NEAR(s0, a1) && s1 < b1);
    /* rank 1's cool-down: the last 2(p - 2) + p backwards, all of chunk 0
     * (virtual stage 1, whose gradient goes to rank 0) */
    for (int32_t mb = m - p; mb + 1 < m; mb++) {
        event_span(&r, 1, MP_EV_SEND_BWD, mb, 0, &s0, &s1);
        event_span(&r, 1, MP_EV_B, mb + 1, 0, &b0, &b1);
        assert_true(b0 >= s1 - 1e-12);
    }
    mp_sim_result_free(&r);
}

/* DualPipe(V) post a commit's transfers together (deepseek-ai/DualPipe
 * dualpipe.py _commit_and_wait_comm: batch_isend_irecv, then a wait on all
 * of it): its sends start when it is posted, each on its own directed link,
 * one after another on the same link, and the rank goes on once all are
 * done. Links of y = 0.2 s on the wire and x = 0.05 s latency.
 *
 * DualPipe p = 2, m = 4, f = 1, b = 2, w = 0.5, worked by hand from the two
 * ranks' lists (tests/sim/data/dualpipe_reference.txt; rank 1's mirrors rank
 * 0's, so each message of rank 0 has a twin from rank 1 landing at the same
 * time). Rank 0: F0.0 [0,1]; {sf0.0, rf2.1}: both land 1 + y + x = 1.25;
 * F2.1 F1.0 B2.1 W2.1 [1.25,5.75]; {sf1.0, sb2.1, rf3.1, rb0.0}: both sends
 * on the one link to rank 1, sf1.0 on it [5.75,5.95] landing 6.0, sb2.1 on
 * it [5.95,6.15] landing 6.2 (and rank 1's twins the same): done 6.2;
 * F3.1 B0.0 W0.0 B3.1 W3.1 [6.2,12.2]; {sb3.1, rb1.0}: 12.45; B1.0 W1.0
 * [12.45,14.95]. 4(f + b + w) + 4y + 3x = 14.95. Sent one after the other
 * (each waited for before the next, as before) sb2.1 left at 6.0 and
 * landed at 6.25: 15.0, 4x. */
static void test_dualpipe_commit_by_hand(void **state)
{
    (void)state;
    mp_pipeline_cost pc = linked(2, 1, 2, 0.5); /* p stages, each held twice */
    mp_sim_result r = run(MP_SCHED_DUALPIPE, 2, 2, 4, &pc, true);
    if (!NEAR(r.pipeline_makespan, 14.95))
        fail_msg("dualpipe p=2 m=4: %.12g, want 14.95 (15.0: sends waited for one by one)",
                 r.pipeline_makespan);
    /* rank 0's F3.1 starts when its commit of two sends is done; sb2.1 is
     * queued behind sf1.0 on the link */
    double t0, t1;
    event_span(&r, 0, MP_EV_F, 3, -1, &t0, &t1);
    assert_true(NEAR(t0, 6.2));
    event_span(&r, 0, MP_EV_SEND_BWD, 2, -1, &t0, &t1);
    assert_true(NEAR(t0, 5.95) && NEAR(t1, 6.2));
    mp_sim_result_free(&r);
}

/* Sends to the two neighbours of one commit are in flight at once. DualPipeV
 * p = 3, m = 6, f = b = w = 1, each message h = y + x = 0.25 s, worked by hand
 * (lists: tests/sim/data/dualpipe_reference.txt; rank 2 also hands its
 * chunk 0's output to its chunk 1, free). Rank 0: F0.0 F1.0 F2.0 F3.0, each
 * output landing h after the F ends and the next F starting then: its F k
 * ends k + 1 + k h, F3.0's output lands at 4 + 4h. Rank 1: F0.0 from 1 + h,
 * F1.0 from 2 + 2h, F2.0 [3 + 3h, 4 + 3h] (each waiting for rank 0's next);
 * then {rf3.0, rf0.1}: F3.0's output lands 4 + 4h, and rank 2's F0.1 (its F0.0
 * [2 + 2h, 3 + 2h], F0.1 [3 + 3h, 4 + 3h] once rf1.0 has landed) lands at
 * 4 + 4h too. F0.1 [4 + 4h, 5 + 4h]; {sf0.1 to rank 0, sf2.0 to rank 2}: both
 * leave at 5 + 4h = 6.0 and land at 5 + 5h = 6.25, when F3.0 starts. Sent one
 * after the other: 6.5; queued on one link: 5 + 4h + 2y + x = 6.45. */
static void test_dualpipev_commit_two_peers(void **state)
{
    (void)state;
    mp_pipeline_cost pc = linked(6, 1, 1, 1); /* 2p virtual stages */
    mp_sim_result r = run(MP_SCHED_DUALPIPEV, 3, 2, 6, &pc, true);
    double t0, t1;
    event_span(&r, 1, MP_EV_F, 3, 0, &t0, &t1);
    if (!NEAR(t0, 6.25))
        fail_msg("rank 1's F3.0 starts at %.12g, want 6.25", t0);
    const int32_t sent[2][2] = {{0, 1}, {2, 0}}; /* F0.1 to rank 0, F2.0 to rank 2 */
    for (int j = 0; j < 2; j++) {
        event_span(&r, 1, MP_EV_SEND_FWD, sent[j][0], sent[j][1], &t0, &t1);
        if (!NEAR(t0, 6.0) || !NEAR(t1, 6.25))
            fail_msg("rank 1's send of F%d.%d on the wire [%.12g, %.12g], want [6, 6.25]",
                     (int)sent[j][0], (int)sent[j][1], t0, t1);
    }
    mp_sim_result_free(&r);
}

/* DualPipe(V)'s F&B unit as one merged pass (run_fb), by hand. DualPipeV
 * p = 1, m = 2, both virtual stages alike: F 1 s (all-to-all 0.4, experts
 * 0.3, rest 0.3), B 1 s and W 1 s (the backward's all-to-all 0.8, expert
 * dgrad 0.4 and wgrad 0.2, rest 0.6), no SM contention, transfers free (the
 * rank's hand-overs to itself). Its list (dualpipe_reference.txt):
 * F0.0 | F0.1 | F1.0 B0.1 W0.1 (the turn of the V, run apart) | F1.1 B0.0
 * W0.0 (the F&B unit) | B1.1 W1.1 | B1.0 | W1.0 (micro-batch.chunk). The
 * ops alone run their all-to-all inline, as the estimate counts them (a
 * pass alone has no other pass's compute to hide it under: dualpipev.py
 * runs it as a plain forward or backward): F0.0 0-1.0; F0.1 1.0-2.0; F1.0
 * 2.0-3.0; B0.1 3.0-4.0; W0.1 4.0-5.0; the commit's hand-overs at 5.0. The
 * unit from 5.0: B0.0's combine 0.4 beside F1.1's rest 0.3 (5.0-5.4); F1.1's
 * dispatch 5.4-5.6 and, after B0.0's dgrad 5.4-5.8, B0.0's dispatch
 * 5.8-6.2, beside B0.0's wgrad 5.8-6.0 and F1.1's experts 6.0-6.3; F1.1's
 * combine 6.3-6.5 beside B0.0's rest 6.3-6.9: 1.9 s. Then B1.1 6.9-7.9,
 * W1.1 7.9-8.9; B1.0 (its gradient handed over at 8.9) 8.9-9.9, W1.0
 * 9.9-10.9. The unit's ops one after the other would take 3 s, 12.0 in
 * all; the lone ops on the ep stream (before 2026-12-03) gave 7.7.
 * DualPipe p = 2, m = 4 is this on each rank (both ranks play DualPipeV's
 * rank 0, the hand-overs being real messages between them): the same 10.9 s. */
static void test_dualpipe_merged_fb_by_hand(void **state)
{
    (void)state;
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    for (int q = 0; q < 2; q++) {
        int32_t p = q == 0 ? 1 : 2, m = q == 0 ? 2 : 4;
        mp_pipeline_cost pc = uniform(2, 1, 1.0, 1.0, 1.0);
        for (int32_t k = 0; k < 2; k++) {
            g_stages[k].tp_comm_fwd = g_stages[k].ep_comm_fwd = 0.4;
            g_stages[k].tp_comm_bwd = g_stages[k].ep_comm_bwd = 0.8;
            g_stages[k].expert_fwd = 0.3;
            g_stages[k].expert_bwd = 0.6;
            g_stages[k].expert_wgrad = 0.2;
        }
        mp_sim_result r = run_ep(kinds[q], p, 2, m, &pc);
        if (!NEAR(r.pipeline_makespan, 10.9))
            fail_msg("%s p=%d m=%d: %.12g, want 10.9 (7.7: the ops alone on the ep stream)",
                     mp_schedule_name(kinds[q]), (int)p, (int)m, r.pipeline_makespan);
        for (int32_t rk = 0; rk < p; rk++) {
            /* the unit's F on rank rk: DualPipeV's F1.1 (DualPipe: micro-batch
             * 1 of the direction rank rk's chunk 1 carries) */
            int32_t dir = rk == 0 ? 1 : 0, mf = q == 0 ? 1 : 1 + dir * 2;
            int32_t dirb = dir ^ 1, mb = q == 0 ? 0 : dirb * 2;
            double want_f[2][2] = {{5.0, 5.3}, {6.0, 6.3}}, want_b[2][2] = {{5.4, 6.0}, {6.3, 6.9}};
            double want_ep[4][2] = {{5.0, 5.4}, {5.4, 5.6}, {5.8, 6.2}, {6.3, 6.5}};
            int nf = 0, nb = 0, ne = 0;
            for (size_t i = 0; i < r.timeline.n; i++) {
                const mp_event *ev = &r.timeline.events[i];
                if (ev->rank != rk || ev->start < 5.0 - 1e-9 || ev->start > 6.9 - 1e-9)
                    continue;
                if (ev->kind == MP_EV_F && ev->microbatch == mf && ev->chunk == dir) {
                    assert_true(nf < 2 && NEAR(ev->start, want_f[nf][0]) &&
                                NEAR(ev->end, want_f[nf][1]));
                    nf++;
                } else if (ev->kind == MP_EV_B && ev->microbatch == mb && ev->chunk == dirb) {
                    assert_true(nb < 2 && NEAR(ev->start, want_b[nb][0]) &&
                                NEAR(ev->end, want_b[nb][1]));
                    nb++;
                } else if (ev->stream == MP_STREAM_EP) {
                    assert_true(ne < 4 && NEAR(ev->start, want_ep[ne][0]) &&
                                NEAR(ev->end, want_ep[ne][1]));
                    ne++;
                } else if (ev->kind == MP_EV_W) {
                    fail_msg("rank %d: a W event at %.12g inside the merged pass", (int)rk,
                             ev->start);
                }
            }
            if (nf != 2 || nb != 2 || ne != 4)
                fail_msg("%s rank %d: the pass's pieces F %d, B %d, ep %d; want 2, 2, 4",
                         mp_schedule_name(kinds[q]), (int)rk, nf, nb, ne);
            /* the turn of the V (DualPipeV's F1.0 B0.1) is not merged: F1.0 whole */
            double t0, t1;
            event_span(&r, rk, MP_EV_F, q == 0 ? 1 : 1 + (dir ^ 1) * 2, dir ^ 1, &t0, &t1);
            assert_true(NEAR(t0, 2.0) && NEAR(t1, 3.0));
        }
        mp_sim_result_free(&r);
    }
}

/* A unit pairing a dense stage with an MoE one (DualPipe's end ranks: the
 * embedding's dense blocks with the last blocks), by hand: the case above
 * with stage 0 dense (F 1 s, B 1 s, W 1 s, no all-to-all, no experts), the
 * ops alone with their all-to-all inline. F0.0 0-1.0; F0.1 1.0-2.0; F1.0
 * 2.0-3.0; B0.1 3.0-4.0; W0.1 4.0-5.0; the unit (F1.1 of stage 1 with B0.0,
 * W0.0 of stage 0) from 5.0: F1.1's rest 5.0-5.3 (B0.0 has no combine);
 * F1.1's dispatch 5.3-5.5 beside B0.0's compute less the 0.2 s that covers
 * F1.1's combine, 5.3-7.1; F1.1's experts 7.1-7.4; its combine 7.4-7.6
 * beside B0.0's last 0.2 s: 2.6 s, F's all-to-all hidden whole. Phase 3
 * holding all of B0.0's 2 s would take 2.8 (F's dispatch exposed). Then
 * B1.1 7.6-8.6, W1.1 8.6-9.6; B1.0 9.6-10.6, W1.0 10.6-11.6: 11.6 s (11.8). */
static void test_dualpipe_merged_fb_dense(void **state)
{
    (void)state;
    mp_pipeline_cost pc = uniform(2, 1, 1.0, 1.0, 1.0);
    g_stages[1].tp_comm_fwd = g_stages[1].ep_comm_fwd = 0.4;
    g_stages[1].tp_comm_bwd = g_stages[1].ep_comm_bwd = 0.8;
    g_stages[1].expert_fwd = 0.3;
    g_stages[1].expert_bwd = 0.6;
    g_stages[1].expert_wgrad = 0.2;
    mp_sim_result r = run_ep(MP_SCHED_DUALPIPEV, 1, 2, 2, &pc);
    if (!NEAR(r.pipeline_makespan, 11.6))
        fail_msg("%.12g, want 11.6 (11.8: the dense B whole beside F's combine)",
                 r.pipeline_makespan);
    const double want[][3] = {/* kind, start, end */
                              {MP_EV_F, 5.0, 5.3}, {MP_EV_B, 5.3, 7.1}, {MP_EV_F, 7.1, 7.4},
                              {MP_EV_B, 7.4, 7.6}, {MP_EV_EP_COMM, 5.3, 5.5},
                              {MP_EV_EP_COMM, 7.4, 7.6}};
    int found = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->start < 5.0 - 1e-9 || ev->start > 7.6 - 1e-9)
            continue;
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            found += ev->kind == (int)want[k][0] && NEAR(ev->start, want[k][1]) &&
                     NEAR(ev->end, want[k][2]);
    }
    assert_int_equal(found, 6);
    mp_sim_result_free(&r);
}

/* DualPipe(V) under the all-to-all overlap run to the end (no deadlock) for
 * every p <= 8 (DualPipe: even) and m from 2p to 32 (DualPipe: even), with
 * uneven random costs, SM contention and links, and merge exactly their F&B
 * units: per rank 2(m' - 2p' + h + 1) in phase 4 less the turn of the V on
 * its last rank, and p' - h - 1 in phase 5 (DualPipeV's p' = p, m' = m,
 * h = r; DualPipe's p' = p/2, m' = m/2, h = min(r, p - 1 - r)); a merged F
 * and B show two compute events each, a merged W none. */
/* Every DualPipeV p <= 8 and DualPipe p <= 8 (even), m from 2p to 32
 * (DualPipe: even): each(kind, p, m, n, pc), pc's n stages F = B = W = 1 s. */
static void each_dualpipe(void (*each)(mp_schedule_kind, int32_t, int32_t, int32_t,
                                       mp_pipeline_cost *))
{
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    for (int q = 0; q < 2; q++)
        for (int32_t p = q + 1; p <= 8; p += q + 1)
            for (int32_t m = 2 * p; m <= 32; m += q + 1) {
                int32_t n = q == 0 ? 2 * p : p;
                mp_pipeline_cost pc = uniform(n, 1, 1.0, 1.0, 1.0);
                each(kinds[q], p, m, n, &pc);
            }
}

static void merged_fb_grid_case(mp_schedule_kind s, int32_t p, int32_t m, int32_t n,
                                mp_pipeline_cost *pc)
{
    bool v = s == MP_SCHED_DUALPIPEV;
    pc->ep_sm_share = 0.3;
    pc->p2p_bw = 100;
    pc->p2p_latency = 0.01;
    for (int32_t k = 0; k < n; k++) {
        mp_stage_cost *sc = &g_stages[k];
        sc->fwd = 0.5 + (double)rand() / RAND_MAX;
        sc->bwd_input = 0.5 + (double)rand() / RAND_MAX;
        sc->bwd_weight = 0.5 * (double)rand() / RAND_MAX;
        sc->bwd = sc->bwd_input + sc->bwd_weight;
        sc->tp_comm_fwd = sc->ep_comm_fwd = 0.4 * sc->fwd;
        sc->tp_comm_bwd = sc->ep_comm_bwd = 0.4 * sc->bwd_input;
        sc->expert_fwd = 0.2 * sc->fwd;
        sc->expert_bwd = 0.2 * sc->bwd;
        sc->expert_wgrad = 0.05 * sc->bwd;
        sc->send_bytes = 10;
    }
    mp_sim_result r = run_ep(s, p, 2, m, pc);
    for (int32_t rank = 0; rank < p; rank++) {
        int32_t pp = v ? p : p / 2, mm = v ? m : m / 2;
        int32_t h = v ? rank : rank < p - 1 - rank ? rank : p - 1 - rank;
        int32_t units = 2 * (mm - 2 * pp + h + 1) - (h == pp - 1) + (pp - h - 1);
        size_t f = 0, b = 0, w = 0;
        for (size_t i = 0; i < r.timeline.n; i++) {
            const mp_event *ev = &r.timeline.events[i];
            if (ev->rank != rank || ev->stream != MP_STREAM_COMPUTE)
                continue;
            f += ev->kind == MP_EV_F;
            b += ev->kind == MP_EV_B;
            w += ev->kind == MP_EV_W;
        }
        if (f != (size_t)(2 * mm + units) || b != f || w != (size_t)(2 * mm - units))
            fail_msg("%s p=%d m=%d rank %d: F %zu B %zu W %zu events, %d units",
                     mp_schedule_name(s), (int)p, (int)m, (int)rank, f, b, w, (int)units);
    }
    mp_sim_result_free(&r);
}

static void test_dualpipe_merged_fb_grid(void **state)
{
    (void)state;
    srand(15);
    each_dualpipe(merged_fb_grid_case);
}

/* DualPipe(V)'s bubble under the all-to-all overlap, DeepSeek's (PP/2 - 1)(F&B
 * + B - 3W) (DualPipeV: PP - 1 fills) with F&B the merged unit (report
 * §3.2.1, Table 2: "two mutually overlapped forward and backward chunks"),
 * by hand: every stage F = B = W = 1 s, F's and B's all-to-all 0.4 s each
 * (dispatch and combine 0.2), no expert node, free links. A unit: B's
 * combine beside F's rest, 0.6; the two dispatches, 0.4; F's combine beside
 * B's rest with its W, 1.6: 2.6 s against 3 inline, x = 0.4 saved. The rank
 * that merges the most units, the middle one (DualPipeV: the last; m' - p' -
 * 1 F0&B1 and m' - p' F1&B0 units, p' and m' DualPipeV's), idles the whole
 * bubble, fills x (3 - x + 2 - 3) = 1.6 s each; a rank nearer an end runs
 * more of its passes alone, and they fill its wait: its idle is less by its
 * fewer units' x. The makespan is the middle rank's busy time plus the bubble
 * (cost.c dual_fb_makespan), for every p <= 8 and m from 2p to 32; the
 * inline passes' F&B (3 s) in the fills gave 2 s a fill (the estimate's
 * before, with the saving shared over the passes, in between). */
static void merged_fb_bubble_case(mp_schedule_kind s, int32_t p, int32_t m, int32_t n,
                                  mp_pipeline_cost *pc)
{
    for (int32_t k = 0; k < n; k++) {
        g_stages[k].tp_comm_fwd = g_stages[k].ep_comm_fwd = 0.4;
        g_stages[k].tp_comm_bwd = g_stages[k].ep_comm_bwd = 0.4;
    }
    mp_sim_result r = run_ep(s, p, 2, m, pc);
    bool v = s == MP_SCHED_DUALPIPEV;
    int32_t pv = v ? p : p / 2, mv = v ? m : m / 2;
    int32_t units = (mv - pv - 1) + (mv - pv), fills = pv - 1;
    double busy = 3.0 * 2 * mv - 0.4 * units, bubble = fills * 1.6;
    int32_t mid = pv - 1; /* DualPipe: p/2 - 1 and p/2 alike */
    double idle_mid = r.bubble_fraction[mid] * r.pipeline_makespan;
    double idle0 = r.bubble_fraction[0] * r.pipeline_makespan;
    int32_t units0 = (mv - 2 * pv + 1 - (pv == 1)) + (mv - pv);
    if (!NEAR(r.pipeline_makespan, busy + bubble) || !NEAR(idle_mid, bubble) ||
        !NEAR(idle0, bubble - 0.4 * (units - units0)))
        fail_msg("%s p=%d m=%d: makespan %.12g idle %.12g (rank 0 %.12g), want %.12g idle "
                 "%.12g (%.12g)",
                 mp_schedule_name(s), (int)p, (int)m, r.pipeline_makespan, idle_mid, idle0,
                 busy + bubble, bubble, bubble - 0.4 * (units - units0));
    mp_sim_result_free(&r);
}

static void test_dualpipe_merged_fb_bubble(void **state)
{
    (void)state;
    each_dualpipe(merged_fb_bubble_case);
}

/* DualPipe(V)'s closed form (pipeline.c mp_dualpipe_makespan, issue #14) is
 * the engine's step on equal stages for every f, b, w and link: every
 * DualPipeV p <= 16 and DualPipe p <= 16 (even), four m from 2p (DualPipe:
 * even), f:b:w on both sides of f = b and of w = b, and links from free to
 * twice a forward, each transfer lat of latency and wire on its link (one
 * message at a time: the two sends of an F&B unit go to the same neighbour).
 * The fill before, (p' - 1)(f + max(f, b) + max(0, b - w) + 2 p2p) +
 * max(0, f - b) over 2m'(f + b + w + 2 p2p), p' and m' DualPipeV's, fails
 * it: an upper bound where b > f (p = 4, m = 8, f = 1, b = 2, w = 1: 76
 * against the engine's 75) and with links (p = 4, m = 8, f = b = w = 1, a
 * latency of 0.3: 65.4 against 61.8; all sends of a unit share a latency). */
static void test_dualpipe_exact_grid(void **state)
{
    (void)state;
    const double fbw[][3] = {{1, 1, 1},   {2, 1, 1}, {1, 0.5, 1}, {3, 2, 1},   {1.5, 1, 0.5},
                             {1, 1, 2},   {1, 2, 1}, {0.5, 1, 2}, {2, 3, 1},   {1, 3, 0.5},
                             {1, 1.2, 0.3}, {1, 4, 0}, {0.2, 1, 1}, {1, 0.9, 1.1}};
    /* per forward: latency, link time */
    const double links[][2] = {{0, 0},       {0.05, 0},  {0, 0.05}, {0.03, 0.02}, {0.3, 0.2},
                               {1, 0},       {0, 1},     {0.6, 0.7}, {2, 0.5},   {0.5, 2}};
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    for (int k = 0; k < 2; k++)
        for (int32_t p = k + 1; p <= 16; p += k + 1) {
            int32_t ms[4] = {2 * p, 2 * p + 1 + k, 3 * p + (k && p % 2 ? 1 : 0), 5 * p + 1 + k};
            for (int mi = 0; mi < 4; mi++)
                for (size_t q = 0; q < sizeof fbw / sizeof fbw[0]; q++)
                    for (size_t l = 0; l < sizeof links / sizeof links[0]; l++) {
                        int32_t m = ms[mi] - (k ? ms[mi] % 2 : 0);
                        double f = fbw[q][0], b = fbw[q][1], w = fbw[q][2];
                        double lat = links[l][0] * f, wire = links[l][1] * f;
                        bool dv = kinds[k] == MP_SCHED_DUALPIPEV;
                        int32_t n = dv ? 2 * p : p;
                        mp_pipeline_cost pc = uniform(n, 1, f, b, w);
                        for (int32_t st = 0; st < n; st++)
                            g_stages[st].send_bytes = 1;
                        pc.p2p_latency = lat;
                        pc.p2p_bw = wire > 0 ? 1 / wire : 0;
                        mp_sim_result r = run(kinds[k], p, 2, m, &pc, false);
                        double got = r.pipeline_makespan;
                        double want = mp_dualpipe_makespan(kinds[k], p, m, f, b, w, lat, wire);
                        if (!NEAR(got, want))
                            fail_msg("%s p=%d m=%d f=%g b=%g w=%g lat=%g wire=%g: engine %.12g, "
                                     "closed form %.12g",
                                     mp_schedule_name(kinds[k]), (int)p, (int)m, f, b, w, lat,
                                     wire, got, want);
                        if (wire == 0) /* mp_pipeline_makespan's p2p: a latency */
                            assert_true(NEAR(mp_pipeline_makespan(kinds[k], p, 2, m, f, b, w, lat),
                                             got));
                        mp_sim_result_free(&r);
                    }
        }
}

/* DualPipe(V) on uneven stages: the estimate's replay of the order
 * (planner/dualpipe_replay.c, mp_dualpipe_replay) against the engine, to
 * 1e-9 of the step, over random per-stage F, B, W and activation sizes
 * (each stage its own, so the ranks differ as a real plan's do: the V's rank
 * 0 with the embedding and the head), DualPipeV p 2-8, 12, 16 and DualPipe p
 * 2-16 even, m from 2p to 40p (past 6p the replay stops at its steady run
 * and extends it: the largest m here exercise that cut), five links (free,
 * a latency alone, a link time alone, both, both above a forward), and
 * under the EP overlap's merged F&B units with every stage's all-to-all
 * (the engine's run_pair; with no expert node and no SM share its time is,
 * by hand, max(rest_F, a_B) + a_F + a_B + max(rest_B, a_F), a_X half the
 * pass's all-to-all and rest_X the pass less its all-to-all, B the whole
 * backward with its W). The closed form (test_dualpipe_exact_grid) is the
 * equal-stage case. */
static double lcg_unit(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*x >> 11) / 9007199254740992.0;
}

/* Random uneven stages (g_stages[0..n-1]) for the replay tests: F and the
 * input gradient B each from range[0] to range[0] + range[1], W up to
 * range[2], activation bytes from range[3] to range[3] + range[4]; the same
 * times into f, b, w and the bytes into bytes. */
static void random_stages(int32_t n, uint64_t *seed, const double range[5], double *f, double *b,
                          double *w, double *bytes)
{
    for (int32_t st = 0; st < n; st++) {
        mp_stage_cost *sc = &g_stages[st];
        sc->fwd = f[st] = range[0] + range[1] * lcg_unit(seed);
        sc->bwd_input = b[st] = range[0] + range[1] * lcg_unit(seed);
        sc->bwd_weight = w[st] = range[2] * lcg_unit(seed);
        sc->bwd = b[st] + w[st];
        sc->send_bytes = bytes[st] = range[3] + range[4] * lcg_unit(seed);
    }
}

static void test_dualpipe_replay_uneven_grid(void **state)
{
    (void)state;
    const double links[][2] = {{0, 0}, {0.1, 0}, {0, 0.1}, {0.05, 0.2}, {1.5, 1.2}};
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    const int32_t pvs[] = {2, 3, 4, 5, 6, 7, 8, 12, 16};
    uint64_t seed = 14;
    int checked = 0, cut = 0;
    for (int k = 0; k < 2; k++)
        for (size_t pi = 0; pi < sizeof pvs / sizeof pvs[0]; pi++) {
            int32_t p = kinds[k] == MP_SCHED_DUALPIPE ? 2 * (int32_t)(pi + 1) : pvs[pi];
            if (p > 16)
                continue;
            int32_t ms[5] = {2 * p, 2 * p + 2, 3 * p + 1, 8 * p, 40 * p};
            for (int mi = 0; mi < 5; mi++)
                for (size_t l = 0; l < sizeof links / sizeof links[0]; l++)
                    for (int ep = 0; ep < 2; ep++) {
                        int32_t m = ms[mi] - (k ? ms[mi] % 2 : 0);
                        int32_t n = kinds[k] == MP_SCHED_DUALPIPEV ? 2 * p : p;
                        mp_pipeline_cost pc = uniform(n, 1, 1, 1, 1);
                        double f[MP_MAX_STAGES], b[MP_MAX_STAGES], w[MP_MAX_STAGES],
                            wire[MP_MAX_STAGES], unit[2 * MP_MAX_STAGES];
                        double lat = links[l][0], bw = links[l][1] > 0 ? 1 / links[l][1] : 0;
                        const double range[5] = {0.2, 2.8, 2.0, 0.5, 1.5};
                        random_stages(n, &seed, range, f, b, w, wire);
                        for (int32_t st = 0; st < n; st++) {
                            mp_stage_cost *sc = &g_stages[st];
                            wire[st] = bw > 0 ? sc->send_bytes / bw : 0;
                            if (ep) { /* each pass's all-to-all, within it */
                                sc->ep_comm_fwd = sc->tp_comm_fwd = 0.6 * lcg_unit(&seed) * sc->fwd;
                                sc->ep_comm_bwd = sc->tp_comm_bwd = 0.6 * lcg_unit(&seed) * sc->bwd;
                            }
                        }
                        pc.p2p_latency = lat;
                        pc.p2p_bw = bw;
                        for (int32_t r = 0; r < p; r++)
                            for (int32_t c = 0; c < 2; c++) {
                                const mp_stage_cost *F = &g_stages[mp_schedule_stage(kinds[k], p, r, c)];
                                const mp_stage_cost *B =
                                    &g_stages[mp_schedule_stage(kinds[k], p, r, 1 - c)];
                                double af = F->ep_comm_fwd / 2, ab = B->ep_comm_bwd / 2;
                                double rf = F->fwd - 2 * af, rb = B->bwd - 2 * ab;
                                unit[2 * r + c] = fmax(rf, ab) + af + ab + fmax(rb, af);
                            }
                        mp_sim_options opt = {.ep_overlap = ep};
                        mp_sim_result r;
                        mp_error err;
                        assert_int_equal(mp_simulate_cost(kinds[k], p, 2, m, &pc, false, &opt, &r, &err),
                                         MP_OK);
                        mp_dualpipe_times t = {.f = f, .b = b, .w = w, .wire = wire, .lat = lat,
                                               .unit = ep ? unit : NULL};
                        double got;
                        assert_int_equal(mp_dualpipe_replay(kinds[k], p, m, &t, &got, &err), MP_OK);
                        if (!NEAR(got, r.pipeline_makespan))
                            fail_msg("%s p=%d m=%d link %d ep %d: replay %.12g, engine %.12g",
                                     mp_schedule_name(kinds[k]), (int)p, (int)m, (int)l, ep, got,
                                     r.pipeline_makespan);
                        checked++;
                        cut += m > 6 * p;
                        mp_sim_result_free(&r);
                    }
        }
    assert_true(checked >= 800 && cut >= 300);
}

/* ... and past the replay's budget (DUAL_REPLAY_PM micro-batches times p,
 * about 1 ms): where no try within it shows the steady run, the estimate
 * extends the last try by its last level's pace, unproven. Such long
 * transients come from a link's backlog draining slowly (a link time near
 * the step's pace: here up to half a forward); on random stages with such
 * links (DualPipeV p 16 and 32, DualPipe p 16, m 64p) the pace overstates
 * the step by at most 0.12% where tried, DUAL_PACE_TOL stating 0.25%. Most
 * sets still cut exactly; the test counts those that did not. */
#define DUAL_PACE_TOL 0.0025

static void test_dualpipe_replay_past_budget(void **state)
{
    (void)state;
    const struct {
        mp_schedule_kind s;
        int32_t p;
    } cases[] = {{MP_SCHED_DUALPIPEV, 16}, {MP_SCHED_DUALPIPEV, 32}, {MP_SCHED_DUALPIPE, 16}};
    uint64_t seed = 141;
    int extended = 0;
    double worst = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int set = 0; set < 40; set++) {
            mp_schedule_kind s = cases[c].s;
            int32_t p = cases[c].p, m = 64 * p, n = s == MP_SCHED_DUALPIPEV ? 2 * p : p;
            mp_pipeline_cost pc = uniform(n, 1, 1, 1, 1);
            double f[MP_MAX_STAGES], b[MP_MAX_STAGES], w[MP_MAX_STAGES], wire[MP_MAX_STAGES];
            const double range[5] = {0.3, 2.0, 1.4, 0.0, 0.5};
            random_stages(n, &seed, range, f, b, w, wire); /* bandwidth 1: wire = bytes */
            pc.p2p_bw = 1;
            pc.p2p_latency = 0.02 * (set % 3);
            mp_sim_result r;
            mp_error err;
            mp_sim_options opt = {0};
            assert_int_equal(mp_simulate_cost(s, p, 2, m, &pc, false, &opt, &r, &err), MP_OK);
            mp_dualpipe_times t = {.f = f, .b = b, .w = w, .wire = wire, .lat = pc.p2p_latency};
            double got;
            assert_int_equal(mp_dualpipe_replay(s, p, m, &t, &got, &err), MP_OK);
            double off = got / r.pipeline_makespan - 1;
            if (fabs(off) > DUAL_PACE_TOL)
                fail_msg("%s p=%d m=%d set %d: replay %.12g, engine %.12g (%+.3g%%)",
                         mp_schedule_name(s), (int)p, (int)m, set, got, r.pipeline_makespan,
                         100 * off);
            extended += fabs(off) > 1e-9;
            worst = fmax(worst, fabs(off));
            mp_sim_result_free(&r);
        }
    if (getenv("MP_PRINT_DUAL"))
        printf("%d of 120 sets extended past the budget, within %.3g%%\n", extended, 100 * worst);
    assert_true(extended >= 3);
}

/* ZB-V on uneven stages: the estimate's step from the order the simulator
 * builds (planner/zbv_replay.c, mp_zbv_replay: the builder's five
 * candidates, the chosen one's times) against the engine running that
 * order, over random per-stage F, B, W, activation bytes (so the stash cap
 * binds unevenly) and transfer sizes, p 1-8, 12, 16, m from p/2 to 40p,
 * five links. Within the replay's budget (p m <= MP_ZBV_REPLAY_PM) the two
 * agree to 1e-9 of the step; beyond it the orders are built for fewer
 * micro-batches and extended by their pace (mp_schedule_zbv_times): here
 * 44 of the 45 extended sets within 2.2%, one 6.5% under
 * the engine, ZBV_EXTEND_TOL stating 7% (the real plans' figures:
 * tests/sim/test_vorder.c). Before, the estimate was the closed form, 3-9%
 * off on real uneven plans. */
#define ZBV_EXTEND_TOL 0.07

static void test_zbv_replay_uneven_grid(void **state)
{
    (void)state;
    const double links[][2] = {{0, 0}, {0.1, 0}, {0, 0.1}, {0.05, 0.2}, {1.5, 1.2}};
    const int32_t ps[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 16};
    uint64_t seed = 27;
    int exact = 0, extended = 0;
    double worst_exact = 0, worst_ext = 0;
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
        int32_t p = ps[pi], n = 2 * p;
        int32_t ms[6] = {p / 2 + 1, 2 * p, 3 * p + 1, 8 * p, 16 * p, 40 * p};
        for (int mi = 0; mi < 6; mi++)
            for (size_t l = 0; l < sizeof links / sizeof links[0]; l++) {
                int32_t m = ms[mi];
                mp_pipeline_cost pc = uniform(n, 1, 1, 1, 1);
                double f[MP_MAX_STAGES], b[MP_MAX_STAGES], w[MP_MAX_STAGES], bytes[MP_MAX_STAGES];
                double tt[5 * MP_MAX_STAGES];
                const double range[5] = {0.2, 2.8, 2.0, 0.5, 1.5};
                random_stages(n, &seed, range, f, b, w, bytes);
                double lat = links[l][0], bw = links[l][1] > 0 ? 1 / links[l][1] : 0;
                for (int32_t k = 0; k < n; k++) {
                    g_stages[k].act_bytes = 0.5 + 1.5 * lcg_unit(&seed);
                    tt[k] = f[k];
                    tt[n + k] = b[k];
                    tt[2 * n + k] = w[k];
                    tt[3 * n + k] = lat + (bw > 0 ? g_stages[k].send_bytes / bw : 0);
                    tt[4 * n + k] = g_stages[k].act_bytes;
                }
                pc.p2p_latency = lat;
                pc.p2p_bw = bw;
                mp_op_times ot = {.f = tt, .b = tt + n, .w = tt + 2 * n, .link = tt + 3 * n,
                                  .act = tt + 4 * n, .lat = lat};
                mp_sim_options opt = {0};
                mp_sim_result r;
                mp_error err;
                assert_int_equal(
                    mp_simulate_cost(MP_SCHED_ZBV, p, 2, m, &pc, false, &opt, &r, &err), MP_OK);
                mp_v_rank_times rt[16];
                double got;
                bool whole;
                assert_int_equal(mp_zbv_replay(p, m, &ot, rt, &got, &whole, &err), MP_OK);
                double off = fabs(got / r.pipeline_makespan - 1);
                if (whole ? off > 1e-9 : off > ZBV_EXTEND_TOL)
                    fail_msg("zb-v p=%d m=%d link %d: replay %.12g, engine %.12g (%s)", (int)p,
                             (int)m, (int)l, got, r.pipeline_makespan,
                             whole ? "whole" : "extended");
                if (whole) {
                    exact++;
                    worst_exact = fmax(worst_exact, off);
                } else {
                    extended++;
                    worst_ext = fmax(worst_ext, off);
                }
                mp_sim_result_free(&r);
            }
    }
    if (getenv("MP_PRINT_ZBV"))
        printf("zb-v grid: %d whole within %.3g, %d extended within %.3g%%\n", exact, worst_exact,
               extended, 100 * worst_ext);
    assert_true(exact >= 200 && extended >= 30);
}

/* ... and under the all-to-all overlap's merged F&B units (free links): the
 * fill loses one unit's saving x a rank (cost.c dual_fb_makespan) and the
 * rest of the closed form (mp_dualpipe_turn) stays, the middle rank
 * (DualPipe's p/2 - 1, DualPipeV's last) idling (p' - 1)(fill - x) + turn, x
 * the saving its units show in its busy time (test_dualpipe_merged_fb_bubble
 * has it by hand for f = b = w). Every DualPipeV p <= 8 and DualPipe p <= 8
 * (even), m from 2p to 4p + 2. */
static void test_dualpipe_merged_fill_grid(void **state)
{
    (void)state;
    const double fbw[][3] = {{2, 1, 1},   {1, 0.5, 1}, {3, 2, 1}, {1.5, 1, 0.5}, {3, 1, 2},
                             {1, 1, 2},   {1, 1, 1},   {1, 2, 1}, {0.5, 1, 2},   {2, 3, 1},
                             {1, 3, 0.5}};
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    for (size_t q = 0; q < sizeof fbw / sizeof fbw[0]; q++)
        for (int k = 0; k < 2; k++)
            for (int32_t p = k + 1; p <= 8; p += k + 1)
                for (int32_t m = 2 * p; m <= 4 * p + 2; m += k + 1) {
                    double f = fbw[q][0], b = fbw[q][1], w = fbw[q][2];
                    bool dv = kinds[k] == MP_SCHED_DUALPIPEV;
                    int32_t n = dv ? 2 * p : p, pv = dv ? p : p / 2, mv = dv ? m : m / 2;
                    mp_pipeline_cost pc = uniform(n, 1, f, b, w);
                    for (int32_t s = 0; s < n; s++) {
                        g_stages[s].tp_comm_fwd = g_stages[s].ep_comm_fwd = 0.4 * f;
                        g_stages[s].tp_comm_bwd = g_stages[s].ep_comm_bwd = 0.4 * b;
                    }
                    mp_sim_result r = run_ep(kinds[k], p, 2, m, &pc);
                    double ideal = 2.0 * mv * (f + b + w), got = r.pipeline_makespan;
                    int32_t mid = pv - 1, units = (mv - pv - 1) + (mv - pv);
                    double idle = r.bubble_fraction[mid] * got, busy = got - idle;
                    double x = units > 0 ? (ideal - busy) / units : 0;
                    double fill = mp_dualpipe_fill(f, b, w, 0, 0);
                    double want = busy + (pv > 1 ? (pv - 1) * (fill - x) : 0) +
                                  mp_dualpipe_turn(kinds[k], p, f, b, w, 0, 0);
                    if (units > 0 && !(x > 0.1 * fmin(f, b)))
                        fail_msg("%s p=%d m=%d f=%g b=%g w=%g: units saved %.12g",
                                 mp_schedule_name(kinds[k]), (int)p, (int)m, f, b, w, x);
                    if (!NEAR(got, want))
                        fail_msg("%s (ep overlap) p=%d m=%d f=%g b=%g w=%g: makespan %.12g, "
                                 "want %.12g",
                                 mp_schedule_name(kinds[k]), (int)p, (int)m, f, b, w, got, want);
                    mp_sim_result_free(&r);
                }
}

/* ... and with links under the overlap: the merged units save what they save
 * on free links, T_ep = T - (T_free - T_ep,free), T the closed form with the
 * links (mp_dualpipe_makespan), exactly while each transfer's latency and
 * link time stay within a tenth of the forward; beyond, the merged pass's
 * hidden all-to-all and the links' waits overlap less and the engine is
 * longer, by at most 2.1% of the step where tried (a latency of one forward:
 * 2.0%; 0.3 f and 0.2 f: 0.9%), which the test holds as the bound. Every
 * DualPipeV p <= 8, DualPipe p <= 8 even, m = 2p and about 3p, seven f:b:w.
 * The estimate adds the links to the fills that lose a unit's saving each
 * (cost.c dual_fb_makespan) and to dual_turn. */
static void test_dualpipe_merged_links(void **state)
{
    (void)state;
    const double fbw[][3] = {{1, 1, 1},       {2, 1, 1}, {1, 2, 1}, {1, 2, 0.5},
                             {1.5, 1, 0.5}, {1, 3, 0.5}, {1, 1, 2}};
    const double links[][2] = {{0.05, 0}, {0, 0.05}, {0.02, 0.03}, {0.1, 0.1},
                               {0.3, 0.2}, {1, 0},   {0, 1}};
    const mp_schedule_kind kinds[2] = {MP_SCHED_DUALPIPEV, MP_SCHED_DUALPIPE};
    double worst = 0;
    for (int k = 0; k < 2; k++)
        for (int32_t p = k + 1; p <= 8; p += k + 1)
            for (int mi = 0; mi < 2; mi++)
                for (size_t q = 0; q < sizeof fbw / sizeof fbw[0]; q++)
                    for (size_t l = 0; l < sizeof links / sizeof links[0]; l++) {
                        bool dv = kinds[k] == MP_SCHED_DUALPIPEV;
                        int32_t m = mi ? 3 * p + 1 : 2 * p, n = dv ? 2 * p : p;
                        m -= dv ? 0 : m % 2;
                        double f = fbw[q][0], b = fbw[q][1], w = fbw[q][2], t[2];
                        double lat = links[l][0] * f, wire = links[l][1] * f;
                        for (int linked = 0; linked < 2; linked++) {
                            mp_pipeline_cost pc = uniform(n, 1, f, b, w);
                            for (int32_t s = 0; s < n; s++) {
                                g_stages[s].tp_comm_fwd = g_stages[s].ep_comm_fwd = 0.4 * f;
                                g_stages[s].tp_comm_bwd = g_stages[s].ep_comm_bwd = 0.4 * b;
                                g_stages[s].send_bytes = 1;
                            }
                            pc.p2p_latency = linked ? lat : 0;
                            pc.p2p_bw = linked && wire > 0 ? 1 / wire : 0;
                            mp_sim_result r = run_ep(kinds[k], p, 2, m, &pc);
                            t[linked] = r.pipeline_makespan;
                            mp_sim_result_free(&r);
                        }
                        double saved = mp_dualpipe_makespan(kinds[k], p, m, f, b, w, 0, 0) - t[0];
                        double want =
                            mp_dualpipe_makespan(kinds[k], p, m, f, b, w, lat, wire) - saved;
                        bool small = links[l][0] <= 0.1 && links[l][1] <= 0.1;
                        double gap = (t[1] - want) / t[1];
                        if (small ? !NEAR(t[1], want) : gap < -1e-9 || gap > 0.021)
                            fail_msg("%s (ep overlap) p=%d m=%d f=%g b=%g w=%g lat=%g wire=%g: "
                                     "%.12g, want %.12g",
                                     mp_schedule_name(kinds[k]), (int)p, (int)m, f, b, w, lat,
                                     wire, t[1], want);
                        worst = fmax(worst, gap);
                    }
    /* the bound is not slack: the worst case comes within a fifth of it */
    assert_true(worst > 0.017);
}

/* Stashed activations: 1F1B rank r holds p - r micro-batches at its peak,
 * GPipe m, interleaved Megatron's warm-up + 1 chunks. */
static void test_peak_memory(void **state)
{
    (void)state;
    int32_t p = 4, m = 8;
    for (int kind = 0; kind < MP_SCHED_COUNT; kind++) {
        int32_t v = mp_schedule_chunks(kind, 2);
        mp_pipeline_cost pc = uniform(p, v, 1, 2, mp_schedule_splits_backward(kind) ? 1 : 0);
        /* dualpipe: p stages, each rank holding two (stages r and p-1-r:
         * twice 1F1B's static bytes, its parameters' second copy) */
        pc.n_stages = (int32_t)mp_schedule_n_stages(kind, p, v);
        pc.other_bytes = 1000;
        for (int32_t k = 0; k < p * v; k++) {
            g_stages[k].act_bytes = 10;
            g_stages[k].static_bytes = 100;
        }
        mp_sim_result r = run((mp_schedule_kind)kind, p, v, m, &pc, true);
        for (int32_t rank = 0; rank < p; rank++) {
            double want = 1000 + 100.0 * v +
                          10.0 * mp_schedule_inflight_bound((mp_schedule_kind)kind, p, v, m, rank);
            /* the V schedules' bound is their first rank's, dualpipe's its end
             * ranks'; the others hold less */
            if ((mp_schedule_is_v(kind) && rank > 0) ||
                (kind == MP_SCHED_DUALPIPE && rank > 0 && rank < p - 1))
                assert_true(r.peak_memory[rank] <= want + 1e-9);
            else
                assert_true(NEAR(r.peak_memory[rank], want));
        }
        /* The memory curve never goes below the static bytes nor above the
         * peak, reaches the peak, and ends at the static bytes. */
        int32_t cur = -1;
        double last = 0, top = 0;
        for (size_t i = 0; i < r.n_memory; i++) {
            const mp_sim_memory_point *pt = &r.memory[i];
            if (pt->rank != cur) {
                if (cur >= 0) {
                    assert_true(NEAR(last, 1000 + 100.0 * v));
                    assert_true(NEAR(top, r.peak_memory[cur]));
                }
                assert_true(pt->rank > cur);
                cur = pt->rank;
                top = 0;
            } else {
                assert_true(pt->time > r.memory[i - 1].time);
            }
            assert_true(pt->bytes >= 1000 + 100.0 * v - 1e-9);
            assert_true(pt->bytes <= r.peak_memory[pt->rank] + 1e-9);
            if (pt->bytes > top)
                top = pt->bytes;
            last = pt->bytes;
        }
        assert_true(NEAR(last, 1000 + 100.0 * v));
        assert_int_equal(cur, p - 1);
        mp_sim_result_free(&r);
    }
}

/* DP: reductions overlapped with the last backward hide when short; when
 * not overlapped they add fully; the optimizer adds at the end. */
static void test_dp_and_optimizer(void **state)
{
    (void)state;
    int32_t p = 2, m = 4;
    mp_pipeline_cost pc = uniform(p, 1, 1, 2, 0);
    pc.dp_time = 1.5;
    pc.dp_exposed = 0.0;
    pc.optimizer = 0.25;
    for (int32_t k = 0; k < p; k++)
        g_stages[k].grad_bytes = 100;
    mp_sim_options opt = {.record_timeline = true};
    mp_sim_result a, b;
    mp_error err;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, p, 1, m, &pc, true, &opt, &a, &err), MP_OK);
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, p, 1, m, &pc, false, &opt, &b, &err), MP_OK);
    double pm = (m + p - 1) * 3.0;
    assert_true(NEAR(a.pipeline_makespan, pm));
    /* Overlapped: rank 0's reduction starts with its last B (2 s), so 1.5 s hides. */
    assert_true(NEAR(a.makespan, pm + 0.25));
    assert_true(NEAR(a.exposed.dp_comm, 0));
    /* Not overlapped: 1.5 s after the last backward. */
    assert_true(NEAR(b.makespan, pm + 1.5 + 0.25));
    assert_true(NEAR(b.exposed.dp_comm, 1.5));
    assert_true(NEAR(b.exposed.optimizer, 0.25));
    size_t dp_events = 0, opt_events = 0;
    for (size_t i = 0; i < b.timeline.n; i++) {
        dp_events += b.timeline.events[i].stream == MP_STREAM_DP;
        opt_events += b.timeline.events[i].kind == MP_EV_OPTIMIZER;
    }
    assert_int_equal(dp_events, (size_t)p);
    assert_int_equal(opt_events, (size_t)p);
    mp_sim_result_free(&a);
    mp_sim_result_free(&b);
    /* The last bucket (dp_exposed of dp_time) cannot start before the backward ends. */
    pc.dp_exposed = 0.75;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, p, 1, m, &pc, true, NULL, &a, &err), MP_OK);
    assert_true(NEAR(a.makespan, pm + 0.75 + 0.25));
    mp_sim_result_free(&a);
}

/* Exposed TP/CP inside F and B appear in the breakdown and as events on
 * their streams; the parts add up to the step. */
static void test_breakdown_and_streams(void **state)
{
    (void)state;
    int32_t p = 2, m = 2;
    mp_pipeline_cost pc = uniform(p, 1, 1, 2, 0);
    for (int32_t k = 0; k < p; k++) {
        g_stages[k].tp_comm_fwd = 0.1;
        g_stages[k].tp_comm_bwd = 0.2;
        g_stages[k].cp_comm_fwd = 0.05;
        g_stages[k].recompute = 0.5;
    }
    mp_sim_result r = run(MP_SCHED_1F1B, p, 1, m, &pc, true);
    assert_true(NEAR(r.exposed.tp_comm, m * 0.3));
    assert_true(NEAR(r.exposed.cp_comm, m * 0.05));
    assert_true(NEAR(r.exposed.recompute, m * 0.5));
    assert_true(NEAR(r.exposed.compute, m * 3.0 - m * 0.85));
    double sum = r.exposed.compute + r.exposed.recompute + r.exposed.tp_comm +
                 r.exposed.cp_comm + r.exposed.pp_comm + r.exposed.bubble + r.exposed.dp_comm +
                 r.exposed.optimizer;
    assert_true(NEAR(sum, r.exposed.step));
    size_t tp = 0, cp = 0, f = 0, b = 0;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *e = &r.timeline.events[i];
        tp += e->stream == MP_STREAM_TP;
        cp += e->stream == MP_STREAM_CP;
        f += e->kind == MP_EV_F;
        b += e->kind == MP_EV_B;
        if (e->stream == MP_STREAM_TP || e->stream == MP_STREAM_CP)
            assert_true(e->kind == MP_EV_TP_COMM || e->kind == MP_EV_CP_COMM);
    }
    assert_int_equal(tp, (size_t)2 * p * m);
    assert_int_equal(cp, (size_t)p * m);
    assert_int_equal(f, (size_t)p * m);
    assert_int_equal(b, (size_t)p * m);
    mp_sim_result_free(&r);
}

/* Timeline off: no events, no memory curve, same numbers. */
static void test_fast_mode_same_numbers(void **state)
{
    (void)state;
    mp_pipeline_cost pc = uniform(4, 2, 0.5, 1, 0);
    mp_sim_result a = run(MP_SCHED_INTERLEAVED, 4, 2, 8, &pc, true);
    mp_sim_result b = run(MP_SCHED_INTERLEAVED, 4, 2, 8, &pc, false);
    assert_int_equal(b.timeline.n, 0);
    assert_int_equal(b.n_memory, 0);
    assert_true(a.timeline.n > 0);
    assert_true(NEAR(a.makespan, b.makespan));
    for (int32_t r = 0; r < 4; r++)
        assert_true(NEAR(a.bubble_fraction[r], b.bubble_fraction[r]));
    mp_sim_result_free(&a);
    mp_sim_result_free(&b);
}

/* Non-uniform stages: the slowest stage sets the steady-state pace. */
static void test_slow_stage_dominates(void **state)
{
    (void)state;
    int32_t p = 4, m = 32;
    mp_pipeline_cost pc = uniform(p, 1, 1, 2, 0);
    g_stages[2].fwd = 2;
    g_stages[2].bwd = 4;
    mp_sim_result r = run(MP_SCHED_1F1B, p, 1, m, &pc, false);
    /* The slow stage is busy m (2 + 4) and cannot start before ranks 0 and 1
     * have forwarded (2) nor end before they have run the last backward (4).
     * Worked by hand: rank 2 runs F0 [2,4], F1 [4,6], then waits for B0 from
     * rank 3 (F0 [4,5], B0 [5,7]): 1 s idle, then busy to the end. */
    assert_true(NEAR(r.pipeline_makespan, m * 6.0 + 2 + 4 + 1));
    assert_true(r.bubble_fraction[2] < r.bubble_fraction[0]);
    mp_sim_result_free(&r);
}

/* The critical rank (docs/simulator.md, "What comes out") of an uneven
 * pipeline whose first stage has a quarter of the others' work (as
 * DeepSeek-V3's first stage with its 3 dense layers): it is a loaded rank,
 * not rank 0, although rank 0 finishes last (it runs the last backward).
 * By hand, 1F1B, p = 4, m = 8, free links: stage 0 F = 0.25, B = 0.5, the
 * others F = 1, B = 2. Ranks 1-3 run as a uniform 3-stage 1F1B behind rank
 * 0's first forward, so rank 3 is busy from 0.25 + 2 on for m(1 + 2) = 24,
 * then ranks 2 and 1 drain (2 + 2) and rank 0 (0.5): the pipeline takes
 * 0.25 + 2 + 24 + 4 + 0.5 = 30.75. Ranks 1-3 each work 24 (a tie: the lowest
 * is reported), idle 6.75; rank 0 works 6, idle 24.75, which the breakdown
 * reported before (80% bubble). A heavier stage 2 (F = 1.5, B = 3) is the
 * critical rank; with link latency the parts still add up to the step. */
static void test_critical_rank_uneven(void **state)
{
    (void)state;
    const int32_t p = 4, m = 8;
    mp_pipeline_cost pc = uniform(p, 1, 1, 2, 0);
    g_stages[0].fwd = 0.25;
    g_stages[0].bwd = g_stages[0].bwd_input = 0.5;
    mp_sim_result r = run(MP_SCHED_1F1B, p, 1, m, &pc, true);
    assert_true(NEAR(r.pipeline_makespan, 30.75));
    /* rank 0 finishes last */
    double last = -1;
    int32_t last_rank = -1;
    for (size_t i = 0; i < r.timeline.n; i++) {
        const mp_event *ev = &r.timeline.events[i];
        if (ev->stream == MP_STREAM_COMPUTE && ev->end >= last) {
            last = ev->end;
            last_rank = ev->rank;
        }
    }
    assert_int_equal(last_rank, 0);
    assert_int_equal(r.critical_rank, 1);
    assert_true(NEAR(r.exposed.compute, m * 3.0));
    assert_true(NEAR(r.exposed.bubble, 6.75));
    assert_true(NEAR(r.bubble_fraction[0], 24.75 / 30.75));
    assert_true(NEAR(r.exposed.compute + r.exposed.pp_comm + r.exposed.bubble, r.makespan));
    mp_sim_result_free(&r);

    g_stages[2].fwd = 1.5;
    g_stages[2].bwd = g_stages[2].bwd_input = 3;
    r = run(MP_SCHED_1F1B, p, 1, m, &pc, false);
    assert_int_equal(r.critical_rank, 2);
    assert_true(NEAR(r.exposed.compute, m * 4.5));
    for (int32_t k = 0; k < p; k++)
        assert_true(r.exposed.bubble <= r.bubble_fraction[k] * r.pipeline_makespan + 1e-9);
    mp_sim_result_free(&r);

    pc.p2p_latency = 0.1;
    for (int a = 0; a < 2; a++) {
        g_async = a;
        r = run(MP_SCHED_1F1B, p, 1, m, &pc, false);
        g_async = false;
        assert_int_equal(r.critical_rank, 2);
        assert_true(NEAR(r.exposed.compute, m * 4.5));
        assert_true(r.exposed.bubble >= 0);
        assert_true(NEAR(r.exposed.compute + r.exposed.pp_comm + r.exposed.bubble, r.makespan));
        mp_sim_result_free(&r);
    }
}

/* Causality on random uneven costs with latency and bandwidth, every
 * schedule, p <= 6, v <= 3, m <= 12, both p2p semantics: a stage's F starts
 * after the previous virtual stage's F of that micro-batch ended plus the
 * transfer, B after the next stage's B (W after its own B); a rank's compute
 * events never overlap; every (micro-batch, virtual stage) computed once. */
static uint64_t g_rng = 88172645463325252ull;
static double rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static void test_causality_random_costs(void **state)
{
    (void)state;
    static double f_end[6 * 3][12], b_end[6 * 3][12], f_start[6 * 3][12], b_start[6 * 3][12],
        w_start[6 * 3][12];
    for (int kind = 0; kind < MP_SCHED_COUNT; kind++)
        for (int32_t p = 1; p <= 6; p++)
            for (int32_t v = mp_schedule_chunks(kind, 2);
                 v <= (kind == MP_SCHED_INTERLEAVED ? 3 : mp_schedule_chunks(kind, 2)); v++)
                for (int32_t m = 1; m <= 12; m++) {
                    if (kind == MP_SCHED_INTERLEAVED && v > 1 && m % p != 0)
                        continue;
                    if (kind == MP_SCHED_DUALPIPEV && m < 2 * p)
                        continue;
                    if (kind == MP_SCHED_DUALPIPE && (p % 2 || m % 2 || m < 2 * p))
                        continue;
                    int32_t n_stages = (int32_t)mp_schedule_n_stages(kind, p, v);
                    mp_pipeline_cost pc = uniform(p, v, 1, 1, 1);
                    pc.n_stages = n_stages;
                    for (int32_t k = 0; k < p * v; k++) {
                        g_stages[k].fwd = 0.2 + rnd();
                        g_stages[k].bwd_input = 0.2 + rnd();
                        g_stages[k].bwd_weight = 0.1 + rnd();
                        g_stages[k].bwd = g_stages[k].bwd_input + g_stages[k].bwd_weight;
                        g_stages[k].send_bytes = 100 * rnd();
                    }
                    pc.p2p_latency = 0.05;
                    pc.p2p_bw = 400;
                    g_async = rnd() < 0.5;
                    mp_sim_result r = run((mp_schedule_kind)kind, p, v, m, &pc, true);
                    g_async = false;
                    for (int32_t k = 0; k < 6 * 3; k++)
                        for (int32_t mb = 0; mb < 12; mb++)
                            f_start[k][mb] = b_start[k][mb] = w_start[k][mb] = -1;
                    double last_end[6] = {0};
                    for (size_t i = 0; i < r.timeline.n; i++) {
                        const mp_event *e = &r.timeline.events[i];
                        if (e->stream != MP_STREAM_COMPUTE || e->kind == MP_EV_OPTIMIZER)
                            continue;
                        /* events of a rank come in its program order */
                        assert_true(e->start >= last_end[e->rank] - 1e-12);
                        last_end[e->rank] = e->end;
                        int32_t k = (int32_t)mp_schedule_stage(kind, p, e->rank, e->chunk);
                        if (e->kind == MP_EV_F) {
                            assert_true(f_start[k][e->microbatch] < 0);
                            f_start[k][e->microbatch] = e->start;
                            f_end[k][e->microbatch] = e->end;
                        } else if (e->kind == MP_EV_B) {
                            assert_true(b_start[k][e->microbatch] < 0);
                            b_start[k][e->microbatch] = e->start;
                            b_end[k][e->microbatch] = e->end;
                        } else if (e->kind == MP_EV_W) {
                            w_start[k][e->microbatch] = e->start;
                        }
                    }
                    for (int32_t k = 0; k < n_stages; k++)
                        for (int32_t mb = 0; mb < m; mb++) {
                            assert_true(f_start[k][mb] >= 0 && b_start[k][mb] >= 0);
                            assert_true(b_start[k][mb] >= f_end[k][mb] - 1e-12);
                            /* (zb-h1 at pp 1 runs as 1f1b: no W) */
                            if (mp_schedule_splits_backward(mp_schedule_run_as(kind, p)))
                                assert_true(w_start[k][mb] >= b_end[k][mb] - 1e-12);
                            /* the activation crossed a link, unless the V
                             * turns on this rank (k = p-1 to p) or there is
                             * one rank: a local copy */
                            bool v_turn = p == 1 || (mp_schedule_is_v(kind) && k == p);
                            if (k > 0)
                                assert_true(f_start[k][mb] >=
                                            f_end[k - 1][mb] +
                                                (v_turn ? 0 : pc.p2p_latency) - 1e-12);
                            v_turn = p == 1 || (mp_schedule_is_v(kind) && k == p - 1);
                            if (k < n_stages - 1)
                                assert_true(b_start[k][mb] >=
                                            b_end[k + 1][mb] +
                                                (v_turn ? 0 : pc.p2p_latency) - 1e-12);
                        }
                    mp_sim_result_free(&r);
                }
}

static void test_bad_costs(void **state)
{
    (void)state;
    mp_pipeline_cost pc = uniform(4, 1, 1, 1, 0);
    mp_sim_result r;
    mp_error err;
    pc.n_stages = 3;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 4, 1, 8, &pc, true, NULL, &r, &err),
                     MP_EINTERNAL);
    pc.n_stages = 4;
    g_stages[1].fwd = -1;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 4, 1, 8, &pc, true, NULL, &r, &err),
                     MP_EINTERNAL);
    g_stages[1].fwd = NAN;
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 4, 1, 8, &pc, true, NULL, &r, &err),
                     MP_EINTERNAL);
    g_stages[1].fwd = 1;
    assert_int_equal(mp_simulate_cost(MP_SCHED_INTERLEAVED, 4, 1, 6, &pc, true, NULL, &r, &err),
                     MP_OK);
    mp_sim_result_free(&r);
    pc = uniform(4, 2, 1, 1, 0);
    assert_int_equal(mp_simulate_cost(MP_SCHED_INTERLEAVED, 4, 2, 6, &pc, true, NULL, &r, &err),
                     MP_EINPUT);
    assert_string_equal(err.field, "microbatches");
    /* more messages than the engine's tables hold: refused before allocating them */
    pc = uniform(1024, 1, 1, 1, 0);
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 1024, 1, 1 << 17, &pc, true, NULL, &r, &err),
                     MP_EINPUT);
    assert_non_null(strstr(err.msg, "too large to simulate"));
    /* the limits, in pp*vpp*micro-batches: checked without allocating, no overflow */
    assert_int_equal(mp_sim_check_size(64, 2, 8192, false, "m", &err), MP_OK);
    assert_int_equal(mp_sim_check_size(64, 2, 8193, false, "m", &err), MP_EINPUT);
    assert_string_equal(err.field, "m");
    assert_int_equal(mp_sim_check_size(64, 2, 2048, true, "m", &err), MP_OK);
    assert_int_equal(mp_sim_check_size(64, 2, 2049, true, "m", &err), MP_EINPUT);
    assert_non_null(strstr(err.msg, "with a timeline"));
    assert_int_equal(mp_sim_check_size(INT64_MAX, INT64_MAX, INT64_MAX, false, "m", &err),
                     MP_EINPUT);
    assert_int_equal(mp_sim_check_size(1 << 20, 1 << 20, 1 << 20, false, "m", &err), MP_EINPUT);
    /* a non-positive size is left to the schedule's own message */
    assert_int_equal(mp_sim_check_size(0, 1, 8, false, "m", &err), MP_OK);
    pc = uniform(4, 1, 1, 1, 0);
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 4, 1, 0, &pc, true, NULL, &r, &err),
                     MP_EINPUT);
    assert_string_equal(err.field, "microbatches");
    assert_null(strstr(err.msg, "too large"));
    /* a timeline is refused at a quarter of the size (here 4 * 2^16 units) */
    mp_sim_options rec = {.record_timeline = true};
    assert_int_equal(mp_simulate_cost(MP_SCHED_1F1B, 4, 1, 1 << 17, &pc, true, &rec, &r, &err),
                     MP_EINPUT);
    assert_non_null(strstr(err.msg, "with a timeline"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_bubble_exact),
        cmocka_unit_test(test_zbh1_bubble),
        cmocka_unit_test(test_matches_closed_form),
        cmocka_unit_test(test_zbh1_better_than_1f1b),
        cmocka_unit_test(test_zbv_zero_bubble),
        cmocka_unit_test(test_dualpipev_bubble),
        cmocka_unit_test(test_dualpipe_bubble),
        cmocka_unit_test(test_moe_ep_overlap),
        cmocka_unit_test(test_moe_ep_overlap_sm_contention),
        cmocka_unit_test(test_moe_ep_stream_combine_wait),
        cmocka_unit_test(test_moe_merged_pass_event_order),
        cmocka_unit_test(test_moe_merged_pass_edges),
        cmocka_unit_test(test_moe_merged_pass_send_before_edges),
        cmocka_unit_test(test_moe_merged_pass_two_stages),
        cmocka_unit_test(test_moe_merged_pass_grid),
        cmocka_unit_test(test_dualpipe_merged_fb_by_hand),
        cmocka_unit_test(test_dualpipe_merged_fb_grid),
        cmocka_unit_test(test_dualpipe_merged_fb_bubble),
        cmocka_unit_test(test_dualpipe_exact_grid),
        cmocka_unit_test(test_dualpipe_merged_fill_grid),
        cmocka_unit_test(test_dualpipe_merged_links),
        cmocka_unit_test(test_dualpipe_merged_fb_dense),
        cmocka_unit_test(test_gpipe_with_links),
        cmocka_unit_test(test_serial_p2p),
        cmocka_unit_test(test_link_serialises_messages),
        cmocka_unit_test(test_dualpipe_commit_by_hand),
        cmocka_unit_test(test_interleaved_batched_send_after_b),
        cmocka_unit_test(test_interleaved_batched_closed_form),
        cmocka_unit_test(test_interleaved_overlap_closed_form),
        cmocka_unit_test(test_interleaved_overlap_warmup_sync),
        cmocka_unit_test(test_dualpipev_commit_two_peers),
        cmocka_unit_test(test_sync_and_async_p2p),
        cmocka_unit_test(test_peak_memory),
        cmocka_unit_test(test_dp_and_optimizer),
        cmocka_unit_test(test_breakdown_and_streams),
        cmocka_unit_test(test_fast_mode_same_numbers),
        cmocka_unit_test(test_slow_stage_dominates),
        cmocka_unit_test(test_critical_rank_uneven),
        cmocka_unit_test(test_causality_random_costs),
        cmocka_unit_test(test_bad_costs),
        cmocka_unit_test(test_dualpipe_replay_uneven_grid),
        cmocka_unit_test(test_zbv_replay_uneven_grid),
        cmocka_unit_test(test_dualpipe_replay_past_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
