/* ZB-V's order from real stage costs (sim/schedule_vorder.c) on realistic
 * plans: GPT-3 175B and Llama-3 70B on dgx-h100, tp 8, dp 2, pp 4-16, 8-64
 * micro-batches. The estimate's pipeline (step - DP - optimizer) is the
 * simulated one to TOLERANCE (1e-9 of the step): it asks the simulator's
 * builder for the chosen order's step (planner/zbv_replay.c) wherever p m
 * <= MP_ZBV_REPLAY_PM, every plan here. Before, it was the closed form: the
 * simulated pipeline within +0.3% of it on even splits (m >= p), +2.9% to
 * +6.4% over it on Llama 3 70B's uneven V split at pp 16, 23% over it at pp
 * 16, m 8 (its critical-path term a lower bound there).
 * Each rank's stash stays within the closed form's memory: p times its two
 * chunks' activations. `test_sim_vorder --rows` prints the table of
 * docs/simulator.md (1F1B, ZB-H1, ZB-V bubbles). */
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
#include "planner/zbv_replay.h"
#include "sim/schedule_vorder.h"
#include "sim/simulate.h"

/* How far ZB-V's estimated pipeline may be from the simulated one where the
 * estimate builds the orders for all m (p m <= MP_ZBV_REPLAY_PM). */
#define TOLERANCE 1e-9
/* ... and beyond that budget, where it builds them for fewer micro-batches
 * and extends each by its pace (sim/schedule_vorder.h
 * mp_schedule_zbv_times): on the real plans of test_zbv_real_plans -2.9%
 * (Llama 3 70B pp 16, m 128) to +1.2% (Qwen3-235B pp 8, m 512), DeepSeek-V3
 * pp 16 +0.6% and +0.17% at m 128 and 256 (test_zbv_uneven_v_split). Before,
 * the closed form: Llama 3 70B -4.4% at m 128, Qwen3-235B -7% to -8%. */
#define EXTEND_TOLERANCE 0.03

/* model on dgx-h100, tp t, pp p, ep ep, dp d, m micro-batches of one. */
static mp_config config_of(const char *model, int64_t t, int64_t p, int64_t ep, int64_t d,
                           int64_t m, mp_schedule_kind s)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    const mp_model *md = mp_model_preset(model);
    assert_non_null(md);
    c.model = *md;
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = t * p * d, .seq = md->seq, .global_batch = m * d,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = t, .pp = p, .vpp = mp_schedule_is_v(s) ? 2 : 1, .cp = 1,
                               .ep = ep, .dp = d, .sp = true, .micro_batch = 1,
                               .recompute = MP_RECOMPUTE_SELECTIVE, .dist_opt = true,
                               .dp_overlap = true, .schedule = s};
    /* the pipeline alone: with overlap the V schedules' parameter gathers
     * start with the step and the first forwards wait for them (DP time
     * inside the simulated pipeline, which the closed form leaves out) */
    if (mp_schedule_is_v(s))
        c.parallel.dp_overlap = false;
    return c;
}

static mp_config plan_config(const char *model, int64_t p, int64_t m, mp_schedule_kind s)
{
    return config_of(model, 8, p, 0, 2, m, s);
}

typedef struct row {
    double closed, sim;   /* pipeline seconds: closed form, simulated */
    double bubble;        /* simulated: the critical rank's idle / pipeline */
    double closed_bubble; /* the estimate's bubble / its pipeline */
    double peak, closed_peak;
} row;

static bool measure(const char *model, int64_t p, int64_t m, mp_schedule_kind s, row *out)
{
    mp_config c = plan_config(model, p, m, s);
    mp_estimate e;
    mp_sim_result r;
    mp_error err;
    mp_sim_options opt = {0};
    if (mp_estimate_config(&c, NULL, &e, &err) != MP_OK)
        return false;
    if (mp_simulate(&c, NULL, &opt, &r, &err) != MP_OK)
        fail_msg("%s pp %lld m %lld %s: %s", model, (long long)p, (long long)m,
                 mp_schedule_name(s), err.msg);
    out->closed = e.time.step - e.time.dp_comm - e.time.optimizer;
    out->sim = r.pipeline_makespan;
    out->bubble = r.exposed.bubble / r.pipeline_makespan;
    out->closed_bubble = e.time.bubble / out->closed;
    out->peak = 0;
    for (int32_t k = 0; k < r.ranks; k++)
        out->peak = fmax(out->peak, r.peak_memory[k]);
    out->closed_peak = e.memory.peak;
    if (s == MP_SCHED_ZBV) {
        /* the closed form's memory: p micro-batches of each of the rank's two
         * chunks' activations (the stage costs' act_bytes) over its static bytes,
         * and as many waiting Ws' output gradients (w_hold_bytes) */
        mp_pipeline_cost pc = {0};
        assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
        for (int32_t k = 0; k < r.ranks; k++) {
            const mp_stage_cost *a = &pc.stages[k], *b = &pc.stages[2 * p - 1 - k];
            double bound = pc.other_bytes + a->static_bytes + b->static_bytes +
                           (double)p * (a->act_bytes + b->act_bytes + a->w_hold_bytes +
                                        b->w_hold_bytes);
            if (r.peak_memory[k] > bound * (1 + 1e-9))
                fail_msg("%s pp %lld m %lld zb-v rank %d: peak %.6g B over the closed "
                         "form's %.6g B",
                         model, (long long)p, (long long)m, (int)k, r.peak_memory[k], bound);
        }
        mp_pipeline_cost_free(&pc);
    }
    mp_sim_result_free(&r);
    return true;
}

static const char *const models[] = {"gpt3-175b", "llama3-70b"};
static const int64_t pps[] = {4, 8, 16};
static const int64_t ms[] = {8, 16, 32, 64};

static void test_zbv_within_closed_form(void **state)
{
    (void)state;
    int ran = 0;
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++) {
                row v;
                if (!measure(models[i], pps[j], ms[k], MP_SCHED_ZBV, &v))
                    continue; /* a split the configuration check refuses */
                ran++;
                /* (llama3-70b's 80 blocks on pp 16's 32 stages take the V's own
                 * uneven split, mp_v_stage_blocks), every m, m < p too */
                if (fabs(v.sim - v.closed) > TOLERANCE * v.sim)
                    fail_msg("%s pp %lld m %lld zb-v: simulated %.12g s, estimate %.12g s "
                             "(%+.3g)",
                             models[i], (long long)pps[j], (long long)ms[k], v.sim, v.closed,
                             v.sim / v.closed - 1);
            }
    assert_true(ran >= 18);
}

/* DeepSeek-V3 (61 blocks) on 2048 H100s, tp 2, pp 16 (ep 16, dp 64), on the
 * V's own split (rank 0 a block in each stage with the embedding and the
 * head, rank 1's first stage the dense blocks, rank 15 two and one): rank 0
 * forwards its chunk 0 six times faster than the middle ranks, and the list
 * scheduling without ZB-V's warm-up lead let it run 63 chunk-0 forwards
 * ahead within its byte cap, the middle ranks' stashes filled with chunk 0
 * and chunk 1 crossed the V one micro-batch at a time: 274.8 s simulated
 * against 47.7 s estimated at m = 256 (+12.1% at m = 64, 4.1x at 128). With
 * the bounded orders the closed form was +0.6% to +4.4% off; now the estimate
 * is the simulated pipeline to TOLERANCE at m 2p and 4p (within the
 * replay's budget) and to EXTEND_TOLERANCE at 8p and 16p. */
static void test_zbv_uneven_v_split(void **state)
{
    (void)state;
    static const char plan_fmt[] =
        "megaplan_plan: 1\nmodel: deepseek-v3\nhw: dgx-h100\n"
        "training: {gpus: 2048, seq: 4096, global_batch: %lld, precision: bf16}\n"
        "parallel: {tp: 2, sp: true, pp: 16, vpp: 2, cp: 1, ep: 16, dp: 64, micro_batch: 1,\n"
        "           recompute: selective, dist_opt: true, dp_overlap: false,\n"
        "           tp_overlap: false, schedule: zb-v}\n";
    static const int64_t mbs[] = {32, 64, 128, 256};
    for (size_t i = 0; i < sizeof mbs / sizeof mbs[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, plan_fmt, (long long)(mbs[i] * 64));
        mp_plan plan;
        mp_error err;
        assert_int_equal(mp_plan_parse_yaml(text, strlen(text), "test", &plan, &err), MP_OK);
        mp_estimate e;
        mp_sim_result r;
        mp_sim_options opt = {0};
        assert_int_equal(mp_estimate_config(&plan.config, &plan, &e, &err), MP_OK);
        assert_int_equal(mp_simulate(&plan.config, &plan, &opt, &r, &err), MP_OK);
        double closed = e.time.step - e.time.dp_comm - e.time.optimizer;
        double tol = 16 * mbs[i] <= MP_ZBV_REPLAY_PM ? TOLERANCE : EXTEND_TOLERANCE;
        if (fabs(r.pipeline_makespan - closed) > tol * r.pipeline_makespan)
            fail_msg("deepseek-v3 pp 16 m %lld zb-v: simulated %.12g s, estimate %.12g s",
                     (long long)mbs[i], r.pipeline_makespan, closed);
        mp_sim_result_free(&r);
    }
}

/* The estimate's ZB-V pipeline against the simulated one on real plans:
 * Qwen3-235B-A22B on 512 H100s (tp 2, pp 8, ep 8; its 94 layers nearly
 * even in time but not in bytes: rank 0's chunk 1 with the head stashes
 * 4.56 GB against chunk 0's 3.28), Llama 3 70B on 256 (tp 8, pp 16, the V's
 * uneven split), GPT-3 175B at pp 8 and 16 (tp 8, dp 4, the even split with
 * the embedding and the head on rank 0): equal to TOLERANCE within the
 * replay's budget, to EXTEND_TOLERANCE beyond it. Before, the closed form:
 * Qwen3-235B -6.7% to -8.2% under the simulated pipeline at m 32-128, Llama
 * -6.0% to +5.6%, GPT-3 175B +0.8% to +6.0%. */
static void zbv_plan(const char *model, int64_t t, int64_t p, int64_t ep, int64_t d, int64_t m,
                     double *est, double *sim)
{
    mp_config c = config_of(model, t, p, ep, d, m, MP_SCHED_ZBV);
    mp_error err;
    mp_estimate e;
    mp_sim_result r;
    mp_sim_options opt = {0};
    assert_int_equal(mp_estimate_config(&c, NULL, &e, &err), MP_OK);
    assert_int_equal(mp_simulate(&c, NULL, &opt, &r, &err), MP_OK);
    *est = e.time.step - e.time.dp_comm - e.time.optimizer;
    *sim = r.pipeline_makespan;
    mp_sim_result_free(&r);
}

static void test_zbv_real_plans(void **state)
{
    (void)state;
    static const struct {
        const char *model;
        int64_t t, p, ep, d, m;
    } plans[] = {{"qwen3-235b-a22b", 2, 8, 8, 32, 32}, {"qwen3-235b-a22b", 2, 8, 8, 32, 64},
                 {"qwen3-235b-a22b", 2, 8, 8, 32, 128}, {"qwen3-235b-a22b", 2, 8, 8, 32, 256},
                 {"qwen3-235b-a22b", 2, 8, 8, 32, 512}, {"llama3-70b", 8, 16, 0, 2, 32},
                 {"llama3-70b", 8, 16, 0, 2, 64},      {"llama3-70b", 8, 16, 0, 2, 128},
                 {"gpt3-175b", 8, 8, 0, 4, 64},        {"gpt3-175b", 8, 8, 0, 4, 128},
                 {"gpt3-175b", 8, 8, 0, 4, 384},       {"gpt3-175b", 8, 16, 0, 4, 32},
                 {"gpt3-175b", 8, 16, 0, 4, 64},       {"gpt3-175b", 8, 16, 0, 4, 384}};
    int exact = 0;
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
        double est, sim;
        zbv_plan(plans[i].model, plans[i].t, plans[i].p, plans[i].ep, plans[i].d, plans[i].m,
                 &est, &sim);
        bool whole = plans[i].p * plans[i].m <= MP_ZBV_REPLAY_PM;
        if (getenv("MP_PRINT_ZBV"))
            printf("%-16s pp %2lld m %3lld: simulated %.9f s, estimate %.9f s (%+.3g)\n",
                   plans[i].model, (long long)plans[i].p, (long long)plans[i].m, sim, est,
                   est / sim - 1);
        if (fabs(est - sim) > (whole ? TOLERANCE : EXTEND_TOLERANCE) * sim)
            fail_msg("%s pp %lld m %lld zb-v: simulated %.12g s, estimate %.12g s",
                     plans[i].model, (long long)plans[i].p, (long long)plans[i].m, sim, est);
        exact += whole;
    }
    assert_int_equal(exact, 9);
}

/* DualPipeV keeps DeepSeek's fixed phases (no list scheduling): on the same
 * plans (m >= 2p) its simulated pipeline is already at or below its closed
 * form, an upper bound where B > W (-0.9% to -8.3%). */
static void test_dualpipev_within_closed_form(void **state)
{
    (void)state;
    int ran = 0;
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++) {
                row v;
                if (ms[k] < 2 * pps[j] ||
                    !measure(models[i], pps[j], ms[k], MP_SCHED_DUALPIPEV, &v))
                    continue;
                ran++;
                if (v.sim > v.closed * (1 + TOLERANCE))
                    fail_msg("%s pp %lld m %lld dualpipev: simulated %.4f s, closed form %.4f s",
                             models[i], (long long)pps[j], (long long)ms[k], v.sim, v.closed);
            }
    assert_true(ran >= 16);
}

/* The order the executor asks for (mp_sim_plan_schedule) is the one the
 * simulator runs: built from the same cost model call, and not the
 * unit-time order (the costs reach it). */
static void test_exec_gets_the_simulated_order(void **state)
{
    (void)state;
    mp_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.config = plan_config("llama3-70b", 4, 16, MP_SCHED_ZBV);
    mp_error err;
    mp_pipeline_cost pc = {0};
    assert_int_equal(mp_pipeline_cost_build(&plan.config, &plan, &pc, &err), MP_OK);
    mp_op_list all[4];
    assert_int_equal(mp_sim_schedule(MP_SCHED_ZBV, 4, 2, 16, &pc, -1, all, &err), MP_OK);
    int differs = 0;
    for (int32_t r = 0; r < 4; r++) {
        mp_op_list ex, unit;
        assert_int_equal(mp_sim_plan_schedule(&plan, 16, r, &ex, &err), MP_OK);
        assert_int_equal(mp_schedule_build(MP_SCHED_ZBV, 4, 2, 16, r, &unit, &err), MP_OK);
        assert_int_equal(ex.n, all[r].n);
        for (int32_t i = 0; i < ex.n; i++) {
            assert_int_equal(ex.ops[i].kind, all[r].ops[i].kind);
            assert_int_equal(ex.ops[i].microbatch, all[r].ops[i].microbatch);
            assert_int_equal(ex.ops[i].chunk, all[r].ops[i].chunk);
            differs += i < unit.n && (ex.ops[i].kind != unit.ops[i].kind ||
                                      ex.ops[i].microbatch != unit.ops[i].microbatch ||
                                      ex.ops[i].chunk != unit.ops[i].chunk);
        }
        mp_op_list_free(&ex);
        mp_op_list_free(&unit);
        mp_op_list_free(&all[r]);
    }
    assert_true(differs > 0);
    mp_pipeline_cost_free(&pc);
}

/* --- Property grid: every ZB-V order is complete, keeps the dependencies,
 * keeps each rank's stash within the cap, and runs to the end in the
 * simulator. The cap is the only memory limit the callers use:
 * p * (act(r) + act(2p-1-r)) per rank r (schedule_vorder.c greedy(), the
 * closed form's 2p chunks), from each stage's act_bytes. */

/* Stage costs of one grid point: pattern pat, stage k of S = 2p. */
static void grid_cost(int pat, int32_t p, bool link, mp_pipeline_cost *pc, mp_stage_cost *st)
{
    int32_t S = 2 * p;
    uint32_t x = 2463534242u + (uint32_t)(pat * 977 + p * 131);
    for (int32_t k = 0; k < S; k++) {
        double f = 1, b = 1, w = 1, a = 1;
        switch (pat) {
        case 0: break;                          /* F:B:W 1:1:1, even */
        case 1: b = 2; w = 1; break;            /* 1:2:1 */
        case 2: b = 1.2; w = 0.8; break;        /* 1:1.2:0.8 */
        case 3:                                 /* Mixtral-like (this plan): */
            if (k == S - 1) {                   /* the head: slower, bigger stash */
                f = 1.24; b = 1.16; w = 1.16; a = 1.27;
            } else if (k == 0) {
                f = 1.04; b = 1.01; w = 1.07;
            }
            b *= 1.21; w *= 0.77;
            break;
        case 4:                                 /* heavy head and embedding */
            if (k == S - 1) { f = 3; b = 3; w = 2; a = 2; }
            if (k == 0) a = 1.5;
            break;
        case 5: a = k < p ? 2 : 1; break;       /* chunk 0 stashes twice chunk 1 */
        case 6: a = k < p ? 1 : 2; break;       /* and the reverse */
        default: {                              /* MoE-like: uneven in [0.5, 2) each */
            double u[4];
            for (int j = 0; j < 4; j++) {
                x ^= x << 13; x ^= x >> 17; x ^= x << 5;
                u[j] = 0.5 + 1.5 * (double)(x % 10000) / 10000.0;
            }
            f = u[0]; b = u[1] * 1.5; w = u[2]; a = u[3];
        } break;
        }
        st[k] = (mp_stage_cost){.fwd = f, .bwd = b + w, .bwd_input = b, .bwd_weight = w,
                                .send_bytes = link ? 0.1 : 0, .act_bytes = a};
    }
    *pc = (mp_pipeline_cost){.n_stages = S, .stages = st, .p2p_latency = 0,
                             .p2p_bw = link ? 1 : 0};
}
#define GRID_PATTERNS 9

/* Checks the lists of all p ranks for stage costs pc; "" or what is wrong. */
static const char *check_lists(int32_t p, int32_t m, const mp_pipeline_cost *pc,
                               const mp_op_list *l)
{
    int32_t S = 2 * p;
    size_t sm = (size_t)S * m;
    char *done = calloc(3 * sm, 1); /* F, B, W done per (stage, micro-batch) */
    int32_t *pos = calloc((size_t)p, sizeof *pos);
    const char *bad = "";
    assert_non_null(done);
    assert_non_null(pos);
    for (int32_t r = 0; r < p && !*bad; r++) {
        int32_t compute = 0;
        for (int32_t i = 0; i < l[r].n; i++)
            compute += l[r].ops[i].kind <= MP_OP_W;
        if (compute != 6 * m)
            bad = "a rank has not 6m F, B and W";
        double cap = p * (pc->stages[r].act_bytes + pc->stages[S - 1 - r].act_bytes),
               held = 0;
        for (int32_t i = 0; i < l[r].n && !*bad; i++) {
            const mp_op *o = &l[r].ops[i];
            if (o->kind > MP_OP_W) /* transfers: checked by the simulator's run */
                continue;
            if (o->chunk > 1 || o->microbatch < 0 || o->microbatch >= m) {
                bad = "an op out of range";
                break;
            }
            int32_t k = o->chunk ? S - 1 - r : r;
            held += (o->kind == MP_OP_F ? 1 : o->kind == MP_OP_W ? -1 : 0) *
                    pc->stages[k].act_bytes;
            if (held > cap * (1 + 1e-9))
                bad = "a rank's stash over the cap";
        }
    }
    /* run the lists: each rank's next op once its inputs are done */
    for (bool moved = true; moved && !*bad;) {
        moved = false;
        for (int32_t r = 0; r < p && !*bad; r++)
            for (; pos[r] < l[r].n; pos[r]++) {
                const mp_op *o = &l[r].ops[pos[r]];
                if (o->kind > MP_OP_W)
                    continue;
                int32_t k = o->chunk ? S - 1 - r : r, i = o->microbatch;
                size_t at = (size_t)k * m + i;
                bool ready = o->kind == MP_OP_F   ? k == 0 || done[at - m]
                             : o->kind == MP_OP_B ? done[at] && (k == S - 1 || done[sm + at + m])
                                                  : done[sm + at];
                if (!ready)
                    break;
                char *d = &done[(size_t)o->kind * sm + at];
                if (*d) {
                    bad = "an op twice";
                    break;
                }
                *d = 1;
                moved = true;
            }
    }
    for (size_t j = 0; j < 3 * sm && !*bad; j++)
        if (!done[j])
            bad = "the lists deadlock or miss an op";
    free(done);
    free(pos);
    return bad;
}

static void test_zbv_order_grid(void **state)
{
    (void)state;
    mp_stage_cost st[32];
    int orders = 0, fallbacks = 0;
    for (int32_t p = 2; p <= 16; p++) {
        const int32_t ms[] = {p, p + 1, 2 * p - 1, 2 * p, 3 * p + 1, 4 * p, 8 * p};
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++)
            for (int pat = 0; pat < GRID_PATTERNS; pat++)
                for (int link = 0; link <= 1; link++) {
                    int32_t m = ms[j];
                    mp_pipeline_cost pc;
                    grid_cost(pat, p, link, &pc, st);
                    mp_op_list l[16];
                    mp_error err;
                    mp_status rc = mp_sim_schedule(MP_SCHED_ZBV, p, 2, m, &pc, -1, l, &err);
                    if (rc != MP_OK)
                        fail_msg("p %d m %d pattern %d link %d: %s", (int)p, (int)m, pat, link,
                                 err.msg);
                    const char *bad = check_lists(p, m, &pc, l);
                    if (*bad)
                        fail_msg("p %d m %d pattern %d link %d: %s", (int)p, (int)m, pat, link,
                                 bad);
                    fallbacks += l[0].fallback;
                    for (int32_t r = 0; r < p; r++)
                        mp_op_list_free(&l[r]);
                    /* the fallback order alone, on the same costs */
                    mp_op *ops = malloc((size_t)p * 6 * m * sizeof *ops);
                    assert_non_null(ops);
                    for (int32_t r = 0; r < p; r++)
                        l[r] = (mp_op_list){.ops = ops + (size_t)r * 6 * m, .cap = 6 * m};
                    double *d = malloc((size_t)5 * 2 * p * sizeof *d);
                    assert_non_null(d);
                    for (int32_t k = 0; k < 2 * p; k++) {
                        d[k] = st[k].fwd;
                        d[2 * p + k] = st[k].bwd_input;
                        d[4 * p + k] = st[k].bwd_weight;
                        d[6 * p + k] = link ? 0.1 : 0;
                        d[8 * p + k] = st[k].act_bytes;
                    }
                    mp_op_times t = {.f = d, .b = d + 2 * p, .w = d + 4 * p, .link = d + 6 * p,
                                     .act = d + 8 * p};
                    assert_int_equal(mp_schedule_zbv_fallback_order(p, m, &t, l, &err), MP_OK);
                    bad = check_lists(p, m, &pc, l);
                    if (*bad)
                        fail_msg("fallback p %d m %d pattern %d link %d: %s", (int)p, (int)m,
                                 pat, link, bad);
                    free(ops);
                    free(d);
                    /* and the simulator runs the order to the end */
                    mp_sim_options opt = {0};
                    mp_sim_result res;
                    memset(&res, 0, sizeof res);
                    rc = mp_simulate_cost(MP_SCHED_ZBV, p, 2, m, &pc, false, &opt, &res, &err);
                    if (rc != MP_OK || !(res.pipeline_makespan > 0) ||
                        !isfinite(res.pipeline_makespan))
                        fail_msg("simulate p %d m %d pattern %d link %d: %s", (int)p, (int)m,
                                 pat, link, rc != MP_OK ? err.msg : "no makespan");
                    assert_false(res.order_fallback);
                    mp_sim_result_free(&res);
                    orders++;
                }
    }
    assert_int_equal(orders, 15 * 7 * GRID_PATTERNS * 2);
    assert_int_equal(fallbacks, 0); /* the greedy never stalls (schedule_vorder.c try_f) */
}

/* The grid point's op times (d: 10p doubles; transfers 0.1 + 0.01k). */
static mp_op_times grid_times(int pat, int32_t p, int link, double *d)
{
    mp_stage_cost st[80];
    mp_pipeline_cost pc;
    grid_cost(pat, p, link, &pc, st);
    for (int32_t k = 0; k < 2 * p; k++) {
        d[k] = st[k].fwd;
        d[2 * p + k] = st[k].bwd_input;
        d[4 * p + k] = st[k].bwd_weight;
        d[6 * p + k] = link ? 0.1 + 0.01 * k : 0;
        d[8 * p + k] = st[k].act_bytes;
    }
    /* 0.04 of each transfer latency: a DualPipeV commit's second message
     * on a link starts 0.06 + 0.01k after its first (replay) */
    return (mp_op_times){.f = d, .b = d + 2 * p, .w = d + 4 * p, .link = d + 6 * p,
                         .act = d + 8 * p, .lat = link ? 0.04 : 0};
}

/* mp_schedule_v_times (what the planner's DP windows read) against the lists
 * it stands for, built (mp_schedule_build_all_timed, transfers included) and
 * replayed (mp_schedule_v_replay), bit for bit: each rank's end (its latest
 * op), each chunk's last W and first forward. ZB-V and DualPipeV, the grid's
 * stage patterns, pp 2-12 and 40 (a rank tree with empty leaves),
 * m = p to 4p + 3; asked again (the thread's kept answer), without the kept
 * answers, and with the stall hook (the fallback order: a kept answer of the
 * greedy's must not stand for it). */
static void check_v_times(mp_schedule_kind s, int32_t p, int32_t m, int pat, int link)
{
    double d[5 * 80];
    mp_op_times t = grid_times(pat, p, link, d);
    mp_op_list l[40];
    mp_error err;
    assert_int_equal(mp_schedule_build_all_timed(s, p, 2, m, s == MP_SCHED_ZBV ? &t : NULL, l,
                                                 &err),
                     MP_OK);
    double *end[40];
    for (int32_t r = 0; r < p; r++)
        assert_non_null(end[r] = malloc(sizeof **end * (size_t)l[r].n));
    assert_int_equal(mp_schedule_v_replay(p, m, &t, l, end, &err), MP_OK);
    for (int pass = 0; pass < 3; pass++) {
        mp_schedule_v_times_keep(pass < 2); /* computed or kept, kept, computed */
        mp_v_rank_times rt[40];
        assert_int_equal(mp_schedule_v_times(s, p, m, &t, rt, &err), MP_OK);
        for (int32_t r = 0; r < p; r++) {
            double er = 0, we[2] = {-1, -1}, f0[2] = {-1, -1};
            for (int32_t i = 0; i < l[r].n; i++) {
                const mp_op *op = &l[r].ops[i];
                er = fmax(er, end[r][i]);
                if (op->kind == MP_OP_W)
                    we[op->chunk] = end[r][i];
                if (op->kind == MP_OP_F && op->microbatch == 0)
                    f0[op->chunk] = end[r][i];
            }
            if (er != rt[r].end || we[0] != rt[r].w_end[0] || we[1] != rt[r].w_end[1] ||
                f0[0] != rt[r].f0_end[0] || f0[1] != rt[r].f0_end[1])
                fail_msg("%s p %d m %d pattern %d link %d pass %d rank %d: end %.17g/%.17g, "
                         "W %.17g/%.17g %.17g/%.17g, F0 %.17g/%.17g %.17g/%.17g",
                         mp_schedule_name(s), (int)p, (int)m, pat, link, pass, (int)r, er,
                         rt[r].end, we[0], rt[r].w_end[0], we[1], rt[r].w_end[1], f0[0],
                         rt[r].f0_end[0], f0[1], rt[r].f0_end[1]);
        }
    }
    mp_schedule_v_times_keep(true);
    for (int32_t r = 0; r < p; r++) {
        mp_op_list_free(&l[r]);
        free(end[r]);
    }
}

/* mp_schedule_v_windows for DualPipeV, which may replay fewer micro-batches
 * (*used) than m, gives the windows the planner reads (each rank's end less
 * its chunks' last Ws, the chunks' first forwards, rank 0's end less the
 * rank's) that mp_schedule_v_times, the replay of all m, gives, to 1e-9 of
 * the step; m from 2p to 8p one by one, then 16p, 33p and 64p, pp 2-16,
 * the grid's stage patterns with and without transfers. The rule it
 * replaces (the first 2p micro-batches stand for any m) missed some:
 * counted, so that this test would fail on it; and the cut must be taken
 * on most plans past 6p (else it saves nothing). */
static void dpv_windows(const mp_v_rank_times *rt, int32_t p, double *w)
{
    for (int32_t r = 0; r < p; r++) {
        for (int c = 0; c < 2; c++) {
            w[5 * r + c] = rt[r].end - rt[r].w_end[c];
            w[5 * r + 2 + c] = rt[r].f0_end[c];
        }
        w[5 * r + 4] = rt[0].end - rt[r].end;
    }
}

static void test_dpv_windows_are_exact(void **state)
{
    (void)state;
    const int32_t ps[] = {2, 3, 4, 5, 8, 16};
    int cut = 0, missed_2p = 0, checked = 0, past = 0;
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (int pat = 0; pat < GRID_PATTERNS; pat++)
            for (int link = 0; link <= 1; link++) {
                int32_t p = ps[i];
                double d[5 * 32];
                mp_op_times t = grid_times(pat, p, link, d);
                double at2p[80], work = 0;
                for (int32_t k = 0; k < 6 * p; k++)
                    work += d[k];
                mp_v_rank_times rt[16];
                mp_error err;
                assert_int_equal(mp_schedule_v_times(MP_SCHED_DUALPIPEV, p, 2 * p, &t, rt, &err),
                                 MP_OK);
                dpv_windows(rt, p, at2p);
                int32_t ms[6 * 16 + 1 + 3], n = 0; /* 2p..8p and three more, p up to 16 */
                for (int32_t m = 2 * p; m <= 8 * p; m++)
                    ms[n++] = m;
                ms[n++] = 16 * p;
                ms[n++] = 33 * p;
                ms[n++] = 64 * p;
                for (int32_t j = 0; j < n; j++) {
                    int32_t m = ms[j], used;
                    double full[80], cutw[80], tol = 1e-9 * work * m / p; /* of the step */
                    assert_int_equal(mp_schedule_v_times(MP_SCHED_DUALPIPEV, p, m, &t, rt, &err),
                                     MP_OK);
                    dpv_windows(rt, p, full);
                    assert_int_equal(mp_schedule_v_windows(MP_SCHED_DUALPIPEV, p, m, &t, rt, &used,
                                                           &err),
                                     MP_OK);
                    assert_true(used >= 6 * p || used == m);
                    assert_true(used <= m);
                    dpv_windows(rt, p, cutw);
                    bool off_2p = false;
                    for (int32_t k = 0; k < 5 * p; k++) {
                        if (fabs(cutw[k] - full[k]) > tol)
                            fail_msg("dualpipev p %d m %d pattern %d link %d: window %d is "
                                     "%.17g replaying %d, %.17g replaying all",
                                     (int)p, (int)m, pat, link, (int)k, cutw[k], (int)used,
                                     full[k]);
                        off_2p = off_2p || fabs(at2p[k] - full[k]) > tol;
                    }
                    cut += used < m;
                    past += m > 6 * p;
                    missed_2p += off_2p;
                    checked++;
                }
            }
    assert_true(missed_2p > 0);
    if (getenv("MP_PRINT_DPV"))
        printf("%d plans, %d past 6p, %d cut, %d missed by 2p\n", checked, past, cut, missed_2p);
    assert_true(cut > past / 2);
}

static void test_v_times_match_replay(void **state)
{
    (void)state;
    int32_t ps[] = {2, 3, 4, 5, 8, 12, 40};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        int32_t p = ps[i];
        const int32_t ms[] = {p, p + 1, 2 * p, 3 * p + 1, 4 * p, 4 * p + 3};
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++)
            for (int pat = 0; pat < GRID_PATTERNS; pat++)
                for (int link = 0; link <= 1; link++) {
                    if (p == 40 && (j > 1 || pat % 3))
                        continue; /* pp 40: a few */
                    check_v_times(MP_SCHED_ZBV, p, ms[j], pat, link);
                    if (ms[j] >= 2 * p)
                        check_v_times(MP_SCHED_DUALPIPEV, p, ms[j], pat, link);
                }
    }
    /* the stall hook: the fallback order's times, not the greedy's kept ones */
    mp_schedule_zbv_test_stall(true);
    check_v_times(MP_SCHED_ZBV, 4, 16, 3, 1);
    mp_schedule_zbv_test_stall(false);
    check_v_times(MP_SCHED_ZBV, 4, 16, 3, 1);
}

/* The estimate's replay posts a DualPipeV commit's sends together, as the
 * simulator does (sim/engine.c end_commit; test_engine.c
 * test_dualpipev_commit_two_peers works the same case by hand): p = 3,
 * m = 6, F = B = W = 1, every transfer h = 0.25 (0.05 of it latency). Rank
 * 1's commit {sf0.1 to rank 0, sf2.0 to rank 2} is posted at 5 + 4h = 6,
 * both land at 6.25, and its F3.0 runs [6.25, 7.25]; sent one after the
 * other (the replay before) it ran [6.5, 7.5]. The lists' replay and the
 * compute-only one (mp_schedule_v_times) agree. */
static void test_dualpipev_replay_commit(void **state)
{
    (void)state;
    const int32_t p = 3, m = 6;
    double d[5 * 6];
    for (int32_t k = 0; k < 2 * p; k++) {
        d[k] = d[6 + k] = d[12 + k] = 1;
        d[18 + k] = 0.25;
        d[24 + k] = 1;
    }
    mp_op_times t = {.f = d, .b = d + 6, .w = d + 12, .link = d + 18, .act = d + 24,
                     .lat = 0.05};
    mp_op_list l[3];
    mp_error err;
    assert_int_equal(mp_schedule_build_all(MP_SCHED_DUALPIPEV, p, 2, m, l, &err), MP_OK);
    double *end[3];
    for (int32_t r = 0; r < p; r++)
        assert_non_null(end[r] = malloc(sizeof **end * (size_t)l[r].n));
    assert_int_equal(mp_schedule_v_replay(p, m, &t, l, end, &err), MP_OK);
    int found = 0;
    for (int32_t i = 0; i < l[1].n; i++) {
        const mp_op *op = &l[1].ops[i];
        if (op->kind == MP_OP_F && op->microbatch == 3 && op->chunk == 0) {
            if (fabs(end[1][i] - 7.25) > 1e-12)
                fail_msg("rank 1's F3.0 ends at %.17g, want 7.25", end[1][i]);
            found++;
        }
    }
    assert_int_equal(found, 1);
    mp_v_rank_times rt[3];
    assert_int_equal(mp_schedule_v_times(MP_SCHED_DUALPIPEV, p, m, &t, rt, &err), MP_OK);
    for (int32_t r = 0; r < p; r++) {
        double er = 0;
        for (int32_t i = 0; i < l[r].n; i++)
            er = fmax(er, end[r][i]);
        assert_true(er == rt[r].end);
        mp_op_list_free(&l[r]);
        free(end[r]);
    }
}

/* The estimate's DP windows come from that replay; the simulator runs the
 * same lists. With the replay's op times taken from the simulator's stage
 * costs (sim/plan_order.c's layout: F, B, W, transfer = latency + bytes over
 * bandwidth, its latency part), the two give the same pipeline, each rank
 * ending where the other ends it: DualPipeV and ZB-V, p 2-5, m 2p, 2p + 1
 * and 3p + 1, the grid's stage patterns with transfers of 0.1 s on the wire
 * and 0.03 s latency. */
static void test_replay_matches_engine(void **state)
{
    (void)state;
    int checked = 0;
    for (int32_t p = 2; p <= 5; p++)
        for (int q = 0; q < 3; q++)
            for (int pat = 0; pat < GRID_PATTERNS; pat++)
                for (int s = 0; s < 2; s++) {
                    mp_schedule_kind kind = s ? MP_SCHED_ZBV : MP_SCHED_DUALPIPEV;
                    int32_t m = q == 0 ? 2 * p : q == 1 ? 2 * p + 1 : 3 * p + 1;
                    mp_stage_cost st[10];
                    mp_pipeline_cost pc;
                    grid_cost(pat, p, true, &pc, st);
                    pc.p2p_latency = 0.03;
                    double d[5 * 10];
                    for (int32_t k = 0; k < 2 * p; k++) {
                        d[k] = st[k].fwd;
                        d[2 * p + k] = st[k].bwd_input;
                        d[4 * p + k] = st[k].bwd_weight;
                        d[6 * p + k] = pc.p2p_latency + st[k].send_bytes / pc.p2p_bw;
                        d[8 * p + k] = st[k].act_bytes;
                    }
                    mp_op_times t = {.f = d, .b = d + 2 * p, .w = d + 4 * p,
                                     .link = d + 6 * p, .act = d + 8 * p,
                                     .lat = pc.p2p_latency};
                    mp_v_rank_times rt[5];
                    mp_error err;
                    assert_int_equal(mp_schedule_v_times(kind, p, m, &t, rt, &err), MP_OK);
                    mp_sim_options opt = {.record_timeline = true};
                    mp_sim_result res;
                    assert_int_equal(mp_simulate_cost(kind, p, 2, m, &pc, false, &opt, &res,
                                                      &err),
                                     MP_OK);
                    /* each rank's last compute op ends where the replay's
                     * rank is free (its last op a W, after its last send) */
                    double last[5] = {0};
                    for (size_t i = 0; i < res.timeline.n; i++) {
                        const mp_event *e = &res.timeline.events[i];
                        if (e->stream == MP_STREAM_COMPUTE && e->end > last[e->rank])
                            last[e->rank] = e->end;
                    }
                    for (int32_t r = 0; r < p; r++)
                        if (fabs(last[r] - rt[r].end) > 1e-9 * res.pipeline_makespan)
                            fail_msg("%s p %d m %d pattern %d rank %d: simulated end %.12g, "
                                     "replayed %.12g",
                                     mp_schedule_name(kind), (int)p, (int)m, pat, (int)r,
                                     last[r], rt[r].end);
                    mp_sim_result_free(&res);
                    checked++;
                }
    assert_int_equal(checked, 4 * 3 * GRID_PATTERNS * 2);
}

/* Mixtral 8x7B on 64 H100, tp 2 sp, pp 8 (zb-v, two chunks), ep 8, etp 1,
 * 32 micro-batches, selective recompute: the plan whose greedy order once stalled */
static mp_config mixtral_pp8_zbv(void)
{
    mp_config c;
    memset(&c, 0, sizeof c);
    const mp_model *md = mp_model_preset("mixtral-8x7b");
    assert_non_null(md);
    c.model = *md;
    mp_error err;
    assert_int_equal(mp_hw_preset("dgx-h100", &c.hw, &err), MP_OK);
    c.training = (mp_training){.gpus = 64, .seq = md->seq, .global_batch = 128,
                               .precision = MP_DTYPE_BF16};
    c.parallel = (mp_parallel){.tp = 2, .pp = 8, .vpp = 2, .cp = 1, .dp = 4, .sp = true,
                               .micro_batch = 1, .recompute = MP_RECOMPUTE_SELECTIVE,
                               .schedule = MP_SCHED_ZBV, .ep = 8, .etp = 1};
    return c;
}

/* The plan of the issue: Mixtral 8x7B on 64 H100, tp 2 sp, pp 8 (zb-v, two
 * chunks), ep 8, etp 1, 32 micro-batches, selective recompute. Its greedy
 * order stalled ("zb-v order stalled (p=8 m=32)"); now the simulation runs
 * and what the executor asks for rank by rank is the same order. */
static void test_mixtral_pp8_order(void **state)
{
    (void)state;
    mp_config c = mixtral_pp8_zbv();
    mp_error err;
    mp_sim_options opt = {0};
    mp_sim_result r;
    memset(&r, 0, sizeof r);
    if (mp_simulate(&c, NULL, &opt, &r, &err) != MP_OK)
        fail_msg("mixtral zb-v: %s", err.msg);
    assert_int_equal(r.microbatches, 32);
    assert_false(r.order_fallback);
    mp_sim_result_free(&r);
    mp_pipeline_cost pc = {0};
    assert_int_equal(mp_pipeline_cost_build(&c, NULL, &pc, &err), MP_OK);
    mp_op_list all[8];
    assert_int_equal(mp_sim_schedule(MP_SCHED_ZBV, 8, 2, 32, &pc, -1, all, &err), MP_OK);
    const char *bad = check_lists(8, 32, &pc, all);
    if (*bad)
        fail_msg("mixtral zb-v: %s", bad);
    mp_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.config = c;
    for (int32_t k = 0; k < 8; k++) {
        mp_op_list ex;
        assert_int_equal(mp_sim_plan_schedule(&plan, 32, k, &ex, &err), MP_OK);
        assert_int_equal(ex.n, all[k].n);
        for (int32_t i = 0; i < ex.n; i++)
            assert_true(ex.ops[i].kind == all[k].ops[i].kind &&
                        ex.ops[i].microbatch == all[k].ops[i].microbatch &&
                        ex.ops[i].chunk == all[k].ops[i].chunk);
        mp_op_list_free(&ex);
        mp_op_list_free(&all[k]);
    }
    mp_pipeline_cost_free(&pc);
}

/* The test hook mp_schedule_zbv_test_stall: the order is the fallback one
 * and says so, in the simulation and in what the executor asks for (exec
 * reports it: tests/exec's exec-zbv-fallback-reported runs it through the
 * executor); off again, the greedy order comes back. */
static void test_stall_hook_gives_the_fallback(void **state)
{
    (void)state;
    mp_config c = mixtral_pp8_zbv();
    mp_error err;
    mp_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.config = c;
    for (int on = 1; on >= 0; on--) {
        mp_schedule_zbv_test_stall(on);
        mp_sim_options opt = {0};
        mp_sim_result r;
        memset(&r, 0, sizeof r);
        if (mp_simulate(&c, NULL, &opt, &r, &err) != MP_OK)
            fail_msg("mixtral zb-v, stall %d: %s", on, err.msg);
        assert_int_equal(r.order_fallback, on);
        assert_true(r.makespan > 0);
        mp_sim_result_free(&r);
        mp_op_list ex;
        assert_int_equal(mp_sim_plan_schedule(&plan, 32, 3, &ex, &err), MP_OK);
        assert_int_equal(ex.fallback, on);
        mp_op_list_free(&ex);
        /* the unit-time order too */
        mp_op_list u;
        assert_int_equal(mp_schedule_build(MP_SCHED_ZBV, 8, 2, 32, 0, &u, &err), MP_OK);
        assert_int_equal(u.fallback, on);
        mp_op_list_free(&u);
    }
}

static void print_rows(void)
{
    static const mp_schedule_kind kinds[] = {MP_SCHED_1F1B, MP_SCHED_ZBH1, MP_SCHED_ZBV};
    printf("| model | pp | m | 1f1b bubble | zb-h1 bubble | zb-v bubble (closed form) | zb-v "
           "simulated vs closed form | zb-v peak vs estimate |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++) {
                row x[3];
                bool ok = true;
                for (int s = 0; s < 3 && ok; s++)
                    ok = measure(models[i], pps[j], ms[k], kinds[s], &x[s]);
                if (!ok)
                    continue;
                printf("| %s | %lld | %lld | %.1f%% | %.1f%% | %.1f%% (%.1f%%) | %+.1f%% | "
                       "%+.1f%% |\n",
                       models[i], (long long)pps[j], (long long)ms[k], 100 * x[0].bubble,
                       100 * x[1].bubble, 100 * x[2].bubble, 100 * x[2].closed_bubble,
                       100 * (x[2].sim / x[2].closed - 1),
                       100 * (x[2].peak / x[2].closed_peak - 1));
            }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--rows")) {
        print_rows();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zbv_within_closed_form),
        cmocka_unit_test(test_zbv_uneven_v_split),
        cmocka_unit_test(test_zbv_real_plans),
        cmocka_unit_test(test_dualpipev_within_closed_form),
        cmocka_unit_test(test_exec_gets_the_simulated_order),
        cmocka_unit_test(test_zbv_order_grid),
        cmocka_unit_test(test_mixtral_pp8_order),
        cmocka_unit_test(test_stall_hook_gives_the_fallback),
        cmocka_unit_test(test_v_times_match_replay),
        cmocka_unit_test(test_dpv_windows_are_exact),
        cmocka_unit_test(test_dualpipev_replay_commit),
        cmocka_unit_test(test_replay_matches_engine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
