/* split.h — the stage split: layer items (plan.h: 0 = embedding, 1..L = blocks,
 * L+1 = head) into pp*vpp contiguous (virtual) stages, and a recompute choice
 * per item, minimising the slowest stage's time per micro-batch subject to each
 * GPU's memory (docs/design.md §5).
 *
 * Three exact solvers of the same problem:
 *  - mp_split_solve_glpk (split_glpk.c): a mixed-integer program solved by GLPK (only when
 *    megaplan_config.h has HAVE_GLPK 1). Runs of identical consecutive items
 *    (the transformer blocks) are one variable per stage and recompute choice,
 *    so a 128-layer model on 128 virtual stages stays small.
 *  - mp_split_solve_dp (split_dp.c): dynamic programming over stage boundaries with the
 *    Pareto front (activation bytes, time) of each segment's recompute choices.
 *    Exact when every pipeline rank holds one stage (vpp == 1), where the
 *    memory of a rank depends on its own stage only.
 *  - mp_split_solve_brute (split_brute.c): every split and every recompute choice; for the
 *    tests' tiny instances.
 * mp_split_solve (split.c): for vpp == 1 the DP (exact, and far faster than GLPK's
 * branch and bound on these min-max models). For vpp > 1 the DP brackets the
 * optimum: each virtual stage alone within its rank's memory is a relaxation
 * (a lower bound, tried only up to the split in hand), each within 1/vpp of
 * it a restriction (tried only up to the even split: a split that fits, or
 * the even split if better, then
 * improved by moves of one item that fit, split_internal.h mp_split_polish).
 * Equal ends: optimal. Otherwise GLPK starts
 * from the restriction's split with T >= the relaxation's bound and runs
 * within work_limit; the solution reports the remaining gap. The limit counts
 * work (simplex iterations and branch-and-bound nodes), never time, so the same
 * problem gets the same answer on a loaded machine as on an idle one. Without GLPK
 * the restriction's split is returned with its gap.
 */
#ifndef MP_SPLIT_H
#define MP_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"

/* One layer item as the split sees it: per micro-batch on one GPU of its stage. */
typedef struct mp_split_item {
    double time[MP_RECOMPUTE_COUNT];   /* forward + backward (incl. recompute) seconds */
    double act[MP_RECOMPUTE_COUNT];    /* bytes stashed per in-flight micro-batch */
    double static_bytes;               /* weights + grads + optimizer bytes, and what the
                                          stage holds once whatever is in flight */
    double hold_bytes;                 /* bytes per micro-batch held for a deferred W
                                          (split backward schedules), any choice */
    bool allowed[MP_RECOMPUTE_COUNT];  /* the choices the solver may take (at least one) */
} mp_split_item;

typedef struct mp_split_problem {
    int32_t n_items;
    const mp_split_item *items;
    int32_t pp, vpp;          /* n_stages = pp*vpp; virtual stage k sits on rank k % pp */
    const double *inflight;   /* [pp*vpp]: micro-batches virtual stage k holds stashed at its rank's peak */
    const double *held;       /* [pp*vpp] or NULL: micro-batches virtual stage k holds for their W */
    double budget;            /* bytes per GPU for static + activation bytes (capacity minus other) */
    const double *rank_budget; /* [pp] or NULL: each rank's own budget (then budget is unused) */
    int64_t work_limit;       /* GLPK: stop after this many simplex iterations plus
                                 branch-and-bound nodes and report the gap
                                 (<= 0: MP_SPLIT_WORK_DEFAULT) */
    double lower_bound;       /* GLPK: a known bound on the objective (0 = none), as T >= it */
} mp_split_problem;

typedef struct mp_split_solution {
    int32_t n_stages;
    mp_stage_range *stages;   /* [n_stages], caller's storage */
    uint8_t *recompute;       /* [n_items], caller's storage (mp_recompute values) */
    double max_stage_time;    /* objective: the slowest stage, seconds per micro-batch */
    double bound;             /* proven lower bound on the objective */
    double gap;               /* (objective - bound) / objective; 0 when proven optimal */
    bool feasible;            /* false: no split fits (stages/recompute left unspecified) */
    bool unsolved;            /* with feasible false: too large to solve within the DP's
                                 work budget, so nothing is proven (the caller keeps the
                                 even split) */
    const char *method;       /* "glpk", "dp", "exhaustive", "even" */
    int64_t work;             /* GLPK: simplex iterations plus nodes it used (0 otherwise) */
} mp_split_solution;

/* GLPK's work limit when the problem gives none: about a tenth of a second on one core. */
#define MP_SPLIT_WORK_DEFAULT 1000

/* In-flight micro-batches per virtual stage at each rank's peak for a schedule
 * (GPipe m; 1F1B and ZB-H1 min(p - rank, m); interleaved Megatron's warm-up + 1
 * forwards spread over the chunks in the order they run). out has p*v entries. */
void mp_split_inflight(mp_schedule_kind s, int64_t p, int64_t v, int64_t m, double *out);

/* Evaluates a given split: the slowest stage, and whether every rank fits. */
double mp_split_evaluate(const mp_split_problem *pr, const mp_stage_range *stages,
                         const uint8_t *recompute, bool *fits);

/* Each pipeline rank's bytes under a given split (mem: [pp]): what
 * mp_split_evaluate holds against the budget. */
void mp_split_rank_bytes(const mp_split_problem *pr, const mp_stage_range *stages,
                         const uint8_t *recompute, double *mem);

/* Megatron's even split of the blocks (embedding with the first stage, head
 * with the last); returns false when the blocks do not divide evenly. */
bool mp_split_even(int32_t n_items, int32_t n_stages, mp_stage_range *stages);

mp_status mp_split_solve(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);
mp_status mp_split_solve_dp(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);
mp_status mp_split_solve_brute(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);
/* Returns MP_EINTERNAL when built without GLPK. */
mp_status mp_split_solve_glpk(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err);
bool mp_split_have_glpk(void);

#endif
