/* simulate.c — `megaplan simulate`: one training iteration through the
 * discrete-event engine. Input: a plan file, estimate's options, or (for
 * illustrations like the papers' figures) unit-time ops. Output: the step
 * time against estimate's closed form, exposed time per kind, bubble and
 * peak memory per pipeline rank; --format json|yaml adds "simulation" to the
 * estimate object (the per-op events only with --events, streamed as they are
 * written, so any size the engine runs can be written); --trace writes Chrome
 * trace JSON; --plot draws with gnuplot (the pipeline, and the memory next to
 * it as NAME-memory.EXT). Files are written as core/output.h says. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/buf.h"
#include "core/io.h"
#include "core/output.h"
#include "planner/cost.h"
#include "planner/report.h"
#include "sim/plot.h"
#include "sim/schedule.h"
#include "sim/simulate.h"

#define VERB "simulate"

enum { SIM_TRACE, SIM_PLOT, SIM_EVENTS, SIM_FORCE, SIM_ASYNC_P2P, SIM_EP_OVERLAP, SIM_UNIT_OPS,
       SIM_MICRO_BATCHES };

static const mp_opt sim_rows[] = {
    {"--trace", NULL, "FILE", SIM_TRACE, 0,
     "Chrome trace-event JSON (open in https://ui.perfetto.dev); - for stdout (the report then "
     "goes to stderr)",
     NULL},
    {"--plot", NULL, "FILE.svg|png", SIM_PLOT, 0,
     "the pipeline drawn by gnuplot, one row per rank; the memory per rank over time goes to "
     "FILE-memory.svg|png",
     NULL},
    {"--events", NULL, NULL, SIM_EVENTS, 0,
     "with --format json: every op (rank, stream, name, start, end) in simulation.events, "
     "streamed",
     NULL},
    {"--force", NULL, NULL, SIM_FORCE, 0, "let --trace/--plot replace read-only files", NULL},
    {"--async-p2p", NULL, NULL, SIM_ASYNC_P2P, 0,
     "sends do not wait for their message to land (the executor's MPI_Isend); default: "
     "Megatron's p2p, waited on before the next compute",
     NULL},
    {"--ep-overlap", NULL, NULL, SIM_EP_OVERLAP, 0,
     "MoE: Megatron-Core's --overlap-moe-expert-parallel-comm: interleaved 1F1B (and 1F1B "
     "without a pipeline) merges each steady-state B with the next F, the all-to-alls under "
     "the other pass's compute; DualPipe(V) run each F&B unit as such a merged pass (the "
     "passes alone, as Megatron's, inline); ZB-V, whose passes nothing merges, inline; the "
     "other schedules run each op's dispatch and combine on the ep stream under the next op; "
     "default: inline",
     NULL},
    {"--unit-ops", NULL, NULL, SIM_UNIT_OPS, 0,
     "no model: F = 1, B = 2 time units per stage (ZB-H1: B = W = 1), divided by vpp per chunk, "
     "free communication -- the papers' figures; needs --pp, --micro-batches",
     NULL},
    {"--micro-batches", "--microbatches", "M", SIM_MICRO_BATCHES, 0,
     "micro-batches per iteration (with --unit-ops)", NULL},
};

static const mp_opt_group sim_opts = MP_OPT_GROUP("simulate", sim_rows);

const mp_verb_doc mp_doc_simulate = {
    .name = "simulate",
    .summary = "one iteration as a discrete-event timeline (trace, plot)",
    .usage = "megaplan simulate PLAN.yaml [options]\n"
             "megaplan simulate --model M --gpus N [estimate's options] [options]\n"
             "megaplan simulate --unit-ops --pp P [--vpp V] --micro-batches M [--schedule S] "
             "[options]\n",
    .text = "Runs one training iteration through the discrete-event simulator: every pipeline "
            "rank runs its schedule, op durations from the cost model. --format json|yaml: the "
            "estimate object with a \"simulation\" summary added.",
    .groups = (const mp_opt_group *const[]){&sim_opts, &mp_cli_config_opts, NULL},
    .operand = "file",
};

typedef struct sim_args {
    const char *plan_path;
    const char *trace_path;
    const char *plot_path;
    bool async_p2p;
    bool ep_overlap; /* --ep-overlap: MoE all-to-all under another micro-batch's compute */
    bool unit_ops;
    bool events; /* --events: per-op events in the JSON */
    bool force;  /* --force: outputs may replace read-only files */
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
    mp_opt_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const mp_opt *o = NULL;
        const char *value = NULL;
        mp_error err;
        int found = mp_opt_take(sim_rows, sizeof sim_rows / sizeof sim_rows[0], argc, argv, &i, &o,
                                &value, &err);
        if (found < 0)
            return mp_cli_fail(VERB, &err);
        if (!found) {
            if (!strcmp(arg, "--"))
                continue;
            if (arg[0] == '-' && arg[1]) {
                mp_cli_leftover(&mp_doc_simulate, NULL, arg, &err);
                return mp_cli_fail(VERB, &err);
            }
            if (a->plan_path)
                return fail_input(arg, "one plan file only");
            /* "" was read as a file and refused with no name: "cannot read: No such file" */
            if (!arg[0])
                return fail_input("PLAN.yaml", "empty file name");
            a->plan_path = arg;
            continue;
        }
        if (o->arg && !*value)
            return fail_input(o->name, "needs a value");
        if (mp_opt_once(&seen, o, value, arg, &err) < 0)
            return mp_cli_fail(VERB, &err);
        switch (o->id) {
        case SIM_TRACE: a->trace_path = value; break;
        case SIM_PLOT: a->plot_path = value; break;
        case SIM_MICRO_BATCHES: {
            char *end;
            long long m = strtoll(value, &end, 10);
            if (*end || end == value || m < 1 || m > (1 << 22))
                return fail_input(o->name, "expected a whole number in 1..4194304");
            a->microbatches = m;
            break;
        }
        case SIM_ASYNC_P2P: a->async_p2p = true; break;
        case SIM_EP_OVERLAP: a->ep_overlap = true; break;
        case SIM_UNIT_OPS: a->unit_ops = true; break;
        case SIM_EVENTS: a->events = true; break;
        case SIM_FORCE: a->force = true; break;
        }
    }
    /* --force without an output file was taken and did nothing */
    if (a->force && !a->trace_path && !a->plot_path)
        return fail_input("--force", "nothing to overwrite: it lets --trace or --plot replace a "
                                     "read-only file");
    return -1;
}

/* ---- unit-op illustrations ---- */

/* A stage's share of the p ranks' layers: 1/v with v chunks per rank, but a
 * whole stage for dualpipe, whose two chunks are copies. */
static double unit_share(mp_schedule_kind s, int64_t p, int64_t v)
{
    return (double)p / (double)mp_schedule_n_stages(s, p, v);
}

static mp_status unit_costs(mp_schedule_kind s, int32_t p, int32_t v, mp_pipeline_cost *pc,
                            mp_error *err)
{
    memset(pc, 0, sizeof *pc);
    int32_t n = (int32_t)mp_schedule_n_stages(s, p, v);
    double share = unit_share(s, p, v); /* of a rank's layers in one stage */
    pc->n_stages = n;
    pc->stages = calloc((size_t)n, sizeof *pc->stages);
    if (!pc->stages)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    for (int32_t k = 0; k < n; k++) {
        mp_stage_cost *sc = &pc->stages[k];
        sc->fwd = share;
        sc->bwd = 2.0 * share;
        bool split = mp_schedule_splits_backward(s);
        sc->bwd_input = split ? sc->bwd / 2 : sc->bwd;
        sc->bwd_weight = split ? sc->bwd / 2 : 0.0;
        sc->act_bytes = 1073741824.0 * share; /* one GiB per stage's micro-batch: memory in units */
    }
    return MP_OK;
}

/* ---- output ---- */

static double gib(double bytes)
{
    return bytes / 1073741824.0;
}

/* Where the human report goes, and in which units: unit-time ops have
 * neither seconds nor bytes. */
typedef struct report_style {
    FILE *out;
    const char *sec; /* " s" or "" */
    const char *mem; /* " GiB" or " units" */
} report_style;

static void print_part(const report_style *rs, const char *name, double t, double step)
{
    fprintf(rs->out, "  %-10s %12.4f%-2s  %5.1f%%\n", name, t, rs->sec,
            step > 0 ? 100.0 * t / step : 0.0);
}

/* how the simulated plan moves its pipeline transfers: the --async-p2p
 * what-if, or what Megatron runs for the plan (interleaved 1F1B: overlapped
 * with --overlap-p2p-communication, else batched after each backward), or on
 * the Megatron-DeepSpeed stacks DeepSpeed's engine (docs/simulator.md) */
static const char *p2p_label(const mp_config *cfg, bool async)
{
    if (async)
        return "asynchronous (isend)";
    const mp_parallel *p = cfg ? &cfg->parallel : NULL;
    if (p && p->schedule == MP_SCHED_INTERLEAVED && p->pp > 1 && p->vpp > 1)
        return p->p2p_overlap ? "overlapped (Megatron --overlap-p2p-communication)"
                              : "synchronous, batched after each backward (Megatron)";
    if (cfg && mp_ds_pipe_engine(cfg))
        return "blocking, each send then the step's receive (DeepSpeed's pipeline engine)";
    return "synchronous (Megatron)";
}

static void print_table(const report_style *rs, const char *what, const mp_sim_result *r,
                        double closed_step, double closed_pipeline, const sim_args *a,
                        const mp_config *cfg)
{
    FILE *f = rs->out;
    fprintf(f, "%s\n", what);
    /* zb-h1 at pp 1 runs as 1f1b (core/config.h mp_schedule_run_as) */
    char as[64] = "";
    if (cfg && cfg->parallel.schedule != r->schedule)
        snprintf(as, sizeof as, " (%s without a pipeline)",
                 mp_schedule_name(cfg->parallel.schedule));
    fprintf(f, "schedule %s%s, %d pipeline rank%s, %d chunk%s each, %d micro-batches, p2p %s\n",
            mp_schedule_name(r->schedule), as, (int)r->ranks, r->ranks > 1 ? "s" : "",
            (int)r->chunks, r->chunks > 1 ? "s" : "", (int)r->microbatches,
            p2p_label(cfg, a->async_p2p));
    fprintf(f, "\n");
    fprintf(f, "step (simulated)     %12.4f%s\n", r->makespan, rs->sec);
    if (closed_step > 0)
        fprintf(f, "step (estimate)      %12.4f%-2s   simulated %+.1f%%\n", closed_step, rs->sec,
                100.0 * (r->makespan / closed_step - 1.0));
    fprintf(f, "pipeline (simulated) %12.4f%s\n", r->pipeline_makespan, rs->sec);
    if (closed_pipeline > 0)
        fprintf(f, "pipeline (estimate)  %12.4f%-2s   simulated %+.1f%%\n", closed_pipeline,
                rs->sec, 100.0 * (r->pipeline_makespan / closed_pipeline - 1.0));
    fprintf(f, "\nexposed time by kind (critical pipeline rank %d):\n", (int)r->critical_rank);
    const mp_times *x = &r->exposed;
    print_part(rs, "compute", x->compute, x->step);
    print_part(rs, "recompute", x->recompute, x->step);
    print_part(rs, "tp_comm", x->tp_comm, x->step);
    print_part(rs, "cp_comm", x->cp_comm, x->step);
    print_part(rs, "pp_comm", x->pp_comm, x->step);
    print_part(rs, "bubble", x->bubble, x->step);
    print_part(rs, "dp_comm", x->dp_comm, x->step);
    print_part(rs, "optimizer", x->optimizer, x->step);
    fprintf(f, "\nper pipeline rank:\n  rank   bubble   peak memory\n");
    for (int32_t i = 0; i < r->ranks; i++)
        fprintf(f, "  %4d   %5.1f%%   %8.2f%s\n", (int)i, 100.0 * r->bubble_fraction[i],
                gib(r->peak_memory[i]), rs->mem);
}

/* Every op, one JSON object a line, straight to f: nothing is built in
 * memory, so the only bound is the engine's own. */
static void stream_events(FILE *f, const mp_timeline *t)
{
    char label[64];
    for (size_t i = 0; i < t->n; i++) {
        const mp_event *e = &t->events[i];
        mp_event_label(e, label, sizeof label);
        fprintf(f,
                "%s\t\t\t{\"rank\": %d, \"stream\": \"%s\", \"name\": \"%s\", "
                "\"start_s\": %.15g, \"end_s\": %.15g}",
                i ? ",\n" : "", (int)e->rank, mp_stream_name((mp_stream)e->stream), label,
                e->start, e->end);
    }
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
              cJSON_AddNumberToObject(o, "critical_rank", r->critical_rank) &&
              (!r->order_fallback || cJSON_AddTrueToObject(o, "zbv_order_fallback"));
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
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* root (whose last member is "simulation") as --format asks, on f; with
 * events, simulation.events streamed after the summary. Frees root. */
static int print_data(FILE *f, cJSON *root, mp_format format, const mp_timeline *events)
{
    mp_buf b;
    mp_buf_init(&b);
    if (format == MP_FORMAT_YAML) {
        mp_json_write_yaml(root, 0, &b);
    } else {
        mp_json_write(root, true, &b);
        while (b.len > 0 && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
            b.data[--b.len] = '\0';
    }
    cJSON_Delete(root);
    if (b.oom) {
        mp_buf_free(&b);
        mp_error err;
        mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        return mp_cli_fail(VERB, &err);
    }
    if (format == MP_FORMAT_YAML || !events) {
        fwrite(b.data, 1, b.len, f);
        if (b.len == 0 || b.data[b.len - 1] != '\n')
            fputc('\n', f);
        mp_buf_free(&b);
        return 0;
    }
    /* "...\t}\n}": open the two closing braces (simulation's, root's) again */
    size_t j = b.len; /* trailing blanks are stripped: b.data[j - 1] closes root */
    if (j > 0 && b.data[j - 1] == '}')
        j--;
    while (j > 0 && strchr("\n\t ", b.data[j - 1]))
        j--;
    if (j == 0 || b.data[j - 1] != '}') {
        mp_buf_free(&b);
        mp_error err;
        mp_error_set(&err, MP_EINTERNAL, NULL, 0, 0, NULL, "the summary JSON is not as expected");
        return mp_cli_fail(VERB, &err);
    }
    j--; /* simulation's closing brace */
    while (j > 0 && strchr("\n\t ", b.data[j - 1]))
        j--;
    fwrite(b.data, 1, j, f);
    mp_buf_free(&b);
    fputs(",\n\t\t\"events\": [\n", f);
    stream_events(f, events);
    fputs("\n\t\t]\n\t}\n}\n", f);
    return 0;
}

/* Where the outputs go, and whether gnuplot is there, before anything is
 * simulated: a refused path or a missing gnuplot costs nothing. */
static int check_outputs(const sim_args *a, const mp_cli_config *cc)
{
    mp_error err;
    mp_error_clear(&err);
    mp_output o;
    char memory[4096] = "";
    if (a->plot_path)
        mp_plot_memory_path(a->plot_path, memory, sizeof memory);
    if (mp_cli_output_not_input("--trace", a->trace_path, cc, a->plan_path, &err) != MP_OK ||
        mp_cli_output_not_input("--plot", a->plot_path, cc, a->plan_path, &err) != MP_OK ||
        mp_cli_output_not_input("--plot", a->plot_path ? memory : NULL, cc, a->plan_path,
                                &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    if (a->trace_path && mp_output_prepare(a->trace_path, a->force, &o, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    if (a->plot_path) {
        char gp[4096], mem[4096];
        if (!mp_plot_find_gnuplot(gp, sizeof gp)) {
            mp_error_set(&err, MP_ERUNTIME, NULL, 0, 0, "--plot", "%s", MP_PLOT_NO_GNUPLOT);
            return mp_cli_fail(VERB, &err);
        }
        mp_plot_memory_path(a->plot_path, mem, sizeof mem);
        if (mp_output_prepare(a->plot_path, a->force, &o, &err) != MP_OK ||
            mp_output_prepare(mem, a->force, &o, &err) != MP_OK)
            return mp_cli_fail(VERB, &err);
        /* the trace written, then drawn over without a word */
        if (a->trace_path && strcmp(a->trace_path, "-")) {
            const char *clash = mp_cli_same_file(a->trace_path, a->plot_path) ? a->plot_path
                                : mp_cli_same_file(a->trace_path, mem)         ? mem
                                                                          : NULL;
            if (clash) {
                mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--trace",
                             "%.200s is also a picture of --plot (%.200s): give another name",
                             a->trace_path, clash);
                return mp_cli_fail(VERB, &err);
            }
        }
    }
    return -1;
}

/* Whether an output file is standard output: then the report goes to stderr. */
static bool output_takes_stdout(const sim_args *a)
{
    const char *paths[2] = {a->trace_path, a->plot_path};
    for (int i = 0; i < 2; i++) {
        mp_output o;
        if (paths[i] && mp_output_prepare(paths[i], true, &o, NULL) == MP_OK &&
            o.kind == MP_OUT_FD && o.fd == 1)
            return true;
    }
    return false;
}

/* Trace and plot, before anything is printed (an error then leaves stdout
 * empty). */
static int write_files(const mp_sim_result *r, const sim_args *a, const mp_plot_options *po)
{
    mp_error err;
    mp_error_clear(&err);
    if (a->trace_path && mp_trace_write(&r->timeline, a->trace_path, a->force, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    if (a->plot_path &&
        mp_plot_write(&r->timeline, r->memory, r->n_memory, a->plot_path, po, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    return 0;
}

static void print_files(FILE *f, const sim_args *a)
{
    if (a->trace_path)
        fprintf(f, "\ntrace: %s (open in https://ui.perfetto.dev)\n", a->trace_path);
    if (a->plot_path) {
        char mem[4096];
        mp_plot_memory_path(a->plot_path, mem, sizeof mem);
        fprintf(f, "%splot: %s, memory: %s\n", a->trace_path ? "" : "\n", a->plot_path, mem);
    }
}

/* What the plot costs beyond the engine's own limit (mp_sim_check_size): a
 * plot with more boxes than 2^15 units takes gnuplot seconds for a picture
 * whose ops are narrower than a pixel anyway. The JSON summary has no limit;
 * its --events are streamed, bounded by the engine's timeline limit. */
#define PLOT_MAX_UNITS (1 << 15)

/* Refuses, before anything is allocated, an iteration too large for the
 * outputs asked for; field names what sets the micro-batches. Returns -1 to
 * go on, else the exit status. */
static int check_size(int64_t p, int64_t v, int64_t m, const sim_args *a,
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
    if (!a->plot_path || units <= PLOT_MAX_UNITS)
        return -1;
    mp_error_set(&err, MP_EINPUT, file, 0, 0, field,
                 "too large for --plot: pp*vpp*micro-batches = %lld*%lld*%lld is over %d; "
                 "fewer micro-batches show the same schedule (--trace takes up to %d)",
                 (long long)p, (long long)v, (long long)m, PLOT_MAX_UNITS,
                 MP_SIM_MAX_UNITS_TIMELINE);
    return mp_cli_fail(VERB, &err);
}

/* "gpt3-175b on 1024 x dgx-a100: tp=8 sp pp=8 vpp=2 cp=1 dp=16, interleaved-1f1b":
 * every degree, for the header and the plots' titles. */
static void config_title(const mp_config *cfg, char *buf, size_t size)
{
    const mp_parallel *par = &cfg->parallel;
    snprintf(buf, size, "%s on %lld x %s: tp=%lld%s pp=%lld vpp=%lld cp=%lld dp=%lld, %s",
             cfg->model.name, (long long)cfg->training.gpus, cfg->hw.name, (long long)par->tp,
             par->sp ? " sp" : "", (long long)par->pp, (long long)par->vpp, (long long)par->cp,
             (long long)par->dp, mp_schedule_name(par->schedule));
}

/* What unit-time ops' memory is counted in (one micro-batch's activations
 * of one stage each), for the plot's axis. */
#define MP_UNIT_MEMORY "units: the activations of one micro-batch on one stage"

/* The files, then the report: the table (on stderr when a file takes
 * stdout), or one JSON/YAML document on stdout. est is NULL for unit-time
 * ops (closed_pipeline is then their closed form). */
static int finish(const mp_cli_config *cc, const sim_args *a, const mp_sim_result *r,
                  const mp_config *cfg, const mp_estimate *est, char *defaults,
                  const mp_plot_options *po, report_style *rs, const char *what,
                  double closed_pipeline)
{
    int rc = write_files(r, a, po);
    if (rc != 0)
        return rc;
    bool taken = output_takes_stdout(a);
    rs->out = taken ? stderr : stdout;
    if (cc->format == MP_FORMAT_JSON || cc->format == MP_FORMAT_YAML) {
        /* ';'-separated for the JSON writer */
        for (char *c = defaults; c && *c; c++)
            if (*c == '\n')
                *c = ';';
        const char *d = defaults && defaults[0] ? defaults : NULL;
        cJSON *root = est ? mp_estimate_to_json(cfg, est, d) : cJSON_CreateObject();
        cJSON *sim = simulation_json(r, est ? est->time.step : 0, a->async_p2p);
        if (!root || !sim || !cJSON_AddItemToObject(root, "simulation", sim)) {
            cJSON_Delete(root);
            cJSON_Delete(sim);
            mp_error err;
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            return mp_cli_fail(VERB, &err);
        }
        return print_data(stdout, root, cc->format, a->events ? &r->timeline : NULL);
    }
    double step = est ? est->time.step : 0;
    if (est)
        closed_pipeline = est->time.step - est->time.dp_comm - est->time.optimizer;
    print_table(rs, what, r, step, closed_pipeline, a, cfg);
    if (defaults && defaults[0])
        fprintf(rs->out, "\ndefaults:\n%s", defaults);
    if (r->order_fallback)
        fprintf(rs->out, "\nnote: zb-v's greedy orders stalled; the fallback order ran (at "
                         "most pp micro-batches of each chunk in flight)\n");
    if (est && !est->fits)
        fprintf(rs->out, "\nnote: does not fit: the most loaded GPU needs %.1f GiB more than its "
                         "%.1f GiB\n",
                gib(est->over_bytes), gib(est->memory.capacity));
    print_files(rs->out, a);
    return 0;
}

static int run_unit_ops(const mp_cli_config *cc, const sim_args *a, mp_sim_options *opt)
{
    const mp_parallel *par = &cc->config.parallel;
    if (cc->have_model || cc->have_gpus)
        return fail_input("--unit-ops", "draws unit-time ops: give no --model or --gpus");
    /* the other settings of a configuration were taken and dropped (--tp 2,
     * --hw-set memory=1GiB drew the same picture) */
    if (cc->first_model_option)
        return fail_input(cc->first_model_option,
                          "--unit-ops draws unit-time ops from --pp, --vpp, --schedule and "
                          "--micro-batches only: drop it, or give --model and --gpus");
    if (a->ep_overlap)
        return fail_input("--ep-overlap", "--unit-ops has no MoE all-to-all to overlap");
    if (!(cc->set & MP_SET_PP))
        return fail_input("--pp", "required with --unit-ops");
    if (!a->microbatches)
        return fail_input("--micro-batches", "required with --unit-ops");
    int64_t p = par->pp, v = (cc->set & MP_SET_VPP) ? par->vpp : 1;
    mp_schedule_kind s = (cc->set & MP_SET_SCHEDULE) ? par->schedule
                         : v > 1                     ? MP_SCHED_INTERLEAVED
                                                     : MP_SCHED_1F1B;
    /* the rules a configuration meets (mp_config_check): a V needs two ranks
     * to bend over (pp 1 was drawn as one), and dualpipe's two directions are
     * not virtual stages (--vpp 2 was taken as them, where a plan refuses it) */
    mp_error err;
    mp_error_clear(&err);
    if (mp_schedule_is_v(s) && p < 2) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--pp",
                     "%s places two chunks per rank in a V: it needs pp >= 2 (got 1)",
                     mp_schedule_name(s));
        return mp_cli_fail(VERB, &err);
    }
    if (s == MP_SCHED_DUALPIPE && v != 1) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--vpp",
                     "dualpipe runs vpp 1 (its two directions are copies of the stages, not "
                     "virtual stages): got %lld",
                     (long long)v);
        return mp_cli_fail(VERB, &err);
    }
    /* and a plan's pipeline rules (mp_config_check): virtual stages need
     * ranks to interleave over, and the interleaved schedule needs them */
    if (v > 1 && p < 2 && !mp_schedule_is_v(s)) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--vpp",
                     "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                     (long long)v);
        return mp_cli_fail(VERB, &err);
    }
    if (s == MP_SCHED_INTERLEAVED && v < 2) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--schedule",
                     "interleaved-1f1b needs vpp >= 2 (got vpp=%lld)", (long long)v);
        return mp_cli_fail(VERB, &err);
    }
    if (mp_schedule_is_v(s) && !(cc->set & MP_SET_VPP))
        v = 2; /* the V's two chunks per rank */
    if (s == MP_SCHED_DUALPIPE)
        v = 2; /* its two directions' copies (vpp stays 1 in a plan) */
    if (p > MP_MAX_STAGES || v > MP_MAX_STAGES)
        return fail_input(p > MP_MAX_STAGES ? "--pp" : "--vpp", "at most 1024 stages");
    int rc = check_size(p, v, a->microbatches, a, opt, NULL, "--micro-batches");
    if (rc >= 0)
        return rc;
    /* Check (p, v, m) with the schedule's own rules, naming the options. */
    mp_op_list probe;
    mp_status st = mp_schedule_build(s, (int32_t)p, (int32_t)v, (int32_t)a->microbatches, 0,
                                     &probe, &err);
    mp_op_list_free(&probe);
    if (st != MP_OK) {
        const char *f = !strcmp(err.field, "microbatches") ? "--micro-batches"
                        : !strcmp(err.field, "vpp")        ? "--vpp"
                        : !strcmp(err.field, "pp")         ? "--pp"
                                                           : "--schedule";
        snprintf(err.field, sizeof err.field, "%s", f);
        return mp_cli_fail(VERB, &err);
    }
    /* zb-h1 at pp 1 runs as 1f1b, each backward whole (core/config.h) */
    const char *asked = mp_schedule_run_as(s, p) != s ? mp_schedule_name(s) : NULL;
    s = mp_schedule_run_as(s, p);
    mp_pipeline_cost pc;
    if ((st = unit_costs(s, (int32_t)p, (int32_t)v, &pc, &err)) != MP_OK)
        return mp_cli_fail(VERB, &err);
    mp_sim_result r;
    st = mp_simulate_cost(s, (int32_t)p, (int32_t)v, (int32_t)a->microbatches, &pc, true, opt, &r,
                          &err);
    free(pc.stages);
    if (st != MP_OK)
        return mp_cli_fail(VERB, &err);
    bool split = mp_schedule_splits_backward(s);
    double f = unit_share(s, p, v), b = split ? f : 2.0 * f;
    double w = split ? f : 0.0;
    double closed = mp_pipeline_makespan(s, p, v, a->microbatches, f, b, w, 0.0);
    char title[160], chunks[40] = "";
    if (v > 1)
        snprintf(chunks, sizeof chunks, " x %lld %s", (long long)v,
                 s == MP_SCHED_DUALPIPE ? "directions" : "chunks");
    snprintf(title, sizeof title, "%s, %lld ranks%s, %lld micro-batches (unit-time ops)",
             mp_schedule_name(s), (long long)p, chunks, (long long)a->microbatches);
    char what[200];
    char wtxt[32] = "";
    if (split)
        snprintf(wtxt, sizeof wtxt, ", W = %g", w);
    snprintf(what, sizeof what, "unit-time ops: F = %g, B = %g%s per stage, free p2p%s%s%s", f,
             b, wtxt, asked ? " (" : "", asked ? asked : "", asked ? " without a pipeline)" : "");
    mp_plot_options po = {.title = title, .time_unit = "units", .memory_unit = MP_UNIT_MEMORY,
                          .force = a->force};
    report_style rs = {.out = stdout, .sec = "", .mem = " units"};
    rc = finish(cc, a, &r, NULL, NULL, NULL, &po, &rs, what, closed);
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
        if (cc->have_model || cc->have_gpus || cc->set || cc->first_option)
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
    /* --ep-overlap moves the expert all-to-alls: with none it was taken and
     * did nothing (--moe-a2a-overlap, the estimate's, is refused so) */
    if (a->ep_overlap && (!mp_model_is_moe(&cfg->model) || mp_parallel_ep(&cfg->parallel) < 2)) {
        const bool moe = mp_model_is_moe(&cfg->model);
        if (moe)
            mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--ep-overlap",
                         "the EP all-to-all overlap needs ep > 1 (got ep 1)");
        else
            mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--ep-overlap",
                         "an MoE overlap needs a model with experts (%s has none)",
                         cfg->model.name);
        free(plan);
        return mp_cli_fail(VERB, &err);
    }
    int rc = check_size(cfg->parallel.pp, cfg->parallel.vpp, mp_config_microbatches(cfg), a,
                        opt, plan ? a->plan_path : NULL,
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
    char title[200];
    config_title(cfg, title, sizeof title);
    mp_plot_options po = {.title = title, .capacity_bytes = est.memory.capacity,
                          .force = a->force};
    report_style rs = {.out = stdout, .sec = " s", .mem = " GiB"};
    rc = finish(cc, a, &r, cfg, &est, defaults, &po, &rs, title, 0);
    mp_sim_result_free(&r);
    free(plan);
    return rc;
}

int cmd_simulate(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        mp_verb_doc_write(&mp_doc_simulate, stdout);
        return 0;
    }
    if (mp_cli_config_parse(&argc, argv, &cc, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    sim_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_own(argc, argv, &a);
    if (rc >= 0)
        return rc;
    /* (deepspeed and torchtitan printed the table) */
    if (cc.format != MP_FORMAT_TABLE && cc.format != MP_FORMAT_JSON && cc.format != MP_FORMAT_YAML)
        return fail_input("--format", "simulate writes table, json or yaml");
    if (a.events && cc.format != MP_FORMAT_JSON)
        return fail_input("--events", "the per-op events come with --format json");
    if (a.plot_path && mp_plot_check_path(a.plot_path, &err) != MP_OK)
        return mp_cli_fail(VERB, &err);
    if (a.microbatches && !a.unit_ops)
        return fail_input("--micro-batches",
                          "only with --unit-ops (otherwise --global-batch sets it)");
    if (a.unit_ops && a.plan_path)
        return fail_input("--unit-ops", "draws unit-time ops: give no plan file");
    if (!a.unit_ops && !a.plan_path && !cc.have_model)
        return fail_input("--model", "required: a plan file, --model and --gpus, or --unit-ops "
                                     "(see megaplan simulate --help)");
    if ((rc = check_outputs(&a, &cc)) >= 0)
        return rc;
    if (cc.format != MP_FORMAT_TABLE && output_takes_stdout(&a))
        return fail_input("--format", "a --trace or --plot file is standard output: the "
                                      "document cannot go there too");
    mp_sim_options opt = {.record_timeline = a.trace_path || a.plot_path || a.events,
                          .async_p2p = a.async_p2p, .ep_overlap = a.ep_overlap};
    if (a.unit_ops)
        return run_unit_ops(&cc, &a, &opt);
    return run_config(&cc, &a, &opt);
}
