/* search.c — enumerate, bound, cost, split, re-rank (search.h, docs/design.md §5).
 *
 * 1. Enumerate the structurally valid candidates (cheap dimensions outermost)
 *    and give each two lower bounds from cached per-block numbers: memory
 *    (the first pipeline rank's weights, grads, optimizer states and stashed
 *    activations under the even split: exactly the estimate's rank 0 minus
 *    its buffers) and time (the slowest rank's compute and recompute over m
 *    micro-batches plus the fill it cannot avoid, without any communication).
 * 2. Drop those whose memory bound exceeds the capacity; cost the rest in
 *    full in order of their time bound, keeping the k best that fit, and stop
 *    at the first bound that cannot beat the k-th best: every later one is
 *    pruned by time.
 * 3. Give the k best the stage split and per-layer recompute (ilp.h), keep it
 *    where the estimate improves, and re-rank by the simulator.
 */
#include "planner/search_parts.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "planner/cost_internal.h"
#include "planner/split.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"
#include "sim/simulate.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void even_plan(const mp_config *c, mp_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->config = *c;
    mp_plan_default_stages(plan);
}

static int cmp_plan(const void *a, const void *b)
{
    const mp_search_plan *x = a, *y = b;
    if (x->rank_step != y->rank_step) return x->rank_step < y->rank_step ? -1 : 1;
    return 0;
}

mp_status mp_search(const mp_search_options *opt, mp_search_result *res, mp_error *err)
{
    double t0 = now_s();
    memset(res, 0, sizeof *res);
    const mp_config *base = &opt->base;
    int k = opt->top_k > 0 ? opt->top_k : 5;
    if (k > 100) k = 100;
    if (base->training.gpus < 1 || base->training.global_batch < 1 || base->training.seq < 1)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                            "search needs gpus, seq and global batch to be positive");
    mp_status st = mp_search_check_shared(opt, err);
    if (st != MP_OK)
        return st;

    enum_ctx e;
    mp_search_init_ctx(&e, opt, &res->counts);
    e.keep_all = opt->no_prune;
    mp_search_enumerate(&e);
    top_k top = {0};
    if (e.keep.oom || e.closest.oom || e.bc.oom) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the search");
        goto done;
    }
    if (e.too_many) {
        st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                          "absurdly large search: more than %d candidates (%lld GPUs and a "
                          "global batch of %lld have too many divisors); fix some settings "
                          "(--micro-batch, --pp, --tp) or search a smaller case",
                          base->model.moe.experts > 0 ? MAX_CANDIDATES_MOE : MAX_CANDIDATES,
                          (long long)base->training.gpus,
                          (long long)base->training.global_batch);
        res->counts.seconds = now_s() - t0;
        goto done;
    }
    if (e.keep.n == 0 && e.closest.n == 0) {
        /* Nothing can run. With settings fixed by the user, that is their
         * input's fault (MP_EINPUT, naming the first refusal); otherwise the
         * model, GPUs and batch simply admit no split (MP_ENOFIT). */
        bool user = opt->fixed != 0;
        if (e.have_refusal && err) {
            *err = e.first_refusal;
            if (!user) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "no split of %lld GPUs can run; e.g. %.300s",
                         (long long)base->training.gpus, e.first_refusal.msg);
                snprintf(err->msg, sizeof err->msg, "%s", msg);
            }
        } else {
            mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                         "no configuration of %lld GPUs can run this model with these settings",
                         (long long)base->training.gpus);
        }
        st = user ? MP_EINPUT : MP_ENOFIT;
        if (err) err->code = st;
        res->counts.seconds = now_s() - t0;
        goto done;
    }

    /* cost in order of the time bound */
    if (e.keep.n > 1) qsort(e.keep.v, e.keep.n, sizeof *e.keep.v, mp_search_cmp_lb_time);
    top.k = k;
    top.e = calloc((size_t)k, sizeof *top.e);
    if (!top.e) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* the least-over estimate seen, for "nothing fits" */
    bool have_closest = false;
    /* why the cost model refused a candidate that passed the structural rules:
     * when nothing runs at all, that is the answer (not a structural refusal
     * of some other candidate) */
    mp_error est_refusal;
    bool have_est_refusal = false;
    for (size_t i = 0; i < e.keep.n; i++) {
        const cand *x = &e.keep.v[i];
        if (!opt->no_prune && x->lb_time >= mp_search_top_threshold(&top)) {
            res->counts.pruned_time += (int64_t)(e.keep.n - i);
            break;
        }
        mp_config cfg;
        mp_search_cand_apply(base, x, &cfg);
        mp_estimate est;
        mp_error e2;
        mp_error_clear(&e2);
        res->counts.estimated++;
        if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) {
            res->counts.rejected[MP_REJECT_OTHER]++;
            if (!have_est_refusal) {
                have_est_refusal = true;
                est_refusal = e2;
            }
            continue;
        }
        if (!est.fits) {
            res->counts.rejected[MP_REJECT_MEMORY]++;
            if (!have_closest || est.over_bytes < res->closest_est.over_bytes) {
                have_closest = true;
                res->closest = cfg;
                res->closest_est = est;
            }
            continue;
        }
        res->counts.fitting++;
        mp_search_top_insert(&top, x, &est);
        if (opt->progress && (i & 1023) == 1023)
            opt->progress(opt->progress_user, 0.1 + 0.7 * (double)i / (double)e.keep.n);
    }

    if (top.n == 0) {
        /* nothing fits: cost the memory-pruned ones nearest to fitting too */
        if (e.closest.n > 1) qsort(e.closest.v, e.closest.n, sizeof *e.closest.v, mp_search_cmp_lb_mem);
        for (size_t i = 0; i < e.closest.n; i++) {
            mp_config cfg;
            mp_search_cand_apply(base, &e.closest.v[i], &cfg);
            mp_estimate est;
            mp_error e2;
            if (mp_estimate_config(&cfg, NULL, &est, &e2) != MP_OK) {
                if (!have_est_refusal) {
                    have_est_refusal = true;
                    est_refusal = e2;
                }
                continue;
            }
            if (!have_closest || est.over_bytes < res->closest_est.over_bytes) {
                have_closest = true;
                res->closest = cfg;
                res->closest_est = est;
            }
        }
        res->have_closest = have_closest;
        res->counts.seconds = now_s() - t0;
        if (have_closest) {
            char a[64];
            snprintf(a, sizeof a, "%.1f", res->closest_est.memory.peak / (1024.0 * 1024 * 1024));
            st = mp_error_set(err, MP_ENOFIT, NULL, 0, 0, "memory",
                              "no configuration fits in %.0f GiB per GPU; the closest needs %s GiB",
                              base->hw.memory / (1024.0 * 1024 * 1024), a);
        } else {
            if (err && have_est_refusal) *err = est_refusal;
            else if (err && e.have_refusal) *err = e.first_refusal;
            else mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                              "no configuration of %lld GPUs can run this model with these "
                              "settings", (long long)base->training.gpus);
            /* as above: the input's fault only when the user fixed settings */
            st = opt->fixed ? MP_EINPUT : MP_ENOFIT;
            if (err) err->code = st;
        }
        goto done;
    }

    /* the split and per-layer recompute of the best ones, then the simulator */
    res->plans = calloc((size_t)top.n, sizeof *res->plans);
    if (!res->plans) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* GLPK gets one work budget for the whole search, shared by the plans still
     * to split, so that --top 5 stays within the search's one-second budget; a
     * plan whose ILP runs out of work keeps the DP's bounds and reports its gap.
     * Work is counted, not timed, so a loaded machine names the same winner. */
    const int64_t split_budget = opt->split_work_limit > 0 ? opt->split_work_limit * top.n
                                                           : MP_SEARCH_SPLIT_WORK;
    int64_t split_used = 0;
    for (int i = 0; i < top.n; i++) {
        mp_search_plan *sp = &res->plans[i];
        res->n = i + 1;
        int64_t split_limit = (split_budget - split_used) / (top.n - i);
        if (split_limit < MP_SEARCH_SPLIT_MIN_WORK)
            split_limit = MP_SEARCH_SPLIT_MIN_WORK;
        mp_search_cand_apply(base, &top.e[i].x, &sp->config);
        sp->est = sp->est_even = top.e[i].est;
        sp->split_method = "even";
        sp->plan = malloc(sizeof *sp->plan);
        if (!sp->plan) {
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            goto done;
        }
        even_plan(&sp->config, sp->plan);
        if (!opt->no_split) {
            mp_plan *tmp = malloc(sizeof *tmp);
            if (!tmp) {
                st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
                goto done;
            }
            mp_estimate est;
            mp_search_plan info = *sp;
            mp_error e2;
            mp_error_clear(&e2);
            bool free_rc = !(opt->fixed & MP_FIX_RECOMPUTE);
            if (mp_search_split(&sp->config, free_rc, split_limit, tmp, &est, &info,
                                &e2) == MP_OK) {
                res->counts.split++;
                sp->split_method = info.split_method;
                sp->split_gap = info.split_gap;
                sp->split_max_stage = info.split_max_stage;
                split_used += info.split_work;
                /* --runtime megatron: a split its flags cannot express keeps the even one */
                bool runs = !opt->megatron_runtime || mp_search_megatron_runs(tmp, NULL);
                if (runs && est.fits && info.uneven &&
                    est.time.step < sp->est_even.time.step * (1 - 1e-9)) {
                    res->counts.split_uneven++;
                    sp->est = est;
                    sp->uneven = true;
                    sp->mixed_recompute = info.mixed_recompute;
                    sp->config = tmp->config;
                    *sp->plan = *tmp;
                }
            }
            free(tmp);
        }
        sp->rank_step = sp->est.time.step;
        if (!opt->no_simulate) {
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
                res->counts.simulated++;
            }
            mp_sim_result_free(&sr);
        }
        if (opt->progress) opt->progress(opt->progress_user, 0.8 + 0.2 * (i + 1) / top.n);
    }
    if (res->n > 1) qsort(res->plans, (size_t)res->n, sizeof *res->plans, cmp_plan);
    res->counts.seconds = now_s() - t0;

done:
    free(top.e);
    free(e.keep.v);
    free(e.closest.v);
    free(e.bc.slot);
    if (st != MP_OK && st != MP_ENOFIT) {
        mp_search_result_free(res);
        memset(res, 0, sizeof *res);
    }
    return st;
}

void mp_search_result_free(mp_search_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->plans[i].plan);
    free(r->plans);
    r->plans = NULL;
    r->n = 0;
}
