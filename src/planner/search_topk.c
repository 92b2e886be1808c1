/* search_topk.c — the k best estimates so far, and the orders the search
 * costs candidates in. */
#include "planner/search_parts.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost_internal.h"
#include "planner/split.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"

double mp_search_top_threshold(const top_k *t)
{
    return t->n < t->k ? INFINITY : t->e[t->n - 1].est.time.step;
}

/* Insertion into a sorted array: k is small. Ties keep the earlier (lower bound) one. */
void mp_search_top_insert(top_k *t, const cand *x, const mp_estimate *e)
{
    double s = e->time.step;
    if (t->n == t->k && s >= t->e[t->n - 1].est.time.step) return;
    int i = t->n < t->k ? t->n++ : t->n - 1;
    while (i > 0 && t->e[i - 1].est.time.step > s) {
        t->e[i] = t->e[i - 1];
        i--;
    }
    t->e[i].x = *x;
    t->e[i].est = *e;
}

int mp_search_cmp_lb_time(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->lb_time != y->lb_time) return x->lb_time < y->lb_time ? -1 : 1;
    return 0;
}

/* A double as an unsigned key in the same order (IEEE 754: flip the sign
 * bit of a positive number, every bit of a negative one); -0 as +0, which
 * mp_search_cmp_lb_time calls equal, and NaN last. */
static uint64_t order_key(double d)
{
    if (d == 0.0) d = 0.0;
    if (isnan(d)) return UINT64_MAX;
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return (u >> 63) ? ~u : u ^ (1ull << 63);
}

typedef struct sort_rec {
    uint64_t key;
    uint32_t idx;
} sort_rec;

static int cmp_rec(const void *a, const void *b)
{
    const sort_rec *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The bucket of lb: nondecreasing in lb (a subtraction, a product by a
 * positive factor and the truncation each keep the order of their
 * operands), NaN in the last, as order_key puts it. */
static size_t bucket_of(const lb_order *o, double lb)
{
    if (o->nb == 1 || isnan(lb)) return o->nb - 1;
    double f = (lb - o->lo) * o->scale;
    if (!(f > 0.0)) return 0;
    return f >= (double)(o->nb - 1) ? o->nb - 1 : (size_t)f;
}

bool mp_search_order_init(lb_order *o, const cand_vec *cv)
{
    memset(o, 0, sizeof *o);
    size_t n = cv->n;
    o->n = n;
    if (n == 0) return true;
    if (n > UINT32_MAX) return false;
    /* about four candidates a bucket, spread linearly over the finite
     * bounds' range (a range that is not finite: one bucket, sorted whole) */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double lb = cv->v[i].lb_time;
        if (lb < lo) lo = lb;
        if (lb > hi) hi = lb;
    }
    o->nb = n / 4 + 1;
    if (!isfinite(lo) || !isfinite(hi) || !(hi > lo) || !isfinite((double)(o->nb - 1) / (hi - lo)))
        o->nb = 1;
    o->lo = lo;
    o->scale = o->nb > 1 ? (double)(o->nb - 1) / (hi - lo) : 0.0;
    o->idx = malloc(sizeof *o->idx * n);
    o->start = calloc(o->nb + 1, sizeof *o->start);
    if (!o->idx || !o->start) {
        mp_search_order_free(o);
        return false;
    }
    for (size_t i = 0; i < n; i++) o->start[bucket_of(o, cv->v[i].lb_time) + 1]++;
    size_t widest = 0;
    for (size_t b = 0; b < o->nb; b++) {
        if (o->start[b + 1] > widest) widest = o->start[b + 1];
        o->start[b + 1] += o->start[b];
    }
    /* each bucket in the enumeration's order; start[b] runs to the next
     * bucket's start while filling and is put back after */
    for (size_t i = 0; i < n; i++) o->idx[o->start[bucket_of(o, cv->v[i].lb_time)]++] = (uint32_t)i;
    for (size_t b = o->nb; b > 0; b--) o->start[b] = o->start[b - 1];
    o->start[0] = 0;
    o->tmp = malloc(sizeof *o->tmp * (widest > 0 ? widest : 1));
    if (!o->tmp) {
        mp_search_order_free(o);
        return false;
    }
    return true;
}

size_t mp_search_order_at(lb_order *o, const cand_vec *cv, size_t i)
{
    /* buckets are sorted as the walk reaches them: those past the first
     * bound that cannot win never are */
    while (o->sorted < o->nb && o->start[o->sorted] <= i) {
        size_t b0 = o->start[o->sorted], b1 = o->start[o->sorted + 1];
        if (b1 - b0 > 1) {
            for (size_t j = b0; j < b1; j++)
                o->tmp[j - b0] = (sort_rec){order_key(cv->v[o->idx[j]].lb_time), o->idx[j]};
            qsort(o->tmp, b1 - b0, sizeof *o->tmp, cmp_rec);
            for (size_t j = b0; j < b1; j++) o->idx[j] = o->tmp[j - b0].idx;
        }
        o->sorted++;
    }
    return o->idx[i];
}

void mp_search_order_free(lb_order *o)
{
    free(o->idx);
    free(o->start);
    free(o->tmp);
    o->idx = NULL;
    o->start = NULL;
    o->tmp = NULL;
}

int mp_search_cmp_lb_mem(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->lb_mem != y->lb_mem) return x->lb_mem < y->lb_mem ? -1 : 1;
    return 0;
}

/* The recompute block item i (0 = embedding, n-1 = head) runs under plan:
 * its per-layer choice when the split gave one, else the config's for the
 * blocks and none for the embedding and head (what the estimate applies). */
static int applied_recompute(const mp_plan *p, int32_t i, int32_t n)
{
    if (p->has_layer_recompute) return p->layer_recompute[i];
    return i > 0 && i < n - 1 ? (int)p->config.parallel.recompute : (int)MP_RECOMPUTE_NONE;
}

bool mp_search_same_plan(const mp_search_plan *a, const mp_search_plan *b)
{
    const mp_parallel *x = &a->config.parallel, *y = &b->config.parallel;
    if (x->tp != y->tp || x->pp != y->pp || x->vpp != y->vpp || x->cp != y->cp ||
        x->dp != y->dp || x->sp != y->sp || x->micro_batch != y->micro_batch ||
        x->recompute != y->recompute || x->dist_opt != y->dist_opt ||
        x->zero_runtime != y->zero_runtime || x->zero != y->zero || x->hsdp != y->hsdp ||
        x->dp_overlap != y->dp_overlap || x->tp_overlap != y->tp_overlap ||
        x->p2p_overlap != y->p2p_overlap || x->nccl_ub != y->nccl_ub ||
        x->param_gather_sync != y->param_gather_sync ||
        x->overlap_param_gather_with_optimizer_step !=
            y->overlap_param_gather_with_optimizer_step ||
        x->moe_a2a_overlap != y->moe_a2a_overlap ||
        x->shared_expert_overlap != y->shared_expert_overlap ||
        x->dispatch_fp8 != y->dispatch_fp8 || x->schedule != y->schedule ||
        x->dispatcher != y->dispatcher || x->ep != y->ep || x->etp != y->etp ||
        x->ddp_bucket_size != y->ddp_bucket_size || x->flex_sms != y->flex_sms ||
        x->flex_backend != y->flex_backend ||
        x->cuda_graph_scope != y->cuda_graph_scope ||
        strcmp(x->pipeline_layout, y->pipeline_layout) != 0 ||
        x->first_stage_layers != y->first_stage_layers ||
        x->last_stage_layers != y->last_stage_layers ||
        x->account_for_embedding != y->account_for_embedding ||
        x->account_for_loss != y->account_for_loss ||
        a->config.training.precision != b->config.training.precision)
        return false;
    /* selective recompute of the same modules (mp_recompute_modules_of: 0 =
     * the default), where a layer runs it */
    bool same_modules = mp_recompute_modules_of(x, MP_RECOMPUTE_SELECTIVE) ==
                        mp_recompute_modules_of(y, MP_RECOMPUTE_SELECTIVE);
    /* the stage layout: plans without stages use the config's split */
    const mp_plan *p = a->plan, *q = b->plan;
    if (!p || !q) return p == q && (same_modules || x->recompute != MP_RECOMPUTE_SELECTIVE);
    if (p->n_stages != q->n_stages ||
        memcmp(p->stages, q->stages, sizeof *p->stages * (size_t)p->n_stages) != 0)
        return false;
    /* the recompute as applied per layer: a split that leaves selective
     * recompute nothing to recompute runs the plan of recompute none,
     * whichever modules the candidate named (DeepSeek-V3's pool held one
     * such plan three times, from three module sets) */
    int64_t n = mp_model_blocks(&a->config.model) + 2;
    if (n > MP_MAX_LAYERS + 2) n = MP_MAX_LAYERS + 2;
    bool selective = false;
    for (int32_t i = 0; i < (int32_t)n; i++) {
        int r = applied_recompute(p, i, (int32_t)n);
        if (r != applied_recompute(q, i, (int32_t)n)) return false;
        selective |= r == MP_RECOMPUTE_SELECTIVE;
    }
    return same_modules || !selective;
}
