/* split_glpk.c — the stage split as a mixed-integer program solved by GLPK.
 *
 * Consecutive identical items form a run g of size S_g (embedding, the
 * blocks, the head: three runs for a GPT). For each virtual stage k, run g and
 * recompute choice c, an integer a[k][g][c] counts the items of run g that
 * stage k holds with choice c. Contiguity: with P[k][g] the items of run g in
 * stages 0..k, the prefix 0..k is a prefix of the item order exactly when a
 * run holds items in it only if the run before is complete in it:
 *     P[k][g] >= S_g * u[k][g],   P[k][g+1] <= S_{g+1} * u[k][g],   u binary.
 * Minimise T subject to: every item placed, every stage non-empty,
 *     T >= sum_{g,c} time[g][c] * a[k][g][c]                      (each stage)
 *     sum_{k on rank q} sum_{g,c} (static_g + held_k * hold_g + inflight_k * act[g][c]) a[k][g][c]
 *         <= budget_q.
 * Times are scaled by the slowest item, bytes by the budget, for the simplex.
 */
#include "planner/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "megaplan_config.h"
#include "planner/split_internal.h"

#if HAVE_GLPK
#include <glpk.h>

bool mp_split_have_glpk(void) { return true; }

static bool same_item(const mp_split_item *a, const mp_split_item *b)
{
    if (a->static_bytes != b->static_bytes || a->hold_bytes != b->hold_bytes) return false;
    for (int c = 0; c < MP_RECOMPUTE_COUNT; c++)
        if (a->time[c] != b->time[c] || a->act[c] != b->act[c] || a->allowed[c] != b->allowed[c])
            return false;
    return true;
}

typedef struct model_index {
    int32_t K, G;
    int col_t;
    int a0;   /* a[k][g][c] = a0 + (k*G + g)*3 + c */
    int p0;   /* P[k][g] = p0 + k*G + g, k < K-1 */
    int u0;   /* u[k][g] = u0 + k*(G-1) + g, k < K-1, g < G-1 */
    int ncols;
} model_index;

static int col_a(const model_index *m, int32_t k, int32_t g, int c)
{
    return m->a0 + (k * m->G + g) * MP_RECOMPUTE_COUNT + c;
}
static int col_p(const model_index *m, int32_t k, int32_t g) { return m->p0 + k * m->G + g; }
static int col_u(const model_index *m, int32_t k, int32_t g) { return m->u0 + k * (m->G - 1) + g; }

typedef struct triplets {
    int *ia, *ja;
    double *ar;
    int n, cap;
    bool oom;
} triplets;

static void put(triplets *t, int row, int col, double v)
{
    if (t->oom) return;
    if (t->n + 1 >= t->cap) {
        int cap = t->cap ? t->cap * 2 : 1024;
        int *ia = realloc(t->ia, sizeof *ia * (size_t)cap);
        if (ia) t->ia = ia;
        int *ja = realloc(t->ja, sizeof *ja * (size_t)cap);
        if (ja) t->ja = ja;
        double *ar = realloc(t->ar, sizeof *ar * (size_t)cap);
        if (ar) t->ar = ar;
        if (!ia || !ja || !ar) {
            t->oom = true;
            return;
        }
        t->cap = cap;
    }
    t->n++; /* GLPK arrays are 1-based */
    t->ia[t->n] = row;
    t->ja[t->n] = col;
    t->ar[t->n] = v;
}

typedef struct cb_data {
    double *x;      /* incumbent column values (1-based), NULL when none */
    bool given;
    double bound;   /* best proven bound seen, scaled */
    int64_t work_limit; /* simplex iterations (root included) + nodes */
    int64_t work;       /* used so far, as of the last call */
} cb_data;

/* Work so far: the simplex iterations GLPK counted on the problem (the root
 * LP's and every node's) plus the nodes created. */
static int64_t work_done(glp_tree *tree)
{
    int active, current, total;
    glp_ios_tree_size(tree, &active, &current, &total);
    (void)active;
    (void)current;
    return (int64_t)glp_get_it_cnt(glp_ios_get_prob(tree)) + total;
}

static void callback(glp_tree *tree, void *info)
{
    cb_data *d = info;
    d->work = work_done(tree);
    if (d->work >= d->work_limit) {
        glp_ios_terminate(tree);
        return;
    }
    int best = glp_ios_best_node(tree);
    if (best) {
        double b = glp_ios_node_bound(tree, best);
        if (b > d->bound) d->bound = b;
    }
    if (glp_ios_reason(tree) == GLP_IHEUR && d->x && !d->given) {
        d->given = true;
        glp_ios_heur_sol(tree, d->x);
    }
}

/* Column values of a known split, for GLPK's first incumbent. */
static void solution_columns(const mp_split_problem *pr, const model_index *m,
                             const int32_t *run_of, const int32_t *run_size,
                             const mp_split_solution *s, double ts, double *x)
{
    memset(x, 0, sizeof *x * (size_t)(m->ncols + 1));
    for (int32_t k = 0; k < m->K; k++)
        for (int32_t i = s->stages[k].begin; i < s->stages[k].end; i++)
            x[col_a(m, k, run_of[i], s->recompute[i])] += 1;
    for (int32_t g = 0; g < m->G; g++) {
        double acc = 0;
        for (int32_t k = 0; k < m->K - 1; k++) {
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) acc += x[col_a(m, k, g, c)];
            x[col_p(m, k, g)] = acc;
        }
    }
    for (int32_t k = 0; k < m->K - 1; k++)
        for (int32_t g = 0; g < m->G - 1; g++)
            x[col_u(m, k, g)] = x[col_p(m, k, g)] >= run_size[g] - 0.5 ? 1 : 0;
    x[m->col_t] = s->max_stage_time / ts * (1 + 1e-9);
    (void)pr;
}

/* Consecutive identical items form runs (embedding, blocks, head: three for
 * a GPT); returns their number G, each item's run, each run's first item
 * and size. */
static int32_t find_runs(const mp_split_problem *pr, int32_t *run_of, int32_t *run_first,
                         int32_t *run_size)
{
    int32_t G = 0;
    for (int32_t i = 0; i < pr->n_items; i++) {
        if (i == 0 || !same_item(&pr->items[i], &pr->items[i - 1])) {
            run_first[G] = i;
            run_size[G] = 0;
            G++;
        }
        run_of[i] = G - 1;
        run_size[G - 1]++;
    }
    return G;
}

/* The columns' kinds and bounds: a[k][g][c] integer within the run (0 for
 * a choice the run does not allow), P[k][g] within the run, u binary. */
static void set_columns(glp_prob *lp, const mp_split_problem *pr, const model_index *m,
                        const int32_t *run_first, const int32_t *run_size)
{
    int32_t K = m->K, G = m->G;
    for (int32_t k = 0; k < K; k++)
        for (int32_t g = 0; g < G; g++)
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
                int j = col_a(m, k, g, c);
                glp_set_col_kind(lp, j, GLP_IV);
                if (pr->items[run_first[g]].allowed[c])
                    glp_set_col_bnds(lp, j, GLP_DB, 0, run_size[g]);
                else
                    glp_set_col_bnds(lp, j, GLP_FX, 0, 0);
            }
    for (int32_t k = 0; k < K - 1; k++)
        for (int32_t g = 0; g < G; g++) glp_set_col_bnds(lp, col_p(m, k, g), GLP_DB, 0, run_size[g]);
    for (int32_t k = 0; k < K - 1; k++)
        for (int32_t g = 0; g < G - 1; g++) glp_set_col_kind(lp, col_u(m, k, g), GLP_BV);
}

/* Every item placed; every stage non-empty, its time under T. */
static void add_stage_rows(glp_prob *lp, const mp_split_problem *pr, const model_index *m,
                           const int32_t *run_first, const int32_t *run_size, double ts,
                           triplets *tr)
{
    int32_t K = m->K, G = m->G;
    int row;
    /* every item placed */
    for (int32_t g = 0; g < G; g++) {
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_FX, run_size[g], run_size[g]);
        for (int32_t k = 0; k < K; k++)
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) put(tr, row, col_a(m, k, g, c), 1);
    }
    /* every stage non-empty; stage time under T */
    for (int32_t k = 0; k < K; k++) {
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_LO, 1, 0);
        for (int32_t g = 0; g < G; g++)
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) put(tr, row, col_a(m, k, g, c), 1);
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
        put(tr, row, m->col_t, -1);
        for (int32_t g = 0; g < G; g++) {
            const mp_split_item *it = &pr->items[run_first[g]];
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++)
                if (it->time[c] != 0) put(tr, row, col_a(m, k, g, c), it->time[c] / ts);
        }
    }
}

/* Prefix counts P and contiguity through u (the header's constraints). */
static void add_contiguity_rows(glp_prob *lp, const model_index *m, const int32_t *run_size,
                                triplets *tr)
{
    int32_t K = m->K, G = m->G;
    int row;
    /* prefix counts and contiguity */
    for (int32_t k = 0; k < K - 1; k++)
        for (int32_t g = 0; g < G; g++) {
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_FX, 0, 0);
            put(tr, row, col_p(m, k, g), 1);
            if (k > 0) put(tr, row, col_p(m, k - 1, g), -1);
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) put(tr, row, col_a(m, k, g, c), -1);
        }
    for (int32_t k = 0; k < K - 1; k++)
        for (int32_t g = 0; g < G - 1; g++) {
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_LO, 0, 0);
            put(tr, row, col_p(m, k, g), 1);
            put(tr, row, col_u(m, k, g), -run_size[g]);
            row = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, row, GLP_UP, 0, 0);
            put(tr, row, col_p(m, k, g + 1), 1);
            put(tr, row, col_u(m, k, g), -run_size[g + 1]);
        }
}

/* Each pipeline rank's bytes within the budget (scaled by mb). */
static void add_memory_rows(glp_prob *lp, const mp_split_problem *pr, const model_index *m,
                            const int32_t *run_first, double mb, triplets *tr)
{
    int32_t K = m->K, G = m->G;
    int row;
    /* memory per pipeline rank */
    for (int32_t q = 0; q < pr->pp; q++) {
        row = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, row, GLP_UP, 0, mp_split_budget(pr, q) / mb);
        for (int32_t k = q; k < K; k += pr->pp)
            for (int32_t g = 0; g < G; g++) {
                const mp_split_item *it = &pr->items[run_first[g]];
                for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
                    double bytes = mp_split_fixed_bytes(pr, k, it) + pr->inflight[k] * it->act[c];
                    if (bytes != 0) put(tr, row, col_a(m, k, g, c), bytes / mb);
                }
            }
    }
}

static void add_rows(glp_prob *lp, const mp_split_problem *pr, const model_index *m,
                     const int32_t *run_first, const int32_t *run_size, double ts, double mb,
                     triplets *tr)
{
    add_stage_rows(lp, pr, m, run_first, run_size, ts, tr);
    add_contiguity_rows(lp, m, run_size, tr);
    add_memory_rows(lp, pr, m, run_first, mb, tr);
}

/* The MIP's counts read back into stage ranges, the items of a run in choice
 * order; returns the slowest stage, or INFINITY when the split does not
 * place every item or does not fit. */
static double read_counts(glp_prob *lp, const mp_split_problem *pr, const model_index *m,
                          mp_split_solution *sol)
{
    int32_t N = pr->n_items, pos = 0;
    for (int32_t k = 0; k < m->K; k++) {
        sol->stages[k].begin = pos;
        for (int32_t g = 0; g < m->G; g++)
            for (int c = 0; c < MP_RECOMPUTE_COUNT; c++) {
                long n = lround(glp_mip_col_val(lp, col_a(m, k, g, c)));
                for (long j = 0; j < n && pos < N; j++) sol->recompute[pos++] = (uint8_t)c;
            }
        sol->stages[k].end = pos;
    }
    bool fits = pos == N;
    double t = fits ? mp_split_evaluate(pr, sol->stages, sol->recompute, &fits) : INFINITY;
    return fits ? t : INFINITY;
}

static void take_incumbent(mp_split_solution *sol, const mp_split_solution *inc, int32_t K,
                           int32_t N)
{
    memcpy(sol->stages, inc->stages, sizeof *inc->stages * (size_t)K);
    memcpy(sol->recompute, inc->recompute, (size_t)N);
    sol->max_stage_time = inc->max_stage_time;
}

/* The program of the header: its column layout into m (K and G given), the
 * columns and the rows, whose coefficients go to tr (tr->oom when they could
 * not) until the caller loads them. */
static glp_prob *build_problem(const mp_split_problem *pr, model_index *m,
                               const int32_t *run_first, const int32_t *run_size, double ts,
                               double mb, triplets *tr)
{
    int32_t K = m->K, G = m->G;
    m->col_t = 1;
    m->a0 = 2;
    m->p0 = m->a0 + K * G * MP_RECOMPUTE_COUNT;
    m->u0 = m->p0 + (K - 1) * G;
    m->ncols = m->u0 + (K - 1) * (G > 1 ? G - 1 : 0) - 1;

    glp_term_out(GLP_OFF);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, m->ncols);
    /* a bound proven elsewhere (the DP's relaxation) cuts the tree short */
    glp_set_col_bnds(lp, m->col_t, GLP_LO, pr->lower_bound > 0 ? pr->lower_bound / ts * (1 - 1e-9) : 0, 0);
    glp_set_obj_coef(lp, m->col_t, 1);
    set_columns(lp, pr, m, run_first, run_size);
    add_rows(lp, pr, m, run_first, run_size, ts, mb, tr);
    return lp;
}

/* The LP relaxation failed: no split fits when it is infeasible and there
 * is no incumbent; else the incumbent (the DP's) is the answer. */
static void answer_without_mip(glp_prob *lp, int ret, const mp_split_solution *inc, int32_t K,
                               int32_t N, mp_split_solution *sol)
{
    /* the relaxation has no solution: no split fits (or the LP gave up) */
    bool lp_infeasible = ret == 0 && (glp_get_status(lp) == GLP_NOFEAS ||
                                      glp_get_prim_stat(lp) == GLP_NOFEAS);
    if (inc->feasible || !lp_infeasible) {
        take_incumbent(sol, inc, K, N);
        sol->feasible = inc->feasible;
        sol->bound = inc->bound;
        sol->gap = inc->feasible && inc->max_stage_time > 0
                       ? (inc->max_stage_time - inc->bound) / inc->max_stage_time : 0;
    } else {
        sol->feasible = false;
        sol->max_stage_time = sol->bound = INFINITY;
        sol->gap = 0;
    }
}

/* The MIP's answer: its split when it places every item, fits and is no
 * slower than the incumbent, else the incumbent; the bound the search proved
 * (mip_bound, in seconds), or the DP's relaxation when that is higher. */
static void answer_from_mip(glp_prob *lp, int ret, const mp_split_problem *pr,
                            const model_index *m, const mp_split_solution *inc, double dp_lower,
                            double mip_bound, mp_split_solution *sol)
{
    int32_t N = pr->n_items, K = m->K;
    int ms = glp_mip_status(lp);
    bool have = ms == GLP_OPT || ms == GLP_FEAS;
    if (have) {
        double t = read_counts(lp, pr, m, sol);
        bool fits = !isinf(t);
        have = fits && (!inc->feasible || t <= inc->max_stage_time);
        if (have) sol->max_stage_time = t;
    }
    if (!have && inc->feasible) {
        take_incumbent(sol, inc, K, N);
        have = true;
    }
    sol->feasible = have;
    if (!have) {
        /* proven infeasible, or the work ran out before any split was found */
        sol->max_stage_time = INFINITY;
        sol->bound = ms == GLP_NOFEAS ? INFINITY : mip_bound;
        sol->gap = ms == GLP_NOFEAS ? 0 : 1;
        return;
    }
    if (ret == 0 && ms == GLP_OPT) {
        sol->bound = sol->max_stage_time;
        sol->gap = 0;
    } else {
        double b = mip_bound;
        if (dp_lower > b) b = dp_lower; /* the DP's relaxation */
        if (b > sol->max_stage_time) b = sol->max_stage_time;
        sol->bound = b;
        sol->gap = sol->max_stage_time > 0 ? (sol->max_stage_time - b) / sol->max_stage_time : 0;
    }
}

/* given: the bracket's incumbent and lower bound when known (NULL: the DP's) */
static mp_status solve_glpk(const mp_split_problem *pr, const mp_split_solution *given,
                            double given_lower, mp_split_solution *sol, mp_error *err)
{
    mp_status st = mp_split_check_problem(pr, err);
    if (st) return st;
    int32_t N = pr->n_items, K = pr->pp * pr->vpp;

    /* runs of identical items */
    int32_t *run_of = malloc(sizeof *run_of * (size_t)N);
    int32_t *run_first = malloc(sizeof *run_first * (size_t)N);
    int32_t *run_size = malloc(sizeof *run_size * (size_t)N);
    mp_stage_range *inc_stages = malloc(sizeof *inc_stages * (size_t)K);
    uint8_t *inc_rc = malloc((size_t)N);
    triplets tr = {0};
    double *x = NULL;
    glp_prob *lp = NULL;
    if (!run_of || !run_first || !run_size || !inc_stages || !inc_rc) goto oom;
    int32_t G = find_runs(pr, run_of, run_first, run_size);

    double ts = 0;
    for (int32_t i = 0; i < N; i++)
        for (int c = 0; c < MP_RECOMPUTE_COUNT; c++)
            if (pr->items[i].allowed[c] && pr->items[i].time[c] > ts) ts = pr->items[i].time[c];
    if (ts <= 0) ts = 1;
    double mb = 0;
    for (int32_t q = 0; q < pr->pp; q++)
        if (mp_split_budget(pr, q) > mb) mb = mp_split_budget(pr, q);
    if (!(mb > 0)) mb = 1;

    /* a first incumbent: the DP (exact for vpp == 1) or the even split */
    mp_split_solution inc = {.stages = inc_stages, .recompute = inc_rc};
    double dp_lower = 0;
    if (given) {
        memcpy(inc_stages, given->stages, sizeof *inc_stages * (size_t)K);
        memcpy(inc_rc, given->recompute, (size_t)N);
        inc.n_stages = K;
        inc.max_stage_time = given->max_stage_time;
        inc.bound = given->bound;
        inc.gap = given->gap;
        inc.feasible = given->feasible;
        inc.unsolved = given->unsolved;
        inc.method = given->method;
        dp_lower = given_lower;
    } else if ((st = mp_split_bounds(pr, &inc, &dp_lower, err))) {
        goto done;
    }

    model_index m = {.K = K, .G = G};
    lp = build_problem(pr, &m, run_first, run_size, ts, mb, &tr);
    if (tr.oom) goto oom;
    glp_load_matrix(lp, tr.n, tr.ia, tr.ja, tr.ar);

    /* The limit covers the relaxation and the branch-and-bound together. It is
     * work, not time: a time limit made the split, and so the search's
     * winner, depend on how loaded the machine was. */
    int64_t work_limit = pr->work_limit > 0 ? pr->work_limit : MP_SPLIT_WORK_DEFAULT;
    glp_smcp sp;
    glp_init_smcp(&sp);
    sp.msg_lev = GLP_MSG_OFF;
    sp.presolve = GLP_OFF;
    sp.it_lim = work_limit < INT32_MAX ? (int)work_limit : INT32_MAX;
    int ret = glp_simplex(lp, &sp);
    sol->n_stages = K;
    sol->method = "glpk";
    sol->work = glp_get_it_cnt(lp);
    if (ret != 0 || glp_get_status(lp) != GLP_OPT) {
        answer_without_mip(lp, ret, &inc, K, N, sol);
        goto done;
    }
    double lp_bound = glp_get_obj_val(lp);

    cb_data cb = {.bound = lp_bound, .work_limit = work_limit, .work = sol->work};
    if (inc.feasible) {
        x = malloc(sizeof *x * (size_t)(m.ncols + 1));
        if (!x) goto oom;
        solution_columns(pr, &m, run_of, run_size, &inc, ts, x);
        cb.x = x;
    }
    glp_iocp ip;
    glp_init_iocp(&ip);
    ip.msg_lev = GLP_MSG_OFF;
    ip.presolve = GLP_OFF;
    ip.mip_gap = 0;
    ip.gmi_cuts = GLP_ON;
    ip.mir_cuts = GLP_ON;
    ip.cb_func = callback;
    ip.cb_info = &cb;
    ret = glp_intopt(lp, &ip);
    sol->work = cb.work;
    answer_from_mip(lp, ret, pr, &m, &inc, dp_lower, cb.bound * ts, sol);
    goto done;
oom:
    st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory in the stage split ILP");
done:
    /* st: MP_OK, or why no split was tried */
    if (lp) glp_delete_prob(lp);
    free(tr.ia);
    free(tr.ja);
    free(tr.ar);
    free(x);
    free(run_of);
    free(run_first);
    free(run_size);
    free(inc_stages);
    free(inc_rc);
    return st;
}

mp_status mp_split_solve_glpk(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    return solve_glpk(pr, NULL, 0, sol, err);
}

mp_status mp_split_glpk_from(const mp_split_problem *pr, const mp_split_solution *inc,
                             double lower, mp_split_solution *sol, mp_error *err)
{
    return solve_glpk(pr, inc, lower, sol, err);
}

#else /* !HAVE_GLPK */

bool mp_split_have_glpk(void) { return false; }

mp_status mp_split_solve_glpk(const mp_split_problem *pr, mp_split_solution *sol, mp_error *err)
{
    (void)pr;
    (void)sol;
    return mp_error_set(err, MP_EINTERNAL, NULL, 0, 0, "glpk",
                        "megaplan was built without GLPK; the stage split uses the dynamic program");
}

mp_status mp_split_glpk_from(const mp_split_problem *pr, const mp_split_solution *inc,
                             double lower, mp_split_solution *sol, mp_error *err)
{
    (void)inc;
    (void)lower;
    return mp_split_solve_glpk(pr, sol, err);
}

#endif
