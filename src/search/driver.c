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

static int cmp_plan(const void *a, const void *b)
{
    const mp_search_plan *x = a, *y = b;
    if (x->rank_step != y->rank_step) return x->rank_step < y->rank_step ? -1 : 1;
    return 0;
}

/* Simulates one plan; when the simulator runs it, the simulated step ranks it.
 * When it cannot, the plan keeps its estimate and the failure is counted,
 * the first one's reason kept for the user (search must not hide it). */
static void simulate_plan(mp_search_plan *sp, mp_search_counts *counts)
{
    mp_sim_options so = {.record_timeline = false};
    mp_sim_result sr;
    memset(&sr, 0, sizeof sr);
    mp_error e2;
    mp_error_clear(&e2);
    const mp_plan *pl = sp->plan->n_stages ? sp->plan : NULL;
    if (mp_simulate(&sp->config, pl, &so, &sr, &e2) == MP_OK && sr.makespan > 0) {
        sp->simulated = true;
        sp->sim_step = sr.makespan;
        sp->rank_step = sr.makespan;
        counts->simulated++;
    } else {
        if (e2.code == MP_OK)
            mp_error_set(&e2, MP_EINTERNAL, NULL, 0, 0, NULL, "the simulated step is %g s",
                         sr.makespan);
        if (counts->sim_failed++ == 0)
            mp_error_format(&e2, counts->sim_failure, sizeof counts->sim_failure);
    }
    mp_sim_result_free(&sr);
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
    for (int i = 0; i < res->n; i++) {
        if (!opt->no_simulate) simulate_plan(&res->plans[i], &res->counts);
        if (opt->progress) opt->progress(opt->progress_user, 0.9 + 0.1 * (i + 1) / res->n);
    }
    if (res->n > 1) qsort(res->plans, (size_t)res->n, sizeof *res->plans, cmp_plan);
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
