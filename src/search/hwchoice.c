/* hwchoice.c — one search per (profile, GPU count), then the days/cost
 * Pareto front and the points a deadline or a budget admits (hwchoice.h). */
#include "search/hwchoice.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int mp_hwchoice_counts(int64_t gpus_min, int64_t gpus_max, int64_t gpus_per_node,
                       int64_t *counts)
{
    if (gpus_min < 1 || gpus_max < gpus_min || gpus_per_node < 1)
        return 0;
    int n = 0;
    int64_t cand[MP_HWCHOICE_MAX_COUNTS + 2];
    cand[n++] = gpus_min;
    for (int64_t g = 1; g <= gpus_max && n < MP_HWCHOICE_MAX_COUNTS; g *= 2)
        if (g > gpus_min && g < gpus_max)
            cand[n++] = g;
    if (gpus_max != gpus_min)
        cand[n++] = gpus_max;
    qsort(cand, (size_t)n, sizeof cand[0], cmp_i64);
    int m = 0;
    for (int i = 0; i < n && m < MP_HWCHOICE_MAX_COUNTS; i++) {
        /* whole nodes only: a cluster rents nodes, and the cost model places
         * groups by node */
        if (cand[i] % gpus_per_node && cand[i] > gpus_per_node)
            continue;
        if (cand[i] < gpus_per_node && gpus_per_node % cand[i])
            continue;
        if (m && counts[m - 1] == cand[i])
            continue;
        counts[m++] = cand[i];
    }
    return m;
}

void mp_hwchoice_price(const mp_hw *hw, int64_t gpus, double tokens, double tokens_per_s,
                       double pue, double *days, double *cost_usd, double *energy_mwh)
{
    double seconds = tokens_per_s > 0 ? tokens / tokens_per_s : INFINITY;
    double hours = seconds / 3600.0;
    *days = seconds / 86400.0;
    *cost_usd = hw->price_per_gpu_hour * (double)gpus * hours;
    /* a partly used node still draws its fixed part */
    double nodes = ceil((double)gpus / (double)hw->gpus_per_node);
    double watts = hw->gpu_watts * (double)gpus + hw->node_watts * nodes;
    *energy_mwh = watts * hours * (pue >= 1.0 ? pue : 1.0) / 1e6;
}

/* A point beats another when it is no slower and no dearer, and better in one. */
static bool dominates(const mp_hwchoice_point *a, const mp_hwchoice_point *b)
{
    return a->days <= b->days && a->cost_usd <= b->cost_usd &&
           (a->days < b->days || a->cost_usd < b->cost_usd);
}

static void mark_front(mp_hwchoice_result *r)
{
    for (int i = 0; i < r->n; i++) {
        mp_hwchoice_point *p = &r->points[i];
        if (!p->fits || !p->priced)
            continue;
        p->pareto = true;
        for (int j = 0; j < r->n && p->pareto; j++) {
            const mp_hwchoice_point *q = &r->points[j];
            if (j != i && q->fits && q->priced && dominates(q, p))
                p->pareto = false;
        }
    }
}

/* Ties go to the earlier point: profiles in the order given, fewer GPUs first. */
static void pick(mp_hwchoice_result *r, double deadline_s, double budget_usd)
{
    r->cheapest = r->fastest = r->cheapest_in_deadline = r->fastest_in_budget = -1;
    for (int i = 0; i < r->n; i++) {
        const mp_hwchoice_point *p = &r->points[i];
        if (!p->fits)
            continue;
        if (r->fastest < 0 || p->days < r->points[r->fastest].days)
            r->fastest = i;
        if (!p->priced)
            continue;
        if (r->cheapest < 0 || p->cost_usd < r->points[r->cheapest].cost_usd)
            r->cheapest = i;
        if (deadline_s > 0 && p->days * 86400.0 <= deadline_s &&
            (r->cheapest_in_deadline < 0 ||
             p->cost_usd < r->points[r->cheapest_in_deadline].cost_usd))
            r->cheapest_in_deadline = i;
        if (budget_usd > 0 && p->cost_usd <= budget_usd &&
            (r->fastest_in_budget < 0 || p->days < r->points[r->fastest_in_budget].days))
            r->fastest_in_budget = i;
    }
}

void mp_hwchoice_rank(mp_hwchoice_result *r, double deadline_s, double budget_usd)
{
    mark_front(r);
    pick(r, deadline_s, budget_usd);
}

/* One search for one point; fills the point (fits = false with the reason
 * when nothing runs). MP_ENOMEM is the only failure. */
static mp_status search_point(const mp_hwchoice_options *opt, mp_hwchoice_point *p,
                              mp_error *err)
{
    const mp_hw *hw = &opt->hws[p->hw];
    mp_search_options so = opt->search;
    so.base.hw = *hw;
    so.base.training.gpus = p->gpus;
    so.top_k = MP_SEARCH_RERANK_MIN; /* as the CLI's search: the winner does not depend on --top */
    /* Megatron's even split: the stage-split DP/ILP is most of a search's
     * time and moves a step by a few percent, which choosing hardware does
     * not turn on; `search --hw H --gpus N` on the chosen point gives it */
    so.no_split = true;
    so.progress = NULL;
    /* --fix precision=bf16|fp8 over several profiles: each compares the
     * precisions it runs (fp8 where the hardware has it) */
    so.precisions_where_supported = true;
    mp_search_result sr;
    mp_error serr;
    mp_error_clear(&serr);
    mp_status st = mp_search(&so, &sr, &serr);
    p->fits = false;
    if (st == MP_ENOMEM) {
        mp_search_result_free(&sr);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    if (st != MP_OK || sr.n < 1) {
        char line[160];
        snprintf(p->why, sizeof p->why, "%s", mp_error_format(&serr, line, sizeof line));
        mp_search_result_free(&sr);
        return MP_OK;
    }
    p->fits = true;
    p->plan = sr.plans[0];
    sr.plans[0].plan = NULL; /* the point owns it now */
    mp_search_result_free(&sr);
    p->step_s = p->plan.rank_step;
    const mp_training *t = &p->plan.config.training;
    p->tokens_per_s = (double)t->global_batch * (double)t->seq / p->step_s;
    mp_hwchoice_price(hw, p->gpus, t->tokens, p->tokens_per_s, opt->pue, &p->days, &p->cost_usd,
                      &p->energy_mwh);
    p->priced = hw->price_per_gpu_hour > 0;
    return MP_OK;
}

#define MAX_THREADS 8

typedef struct work {
    const mp_hwchoice_options *opt;
    mp_hwchoice_result *r;
    atomic_int next;
    atomic_bool oom;
} work;

static void *worker(void *arg)
{
    work *w = arg;
    for (;;) {
        int i = atomic_fetch_add(&w->next, 1);
        if (i >= w->r->n || atomic_load(&w->oom))
            break;
        mp_error e;
        mp_error_clear(&e);
        if (search_point(w->opt, &w->r->points[i], &e) != MP_OK)
            atomic_store(&w->oom, true);
    }
    return NULL;
}

mp_status mp_hwchoice_run(const mp_hwchoice_options *opt, mp_hwchoice_result *result,
                          mp_error *err)
{
    memset(result, 0, sizeof *result);
    result->cheapest = result->fastest = result->cheapest_in_deadline =
        result->fastest_in_budget = -1;
    if (opt->n_hw < 1 || opt->n_hw > MP_HWCHOICE_MAX_HW)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "hw", "needs 1 to %d profiles (got %d)",
                            MP_HWCHOICE_MAX_HW, opt->n_hw);
    if (!(opt->search.base.training.tokens > 0))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "tokens",
                            "choosing hardware needs the training tokens (--tokens T) to turn "
                            "speed into days and cost");
    if (opt->gpus_min < 1 || opt->gpus_max < opt->gpus_min)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                            "needs MIN..MAX with 1 <= MIN <= MAX (got %lld..%lld)",
                            (long long)opt->gpus_min, (long long)opt->gpus_max);
    double start = wall();
    int cap = opt->n_hw * MP_HWCHOICE_MAX_COUNTS;
    result->points = calloc((size_t)cap, sizeof *result->points);
    if (!result->points)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    /* One search per point, as the user asked for it (stage split and
     * simulation included unless turned off): a point is exactly what
     * `search --hw H --gpus N` finds. The points are independent, so the
     * machine's cores share them; each lands in its own slot, so the result
     * does not depend on which thread ran it. */
    for (int h = 0; h < opt->n_hw; h++) {
        int64_t counts[MP_HWCHOICE_MAX_COUNTS];
        int nc = mp_hwchoice_counts(opt->gpus_min, opt->gpus_max, opt->hws[h].gpus_per_node,
                                    counts);
        for (int c = 0; c < nc; c++) {
            mp_hwchoice_point *p = &result->points[result->n++];
            p->hw = h;
            p->gpus = counts[c];
        }
    }
    work w = {.opt = opt, .r = result, .next = 0, .oom = false};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = opt->threads > 0 ? opt->threads : cores > 0 ? (int)cores : 1;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > result->n) nt = result->n;
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&tid[started], NULL, worker, &w) != 0)
            break; /* fewer threads: the work is the same */
        started++;
    }
    worker(&w);
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    if (atomic_load(&w.oom)) {
        mp_hwchoice_result_free(result);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    }
    mp_hwchoice_rank(result, opt->deadline_s, opt->budget_usd);
    result->seconds = wall() - start;
    return MP_OK;
}

void mp_hwchoice_result_free(mp_hwchoice_result *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        free(r->points[i].plan.plan);
    free(r->points);
    r->points = NULL;
    r->n = 0;
}
