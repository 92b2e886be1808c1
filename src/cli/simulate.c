/* simulate.c — `megaplan simulate`: one training iteration through the
 * discrete-event engine. Input: a plan file, estimate's options, or (for
 * illustrations like the papers' figures) unit-time ops. Output: the step
 * time against estimate's closed form, exposed time per kind, bubble and
 * peak memory per pipeline rank; --format json adds "simulation" to the
 * estimate object; --trace writes Chrome trace JSON; --plot draws with
 * gnuplot (the pipeline, and the memory next to it as NAME-memory.EXT). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/buf.h"
#include "core/io.h"
#include "planner/cost.h"
#include "planner/report.h"
#include "sim/plot.h"
#include "sim/schedule.h"
#include "sim/simulate.h"

#define VERB "simulate"

static const char usage_text[] =
    "usage: megaplan simulate PLAN.yaml [options]\n"
    "       megaplan simulate --model M --gpus N [estimate's options] [options]\n"
    "       megaplan simulate --unit-ops --pp P [--vpp V] --microbatches M [--schedule S] "
    "[options]\n"
    "\n"
    "Runs one training iteration through the discrete-event simulator: every\n"
    "pipeline rank runs its schedule, op durations from the cost model.\n"
    "\n"
    "options:\n"
    "  --trace FILE       Chrome trace-event JSON (open in https://ui.perfetto.dev)\n"
    "  --plot FILE.svg|FILE.png\n"
    "                     the pipeline drawn by gnuplot, one row per rank; the memory\n"
    "                     per rank over time goes to FILE-memory.svg|png\n"
    "  --format table|json\n"
    "                     json: the estimate object with a \"simulation\" object added\n"
    "  --async-p2p        sends do not wait for their message to land (the executor's\n"
    "                     MPI_Isend); default: Megatron's p2p, waited on before the\n"
    "                     next compute\n"
    "  --unit-ops         no model: F = 1, B = 2 time units per stage (ZB-H1: B = W = 1),\n"
    "                     divided by vpp per chunk, free communication -- the papers'\n"
    "                     figures; needs --pp, --microbatches\n"
    "  --microbatches M   micro-batches per iteration (with --unit-ops)\n";

typedef struct sim_args {
    const char *plan_path;
    const char *trace_path;
    const char *plot_path;
    bool async_p2p;
    bool unit_ops;
    int64_t microbatches;
} sim_args;

static int fail_input(const char *field, const char *msg)
{
    mp_error err;
    mp_error_set(&err, MP_EINPUT, NULL, 0, 0, field, "%s", msg);
    return mp_cli_fail(VERB, &err);
}

/* The verb's own options, left in argv by the shared parser. Returns -1 to
 * go on, else an exit status. */
static int parse_own(int argc, char **argv, sim_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *value = NULL;
#define IS(name) (strlen(name) == nlen && !strncmp(arg, name, nlen))
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (IS("--trace") || IS("--plot") || IS("--microbatches")) {
            char name[16];
            snprintf(name, sizeof name, "%.*s", (int)nlen, arg);
            if (eq)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return fail_input(name, "needs a value");
            if (!*value)
                return fail_input(name, "needs a value");
            if ((IS("--trace") && a->trace_path) || (IS("--plot") && a->plot_path) ||
                (IS("--microbatches") && a->microbatches))
                return fail_input(IS("--trace") ? "--trace" : IS("--plot") ? "--plot"
                                                                           : "--microbatches",
                                  "given twice: say it once");
        }
        if (IS("--trace")) {
            a->trace_path = value;
        } else if (IS("--plot")) {
            a->plot_path = value;
        } else if (IS("--microbatches")) {
            char *end;
            long long m = strtoll(value, &end, 10);
            if (*end || end == value || m < 1 || m > (1 << 22))
                return fail_input("--microbatches", "expected a whole number in 1..4194304");
            a->microbatches = m;
        } else if (!strcmp(arg, "--async-p2p")) {
            a->async_p2p = true;
        } else if (!strcmp(arg, "--unit-ops")) {
            a->unit_ops = true;
        } else if (!strcmp(arg, "--")) {
            continue;
        } else if (arg[0] == '-' && arg[1]) {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown option (megaplan simulate --help lists them)");
            return fail_input(arg, msg);
        } else if (a->plan_path) {
            return fail_input(arg, "one plan file only");
        } else {
            a->plan_path = arg;
        }
#undef IS
    }
    return -1;
}

/* ---- unit-op illustrations ---- */

static mp_status unit_costs(mp_schedule_kind s, int32_t p, int32_t v, mp_pipeline_cost *pc,
                            mp_error *err)
{
    memset(pc, 0, sizeof *pc);
    pc->n_stages = p * v;
    pc->stages = calloc((size_t)(p * v), sizeof *pc->stages);
    if (!pc->stages)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    for (int32_t k = 0; k < p * v; k++) {
        mp_stage_cost *sc = &pc->stages[k];
        sc->fwd = 1.0 / v;
        sc->bwd = 2.0 / v;
        sc->bwd_input = s == MP_SCHED_ZBH1 ? 1.0 : sc->bwd;
        sc->bwd_weight = s == MP_SCHED_ZBH1 ? 1.0 : 0.0;
        sc->act_bytes = 1073741824.0 / v; /* one GiB per stage's micro-batch: memory in units */
    }
    return MP_OK;
}

/* ---- output ---- */

static double gib(double bytes)
{
    return bytes / 1073741824.0;
}

static void print_part(const char *name, double t, double step)
{
    printf("  %-10s %12.4f s  %5.1f%%\n", name, t, step > 0 ? 100.0 * t / step : 0.0);
}

static void print_table(const char *what, const mp_sim_result *r, double closed_step,
                        double closed_pipeline, const sim_args *a)
{
    printf("%s\n", what);
    printf("schedule %s, %d pipeline rank%s, %d chunk%s each, %d micro-batches, p2p %s\n",
           mp_schedule_name(r->schedule), (int)r->ranks, r->ranks > 1 ? "s" : "", (int)r->chunks,
           r->chunks > 1 ? "s" : "", (int)r->microbatches,
           a->async_p2p ? "asynchronous (isend)" : "synchronous (Megatron)");
    printf("\n");
    printf("step (simulated)     %12.4f s\n", r->makespan);
    if (closed_step > 0)
        printf("step (estimate)      %12.4f s   simulated %+.1f%%\n", closed_step,
               100.0 * (r->makespan / closed_step - 1.0));
    printf("pipeline (simulated) %12.4f s\n", r->pipeline_makespan);
    if (closed_pipeline > 0)
        printf("pipeline (closed form)%11.4f s   simulated %+.1f%%\n", closed_pipeline,
               100.0 * (r->pipeline_makespan / closed_pipeline - 1.0));
    printf("\nexposed time by kind (critical pipeline rank %d):\n", (int)r->critical_rank);
    const mp_times *x = &r->exposed;
    print_part("compute", x->compute, x->step);
    print_part("recompute", x->recompute, x->step);
    print_part("tp_comm", x->tp_comm, x->step);
    print_part("cp_comm", x->cp_comm, x->step);
    print_part("pp_comm", x->pp_comm, x->step);
    print_part("bubble", x->bubble, x->step);
    print_part("dp_comm", x->dp_comm, x->step);
    print_part("optimizer", x->optimizer, x->step);
    printf("\nper pipeline rank:\n  rank   bubble   peak memory\n");
    for (int32_t i = 0; i < r->ranks; i++)
        printf("  %4d   %5.1f%%   %8.2f GiB\n", (int)i, 100.0 * r->bubble_fraction[i],
               gib(r->peak_memory[i]));
}

static cJSON *events_json(const mp_timeline *t)
{
    cJSON *arr = cJSON_CreateArray();
    char label[64];
    for (size_t i = 0; arr && i < t->n; i++) {
        const mp_event *e = &t->events[i];
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        mp_event_label(e, label, sizeof label);
        if (!cJSON_AddNumberToObject(o, "rank", e->rank) ||
            !cJSON_AddStringToObject(o, "stream", mp_stream_name((mp_stream)e->stream)) ||
            !cJSON_AddStringToObject(o, "name", label) ||
            !cJSON_AddNumberToObject(o, "start_s", e->start) ||
            !cJSON_AddNumberToObject(o, "end_s", e->end)) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static cJSON *simulation_json(const mp_sim_result *r, double closed_step, bool async_p2p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = cJSON_AddNumberToObject(o, "makespan_s", r->makespan) &&
              cJSON_AddNumberToObject(o, "pipeline_makespan_s", r->pipeline_makespan) &&
              (closed_step <= 0 || cJSON_AddNumberToObject(o, "estimate_step_s", closed_step)) &&
              cJSON_AddStringToObject(o, "schedule", mp_schedule_name(r->schedule)) &&
              cJSON_AddStringToObject(o, "p2p", async_p2p ? "async" : "sync") &&
              cJSON_AddNumberToObject(o, "critical_rank", r->critical_rank);
    cJSON *bubble = ok ? cJSON_AddArrayToObject(o, "bubble_fraction") : NULL;
    cJSON *peak = bubble ? cJSON_AddArrayToObject(o, "peak_memory_gib") : NULL;
    ok = peak != NULL;
    for (int32_t i = 0; ok && i < r->ranks; i++) {
        cJSON *b = cJSON_CreateNumber(r->bubble_fraction[i]);
        cJSON *m = cJSON_CreateNumber(gib(r->peak_memory[i]));
        ok = b && m && cJSON_AddItemToArray(bubble, b) && cJSON_AddItemToArray(peak, m);
        if (!ok) {
            cJSON_Delete(b);
            cJSON_Delete(m);
        }
    }
    cJSON *x = ok ? cJSON_AddObjectToObject(o, "exposed_s") : NULL;
    const mp_times *t = &r->exposed;
    ok = x && cJSON_AddNumberToObject(x, "step", t->step) &&
         cJSON_AddNumberToObject(x, "compute", t->compute) &&
         cJSON_AddNumberToObject(x, "recompute", t->recompute) &&
         cJSON_AddNumberToObject(x, "tp_comm", t->tp_comm) &&
         cJSON_AddNumberToObject(x, "cp_comm", t->cp_comm) &&
         cJSON_AddNumberToObject(x, "pp_comm", t->pp_comm) &&
         cJSON_AddNumberToObject(x, "bubble", t->bubble) &&
         cJSON_AddNumberToObject(x, "dp_comm", t->dp_comm) &&
         cJSON_AddNumberToObject(x, "optimizer", t->optimizer);
    cJSON *ev = ok ? events_json(&r->timeline) : NULL;
    if (!ev || !cJSON_AddItemToObject(o, "events", ev)) {
        cJSON_Delete(ev);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int print_json(cJSON *root)
{
    mp_buf b;
    mp_buf_init(&b);
    mp_json_write(root, true, &b);
    cJSON_Delete(root);
    if (b.oom) {
        mp_buf_free(&b);
        mp_error err;
        mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        return mp_cli_fail(VERB, &err);
    }
    fwrite(b.data, 1, b.len, stdout);
    if (b.len == 0 || b.data[b.len - 1] != '\n')
        fputc('\n', stdout);
    mp_buf_free(&b);
    return 0;
}

/* Trace and plot, before anything is printed (an error then leaves stdout
 * empty). The plot is skipped with a note when gnuplot is missing; *plotted
 * says whether it was drawn. */
static int write_files(const mp_sim_result *r, const sim_args *a, const char *title,
                       const char *units, bool *plotted)
{
    mp_error err;
    mp_error_clear(&err);
    *plotted = false;
    if (a->trace_path && mp_trace_write(&r->timeline, a->trace_path, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    if (a->plot_path) {
        char gp[4096];
        if (!mp_plot_find_gnuplot(gp, sizeof gp)) {
            fprintf(stderr,
                    "megaplan simulate: note: gnuplot not found on PATH, plot %s skipped%s\n",
                    a->plot_path, a->trace_path ? " (the trace is written)" : "");
            return 0;
        }
        if (mp_plot_write(&r->timeline, r->memory, r->n_memory, title, units, a->plot_path,
                          &err) != MP_OK)
            return mp_cli_fail(VERB, &err);
        *plotted = true;
    }
    return 0;
}

static void print_files(const sim_args *a, bool plotted)
{
    if (a->trace_path)
        printf("\ntrace: %s (open in https://ui.perfetto.dev)\n", a->trace_path);
    if (plotted) {
        char mem[4096];
        mp_plot_memory_path(a->plot_path, mem, sizeof mem);
        printf("%splot: %s, memory: %s\n", a->trace_path ? "" : "\n", a->plot_path, mem);
    }
}

/* What the outputs cost beyond the engine's own limit (mp_sim_check_size):
 * --format json holds every event as a cJSON object (about 2 KB per unit of
 * pp*vpp*micro-batches), and a plot with more boxes than 2^15 units takes
 * gnuplot seconds and an SVG of tens of MB that nobody can read. */
#define JSON_MAX_UNITS (1 << 16)
#define PLOT_MAX_UNITS (1 << 15)

/* Refuses, before anything is allocated, an iteration too large for the
 * outputs asked for; field names what sets the micro-batches. Returns -1 to
 * go on, else the exit status. */
static int check_size(int64_t p, int64_t v, int64_t m, const sim_args *a, mp_format format,
                      const mp_sim_options *opt, const char *file, const char *field)
{
    mp_error err;
    mp_error_clear(&err);
    if (mp_sim_check_size(p, v, m, opt->record_timeline, field, &err) != MP_OK) {
        if (file)
            mp_error_locate(&err, file, 0, 0);
        return mp_cli_fail(VERB, &err);
    }
    int64_t units = p * v * m; /* at most MP_SIM_MAX_UNITS here */
    const char *what = NULL;
    int64_t limit = 0;
    if (a->plot_path && units > PLOT_MAX_UNITS) {
        what = "--plot";
        limit = PLOT_MAX_UNITS;
    } else if (format == MP_FORMAT_JSON && units > JSON_MAX_UNITS) {
        what = "--format json";
        limit = JSON_MAX_UNITS;
    }
    if (!what)
        return -1;
    mp_error_set(&err, MP_EINPUT, file, 0, 0, field,
                 "too large for %s: pp*vpp*micro-batches = %lld*%lld*%lld is over %lld; "
                 "fewer micro-batches show the same schedule (--trace takes up to %d)",
                 what, (long long)p, (long long)v, (long long)m, (long long)limit,
                 MP_SIM_MAX_UNITS_TIMELINE);
    return mp_cli_fail(VERB, &err);
}

static bool plot_extension_ok(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot && (!strcasecmp(dot, ".svg") || !strcasecmp(dot, ".png"));
}

static int run_unit_ops(const mp_cli_config *cc, const sim_args *a, mp_sim_options *opt)
{
    const mp_parallel *par = &cc->config.parallel;
    if (cc->have_model || cc->have_gpus)
        return fail_input("--unit-ops", "draws unit-time ops: give no --model or --gpus");
    if (!(cc->set & MP_SET_PP))
        return fail_input("--pp", "required with --unit-ops");
    if (!a->microbatches)
        return fail_input("--microbatches", "required with --unit-ops");
    int64_t p = par->pp, v = (cc->set & MP_SET_VPP) ? par->vpp : 1;
    mp_schedule_kind s = (cc->set & MP_SET_SCHEDULE) ? par->schedule
                         : v > 1                     ? MP_SCHED_INTERLEAVED
                                                     : MP_SCHED_1F1B;
    if (p > MP_MAX_STAGES || v > MP_MAX_STAGES)
        return fail_input(p > MP_MAX_STAGES ? "--pp" : "--vpp", "at most 1024 stages");
    int rc = check_size(p, v, a->microbatches, a, cc->format, opt, NULL, "--microbatches");
    if (rc >= 0)
        return rc;
    mp_error err;
    mp_error_clear(&err);
    /* Check (p, v, m) with the schedule's own rules, naming the options. */
    mp_op_list probe;
    mp_status st = mp_schedule_build(s, (int32_t)p, (int32_t)v, (int32_t)a->microbatches, 0,
                                     &probe, &err);
    mp_op_list_free(&probe);
    if (st != MP_OK) {
        const char *f = !strcmp(err.field, "microbatches") ? "--microbatches"
                        : !strcmp(err.field, "vpp")        ? "--vpp"
                        : !strcmp(err.field, "pp")         ? "--pp"
                                                           : "--schedule";
        snprintf(err.field, sizeof err.field, "%s", f);
        return mp_cli_fail(VERB, &err);
    }
    mp_pipeline_cost pc;
    if ((st = unit_costs(s, (int32_t)p, (int32_t)v, &pc, &err)) != MP_OK)
        return mp_cli_fail(VERB, &err);
    mp_sim_result r;
    st = mp_simulate_cost(s, (int32_t)p, (int32_t)v, (int32_t)a->microbatches, &pc, true, opt, &r,
                          &err);
    free(pc.stages);
    if (st != MP_OK)
        return mp_cli_fail(VERB, &err);
    double f = 1.0 / (double)v, b = s == MP_SCHED_ZBH1 ? 1.0 : 2.0 / (double)v;
    double w = s == MP_SCHED_ZBH1 ? 1.0 : 0.0;
    double closed = mp_pipeline_makespan(s, p, v, a->microbatches, f, b, w, 0.0);
    char title[160], chunks[40] = "";
    if (v > 1)
        snprintf(chunks, sizeof chunks, " x %lld chunks", (long long)v);
    snprintf(title, sizeof title, "%s, %lld ranks%s, %lld micro-batches (unit-time ops)",
             mp_schedule_name(s), (long long)p, chunks, (long long)a->microbatches);
    bool plotted;
    rc = write_files(&r, a, title, "units", &plotted);
    if (rc != 0) {
        mp_sim_result_free(&r);
        return rc;
    }
    if (cc->format == MP_FORMAT_JSON) {
        cJSON *root = cJSON_CreateObject();
        cJSON *sim = simulation_json(&r, 0, a->async_p2p);
        if (!root || !sim || !cJSON_AddItemToObject(root, "simulation", sim)) {
            cJSON_Delete(root);
            cJSON_Delete(sim);
            mp_sim_result_free(&r);
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            return mp_cli_fail(VERB, &err);
        }
        rc = print_json(root);
    } else {
        char what[200];
        snprintf(what, sizeof what, "unit-time ops: F = %g, B = %g%s per stage, free p2p", f, b,
                 s == MP_SCHED_ZBH1 ? ", W = 1" : "");
        print_table(what, &r, 0, closed, a);
        print_files(a, plotted);
    }
    mp_sim_result_free(&r);
    return rc;
}

static int run_config(mp_cli_config *cc, const sim_args *a, mp_sim_options *opt)
{
    mp_error err;
    mp_error_clear(&err);
    mp_plan *plan = NULL;
    const mp_config *cfg;
    char defaults[2048] = "";
    if (a->plan_path) {
        if (cc->have_model || cc->have_gpus || cc->set)
            return fail_input(a->plan_path,
                              "give a plan file or a configuration's options, not both");
        plan = calloc(1, sizeof *plan);
        if (!plan) {
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            return mp_cli_fail(VERB, &err);
        }
        if (mp_plan_read_file(a->plan_path, plan, &err) != MP_OK) {
            free(plan);
            return mp_cli_fail(VERB, &err);
        }
        cfg = &plan->config;
    } else {
        if (mp_cli_config_finish(cc, &err) != MP_OK || mp_cli_config_check(cc, &err) != MP_OK)
            return mp_cli_fail(VERB, &err);
        mp_cli_config_describe_defaults(cc, defaults, sizeof defaults);
        cfg = &cc->config;
    }
    int rc = check_size(cfg->parallel.pp, cfg->parallel.vpp, mp_config_microbatches(cfg), a,
                        cc->format, opt, plan ? a->plan_path : NULL,
                        plan ? "training.global_batch" : "--global-batch");
    if (rc >= 0) {
        free(plan);
        return rc;
    }
    rc = 0;
    mp_estimate est;
    mp_sim_result r;
    memset(&r, 0, sizeof r);
    if (mp_estimate_config(cfg, plan, &est, &err) != MP_OK ||
        mp_simulate(cfg, plan, opt, &r, &err) != MP_OK) {
        if (plan && !err.file[0])
            mp_error_locate(&err, a->plan_path, 0, 0);
        free(plan);
        return mp_cli_fail(VERB, &err);
    }
    const mp_parallel *par = &cfg->parallel;
    char title[200];
    snprintf(title, sizeof title, "%s on %lld x %s: tp=%lld pp=%lld vpp=%lld dp=%lld, %s",
             cfg->model.name, (long long)cfg->training.gpus, cfg->hw.name, (long long)par->tp,
             (long long)par->pp, (long long)par->vpp, (long long)par->dp,
             mp_schedule_name(par->schedule));
    bool plotted;
    rc = write_files(&r, a, title, NULL, &plotted);
    if (rc != 0) {
        mp_sim_result_free(&r);
        free(plan);
        return rc;
    }
    if (cc->format == MP_FORMAT_JSON) {
        /* ';'-separated for the JSON writer */
        for (char *c = defaults; *c; c++)
            if (*c == '\n')
                *c = ';';
        cJSON *root = mp_estimate_to_json(cfg, &est, defaults[0] ? defaults : NULL);
        cJSON *sim = simulation_json(&r, est.time.step, a->async_p2p);
        if (!root || !sim || !cJSON_AddItemToObject(root, "simulation", sim)) {
            cJSON_Delete(root);
            cJSON_Delete(sim);
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            rc = mp_cli_fail(VERB, &err);
        } else {
            rc = print_json(root);
        }
    } else {
        double closed_pipeline = est.time.step - est.time.dp_comm - est.time.optimizer;
        print_table(title, &r, est.time.step, closed_pipeline, a);
        if (defaults[0])
            printf("\ndefaults:\n%s", defaults);
        if (!est.fits)
            printf("\nnote: does not fit: the most loaded GPU needs %.1f GiB more than its "
                   "%.1f GiB\n",
                   gib(est.over_bytes), gib(est.memory.capacity));
        print_files(a, plotted);
    }
    mp_sim_result_free(&r);
    free(plan);
    return rc;
}

int cmd_simulate(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_config_parse(&argc, argv, &cc, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    sim_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_own(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (cc.format != MP_FORMAT_TABLE && cc.format != MP_FORMAT_JSON)
        return fail_input("--format", "simulate writes table or json");
    if (a.plot_path && !plot_extension_ok(a.plot_path))
        return fail_input("--plot", "the plot file must end in .svg or .png");
    if (a.microbatches && !a.unit_ops)
        return fail_input("--microbatches",
                          "only with --unit-ops (otherwise --global-batch sets it)");
    if (a.unit_ops && a.plan_path)
        return fail_input("--unit-ops", "draws unit-time ops: give no plan file");
    if (!a.unit_ops && !a.plan_path && !cc.have_model)
        return fail_input("--model", "required: a plan file, --model and --gpus, or --unit-ops "
                                     "(see megaplan simulate --help)");
    mp_sim_options opt = {.record_timeline = a.trace_path || a.plot_path ||
                                             cc.format == MP_FORMAT_JSON,
                          .async_p2p = a.async_p2p};
    if (a.unit_ops)
        return run_unit_ops(&cc, &a, &opt);
    return run_config(&cc, &a, &opt);
}
