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
