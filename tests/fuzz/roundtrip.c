/* roundtrip.c — see roundtrip.h. Values compare field by field through the
 * core's field tables, so a field added to a table is compared too. */
#include "roundtrip.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tables.h"

static bool broke(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return false;
}

/* The first field of tab where a and b differ, or NULL. */
static const char *differs(const mp_field *tab, size_t n, const void *a, const void *b)
{
    for (size_t i = 0; i < n; i++) {
        const mp_field *f = &tab[i];
        const char *x = (const char *)a + f->offset, *y = (const char *)b + f->offset;
        bool same = true;
        switch (f->type) {
        case MP_FT_INT:
            same = *(const int64_t *)x == *(const int64_t *)y;
            break;
        case MP_FT_DOUBLE:
            same = *(const double *)x == *(const double *)y;
            break;
        case MP_FT_BOOL:
            same = *(const bool *)x == *(const bool *)y;
            break;
        case MP_FT_STRING:
            same = strncmp(x, y, f->size) == 0;
            break;
        case MP_FT_ENUM:
            same = !memcmp(x, y, sizeof(int));
            break;
        case MP_FT_CURVE: {
            const mp_curve *c = (const mp_curve *)x, *d = (const mp_curve *)y;
            same = c->n == d->n;
            for (int j = 0; same && j < c->n; j++)
                same = c->x[j] == d->x[j] && c->y[j] == d->y[j];
            break;
        }
        }
        if (!same)
            return f->path;
    }
    return NULL;
}

static const char *model_differs(const mp_model *a, const mp_model *b)
{
    size_t n;
    const mp_field *tab = mp_model_field_table(&n);
    return differs(tab, n, a, b);
}

static const char *hw_differs(const mp_hw *a, const mp_hw *b)
{
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    return differs(tab, n, a, b);
}

static const char *config_differs(const mp_config *a, const mp_config *b)
{
    const char *d;
    size_t n;
    if ((d = model_differs(&a->model, &b->model)))
        return d;
    if ((d = hw_differs(&a->hw, &b->hw)))
        return d;
    const mp_field *tab = mp_training_field_table(&n);
    if ((d = differs(tab, n, &a->training, &b->training)))
        return d;
    tab = mp_parallel_field_table(&n);
    return differs(tab, n, &a->parallel, &b->parallel);
}

/* The model as its own YAML file, and inside the simplest plan (one GPU). */
bool rt_model(const mp_model *m, char *why, size_t why_size)
{
    mp_error err;
    mp_error_clear(&err);
    mp_model again = *m;
    if (mp_model_finish(&again, &err) != MP_OK)
        return broke(why, why_size, "accepted model refused by mp_model_finish: %s: %s",
                     err.field, err.msg);
    if (model_differs(&again, m))
        return broke(why, why_size, "mp_model_finish changes an accepted model: %s",
                     model_differs(&again, m));

    mp_buf b;
    mp_buf_init(&b);
    cJSON *j = mp_model_to_json(m);
    mp_json_write_yaml(j, 0, &b);
    cJSON_Delete(j);
    mp_model back;
    bool ok = true;
    if (mp_model_parse_yaml(b.data, b.len, "rewrite", &back, &err) != MP_OK)
        ok = broke(why, why_size, "written model refused: %s: %s", err.field, err.msg);
    else if (model_differs(&back, m))
        ok = broke(why, why_size, "model write -> read differs in %s", model_differs(&back, m));
    mp_buf_free(&b);
    if (!ok)
        return false;

    mp_plan *p = calloc(1, sizeof *p);
    if (!p)
        return broke(why, why_size, "out of memory");
    p->config.model = *m;
    if (mp_hw_preset("dgx-a100", &p->config.hw, &err) != MP_OK) {
        free(p);
        return broke(why, why_size, "no dgx-a100 profile");
    }
    p->config.training = (mp_training){.gpus = 1, .seq = m->seq, .global_batch = 1,
                                       .precision = MP_DTYPE_BF16};
    mp_parallel_defaults(&p->config.parallel);
    p->config.parallel.dp = 1;
    mp_plan_default_stages(p);
    /* a plan the checks refuse is never written; one they pass must read back */
    if (mp_plan_check(p, &err) == MP_OK)
        ok = rt_plan(p, why, why_size);
    free(p);
    return ok;
}

/* Both hardware writers: plain numbers (plans) and numbers with units (megaplan hw). */
bool rt_hw(const mp_hw *hw, char *why, size_t why_size)
{
    for (int units = 0; units < 2; units++) {
        mp_buf b;
        mp_buf_init(&b);
        cJSON *j = units ? mp_hw_to_json_units(hw) : mp_hw_to_json(hw);
        mp_json_write_yaml(j, 0, &b);
        cJSON_Delete(j);
        mp_hw back;
        mp_error err;
        mp_error_clear(&err);
        bool ok = true;
        if (mp_hw_parse_yaml(b.data, b.len, "rewrite", &back, &err) != MP_OK)
            ok = broke(why, why_size, "written hardware (%s) refused: %s: %s",
                       units ? "with units" : "plain", err.field, err.msg);
        else if (hw_differs(&back, hw))
            ok = broke(why, why_size, "hardware write (%s) -> read differs in %s",
                       units ? "with units" : "plain", hw_differs(&back, hw));
        mp_buf_free(&b);
        if (!ok)
            return false;
    }
    return true;
}

bool rt_plan(const mp_plan *p, char *why, size_t why_size)
{
    mp_buf b;
    mp_buf_init(&b);
    mp_plan_write_yaml(p, NULL, &b);
    mp_plan *back = calloc(1, sizeof *back);
    mp_error err;
    mp_error_clear(&err);
    bool ok = true;
    const char *d;
    if (!back)
        ok = broke(why, why_size, "out of memory");
    else if (mp_plan_parse_yaml(b.data, b.len, "rewrite", back, &err) != MP_OK)
        ok = broke(why, why_size, "written plan refused: %s: %s", err.field, err.msg);
    else if ((d = config_differs(&p->config, &back->config)))
        ok = broke(why, why_size, "plan write -> read differs in %s", d);
    else if (p->n_stages && (back->n_stages != p->n_stages ||
                             memcmp(back->stages, p->stages,
                                    sizeof *p->stages * (size_t)p->n_stages)))
        ok = broke(why, why_size, "plan write -> read differs in stages");
    else if (p->has_layer_recompute &&
             (!back->has_layer_recompute ||
              memcmp(back->layer_recompute, p->layer_recompute,
                     (size_t)p->config.model.layers + 2)))
        ok = broke(why, why_size, "plan write -> read differs in layer_recompute");
    free(back);
    mp_buf_free(&b);
    return ok;
}

bool rt_check(rt_kind kind, const char *text, size_t len, const char *origin, bool *accepted,
              char *why, size_t why_size)
{
    mp_error err;
    mp_error_clear(&err);
    mp_status st = MP_EINTERNAL;
    bool ok = true;
    *accepted = false;
    switch (kind) {
    case RT_MODEL_YAML:
    case RT_HF_JSON: {
        mp_model m;
        st = kind == RT_MODEL_YAML ? mp_model_parse_yaml(text, len, origin, &m, &err)
                                   : mp_model_parse_hf_json(text, len, origin, &m, &err);
        if (st == MP_OK)
            ok = rt_model(&m, why, why_size);
        break;
    }
    case RT_HW_YAML: {
        mp_hw hw;
        st = mp_hw_parse_yaml(text, len, origin, &hw, &err);
        if (st == MP_OK)
            ok = rt_hw(&hw, why, why_size);
        break;
    }
    case RT_PLAN_YAML: {
        mp_plan *p = malloc(sizeof *p);
        if (!p)
            return broke(why, why_size, "out of memory");
        st = mp_plan_parse_yaml(text, len, origin, p, &err);
        if (st == MP_OK)
            ok = rt_plan(p, why, why_size) && rt_model(&p->config.model, why, why_size) &&
                 rt_hw(&p->config.hw, why, why_size);
        free(p);
        break;
    }
    default:
        return broke(why, why_size, "unknown kind %d", (int)kind);
    }
    if (st == MP_OK) {
        *accepted = true;
        return ok;
    }
    if (st != MP_EINPUT && st != MP_EIO)
        return broke(why, why_size, "unexpected status %d", (int)st);
    if (!err.msg[0])
        return broke(why, why_size, "refused without a message");
    if (strchr(err.msg, '\n') || strchr(err.field, '\n'))
        return broke(why, why_size, "error message spans lines");
    return true;
}
