/* search.h — the search over parallel configurations (docs/design.md §5).
 *
 * Enumerates t (divides heads and kv_heads; within the scale-up domain unless
 * allowed), c (seq splits into 2c chunks), p and v (p*v divides the layers,
 * Megatron's rule; v > 1 only with interleaving, which needs m % p == 0),
 * d = gpus/(t*c*p), micro-batch b (divides global_batch/d), SP (t > 1),
 * recompute, distributed optimizer and schedule; a fixed dimension is never
 * varied. Candidates are pruned by a memory lower bound and, in order of a
 * time lower bound, against the k-th best estimate so far. The best ones then
 * get the stage split and per-layer recompute of split.h (uneven splits and
 * mixed recompute allowed); the search driver (src/search/driver.c) re-ranks
 * them by the simulated step.
 */
#ifndef MP_SEARCH_H
#define MP_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/error.h"
#include "core/plan.h"
#include "planner/cost.h"

/* Dimensions a search may hold fixed (values from base.parallel). */
enum {
    MP_FIX_TP = 1u << 0, MP_FIX_SP = 1u << 1, MP_FIX_PP = 1u << 2, MP_FIX_VPP = 1u << 3,
    MP_FIX_CP = 1u << 4, MP_FIX_DP = 1u << 5, MP_FIX_MICRO_BATCH = 1u << 6,
    MP_FIX_RECOMPUTE = 1u << 7, MP_FIX_DIST_OPT = 1u << 8, MP_FIX_SCHEDULE = 1u << 9,
    MP_FIX_DP_OVERLAP = 1u << 10, MP_FIX_TP_OVERLAP = 1u << 11, MP_FIX_ZERO = 1u << 17,
    MP_FIX_HSDP = 1u << 18, MP_FIX_EP = 1u << 19, MP_FIX_ETP = 1u << 20,
    MP_FIX_DISPATCHER = 1u << 21
};
#define MP_FIX_DIMS 12

/* The most module sets selective recompute is searched with (search_internal.h
 * mp_search_selective_sets). */
#define MP_SEARCH_SEL_MAX 8

/* The values a dimension may take (--fix schedule=1f1b|interleaved-1f1b,
 * tp=4|8): integers, or the enum/bool values as integers. n = 0: any. */
#define MP_SEARCH_SET_MAX 16
typedef struct mp_search_set {
    int n;
    int64_t v[MP_SEARCH_SET_MAX];
} mp_search_set;

/* Why a setting was refused before it was costed, or a candidate after. */
typedef enum mp_reject_reason {
    MP_REJECT_TP_HEADS,      /* t does not divide heads / kv_heads */
    MP_REJECT_TP_DOMAIN,     /* t larger than the scale-up domain (NVLink) */
    MP_REJECT_CP_SEQ,        /* seq does not split into 2c chunks (or cp for t5/bert) */
    MP_REJECT_LAYERS,        /* p*v does not divide the layers */
    MP_REJECT_BATCH,         /* global batch not a multiple of d (or of b*d) */
    MP_REJECT_INTERLEAVE,    /* interleaving needs m % p == 0 */
    MP_REJECT_SP,            /* SP needs seq/c divisible by t */
    MP_REJECT_CP_A2A_HEADS,  /* cp_comm_type a2a: t*c does not divide heads / kv_heads */
    MP_REJECT_OTHER,         /* refused by mp_config_check for another reason */
    MP_REJECT_MEMORY,        /* costed in full: does not fit */
    MP_REJECT_COUNT
} mp_reject_reason;

/* The JSON key of a reason ("tp_heads", ...) and a phrase for people. */
const char *mp_reject_key(mp_reject_reason r);
const char *mp_reject_phrase(mp_reject_reason r);

typedef struct mp_search_counts {
    int64_t considered;               /* complete candidates that passed the structural rules */
    int64_t rejected[MP_REJECT_COUNT];/* structural: settings refused (not multiplied out) */
    int64_t pruned_memory;            /* memory lower bound above capacity */
    int64_t pruned_time;              /* time lower bound not better than the k-th best */
    int64_t estimated;                /* costed in full */
    int64_t closest_costed;           /* nothing fits: of the memory-pruned, those costed
                                         for the closest plan (not in estimated) */
    int64_t closest_unproven;         /* nothing fits: searches (one per precision) whose
                                         closest plan is not shown the least over of all
                                         (some candidate never costed is bounded below it) */
    int64_t fitting;                  /* costed and fitting */
    int64_t split;                    /* given the stage split (ILP/DP) */
    int64_t split_uneven;             /* ... where an uneven split or mixed recompute won */
    int64_t simulated;                /* re-ranked by the simulator */
    int64_t sim_failed;               /* the simulator refused or failed: these keep
                                         their estimate as the step they rank by */
    char sim_failure[512];            /* the first of those failures, one line
                                         ("field: message"; "" when none) */
    double seconds;                   /* wall time of the search */
} mp_search_counts;

typedef struct mp_search_options {
    mp_config base;          /* model, hw, training; the parallel values of fixed dimensions */
    uint32_t fixed;          /* MP_FIX_* */
    int top_k;               /* plans to return (1..100; 0 = 5) */
    bool tp_cross_domain;    /* allow t beyond the scale-up domain */
    bool no_split;           /* skip the stage split (even split, uniform recompute) */
    bool no_simulate;        /* skip the simulator's re-ranking */
    int64_t split_work_limit;/* GLPK work (simplex iterations + nodes) per plan
                                (<= 0: a share of MP_SEARCH_SPLIT_WORK for the whole search) */
    bool no_prune;           /* cost every candidate (tests: the bounds change nothing) */
    bool no_split_memo;      /* split afresh when a pass for distinct plans splits a
                                candidate again (tests: reusing the split changes nothing) */
    bool zero_sharding;      /* --runtime any: also search ZeRO-2 and ZeRO-3/FSDP (pp = 1;
                                run by FSDP or DeepSpeed, not Megatron-LM) and the V
                                schedules; a fixed zero or schedule is searched anyway */
    /* allowed[i]: the values dimension MP_FIX bit i may take (n = 0: any) */
    mp_search_set allowed[MP_FIX_DIMS];
    /* only what Megatron-LM runs: its schedules (1F1B, interleaved) and stage
     * splits and per-layer recompute in the forms its flags express
     * (mp_search_megatron_runs); a split it cannot express keeps the even one */
    bool megatron_runtime;
    /* the training precisions to compare (mp_dtype values; --fix
     * precision=bf16|fp8): with two or more, one search per precision and
     * the best plans of all (search/precision.c); else base's precision */
    mp_search_set precisions;
    bool precisions_where_supported; /* leave out those the hardware cannot run (search
                                        over hardware) instead of refusing them */
    /* called now and then with the fraction done (0..1); may be NULL */
    void (*progress)(void *user, double fraction);
    void *progress_user;
} mp_search_options;

typedef struct mp_search_plan {
    mp_config config;        /* recompute = the most used choice when mixed */
    mp_estimate est;         /* with the plan's split */
    mp_estimate est_even;    /* Megatron's even split, uniform recompute */
    mp_plan *plan;           /* stages + layer_recompute (owned) */
    bool uneven;             /* the split or the recompute differs from the even/uniform one */
    bool mixed_recompute;
    /* the split's form (mp_split_label): "even", "account-for",
     * "first/last flags" or "layout" */
    const char *split_method;
    /* the ILP/DP solver that split it: "glpk", "dp", "exhaustive"; NULL when
     * none ran (a given or proposed split, T5, the V schedules) */
    const char *split_solver;
    double split_gap;        /* optimality gap of the split's slowest stage */
    double split_max_stage;  /* seconds per micro-batch of the slowest stage */
    int64_t split_work;      /* GLPK work the split used (simplex iterations + nodes) */
    bool simulated;
    double sim_step;         /* seconds, when simulated */
    double rank_step;        /* what the ranking used: sim_step or est.time.step */
} mp_search_plan;

typedef struct mp_search_result {
    int n;                   /* plans, best first (0 when nothing fits) */
    mp_search_plan *plans;
    mp_search_counts counts;
    /* when nothing fits: the candidate closest to fitting (least over capacity) */
    bool have_closest;
    mp_config closest;
    mp_estimate closest_est;
} mp_search_result;

/* The search up to the simulator: enumerate, bound, cost, give the best
 * their stage split and keep the pool of the max(k, 16) best by the estimate
 * after it (search_rank.c); no two of them the same plan (mp_search_same_plan:
 * a split that makes a candidate one already listed drops it for the next
 * distinct one). The plans come in the order of that estimate with rank_step
 * = est.time.step, not simulated, and counts.seconds 0: mp_search
 * (search/driver.h) simulates and re-ranks them and keeps the first k, and is
 * what a search's user calls. Statuses as mp_search's. */
mp_status mp_search_estimated(const mp_search_options *opt, mp_search_result *result,
                              mp_error *err);
void mp_search_result_free(mp_search_result *r);

/* The stage split of one configuration: fills plan (config, stages,
 * layer_recompute) from the ILP/DP, allowing every recompute choice when
 * free_recompute, else only the config's. Returns the estimate with the plan
 * in est. Used by search and explain. */
mp_status mp_search_split(const mp_config *c, bool free_recompute, int64_t work_limit,
                          mp_plan *plan, mp_estimate *est, mp_search_plan *info, mp_error *err);

/* The fewest plans search re-ranks (by simulation), whatever --top shows. */
#define MP_SEARCH_RERANK_MIN 5

/* Whether Megatron-LM's flags express plan's schedule, stage split and
 * per-layer recompute (the forms src/planner/megatron.c writes without a
 * caveat): 1F1B or interleaved; with vpp == 1 the middle stages even (the
 * first and last may differ), with vpp > 1 all even; recompute uniform, or
 * full on the first N blocks of every stage and none on the rest (--recompute-
 * method block). why (may be NULL) names what does not fit. */
bool mp_search_megatron_runs(const mp_plan *plan, const char **why);

/* GLPK's work (simplex iterations + branch-and-bound nodes) for all the stage
 * splits of one search, and the least one plan gets. Work, not seconds: the
 * winner must not depend on the machine's load. About 0.2 s of CPU on the
 * benchmark machine (docs/benchmarks.md), within the search's one-second budget;
 * 3000 named the same winners and splits for the benchmark's searches. */
#define MP_SEARCH_SPLIT_WORK 2000
#define MP_SEARCH_SPLIT_MIN_WORK 200

#endif
