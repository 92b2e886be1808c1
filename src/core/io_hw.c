/* io_hw.c — --hw: a built-in profile or a YAML file; the profile as a cJSON
 * tree (plain SI numbers) and as YAML with units for people. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "core/io.h"
#include "core/tables.h"
#include "core/units.h"

mp_status mp_hw_parse_yaml(const char *text, size_t len, const char *origin, mp_hw *out,
                           mp_error *err)
{
    mp_ynode *root = NULL;
    mp_status st = mp_yaml_load(text, len, origin, &root, err);
    if (st != MP_OK)
        return st;
    st = mp_check_file_kind(root, MP_FILE_HW, origin, err);
    if (st == MP_OK)
        st = mp_hw_decode(root, "", origin, out, err);
    mp_yaml_free(root);
    return st;
}

mp_status mp_hw_load(const char *spec, mp_hw *out, mp_error *err)
{
    if (!spec || !spec[0])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "hw", "missing");
    bool pathlike = strchr(spec, '/') || strstr(spec, ".yaml") || strstr(spec, ".yml");
    /* a built-in name wins over a file of that name in the current folder */
    bool builtin = false;
    for (int i = 0; !pathlike && i < mp_hw_preset_count(); i++)
        builtin = builtin || !strcmp(mp_hw_preset_name(i), spec);
    if (!builtin && (mp_is_file(spec) || pathlike)) {
        char *text = NULL;
        size_t len = 0;
        mp_status st = mp_read_file(spec, MP_MAX_INPUT_BYTES, &text, &len, err);
        if (st != MP_OK)
            return st;
        st = mp_hw_parse_yaml(text, len, spec, out, err);
        free(text);
        return st;
    }
    return mp_hw_preset(spec, out, err);
}

cJSON *mp_hw_to_json(const mp_hw *hw)
{
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    return mp_fields_to_json(tab, n, hw);
}

cJSON *mp_hw_to_json_units(const mp_hw *hw)
{
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    cJSON *root = mp_fields_to_json(tab, n, hw);
    if (!root)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const mp_field *f = &tab[i];
        if (f->type != MP_FT_DOUBLE || f->unit == MP_UNIT_NONE)
            continue;
        double v = *(const double *)((const char *)hw + f->offset);
        if (v == 0)
            continue; /* "0" reads the same in every unit */
        /* walk to the number through the dotted path */
        cJSON *parent = root;
        const char *p = f->path;
        for (const char *dot = strchr(p, '.'); dot && parent; dot = strchr(p, '.')) {
            char part[64];
            size_t len = (size_t)(dot - p);
            if (len >= sizeof part)
                break;
            memcpy(part, p, len);
            part[len] = '\0';
            parent = cJSON_GetObjectItemCaseSensitive(parent, part);
            p = dot + 1;
        }
        if (!parent)
            continue;
        char text[64];
        mp_units_format(v, f->unit, text, sizeof text);
        cJSON *s = cJSON_CreateString(text);
        if (!s || !cJSON_ReplaceItemInObjectCaseSensitive(parent, p, s)) {
            cJSON_Delete(s);
            cJSON_Delete(root);
            return NULL;
        }
    }
    return root;
}
