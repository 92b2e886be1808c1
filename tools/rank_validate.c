/* rank_validate.c — megaplan-rank-validate: does search rank configurations
 * the way measurements do? Prints a Markdown section for docs/validation.md.
 *
 *   megaplan-rank-validate tests/data [--check|--check-ranking|--check-published] > ranking.md
 *
 * 1. vTrain multi-node runs (3.6B on 64 GPUs, 18.4B on 256): every measured
 *    configuration of a model size is costed with the row's exact settings
 *    (the row -> config mapping of tools/refdata.c, which megaplan-validate
 *    and sim_validation share: a100-4xhdr, fp16, GPT vocab 50,257 tied, full
 *    recompute, 1F1B, no SP, no distributed optimizer, no DP overlap). The configuration megaplan ranks first must
 *    be within 3% of the measured best; Spearman's rho of the two orders.
 * 2. Published setups (tests/data/published): search with the model, GPU
 *    count, global batch and precision; the rank of the published degrees
 *    (tp, pp, dp) among the plans, or why megaplan's first is faster; and
 *    with the published degrees (and software of the time) fixed, the
 *    predicted throughput against the published one (within 10%).
 * Exit 0 when the thresholds hold, 1 when one is missed (with --check), 2 when
 * the data cannot be read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hw.h"
#include "core/model.h"
#include "planner/cost.h"
#include "planner/explain.h"
#include "search/driver.h"
#include "tools/refdata.h"

/* at most this many configurations of one model size are ranked */
#define MAX_ROWS 64

/* One data set as tools/refdata.c maps it (the mapping megaplan-validate and
 * sim_validation use too); -1 when it cannot be read. */
static int load(const char *dir, refdata_set_id id, const refdata_profiles *prof, refdata_set *rs)
{
    mp_error err;
    mp_error_clear(&err);
    if (refdata_read(dir, id, prof, rs, &err) != MP_OK) {
        char msg[1024];
        fprintf(stderr, "megaplan-rank-validate: %s\n", mp_error_format(&err, msg, sizeof msg));
        return -1;
    }
    return 0;
}

/* ---- 1. vTrain ranking ----------------------------------------------------- */

static void ranks_of(const double *x, int n, double *r)
{
    for (int i = 0; i < n; i++) {
        int less = 0, equal = 0;
        for (int j = 0; j < n; j++) {
            if (x[j] < x[i]) less++;
            else if (x[j] == x[i]) equal++;
        }
        r[i] = less + (equal + 1) / 2.0; /* average rank of ties */
    }
}

static double spearman(const double *a, const double *b, int n)
{
    double ra[MAX_ROWS], rb[MAX_ROWS], ma = 0, mb = 0;
    ranks_of(a, n, ra);
    ranks_of(b, n, rb);
    for (int i = 0; i < n; i++) {
        ma += ra[i];
        mb += rb[i];
    }
    ma /= n;
    mb /= n;
    double sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

/* What --check-ranking asserts: the criterion is within 3% (what the
 * document reports); --within and --min-rho let the test suite guard a
 * looser floor while the criterion itself is tracked as a known miss. */
static double check_within = 0.03, check_min_rho = -1.0;
/* What --check-published asserts: every setup within 10% (the criterion the
 * page reports), or --published-within PCT (a guard of what holds today). */
static double check_published_within = 0.10;

/* Why a size's ranking misses, from the data: which measured configurations
 * would have passed, the micro-batch sweep at megaplan's first pick's degrees
 * (measured, predicted, predicted peak memory), and whether a memory-pressure
 * penalty could separate the rows without hitting a measured best elsewhere. */
static void explain_miss(const refdata_set *rs, double size, int first_row, const double *frac_all,
                         const bool *good_all, const int *row_all, int n_all)
{
    const mp_config *fc = &rs->rows[first_row].config;
    double best = INFINITY;
    for (int r = 0; r < rs->n; r++)
        if (rs->rows[r].params_billion == size && rs->rows[r].measured_s < best)
            best = rs->rows[r].measured_s;
    printf("**Why %.1fB misses.** Configurations within 3%% of its measured best (%.3f s):", size, best);
    for (int r = 0; r < rs->n; r++) {
        const mp_config *c = &rs->rows[r].config;
        if (rs->rows[r].params_billion == size && rs->rows[r].measured_s <= best * 1.03)
            printf(" t=%lld d=%lld p=%lld b=%lld (%.3f s);", (long long)c->parallel.tp,
                   (long long)c->parallel.dp, (long long)c->parallel.pp,
                   (long long)c->parallel.micro_batch, rs->rows[r].measured_s);
    }
    printf(" a passing model must rank one of these first. Megaplan's first pick has t=%lld "
           "d=%lld p=%lld; its measured micro-batch sweep at those degrees:\n\n",
           (long long)fc->parallel.tp, (long long)fc->parallel.dp, (long long)fc->parallel.pp);
    printf("| micro-batch | measured | per sample vs previous | predicted | per sample vs previous "
           "| predicted peak of capacity |\n|---|---|---|---|---|---|\n");
    int sweep[MAX_ROWS], ns = 0;
    for (int r = 0; r < rs->n && ns < MAX_ROWS; r++) {
        const mp_config *c = &rs->rows[r].config;
        if (rs->rows[r].params_billion == size && c->parallel.tp == fc->parallel.tp &&
            c->parallel.dp == fc->parallel.dp && c->parallel.pp == fc->parallel.pp)
            sweep[ns++] = r;
    }
    for (int i = 1; i < ns; i++) /* by micro-batch */
        for (int j = i; j > 0 && rs->rows[sweep[j]].config.parallel.micro_batch <
                                     rs->rows[sweep[j - 1]].config.parallel.micro_batch; j--) {
            int t = sweep[j];
            sweep[j] = sweep[j - 1];
            sweep[j - 1] = t;
        }
    double prev_m = 0, prev_p = 0;
    bool pred_monotone = true, meas_monotone = true;
    double worst_rise = 0, worst_b = 0, first_frac = 0;
    for (int i = 0; i < ns; i++) {
        const refdata_row *x = &rs->rows[sweep[i]];
        mp_estimate e;
        mp_error err;
        if (mp_estimate_config(&x->config, NULL, &e, &err) != MP_OK) continue;
        double fr = e.memory.peak / x->config.hw.memory;
        if (sweep[i] == first_row) first_frac = fr;
        /* same global batch and degrees: the step time is the per-sample cost */
        char dm[32] = "", dp[32] = "";
        if (i > 0) {
            double rm = x->measured_s / prev_m - 1, rp = e.time.step / prev_p - 1;
            snprintf(dm, sizeof dm, "%+.1f%%", 100 * rm);
            snprintf(dp, sizeof dp, "%+.1f%%", 100 * rp);
            if (rp > 1e-9) pred_monotone = false;
            if (rm > 0) {
                meas_monotone = false;
                if (rm > worst_rise) worst_rise = rm, worst_b = (double)x->config.parallel.micro_batch;
            }
        }
        printf("| %lld | %.3f s | %s | %.3f s | %s | %.0f%% |\n",
               (long long)x->config.parallel.micro_batch, x->measured_s, dm, e.time.step, dp,
               100 * fr);
        prev_m = x->measured_s;
        prev_p = e.time.step;
    }
    printf("\n");
    if (pred_monotone && !meas_monotone)
        printf("In the model a larger micro-batch is never slower at these degrees (larger GEMMs, "
               "fewer launches, larger TP messages; no pipeline bubble to grow), for any values of "
               "the profile's fitted parameters (property-tested over random profiles: "
               "test_microbatch_never_slower_at_p1 in tests/planner/test_cost.c); the "
               "measurement rises %.1f%% at b=%g. ",
               100 * worst_rise, worst_b);
    /* what search tells its user about these two */
    int best_row = -1;
    for (int r = 0; r < rs->n; r++)
        if (rs->rows[r].params_billion == size && rs->rows[r].measured_s == best)
            best_row = r;
    mp_estimate ef, eb;
    mp_error e2;
    if (best_row >= 0 && mp_estimate_config(fc, NULL, &ef, &e2) == MP_OK &&
        mp_estimate_config(&rs->rows[best_row].config, NULL, &eb, &e2) == MP_OK) {
        double gap = eb.time.step / ef.time.step - 1;
        printf("The measured best is predicted %+.1f%% from the first pick%s. ", 100 * gap,
               gap <= 0.03 ? ": `megaplan search` calls plans within 3% of its first a near tie "
                             "and says to measure them before committing, which here would have "
                             "found the faster one"
                           : "");
    }
    /* would a memory-pressure term above the first pick's fraction spare every measured best? */
    double hit = 0;
    int hit_row = -1;
    for (int i = 0; i < n_all; i++)
        if (good_all[i] && frac_all[i] >= first_frac && frac_all[i] > hit)
            hit = frac_all[i], hit_row = row_all[i];
    if (hit_row >= 0) {
        const refdata_row *h = &rs->rows[hit_row];
        printf("A memory-pressure slowdown starting at the first pick's predicted %.0f%% of capacity "
               "would also slow %.1fB t=%lld d=%lld p=%lld b=%lld (predicted %.0f%%), which is "
               "within 3%% of its size's measured best: the data give no threshold that separates "
               "them, so the model has no such term.\n\n",
               100 * first_frac, h->params_billion, (long long)h->config.parallel.tp,
               (long long)h->config.parallel.dp, (long long)h->config.parallel.pp,
               (long long)h->config.parallel.micro_batch, 100 * hit);
    } else {
        printf("No measured best runs at or above the first pick's predicted %.0f%% of capacity; "
               "a memory-pressure term is not ruled out by this data.\n\n", 100 * first_frac);
    }
}

static int vtrain(const char *dir, const refdata_profiles *prof, bool *ok)
{
    refdata_set rs;
    if (load(dir, REFDATA_VTRAIN_MULTI, prof, &rs)) return -1;
    printf("### Ranking measured configurations (vTrain multi-node)\n\n");
    printf("Each measured configuration of a model size is costed with the row's own settings "
           "(a100-4xhdr, fp16, GPT vocab 50,257, full recompute, 1F1B, no DP overlap: the mapping "
           "of tools/refdata.c). Threshold: the configuration megaplan ranks first is within 3%% "
           "of the measured best.\n\n");
    printf("| model | GPUs | configs | megaplan's first (t, d, p, b) | its measured time | measured best | "
           "within | Spearman rho |\n|---|---|---|---|---|---|---|---|\n");
    double sizes[8];
    int nsizes = 0;
    for (int r = 0; r < rs.n; r++) {
        bool seen = false;
        for (int k = 0; k < nsizes; k++) seen |= sizes[k] == rs.rows[r].params_billion;
        if (!seen && nsizes < 8) sizes[nsizes++] = rs.rows[r].params_billion;
    }
    /* every costed row's predicted peak as a fraction of capacity, and
     * whether it is within 3% of its size's measured best (for the misses) */
    static double frac_all[MAX_ROWS * 8];
    static bool good_all[MAX_ROWS * 8];
    static int row_all[MAX_ROWS * 8];
    int n_all = 0;
    int missed_size[8], missed_first[8], n_missed = 0;
    for (int k = 0; k < nsizes; k++) {
        double pred[MAX_ROWS], meas[MAX_ROWS], frac[MAX_ROWS];
        int rowof[MAX_ROWS], n = 0;
        for (int r = 0; r < rs.n && n < MAX_ROWS; r++) {
            const refdata_row *x = &rs.rows[r];
            if (x->params_billion != sizes[k]) continue;
            mp_estimate e;
            mp_error err;
            if (mp_estimate_config(&x->config, NULL, &e, &err) != MP_OK) {
                fprintf(stderr, "megaplan-rank-validate: vTrain row %d refused: %s\n", x->line, err.msg);
                continue;
            }
            pred[n] = e.time.step;
            meas[n] = x->measured_s;
            frac[n] = e.memory.peak / x->config.hw.memory;
            rowof[n++] = r;
        }
        if (n == 0) continue;
        int first = 0, best = 0;
        for (int i = 1; i < n; i++) {
            if (pred[i] < pred[first]) first = i;
            if (meas[i] < meas[best]) best = i;
        }
        double within = (meas[first] - meas[best]) / meas[best];
        bool pass = within <= 0.03;
        double rho = spearman(pred, meas, n);
        *ok &= within <= check_within && rho >= check_min_rho;
        const mp_config *c = &rs.rows[rowof[first]].config;
        printf("| %.1fB | %lld | %d | %lld, %lld, %lld, %lld | %.3f s | %.3f s | %.1f%% %s | %.2f |\n",
               sizes[k], (long long)c->training.gpus, n, (long long)c->parallel.tp,
               (long long)c->parallel.dp, (long long)c->parallel.pp,
               (long long)c->parallel.micro_batch, meas[first], meas[best], 100 * within,
               pass ? "(ok)" : "(MISSED)", spearman(pred, meas, n));
        for (int i = 0; i < n && n_all < MAX_ROWS * 8; i++, n_all++) {
            frac_all[n_all] = frac[i];
            good_all[n_all] = meas[i] <= meas[best] * 1.03;
            row_all[n_all] = rowof[i];
        }
        if (!pass && n_missed < 8) {
            missed_size[n_missed] = k;
            missed_first[n_missed++] = rowof[first];
        }
    }
    printf("\n");
    for (int i = 0; i < n_missed; i++)
        explain_miss(&rs, sizes[missed_size[i]], missed_first[i], frac_all, good_all, row_all,
                     n_all);
    refdata_set_free(&rs);
    return 0;
}

/* ---- 2. published setups ---------------------------------------------------- */

typedef struct pub {
    const char *source;
    mp_config base;
    int64_t tp, pp, dp, vpp, mb;     /* published degrees (vpp, mb 0 = not published) */
    bool sp, dist_opt, tp_overlap;
    mp_recompute rc;
    double published;                /* the published quantity */
    int kind;                        /* 0: TFLOP/s per GPU (Narayanan formula), 1: iteration s,
                                        2: model TFLOP/s per GPU */
} pub;

static double narayanan_flops(const mp_config *c)
{
    double B = (double)c->training.global_batch, s = (double)c->training.seq;
    double L = (double)c->model.layers, h = (double)c->model.hidden, V = (double)c->model.vocab;
    return 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
}

static double predicted_quantity(const pub *p, const mp_config *c, const mp_estimate *e)
{
    if (p->kind == 0) return narayanan_flops(c) / e->time.step / (double)c->training.gpus / 1e12;
    if (p->kind == 1) return e->time.step;
    return e->throughput.model_tflops_per_gpu;
}

static mp_status fixed_search(const pub *p, mp_schedule_kind sched, mp_search_result *r, mp_error *err)
{
    mp_search_options o;
    memset(&o, 0, sizeof o);
    o.base = p->base;
    o.top_k = 1;
    o.no_simulate = true;
    o.fixed = MP_FIX_TP | MP_FIX_PP | MP_FIX_DP | MP_FIX_SP | MP_FIX_RECOMPUTE | MP_FIX_DIST_OPT |
              MP_FIX_SCHEDULE | MP_FIX_DP_OVERLAP | MP_FIX_TP_OVERLAP;
    mp_parallel *q = &o.base.parallel;
    q->tp = p->tp;
    q->pp = p->pp;
    q->dp = p->dp;
    q->sp = p->sp;
    q->recompute = p->rc;
    q->dist_opt = p->dist_opt;
    q->dp_overlap = p->dist_opt;
    q->tp_overlap = p->tp_overlap;
    q->schedule = sched;
    if (p->vpp > 0) {
        o.fixed |= MP_FIX_VPP;
        q->vpp = p->vpp;
    }
    if (p->mb > 0) {
        o.fixed |= MP_FIX_MICRO_BATCH;
        q->micro_batch = p->mb;
    }
    /* the published runs used Megatron's even split and one recompute choice */
    o.no_split = true;
    return mp_search(&o, r, err);
}

/* The rank of the published degrees among search's first 100 (0: not
 * there); megatron: in Megatron-LM's space (its schedules, 1F1B and
 * interleaved, which the published runs had), not the whole one. */
static int published_rank(const pub *p, bool megatron, mp_search_result *all, mp_status *st,
                          mp_error *err)
{
    mp_search_options o;
    memset(&o, 0, sizeof o);
    o.base = p->base;
    o.top_k = 100;
    o.no_split = o.no_simulate = true;
    if (megatron) {
        o.megatron_runtime = true;
        mp_search_set *set = &o.allowed[__builtin_ctz(MP_FIX_SCHEDULE)];
        set->v[set->n++] = MP_SCHED_1F1B;
        set->v[set->n++] = MP_SCHED_INTERLEAVED;
    }
    *st = mp_search(&o, all, err);
    int rank = 0;
    if (*st == MP_OK)
        for (int i = 0; i < all->n && !rank; i++) {
            const mp_parallel *q = &all->plans[i].config.parallel;
            if (q->tp == p->tp && q->pp == p->pp && q->dp == p->dp && q->cp == 1) rank = i + 1;
        }
    return rank;
}

static void published_row(const pub *p, bool *ok, int *in_top5, int *in_top5_megatron, int *rows)
{
    mp_error err;
    /* 2a: the whole space, ranked; and Megatron-LM's */
    mp_search_result all;
    mp_status st;
    int rank_megatron = published_rank(p, true, &all, &st, &err);
    if (rank_megatron >= 1 && rank_megatron <= 5) (*in_top5_megatron)++;
    if (st == MP_OK || st == MP_ENOFIT) mp_search_result_free(&all);
    int rank = published_rank(p, false, &all, &st, &err);
    /* 2b: the published degrees and software fixed */
    mp_search_result fx;
    mp_search_result best_fx = {0};
    bool have = false;
    mp_schedule_kind scheds[2] = {MP_SCHED_1F1B, MP_SCHED_INTERLEAVED};
    for (int s = 0; s < (p->pp > 1 ? 2 : 1); s++) {
        if (p->vpp > 1 && scheds[s] != MP_SCHED_INTERLEAVED) continue;
        if (p->vpp == 1 && scheds[s] == MP_SCHED_INTERLEAVED) continue;
        if (fixed_search(p, scheds[s], &fx, &err) != MP_OK) continue;
        if (!have || fx.plans[0].est.time.step < best_fx.plans[0].est.time.step) {
            if (have) mp_search_result_free(&best_fx);
            best_fx = fx;
            have = true;
        } else {
            mp_search_result_free(&fx);
        }
    }
    (*rows)++;
    const mp_parallel *w = st == MP_OK ? &all.plans[0].config.parallel : NULL;
    printf("| %s | %lld | %lld/%lld/%lld | ", p->source, (long long)p->base.training.gpus,
           (long long)p->tp, (long long)p->pp, (long long)p->dp);
    if (rank >= 1 && rank <= 5) {
        (*in_top5)++;
        printf("%d |", rank);
    } else {
        printf("%s |", rank ? "beyond 5" : "not in the first 100");
    }
    if (w)
        printf(" tp=%lld%s pp=%lld vpp=%lld cp=%lld dp=%lld mb=%lld %s %s |", (long long)w->tp,
               w->sp ? " sp" : "", (long long)w->pp, (long long)w->vpp, (long long)w->cp,
               (long long)w->dp, (long long)w->micro_batch, mp_recompute_name(w->recompute),
               mp_schedule_name(w->schedule));
    else
        printf(" (nothing fits) |");
    if (have) {
        const mp_search_plan *b = &best_fx.plans[0];
        double q = predicted_quantity(p, &b->config, &b->est);
        double err_rel = (q - p->published) / p->published;
        bool pass = fabs(err_rel) <= 0.10;
        *ok &= fabs(err_rel) <= check_published_within;
        const char *unit = p->kind == 1 ? "s" : "TFLOP/s";
        printf(" %.3g %s | %.3g %s | %+.1f%% %s |", q, unit, p->published, unit, 100 * err_rel,
               pass ? "(ok)" : "(MISSED)");
        if (rank > 5 || rank == 0) {
            /* the published degrees with everything else free, against megaplan's first */
            mp_search_options od;
            memset(&od, 0, sizeof od);
            od.base = p->base;
            od.top_k = 1;
            od.no_split = od.no_simulate = true;
            od.fixed = MP_FIX_TP | MP_FIX_PP | MP_FIX_DP;
            od.base.parallel.tp = p->tp;
            od.base.parallel.pp = p->pp;
            od.base.parallel.dp = p->dp;
            mp_search_result dr;
            char diff[256], why[256];
            if (w && mp_search(&od, &dr, &err) == MP_OK) {
                mp_explain_config_diff(&dr.plans[0].config, &all.plans[0].config, diff, sizeof diff);
                mp_explain_estimate_diff(&all.plans[0].est, &dr.plans[0].est, why, sizeof why);
                printf(" published degrees, the rest searched, against megaplan's first (%s): %s |\n",
                       diff, why);
                mp_search_result_free(&dr);
            } else {
                printf(" |\n");
            }
        } else {
            printf(" |\n");
        }
    } else {
        *ok = false;
        printf(" refused or does not fit (%s) | %.3g | MISSED | |\n", err.msg, p->published);
    }
    if (have) mp_search_result_free(&best_fx);
    if (st == MP_OK || st == MP_ENOFIT) mp_search_result_free(&all);
}

/* A published row as search sees it: the model, GPUs, global batch and
 * precision as the base (the parallel settings left to search), the
 * published degrees and software of the time to fix, and the settings the
 * paper leaves open (refdata's REFDATA_OPEN_*) left to search. */
static pub pub_of(const refdata_row *x, const char *source)
{
    pub p = {0};
    p.source = source;
    p.base = x->config;
    memset(&p.base.parallel, 0, sizeof p.base.parallel);
    const mp_parallel *q = &x->config.parallel;
    p.tp = q->tp;
    p.pp = q->pp;
    p.dp = q->dp;
    p.vpp = x->open & REFDATA_OPEN_VPP ? 0 : q->vpp;
    p.mb = x->open & REFDATA_OPEN_MICRO_BATCH ? 0 : q->micro_batch;
    p.sp = q->sp;
    p.dist_opt = q->dist_opt;
    p.tp_overlap = q->tp_overlap;
    p.rc = q->recompute;
    p.published = x->value;
    p.kind = x->kind == REFDATA_TFLOPS_NARAYANAN ? 0 : x->kind == REFDATA_ITER_S ? 1 : 2;
    return p;
}

static int published(const char *dir, const refdata_profiles *prof, bool *ok)
{
    refdata_set na, ko, mc;
    if (load(dir, REFDATA_NARAYANAN, prof, &na)) return -1;
    if (load(dir, REFDATA_KORTHIKANTI, prof, &ko)) {
        refdata_set_free(&na);
        return -1;
    }
    if (load(dir, REFDATA_MEGATRON_CORE, prof, &mc)) {
        refdata_set_free(&na);
        refdata_set_free(&ko);
        return -1;
    }
    printf("### Published setups in search's ranking\n\n");
    printf("Search over the whole space with the row's model, GPUs, global batch and precision "
           "(Narayanan 2021: dgx-a100, fp16; Korthikanti 2022: dgx-a100, bf16; Megatron-Core 2024: "
           "dgx-h100, bf16, vocab 131,072 untied, RoPE, seq 4096). *Rank* is the first plan with the "
           "published tp/pp/dp. *Fixed* searches only what the paper leaves open (micro-batch, "
           "virtual stages) with the published degrees and the software of the time: Narayanan full "
           "recompute, no SP, no distributed optimizer; Korthikanti SP + selective, the published "
           "micro-batch and interleaving; Megatron-Core SP and TP overlap, distributed optimizer "
           "with overlap, micro-batch 1, no recompute, the most virtual stages of at least 3 layers "
           "(the assumptions of tools/refdata.c); 1F1B or interleaved 1F1B, Megatron's even split. Threshold: within 10%% of "
           "the published throughput (TFLOP/s per GPU; Korthikanti: seconds per iteration).\n\n");
    printf("| setup | GPUs | tp/pp/dp | rank | megaplan's first | fixed: predicted | published | "
           "error | why not in the top 5 |\n|---|---|---|---|---|---|---|---|---|\n");
    int top5 = 0, top5_megatron = 0, rows = 0;
    for (int r = 0; r < na.n; r++) {
        char name[64];
        snprintf(name, sizeof name, "Narayanan %.1fB", na.rows[r].params_billion);
        pub p = pub_of(&na.rows[r], name);
        published_row(&p, ok, &top5, &top5_megatron, &rows);
    }
    /* Korthikanti's published setup is "this work"; its full-recompute
     * column is the same degrees with older software */
    for (int r = 0; r < ko.n; r++) {
        if (ko.rows[r].variant != REFDATA_SP_SELECTIVE) continue;
        char name[64 + MP_NAME_MAX];
        snprintf(name, sizeof name, "Korthikanti %s", ko.rows[r].config.model.name);
        pub p = pub_of(&ko.rows[r], name);
        published_row(&p, ok, &top5, &top5_megatron, &rows);
    }
    for (int r = 0; r < mc.n; r++) {
        char name[64];
        snprintf(name, sizeof name, "Megatron-Core %.1fB", mc.rows[r].params_billion);
        pub p = pub_of(&mc.rows[r], name);
        published_row(&p, ok, &top5, &top5_megatron, &rows);
    }
    printf("\n%d of %d published setups are in search's top 5; the others are explained in the "
           "last column. In Megatron-LM's space (`--runtime megatron`: 1F1B and interleaved "
           "1F1B, the schedules the published runs had, not ZB-H1, ZB-V or DualPipe(V)) %d of %d "
           "are.\n\n", top5, rows, top5_megatron, rows);
    refdata_set_free(&na);
    refdata_set_free(&ko);
    refdata_set_free(&mc);
    return 0;
}


/* ---- 3. the measured best in the top 3 of every measured sweep ------------------- */

/* Rows of one sweep: the same model, GPUs, global batch and hardware, so their
 * step times compare directly (the criterion: in every sweep the
 * measured best is among search's first three). */
static bool same_sweep(const mp_config *a, const mp_config *b)
{
    return a->model.layers == b->model.layers && a->model.hidden == b->model.hidden &&
           a->model.heads == b->model.heads && a->model.vocab == b->model.vocab &&
           a->training.seq == b->training.seq && a->training.gpus == b->training.gpus &&
           a->training.global_batch == b->training.global_batch &&
           strcmp(a->hw.name, b->hw.name) == 0;
}

/* What --check-top3 asserts: at most this many sweeps (of more than three
 * rows) whose measured best is outside the predicted top 3 (default none). */
static int check_top3_misses = 0;

/* Why a sweep's measured best ranks below third, from the model's own parts,
 * printed under the table: its error, the GPU time alone (kernel_overhead 0:
 * what the host dispatch adds is the difference), the GEMM curve's efficiency
 * at its largest GEMM (FC1), and the rows ranked ahead of it with their errors.
 * When the GPU time alone already exceeds the measured step, the host term
 * cannot be what ranks it low. */
enum { TOP3_EXPLAINED = 8 };
static char top3_why[TOP3_EXPLAINED][1024];
static int top3_why_n = 0;

static void explain_top3_miss(const refdata_set *rs, const double *pred, const int *member, int n,
                              int best)
{
    if (top3_why_n >= TOP3_EXPLAINED) return;
    const refdata_row *x = &rs->rows[best];
    const mp_config *c = &x->config;
    mp_config gpu_only = *c;
    gpu_only.hw.kernel_overhead = 0.0;
    mp_estimate e;
    mp_error err;
    double gpu = mp_estimate_config(&gpu_only, NULL, &e, &err) == MP_OK ? e.time.step : NAN;
    double fc1 = 2.0 * (double)c->parallel.micro_batch * (double)c->training.seq *
                 (double)c->model.hidden * (double)c->model.ffn_hidden / (double)c->parallel.tp;
    char *o = top3_why[top3_why_n++];
    size_t cap = sizeof top3_why[0];
    int w = snprintf(o, cap,
                     "**Why h=%lld L=%lld gpus=%lld B=%lld misses.** Its measured best (t=%lld d=%lld "
                     "p=%lld b=%lld, %.4g s) is predicted %.4g s (%+.1f%%); its GPU time alone "
                     "(kernel_overhead 0) is %.4g s (%+.1f%% of the measured step), its FC1 GEMM of "
                     "%.3g FLOPs runs at %.3f of peak on the curve. Ranked ahead of it:",
                     (long long)c->model.hidden, (long long)c->model.layers,
                     (long long)c->training.gpus, (long long)c->training.global_batch,
                     (long long)c->parallel.tp, (long long)c->parallel.dp, (long long)c->parallel.pp,
                     (long long)c->parallel.micro_batch, x->measured_s, pred[best],
                     100 * (pred[best] / x->measured_s - 1), gpu, 100 * (gpu / x->measured_s - 1),
                     fc1, mp_curve_eval(&c->hw.gemm_efficiency, fc1));
    for (int i = 0; i < n && w > 0 && (size_t)w < cap; i++) {
        const refdata_row *y = &rs->rows[member[i]];
        if (!(pred[member[i]] < pred[best])) continue;
        w += snprintf(o + w, cap - (size_t)w, " t=%lld d=%lld p=%lld b=%lld (%+.1f%%);",
                      (long long)y->config.parallel.tp, (long long)y->config.parallel.dp,
                      (long long)y->config.parallel.pp, (long long)y->config.parallel.micro_batch,
                      100 * (pred[member[i]] / y->measured_s - 1));
    }
    if (w > 0 && (size_t)w < cap && o[w - 1] == ';') o[w - 1] = '.';
}

/* Each sweep of a data set with more than three rows: every row costed with its
 * own settings, ranked by predicted step time; the rank of the measured best.
 * Adds to *sweeps and *misses; prints the misses (every sweep with every). */
static int top3_set(const char *dir, refdata_set_id id, const char *name, bool every,
                    const refdata_profiles *prof, int *sweeps, int *misses, int *rows_total)
{
    refdata_set rs;
    if (load(dir, id, prof, &rs)) return -1;
    double *pred = calloc((size_t)rs.n + 1, sizeof *pred);
    bool *done = calloc((size_t)rs.n + 1, sizeof *done);
    int *member = calloc((size_t)rs.n + 1, sizeof *member);
    if (!pred || !done || !member) {
        free(pred);
        free(done);
        free(member);
        refdata_set_free(&rs);
        return -1;
    }
    for (int r = 0; r < rs.n; r++) {
        mp_estimate e;
        mp_error err;
        pred[r] = mp_estimate_config(&rs.rows[r].config, NULL, &e, &err) == MP_OK ? e.time.step
                                                                                  : INFINITY;
    }
    int set_sweeps = 0, set_misses = 0, set_rows = 0, trivial = 0;
    for (int r = 0; r < rs.n; r++) {
        if (done[r]) continue;
        int n = 0;
        for (int k = r; k < rs.n; k++)
            if (!done[k] && same_sweep(&rs.rows[r].config, &rs.rows[k].config)) {
                done[k] = true;
                member[n++] = k;
            }
        if (n <= 3) {
            trivial++;
            continue;
        }
        int best = member[0];
        for (int i = 1; i < n; i++)
            if (rs.rows[member[i]].measured_s < rs.rows[best].measured_s) best = member[i];
        int rank = 1, first = member[0];
        for (int i = 0; i < n; i++) {
            if (pred[member[i]] < pred[best]) rank++;
            if (pred[member[i]] < pred[first]) first = member[i];
        }
        set_sweeps++;
        set_rows += n;
        set_misses += rank > 3;
        if (rank > 3) explain_top3_miss(&rs, pred, member, n, best);
        if (rank > 3 || every) {
            const mp_config *b = &rs.rows[best].config;
            printf("| %s | h=%lld L=%lld gpus=%lld B=%lld | %d | t=%lld d=%lld p=%lld b=%lld (%.4g s) | "
                   "%d | %.4g s (%+.1f%%) |\n",
                   name, (long long)b->model.hidden, (long long)b->model.layers,
                   (long long)b->training.gpus, (long long)b->training.global_batch, n,
                   (long long)b->parallel.tp, (long long)b->parallel.dp, (long long)b->parallel.pp,
                   (long long)b->parallel.micro_batch, rs.rows[best].measured_s, rank,
                   rs.rows[first].measured_s,
                   100 * (rs.rows[first].measured_s / rs.rows[best].measured_s - 1));
        }
    }
    printf("| %s | **%d of %d sweeps** (%d rows) in the top 3 | | | | (%d sweeps of at most 3 rows "
           "not counted) |\n",
           name, set_sweeps - set_misses, set_sweeps, set_rows, trivial);
    *sweeps += set_sweeps;
    *misses += set_misses;
    *rows_total += set_rows;
    free(pred);
    free(done);
    free(member);
    refdata_set_free(&rs);
    return 0;
}

static int top3(const char *dir, const refdata_profiles *prof, bool *ok)
{
    printf("### The measured best among the predicted first three\n\n");
    printf("Each measured sweep (rows of one data set with the same model, GPUs, global batch and "
           "hardware; more than three rows) ranked by predicted step time, each row with its own "
           "settings (the mapping of tools/refdata.c): the rank of the measured best. The issue's "
           "target: in every sweep the measured best is in the first three. Misses are listed "
           "with megaplan's first pick's measured time.\n\n");
    printf("| data set | sweep | rows | measured best (t, d, p, b) | its predicted rank | "
           "megaplan's first, measured |\n|---|---|---|---|---|---|\n");
    int sweeps = 0, misses = 0, rows = 0;
    static const struct {
        refdata_set_id id;
        const char *name;
        bool every; /* print every sweep, not only the misses (the single-node set has 120) */
    } sets[] = {{REFDATA_VTRAIN_MULTI, "vTrain multi-node", true},
                {REFDATA_VTRAIN_SINGLE, "vTrain single-node", false},
                {REFDATA_BLOOM, "BLOOM prequel (Jean Zay)", true}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (top3_set(dir, sets[i].id, sets[i].name, sets[i].every, prof, &sweeps, &misses, &rows))
            return -1;
    printf("\nIn %d of %d measured sweeps (%d rows) the measured best is in the predicted top 3"
           "%s.\n\n", sweeps - misses, sweeps, rows, misses ? "" : " (the target is met)");
    for (int i = 0; i < top3_why_n; i++)
        printf("%s\n\n", top3_why[i]);
    top3_why_n = 0;
    *ok &= misses <= check_top3_misses;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: megaplan-rank-validate DATA_DIR [--check | --check-ranking | --check-published | --check-top3]\n"
                        "       [--top3-misses N]              (what --check-top3 allows; default 0)\n"
                        "       [--within PCT] [--min-rho X]   (what --check-ranking asserts; default 3%%, none)\n"
                        "       [--published-within PCT]       (what --check-published asserts; default 10%%)\n");
        return 2;
    }
    /* --check: the ranking and published thresholds; --check-ranking / --check-published /
     * --check-top3: one */
    bool check_rank = false, check_pub = false, check_top = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check_rank = check_pub = true;
        else if (!strcmp(argv[i], "--check-ranking")) check_rank = true;
        else if (!strcmp(argv[i], "--check-published")) check_pub = true;
        else if (!strcmp(argv[i], "--within") && i + 1 < argc) check_within = atof(argv[++i]) / 100.0;
        else if (!strcmp(argv[i], "--min-rho") && i + 1 < argc) check_min_rho = atof(argv[++i]);
        else if (!strcmp(argv[i], "--check-top3")) check_top = true;
        else if (!strcmp(argv[i], "--top3-misses") && i + 1 < argc) check_top3_misses = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--published-within") && i + 1 < argc)
            check_published_within = atof(argv[++i]) / 100.0;
        else {
            fprintf(stderr, "megaplan-rank-validate: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    refdata_profiles prof;
    mp_error err;
    if (refdata_profiles_builtin(&prof, &err) != MP_OK) {
        fprintf(stderr, "megaplan-rank-validate: built-in profiles: %s\n", err.msg);
        return 2;
    }
    bool ok_rank = true, ok_pub = true, ok_top = true;
    printf("## Search ranking (megaplan-rank-validate)\n\n");
    if (vtrain(argv[1], &prof, &ok_rank)) return 2;
    if (top3(argv[1], &prof, &ok_top)) return 2;
    if (published(argv[1], &prof, &ok_pub)) return 2;
    printf("Thresholds: ranking %s, measured best in the top 3 %s, published throughput with "
           "fixed degrees %s.\n",
           ok_rank ? "met" : "MISSED", ok_top ? "met" : "MISSED", ok_pub ? "met" : "MISSED");
    if ((check_rank && !ok_rank) || (check_pub && !ok_pub) || (check_top && !ok_top)) return 1;
    return 0;
}
