/* report.c — the estimate object of docs/formats.md as a cJSON tree. Numbers are
 * rounded to what a reader can use (and what golden tests can compare). */
#include <math.h>
#include <string.h>

#include "core/io.h"
#include "planner/report.h"

#include "planner/band.h"

static double round_to(double x, double digits)
{
    if (!isfinite(x) || x == 0.0)
        return isfinite(x) ? x : 0.0;
    double scale = pow(10.0, digits - ceil(log10(fabs(x))));
    return round(x * scale) / scale;
}

static bool add(cJSON *o, const char *k, double v)
{
    return cJSON_AddNumberToObject(o, k, round_to(v, 6)) != NULL;
}

static cJSON *memory_json(const mp_memory *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = add(o, "weights", m->weights / MP_GIB) && add(o, "grads", m->grads / MP_GIB) &&
              add(o, "optimizer", m->optimizer / MP_GIB) &&
              add(o, "activations", m->activations / MP_GIB) && add(o, "other", m->other / MP_GIB) &&
              add(o, "peak", m->peak / MP_GIB) && add(o, "capacity", m->capacity / MP_GIB);
    /* MoE only: the routed experts' and routed tokens' shares of the above */
    if (ok && m->expert_weights > 0.0)
        ok = add(o, "expert_weights", m->expert_weights / MP_GIB) &&
             add(o, "expert_grads", m->expert_grads / MP_GIB) &&
             add(o, "expert_optimizer", m->expert_optimizer / MP_GIB) &&
             add(o, "routed_activations", m->routed_activations / MP_GIB) &&
             add(o, "capacity_activations", m->capacity_activations / MP_GIB);
    if (ok && m->fp8_weights > 0.0) /* fp8 only: the weights' FP8 copies, in weights */
        ok = add(o, "fp8_weights", m->fp8_weights / MP_GIB);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *times_json(const mp_times *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = add(o, "step", t->step) && add(o, "compute", t->compute) &&
              add(o, "recompute", t->recompute) && add(o, "tp_comm", t->tp_comm) &&
              add(o, "cp_comm", t->cp_comm) && add(o, "pp_comm", t->pp_comm) &&
              add(o, "dp_comm", t->dp_comm) && add(o, "bubble", t->bubble) &&
              add(o, "optimizer", t->optimizer);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *throughput_json(const mp_throughput *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = add(o, "tokens_per_s", t->tokens_per_s) &&
              add(o, "tokens_per_s_per_gpu", t->tokens_per_s_per_gpu) &&
              add(o, "model_tflops_per_gpu", t->model_tflops_per_gpu) &&
              add(o, "hardware_tflops_per_gpu", t->hardware_tflops_per_gpu) &&
              add(o, "mfu", t->mfu) && add(o, "hfu", t->hfu) &&
              add(o, "days_for_tokens", t->days_for_tokens) &&
              add(o, "gpu_hours_for_tokens", t->gpu_hours_for_tokens);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add_defaults(cJSON *o, const char *defaults)
{
    if (!defaults || !defaults[0])
        return true;
    cJSON *arr = cJSON_AddArrayToObject(o, "defaults");
    if (!arr)
        return false;
    const char *p = defaults;
    while (*p) {
        while (*p == ' ' || *p == ';' || *p == '\n')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ';' && *e != '\n')
            e++;
        char item[160];
        size_t n = (size_t)(e - p);
        if (n >= sizeof item)
            n = sizeof item - 1;
        memcpy(item, p, n);
        while (n > 0 && item[n - 1] == ' ')
            n--;
        item[n] = '\0';
        cJSON *s = cJSON_CreateString(item);
        if (!s || !cJSON_AddItemToArray(arr, s)) {
            cJSON_Delete(s);
            return false;
        }
        p = e;
    }
    return true;
}

/* {"low","high","kind","source","step_s":[lo,hi],"tokens_per_s":[lo,hi],"mfu":[lo,hi]}, and with
 * training tokens "days_for_tokens" and "gpu_hours_for_tokens" [lo,hi] (times, as the step):
 * where the measured values likely lie, from the band of the plan's kind ("dense" or
 * "mixture-of-experts", planner/band.h); NULL without a band. */
static cJSON *band_json(const mp_config *c, const mp_estimate *e)
{
    const mp_band band = mp_band_of(&c->hw, &c->model), *b = &band;
    if (!mp_band_known(b))
        return NULL;
    cJSON *o = cJSON_CreateObject();
    double r[2];
    bool ok = o && add(o, "low", b->low) && add(o, "high", b->high) &&
              cJSON_AddStringToObject(o, "kind", mp_band_kind(b)) &&
              cJSON_AddStringToObject(o, "source", b->moe
                  ? "held-out residuals of the mixture-of-experts runs of this hardware class "
                    "(docs/validation.md, Error bands)"
                  : "held-out residuals of this hardware class (docs/validation.md, Error bands)");
    mp_band_time(b, e->time.step, &r[0], &r[1]);
    ok = ok && cJSON_AddItemToObject(o, "step_s", cJSON_CreateDoubleArray(r, 2));
    mp_band_rate(b, e->throughput.tokens_per_s, &r[0], &r[1]);
    ok = ok && cJSON_AddItemToObject(o, "tokens_per_s", cJSON_CreateDoubleArray(r, 2));
    mp_band_rate(b, e->throughput.mfu, &r[0], &r[1]);
    ok = ok && cJSON_AddItemToObject(o, "mfu", cJSON_CreateDoubleArray(r, 2));
    if (e->throughput.days_for_tokens > 0.0) {
        mp_band_time(b, e->throughput.days_for_tokens, &r[0], &r[1]);
        ok = ok && cJSON_AddItemToObject(o, "days_for_tokens", cJSON_CreateDoubleArray(r, 2));
        mp_band_time(b, e->throughput.gpu_hours_for_tokens, &r[0], &r[1]);
        ok = ok && cJSON_AddItemToObject(o, "gpu_hours_for_tokens", cJSON_CreateDoubleArray(r, 2));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *mp_estimate_to_json(const mp_config *c, const mp_estimate *e, const char *defaults)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = cJSON_AddStringToObject(o, "model", c->model.name) &&
              cJSON_AddStringToObject(o, "hw", c->hw.name) &&
              cJSON_AddNumberToObject(o, "gpus", (double)c->training.gpus) &&
              cJSON_AddStringToObject(o, "precision", mp_dtype_name(c->training.precision));
    if (ok && c->training.precision == MP_DTYPE_FP8)
        ok = cJSON_AddStringToObject(o, "fp8_recipe",
                                     mp_fp8_recipe_name(c->training.fp8_recipe)) != NULL;
    cJSON *par = ok ? mp_parallel_to_json(&c->parallel, c->training.global_batch, e->microbatches)
                    : NULL;
    ok = ok && par && cJSON_AddItemToObject(o, "parallel", par);
    if (!ok)
        cJSON_Delete(par);
    cJSON *mem = ok ? memory_json(&e->memory) : NULL;
    ok = ok && mem && cJSON_AddItemToObject(o, "memory_gib", mem);
    if (!ok)
        cJSON_Delete(mem), mem = NULL;
    cJSON *tim = ok ? times_json(&e->time) : NULL;
    ok = ok && tim && cJSON_AddItemToObject(o, "time_s", tim);
    if (!ok)
        cJSON_Delete(tim), tim = NULL;
    cJSON *thr = ok ? throughput_json(&e->throughput) : NULL;
    ok = ok && thr && cJSON_AddItemToObject(o, "throughput", thr);
    if (!ok)
        cJSON_Delete(thr), thr = NULL;
    cJSON *band = ok ? band_json(c, e) : NULL;
    ok = ok && (!band || cJSON_AddItemToObject(o, "band", band));
    ok = ok && cJSON_AddBoolToObject(o, "fits", e->fits);
    if (ok && !e->fits)
        ok = add(o, "over_gib", e->over_bytes / MP_GIB);
    ok = ok && add_defaults(o, defaults);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
