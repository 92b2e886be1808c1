/* io_json.c — generic writers: a cJSON tree as block-style YAML or as JSON
 * text, and the cJSON trees of the training and parallel settings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/io.h"
#include "core/tables.h"
#include "core/units.h"

static void pad(mp_buf *out, int n)
{
    for (int i = 0; i < n; i++)
        mp_buf_append(out, " ", 1);
}

/* Plain (unquoted) only when no YAML reader could take it for anything but
 * the same string. */
static bool plain_ok(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off",
                                        "null", "y", "n", "~"};
    if (!s[0])
        return false;
    bool letter_first = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_';
    /* "80 GiB" may start with a digit: with a blank inside no YAML reader
     * takes it for a number or a date */
    bool digit_first = s[0] >= '0' && s[0] <= '9' && strchr(s, ' ');
    if (!letter_first && !digit_first)
        return false;
    size_t len = strlen(s);
    if (s[len - 1] == ' ')
        return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == '/' || (c == ' ' && p[1] != ' ');
        if (!ok)
            return false;
    }
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(s, words[i]))
            return false;
    return true;
}

static void write_string(const char *s, mp_buf *out)
{
    if (plain_ok(s)) {
        mp_buf_puts(out, s);
        return;
    }
    mp_buf_append(out, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            mp_buf_puts(out, "\\\"");
            break;
        case '\\':
            mp_buf_puts(out, "\\\\");
            break;
        case '\n':
            mp_buf_puts(out, "\\n");
            break;
        case '\t':
            mp_buf_puts(out, "\\t");
            break;
        case '\r':
            mp_buf_puts(out, "\\r");
            break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                mp_buf_printf(out, "\\x%02x", *p);
            else
                mp_buf_append(out, (const char *)p, 1);
        }
    }
    mp_buf_append(out, "\"", 1);
}

/* Numbers read back exactly; exponents carry a ".0" so YAML 1.1 readers
 * (PyYAML) see a float rather than a string. */
static void write_number(double v, mp_buf *out)
{
    if (!isfinite(v)) {
        mp_buf_puts(out, "null");
        return;
    }
    char num[48], whole[48] = "";
    mp_format_double(v, num, sizeof num - 2);
    char *e = strchr(num, 'e');
    if (e && !memchr(num, '.', (size_t)(e - num))) {
        memmove(e + 2, e, strlen(e) + 1);
        memcpy(e, ".0", 2);
    }
    /* whole numbers as integers unless the exponent form is shorter (1.0e+09) */
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(whole, sizeof whole, "%.0f", v);
        if (!strchr(num, 'e') || strlen(whole) <= strlen(num)) {
            mp_buf_puts(out, whole);
            return;
        }
    }
    mp_buf_puts(out, num);
}

static bool is_scalar(const cJSON *v)
{
    return !cJSON_IsObject(v) && !cJSON_IsArray(v);
}

static void write_scalar(const cJSON *v, mp_buf *out)
{
    if (cJSON_IsString(v))
        write_string(v->valuestring ? v->valuestring : "", out);
    else if (cJSON_IsNumber(v))
        write_number(v->valuedouble, out);
    else if (cJSON_IsTrue(v))
        mp_buf_puts(out, "true");
    else if (cJSON_IsFalse(v))
        mp_buf_puts(out, "false");
    else
        mp_buf_puts(out, "null");
}

/* Empty collections and lists of scalars go on one line: [0, 7]. */
static bool flowable(const cJSON *v)
{
    if (is_scalar(v) || !v->child)
        return true;
    if (!cJSON_IsArray(v))
        return false;
    for (const cJSON *c = v->child; c; c = c->next)
        if (!is_scalar(c))
            return false;
    return true;
}

static void write_flow(const cJSON *v, mp_buf *out)
{
    if (is_scalar(v)) {
        write_scalar(v, out);
        return;
    }
    bool arr = cJSON_IsArray(v);
    mp_buf_puts(out, arr ? "[" : "{");
    for (const cJSON *c = v->child; c; c = c->next) {
        write_scalar(c, out);
        if (c->next)
            mp_buf_puts(out, ", ");
    }
    mp_buf_puts(out, arr ? "]" : "}");
}

static void write_mapping(const cJSON *obj, int indent, bool first_inline, mp_buf *out);
static void write_sequence(const cJSON *arr, int indent, mp_buf *out);

static void write_after_colon(const cJSON *v, int indent, mp_buf *out)
{
    if (flowable(v)) {
        mp_buf_puts(out, " ");
        write_flow(v, out);
        mp_buf_puts(out, "\n");
    } else if (cJSON_IsObject(v)) {
        mp_buf_puts(out, "\n");
        write_mapping(v, indent + 2, false, out);
    } else {
        mp_buf_puts(out, "\n");
        write_sequence(v, indent + 2, out);
    }
}

static void write_mapping(const cJSON *obj, int indent, bool first_inline, mp_buf *out)
{
    bool first = true;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!(first && first_inline))
            pad(out, indent);
        first = false;
        write_string(c->string ? c->string : "", out);
        mp_buf_puts(out, ":");
        write_after_colon(c, indent, out);
    }
}

static void write_sequence(const cJSON *arr, int indent, mp_buf *out)
{
    for (const cJSON *c = arr->child; c; c = c->next) {
        pad(out, indent);
        mp_buf_puts(out, "-");
        if (flowable(c)) {
            mp_buf_puts(out, " ");
            write_flow(c, out);
            mp_buf_puts(out, "\n");
        } else if (cJSON_IsObject(c)) {
            mp_buf_puts(out, " ");
            write_mapping(c, indent + 2, true, out);
        } else {
            mp_buf_puts(out, "\n");
            write_sequence(c, indent + 2, out);
        }
    }
}

void mp_json_write_yaml(const cJSON *node, int indent, mp_buf *out)
{
    if (!node)
        return;
    if (cJSON_IsObject(node) && node->child)
        write_mapping(node, indent, false, out);
    else if (cJSON_IsArray(node) && node->child && !flowable(node))
        write_sequence(node, indent, out);
    else {
        pad(out, indent);
        write_flow(node, out);
        mp_buf_puts(out, "\n");
    }
}

void mp_json_write(const cJSON *node, bool pretty, mp_buf *out)
{
    if (!node)
        return;
    char *text = pretty ? cJSON_Print(node) : cJSON_PrintUnformatted(node);
    if (!text) {
        out->oom = true;
        return;
    }
    mp_buf_puts(out, text);
    cJSON_free(text);
}

cJSON *mp_training_to_json(const mp_training *t)
{
    size_t n;
    const mp_field *tab = mp_training_field_table(&n);
    cJSON *o = mp_fields_to_json(tab, n, t);
    /* the recipe means something under fp8 only: other plans read back as written without it */
    if (o && t->precision != MP_DTYPE_FP8)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "fp8_recipe");
    /* the two gradient/parameter storage switches are written when on only,
     * so plans without them read and print as before */
    if (o && !t->grad_reduce_bf16)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "grad_reduce_bf16");
    if (o && !t->fp8_param_gather)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "fp8_param_gather");
    if (o && !t->low_precision_optimizer)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "low_precision_optimizer");
    if (o && t->optimizer_moments == MP_DTYPE_FP32)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "optimizer_moments");
    if (o && t->fp8_act_cache == MP_F8AC_OFF)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "fp8_act_cache");
    if (o && !t->te_cross_entropy)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "te_cross_entropy");
    if (o && !t->native_cross_entropy)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "native_cross_entropy");
    /* and the software when it is not Megatron-LM (the validation rows') */
    if (o && t->stack == MP_STACK_MEGATRON_LM)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "stack");
    if (o && !t->p2p_scatter)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "p2p_scatter");
    /* and the attention kernel when the plan names one */
    if (o && t->attention_backend == MP_ATTN_AUTO)
        cJSON_DeleteItemFromObjectCaseSensitive(o, "attention_backend");
    return o;
}

static const char *recompute_module_name_i(int i)
{
    return mp_recompute_module_name((mp_recompute_module)i);
}

static const char *cuda_graph_scope_name_i(int i)
{
    return mp_cuda_graph_scope_name((mp_cuda_graph_scope)i);
}

/* key: [the names of mask's bits], when mask has any */
static bool add_name_list(cJSON *o, const char *key, uint32_t mask, int n,
                          const char *(*name_of)(int))
{
    if (!mask)
        return true;
    cJSON *list = cJSON_AddArrayToObject(o, key);
    bool ok = list != NULL;
    for (int i = 0; ok && i < n; i++)
        if (mask & (1u << i))
            ok = cJSON_AddItemToArray(list, cJSON_CreateString(name_of(i)));
    return ok;
}

cJSON *mp_parallel_to_json(const mp_parallel *p, int64_t global_batch, int64_t microbatches)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok = cJSON_AddNumberToObject(o, "tp", (double)p->tp) &&
              cJSON_AddBoolToObject(o, "sp", p->sp) &&
              cJSON_AddNumberToObject(o, "pp", (double)p->pp) &&
              cJSON_AddNumberToObject(o, "vpp", (double)p->vpp) &&
              cJSON_AddNumberToObject(o, "cp", (double)p->cp) &&
              cJSON_AddNumberToObject(o, "dp", (double)p->dp) &&
              cJSON_AddNumberToObject(o, "micro_batch", (double)p->micro_batch);
    /* with a batch: the estimate's "parallel" object of docs/formats.md; without:
     * the plan file's, which also keeps the overlap switches */
    if (ok && global_batch > 0)
        ok = cJSON_AddNumberToObject(o, "global_batch", (double)global_batch) &&
             cJSON_AddNumberToObject(o, "microbatches", (double)microbatches);
    ok = ok && cJSON_AddStringToObject(o, "recompute", mp_recompute_name(p->recompute));
    /* the selective modules and the CUDA-graphed scopes: written when given,
     * so other plans read as before */
    if (ok && p->recompute == MP_RECOMPUTE_SELECTIVE)
        ok = add_name_list(o, "recompute_modules", p->recompute_modules, MP_RCM_COUNT,
                           recompute_module_name_i);
    ok = ok && add_name_list(o, "cuda_graph_scope", p->cuda_graph_scope, MP_CGS_COUNT,
                             cuda_graph_scope_name_i);
    ok = ok && cJSON_AddBoolToObject(o, "dist_opt", p->dist_opt);
    /* the ZeRO stage: 1 is Megatron's distributed optimizer; written only
     * when it says more than dist_opt, so Megatron plans read as before */
    if (ok && p->zero >= 2)
        ok = cJSON_AddNumberToObject(o, "zero", (double)p->zero) != NULL;
    if (ok && p->zero_runtime != MP_ZRT_AUTO)
        ok = cJSON_AddStringToObject(o, "zero_runtime", mp_zero_runtime_name(p->zero_runtime)) !=
             NULL;
    if (ok && p->hsdp)
        ok = cJSON_AddBoolToObject(o, "hsdp", true) != NULL;
    /* expert degrees: only in MoE plans, so dense ones read as before */
    if (ok && (p->ep > 1 || p->etp > 0 || p->dispatcher != MP_DISPATCH_ALLTOALL))
        ok = cJSON_AddNumberToObject(o, "ep", (double)mp_parallel_ep(p)) &&
             cJSON_AddNumberToObject(o, "etp", (double)mp_parallel_etp(p)) &&
             cJSON_AddStringToObject(o, "dispatcher", mp_dispatcher_name(p->dispatcher));
    /* an explicit layout only when given, so default-split plans read as before */
    if (ok && p->pipeline_layout[0])
        ok = cJSON_AddStringToObject(o, "pipeline_layout", p->pipeline_layout) != NULL;
    /* Megatron's first/last-stage layers only when given, likewise */
    if (ok && p->first_stage_layers > 0)
        ok = cJSON_AddNumberToObject(o, "first_stage_layers", (double)p->first_stage_layers);
    if (ok && p->last_stage_layers > 0)
        ok = cJSON_AddNumberToObject(o, "last_stage_layers", (double)p->last_stage_layers);
    /* and so are Megatron's account-for flags */
    if (ok && p->account_for_embedding)
        ok = cJSON_AddBoolToObject(o, "account_for_embedding", true) != NULL;
    if (ok && p->account_for_loss)
        ok = cJSON_AddBoolToObject(o, "account_for_loss", true) != NULL;
    /* CP's exchange: written only when not the ring, so other plans read as before */
    if (ok && p->cp_comm_type != MP_CP_P2P)
        ok = cJSON_AddStringToObject(o, "cp_comm_type", mp_cp_comm_name(p->cp_comm_type)) != NULL;
    /* the MoE overlaps: written only when on, so other plans read as before */
    if (ok && p->moe_a2a_overlap)
        ok = cJSON_AddBoolToObject(o, "moe_a2a_overlap", true) != NULL;
    if (ok && p->shared_expert_overlap)
        ok = cJSON_AddBoolToObject(o, "shared_expert_overlap", true) != NULL;
    if (ok && p->dispatch_fp8)
        ok = cJSON_AddBoolToObject(o, "dispatch_fp8", true) != NULL;
    if (ok && p->flex_sms > 0)
        ok = cJSON_AddNumberToObject(o, "flex_sms", (double)p->flex_sms) != NULL;
    if (ok && p->flex_backend != MP_FLEX_AUTO)
        ok = cJSON_AddStringToObject(o, "flex_backend",
                                     mp_flex_backend_setting_name(p->flex_backend)) != NULL;
    /* overlapped pipeline p2p: written only when on, as the MoE overlaps */
    if (ok && p->p2p_overlap)
        ok = cJSON_AddBoolToObject(o, "p2p_overlap", true) != NULL;
    if (ok && p->defer_embedding_wgrad)
        ok = cJSON_AddBoolToObject(o, "defer_embedding_wgrad", true) != NULL;
    if (ok && p->wgrad_deferral_limit > 0)
        ok = cJSON_AddNumberToObject(o, "wgrad_deferral_limit",
                                     (double)p->wgrad_deferral_limit) != NULL;
    if (ok && p->nccl_ub)
        ok = cJSON_AddBoolToObject(o, "nccl_ub", true) != NULL;
    if (ok && p->param_gather_sync)
        ok = cJSON_AddBoolToObject(o, "param_gather_sync", true) != NULL;
    if (ok && p->fsdp_microbatch_sync)
        ok = cJSON_AddBoolToObject(o, "fsdp_microbatch_sync", true) != NULL;
    if (ok && p->overlap_param_gather_with_optimizer_step)
        ok = cJSON_AddBoolToObject(o, "overlap_param_gather_with_optimizer_step", true) != NULL;
    if (ok && p->ddp_bucket_size > 0)
        ok = cJSON_AddNumberToObject(o, "ddp_bucket_size", (double)p->ddp_bucket_size) != NULL;
    if (ok && global_batch <= 0)
        ok = cJSON_AddBoolToObject(o, "dp_overlap", p->dp_overlap) &&
             cJSON_AddBoolToObject(o, "tp_overlap", p->tp_overlap);
    ok = ok && cJSON_AddStringToObject(o, "schedule", mp_schedule_name(p->schedule));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
