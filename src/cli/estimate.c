/* estimate.c — `megaplan estimate`: the cost model's answer for one
 * configuration, as a breakdown a person reads, or the JSON object of docs/formats.md
 * (--format json|yaml), or Megatron-LM arguments (--format megatron).
 * A configuration that cannot run is refused (exit 2); one that does not fit
 * in memory is still estimated, with "fits": false and by how much. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/framework_out.h"
#include "cli/options.h"
#include "core/buf.h"
#include "core/io.h"
#include "planner/band.h"
#include "planner/cost.h"
#include "planner/megatron.h"
#include "planner/report.h"

const mp_verb_doc mp_doc_estimate = {
    .name = "estimate",
    .summary = "time and memory of one configuration, broken down",
    .usage = "megaplan estimate --model M --gpus N [options]\n"
             "megaplan estimate PLAN.yaml [--format F]\n",
    .text = "The step time, its parts, and the memory per GPU of one configuration. Unset "
            "options take Megatron-LM's defaults; the output lists them. A plan file "
            "(docs/formats.md, examples/) is estimated as written, with its stage split.",
    .groups = (const mp_opt_group *const[]){&mp_cli_config_opts, NULL},
    .operand = "file",
};

static void row_time(mp_buf *b, const char *name, double s, double step)
{
    mp_buf_printf(b, "  %-26s %12.4f  %6.1f%%\n", name, s, step > 0 ? 100.0 * s / step : 0.0);
}

static void row_mem(mp_buf *b, const char *name, double bytes)
{
    mp_buf_printf(b, "  %-26s %12.2f\n", name, bytes / MP_GIB);
}

static void table(const mp_config *c, const mp_estimate *e, const char *defaults, mp_buf *b)
{
    const mp_parallel *p = &c->parallel;
    const mp_training *t = &c->training;
    mp_buf_printf(b, "megaplan estimate: %s on %lld x %s\n", c->model.name, (long long)t->gpus,
                  c->hw.name);
    mp_buf_printf(b,
                  "  parallel  tp=%lld%s pp=%lld vpp=%lld cp=%lld dp=%lld  micro_batch=%lld  "
                  "global_batch=%lld  microbatches=%lld\n",
                  (long long)p->tp, p->sp ? " (sp)" : "", (long long)p->pp, (long long)p->vpp,
                  (long long)p->cp, (long long)p->dp, (long long)p->micro_batch,
                  (long long)t->global_batch, (long long)e->microbatches);
    mp_buf_printf(b,
                  "            recompute=%s  dist_opt=%s  dp_overlap=%s  tp_overlap=%s  "
                  "schedule=%s  precision=%s  seq=%lld\n",
                  mp_recompute_name(p->recompute),
                  p->hsdp ? "hsdp" : p->zero >= 2 ? (p->zero == 3 ? "zero3" : "zero2") : p->dist_opt ? "on" : "off",
                  p->dp_overlap ? "on" : "off", p->tp_overlap ? "on" : "off",
                  mp_schedule_name(p->schedule), mp_dtype_name(t->precision), (long long)t->seq);
    if (p->pipeline_layout[0])
        mp_buf_printf(b, "  layout    %s  (Megatron's --pipeline-model-parallel-layout)\n",
                      p->pipeline_layout);
    if (p->first_stage_layers > 0 || p->last_stage_layers > 0)
        mp_buf_printf(b, "  layout    first rank %lld blocks, last rank %lld  (Megatron's "
                         "--decoder-first/last-pipeline-num-layers; 0: not given)\n",
                      (long long)p->first_stage_layers, (long long)p->last_stage_layers);
    if (p->account_for_embedding || p->account_for_loss)
        mp_buf_printf(b, "  layout    the%s%s counted as a layer%s in the split  (Megatron's "
                         "--account-for-%s-in-pipeline-split)\n",
                      p->account_for_embedding ? " embedding" : "",
                      p->account_for_embedding && p->account_for_loss ? " and the loss"
                      : p->account_for_loss ? " loss" : "",
                      p->account_for_embedding && p->account_for_loss ? " each" : "",
                      p->account_for_embedding && p->account_for_loss ? "embedding/loss"
                      : p->account_for_embedding ? "embedding" : "loss");
    if ((p->account_for_embedding || p->account_for_loss) && p->pp == 1)
        mp_buf_puts(b, "            no effect with pp 1: one stage, nothing to split (Megatron "
                       "accepts the flags and builds every layer)\n");
    if (p->cp > 1 && p->cp_comm_type != MP_CP_P2P)
        mp_buf_printf(b, "            cp_comm_type=%s  (Megatron's --cp-comm-type: %s, exposed)\n",
                      mp_cp_comm_name(p->cp_comm_type),
                      p->cp_comm_type == MP_CP_A2A ? "Q, K, V and the output all-to-all"
                                                   : "K and V all-gathered before the attention");
    if (p->p2p_overlap && p->schedule == MP_SCHED_INTERLEAVED)
        mp_buf_puts(b, "            p2p_overlap=on  (Megatron's --overlap-p2p-communication)\n");
    if (p->defer_embedding_wgrad && p->pp > 1) {
        mp_buf_puts(b, "            defer_embedding_wgrad=on  (Megatron's --defer-embedding-wgrad-compute: the "
                       "output layer's wgrad of ");
        if (p->wgrad_deferral_limit > 0)
            mp_buf_printf(b, "the first %lld micro-batches", (long long)p->wgrad_deferral_limit);
        else
            mp_buf_puts(b, "every micro-batch");
        mp_buf_puts(b, " in the pipeline flush)\n");
    }
    if (p->param_gather_sync && p->dist_opt && p->dp_overlap)
        mp_buf_puts(b, "            param_gather_overlap=off  (the all-gather after the optimizer step)\n");
    if (p->overlap_param_gather_with_optimizer_step)
        mp_buf_puts(b, "            param_gather_with_optimizer=on  (chunk 0's all-gather under the "
                       "optimizer step)\n");
    if (p->ddp_bucket_size > 0)
        mp_buf_printf(b, "            ddp_bucket_size=%lld  (Megatron's --ddp-bucket-size, in place of the "
                         "default max(40M, 1M*dp)%s)\n",
                      (long long)p->ddp_bucket_size,
                      p->dp_overlap ? "" : "; no effect without dp_overlap");
    if (mp_model_is_moe(&c->model))
        mp_buf_printf(b, "  experts   ep=%lld etp=%lld edp=%lld  dispatcher=%s  (%.4g B active "
                         "parameters; dispatch and combine are in the TP/SP line)\n",
                      (long long)mp_parallel_ep(p), (long long)mp_parallel_etp(p),
                      (long long)mp_parallel_edp(p), mp_dispatcher_name(p->dispatcher),
                      mp_model_active_params(&c->model) / 1e9);
    if (mp_model_is_moe(&c->model) && (p->dispatcher == MP_DISPATCH_FLEX || p->moe_a2a_overlap ||
                                       p->shared_expert_overlap))
        mp_buf_printf(b, "            %s%s%s\n",
                      p->dispatcher == MP_DISPATCH_FLEX
                          ? "flex: one copy per remote node and GPU reached (exec runs its "
                            "all-to-all)  "
                          : "",
                      p->moe_a2a_overlap ? "moe_a2a_overlap=on  " : "",
                      p->shared_expert_overlap ? "shared_expert_overlap=on" : "");
    if (p->flex_sms > 0)
        mp_buf_printf(b, "            flex_sms=%lld  (the SMs its kernels hold, in place of the "
                         "backend's default)\n",
                      (long long)p->flex_sms);
    if (p->flex_backend != MP_FLEX_AUTO)
        mp_buf_printf(b, "            flex_backend=%s  (Megatron's --moe-flex-dispatcher-backend)\n",
                      mp_flex_backend_setting_name(p->flex_backend));
    if (defaults[0]) {
        mp_buf_puts(b, "  defaults  ");
        const char *s = defaults;
        bool first = true;
        while (*s) {
            const char *nl = strchr(s, '\n');
            size_t n = nl ? (size_t)(nl - s) : strlen(s);
            if (n > 0) {
                if (!first)
                    mp_buf_puts(b, "; ");
                mp_buf_append(b, s, n);
                first = false;
            }
            s += n + (nl ? 1 : 0);
        }
        mp_buf_puts(b, "\n");
    }
    if (e->params >= 1e8)
        mp_buf_printf(b, "  model     %.4g B parameters, %.3g model FLOPs per iteration\n\n",
                      e->params / 1e9, e->model_flops);
    else /* small test models read better as a plain count */
        mp_buf_printf(b, "  model     %.0f parameters, %.3g model FLOPs per iteration\n\n",
                      e->params, e->model_flops);

    const mp_times *tm = &e->time;
    mp_buf_printf(b, "time per iteration (exposed)       seconds  of step\n");
    row_time(b, "compute", tm->compute, tm->step);
    row_time(b, "recompute", tm->recompute, tm->step);
    row_time(b, "TP/SP communication", tm->tp_comm, tm->step);
    row_time(b, "CP communication", tm->cp_comm, tm->step);
    row_time(b, "PP communication", tm->pp_comm, tm->step);
    row_time(b, "pipeline bubble", tm->bubble, tm->step);
    row_time(b, "DP communication", tm->dp_comm, tm->step);
    row_time(b, "optimizer step", tm->optimizer, tm->step);
    row_time(b, "step", tm->step, tm->step);
    double lo, hi;
    /* the band of the plan's kind: MoE plans the MoE rows' (planner/band.h) */
    const mp_band band = mp_band_of(&c->hw, &c->model);
    if (mp_band_time(&band, tm->step, &lo, &hi))
        mp_buf_printf(b, "  likely measured: %.4g to %.4g s (the %serror band of %s on held-out "
                         "runs, %+.1f%% to %+.1f%%; docs/validation.md)\n",
                      lo, hi, band.moe ? "mixture-of-experts " : "", c->hw.name, 100 * band.low,
                      100 * band.high);
    else if (band.moe)
        mp_buf_printf(b, "  likely measured: no band (%s holds no moe_error_band; the dense band "
                         "does not hold for mixture-of-experts plans)\n", c->hw.name);

    const mp_memory *m = &e->memory;
    mp_buf_printf(b, "\nmemory per GPU (most loaded)           GiB\n");
    bool moe = m->expert_weights > 0.0;
    row_mem(b, "weights", m->weights);
    if (moe) row_mem(b, "  of which routed experts", m->expert_weights);
    if (m->fp8_weights > 0.0) row_mem(b, "  of which FP8 copies", m->fp8_weights);
    row_mem(b, "gradients", m->grads);
    if (moe) row_mem(b, "  of which routed experts", m->expert_grads);
    row_mem(b, "optimizer states", m->optimizer);
    if (moe) row_mem(b, "  of which routed experts", m->expert_optimizer);
    row_mem(b, "activations", m->activations);
    if (moe) row_mem(b, "  of which routed tokens", m->routed_activations);
    if (m->capacity_activations > 0.0)
        row_mem(b, "  of which above the mean load", m->capacity_activations);
    row_mem(b, "other (buffers, reserve)", m->other);
    row_mem(b, "peak", m->peak);
    row_mem(b, "capacity", m->capacity);
    if (e->fits)
        mp_buf_printf(b, "  fits: yes, %.2f GiB to spare\n", (m->capacity - m->peak) / MP_GIB);
    else
        mp_buf_printf(b, "  fits: NO, over by %.2f GiB\n", e->over_bytes / MP_GIB);

    const mp_throughput *th = &e->throughput;
    mp_buf_printf(b, "\nthroughput\n");
    mp_buf_printf(b, "  %-26s %12.4g", "tokens/s", th->tokens_per_s);
    if (mp_band_rate(&band, th->tokens_per_s, &lo, &hi))
        mp_buf_printf(b, "  likely %.4g to %.4g", lo, hi);
    mp_buf_puts(b, "\n");
    mp_buf_printf(b, "  %-26s %12.4g\n", "tokens/s per GPU", th->tokens_per_s_per_gpu);
    mp_buf_printf(b, "  %-26s %12.1f  MFU %.1f%%", "model TFLOP/s per GPU",
                  th->model_tflops_per_gpu, 100.0 * th->mfu);
    if (mp_band_rate(&band, th->mfu, &lo, &hi))
        mp_buf_printf(b, "  likely %.1f%% to %.1f%%", 100.0 * lo, 100.0 * hi);
    mp_buf_puts(b, "\n");
    mp_buf_printf(b, "  %-26s %12.1f  HFU %.1f%%\n", "hardware TFLOP/s per GPU",
                  th->hardware_tflops_per_gpu, 100.0 * th->hfu);
    if (t->tokens > 0) {
        /* both are times: the band bounds them as it bounds the step */
        mp_buf_printf(b, "  %-26s %12.2f  (%.3g tokens)", "days to train", th->days_for_tokens,
                      t->tokens);
        if (mp_band_time(&band, th->days_for_tokens, &lo, &hi))
            mp_buf_printf(b, "  likely %.4g to %.4g", lo, hi);
        mp_buf_puts(b, "\n");
        mp_buf_printf(b, "  %-26s %12.4g  (days x 24 x %lld GPUs)", "GPU-hours",
                      th->gpu_hours_for_tokens, (long long)t->gpus);
        if (mp_band_time(&band, th->gpu_hours_for_tokens, &lo, &hi))
            mp_buf_printf(b, "  likely %.4g to %.4g", lo, hi);
        mp_buf_puts(b, "\n");
    }
    mp_buf_printf(b, "MFU/HFU: model FLOPs count the attention score matrix in full (not halved "
                     "for causal masks),\nas Narayanan 2021 and Megatron-LM do; HFU adds the "
                     "recomputed forward (docs/cost-model.md).\n");
}

/* The Megatron-LM arguments of this configuration. */
int cmd_estimate(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        mp_verb_doc_write(&mp_doc_estimate, stdout);
        return 0;
    }
    if (mp_cli_config_parse(&argc, argv, &cc, &err) != MP_OK)
        return mp_cli_fail("estimate", &err);
    /* one operand: a plan file, in place of the configuration's options */
    const char *plan_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            continue;
        if ((argv[i][0] == '-' && argv[i][1]) || plan_path) {
            mp_cli_leftover(&mp_doc_estimate, NULL, argv[i], &err);
            return mp_cli_fail("estimate", &err);
        }
        /* "" was read as a file and refused with no name: "cannot read: No such file" */
        if (!argv[i][0]) {
            mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "PLAN.yaml", "empty file name");
            return mp_cli_fail("estimate", &err);
        }
        plan_path = argv[i];
    }
    mp_plan *plan = NULL;
    const mp_config *cfg = &cc.config;
    char defaults[2048] = "";
    if (plan_path) {
        if (cc.have_model || cc.have_gpus || cc.set || cc.first_option) {
            mp_error_set(&err, MP_EINPUT, NULL, 0, 0, plan_path,
                         "give a plan file or a configuration's options, not both");
            return mp_cli_fail("estimate", &err);
        }
        plan = calloc(1, sizeof *plan);
        if (!plan) {
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            return mp_cli_fail("estimate", &err);
        }
        if (mp_plan_read_file(plan_path, plan, &err) != MP_OK) {
            free(plan);
            return mp_cli_fail("estimate", &err);
        }
        cfg = &plan->config;
    } else {
        if (mp_cli_config_finish(&cc, &err) != MP_OK || mp_cli_config_check(&cc, &err) != MP_OK)
            return mp_cli_fail("estimate", &err);
        mp_cli_config_describe_defaults(&cc, defaults, sizeof defaults);
    }

    mp_estimate e;
    if (mp_estimate_config(cfg, plan, &e, &err) != MP_OK) {
        if (plan && !err.file[0])
            mp_error_locate(&err, plan_path, 0, 0);
        else if (err.code == MP_EINPUT && !err.file[0]) {
            char opt[64];
            mp_cli_option_name(err.field, opt, sizeof opt);
            snprintf(err.field, sizeof err.field, "%s", opt);
            mp_cli_error_default_batch(&cc, &err);
        }
        free(plan);
        return mp_cli_fail("estimate", &err);
    }

    mp_buf out;
    mp_buf_init(&out);
    int rc = -1;
    if (cc.format == MP_FORMAT_JSON || cc.format == MP_FORMAT_YAML) {
        cJSON *o = mp_estimate_to_json(cfg, &e, defaults);
        if (!o) {
            mp_error_set(&err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
            rc = mp_cli_fail("estimate", &err);
        } else {
            mp_cli_write_data(o, cc.format, &out);
            cJSON_Delete(o);
        }
    } else if (mp_cli_is_framework_format(cc.format)) {
        if (mp_cli_framework_config(cfg, plan, cc.format, &out, &err) != MP_OK)
            rc = mp_cli_fail("estimate", &err);
    } else {
        table(cfg, &e, defaults, &out);
    }
    free(plan);
    if (rc >= 0) {
        mp_buf_free(&out);
        return rc;
    }
    return mp_cli_emit("estimate", &out);
}
