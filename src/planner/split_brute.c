/* split_brute.c — the exhaustive stage split: every split and every
 * recompute choice, for the tests' tiny instances (split.h). */
#include "planner/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "megaplan_config.h"
#include "planner/split_internal.h"

/* ---- exhaustive ---------------------------------------------------------- */

typedef struct brute_state {
    const mp_split_problem *pr;
    mp_stage_range *cur_stages, *best_stages;
    uint8_t *cur_rc, *best_rc;
    double best;
    bool found;
} brute_state;

static void brute_recompute(brute_state *st, int32_t i)
{
    const mp_split_problem *pr = st->pr;
    if (i == pr->n_items) {
        bool fits;
        double t = mp_split_evaluate(pr, st->cur_stages, st->cur_rc, &fits);
        if (fits && (!st->found || t < st->best)) {
            st->found = true;
            st->best = t;
            memcpy(st->best_stages, st->cur_stages,
                   sizeof *st->cur_stages * (size_t)(pr->pp * pr->vpp));
            memcpy(st->best_rc, st->cur_rc, (size_t)pr->n_items);
        }
        return;
    }
    for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
        if (!pr->items[i].allowed[c]) continue;
        st->cur_rc[i] = (uint8_t)c;
        brute_recompute(st, i + 1);
    }
}

static void brute_split(brute_state *st, int32_t k, int32_t begin)
{
    const mp_split_problem *pr = st->pr;
    int32_t n = pr->pp * pr->vpp;
    if (k == n - 1) {
        st->cur_stages[k].begin = begin;
        st->cur_stages[k].end = pr->n_items;
        brute_recompute(st, 0);
        return;
    }
    /* leave at least one item for each later stage */
    for (int32_t end = begin + 1; end <= pr->n_items - (n - 1 - k); end++) {
        st->cur_stages[k].begin = begin;
        st->cur_stages[k].end = end;
        brute_split(st, k + 1, end);
    }
}

mp_status mp_split_solve_brute(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    mp_status s = mp_split_check_problem(pr, err);
    if (s) return s;
    int32_t n = pr->pp * pr->vpp;
    if (pr->n_items > 12)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "split",
                            "exhaustive split is for at most 12 items, not %d", pr->n_items);
    brute_state st = {.pr = pr};
    st.cur_stages = calloc((size_t)n, sizeof *st.cur_stages);
    st.cur_rc = calloc((size_t)pr->n_items, 1);
    if (!st.cur_stages || !st.cur_rc) {
        free(st.cur_stages);
        free(st.cur_rc);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    st.best_stages = sol->stages;
    st.best_rc = sol->recompute;
    brute_split(&st, 0, 0);
    free(st.cur_stages);
    free(st.cur_rc);
    sol->n_stages = n;
    sol->feasible = st.found;
    sol->max_stage_time = st.found ? st.best : INFINITY;
    sol->bound = sol->max_stage_time;
    sol->gap = 0;
    sol->method = "exhaustive";
    return MP_OK;
}
