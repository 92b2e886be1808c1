/* split.c — the stage split and per-item recompute (split.h): the helpers
 * every solver shares, and the dispatcher. */
#include "planner/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "megaplan_config.h"
#include "planner/split_internal.h"

void mp_split_inflight(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, double *out)
{
    if (p < 1) p = 1;
    if (v < 1) v = 1;
    if (m < 1) m = 1;
    for (int64_t r = 0; r < p; r++) {
        if (s == MP_SCHED_GPIPE) {
            for (int64_t c = 0; c < v; c++) out[c * p + r] = (double)m;
            continue;
        }
        if (s != MP_SCHED_INTERLEAVED || v == 1) {
            int64_t n = p - r < m ? p - r : m;
            for (int64_t c = 0; c < v; c++) out[c * p + r] = (double)n;
            continue;
        }
        /* Megatron: (p - r - 1)*2 + (v - 1)*p warm-up forwards, then one more
         * before the first backward; forward number f runs chunk (f / p) % v. */
        int64_t total = m * v;
        int64_t peak = (p - r - 1) * 2 + (v - 1) * p + 1;
        if (peak > total) peak = total;
        for (int64_t c = 0; c < v; c++) out[c * p + r] = 0;
        for (int64_t f = 0; f < peak; f++) out[((f / p) % v) * p + r] += 1;
    }
}

static bool item_allowed_any(const mp_split_item *it)
{
    for (int c = 0; c < MP_RECOMPUTE_COUNT; c++)
        if (it->allowed[c]) return true;
    return false;
}

mp_status mp_split_check_problem(const mp_split_problem *pr, mp_error *err)
{
    if (!pr || !pr->items || !pr->inflight || pr->pp < 1 || pr->vpp < 1)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "split", "incomplete split problem");
    int64_t k = (int64_t)pr->pp * pr->vpp;
    if (k > MP_MAX_STAGES || k > pr->n_items)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "pp",
                            "%lld stages for %d layer items: every stage needs at least one",
                            (long long)k, pr->n_items);
    for (int32_t i = 0; i < pr->n_items; i++)
        if (!item_allowed_any(&pr->items[i]))
            return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "recompute",
                                "layer item %d has no allowed recompute choice", i);
    return MP_OK;
}

/* The slowest stage; each rank's bytes into mem[pp] (zeroed first); *ok
 * false for an empty stage or a choice not allowed. */
static double evaluate_into(const mp_split_problem *pr, const mp_stage_range *stages,
                            const uint8_t *recompute, double *mem, bool *valid)
{
    int32_t n = pr->pp * pr->vpp;
    double worst = 0;
    bool ok = true;
    for (int32_t q = 0; q < pr->pp; q++) mem[q] = 0;
    for (int32_t k = 0; k < n; k++) {
        double t = 0;
        for (int32_t i = stages[k].begin; i < stages[k].end; i++) {
            const mp_split_item *it = &pr->items[i];
            int r = recompute[i];
            if (r >= MP_RECOMPUTE_COUNT || !it->allowed[r]) ok = false;
            if (r >= MP_RECOMPUTE_COUNT) r = 0;
            t += it->time[r];
            mem[k % pr->pp] += mp_split_fixed_bytes(pr, k, it) + pr->inflight[k] * it->act[r];
        }
        if (stages[k].end <= stages[k].begin) ok = false;
        if (t > worst) worst = t;
    }
    *valid = ok;
    return worst;
}

double mp_split_evaluate(const mp_split_problem *pr, const mp_stage_range *stages,
                         const uint8_t *recompute, bool *fits)
{
    double *mem = calloc((size_t)pr->pp, sizeof *mem);
    if (!mem) {
        if (fits) *fits = false;
        return INFINITY;
    }
    bool ok;
    double worst = evaluate_into(pr, stages, recompute, mem, &ok);
    for (int32_t q = 0; q < pr->pp; q++)
        if (mem[q] > mp_split_budget(pr, q) * (1 + MEM_SLACK)) ok = false;
    free(mem);
    if (fits) *fits = ok;
    return worst;
}

void mp_split_rank_bytes(const mp_split_problem *pr, const mp_stage_range *stages,
                         const uint8_t *recompute, double *mem)
{
    bool ok;
    evaluate_into(pr, stages, recompute, mem, &ok);
}

bool mp_split_even(int32_t n_items, int32_t n_stages, mp_stage_range *stages)
{
    int32_t blocks = n_items - 2;
    if (n_stages < 1 || blocks < n_stages || blocks % n_stages != 0) return false;
    int32_t per = blocks / n_stages;
    for (int32_t k = 0; k < n_stages; k++) {
        stages[k].begin = k == 0 ? 0 : 1 + k * per;
        stages[k].end = k == n_stages - 1 ? n_items : 1 + (k + 1) * per;
    }
    return true;
}

mp_status mp_split_solve(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    mp_status s = mp_split_check_problem(pr, err);
    if (s) return s;
    if (pr->vpp == 1) return mp_split_solve_dp(pr, sol, err);
    /* vpp > 1: the DP brackets the optimum; GLPK closes the bracket when it is open */
    double lower = 0;
    if ((s = mp_split_bounds(pr, sol, &lower, err))) return s;
    if (isinf(lower)) {
        sol->feasible = false;
        sol->max_stage_time = sol->bound = INFINITY;
        sol->gap = 0;
        return MP_OK;
    }
    if (sol->feasible && sol->max_stage_time <= lower * (1 + 1e-12)) {
        sol->bound = sol->max_stage_time;
        sol->gap = 0;
        return MP_OK;
    }
    if (mp_split_have_glpk()) {
        mp_split_problem bounded = *pr;
        bounded.lower_bound = lower;
        return mp_split_solve_glpk(&bounded, sol, err);
    }
    return MP_OK;
}
