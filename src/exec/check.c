/* check.c — per-tensor comparison against the reference. */
#include "exec/check.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mp_status mp_check_init(mp_check *c, const mp_param_layout *ref_lay, bool exact, double tol,
                        mp_error *err)
{
    memset(c, 0, sizeof *c);
    c->ref_lay = ref_lay;
    c->exact = exact;
    c->tol = tol;
    /* indexed by the whole model's tensors, so that every pipeline stage's
     * results line up when they are combined */
    c->n_tensors = 2 + 2 * ref_lay->n;
    c->max_abs = calloc((size_t)c->n_tensors, sizeof *c->max_abs);
    c->max_rel = calloc((size_t)c->n_tensors, sizeof *c->max_rel);
    c->tol_of = calloc((size_t)c->n_tensors, sizeof *c->tol_of);
    c->bad = calloc((size_t)c->n_tensors, 1);
    c->first = LONG_MAX;
    if (!c->max_abs || !c->max_rel || !c->tol_of || !c->bad) {
        mp_check_free(c);
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the check");
    }
    /* a gradient that nearly cancels (GPT-OSS's sink logits: fp32 rounding
     * alone reached 2e-5 of it, tiny-oss at tp 4, step 2, on one machine and
     * 2e-4 on another's AVX-512 OpenBLAS kernels, as BERT's cancelling bias
     * sums do, exec.h MP_EXEC_BERT_TOL), and the update that follows it, at
     * the looser threshold; a partition error is of the order of the values */
    int n = ref_lay->n;
    for (int i = 0; i < c->n_tensors; i++) {
        bool loose = i >= 2 && ref_lay->p[(i - 2) % n].cancelling;
        c->tol_of[i] = loose && tol < MP_CHECK_CANCELLING_TOL ? MP_CHECK_CANCELLING_TOL : tol;
    }
    return MP_OK;
}

void mp_check_free(mp_check *c)
{
    free(c->max_abs);
    free(c->max_rel);
    free(c->tol_of);
    free(c->bad);
    c->max_abs = c->max_rel = c->tol_of = NULL;
    c->bad = NULL;
}

void mp_check_name(const mp_check *c, int i, char *buf, size_t size)
{
    int n = c->ref_lay->n;
    if (i == 0)
        snprintf(buf, size, "loss");
    else if (i == 1)
        snprintf(buf, size, "logits");
    else if (i < 2 + n)
        snprintf(buf, size, "grad:%s", c->ref_lay->p[i - 2].name);
    else
        snprintf(buf, size, "param:%s", c->ref_lay->p[i - 2 - n].name);
}

/* Running comparison of one tensor. */
typedef struct acc {
    double max_abs, max_ref;
    bool differs; /* bitwise (exact mode) or NaN */
} acc;

static void acc_add(acc *s, bool exact, float a, double b)
{
    double d = fabs((double)a - b);
    if (isnan(d) || (exact && memcmp(&a, &(float){(float)b}, sizeof a)))
        s->differs = true;
    if (isnan(d))
        d = INFINITY; /* so that the report's error says so (NaN compares false) */
    if (d > s->max_abs)
        s->max_abs = d;
    if (fabs(b) > s->max_ref)
        s->max_ref = fabs(b);
}

static void acc_end(mp_check *c, int step, int idx, const acc *s)
{
    double rel = s->max_abs / (s->max_ref > 1e-30 ? s->max_ref : 1e-30);
    bool bad = c->exact ? s->differs : (s->differs || rel > c->tol_of[idx]);
    if (s->max_abs > c->max_abs[idx])
        c->max_abs[idx] = s->max_abs;
    if (rel > c->max_rel[idx])
        c->max_rel[idx] = rel;
    c->checked++;
    if (bad) {
        c->bad[idx] = 1;
        long ord = (long)(step - 1) * c->n_tensors + idx;
        if (ord < c->first) {
            c->first = ord;
            c->first_abs = s->max_abs;
            c->first_rel = rel;
        }
    }
}

static double ref_at(const mp_check_view *v, const void *buf, size_t i)
{
    return v->f64 ? ((const double *)buf)[i] : (double)((const float *)buf)[i];
}

void mp_check_scalar(mp_check *c, int step, const char *name, double a, double b)
{
    (void)name;
    acc s = {0};
    s.max_abs = fabs(a - b);
    s.max_ref = fabs(b);
    s.differs = isnan(s.max_abs) || (c->exact && a != b);
    if (isnan(s.max_abs))
        s.max_abs = INFINITY;
    acc_end(c, step, 0, &s);
}

void mp_check_logits(mp_check *c, int step, const float *a, const mp_check_view *ref, int S,
                     const int *rows, int V, int tp, int tp_rank)
{
    acc s = {0};
    int Vl = V / tp;
    for (int r = 0; r < S; r++) {
        size_t rr = rows ? (size_t)rows[r] : (size_t)r;
        for (int j = 0; j < Vl; j++)
            acc_add(&s, c->exact, a[(size_t)r * Vl + j],
                    ref_at(ref, ref->logits, rr * V + (size_t)tp_rank * Vl + j));
    }
    acc_end(c, step, 1, &s);
}

void mp_check_params(mp_check *c, int step, const char *prefix, const mp_param_layout *lay,
                     const float *a,
                     const mp_check_view *ref, const mp_param_layout *ref_lay, int tp_rank,
                     size_t lo, size_t hi)
{
    int base = !strcmp(prefix, "grad:") ? 2 : 2 + c->ref_lay->n;
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        size_t from = p->offset > lo ? p->offset : lo;
        size_t to = p->offset + n < hi ? p->offset + n : hi;
        if (from >= to)
            continue; /* not in this rank's shard */
        acc s = {0};
        for (size_t i = from; i < to; i++) {
            size_t full = mp_param_full_index(p, tp_rank, i - p->offset);
            acc_add(&s, c->exact, a[i],
                    ref_at(ref, ref->buf, ref_lay->p[p->ref_index].offset + full));
        }
        acc_end(c, step, base + p->ref_index, &s);
    }
}

/* The first mismatch over the ranks, (step - 1) * n_tensors + tensor index,
 * and the lowest rank that saw it (LONG_MAX and 0 when none did). Minima as
 * the negated maxima of negated doubles, which hold every index exactly. */
static mp_status first_mismatch(const mp_check *c, mp_runtime *rt, const mp_backend *host,
                                long *ord, int *rank, mp_error *err)
{
    double mine = c->first == LONG_MAX ? INFINITY : (double)c->first, neg = -mine;
    mp_status st = host->allreduce(&rt->world, MP_REAL64, &neg, 1, MP_RED_MAX, err);
    double first = -neg;
    double neg_rank = mine == first ? -(double)rt->world.rank : -INFINITY;
    if (!st)
        st = host->allreduce(&rt->world, MP_REAL64, &neg_rank, 1, MP_RED_MAX, err);
    *ord = isinf(first) ? LONG_MAX : (long)first;
    *rank = isinf(neg_rank) ? 0 : (int)-neg_rank;
    return st;
}

mp_status mp_check_finish(mp_check *c, mp_runtime *rt, const mp_backend *host,
                          mp_exec_report *rep, mp_error *err)
{
    int root = rt->world.rank == 0, n = c->n_tensors;
    /* every tensor's largest differences and whether it failed, over the ranks */
    double *all = malloc(3 * (size_t)n * sizeof *all);
    if (!all)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the report");
    double *abs_all = all, *rel_all = all + n, *bad_all = all + 2 * n;
    for (int i = 0; i < n; i++) {
        abs_all[i] = c->max_abs[i];
        rel_all[i] = c->max_rel[i];
        bad_all[i] = c->bad[i];
    }
    mp_status st = host->allreduce(&rt->world, MP_REAL64, all, 3 * (size_t)n, MP_RED_MAX, err);
    long ord = LONG_MAX;
    int bad_rank = 0;
    if (!st)
        st = first_mismatch(c, rt, host, &ord, &bad_rank, err);
    double vals[2] = {c->first_abs, c->first_rel};
    if (!st)
        st = host->bcast(&rt->world, vals, sizeof vals, bad_rank, err);
    double checked = (double)c->checked;
    if (!st)
        st = host->allreduce(&rt->world, MP_REAL64, &checked, 1, MP_RED_SUM, err);
    if (st) {
        free(all);
        return st;
    }
    rep->tensors_checked = (long)checked;
    rep->ok = ord == LONG_MAX;
    if (!rep->ok) {
        rep->bad_rank = bad_rank;
        rep->bad_step = (int)(ord / n) + 1;
        mp_check_name(c, (int)(ord % n), rep->bad_tensor, sizeof rep->bad_tensor);
        rep->bad_abs = vals[0];
        rep->bad_rel = vals[1];
    }
    for (int i = 0; i < n; i++) {
        if (abs_all[i] > rep->max_abs)
            rep->max_abs = abs_all[i];
        if (rel_all[i] > rep->max_rel)
            rep->max_rel = rel_all[i];
    }
    if (root) {
        rep->tensors = calloc((size_t)n, sizeof *rep->tensors);
        if (!rep->tensors) {
            free(all);
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        }
        rep->n_tensors = n;
        for (int i = 0; i < n; i++) {
            mp_check_name(c, i, rep->tensors[i].name, sizeof rep->tensors[i].name);
            rep->tensors[i].max_abs = abs_all[i];
            rep->tensors[i].max_rel = rel_all[i];
            rep->tensors[i].bad = bad_all[i] != 0;
        }
    }
    free(all);
    return MP_OK;
}
