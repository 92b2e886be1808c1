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
    size_t idx;
} sort_rec;

bool mp_search_sort_lb_time(cand_vec *cv)
{
    size_t n = cv->n;
    if (n < 2) return true;
    /* a stable LSD radix sort of (key, index), 16 bits a pass, then the
     * candidates moved once: the order of a stable sort by lb_time (ties
     * keep the enumeration's order, as glibc's merge sort kept them), a
     * fraction of qsort's time on the 10^6 candidates of a large MoE
     * search, whose 64-byte records qsort copied on every merge */
    sort_rec *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n);
    size_t *count = calloc(65536, sizeof *count);
    if (!a || !b || !count) {
        free(a);
        free(b);
        free(count);
        return false;
    }
    for (size_t i = 0; i < n; i++) a[i] = (sort_rec){order_key(cv->v[i].lb_time), i};
    for (int shift = 0; shift < 64; shift += 16) {
        memset(count, 0, 65536 * sizeof *count);
        for (size_t i = 0; i < n; i++) count[(a[i].key >> shift) & 0xffff]++;
        if (count[(a[0].key >> shift) & 0xffff] == n) continue; /* one digit: no change */
        size_t sum = 0;
        for (size_t d = 0; d < 65536; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) b[count[(a[i].key >> shift) & 0xffff]++] = a[i];
        sort_rec *t = a;
        a = b;
        b = t;
    }
    free(b);
    free(count);
    /* position i takes the candidate at a[i].idx: moved in place along the
     * permutation's cycles (no second copy of a list of 10^6), a moved
     * position marked by idx = SIZE_MAX */
    for (size_t i = 0; i < n; i++) {
        if (a[i].idx == SIZE_MAX || a[i].idx == i) continue;
        cand tmp = cv->v[i];
        size_t j = i;
        for (;;) {
            size_t k = a[j].idx;
            a[j].idx = SIZE_MAX;
            if (k == i) {
                cv->v[j] = tmp;
                break;
            }
            cv->v[j] = cv->v[k];
            j = k;
        }
    }
    free(a);
    return true;
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
        x->first_stage_layers != y->first_stage_layers ||
        x->last_stage_layers != y->last_stage_layers ||
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
