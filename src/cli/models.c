/* megaplan models — the built-in model presets with their parameter counts,
 * or one model (preset, YAML file or config.json) in full. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/io.h"
#include "core/tables.h"
#include "planner/cost.h"

const mp_verb_doc mp_doc_models = {
    .name = "models",
    .summary = "list built-in model presets",
    .usage = "megaplan models [--format table|json|yaml] [MODEL]\n",
    .text = "Without MODEL: list the presets (name, shape, parameters, size alias).\nWith MODEL "
            "(a preset, a model YAML file or a HuggingFace config.json): print it in full, as "
            "the model file format (docs/formats.md).",
    .groups = (const mp_opt_group *const[]){&mp_cli_listing_opts, NULL},
    .operand = "model",
};

/* 175.0B, 1.01T, 125M */
static void human_count(double v, char *buf, size_t size)
{
    if (v >= 1e12)
        snprintf(buf, size, "%.2fT", v / 1e12);
    else if (v >= 1e9)
        snprintf(buf, size, "%.1fB", v / 1e9);
    else
        snprintf(buf, size, "%.0fM", v / 1e6);
}

static cJSON *model_json(const mp_model *m, bool with_preset_info)
{
    cJSON *o = mp_model_to_json(m);
    if (!o)
        return NULL;
    bool ok = cJSON_AddNumberToObject(o, "params", mp_model_params(m)) != NULL;
    if (ok && mp_model_is_moe(m)) /* dense models' output stays as it was */
        ok = cJSON_AddNumberToObject(o, "active_params", mp_model_active_params(m)) &&
             (!with_preset_info ||
              cJSON_AddNumberToObject(o, "published_active_params",
                                      mp_model_preset_published_active_params(m->name)));
    if (with_preset_info && ok) {
        const char *alias = mp_model_preset_alias(m->name);
        ok = cJSON_AddNumberToObject(o, "published_params",
                                     mp_model_preset_published_params(m->name)) &&
             cJSON_AddNumberToObject(o, "published_global_batch",
                                     (double)mp_model_preset_global_batch(m->name)) &&
             (alias ? cJSON_AddStringToObject(o, "alias", alias)
                    : cJSON_AddNullToObject(o, "alias"));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int list_presets(const char *format)
{
    mp_buf b;
    mp_buf_init(&b);
    if (!strcmp(format, "table")) {
        mp_buf_printf(&b, "%-20s %-5s %6s %6s %5s %4s %6s %7s %6s %9s  %s\n", "name", "arch",
                      "layers", "hidden", "heads", "kv", "ffn", "vocab", "seq", "params",
                      "alias");
        for (int i = 0; mp_model_preset_at(i); i++) {
            const mp_model *m = mp_model_preset_at(i);
            char params[32];
            human_count(mp_model_params(m), params, sizeof params);
            const char *alias = mp_model_preset_alias(m->name);
            mp_buf_printf(&b, "%-20s %-5s %6lld %6lld %5lld %4lld %6lld %7lld %6lld %9s  %s\n",
                          m->name, mp_arch_name(m->arch), (long long)m->layers,
                          (long long)m->hidden, (long long)m->heads, (long long)m->kv_heads,
                          (long long)m->ffn_hidden, (long long)m->vocab, (long long)m->seq,
                          params, alias ? alias : "");
        }
        return mp_cli_emit("models", &b);
    }
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && mp_model_preset_at(i); i++) {
        cJSON *o = model_json(mp_model_preset_at(i), true);
        if (!o || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            b.oom = true;
            break;
        }
    }
    if (!arr)
        b.oom = true;
    if (!strcmp(format, "json")) {
        mp_json_write(arr, true, &b);
        mp_buf_puts(&b, "\n");
    } else {
        mp_json_write_yaml(arr, 0, &b);
    }
    cJSON_Delete(arr);
    return mp_cli_emit("models", &b);
}

static int show_model(const char *spec, const char *format)
{
    mp_model m;
    mp_error err;
    mp_error_clear(&err);
    if (mp_model_load(spec, &m, &err) != MP_OK)
        return mp_cli_fail("models", &err);
    mp_buf b;
    mp_buf_init(&b);
    bool preset = mp_model_preset(spec) != NULL;
    cJSON *o = model_json(&m, preset);
    if (!o)
        b.oom = true;
    if (!strcmp(format, "json")) {
        mp_json_write(o, true, &b);
        mp_buf_puts(&b, "\n");
    } else if (!strcmp(format, "table")) {
        char params[32];
        human_count(mp_model_params(&m), params, sizeof params);
        mp_buf_printf(&b, "%s: %s, %lld layers, hidden %lld, %lld heads, %s parameters\n", m.name,
                      mp_arch_name(m.arch), (long long)m.layers, (long long)m.hidden,
                      (long long)m.heads, params);
    } else {
        /* a model file: the shape only; what is derived goes in comments */
        cJSON_Delete(o);
        o = mp_model_to_json(&m);
        if (!o)
            b.oom = true;
        char params[32];
        human_count(mp_model_params(&m), params, sizeof params);
        mp_buf_printf(&b, "# %s: %.0f parameters (%s)", m.name, mp_model_params(&m), params);
        if (preset) {
            const char *alias = mp_model_preset_alias(m.name);
            mp_buf_printf(&b, "; published %.4g", mp_model_preset_published_params(m.name));
            if (mp_model_preset_global_batch(m.name))
                mp_buf_printf(&b, "; trained with global batch %lld",
                              (long long)mp_model_preset_global_batch(m.name));
            if (alias)
                mp_buf_printf(&b, "; alias %s", alias);
        }
        mp_buf_puts(&b, "\n");
        mp_json_write_yaml(o, 0, &b);
    }
    cJSON_Delete(o);
    return mp_cli_emit("models", &b);
}

int cmd_models(int argc, char **argv)
{
    const char *format, *spec;
    int rc = mp_cli_listing_args(argc, argv, &mp_doc_models, "model", &format, &spec);
    if (rc >= 0)
        return rc;
    if (!spec)
        return list_presets(format ? format : "table");
    return show_model(spec, format ? format : "yaml");
}
