/* split_dp.c — the stage split by dynamic programming over stage
 * boundaries (split.h), and the bracket it puts on the optimum when vpp > 1. */
#include "planner/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "megaplan_config.h"
#include "planner/split_internal.h"

/* Front points the DP may generate in one solve. A segment of n blocks has a
 * front of about 2n points, so the DP's work grows as N^3/K: the largest
 * real models (130 items, 8-128 stages) need ~10^6; a 2048-layer model with
 * a few stages and room for everything needs ~10^9 (minutes). Beyond the
 * budget the solve gives up (unsolved) and the caller keeps the even split. */
#define DP_WORK_LIMIT 2000000

typedef enum { FRONT_OK, FRONT_OOM, FRONT_BUDGET } front_status;

/* ---- dynamic program (vpp == 1) -------------------------------------------
 * A segment's recompute choices form a Pareto front of (activation bytes,
 * time) points; the best choice under a rank's memory is the fastest point
 * whose bytes fit. Fronts are built item by item; each point remembers the
 * point it extends, so the choices of a segment can be read back. */

typedef struct front_point {
    double act, time;
    int32_t prev;     /* index in the previous item's front, -1 at the start */
    uint8_t choice;
} front_point;

typedef struct front {
    front_point *pt;
    int32_t n, cap;
} front;

/* Point j of in shifted by choice c, or (act, time) of the choice alone at
 * the start of a segment. */
static front_point shifted(const front *in, const mp_split_item *it, int32_t j, int c)
{
    double a0 = in ? in->pt[j].act : 0, t0 = in ? in->pt[j].time : 0;
    return (front_point){a0 + it->act[c], t0 + it->time[c], in ? j : -1, (uint8_t)c};
}

/* Whether x comes before y: bytes, then time, then the order the points were
 * made in (j, then c), so equal points resolve the same way every run. */
static bool point_before(const front_point *x, const front_point *y)
{
    if (x->act != y->act) return x->act < y->act;
    if (x->time != y->time) return x->time < y->time;
    if (x->prev != y->prev) return x->prev < y->prev;
    return x->choice < y->choice;
}

/* out = Pareto front of in (+) the item's choices. in == NULL: the empty
 * segment. Each point made is taken from *work.
 *
 * in is sorted by bytes ascending and time descending, so each choice shifts
 * it into another sorted run: the runs are merged (linear, where a sort was
 * n log n and most of a search's time) and pruned as they are merged. Rounding
 * can make two neighbours of one run equal in bytes with the later one
 * faster; the prune keeps the faster, as a sort would have. */
static front_status front_extend(const front *in, const mp_split_item *it, front *out,
                                 int64_t *work)
{
    int32_t base = in ? in->n : 1;
    int32_t need = base * MP_RECOMPUTE_COUNT;
    *work -= need;
    if (*work < 0) return FRONT_BUDGET;
    if (out->cap < need) {
        front_point *p = realloc(out->pt, sizeof *p * (size_t)need);
        if (!p) return FRONT_OOM;
        out->pt = p;
        out->cap = need;
    }
    int32_t next[MP_RECOMPUTE_COUNT]; /* the next point of each run, base when spent */
    for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) next[c] = it->allowed[c] ? 0 : base;
    int32_t keep = 0;
    for (;;) {
        int best = -1;
        front_point bp = {0};
        for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
            if (next[c] >= base) continue;
            front_point q = shifted(in, it, next[c], c);
            if (best < 0 || point_before(&q, &bp)) {
                best = c;
                bp = q;
            }
        }
        if (best < 0) break;
        next[best]++;
        if (keep > 0 && bp.act == out->pt[keep - 1].act) {
            if (bp.time < out->pt[keep - 1].time) {
                out->pt[keep - 1] = bp; /* same bytes, faster: the one before is slower still */
            }
            continue;
        }
        if (keep == 0 || bp.time < out->pt[keep - 1].time) out->pt[keep++] = bp;
    }
    out->n = keep;
    return FRONT_OK;
}

/* Index of the fastest point with act <= limit, or -1. Fronts are sorted by
 * act ascending and time descending. */
static int32_t front_best(const front *f, double limit)
{
    int32_t lo = 0, hi = f->n - 1, ans = -1;
    while (lo <= hi) {
        int32_t mid = (lo + hi) / 2;
        if (f->pt[mid].act <= limit) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

/* The largest activation bytes per micro-batch stage k may stash when its
 * memory (static + in-flight activations) must stay within budget. */
static double act_limit(const mp_split_problem *pr, double budget, int32_t k, double static_sum)
{
    double room = budget * (1 + MEM_SLACK) - static_sum;
    if (room < 0) return -1;
    if (pr->inflight[k] <= 0) return INFINITY;
    return room / pr->inflight[k];
}

/* The recompute choices of items [b, e) on stage k: fastest within memory.
 * Returns the time, or -1 when nothing fits (*oom, *over: out of memory, out
 * of work). */
static double segment_choose(const mp_split_problem *pr, double budget, int32_t k, int32_t b,
                             int32_t e, uint8_t *choice, bool *oom, bool *over, int64_t *work)
{
    int32_t n = e - b;
    front *fr = calloc((size_t)n, sizeof *fr);
    if (!fr) {
        *oom = true;
        return -1;
    }
    double stat = 0;
    double result = -1;
    for (int32_t i = 0; i < n; i++) {
        stat += mp_split_fixed_bytes(pr, k, &pr->items[b + i]);
        front_status fs = front_extend(i ? &fr[i - 1] : NULL, &pr->items[b + i], &fr[i], work);
        if (fs != FRONT_OK) {
            *oom = fs == FRONT_OOM;
            *over = fs == FRONT_BUDGET;
            goto done;
        }
    }
    int32_t at = front_best(&fr[n - 1], act_limit(pr, budget, k, stat));
    if (at >= 0) {
        result = fr[n - 1].pt[at].time;
        for (int32_t i = n - 1; i >= 0; i--) {
            choice[b + i] = fr[i].pt[at].choice;
            at = fr[i].pt[at].prev;
        }
    }
done:
    for (int32_t i = 0; i < n; i++) free(fr[i].pt);
    free(fr);
    return result;
}

/* The DP over stage boundaries with each virtual stage's own bytes within
 * stage_budget. With vpp == 1 and stage_budget = budget this is the problem
 * itself; with vpp > 1, stage_budget = budget is a relaxation (a lower bound)
 * and budget / vpp a restriction (a split that surely fits). */
static mp_status dp_run_each(const mp_split_problem *pr, const double *budgets, double cap,
                             mp_split_solution *sol, int64_t *work, mp_error *err);

/* scale: each stage's budget is its rank's times scale; cap: as dp_fill's */
static mp_status dp_run_capped(const mp_split_problem *pr, double scale, double cap,
                               mp_split_solution *sol, int64_t *work, mp_error *err)
{
    int32_t K = pr->pp * pr->vpp;
    double *b = malloc(sizeof *b * (size_t)K);
    if (!b) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    for (int32_t k = 0; k < K; k++) b[k] = mp_split_budget(pr, k % pr->pp) * scale;
    mp_status s = dp_run_each(pr, b, cap, sol, work, err);
    free(b);
    return s;
}

static mp_status dp_run(const mp_split_problem *pr, double scale, mp_split_solution *sol,
                        int64_t *work, mp_error *err)
{
    return dp_run_capped(pr, scale, INFINITY, sol, work, err);
}

/* Gives up: nothing found, nothing proven (the caller keeps the even split). */
static void unsolved(mp_split_solution *sol)
{
    sol->feasible = false;
    sol->unsolved = true;
    sol->max_stage_time = INFINITY;
    sol->bound = 0;
    sol->gap = 1;
    sol->method = "none (too large for the DP)";
}

/* The same with a budget per virtual stage. */
/* How a DP pass ended: done, over its work budget, or out of memory. */
typedef enum { DP_DONE, DP_OVER, DP_OOM } dp_end;

#define DP(k, i) dp[(size_t)(k) * (size_t)(N + 1) + (size_t)(i)]
#define PARENT(k, i) parent[(size_t)(k) * (size_t)(N + 1) + (size_t)(i)]

/* DP(k, i): the least max stage time of items [0, i) cut into stages 0..k;
 * PARENT(k, i): where its stage k begins. A segment none of whose choices is
 * within cap (a known split's slowest stage) is not tried: the optimum is
 * within cap when that split is feasible here, and it never holds one. */
static dp_end dp_fill(const mp_split_problem *pr, const double *budgets, double stage_budget,
                      double cap, double *dp, int32_t *parent, front *a, front *b,
                      int64_t *work)
{
    int32_t K = pr->pp * pr->vpp, N = pr->n_items;
    for (size_t c = 0; c < (size_t)K * (size_t)(N + 1); c++) {
        dp[c] = INFINITY;
        parent[c] = -1;
    }
    /* Segment [j, i) as stage k; stages before it hold [0, j). By the time
     * the loop reaches j, every segment ending at j has been tried. With one
     * stage only [0, N) is a candidate. */
    for (int32_t j = 0; j < (K == 1 ? 1 : N); j++) {
        front *cur = a, *nxt = b;
        double stat = 0, hold = 0;
        for (int32_t i = j + 1; i <= N; i++) {
            front_status fs = front_extend(i == j + 1 ? NULL : cur, &pr->items[i - 1], nxt, work);
            if (fs == FRONT_OOM) return DP_OOM;
            if (fs == FRONT_BUDGET) return DP_OVER;
            front *t = cur;
            cur = nxt;
            nxt = t;
            stat += pr->items[i - 1].static_bytes;
            hold += pr->items[i - 1].hold_bytes;
            if (stat > stage_budget * (1 + MEM_SLACK)) break; /* longer segments only add bytes */
            /* the front's last point is its fastest; longer segments only add time */
            if (cur->n > 0 && cur->pt[cur->n - 1].time > cap) break;
            int32_t kmin = j == 0 ? 0 : 1, kmax = j == 0 ? 0 : (j < K ? j : K - 1);
            for (int32_t k = kmin; k <= kmax; k++) {
                if (N - i < K - 1 - k) continue; /* later stages need an item each */
                double before = k == 0 ? 0 : DP(k - 1, j);
                if (isinf(before)) continue;
                double fixed = stat + (pr->held ? pr->held[k] * hold : 0.0);
                int32_t at = front_best(cur, act_limit(pr, budgets[k], k, fixed));
                if (at < 0) continue;
                double v = cur->pt[at].time > before ? cur->pt[at].time : before;
                if (v < DP(k, i)) {
                    DP(k, i) = v;
                    PARENT(k, i) = j;
                }
            }
        }
    }
    return DP_DONE;
}

/* The stages from PARENT, last to first, each segment's recompute chosen. */
static dp_end dp_read_back(const mp_split_problem *pr, const double *budgets, const double *dp,
                           const int32_t *parent, mp_split_solution *sol, int64_t *work)
{
    int32_t K = pr->pp * pr->vpp, N = pr->n_items;
    sol->n_stages = K;
    sol->method = "dp";
    sol->unsolved = false;
    sol->gap = 0;
    if (isinf(DP(K - 1, N))) {
        sol->feasible = false;
        sol->max_stage_time = sol->bound = INFINITY;
        return DP_DONE;
    }
    bool oomf = false, overf = false;
    int32_t end = N;
    for (int32_t k = K - 1; k >= 0; k--) {
        int32_t begin = PARENT(k, end);
        sol->stages[k].begin = begin;
        sol->stages[k].end = end;
        if (segment_choose(pr, budgets[k], k, begin, end, sol->recompute, &oomf, &overf,
                           work) < 0) {
            if (oomf) return DP_OOM;
            if (overf) return DP_OVER;
        }
        end = begin;
    }
    sol->feasible = true;
    sol->max_stage_time = mp_split_evaluate(pr, sol->stages, sol->recompute, NULL);
    sol->bound = sol->max_stage_time;
    return DP_DONE;
}
#undef DP
#undef PARENT

static mp_status dp_run_each(const mp_split_problem *pr, const double *budgets, double cap,
                             mp_split_solution *sol, int64_t *work, mp_error *err)
{
    int32_t K = pr->pp * pr->vpp, N = pr->n_items;
    double stage_budget = 0;
    for (int32_t k = 0; k < K; k++)
        if (budgets[k] > stage_budget) stage_budget = budgets[k];
    size_t cells = (size_t)K * (size_t)(N + 1);
    double *dp = malloc(sizeof *dp * cells);
    int32_t *parent = malloc(sizeof *parent * cells);
    front a = {0}, b = {0};
    dp_end e = !dp || !parent ? DP_OOM
                              : dp_fill(pr, budgets, stage_budget, cap, dp, parent, &a, &b, work);
    if (e == DP_DONE)
        e = dp_read_back(pr, budgets, dp, parent, sol, work);
    free(dp);
    free(parent);
    free(a.pt);
    free(b.pt);
    if (e == DP_OOM)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the stage split");
    if (e == DP_OVER) {
        sol->n_stages = K;
        unsolved(sol);
    }
    return MP_OK;
}

mp_status mp_split_solve_dp(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    mp_status s = mp_split_check_problem(pr, err);
    if (s) return s;
    if (pr->vpp != 1)
        return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "vpp",
                            "the dynamic program is exact only for vpp = 1");
    int64_t work = DP_WORK_LIMIT;
    return dp_run(pr, 1.0, sol, &work, err);
}

mp_status mp_split_bounds(const mp_split_problem *pr, mp_split_solution *inc, double *lower,
                          mp_error *err)
{
    int64_t work = DP_WORK_LIMIT; /* shared by the DP runs below */
    if (pr->vpp == 1) {
        mp_status s = dp_run(pr, 1.0, inc, &work, err);
        *lower = inc->unsolved ? 0 : inc->max_stage_time;
        return s;
    }
    int32_t K = pr->pp * pr->vpp;
    mp_split_solution relax = {.stages = malloc(sizeof(mp_stage_range) * (size_t)K),
                               .recompute = malloc((size_t)pr->n_items)};
    mp_split_solution even = {.stages = malloc(sizeof(mp_stage_range) * (size_t)K),
                              .recompute = malloc((size_t)pr->n_items)};
    mp_status s = MP_OK;
    if (!relax.stages || !relax.recompute || !even.stages || !even.recompute) {
        s = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    /* a split that fits: the restriction (each stage within 1/vpp of its
     * rank's room), or the even split if better; the restriction tries no
     * segment slower than the even split (as the relaxation below) */
    if ((s = mp_split_even_best(pr, &even, err))) goto done;
    double even_cap = even.feasible ? even.max_stage_time * (1 + 1e-9) : INFINITY;
    if ((s = dp_run_capped(pr, 1.0 / pr->vpp, even_cap, inc, &work, err))) goto done;
    if (even.feasible && (!inc->feasible || even.max_stage_time < inc->max_stage_time)) {
        memcpy(inc->stages, even.stages, sizeof *even.stages * (size_t)K);
        memcpy(inc->recompute, even.recompute, (size_t)pr->n_items);
        inc->max_stage_time = even.max_stage_time;
        inc->feasible = true;
    }
    /* both are far from the budgets when one rank has room to spare and
     * another none: moves of one item that fit */
    if ((s = mp_split_polish(pr, inc, err))) goto done;
    /* relaxation: stage k within its rank's memory less the least that each
     * other stage of the rank must hold (one item, its lightest choice) */
    double *room = malloc(sizeof *room * (size_t)K);
    if (!room) {
        s = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        goto done;
    }
    for (int32_t k = 0; k < K; k++) {
        room[k] = mp_split_budget(pr, k % pr->pp);
        for (int32_t j = k % pr->pp; j < K; j += pr->pp) {
            if (j == k) continue;
            double least = INFINITY;
            for (int32_t i = 0; i < pr->n_items; i++)
                for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
                    if (!pr->items[i].allowed[c]) continue;
                    double bytes = mp_split_fixed_bytes(pr, j, &pr->items[i]) +
                                   pr->inflight[j] * pr->items[i].act[c];
                    if (bytes < least) least = bytes;
                }
            room[k] -= least;
        }
    }
    /* the split in hand fits the relaxation too, so its optimum is within
     * that split's slowest stage: longer segments are not tried (with the
     * rank's whole room a segment could run to most of the model) */
    double cap = inc->feasible ? inc->max_stage_time * (1 + 1e-9) : INFINITY;
    s = dp_run_each(pr, room, cap, &relax, &work, err);
    free(room);
    if (s) goto done;
    /* INFINITY: not even the relaxation fits; unsolved: no bound known (nor
     * when rounding left nothing within cap, which cannot be otherwise) */
    *lower = relax.unsolved || (!relax.feasible && inc->feasible) ? 0 : relax.max_stage_time;
    /* the relaxation's own split may fit the real memory too */
    bool fits = false;
    if (relax.feasible) mp_split_evaluate(pr, relax.stages, relax.recompute, &fits);
    if (fits && (!inc->feasible || relax.max_stage_time < inc->max_stage_time)) {
        memcpy(inc->stages, relax.stages, sizeof *relax.stages * (size_t)K);
        memcpy(inc->recompute, relax.recompute, (size_t)pr->n_items);
        inc->max_stage_time = relax.max_stage_time;
        inc->feasible = true;
    }
    inc->method = "dp";
    inc->unsolved = false;
    inc->bound = *lower;
    inc->gap = inc->feasible && inc->max_stage_time > 0
                   ? (inc->max_stage_time - *lower) / inc->max_stage_time : 0;
done:
    free(relax.stages);
    free(relax.recompute);
    free(even.stages);
    free(even.recompute);
    return s;
}

/* The even split with the fastest recompute choice per stage (the DP's
 * segment choice): what a solver falls back to, and GLPK's first incumbent. */
mp_status mp_split_even_best(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    int32_t K = pr->pp * pr->vpp;
    sol->n_stages = K;
    sol->method = "even";
    sol->feasible = false;
    sol->unsolved = false;
    sol->max_stage_time = sol->bound = INFINITY;
    sol->gap = 1;
    if (!mp_split_even(pr->n_items, K, sol->stages)) return MP_OK;
    /* With several stages per rank, give each stage an equal share of its
     * rank's memory so the per-stage choices add up to a fitting rank. */
    double *share = calloc((size_t)pr->pp, sizeof *share);
    if (!share) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    for (int32_t k = 0; k < K; k++)
        for (int32_t i = sol->stages[k].begin; i < sol->stages[k].end; i++)
            share[k % pr->pp] += mp_split_fixed_bytes(pr, k, &pr->items[i]);
    mp_split_problem one = *pr;
    bool ok = true, oomf = false, overf = false;
    int64_t work = DP_WORK_LIMIT;
    for (int32_t k = 0; k < K && ok; k++) {
        double stat = 0;
        for (int32_t i = sol->stages[k].begin; i < sol->stages[k].end; i++)
            stat += mp_split_fixed_bytes(pr, k, &pr->items[i]);
        /* this stage's room: its static bytes plus 1/vpp of the rank's activation room */
        one.budget = stat + (mp_split_budget(pr, k % pr->pp) - share[k % pr->pp]) / pr->vpp;
        one.rank_budget = NULL;
        if (segment_choose(&one, one.budget, k, sol->stages[k].begin, sol->stages[k].end,
                           sol->recompute, &oomf, &overf, &work) < 0)
            ok = false;
    }
    free(share);
    if (oomf) return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    if (overf) sol->unsolved = true;
    if (!ok) return MP_OK;
    bool fits;
    sol->max_stage_time = mp_split_evaluate(pr, sol->stages, sol->recompute, &fits);
    sol->feasible = fits;
    if (!fits) sol->max_stage_time = INFINITY;
    sol->bound = 0;
    return MP_OK;
}
