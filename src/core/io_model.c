/* io_model.c — --model: a preset, a model YAML file or a HuggingFace
 * config.json; and the model as a cJSON tree for the writers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/decode.h"
#include "core/io.h"
#include "core/tables.h"

mp_status mp_model_parse_yaml(const char *text, size_t len, const char *origin, mp_model *out,
                              mp_error *err)
{
    mp_ynode *root = NULL;
    mp_status st = mp_yaml_load(text, len, origin, &root, err);
    if (st != MP_OK)
        return st;
    st = mp_check_file_kind(root, MP_FILE_MODEL, origin, err);
    if (st == MP_OK)
        st = mp_model_decode(root, "", origin, out, err);
    mp_yaml_free(root);
    return st;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

static bool looks_like_json(const char *path, const char *text)
{
    if (ends_with(path, ".json"))
        return true;
    /* a YAML file may be one flow mapping, "{name: m, arch: gpt, ...}" */
    if (ends_with(path, ".yaml") || ends_with(path, ".yml"))
        return false;
    while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
        text++;
    return *text == '{';
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static mp_status load_model_file(const char *path, mp_model *out, mp_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mp_status st = mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, err);
    if (st != MP_OK)
        return st;
    if (looks_like_json(path, text))
        st = mp_model_parse_hf_json(text, len, path, out, err);
    else
        st = mp_model_parse_yaml(text, len, path, out, err);
    free(text);
    return st;
}

mp_status mp_model_load(const char *spec, mp_model *out, mp_error *err)
{
    if (!spec || !spec[0])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model", "missing");
    bool pathlike = strchr(spec, '/') || ends_with(spec, ".yaml") || ends_with(spec, ".yml") ||
                    ends_with(spec, ".json");
    /* a preset name wins over a file of that name in the current folder, so
     * the same command means the same thing wherever it runs */
    const mp_model *preset = pathlike ? NULL : mp_model_preset(spec);
    if (preset) {
        *out = *preset;
        return MP_OK;
    }
    if (mp_is_file(spec))
        return load_model_file(spec, out, err);
    if (is_dir(spec)) {
        /* a HuggingFace checkpoint folder: its config.json */
        char path[4096];
        if (snprintf(path, sizeof path, "%s/config.json", spec) < (int)sizeof path &&
            mp_is_file(path))
            return load_model_file(path, out, err);
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                            "no config.json in %.200s (a folder is read as a HuggingFace "
                            "checkpoint)", spec);
    }
    if (pathlike) {
        char *text = NULL;
        mp_status st = mp_read_file(spec, MP_MAX_INPUT_BYTES, &text, NULL, err);
        free(text);
        return st != MP_OK ? st : mp_error_set(err, MP_EIO, spec, 0, 0, NULL, "not a file");
    }
    const char *names[128];
    size_t n = 0;
    for (const mp_model *m; n < 128 && (m = mp_model_preset_at((int)n)); n++)
        names[n] = m->name;
    /* a size that several presets share ("70B": two LLaMAs) has no alias: name them */
    char same_size[512] = "";
    int n_same = 0;
    for (size_t i = 0; i < n; i++) {
        const char *dash = strrchr(names[i], '-');
        if (!dash || strcasecmp(dash + 1, spec))
            continue;
        size_t used = strlen(same_size);
        snprintf(same_size + used, sizeof same_size - used, "%s%s", n_same ? " or " : "",
                 names[i]);
        n_same++;
    }
    if (n_same)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                            "unknown model '%.64s' (did you mean %s? see megaplan models)",
                            spec, same_size);
    const char *close = mp_closest_name(spec, names, n);
    if (close)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                            "unknown model '%.64s' (did you mean '%s'? see megaplan models)",
                            spec, close);
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model",
                        "unknown model '%.64s': not a preset (see megaplan models) nor a file",
                        spec);
}

cJSON *mp_model_to_json(const mp_model *m)
{
    size_t n;
    const mp_field *tab = mp_model_field_table(&n);
    cJSON *o = mp_fields_to_json(tab, n, m);
    /* a dense model's file reads as it always has: no empty moe/mla groups */
    if (o && !mp_model_is_moe(m))
        cJSON_DeleteItemFromObjectCaseSensitive(o, "moe");
    if (o && !mp_model_is_mla(m))
        cJSON_DeleteItemFromObjectCaseSensitive(o, "mla");
    /* dropout at its architecture's default reads back as that default (the
     * decoder starts from it): written only where the model differs */
    double def = mp_model_default_dropout(m->arch);
    if (o && mp_model_hidden_dropout(m) == def)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "hidden_dropout");
    if (o && mp_model_attention_dropout(m) == def)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "attention_dropout");
    return o;
}
