/* search_internal.h — pieces of the search shared with explain.c and the
 * tests; not a contract for other areas (they use planner/search.h). */
#ifndef MP_SEARCH_INTERNAL_H
#define MP_SEARCH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "planner/search.h"

/* One candidate's parallel settings. */
typedef struct mp_search_cand_view {
    int32_t t, c, p, v, b;
    int64_t d;
    uint8_t sp, rc, dist_opt, sched, dp_overlap, tp_overlap; /* dist_opt: ZeRO stage 0..3 */
    int32_t ep, etp; /* MoE only (0: a dense model's) */
    uint8_t dispatcher;
    uint8_t rcm;     /* selective only: its modules (0: base's; MP_SEARCH_RCM_ANY: base's) */
} mp_search_cand_view;

/* A candidate's rcm that stands for every module set of the search
 * (search_parts.h): the ranking costs each. */
#define MP_SEARCH_RCM_ANY 0xFF

/* The module sets selective recompute is searched with, into out: set 0 is
 * base's (0: Megatron's default core_attn), the others (masks of
 * 1u << mp_recompute_module) a ladder of the modules Megatron-Core accepts
 * for base's model, less those another set beats on one block
 * (search_enumerate.c, docs/design.md §5); base's alone when base names its
 * modules (--recompute-modules: they are fixed). A fixed recompute
 * (selective) leaves the modules free. Returns how many
 * (1..MP_SEARCH_SEL_MAX). */
int mp_search_selective_sets(const mp_config *base, uint8_t out[MP_SEARCH_SEL_MAX]);

/* base with the candidate's parallel settings. */
void mp_search_apply(const mp_config *base, const mp_search_cand_view *x, mp_config *out);
/* Whether pp x vpp stages need a proposed layout: base gives none, Megatron's
 * default split has none (mp_stage_split_ok), and a layout can (not t5, at
 * most one stage per layer). */
bool mp_search_needs_layout(const mp_config *base, int64_t pp, int64_t vpp);
/* Whether pp x vpp stages (vpp > 1) need Megatron's account-for flags: base
 * gives no split, the default split has none, and L + 2 stages leave the
 * first and last chunk the embedding and the loss alone (*e = *l = true), or
 * pp*vpp divides L + 1 (the loss counted: *e = false, *l = true). */
bool mp_search_needs_account(const mp_config *base, int64_t pp, int64_t vpp, bool *e, bool *l);
/* Sets p's split for pp x vpp stages where Megatron's default has none:
 * the account-for flags (mp_search_needs_account), else a proposed layout
 * (mp_search_needs_layout); leaves p as it is otherwise. */
void mp_search_set_split(const mp_config *base, int64_t pp, int64_t vpp, mp_parallel *p);

/* The fewest plans mp_search_estimated splits and returns, the pool
 * mp_search simulates whatever top_k is (search_rank.c): the list for a
 * smaller top_k is then the start of a larger one's up to this size. The
 * simulator reorders the estimate's: with a pool of 10, the first 10 differed
 * from a pool of 16's in 9 of 13 searches, from rank 5 or 6 on; a pool of 16
 * lists the first 10 of a pool of 24 in 11 of 13 (GPT-3 175B's near-ties
 * from rank 6 on, GPT-3 13B's rank 9) and the first 5 in all 13. */
#define MP_SEARCH_POOL_MIN 16

/* Whether two of search's plans are the same plan in everything its output
 * and plan file say: the parallel settings, precision, the stage layout and
 * the recompute each layer runs (a split that leaves selective recompute
 * nothing to recompute is recompute none). The top-k holds no two such. */
bool mp_search_same_plan(const mp_search_plan *a, const mp_search_plan *b);

/* Enumerates every candidate of opt's space, costs each in full and counts
 * where a lower bound exceeds the estimate (memory: the peak; time: the
 * step). Both counts must be 0 for the pruning to be exact. */
mp_status mp_search_check_bounds(const mp_search_options *opt, int64_t *checked,
                                 int64_t *mem_violations, int64_t *time_violations,
                                 double *worst_mem_ratio, mp_error *err);

#endif
