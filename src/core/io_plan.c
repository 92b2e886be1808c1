/* io_plan.c — plan files (docs/formats.md): read with every error located, and
 * written back so that reading the output gives the same plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"
#include "core/fields.h"
#include "core/io.h"
#include "core/tables.h"

static const char *const plan_keys[] = {"megaplan_plan", "model",           "hw",
                                        "training",      "parallel",        "stages",
                                        "layer_recompute", "predicted"};
#define N_PLAN_KEYS (sizeof plan_keys / sizeof plan_keys[0])

static mp_status fail_at(mp_error *err, const char *origin, const mp_ynode *n, const char *field,
                         const char *msg)
{
    return mp_error_set(err, MP_EINPUT, origin, n ? n->line : 0, n ? n->column : 0, field, "%s",
                        msg);
}

static mp_status read_model(const mp_ynode *n, const char *origin, mp_model *m, mp_error *err)
{
    if (n->kind == MP_Y_SCALAR) {
        /* a preset by name keeps hand-written plans short */
        const mp_model *p = mp_model_preset(n->text);
        if (!p)
            return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, "model",
                                "unknown model preset '%.64s' (write the model inline, or see "
                                "megaplan models)",
                                n->text);
        *m = *p;
        return MP_OK;
    }
    return mp_model_decode(n, "model.", origin, m, err);
}

static mp_status read_hw(const mp_ynode *n, const char *origin, mp_hw *hw, mp_error *err)
{
    if (n->kind == MP_Y_SCALAR) {
        mp_status st = mp_hw_preset(n->text, hw, err);
        if (st != MP_OK) {
            err->file[0] = '\0';
            mp_error_locate(err, origin, n->line, n->column);
        }
        return st;
    }
    return mp_hw_decode(n, "hw.", origin, hw, err);
}

static mp_status read_int_node(const mp_ynode *n, const char *origin, const char *field,
                               int64_t lo, int64_t hi, int64_t *out, mp_error *err)
{
    mp_status sp = mp_yscalar_refuse_spaced(n, origin, field, err);
    if (sp != MP_OK)
        return sp;
    if (n->kind != MP_Y_SCALAR || !mp_parse_int64(n->text, out))
        return fail_at(err, origin, n, field, "expected an integer");
    if (*out < lo || *out > hi)
        return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, field,
                            "out of range [%lld, %lld] (got %lld)", (long long)lo, (long long)hi,
                            (long long)*out);
    return MP_OK;
}

static mp_status read_stages(const mp_ynode *n, const char *origin, mp_plan *plan, mp_error *err)
{
    if (n->kind != MP_Y_SEQ)
        return fail_at(err, origin, n, "stages", "expected a list of [begin, end] item ranges");
    int64_t items = plan->config.model.layers + 2;
    if (n->n < 1 || n->n > MP_MAX_STAGES)
        return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, "stages",
                            "needs 1 to %d ranges (got %zu)", MP_MAX_STAGES, n->n);
    for (size_t i = 0; i < n->n; i++) {
        const mp_ynode *r = n->items[i];
        if (r->kind != MP_Y_SEQ || r->n != 2)
            return fail_at(err, origin, r, "stages", "expected [begin, end]");
        int64_t b, e;
        mp_status st = read_int_node(r->items[0], origin, "stages", INT64_MIN, INT64_MAX, &b, err);
        if (st == MP_OK)
            st = read_int_node(r->items[1], origin, "stages", INT64_MIN, INT64_MAX, &e, err);
        if (st != MP_OK)
            return st;
        /* the model's own items (read before the stages): its range, not the format's */
        for (int k = 0; k < 2; k++) {
            int64_t v = k ? e : b;
            if (v < 0 || v > items)
                return mp_error_set(err, MP_EINPUT, origin, r->items[k]->line,
                                    r->items[k]->column, "stages",
                                    "out of range [0, %lld]: the model has %lld layer items "
                                    "(layers + 2) (got %lld)",
                                    (long long)items, (long long)items, (long long)v);
        }
        plan->stages[i].begin = (int32_t)b;
        plan->stages[i].end = (int32_t)e;
    }
    plan->n_stages = (int32_t)n->n;
    return MP_OK;
}

static mp_status read_layer_recompute(const mp_ynode *n, const char *origin, mp_plan *plan,
                                      mp_error *err)
{
    int64_t items = plan->config.model.layers + 2;
    if (n->kind != MP_Y_SEQ)
        return fail_at(err, origin, n, "layer_recompute",
                       "expected a list of none|selective|full, one per layer item");
    if ((int64_t)n->n != items)
        return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, "layer_recompute",
                            "needs %lld entries (layers + 2), got %zu", (long long)items, n->n);
    for (size_t i = 0; i < n->n; i++) {
        const mp_ynode *v = n->items[i];
        mp_status sp = mp_yscalar_refuse_spaced(v, origin, "layer_recompute", err);
        if (sp != MP_OK)
            return sp;
        int r = v->kind == MP_Y_SCALAR ? mp_recompute_parse(v->text) : -1;
        if (r < 0)
            return fail_at(err, origin, v, "layer_recompute", "expected none, selective or full");
        /* recomputation is of a transformer block's activations (Megatron's
         * --recompute-granularity); the embedding and the head have none to redo */
        if (r != MP_RECOMPUTE_NONE && (i == 0 || (int64_t)i == items - 1))
            return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, "layer_recompute",
                                "item %zu is the %s: only none (recomputation is of the blocks)",
                                i, i == 0 ? "embedding" : "head");
        plan->layer_recompute[i] = (uint8_t)r;
    }
    plan->has_layer_recompute = true;
    return MP_OK;
}

/* A list field of names (parallel.recompute_modules, parallel.cuda_graph_scope):
 * a YAML list of names, or one comma-separated string (as the command-line
 * options take them), parsed by parse into a mask. */
static mp_status read_name_list(const mp_ynode *n, const char *origin, const char *what,
                                const char *noun, const char *known,
                                bool (*parse)(const char *, uint32_t *, char *, size_t),
                                uint32_t *out, mp_error *err)
{
    size_t count = n->kind == MP_Y_SEQ ? n->n : 1;
    if (n->kind == MP_Y_MAP || count == 0)
        return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, what,
                            "expected a list of %s", known);
    uint32_t mask = 0;
    for (size_t i = 0; i < count; i++) {
        const mp_ynode *v = n->kind == MP_Y_SEQ ? n->items[i] : n;
        uint32_t one;
        char bad[72];
        if (v->kind != MP_Y_SCALAR)
            return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, what,
                                "expected a list of %s", known);
        mp_status sp = mp_yscalar_refuse_spaced(v, origin, what, err);
        if (sp != MP_OK)
            return sp;
        if (!parse(v->text, &one, bad, sizeof bad))
            return mp_error_set(err, MP_EINPUT, origin, v->line, v->column, what,
                                "unknown %s '%s' (known: %s)", noun, bad, known);
        mask |= one;
    }
    *out = mask;
    return MP_OK;
}

static mp_status read_predicted(const mp_ynode *n, const char *origin, mp_plan *plan,
                                mp_error *err)
{
    /* kept as written, but it is the estimate object: a number or a list
     * there is a damaged file, not a prediction */
    if (n->kind != MP_Y_MAP)
        return mp_error_set(err, MP_EINPUT, origin, n->line, n->column, "predicted",
                            "expected a mapping (the estimate object of megaplan estimate "
                            "--format json)");
    cJSON *j = mp_ynode_to_json(n);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text)
        return mp_error_set(err, MP_ENOMEM, origin, n->line, n->column, "predicted",
                            "out of memory");
    size_t len = strlen(text);
    mp_status st = MP_OK;
    if (len >= sizeof plan->predicted_json)
        st = mp_error_set(err, MP_EINPUT, origin, n->line, n->column, "predicted",
                          "too large (%zu bytes as JSON, at most %zu)", len,
                          sizeof plan->predicted_json - 1);
    else {
        memcpy(plan->predicted_json, text, len + 1);
        plan->has_predicted = true;
    }
    cJSON_free(text);
    return st;
}

/* The plan-file path of a field named by mp_config_check / mp_plan_check. */
static void plan_field_path(const char *field, char *out, size_t size)
{
    static const char *const training[] = {"gpus", "seq", "global_batch", "precision",
                                           "fp8_recipe", "tokens", "grad_reduce_bf16",
                                           "fp8_param_gather", "stack",
                                           "optimizer_moments", "low_precision_optimizer",
                                           "te_cross_entropy", "native_cross_entropy",
                                           "fp8_act_cache", "attention_backend", "p2p_scatter"};
    for (size_t i = 0; i < sizeof training / sizeof training[0]; i++)
        if (!strcmp(field, training[i])) {
            snprintf(out, size, "training.%.100s", field);
            return;
        }
    /* the parallel lists read by read_name_list, outside the field table */
    static const char *const lists[] = {"recompute_modules", "cuda_graph_scope"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        if (!strcmp(field, lists[i])) {
            snprintf(out, size, "parallel.%.100s", field);
            return;
        }
    /* the model's fields mp_config_check names (moe.imbalance: its bound
     * depends on ep), under the plan's model (a preset's: its "model:" line) */
    if (!strncmp(field, "moe.", 4)) {
        snprintf(out, size, "model.%.100s", field);
        return;
    }
    size_t n;
    const mp_field *tab = mp_parallel_field_table(&n);
    if (mp_fields_find(tab, n, field)) {
        snprintf(out, size, "parallel.%.100s", field);
        return;
    }
    snprintf(out, size, "%.110s", field);
}

static mp_status decode_plan(const mp_ynode *root, const char *origin, mp_plan *plan,
                             mp_error *err)
{
    memset(plan, 0, sizeof *plan);
    if (!root) /* an empty document: at its start, as the model and profile readers say */
        return mp_error_set(err, MP_EINPUT, origin, 1, 1, NULL,
                            "empty: expected a plan (a mapping with megaplan_plan: 1)");
    if (root->kind != MP_Y_MAP)
        return fail_at(err, origin, root, NULL, "expected a plan (a mapping with megaplan_plan: 1)");
    /* the other files megaplan reads, given where a plan belongs: say so
     * rather than "unknown key" for their first key */
    mp_status kind = mp_check_file_kind(root, MP_FILE_PLAN, origin, err);
    if (kind != MP_OK)
        return kind;
    for (size_t i = 0; i < root->n; i++) {
        const mp_ynode *k = root->items[2 * i];
        bool known = false;
        for (size_t j = 0; j < N_PLAN_KEYS; j++)
            known = known || !strcmp(k->text, plan_keys[j]);
        if (known) {
            for (size_t j = 0; j < i; j++)
                if (!strcmp(root->items[2 * j]->text, k->text))
                    return fail_at(err, origin, k, k->text, "duplicate key");
            continue;
        }
        const char *close = mp_closest_name(k->text, plan_keys, N_PLAN_KEYS);
        char msg[128];
        snprintf(msg, sizeof msg, close ? "unknown key (did you mean '%s'?)" : "unknown key%s",
                 close ? close : "");
        char field[128];
        snprintf(field, sizeof field, "%.100s", k->text);
        return fail_at(err, origin, k, field, msg);
    }
    const mp_ynode *version = mp_ymap_get(root, "megaplan_plan");
    if (!version)
        return fail_at(err, origin, root, "megaplan_plan",
                       "missing: not a plan file (the first key must be megaplan_plan: 1)");
    int64_t v;
    mp_status st = read_int_node(version, origin, "megaplan_plan", 1, INT32_MAX, &v, err);
    if (st != MP_OK)
        return st;
    if (v != 1)
        return mp_error_set(err, MP_EINPUT, origin, version->line, version->column,
                            "megaplan_plan", "format version %lld is not known to this "
                            "megaplan, which reads version 1", (long long)v);

    static const char *const required[] = {"model", "hw", "training"};
    for (size_t i = 0; i < 3; i++)
        if (!mp_ymap_get(root, required[i]))
            return fail_at(err, origin, root, required[i], "missing (required)");
    mp_config *c = &plan->config;
    if ((st = read_model(mp_ymap_get(root, "model"), origin, &c->model, err)) != MP_OK)
        return st;
    if ((st = read_hw(mp_ymap_get(root, "hw"), origin, &c->hw, err)) != MP_OK)
        return st;

    size_t n;
    const mp_field *tab = mp_training_field_table(&n);
    c->training.precision = MP_DTYPE_BF16;
    const mp_ynode *training = mp_ymap_get(root, "training");
    st = mp_fields_decode(tab, n, training, "training.", origin, &c->training, NULL, NULL, err);
    if (st != MP_OK)
        return st;
    /* the recipe scales FP8 tensors: under another precision it was read and
     * dropped (the plan ran bf16), where --fp8-recipe is refused so */
    const mp_ynode *recipe = mp_ymap_get(training, "fp8_recipe");
    if (recipe && c->training.precision != MP_DTYPE_FP8)
        return mp_error_set(err, MP_EINPUT, origin, recipe->line, recipe->column,
                            "training.fp8_recipe", "applies to precision fp8 only (precision "
                            "is %s)", mp_dtype_name(c->training.precision));
    if (!c->training.seq)
        c->training.seq = c->model.seq;

    mp_parallel_defaults(&c->parallel);
    const mp_ynode *parallel = mp_ymap_get(root, "parallel");
    bool seen[MP_FIELDS_MAX] = {false};
    tab = mp_parallel_field_table(&n);
    if (parallel) {
        static const char *const own[] = {"recompute_modules", "cuda_graph_scope", NULL};
        st = mp_fields_decode(tab, n, parallel, "parallel.", origin, &c->parallel, seen, own, err);
        if (st != MP_OK)
            return st;
        const mp_ynode *rm = mp_ymap_get(parallel, "recompute_modules");
        if (rm && (st = read_name_list(rm, origin, "parallel.recompute_modules",
                                       "module", "core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
                                       "shared_experts",
                                       mp_recompute_modules_parse,
                                       &c->parallel.recompute_modules, err)) != MP_OK)
            return st;
        const mp_ynode *cg = mp_ymap_get(parallel, "cuda_graph_scope");
        if (cg && (st = read_name_list(cg, origin, "parallel.cuda_graph_scope",
                                       "scope", MP_CUDA_GRAPH_SCOPES, mp_cuda_graph_scope_parse,
                                       &c->parallel.cuda_graph_scope, err)) != MP_OK)
            return st;
        if (rm && c->parallel.recompute != MP_RECOMPUTE_SELECTIVE)
            return fail_at(err, origin, rm, "parallel.recompute_modules",
                           "needs recompute: selective (the modules are what selective "
                           "recompute re-runs)");
    }
    mp_parallel *p = &c->parallel;
    if (!seen[mp_fields_find(tab, n, "dp") - tab]) {
        int64_t tpc = p->tp * p->pp; /* each at most 2^24 */
        if (__builtin_mul_overflow(tpc, p->cp, &tpc) || c->training.gpus % tpc) {
            const mp_ynode *g = mp_ynode_at(root, "training.gpus");
            return mp_error_set(err, MP_EINPUT, origin, g ? g->line : 0, g ? g->column : 0,
                                "training.gpus",
                                "%lld GPUs is not a multiple of tp*pp*cp = %lld",
                                (long long)c->training.gpus, (long long)tpc);
        }
        p->dp = c->training.gpus / tpc;
    }
    /* ep: 1 and an absent ep mean the same (no expert parallelism), and the
     * writers leave it out: one value for both, so a plan reads back as written */
    if (p->ep == 1)
        p->ep = 0;
    if (!seen[mp_fields_find(tab, n, "schedule") - tab])
        p->schedule = mp_default_schedule(p);
    if (!seen[mp_fields_find(tab, n, "dp_overlap") - tab])
        p->dp_overlap = p->dist_opt;

    /* hybrid sharding replicates across scale-up domains: with one domain or
     * less it is plain ZeRO-3 labelled hsdp, refused as --hsdp is (a plan
     * file was estimated and run so) */
    int64_t dom = c->hw.scale_up.gpus_per_domain;
    if (p->hsdp && dom >= 1 && c->training.gpus <= dom) {
        const mp_ynode *h = mp_ynode_at(root, "parallel.hsdp");
        return mp_error_set(err, MP_EINPUT, origin, h ? h->line : 0, h ? h->column : 0,
                            "parallel.hsdp",
                            "hybrid sharding shards within a scale-up domain and replicates "
                            "across domains, and %lld GPUs are at most one domain of %s (%lld): "
                            "nothing to replicate (zero: 3 shards over them all)",
                            (long long)c->training.gpus, c->hw.name, (long long)dom);
    }
    const mp_ynode *stages = mp_ymap_get(root, "stages");
    if (stages && (st = read_stages(stages, origin, plan, err)) != MP_OK)
        return st;
    const mp_ynode *lr = mp_ymap_get(root, "layer_recompute");
    if (lr && (st = read_layer_recompute(lr, origin, plan, err)) != MP_OK)
        return st;
    const mp_ynode *pred = mp_ymap_get(root, "predicted");
    if (pred && (st = read_predicted(pred, origin, plan, err)) != MP_OK)
        return st;

    st = mp_plan_check(plan, err);
    if (st != MP_OK) {
        char path[128];
        plan_field_path(err->field, path, sizeof path);
        snprintf(err->field, sizeof err->field, "%s", path);
        mp_error_point(err, root, "", origin);
    }
    return st;
}

mp_status mp_plan_parse_yaml(const char *text, size_t len, const char *origin, mp_plan *out,
                             mp_error *err)
{
    mp_ynode *root = NULL;
    mp_status st = mp_yaml_load(text, len, origin, &root, err);
    if (st != MP_OK)
        return st;
    st = decode_plan(root, origin, out, err);
    mp_yaml_free(root);
    return st;
}

mp_status mp_plan_read_file(const char *path, mp_plan *out, mp_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mp_status st = mp_read_file(path, MP_MAX_INPUT_BYTES, &text, &len, err);
    if (st != MP_OK)
        return st;
    st = mp_plan_parse_yaml(text, len, path, out, err);
    free(text);
    return st;
}

static bool add(cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        return false;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

void mp_plan_write_yaml(const mp_plan *plan, const cJSON *predicted, mp_buf *out)
{
    const mp_config *c = &plan->config;
    cJSON *root = cJSON_CreateObject();
    bool ok = root && cJSON_AddNumberToObject(root, "megaplan_plan", 1) &&
              add(root, "model", mp_model_to_json(&c->model)) &&
              add(root, "hw", mp_hw_to_json(&c->hw)) &&
              add(root, "training", mp_training_to_json(&c->training)) &&
              add(root, "parallel", mp_parallel_to_json(&c->parallel, 0, 0));

    /* the stage split is always written, so the file says what will run */
    const mp_stage_range *ranges = plan->stages;
    int32_t n_stages = plan->n_stages;
    mp_plan *even = NULL;
    if (ok && n_stages == 0) {
        even = malloc(sizeof *even);
        ok = even != NULL;
        if (ok) {
            even->config = *c;
            mp_plan_default_stages(even);
            ranges = even->stages;
            n_stages = even->n_stages;
        }
    }
    if (ok && n_stages > 0) {
        cJSON *st = cJSON_CreateArray();
        ok = add(root, "stages", st);
        for (int32_t k = 0; ok && k < n_stages && k < MP_MAX_STAGES; k++) {
            int pair[2] = {ranges[k].begin, ranges[k].end};
            ok = cJSON_AddItemToArray(st, cJSON_CreateIntArray(pair, 2));
        }
    }
    free(even);
    if (ok && plan->has_layer_recompute) {
        cJSON *lr = cJSON_CreateArray();
        ok = add(root, "layer_recompute", lr);
        int64_t items = c->model.layers + 2;
        for (int64_t i = 0; ok && i < items && i < MP_MAX_LAYERS + 2; i++)
            ok = cJSON_AddItemToArray(
                lr, cJSON_CreateString(mp_recompute_name((mp_recompute)plan->layer_recompute[i])));
    }
    if (ok) {
        cJSON *pred = NULL;
        if (predicted)
            pred = cJSON_Duplicate(predicted, true);
        else if (plan->has_predicted)
            pred = cJSON_Parse(plan->predicted_json);
        if (pred)
            ok = add(root, "predicted", pred);
    }
    if (ok)
        mp_json_write_yaml(root, 0, out);
    else
        out->oom = true;
    cJSON_Delete(root);
}
