#include "core/decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fields.h"
#include "core/io.h"
#include "core/tables.h"
#include "core/units.h"

bool mp_is_file(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

void mp_basename_stem(const char *path, char *buf, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strcspn(base, ".");
    if (len == 0)
        len = strlen(base);
    if (len >= size)
        len = size - 1;
    memcpy(buf, base, len);
    buf[len] = '\0';
    mp_text_sanitize(buf); /* a file named "a\nb.yaml" split the lines written */
}

void mp_error_point(mp_error *err, const mp_ynode *map, const char *prefix, const char *origin)
{
    if (!err)
        return;
    const mp_ynode *node = err->field[0] ? mp_ynode_at(map, err->field) : NULL;
    if (!node) {
        /* the field took a default: point at the nearest mapping above it
         * that is written (model.moe.imbalance of a preset: "model:") */
        char parent[128];
        snprintf(parent, sizeof parent, "%s", err->field);
        char *dot;
        while (!node && (dot = strrchr(parent, '.'))) {
            *dot = '\0';
            node = mp_ynode_at(map, parent);
        }
    }
    if (!node)
        node = map;
    if (node)
        mp_error_locate(err, origin, node->line, node->column);
    else
        mp_error_locate(err, origin, 0, 0);
    if (prefix && prefix[0]) {
        char field[sizeof err->field];
        snprintf(field, sizeof field, "%s%s", prefix, err->field);
        size_t len = strlen(field);
        if (!err->field[0] && len && field[len - 1] == '.')
            field[len - 1] = '\0';
        snprintf(err->field, sizeof err->field, "%s", field);
    }
}

void mp_error_point_file(mp_error *err, const char *path)
{
    if (!err || err->file[0] || !strncmp(err->field, "--", 2))
        return;
    char *text = NULL;
    size_t len = 0;
    mp_ynode *root = NULL;
    mp_error rerr;
    mp_error_clear(&rerr);
    if (err->field[0] && mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, &rerr) == MP_OK &&
        mp_yaml_load(text, len, path, &root, &rerr) == MP_OK && root)
        mp_error_point(err, root, "", path);
    else
        snprintf(err->file, sizeof err->file, "%s", path);
    mp_yaml_free(root);
    free(text);
}

/* the verbs whose options take a model or a hardware profile file */
#define MODEL_VERBS " (estimate, explain, search, simulate)"

mp_status mp_check_file_kind(const mp_ynode *root, mp_file_kind want, const char *origin,
                             mp_error *err)
{
    if (!root || root->kind != MP_Y_MAP)
        return MP_OK;
    mp_file_kind is;
    const char *what;
    /* the hint names the verbs that have the option: the reader does not
     * know its verb, and exec, hw and models have no --model or --hw (exec
     * --compare said "give it as --model FILE") */
    if (mp_ymap_get(root, "megaplan_plan")) {
        is = MP_FILE_PLAN;
        what = "this is a plan, not a %s: give it as the first argument (megaplan estimate, "
               "simulate or exec PLAN.yaml)";
    } else if (mp_ymap_get(root, "model_type")) {
        is = MP_FILE_MODEL; /* a HuggingFace config.json */
        what = want == MP_FILE_PLAN
                   ? "this is a HuggingFace config.json, not a %s: give it as --model FILE "
                     "with --gpus N" MODEL_VERBS
                   : "this is a HuggingFace config.json, not a %s: give it as --model FILE"
                     MODEL_VERBS;
    } else if (mp_ymap_get(root, "arch") || mp_ymap_get(root, "hidden")) {
        is = MP_FILE_MODEL;
        what = want == MP_FILE_PLAN ? "this is a model file, not a %s: give it as --model FILE "
                                      "with --gpus N" MODEL_VERBS ", or a plan that search -o wrote"
                                    : "this is a model file, not a %s: give it as --model FILE"
                                      MODEL_VERBS;
    } else if (mp_ymap_get(root, "hbm_bw") || mp_ymap_get(root, "gemm_efficiency")) {
        is = MP_FILE_HW;
        what = "this is a hardware profile, not a %s: give it as --hw FILE" MODEL_VERBS
               " or as exec's --compare FILE";
    } else {
        return MP_OK;
    }
    /* a model file that is a config.json is the model reader's own case */
    if (is == want)
        return MP_OK;
    static const char *const names[] = {"model", "hardware profile", "plan"};
    char msg[256];
    snprintf(msg, sizeof msg, what, names[want]);
    return mp_error_set(err, MP_EINPUT, origin, root->line, root->column, NULL, "%s", msg);
}

mp_status mp_model_decode(const mp_ynode *node, const char *prefix, const char *origin,
                          mp_model *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    /* the architecture decides the defaults of activation, norm, ... */
    const mp_ynode *arch = mp_ymap_get(node, "arch");
    int a = arch && arch->kind == MP_Y_SCALAR ? -1 : MP_ARCH_GPT;
    for (int i = 0; arch && arch->kind == MP_Y_SCALAR && i < MP_ARCH_COUNT; i++)
        if (!strcmp(arch->text, mp_arch_name((mp_arch)i)))
            a = i;
    mp_model_arch_defaults(out, a >= 0 ? (mp_arch)a : MP_ARCH_GPT);
    size_t n;
    const mp_field *tab = mp_model_field_table(&n);
    mp_status st = mp_fields_decode(tab, n, node, prefix, origin, out, NULL, NULL, err);
    if (st != MP_OK)
        return st;
    /* 0 stands for "not given" (every block), but written it is i mod 0:
     * Megatron's --moe-layer-freq 0 divides by zero, and config.json's
     * moe_layer_freq 0 is refused; it was read as 1 */
    const mp_ynode *freq = mp_ynode_at(node, "moe.layer_freq");
    if (freq && out->moe.layer_freq == 0) {
        char field[128];
        snprintf(field, sizeof field, "%smoe.layer_freq", prefix ? prefix : "");
        return mp_error_set(err, MP_EINPUT, origin, freq->line, freq->column, field,
                            "must be at least 1 (block i is an MoE block when i mod layer_freq "
                            "= 0): got 0");
    }
    if (!out->name[0] && origin)
        mp_basename_stem(origin, out->name, sizeof out->name);
    st = mp_model_finish(out, err);
    if (st != MP_OK)
        mp_error_point(err, node, prefix, origin);
    return st;
}

mp_status mp_hw_decode(const mp_ynode *node, const char *prefix, const char *origin,
                       mp_hw *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    out->scale_up.partial_node_efficiency = 1.0; /* optional fields' defaults */
    out->scale_out.partial_node_efficiency = 1.0;
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    mp_status st = mp_fields_decode(tab, n, node, prefix, origin, out, NULL, NULL, err);
    if (st != MP_OK)
        return st;
    st = mp_hw_finish(out, err);
    if (st != MP_OK)
        mp_error_point(err, node, prefix, origin);
    return st;
}

static cJSON *scalar_to_json(const mp_ynode *n)
{
    if (n->plain) {
        if (mp_yscalar_is_null(n))
            return cJSON_CreateNull();
        if (!strcmp(n->text, "true") || !strcmp(n->text, "false"))
            return cJSON_CreateBool(n->text[0] == 't');
        double v;
        const char *why;
        if (mp_units_parse(n->text, MP_UNIT_NONE, &v, &why))
            return cJSON_CreateNumber(v);
    }
    return cJSON_CreateString(n->text);
}

cJSON *mp_ynode_to_json(const mp_ynode *node)
{
    if (!node)
        return cJSON_CreateNull();
    if (node->kind == MP_Y_SCALAR)
        return scalar_to_json(node);
    cJSON *out = node->kind == MP_Y_MAP ? cJSON_CreateObject() : cJSON_CreateArray();
    if (!out)
        return NULL;
    for (size_t i = 0; i < node->n; i++) {
        const mp_ynode *v = node->kind == MP_Y_MAP ? node->items[2 * i + 1] : node->items[i];
        cJSON *child = mp_ynode_to_json(v);
        bool ok = child != NULL;
        if (ok && node->kind == MP_Y_MAP)
            ok = cJSON_AddItemToObject(out, node->items[2 * i]->text, child);
        else if (ok)
            ok = cJSON_AddItemToArray(out, child);
        if (!ok) {
            cJSON_Delete(child);
            cJSON_Delete(out);
            return NULL;
        }
    }
    return out;
}
