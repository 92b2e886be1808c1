/* test_split.c — the stage split: GLPK and the dynamic program against the
 * exhaustive search on many random small instances, and the uneven split
 * winning when the head makes the last stage heavy; under interleaving, the
 * bracket's incumbent taking a block to a rank with room to spare. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "planner/split.h"
#include "planner/split_internal.h"

static uint64_t rng_state = 88172645463325252ull;
static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static int irand(int lo, int hi) { return lo + (int)(urand() * (hi - lo + 1)); }

/* A random item whose recompute choices trade time for memory like real ones. */
static mp_split_item random_item(void)
{
    mp_split_item it = {0};
    double f = 0.5 + urand(), act = 1 + 4 * urand();
    it.time[MP_RECOMPUTE_NONE] = 3 * f;
    it.time[MP_RECOMPUTE_SELECTIVE] = 3 * f * (1 + 0.2 * urand());
    it.time[MP_RECOMPUTE_FULL] = 4 * f;
    it.act[MP_RECOMPUTE_NONE] = act;
    it.act[MP_RECOMPUTE_SELECTIVE] = act * (0.3 + 0.4 * urand());
    it.act[MP_RECOMPUTE_FULL] = act * 0.1;
    it.static_bytes = 1 + 3 * urand();
    for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) it.allowed[c] = urand() < 0.8;
    if (!it.allowed[0] && !it.allowed[1] && !it.allowed[2]) it.allowed[irand(0, 2)] = true;
    return it;
}

typedef struct instance {
    mp_split_item items[64];
    double inflight[MP_MAX_STAGES];
    double held[MP_MAX_STAGES];     /* a split backward's Ws waiting, per stage */
    double rank_f[MP_MAX_STAGES];   /* each rank's budget over pr.budget */
    double rank_budget[MP_MAX_STAGES];
    mp_split_problem pr;
} instance;

/* Half the instances get per-rank budgets (as the search's: the capacity
 * less each rank's own fixed bytes) from pr.budget. */
static void set_rank_budgets(instance *in)
{
    if (!in->pr.rank_budget) return;
    for (int q = 0; q < in->pr.pp; q++) in->rank_budget[q] = in->pr.budget * in->rank_f[q];
}

static void random_instance(instance *in, int n_items, int pp, int vpp, bool runs)
{
    for (int i = 0; i < n_items; i++) {
        if (runs && i > 1 && i < n_items - 1)
            in->items[i] = in->items[1]; /* GPT-like: identical blocks */
        else
            in->items[i] = random_item();
    }
    mp_schedule_kind s = vpp > 1 ? MP_SCHED_INTERLEAVED : (mp_schedule_kind)irand(0, 3);
    if (s == MP_SCHED_INTERLEAVED && vpp == 1) s = MP_SCHED_1F1B;
    int64_t m = vpp > 1 ? pp * irand(1, 3) : irand(1, 6);
    mp_split_inflight(s, pp, vpp, m, in->inflight);
    double total = 0;
    for (int i = 0; i < n_items; i++) total += in->items[i].static_bytes + 3 * in->items[i].act[0];
    in->pr = (mp_split_problem){.n_items = n_items, .items = in->items, .pp = pp, .vpp = vpp,
                                .inflight = in->inflight,
                                .budget = total / pp * (0.4 + 1.2 * urand()),
                                .work_limit = 1000000};
    /* half of them: held Ws (ZB-H1's output gradients) and per-rank budgets */
    if (urand() < 0.5) {
        for (int i = 0; i < n_items; i++)
            in->items[i].hold_bytes = runs && i > 1 && i < n_items - 1 ? in->items[1].hold_bytes
                                                                     : 0.5 * urand();
        for (int k = 0; k < pp * vpp; k++) in->held[k] = irand(0, 3);
        in->pr.held = in->held;
    }
    if (urand() < 0.5) {
        for (int q = 0; q < pp; q++) in->rank_f[q] = 0.8 + 0.4 * urand();
        in->pr.rank_budget = in->rank_budget;
        set_rank_budgets(in);
    }
}

typedef struct answer {
    mp_stage_range stages[MP_MAX_STAGES];
    uint8_t rc[64];
    mp_split_solution sol;
} answer;

static void solve(mp_status (*fn)(const mp_split_problem *, mp_split_solution *, mp_error *),
                  const mp_split_problem *pr, answer *a)
{
    mp_error err;
    mp_error_clear(&err);
    a->sol = (mp_split_solution){.stages = a->stages, .recompute = a->rc};
    assert_int_equal(fn(pr, &a->sol, &err), MP_OK);
    if (a->sol.feasible) {
        bool fits;
        double t = mp_split_evaluate(pr, a->stages, a->rc, &fits);
        assert_true(fits);
        assert_true(fabs(t - a->sol.max_stage_time) <= 1e-9 * t);
    }
}

static void assert_same(const answer *x, const answer *y)
{
    assert_int_equal(x->sol.feasible, y->sol.feasible);
    if (x->sol.feasible)
        assert_true(fabs(x->sol.max_stage_time - y->sol.max_stage_time) <=
                    1e-9 * x->sol.max_stage_time);
}

static void test_glpk_equals_exhaustive(void **state)
{
    (void)state;
    if (!mp_split_have_glpk()) skip();
    int feasible = 0, infeasible = 0;
    for (int trial = 0; trial < 300; trial++) {
        instance in;
        int n = irand(3, 7);
        int pp = irand(1, n < 4 ? n : 4);
        int vpp = pp * 2 <= n && urand() < 0.4 ? 2 : 1;
        random_instance(&in, n, pp, vpp, urand() < 0.3);
        answer a, b;
        solve(mp_split_solve_brute, &in.pr, &a);
        solve(mp_split_solve_glpk, &in.pr, &b);
        assert_same(&a, &b);
        if (b.sol.feasible) assert_true(b.sol.gap <= 1e-9);
        a.sol.feasible ? feasible++ : infeasible++;
    }
    /* the generator exercises both outcomes */
    assert_true(feasible > 50);
    assert_true(infeasible > 10);
}

static void test_dp_equals_exhaustive(void **state)
{
    (void)state;
    for (int trial = 0; trial < 300; trial++) {
        instance in;
        int n = irand(2, 8);
        random_instance(&in, n, irand(1, n < 4 ? n : 4), 1, urand() < 0.3);
        answer a, b;
        solve(mp_split_solve_brute, &in.pr, &a);
        solve(mp_split_solve_dp, &in.pr, &b);
        assert_same(&a, &b);
    }
}

/* Small whole numbers make many partial sums equal in bytes or in time: the
 * DP's merged Pareto fronts must resolve such ties as a full sort would. */
static void test_dp_equals_exhaustive_with_ties(void **state)
{
    (void)state;
    for (int trial = 0; trial < 300; trial++) {
        instance in;
        int n = irand(2, 8);
        random_instance(&in, n, irand(1, n < 4 ? n : 4), 1, urand() < 0.3);
        for (int i = 0; i < n; i++) {
            mp_split_item *it = &in.items[i];
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
                it->act[c] = irand(0, 3);
                it->time[c] = irand(1, 4);
            }
            it->static_bytes = irand(1, 2);
        }
        double total = 0;
        for (int i = 0; i < n; i++) total += in.items[i].static_bytes + 3 * in.items[i].act[0];
        in.pr.budget = total / in.pr.pp * (0.4 + 1.2 * urand());
        set_rank_budgets(&in);
        answer a, b;
        solve(mp_split_solve_brute, &in.pr, &a);
        solve(mp_split_solve_dp, &in.pr, &b);
        assert_same(&a, &b);
    }
}

/* The dispatcher (DP bracket, then GLPK when the bracket is open) is exact too,
 * interleaved instances included. */
static void test_solve_equals_exhaustive(void **state)
{
    (void)state;
    int gaps = 0;
    for (int trial = 0; trial < 300; trial++) {
        instance in;
        int n = irand(4, 8);
        int pp = irand(1, n / 2 < 3 ? n / 2 : 3);
        random_instance(&in, n, pp, 2, urand() < 0.3);
        answer a, b;
        solve(mp_split_solve_brute, &in.pr, &a);
        solve(mp_split_solve, &in.pr, &b);
        if (mp_split_have_glpk()) {
            assert_same(&a, &b);
        } else if (b.sol.feasible) {
            /* without GLPK: a fitting split, and an honest gap */
            assert_true(a.sol.feasible);
            assert_true(b.sol.max_stage_time >= a.sol.max_stage_time * (1 - 1e-12));
            assert_true(b.sol.bound <= a.sol.max_stage_time * (1 + 1e-12));
        }
        if (b.sol.feasible && b.sol.gap > 0) gaps++;
    }
    if (mp_split_have_glpk()) assert_int_equal(gaps, 0);
}

/* Larger GPT-like instances (runs of identical blocks): GLPK and the DP agree. */
static void test_glpk_equals_dp_on_runs(void **state)
{
    (void)state;
    if (!mp_split_have_glpk()) skip();
    for (int trial = 0; trial < 30; trial++) {
        instance in;
        int pp = irand(2, 4);
        random_instance(&in, 2 + pp * irand(1, 4) + irand(0, 3), pp, 1, true);
        answer a, b;
        solve(mp_split_solve_dp, &in.pr, &a);
        solve(mp_split_solve_glpk, &in.pr, &b);
        assert_same(&a, &b);
    }
}

/* n items without recompute: an embedding of 0.2 s, blocks of 1 s and 1
 * byte, a head of 3 s; act bytes in flight each, ends_bytes static on the
 * embedding and the head. */
static void heavy_head_items(instance *in, int n, double act, double ends_bytes)
{
    memset(in, 0, sizeof *in);
    for (int i = 0; i < n; i++) {
        mp_split_item *it = &in->items[i];
        double t = i == 0 ? 0.2 : i == n - 1 ? 3 : 1;
        for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
            it->time[c] = t;
            it->act[c] = act;
        }
        it->allowed[MP_RECOMPUTE_NONE] = true;
        it->static_bytes = i == 0 || i == n - 1 ? ends_bytes : 1;
    }
}

/* 16 blocks on 4 stages with a head as slow as 3 blocks: Megatron's even split
 * (4 blocks per stage, the head on the last) is slower than moving blocks off
 * the last stage. */
static void test_heavy_head_goes_uneven(void **state)
{
    (void)state;
    instance in;
    int n = 18;
    heavy_head_items(&in, n, 1, 1);
    mp_split_inflight(MP_SCHED_1F1B, 4, 1, 8, in.inflight);
    in.pr = (mp_split_problem){.n_items = n, .items = in.items, .pp = 4, .vpp = 1,
                               .inflight = in.inflight, .budget = 1e9};
    mp_stage_range even[4];
    uint8_t rc[18] = {0};
    assert_true(mp_split_even(n, 4, even));
    double even_time = mp_split_evaluate(&in.pr, even, rc, NULL);
    assert_true(fabs(even_time - 7) < 1e-12); /* 4 blocks + head */
    answer a;
    solve(mp_split_solve, &in.pr, &a);
    assert_true(a.sol.feasible);
    /* 19.2 units over 4 stages: 5 | 5 | 5 | 1 block + head = 4 -> slowest 5.2 (emb + 5) */
    assert_true(a.sol.max_stage_time < even_time - 1.5);
    assert_true(a.stages[3].end - a.stages[3].begin < 5);
}

/* Memory decides the recompute choice: with little room the solver must
 * recompute, with plenty it must not. */
static void test_memory_forces_recompute(void **state)
{
    (void)state;
    instance in;
    memset(&in, 0, sizeof in);
    int n = 6;
    for (int i = 0; i < n; i++) {
        mp_split_item *it = &in.items[i];
        it->time[0] = 3; it->time[1] = 3.2; it->time[2] = 4;
        it->act[0] = 10; it->act[1] = 4; it->act[2] = 1;
        for (int c = 0; c < 3; c++) it->allowed[c] = true;
    }
    mp_split_inflight(MP_SCHED_1F1B, 2, 1, 4, in.inflight); /* 2 and 1 in flight */
    in.pr = (mp_split_problem){.n_items = n, .items = in.items, .pp = 2, .vpp = 1,
                               .inflight = in.inflight, .budget = 1000};
    answer a;
    solve(mp_split_solve, &in.pr, &a);
    assert_true(fabs(a.sol.max_stage_time - 9) < 1e-12);
    for (int i = 0; i < n; i++) assert_int_equal(a.rc[i], MP_RECOMPUTE_NONE);
    in.pr.budget = 3 * 2 * 4; /* rank 0: 3 items x 2 in flight must fit in 24 */
    solve(mp_split_solve, &in.pr, &a);
    assert_true(a.sol.feasible);
    /* 3 | 3 with stage 0 all selective (12 of 12 bytes per micro-batch) */
    assert_true(fabs(a.sol.max_stage_time - 9.6) < 1e-12);
    assert_int_equal(a.rc[0], MP_RECOMPUTE_SELECTIVE);
    in.pr.budget = 1; /* nothing fits */
    solve(mp_split_solve, &in.pr, &a);
    assert_false(a.sol.feasible);
}

/* Interleaving, the restriction too tight: pp 2, vpp 2, 8 blocks of 1 s and
 * 1 byte, a head of 3 s. Each stage within half its rank's room (rank 0: 5
 * bytes, rank 1: 4) allows 2 blocks: the even split, 2 blocks + head = 5 s.
 * Rank 0 holds a third block in its second stage (5 bytes), leaving the last
 * stage 1 block + head = 4 s: mp_split_polish, which the bracket's incumbent
 * goes through, must find that move, fitting, the busiest rank no busier. */
static void test_polish_uses_rank_room(void **state)
{
    (void)state;
    instance in;
    int n = 10;
    heavy_head_items(&in, n, 0, 0);
    for (int k = 0; k < 4; k++) in.inflight[k] = 1;
    double budget[2] = {5, 4};
    in.pr = (mp_split_problem){.n_items = n, .items = in.items, .pp = 2, .vpp = 2,
                               .inflight = in.inflight, .rank_budget = budget};
    mp_stage_range st[4];
    uint8_t rc[10] = {0};
    mp_split_solution sol = {.stages = st, .recompute = rc};
    mp_error err = {0};
    assert_int_equal(mp_split_even_best(&in.pr, &sol, &err), MP_OK);
    assert_true(sol.feasible);
    assert_true(fabs(sol.max_stage_time - 5) < 1e-12);
    assert_int_equal(mp_split_polish(&in.pr, &sol, &err), MP_OK);
    assert_true(fabs(sol.max_stage_time - 4) < 1e-12);
    bool fits = false;
    double t = mp_split_evaluate(&in.pr, sol.stages, sol.recompute, &fits);
    assert_true(fits);
    assert_true(fabs(t - 4) < 1e-12);
    assert_int_equal(sol.stages[2].end - sol.stages[2].begin, 3);
    assert_int_equal(sol.stages[3].end - sol.stages[3].begin, 2);
    /* rank sums: 5.2 and 6 s (the even split's 4.2 and 7) */
    double r1 = 0;
    for (int k = 1; k < 4; k += 2)
        for (int i = sol.stages[k].begin; i < sol.stages[k].end; i++) r1 += in.items[i].time[0];
    assert_true(fabs(r1 - 6) < 1e-12);
}

/* n identical items, each choice trading time for bytes. */
static void uniform_items(mp_split_item *items, int n)
{
    for (int i = 0; i < n; i++) {
        mp_split_item *it = &items[i];
        it->time[0] = 1.0, it->time[1] = 1.1, it->time[2] = 1.4;
        it->act[0] = 10, it->act[1] = 4, it->act[2] = 1;
        it->static_bytes = 1;
        it->allowed[0] = it->allowed[1] = it->allowed[2] = true;
    }
}

/* Interleaving with room for everything (130 items: GPT-3 175B's scale of
 * blocks, 3 choices each; pp 4, vpp 8): unbounded, the relaxation's and the
 * restriction's segments would run to the whole model and their DP out of
 * work (no bound, the bracket open). Capped by the even split in hand, the
 * bracket is known and closes at the even split's 4 blocks + head. */
static void test_interleaved_bracket_within_work(void **state)
{
    (void)state;
    enum { N = 130 };
    mp_split_item *items = calloc(N, sizeof *items);
    assert_non_null(items);
    uniform_items(items, N);
    items[0].time[0] = 0.1;
    items[N - 1].time[0] = 0.9;
    items[0].allowed[1] = items[0].allowed[2] = false;
    items[N - 1].allowed[1] = items[N - 1].allowed[2] = false;
    double inflight[32];
    mp_split_inflight(MP_SCHED_INTERLEAVED, 4, 8, 8, inflight);
    mp_split_problem pr = {.n_items = N, .items = items, .pp = 4, .vpp = 8,
                           .inflight = inflight, .budget = 1e18};
    mp_stage_range stages[32];
    uint8_t rc[N];
    mp_split_solution inc = {.stages = stages, .recompute = rc};
    mp_error err;
    double lower = 0;
    assert_int_equal(mp_split_bounds(&pr, &inc, &lower, &err), MP_OK);
    assert_true(inc.feasible);
    assert_true(fabs(inc.max_stage_time - 4.9) < 1e-9);
    assert_true(fabs(lower - 4.9) < 1e-9);
    free(items);
}

static void test_inflight(void **state)
{
    (void)state;
    double f[16];
    mp_split_inflight(MP_SCHED_1F1B, 4, 1, 8, f);
    assert_true(f[0] == 4 && f[1] == 3 && f[2] == 2 && f[3] == 1);
    mp_split_inflight(MP_SCHED_1F1B, 4, 1, 2, f);
    assert_true(f[0] == 2 && f[3] == 1);
    mp_split_inflight(MP_SCHED_GPIPE, 4, 1, 8, f);
    assert_true(f[0] == 8 && f[3] == 8);
    /* interleaved p=4 v=2 m=8: rank 0 holds 2*3 + 4 + 1 = 11 = L*(1+(p-1)/(pv)) worth */
    mp_split_inflight(MP_SCHED_INTERLEAVED, 4, 2, 8, f);
    assert_true(f[0] + f[4] == 11);
    assert_true(f[3] + f[7] == 5);
}

/* A 2048-layer model with room for everything: every segment is a candidate
 * and the fronts grow with their length, so the DP would run for minutes.
 * It gives up within its work budget instead (unsolved: the caller keeps the
 * even split) -- and a real model's instance is still solved exactly. */
static void test_dp_work_is_bounded(void **state)
{
    (void)state;
    enum { N = 2050 };
    mp_split_item *items = calloc(N, sizeof *items);
    assert_non_null(items);
    uniform_items(items, N);
    double inflight[8];
    mp_split_inflight(MP_SCHED_1F1B, 4, 1, 8, inflight);
    mp_split_problem pr = {.n_items = N, .items = items, .pp = 4, .vpp = 1,
                           .inflight = inflight, .budget = 1e18};
    mp_stage_range stages[8];
    uint8_t *rc = malloc(N);
    assert_non_null(rc);
    mp_split_solution sol = {.stages = stages, .recompute = rc};
    mp_error err;
    assert_int_equal(mp_split_solve(&pr, &sol, &err), MP_OK);
    assert_true(sol.unsolved);
    assert_false(sol.feasible);
    /* 98 items (GPT-3 175B's 96 layers) on 4 stages, room for everything:
     * solved, and by the DP */
    pr.n_items = 98;
    mp_split_solution small = {.stages = stages, .recompute = rc};
    assert_int_equal(mp_split_solve(&pr, &small, &err), MP_OK);
    assert_false(small.unsolved);
    assert_true(small.feasible);
    assert_string_equal(small.method, "dp");
    free(rc);
    free(items);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inflight),
        cmocka_unit_test(test_dp_equals_exhaustive),
        cmocka_unit_test(test_dp_equals_exhaustive_with_ties),
        cmocka_unit_test(test_glpk_equals_exhaustive),
        cmocka_unit_test(test_glpk_equals_dp_on_runs),
        cmocka_unit_test(test_solve_equals_exhaustive),
        cmocka_unit_test(test_heavy_head_goes_uneven),
        cmocka_unit_test(test_memory_forces_recompute),
        cmocka_unit_test(test_polish_uses_rank_room),
        cmocka_unit_test(test_dp_work_is_bounded),
        cmocka_unit_test(test_interleaved_bracket_within_work),
    };
    if (getenv("TEST_FILTER")) cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
