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

/* The slowest stage; each rank's bytes into mem[pp] (zeroed first); each
 * stage's time into stage_t[pp * vpp] unless it is NULL; *ok false for an
 * empty stage or a choice not allowed. */
static double evaluate_into(const mp_split_problem *pr, const mp_stage_range *stages,
                            const uint8_t *recompute, double *mem, double *stage_t,
                            bool *valid)
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
        if (stage_t) stage_t[k] = t;
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
    double worst = evaluate_into(pr, stages, recompute, mem, NULL, &ok);
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
    evaluate_into(pr, stages, recompute, mem, NULL, &ok);
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
        return mp_split_glpk_from(&bounded, sol, lower, sol, err);
    }
    return MP_OK;
}

/* A split's key for mp_split_polish: the slowest stage, how many stages
 * are that slow, and the busiest rank's sum of its stages (what the
 * estimate's steady state follows, pipeline.c mp_pipeline_makespan_ranks);
 * *fits whether every rank is within its budget. */
typedef struct polish_key {
    double worst, rank_worst;
    int32_t at_worst;
} polish_key;

static polish_key polish_eval(const mp_split_problem *pr, const mp_stage_range *stages,
                              const uint8_t *recompute, double *mem, double *rank_t, bool *fits)
{
    int32_t K = pr->pp * pr->vpp;
    polish_key key = {0, 0, 0};
    for (int32_t q = 0; q < pr->pp; q++) rank_t[q] = 0;
    double *t = rank_t + pr->pp;
    bool ok;
    /* the stages' times as evaluate_into sums them (it summed them twice) */
    key.worst = evaluate_into(pr, stages, recompute, mem, t, &ok);
    for (int32_t k = 0; k < K; k++)
        rank_t[k % pr->pp] += t[k];
    for (int32_t k = 0; k < K; k++)
        if (t[k] >= key.worst * (1 - 1e-12)) key.at_worst++;
    for (int32_t q = 0; q < pr->pp; q++) {
        if (mem[q] > mp_split_budget(pr, q) * (1 + MEM_SLACK)) ok = false;
        if (rank_t[q] > key.rank_worst) key.rank_worst = rank_t[q];
    }
    *fits = ok;
    return key;
}

/* Whether a is better than b: never a busier rank, and a faster slowest
 * stage, or as slow on fewer stages. A move that only relieves the busiest
 * rank is not taken: the estimate would gain, but a chunk left short stalls
 * the interleaved schedule the simulator runs (Llama 3 70B, pp 4 vpp 10: a
 * block from chunk 3 to chunk 2 gave the estimate's 3.901 s and 4.068 s
 * simulated, a block from the last chunk to the one before it 3.888 s). */
static bool polish_better(const polish_key *a, const polish_key *b)
{
    const double eps = 1e-12;
    if (a->rank_worst > b->rank_worst * (1 + eps)) return false;
    if (a->worst < b->worst * (1 - eps)) return true;
    if (a->worst > b->worst * (1 + eps)) return false;
    return a->at_worst < b->at_worst;
}

mp_status mp_split_polish(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    if (!sol->feasible) return MP_OK;
    int32_t K = pr->pp * pr->vpp;
    double *mem = malloc(sizeof *mem * (size_t)(2 * pr->pp + K));
    if (!mem) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    double *rank_t = mem + pr->pp;
    bool fits;
    polish_key best = polish_eval(pr, sol->stages, sol->recompute, mem, rank_t, &fits);
    /* each accepted move strictly improves the key, so this ends; the cap
     * only bounds the work on a long plateau */
    for (int64_t round = 0; round < (int64_t)pr->n_items * K; round++) {
        bool moved = false;
        for (int32_t k = 0; k + 1 < K; k++)
            for (int dir = 0; dir < 2; dir++) {
                /* dir 0: stage k's last item to stage k + 1; dir 1: the other way */
                mp_stage_range *a = &sol->stages[k], *b = &sol->stages[k + 1];
                if (dir == 0 ? a->end - a->begin < 2 : b->end - b->begin < 2) continue;
                int32_t cut = a->end + (dir == 0 ? -1 : 1);
                int32_t old = a->end;
                a->end = b->begin = cut;
                polish_key key = polish_eval(pr, sol->stages, sol->recompute, mem, rank_t, &fits);
                if (fits && polish_better(&key, &best)) {
                    best = key;
                    moved = true;
                } else {
                    a->end = b->begin = old;
                }
            }
        if (!moved) break;
    }
    free(mem);
    sol->max_stage_time = best.worst;
    return MP_OK;
}
