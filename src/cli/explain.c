/* explain.c — `megaplan explain`: why one configuration (the options of
 * estimate) is refused, does not fit, or is slower than the best that search
 * finds, part by part; the best comes from the same search `search` runs.
 * Exit 0 with the explanation, 2 on bad input. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "cli/search_common.h"
#include "core/buf.h"
#include "planner/explain.h"
#include "planner/megatron.h"
#include "planner/report.h"
#include "search/driver.h"

const mp_verb_doc mp_doc_explain = {
    .name = "explain",
    .summary = "why a configuration is refused, does not fit, or loses",
    .usage = "megaplan explain --model M --gpus N [options]\n",
    .text = "Says why this configuration is refused, does not fit, or is slower than the best "
            "one `megaplan search` finds with the same model, GPUs and training settings (the "
            "same search: --top, --no-split, --no-simulate and --tp-cross-node as search's). "
            "json|yaml: one document with the verdict, this configuration's estimate and the "
            "best one; megatron: the best configuration's Megatron-LM flags.",
    .groups = (const mp_opt_group *const[]){&mp_cli_config_opts, &mp_search_cli_opts, NULL},
    .operand = NULL,
};

static const char *verdict_name(int verdict)
{
    static const char *names[] = {"best", "slower", "does_not_fit", "refused"};
    return verdict >= 0 && verdict < 4 ? names[verdict] : "unknown";
}

/* --format json|yaml: {"verdict", "configuration" (the estimate object, or
 * "refused" with the field and message), "best" (the estimate object of
 * search's winner with the step it was ranked by), "explanation" (the text)}. */
static cJSON *explain_json(const mp_cli_config *cc, const char *defaults, int verdict,
                           const mp_search_result *r, const mp_buf *text)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "verdict", verdict_name(verdict))) {
        cJSON_Delete(o);
        return NULL;
    }
    mp_estimate e;
    mp_error why;
    mp_error_clear(&why);
    cJSON *conf;
    if (mp_estimate_config(&cc->config, NULL, &e, &why) == MP_OK) {
        conf = mp_estimate_to_json(&cc->config, &e, defaults);
    } else {
        conf = cJSON_CreateObject();
        cJSON *ref = conf ? cJSON_AddObjectToObject(conf, "refused") : NULL;
        if (ref) {
            char opt[64];
            mp_cli_option_name(why.field, opt, sizeof opt);
            cJSON_AddStringToObject(ref, "field", opt);
            cJSON_AddStringToObject(ref, "message", why.msg);
        }
    }
    cJSON *best = NULL;
    if (r && r->n > 0) {
        const mp_search_plan *w = &r->plans[0];
        best = mp_estimate_to_json(&w->config, &w->est, NULL);
        if (best && w->simulated)
            cJSON_AddNumberToObject(best, "simulated_step_s", w->sim_step);
        if (best)
            cJSON_AddNumberToObject(best, "rank_step_s", w->rank_step);
    } else {
        best = cJSON_CreateNull();
    }
    if (!conf || !best || !cJSON_AddItemToObject(o, "configuration", conf)) {
        cJSON_Delete(conf);
        cJSON_Delete(best);
        cJSON_Delete(o);
        return NULL;
    }
    if (!cJSON_AddItemToObject(o, "best", best)) {
        cJSON_Delete(best);
        cJSON_Delete(o);
        return NULL;
    }
    if (!cJSON_AddStringToObject(o, "explanation", text->data ? text->data : "")) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int cmd_explain(int argc, char **argv)
{
    mp_cli_config cc;
    mp_error err;
    mp_error_clear(&err);
    if (mp_cli_wants_help(argc, argv)) {
        mp_verb_doc_write(&mp_doc_explain, stdout);
        return 0;
    }
    if (mp_cli_config_parse(&argc, argv, &cc, &err) != MP_OK) return mp_cli_fail("explain", &err);
    mp_search_cli sc;
    if (mp_search_cli_parse(&argc, argv, "explain", &sc, &err) != MP_OK)
        return mp_cli_fail("explain", &err);
    /* (a DeepSpeed or torchtitan config was not written: the table came instead) */
    if (cc.format == MP_FORMAT_DEEPSPEED || cc.format == MP_FORMAT_TORCHTITAN) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, "--format",
                     "explain writes table, json, yaml or megatron (search --format %s writes "
                     "the winner's config)",
                     cc.format == MP_FORMAT_DEEPSPEED ? "deepspeed" : "torchtitan");
        return mp_cli_fail("explain", &err);
    }
    if (sc.output || sc.n_fix || sc.force) {
        mp_error_set(&err, MP_EINPUT, NULL, 0, 0, sc.output ? "-o" : sc.n_fix ? "--fix" : "--force",
                     "is search's: explain takes the configuration's own options (--tp 8 ...)");
        return mp_cli_fail("explain", &err);
    }
    if (argc > 1) {
        mp_cli_leftover(&mp_doc_explain, NULL, argv[1], &err);
        return mp_cli_fail("explain", &err);
    }
    /* The search is search's own, over the whole space: the same model,
     * hardware and training settings, nothing of the split fixed, and the
     * same options (top, re-ranking by simulation), so both name one best. */
    mp_cli_config scc = cc;
    scc.set &= ~0xFFFu; /* the MP_SET_* bits of the parallel settings */
    /* --recompute-modules implies selective recompute (options.c), in search as
     * here: the copy keeps it so that search searches what `search` would */
    if (scc.config.parallel.recompute_modules) scc.set |= MP_SET_RECOMPUTE;
    scc.set &= ~(uint32_t)MP_SET_PIPELINE_LAYOUT; /* a layout is part of the split */
    scc.config.parallel.pipeline_layout[0] = '\0';
    scc.set &= ~(uint32_t)MP_SET_STAGE_LAYERS; /* and so are the first/last-stage layers */
    scc.config.parallel.first_stage_layers = scc.config.parallel.last_stage_layers = 0;
    scc.config.parallel.account_for_embedding = scc.config.parallel.account_for_loss = false;
    mp_search_options opt;
    if (mp_search_cli_options(&scc, &sc, &opt, &err) != MP_OK) return mp_cli_fail("explain", &err);
    /* a split that does not divide the GPUs is for explain to explain, not
     * for the defaults to refuse: give dp a value so the check names the cause */
    mp_parallel *p = &cc.config.parallel;
    int64_t tpc; /* each degree is at most 2^24: the product of three may overflow */
    bool over = __builtin_mul_overflow(cc.set & MP_SET_TP ? p->tp : 1,
                                       cc.set & MP_SET_PP ? p->pp : 1, &tpc) ||
                __builtin_mul_overflow(tpc, cc.set & MP_SET_CP ? p->cp : 1, &tpc);
    if (!(cc.set & MP_SET_DP) && cc.have_gpus && (over || cc.config.training.gpus % tpc)) {
        tpc = over ? INT64_MAX : tpc;
        p->dp = cc.config.training.gpus / tpc > 0 ? cc.config.training.gpus / tpc : 1;
        cc.set |= MP_SET_DP;
    }
    /* hybrid sharding on one domain: search (which explain runs with hsdp
     * kept) has no candidate, so it is refused as search and estimate do */
    if (mp_cli_config_finish(&cc, &err) != MP_OK ||
        mp_cli_check_hsdp_domain(&cc, false, &err) != MP_OK)
        return mp_cli_fail("explain", &err);
    /* like search, start from the preset's published batch when none is given
     * and this split can run it, so both answers speak of the same batch */
    mp_config *c = &cc.config;
    if (!(cc.set & MP_SET_GLOBAL_BATCH) && cc.published_global_batch > 0 &&
        cc.published_global_batch % (p->micro_batch * p->dp) == 0)
        c->training.global_batch = cc.published_global_batch;
    mp_search_result r;
    mp_error serr;
    mp_error_clear(&serr);
    mp_status st = mp_search(&opt, &r, &serr);
    if (st == MP_ENOMEM || st == MP_EINTERNAL) return mp_cli_fail("explain", &serr);
    const mp_search_result *found = st == MP_OK ? &r : NULL;
    mp_buf text, out;
    mp_buf_init(&text);
    mp_buf_init(&out);
    int verdict = 0;
    if (mp_explain_against(&cc.config, found, serr.msg, &text, &verdict, &err) != MP_OK) {
        mp_buf_free(&text);
        mp_search_result_free(&r);
        return mp_cli_fail("explain", &err);
    }
    int rc = 0;
    if (cc.format == MP_FORMAT_JSON || cc.format == MP_FORMAT_YAML) {
        char defaults[2048];
        mp_cli_config_describe_defaults(&cc, defaults, sizeof defaults);
        cJSON *o = explain_json(&cc, defaults, verdict, found, &text);
        if (o)
            mp_cli_write_data(o, cc.format, &out);
        else
            out.oom = true;
        cJSON_Delete(o);
    } else if (cc.format == MP_FORMAT_MEGATRON) {
        if (found && found->n > 0 &&
            mp_megatron_can_run(&found->plans[0].config, &err) != MP_OK) {
            mp_buf_free(&out);
            mp_search_result_free(&r);
            return mp_cli_fail("explain", &err);
        } else if (found && found->n > 0) {
            mp_megatron_args(&found->plans[0].config, found->plans[0].plan, &out);
        } else {
            fprintf(stderr, "megaplan explain: search finds no configuration that fits: no "
                            "Megatron-LM flags to give\n");
            rc = 1;
        }
    } else {
        mp_buf_append(&out, text.data ? text.data : "", text.len);
    }
    mp_buf_free(&text);
    mp_search_result_free(&r);
    if (rc) {
        mp_buf_free(&out);
        return rc;
    }
    return mp_cli_emit("explain", &out);
}
