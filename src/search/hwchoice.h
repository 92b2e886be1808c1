/* hwchoice.h — choosing the hardware as well as the plan: for each profile
 * and each GPU count, the best plan search finds, and what training the
 * given tokens on it takes in days, money and energy. The points that no
 * other point beats on both days and cost form the Pareto front; with a
 * deadline or a budget the cheapest and the fastest admissible points are
 * named. The search of each point is mp_search (search/driver.h) with Megatron's
 * even stage split, so a point's plan is exactly what `search --hw H
 * --gpus N --no-split` prints. */
#ifndef MP_HWCHOICE_H
#define MP_HWCHOICE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "search/driver.h"

#define MP_HWCHOICE_MAX_HW 16
#define MP_HWCHOICE_MAX_COUNTS 32

typedef struct mp_hwchoice_options {
    /* model, training (tokens > 0 required; gpus ignored) and the fixed
     * settings, as for one search; base.hw is replaced by each profile */
    mp_search_options search;
    mp_hw hws[MP_HWCHOICE_MAX_HW];
    int n_hw;
    int64_t gpus_min, gpus_max; /* counts tried: the powers of two between, and both ends */
    double pue;                 /* facility power / IT power (>= 1; 1 = IT energy only) */
    double deadline_s;          /* 0 = none */
    double budget_usd;          /* 0 = none */
    int threads;                /* searches at once; 0 = one per core */
} mp_hwchoice_options;

typedef struct mp_hwchoice_point {
    int hw;                  /* index into options.hws */
    int64_t gpus;
    bool fits;               /* search found a plan */
    mp_search_plan plan;     /* the winner (plan.plan owned by the result) */
    double step_s;           /* what the ranking used (simulated when simulated) */
    double tokens_per_s;
    double days;
    double cost_usd;         /* 0 when the profile has no price */
    double energy_mwh;       /* 0 when the profile has no power figures */
    bool priced;
    bool pareto;             /* on the days/cost front (priced points only) */
    char why[160];           /* when !fits: search's reason, one line */
} mp_hwchoice_point;

typedef struct mp_hwchoice_result {
    int n;
    mp_hwchoice_point *points; /* by profile, then GPU count */
    int cheapest_in_deadline;  /* index or -1 (needs a deadline) */
    int fastest_in_budget;     /* index or -1 (needs a budget) */
    int cheapest, fastest;     /* over all fitting (priced, for cheapest) points, or -1 */
    double seconds;            /* wall time */
} mp_hwchoice_result;

/* The GPU counts tried between min and max (multiples of gpus_per_node
 * only): fills counts, returns how many (at most MP_HWCHOICE_MAX_COUNTS). */
int mp_hwchoice_counts(int64_t gpus_min, int64_t gpus_max, int64_t gpus_per_node,
                       int64_t *counts);

/* Days, cost and energy of training tokens at tokens_per_s on gpus GPUs of
 * hw, at the given PUE. */
void mp_hwchoice_price(const mp_hw *hw, int64_t gpus, double tokens, double tokens_per_s,
                       double pue, double *days, double *cost_usd, double *energy_mwh);

/* Runs every (profile, count) search. MP_EINPUT when the options are
 * unusable (no tokens, no profile, min > max); points that cannot run are
 * kept with fits = false and their reason. */
mp_status mp_hwchoice_run(const mp_hwchoice_options *opt, mp_hwchoice_result *result,
                          mp_error *err);
void mp_hwchoice_result_free(mp_hwchoice_result *r);

/* Marks the Pareto front and fills the picks of a result whose points are
 * filled (mp_hwchoice_run calls it; tests call it on points they make). */
void mp_hwchoice_rank(mp_hwchoice_result *r, double deadline_s, double budget_usd);

#endif
