/* precision.c — search over training precisions (fp8 against bf16,
 * docs/cost-model.md §13): the precision changes every candidate's costs,
 * bounds and memory, so each gets a search of its own and the best plans of
 * all are kept. Each search returns its own k best, so the k best of their
 * union are the k best over every precision. */
#include <stdlib.h>
#include <string.h>

#include "search/driver.h"

static int by_rank_step(const void *a, const void *b)
{
    const mp_search_plan *x = a, *y = b;
    if (x->rank_step != y->rank_step) return x->rank_step < y->rank_step ? -1 : 1;
    /* ties: bf16 before fp8 (the mp_dtype order), whatever qsort does with equals */
    return (x->config.training.precision > y->config.training.precision) -
           (x->config.training.precision < y->config.training.precision);
}

static void add_counts(mp_search_counts *to, const mp_search_counts *c)
{
    to->considered += c->considered;
    for (int i = 0; i < MP_REJECT_COUNT; i++) to->rejected[i] += c->rejected[i];
    to->pruned_memory += c->pruned_memory;
    to->pruned_time += c->pruned_time;
    to->estimated += c->estimated;
    to->closest_costed += c->closest_costed;
    to->closest_unproven += c->closest_unproven;
    to->fitting += c->fitting;
    to->split += c->split;
    to->split_uneven += c->split_uneven;
    to->simulated += c->simulated;
    if (!to->sim_failed && c->sim_failed)
        memcpy(to->sim_failure, c->sim_failure, sizeof to->sim_failure);
    to->sim_failed += c->sim_failed;
    to->seconds += c->seconds;
}

/* FP8 parameters (--fp8-param-gather) are asked of the fp8 runs only: the
 * bf16 ones of the same comparison have no FP8 copy to keep. */
static void fp8_only_settings(mp_config *run, const mp_config *asked)
{
    run->training.fp8_param_gather =
        asked->training.fp8_param_gather && run->training.precision == MP_DTYPE_FP8;
    /* DeepSeek's FP8 cache of the SwiGLU inputs is an FP8 recipe's (its
     * tiles); Megatron-Core's E4M3 store is any precision's */
    run->training.fp8_act_cache =
        asked->training.fp8_act_cache == MP_F8AC_DEEPSEEK &&
                run->training.precision != MP_DTYPE_FP8
            ? MP_F8AC_OFF
            : asked->training.fp8_act_cache;
}

mp_status mp_search_precisions(const mp_search_options *opt, mp_search_result *res,
                               mp_error *err)
{
    memset(res, 0, sizeof *res);
    int k = opt->top_k > 0 ? opt->top_k : 5;
    mp_search_options one = *opt;
    one.precisions.n = 0;
    /* a precision the hardware cannot run is the user's mistake, set or not
     * (fp8 on an A100): refused with its reason, not quietly left out;
     * across several profiles each runs those it can */
    mp_search_set run = {0};
    for (int i = 0; i < opt->precisions.n; i++) {
        one.base.training.precision = (mp_dtype)opt->precisions.v[i];
        fp8_only_settings(&one.base, &opt->base);
        mp_error e = {0};
        mp_status st = mp_config_check_precision(&one.base, &e);
        if (st == MP_OK)
            run.v[run.n++] = opt->precisions.v[i];
        else if (!opt->precisions_where_supported || (run.n == 0 && i == opt->precisions.n - 1)) {
            if (err) *err = e;
            return st;
        }
    }
    mp_status best_st = MP_ENOFIT;
    mp_error first_err = {0};
    bool have_err = false;
    for (int i = 0; i < run.n; i++) {
        one.base.training.precision = (mp_dtype)run.v[i];
        fp8_only_settings(&one.base, &opt->base);
        mp_search_result r;
        mp_error e = {0};
        mp_status st = mp_search(&one, &r, &e);
        add_counts(&res->counts, &r.counts);
        if (st == MP_OK && r.n > 0) {
            mp_search_plan *all = realloc(res->plans, sizeof *all * (size_t)(res->n + r.n));
            if (!all) {
                mp_search_result_free(&r);
                mp_search_result_free(res);
                return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            }
            memcpy(all + res->n, r.plans, sizeof *all * (size_t)r.n);
            res->plans = all;
            res->n += r.n;
            free(r.plans); /* the plans' own allocations moved to res */
            best_st = MP_OK;
            continue;
        }
        if (st == MP_ENOFIT && r.have_closest &&
            (!res->have_closest || r.closest_est.over_bytes < res->closest_est.over_bytes)) {
            res->have_closest = true;
            res->closest = r.closest;
            res->closest_est = r.closest_est;
        }
        mp_search_result_free(&r);
        /* a precision that fits nowhere: the others still answer */
        if (!have_err) {
            first_err = e;
            have_err = true;
            if (st != MP_ENOFIT && best_st == MP_ENOFIT)
                best_st = st;
        }
    }
    if (res->n > 0) {
        qsort(res->plans, (size_t)res->n, sizeof *res->plans, by_rank_step);
        for (int i = k; i < res->n; i++) free(res->plans[i].plan);
        if (res->n > k) res->n = k;
        res->have_closest = false;
        return MP_OK;
    }
    if (err && have_err) *err = first_err;
    return best_st == MP_OK ? MP_ENOFIT : best_st;
}
