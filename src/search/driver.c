/* driver.c — the planner's search re-ranked by the simulator (driver.h). */
#include "search/driver.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/explain.h"
#include "sim/simulate.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Why a plan of the pool kept its estimate. */
typedef struct sim_note {
    bool failed;
    char msg[sizeof ((mp_search_counts *)0)->sim_failure];
} sim_note;

/* Simulates one plan; when the simulator runs it, the simulated step ranks it.
 * When it cannot, the plan keeps its estimate and why (one line) says why. */
static bool simulate_plan(mp_search_plan *sp, char *why, size_t why_size)
{
    mp_sim_options so = {.record_timeline = false};
    mp_sim_result sr;
    memset(&sr, 0, sizeof sr);
    mp_error e2;
    mp_error_clear(&e2);
    const mp_plan *pl = sp->plan->n_stages ? sp->plan : NULL;
    bool ok = mp_simulate(&sp->config, pl, &so, &sr, &e2) == MP_OK && sr.makespan > 0;
    if (ok) {
        sp->simulated = true;
        sp->sim_step = sr.makespan;
        sp->rank_step = sr.makespan;
    } else {
        if (e2.code == MP_OK)
            mp_error_set(&e2, MP_EINTERNAL, NULL, 0, 0, NULL, "the simulated step is %g s",
                         sr.makespan);
        mp_error_format(&e2, why, why_size);
    }
    mp_sim_result_free(&sr);
    return ok;
}

mp_status mp_search(const mp_search_options *opt, mp_search_result *res, mp_error *err)
{
    if (opt->precisions.n > 1) /* fp8 against bf16: one search each (precision.c) */
        return mp_search_precisions(opt, res, err);
    double t0 = now_s();
    mp_status st = mp_search_estimated(opt, res, err);
    if (st != MP_OK) {
        if (st == MP_ENOFIT) res->counts.seconds = now_s() - t0;
        return st;
    }
    /* the pool (planner/search_rank.c) holds at least MP_SEARCH_POOL_MIN
     * plans whatever top_k is; each is simulated, and the first top_k by
     * rank_step kept (ties in the estimate's order: a stable sort), so that
     * a smaller top_k lists the first plans of a larger one's */
    int n = res->n, k = opt->top_k > 0 ? opt->top_k : 5;
    sim_note *why = calloc((size_t)n, sizeof *why);
    int *order = malloc(sizeof *order * (size_t)n);
    mp_search_plan *kept = malloc(sizeof *kept * (size_t)n);
    if (!why || !order || !kept) {
        free(why);
        free(order);
        free(kept);
        mp_search_result_free(res);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        order[i] = i;
        if (!opt->no_simulate)
            why[i].failed = !simulate_plan(&res->plans[i], why[i].msg, sizeof why[i].msg);
        if (opt->progress) opt->progress(opt->progress_user, 0.9 + 0.1 * (i + 1) / n);
    }
    for (int a = 1; a < n; a++) {
        int t = order[a], b = a;
        for (; b > 0 && res->plans[order[b - 1]].rank_step > res->plans[t].rank_step; b--)
            order[b] = order[b - 1];
        order[b] = t;
    }
    /* the counts of simulations are the listed plans' (the footer's "~"
     * rows), the first failure the best listed one's */
    res->counts.simulated = res->counts.sim_failed = 0;
    res->counts.sim_failure[0] = 0;
    for (int i = 0; i < n; i++) {
        mp_search_plan *p = &res->plans[order[i]];
        if (i >= k) {
            free(p->plan);
            continue;
        }
        kept[i] = *p;
        if (p->simulated) {
            res->counts.simulated++;
        } else if (why[order[i]].failed) {
            if (res->counts.sim_failed++ == 0)
                memcpy(res->counts.sim_failure, why[order[i]].msg, sizeof why[0].msg);
        }
    }
    free(res->plans);
    res->plans = kept;
    res->n = n < k ? n : k;
    free(why);
    free(order);
    res->counts.seconds = now_s() - t0;
    return MP_OK;
}

mp_status mp_explain(const mp_config *c, const mp_search_options *sopt, mp_buf *out, int *verdict,
                     mp_error *err)
{
    mp_search_result r;
    mp_error serr;
    mp_error_clear(&serr);
    mp_status st = mp_search(sopt, &r, &serr);
    if (st == MP_ENOMEM || st == MP_EINTERNAL) {
        if (err) *err = serr;
        return st;
    }
    st = mp_explain_against(c, st == MP_OK ? &r : NULL, serr.msg, out, verdict, err);
    mp_search_result_free(&r);
    return st;
}
