/* search.c — `megaplan search`: the ranked plans for a model on N GPUs
 * (docs/design.md §5). Table for people, a JSON/YAML array of estimate objects for
 * programs (each with "rank", "split" and "search" — the counts), Megatron-LM
 * flags of the winner; -o writes the winner as a self-contained plan file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/disagree.h"
#include "cli/framework_out.h"
#include "cli/options.h"
#include "cli/search_common.h"
#include "cli/search_hw.h"
#include "core/buf.h"
#include "core/io.h"
#include "core/output.h"
#include "planner/band.h"
#include "planner/explain.h"
#include "planner/framework.h"
#include "planner/megatron.h"
#include "planner/report.h"
#include "search/driver.h"
#include "sim/simulate.h"

/* Predicted steps within the error band of the plan's kind (its width, high − low:
 * the profile's error_band, or moe_error_band for a model with routed experts;
 * planner/band.h) of the winner's count as a near tie; this without a band. */
#define NEAR_TIE 0.03

const mp_verb_doc mp_doc_search = {
    .name = "search",
    .summary = "rank parallel plans for a model on a cluster",
    .usage = "megaplan search --model M --gpus N [options]\n"
             "megaplan search --model M --tokens T --hw H1,H2,...|all [options]\n",
    .text = "Searches tp, sp, pp, vpp, cp, dp, micro-batch, recompute (none, full, or "
            "selective of a few module sets: sel:mlp in the table), distributed optimizer "
            "and schedule; for MoE models also ep, etp and the dispatcher. A setting given "
            "(--tp 8, --ep 8, --dispatcher allgather, --recompute-modules mlp, or --fix) is "
            "never searched. The table "
            "ranks by the simulated step; at least the best 16 are simulated whatever --top "
            "shows, so that --top 3 lists the first three of --top 10. Over several profiles "
            "or GPU counts, by days and cost: megaplan search --hw all --help.\nExit 0 with "
            "plans, 1 when nothing fits (the closest is named), 2 on bad input.",
    .groups = (const mp_opt_group *const[]){&mp_cli_config_opts, &mp_search_cli_opts,
                                            &mp_search_plan_opts, NULL},
    .operand = NULL,
};

/* ---- progress on stderr --------------------------------------------------- */

typedef struct progress {
    double start;
    bool tty, shown;
} progress;

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_progress(void *user, double fraction)
{
    progress *p = user;
    if (!p->tty || wall() - p->start < 1.0) return;
    fprintf(stderr, "\rmegaplan search: %3.0f%% ", 100.0 * fraction);
    fflush(stderr);
    p->shown = true;
}

/* ---- the table -------------------------------------------------------------- */

static const char *short_sched(mp_schedule_kind s)
{
    switch (s) {
    case MP_SCHED_GPIPE: return "gpipe";
    case MP_SCHED_1F1B: return "1f1b";
    case MP_SCHED_INTERLEAVED: return "interleaved";
    case MP_SCHED_ZBH1: return "zb-h1";
    case MP_SCHED_ZBV: return "zb-v";
    case MP_SCHED_DUALPIPEV: return "dualpipev";
    case MP_SCHED_DUALPIPE: return "dualpipe";
    default: return "?";
    }
}

/* Selective recompute's modules in the table: "sel:" and short names
 * joined by "+" (the footnote spells them out); "selective" for Megatron's
 * default (core_attn, no list given). */
static const char *const module_short[MP_RCM_COUNT] = {"attn", "act", "ln", "up",
                                                       "mlp",  "moe", "shared"};

static bool named_modules(const mp_search_plan *sp)
{
    return sp->config.parallel.recompute == MP_RECOMPUTE_SELECTIVE &&
           sp->config.parallel.recompute_modules != 0 && !sp->mixed_recompute;
}

static void recompute_label(const mp_search_plan *sp, char *buf, size_t n)
{
    if (named_modules(sp)) {
        size_t used = (size_t)snprintf(buf, n, "sel:");
        uint32_t mask = sp->config.parallel.recompute_modules;
        for (int k = 0; k < MP_RCM_COUNT && used < n; k++)
            if (mask & (1u << k))
                used += (size_t)snprintf(buf + used, n - used, "%s%s",
                                         buf[used - 1] == ':' ? "" : "+", module_short[k]);
        return;
    }
    if (!sp->mixed_recompute || !sp->plan || !sp->plan->has_layer_recompute) {
        snprintf(buf, n, "%s", mp_recompute_name(sp->config.parallel.recompute));
        return;
    }
    int count[MP_RECOMPUTE_COUNT] = {0};
    int64_t L = sp->config.model.layers;
    for (int64_t i = 1; i <= L; i++) count[sp->plan->layer_recompute[i]]++;
    snprintf(buf, n, "mix %d/%d/%d", count[0], count[1], count[2]);
}

static void counts_footer(const mp_search_counts *c, mp_buf *b)
{
    int64_t refused = 0;
    for (int r = 0; r < MP_REJECT_MEMORY; r++) refused += c->rejected[r];
    mp_buf_printf(b,
                  "searched %lld candidates in %.2f s: %lld pruned by the memory bound, %lld by "
                  "the time bound, %lld costed (%lld did not fit), %lld split by the ILP/DP (%lld "
                  "uneven or mixed), %lld simulated\n",
                  (long long)c->considered, c->seconds, (long long)c->pruned_memory,
                  (long long)c->pruned_time, (long long)c->estimated,
                  (long long)c->rejected[MP_REJECT_MEMORY], (long long)c->split,
                  (long long)c->split_uneven, (long long)c->simulated);
    if (c->closest_costed)
        mp_buf_printf(b, "nothing fits: the closest plan is the least over memory of those "
                         "costed and the %lld candidates nearest to fitting by the memory bound%s\n",
                      (long long)c->closest_costed,
                      c->closest_unproven ? "" : ", and of all: every other is bounded at or "
                                                 "above its peak");
    if (c->sim_failed)
        mp_buf_printf(b,
                      "%lld could not be simulated and rank by their estimate (~ in sim s); the "
                      "first: %s\n",
                      (long long)c->sim_failed, c->sim_failure);
    if (refused) {
        mp_buf_printf(b, "settings refused before costing: %lld (", (long long)refused);
        bool first = true;
        for (int r = 0; r < MP_REJECT_MEMORY; r++) {
            if (!c->rejected[r]) continue;
            mp_buf_printf(b, "%s%s %lld", first ? "" : "; ", mp_reject_phrase((mp_reject_reason)r),
                          (long long)c->rejected[r]);
            first = false;
        }
        mp_buf_puts(b, ")\n");
    }
}

/* "winner: step S s = compute X% + ...": the parts of the number the
 * ranking used (the simulation's exposed times when it simulated). */
static void winner_line(const mp_times *t, const char *what, mp_buf *b)
{
    const char *names[8];
    double v[8];
    int n = mp_cli_step_parts(t, names, v);
    double s = t->step > 0 ? t->step : 1;
    mp_buf_printf(b, "\nwinner: step %.3f s%s =", t->step, what);
    for (int i = 0; i < n; i++)
        mp_buf_printf(b, "%s %s %.1f%%", i ? " +" : "", names[i], 100 * v[i] / s);
    mp_buf_puts(b, "\n");
}

/* The best ZeRO-3/FSDP plan, shown beside Megatron's when search did not
 * rank such plans itself: below ~10B parameters it is often as fast. */
typedef struct fsdp_beside {
    bool have;
    mp_search_plan plan;
    mp_cp_comm asked; /* the --cp-comm-type of the search (the plan's is p2p) */
} fsdp_beside;

/* Whether the --format of the framework fw refuses plan p, and why: the
 * lines that name a plan's framework say so rather than "runs under" it (a
 * ZeRO-3 plan with the a2a CP exchange was "runs under torchtitan (FSDP2)
 * (--format torchtitan)", which refused it). */
static bool framework_refuses(const mp_search_plan *p, mp_framework fw, char *why, size_t size)
{
    static const mp_format formats[] = {[MP_FW_MEGATRON] = MP_FORMAT_MEGATRON,
                                        [MP_FW_DEEPSPEED] = MP_FORMAT_DEEPSPEED,
                                        [MP_FW_TORCHTITAN] = MP_FORMAT_TORCHTITAN};
    mp_buf tmp;
    mp_buf_init(&tmp);
    mp_error e;
    mp_error_clear(&e);
    mp_status st = mp_cli_framework_config(&p->config, p->plan, formats[fw], &tmp, &e);
    mp_buf_free(&tmp);
    snprintf(why, size, "%s", st == MP_OK ? "" : e.msg);
    return st != MP_OK;
}

static void beside_line(const mp_search_plan *w, const fsdp_beside *fb, mp_buf *b)
{
    if (!fb || !fb->have) return;
    const mp_parallel *p = &fb->plan.config.parallel;
    /* against the step the ranking used; with pp = 1 the FSDP plan's
     * simulation is its estimate */
    double ws = w->rank_step, fs = fb->plan.est.time.step;
    mp_framework fw = mp_plan_framework(&fb->plan.config);
    mp_buf_printf(b,
                  "\nbeside it, ZeRO-3 / FSDP%s under %s: tp=%lld%s cp=%lld dp=%lld mb=%lld "
                  "recompute=%s: step %.3f s by the estimate, %.1f%% %s than the winner's %.3f s, "
                  "memory %.1f GiB\n"
                  "  (--runtime any ranks such plans with Megatron's; no published FSDP run validates these\n"
                  "  numbers yet)\n",
                  p->hsdp ? " (hybrid: sharded in each node)" : "", mp_framework_name(fw),
                  (long long)p->tp, p->sp ? " sp" : "", (long long)p->cp,
                  (long long)p->dp, (long long)p->micro_batch, mp_recompute_name(p->recompute), fs,
                  100.0 * fabs(fs - ws) / ws, fs < ws ? "faster" : "slower", ws,
                  fb->plan.est.memory.peak / MP_GIB);
    char why[400];
    if (framework_refuses(&fb->plan, fw, why, sizeof why))
        mp_buf_printf(b, "  (--format %s refuses it: %s)\n", mp_framework_format(fw), why);
    if (p->cp > 1 && fb->asked != MP_CP_P2P)
        mp_buf_printf(b, "  (its context parallelism is costed with the p2p exchange, torchtitan's "
                         "ring attention: the %s\n  exchange is Transformer Engine's, which "
                         "Megatron-LM runs and torchtitan does not)\n",
                      mp_cp_comm_name(fb->asked));
}

static void table(const mp_config *base, const mp_search_result *r, const mp_times *winner_sim,
                  const fsdp_beside *fb,
                  mp_buf *b)
{
    const mp_training *t = &base->training;
    /* --fix precision=bf16|fp8: the plans' precisions, each named on its row */
    char precs[48];
    snprintf(precs, sizeof precs, "%s", mp_dtype_name(t->precision));
    bool mixed = false;
    for (int i = 0; i < r->n; i++) {
        const char *name = mp_dtype_name(r->plans[i].config.training.precision);
        mixed |= r->plans[i].config.training.precision != t->precision;
        if (mixed && !strstr(precs, name) && strlen(precs) + strlen(name) + 2 < sizeof precs)
            strcat(strcat(precs, "|"), name);
    }
    mp_buf_printf(b, "megaplan search: %s on %lld x %s, %s, seq %lld, global batch %lld", base->model.name,
                  (long long)t->gpus, base->hw.name, precs, (long long)t->seq,
                  (long long)t->global_batch);
    /* --cp-comm-type: the exchange of every plan with cp > 1 */
    if (base->parallel.cp_comm_type != MP_CP_P2P)
        mp_buf_printf(b, ", CP exchange %s (--cp-comm-type)",
                      mp_cp_comm_name(base->parallel.cp_comm_type));
    mp_buf_puts(b, "\n\n");
    bool days = t->tokens > 0;
    bool sim = false;
    for (int i = 0; i < r->n; i++) sim |= r->plans[i].simulated;
    /* the band of the plans' kind: MoE plans the MoE rows' (planner/band.h) */
    const mp_band base_band = mp_band_of(&base->hw, &base->model);
    bool band = mp_band_known(&base_band);
    /* an MoE model's plans differ in their expert split too: its columns */
    bool moe = mp_model_is_moe(&base->model);
    /* the recompute column as wide as its longest label (sel: with many modules) */
    int rcw = 13;
    for (int i = 0; i < r->n; i++) {
        char rc[48];
        recompute_label(&r->plans[i], rc, sizeof rc);
        if ((int)strlen(rc) > rcw) rcw = (int)strlen(rc);
    }
    mp_buf_printf(b, "rank  tp sp  pp vpp  cp    dp  mb  %-*s dist-opt schedule   %s  step s%s%s"
                     "  tok/s/GPU   MFU  memory GiB%s%s\n",
                  rcw, "recompute", moe ? "  ep etp dispatcher" : "", band ? "   likely s range" : "",
                  sim ? "  sim s" : "", days ? "     days" : "", mixed ? "  precision" : "");
    for (int i = 0; i < r->n; i++) {
        const mp_search_plan *sp = &r->plans[i];
        const mp_parallel *p = &sp->config.parallel;
        const mp_estimate *e = &sp->est;
        char rc[48];
        recompute_label(sp, rc, sizeof rc);
        mp_buf_printf(b, "%4d %3lld %-2s %3lld %3lld %3lld %5lld %3lld  %-*s %-8s %-11s",
                      i + 1, (long long)p->tp, p->sp ? "y" : "-", (long long)p->pp,
                      (long long)p->vpp, (long long)p->cp, (long long)p->dp,
                      (long long)p->micro_batch, rcw, rc,
                      p->hsdp ? "hsdp" : p->zero >= 2 ? (p->zero == 3 ? "zero3" : "zero2") : p->dist_opt ? "on" : "off",
                      short_sched(p->schedule));
        if (moe)
            mp_buf_printf(b, " %3lld %3lld %-10s", (long long)mp_parallel_ep(p),
                          (long long)mp_parallel_etp(p), mp_dispatcher_name(p->dispatcher));
        mp_buf_printf(b, " %7.3f", e->time.step);
        double lo, hi;
        const mp_band spb = mp_band_of(&sp->config.hw, &sp->config.model);
        if (band && mp_band_time(&spb, e->time.step, &lo, &hi))
            mp_buf_printf(b, "  %7.3f-%-7.3f", lo, hi);
        /* a plan the simulator could not run shows its estimate, marked */
        if (sim) mp_buf_printf(b, " %6.3f%s", sp->simulated ? sp->sim_step : e->time.step,
                               sp->simulated ? " " : "~");
        mp_buf_printf(b, " %9.1f %4.1f%%  %5.1f/%-4.0f", e->throughput.tokens_per_s_per_gpu,
                      100 * e->throughput.mfu, e->memory.peak / MP_GIB, e->memory.capacity / MP_GIB);
        if (days) mp_buf_printf(b, " %8.1f", e->throughput.days_for_tokens);
        if (mixed) mp_buf_printf(b, "  %s", mp_dtype_name(sp->config.training.precision));
        mp_buf_puts(b, sp->uneven ? "  *" : "");
        mp_buf_puts(b, "\n");
    }
    bool any_uneven = false, any_named = false;
    for (int i = 0; i < r->n; i++) any_uneven |= r->plans[i].uneven;
    for (int i = 0; i < r->n; i++) any_named |= named_modules(&r->plans[i]);
    if (any_named)
        mp_buf_puts(b, "sel: selective recompute of the modules named (--recompute-modules): "
                       "attn core_attn, ln layernorm, mlp, up mla_up_proj, act moe_act, "
                       "moe, shared shared_experts\n");
    if (any_uneven)
        mp_buf_puts(b, "* uneven stage split or per-layer recompute from the ILP "
                       "(mix n/s/f = layers with none/selective/full)\n");

    /* the winner, part by part, in the number the ranking used */
    const mp_search_plan *w = &r->plans[0];
    const mp_times *wt = winner_sim ? winner_sim : &w->est.time;
    if (winner_sim) {
        char what[64];
        snprintf(what, sizeof what, " simulated (estimate %.3f s)", w->est.time.step);
        winner_line(winner_sim, what, b);
    } else {
        winner_line(&w->est.time, "", b);
    }
    double wlo, whi;
    const mp_band wb = mp_band_of(&w->config.hw, &w->config.model);
    if (mp_band_time(&wb, wt->step, &wlo, &whi))
        mp_buf_printf(b, "        likely measured %.3f to %.3f s (the %serror band of %s on "
                         "held-out runs, %+.1f%% to %+.1f%%; docs/validation.md)\n",
                      wlo, whi, wb.moe ? "mixture-of-experts " : "", w->config.hw.name,
                      100 * wb.low, 100 * wb.high);
    if (winner_sim)
        mp_cli_disagreement(&w->est.time, winner_sim, b);
    const mp_memory *m = &w->est.memory;
    mp_buf_printf(b, "        memory %.1f GiB = weights %.1f + grads %.1f + optimizer %.1f + "
                     "activations %.1f + other %.1f (of %.0f)\n",
                  m->peak / MP_GIB, m->weights / MP_GIB, m->grads / MP_GIB, m->optimizer / MP_GIB,
                  m->activations / MP_GIB, m->other / MP_GIB, m->capacity / MP_GIB);
    if (w->plan && w->plan->n_stages > 0) {
        const mp_parallel *wp = &w->config.parallel;
        /* the split as Megatron's flags say it: the plan's, else its form */
        mp_split_form f = mp_split_form_of(&w->config, w->plan->stages, w->plan->n_stages);
        bool flags_given = wp->first_stage_layers > 0 || wp->last_stage_layers > 0;
        bool acct_given = wp->account_for_embedding || wp->account_for_loss;
        bool e = acct_given ? wp->account_for_embedding : f.embedding;
        bool l = acct_given ? wp->account_for_loss : f.loss;
        if (wp->pipeline_layout[0])
            mp_buf_printf(b, "        stages (layout \"%s\"", wp->pipeline_layout);
        else if (flags_given || (!acct_given && f.kind == MP_SPLIT_FLAGS))
            mp_buf_printf(b, "        stages (first/last flags %lld, %lld",
                          (long long)(flags_given ? wp->first_stage_layers : f.first),
                          (long long)(flags_given ? wp->last_stage_layers : f.last));
        else if (acct_given || f.kind == MP_SPLIT_ACCOUNT)
            mp_buf_printf(b, "        stages (account-for: the %s",
                          e && l ? "embedding and the loss" : e ? "embedding" : "loss");
        else
            mp_buf_printf(b, "        stages (%s",
                          mp_split_label(&w->config, w->plan->stages, w->plan->n_stages));
        if (w->split_solver)
            mp_buf_printf(b, "; %s", w->split_solver);
        if (w->split_solver && w->split_gap > 0)
            mp_buf_printf(b, ", gap %.2f%%", 100 * w->split_gap);
        else if (w->split_solver)
            mp_buf_puts(b, ", optimal");
        mp_buf_puts(b, "): blocks per stage");
        /* run-length: "4x19 3" = nineteen stages of 4 blocks, then one of 3 */
        int64_t L = w->config.model.layers;
        int32_t n = w->plan->n_stages, k = 0;
        while (k < n) {
            int32_t bgn = w->plan->stages[k].begin < 1 ? 1 : w->plan->stages[k].begin;
            int32_t end = w->plan->stages[k].end > L + 1 ? (int32_t)L + 1 : w->plan->stages[k].end;
            int32_t run = 1;
            while (k + run < n) {
                int32_t b2 = w->plan->stages[k + run].begin < 1 ? 1 : w->plan->stages[k + run].begin;
                int32_t e2 = w->plan->stages[k + run].end > L + 1 ? (int32_t)L + 1
                                                                 : w->plan->stages[k + run].end;
                if (e2 - b2 != end - bgn) break;
                run++;
            }
            if (run > 1) mp_buf_printf(b, " %dx%d", end - bgn, run);
            else mp_buf_printf(b, " %d", end - bgn);
            k += run;
        }
        mp_buf_puts(b, " (embedding on the first, head on the last)\n");
    }
    if (mp_model_is_moe(&w->config.model)) {
        const mp_parallel *wp = &w->config.parallel;
        mp_buf_printf(b, "        experts: ep=%lld etp=%lld edp=%lld, %s dispatcher\n",
                      (long long)mp_parallel_ep(wp), (long long)mp_parallel_etp(wp),
                      (long long)mp_parallel_edp(wp), mp_dispatcher_name(wp->dispatcher));
    }
    mp_framework fw = mp_plan_framework(&w->config);
    const char *short_of = NULL; /* what Megatron-LM's flags cannot say (the V schedules) */
    char why[400];
    if (fw == MP_FW_MEGATRON && w->plan && !mp_search_megatron_runs(w->plan, &short_of))
        mp_buf_printf(b, "        --format megatron writes its flags, but %s (--runtime megatron "
                         "searches what it runs)\n", short_of);
    else if (framework_refuses(w, fw, why, sizeof why))
        mp_buf_printf(b, "        would run under %s, but --format %s refuses it: %s\n",
                      mp_framework_name(fw), mp_framework_format(fw), why);
    else
        mp_buf_printf(b, "        runs under %s (--format %s)\n", mp_framework_name(fw),
                      mp_framework_format(fw));
    beside_line(w, fb, b);

    if (r->n > 1) mp_buf_puts(b, "\nwhy the next ones lose:\n");
    for (int i = 1; i < r->n; i++) {
        char diff[256], why[256];
        const mp_search_plan *o = &r->plans[i];
        mp_explain_config_diff(&w->config, &o->config, diff, sizeof diff);
        mp_explain_estimate_diff(&w->est, &o->est, why, sizeof why);
        mp_buf_printf(b, "  #%d %s%s: ", i + 1, diff,
                      o->uneven && !w->uneven ? " (ILP split)" : "");
        if (w->simulated && o->simulated)
            mp_buf_printf(b, "simulated %+.1f%%, estimate ", 100 * (o->sim_step - w->sim_step) / w->sim_step);
        mp_buf_printf(b, "%s\n", why);
    }
    /* Plans this close are not told apart by a model whose error on held-out
     * runs spans its error band (docs/validation.md): on vTrain's 18.4B cluster
     * two micro-batches predicted 1.5% apart measured 9% apart. Say so. */
    double tie = mp_band_width(&wb, NEAR_TIE);
    bool banded = mp_band_known(&wb);
    int close = 0;
    for (int i = 1; i < r->n; i++)
        if (r->plans[i].rank_step <= w->rank_step * (1 + tie))
            close++;
    if (close > 0) {
        /* each plan's own distance from #1 in the step the ranking used, and
         * the band's width (high - low) they all fall inside */
        mp_buf_printf(b, "  near tie:");
        int k = 0;
        for (int i = 1; i < r->n; i++) {
            if (r->plans[i].rank_step > w->rank_step * (1 + tie)) continue;
            mp_buf_printf(b, "%s #%d %+.1f%%", k++ ? "," : "", i + 1,
                          100 * (r->plans[i].rank_step / w->rank_step - 1));
        }
        if (banded)
            mp_buf_printf(b, " slower than #1, each less than the width of the cost model's "
                             "%serror band on held-out runs (%.1f%%, docs/validation.md): measure "
                             "them before committing\n",
                          wb.moe ? "mixture-of-experts " : "", 100 * tie);
        else
            mp_buf_printf(b, " slower than #1, each within %.0f%%: measure them before "
                             "committing\n",
                          100 * tie);
    }
    mp_buf_puts(b, "\n");
    counts_footer(&r->counts, b);
}

/* ---- JSON ------------------------------------------------------------------- */

static cJSON *counts_json(const mp_search_counts *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "considered", (double)c->considered);
    cJSON_AddNumberToObject(o, "pruned_memory", (double)c->pruned_memory);
    cJSON_AddNumberToObject(o, "pruned_time", (double)c->pruned_time);
    cJSON_AddNumberToObject(o, "estimated", (double)c->estimated);
    /* nothing fits: the memory-pruned candidates costed for the closest plan */
    cJSON_AddNumberToObject(o, "closest_costed", (double)c->closest_costed);
    cJSON_AddNumberToObject(o, "closest_unproven", (double)c->closest_unproven);
    cJSON_AddNumberToObject(o, "fitting", (double)c->fitting);
    cJSON *rj = cJSON_AddObjectToObject(o, "rejected");
    if (rj)
        for (int r = 0; r < MP_REJECT_COUNT; r++)
            cJSON_AddNumberToObject(rj, mp_reject_key((mp_reject_reason)r), (double)c->rejected[r]);
    cJSON_AddNumberToObject(o, "split", (double)c->split);
    cJSON_AddNumberToObject(o, "split_uneven", (double)c->split_uneven);
    cJSON_AddNumberToObject(o, "simulated", (double)c->simulated);
    /* plans the simulator could not run (ranked by their estimate) and why the first */
    cJSON_AddNumberToObject(o, "simulation_failed", (double)c->sim_failed);
    if (c->sim_failed)
        cJSON_AddStringToObject(o, "first_simulation_failure", c->sim_failure);
    else
        cJSON_AddNullToObject(o, "first_simulation_failure");
    cJSON_AddNumberToObject(o, "seconds", c->seconds);
    return o;
}

static cJSON *plan_json(const mp_search_plan *sp, int rank, const mp_search_counts *c,
                        double winner_step)
{
    cJSON *o = mp_estimate_to_json(&sp->config, &sp->est, NULL);
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "rank", rank);
    cJSON *s = cJSON_AddObjectToObject(o, "split");
    if (s) {
        cJSON_AddStringToObject(s, "method", sp->split_method ? sp->split_method : "even");
        if (sp->split_solver)
            cJSON_AddStringToObject(s, "solver", sp->split_solver);
        else
            cJSON_AddNullToObject(s, "solver");
        cJSON_AddNumberToObject(s, "gap", sp->split_gap);
        cJSON_AddBoolToObject(s, "uneven", sp->uneven);
        cJSON_AddNumberToObject(s, "even_split_step_s", sp->est_even.time.step);
        if (sp->plan && sp->plan->n_stages > 0) {
            cJSON *st = cJSON_AddArrayToObject(s, "stages");
            for (int32_t k = 0; st && k < sp->plan->n_stages; k++) {
                int pair[2] = {sp->plan->stages[k].begin, sp->plan->stages[k].end};
                cJSON_AddItemToArray(st, cJSON_CreateIntArray(pair, 2));
            }
        }
        if (sp->mixed_recompute && sp->plan && sp->plan->has_layer_recompute) {
            cJSON *lr = cJSON_AddArrayToObject(s, "layer_recompute");
            int64_t items = sp->config.model.layers + 2;
            for (int64_t i = 0; lr && i < items; i++)
                cJSON_AddItemToArray(lr, cJSON_CreateString(mp_recompute_name(
                                             (mp_recompute)sp->plan->layer_recompute[i])));
        }
    }
    if (sp->simulated) cJSON_AddNumberToObject(o, "simulated_step_s", sp->sim_step);
    cJSON_AddBoolToObject(o, "simulated", sp->simulated);
    /* within the error band's width of the first: not told apart by the model */
    const mp_band spb = mp_band_of(&sp->config.hw, &sp->config.model);
    cJSON_AddBoolToObject(o, "near_tie", rank > 1 && sp->rank_step <= winner_step *
                                                          (1 + mp_band_width(&spb, NEAR_TIE)));
    cJSON *cj = counts_json(c);
    if (cj) cJSON_AddItemToObject(o, "search", cj);
    return o;
}

/* One more search with ZeRO-3 fixed, when the first did not rank ZeRO plans
 * and nothing rules them out (a fixed pipeline, a fixed Megatron sharding). */
static void find_fsdp_beside(const mp_search_options *opt, fsdp_beside *fb)
{
    fb->have = false;
    const mp_parallel *p = &opt->base.parallel;
    if (opt->zero_sharding || opt->megatron_runtime || (opt->fixed & MP_FIX_ZERO) ||
        ((opt->fixed & MP_FIX_PP) && p->pp > 1) ||
        ((opt->fixed & MP_FIX_DIST_OPT) && !p->dist_opt) || (opt->fixed & MP_FIX_VPP))
        return;
    mp_search_options o = *opt;
    o.fixed |= MP_FIX_ZERO;
    o.base.parallel.zero = 3;
    o.base.parallel.dist_opt = true;
    /* torchtitan's context parallelism is PyTorch's ring attention, and its
     * job file is written for p2p only (mp_torchtitan_config): an FSDP plan
     * with cp > 1 costed with a2a or all_gather would be one nothing runs */
    fb->asked = opt->base.parallel.cp_comm_type;
    o.base.parallel.cp_comm_type = MP_CP_P2P;
    o.top_k = 1;
    o.no_simulate = true;
    o.progress = NULL;
    mp_search_result r;
    mp_error err;
    mp_error_clear(&err);
    if (mp_search(&o, &r, &err) == MP_OK && r.n > 0) {
        fb->have = true;
        fb->plan = r.plans[0];
        r.plans[0].plan = NULL;
    }
    mp_search_result_free(&r);
}

/* ---- main ------------------------------------------------------------------- */

int cmd_search(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        if (mp_search_hw_wanted(argc, argv)) return mp_cmd_search_hw(argc, argv);
        mp_verb_doc_write(&mp_doc_search, stdout);
        return 0;
    }
    if (mp_search_hw_wanted(argc, argv)) return mp_cmd_search_hw(argc, argv);
    mp_search_cli sc;
    if (mp_search_cli_parse_all(&argc, argv, &cc, &sc, &err) != MP_OK)
        return mp_cli_fail("search", &err);
    if (sc.force && !sc.output) { /* taken and did nothing */
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--force",
                     "nothing to overwrite: it lets -o replace a read-only file");
        return mp_cli_fail("search", &err);
    }
    mp_search_options opt;
    /* a setting the --format's file cannot say (the model's MTP modules,
     * fp8, a fixed ep DeepSpeed's file has no key for, ...) is no winner's:
     * said before the search, with no "--fix" hint */
    if (mp_search_cli_options(&cc, &sc, &opt, &err) != MP_OK ||
        mp_search_cli_check_hsdp(&cc, &sc, &err) != MP_OK ||
        mp_cli_framework_settings(&opt.base, cc.format, (opt.fixed & MP_FIX_EP) != 0, &err) !=
            MP_OK)
        return mp_cli_fail("search", &err);
    /* where -o goes is settled before the search, so a refused path costs nothing */
    mp_output plan_out;
    if (sc.output && (mp_cli_output_not_input("-o", sc.output, &cc, NULL, &err) != MP_OK ||
                      mp_output_prepare(sc.output, sc.force, &plan_out, &err) != MP_OK))
        return mp_cli_fail("search", &err);
    progress pg = {.start = wall(), .tty = isatty(2) != 0};
    opt.progress = on_progress;
    opt.progress_user = &pg;

    mp_search_result r;
    mp_status st = mp_search(&opt, &r, &err);
    if (pg.shown) fprintf(stderr, "\r                      \r");
    if (st == MP_ENOFIT) {
        char line[1024], optn[64];
        mp_cli_option_name(err.field, optn, sizeof optn);
        snprintf(err.field, sizeof err.field, "%s", optn);
        fprintf(stderr, "megaplan search: %s\n", mp_error_format(&err, line, sizeof line));
        if (r.have_closest) {
            const mp_parallel *p = &r.closest.parallel;
            const mp_memory *m = &r.closest_est.memory;
            char mods[128] = ""; /* selective's modules, when named */
            if (p->recompute == MP_RECOMPUTE_SELECTIVE && p->recompute_modules) {
                memcpy(mods, " recompute_modules=", 20);
                mp_recompute_modules_format(p->recompute_modules, mods + 19, sizeof mods - 19);
            }
            fprintf(stderr,
                    "  closest: tp=%lld%s pp=%lld vpp=%lld cp=%lld dp=%lld mb=%lld recompute=%s%s "
                    "dist_opt=%s: %.1f GiB (weights %.1f + grads %.1f + optimizer %.1f + "
                    "activations %.1f + other %.1f), over by %.1f GiB\n",
                    (long long)p->tp, p->sp ? " sp" : "", (long long)p->pp, (long long)p->vpp,
                    (long long)p->cp, (long long)p->dp, (long long)p->micro_batch,
                    mp_recompute_name(p->recompute), mods, p->dist_opt ? "on" : "off", m->peak / MP_GIB,
                    m->weights / MP_GIB, m->grads / MP_GIB, m->optimizer / MP_GIB,
                    m->activations / MP_GIB, m->other / MP_GIB, r.closest_est.over_bytes / MP_GIB);
            double stat = m->weights + m->grads + m->optimizer;
            fprintf(stderr, "  why: %s\n",
                    stat > m->capacity - m->other
                        ? "the weights, gradients and optimizer states alone exceed a GPU: more "
                          "GPUs (or a larger --fix pp/tp) are needed"
                        : "the activations do not fit beside the model states: fewer fixed "
                          "settings, a shorter --seq or a smaller --global-batch may help");
        }
        mp_buf fb;
        mp_buf_init(&fb);
        counts_footer(&r.counts, &fb);
        if (fb.data) fputs(fb.data, stderr);
        mp_buf_free(&fb);
        /* still one document: an empty list */
        if (cc.format == MP_FORMAT_JSON || cc.format == MP_FORMAT_YAML) puts("[]");
        mp_search_result_free(&r);
        return 1;
    }
    if (st != MP_OK) {
        mp_cli_error_as_option(&err);
        mp_cli_error_default_batch(&cc, &err);
        return mp_cli_fail("search", &err);
    }

    /* the first --top of the plans ranked (at least MP_SEARCH_RERANK_MIN are) */
    mp_search_result all = r;
    if (r.n > sc.top) r.n = sc.top;
    mp_buf out;
    mp_buf_init(&out);
    int rc = 0;
    if (cc.format == MP_FORMAT_JSON || cc.format == MP_FORMAT_YAML) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; arr && i < r.n; i++) {
            cJSON *o = plan_json(&r.plans[i], i + 1, &r.counts, r.plans[0].rank_step);
            if (!o) {
                cJSON_Delete(arr);
                arr = NULL;
                break;
            }
            cJSON_AddItemToArray(arr, o);
        }
        if (!arr) {
            out.oom = true;
        } else {
            mp_cli_write_data(arr, cc.format, &out);
            cJSON_Delete(arr);
        }
    } else if (mp_cli_is_framework_format(cc.format)) {
        if (mp_cli_framework_config(&r.plans[0].config, r.plans[0].plan, cc.format, &out, &err) !=
            MP_OK) {
            /* the winner is what is written: say it is the winner that the
             * framework cannot run (it said "--format: torchtitan has no
             * dualpipe pipeline schedule" of a search given --fix pp=2 alone) */
            const mp_parallel *wp = &r.plans[0].config.parallel;
            char why[sizeof err.msg];
            snprintf(why, sizeof why, "%s", err.msg);
            mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--format",
                         "the best plan found (tp=%lld pp=%lld vpp=%lld cp=%lld dp=%lld, %s) "
                         "cannot be written so: %.300s; --fix settings the framework runs to "
                         "rank only those",
                         (long long)wp->tp, (long long)wp->pp, (long long)wp->vpp,
                         (long long)wp->cp, (long long)wp->dp, mp_schedule_name(wp->schedule),
                         why);
            mp_buf_free(&out);
            mp_search_result_free(&r);
            return mp_cli_fail("search", &err);
        }
    } else {
        /* the winner's simulated parts, when the ranking used its simulation */
        mp_sim_result sr;
        mp_sim_options so = {.record_timeline = false};
        mp_error serr;
        const mp_search_plan *w = &r.plans[0];
        bool have_sim = w->simulated &&
                        mp_simulate(&w->config, w->plan, &so, &sr, &serr) == MP_OK;
        fsdp_beside fb = {0};
        find_fsdp_beside(&opt, &fb);
        table(&opt.base, &r, have_sim ? &sr.exposed : NULL, &fb, &out);
        free(fb.plan.plan);
        if (have_sim) mp_sim_result_free(&sr);
    }
    if (sc.output) {
        mp_buf pf;
        mp_buf_init(&pf);
        cJSON *pred = mp_estimate_to_json(&r.plans[0].config, &r.plans[0].est, NULL);
        mp_plan *pl = r.plans[0].plan;
        pl->config = r.plans[0].config;
        mp_plan_write_yaml(pl, pred, &pf);
        cJSON_Delete(pred);
        if (pf.oom || !pred) {
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            rc = mp_cli_fail("search", &err);
        } else if (mp_output_write(&plan_out, pf.data, pf.len, &err) != MP_OK) {
            rc = mp_cli_fail("search", &err);
        }
        mp_buf_free(&pf);
    }
    mp_search_result_free(&all);
    if (rc) {
        mp_buf_free(&out);
        return rc;
    }
    if (sc.output && plan_out.kind == MP_OUT_FD && plan_out.fd == 1) {
        /* the plan took stdout: the report goes beside it on stderr */
        if (out.data) fputs(out.data, stderr);
        mp_buf_free(&out);
        return 0;
    }
    return mp_cli_emit("search", &out);
}
