/* search_split.c — the stage split and per-layer recompute of one
 * configuration (search.h, split.h). */
#include "planner/search_parts.h"

#include <stdlib.h>
#include <string.h>

#include "planner/cost_internal.h"
#include "planner/split.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"

/* The split problem's times and choices from the cost model's items (0 =
 * embedding, 1..L = blocks, L+1 = head); their bytes are mp_split_memory's. */
static void split_times(const mp_config *c, const mp_item_cost *items, int64_t N,
                        bool free_recompute, mp_split_item *si)
{
    const mp_parallel *pp = &c->parallel;
    for (int64_t i = 0; i < N; i++) {
        bool block = i > 0 && i < N - 1;
        mp_split_item *s = &si[i];
        for (int r = 0; r < MP_RECOMPUTE_COUNT; r++) {
            s->time[r] = items[i].fwd + items[i].bwd[block ? r : MP_RECOMPUTE_NONE];
            s->allowed[r] = block ? (free_recompute || r == (int)pp->recompute) : r == MP_RECOMPUTE_NONE;
            /* Megatron-Core runs the EP all-to-all overlap without any full
             * recompute, and mp_plan_check refuses a full layer under it: a
             * solution with one fell back to the even split */
            if (pp->moe_a2a_overlap && r == MP_RECOMPUTE_FULL) s->allowed[r] = false;
        }
    }
}

/* The solution into plan (stages, per-layer recompute, the most used choice
 * as the config's) and info (how it differs from the even, uniform one). */
static void read_solution(const mp_config *c, const mp_split_solution *sol, int64_t N, int64_t K,
                          mp_plan *plan, mp_search_plan *info)
{
    int64_t L = N - 2;
    plan->n_stages = (int32_t)K;
    memcpy(plan->stages, sol->stages, sizeof *sol->stages * (size_t)K);
    plan->has_layer_recompute = true;
    int count[MP_RECOMPUTE_COUNT] = {0};
    for (int64_t i = 0; i < N; i++) {
        plan->layer_recompute[i] = sol->recompute[i];
        if (i > 0 && i < N - 1) count[sol->recompute[i]]++;
    }
    int most = 0;
    for (int r = 1; r < MP_RECOMPUTE_COUNT; r++)
        if (count[r] > count[most]) most = r;
    plan->config.parallel.recompute = (mp_recompute)most;
    info->mixed_recompute = count[most] != L;
    mp_stage_range even[MP_MAX_STAGES];
    bool same = mp_split_even((int32_t)N, (int32_t)K, even) &&
                !memcmp(even, sol->stages, sizeof *sol->stages * (size_t)K);
    info->uneven = !same || info->mixed_recompute || most != (int)c->parallel.recompute;
    info->split_solver = sol->method;
    info->split_gap = sol->gap;
    info->split_max_stage = sol->max_stage_time;
    info->split_work = sol->work;
}

mp_status mp_search_split(const mp_config *c, bool free_recompute, int64_t work_limit,
                          mp_plan *plan, mp_estimate *est, mp_search_plan *info, mp_error *err)
{
    const mp_parallel *pp = &c->parallel;
    int64_t L = mp_model_blocks(&c->model), N = L + 2;
    int64_t v = mp_schedule_chunks(pp->schedule, pp->vpp);
    int64_t K = mp_schedule_n_stages(pp->schedule, pp->pp, pp->vpp);
    memset(plan, 0, sizeof *plan);
    plan->config = *c;
    info->split_method = "even";
    info->split_solver = NULL;
    info->split_gap = 0;
    info->split_max_stage = 0;
    info->split_work = 0;
    info->uneven = info->mixed_recompute = false;
    /* T5 keeps Megatron's split of encoder and decoder stages (the split
     * rank, mp_even_stage_items): Megatron cannot run a free one */
    if (K > MP_MAX_STAGES || N > MP_MAX_LAYERS + 2 || (c->model.arch == MP_ARCH_T5 && K > 1))
        return mp_estimate_config(c, NULL, est, err);
    /* the split solver places stage k on rank k % pp: the V schedules and
     * dualpipe (rank r also holds stage pp-1-r) keep the even split */
    if (mp_schedule_is_v(pp->schedule) || pp->schedule == MP_SCHED_DUALPIPE)
        return mp_estimate_config(c, NULL, est, err);
    /* an explicit layout is the user's split: costed as given, never re-split */
    if (pp->pipeline_layout[0]) {
        info->split_method = "layout";
        return mp_estimate_config(c, NULL, est, err);
    }
    /* and so are Megatron's first/last-stage and account-for flags */
    if (mp_parallel_split_given(pp)) {
        info->split_method = pp->first_stage_layers > 0 || pp->last_stage_layers > 0
                                 ? "first/last flags"
                                 : "account-for";
        return mp_estimate_config(c, NULL, est, err);
    }

    mp_item_cost *items = malloc(sizeof *items * (size_t)N);
    mp_split_item *si = calloc((size_t)N, sizeof *si);
    double *inflight = malloc(sizeof *inflight * (size_t)K * 2);
    double *budget = malloc(sizeof *budget * (size_t)pp->pp);
    mp_stage_range *stages = malloc(sizeof *stages * (size_t)K);
    uint8_t *rc = malloc((size_t)N);
    mp_status st = MP_OK;
    if (!items || !si || !inflight || !budget || !stages || !rc) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the stage split");
        goto done;
    }
    if ((st = mp_item_costs(c, items, err)) != MP_OK) goto done;
    split_times(c, items, N, free_recompute, si);
    /* the bytes: the estimate's own terms (mp_split_memory), so that a split
     * the solver calls fitting is one the estimate calls fitting; each rank's
     * budget is the capacity less what no item scales on it */
    double *held = inflight + K;
    if ((st = mp_split_memory(c, si, inflight, held, budget, err)) != MP_OK) goto done;
    for (int64_t q = 0; q < pp->pp; q++) budget[q] = c->hw.memory - budget[q];
    mp_split_problem pr = {.n_items = (int32_t)N, .items = si, .pp = (int32_t)pp->pp,
                           .vpp = (int32_t)v, .inflight = inflight, .held = held,
                           .budget = budget[0], .rank_budget = budget,
                           .work_limit = work_limit};
    mp_split_solution sol = {.stages = stages, .recompute = rc};
    if ((st = mp_split_solve(&pr, &sol, err)) != MP_OK) goto done;
    if (!sol.feasible) {
        st = mp_estimate_config(c, NULL, est, err);
        goto done;
    }
    read_solution(c, &sol, N, K, plan, info);
    st = mp_estimate_config(&plan->config, plan, est, err);
done:
    free(items);
    free(si);
    free(inflight);
    free(budget);
    free(stages);
    free(rc);
    return st;
}
