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
        x->moe_a2a_overlap != y->moe_a2a_overlap ||
        x->shared_expert_overlap != y->shared_expert_overlap ||
        x->dispatch_fp8 != y->dispatch_fp8 || x->schedule != y->schedule ||
        x->dispatcher != y->dispatcher || x->ep != y->ep || x->etp != y->etp ||
        x->cuda_graph_scope != y->cuda_graph_scope ||
        strcmp(x->pipeline_layout, y->pipeline_layout) != 0 ||
        a->config.training.precision != b->config.training.precision)
        return false;
    /* selective recompute of the same modules (mp_recompute_modules_of: 0 = the default) */
    if (mp_recompute_modules_of(x, MP_RECOMPUTE_SELECTIVE) !=
        mp_recompute_modules_of(y, MP_RECOMPUTE_SELECTIVE))
        return false;
    /* the stage layout: plans without stages use the config's split */
    const mp_plan *p = a->plan, *q = b->plan;
    if (!p || !q) return p == q;
    if (p->n_stages != q->n_stages ||
        memcmp(p->stages, q->stages, sizeof *p->stages * (size_t)p->n_stages) != 0)
        return false;
    /* the recompute as applied per layer: a split that leaves selective
     * recompute nothing to recompute runs the plan of recompute none */
    int64_t n = mp_model_blocks(&a->config.model) + 2;
    if (n > MP_MAX_LAYERS + 2) n = MP_MAX_LAYERS + 2;
    for (int32_t i = 0; i < (int32_t)n; i++)
        if (applied_recompute(p, i, (int32_t)n) != applied_recompute(q, i, (int32_t)n))
            return false;
    return true;
}
