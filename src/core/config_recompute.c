/* config_recompute.c — Megatron-Core's selective recompute by module
 * (--recompute-modules): the names, the list syntax, and which modules a
 * model has anything to recompute in (docs/cost-model.md, "Selective
 * recompute by module"). */
#include <stdio.h>
#include <string.h>

#include "core/config.h"

/* Megatron-Core's spelling (transformer_config.py, recompute_modules) */
static const char *const module_names[MP_RCM_COUNT] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};

const char *mp_recompute_module_name(mp_recompute_module m)
{
    return (unsigned)m < MP_RCM_COUNT ? module_names[m] : "?";
}

static int name_parse(const char *const *names, int n, const char *s, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !strncmp(s, names[i], len))
            return i;
    return -1;
}

/* A comma-separated list of names from names[0..n) into a bit mask. */
static bool name_list_parse(const char *const *names, int n, const char *list, uint32_t *mask,
                            char *bad_buf, size_t bad_size)
{
    *mask = 0;
    if (bad_size)
        bad_buf[0] = '\0';
    const char *s = list ? list : "";
    for (;;) {
        while (*s == ' ')
            s++;
        size_t len = strcspn(s, ", ");
        const char *end = s + len;
        int k = len ? name_parse(names, n, s, len) : -1;
        if (k < 0) {
            if (bad_size)
                snprintf(bad_buf, bad_size, "%.*s", (int)(len < 64 ? len : 64), s);
            return false;
        }
        *mask |= 1u << k;
        while (*end == ' ')
            end++;
        if (*end == '\0')
            return true;
        if (*end != ',') {
            if (bad_size)
                snprintf(bad_buf, bad_size, "%.64s", end);
            return false;
        }
        s = end + 1;
    }
}

bool mp_recompute_modules_parse(const char *list, uint32_t *mask, char *bad_buf, size_t bad_size)
{
    return name_list_parse(module_names, MP_RCM_COUNT, list, mask, bad_buf, bad_size);
}

/* Megatron-LM's spelling (arguments.py, --cuda-graph-scope) */
static const char *const graph_scope_names[MP_CGS_COUNT] = {"attn", "mlp", "moe", "moe_router",
                                                            "moe_preprocess"};

const char *mp_cuda_graph_scope_name(mp_cuda_graph_scope s)
{
    return (unsigned)s < MP_CGS_COUNT ? graph_scope_names[s] : "?";
}

bool mp_cuda_graph_scope_parse(const char *list, uint32_t *mask, char *bad_buf, size_t bad_size)
{
    return name_list_parse(graph_scope_names, MP_CGS_COUNT, list, mask, bad_buf, bad_size);
}

void mp_recompute_modules_format(uint32_t mask, char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = '\0';
    for (int i = 0; i < MP_RCM_COUNT; i++)
        if (mask & (1u << i)) {
            int n = snprintf(buf + used, used < size ? size - used : 0, "%s%s",
                             used ? "," : "", module_names[i]);
            if (n > 0)
                used += (size_t)n;
        }
}

uint32_t mp_recompute_modules_of(const mp_parallel *p, mp_recompute r)
{
    if (r != MP_RECOMPUTE_SELECTIVE)
        return 0;
    return p->recompute_modules ? p->recompute_modules : 1u << MP_RCM_CORE_ATTN;
}

#define FAIL(...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, "recompute_modules", __VA_ARGS__)

mp_status mp_config_check_recompute(const mp_config *c, mp_error *err)
{
    uint32_t mask = c->parallel.recompute_modules;
    const mp_model *m = &c->model;
    if (!mask)
        return MP_OK;
    if (mask >> MP_RCM_COUNT)
        return FAIL("unknown module bits 0x%x", (unsigned)mask);
    /* a module the model has nothing of would be a silent no-op in Megatron
     * (but mla_up_proj, which it refuses): refuse it, naming why */
    int64_t L = mp_model_blocks(m), moe_blocks = 0;
    for (int64_t i = 0; i < L; i++)
        moe_blocks += mp_model_block_is_moe(m, i);
    bool moe = mp_model_is_moe(m) && moe_blocks > 0;
    if ((mask & (1u << MP_RCM_MLA_UP_PROJ)) && !mp_model_is_mla(m))
        return FAIL("mla_up_proj needs multi-head latent attention, which %s does not have",
                    m->name[0] ? m->name : "the model");
    if ((mask & (1u << MP_RCM_MOE_ACT | 1u << MP_RCM_MOE)) && !moe)
        return FAIL("%s needs MoE layers, which %s does not have",
                    mask & (1u << MP_RCM_MOE) ? "moe" : "moe_act",
                    m->name[0] ? m->name : "the model");
    if ((mask & (1u << MP_RCM_SHARED_EXPERTS)) && !(moe && m->moe.shared_experts > 0))
        return FAIL("shared_experts needs shared experts, which %s does not have",
                    m->name[0] ? m->name : "the model");
    if ((mask & (1u << MP_RCM_MLP)) && moe && moe_blocks == L)
        return FAIL("mlp recomputes the dense MLPs, and every block of %s is an MoE block "
                    "(moe or shared_experts recompute those)",
                    m->name[0] ? m->name : "the model");
    return MP_OK;
}
