/* search_hw.c — `megaplan search` over hardware too: with --hw a,b,c (or
 * all), --gpus MIN..MAX, --deadline or --budget, one search per profile and
 * GPU count (search/hwchoice.h), printed as the days/cost Pareto front with
 * energy, the cheapest plan within the deadline and the fastest within the
 * budget. The other options are search's own and mean the same. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/framework_out.h"
#include "cli/options.h"
#include "cli/search_common.h"
#include "cli/search_hw.h"
#include "core/buf.h"
#include "core/io.h"
#include "core/output.h"
#include "search/hwchoice.h"
#include "planner/report.h"
#include "sim/plot.h"

/* ---- the options only this mode has ------------------------------------------ */

typedef struct hw_args {
    const char *hw_list, *gpus, *deadline, *budget, *pue, *plot;
    const char *prices[MP_HWCHOICE_MAX_HW];
    int n_prices;
} hw_args;

enum { H_HW, H_GPUS, H_DEADLINE, H_BUDGET, H_PUE, H_PLOT, H_PRICE };

static const mp_opt hw_rows[] = {
    {"--hw", NULL, "H1,H2,...|all", H_HW, 0, "the profiles to compare (all: every built-in one)",
     NULL},
    {"--gpus", NULL, "N|MIN..MAX", H_GPUS, 0,
     "GPU counts: the powers of two from MIN to MAX, and both ends, in whole nodes", NULL},
    {"--deadline", NULL, "D", H_DEADLINE, 0,
     "name the cheapest plan that trains within D (30d, 72h)", NULL},
    {"--budget", NULL, "USD", H_BUDGET, 0, "name the fastest plan that costs at most USD (2.5M)",
     NULL},
    {"--price", NULL, "H=USD", H_PRICE, MP_OPT_REPEAT,
     "profile H's price per GPU-hour, over the profile's own; repeatable", NULL},
    {"--pue", NULL, "X", H_PUE, 0,
     "power usage effectiveness the energy is multiplied by (default 1: IT energy)", NULL},
    {"--plot", NULL, "FILE.svg|png", H_PLOT, 0,
     "days against cost for every priced point, with the front (gnuplot)", NULL},
};

static const mp_opt_group hw_opts = MP_OPT_GROUP("search over hardware", hw_rows);

const mp_verb_doc mp_doc_search_hw = {
    .name = "search",
    .summary = "rank hardware, GPU counts and plans by days and cost",
    .usage = "megaplan search --model M --tokens T --hw H1,H2,...|all [--gpus N|MIN..MAX]\n"
             "megaplan search --model M --tokens T [--deadline 30d] [--budget USD] [options]\n",
    .text = "One search per profile and GPU count: days to train T tokens, cost at the "
            "profile's price per GPU-hour (--price overrides it), and energy at full board "
            "and node power times --pue. Prints the days/cost Pareto front, and names the "
            "cheapest plan within --deadline and the fastest within --budget. The other "
            "options are search's own and mean the same.",
    .groups = (const mp_opt_group *const[]){&hw_opts, &mp_cli_config_opts, &mp_search_cli_opts,
                                            &mp_search_plan_opts, NULL},
    .operand = NULL,
};

/* Takes this mode's options out of argv, leaving the rest in order. */
static mp_status take_hw_args(int *argc, char **argv, hw_args *a, mp_error *err)
{
    memset(a, 0, sizeof *a);
    int kept = 1;
    mp_opt_seen seen = {0};
    for (int i = 1; i < *argc; i++) {
        const mp_opt *o = NULL;
        const char *v = NULL;
        const char *typed = argv[i];
        int found = mp_opt_take(hw_rows, sizeof hw_rows / sizeof hw_rows[0], *argc, argv, &i, &o,
                                &v, err);
        if (found < 0)
            return MP_EINPUT;
        if (!found) {
            argv[kept++] = argv[i];
            continue;
        }
        if (mp_opt_once(&seen, o, v, typed, err) < 0)
            return MP_EINPUT;
        switch (o->id) {
        case H_HW: a->hw_list = v; break;
        case H_GPUS: a->gpus = v; break;
        case H_DEADLINE: a->deadline = v; break;
        case H_BUDGET: a->budget = v; break;
        case H_PUE: a->pue = v; break;
        case H_PLOT: a->plot = v; break;
        case H_PRICE:
            if (a->n_prices >= MP_HWCHOICE_MAX_HW)
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--price", "given too often");
            a->prices[a->n_prices++] = v;
            break;
        }
    }
    argv[kept] = NULL;
    *argc = kept;
    return MP_OK;
}

static bool value_of(int argc, char **argv, const char *opt, const char **value)
{
    size_t n = strlen(opt);
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], opt, n) && argv[i][n] == '=') {
            *value = argv[i] + n + 1;
            return true;
        }
        if (!strcmp(argv[i], opt) && i + 1 < argc) {
            *value = argv[i + 1];
            return true;
        }
    }
    return false;
}

bool mp_search_hw_wanted(int argc, char **argv)
{
    const char *v;
    /* --plot belongs to this mode only when another of its options is given */
    if (value_of(argc, argv, "--hw", &v) && (strchr(v, ',') || !strcmp(v, "all"))) return true;
    if (value_of(argc, argv, "--gpus", &v) && strstr(v, "..")) return true;
    return value_of(argc, argv, "--deadline", &v) || value_of(argc, argv, "--budget", &v) ||
           value_of(argc, argv, "--price", &v) || value_of(argc, argv, "--pue", &v);
}

/* A positive number with an optional suffix from the table (value multiplies). */
typedef struct suffix { const char *name; double scale; } suffix;

static mp_status parse_scaled(const char *opt, const char *s, const suffix *tab, double lo,
                              double hi, const char *example, double *out, mp_error *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* plain decimal, as every number megaplan reads: strtod also took
     * " 2.49" (--price dgx-h100= 2.49), hex ("0x10") and "infinity"-like words */
    const char *d = s + (s[0] == '-' || s[0] == '+');
    bool decimal = (isdigit((unsigned char)d[0]) || d[0] == '.') && !strpbrk(s, "xXpP");
    if (end == s || errno || !isfinite(v) || !decimal)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "'%.40s' is not a number (e.g. %s)",
                            s, example);
    double scale = tab ? 0 : 1;
    for (const suffix *t = tab; t && t->name; t++)
        if (!strcmp(end, t->name)) scale = t->scale;
    if (!tab && *end) scale = 0;
    if (scale == 0)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "'%.40s': unknown unit (e.g. %s)", s,
                            example);
    v *= scale;
    if (!(v >= lo && v <= hi))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, opt, "%.40s is out of range (e.g. %s)", s,
                            example);
    *out = v;
    return MP_OK;
}

static mp_status parse_gpus(const char *s, int64_t *lo, int64_t *hi, mp_error *err)
{
    char *end;
    errno = 0;
    long long a = strtoll(s, &end, 10), b = a;
    if (!strncmp(end, "..", 2)) {
        const char *rest = end + 2;
        b = strtoll(rest, &end, 10);
        /* "8.. 16" was read as 8..16 (strtoll skips spaces), "8 ..16" refused */
        if (end == rest || !isdigit((unsigned char)rest[0])) b = -1;
    }
    if (errno || *end || a < 1 || b < a || b > (1LL << 24))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--gpus",
                            "'%.40s': expected N or MIN..MAX with 1 <= MIN <= MAX <= 16777216", s);
    *lo = a;
    *hi = b;
    return MP_OK;
}

/* first: the first profile as given (a name or a file), for the option check below */
static mp_status load_profiles(const char *list, mp_hwchoice_options *o, char *first,
                               size_t first_size, mp_error *err)
{
    char buf[1024];
    if (!list) list = "all";
    if (strlen(list) >= sizeof buf)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw", "too long");
    if (!strcmp(list, "all")) {
        buf[0] = '\0';
        for (int i = 0; i < mp_hw_preset_count(); i++) {
            const char *name = mp_hw_preset_name(i);
            /* the vTrain cluster is a measured A100 system, not a product to rent; the
             * H800 (DeepSeek-V3's cluster) an export part of 2023 without a price */
            if (!strcmp(name, "a100-4xhdr") || !strcmp(name, "h800")) continue;
            strncat(buf, buf[0] ? "," : "", sizeof buf - strlen(buf) - 1);
            strncat(buf, name, sizeof buf - strlen(buf) - 1);
        }
    } else {
        strcpy(buf, list);
    }
    /* an empty name ("a100,", ",,") was skipped by strtok: refused, as the
     * other lists (--recompute-modules, --cuda-graph-scope) refuse one */
    if (mp_cli_list_has_empty(buf, ','))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw",
                            "'%.200s' has an empty profile name", buf);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        /* "dgx-a100, h200" said "hw: unknown hardware profile ' h200'" */
        if (mp_opt_spaced(tok, strlen(tok)))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw",
                                "'%.64s' has spaces around it: give the names alone", tok);
        /* "all,dgx-a100" called all an unknown profile */
        if (!strcmp(tok, "all"))
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw",
                                "all (every profile) cannot be combined with names: give all "
                                "alone or the names alone");
        if (o->n_hw >= MP_HWCHOICE_MAX_HW)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw", "at most %d profiles",
                                MP_HWCHOICE_MAX_HW);
        for (int i = 0; i < o->n_hw; i++)
            if (!strcmp(o->hws[i].name, tok))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw", "%.64s is listed twice", tok);
        mp_status st = mp_hw_load(tok, &o->hws[o->n_hw], err);
        if (st != MP_OK) {
            /* an unknown name is the option's ("hw: unknown hardware profile" was
             * the profile reader's field); a file's errors keep their own */
            if (!err->file[0]) snprintf(err->field, sizeof err->field, "--hw");
            return st;
        }
        /* a file holding a listed profile (its name inside) was costed twice,
         * every row of the table doubled */
        for (int i = 0; i < o->n_hw; i++)
            if (!strcmp(o->hws[i].name, o->hws[o->n_hw].name))
                return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw",
                                    "%.64s is listed twice (%.200s is named %s inside)",
                                    o->hws[i].name, tok, o->hws[i].name);
        if (!o->n_hw) snprintf(first, first_size, "%s", tok);
        o->n_hw++;
    }
    if (!o->n_hw) return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--hw", "names no profile");
    return MP_OK;
}

/* priced[i]: profile i's price was given already */
static mp_status apply_price(const char *item, mp_hwchoice_options *o, bool *priced, mp_error *err)
{
    const char *eq = strchr(item, '=');
    if (!eq || eq == item)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--price",
                            "'%.60s' is not PROFILE=USD_PER_GPU_HOUR", item);
    for (int i = 0; i < o->n_hw; i++) {
        if (strlen(o->hws[i].name) != (size_t)(eq - item) ||
            strncmp(o->hws[i].name, item, (size_t)(eq - item)))
            continue;
        if (priced[i]) /* the last one silently won */
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--price",
                                "%s is priced twice: say it once", o->hws[i].name);
        double v;
        mp_status st = parse_scaled("--price", eq + 1, NULL, 1e-6, 1e4, "dgx-h100=2.49", &v, err);
        if (st != MP_OK) return st;
        o->hws[i].price_per_gpu_hour = v;
        priced[i] = true; /* its date shown as "given", once the profile is checked */
        return MP_OK;
    }
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--price", "'%.*s' is not among --hw",
                        (int)(eq - item > 60 ? 60 : eq - item), item);
}

/* ---- output ---------------------------------------------------------------------- */

static void parallel_label(const mp_config *c, char *buf, size_t n)
{
    const mp_parallel *p = &c->parallel;
    char vpp[24] = "", shard[32] = "";
    if (p->vpp > 1) snprintf(vpp, sizeof vpp, " v%lld", (long long)p->vpp);
    if (p->hsdp) snprintf(shard, sizeof shard, " hsdp");
    else if (p->zero >= 2) snprintf(shard, sizeof shard, " zero%lld", (long long)p->zero);
    else if (p->dist_opt) snprintf(shard, sizeof shard, " dist-opt");
    snprintf(buf, n, "tp%lld%s pp%lld%s cp%lld dp%lld mb%lld %s%s", (long long)p->tp,
             p->sp ? "+sp" : "", (long long)p->pp, vpp, (long long)p->cp, (long long)p->dp,
             (long long)p->micro_batch, mp_recompute_name(p->recompute), shard);
    if (c->training.precision == MP_DTYPE_FP8) { /* --fix precision=bf16|fp8 */
        size_t len = strlen(buf);
        snprintf(buf + len, n > len ? n - len : 0, " fp8");
    }
}

static void money(double usd, char *buf, size_t n)
{
    if (usd >= 1e6) snprintf(buf, n, "$%.2fM", usd / 1e6);
    else if (usd >= 1e3) snprintf(buf, n, "$%.1fk", usd / 1e3);
    else snprintf(buf, n, "$%.0f", usd);
}

static void point_line(const mp_hwchoice_options *o, const mp_hwchoice_point *p, mp_buf *b)
{
    char par[160], cost[32];
    parallel_label(&p->plan.config, par, sizeof par);
    if (p->priced) money(p->cost_usd, cost, sizeof cost);
    else snprintf(cost, sizeof cost, "no price");
    /* MFU at the step the days come from (simulated when simulated) */
    double mfu = p->plan.est.throughput.mfu * p->plan.est.time.step / p->step_s;
    mp_buf_printf(b, "%-12s %6lld %8.1f %10s %9.1f %5.1f%%  %s\n", o->hws[p->hw].name,
                  (long long)p->gpus, p->days, cost, p->energy_mwh, 100.0 * mfu, par);
}

static void table(const mp_hwchoice_options *o, const mp_hwchoice_result *r, mp_buf *b)
{
    const mp_config *c = &o->search.base;
    mp_buf_printf(b, "megaplan search: %s, %.3g tokens, seq %lld, global batch %lld, %s; "
                     "%d profiles x %lld..%lld GPUs",
                  c->model.name, c->training.tokens, (long long)c->training.seq,
                  (long long)c->training.global_batch, mp_dtype_name(c->training.precision),
                  o->n_hw, (long long)o->gpus_min, (long long)o->gpus_max);
    /* --cp-comm-type: the exchange of every plan with cp > 1 */
    if (c->parallel.cp_comm_type != MP_CP_P2P)
        mp_buf_printf(b, "; CP exchange %s (--cp-comm-type)", mp_cp_comm_name(c->parallel.cp_comm_type));
    mp_buf_puts(b, "\n\n");
    const char *head = "hardware       gpus     days       cost       MWh   MFU  plan\n";
    mp_buf_puts(b, "Pareto front (no other point is both faster and cheaper):\n");
    mp_buf_puts(b, head);
    int shown = 0;
    for (int i = 0; i < r->n; i++)
        if (r->points[i].pareto) {
            point_line(o, &r->points[i], b);
            shown++;
        }
    if (!shown) mp_buf_puts(b, "  (none: no priced point fits)\n");
    bool unpriced = false;
    for (int i = 0; i < r->n; i++) unpriced |= r->points[i].fits && !r->points[i].priced;
    if (unpriced) {
        mp_buf_puts(b, "\nwithout a price (give --price PROFILE=USD), by days:\n");
        for (int i = 0; i < r->n; i++)
            if (r->points[i].fits && !r->points[i].priced) point_line(o, &r->points[i], b);
    }
    mp_buf_puts(b, "\n");
    if (o->deadline_s > 0) {
        if (r->cheapest_in_deadline >= 0) {
            mp_buf_printf(b, "cheapest within %.3g days:\n", o->deadline_s / 86400.0);
            point_line(o, &r->points[r->cheapest_in_deadline], b);
        } else {
            mp_buf_printf(b, "nothing priced finishes within %.3g days", o->deadline_s / 86400.0);
            if (r->fastest >= 0)
                mp_buf_printf(b, " (the fastest point takes %.1f days)", r->points[r->fastest].days);
            mp_buf_puts(b, "\n");
        }
    }
    if (o->budget_usd > 0) {
        char bud[32];
        money(o->budget_usd, bud, sizeof bud);
        if (r->fastest_in_budget >= 0) {
            mp_buf_printf(b, "fastest within %s:\n", bud);
            point_line(o, &r->points[r->fastest_in_budget], b);
        } else {
            char least[32] = "";
            if (r->cheapest >= 0) money(r->points[r->cheapest].cost_usd, least, sizeof least);
            mp_buf_printf(b, "nothing fits a budget of %s%s%s\n", bud,
                          least[0] ? " (the cheapest point costs " : "", least[0] ? least : "");
            if (least[0]) mp_buf_puts(b, ")\n");
        }
    }
    if (o->deadline_s <= 0 && o->budget_usd <= 0) {
        if (r->cheapest >= 0) {
            mp_buf_puts(b, "cheapest:\n");
            point_line(o, &r->points[r->cheapest], b);
        }
        if (r->fastest >= 0) {
            mp_buf_puts(b, "fastest:\n");
            point_line(o, &r->points[r->fastest], b);
        }
    }
    int fits = 0, refused = 0;
    for (int i = 0; i < r->n; i++) r->points[i].fits ? fits++ : refused++;
    mp_buf_printf(b, "\nprices: ");
    for (int h = 0; h < o->n_hw; h++)
        mp_buf_printf(b, "%s%s ", h ? ", " : "", o->hws[h].name),
            o->hws[h].price_per_gpu_hour > 0
                ? mp_buf_printf(b, "$%.2f/GPU-h (%s)", o->hws[h].price_per_gpu_hour,
                                o->hws[h].price_date[0] ? o->hws[h].price_date : "undated")
                : mp_buf_puts(b, "none");
    mp_buf_printf(b, "\nsearched %d points (%d with a plan, %d where nothing runs) in %.2f s, each "
                     "with Megatron's even stage split\n(search --hw H --gpus N on a point adds "
                     "the ILP's split)\n"
                     "energy at full board and node power (an upper bound) x PUE %.2g\n",
                  r->n, fits, refused, r->seconds, o->pue);
}

static cJSON *point_json(const mp_hwchoice_options *o, const mp_hwchoice_point *p)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "hw", o->hws[p->hw].name);
    cJSON_AddNumberToObject(j, "gpus", (double)p->gpus);
    cJSON_AddBoolToObject(j, "fits", p->fits);
    if (!p->fits) {
        cJSON_AddStringToObject(j, "why", p->why);
        return j;
    }
    cJSON_AddNumberToObject(j, "step_s", p->step_s);
    cJSON_AddNumberToObject(j, "tokens_per_s", p->tokens_per_s);
    cJSON_AddNumberToObject(j, "days", p->days);
    if (p->priced) cJSON_AddNumberToObject(j, "cost_usd", p->cost_usd);
    else cJSON_AddNullToObject(j, "cost_usd");
    cJSON_AddNumberToObject(j, "energy_mwh", p->energy_mwh);
    cJSON_AddBoolToObject(j, "pareto", p->pareto);
    cJSON *est = mp_estimate_to_json(&p->plan.config, &p->plan.est, NULL);
    if (est) cJSON_AddItemToObject(j, "estimate", est);
    return j;
}

static cJSON *result_json(const mp_hwchoice_options *o, const mp_hwchoice_result *r)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddStringToObject(root, "model", o->search.base.model.name);
    cJSON_AddNumberToObject(root, "tokens", o->search.base.training.tokens);
    cJSON_AddNumberToObject(root, "pue", o->pue);
    if (o->deadline_s > 0) cJSON_AddNumberToObject(root, "deadline_days", o->deadline_s / 86400.0);
    if (o->budget_usd > 0) cJSON_AddNumberToObject(root, "budget_usd", o->budget_usd);
    cJSON *pts = cJSON_AddArrayToObject(root, "points");
    for (int i = 0; pts && i < r->n; i++) {
        cJSON *p = point_json(o, &r->points[i]);
        if (!p) {
            cJSON_Delete(root);
            return NULL;
        }
        cJSON_AddItemToArray(pts, p);
    }
    const struct { const char *key; int idx; } picks[] = {
        {"cheapest", r->cheapest}, {"fastest", r->fastest},
        {"cheapest_within_deadline", r->cheapest_in_deadline},
        {"fastest_within_budget", r->fastest_in_budget}};
    for (size_t k = 0; k < sizeof picks / sizeof picks[0]; k++) {
        if (picks[k].idx < 0) cJSON_AddNullToObject(root, picks[k].key);
        else cJSON_AddNumberToObject(root, picks[k].key, picks[k].idx);
    }
    return root;
}

/* ---- the front as a picture ------------------------------------------------------------ */

typedef struct front_plot {
    const mp_hwchoice_options *o;
    const mp_hwchoice_result *r;
    int blocks[MP_HWCHOICE_MAX_HW]; /* the profiles with priced points, in data order */
    int n_blocks;
} front_plot;

/* One block of "days cost" per profile with priced points, then the front
 * in order of days (gnuplot's index blocks, two blank lines apart). */
static void front_data(front_plot *fp, mp_buf *d)
{
    fp->n_blocks = 0;
    for (int h = 0; h < fp->o->n_hw; h++) {
        bool any = false;
        for (int i = 0; i < fp->r->n; i++) {
            const mp_hwchoice_point *p = &fp->r->points[i];
            if (p->hw != h || !p->fits || !p->priced) continue;
            mp_buf_printf(d, "%.6g %.6g\n", p->days, p->cost_usd);
            any = true;
        }
        if (any) {
            fp->blocks[fp->n_blocks++] = h;
            mp_buf_puts(d, "\n\n");
        }
    }
    /* the front, by days (a handful of points: a simple selection) */
    bool *done = calloc((size_t)fp->r->n, sizeof *done);
    if (!done) {
        d->oom = true;
        return;
    }
    for (;;) {
        int best = -1;
        for (int i = 0; i < fp->r->n; i++)
            if (fp->r->points[i].pareto && !done[i] &&
                (best < 0 || fp->r->points[i].days < fp->r->points[best].days))
                best = i;
        if (best < 0) break;
        done[best] = true;
        mp_buf_printf(d, "%.6g %.6g\n", fp->r->points[best].days, fp->r->points[best].cost_usd);
    }
    free(done);
}

static void front_script(mp_buf *b, const char *data, void *user)
{
    const front_plot *fp = user;
    const mp_config *c = &fp->o->search.base;
    mp_buf_printf(b, "set title \"%s, %.3g tokens: days to train against cost\"\n", c->model.name,
                  c->training.tokens);
    mp_buf_puts(b, "set logscale xy\nset grid\nset key outside right top\n"
                   "set xlabel 'days to train'\nset ylabel 'cost (USD, list price)'\n");
    if (fp->o->deadline_s > 0)
        mp_buf_printf(b, "set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt 2 lc rgb '#888888'\n",
                      fp->o->deadline_s / 86400.0, fp->o->deadline_s / 86400.0);
    if (fp->o->budget_usd > 0)
        mp_buf_printf(b, "set arrow from graph 0, first %.6g to graph 1, first %.6g nohead dt 3 "
                         "lc rgb '#888888'\n", fp->o->budget_usd, fp->o->budget_usd);
    mp_buf_puts(b, "plot ");
    for (int k = 0; k < fp->n_blocks; k++) {
        mp_buf_printf(b, "'%s' index %d using 1:2 with points pt 7 ps 1.3 title '%s', \\\n     ",
                      data, k, fp->o->hws[fp->blocks[k]].name);
    }
    mp_buf_printf(b, "'%s' index %d using 1:2 with lines lw 2 lc rgb 'black' title 'Pareto front'\n",
                  data, fp->n_blocks);
}

static mp_status plot_front(const char *path, bool force, const mp_hwchoice_options *o,
                            const mp_hwchoice_result *r, mp_error *err)
{
    front_plot fp = {.o = o, .r = r};
    mp_buf d;
    mp_buf_init(&d);
    front_data(&fp, &d);
    mp_status st;
    if (fp.n_blocks == 0)
        st = mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--plot",
                          "no priced point fits: nothing to draw (give --price PROFILE=USD)");
    else
        st = mp_plot_custom(path, force, 1000, 640, &d, front_script, &fp, err);
    mp_buf_free(&d);
    return st;
}

/* ---- main -------------------------------------------------------------------------- */

int mp_cmd_search_hw(int argc, char **argv)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        mp_verb_doc_write(&mp_doc_search_hw, stdout);
        return 0;
    }
    hw_args a;
    if (take_hw_args(&argc, argv, &a, &err) != MP_OK) return mp_cli_fail("search", &err);
    static mp_hwchoice_options o;
    memset(&o, 0, sizeof o);
    o.pue = 1.0;
    char first_hw[1024];
    if (load_profiles(a.hw_list, &o, first_hw, sizeof first_hw, &err) != MP_OK)
        return mp_cli_fail("search", &err);
    bool priced[MP_HWCHOICE_MAX_HW] = {false};
    for (int i = 0; i < a.n_prices; i++)
        if (apply_price(a.prices[i], &o, priced, &err) != MP_OK) return mp_cli_fail("search", &err);
    if (!a.gpus) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--gpus", "needs N or MIN..MAX");
        return mp_cli_fail("search", &err);
    }
    if (parse_gpus(a.gpus, &o.gpus_min, &o.gpus_max, &err) != MP_OK)
        return mp_cli_fail("search", &err);
    static const suffix durations[] = {{"", 86400}, {"d", 86400}, {"h", 3600}, {"w", 604800}, {NULL, 0}};
    static const suffix dollars[] = {{"", 1}, {"k", 1e3}, {"M", 1e6}, {"B", 1e9}, {NULL, 0}};
    if (a.deadline && parse_scaled("--deadline", a.deadline, durations, 3600, 3650 * 86400.0,
                                   "30d, 720h or 4w", &o.deadline_s, &err) != MP_OK)
        return mp_cli_fail("search", &err);
    if (a.budget && parse_scaled("--budget", a.budget, dollars, 1, 1e13, "2.5M", &o.budget_usd,
                                 &err) != MP_OK)
        return mp_cli_fail("search", &err);
    if (a.pue && parse_scaled("--pue", a.pue, NULL, 1, 3, "1.2", &o.pue, &err) != MP_OK)
        return mp_cli_fail("search", &err);

    /* The rest is one search's options: parse them with the first profile and
     * the smallest count, so they are checked exactly as search checks them. */
    char gpus_text[32];
    snprintf(gpus_text, sizeof gpus_text, "%lld", (long long)o.gpus_min);
    char *args[256];
    if (argc + 5 > (int)(sizeof args / sizeof args[0])) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, NULL, "too many arguments");
        return mp_cli_fail("search", &err);
    }
    int n = 0;
    for (int i = 0; i < argc; i++) args[n++] = argv[i];
    args[n++] = "--hw";
    args[n++] = first_hw; /* as given: a profile file's name is not a preset's */
    args[n++] = "--gpus";
    args[n++] = gpus_text;
    args[n] = NULL;
    mp_cli_config cc;
    mp_search_cli sc;
    if (mp_search_cli_parse_all(&n, args, &cc, &sc, &err) != MP_OK)
        return mp_cli_fail("search", &err);
    if (sc.force && !a.plot) { /* taken and did nothing */
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--force",
                     "nothing to overwrite: it lets --plot replace a read-only file");
        return mp_cli_fail("search", &err);
    }
    if (sc.output || mp_cli_is_framework_format(cc.format)) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, sc.output ? "-o" : "--format",
                     "choose the hardware first: -o and the framework formats take one --hw and --gpus");
        return mp_cli_fail("search", &err);
    }
    sc.gpus_range = true;
    if (mp_search_cli_options(&cc, &sc, &o.search, &err) != MP_OK) return mp_cli_fail("search", &err);
    /* the picture's place and gnuplot are checked before any search runs */
    if (a.plot) {
        if (mp_plot_check_path(a.plot, &err) != MP_OK)
            return mp_cli_fail("search", &err);
        mp_output probe;
        char gp[4096];
        if (mp_cli_output_not_input("--plot", a.plot, &cc, NULL, &err) != MP_OK)
            return mp_cli_fail("search", &err);
        /* each profile file of --hw too (cc has the first) */
        char hw_list[1024];
        snprintf(hw_list, sizeof hw_list, "%s", a.hw_list ? a.hw_list : "");
        char *save = NULL;
        for (char *tok = strtok_r(hw_list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (mp_cli_output_not_input("--plot", a.plot, NULL, tok, &err) != MP_OK)
                return mp_cli_fail("search", &err);
        if (mp_output_prepare(a.plot, sc.force, &probe, &err) != MP_OK)
            return mp_cli_fail("search", &err);
        if (!mp_plot_find_gnuplot(gp, sizeof gp)) {
            fprintf(stderr, "megaplan search: --plot: %s\n", MP_PLOT_NO_GNUPLOT);
            return 1;
        }
    }
    /* --hw-set reaches every profile, as it reaches the one of a plain search */
    for (int h = 0; h < o.n_hw; h++) {
        if (mp_cli_apply_hw_sets(&cc, &o.hws[h], &err) != MP_OK)
            return mp_cli_fail("search", &err);
        /* a --price is dated "given" in the output, not YYYY-MM (the
         * profile's price_date, checked above, is the month it was read) */
        if (priced[h])
            snprintf(o.hws[h].price_date, sizeof o.hws[h].price_date, "given");
    }

    mp_hwchoice_result r;
    mp_status st = mp_hwchoice_run(&o, &r, &err);
    if (st != MP_OK) {
        mp_cli_error_as_option(&err);
        return mp_cli_fail("search", &err);
    }
    mp_buf out;
    mp_buf_init(&out);
    if (cc.format == MP_FORMAT_JSON || cc.format == MP_FORMAT_YAML) {
        cJSON *j = result_json(&o, &r);
        if (!j) out.oom = true;
        else mp_cli_write_data(j, cc.format, &out);
        cJSON_Delete(j);
    } else {
        table(&o, &r, &out);
    }
    bool any = r.fastest >= 0;
    if (a.plot && any && plot_front(a.plot, sc.force, &o, &r, &err) != MP_OK) {
        mp_hwchoice_result_free(&r);
        mp_buf_free(&out);
        return mp_cli_fail("search", &err);
    }
    mp_hwchoice_result_free(&r);
    int rc = mp_cli_emit("search", &out);
    if (rc) return rc;
    if (!any) {
        fprintf(stderr, "megaplan search: no profile and GPU count in %lld..%lld can run this "
                        "model\n", (long long)o.gpus_min, (long long)o.gpus_max);
        return 1;
    }
    return 0;
}
