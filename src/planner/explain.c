/* explain.c — the reasons behind a configuration's fate (explain.h). */
#include "planner/explain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/report.h"

typedef struct part {
    const char *name;
    double a, b;
} part;

static int time_parts(const mp_estimate *a, const mp_estimate *b, part *p)
{
    const mp_times *x = &a->time, *y = &b->time;
    part q[] = {{"compute", x->compute, y->compute},
                {"recompute", x->recompute, y->recompute},
                {"TP/SP communication", x->tp_comm, y->tp_comm},
                {"CP communication", x->cp_comm, y->cp_comm},
                {"PP communication", x->pp_comm, y->pp_comm},
                {"pipeline bubble", x->bubble, y->bubble},
                {"DP communication", x->dp_comm, y->dp_comm},
                {"optimizer step", x->optimizer, y->optimizer}};
    memcpy(p, q, sizeof q);
    return (int)(sizeof q / sizeof q[0]);
}

void mp_explain_config_diff(const mp_config *a, const mp_config *b, char *buf, size_t size)
{
    const mp_parallel *x = &a->parallel, *y = &b->parallel;
    size_t n = 0;
    buf[0] = '\0';
#define ADD(...)                                                                    \
    do {                                                                            \
        int w_ = snprintf(buf + n, n < size ? size - n : 0, "%s", n ? " " : "");   \
        if (w_ > 0) n += (size_t)w_;                                                \
        w_ = snprintf(buf + (n < size ? n : size), n < size ? size - n : 0, __VA_ARGS__); \
        if (w_ > 0) n += (size_t)w_;                                                \
    } while (0)
    if (a->training.precision != b->training.precision)
        ADD("precision=%s", mp_dtype_name(b->training.precision));
    if (x->tp != y->tp) ADD("tp=%lld", (long long)y->tp);
    if (x->sp != y->sp) ADD("sp=%s", y->sp ? "on" : "off");
    if (x->pp != y->pp) ADD("pp=%lld", (long long)y->pp);
    if (x->vpp != y->vpp) ADD("vpp=%lld", (long long)y->vpp);
    if (x->cp != y->cp) ADD("cp=%lld", (long long)y->cp);
    if (x->dp != y->dp) ADD("dp=%lld", (long long)y->dp);
    if (x->micro_batch != y->micro_batch) ADD("mb=%lld", (long long)y->micro_batch);
    if (x->recompute != y->recompute) ADD("recompute=%s", mp_recompute_name(y->recompute));
    if (y->recompute == MP_RECOMPUTE_SELECTIVE &&
        mp_recompute_modules_of(x, MP_RECOMPUTE_SELECTIVE) !=
            mp_recompute_modules_of(y, MP_RECOMPUTE_SELECTIVE)) {
        char list[128];
        mp_recompute_modules_format(mp_recompute_modules_of(y, MP_RECOMPUTE_SELECTIVE), list,
                                    sizeof list);
        ADD("recompute_modules=%s", list);
    }
    if (x->dist_opt != y->dist_opt) ADD("dist_opt=%s", y->dist_opt ? "on" : "off");
    if (x->zero != y->zero) ADD("zero=%lld", (long long)y->zero);
    if (x->hsdp != y->hsdp) ADD("hsdp=%s", y->hsdp ? "on" : "off");
    if (x->schedule != y->schedule) ADD("schedule=%s", mp_schedule_name(y->schedule));
    if (x->dp_overlap != y->dp_overlap) ADD("dp_overlap=%s", y->dp_overlap ? "on" : "off");
    if (x->tp_overlap != y->tp_overlap) ADD("tp_overlap=%s", y->tp_overlap ? "on" : "off");
    /* the expert settings only where there are experts: a dense plan's
     * implied etp (= tp) would name a setting it does not have */
    bool moe = mp_model_is_moe(&b->model);
    if (moe && mp_parallel_ep(x) != mp_parallel_ep(y)) ADD("ep=%lld", (long long)mp_parallel_ep(y));
    if (moe && mp_parallel_etp(x) != mp_parallel_etp(y))
        ADD("etp=%lld", (long long)mp_parallel_etp(y));
    if (moe && x->dispatcher != y->dispatcher)
        ADD("dispatcher=%s", mp_dispatcher_name(y->dispatcher));
#undef ADD
    if (n == 0) snprintf(buf, size, "same settings");
}

void mp_explain_estimate_diff(const mp_estimate *w, const mp_estimate *o, char *buf, size_t size)
{
    part p[8];
    int n = time_parts(w, o, p);
    double step = w->time.step > 0 ? w->time.step : 1;
    /* the two parts that cost the most extra */
    int first = -1, second = -1;
    for (int i = 0; i < n; i++) {
        double d = p[i].b - p[i].a;
        if (first < 0 || d > p[first].b - p[first].a) {
            second = first;
            first = i;
        } else if (second < 0 || d > p[second].b - p[second].a) {
            second = i;
        }
    }
    if (fabs(o->time.step - w->time.step) < 5e-4 * step) {
        snprintf(buf, size, "as fast (within 0.05%% of the step)");
        return;
    }
    int len = snprintf(buf, size, "%+.1f%% step: %s %+.1f%%", 100.0 * (o->time.step - w->time.step) / step,
                       p[first].name, 100.0 * (p[first].b - p[first].a) / step);
    double d2 = p[second].b - p[second].a;
    if (len > 0 && (size_t)len < size && d2 > 0.005 * step)
        snprintf(buf + len, size - (size_t)len, ", %s %+.1f%%", p[second].name, 100.0 * d2 / step);
}

static void memory_lines(const mp_config *c, const mp_estimate *e, mp_buf *out)
{
    const mp_memory *m = &e->memory;
    mp_buf_printf(out, "  weights %.1f + grads %.1f + optimizer %.1f + activations %.1f + other %.1f"
                       " = %.1f GiB of %.1f\n",
                  m->weights / MP_GIB, m->grads / MP_GIB, m->optimizer / MP_GIB,
                  m->activations / MP_GIB, m->other / MP_GIB, m->peak / MP_GIB, m->capacity / MP_GIB);
    if (m->expert_weights > 0.0) {
        mp_buf_printf(out, "  of which routed experts: weights %.1f + grads %.1f + optimizer %.1f "
                           "(more ep or etp shrinks them), routed-token activations %.1f GiB\n",
                      m->expert_weights / MP_GIB, m->expert_grads / MP_GIB,
                      m->expert_optimizer / MP_GIB, m->routed_activations / MP_GIB);
        if (m->capacity_activations > 0.0)
            mp_buf_printf(out, "  of the routed-token activations, %.1f GiB is capacity above the "
                               "mean load (the capacity factor or moe.imbalance)\n",
                          m->capacity_activations / MP_GIB);
    }
    if (m->fp8_weights > 0.0)
        mp_buf_printf(out, "  of the weights, %.1f GiB is their FP8 copies (%s)\n",
                      m->fp8_weights / MP_GIB,
                      c->training.fp8_param_gather
                          ? "the parameters themselves with fp8_param_gather; the fp32 master "
                            "weights stay"
                          : "fp8 training keeps the bf16 weights and fp32 master weights too");
    mp_error err;
    if (c->training.fp8_act_cache != MP_F8AC_OFF) {
        /* what the cache saves: the same plan with the inputs in bf16 */
        mp_config off = *c;
        off.training.fp8_act_cache = MP_F8AC_OFF;
        mp_estimate eo;
        if (mp_estimate_config(&off, NULL, &eo, &err) == MP_OK)
            mp_buf_printf(out, "  of the activations, %.1f GiB saved by fp8_act_cache %s "
                               "(%.1f GiB without it)\n",
                          (eo.memory.peak - m->peak) / MP_GIB,
                          mp_fp8_act_cache_name(c->training.fp8_act_cache),
                          eo.memory.peak / MP_GIB);
    }
    mp_item_cost mtp;
    int64_t n = c->parallel.pp * c->parallel.vpp;
    int64_t at = mp_config_mtp_stage(c, n);
    if (mp_model_has_mtp(&c->model) && at >= 0 && at < n - 1)
        /* Megatron's standalone MTP stage (cost.c place_mtp_standalone) */
        mp_buf_printf(out, "  multi-token prediction (%lld module%s): on virtual stage %lld, "
                           "the layout's standalone MTP stage, with a copy of the embedding; "
                           "their losses on the last stage, through its output layer\n",
                      (long long)c->model.mtp_layers, c->model.mtp_layers > 1 ? "s" : "",
                      (long long)at);
    else if (mp_model_has_mtp(&c->model) && mp_mtp_item_cost(c, NULL, &mtp, &err) == MP_OK)
        mp_buf_printf(out, "  multi-token prediction (%lld module%s, on the last stage): weights, "
                           "grads and optimizer %.1f GiB, activations %.2f GiB and forward %.1f "
                           "ms per micro-batch there\n",
                      (long long)c->model.mtp_layers, c->model.mtp_layers > 1 ? "s" : "",
                      mtp.static_bytes / MP_GIB,
                      mtp.act_bytes[c->parallel.recompute] / MP_GIB, mtp.fwd * 1e3);
}

/* One-setting changes that would make a config fit, with their peaks. */
static void fit_hints(const mp_config *c, mp_buf *out)
{
    struct {
        const char *what;
        mp_config v;
    } h[8];
    int n = 0;
    const mp_parallel *p = &c->parallel;
    if (p->recompute != MP_RECOMPUTE_FULL) {
        h[n].v = *c;
        h[n].v.parallel.recompute = MP_RECOMPUTE_FULL;
        h[n++].what = "--recompute full";
    }
    if (p->recompute == MP_RECOMPUTE_NONE) {
        h[n].v = *c;
        h[n].v.parallel.recompute = MP_RECOMPUTE_SELECTIVE;
        h[n++].what = "--recompute selective";
    }
    if (!p->dist_opt && p->dp * p->cp > 1) {
        h[n].v = *c;
        h[n].v.parallel.dist_opt = true;
        h[n++].what = "--dist-opt";
    }
    if (!p->sp && p->tp > 1) {
        h[n].v = *c;
        h[n].v.parallel.sp = true;
        h[n++].what = "--sp";
    }
    if (p->micro_batch > 1) {
        h[n].v = *c;
        h[n].v.parallel.micro_batch = 1;
        h[n++].what = "--micro-batch 1";
    }
    if (p->dp % 2 == 0) {
        h[n].v = *c;
        h[n].v.parallel.pp *= 2;
        h[n].v.parallel.dp /= 2;
        h[n++].what = "pp x2 (dp /2)";
        h[n].v = *c;
        h[n].v.parallel.tp *= 2;
        h[n].v.parallel.dp /= 2;
        h[n++].what = "tp x2 (dp /2)";
    }
    bool any = false;
    for (int i = 0; i < n; i++) {
        mp_estimate e;
        mp_error err;
        if (mp_estimate_config(&h[i].v, NULL, &e, &err) != MP_OK) continue;
        if (!any) mp_buf_puts(out, "one change at a time:\n");
        any = true;
        mp_buf_printf(out, "  %-22s peak %6.1f GiB  %s  step %.3f s\n", h[i].what,
                      e.memory.peak / MP_GIB, e.fits ? "fits    " : "no fit  ", e.time.step);
    }
}

mp_status mp_explain_against(const mp_config *c, const mp_search_result *r, const char *why_none,
                             mp_buf *out, int *verdict, mp_error *err)
{
    mp_error why;
    mp_error_clear(&why);
    *verdict = 0;
    const mp_parallel *p = &c->parallel;
    mp_buf_printf(out, "megaplan explain: %s on %lld x %s: tp=%lld%s pp=%lld vpp=%lld cp=%lld dp=%lld "
                       "mb=%lld recompute=%s dist_opt=%s schedule=%s\n",
                  c->model.name, (long long)c->training.gpus, c->hw.name, (long long)p->tp,
                  p->sp ? " (sp)" : "", (long long)p->pp, (long long)p->vpp, (long long)p->cp,
                  (long long)p->dp, (long long)p->micro_batch, mp_recompute_name(p->recompute),
                  p->hsdp ? "hsdp" : p->zero >= 2 ? (p->zero == 3 ? "zero3" : "zero2") : p->dist_opt ? "on" : "off",
                  mp_schedule_name(p->schedule));
    if (p->pipeline_layout[0])
        mp_buf_printf(out, "layout %s (Megatron's --pipeline-model-parallel-layout)\n",
                      p->pipeline_layout);
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
        mp_buf_printf(out, "first rank %lld blocks, last rank %lld (Megatron's "
                           "--decoder-first/last-pipeline-num-layers; 0: not given)\n",
                      (long long)p->first_stage_layers, (long long)p->last_stage_layers);
    if (p->account_for_embedding || p->account_for_loss)
        mp_buf_printf(out, "split counting%s%s as a layer (Megatron's --account-for-%s)\n",
                      p->account_for_embedding ? " the embedding" : "",
                      p->account_for_embedding && p->account_for_loss ? " and the loss each"
                      : p->account_for_loss ? " the loss" : "",
                      p->account_for_embedding && p->account_for_loss
                          ? "embedding/loss-in-pipeline-split"
                      : p->account_for_embedding ? "embedding-in-pipeline-split"
                                                 : "loss-in-pipeline-split");
    if ((p->account_for_embedding || p->account_for_loss) && p->pp == 1)
        mp_buf_puts(out, "  no effect with pp 1: one stage, nothing to split (Megatron accepts "
                         "the flags and builds every layer)\n");

    mp_estimate e;
    if (mp_estimate_config(c, NULL, &e, &why) != MP_OK) {
        if (why.code != MP_EINPUT) {
            if (err) *err = why;
            return why.code;
        }
        *verdict = 3;
        mp_buf_printf(out, "refused: %s: %s\n", why.field, why.msg);
        mp_buf_puts(out, "Megatron-LM would refuse it at start-up; the rules are in "
                         "docs/cost-model.md.\n");
        /* the best it could be instead */
    } else if (!e.fits) {
        *verdict = 2;
        mp_buf_printf(out, "does not fit: needs %.1f GiB per GPU, %.1f GiB more than the %.1f GiB "
                           "there are (the most loaded pipeline rank):\n",
                      e.memory.peak / MP_GIB, e.over_bytes / MP_GIB, e.memory.capacity / MP_GIB);
        memory_lines(c, &e, out);
        double stat = e.memory.weights + e.memory.grads + e.memory.optimizer;
        if (e.memory.activations > stat)
            mp_buf_printf(out, "  the activations (%.0f%% of the peak) are the largest part: %lld "
                               "micro-batches in flight on the first pipeline rank under %s\n",
                          100 * e.memory.activations / e.memory.peak,
                          (long long)(p->schedule == MP_SCHED_GPIPE ? e.microbatches
                                      /* dualpipe: "PP + 1" whole stages */
                                      : p->schedule == MP_SCHED_DUALPIPE
                                          ? (p->pp + 1 < e.microbatches ? p->pp + 1
                                                                        : e.microbatches)
                                      : p->pp < e.microbatches ? p->pp : e.microbatches),
                          mp_schedule_name(p->schedule));
        else
            mp_buf_printf(out, "  weights, gradients and optimizer states (%.0f%% of the peak) are "
                               "the largest part: %.3g parameters over tp*pp = %lld GPUs%s\n",
                          100 * stat / e.memory.peak, e.params, (long long)(p->tp * p->pp),
                          p->dist_opt ? "" : ", optimizer states not sharded (no --dist-opt)");
        fit_hints(c, out);
    } else {
        mp_buf_printf(out, "runs and fits: step %.3f s, %.1f of %.1f GiB, MFU %.1f%%\n", e.time.step,
                      e.memory.peak / MP_GIB, e.memory.capacity / MP_GIB, 100 * e.throughput.mfu);
    }

    if (!r || r->n == 0) {
        mp_buf_printf(out, "search finds no configuration that fits either (%s)\n",
                      why_none ? why_none : "none");
        return MP_OK;
    }
    const mp_search_plan *best = &r->plans[0];
    char diff[256];
    mp_explain_config_diff(c, &best->config, diff, sizeof diff);
    /* the number search ranked it by: the simulated step when it simulated */
    if (best->simulated)
        mp_buf_printf(out, "\nthe best configuration search finds: %s -> step %.3f s (simulated; "
                           "estimate %.3f s), MFU %.1f%%\n",
                      diff, best->sim_step, best->est.time.step, 100 * best->est.throughput.mfu);
    else
        mp_buf_printf(out, "\nthe best configuration search finds: %s -> step %.3f s (estimate), "
                           "MFU %.1f%%\n",
                      diff, best->est.time.step, 100 * best->est.throughput.mfu);
    if (*verdict == 0) {
        double rel = (e.time.step - best->est.time.step) / best->est.time.step;
        if (rel <= 0.01) {
            mp_buf_printf(out, "yours is as fast (%+.1f%%): it is the best or within 1%% of it.\n",
                          100 * rel);
        } else {
            *verdict = 1;
            char why2[256];
            mp_explain_estimate_diff(&best->est, &e, why2, sizeof why2);
            mp_buf_printf(out, "yours is slower: %s\n\n", why2);
            mp_buf_printf(out, "part (exposed seconds)        yours       best   difference (%% of best step)\n");
            part pp[8];
            int n = time_parts(&best->est, &e, pp);
            for (int i = 0; i < n; i++)
                mp_buf_printf(out, "  %-24s %9.3f  %9.3f   %+6.1f%%\n", pp[i].name, pp[i].b, pp[i].a,
                              100 * (pp[i].b - pp[i].a) / best->est.time.step);
            mp_buf_printf(out, "  %-24s %9.3f  %9.3f   %+6.1f%%\n", "step", e.time.step,
                          best->est.time.step, 100 * rel);
            mp_buf_printf(out, "  %-24s %9.1f  %9.1f   GiB\n", "peak memory", e.memory.peak / MP_GIB,
                          best->est.memory.peak / MP_GIB);
        }
    }
    return MP_OK;
}
