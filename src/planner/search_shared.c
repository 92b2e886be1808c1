/* search_shared.c — the settings every candidate of a search shares,
 * checked before enumerating. */
#include "planner/search_parts.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/layout.h"
#include "planner/cost_internal.h"
#include "planner/split.h"
#include "planner/pipeline_internal.h"
#include "planner/search_internal.h"

#define REFUSE(field, ...) mp_error_set(err, MP_EINPUT, NULL, 0, 0, (field), __VA_ARGS__)

/* The settings every candidate shares (the training and the fixed
 * dimensions), checked before enumerating: when they cannot run, the answer
 * is about them, not about whichever candidate happened to be refused first
 * ("--fix dp=3" on 8 GPUs is about dp, not about some tp). Wording as
 * mp_config_check's. */
mp_status mp_search_check_shared(const mp_search_options *opt, mp_error *err)
{
    const mp_config *c = &opt->base;
    const mp_model *m = &c->model;
    const mp_training *t = &c->training;
    const mp_parallel *p = &c->parallel;
    uint32_t f = opt->fixed;
    int64_t seq = t->seq, gpus = t->gpus, gb = t->global_batch, L = m->layers;
    bool acct_e, acct_l; /* mp_search_needs_account's, unused */
    if (m->position == MP_POS_LEARNED && seq > m->seq)
        return REFUSE("seq", "%lld is longer than the model's %lld learned positions",
                      (long long)seq, (long long)m->seq);
    mp_status pst = mp_config_check_precision(c, err); /* a rate for it; fp8's recipe */
    if (pst != MP_OK)
        return pst;
    int64_t tp = f & MP_FIX_TP ? p->tp : 1, pp = f & MP_FIX_PP ? p->pp : 1;
    int64_t cp = f & MP_FIX_CP ? p->cp : 1, dp = f & MP_FIX_DP ? p->dp : 1;
    int64_t vpp = f & MP_FIX_VPP ? p->vpp : 1;
    if (tp < 1 || pp < 1 || cp < 1 || dp < 1 || vpp < 1 ||
        (f & MP_FIX_MICRO_BATCH && p->micro_batch < 1))
        return REFUSE("gpus", "fixed degrees must be at least 1");
    if (m->heads % tp || m->kv_heads % tp)
        return REFUSE("tp", "tp=%lld does not divide the %lld attention heads and %lld "
                            "key/value heads", (long long)tp, (long long)m->heads,
                      (long long)m->kv_heads);
    if (m->ffn_hidden % tp && mp_model_moe_blocks(m) < mp_model_blocks(m))
        return REFUSE("tp", "tp=%lld does not divide the FFN size %lld", (long long)tp,
                      (long long)m->ffn_hidden);
    int64_t prod;
    bool over = __builtin_mul_overflow(tp, pp, &prod) || __builtin_mul_overflow(prod, cp, &prod) ||
                __builtin_mul_overflow(prod, dp, &prod);
    if (over || gpus % prod)
        return REFUSE((f & MP_FIX_DP) ? "dp" : "gpus",
                      "%lld GPUs is not a multiple of the fixed tp*pp*cp*dp = "
                      "%lld*%lld*%lld*%lld", (long long)gpus, (long long)tp, (long long)pp,
                      (long long)cp, (long long)dp);
    if ((f & (MP_FIX_TP | MP_FIX_PP | MP_FIX_CP | MP_FIX_DP)) ==
            (MP_FIX_TP | MP_FIX_PP | MP_FIX_CP | MP_FIX_DP) && prod != gpus)
        return REFUSE("dp", "tp*pp*cp*dp = %lld*%lld*%lld*%lld = %lld, but there are %lld GPUs",
                      (long long)tp, (long long)pp, (long long)cp, (long long)dp,
                      (long long)prod, (long long)gpus);
    if (p->pipeline_layout[0] && !(f & MP_FIX_PP))
        return REFUSE("pipeline_layout",
                      "a layout fixes the stages: give pp too (vpp follows from the layout's "
                      "stage count)");
    /* pp given, vpp not derived (the stages are no multiple of pp, or pp is 1):
     * it said "give pp too" to a command line that gave it; the layout's own
     * check says what is wrong, as estimate's does */
    if (p->pipeline_layout[0] && !(f & MP_FIX_VPP)) {
        mp_layout *l = malloc(sizeof *l);
        if (!l)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "pipeline_layout", "out of memory");
        mp_status lst = mp_layout_parse(p->pipeline_layout, pp, 1, m->layers,
                                        mp_layout_model_mtp_layers(m), l, err);
        free(l);
        if (lst != MP_OK)
            return lst;
    }
    if (!p->pipeline_layout[0] && mp_parallel_split_given(p) &&
        (f & (MP_FIX_PP | MP_FIX_VPP)) != (MP_FIX_PP | MP_FIX_VPP))
        return REFUSE(mp_parallel_split_field(p),
                      "the given split (first/last-stage layers or account-for flags) fixes "
                      "the stages: give pp and vpp too");
    if (!p->pipeline_layout[0] && mp_parallel_split_given(p)) {
        /* Megatron's checks of the flags, against the fixed pp, vpp */
        mp_config *cc = malloc(sizeof *cc);
        if (!cc)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "first_stage_layers",
                                "out of memory");
        *cc = *c;
        cc->parallel.pp = pp;
        cc->parallel.vpp = vpp;
        mp_status fst = p->first_stage_layers > 0 || p->last_stage_layers > 0
                            ? mp_flag_split_check(cc, err)
                            : mp_account_split_check(cc, err);
        free(cc);
        if (fst != MP_OK)
            return fst;
    } else if (p->pipeline_layout[0]) {
        /* the layout's own checks (Megatron's rules), against the fixed pp, vpp */
        mp_layout *l = malloc(sizeof *l);
        if (!l)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, "pipeline_layout", "out of memory");
        mp_status lst = mp_layout_parse(p->pipeline_layout, pp, vpp, L,
                                        mp_layout_model_mtp_layers(m), l, err);
        free(l);
        if (lst != MP_OK)
            return lst;
    } else if (!mp_stage_split_ok(L, pp, vpp) && !mp_search_needs_layout(c, pp, vpp) &&
               !mp_search_needs_account(c, pp, vpp, &acct_e, &acct_l))
        return REFUSE(vpp > 1 ? "vpp" : "pp",
                      "the %lld layers cannot be split over pp*vpp = %lld*%lld stages as "
                      "Megatron-LM splits them",
                      (long long)L, (long long)pp, (long long)vpp);
    if (vpp > 1 && (f & MP_FIX_PP) && pp < 2)
        return REFUSE("vpp", "virtual stages (vpp=%lld) need pipeline parallelism (pp >= 2)",
                      (long long)vpp);
    if (f & MP_FIX_SCHEDULE) {
        bool inter = p->schedule == MP_SCHED_INTERLEAVED;
        if (mp_schedule_is_v(p->schedule) && (f & MP_FIX_VPP) && vpp != 2)
            return REFUSE("schedule", "%s runs two chunks per rank: vpp 2 (got vpp=%lld)",
                          mp_schedule_name(p->schedule), (long long)vpp);
        if (mp_schedule_is_v(p->schedule) && (f & MP_FIX_PP) && pp < 2)
            return REFUSE("schedule", "%s needs pipeline parallelism (pp >= 2)",
                          mp_schedule_name(p->schedule));
        if (p->schedule == MP_SCHED_DUALPIPE && (f & MP_FIX_PP) && (pp < 2 || pp % 2))
            return REFUSE("schedule", "dualpipe pairs rank r with pp-1-r: it needs an even "
                                      "pp >= 2 (got pp=%lld)",
                          (long long)pp);
        if (mp_schedule_is_v(p->schedule))
            inter = true; /* chunked like interleaving */
        if (inter && (f & MP_FIX_VPP) && vpp < 2)
            return REFUSE("schedule", "interleaved-1f1b needs vpp >= 2 (got vpp=%lld)",
                          (long long)vpp);
        if (inter && (f & MP_FIX_PP) && pp < 2)
            return REFUSE("schedule", "interleaved-1f1b needs pipeline parallelism (pp >= 2)");
        if (!inter && vpp > 1)
            return REFUSE("schedule", "vpp=%lld needs schedule interleaved-1f1b (got %s)",
                          (long long)vpp, mp_schedule_name(p->schedule));
    }
    bool sp_on = (f & MP_FIX_SP) && p->sp, sp_off = (f & MP_FIX_SP) && !p->sp;
    if (sp_on && (f & MP_FIX_TP) && tp < 2)
        return REFUSE("sp", "sequence parallelism needs tp > 1");
    if ((f & MP_FIX_TP_OVERLAP) && p->tp_overlap && (sp_off || ((f & MP_FIX_TP) && tp < 2)))
        return REFUSE("tp_overlap", "TP communication overlap needs tp > 1 and sp on "
                                    "(Megatron --tp-comm-overlap)");
    if (cp > 1 && (m->arch == MP_ARCH_T5 || m->arch == MP_ARCH_BERT))
        return REFUSE("cp", "context parallelism is for GPT/LLaMA decoders (Megatron-LM); "
                            "this model is %s", mp_arch_name(m->arch));
    if (cp > 1 && seq % (2 * cp))
        return REFUSE("cp", "seq %lld does not split into 2*cp = %lld equal chunks",
                      (long long)seq, (long long)(2 * cp));
    if (cp > 1 && !c->hw.flash_attention)
        return REFUSE("cp", "context parallelism needs a fused (flash) attention kernel "
                            "(Megatron-LM runs it in TransformerEngine); %s has "
                            "flash_attention: false", c->hw.name);
    int64_t b = f & MP_FIX_MICRO_BATCH ? p->micro_batch : 1;
    /* micro_batch*dp must divide it; a free one of the two is at least 1,
     * and the line says which are fixed (it said "3*1" of a free dp) */
    if (gb % dp || (gb / dp) % b) {
        if (!(f & MP_FIX_DP))
            return REFUSE("global_batch", "%lld is not a multiple of the fixed micro_batch %lld "
                                          "(micro_batch*dp must divide it; dp is free)",
                          (long long)gb, (long long)b);
        if (!(f & MP_FIX_MICRO_BATCH))
            return REFUSE("global_batch", "%lld is not a multiple of the fixed dp %lld "
                                          "(micro_batch*dp must divide it; micro_batch is free)",
                          (long long)gb, (long long)dp);
        return REFUSE("global_batch", "%lld is not a multiple of micro_batch*dp = %lld*%lld",
                      (long long)gb, (long long)b, (long long)dp);
    }
    return MP_OK;
}

#undef REFUSE
