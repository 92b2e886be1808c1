/* search_rank.c — the search up to the simulator (search.h, docs/design.md §5).
 *
 * 1. Enumerate the structurally valid candidates (cheap dimensions outermost)
 *    and give each two lower bounds from cached per-block numbers: memory
 *    (the first pipeline rank's weights, grads, optimizer states and stashed
 *    activations under the even split, the estimate's rank 0 minus its
 *    buffers, with its allocator's fragmentation; for MoE the larger of that,
 *    the busiest rank's MoE blocks and, where the stages are counted, each
 *    other rank's own bytes: search_bounds.c argues each a lower bound) and time (the slowest rank's compute and recompute over m
 *    micro-batches plus the fill it cannot avoid, without any communication).
 *    (search_enumerate.c, search_bounds.c)
 * 2. Drop those whose memory bound exceeds the capacity; cost the rest in
 *    full in order of their time bound (lb_order: buckets sorted as reached),
 *    keeping the k best that fit, and stop at the first bound that cannot
 *    beat the k-th best: every later one is pruned by time. A candidate
 *    reached is first held against two tighter bounds (MoE's exposed
 *    dispatch, then mp_estimate_step_floor from its blocks' item costs) and
 *    set aside, counted as pruned by time, when one cannot beat it.
 * 3. Give the best the stage split and per-layer recompute (split.h) and
 *    keep it where the estimate improves (search_split.c), until the pool
 *    (below) holds the P best plans by the estimate after the split. A
 *    split that makes a candidate the same plan as one before it drops it;
 *    step 2 then resumes with a deeper threshold, and step 3 runs again,
 *    taking the splits the last pass made from a memo (split_plan_memo).
 * The re-ranking by the simulator sits a layer above, in src/search/driver.c:
 * it simulates the whole pool and shows the first k.
 *
 * The pool. Its size is P = max(k, MP_SEARCH_POOL_MIN): the same for every
 * --top up to MP_SEARCH_POOL_MIN, so that the list for --top 3 is the first 3
 * of the list for --top 10 (before, the pool was sized from --top and chosen
 * by the even split's estimate: GPT-3 175B's --top 6 listed a plan, tp 4 pp 8
 * with an uneven split at 17.93 s, that --top 5 never split; DeepSeek-V3's
 * pp 8 1F1B plan at 28.09 s was likewise missing from --top 3..5). And it is
 * chosen by the estimate after the split, not before: the split lowers a
 * plan's estimate by up to SEARCH_SPLIT_GAIN (measured), so every candidate
 * whose even estimate is within that margin of the P-th best split one is
 * costed (the time bounds prune by the threshold over (1 - gain)) and split.
 */
#include "planner/search_parts.h"
#include "planner/search_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why the cost model refused candidates, and the one nearest to fitting:
 * the answer when nothing fits. */
typedef struct refusals {
    bool have_closest;       /* res->closest holds the least-over estimate seen */
    /* while nothing fits: the least memory bound of what was pruned and
     * never costed beside the closest list (cost_sets' module sets) */
    double uncosted_lb;
    bool have_est_refusal;   /* the cost model refused a candidate the rules passed */
    mp_error est_refusal;
} refusals;

/* After the enumeration: MP_OK when some candidate is left to cost, else the
 * search's answer (out of memory, too many candidates, nothing can run). */
static mp_status enumeration_verdict(const enum_ctx *e, const mp_search_options *opt,
                                     mp_error *err)
{
    const mp_config *base = &opt->base;
    if (e->keep.oom || e->closest.oom || e->bc.oom)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the search");
    if (e->too_many)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                            "absurdly large search: more than %d candidates (%lld GPUs and a "
                            "global batch of %lld have too many divisors); fix some settings "
                            "(--micro-batch, --pp, --tp) or search a smaller case",
                            base->model.moe.experts > 0 ? MAX_CANDIDATES_MOE : MAX_CANDIDATES,
                            (long long)base->training.gpus,
                            (long long)base->training.global_batch);
    if (e->keep.n > 0 || e->closest.n > 0)
        return MP_OK;
    /* Nothing can run. With settings fixed by the user, that is their
     * input's fault (MP_EINPUT, naming the first refusal); otherwise the
     * model, GPUs and batch simply admit no split (MP_ENOFIT). */
    bool user = opt->fixed != 0;
    if (e->have_refusal && err) {
        *err = e->first_refusal;
        if (!user) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "no split of %lld GPUs can run; e.g. %.300s",
                     (long long)base->training.gpus, e->first_refusal.msg);
            snprintf(err->msg, sizeof err->msg, "%s", msg);
        }
    } else {
        mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                     "no configuration of %lld GPUs can run this model with these settings",
                     (long long)base->training.gpus);
    }
    mp_status st = user ? MP_EINPUT : MP_ENOFIT;
    if (err) err->code = st;
    return st;
}

/* Estimates cfg (cand x applied) in full; MP_OK with est, or the cost
 * model's refusal (remembered in rf when it is the first). The memo (NULL:
 * none) keeps the per-item costs the candidates share. */
static mp_status cost_applied(const mp_config *cfg, mp_cost_memo *memo, mp_estimate *est,
                              refusals *rf)
{
    mp_error e2;
    mp_error_clear(&e2);
    mp_status st = mp_estimate_config_memo(cfg, NULL, memo, est, &e2);
    if (st != MP_OK && !rf->have_est_refusal) {
        rf->have_est_refusal = true;
        rf->est_refusal = e2;
    }
    return st;
}

/* cost_applied of cand x, applied to base into cfg. */
static mp_status cost_one(const mp_config *base, const cand *x, mp_cost_memo *memo,
                          mp_config *cfg, mp_estimate *est, refusals *rf)
{
    mp_search_cand_apply(base, x, cfg);
    return cost_applied(cfg, memo, est, rf);
}

static void note_closest(mp_search_result *res, refusals *rf, const mp_config *cfg,
                         const mp_estimate *est)
{
    if (!rf->have_closest || est->over_bytes < res->closest_est.over_bytes) {
        rf->have_closest = true;
        res->closest = *cfg;
        res->closest_est = *est;
    }
}

/* One MoE block's exposed dispatch and combine (mp_search_expert_comm),
 * cached by what they depend on: the expert split and dispatcher, and the
 * tokens and rank order of x's (t, c, d, b, sp); not by pp (outermost in
 * the rank order), vpp, recompute, sharding or schedule. */
typedef struct comm_entry {
    int64_t d;
    int32_t t, c, b, ep, etp;
    uint8_t sp, disp, used;
    double comm;
} comm_entry;
typedef struct comm_cache {
    comm_entry *slot; /* NULL: no cache, each computed */
    size_t n, cap;
} comm_cache;

static uint64_t comm_hash(const comm_entry *x)
{
    return (uint64_t)x->t * 1000003u ^ (uint64_t)x->c * 998244353u ^
           (uint64_t)x->d * 0x9E3779B97F4A7C15ull ^ (uint64_t)x->b * 7919u ^
           (uint64_t)x->ep * 104729u ^ (uint64_t)x->etp * 15485863u ^ (uint64_t)x->sp << 61 ^
           (uint64_t)x->disp << 58;
}

static size_t comm_home(uint64_t h, size_t cap)
{
    return (size_t)(h * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
}

/* Doubles the table (up to COMM_CACHE_MAX slots); false when it cannot. */
#define COMM_CACHE_MAX (1u << 22)
static bool comm_grow(comm_cache *cc)
{
    size_t cap = cc->cap * 2;
    if (cap > COMM_CACHE_MAX) return false;
    comm_entry *s = calloc(cap, sizeof *s);
    if (!s) return false;
    for (size_t i = 0; i < cc->cap; i++) {
        if (!cc->slot[i].used) continue;
        size_t j = comm_home(comm_hash(&cc->slot[i]), cap);
        while (s[j].used) j = (j + 1) & (cap - 1);
        s[j] = cc->slot[i];
    }
    free(cc->slot);
    cc->slot = s;
    cc->cap = cap;
    return true;
}

static double comm_of(comm_cache *cc, const mp_search_options *opt, const cand *x)
{
    size_t j = 0;
    /* DeepSeek-V3 at its batch of 15360 (dozens of micro-batch sizes) asks
     * for ~10^5 keys: the table grows rather than stop caching */
    if (cc->slot && cc->n * 2 >= cc->cap) comm_grow(cc);
    comm_entry key = {x->d, x->t, x->c, x->b, x->ep, x->etp, x->sp, x->disp, 1, 0.0};
    if (cc->slot) {
        j = comm_home(comm_hash(&key), cc->cap);
        for (;; j = (j + 1) & (cc->cap - 1)) {
            const comm_entry *s = &cc->slot[j];
            if (!s->used) break;
            if (s->d == x->d && s->t == x->t && s->c == x->c && s->b == x->b && s->ep == x->ep &&
                s->etp == x->etp && s->sp == x->sp && s->disp == x->disp)
                return s->comm;
        }
    }
    mp_config cfg;
    mp_search_cand_apply(&opt->base, x, &cfg);
    double comm = mp_search_expert_comm(&cfg);
    if (cc->slot && cc->n * 2 < cc->cap) { /* a full table stops caching, still right */
        cc->slot[j] = (comm_entry){x->d, x->t, x->c, x->b, x->ep, x->etp, x->sp, x->disp, 1, comm};
        cc->n++;
    }
    return comm;
}

/* The blocks' sums of mp_estimate_block_sums by what they depend on among
 * a candidate's settings: those the memo's key keeps (mp_cost_memo_key;
 * the others a search takes from its base): t, c, b, sp, the TP overlap, the
 * expert split and dispatcher, and whether the backward's W is a pass of its
 * own (a split-backward schedule with pp > 1). */
typedef struct floor_entry {
    int32_t t, c, b, ep, etp;
    uint8_t sp, tpo, disp, split_w, used, applies;
    uint8_t rcm; /* selective's modules (its sums[SELECTIVE]) */
    double sums[MP_RECOMPUTE_COUNT];
} floor_entry;
typedef struct floor_cache {
    floor_entry *slot; /* NULL: no cache, each computed */
    size_t n, cap;
} floor_cache;

#define FLOOR_CACHE_MAX (1u << 20)

static uint64_t floor_hash(const floor_entry *k)
{
    uint64_t h = 1469598103934665603ull;
    const int64_t v[] = {k->t, k->c, k->b, k->ep, k->etp, k->sp, k->tpo, k->disp, k->split_w, k->rcm};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        h = (h ^ (uint64_t)v[i]) * 0x100000001b3ull;
    return h * 0x9E3779B97F4A7C15ull;
}

static bool floor_same(const floor_entry *a, const floor_entry *b)
{
    return a->t == b->t && a->c == b->c && a->b == b->b && a->ep == b->ep && a->etp == b->etp &&
           a->sp == b->sp && a->tpo == b->tpo && a->disp == b->disp && a->split_w == b->split_w &&
           a->rcm == b->rcm;
}

static void floor_grow(floor_cache *fc)
{
    size_t cap = fc->cap ? fc->cap * 2 : 4096;
    if (cap > FLOOR_CACHE_MAX) return;
    floor_entry *s = calloc(cap, sizeof *s);
    if (!s) return;
    for (size_t i = 0; i < fc->cap; i++) {
        if (!fc->slot[i].used) continue;
        size_t j = (size_t)(floor_hash(&fc->slot[i]) >> 20) & (cap - 1);
        while (s[j].used) j = (j + 1) & (cap - 1);
        s[j] = fc->slot[i];
    }
    free(fc->slot);
    fc->slot = s;
    fc->cap = cap;
}

/* mp_estimate_step_floor of cfg (cand x applied), its block sums cached:
 * MP_OK with the floor, or the configuration check's refusal. */
static mp_status floor_of(floor_cache *fc, const cand *x, const mp_config *cfg, double *floor)
{
    mp_error e2;
    *floor = 0.0;
    mp_status st = mp_config_check(cfg, &e2);
    if (st != MP_OK) return st;
    if (fc->n * 2 >= fc->cap) floor_grow(fc);
    floor_entry key = {x->t, x->c, x->b, x->ep, x->etp, x->sp, x->tp_overlap, x->disp,
                       mp_schedule_splits_backward((mp_schedule_kind)x->sched) && x->p > 1, 1,
                       0, x->rc == MP_RECOMPUTE_SELECTIVE ? x->rcm : 0, {0}};
    size_t j = 0;
    if (fc->slot) {
        for (j = (size_t)(floor_hash(&key) >> 20) & (fc->cap - 1); fc->slot[j].used;
             j = (j + 1) & (fc->cap - 1))
            if (floor_same(&fc->slot[j], &key)) {
                if (fc->slot[j].applies) *floor = mp_estimate_floor_of_sums(cfg, fc->slot[j].sums);
                return MP_OK;
            }
    }
    key.applies = mp_estimate_block_sums(cfg, NULL, key.sums);
    if (key.applies) *floor = mp_estimate_floor_of_sums(cfg, key.sums);
    if (fc->slot && fc->n * 2 < fc->cap) { /* a full table stops caching, still right */
        fc->slot[j] = key;
        fc->n++;
    }
    return MP_OK;
}

/* Step 2's state between passes: what is left to cost (the MoE bound's
 * pruned ones and the tail after the first bound that lost), the caches. */
typedef struct cost_pass {
    lb_order order;       /* e->keep in the order of the time bound */
    size_t next;          /* the position in it the last pass stopped at */
    int64_t tail_pruned;  /* counted as pruned by time when it stopped */
    size_t *deferred;     /* e->keep.v indices pruned by the MoE bound */
    uint8_t *deferred_rcm; /* ... the module set pruned (MP_SEARCH_RCM_ANY: all) */
    double *deferred_lb;  /* ... and that bound */
    size_t n_deferred, cap_deferred;
    bool oom;
    mp_cost_memo *memo;   /* NULL: estimates uncached */
    comm_cache comm;
    floor_cache floors;
    double gain;          /* the most split_gain gives (0 under --no-split) */
} cost_pass;

/* How much the stage split and per-layer recompute (split_plan) lower a
 * plan's even-split estimate, at most, as measured. Over the first 100
 * plans by the even estimate, split: GPT-3 175B on 1024 A100s 3.7% at most,
 * Llama 3 70B on 1024 H100s 5.1%, Llama 2 70B 5.1%, Llama 3 405B 3.6%,
 * Mixtral 8x7B on 64 1.6%, 8x22B 1.4%, Qwen3-235B 2.7%, DeepSeek-V3 on 2048
 * 5.4%; a full-recompute plan the uneven split lets run without recompute
 * gains more (Megatron 1T on 4096: 25%; Llama 3 8B on 64: 11%; GPT-3 13B 7%).
 * Not a bound, then: the margin against which the pool is drawn. Over 13
 * searches (those models and Megatron 18.4B, 1T, GPT-3 13B, Llama 3 8B), a
 * margin of 0 lost the winner in 4 (Llama 3 70B's 3.860 s plan, split
 * unevenly, left for a 3.881 s one; Llama 2 70B, GPT-3 13B, Megatron 18.4B
 * likewise), 2% and up kept every winner, and 5% listed the top five a
 * margin of 10% lists in 12 of 13 (3%: 11; 2%: 9). Its cost, in CPU time
 * against no margin with the same pool: GPT-3 175B 0.32 -> 0.40 s, Llama 3
 * 70B 0.60 -> 0.62 s, Mixtral 8x7B 0.17 -> 0.44 s (a loaded machine). */
#define SEARCH_SPLIT_GAIN 0.05

/* How much the split can lower x's estimate, at most (SEARCH_SPLIT_GAIN):
 * none where split_plan keeps the even plan (--no-split; the V schedules and
 * DualPipe, search_split.c) or can change nothing (one stage without
 * recompute, or with the recompute fixed: the split of one stage only picks
 * each layer's recompute, and none is the fastest). */
static double split_gain(const mp_search_options *opt, const cand *x)
{
    mp_schedule_kind s = (mp_schedule_kind)x->sched;
    if (opt->no_split || mp_schedule_is_v(s) || s == MP_SCHED_DUALPIPE) return 0.0;
    if (x->p == 1 && (x->rc == MP_RECOMPUTE_NONE || (opt->fixed & MP_FIX_RECOMPUTE)))
        return 0.0;
    return SEARCH_SPLIT_GAIN;
}

/* A time bound of x as the pool compares it: what the split may take off
 * it taken off. */
static double split_bound(const mp_search_options *opt, const cand *x, double lb)
{
    return lb * (1.0 - split_gain(opt, x));
}

/* The time the kk-th best takes (infinite while fewer): a bound no better,
 * less the split's gain (split_bound), cannot place a candidate among the kk
 * best even after its split. */
static double threshold_at(const top_k *t, int kk)
{
    return t->n < kk ? INFINITY : t->e[kk - 1].est.time.step;
}

/* Costs cand x (applied: cfg) in full and offers it to top; whether it fits. */
static bool cost_into(const cand *x, const mp_config *cfg, cost_pass *ps, top_k *top,
                      mp_search_result *res, refusals *rf)
{
    mp_estimate est;
    res->counts.estimated++;
    if (cost_applied(cfg, ps->memo, &est, rf) != MP_OK) {
        res->counts.rejected[MP_REJECT_OTHER]++;
        return false;
    }
    if (!est.fits) {
        res->counts.rejected[MP_REJECT_MEMORY]++;
        note_closest(res, rf, cfg, &est);
        return false;
    }
    res->counts.fitting++;
    mp_search_top_insert(top, x, &est);
    return true;
}

/* Sets aside keep index i, pruned by time with bound lb (a later pass
 * looks at it again under its own threshold); false when out of memory. */
static bool defer(cost_pass *ps, size_t i, uint8_t rcm, double lb)
{
    if (ps->n_deferred == ps->cap_deferred) {
        size_t cap = ps->cap_deferred ? 2 * ps->cap_deferred : 1024;
        size_t *d = realloc(ps->deferred, cap * sizeof *d);
        if (d) ps->deferred = d;
        double *l = d ? realloc(ps->deferred_lb, cap * sizeof *l) : NULL;
        if (l) ps->deferred_lb = l;
        uint8_t *r = l ? realloc(ps->deferred_rcm, cap * sizeof *r) : NULL;
        if (r) ps->deferred_rcm = r;
        if (!d || !l || !r) {
            ps->oom = true;
            return false;
        }
        ps->cap_deferred = cap;
    }
    ps->deferred[ps->n_deferred] = i;
    ps->deferred_rcm[ps->n_deferred] = rcm;
    ps->deferred_lb[ps->n_deferred++] = lb;
    return true;
}

/* Selective's modules as what they free and re-run: moe stands for its
 * parts (moe_act, shared_experts) too. */
static uint32_t modules_cover(uint32_t mods)
{
    if (mods & (1u << MP_RCM_MOE)) mods |= 1u << MP_RCM_MOE_ACT | 1u << MP_RCM_SHARED_EXPERTS;
    return mods;
}

/* Costs keep index xi as x (its own module set, or, standing for them all,
 * each of the search's: x's bounds are the least of theirs), each unless
 * the blocks' floor prunes it (set aside with its set) or a set costed
 * before it shows it cannot fit; false when out of memory.
 *
 * The set with the most modules goes first, then the others from the
 * fewest modules up (docs/design.md §5): one whose modules are all in a set
 * that did not fit frees no more bytes (mp_block_modules_act_bytes adds
 * each module's, moe holding its parts') and does not fit either: not
 * costed. (One that re-runs more than a set that fits is no faster, but
 * may still be among the k best: costed.) */
static bool cost_sets(enum_ctx *e, const mp_search_options *opt, const cand *x, size_t xi,
                      top_k *top, int kk, cost_pass *ps, mp_search_result *res, refusals *rf)
{
    bool all = x->rc == MP_RECOMPUTE_SELECTIVE && x->rcm == MP_SEARCH_RCM_ANY;
    int nv = all ? e->bc.n_sel : 1, nover = 0;
    uint32_t over[MP_SEARCH_SEL_MAX];
    int order[MP_SEARCH_SEL_MAX];
    uint32_t cover[MP_SEARCH_SEL_MAX];
    /* the order: the set that frees the most first (the most modules:
     * none of the others is a superset of it), then from the fewest up */
    for (int k = 0; k < nv; k++) {
        mp_parallel q = opt->base.parallel;
        if (all && e->bc.sel_mask[k]) q.recompute_modules = e->bc.sel_mask[k];
        cover[k] = modules_cover(mp_recompute_modules_of(&q, MP_RECOMPUTE_SELECTIVE));
        int i = k;
        for (; i > 0 && __builtin_popcount(cover[order[i - 1]]) > __builtin_popcount(cover[k]); i--)
            order[i] = order[i - 1];
        order[i] = k;
    }
    if (nv > 1) {
        int top_set = order[nv - 1];
        memmove(order + 1, order, sizeof *order * (size_t)(nv - 1));
        order[0] = top_set;
    }
    /* each set is a candidate of its own in the counts (the one counted
     * when enumerated stands for the first) */
    res->counts.considered += nv - 1;
    for (int o = 0; o < nv; o++) {
        int k = order[o];
        cand xk = *x;
        if (all) xk.rcm = e->bc.sel_mask[k];
        mp_config cfg;
        mp_search_cand_apply(&opt->base, &xk, &cfg);
        bool too_big = false;
        for (int j = 0; j < nover && !too_big && !opt->no_prune; j++)
            too_big = !(cover[k] & ~over[j]);
        /* the set's own memory bound (the candidate's is the least of the
         * sets'): the routed tokens' bytes it keeps and its blocks' */
        if (!too_big && all && !opt->no_prune)
            too_big = mp_search_mem_bound(e, &xk) > opt->base.hw.memory;
        if (too_big) { /* counted as the memory bound's prunes */
            res->counts.pruned_memory++;
            if (top->n == 0) { /* nothing fits yet: what a closest plan must be below */
                double lb = mp_search_mem_bound(e, &xk);
                if (lb < rf->uncosted_lb) rf->uncosted_lb = lb;
            }
            continue;
        }
        double thr = threshold_at(top, kk);
        if (!opt->no_prune && thr < INFINITY) {
            /* the blocks' own costs over the ranks (cost.c's
             * mp_estimate_step_floor), a fraction of the estimate: most
             * candidates the bounds above let through lose here */
            double lb;
            if (floor_of(&ps->floors, &xk, &cfg, &lb) == MP_OK &&
                (lb = split_bound(opt, &xk, lb)) >= thr) {
                res->counts.pruned_time++;
                if (!defer(ps, xi, xk.rcm, lb)) return false;
                continue;
            }
        }
        int64_t over_before = res->counts.rejected[MP_REJECT_MEMORY];
        if (!cost_into(&xk, &cfg, ps, top, res, rf) &&
            res->counts.rejected[MP_REJECT_MEMORY] > over_before)
            over[nover++] = cover[k];
    }
    return true;
}

/* Step 2: the kept candidates in order of their time bound, into top,
 * pruning by the kk-th best (top holds more: the next ones, for step 3).
 * A later pass with a larger kk resumes: it looks again at what the last
 * one pruned, under its own threshold, and costs on from where it stopped;
 * top then holds what one pass with that kk would have. */
static void cost_in_bound_order(enum_ctx *e, const mp_search_options *opt, top_k *top, int kk,
                                cost_pass *ps, mp_search_result *res, refusals *rf)
{
    size_t w = 0;
    for (size_t j = 0; j < ps->n_deferred; j++) {
        if (ps->deferred_lb[j] >= threshold_at(top, kk)) {
            ps->deferred[w] = ps->deferred[j];
            ps->deferred_rcm[w] = ps->deferred_rcm[j];
            ps->deferred_lb[w++] = ps->deferred_lb[j];
            continue;
        }
        res->counts.pruned_time--;
        cand x = e->keep.v[ps->deferred[j]];
        x.rcm = ps->deferred_rcm[j];
        /* (what it sets aside again lands after j, bounded at or above
         * the threshold: kept below) */
        if (!cost_sets(e, opt, &x, ps->deferred[j], top, kk, ps, res, rf)) break;
    }
    ps->n_deferred = w;
    res->counts.pruned_time -= ps->tail_pruned;
    ps->tail_pruned = 0;
    size_t i = ps->next;
    for (; i < e->keep.n; i++) {
        size_t xi = mp_search_order_at(&ps->order, &e->keep, i);
        const cand *x = &e->keep.v[xi];
        double thr = threshold_at(top, kk);
        /* in the bound's order: none after the first whose bound, less the
         * most any split takes off, cannot win */
        if (!opt->no_prune && x->lb_time * (1.0 - ps->gain) >= thr) {
            ps->tail_pruned = (int64_t)(e->keep.n - i);
            res->counts.pruned_time += ps->tail_pruned;
            break;
        }
        if (!opt->no_prune && split_bound(opt, x, x->lb_time) >= thr) {
            /* one no split lowers (a V schedule): set aside by its own */
            res->counts.pruned_time++;
            if (!defer(ps, xi, x->rcm, split_bound(opt, x, x->lb_time))) break;
            continue;
        }
        if (!opt->no_prune && x->ep > 0) {
            /* MoE: the exposed dispatch and combine bound it too */
            const block_info *bi = mp_search_block_get(&e->bc, x->t, x->c, x->b, x->sp);
            double lb = bi ? split_bound(opt, x, mp_search_expert_time_bound(
                                                     &opt->base, bi, x, comm_of(&ps->comm, opt, x)))
                           : -INFINITY;
            if (lb >= thr) {
                res->counts.pruned_time++;
                if (!defer(ps, xi, x->rcm, lb)) break;
                continue;
            }
        }
        if (!cost_sets(e, opt, x, xi, top, kk, ps, res, rf)) break;
        if (opt->progress && (i & 1023) == 1023)
            opt->progress(opt->progress_user, 0.1 + 0.7 * (double)i / (double)e->keep.n);
    }
    ps->next = i;
}

/* Nothing fits: cost the memory-pruned ones nearest to fitting too, and say
 * how close the closest comes (MP_ENOFIT), or why nothing runs at all. */
static mp_status nothing_fits(enum_ctx *e, const mp_search_options *opt, mp_search_result *res,
                              refusals *rf, mp_error *err)
{
    const mp_config *base = &opt->base;
    if (e->closest.n > 1)
        qsort(e->closest.v, e->closest.n, sizeof *e->closest.v, mp_search_cmp_lb_mem);
    for (size_t i = 0; i < e->closest.n; i++) {
        /* a selective candidate standing for every module set: each */
        cand x = e->closest.v[i];
        bool all = x.rc == MP_RECOMPUTE_SELECTIVE && x.rcm == MP_SEARCH_RCM_ANY;
        for (int k = 0; k < (all ? e->bc.n_sel : 1); k++) {
            if (all) x.rcm = e->bc.sel_mask[k];
            mp_config cfg;
            mp_estimate est;
            res->counts.closest_costed++;
            if (cost_one(base, &x, NULL, &cfg, &est, rf) == MP_OK)
                note_closest(res, rf, &cfg, &est);
        }
    }
    res->have_closest = rf->have_closest;
    /* the closest is the least over of every candidate when all it did not
     * cost are bounded at or above its peak: the memory-pruned beyond the
     * list (its CLOSEST_KEPT least bounds: the rest at or above its largest)
     * and the module sets pruned by their own bound */
    double left = rf->uncosted_lb;
    if (e->closest.n >= CLOSEST_KEPT) {
        double largest = 0.0;
        for (size_t i = 0; i < e->closest.n; i++)
            largest = fmax(largest, e->closest.v[i].lb_mem);
        left = fmin(left, largest);
    }
    if (!(rf->have_closest && res->closest_est.memory.peak <= left))
        res->counts.closest_unproven++;
    if (rf->have_closest) {
        char a[64];
        snprintf(a, sizeof a, "%.1f", res->closest_est.memory.peak / (1024.0 * 1024 * 1024));
        return mp_error_set(err, MP_ENOFIT, NULL, 0, 0, "memory",
                            "no configuration fits in %.0f GiB per GPU; the closest needs %s GiB",
                            base->hw.memory / (1024.0 * 1024 * 1024), a);
    }
    if (err && rf->have_est_refusal) *err = rf->est_refusal;
    else if (err && e->have_refusal) *err = e->first_refusal;
    else mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gpus",
                      "no configuration of %lld GPUs can run this model with these "
                      "settings", (long long)base->training.gpus);
    /* as for nothing that runs: the input's fault only when the user fixed settings */
    mp_status st = opt->fixed ? MP_EINPUT : MP_ENOFIT;
    if (err) err->code = st;
    return st;
}

/* Step 3 for one plan: the even plan, replaced by the split when the split
 * fits, is faster, and (--runtime megatron) Megatron's flags express it. */
static mp_status split_plan(const mp_search_options *opt, const top_entry *t, int64_t split_limit,
                            mp_search_plan *sp, int64_t *split_used, mp_search_counts *counts,
                            mp_error *err)
{
    mp_search_cand_apply(&opt->base, &t->x, &sp->config);
    sp->est = sp->est_even = t->est;
    sp->split_method = "even";
    sp->split_solver = NULL;
    sp->plan = malloc(sizeof *sp->plan);
    if (!sp->plan) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    memset(sp->plan, 0, sizeof *sp->plan);
    sp->plan->config = sp->config;
    mp_plan_default_stages(sp->plan);
    sp->split_method = mp_split_label(&sp->config, sp->plan->stages, sp->plan->n_stages);
    sp->rank_step = sp->est.time.step;
    if (opt->no_split) return MP_OK;
    mp_plan *tmp = malloc(sizeof *tmp);
    if (!tmp) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    mp_estimate est;
    mp_search_plan info = *sp;
    mp_error e2;
    mp_error_clear(&e2);
    bool free_rc = !(opt->fixed & MP_FIX_RECOMPUTE);
    if (mp_search_split(&sp->config, free_rc, split_limit, tmp, &est, &info, &e2) == MP_OK) {
        counts->split++;
        sp->split_solver = info.split_solver;
        sp->split_gap = info.split_gap;
        sp->split_max_stage = info.split_max_stage;
        *split_used += info.split_work;
        /* --runtime megatron: a split its flags cannot express keeps the even one */
        bool runs = !opt->megatron_runtime || mp_search_megatron_runs(tmp, NULL);
        if (runs && est.fits && info.uneven &&
            est.time.step < sp->est_even.time.step * (1 - 1e-9)) {
            counts->split_uneven++;
            sp->est = est;
            sp->uneven = true;
            sp->mixed_recompute = info.mixed_recompute;
            sp->config = tmp->config;
            *sp->plan = *tmp;
        }
    }
    free(tmp);
    /* what the split is, as Megatron's flags say it (the ILP's may be any form) */
    sp->split_method = mp_split_label(&sp->config, sp->plan->stages, sp->plan->n_stages);
    sp->rank_step = sp->est.time.step;
    return MP_OK;
}

/* Step 3's splits kept between passes. A later pass splits the same
 * candidates again, in the same order and under the same work limits (the
 * candidates it adds cost no less than the kk-th best, so top's first kk stay
 * where they were): the split, its GLPK work and the counts it adds are
 * taken from here instead. Keyed by the candidate, its estimate and the work
 * limit, on which split_plan's answer alone depends: a key not seen splits
 * afresh, so the output is what splitting every time gives. */
typedef struct split_memo_entry {
    cand x;
    double step;           /* x's estimate: the even plan split_plan starts from */
    int64_t limit;         /* the GLPK work it was given */
    mp_search_plan sp;     /* sp.plan owned here */
    int64_t work;          /* what it added to split_used */
    int64_t split, split_uneven; /* ... and to the counts */
} split_memo_entry;
typedef struct split_memo {
    split_memo_entry *e;   /* NULL with cap 0: nothing kept yet (out of memory: still right) */
    size_t n, cap;
} split_memo;

static bool same_cand(const cand *a, const cand *b)
{
    return a->t == b->t && a->c == b->c && a->p == b->p && a->v == b->v && a->b == b->b &&
           a->d == b->d && a->sp == b->sp && a->rc == b->rc && a->rcm == b->rcm &&
           a->dist_opt == b->dist_opt &&
           a->sched == b->sched && a->dp_overlap == b->dp_overlap &&
           a->tp_overlap == b->tp_overlap && a->disp == b->disp && a->ep == b->ep &&
           a->etp == b->etp;
}

static void split_memo_free(split_memo *m)
{
    for (size_t i = 0; i < m->n; i++) free(m->e[i].sp.plan);
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* split_plan through the memo: the same answer, counts and work. */
static mp_status split_plan_memo(const mp_search_options *opt, const top_entry *t,
                                 int64_t split_limit, mp_search_plan *sp, int64_t *split_used,
                                 mp_search_counts *counts, split_memo *m, mp_error *err)
{
    if (!m) return split_plan(opt, t, split_limit, sp, split_used, counts, err);
    for (size_t i = 0; i < m->n; i++) {
        const split_memo_entry *h = &m->e[i];
        if (h->limit != split_limit || h->step != t->est.time.step || !same_cand(&h->x, &t->x))
            continue;
        mp_plan *pl = malloc(sizeof *pl);
        if (!pl) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        *pl = *h->sp.plan;
        *sp = h->sp;
        sp->plan = pl;
        *split_used += h->work;
        counts->split += h->split;
        counts->split_uneven += h->split_uneven;
        return MP_OK;
    }
    int64_t used0 = *split_used, split0 = counts->split, uneven0 = counts->split_uneven;
    mp_status st = split_plan(opt, t, split_limit, sp, split_used, counts, err);
    if (st != MP_OK) return st;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        split_memo_entry *e = realloc(m->e, cap * sizeof *e);
        if (!e) return MP_OK; /* not kept: a later pass splits it again */
        m->e = e;
        m->cap = cap;
    }
    mp_plan *pl = malloc(sizeof *pl);
    if (!pl) return MP_OK;
    *pl = *sp->plan;
    split_memo_entry *h = &m->e[m->n++];
    h->x = t->x;
    h->step = t->est.time.step;
    h->limit = split_limit;
    h->sp = *sp;
    h->sp.plan = pl;
    h->work = *split_used - used0;
    h->split = counts->split - split0;
    h->split_uneven = counts->split_uneven - uneven0;
    return MP_OK;
}

/* The pool-th best step of n plans (infinite while fewer). */
static double pool_threshold(const mp_search_plan *v, int n, int pool)
{
    if (n < pool) return INFINITY;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s) return 0.0; /* out of memory: split no further (a shorter, still right, pool) */
    for (int i = 0; i < n; i++) s[i] = v[i].rank_step;
    /* the pool-th smallest: n is a few dozen, a partial selection sort does */
    for (int i = 0; i < pool; i++)
        for (int j = i + 1; j < n; j++)
            if (s[j] < s[i]) {
                double t = s[i];
                s[i] = s[j];
                s[j] = t;
            }
    double t = s[pool - 1];
    free(s);
    return t;
}

/* Step 3: the split and per-layer recompute of the best, in top's order,
 * until the pool holds the `pool` best distinct plans (mp_search_same_plan)
 * by the estimate after the split: a candidate whose even estimate times
 * (1 - gain) is no better than the pool-th best split one cannot enter, nor
 * can any after it. A split can turn a candidate into the plan of one before
 * it (selective recompute with nothing left to recompute is none): of two
 * the same, the faster estimate stays (ties: the first). Only the
 * candidates whose even estimate is under step 2's threshold at kk (over
 * 1 - gain) are known to be all there (the ones after may lose to pruned
 * ones): *more is set when the pool needs one past them. The plans come out
 * by the split's estimate, ties in top's order, at most `pool` of them. */
static mp_status split_best(const top_k *top, int kk, double gain, int pool,
                            const mp_search_options *opt, split_memo *memo,
                            mp_search_result *res, bool *more, mp_error *err)
{
    *more = false;
    int cap = pool;
    res->plans = calloc((size_t)cap, sizeof *res->plans);
    if (!res->plans) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    /* GLPK gets one work budget for the pool, shared by the plans still to
     * split, so that the search stays within its one-second budget; a plan
     * whose ILP runs out of work keeps the DP's bounds and reports its gap;
     * those split past the pool's size (the margin) get the least. Work is
     * counted, not timed, so a loaded machine names the same winner; and it
     * depends on the pool, not on --top. */
    const int64_t split_budget = opt->split_work_limit > 0 ? opt->split_work_limit * pool
                                                           : MP_SEARCH_SPLIT_WORK;
    int64_t split_used = 0;
    double t = INFINITY; /* the pool-th best split estimate so far */
    for (int i = 0; i < top->n; i++) {
        double even = top->e[i].est.time.step;
        if (even * (1.0 - gain) >= t) break; /* nor any after it */
        if (split_bound(opt, &top->e[i].x, even) >= t) continue;
        int64_t left = pool - res->n > 1 ? pool - res->n : 1;
        int64_t split_limit = (split_budget - split_used) / left;
        if (split_limit < MP_SEARCH_SPLIT_MIN_WORK)
            split_limit = MP_SEARCH_SPLIT_MIN_WORK;
        mp_search_plan sp;
        memset(&sp, 0, sizeof sp);
        mp_status st = split_plan_memo(opt, &top->e[i], split_limit, &sp, &split_used,
                                       &res->counts, memo, err);
        if (st != MP_OK) {
            free(sp.plan);
            return st;
        }
        int same = -1;
        for (int j = 0; j < res->n && same < 0; j++)
            if (mp_search_same_plan(&res->plans[j], &sp)) same = j;
        if (same >= 0) {
            if (sp.rank_step < res->plans[same].rank_step) {
                free(res->plans[same].plan);
                res->plans[same] = sp;
            } else {
                free(sp.plan);
            }
        } else {
            if (res->n == cap) {
                mp_search_plan *v = realloc(res->plans, sizeof *v * (size_t)cap * 2);
                if (!v) {
                    free(sp.plan);
                    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
                }
                res->plans = v;
                cap *= 2;
            }
            res->plans[res->n++] = sp;
        }
        t = pool_threshold(res->plans, res->n, pool);
        if (opt->progress)
            opt->progress(opt->progress_user, 0.8 + 0.1 * (res->n < pool ? res->n : pool) / pool);
    }
    /* what step 2 pruned has a bound, less the split's gain, of at least
     * its threshold: none of it can enter when the pool-th best is below
     * that; else a deeper pass (top holds all that was kept: nothing was
     * pruned by time) */
    if (!opt->no_prune && top->n >= kk && t > threshold_at(top, kk)) *more = true;
    /* by the split's estimate, stable (top's order on ties), the pool best */
    for (int a = 1; a < res->n; a++) {
        mp_search_plan t = res->plans[a];
        int b = a;
        for (; b > 0 && res->plans[b - 1].rank_step > t.rank_step; b--)
            res->plans[b] = res->plans[b - 1];
        res->plans[b] = t;
    }
    for (int a = pool; a < res->n; a++) free(res->plans[a].plan);
    if (res->n > pool) res->n = pool;
    return MP_OK;
}

/* One search (mp_search_estimated). */
static mp_status search_estimated(const mp_search_options *opt, mp_search_result *res,
                                  mp_error *err)
{
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
    top_k top = {.k = k};
    refusals rf = {.uncosted_lb = INFINITY};
    if ((st = enumeration_verdict(&e, opt, err)) != MP_OK)
        goto done;
    /* top holds up to 4 pools and 256 more (the margin's candidates), pruned
     * by the pool-th best over (1 - gain); when split_best needs candidates
     * past that threshold (splits made some the same), a pass by a deeper
     * one resumes, and so on (rare: most searches take one pass) */
    const int pool = k > MP_SEARCH_POOL_MIN ? k : MP_SEARCH_POOL_MIN;
    const int cap = 4 * pool + 256;
    top = (top_k){.k = cap};
    top.e = calloc((size_t)cap, sizeof *top.e);
    cost_pass ps = {.memo = mp_cost_memo_new(), .gain = opt->no_split ? 0.0 : SEARCH_SPLIT_GAIN};
    split_memo splits = {0};
    if (mp_model_is_moe(&opt->base.model)) {
        ps.comm.cap = 1u << 16;
        ps.comm.slot = calloc(ps.comm.cap, sizeof *ps.comm.slot);
    }
    if (!top.e) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto pass_done;
    }
    if (!mp_search_order_init(&ps.order, &e.keep)) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the search");
        goto pass_done;
    }
    for (int kk = pool;;) {
        cost_in_bound_order(&e, opt, &top, kk, &ps, res, &rf);
        if (ps.oom) {
            st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the search");
            break;
        }
        if (top.n == 0) {
            /* nothing fits: the closest plan among what was costed and
             * the memory-pruned candidates of the smallest bounds (or why
             * none runs) */
            st = nothing_fits(&e, opt, res, &rf, err);
            break;
        }
        bool more = false;
        mp_search_counts before = res->counts;
        st = split_best(&top, kk, ps.gain, pool, opt, opt->no_split_memo ? NULL : &splits, res,
                        &more, err);
        if (st != MP_OK || !more || top.n < kk || kk >= cap)
            break;
        kk += pool - res->n > pool / 4 ? pool - res->n : pool / 4;
        if (kk > cap) kk = cap;
        mp_search_result_free(res);
        res->counts = before; /* the splits again next time */
    }
pass_done:
    mp_search_order_free(&ps.order);
    split_memo_free(&splits);
    mp_cost_memo_free(ps.memo);
    free(ps.comm.slot);
    free(ps.floors.slot);
    free(ps.deferred);
    free(ps.deferred_lb);
    free(ps.deferred_rcm);

done:
    free(top.e);
    mp_search_free_ctx(&e);
    if (st != MP_OK && st != MP_ENOFIT) {
        mp_search_result_free(res);
        memset(res, 0, sizeof *res);
    }
    return st;
}

mp_status mp_search_estimated(const mp_search_options *opt, mp_search_result *res, mp_error *err)
{
    return search_estimated(opt, res, err);
}

void mp_search_result_free(mp_search_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->plans[i].plan);
    free(r->plans);
    r->plans = NULL;
    r->n = 0;
}
