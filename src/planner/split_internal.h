/* split_internal.h — helpers the split solvers share (split*.c). */
#ifndef MP_SPLIT_INTERNAL_H
#define MP_SPLIT_INTERNAL_H

#include "planner/split.h"

/* Relative slack on the memory budget so that a split the GLPK model calls
 * feasible (it works in scaled units) is not refused by rounding here. */
#define MEM_SLACK 1e-9

/* Rank q's budget. */
static inline double mp_split_budget(const mp_split_problem *pr, int32_t q)
{
    return pr->rank_budget ? pr->rank_budget[q] : pr->budget;
}

/* What item it costs on virtual stage k whatever its recompute choice:
 * its static bytes and its held W's. */
static inline double mp_split_fixed_bytes(const mp_split_problem *pr, int32_t k,
                                          const mp_split_item *it)
{
    return it->static_bytes + (pr->held ? pr->held[k] * it->hold_bytes : 0.0);
}

/* Refuses a malformed problem (MP_EINTERNAL) or one with more stages than items (MP_EINPUT). */
mp_status mp_split_check_problem(const mp_split_problem *pr, mp_error *err);

/* Megatron's even split with the fastest recompute choice per stage that fits
 * an equal share of its rank's memory; infeasible when the blocks do not divide. */
mp_status mp_split_even_best(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);

/* The DP's bracket of the optimum: *lower from each stage alone within the
 * rank's memory, inc a split that fits (the DP with budget / vpp per stage, or
 * the even split). For vpp == 1 both are the optimum. */
mp_status mp_split_bounds(const mp_split_problem *pr, mp_split_solution *inc, double *lower,
                          mp_error *err);

/* GLPK from a known bracket (mp_split_bounds' incumbent inc and lower
 * bound), so that mp_split_solve does not compute it twice; inc may be sol. */
mp_status mp_split_glpk_from(const mp_split_problem *pr, const mp_split_solution *inc,
                             double lower, mp_split_solution *sol, mp_error *err);

/* For vpp > 1: improves a fitting split by moving one item at a time across
 * a stage boundary, each move fitting every rank's budget, never making the
 * busiest rank's sum of its stages slower, and making the slowest stage
 * faster (or as slow, on fewer stages or with a less busy rank). Keeps each
 * item's recompute choice; sets max_stage_time. */
mp_status mp_split_polish(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);

#endif
