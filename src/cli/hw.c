/* megaplan hw — the built-in hardware profiles, or one profile (built-in or a
 * YAML file) in full, in the profile format with units. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/io.h"
#include "core/tables.h"
#include "core/units.h"

const mp_verb_doc mp_doc_hw = {
    .name = "hw",
    .summary = "list built-in hardware profiles",
    .usage = "megaplan hw [--format table|json|yaml] [PROFILE]\n",
    .text = "Without PROFILE: list the built-in profiles.\nWith PROFILE (a built-in name or a "
            "YAML file): print it in full (yaml, the default here, is a profile file: save it, "
            "edit it, use --hw FILE).",
    .groups = (const mp_opt_group *const[]){&mp_cli_listing_opts, NULL},
    .operand = "profile",
};

static int list_profiles(const char *format)
{
    mp_buf b;
    mp_buf_init(&b);
    mp_error err;
    mp_error_clear(&err);
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        b.oom = true;
    if (!strcmp(format, "table"))
        mp_buf_printf(&b, "%-14s %8s %9s %10s %5s %9s %10s %10s  %s\n", "name", "memory",
                      "hbm", "bf16", "gpus", "scale-up", "domain", "scale-out", "description");
    for (int i = 0; i < mp_hw_preset_count(); i++) {
        mp_hw hw;
        if (mp_hw_preset(mp_hw_preset_name(i), &hw, &err) != MP_OK) {
            cJSON_Delete(arr);
            mp_buf_free(&b);
            return mp_cli_fail("hw", &err);
        }
        if (!strcmp(format, "table")) {
            mp_buf_printf(&b, "%-14s %4.0f GiB %4.2f TB/s %4.0f TF/s %5lld %4.0f GB/s %10lld "
                              "%5.0f GB/s  %s\n",
                          hw.name, hw.memory / 1073741824.0, hw.hbm_bw / 1e12,
                          hw.peak_flops[MP_DTYPE_BF16] / 1e12, (long long)hw.gpus_per_node,
                          hw.scale_up.bw_per_gpu / 1e9, (long long)hw.scale_up.gpus_per_domain,
                          hw.scale_out.bw_per_gpu / 1e9, hw.description);
            continue;
        }
        cJSON *o = !strcmp(format, "json") ? mp_hw_to_json(&hw) : mp_hw_to_json_units(&hw);
        if (!o || !arr || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            b.oom = true;
        }
    }
    if (!strcmp(format, "json")) {
        mp_json_write(arr, true, &b);
        mp_buf_puts(&b, "\n");
    } else if (!strcmp(format, "yaml")) {
        mp_json_write_yaml(arr, 0, &b);
    }
    cJSON_Delete(arr);
    return mp_cli_emit("hw", &b);
}

static int show_profile(const char *spec, const char *format)
{
    mp_hw hw;
    mp_error err;
    mp_error_clear(&err);
    if (mp_hw_load(spec, &hw, &err) != MP_OK)
        return mp_cli_fail("hw", &err);
    mp_buf b;
    mp_buf_init(&b);
    if (!strcmp(format, "json")) {
        cJSON *o = mp_hw_to_json(&hw);
        if (!o)
            b.oom = true;
        mp_json_write(o, true, &b);
        mp_buf_puts(&b, "\n");
        cJSON_Delete(o);
    } else if (!strcmp(format, "table")) {
        /* one row per field of the profile, with units */
        size_t n;
        const mp_field *tab = mp_hw_field_table(&n);
        for (size_t i = 0; i < n; i++) {
            const mp_field *f = &tab[i];
            const char *at = (const char *)&hw + f->offset;
            char value[256];
            switch (f->type) {
            case MP_FT_DOUBLE:
                mp_units_format(*(const double *)at, f->unit, value, sizeof value);
                break;
            case MP_FT_INT:
                snprintf(value, sizeof value, "%lld", (long long)*(const int64_t *)at);
                break;
            case MP_FT_BOOL:
                snprintf(value, sizeof value, "%s", *(const bool *)at ? "true" : "false");
                break;
            case MP_FT_STRING:
                snprintf(value, sizeof value, "%s", at);
                break;
            case MP_FT_CURVE: {
                const mp_curve *c = (const mp_curve *)at;
                size_t len = 0;
                value[0] = '\0';
                for (int k = 0; k < c->n && len + 32 < sizeof value; k++)
                    len += (size_t)snprintf(value + len, sizeof value - len, "%s%.3g:%.3g",
                                            k ? " " : "", c->x[k], c->y[k]);
                break;
            }
            default:
                snprintf(value, sizeof value, "?");
                break;
            }
            mp_buf_printf(&b, "%-26s %s\n", f->path, value);
        }
    } else {
        cJSON *o = mp_hw_to_json_units(&hw);
        if (!o)
            b.oom = true;
        mp_json_write_yaml(o, 0, &b);
        cJSON_Delete(o);
    }
    return mp_cli_emit("hw", &b);
}

int cmd_hw(int argc, char **argv)
{
    const char *format, *spec;
    int rc = mp_cli_listing_args(argc, argv, &mp_doc_hw, "profile", &format, &spec);
    if (rc >= 0)
        return rc;
    if (!spec)
        return list_profiles(format ? format : "table");
    return show_profile(spec, format ? format : "yaml");
}
