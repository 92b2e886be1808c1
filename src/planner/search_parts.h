/* search_parts.h — what the search's files (search_*.c) share: the candidate
 * list, the per-block cache, the top-k and the enumeration's state. Private to
 * them; other areas use planner/search.h. */
#ifndef MP_SEARCH_PARTS_H
#define MP_SEARCH_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "planner/cost.h"
#include "planner/cost_memo.h"
#include "planner/search.h"
#include "planner/search_internal.h"

typedef struct cand {
    int32_t t, c, p, v, b;
    int64_t d;
    uint8_t sp, rc, dist_opt, sched, dp_overlap, tp_overlap; /* dist_opt: the ZeRO stage 0..3 */
    uint8_t disp;    /* MoE: the token dispatcher */
    /* selective only: the modules it recomputes (1u << mp_recompute_module;
     * 0 = base's, Megatron's default core_attn unless given), one of the
     * search's sets (mp_search_selective_sets); MP_SEARCH_RCM_ANY: each of
     * them, the candidate bounded by the least of their bounds and costed
     * set by set (search_rank.c); 0 under none and full */
    uint8_t rcm;
    int32_t ep, etp; /* MoE: expert degrees (0 for a dense model) */
    double lb_time, lb_mem;
} cand;

typedef struct cand_vec {
    cand *v;
    size_t n, cap;
    bool oom;
} cand_vec;

typedef struct block_info {
    uint64_t key;           /* 0 = empty slot */
    double compute;         /* fwd + bwd compute of the cheapest block kind, no comm */
    double fwd;             /* the least forward compute of a block kind, no comm */
    /* under a split backward (B the input gradient, W the weights'), the
     * least of a block kind's f + 2B - W and f + B - W: what the DualPipe
     * and ZB-H1 fills are made of (cost.c's ramps) */
    double split_fbbw, split_fbw;
    double recompute[MP_RECOMPUTE_COUNT]; /* extra compute of each recompute choice */
    double act[MP_RECOMPUTE_COUNT];       /* bytes stashed by the smallest block kind */
    double act_none_max;    /* the largest block's no-recompute bytes (re-materialised) */
    /* selective by module set: sel_rec[k] and sel_act[k] are recompute[]
     * and act[] of selective recompute of sel_mask[k] (the search's sets,
     * block_cache's); recompute[SELECTIVE] and act[SELECTIVE] hold the least
     * of them (a bound for every set: MP_SEARCH_RCM_ANY's) */
    int n_sel;
    uint8_t sel_mask[MP_SEARCH_SEL_MAX];
    double sel_rec[MP_SEARCH_SEL_MAX], sel_act[MP_SEARCH_SEL_MAX];
} block_info;

/* Of bi, the extra compute and the stashed bytes of x's recompute (its
 * modules' under selective). */
static inline int mp_search_sel_index(const block_info *bi, uint8_t rcm)
{
    for (int k = 0; k < bi->n_sel; k++)
        if (bi->sel_mask[k] == rcm) return k;
    return -1; /* MP_SEARCH_RCM_ANY, or a set not the cache's: the least */
}
static inline double mp_search_bi_rec(const block_info *bi, const cand *x)
{
    int k = x->rc == MP_RECOMPUTE_SELECTIVE ? mp_search_sel_index(bi, x->rcm) : -1;
    return k >= 0 ? bi->sel_rec[k] : bi->recompute[x->rc];
}
static inline double mp_search_bi_act(const block_info *bi, const cand *x)
{
    int k = x->rc == MP_RECOMPUTE_SELECTIVE ? mp_search_sel_index(bi, x->rcm) : -1;
    return k >= 0 ? bi->sel_act[k] : bi->act[x->rc];
}

typedef struct block_cache {
    block_info *slot;
    size_t cap, n;
    const mp_config *base;
    int n_sel;                            /* the search's selective module sets */
    uint8_t sel_mask[MP_SEARCH_SEL_MAX];
    bool oom;
} block_cache;

typedef struct top_entry {
    cand x;
    mp_estimate est;
} top_entry;

typedef struct top_k {
    top_entry *e;
    int n, k;
} top_k;

/* The pipeline ranks' terms a candidate's memory bound keeps (bound_parts),
 * and the deepest pipeline whose ranks it bounds one by one. */
#define MP_SEARCH_RANK_TERMS 4
#define MP_SEARCH_RANKS_MAX 256

/* The lower bounds of a candidate as parts its expert settings (ep, etp,
 * dispatcher) leave alone: the 36 expert splits of a DeepSeek-V3 candidate
 * share them, and only the expert weights' bytes differ among them. */
typedef struct bound_parts {
    double static_bytes; /* rank 0's dense weights, grads and optimizer states */
    double stash;        /* its stashed activations */
    double stash_extra;  /* ... and what rank 0's own blocks add (search_bounds.c) */
    bool alt0;           /* a default uneven split: rank 0's bound from its own blocks, */
    double alt_static, alt_moe_min, alt_stash; /* ... its static, MoE blocks, stash */
    double moe_min;      /* the fewest MoE blocks it holds */
    double moe_avg;      /* the MoE blocks per rank on average: the busiest holds as many */
    double block_static; /* the fewest dense (non-expert) bytes of one block */
    /* each pipeline rank where its blocks are counted (every split but
     * T5's, search_bounds.c rank_counts): rank r holds at least rank_a[j] +
     * rank_moe[j] * one MoE block's expert bytes, for the ranks kept (those
     * no other kept one exceeds in both; search_bounds.c) */
    int n_ranks;
    double rank_a[MP_SEARCH_RANK_TERMS], rank_moe[MP_SEARCH_RANK_TERMS];
    double lb_time;      /* the time bound (the expert GEMMs in it at peak) */
} bound_parts;

/* Configurations the bounds hand to the memory functions, made once per
 * search: base with a candidate's sharding, and with its expert split. */
typedef struct bound_scratch {
    mp_config sharded, experts;
    /* the last (pp, vpp) whose rank-0 blocks were counted (search_bounds.c
     * rank0_blocks), which depend on them and on whether the schedule is a
     * V one or DualPipe alone: one entry for each of those two kinds of
     * schedule (the enumeration alternates them innermost), pp 0 when none */
    int64_t r0_p[2], r0_v[2];
    double r0_blocks[2], r0_min_chunk[2];
    bool r0_exact[2];
    double send_tokens; /* the tokens of the stages' boundary activation, at least */
    /* each rank's blocks and MoE blocks (search_bounds.c rank_counts), by
     * the same two kinds of schedule, for the (pp, vpp) last counted (pp 0
     * when none; rk_ranks = pp where they were counted, else 0): in all,
     * and for the two-chunk schedules (V, DualPipe) by chunk; and which
     * edges each holds (1 the embedding, 2 the head, 4 a stage not the last) */
    int64_t rk_p[2], rk_v[2], rk_ranks[2];
    int32_t rk_blocks[2][MP_SEARCH_RANKS_MAX], rk_moe[2][MP_SEARCH_RANKS_MAX];
    int32_t rk2_blocks[MP_SEARCH_RANKS_MAX][2], rk2_moe[MP_SEARCH_RANKS_MAX][2];
    uint8_t rk_edges[2][MP_SEARCH_RANKS_MAX];
} bound_scratch;

/* Candidates one search considers at most. Real spaces hold 10^4-10^5 (175B
 * on 1024 GPUs: ~10^4); a GPU count and global batch with thousands of
 * divisors each multiply into 10^8 and more (minutes, gigabytes). 2^21 keeps
 * the candidate list near 120 MB and the enumeration within a second or two. */
#define MAX_CANDIDATES (1 << 21)
/* A mixture of experts multiplies the space by its expert settings (ep, etp,
 * dispatcher: ~36x for DeepSeek-V3); its keep list stays small because most
 * of them fail the memory bound. */
#define MAX_CANDIDATES_MOE (1 << 23)

/* Memory-pruned candidates kept for the "nothing fits" answer. */
#define CLOSEST_KEPT 64

typedef struct enum_ctx {
    const mp_search_options *opt;
    const mp_config *base;
    mp_search_counts *counts;
    block_cache bc;
    bound_scratch scratch;  /* the bounds' configurations */
    int64_t *expert_degrees; /* MoE: the divisors of the experts, ascending */
    int n_expert_degrees;
    /* MoE: mp_search_expert_bytes of the (t, c, d) below, by sharding (0-4),
     * expert degree and etp (1 or t): 5 * n_expert_degrees * 2 values, < 0
     * while not computed. They depend on those alone (the bounds' sharded
     * configuration holds t, c, d and the sharding), and the enumeration
     * asks for them again for every sp, recompute and schedule. */
    double *expert_bytes;
    int32_t eb_t, eb_c;
    int64_t eb_d;
    cand_vec keep;        /* survivors of the memory bound */
    cand_vec closest;     /* memory-pruned with the smallest bounds (for "nothing fits") */
    size_t closest_worst; /* of closest, once full: the first with the largest bound */
    double block_params_min, emb_params;
    mp_error first_refusal;
    bool have_refusal;
    bool keep_all;        /* the bounds check: keep memory-pruned candidates too */
    bool too_many;        /* MAX_CANDIDATES reached: the enumeration stopped */
} enum_ctx;

/* search_bounds.c: an MoE model as the bounds see it (its blocks without
 * their MLPs); the per-block numbers of (t, c, b, sp), computed once; the
 * two lower bounds of x (lb_mem, lb_time): the parts, the expert weights'
 * bytes of x's ep and etp, and the two set in x from them */
void mp_search_moe_strip(mp_model *m);
const block_info *mp_search_block_get(block_cache *bc, int32_t t, int32_t c, int32_t b, bool sp);
void mp_search_bound_scratch_init(const mp_config *base, bound_scratch *bs);
/* A second time bound for an MoE candidate x, from the busiest rank's
 * average share of the blocks with the experts' exposed dispatch and
 * combine (comm: one MoE block's, forward and backward, as
 * mp_search_expert_comm gives it for the candidate applied, cfg); 0 where
 * it does not apply. Computed only for the candidates about to be costed
 * (search_rank.c), the communication cached by what it depends on. */
double mp_search_expert_comm(const mp_config *cfg);
double mp_search_expert_time_bound(const mp_config *base, const block_info *bi, const cand *x,
                                   double comm);
void mp_search_bound_parts(const mp_config *base, const block_info *bi, double block_params_min,
                           double emb_params, bound_scratch *bs, const cand *x, bound_parts *bp);
/* (the bytes of one MoE block's local experts) */
double mp_search_expert_bytes(const mp_config *base, bound_scratch *bs, const bound_parts *bp,
                              const cand *x);
void mp_search_bounds_set(const mp_config *base, const bound_parts *bp, double expert_bytes,
                          cand *x);

/* search_enumerate.c: the candidate list; base with x's settings; every
 * candidate of the space into e->keep (or e->closest when over memory) */
void mp_search_cand_push(cand_vec *cv, const cand *x);
void mp_search_cand_apply(const mp_config *base, const cand *x, mp_config *out);
void mp_search_init_ctx(enum_ctx *e, const mp_search_options *opt, mp_search_counts *counts);
void mp_search_free_ctx(enum_ctx *e);
void mp_search_enumerate(enum_ctx *e);
/* x's memory bound, computed again (the costing's, for one module set of a
 * candidate that stands for them all: its own, not the least of theirs) */
double mp_search_mem_bound(enum_ctx *e, const cand *x);

/* search_topk.c: the k-th best step so far (INFINITY until k are kept);
 * insertion keeping the k best; qsort orders by the time and memory bounds */
double mp_search_top_threshold(const top_k *t);
void mp_search_top_insert(top_k *t, const cand *x, const mp_estimate *e);
int mp_search_cmp_lb_time(const void *a, const void *b);
int mp_search_cmp_lb_mem(const void *a, const void *b);
/* The kept candidates in the order of a stable sort by lb_time
 * (mp_search_cmp_lb_time, ties in the enumeration's order), without moving
 * them or sorting what the costing never reaches: their indices by buckets
 * of lb_time, each sorted when first asked for (the costing stops at the
 * first bound that cannot win; DeepSeek-V3 keeps 10^6, costs 10^4). */
typedef struct lb_order {
    uint32_t *idx;          /* keep indices, bucket by bucket */
    size_t *start;          /* nb + 1: where each bucket begins in idx */
    struct sort_rec *tmp;   /* room for the widest bucket */
    size_t n, nb, sorted;   /* buckets [0, sorted) are in order */
    double lo, scale;       /* bucket of lb: (lb - lo) * scale */
} lb_order;
/* false when out of memory (o empty) */
bool mp_search_order_init(lb_order *o, const cand_vec *cv);
/* the keep index at position i of the order (i < n, asked in increasing order) */
size_t mp_search_order_at(lb_order *o, const cand_vec *cv, size_t i);
void mp_search_order_free(lb_order *o);

/* search_shared.c: the training and the fixed settings, checked before
 * enumerating (err names the setting at fault) */
mp_status mp_search_check_shared(const mp_search_options *opt, mp_error *err);

#endif
