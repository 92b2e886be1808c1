/* compare.c — measured against simulated (compare.h). */
#include "exec/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "sim/simulate.h"

const char *mp_cmp_name(mp_cmp_row r)
{
    static const char *const names[MP_CMP_COUNT] = {
        "step", "compute (F + B)", "TP/SP collectives", "CP ring", "PP transfers + bubble",
        "DP collectives", "optimizer"};
    return r >= 0 && r < MP_CMP_COUNT ? names[r] : "?";
}

mp_status mp_exec_compare(const mp_plan *plan, bool shrink, const mp_exec_report *rep,
                          const mp_hw *hw, mp_exec_comparison *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    const mp_gpt_dims *d = &rep->dims;
    mp_plan *sp = calloc(1, sizeof *sp);
    if (!sp)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
    mp_config *c = &sp->config;
    mp_model *m = &c->model;
    snprintf(m->name, sizeof m->name, "%s", "exec-gpt");
    m->arch = MP_ARCH_GPT;
    m->layers = d->layers;
    m->hidden = d->hidden;
    m->heads = m->kv_heads = d->heads;
    m->head_dim = mp_dims_head_dim(d);
    m->ffn_hidden = d->ffn;
    m->vocab = d->vocab;
    m->seq = d->seq;
    m->activation = d->gelu_erf ? MP_ACT_GELU_ERF : MP_ACT_GELU;
    m->norm = MP_NORM_LAYERNORM;
    m->position = MP_POS_LEARNED;
    m->tied_embeddings = d->tied;
    if (d->t5) { /* the encoder-decoder it ran, split at the same split rank */
        snprintf(m->name, sizeof m->name, "%s", "exec-t5");
        m->arch = MP_ARCH_T5;
        m->encoder_layers = d->enc_layers;
        m->decoder_layers = d->layers - d->enc_layers;
        m->encoder_seq = d->seq;
        m->decoder_seq = d->dec_seq;
        m->activation = mp_dims_activation(d);
        m->norm = MP_NORM_RMSNORM;
        m->position = MP_POS_RELATIVE;
    }
    if (mp_dims_is_mla(d)) { /* the latent attention it ran, at the sizes it ran */
        m->mla.q_lora_rank = d->q_lora;
        m->mla.kv_lora_rank = d->kv_lora;
        m->mla.qk_rope_head_dim = d->rope_dim;
        m->mla.qk_nope_head_dim = d->nope_dim;
        m->mla.v_head_dim = d->v_dim;
        m->head_dim = d->nope_dim + d->rope_dim;
        m->arch = MP_ARCH_LLAMA; /* the cost model's MLA is a LLaMA-style block's */
        m->norm = MP_NORM_RMSNORM;
        m->activation = mp_dims_activation(d);
        m->position = MP_POS_ROPE;
    }
    if (!shrink)
        *m = plan->config.model; /* full size (--solo): the plan's own model, LLaMA and T5 parts too */
    /* exec runs without dropout (docs/exec.md "Dropout"): cost what ran */
    m->hidden_dropout = m->attention_dropout = 0;
    m->dropout_set = true;
    mp_status st = mp_model_finish(m, err);
    if (st)
        goto done;
    c->hw = *hw;
    const mp_parallel *pp = &plan->config.parallel;
    /* what ran: the backend's GEMM precision (CPU: fp32), the plan's recomputation,
     * nothing overlapped */
    bool bf16 = rep->compute_precision && !strcmp(rep->compute_precision, "bf16");
    c->training = (mp_training){.gpus = (int64_t)rep->tp * rep->cp * rep->dp * rep->pp,
                                .seq = d->seq,
                                .global_batch = (int64_t)rep->microbatches * d->micro_batch *
                                                rep->dp,
                                .precision = bf16 ? MP_DTYPE_BF16 : MP_DTYPE_FP32};
    c->parallel = *pp;
    if (shrink) { /* one block per stage: the layout's layers are not the run's */
        c->parallel.pipeline_layout[0] = '\0';
        c->parallel.first_stage_layers = c->parallel.last_stage_layers = 0;
        c->parallel.account_for_embedding = c->parallel.account_for_loss = false;
    }
    c->parallel.micro_batch = d->micro_batch;
    c->parallel.dp_overlap = false;
    c->parallel.tp_overlap = false;
    int64_t K = pp->pp * (pp->vpp > 1 ? pp->vpp : 1);
    if (!shrink && plan->n_stages == K) {
        sp->n_stages = plan->n_stages;
        memcpy(sp->stages, plan->stages, sizeof sp->stages[0] * (size_t)K);
    } else {
        mp_plan_default_stages(sp);
    }
    if (!shrink && plan->has_layer_recompute) {
        sp->has_layer_recompute = true;
        memcpy(sp->layer_recompute, plan->layer_recompute, sizeof sp->layer_recompute);
    }
    if ((st = mp_plan_check(sp, err)))
        goto done;
    mp_sim_options so = {.record_timeline = false, .async_p2p = true};
    mp_sim_result sr;
    memset(&sr, 0, sizeof sr);
    if ((st = mp_simulate(c, sp, &so, &sr, err))) {
        mp_sim_result_free(&sr);
        goto done;
    }
    const mp_times *x = &sr.exposed;
    out->simulated[MP_CMP_STEP] = sr.makespan;
    out->simulated[MP_CMP_COMPUTE] = x->compute + x->recompute;
    out->simulated[MP_CMP_TP] = x->tp_comm;
    out->simulated[MP_CMP_CP] = x->cp_comm;
    out->simulated[MP_CMP_PP] = x->pp_comm + x->bubble;
    out->simulated[MP_CMP_DP] = x->dp_comm;
    out->simulated[MP_CMP_OPTIMIZER] = x->optimizer;
    mp_sim_result_free(&sr);

    const double *ph = rep->phase_seconds;
    double fb = ph[MP_PHASE_F] + ph[MP_PHASE_B] - ph[MP_PHASE_TP] - ph[MP_PHASE_CP];
    out->measured[MP_CMP_STEP] = rep->step_seconds[rep->steps > 0 ? rep->steps - 1 : 0];
    out->measured[MP_CMP_COMPUTE] = fb > 0 ? fb : 0;
    out->measured[MP_CMP_TP] = ph[MP_PHASE_TP];
    out->measured[MP_CMP_CP] = ph[MP_PHASE_CP];
    out->measured[MP_CMP_PP] = ph[MP_PHASE_PP];
    out->measured[MP_CMP_DP] = ph[MP_PHASE_DP];
    out->measured[MP_CMP_OPTIMIZER] = ph[MP_PHASE_OPTIMIZER];
    /* model FLOPs per step over every GPU's peak time (--solo: the one rank's
     * step stands for each rank's, its collectives left out) */
    double flops = mp_model_flops(m, c->training.seq, c->training.global_batch);
    double peak = hw->peak_flops[c->training.precision] * (double)c->training.gpus;
    if (peak > 0 && out->measured[MP_CMP_STEP] > 0)
        out->mfu_measured = flops / (peak * out->measured[MP_CMP_STEP]);
    if (peak > 0 && out->simulated[MP_CMP_STEP] > 0)
        out->mfu_simulated = flops / (peak * out->simulated[MP_CMP_STEP]);
done:
    free(sp);
    return st;
}
